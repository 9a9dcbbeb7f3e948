/* Cargo: Cargo.lock (v1-v4) and the project's .cargo/config.toml.
 *
 * Each [[package]] names its source:
 *   no source                      workspace member or path dependency: nothing
 *   registry+https://github.com/rust-lang/crates.io-index
 *                                  crates.io, spelled this way whatever the
 *                                  protocol: sparse since cargo 1.70, so
 *                                  index.crates.io + static.crates.io (the
 *                                  index's config.json "dl"); with
 *                                  [registries.crates-io] protocol = "git"
 *                                  the index is cloned from github.com
 *   registry+<url>                 an alternative registry, git index
 *   sparse+<url>                   an alternative registry, sparse index
 *   git+<url>[?ref]#<sha>          a git dependency: only the git host (a
 *                                  locked full hash skips GitHub's fast path)
 * Alternative registries download from the "dl" of their index's
 * config.json, which is not known offline: LOCKFILES.md R9 assumes the
 * index's own host:port.
 *
 * Source replacement ([source.<name>] replace-with, followed through chains
 * and into [registries.<name>]) hides the replaced source completely: a
 * mirror's registry URL, or nothing at all for directory/local-registry
 * (vendoring). Config with a source nobody uses adds nothing (R4).
 *
 * With --pins (PINS.md "Cargo"): a crates.io package is a GET rule for
 * static.crates.io/crates/<name>/<version>/download pinned to its checksum
 * (the index's "dl" has no markers, so cargo appends that, name as written),
 * plus unpinned rules for the sparse index files cargo reads:
 * index.crates.io/config.json and the crate's file (make_dep_path of the
 * lower-cased name). A mirror, an alternative registry (its "dl" is in its
 * own config.json) and a git dependency fall back to host entries saying
 * why; a crates.io package without a checksum to an unpinned rule.
 *
 * Cargo reads ".cargo/config" over ".cargo/config.toml" when both exist.
 * Not modelled: config in parent directories and $CARGO_HOME, CARGO_*
 * environment variables, [http] proxy, and rustup toolchain downloads
 * (LOCKFILES.md §4). */
#include "lockfile.h"
#include "text.h"
#include "toml.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CRATES_IO_INDEX "https://github.com/rust-lang/crates.io-index"
#define CRATES_IO_SPARSE "https://index.crates.io"
#define REPLACE_CHAIN_MAX 32       /* cargo refuses cycles; we also bound chains */

typedef enum srckind {
    SRC_CRATES_IO,
    SRC_REGISTRY,                  /* git index: url */
    SRC_SPARSE,                    /* url without "sparse+" */
    SRC_GIT,                       /* url, ref ("branch=x", "tag=x", "rev=x" or "") */
    SRC_LOCAL,                     /* directory, local-registry */
} srckind;

typedef struct srcid {
    srckind kind;
    const char *url;
    size_t url_len;
    char ref[256];                 /* SRC_GIT: decoded "kind=value", "" = default branch */
    int line;                      /* where a config defined it */
} srcid;

typedef struct cargo {
    const char *lock;              /* the lockfile's path */
    const sl_toml *metadata;       /* v1: [metadata], where the checksums are */
    const char *cfg_path;          /* the config's path, NULL without one */
    sl_toml *cfg;
    bool git_protocol;             /* [registries.crates-io] protocol = "git" */
    sl_derived *out;
    sl_lockerr *err;
} cargo;

static bool cargo_recognises(const char *base)
{
    return !strcmp(base, "Cargo.lock");
}

/* A TOML string without embedded NULs, or NULL. */
static const char *toml_text(const sl_toml *v, size_t *len)
{
    size_t n;
    const char *s = sl_toml_str(v, &n);
    if (!s || strlen(s) != n || sl_toml_kind_of(v) != SL_TOML_STRING)
        return NULL;
    if (len)
        *len = n;
    return s;
}

static bool starts(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(s, prefix, n);
}

/* Cargo compares source URLs in canonical form (CanonicalUrl): no trailing
 * '/', no ".git", case-insensitive host, and a case-insensitive path on
 * github.com. Scheme and host are compared case-insensitively here. */
