/* package-lock.json (lockfileVersion 1, 2, 3) and npm-shrinkwrap.json.
 *
 * v2/v3: `packages` is read and the legacy `dependencies` ignored, as
 * `npm ci` does. v1: the nested `dependencies`, and since npm 7+ fetches
 * metadata to upgrade an old lockfile, the registry of every registry
 * package as well. A `resolved` on registry.npmjs.org means "the
 * configured registry" (replace-registry-host); git dependencies on GitHub,
 * GitLab, Bitbucket and sourcehut are fetched as tarballs (pacote), others
 * cloned from their host. LOCKFILES.md §2, "npm". */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jsonload.h"
#include "lockfile.h"
#include "npmrc.h"
#include "url.h"

typedef struct npm_ctx {
    const char *path;
    const char *data;
    size_t len;
    sl_npmcfg *cfg;
    sl_derived *out;
    sl_lockerr *err;
    bool old;                      /* lockfileVersion 1 */
} npm_ctx;

/* hosted-git-info's hosts and where pacote gets their tarballs */
typedef struct hosted {
    const char *domain;
    const char *shortcut;
    const char *tarball_host;
} hosted;

static const hosted HOSTED[] = {
    { "github.com", "github:", "codeload.github.com" },
    { "gist.github.com", "gist:", "codeload.github.com" },
    { "gitlab.com", "gitlab:", "gitlab.com" },
    { "bitbucket.org", "bitbucket:", "bitbucket.org" },
    { "git.sr.ht", "sourcehut:", "git.sr.ht" },
};

static bool starts(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(s, prefix, n);
}

static const hosted *hosted_by_shortcut(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof HOSTED / sizeof HOSTED[0]; i++)
        if (starts(s, len, HOSTED[i].shortcut))
            return &HOSTED[i];
    return NULL;
}

static const hosted *hosted_by_host(const char *host, size_t len)
{
    if (len > 4 && !strncasecmp(host, "www.", 4)) {
        host += 4;
        len -= 4;
    }
    for (size_t i = 0; i < sizeof HOSTED / sizeof HOSTED[0]; i++)
        if (strlen(HOSTED[i].domain) == len && !strncasecmp(HOSTED[i].domain, host, len))
            return &HOSTED[i];
    return NULL;
}

/* The line of the first "key" in the text, for messages about a value
 * jansson has already parsed (it keeps no positions). */
static int key_line(const npm_ctx *x, const char *key)
{
    size_t kn = strlen(key);
    for (size_t i = 0; i + kn + 2 <= x->len; i++) {
        if (x->data[i] == '"' && !memcmp(x->data + i + 1, key, kn) && x->data[i + kn + 1] == '"') {
            int line = 1;
            for (size_t k = 0; k < i; k++)
                line += x->data[k] == '\n';
            return line;
        }
    }
    return 0;
}

static bool add_hosted(npm_ctx *x, const hosted *h, bool committish, int line)
{
    /* With a commit the tarball is all pacote needs; without one it first
     * asks the host over https which commit the ref names. */
    if (!committish &&
        !sl_npm_add_host(x->out, h->domain, strlen(h->domain), 443, x->path, NULL, line, x->err))
        return false;
    return sl_npm_add_host(x->out, h->tarball_host, strlen(h->tarball_host), 443, x->path, NULL,
                           line, x->err);
}

static bool has_committish(const char *s, size_t len)
{
    const char *hash = memchr(s, '#', len);
    return hash && hash + 1 < s + len;
}

/* "https://github.com/o/r(.git)": a repository, not a file on the host */
static bool two_segments(const sl_url *u)
{
    const char *p = u->path, *end = u->path + u->path_len;
    if (p == end || *p != '/')
        return false;
    const char *s1 = memchr(p + 1, '/', (size_t)(end - p - 1));
    if (!s1 || s1 == p + 1 || s1 + 1 >= end)
        return false;
    return !memchr(s1 + 1, '/', (size_t)(end - s1 - 1));
}

