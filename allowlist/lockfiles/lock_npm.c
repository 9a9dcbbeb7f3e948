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
    bool pins;                     /* --pins: rules, and fallbacks for what cannot be pinned */
    sl_npm_pins p;
    sl_url reg;                    /* --pins: the configured registry, parsed once */
    size_t reg_path_len;           /* its path without trailing '/' */
    bool reg_ok;
} npm_ctx;

/* hosted-git-info's hosts and where pacote gets their tarballs */
typedef struct hosted {
    const char *domain;
    const char *shortcut;
    const char *tarball_host;
    /* --pins: the tarball's path (tarballtemplate) from user, project and
     * commit; NULL where it is not "/user/project/..." (gist) or holds an
     * encoded '/' (GitLab's API path), which no rule can name */
    const char *tarball_path;
} hosted;

static const hosted HOSTED[] = {
    { "github.com", "github:", "codeload.github.com", "/%.*s/%.*s/tar.gz/%.*s" },
    { "gist.github.com", "gist:", "codeload.github.com", NULL },
    { "gitlab.com", "gitlab:", "gitlab.com", NULL },
    { "bitbucket.org", "bitbucket:", "bitbucket.org", "/%.*s/%.*s/get/%.*s.tar.gz" },
    { "git.sr.ht", "sourcehut:", "git.sr.ht", "/%.*s/%.*s/archive/%.*s.tar.gz" },
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

/* ======================= --pins ======================================= */

static const char WHY_GIT[] = "a git dependency: the lockfile has no digest of its tarball";
static const char WHY_CLONE[] = "a git dependency, cloned: nothing to pin";
static const char NOTE_V1[] = "packument: npm 7+ reads it to upgrade a lockfileVersion 1";
static const char NOTE_NO_RESOLVED[] = "packument: the entry has no resolved, npm looks its tarball up";

/* A segment of a tarball path written as is: a user, project or commit. */
static bool plain_segment(const char *s, size_t n)
{
    if (n == 0 || n > 200 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '-' || ch == '_' || ch == '~'))
            return false;
    }
    return true;
}

/* A hosted git dependency ("github:o/r#c", "git+ssh://git@github.com/o/r.git#c"):
 * pacote fetches the host's tarball of the commit, which the lockfile has
 * no digest of. Its path, where a rule can name it, lets the fallback be an
 * unpinned rule for exactly that archive when the host has rules. */
static bool pin_hosted(npm_ctx *x, const hosted *h, const char *s, size_t len, const sl_url *u, int line)
{
    const char *hash = memchr(s, '#', len);
    const char *commit = hash ? hash + 1 : s + len;
    size_t clen = (size_t)(s + len - commit);
    if (clen == 0)
        return sl_npm_pin_fallback_host(&x->p, h->domain, strlen(h->domain), 443, NULL,
                                        "a git dependency without a commit: its host is asked for one", line) &&
               sl_npm_pin_fallback_host(&x->p, h->tarball_host, strlen(h->tarball_host), 443, NULL, WHY_GIT, line);
    const char *repo;
    size_t rlen;
    if (u) {
        repo = u->path;
        rlen = u->path_len;
    } else {
        repo = s + strlen(h->shortcut);
        rlen = (size_t)((hash ? hash : s + len) - repo);
    }
    if (rlen && repo[0] == '/') {
        repo++;
        rlen--;
    }
    if (rlen > 4 && !memcmp(repo + rlen - 4, ".git", 4))
        rlen -= 4;
    const char *slash = memchr(repo, '/', rlen);
    size_t ulen = slash ? (size_t)(slash - repo) : 0, plen = slash ? rlen - ulen - 1 : 0;
    if (h->tarball_path && slash && plain_segment(repo, ulen) && plain_segment(slash + 1, plen) &&
        plain_segment(commit, clen)) {
        char url[800];
        int n = snprintf(url, sizeof url, "https://%s", h->tarball_host);
        snprintf(url + n, sizeof url - (size_t)n, h->tarball_path, (int)ulen, repo, (int)plen, slash + 1, (int)clen,
                 commit);
        return sl_npm_pin_fallback(&x->p, url, strlen(url), true, NULL, WHY_GIT, line) >= 0;
    }
    return sl_npm_pin_fallback_host(&x->p, h->tarball_host, strlen(h->tarball_host), 443, NULL, WHY_GIT, line);
}