static void canon_span(const char *url, size_t len, size_t *out_len)
{
    while (len > 0 && url[len - 1] == '/')
        len--;
    if (len >= 4 && !strncasecmp(url + len - 4, ".git", 4))
        len -= 4;
    *out_len = len;
}

static bool url_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    canon_span(a, alen, &alen);
    canon_span(b, blen, &blen);
    if (alen != blen)
        return false;
    sl_url ua, ub;
    bool pa = sl_url_parse(a, alen, &ua), pb = sl_url_parse(b, blen, &ub);
    if (!pa || !pb)
        return pa == pb && !memcmp(a, b, alen);
    /* Up to the end of the host: case-insensitive; the rest exactly,
     * except on github.com. */
    size_t ha = (size_t)(ua.host + ua.host_len - a), hb = (size_t)(ub.host + ub.host_len - b);
    if (ha != hb || strncasecmp(a, b, ha))
        return false;
    bool github = ua.host_len == 10 && !strncasecmp(ua.host, "github.com", 10);
    return github ? !strncasecmp(a + ha, b + hb, alen - ha) : !memcmp(a + ha, b + hb, alen - ha);
}

/* A git reference from a lockfile query ("branch=x", "tag=x", "rev=x"),
 * percent-decoded (lockfile v4 encodes it). False if it does not fit. */
static bool decode_ref(const char *q, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        char c = q[i];
        if (c == '%' && i + 2 < len && sl_hexval(q[i + 1]) >= 0 && sl_hexval(q[i + 2]) >= 0) {
            c = (char)(sl_hexval(q[i + 1]) * 16 + sl_hexval(q[i + 2]));
            i += 2;
        }
        if (k + 1 >= cap)
            return false;
        out[k++] = c;
    }
    out[k] = '\0';
    return true;
}

/* Parse a lockfile source string. False: not a source Cargo writes. */
static bool parse_lock_source(const char *s, size_t len, srcid *id)
{
    memset(id, 0, sizeof *id);
    if (starts(s, len, "registry+")) {
        id->url = s + 9;
        id->url_len = len - 9;
        id->kind = url_eq(id->url, id->url_len, CRATES_IO_INDEX, strlen(CRATES_IO_INDEX))
                       ? SRC_CRATES_IO : SRC_REGISTRY;
        return id->url_len > 0;
    }
    if (starts(s, len, "sparse+")) {
        id->url = s + 7;
        id->url_len = len - 7;
        id->kind = url_eq(id->url, id->url_len, CRATES_IO_SPARSE, strlen(CRATES_IO_SPARSE))
                       ? SRC_CRATES_IO : SRC_SPARSE;
        return id->url_len > 0;
    }
    if (starts(s, len, "git+")) {
        id->kind = SRC_GIT;
        id->url = s + 4;
        const char *end = s + len;
        const char *hash = memchr(id->url, '#', (size_t)(end - id->url));
        if (hash)
            end = hash;
        const char *q = memchr(id->url, '?', (size_t)(end - id->url));
        id->url_len = (size_t)((q ? q : end) - id->url);
        if (q && !decode_ref(q + 1, (size_t)(end - q - 1), id->ref, sizeof id->ref))
            return false;
        /* Cargo parses it as a URL: "git@host:path" (scp-style) is refused. */
        const char *sep = memchr(id->url, ':', id->url_len);
        return sep && (size_t)(id->url + id->url_len - sep) > 3 && !memcmp(sep, "://", 3);
    }
    return false;
}

/* The source a [source.<name>] table defines, if any. Cargo allows one
 * location per table. Returns 0 (none), 1 (defined), -1 (error set). */
