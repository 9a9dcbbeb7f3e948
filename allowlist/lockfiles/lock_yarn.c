/* yarn.lock: Yarn 1 (its own text format, `# yarn lockfile v1`) and Yarn 2+
 * ("berry": YAML with a __metadata block), told apart by content.
 *
 * Yarn 1 fetches each entry's `resolved` URL as written; only an entry
 * without one is resolved through the registry of .npmrc/.yarnrc. Berry
 * records no URLs for registry packages: the host is the registry of
 * .yarnrc.yml (berry never reads .npmrc). LOCKFILES.md §2. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "lockfile.h"
#include "npmrc.h"
#include "text.h"
#include "url.h"

static bool starts(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(s, prefix, n);
}

/* "name@range" / "@scope/name@range": the '@' that ends the name, or NULL. */
static const char *name_end(const char *s, size_t len)
{
    if (len < 2)
        return NULL;
    return memchr(s + 1, '@', len - 1);
}

/* GitHub's git URLs Yarn fetches as archives: https://github.com/o/r(.git) */
static bool github_repo_url(const sl_url *u)
{
    if (strcmp(u->scheme, "https") && strcmp(u->scheme, "http"))
        return false;
    if (u->host_len != 10 || strncasecmp(u->host, "github.com", 10))
        return false;
    /* exactly "/owner/repo" */
    const char *p = u->path, *end = u->path + u->path_len;
    if (p == end || *p != '/')
        return false;
    const char *s1 = memchr(p + 1, '/', (size_t)(end - p - 1));
    if (!s1 || s1 == p + 1 || s1 + 1 >= end)
        return false;
    return !memchr(s1 + 1, '/', (size_t)(end - s1 - 1));
}

/* ======================= Yarn 1 =================================== */

typedef struct y1_ctx {
    const char *path;
    sl_npmcfg *cfg;
    sl_derived *out;
    sl_lockerr *err;
    bool in_entry;
    int entry_line;
    char *key;                     /* first key of the entry, decoded */
    size_t key_len;
    char *resolved;
    size_t resolved_len;
    bool has_resolved, has_version;
    /* --pins: each entry is kept, then emitted once every entry is known
     * (a scoped packument anywhere decides for its registry's host) */
    bool pins;
    sl_npm_pins p;
    char *version, *integrity;
    size_t version_len, integrity_len;
    struct y1_entry *entries;
    size_t nentries, capentries;
} y1_ctx;

typedef struct y1_entry {
    char *key, *resolved, *version, *integrity;  /* resolved and integrity may be NULL */
    size_t key_len, resolved_len, version_len, integrity_len;
    int line;
} y1_entry;

/* Hosted shorthands Yarn 1 resolves itself (github:o/r, o/r): it asks the
 * host over https for the commit, then GitHub's tarball comes from
 * codeload. Returns 1 if handled, 0 if not a shorthand, -1 on error. */
static int y1_shorthand(y1_ctx *x, const char *range, size_t len)
{
    const char *host = NULL, *extra = NULL;
    if (starts(range, len, "github:") || (!memchr(range, ':', len) && memchr(range, '/', len) &&
                                          range[0] != '.' && range[0] != '/' && range[0] != '~')) {
        host = "github.com";
        extra = "codeload.github.com";
    } else if (starts(range, len, "gitlab:")) {
        host = "gitlab.com";
    } else if (starts(range, len, "bitbucket:")) {
        host = "bitbucket.org";
    } else {
        return 0;
    }
    if (!sl_npm_add_host(x->out, host, strlen(host), 443, x->path, NULL, x->entry_line, x->err))
        return -1;
    if (extra && !sl_npm_add_host(x->out, extra, strlen(extra), 443, x->path, NULL, x->entry_line, x->err))
        return -1;
    return 1;
}

/* Move a string out of the context: the kept entry owns it now. */
static char *y1_take(char **s, size_t *len, size_t *out_len)
{
    char *t = *s;
    *out_len = *len;
    *s = NULL;
    *len = 0;
    return t;
}

