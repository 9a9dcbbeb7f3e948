/* Poetry: poetry.lock and the [[tool.poetry.source]] blocks of
 * pyproject.toml (LOCKFILES.md §2 "Poetry").
 *
 * A [[package]] without [package.source] comes from PyPI (its JSON API on
 * pypi.org, its files on files.pythonhosted.org; "files" carries names, no
 * URLs). [package.source] says otherwise: "legacy" is an index, looked up
 * by its `reference` among the project's sources (the URL there is the one
 * Poetry uses; the lock's copy is the fallback), with files assumed on the
 * same host (R9); "git" is cloned; "url" is downloaded; "file" and
 * "directory" are local (R5). A git or URL package that is not a wheel is
 * built, and its build backend is found through the project's primary
 * sources, or PyPI when it has none.
 *
 * With --pins (PINS.md "Poetry"): what `poetry install` reads to find a
 * locked file's URL (PyPI's JSON API for the version, a legacy source's
 * page for the project) and each file of "files" by its name on the
 * index's file host, pinned to its hash; a url package pinned to its
 * files' hashes; git packages and build backends fall back to host
 * entries that say why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lockfile.h"
#include "pylock.h"
#include "text.h"

static bool recognises(const char *base)
{
    return !strcmp(base, "poetry.lock");
}

typedef struct poetry {
    sl_pylock lock;                /* poetry.lock, and pyproject.toml */
    const sl_toml *sources;        /* [[tool.poetry.source]], or NULL */
    bool build_index;              /* some package is built */
    bool pins;
    const sl_toml *pkg;            /* --pins: the [[package]] being read */
} poetry;

#define WHY_BUILD "not pinned: the build dependencies of git and URL packages are not in poetry.lock"

/* --pins: the digests of a package's "files" (sha256/384/512 only) into
 * dig, at most max; *weak says whether some file had only another. */
static size_t files_digests(const sl_toml *files, char (*dig)[SL_SRI_MAX], size_t max, bool *weak)
{
    size_t n = 0;
    *weak = false;
    for (size_t i = 0; i < sl_toml_count(files); i++) {
        const char *h = sl_pytoml_str(sl_toml_at(files, i), "hash");
        if (h && n < max && sl_pyhash_sri(h, strlen(h), dig[n]))
            n++;
        else
            *weak = true;
    }
    return n;
}

/* --pins: each file of the package by its name on the file host of
 * `index`, pinned to its hash. */
static bool file_rules(poetry *p, const char *index, const char *config, int line)
{
    const sl_toml *files = sl_toml_get(p->pkg, "files");
    if (files && sl_toml_kind_of(files) != SL_TOML_ARRAY) {
        sl_lockerr_set(p->lock.err, p->lock.path, sl_toml_line(files), "\"files\" is not an array");
        return false;
    }
    for (size_t i = 0; i < sl_toml_count(files); i++) {
        const sl_toml *f = sl_toml_at(files, i);
        const char *name = sl_pytoml_str(f, "file"), *hash = sl_pytoml_str(f, "hash");
        if (!name) {
            sl_lockerr_set(p->lock.err, p->lock.path, sl_toml_line(f), "a file entry without \"file\"");
            return false;
        }
        char sri[SL_SRI_MAX], msg[512];
        const char *dig[] = { sri };
        bool strong = hash && sl_pyhash_sri(hash, strlen(hash), sri);
        sl_pyprov prov = sl_pylock_prov(&p->lock, config);
        int r = sl_pyindex_file_rule(p->lock.out, index, strlen(index), name, dig, strong ? 1 : 0, &prov,
                                     strong ? NULL : "not pinned: its hash in poetry.lock is not sha256, "
                                                     "sha384 or sha512", msg, sizeof msg);
        if (!sl_pylock_result(&p->lock, r, msg, config, line))
            return false;
    }
    return true;
}

/* An index, named by `config` (NULL: the lockfile). With --pins: what
 * Poetry reads there for the package being read, and its files; for a
 * build backend (no package), a host entry that says why not. */