/* The fallback for what a registry serves when no path can be written for it. */
static bool pin_registry_host(npm_ctx *x, const char *reg, const char *file, const char *why, int line)
{
    sl_url r;
    if (!sl_url_parse(reg, strlen(reg), &r) || r.port < 0) {
        sl_lockerr_set(x->err, file ? file : x->path, 0, "registry '%s' is not a URL", reg);
        return false;
    }
    return sl_npm_pin_fallback_host(&x->p, r.host, r.host_len, r.port, file, why, line);
}

/* Whether the registry rewrite leaves u where it is: the default, where
 * the registry is registry.npmjs.org itself, for nearly every package of a
 * lockfile (the URL is then used as written, not rebuilt). */
static bool rewrite_keeps(const npm_ctx *x, const sl_url *u)
{
    const sl_url *r = &x->reg;
    if (!x->reg_ok || sl_npmcfg_replace_prefix(x->cfg) || strcmp(r->scheme, u->scheme) || r->port != u->port ||
        r->host_len != u->host_len || strncasecmp(r->host, u->host, u->host_len))
        return false;
    size_t pl = x->reg_path_len;
    return pl == 0 || (u->path_len >= pl && !memcmp(u->path, r->path, pl) && (u->path_len == pl || u->path[pl] == '/'));
}

/* A `resolved` value (or a v1 git dependency's `version`) with its integrity. */
static bool pin_resolved(npm_ctx *x, const char *s, size_t len, const char *sri, size_t sri_len, int line)
{
    const hosted *h = hosted_by_shortcut(s, len);
    sl_url u;
    bool is_url = !h && sl_url_parse(s, len, &u);
    if (!h && !is_url)
        return true;                               /* a local path (R5) */
    bool web = is_url && (!strcmp(u.scheme, "https") || !strcmp(u.scheme, "http"));
    const char *repl_file;
    if (sl_npmcfg_replaces(x->cfg, is_url ? &u : NULL, &repl_file)) {
        /* the URL npm fetches instead (reify's #registryResolved) */
        const char *reg_file;
        const char *reg = sl_npmcfg_registry(x->cfg, "", 0, &reg_file);
        const char *cfgfile = reg_file ? reg_file : repl_file;
        if (web && rewrite_keeps(x, &u))
            return sl_npm_pin_tarball(&x->p, s, len, sri, sri_len, cfgfile, line) >= 0;
        char *url = web ? sl_npm_registry_rewrite(reg, &u, sl_npmcfg_replace_prefix(x->cfg)) : NULL;
        bool ok = url ? sl_npm_pin_tarball(&x->p, url, strlen(url), sri, sri_len, cfgfile, line) >= 0
                      : pin_registry_host(x, reg, cfgfile,
                                          "replace-registry-host sends a resolved value that is not a tarball URL "
                                          "to the registry: no path to pin", line);
        free(url);
        return ok;
    }
    if (h)
        return pin_hosted(x, h, s, len, NULL, line);
    if (u.port < 0) {
        sl_lockerr_set(x->err, x->path, line, "no valid port in resolved URL");
        return false;
    }
    bool gitish = !strncmp(u.scheme, "git", 3) || !strcmp(u.scheme, "ssh") || u.scp_style;
    const hosted *hh = hosted_by_host(u.host, u.host_len);
    if (hh && (gitish || (web && two_segments(&u))))
        return pin_hosted(x, hh, s, len, &u, line);
    if (gitish)
        return sl_npm_pin_fallback(&x->p, s, len, false, NULL, WHY_CLONE, line) >= 0;
    return sl_npm_pin_tarball(&x->p, s, len, sri, sri_len, NULL, line) >= 0;
}

