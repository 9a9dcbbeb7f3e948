/* Composer: composer.lock, with composer.json's config.preferred-install.
 *
 * `composer install` installs every package of "packages" and
 * "packages-dev" from its dist (an archive URL) or its source (a VCS clone),
 * choosing as Composer's DownloadManager does: preferred-install "dist" (the
 * default) takes the dist when there is one, "source" the source, "auto"
 * the source for dev versions only, and a {pattern: mode} object decides
 * per package name (first match; unmatched dev versions from source). The
 * other one is only a fallback after a failure (LOCKFILES.md R3).
 *
 * A dist's preferred mirrors are tried before its URL (Package::getUrls:
 * each preferred mirror is put first), so the last preferred mirror is the
 * one contacted. `path` dists and local paths add nothing (R5);
 * notification-url is install telemetry (R3). GitHub's API archive URLs
 * (api.github.com/repos/o/r/zipball/<ref>) redirect to codeload.github.com,
 * github.com/o/r/archive/ too, and release downloads to
 * release-assets.githubusercontent.com (R6).
 *
 * With --pins nothing can be pinned (PINS.md "Composer"): a dist's shasum is
 * SHA-1 or empty, a source is a VCS clone. The host entries say so.
 *
 * Not modelled: --prefer-source/--prefer-dist/--prefer-install on the
 * command line, COMPOSER_* environment and the global config, the
 * repo.packagist.org metadata checks of Composer >= 2.10 (ignored when
 * unreachable during install, LOCKFILES.md §2), github-protocols rewriting
 * of source URLs, and perforce sources. */
#include "jsonload.h"
#include "lockfile.h"
#include "text.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { PREF_DIST, PREF_SOURCE, PREF_AUTO, PREF_PATTERNS } prefmode;

typedef struct composer {
    const char *lock;
    const char *json_path;         /* composer.json, when it sets preferred-install */
    prefmode mode;
    json_t *patterns;              /* PREF_PATTERNS: the object (borrowed from cfg) */
    json_t *cfg;
    sl_derived *out;
    sl_lockerr *err;
    const char *why;               /* --pins: why the package's hosts are not pinned */
} composer;

/* Untrusted text for a message: printable ASCII, the rest as '?', cut. */
static const char *shown(const char *s, char *buf, size_t cap)
{
    return sl_display_untrusted(s, strlen(s), buf, cap, SL_DISPLAY_QMARK);
}