static int config_source(cargo *c, const sl_toml *t, const char *name, srcid *id)
{
    static const char *const keys[] = { "registry", "local-registry", "directory", "git" };
    int found = -1;
    for (int i = 0; i < 4; i++) {
        const sl_toml *v = sl_toml_get(t, keys[i]);
        if (!v)
            continue;
        if (found >= 0) {
            sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(v),
                           "source.%s: more than one source location specified", name);
            return -1;
        }
        found = i;
    }
    if (found < 0)
        return 0;
    const sl_toml *v = sl_toml_get(t, keys[found]);
    size_t len;
    const char *s = toml_text(v, &len);
    if (!s || len == 0) {
        sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(v),
                       "source.%s.%s: expected a non-empty string", name, keys[found]);
        return -1;
    }
    memset(id, 0, sizeof *id);
    id->url = s;
    id->url_len = len;
    id->line = sl_toml_line(v);
    switch (found) {
    case 0:
        if (starts(s, len, "sparse+")) {
            id->url += 7;
            id->url_len -= 7;
            id->kind = url_eq(id->url, id->url_len, CRATES_IO_SPARSE, strlen(CRATES_IO_SPARSE))
                           ? SRC_CRATES_IO : SRC_SPARSE;
        } else {
            id->kind = url_eq(s, len, CRATES_IO_INDEX, strlen(CRATES_IO_INDEX)) ? SRC_CRATES_IO
                                                                               : SRC_REGISTRY;
        }
        break;
    case 1:
    case 2:
        id->kind = SRC_LOCAL;
        break;
    case 3: {
        id->kind = SRC_GIT;
        static const char *const refs[] = { "branch", "tag", "rev" };
        for (int i = 0; i < 3; i++) {
            const sl_toml *r = sl_toml_get(t, refs[i]);
            if (!r)
                continue;
            const char *rs = toml_text(r, NULL);
            if (!rs || id->ref[0]) {
                sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(r),
                               "source.%s.%s: %s", name, refs[i],
                               rs ? "only one of branch, tag, rev may be given"
                                  : "expected a string");
                return -1;
            }
            if ((size_t)snprintf(id->ref, sizeof id->ref, "%s=%s", refs[i], rs) >= sizeof id->ref) {
                sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(r), "source.%s.%s: too long",
                               name, refs[i]);
                return -1;
            }
        }
        break;
    }
    }
    return 1;
}

static bool same_source(const srcid *a, const srcid *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case SRC_CRATES_IO:
        return true;
    case SRC_GIT:
        return !strcmp(a->ref, b->ref) && url_eq(a->url, a->url_len, b->url, b->url_len);
    case SRC_REGISTRY:
    case SRC_SPARSE:
        return url_eq(a->url, a->url_len, b->url, b->url_len);
    case SRC_LOCAL:
        return false;
    }
    return false;
}

/* Follow the replacement of `id`, if the config replaces it. On return *id
 * is the source actually used and *replaced says whether config chose it.
 * False with err set on a broken config (as cargo itself refuses it). */
static bool resolve(cargo *c, srcid *id, bool *replaced)
{
    *replaced = false;
    const sl_toml *sources = sl_toml_get(c->cfg, "source");
    if (!sources || sl_toml_kind_of(sources) != SL_TOML_TABLE)
        return true;

    /* Which [source.<name>] is this source? crates.io is "crates-io". */
    const sl_toml *tab = NULL;
    const char *name = NULL;
    if (id->kind == SRC_CRATES_IO) {
        tab = sl_toml_get(sources, "crates-io");
        name = "crates-io";
    }
    for (size_t i = 0; !tab && i < sl_toml_count(sources); i++) {
        const char *key;
        const sl_toml *t = sl_toml_entry(sources, i, &key);
        if (sl_toml_kind_of(t) != SL_TOML_TABLE)
            continue;
        srcid def;
        int r = config_source(c, t, key, &def);
        if (r < 0)
            return false;
        if (r > 0 && same_source(&def, id))
            tab = t, name = key;
    }

    for (int hops = 0; tab; hops++) {
        const sl_toml *rw = sl_toml_get(tab, "replace-with");
        if (!rw)
            return true;
        const char *next = toml_text(rw, NULL);
        if (!next) {
            sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(rw),
                           "source.%s.replace-with: expected a string", name);
            return false;
        }
        if (hops >= REPLACE_CHAIN_MAX) {
            sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(rw),
                           "detected a cycle of `replace-with` sources at source.%s", name);
            return false;
        }
        *replaced = true;
        const sl_toml *t = sl_toml_get(sources, next);
        if (t && sl_toml_kind_of(t) == SL_TOML_TABLE) {
            int r = config_source(c, t, next, id);
            if (r < 0)
                return false;
            if (r == 0 && !sl_toml_get(t, "replace-with")) {
                sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(t),
                               "no source location specified for `source.%s`", next);
                return false;
            }
            tab = t;
            name = next;
            continue;
        }
        /* Not a [source]: a registry from [registries.<name>]. */
        const sl_toml *reg = sl_toml_get(sl_toml_get(c->cfg, "registries"), next);
        const sl_toml *index = sl_toml_get(reg, "index");
        size_t len;
        const char *s = toml_text(index, &len);
        if (!s || len == 0) {
            sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(index ? index : rw),
                           "could not find a configured source with the name `%s`", next);
            return false;
        }
        memset(id, 0, sizeof *id);
        id->line = sl_toml_line(index);
        if (starts(s, len, "sparse+")) {
            id->kind = SRC_SPARSE;
            id->url = s + 7;
            id->url_len = len - 7;
        } else {
            id->kind = SRC_REGISTRY;
            id->url = s;
            id->url_len = len;
        }
        return true;
    }
    return true;
}

