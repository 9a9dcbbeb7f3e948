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
 * build backend is looked up in every source. `path` packages are local.
 *
 * With --pins (PINS.md "PDM"): static URLs pinned to their hashes and no
 * page; without them, what PDM reads to find a file (unearth's page of the
 * project on each source, a find_links source's page) and each file by its
 * name on the source's file host, pinned to its hash; url packages pinned
 * to their files' hashes; VCS packages and build backends fall back to
 * host entries that say why. */
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
    bool find_links;               /* type = "find_links": a page of links, read as it is */
} source;

typedef struct pdm {
    sl_pylock lock;                /* pdm.lock, and pyproject.toml */
    source *src;
    size_t nsrc;
    bool pins;
    bool build;                    /* some package is built */
    bool *sel;                     /* the sources of the package being read */
} pdm;

#define WHY_BUILD "not pinned: the build dependencies of VCS and URL packages are not in pdm.lock"

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

/* The sources PDM searches for `name` into sel (get_filtered_sources). */
static void select_sources(const pdm *p, const char *name, bool *sel)
{
    char key[256];
    normalise(name, key, sizeof key);
    bool included = false;
    for (size_t i = 0; i < p->nsrc; i++)
        included = included || preference(&p->src[i], key) == 1;
    for (size_t i = 0; i < p->nsrc; i++) {
        int pref = preference(&p->src[i], key);
        sel[i] = included ? pref == 1 : pref == -1;
    }
}

static void use_sources_for(pdm *p, const char *name)
{
    select_sources(p, name, p->sel);
    for (size_t i = 0; i < p->nsrc; i++)
        p->src[i].used = p->src[i].used || p->sel[i];
}

/* The digest of a files entry, as SRI; false if it has none strong. */
static bool file_digest(const sl_toml *f, char *sri)
{
    const char *h = sl_pytoml_str(f, "hash");
    return h && sl_pyhash_sri(h, strlen(h), sri);
}

#define WHY_WEAK "not pinned: its hash in pdm.lock is not sha256, sha384 or sha512"

/* --pins: a named package from its sources: each source's page of it and
 * each file by name on that source's file host. */
static bool pin_from_sources(pdm *p, const sl_toml *pkg, const sl_toml *files)
{
    sl_pylock *l = &p->lock;
    const char *name = sl_pytoml_str(pkg, "name");
    select_sources(p, name, p->sel);
    for (size_t i = 0; i < p->nsrc; i++) {
        if (!p->sel[i])
            continue;
        const source *s = &p->src[i];
        const char *config = s->def ? l->pyproject_path : NULL;
        int line = s->def ? sl_toml_line(s->def) : sl_toml_line(pkg);
        sl_pyprov prov = sl_pylock_prov(l, config);
        char msg[512];
        int r = s->find_links
            ? sl_pypage_rule(l->out, s->url, strlen(s->url), &prov, "find-links page", msg, sizeof msg)
            : sl_pyindex_page_rule(l->out, s->url, strlen(s->url), name, &prov, msg, sizeof msg);
        for (size_t k = 0; k < sl_toml_count(files) && r >= 0; k++) {
            const sl_toml *f = sl_toml_at(files, k);
            const char *file = sl_pytoml_str(f, "file");
            if (!file)
                continue;
            char sri[SL_SRI_MAX];
            const char *dig[] = { sri };
            bool strong = file_digest(f, sri);
            r = sl_pyindex_file_rule(l->out, s->url, strlen(s->url), file, dig, strong ? 1 : 0, &prov,
                                     strong ? NULL : WHY_WEAK, msg, sizeof msg);
        }
        if (!sl_pylock_result(l, r, msg, config, line))
            return false;
    }
    return true;
}

/* --pins: a URL pinned to the hashes of `files` (a url package: its one
 * archive; a static URL: that file's own). */