/* The packument of name on the registry for its scope (pacote's
 * packumentUrl). A scoped one is a path no rule can allow: the pre-pass
 * (block_*) has made its host a fallback already. */
static bool pin_packument(npm_ctx *x, const char *name, size_t nlen, const char *note, int line)
{
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, nlen, &file);
    char *url = sl_npm_packument_url(reg, name, nlen);
    if (!url)
        return pin_registry_host(x, reg, file, "a package name that cannot be written in a rule's path", line);
    int r = sl_npm_pin_metadata(&x->p, url, strlen(url), file, note, line);
    free(url);
    return r >= 0;
}

/* A registry package npm installs by name and version, an entry without
 * `resolved` (npm/cli#4263): pacote reads its packument, then fetches the
 * tarball the packument names, at the registry's own layout. */
static bool pin_by_name(npm_ctx *x, const char *name, size_t nlen, const char *ver, size_t vlen, const char *sri,
                        size_t sri_len, int line)
{
    if (!pin_packument(x, name, nlen, NOTE_NO_RESOLVED, line))
        return false;
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, nlen, &file);
    char *url = sl_npm_tarball_url(reg, name, nlen, ver, vlen);
    if (!url)
        return pin_registry_host(x, reg, file, "a tarball whose URL cannot be written from its name and version",
                                 line);
    int r = sl_npm_pin_tarball(&x->p, url, strlen(url), sri, sri_len, file, line);
    free(url);
    return r >= 0;
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

/* "node_modules/a/node_modules/@s/b" -> "@s/b" */
static const char *key_basename(const char *key)
{
    const char *last = key;
    for (const char *p = key; (p = strstr(p, "node_modules/")); p += 13)
        last = p + 13;
    return last;
}

/* A version npm fetches from a registry: a semver version or an
 * "npm:real@1.0.0" alias, not a "file:" path or another spec's URL. */
static bool registry_version(const char *version, size_t vlen)
{
    return !starts(version, vlen, "file:") && (!memchr(version, ':', vlen) || starts(version, vlen, "npm:"));
}

/* The real name and version of an "npm:real@1.0.0" alias; otherwise the
 * name and version as they are. */
static void alias_parts(const char *name, size_t nlen, const char *version, size_t vlen, const char **real,
                        size_t *real_len, const char **rver, size_t *rvlen)
{
    *real = name;
    *real_len = nlen;
    *rver = version;
    *rvlen = vlen;
    if (!starts(version, vlen, "npm:"))
        return;
    *real = version + 4;
    const char *at = vlen > 5 ? memchr(*real + 1, '@', vlen - 5) : NULL;
    *real_len = at ? (size_t)(at - *real) : vlen - 4;
    *rver = at ? at + 1 : version + vlen;
    *rvlen = at ? (size_t)(version + vlen - at - 1) : 0;
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

    const char *resolved, *version, *name, *sri = NULL;
    size_t rlen, vlen, nlen, sri_len = 0;
    if (!string_field(x, v, "resolved", key, &resolved, &rlen) ||
        !string_field(x, v, "version", key, &version, &vlen) ||
        !string_field(x, v, "name", key, &name, &nlen) ||
        (x->pins && !string_field(x, v, "integrity", key, &sri, &sri_len)))
        return false;
    if (resolved && rlen)
        return x->pins ? pin_resolved(x, resolved, rlen, sri, sri_len, 0) : add_resolved(x, resolved, rlen, 0);
    if (!version || starts(version, vlen, "file:"))
        return true;                               /* npm cannot fetch it either */
    if (memchr(version, ':', vlen) && !starts(version, vlen, "npm:"))
        return x->pins ? pin_resolved(x, version, vlen, NULL, 0, 0) : add_resolved(x, version, vlen, 0);
    /* No `resolved` (npm/cli#4263): fetched as name@version from the
     * registry for its scope. */
    if (!name) {
        name = key_basename(key);
        nlen = strlen(name);
    }
    if (x->pins) {
        const char *real, *ver;
        size_t real_len, ver_len;
        alias_parts(name, nlen, version, vlen, &real, &real_len, &ver, &ver_len);
        return pin_by_name(x, real, real_len, ver, ver_len, sri, sri_len, 0);
    }
    return sl_npm_add_registry(x->out, x->cfg, name, nlen, x->path, 0, x->err);
}