/* Add host:port of a URL for the lockfile (and the config). */
static bool add_url(cargo *c, const char *url, size_t len, bool with_cfg, const char *errfile,
                    int errline)
{
    char msg[400], tmp[200];
    sl_url u;
    if (!sl_url_parse(url, len, &u))
        return true;               /* a local path or file: URL: nothing to reach */
    if (u.port < 0) {
        sl_lockerr_set(c->err, errfile, errline, "no usable port in '%s'",
                       sl_display_untrusted(url, len, tmp, sizeof tmp, SL_DISPLAY_QMARK));
        return false;
    }
    if (!sl_derived_add(c->out, u.host, u.host_len, u.port, c->lock, msg, sizeof msg) ||
        (with_cfg && !sl_derived_add(c->out, u.host, u.host_len, u.port, c->cfg_path, msg,
                                     sizeof msg))) {
        sl_lockerr_set(c->err, errfile, errline, "%s", msg);
        return false;
    }
    return true;
}

static bool add_host(cargo *c, const char *host, bool with_cfg)
{
    char msg[400];
    if (!sl_derived_add(c->out, host, strlen(host), 443, c->lock, msg, sizeof msg) ||
        (with_cfg && !sl_derived_add(c->out, host, strlen(host), 443, c->cfg_path, msg,
                                     sizeof msg))) {
        sl_lockerr_set(c->err, c->lock, 0, "%s", msg);
        return false;
    }
    return true;
}

/* ---- --pins ---- */

/* A fallback for the lockfile (and the config): a host entry, or with a
 * path an unpinned rule when the host has rules. */
static bool add_fallback(cargo *c, const char *host, size_t hlen, int port, const char *path, bool with_cfg,
                         const char *why, const char *errfile, int errline)
{
    char msg[400];
    size_t plen = path ? strlen(path) : 0;
    if (!sl_derived_add_fallback(c->out, host, hlen, port, path, plen, c->lock, why, msg, sizeof msg) ||
        (with_cfg && !sl_derived_add_fallback(c->out, host, hlen, port, path, plen, c->cfg_path, why, msg,
                                              sizeof msg))) {
        sl_lockerr_set(c->err, errfile, errline, "%s", msg);
        return false;
    }
    return true;
}

static bool add_fallback_url(cargo *c, const char *url, size_t len, bool with_cfg, const char *why,
                             const char *errfile, int errline)
{
    char tmp[200];
    sl_url u;
    if (!sl_url_parse(url, len, &u))
        return true;               /* a local path or file: URL: nothing to reach */
    if (u.port < 0) {
        sl_lockerr_set(c->err, errfile, errline, "no usable port in '%s'",
                       sl_display_untrusted(url, len, tmp, sizeof tmp, SL_DISPLAY_QMARK));
        return false;
    }
    return add_fallback(c, u.host, u.host_len, u.port, NULL, with_cfg, why, errfile, errline);
}

/* A GET rule on host:443 (ndigests 0: unpinned), for the lockfile and the
 * config. */
static bool add_rule(cargo *c, const char *host, const char *path, const char *const *digests,
                     size_t ndigests, bool with_cfg, const char *note, int line)
{
    char msg[400];
    size_t hlen = strlen(host), plen = strlen(path);
    if (!sl_derived_add_rule(c->out, host, hlen, 443, path, plen, digests, ndigests, c->lock, note, msg,
                             sizeof msg) ||
        (with_cfg && !sl_derived_add_rule(c->out, host, hlen, 443, path, plen, digests, ndigests,
                                          c->cfg_path, note, msg, sizeof msg))) {
        sl_lockerr_set(c->err, c->lock, line, "%s", msg);
        return false;
    }
    return true;
}