static bool pin_url(pdm *p, const char *url, const sl_toml *files, const sl_toml *one, int line, int *res)
{
    char dig[16][SL_SRI_MAX];
    const char *dp[16];
    size_t nd = 0;
    if (one && file_digest(one, dig[0]))
        nd = 1;
    for (size_t k = 0; !one && k < sl_toml_count(files) && nd < 16; k++)
        if (file_digest(sl_toml_at(files, k), dig[nd]))
            nd++;
    for (size_t k = 0; k < nd; k++)
        dp[k] = dig[k];
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&p->lock, NULL);
    int r = sl_pyurl_pin(p->lock.out, url, strlen(url), dp, nd, &prov,
                         one && sl_pytoml_str(one, "hash") ? WHY_WEAK : "not pinned: pdm.lock has no hash for it",
                         msg, sizeof msg);
    if (res)
        *res = r;
    return sl_pylock_result(&p->lock, r, msg, NULL, line);
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
    const sl_toml *files = sl_toml_get(pkg, "files");
    if (files && sl_toml_kind_of(files) != SL_TOML_ARRAY) {
        sl_lockerr_set(l->err, l->path, sl_toml_line(files), "\"files\" is not an array");
        return false;
    }
    static const char *const vcs[] = { "git", "hg", "svn", "bzr" };
    const char *v;
    int r = 0;
    bool build = false, named = false;
    for (size_t i = 0; i < sizeof vcs / sizeof *vcs; i++)
        if ((v = sl_pytoml_str(pkg, vcs[i]))) {
            char msg[512];
            sl_pyprov prov = sl_pylock_prov(l, NULL);
            if (p->pins) {
                r = sl_pyvcs_unpinned(l->out, v, strlen(v), &prov,
                                      "not pinned: a VCS checkout has no digest to check", msg, sizeof msg);
                if (!sl_pylock_result(l, r, msg, NULL, line))
                    return false;
            } else if (!sl_pylock_add(l, sl_pyvcs_add, v, NULL, line, &r)) {
                return false;
            }
            build = r > 0;
            goto files;
        }
    if ((v = sl_pytoml_str(pkg, "url"))) {
        if (p->pins ? !pin_url(p, v, files, NULL, line, &r) : !sl_pylock_add(l, sl_pyurl_add, v, NULL, line, &r))
            return false;
        build = r > 0 && !sl_pyurl_is_wheel(v, strlen(v));
        goto files;
    } else if (!sl_toml_get(pkg, "path")) {
        named = true;
        use_sources_for(p, name);
    }
files:
    if (build)
        for (size_t i = 0; i < p->nsrc; i++)
            p->src[i].used = true;
    p->build = p->build || build;
    /* static_urls: { url = "…", hash = "…" } */
    bool static_urls = false;
    for (size_t i = 0; i < sl_toml_count(files); i++) {
        const sl_toml *f = sl_toml_at(files, i);
        const char *url = sl_pytoml_str(f, "url");
        if (!url)
            continue;
        static_urls = true;
        if (p->pins ? !pin_url(p, url, NULL, f, sl_toml_line(f), NULL)
                    : !sl_pylock_add(l, sl_pyurl_add, url, NULL, sl_toml_line(f), NULL))
            return false;
    }
    /* Without static URLs PDM finds the files on its sources. */
    if (p->pins && named && !static_urls)
        return pin_from_sources(p, pkg, files);
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
        const char *type = sl_pytoml_str(d, "type");
        p->src[p->nsrc++] = (source){ .url = url, .def = d,
                                      .find_links = type && !strcmp(type, "find_links") };
    }
    p->sel = calloc(p->nsrc + 1, sizeof *p->sel);
    if (!p->sel)
        abort();
    return true;
}

static bool read_pdm(const char *path, const char *data, size_t len, sl_project *proj,
                     sl_derived *out, sl_lockerr *err)
{
    pdm p = { .pins = sl_derived_pins(out) };
    const sl_toml *defs = NULL;
    bool ok = sl_pylock_open(&p.lock, path, data, len, "metadata", out, err) &&
              sl_pylock_sources(&p.lock, proj, "tool.pdm.source", &defs) && load_sources(&p, defs);
    for (size_t i = 0; ok && i < sl_toml_count(p.lock.packages); i++)
        ok = package(&p, sl_toml_at(p.lock.packages, i));
    for (size_t i = 0; ok && i < p.nsrc && !p.pins; i++) {
        const source *s = &p.src[i];
        const char *config = s->def ? p.lock.pyproject_path : NULL;
        if (s->used)
            ok = sl_pylock_add(&p.lock, sl_pyindex_add, s->url, config, sl_toml_line(s->def), NULL);
    }
    /* --pins: the packages added their rules; what is built needs its
     * build backends from every source. */
    for (size_t i = 0; ok && i < p.nsrc && p.pins && p.build; i++) {
        const source *s = &p.src[i];
        const char *config = s->def ? p.lock.pyproject_path : NULL;
        char msg[512];
        sl_pyprov prov = sl_pylock_prov(&p.lock, config);
        int r = sl_pyindex_unpinned(out, s->url, strlen(s->url), &prov, WHY_BUILD, msg, sizeof msg);
        ok = sl_pylock_result(&p.lock, r, msg, config, sl_toml_line(s->def));
    }
    free(p.sel);
    free(p.src);
    sl_pylock_close(&p.lock);
    return ok;
}

const sl_lockreader sl_reader_pdm = {
    .name = "pdm",
    .recognises = recognises,
    .read = read_pdm,
};