static bool y1_finish(y1_ctx *x)
{
    x->in_entry = false;
    if (!x->has_version) {
        sl_lockerr_set(x->err, x->path, x->entry_line, "entry has no version");
        return false;
    }
    if (x->pins) {
        if (x->nentries == x->capentries) {
            x->capentries = x->capentries ? x->capentries * 2 : 64;
            x->entries = sl_xrealloc(x->entries, x->capentries * sizeof *x->entries);
        }
        y1_entry *e = &x->entries[x->nentries++];
        e->key = y1_take(&x->key, &x->key_len, &e->key_len);
        e->resolved = x->has_resolved ? y1_take(&x->resolved, &x->resolved_len, &e->resolved_len) : NULL;
        if (!e->resolved)
            e->resolved_len = 0;
        e->version = y1_take(&x->version, &x->version_len, &e->version_len);
        e->integrity = y1_take(&x->integrity, &x->integrity_len, &e->integrity_len);
        e->line = x->entry_line;
        return true;
    }
    if (x->has_resolved) {
        /* verbatim: 0 means a local path, which adds nothing */
        return sl_npm_add_url(x->out, x->resolved, x->resolved_len, x->path, NULL, x->entry_line,
                              x->err) >= 0;
    }
    /* No `resolved`: Yarn resolves the pattern itself. */
    const char *at = name_end(x->key, x->key_len);
    if (!at) {
        sl_lockerr_set(x->err, x->path, x->entry_line, "entry key is not a package pattern");
        return false;
    }
    const char *name = x->key;
    size_t name_len = (size_t)(at - x->key);
    const char *range = at + 1;
    size_t rlen = x->key_len - name_len - 1;
    if (starts(range, rlen, "file:") || starts(range, rlen, "link:") ||
        starts(range, rlen, "portal:") || starts(range, rlen, "workspace:") ||
        starts(range, rlen, "./") || starts(range, rlen, "../") || starts(range, rlen, "/") ||
        starts(range, rlen, "~/"))
        return true;
    if (starts(range, rlen, "npm:")) {
        /* an alias: the real name decides the scope */
        name = range + 4;
        const char *e = name_end(name, rlen - 4);
        name_len = e ? (size_t)(e - name) : rlen - 4;
    } else {
        sl_url u;
        if (sl_url_parse(range, rlen, &u))
            return sl_npm_add_url(x->out, range, rlen, x->path, NULL, x->entry_line, x->err) >= 0;
        int r = y1_shorthand(x, range, rlen);
        if (r)
            return r > 0;
    }
    return sl_npm_add_registry(x->out, x->cfg, name, name_len, x->path, x->entry_line, x->err);
}

static void y1_reset(y1_ctx *x)
{
    free(x->key);
    free(x->resolved);
    free(x->version);
    free(x->integrity);
    x->key = x->resolved = x->version = x->integrity = NULL;
    x->key_len = x->resolved_len = x->version_len = x->integrity_len = 0;
    x->has_resolved = x->has_version = false;
}

static char *decode(const sl_y1_tok *t, size_t *len)
{
    *len = sl_y1_text(t, NULL, 0);
    char *s = sl_xrealloc(NULL, *len + 1);
    sl_y1_text(t, s, *len + 1);
    return s;
}

static bool tok_is(const sl_y1_tok *t, const char *word)
{
    char buf[16];
    size_t n = sl_y1_text(t, buf, sizeof buf);
    return n == strlen(word) && !memcmp(buf, word, n);
}

static bool y1_event(void *vctx, sl_y1_event ev, int depth, const sl_y1_tok *key, size_t nkeys,
                     const sl_y1_tok *value, int line)
{
    y1_ctx *x = vctx;
    (void)nkeys;
    switch (ev) {
    case SL_Y1_OPEN:
        if (depth == 0) {
            y1_reset(x);
            x->in_entry = true;
            x->entry_line = line;
            x->key = decode(key, &x->key_len);
        }
        return true;
    case SL_Y1_CLOSE:
        if (depth == 0 && x->in_entry)
            return y1_finish(x);
        return true;
    case SL_Y1_PAIR:
        if (depth != 1 || !x->in_entry)
            return true;
        if (tok_is(key, "resolved")) {
            if (value->kind != SL_Y1_STRING) {
                sl_lockerr_set(x->err, x->path, line, "resolved is not a string");
                return false;
            }
            free(x->resolved);
            x->resolved = decode(value, &x->resolved_len);
            x->has_resolved = true;
        } else if (tok_is(key, "version")) {
            x->has_version = true;
            if (x->pins) {
                free(x->version);
                x->version = decode(value, &x->version_len);
            }
        } else if (x->pins && tok_is(key, "integrity") && value->kind == SL_Y1_STRING) {
            free(x->integrity);
            x->integrity = decode(value, &x->integrity_len);
        }
        return true;
    }
    return true;
}