/* A `resolved` value, or a v1 git dependency's `version`. */
static bool add_resolved(npm_ctx *x, const char *s, size_t len, int line)
{
    const hosted *h = hosted_by_shortcut(s, len);
    sl_url u;
    bool is_url = !h && sl_url_parse(s, len, &u);
    if (!h && !is_url)
        return true;                               /* a local path (R5) */

    /* reify's #registryResolved: a URL on the replaced host (by default
     * registry.npmjs.org) is fetched from the configured registry. */
    const char *repl_file;
    if (sl_npmcfg_replaces(x->cfg, is_url ? &u : NULL, &repl_file)) {
        const char *reg_file;
        const char *reg = sl_npmcfg_registry(x->cfg, "", 0, &reg_file);
        sl_url r;
        if (!sl_url_parse(reg, strlen(reg), &r) || r.port < 0) {
            sl_lockerr_set(x->err, x->path, line, "registry '%s' is not a URL", reg);
            return false;
        }
        return sl_npm_add_host(x->out, r.host, r.host_len, r.port, x->path,
                               reg_file ? reg_file : repl_file, line, x->err);
    }
    if (h)
        return add_hosted(x, h, has_committish(s, len), line);
    if (u.port < 0) {
        sl_lockerr_set(x->err, x->path, line, "no valid port in resolved URL");
        return false;
    }
    bool gitish = !strncmp(u.scheme, "git", 3) || !strcmp(u.scheme, "ssh") || u.scp_style;
    bool web = !strcmp(u.scheme, "https") || !strcmp(u.scheme, "http");
    const hosted *hh = hosted_by_host(u.host, u.host_len);
    if (hh && (gitish || (web && two_segments(&u))))
        return add_hosted(x, hh, has_committish(s, len), line);
    if (gitish)                                    /* cloned from its own host */
        return sl_npm_add_host(x->out, u.host, u.host_len, u.port, x->path, NULL, line, x->err);
    return sl_npm_add_url(x->out, s, len, x->path, NULL, line, x->err) >= 0;
}

static bool is_true(json_t *o, const char *key)
{
    return json_is_true(json_object_get(o, key));
}

static bool string_field(npm_ctx *x, json_t *o, const char *key, const char *where,
                         const char **s, size_t *len)
{
    json_t *v = json_object_get(o, key);
    *s = NULL;
    *len = 0;
    if (!v)
        return true;
    if (!json_is_string(v)) {
        sl_lockerr_set(x->err, x->path, key_line(x, where), "%s of \"%s\" is not a string", key, where);
        return false;
    }
    *s = json_string_value(v);
    *len = json_string_length(v);
    return true;
}

/* lockfileVersion 2 and 3: "packages", keyed by install location. */
static bool read_package(npm_ctx *x, const char *key, json_t *v)
{
    if (!*key)
        return true;                               /* the project itself */
    if (!json_is_object(v)) {
        sl_lockerr_set(x->err, x->path, key_line(x, key), "packages[\"%s\"] is not an object", key);
        return false;
    }
    /* Entries outside node_modules are workspace folders and link
     * targets; links and bundled packages are not fetched either. */
    const char *nm = strstr(key, "node_modules/");
    if (!nm || (nm != key && nm[-1] != '/'))
        return true;
    if (is_true(v, "link") || is_true(v, "inBundle"))
        return true;

    const char *resolved, *version, *name;
    size_t rlen, vlen, nlen;
    if (!string_field(x, v, "resolved", key, &resolved, &rlen) ||
        !string_field(x, v, "version", key, &version, &vlen) ||
        !string_field(x, v, "name", key, &name, &nlen))
        return false;
    if (resolved && rlen)
        return add_resolved(x, resolved, rlen, 0);
    if (!version || starts(version, vlen, "file:"))
        return true;                               /* npm cannot fetch it either */
    if (memchr(version, ':', vlen) && !starts(version, vlen, "npm:"))
        return add_resolved(x, version, vlen, 0);
    /* No `resolved` (npm/cli#4263): fetched as name@version from the
     * registry for its scope. */
    if (!name) {
        const char *last = key;
        for (const char *p = key; (p = strstr(p, "node_modules/")); p += 13)
            last = p + 13;
        name = last;
        nlen = strlen(last);
    }
    return sl_npm_add_registry(x->out, x->cfg, name, nlen, x->path, 0, x->err);
}

