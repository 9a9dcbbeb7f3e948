/* uv: uv.lock, with the indexes of uv.toml or pyproject.toml [tool.uv]
 * (LOCKFILES.md §2 "uv").
 *
 * Each [[package]] has a source: `registry` (an index URL, or a local flat
 * directory), `git`, `url`, or a local `path`/`directory`/`editable`/
 * `virtual` (R5). Registry packages also record their files (`sdist`,
 * `wheels`) by URL, and those hosts are emitted with the index. A git or
 * URL package that is not a wheel is built, and its build backend is
 * looked up by name through the project's non-explicit indexes and the
 * default index: PyPI, unless an index says `default = true` (or the
 * deprecated `index-url` is set), which removes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockfile.h"
#include "pylock.h"

static bool recognises(const char *base)
{
    return !strcmp(base, "uv.lock");
}

typedef struct uvctx {
    sl_pylock lock;                /* uv.lock */
    bool build_index;
} uvctx;

/* A URL of the lockfile (errors at its line there). */
static bool add(uvctx *u, sl_pyadd_fn *fn, const char *url, int line, int *res)
{
    return sl_pylock_add(&u->lock, fn, url, NULL, line, res);
}

/* An index of the config file `cfgpath`. */
static bool add_index(uvctx *u, const char *url, const char *cfgpath, int line)
{
    return sl_pylock_add(&u->lock, sl_pyindex_add, url, cfgpath, line, NULL);
}

/* A URL-valued key of an inline table ({ url = "…" }), or NULL. */
static bool artifact(uvctx *u, const sl_toml *t)
{
    if (!t)
        return true;
    if (sl_toml_kind_of(t) != SL_TOML_TABLE) {
        sl_lockerr_set(u->lock.err, u->lock.path, sl_toml_line(t), "a file entry is not a table");
        return false;
    }
    const char *url = sl_pytoml_str(t, "url");
    return !url || add(u, sl_pyurl_add, url, sl_toml_line(t), NULL);
}

static bool package(uvctx *u, const sl_toml *pkg)
{
    int line = sl_toml_line(pkg);
    if (sl_toml_kind_of(pkg) != SL_TOML_TABLE) {
        sl_lockerr_set(u->lock.err, u->lock.path, line, "a [[package]] entry is not a table");
        return false;
    }
    const sl_toml *src = sl_toml_get(pkg, "source");
    if (!src || sl_toml_kind_of(src) != SL_TOML_TABLE) {
        sl_lockerr_set(u->lock.err, u->lock.path, line, "[[package]] without a source table");
        return false;
    }
    line = sl_toml_line(src);
    const char *v;
    int r;
    if ((v = sl_pytoml_str(src, "registry"))) {
        /* A URL, or a flat directory of wheels (local). */
        if (!add(u, sl_pyindex_add, v, line, NULL))
            return false;
    } else if ((v = sl_pytoml_str(src, "git"))) {
        if (!add(u, sl_pyvcs_add, v, line, &r))
            return false;
        if (r > 0)
            u->build_index = true;
    } else if ((v = sl_pytoml_str(src, "url"))) {
        if (!add(u, sl_pyurl_add, v, line, &r))
            return false;
        if (r > 0 && !sl_pyurl_is_wheel(v, strlen(v)))
            u->build_index = true;
    } else if (sl_toml_get(src, "path") || sl_toml_get(src, "directory") ||
               sl_toml_get(src, "editable") || sl_toml_get(src, "virtual")) {
        return true;               /* local (R5) */
    } else {
        sl_lockerr_set(u->lock.err, u->lock.path, line, "unknown package source");
        return false;
    }
    if (!artifact(u, sl_toml_get(pkg, "sdist")))
        return false;
    const sl_toml *wheels = sl_toml_get(pkg, "wheels");
    if (wheels && sl_toml_kind_of(wheels) != SL_TOML_ARRAY) {
        sl_lockerr_set(u->lock.err, u->lock.path, sl_toml_line(wheels),
                       "\"wheels\" is not an array");
        return false;
    }
    for (size_t i = 0; i < sl_toml_count(wheels); i++)
        if (!artifact(u, sl_toml_at(wheels, i)))
            return false;
    return true;
}