/* ---- --pins ---- */

static const char Y1_WHY_GIT[] = "a git dependency: Yarn clones it, nothing to pin";
static const char Y1_NOTE_MIGRATE[] = "packument: the entry has no integrity, Yarn reads one from it";
static const char Y1_NOTE_NO_RESOLVED[] = "packument: the entry has no resolved, Yarn looks its tarball up";

typedef enum y1_kind { Y1_REGISTRY, Y1_LOCAL, Y1_URL, Y1_HOSTED, Y1_NOT_A_PATTERN } y1_kind;

/* What an entry's pattern asks for, as y1_finish reads it: the resolver
 * Yarn picks, and for a registry package its real name. */
static y1_kind y1_classify(const y1_entry *e, const char **name, size_t *name_len, const char **range,
                           size_t *rlen)
{
    const char *at = name_end(e->key, e->key_len);
    if (!at)
        return Y1_NOT_A_PATTERN;
    *name = e->key;
    *name_len = (size_t)(at - e->key);
    *range = at + 1;
    *rlen = e->key_len - *name_len - 1;
    const char *r = *range;
    size_t n = *rlen;
    if (starts(r, n, "file:") || starts(r, n, "link:") || starts(r, n, "portal:") || starts(r, n, "workspace:") ||
        starts(r, n, "./") || starts(r, n, "../") || starts(r, n, "/") || starts(r, n, "~/"))
        return Y1_LOCAL;
    if (starts(r, n, "npm:")) {
        *name = r + 4;
        const char *end = name_end(*name, n - 4);
        *name_len = end ? (size_t)(end - *name) : n - 4;
        return Y1_REGISTRY;
    }
    sl_url u;
    if (sl_url_parse(r, n, &u))
        return Y1_URL;
    if (starts(r, n, "github:") || starts(r, n, "gitlab:") || starts(r, n, "bitbucket:") ||
        (!memchr(r, ':', n) && memchr(r, '/', n) && r[0] != '.' && r[0] != '/' && r[0] != '~'))
        return Y1_HOSTED;
    return Y1_REGISTRY;
}

/* The npm family's registry request (NpmRegistry.getRequestUrl) upgrades
 * http to https on yarnpkg.com, npmjs.org and npmjs.com and their
 * subdomains. Returns a malloc'd URL. */
static char *y1_request_url(const char *url, size_t len)
{
    static const char *const hosts[] = { "yarnpkg.com", "npmjs.org", "npmjs.com" };
    if (starts(url, len, "http://")) {
        const char *h = url + 7, *end = url + len;
        const char *slash = memchr(h, '/', (size_t)(end - h));
        size_t hl = (size_t)((slash ? slash : end) - h);
        for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
            size_t n = strlen(hosts[i]);
            if (hl >= n && !memcmp(h + hl - n, hosts[i], n) && (hl == n || h[hl - n - 1] == '.')) {
                char *t = sl_xrealloc(NULL, len + 2);
                memcpy(t, "https://", 8);
                memcpy(t + 8, h, (size_t)(end - h));
                t[len + 1] = '\0';
                return t;
            }
        }
    }
    return sl_xstrndup(url, len);
}

static int y1_pin_tarball(y1_ctx *x, const char *url, size_t len, const y1_entry *e, const char *cfgfile)
{
    char *t = y1_request_url(url, len);
    int r = sl_npm_pin_tarball(&x->p, t, strlen(t), e->integrity, e->integrity_len, cfgfile, e->line);
    free(t);
    return r;
}

/* A URL Yarn 1 fetches for an entry: git URLs are cloned, others are
 * tarballs. */
