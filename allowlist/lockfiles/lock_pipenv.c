/* Pipenv: Pipfile.lock (LOCKFILES.md §2 "Pipenv").
 *
 * _meta.sources lists the indexes by name; a package resolved from an index
 * names it in "index", and one that does not is fetched from the first
 * source (Pipenv's default). "git"/"hg"/"svn"/"bzr" packages are cloned,
 * "file" packages downloaded; both are built, and the build backend comes
 * from the first source, so it is needed too (unless the file is a wheel).
 * "path" and editable local packages add nothing (R5). Every group is read:
 * "default", "develop" and any custom category.
 *
 * With --pins (PINS.md "Pipenv"): Pipenv installs each package with pip
 * against its own source (routines/install.py batch_install), so the
 * page pip reads there and, as for pip, the files of its == version by
 * version on that source's file host, with its hashes; VCS packages, file
 * packages without hashes and build backends fall back to host entries
 * that say why. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonload.h"
#include "lockfile.h"
#include "pyindex.h"
#include "text.h"

static bool recognises(const char *base)
{
    return !strcmp(base, "Pipfile.lock");
}

typedef struct pipenv {
    const char *path;
    const char *data;              /* the file's bytes, to find a package's line */
    size_t len;
    sl_derived *out;
    sl_lockerr *err;
    json_t *sources;               /* array of {name, url}; may be empty */
    bool *used;                    /* per source: some package resolves through it */
    bool pypi_default;             /* no sources: PyPI */
    bool pins;
    bool build;                    /* --pins: something is built */
    sl_pyvpins *vpins;
} pipenv;

#define WHY_BUILD "not pinned: the build dependencies of VCS and file packages are not in Pipfile.lock"

/* The line of the key "name": in the file (jansson keeps no positions); 0
 * if not found. Good enough to point at the package in a message. */
static int key_line(const pipenv *p, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl + 2 <= p->len; i++) {
        if (p->data[i] != '"' || memcmp(p->data + i + 1, name, nl) != 0 || p->data[i + nl + 1] != '"')
            continue;
        size_t j = i + nl + 2;
        while (j < p->len && (p->data[j] == ' ' || p->data[j] == '\t' || p->data[j] == '\r' || p->data[j] == '\n'))
            j++;
        if (j < p->len && p->data[j] == ':') {
            int line = 1;
            for (size_t k = 0; k < i; k++)
                line += p->data[k] == '\n';
            return line;
        }
    }
    return 0;
}