/* The indexes a name is looked up in, for a build backend: uv's
 * non-explicit indexes in order, flat find-links pages, then the default
 * index. `cfg` is the [tool.uv] table (or uv.toml's root); NULL: none. */
static bool build_indexes(uvctx *u, const sl_toml *cfg, const char *cfgpath)
{
    bool b;
    if (sl_toml_bool(sl_toml_get(cfg, "no-index"), &b) && b)
        return true;               /* only find-links, below */
    const char *deflt = NULL;
    int defline = 0;
    const sl_toml *idx = sl_toml_get(cfg, "index");
    for (size_t i = 0; i < sl_toml_count(idx); i++) {
        const sl_toml *x = sl_toml_at(idx, i);
        const char *url = sl_pytoml_str(x, "url");
        if (!url) {
            sl_lockerr_set(u->lock.err, cfgpath, sl_toml_line(x), "an index without a url");
            return false;
        }
        if (sl_toml_bool(sl_toml_get(x, "explicit"), &b) && b)
            continue;
        if (sl_toml_bool(sl_toml_get(x, "default"), &b) && b) {
            if (!deflt)
                deflt = url, defline = sl_toml_line(x);
            continue;
        }
        if (!add_index(u, url, cfgpath, sl_toml_line(x)))
            return false;
    }
    const sl_toml *extra = sl_toml_get(cfg, "extra-index-url");
    for (size_t i = 0; i < sl_toml_count(extra); i++) {
        const char *url = sl_toml_str(sl_toml_at(extra, i), NULL);
        if (url && !add_index(u, url, cfgpath, sl_toml_line(extra)))
            return false;
    }
    const char *legacy = sl_pytoml_str(cfg, "index-url");
    if (!deflt && legacy)
        deflt = legacy, defline = sl_toml_line(sl_toml_get(cfg, "index-url"));
    if (deflt)
        return add_index(u, deflt, cfgpath, defline);
    return add(u, sl_pyindex_add, SL_PYPI_SIMPLE, 0, NULL);
}

static bool find_links(uvctx *u, const sl_toml *cfg, const char *cfgpath)
{
    const sl_toml *fl = sl_toml_get(cfg, "find-links");
    for (size_t i = 0; i < sl_toml_count(fl); i++) {
        const char *url = sl_toml_str(sl_toml_at(fl, i), NULL);
        if (url && !add_index(u, url, cfgpath, sl_toml_line(fl)))
            return false;
    }
    return true;
}

static bool read_uv(const char *path, const char *data, size_t len, sl_project *proj,
                    sl_derived *out, sl_lockerr *err)
{
    uvctx u = { .build_index = false };
    sl_toml *conf = NULL;
    bool ok = false;
    if (!sl_pylock_open(&u.lock, path, data, len, NULL, out, err))
        goto out;
    long long version;
    if (!sl_toml_int(sl_toml_get(u.lock.doc, "version"), &version)) {
        sl_lockerr_set(err, path, 0, "not a uv.lock (no integer \"version\")");
        goto out;
    }

    /* uv.toml in the project wins over [tool.uv] in pyproject.toml. Read
     * (and checked) even when no package needs it, as uv would. */
    const char *cpath = NULL;
    const sl_toml *cfg = NULL, *idx;
    err->msg[0] = '\0';
    conf = sl_pytoml_project(proj, "uv.toml", &cpath, err);
    if (conf) {
        cfg = conf;
    } else if (!err->msg[0]) {
        conf = sl_pytoml_project(proj, "pyproject.toml", &cpath, err);
        cfg = sl_pytoml_path(conf, "tool.uv");
    }
    if (err->msg[0] || !sl_pytoml_tables(cfg, "index", cpath, &idx, err))
        goto out;

    for (size_t i = 0; i < sl_toml_count(u.lock.packages); i++)
        if (!package(&u, sl_toml_at(u.lock.packages, i)))
            goto out;
    if (u.build_index && (!build_indexes(&u, cfg, cpath) || !find_links(&u, cfg, cpath)))
        goto out;
    ok = true;
out:
    sl_toml_free(conf);
    sl_pylock_close(&u.lock);
    return ok;
}

const sl_lockreader sl_reader_uv = {
    .name = "uv",
    .recognises = recognises,
    .read = read_uv,
};