static bool y1_pin_url(y1_ctx *x, const char *url, size_t len, const y1_entry *e)
{
    sl_url u;
    if (!sl_url_parse(url, len, &u))
        return true;                               /* a local path (R5) */
    bool gitish = !strncmp(u.scheme, "git", 3) || !strcmp(u.scheme, "ssh") || u.scp_style;
    if (gitish)
        return sl_npm_pin_fallback(&x->p, url, len, false, NULL, Y1_WHY_GIT, e->line) >= 0;
    return y1_pin_tarball(x, url, len, e, NULL) >= 0;
}

static bool y1_pin_packument(y1_ctx *x, const char *name, size_t name_len, const char *note, int line)
{
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, name_len, &file);
    char *url = sl_npm_packument_url(reg, name, name_len);
    int r;
    if (url) {
        char *t = y1_request_url(url, strlen(url));
        r = sl_npm_pin_metadata(&x->p, t, strlen(t), file, note, line);
        free(t);
    } else {
        sl_url u;
        if (!sl_url_parse(reg, strlen(reg), &u) || u.port < 0) {
            sl_lockerr_set(x->err, file ? file : x->path, 0, "registry '%s' is not a URL", reg);
            return false;
        }
        r = sl_npm_pin_fallback_host(&x->p, u.host, u.host_len, u.port, file,
                                     "a package name that cannot be written in a rule's path", line) ? 1 : -1;
    }
    free(url);
    return r >= 0;
}

/* Does Yarn read this entry's packument? For a registry pattern: when the
 * entry has no `resolved` (it resolves the pattern), or no `integrity`
 * (NpmResolver adds one from the packument, "integrity migration"). */
static bool y1_reads_packument(const y1_entry *e, y1_kind kind)
{
    return kind == Y1_REGISTRY && (!e->resolved || !e->integrity || !e->integrity_len);
}

static bool y1_pin_entry(y1_ctx *x, const y1_entry *e)
{
    const char *name = NULL, *range = NULL;
    size_t name_len = 0, rlen = 0;
    y1_kind kind = y1_classify(e, &name, &name_len, &range, &rlen);
    if (y1_reads_packument(e, kind) &&
        !y1_pin_packument(x, name, name_len, e->resolved ? Y1_NOTE_MIGRATE : Y1_NOTE_NO_RESOLVED, e->line))
        return false;
    if (e->resolved)
        return y1_pin_url(x, e->resolved, e->resolved_len, e);   /* verbatim */
    switch (kind) {
    case Y1_NOT_A_PATTERN:
        sl_lockerr_set(x->err, x->path, e->line, "entry key is not a package pattern");
        return false;
    case Y1_LOCAL:
        return true;
    case Y1_URL:
        return y1_pin_url(x, range, rlen, e);
    case Y1_HOSTED: {
        /* Yarn asks the host for the commit, then GitHub's tarball comes
         * from codeload: no digest of either */
        const char *host = starts(range, rlen, "gitlab:") ? "gitlab.com"
                           : starts(range, rlen, "bitbucket:") ? "bitbucket.org" : "github.com";
        return sl_npm_pin_fallback_host(&x->p, host, strlen(host), 443, NULL, Y1_WHY_GIT, e->line) &&
               (strcmp(host, "github.com") ||
                sl_npm_pin_fallback_host(&x->p, "codeload.github.com", 19, 443, NULL, Y1_WHY_GIT, e->line));
    }
    case Y1_REGISTRY:
        break;
    }
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, name_len, &file);
    char *url = sl_npm_tarball_url(reg, name, name_len, e->version, e->version_len);
    if (!url) {
        sl_url u;
        if (!sl_url_parse(reg, strlen(reg), &u) || u.port < 0) {
            sl_lockerr_set(x->err, file ? file : x->path, 0, "registry '%s' is not a URL", reg);
            return false;
        }
        return sl_npm_pin_fallback_host(&x->p, u.host, u.host_len, u.port, file,
                                        "a tarball whose URL cannot be written from its name and version", e->line);
    }
    int r = y1_pin_tarball(x, url, strlen(url), e, file);
    free(url);
    return r >= 0;
}