/* A JSON string without embedded NULs, or NULL. */
static const char *jstr(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

/* ---- composer.json ---- */

static bool load_prefs(composer *c, sl_project *proj)
{
    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path;
    const char *data = sl_project_file(proj, "composer.json", &len, &path, &e);
    if (!data) {
        if (e.msg[0]) {
            *c->err = e;
            return false;
        }
        return true;
    }
    json_error_t je;
    c->cfg = json_loadb(data, len, 0, &je);
    if (!c->cfg) {
        sl_lockerr_set(c->err, path, je.line > 0 ? je.line : 0, "invalid JSON: %s", je.text);
        return false;
    }
    if (!json_is_object(c->cfg)) {
        sl_lockerr_set(c->err, path, 0, "not a composer.json: the top level is not an object");
        return false;
    }
    json_t *pi = json_object_get(json_object_get(c->cfg, "config"), "preferred-install");
    if (!pi)
        return true;
    c->json_path = path;
    const char *s = jstr(pi);
    if (s && !strcmp(s, "dist"))
        c->mode = PREF_DIST;
    else if (s && !strcmp(s, "source"))
        c->mode = PREF_SOURCE;
    else if (s && !strcmp(s, "auto"))
        c->mode = PREF_AUTO;
    else if (json_is_object(pi)) {
        const char *k;
        json_t *v;
        char tmp[96];
        json_object_foreach(pi, k, v) {
            const char *m = jstr(v);
            if (!m || (strcmp(m, "dist") && strcmp(m, "source") && strcmp(m, "auto"))) {
                sl_lockerr_set(c->err, path, 0,
                               "config.preferred-install: \"%s\" must map to dist, source or auto",
                               shown(k, tmp, sizeof tmp));
                return false;
            }
        }
        c->mode = PREF_PATTERNS;
        c->patterns = pi;
    } else {
        sl_lockerr_set(c->err, path, 0,
                       "config.preferred-install: expected dist, source, auto or an object");
        return false;
    }
    return true;
}

/* Composer's pattern: '*' matches anything, the rest literally, no case. */
static bool name_match(const char *pat, const char *s)
{
    for (; *pat; pat++, s++) {
        if (*pat == '*') {
            while (pat[1] == '*')
                pat++;
            if (!pat[1])
                return true;
            for (; *s; s++)
                if (name_match(pat + 1, s))
                    return true;
            return false;
        }
        char a = *pat, b = *s;
        if (!b)
            return false;
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return false;
    }
    return !*s;
}

/* A dev version: "dev-main", "2.x-dev" (Composer's stability "dev"). */
static bool is_dev(const char *version)
{
    size_t n = version ? strlen(version) : 0;
    return (n >= 4 && !strncasecmp(version, "dev-", 4)) ||
           (n >= 4 && !strncasecmp(version + n - 4, "-dev", 4));
}

/* Whether the dist is tried first (DownloadManager::getAvailableSources
 * with preferSource/preferDist from the config). */
static bool dist_first(const composer *c, prefmode mode, const char *name, const char *version)
{
    if (mode == PREF_DIST)
        return true;
    if (mode == PREF_SOURCE)
        return false;
    if (mode == PREF_PATTERNS) {
        const char *k;
        json_t *v;
        json_object_foreach(c->patterns, k, v) {
            if (!name_match(k, name ? name : ""))
                continue;
            const char *m = json_string_value(v);
            return !strcmp(m, "dist") || (!is_dev(version) && !strcmp(m, "auto"));
        }
    }
    return !is_dev(version);
}

/* ---- emitting ---- */

static bool add2(composer *c, const char *host, size_t hlen, int port, bool with_cfg,
                 const char *pkg)
{
    char msg[400], tmp[96];
    bool pins = sl_derived_pins(c->out);
    if (!(pins ? sl_derived_add_fallback(c->out, host, hlen, port, NULL, 0, c->lock, c->why, msg, sizeof msg)
               : sl_derived_add(c->out, host, hlen, port, c->lock, msg, sizeof msg)) ||
        (with_cfg && !(pins ? sl_derived_add_fallback(c->out, host, hlen, port, NULL, 0, c->json_path, c->why, msg,
                                                      sizeof msg)
                            : sl_derived_add(c->out, host, hlen, port, c->json_path, msg, sizeof msg)))) {
        sl_lockerr_set(c->err, c->lock, 0, "package %s: %s", shown(pkg, tmp, sizeof tmp), msg);
        return false;
    }
    return true;
}

static bool path_has(const sl_url *u, const char *needle)
{
    return u->path_len && memmem(u->path, u->path_len, needle, strlen(needle));
}

static bool host_is(const sl_url *u, const char *h)
{
    return u->host_len == strlen(h) && !strncasecmp(u->host, h, u->host_len);
}

/* host:port of a download URL, with GitHub's redirect targets (R6). */
static bool add_url(composer *c, const char *url, bool with_cfg, const char *pkg)
{
    char tmp[96], tmp2[200];
    sl_url u;
    if (!sl_url_parse(url, strlen(url), &u))
        return true;               /* a local path: nothing to reach */
    int port = u.port;
    if (port < 0 && !strcmp(u.scheme, "svn"))
        port = 3690;               /* svnserve */
    if (port < 0) {
        sl_lockerr_set(c->err, c->lock, 0, "package %s: no usable port in '%s'",
                       shown(pkg, tmp, sizeof tmp), shown(url, tmp2, sizeof tmp2));
        return false;
    }
    if (!add2(c, u.host, u.host_len, port, with_cfg, pkg))
        return false;
    if (host_is(&u, "api.github.com") && path_has(&u, "/repos/") &&
        (path_has(&u, "/zipball") || path_has(&u, "/tarball")))
        return add2(c, "codeload.github.com", 19, 443, with_cfg, pkg);
    if (host_is(&u, "github.com") && path_has(&u, "/archive/"))
        return add2(c, "codeload.github.com", 19, 443, with_cfg, pkg);
    if (host_is(&u, "github.com") && path_has(&u, "/releases/download/"))
        return add2(c, "release-assets.githubusercontent.com", 36, 443, with_cfg, pkg);
    return true;
}

/* The URL contacted first: the last preferred mirror, else the URL. */
static const char *primary_url(const json_t *loc)
{
    const char *url = jstr(json_object_get(loc, "url"));
    const json_t *mirrors = json_object_get(loc, "mirrors");
    size_t i;
    json_t *m;
    if (json_is_array(mirrors))
        json_array_foreach(mirrors, i, m) {
            const char *mu = jstr(json_object_get(m, "url"));
            if (mu && json_is_true(json_object_get(m, "preferred")))
                url = mu;
        }
    return url;
}

/* Composer's loader wants a dist or source as {type, url, ...} with
 * strings; null stands for absent. Returns the object, NULL if absent, or
 * (json_t *)-1 after setting err. */
static const json_t *location(composer *c, const json_t *pkg, const char *key, const char *name)
{
    const json_t *v = json_object_get(pkg, key);
    if (!v || json_is_null(v))
        return NULL;
    char tmp[96];
    if (!json_is_object(v) || !jstr(json_object_get(v, "type")) ||
        !jstr(json_object_get(v, "url"))) {
        sl_lockerr_set(c->err, c->lock, 0,
                       "package %s: \"%s\" must be an object with string \"type\" and \"url\"",
                       shown(name, tmp, sizeof tmp), key);
        return (const json_t *)-1;
    }
    const json_t *mirrors = json_object_get(v, "mirrors");
    if (mirrors && !json_is_array(mirrors) && !json_is_null(mirrors)) {
        sl_lockerr_set(c->err, c->lock, 0, "package %s: \"%s.mirrors\" must be an array",
                       shown(name, tmp, sizeof tmp), key);
        return (const json_t *)-1;
    }
    return v;
}

static bool add_package(composer *c, const json_t *pkg, size_t idx, const char *list)
{
    char tmp[96];
    if (!json_is_object(pkg)) {
        sl_lockerr_set(c->err, c->lock, 0, "%s[%zu] is not an object", list, idx);
        return false;
    }
    const char *name = jstr(json_object_get(pkg, "name"));
    if (!name) {
        sl_lockerr_set(c->err, c->lock, 0, "%s[%zu] has no name", list, idx);
        return false;
    }
    const char *version = jstr(json_object_get(pkg, "version"));
    const json_t *dist = location(c, pkg, "dist", name);
    const json_t *src = location(c, pkg, "source", name);
    if (dist == (const json_t *)-1 || src == (const json_t *)-1)
        return false;
    if (!dist && !src) {
        /* metapackages; anything else cannot be installed */
        const char *type = jstr(json_object_get(pkg, "type"));
        if (type && !strcmp(type, "metapackage"))
            return true;
        sl_lockerr_set(c->err, c->lock, 0, "package %s has neither dist nor source",
                       shown(name, tmp, sizeof tmp));
        return false;
    }
    bool want_dist = dist && (!src || dist_first(c, c->mode, name, version));
    /* Did composer.json change the choice Composer makes by default? */
    bool by_default = dist && (!src || dist_first(c, PREF_DIST, name, version));
    bool with_cfg = c->json_path && want_dist != by_default;
    const json_t *loc = want_dist ? dist : src;
    const char *type = jstr(json_object_get(loc, "type"));
    if (!strcmp(type, "path"))
        return true;               /* a local directory */
    const char *sum = want_dist ? jstr(json_object_get(loc, "shasum")) : NULL;
    c->why = !want_dist ? "a VCS source is cloned, with no digest of the download"
             : sum && *sum ? "dist.shasum is SHA-1, too weak to pin"
                           : "no dist.shasum to pin";
    return add_url(c, primary_url(loc), with_cfg, name);
}

static bool composer_recognises(const char *base)
{
    return !strcmp(base, "composer.lock");
}

static bool composer_read(const char *path, const char *data, size_t len, sl_project *proj,
                          sl_derived *out, sl_lockerr *err)
{
    composer c = { .lock = path, .out = out, .err = err, .mode = PREF_DIST };
    json_error_t je;
    json_t *root = sl_json_load(data, len, &je);
    bool ok = false;
    if (!root) {
        sl_lockerr_set(err, path, je.line > 0 ? je.line : 0, "invalid JSON: %s", je.text);
        return false;
    }
    const json_t *lists[2] = { json_object_get(root, "packages"),
                               json_object_get(root, "packages-dev") };
    if (!json_is_object(root) || !json_is_array(lists[0])) {
        sl_lockerr_set(err, path, 0, "not a composer.lock: no \"packages\" array");
        goto out;
    }
    if (lists[1] && !json_is_array(lists[1]) && !json_is_null(lists[1])) {
        sl_lockerr_set(err, path, 0, "\"packages-dev\" is not an array");
        goto out;
    }
    if ((json_array_size(lists[0]) || json_array_size(lists[1])) && !load_prefs(&c, proj))
        goto out;
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *pkg;
        json_array_foreach(lists[l], i, pkg)
            if (!add_package(&c, pkg, i, l ? "packages-dev" : "packages"))
                goto out;
    }
    ok = true;
out:
    json_decref(c.cfg);
    json_decref(root);
    return ok;
}

const sl_lockreader sl_reader_composer = {
    .name = "composer",
    .recognises = composer_recognises,
    .read = composer_read,
};