static bool fail(pipenv *p, const char *pkg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* An error about package `pkg` (NULL: about the file). */
static bool fail(pipenv *p, const char *pkg, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl_lockerr_set(p->err, p->path, pkg ? key_line(p, pkg) : 0, "%s", msg);
    return false;
}

/* Mark the source named `name` as used. */
static bool use_index(pipenv *p, const char *pkg, const char *name)
{
    size_t n = json_array_size(p->sources);
    if (!name) {
        if (n == 0)
            p->pypi_default = true;
        else
            p->used[0] = true;
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        const char *sn = json_string_value(json_object_get(json_array_get(p->sources, i), "name"));
        if (sn && !strcmp(sn, name)) {
            p->used[i] = true;
            return true;
        }
    }
    char a[104], b[104];
    return fail(p, pkg, "package '%s' names index '%s', which _meta.sources does not list",
                sl_display_untrusted(pkg, strlen(pkg), a, sizeof a, SL_DISPLAY_QMARK),
                sl_display_untrusted(name, strlen(name), b, sizeof b, SL_DISPLAY_QMARK));
}

/* --pins: a package's "hashes" as SRI (sha256/384/512 only). */
#define HASHES_MAX 256

typedef struct hashlist {
    char sri[HASHES_MAX][SL_SRI_MAX];
    const char *p[HASHES_MAX];
    size_t n;
    bool weak;                     /* some hash was of another algorithm */
} hashlist;

static bool hashes_of(pipenv *p, const char *name, json_t *v, hashlist *h)
{
    h->n = 0;
    h->weak = false;
    json_t *hs = json_object_get(v, "hashes");
    if (hs && !json_is_array(hs)) {
        char n[104];
        return fail(p, name, "%s: \"hashes\" is not an array",
                    sl_display_untrusted(name, strlen(name), n, sizeof n, SL_DISPLAY_QMARK));
    }
    for (size_t i = 0; i < json_array_size(hs); i++) {
        json_t *x = json_array_get(hs, i);
        if (h->n < HASHES_MAX && json_is_string(x) &&
            sl_pyhash_sri(json_string_value(x), json_string_length(x), h->sri[h->n]))
            h->p[h->n] = h->sri[h->n], h->n++;
        else
            h->weak = true;
    }
    return true;
}

/* The URL of the source named `index` (NULL: the default, the first or
 * PyPI), which use_index has checked. */
static const char *source_url(const pipenv *p, const char *index)
{
    size_t n = json_array_size(p->sources);
    if (n == 0)
        return SL_PYPI_SIMPLE;
    for (size_t i = 0; index && i < n; i++) {
        json_t *s = json_array_get(p->sources, i);
        const char *sn = json_string_value(json_object_get(s, "name"));
        if (sn && !strcmp(sn, index))
            return json_string_value(json_object_get(s, "url"));
    }
    return json_string_value(json_object_get(json_array_get(p->sources, 0), "url"));
}

/* --pins: a package from its source, installed by pip with --hash: the
 * page pip reads, and the files of its == version with its hashes. */
static bool pin_named(pipenv *p, const char *name, json_t *v, const char *index)
{
    const char *url = source_url(p, index);
    char msg[512], n[104];
    sl_display_untrusted(name, strlen(name), n, sizeof n, SL_DISPLAY_QMARK);
    sl_pyprov prov = { { p->path } };
    int r = sl_pyindex_page_rule(p->out, url, strlen(url), name, &prov, msg, sizeof msg);
    if (r < 0)
        return fail(p, name, "%s: %.280s", n, msg);
    hashlist *h = malloc(sizeof *h);
    if (!h)
        abort();
    bool ok = hashes_of(p, name, v, h);
    const char *ver = json_string_value(json_object_get(v, "version"));
    const char *exact = ver && !strncmp(ver, "==", 2) && ver[2] != '=' ? ver + 2 : NULL;
    if (ok && exact && sl_pyversion_exact(exact, strlen(exact)) && h->n && !h->weak)
        r = sl_pyvpins_add(p->vpins, url, strlen(url), name, exact, h->p, h->n, &prov, msg, sizeof msg);
    else if (ok)
        r = sl_pyindex_files_unpinned(p->out, url, strlen(url), &prov,
                                      "not pinned: a package without an == version and sha256, "
                                      "sha384 or sha512 hashes", msg, sizeof msg);
    free(h);
    if (ok && r < 0)
        return fail(p, name, "%s: %.280s", n, msg);
    return ok;
}

static bool package(pipenv *p, const char *group, const char *name, json_t *v)
{
    char g[64], n[104];
    sl_display_untrusted(name, strlen(name), n, sizeof n, SL_DISPLAY_QMARK);
    if (!json_is_object(v))
        return fail(p, name, "%s.%s: a package entry is not an object",
                    sl_display_untrusted(group, strlen(group), g, sizeof g, SL_DISPLAY_QMARK),
                    n);
    char msg[512];
    sl_pyprov prov = { { p->path } };
    static const char *const vcs_keys[] = { "git", "hg", "svn", "bzr" };
    for (size_t i = 0; i < sizeof vcs_keys / sizeof *vcs_keys; i++) {
        json_t *u = json_object_get(v, vcs_keys[i]);
        if (!u)
            continue;
        if (!json_is_string(u))
            return fail(p, name, "%s: \"%s\" is not a string", n, vcs_keys[i]);
        int r = p->pins ? sl_pyvcs_unpinned(p->out, json_string_value(u), json_string_length(u), &prov,
                                            "not pinned: a VCS checkout has no digest to check", msg,
                                            sizeof msg)
                        : sl_pyvcs_add(p->out, json_string_value(u), json_string_length(u), &prov, msg,
                                       sizeof msg);
        if (r < 0)
            return fail(p, name, "%s: %.280s", n, msg);
        if (r > 0 && p->pins)
            p->build = true;
        if (r > 0)
            return use_index(p, name, NULL);   /* built: its backend from the default source */
        return true;
    }
    json_t *file = json_object_get(v, "file");
    if (file) {
        if (!json_is_string(file))
            return fail(p, name, "%s: \"file\" is not a string", n);
        const char *u = json_string_value(file);
        size_t ul = json_string_length(file);
        int r;
        if (p->pins) {
            hashlist *h = malloc(sizeof *h);
            if (!h)
                abort();
            if (!hashes_of(p, name, v, h)) {
                free(h);
                return false;
            }
            r = sl_pyurl_pin(p->out, u, ul, h->p, h->n, &prov,
                             h->weak ? "not pinned: no sha256, sha384 or sha512 hash in Pipfile.lock"
                                     : "not pinned: no hashes in Pipfile.lock", msg, sizeof msg);
            free(h);
        } else {
            r = sl_pyurl_add(p->out, u, ul, &prov, msg, sizeof msg);
        }
        if (r < 0)
            return fail(p, name, "%s: %.280s", n, msg);
        if (r > 0 && !sl_pyurl_is_wheel(u, ul)) {
            p->build = p->build || p->pins;
            return use_index(p, name, NULL);
        }
        return true;
    }
    if (json_object_get(v, "path"))
        return true;               /* local (R5) */
    json_t *index = json_object_get(v, "index");
    if (index && !json_is_string(index))
        return fail(p, name, "%s: \"index\" is not a string", n);
    if (!use_index(p, name, json_string_value(index)))
        return false;
    return !p->pins || pin_named(p, name, v, json_string_value(index));
}

static bool read_pipenv(const char *path, const char *data, size_t len, sl_project *proj,
                        sl_derived *out, sl_lockerr *err)
{
    (void)proj;
    json_error_t je;
    json_t *root = sl_json_load(data, len, &je);
    if (!root) {
        sl_lockerr_set(err, path, je.line > 0 ? je.line : 0, "invalid JSON: %s", je.text);
        return false;
    }
    pipenv p = { .path = path, .data = data, .len = len, .out = out, .err = err,
                 .pins = sl_derived_pins(out) };
    bool ok = true;
    json_t *meta = json_object_get(root, "_meta");
    if (!json_is_object(root) || !json_is_object(meta)) {
        sl_lockerr_set(err, path, 0, "not a Pipfile.lock (no \"_meta\" object)");
        json_decref(root);
        return false;
    }
    json_t *sources = json_object_get(meta, "sources");
    if (sources && !json_is_array(sources)) {
        sl_lockerr_set(err, path, 0, "_meta.sources is not an array");
        json_decref(root);
        return false;
    }
    p.sources = sources ? sources : json_array();   /* none: PyPI, Pipenv's default */
    size_t ns = json_array_size(p.sources);
    for (size_t i = 0; i < ns; i++) {
        json_t *s = json_array_get(p.sources, i);
        if (!json_is_object(s) || !json_is_string(json_object_get(s, "url"))) {
            sl_lockerr_set(err, path, 0, "_meta.sources[%zu] has no \"url\" string", i);
            ok = false;
            goto out;
        }
    }
    p.used = calloc(ns ? ns : 1, sizeof *p.used);
    if (!p.used)
        abort();
    if (p.pins)
        p.vpins = sl_pyvpins_new();

    const char *group;
    json_t *pkgs;
    json_object_foreach(root, group, pkgs) {
        if (!strcmp(group, "_meta"))
            continue;
        if (!json_is_object(pkgs)) {
            char g[104];
            sl_lockerr_set(err, path, 0, "\"%s\" is not an object of packages",
                           sl_display_untrusted(group, strlen(group), g, sizeof g,
                                                SL_DISPLAY_QMARK));
            ok = false;
            goto out;
        }
        const char *name;
        json_t *v;
        json_object_foreach(pkgs, name, v) {
            if (!package(&p, group, name, v)) {
                ok = false;
                goto out;
            }
        }
    }

    char msg[512];
    sl_pyprov prov = { { path } };
    if (p.pins) {
        if (!sl_pyvpins_emit(p.vpins, out, msg, sizeof msg)) {
            sl_lockerr_set(err, path, 0, "%s", msg);
            ok = false;
            goto out;
        }
        /* Build backends come from the default source. */
        const char *u = source_url(&p, NULL);
        if (p.build && sl_pyindex_unpinned(out, u, strlen(u), &prov, WHY_BUILD, msg, sizeof msg) < 0) {
            sl_lockerr_set(err, path, 0, "%s", msg);
            ok = false;
        }
        goto out;
    }
    /* The indexes that some package resolves through (the lock names
     * them, so the lock is the provenance). */
    if (p.pypi_default &&
        sl_pyindex_add(out, SL_PYPI_SIMPLE, strlen(SL_PYPI_SIMPLE), &prov, msg, sizeof msg) < 0) {
        sl_lockerr_set(err, path, 0, "%s", msg);
        ok = false;
        goto out;
    }
    for (size_t i = 0; i < ns; i++) {
        if (!p.used[i])
            continue;
        json_t *u = json_object_get(json_array_get(p.sources, i), "url");
        if (sl_pyindex_add(out, json_string_value(u), json_string_length(u), &prov, msg, sizeof msg) < 0) {
            sl_lockerr_set(err, path, 0, "_meta.sources[%zu]: %s", i, msg);
            ok = false;
            goto out;
        }
    }
out:
    sl_pyvpins_free(p.vpins);
    free(p.used);
    if (!sources)
        json_decref(p.sources);
    json_decref(root);
    return ok;
}

const sl_lockreader sl_reader_pipenv = {
    .name = "pipenv",
    .recognises = recognises,
    .read = read_pipenv,
};