/* --pins, before anything is added: the hosts that must serve a scoped
 * packument for this lockfile (sl_npm_pins_block_scoped). In v2 and v3
 * only an entry without `resolved` makes npm read a packument. */
static void block_packages(npm_ctx *x, json_t *packages)
{
    const char *key;
    json_t *v;
    json_object_foreach(packages, key, v) {
        const char *nm = strstr(key, "node_modules/");
        if (!*key || !json_is_object(v) || !nm || (nm != key && nm[-1] != '/') || is_true(v, "link") ||
            is_true(v, "inBundle"))
            continue;
        json_t *r = json_object_get(v, "resolved"), *ver = json_object_get(v, "version"),
               *nj = json_object_get(v, "name");
        if ((json_is_string(r) && json_string_length(r)) || !json_is_string(ver))
            continue;
        const char *version = json_string_value(ver);
        size_t vlen = json_string_length(ver);
        if (!registry_version(version, vlen))
            continue;
        const char *name = json_is_string(nj) ? json_string_value(nj) : key_basename(key);
        const char *real, *rver;
        size_t real_len, rvlen;
        alias_parts(name, strlen(name), version, vlen, &real, &real_len, &rver, &rvlen);
        const char *file;
        const char *reg = sl_npmcfg_registry(x->cfg, real, real_len, &file);
        sl_npm_pins_block_scoped(&x->p, reg, real, real_len, "npm");
    }
}

/* The same for v1, where npm 7+ reads the packument of every registry
 * package, bundled ones too, to upgrade the lockfile. */
static void block_v1(npm_ctx *x, json_t *deps)
{
    const char *name;
    json_t *v;
    if (!json_is_object(deps))
        return;
    json_object_foreach(deps, name, v) {
        if (!json_is_object(v))
            continue;
        json_t *ver = json_object_get(v, "version");
        if (json_is_string(ver)) {
            const char *version = json_string_value(ver);
            size_t vlen = json_string_length(ver);
            const char *real, *rver;
            size_t real_len, rvlen;
            alias_parts(name, strlen(name), version, vlen, &real, &real_len, &rver, &rvlen);
            if (registry_version(version, vlen)) {
                const char *file;
                const char *reg = sl_npmcfg_registry(x->cfg, real, real_len, &file);
                sl_npm_pins_block_scoped(&x->p, reg, real, real_len, "npm");
            }
        }
        block_v1(x, json_object_get(v, "dependencies"));
    }
}

/* --pins, v1: a bundled package and what is bundled under it, fetched in
 * its parent's tarball; only their packuments are read (build-ideal-tree's
 * inflate visits every package of the tree). Nothing here is required to
 * be well-formed: the host-entry output never reads it either. */