/* crates.io allows ASCII letters, digits, '-' and '_' in a name; anything
 * else could not stand literally in the URL cargo builds. */
static bool crate_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
            return false;
    return true;
}

/* A semver version as cargo prints it: digits, letters, '.', '-', '+'. */
static bool crate_version_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] < '0' || s[0] > '9')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-' || s[i] == '+'))
            return false;
    return true;
}

/* The sparse index file of a crate, as cargo's make_dep_path names it for
 * the lower-cased name: /1/a, /2/ab, /3/a/abc, /ab/cd/abcd... (name
 * already checked: ASCII, at most 64 bytes). */
static void index_path(const char *name, char *out, size_t cap)
{
    char low[65];
    size_t n = strlen(name);
    for (size_t i = 0; i <= n; i++)
        low[i] = (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] - 'A' + 'a') : name[i];
    if (n <= 2)
        snprintf(out, cap, "/%zu/%s", n, low);
    else if (n == 3)
        snprintf(out, cap, "/3/%c/%s", low[0], low);
    else
        snprintf(out, cap, "/%.2s/%.2s/%s", low, low + 2, low);
}

/* The checksum of a package: its own `checksum` (lockfile v2 on), or the
 * v1 [metadata] entry "checksum NAME VERSION (SOURCE)". NULL if none
 * ("<none>" is v1's way of saying so). */
static const sl_toml *package_checksum(const cargo *c, const sl_toml *pkg, const char *name,
                                       const char *version, const char *source)
{
    const sl_toml *v = sl_toml_get(pkg, "checksum");
    if (v || !c->metadata)
        return v;
    size_t klen = strlen(name) + strlen(version) + strlen(source) + 16;
    char *key = malloc(klen);
    if (!key)
        abort();
    snprintf(key, klen, "checksum %s %s (%s)", name, version, source);
    v = sl_toml_get(c->metadata, key);
    free(key);
    size_t n;
    const char *s = toml_text(v, &n);
    if (s && !strcmp(s, "<none>"))
        return NULL;
    return v;
}

/* One crates.io package: its pinned .crate and the index files cargo reads
 * for it. */
static bool add_crates_io_pins(cargo *c, const sl_toml *pkg, const char *source, bool replaced, int line)
{
    char tmp[200];
    const char *name = toml_text(sl_toml_get(pkg, "name"), NULL);
    const sl_toml *ver = sl_toml_get(pkg, "version");
    const char *version = toml_text(ver, NULL);
    if (!crate_name_ok(name)) {
        sl_lockerr_set(c->err, c->lock, sl_toml_line(pkg), "crate name '%s' is not one crates.io allows: "
                       "no URL can be derived for it",
                       sl_display_untrusted(name, strlen(name), tmp, sizeof tmp, SL_DISPLAY_QMARK));
        return false;
    }
    if (!version || !crate_version_ok(version)) {
        sl_lockerr_set(c->err, c->lock, ver ? sl_toml_line(ver) : sl_toml_line(pkg),
                       "package %s: %s", name, version ? "version is not a semver version" : "no version");
        return false;
    }
    if (c->git_protocol) {
        if (!add_fallback(c, "github.com", 10, 443, NULL, true,
                          "crates.io's git index is cloned, and git fetches by POST", c->lock, line))
            return false;
    } else {
        char ipath[80];
        index_path(name, ipath, sizeof ipath);
        if (!add_rule(c, "index.crates.io", "/config.json", NULL, 0, replaced, "sparse index config", line) ||
            !add_rule(c, "index.crates.io", ipath, NULL, 0, replaced, "sparse index", line))
            return false;
    }
    char path[256];
    snprintf(path, sizeof path, "/crates/%s/%s/download", name, version);
    const sl_toml *sum = package_checksum(c, pkg, name, version, source);
    bool dl_cfg = replaced || c->git_protocol;
    if (!sum)
        return add_fallback(c, "static.crates.io", 16, 443, path, dl_cfg, "no checksum in Cargo.lock", c->lock,
                            line);
    size_t n;
    const char *hex = toml_text(sum, &n);
    char sri[SL_SRI_MAX];
    if (!hex || !sl_sri_from_hex("sha256", 6, hex, n, sri)) {
        sl_lockerr_set(c->err, c->lock, sl_toml_line(sum), "package %s: checksum is not a SHA-256 in hex", name);
        return false;
    }
    const char *d[1] = { sri };
    return add_rule(c, "static.crates.io", path, d, 1, dl_cfg, NULL, line);
}

