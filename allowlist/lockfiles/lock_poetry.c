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
 * sources, or PyPI when it has none. */
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
} poetry;

/* An index, named by `config` (NULL: the lockfile). */
static bool add_index(poetry *p, const char *url, const char *config, int line)
{
    return sl_pylock_add(&p->lock, sl_pyindex_add, url, config, line, NULL);
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
    if (!src) {                    /* PyPI */
        return add_index(p, SL_PYPI_SIMPLE, NULL, 0);
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
    if (!strcmp(type, "git")) {
        if (!sl_pylock_add(&p->lock, sl_pyvcs_add, url, NULL, line, &r))
            return false;
        p->build_index = p->build_index || r > 0;
        return true;
    }
    if (!strcmp(type, "url")) {
        if (!sl_pylock_add(&p->lock, sl_pyurl_add, url, NULL, line, &r))
            return false;
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
    poetry p = { .build_index = false };
    bool ok = sl_pylock_open(&p.lock, path, data, len, "metadata", out, err) &&
              sl_pylock_sources(&p.lock, proj, "tool.poetry.source", &p.sources);
    for (size_t i = 0; ok && i < sl_toml_count(p.lock.packages); i++)
        ok = package(&p, sl_toml_at(p.lock.packages, i));
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