/* Every entry is known: first the registries that must serve a scoped
 * packument, then the rules. */
static bool y1_pin_all(y1_ctx *x)
{
    for (size_t i = 0; i < x->nentries; i++) {
        const y1_entry *e = &x->entries[i];
        const char *name, *range;
        size_t name_len, rlen;
        y1_kind kind = y1_classify(e, &name, &name_len, &range, &rlen);
        if (y1_reads_packument(e, kind)) {
            const char *file;
            const char *reg = sl_npmcfg_registry(x->cfg, name, name_len, &file);
            sl_npm_pins_block_scoped(&x->p, reg, name, name_len, "Yarn");
        }
    }
    for (size_t i = 0; i < x->nentries; i++)
        if (!y1_pin_entry(x, &x->entries[i]))
            return false;
    return true;
}

static void y1_free_entries(y1_ctx *x)
{
    for (size_t i = 0; i < x->nentries; i++) {
        free(x->entries[i].key);
        free(x->entries[i].resolved);
        free(x->entries[i].version);
        free(x->entries[i].integrity);
    }
    free(x->entries);
}

static bool read_yarn1(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    /* Yarn 1 asks .npmrc, then .yarnrc, and defaults to its own registry. */
    sl_npmcfg *cfg = sl_npmcfg_new("https://registry.yarnpkg.com");
    y1_ctx x = { .path = path, .cfg = cfg, .out = out, .err = err, .pins = sl_derived_pins(out) };
    sl_npm_pins_init(&x.p, out, path, err);
    bool ok = sl_npmcfg_load_npmrc(cfg, proj, err) && sl_npmcfg_load_yarnrc(cfg, proj, err);
    if (ok) {
        int line = 0;
        const char *why = NULL;
        err->msg[0] = '\0';
        ok = sl_y1_parse(data, len, y1_event, &x, &line, &why);
        if (!ok && why)
            sl_lockerr_set(err, path, line, "%s", why);
    }
    if (ok && x.pins)
        ok = y1_pin_all(&x);
    y1_reset(&x);
    y1_free_entries(&x);
    sl_npm_pins_free(&x.p);
    sl_npmcfg_free(cfg);
    return ok;
}

/* ======================= Yarn 2+ ================================== */

typedef struct berry_ctx {
    const char *path;
    sl_npmcfg *cfg;
    sl_derived *out;
    sl_lockerr *err;
    sl_npm_pins *pins;             /* --pins, else NULL */
} berry_ctx;

/* --pins: berry records a `checksum` over the zip it repacks each package
 * into, not over the bytes it downloads (LOCKFILES.md 7), so nothing it
 * fetches can be pinned: every host stays a host entry, saying so. */
static const char WHY_BERRY[] = "Yarn berry's checksum is over its cache zip, not the download: nothing to pin";

static bool berry_host(berry_ctx *x, const char *host, size_t len, int port, int line)
{
    if (x->pins)
        return sl_npm_pin_fallback_host(x->pins, host, len, port, NULL, WHY_BERRY, line);
    return sl_npm_add_host(x->out, host, len, port, x->path, NULL, line, x->err);
}

static int berry_url(berry_ctx *x, const char *url, size_t len, int line)
{
    if (x->pins)
        return sl_npm_pin_fallback(x->pins, url, len, false, NULL, WHY_BERRY, line);
    return sl_npm_add_url(x->out, url, len, x->path, NULL, line, x->err);
}

static bool berry_registry(berry_ctx *x, const char *ident, size_t len, int line)
{
    if (!x->pins)
        return sl_npm_add_registry(x->out, x->cfg, ident, len, x->path, line, x->err);
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, ident, len, &file);
    sl_url u;
    if (!sl_url_parse(reg, strlen(reg), &u) || u.port < 0) {
        sl_lockerr_set(x->err, file ? file : x->path, 0, "registry '%s' is not a URL", reg);
        return false;
    }
    return sl_npm_pin_fallback_host(x->pins, u.host, u.host_len, u.port, file, WHY_BERRY, line);
}