/* With pins: what one package needs. */
static bool add_package_pins(cargo *c, const sl_toml *pkg, const char *s, size_t len, int line)
{
    char tmp[200];
    srcid id;
    if (!parse_lock_source(s, len, &id)) {
        sl_lockerr_set(c->err, c->lock, line, "unsupported package source '%s'%s",
                       sl_display_untrusted(s, len, tmp, sizeof tmp, SL_DISPLAY_QMARK),
                       starts(s, len, "git+") ? " (cargo wants a URL: ssh://git@host/path, "
                                                "not scp-style git@host:path)" : "");
        return false;
    }
    bool replaced = false;
    if (c->cfg && !resolve(c, &id, &replaced))
        return false;
    const char *errfile = replaced ? c->cfg_path : c->lock;
    int errline = replaced ? id.line : line;
    switch (id.kind) {
    case SRC_LOCAL:
        return true;
    case SRC_CRATES_IO:
        return add_crates_io_pins(c, pkg, s, replaced, line);
    case SRC_REGISTRY:
        return add_fallback_url(c, id.url, id.url_len, replaced,
                                replaced ? "a git-index mirror: its download URL is in its config.json, unknown "
                                           "offline"
                                         : "a git-index registry: its download URL is in its config.json, "
                                           "unknown offline",
                                errfile, errline);
    case SRC_SPARSE:
        return add_fallback_url(c, id.url, id.url_len, replaced,
                                replaced ? "a sparse mirror: its download URL is in its config.json, unknown "
                                           "offline"
                                         : "a sparse registry: its download URL is in its config.json, "
                                           "unknown offline",
                                errfile, errline);
    case SRC_GIT:
        return add_fallback_url(c, id.url, id.url_len, replaced,
                                "a git dependency is fetched by commit, with no digest of the download",
                                errfile, errline);
    }
    return true;
}

/* The endpoints of one package source. `line` is the lockfile line. */
static bool add_source(cargo *c, const char *s, size_t len, int line)
{
    char tmp[200];
    srcid id;
    if (!parse_lock_source(s, len, &id)) {
        sl_lockerr_set(c->err, c->lock, line, "unsupported package source '%s'%s",
                       sl_display_untrusted(s, len, tmp, sizeof tmp, SL_DISPLAY_QMARK),
                       starts(s, len, "git+") ? " (cargo wants a URL: ssh://git@host/path, "
                                                "not scp-style git@host:path)" : "");
        return false;
    }
    bool replaced = false;
    if (c->cfg && !resolve(c, &id, &replaced))
        return false;
    /* A replacement URL is the config's to answer for. */
    const char *errfile = replaced ? c->cfg_path : c->lock;
    int errline = replaced ? id.line : line;
    switch (id.kind) {
    case SRC_LOCAL:
        return true;
    case SRC_CRATES_IO:
        if (c->git_protocol)
            return add_host(c, "github.com", true) && add_host(c, "static.crates.io", true);
        return add_host(c, "index.crates.io", replaced) &&
               add_host(c, "static.crates.io", replaced);
    case SRC_REGISTRY:
    case SRC_SPARSE:
    case SRC_GIT:
        return add_url(c, id.url, id.url_len, replaced, errfile, errline);
    }
    return true;
}

