/* PDM: pdm.lock and the [[tool.pdm.source]] blocks of pyproject.toml
 * (LOCKFILES.md §2 "PDM").
 *
 * The sources are PyPI followed by the project's sources, except that a
 * source named "pypi" takes PyPI's place. A named package is looked up in
 * every source (PDM does not stop at the first), narrowed by the sources'
 * include_packages / exclude_packages patterns exactly as PDM's
 * get_filtered_sources does. `files` entries carry URLs only under the
 * `static_urls` strategy; those hosts are emitted too. `git`/`hg`/`svn`/
 * `bzr` packages are cloned and `url` packages downloaded; when built, the
 * build backend is looked up in every source. `path` packages are local. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockfile.h"
#include "pylock.h"

static bool recognises(const char *base)
{
    return !strcmp(base, "pdm.lock");
}

typedef struct source {
    const char *url;
    const sl_toml *def;            /* the [[tool.pdm.source]] table; NULL for implicit PyPI */
    bool used;
} source;

typedef struct pdm {
    sl_pylock lock;                /* pdm.lock, and pyproject.toml */
    source *src;
    size_t nsrc;
} pdm;

/* PEP 503 normalisation, as PDM's req.key: lower case, runs of "-_." as
 * one '-'. */
static void normalise(const char *name, char *out, size_t cap)
{
    size_t k = 0;
    bool sep = false;
    for (const char *p = name; *p && k + 2 < cap; p++) {
        if (*p == '-' || *p == '_' || *p == '.') {
            sep = true;
            continue;
        }
        if (sep && k)
            out[k++] = '-';
        sep = false;
        out[k++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
    }
    out[k] = '\0';
}

static bool matches_any(const sl_toml *patterns, const char *key)
{
    for (size_t i = 0; i < sl_toml_count(patterns); i++) {
        const char *pat = sl_toml_str(sl_toml_at(patterns, i), NULL);
        if (pat && fnmatch(pat, key, 0) == 0)
            return true;
    }
    return false;
}

/* 1: the source includes the package, 0: excludes it, -1: neither. */
static int preference(const source *s, const char *key)
{
    if (!s->def)
        return -1;
    if (matches_any(sl_toml_get(s->def, "include_packages"), key))
        return 1;
    if (matches_any(sl_toml_get(s->def, "exclude_packages"), key))
        return 0;
    return -1;
}

static void use_sources_for(pdm *p, const char *name)
{
    char key[256];
    normalise(name, key, sizeof key);
    bool included = false;
    for (size_t i = 0; i < p->nsrc; i++)
        included = included || preference(&p->src[i], key) == 1;
    for (size_t i = 0; i < p->nsrc; i++) {
        int pref = preference(&p->src[i], key);
        if (included ? pref == 1 : pref == -1)
            p->src[i].used = true;
    }
}

static bool package(pdm *p, const sl_toml *pkg)
{
    sl_pylock *l = &p->lock;
    int line = sl_toml_line(pkg);
    if (sl_toml_kind_of(pkg) != SL_TOML_TABLE) {
        sl_lockerr_set(l->err, l->path, line, "a [[package]] entry is not a table");
        return false;
    }
    const char *name = sl_pytoml_str(pkg, "name");
    if (!name) {
        sl_lockerr_set(l->err, l->path, line, "[[package]] without a name");
        return false;
    }
    static const char *const vcs[] = { "git", "hg", "svn", "bzr" };
    const char *v;
    int r = 0;
    bool build = false;
    for (size_t i = 0; i < sizeof vcs / sizeof *vcs; i++)
        if ((v = sl_pytoml_str(pkg, vcs[i]))) {
            if (!sl_pylock_add(l, sl_pyvcs_add, v, NULL, line, &r))
                return false;
            build = r > 0;
            goto files;
        }
    if ((v = sl_pytoml_str(pkg, "url"))) {
        if (!sl_pylock_add(l, sl_pyurl_add, v, NULL, line, &r))
            return false;
        build = r > 0 && !sl_pyurl_is_wheel(v, strlen(v));
    } else if (!sl_toml_get(pkg, "path")) {
        use_sources_for(p, name);
    }
files:
    if (build)
        for (size_t i = 0; i < p->nsrc; i++)
            p->src[i].used = true;
    /* static_urls: { url = "…", hash = "…" } */
    const sl_toml *files = sl_toml_get(pkg, "files");
    if (files && sl_toml_kind_of(files) != SL_TOML_ARRAY) {
        sl_lockerr_set(l->err, l->path, sl_toml_line(files), "\"files\" is not an array");
        return false;
    }
    for (size_t i = 0; i < sl_toml_count(files); i++) {
        const sl_toml *f = sl_toml_at(files, i);
        const char *url = sl_pytoml_str(f, "url");
        if (url && !sl_pylock_add(l, sl_pyurl_add, url, NULL, sl_toml_line(f), NULL))
            return false;
    }
    return true;
}

/* PyPI first unless a source named "pypi" replaces it, then the project's
 * sources in order. */
static bool load_sources(pdm *p, const sl_toml *defs)
{
    size_t n = sl_toml_count(defs);
    p->src = calloc(n + 1, sizeof *p->src);
    if (!p->src)
        abort();
    bool replaced = false;
    for (size_t i = 0; i < n; i++) {
        const char *name = sl_pytoml_str(sl_toml_at(defs, i), "name");
        replaced = replaced || (name && !strcmp(name, "pypi"));
    }
    if (!replaced)
        p->src[p->nsrc++] = (source){ .url = SL_PYPI_SIMPLE };
    for (size_t i = 0; i < n; i++) {
        const sl_toml *d = sl_toml_at(defs, i);
        const char *url = sl_pytoml_str(d, "url");
        if (sl_toml_kind_of(d) != SL_TOML_TABLE || !url) {
            sl_lockerr_set(p->lock.err, p->lock.pyproject_path, sl_toml_line(d),
                           "a [[tool.pdm.source]] without a url");
            return false;
        }
        p->src[p->nsrc++] = (source){ .url = url, .def = d };
    }
    return true;
}

static bool read_pdm(const char *path, const char *data, size_t len, sl_project *proj,
                     sl_derived *out, sl_lockerr *err)
{
    pdm p = { .nsrc = 0 };
    const sl_toml *defs = NULL;
    bool ok = sl_pylock_open(&p.lock, path, data, len, "metadata", out, err) &&
              sl_pylock_sources(&p.lock, proj, "tool.pdm.source", &defs) && load_sources(&p, defs);
    for (size_t i = 0; ok && i < sl_toml_count(p.lock.packages); i++)
        ok = package(&p, sl_toml_at(p.lock.packages, i));
    for (size_t i = 0; ok && i < p.nsrc; i++) {
        const source *s = &p.src[i];
        const char *config = s->def ? p.lock.pyproject_path : NULL;
        if (s->used)
            ok = sl_pylock_add(&p.lock, sl_pyindex_add, s->url, config, sl_toml_line(s->def), NULL);
    }
    free(p.src);
    sl_pylock_close(&p.lock);
    return ok;
}

const sl_lockreader sl_reader_pdm = {
    .name = "pdm",
    .recognises = recognises,
    .read = read_pdm,
};