static bool add_index(poetry *p, const char *url, const char *config, int line)
{
    if (!p->pins)
        return sl_pylock_add(&p->lock, sl_pyindex_add, url, config, line, NULL);
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&p->lock, config);
    int r;
    if (!p->pkg) {
        r = sl_pyindex_unpinned(p->lock.out, url, strlen(url), &prov, WHY_BUILD, msg, sizeof msg);
        return sl_pylock_result(&p->lock, r, msg, config, line);
    }
    const char *name = sl_pytoml_str(p->pkg, "name"), *version = sl_pytoml_str(p->pkg, "version");
    if (!name || !version || !sl_pyversion_exact(version, strlen(version))) {
        sl_lockerr_set(p->lock.err, p->lock.path, sl_toml_line(p->pkg),
                       "[[package]] without a name and a version");
        return false;
    }
    if (!strcmp(url, SL_PYPI_SIMPLE)) {
        /* PyPiRepository.find_links_for_package: the JSON API of the
         * version lists its files' URLs. */
        char norm[256], api[400];
        if (!sl_pyname_normalise(name, strlen(name), norm, sizeof norm)) {
            sl_lockerr_set(p->lock.err, p->lock.path, sl_toml_line(p->pkg), "[[package]] name is not a "
                           "project name");
            return false;
        }
        int n = snprintf(api, sizeof api, "https://pypi.org/pypi/%s/%s/json", norm, version);
        r = n > 0 && (size_t)n < sizeof api
                ? sl_pypage_rule(p->lock.out, api, (size_t)n, &prov, "JSON API: the URLs of the files",
                                 msg, sizeof msg)
                : (snprintf(msg, sizeof msg, "name and version too long"), -1);
    } else {
        /* LegacyRepository.find_links_for_package: the project's page. */
        r = sl_pyindex_page_rule(p->lock.out, url, strlen(url), name, &prov, msg, sizeof msg);
    }
    return sl_pylock_result(&p->lock, r, msg, config, line) && file_rules(p, url, config, line);
}

/* The project's source named `name` (Poetry compares names without case). */
static const sl_toml *project_source(const poetry *p, const char *name)
{
    for (size_t i = 0; i < sl_toml_count(p->sources); i++) {
        const sl_toml *s = sl_toml_at(p->sources, i);
        const char *n = sl_pytoml_str(s, "name");
        if (n && !strcasecmp(n, name))
            return s;
    }
    return NULL;
}

/* Equal but for trailing slashes. */
static bool same_url(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    while (la && a[la - 1] == '/')
        la--;
    while (lb && b[lb - 1] == '/')
        lb--;
    return la == lb && !memcmp(a, b, la);
}

/* "legacy": the index of `reference`, as the project configures it. */
static bool legacy_source(poetry *p, const sl_toml *src, const char *url)
{
    const char *ref = sl_pytoml_str(src, "reference");
    const sl_toml *ps = ref ? project_source(p, ref) : NULL;
    const char *purl = ps ? sl_pytoml_str(ps, "url") : NULL;
    if (purl && !same_url(purl, url))
        return add_index(p, purl, p->lock.pyproject_path, sl_toml_line(ps));
    return add_index(p, url, NULL, sl_toml_line(src));
}

