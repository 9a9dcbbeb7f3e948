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
#include "pyindex.h"
#include "toml.h"

static bool recognises(const char *base)
{
    return !strcmp(base, "poetry.lock");
}

typedef struct poetry {
    const char *path;              /* poetry.lock */
    const char *pyproject;         /* its path, when it exists */
    const sl_toml *sources;        /* [[tool.poetry.source]], or NULL */
    sl_derived *out;
    sl_lockerr *err;
    bool build_index;              /* some package is built */
} poetry;

static const char *str_at(const sl_toml *t, const char *key)
{
    return sl_pytoml_str(t, key);
}

static bool add_index(poetry *p, const char *url, const char *config, int line)
{
    char msg[512];
    sl_pyprov prov = { { p->path, config } };
    if (sl_pyindex_add(p->out, url, strlen(url), &prov, msg, sizeof msg) < 0) {
        sl_lockerr_set(p->err, config ? config : p->path, line, "%s", msg);
        return false;
    }
    return true;
}

/* The project's source named `name` (Poetry compares names without case). */
static const sl_toml *project_source(const poetry *p, const char *name)
{
    for (size_t i = 0; i < sl_toml_count(p->sources); i++) {
        const sl_toml *s = sl_toml_at(p->sources, i);
        const char *n = str_at(s, "name");
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
    const char *ref = str_at(src, "reference");
    const sl_toml *ps = ref ? project_source(p, ref) : NULL;
    const char *purl = ps ? str_at(ps, "url") : NULL;
    if (purl && !same_url(purl, url))
        return add_index(p, purl, p->pyproject, sl_toml_line(ps));
    return add_index(p, url, NULL, sl_toml_line(src));
}

static bool package(poetry *p, const sl_toml *pkg)
{
    if (sl_toml_kind_of(pkg) != SL_TOML_TABLE) {
        sl_lockerr_set(p->err, p->path, sl_toml_line(pkg), "a [[package]] entry is not a table");
        return false;
    }
    const sl_toml *src = sl_toml_get(pkg, "source");
    if (!src) {                    /* PyPI */
        return add_index(p, SL_PYPI_SIMPLE, NULL, 0);
    }
    int line = sl_toml_line(src);
    if (sl_toml_kind_of(src) != SL_TOML_TABLE) {
        sl_lockerr_set(p->err, p->path, line, "[package.source] is not a table");
        return false;
    }
    const char *type = str_at(src, "type");
    const char *url = str_at(src, "url");
    if (!type) {
        sl_lockerr_set(p->err, p->path, line, "[package.source] has no type");
        return false;
    }
    if (!strcmp(type, "file") || !strcmp(type, "directory"))
        return true;               /* local (R5) */
    if (!url) {
        char t[48];
        sl_lockerr_set(p->err, p->path, line, "[package.source] of type '%s' has no url",
                       sl_pyshow(type, strlen(type), t, sizeof t));
        return false;
    }
    char msg[512];
    sl_pyprov prov = { { p->path } };
    int r;
    if (!strcmp(type, "legacy")) {
        return legacy_source(p, src, url);
    } else if (!strcmp(type, "git")) {
        r = sl_pyvcs_add(p->out, url, strlen(url), &prov, msg, sizeof msg);
        if (r > 0)
            p->build_index = true;
    } else if (!strcmp(type, "url")) {
        r = sl_pyurl_add(p->out, url, strlen(url), &prov, msg, sizeof msg);
        if (r > 0 && !sl_pyurl_is_wheel(url, strlen(url)))
            p->build_index = true;
    } else {
        char t[48];
        sl_lockerr_set(p->err, p->path, line, "unknown [package.source] type '%s'",
                       sl_pyshow(type, strlen(type), t, sizeof t));
        return false;
    }
    if (r < 0) {
        sl_lockerr_set(p->err, p->path, line, "%s", msg);
        return false;
    }
    return true;
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
        const char *prio = str_at(s, "priority");
        bool flag;
        bool primary = prio ? (!strcmp(prio, "primary") || !strcmp(prio, "default"))
                            : !(sl_toml_bool(sl_toml_get(s, "secondary"), &flag) && flag);
        if (!primary)
            continue;
        any = true;
        const char *url = str_at(s, "url");
        const char *name = str_at(s, "name");
        if (!url && name && !strcasecmp(name, "pypi")) {
            if (!add_index(p, SL_PYPI_SIMPLE, p->pyproject, sl_toml_line(s)))
                return false;
        } else if (url && !add_index(p, url, p->pyproject, sl_toml_line(s))) {
            return false;
        }
    }
    return any || add_index(p, SL_PYPI_SIMPLE, NULL, 0);
}

static bool read_poetry(const char *path, const char *data, size_t len, sl_project *proj,
                        sl_derived *out, sl_lockerr *err)
{
    sl_toml *lock = sl_pytoml_parse(path, data, len, err);
    if (!lock)
        return false;
    bool ok = false;
    sl_toml *py = NULL;
    poetry p = { .path = path, .out = out, .err = err };

    const sl_toml *meta = sl_toml_get(lock, "metadata");
    if (!meta || sl_toml_kind_of(meta) != SL_TOML_TABLE) {
        sl_lockerr_set(err, path, 0, "not a poetry.lock (no [metadata] table)");
        goto out;
    }
    const sl_toml *pkgs = sl_toml_get(lock, "package");
    if (pkgs && sl_toml_kind_of(pkgs) != SL_TOML_ARRAY) {
        sl_lockerr_set(err, path, sl_toml_line(pkgs), "\"package\" is not an array of tables");
        goto out;
    }

    sl_lockerr pe = { .msg = "" };
    py = sl_pytoml_project(proj, "pyproject.toml", &p.pyproject, &pe);
    if (!py && pe.msg[0]) {
        *err = pe;
        goto out;
    }
    if (py) {
        p.sources = sl_pytoml_path(py, "tool.poetry.source");
        if (p.sources && sl_toml_kind_of(p.sources) != SL_TOML_ARRAY) {
            sl_lockerr_set(err, p.pyproject, sl_toml_line(p.sources),
                           "tool.poetry.source is not an array of tables");
            goto out;
        }
    } else {
        p.pyproject = NULL;
    }

    for (size_t i = 0; i < sl_toml_count(pkgs); i++)
        if (!package(&p, sl_toml_at(pkgs, i)))
            goto out;
    if (p.build_index && !build_indexes(&p))
        goto out;
    ok = true;
out:
    sl_toml_free(py);
    sl_toml_free(lock);
    return ok;
}

const sl_lockreader sl_reader_poetry = {
    .name = "poetry",
    .recognises = recognises,
    .read = read_poetry,
};