/* Locator parts are URL-encoded (querystring style: '+' is a space). */
static char *percent_decode(const char *s, size_t len, size_t *out_len)
{
    char *d = sl_xrealloc(NULL, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%' && i + 2 < len && sl_hexval(s[i + 1]) >= 0 && sl_hexval(s[i + 2]) >= 0) {
            d[k++] = (char)(sl_hexval(s[i + 1]) << 4 | sl_hexval(s[i + 2]));
            i += 2;
        } else if (s[i] == '+') {
            d[k++] = ' ';
        } else {
            d[k++] = s[i];
        }
    }
    d[k] = '\0';
    *out_len = k;
    return d;
}

/* The value of `name` in "a=1&b=2" parameters, still encoded. */
static bool param(const char *s, size_t len, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);
    size_t i = 0;
    while (i < len) {
        const char *amp = memchr(s + i, '&', len - i);
        size_t end = amp ? (size_t)(amp - s) : len;
        if (end - i > nl && !memcmp(s + i, name, nl) && s[i + nl] == '=') {
            *val = s + i + nl + 1;
            *vlen = end - i - nl - 1;
            return true;
        }
        i = end + 1;
    }
    return false;
}

static bool berry_locator(berry_ctx *x, const char *s, size_t len, int line, int depth);

static bool berry_git_or_url(berry_ctx *x, const char *ref, size_t rlen, int line)
{
    /* GitHub repositories are fetched as archives from github.com, which
     * redirects to codeload (berry's GithubFetcher). */
    if (starts(ref, rlen, "github:")) {
        return berry_host(x, "github.com", 10, 443, line) && berry_host(x, "codeload.github.com", 19, 443, line);
    }
    /* "git+" is just a marker in front of a clone URL */
    sl_url u;
    if (!sl_url_parse(ref, rlen, &u)) {
        sl_lockerr_set(x->err, x->path, line, "resolution has an unknown protocol: '%.*s'",
                       (int)(rlen > 60 ? 60 : rlen), ref);
        return false;
    }
    if (github_repo_url(&u)) {
        return berry_host(x, u.host, u.host_len, u.port, line) && berry_host(x, "codeload.github.com", 19, 443, line);
    }
    return berry_url(x, ref, rlen, line) >= 0;
}

static bool berry_locator(berry_ctx *x, const char *s, size_t len, int line, int depth)
{
    if (depth > 4) {
        sl_lockerr_set(x->err, x->path, line, "resolution nests patches too deeply");
        return false;
    }
    const char *at = name_end(s, len);
    if (!at || at == s + len - 1) {
        sl_lockerr_set(x->err, x->path, line, "resolution is not a locator");
        return false;
    }
    const char *ident = s;
    size_t ident_len = (size_t)(at - s);
    const char *ref = at + 1;
    size_t rlen = len - ident_len - 1;

    if (starts(ref, rlen, "workspace:") || starts(ref, rlen, "portal:") ||
        starts(ref, rlen, "link:") || starts(ref, rlen, "file:") || starts(ref, rlen, "exec:"))
        return true;                                   /* local (R5) */
    if (starts(ref, rlen, "patch:")) {
        /* patch:<encoded base locator>#<patch file>::<params>: the base
         * package is what is fetched */
        const char *inner = ref + 6;
        size_t ilen = rlen - 6;
        const char *hash = memchr(inner, '#', ilen);
        if (hash)
            ilen = (size_t)(hash - inner);
        size_t dlen;
        char *dec = percent_decode(inner, ilen, &dlen);
        bool ok = berry_locator(x, dec, dlen, line, depth + 1);
        free(dec);
        return ok;
    }
    if (starts(ref, rlen, "npm:")) {
        const char *ver = ref + 4;
        size_t vlen = rlen - 4;
        const char *params = NULL;
        for (size_t i = 0; i + 1 < vlen; i++) {
            if (ver[i] == ':' && ver[i + 1] == ':') {
                params = ver + i + 2;
                vlen = i;
                break;
            }
        }
        const char *url;
        size_t ulen;
        if (params && param(params, (size_t)(ref + rlen - params), "__archiveUrl", &url, &ulen)) {
            size_t dlen;
            char *dec = percent_decode(url, ulen, &dlen);
            int r = berry_url(x, dec, dlen, line);
            free(dec);
            if (r == 0) {
                sl_lockerr_set(x->err, x->path, line, "__archiveUrl is not a URL");
                return false;
            }
            return r > 0;
        }
        /* "npm:real@1.0.0" (an alias): the real name decides the scope */
        const char *e = name_end(ver, vlen);
        if (e) {
            ident = ver;
            ident_len = (size_t)(e - ver);
        }
        return berry_registry(x, ident, ident_len, line);
    }
    return berry_git_or_url(x, ref, rlen, line);
}

