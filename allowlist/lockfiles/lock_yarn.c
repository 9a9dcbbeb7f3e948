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
} y1_ctx;

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

static bool y1_finish(y1_ctx *x)
{
    x->in_entry = false;
    if (!x->has_version) {
        sl_lockerr_set(x->err, x->path, x->entry_line, "entry has no version");
        return false;
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
    x->key = x->resolved = NULL;
    x->key_len = x->resolved_len = 0;
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
        }
        return true;
    }
    return true;
}

static bool read_yarn1(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    /* Yarn 1 asks .npmrc, then .yarnrc, and defaults to its own registry. */
    sl_npmcfg *cfg = sl_npmcfg_new("https://registry.yarnpkg.com");
    y1_ctx x = { .path = path, .cfg = cfg, .out = out, .err = err };
    bool ok = sl_npmcfg_load_npmrc(cfg, proj, err) && sl_npmcfg_load_yarnrc(cfg, proj, err);
    if (ok) {
        int line = 0;
        const char *why = NULL;
        err->msg[0] = '\0';
        ok = sl_y1_parse(data, len, y1_event, &x, &line, &why);
        if (!ok && why)
            sl_lockerr_set(err, path, line, "%s", why);
    }
    y1_reset(&x);
    sl_npmcfg_free(cfg);
    return ok;
}

/* ======================= Yarn 2+ ================================== */

typedef struct berry_ctx {
    const char *path;
    sl_npmcfg *cfg;
    sl_derived *out;
    sl_lockerr *err;
} berry_ctx;

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
        return sl_npm_add_host(x->out, "github.com", 10, 443, x->path, NULL, line, x->err) &&
               sl_npm_add_host(x->out, "codeload.github.com", 19, 443, x->path, NULL, line, x->err);
    }
    /* "git+" is just a marker in front of a clone URL */
    sl_url u;
    if (!sl_url_parse(ref, rlen, &u)) {
        sl_lockerr_set(x->err, x->path, line, "resolution has an unknown protocol: '%.*s'",
                       (int)(rlen > 60 ? 60 : rlen), ref);
        return false;
    }
    if (github_repo_url(&u)) {
        return sl_npm_add_host(x->out, u.host, u.host_len, u.port, x->path, NULL, line, x->err) &&
               sl_npm_add_host(x->out, "codeload.github.com", 19, 443, x->path, NULL, line, x->err);
    }
    return sl_npm_add_url(x->out, ref, rlen, x->path, NULL, line, x->err) >= 0;
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
            int r = sl_npm_add_url(x->out, dec, dlen, x->path, NULL, line, x->err);
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
        return sl_npm_add_registry(x->out, x->cfg, ident, ident_len, x->path, line, x->err);
    }
    return berry_git_or_url(x, ref, rlen, line);
}

static bool read_berry(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    sl_npmcfg *cfg = sl_npmcfg_new("https://registry.yarnpkg.com");
    berry_ctx x = { path, cfg, out, err };
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