static bool package(poetry *p, const sl_toml *pkg)
{
    const char *path = p->lock.path;
    sl_lockerr *err = p->lock.err;
    if (sl_toml_kind_of(pkg) != SL_TOML_TABLE) {
        sl_lockerr_set(err, path, sl_toml_line(pkg), "a [[package]] entry is not a table");
        return false;
    }
    const sl_toml *src = sl_toml_get(pkg, "source");
    p->pkg = pkg;
    if (!src) {                    /* PyPI */
        return add_index(p, SL_PYPI_SIMPLE, NULL, sl_toml_line(pkg));
    }
    int line = sl_toml_line(src);
    if (sl_toml_kind_of(src) != SL_TOML_TABLE) {
        sl_lockerr_set(err, path, line, "[package.source] is not a table");
        return false;
    }
    const char *type = sl_pytoml_str(src, "type");
    const char *url = sl_pytoml_str(src, "url");
    if (!type) {
        sl_lockerr_set(err, path, line, "[package.source] has no type");
        return false;
    }
    if (!strcmp(type, "file") || !strcmp(type, "directory"))
        return true;               /* local (R5) */
    if (!url) {
        char t[48];
        sl_lockerr_set(err, path, line, "[package.source] of type '%s' has no url",
                       sl_display_untrusted(type, strlen(type), t, sizeof t, SL_DISPLAY_QMARK));
        return false;
    }
    int r;
    if (!strcmp(type, "legacy"))
        return legacy_source(p, src, url);
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(&p->lock, NULL);
    if (!strcmp(type, "git")) {
        if (p->pins) {
            r = sl_pyvcs_unpinned(p->lock.out, url, strlen(url), &prov,
                                  "not pinned: a git checkout has no digest to check", msg, sizeof msg);
            if (!sl_pylock_result(&p->lock, r, msg, NULL, line))
                return false;
        } else if (!sl_pylock_add(&p->lock, sl_pyvcs_add, url, NULL, line, &r)) {
            return false;
        }
        p->build_index = p->build_index || r > 0;
        return true;
    }
    if (!strcmp(type, "url")) {
        if (p->pins) {
            /* "files" holds the archive's own name and hash. */
            char dig[16][SL_SRI_MAX];
            const char *dp[16];
            bool weak;
            size_t nd = files_digests(sl_toml_get(pkg, "files"), dig, 16, &weak);
            for (size_t i = 0; i < nd; i++)
                dp[i] = dig[i];
            r = sl_pyurl_pin(p->lock.out, url, strlen(url), dp, nd, &prov,
                             "not pinned: poetry.lock has no sha256, sha384 or sha512 hash for it", msg,
                             sizeof msg);
            if (!sl_pylock_result(&p->lock, r, msg, NULL, line))
                return false;
        } else if (!sl_pylock_add(&p->lock, sl_pyurl_add, url, NULL, line, &r)) {
            return false;
        }
        p->build_index = p->build_index || (r > 0 && !sl_pyurl_is_wheel(url, strlen(url)));
        return true;
    }
    char t[48];
    sl_lockerr_set(err, path, line, "unknown [package.source] type '%s'",
                   sl_display_untrusted(type, strlen(type), t, sizeof t, SL_DISPLAY_QMARK));
    return false;
}

/* Where a build backend comes from: the project's default/primary sources
 * (a source without priority is primary), else PyPI. PyPI is implicit
 * unless a primary or default source replaces it; a source named "pypi"
 * without a URL is PyPI itself. */
static bool build_indexes(poetry *p)
{
    bool any = false;
    for (size_t i = 0; i < sl_toml_count(p->sources); i++) {
        const sl_toml *s = sl_toml_at(p->sources, i);
        const char *prio = sl_pytoml_str(s, "priority");
        bool flag;
        bool primary = prio ? (!strcmp(prio, "primary") || !strcmp(prio, "default"))
                            : !(sl_toml_bool(sl_toml_get(s, "secondary"), &flag) && flag);
        if (!primary)
            continue;
        any = true;
        const char *url = sl_pytoml_str(s, "url");
        const char *name = sl_pytoml_str(s, "name");
        if (!url && name && !strcasecmp(name, "pypi")) {
            if (!add_index(p, SL_PYPI_SIMPLE, p->lock.pyproject_path, sl_toml_line(s)))
                return false;
        } else if (url && !add_index(p, url, p->lock.pyproject_path, sl_toml_line(s))) {
            return false;
        }
    }
    return any || add_index(p, SL_PYPI_SIMPLE, NULL, 0);
}

static bool read_poetry(const char *path, const char *data, size_t len, sl_project *proj,
                        sl_derived *out, sl_lockerr *err)
{
    poetry p = { .pins = sl_derived_pins(out) };
    bool ok = sl_pylock_open(&p.lock, path, data, len, "metadata", out, err) &&
              sl_pylock_sources(&p.lock, proj, "tool.poetry.source", &p.sources);
    for (size_t i = 0; ok && i < sl_toml_count(p.lock.packages); i++)
        ok = package(&p, sl_toml_at(p.lock.packages, i));
    p.pkg = NULL;
    if (ok && p.build_index)
        ok = build_indexes(&p);
    sl_pylock_close(&p.lock);
    return ok;
}

const sl_lockreader sl_reader_poetry = {
    .name = "poetry",
    .recognises = recognises,
    .read = read_poetry,
};
