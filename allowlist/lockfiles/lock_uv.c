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
 * deprecated `index-url` is set), which removes it.
 *
 * With --pins (PINS.md "uv"): every sdist and wheel URL pinned to its
 * hash, and no index page, which a locked install does not read; git
 * sources and the build backends of what is built fall back to host
 * entries that say why. */
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
    bool pins;
} uvctx;

#define WHY_BUILD "not pinned: the build dependencies of git and URL sources are not in uv.lock"

/* A URL of the lockfile (errors at its line there). */
static bool add(uvctx *u, sl_pyadd_fn *fn, const char *url, int line, int *res)
{
    return sl_pylock_add(&u->lock, fn, url, NULL, line, res);
}

/* An index of the config file `cfgpath` (NULL: uv's default), for build
 * backends: with --pins a host entry that says why it is not pinned. */
static bool add_index(uvctx *u, const char *url, const char *cfgpath, int line)
{
    if (!u->pins)
        return sl_pylock_add(&u->lock, sl_pyindex_add, url, cfgpath, line, NULL);
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&u->lock, cfgpath);
    int r = sl_pyindex_unpinned(u->lock.out, url, strlen(url), &prov, WHY_BUILD, msg, sizeof msg);
    return sl_pylock_result(&u->lock, r, msg, cfgpath, line);
}

/* An sdist or wheel entry ({ url = "…", hash = "sha256:…" }): its URL,
 * or with --pins the URL pinned to the hash. A `url` source's sdist has
 * only a hash: its URL is the source's, `src_url`; *pinned becomes what
 * pinning that URL returned (1 added, 0 local). */
static bool artifact(uvctx *u, const sl_toml *t, const char *src_url, int *pinned)
{
    if (!t)
        return true;
    if (sl_toml_kind_of(t) != SL_TOML_TABLE) {
        sl_lockerr_set(u->lock.err, u->lock.path, sl_toml_line(t), "a file entry is not a table");
        return false;
    }
    const char *url = sl_pytoml_str(t, "url");
    if (!u->pins)
        return !url || add(u, sl_pyurl_add, url, sl_toml_line(t), NULL);
    if (!url && !sl_toml_get(t, "path") && !sl_toml_get(t, "filename"))
        url = src_url;
    if (!url)
        return true;               /* a file of a local registry (R5) */
    const char *hash = sl_pytoml_str(t, "hash");
    char sri[SL_SRI_MAX];
    const char *dig[] = { sri };
    bool strong = hash && sl_pyhash_sri(hash, strlen(hash), sri);
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&u->lock, NULL);
    int r = sl_pyurl_pin(u->lock.out, url, strlen(url), dig, strong ? 1 : 0, &prov,
                         hash ? "not pinned: its hash in uv.lock is not sha256, sha384 or sha512"
                              : "not pinned: uv.lock has no hash for it",
                         msg, sizeof msg);
    if (url == src_url || (src_url && !strcmp(url, src_url)))
        *pinned = r > *pinned ? r : *pinned;
    return sl_pylock_result(&u->lock, r, msg, NULL, sl_toml_line(t));
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
    const char *src_url = NULL;
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&u->lock, NULL);
    if ((v = sl_pytoml_str(src, "registry"))) {
        /* A URL, or a flat directory of wheels (local). A locked install
         * takes its files by their URLs and reads none of its pages. */
        if (!u->pins && !add(u, sl_pyindex_add, v, line, NULL))
            return false;
    } else if ((v = sl_pytoml_str(src, "git"))) {
        if (u->pins) {
            r = sl_pyvcs_unpinned(u->lock.out, v, strlen(v), &prov,
                                  "not pinned: a git checkout has no digest to check", msg, sizeof msg);
            if (!sl_pylock_result(&u->lock, r, msg, NULL, line))
                return false;
        } else if (!add(u, sl_pyvcs_add, v, line, &r)) {
            return false;
        }
        if (r > 0)
            u->build_index = true;
    } else if ((v = sl_pytoml_str(src, "url"))) {
        /* With --pins, its sdist or wheel entry carries the hash. */
        if (u->pins)
            src_url = v;
        else if (!add(u, sl_pyurl_add, v, line, &r))
            return false;
        else if (r > 0 && !sl_pyurl_is_wheel(v, strlen(v)))
            u->build_index = true;
    } else if (sl_toml_get(src, "path") || sl_toml_get(src, "directory") ||
               sl_toml_get(src, "editable") || sl_toml_get(src, "virtual")) {
        return true;               /* local (R5) */
    } else {
        sl_lockerr_set(u->lock.err, u->lock.path, line, "unknown package source");
        return false;
    }
    int pinned = 0;                /* --pins: what the src_url's pins returned */
    if (!artifact(u, sl_toml_get(pkg, "sdist"), src_url, &pinned))
        return false;
    const sl_toml *wheels = sl_toml_get(pkg, "wheels");
    if (wheels && sl_toml_kind_of(wheels) != SL_TOML_ARRAY) {
        sl_lockerr_set(u->lock.err, u->lock.path, sl_toml_line(wheels),
                       "\"wheels\" is not an array");
        return false;
    }
    for (size_t i = 0; i < sl_toml_count(wheels); i++)
        if (!artifact(u, sl_toml_at(wheels, i), src_url, &pinned))
            return false;
    if (src_url && !pinned) {
        /* a url source with neither sdist nor wheel entry: no hash */
        pinned = sl_pyurl_pin(u->lock.out, src_url, strlen(src_url), NULL, 0, &prov,
                              "not pinned: uv.lock has no hash for it", msg, sizeof msg);
        if (!sl_pylock_result(&u->lock, pinned, msg, NULL, line))
            return false;
    }
    if (src_url && pinned > 0 && !sl_pyurl_is_wheel(src_url, strlen(src_url)))
        u->build_index = true;
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
    return add_index(u, SL_PYPI_SIMPLE, NULL, 0);
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
    uvctx u = { .pins = sl_derived_pins(out) };
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