static bool read_berry(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    sl_npmcfg *cfg = sl_npmcfg_new("https://registry.yarnpkg.com");
    sl_npm_pins pins;
    sl_npm_pins_init(&pins, out, path, err);
    berry_ctx x = { path, cfg, out, err, sl_derived_pins(out) ? &pins : NULL };
    yaml_parser_t parser;
    yaml_document_t doc;
    bool end = false, ok = true;

    if (!sl_npmcfg_load_yarnrc_yml(cfg, proj, err)) {
        sl_npmcfg_free(cfg);
        return false;
    }
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    if (!sl_yaml_next(&parser, &doc, &end, path, err)) {
        ok = false;
        goto out;
    }
    if (end) {
        sl_lockerr_set(err, path, 1, "not a Yarn lockfile: empty YAML document");
        ok = false;
        goto out;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *meta = sl_yaml_get(&doc, root, "__metadata");
    if (root->type != YAML_MAPPING_NODE || !meta || meta->type != YAML_MAPPING_NODE ||
        !sl_yaml_get(&doc, meta, "version")) {
        sl_lockerr_set(err, path, sl_yaml_line(meta ? meta : root),
                       "not a Yarn lockfile: no __metadata version");
        ok = false;
        goto done;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; ok && p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&doc, p->value);
        size_t kn;
        const char *ks = sl_yaml_str(k, &kn);
        if (!ks) {
            sl_lockerr_set(err, path, sl_yaml_line(k), "entry key is not a string");
            ok = false;
            break;
        }
        if (kn == 10 && !memcmp(ks, "__metadata", 10))
            continue;
        size_t rn;
        const char *res = sl_yaml_str(sl_yaml_get(&doc, v, "resolution"), &rn);
        if (!v || v->type != YAML_MAPPING_NODE || !res) {
            sl_lockerr_set(err, path, sl_yaml_line(k), "entry has no resolution");
            ok = false;
            break;
        }
        ok = berry_locator(&x, res, rn, sl_yaml_line(v), 0);
    }
done:
    yaml_document_delete(&doc);
out:
    yaml_parser_delete(&parser);
    sl_npm_pins_free(&pins);
    sl_npmcfg_free(cfg);
    return ok;
}

/* ======================= the reader =============================== */

/* Berry's lockfile starts a line with "__metadata:"; Yarn 1's syntax
 * cannot (an unquoted key may not start with '_'). */
static bool is_berry(const char *data, size_t len)
{
    for (size_t pos = 0; pos < len;) {
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        if (starts(s, n, "__metadata:") || starts(s, n, "\"__metadata\":"))
            return true;
        if (!nl)
            break;
        pos += n + 1;
    }
    return false;
}

static bool recognises(const char *basename)
{
    return !strcmp(basename, "yarn.lock");
}

static bool read_yarn(const char *path, const char *data, size_t len, sl_project *proj,
                      sl_derived *out, sl_lockerr *err)
{
    /* Both Yarns merge conflicted lockfiles on install; an allowlist made
     * from one side of a conflict would be wrong, so refuse. */
    int conflict = sl_npm_conflict_line(data, len);
    if (conflict) {
        sl_lockerr_set(err, path, conflict, "merge-conflict marker: resolve the conflict first");
        return false;
    }
    if (memchr(data, '\0', len)) {
        sl_lockerr_set(err, path, 0, "not a text file (NUL byte)");
        return false;
    }
    if (is_berry(data, len))
        return read_berry(path, data, len, proj, out, err);
    return read_yarn1(path, data, len, proj, out, err);
}

const sl_lockreader sl_reader_yarn = {
    .name = "yarn",
    .recognises = recognises,
    .read = read_yarn,
};