/* .cargo/config (preferred by cargo when both exist) or .cargo/config.toml. */
static bool load_config(cargo *c, sl_project *proj)
{
    static const char *const names[] = { ".cargo/config", ".cargo/config.toml" };
    for (int i = 0; i < 2; i++) {
        sl_lockerr e = { .msg = "" };
        size_t len;
        const char *path;
        const char *data = sl_project_file(proj, names[i], &len, &path, &e);
        if (!data) {
            if (e.msg[0]) {
                *c->err = e;
                return false;
            }
            continue;
        }
        char msg[256];
        int line = 0;
        c->cfg = sl_toml_parse(data, len, msg, sizeof msg, &line);
        if (!c->cfg) {
            sl_lockerr_set(c->err, path, line, "%s", msg[0] ? msg : "invalid TOML");
            return false;
        }
        c->cfg_path = path;
        break;
    }
    if (!c->cfg)
        return true;
    const sl_toml *proto = sl_toml_get(sl_toml_get(sl_toml_get(c->cfg, "registries"), "crates-io"),
                                       "protocol");
    if (proto) {
        const char *p = toml_text(proto, NULL);
        if (!p || (strcmp(p, "git") && strcmp(p, "sparse"))) {
            sl_lockerr_set(c->err, c->cfg_path, sl_toml_line(proto),
                           "registries.crates-io.protocol: expected \"git\" or \"sparse\"");
            return false;
        }
        c->git_protocol = !strcmp(p, "git");
    }
    return true;
}

static bool cargo_read(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    char msg[256];
    int line = 0;
    sl_toml *lock = sl_toml_parse(data, len, msg, sizeof msg, &line);
    if (!lock) {
        sl_lockerr_set(err, path, line, "%s", msg[0] ? msg : "invalid TOML");
        return false;
    }
    cargo c = { .lock = path, .out = out, .err = err };
    bool ok = false;

    const sl_toml *ver = sl_toml_get(lock, "version");
    long long v = 0;
    if (ver && (!sl_toml_int(ver, &v) || v < 1 || v > 4)) {
        sl_lockerr_set(err, path, sl_toml_line(ver), "unsupported Cargo.lock version (1 to 4 known)");
        goto out;
    }
    const sl_toml *pkgs = sl_toml_get(lock, "package");
    if (pkgs && sl_toml_kind_of(pkgs) != SL_TOML_ARRAY) {
        sl_lockerr_set(err, path, sl_toml_line(pkgs), "'package' is not an array of tables");
        goto out;
    }
    size_t n = sl_toml_count(pkgs);
    /* Validate every package before any config is read: a lockfile that is
     * not one is refused for what it is. */
    bool any_source = false;
    for (size_t i = 0; i < n; i++) {
        const sl_toml *p = sl_toml_at(pkgs, i);
        if (sl_toml_kind_of(p) != SL_TOML_TABLE || !toml_text(sl_toml_get(p, "name"), NULL)) {
            sl_lockerr_set(err, path, sl_toml_line(p), "[[package]] without a name");
            goto out;
        }
        const sl_toml *src = sl_toml_get(p, "source");
        if (src && !toml_text(src, NULL)) {
            sl_lockerr_set(err, path, sl_toml_line(src), "package source is not a string");
            goto out;
        }
        any_source = any_source || src;
    }
    /* Config alone adds nothing (R4), but a broken config breaks cargo: it
     * is read whenever something would be fetched. */
    if (any_source && !load_config(&c, proj))
        goto out;

    const sl_toml *meta = sl_toml_get(lock, "metadata");
    c.metadata = meta && sl_toml_kind_of(meta) == SL_TOML_TABLE ? meta : NULL;
    bool pins = sl_derived_pins(out);
    const char *last = NULL;
    for (size_t i = 0; i < n; i++) {
        const sl_toml *pkg = sl_toml_at(pkgs, i);
        const sl_toml *src = sl_toml_get(pkg, "source");
        size_t slen;
        const char *s = toml_text(src, &slen);
        if (!s)
            continue;              /* workspace member or path dependency */
        if (pins) {
            if (!add_package_pins(&c, pkg, s, slen, sl_toml_line(src)))
                goto out;
            continue;
        }
        if (last && !strcmp(last, s))
            continue;              /* the same source as the package before */
        if (!add_source(&c, s, slen, sl_toml_line(src)))
            goto out;
        last = s;
    }
    ok = true;
out:
    sl_toml_free(c.cfg);
    sl_toml_free(lock);
    return ok;
}

const sl_lockreader sl_reader_cargo = {
    .name = "cargo",
    .recognises = cargo_recognises,
    .read = cargo_read,
};