/* lockfileVersion 1: nested "dependencies", keyed by name. */
static bool read_v1_deps(npm_ctx *x, json_t *deps, const char *where)
{
    if (!json_is_object(deps)) {
        sl_lockerr_set(x->err, x->path, key_line(x, where), "dependencies of \"%s\" is not an object",
                       where);
        return false;
    }
    const char *name;
    json_t *v;
    json_object_foreach(deps, name, v) {
        if (!json_is_object(v)) {
            sl_lockerr_set(x->err, x->path, key_line(x, name), "dependencies[\"%s\"] is not an object",
                           name);
            return false;
        }
        if (is_true(v, "bundled"))
            continue;                              /* inside its parent's tarball */
        const char *resolved, *version;
        size_t rlen, vlen;
        if (!string_field(x, v, "resolved", name, &resolved, &rlen) ||
            !string_field(x, v, "version", name, &version, &vlen))
            return false;
        if (!version) {
            sl_lockerr_set(x->err, x->path, key_line(x, name), "dependencies[\"%s\"] has no version",
                           name);
            return false;
        }
        const char *real = name;                   /* "npm:real@1.0.0" aliases */
        size_t real_len = strlen(name);
        if (starts(version, vlen, "npm:")) {
            real = version + 4;
            const char *at = vlen > 5 ? memchr(real + 1, '@', vlen - 5) : NULL;
            real_len = at ? (size_t)(at - real) : vlen - 4;
        }
        bool local = starts(version, vlen, "file:");
        bool registry = !local && (!memchr(version, ':', vlen) || starts(version, vlen, "npm:"));
        bool ok = true;
        if (local)
            ok = true;
        else if (resolved && rlen)
            ok = add_resolved(x, resolved, rlen, 0);
        else if (!registry)
            ok = add_resolved(x, version, vlen, 0);   /* git: the version is the URL */
        else
            ok = sl_npm_add_registry(x->out, x->cfg, real, real_len, x->path, 0, x->err);
        /* npm 7+ upgrades a v1 lockfile with metadata from the registry */
        if (ok && registry && x->old)
            ok = sl_npm_add_registry(x->out, x->cfg, real, real_len, x->path, 0, x->err);
        if (!ok) {
            if (!x->err->line && !strcmp(x->err->file, x->path))
                x->err->line = key_line(x, name);
            return false;
        }
        json_t *sub = json_object_get(v, "dependencies");
        if (sub && !read_v1_deps(x, sub, name))
            return false;
    }
    return true;
}

static bool recognises(const char *basename)
{
    return !strcmp(basename, "package-lock.json") || !strcmp(basename, "npm-shrinkwrap.json");
}

static bool read_npm(const char *path, const char *data, size_t len, sl_project *proj,
                     sl_derived *out, sl_lockerr *err)
{
    const char *text = data;
    size_t text_len = len;
    if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3)) {
        data += 3;                                 /* npm strips a BOM */
        len -= 3;
    }
    json_error_t jerr;
    json_t *root = sl_json_load(data, len, &jerr);
    if (!root) {
        /* A conflict marker starts a line, and a JSON string cannot hold a
         * raw newline: so a file with one never parses, and the (slow, on a
         * large file) look for it is needed only now. It is reported
         * rather than the JSON error it causes. */
        int conflict = sl_npm_conflict_line(text, text_len);
        if (conflict)
            sl_lockerr_set(err, path, conflict, "merge-conflict marker: resolve the conflict first");
        else
            sl_lockerr_set(err, path, jerr.line > 0 ? jerr.line : 0, "invalid JSON: %s", jerr.text);
        return false;
    }
    npm_ctx x = { .path = path, .data = data, .len = len, .out = out, .err = err };
    bool ok = false;
    json_t *ver = json_object_get(root, "lockfileVersion");
    if (!json_is_object(root) || !json_is_integer(ver) || json_integer_value(ver) < 1) {
        sl_lockerr_set(err, path, json_is_object(root) ? key_line(&x, "lockfileVersion") : 1,
                       "not an npm lockfile: no valid lockfileVersion");
        goto done;
    }
    x.old = json_integer_value(ver) < 2;
    x.cfg = sl_npmcfg_new("https://registry.npmjs.org/");
    if (!sl_npmcfg_load_npmrc(x.cfg, proj, err))
        goto done;

    json_t *packages = json_object_get(root, "packages");
    if (packages) {
        if (!json_is_object(packages)) {
            sl_lockerr_set(err, path, key_line(&x, "packages"), "packages is not an object");
            goto done;
        }
        const char *key;
        json_t *v;
        json_object_foreach(packages, key, v) {
            if (!read_package(&x, key, v)) {
                /* the line is looked for only now: finding it is slow */
                if (!err->line && !strcmp(err->file, path))
                    err->line = key_line(&x, key);
                goto done;
            }
        }
    } else {
        json_t *deps = json_object_get(root, "dependencies");
        if (deps && !read_v1_deps(&x, deps, "dependencies"))
            goto done;
    }
    ok = true;
done:
    sl_npmcfg_free(x.cfg);
    json_decref(root);
    return ok;
}

const sl_lockreader sl_reader_npm = {
    .name = "npm",
    .recognises = recognises,
    .read = read_npm,
};