static bool pin_v1_bundled(npm_ctx *x, const char *name, json_t *v)
{
    json_t *ver = json_object_get(v, "version");
    if (json_is_string(ver)) {
        const char *version = json_string_value(ver);
        size_t vlen = json_string_length(ver);
        const char *real, *rver;
        size_t real_len, rvlen;
        alias_parts(name, strlen(name), version, vlen, &real, &real_len, &rver, &rvlen);
        if (registry_version(version, vlen) && !pin_packument(x, real, real_len, NOTE_V1, 0))
            return false;
    }
    json_t *deps = json_object_get(v, "dependencies");
    const char *sub;
    json_t *sv;
    if (json_is_object(deps))
        json_object_foreach(deps, sub, sv)
            if (json_is_object(sv) && !pin_v1_bundled(x, sub, sv))
                return false;
    return true;
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
        if (is_true(v, "bundled")) {
            /* inside its parent's tarball; with pins, npm 7+ still reads
             * its packument to upgrade the lockfile */
            if (x->pins && x->old && !pin_v1_bundled(x, name, v)) {
                if (!x->err->line && !strcmp(x->err->file, x->path))
                    x->err->line = key_line(x, name);
                return false;
            }
            continue;
        }
        const char *resolved, *version, *sri = NULL;
        size_t rlen, vlen, sri_len = 0;
        if (!string_field(x, v, "resolved", name, &resolved, &rlen) ||
            !string_field(x, v, "version", name, &version, &vlen) ||
            (x->pins && !string_field(x, v, "integrity", name, &sri, &sri_len)))
            return false;
        if (!version) {
            sl_lockerr_set(x->err, x->path, key_line(x, name), "dependencies[\"%s\"] has no version",
                           name);
            return false;
        }
        const char *real, *rver;                   /* "npm:real@1.0.0" aliases */
        size_t real_len, rvlen;
        alias_parts(name, strlen(name), version, vlen, &real, &real_len, &rver, &rvlen);
        bool local = starts(version, vlen, "file:");
        bool registry = !local && (!memchr(version, ':', vlen) || starts(version, vlen, "npm:"));
        bool ok = true;
        if (local)
            ok = true;
        else if (resolved && rlen)
            ok = x->pins ? pin_resolved(x, resolved, rlen, sri, sri_len, 0) : add_resolved(x, resolved, rlen, 0);
        else if (!registry)                        /* git: the version is the URL */
            ok = x->pins ? pin_resolved(x, version, vlen, NULL, 0, 0) : add_resolved(x, version, vlen, 0);
        else if (x->pins)
            ok = pin_by_name(x, real, real_len, rver, rvlen, sri, sri_len, 0);
        else
            ok = sl_npm_add_registry(x->out, x->cfg, real, real_len, x->path, 0, x->err);
        /* npm 7+ upgrades a v1 lockfile with metadata from the registry,
         * for every package it has (build-ideal-tree's inflate) */
        if (ok && registry && x->old)
            ok = x->pins ? pin_packument(x, real, real_len, NOTE_V1, 0)
                         : sl_npm_add_registry(x->out, x->cfg, real, real_len, x->path, 0, x->err);
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
    npm_ctx x = { .path = path, .data = data, .len = len, .out = out, .err = err, .pins = sl_derived_pins(out) };
    sl_npm_pins_init(&x.p, out, path, err);
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

    if (x.pins) {
        const char *reg_file;
        const char *reg = sl_npmcfg_registry(x.cfg, "", 0, &reg_file);
        x.reg_ok = sl_url_parse(reg, strlen(reg), &x.reg) && x.reg.port >= 0 && !x.reg.scp_style;
        x.reg_path_len = x.reg_ok ? x.reg.path_len : 0;
        while (x.reg_path_len && x.reg.path[x.reg_path_len - 1] == '/')
            x.reg_path_len--;
    }

    json_t *packages = json_object_get(root, "packages");
    if (packages) {
        if (!json_is_object(packages)) {
            sl_lockerr_set(err, path, key_line(&x, "packages"), "packages is not an object");
            goto done;
        }
        if (x.pins)
            block_packages(&x, packages);
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
        if (x.pins && x.old)
            block_v1(&x, deps);
        if (deps && !read_v1_deps(&x, deps, "dependencies"))
            goto done;
    }
    ok = true;
done:
    sl_npm_pins_free(&x.p);
    sl_npmcfg_free(x.cfg);
    json_decref(root);
    return ok;
}

const sl_lockreader sl_reader_npm = {
    .name = "npm",
    .recognises = recognises,
    .read = read_npm,
};
