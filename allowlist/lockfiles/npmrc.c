/* npm-family registry configuration (.npmrc, .yarnrc, .yarnrc.yml) and the
 * helpers the npm, Yarn and pnpm lockfile readers share. */
#include "npmrc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "rules.h"
#include "text.h"
#include "url.h"

#define LAYERS 2                   /* .npmrc (or .yarnrc.yml), then .yarnrc */

typedef struct scope_reg {
    char *scope;                   /* "@corp" */
    char *url;
    const char *file;
} scope_reg;

typedef struct layer {
    char *registry;
    const char *registry_file;
    scope_reg *scopes;
    size_t nscopes, capscopes;
} layer;

typedef enum repl_mode { REPL_HOST, REPL_NEVER, REPL_ALWAYS } repl_mode;

struct sl_npmcfg {
    char *default_registry;
    layer layers[LAYERS];
    repl_mode repl;
    char *repl_host;               /* REPL_HOST: the host whose URLs are rewritten */
    char *repl_path;               /* and the path they must be under, or NULL */
    const char *repl_file;
    char **files;                  /* config file names, owned */
    size_t nfiles;
};

sl_npmcfg *sl_npmcfg_new(const char *default_registry)
{
    sl_npmcfg *c = sl_xrealloc(NULL, sizeof *c);
    memset(c, 0, sizeof *c);
    c->default_registry = sl_xstrdup(default_registry);
    c->repl = REPL_HOST;
    c->repl_host = sl_xstrndup("registry.npmjs.org", 18);
    return c;
}

void sl_npmcfg_free(sl_npmcfg *c)
{
    if (!c)
        return;
    for (int l = 0; l < LAYERS; l++) {
        free(c->layers[l].registry);
        for (size_t i = 0; i < c->layers[l].nscopes; i++) {
            free(c->layers[l].scopes[i].scope);
            free(c->layers[l].scopes[i].url);
        }
        free(c->layers[l].scopes);
    }
    for (size_t i = 0; i < c->nfiles; i++)
        free(c->files[i]);
    free(c->files);
    free(c->repl_host);
    free(c->repl_path);
    free(c->default_registry);
    free(c);
}

static const char *keep_file(sl_npmcfg *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (!strcmp(c->files[i], path))
            return c->files[i];
    c->files = sl_xrealloc(c->files, (c->nfiles + 1) * sizeof *c->files);
    c->files[c->nfiles] = sl_xstrdup(path);
    return c->files[c->nfiles++];
}

/* A registry value must name a network host: config that cannot be used
 * is refused rather than guessed around. ${VAR} is expanded by the
 * package managers from the environment of the install, which is not
 * known here. */
static bool check_registry(const char *url, size_t len, const char *file, int line, const char *key,
                           sl_lockerr *err)
{
    char shown[160];
    if (memmem(url, len, "${", 2)) {
        sl_lockerr_set(err, file, line, "%s '%s' depends on an environment variable, unknown offline",
                       key, sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX));
        return false;
    }
    sl_url u;
    if (!sl_url_parse(url, len, &u) || u.port < 0 || u.scp_style) {
        sl_lockerr_set(err, file, line, "%s '%s' is not a registry URL", key,
                       sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX));
        return false;
    }
    return true;
}

static void set_scope(layer *l, const char *scope, size_t slen, const char *url, size_t ulen,
                      const char *file)
{
    for (size_t i = 0; i < l->nscopes; i++) {
        if (strlen(l->scopes[i].scope) == slen && !memcmp(l->scopes[i].scope, scope, slen)) {
            free(l->scopes[i].url);       /* a later line wins */
            l->scopes[i].url = sl_xstrndup(url, ulen);
            l->scopes[i].file = file;
            return;
        }
    }
    if (l->nscopes == l->capscopes) {
        l->capscopes = l->capscopes ? l->capscopes * 2 : 4;
        l->scopes = sl_xrealloc(l->scopes, l->capscopes * sizeof *l->scopes);
    }
    l->scopes[l->nscopes].scope = sl_xstrndup(scope, slen);
    l->scopes[l->nscopes].url = sl_xstrndup(url, ulen);
    l->scopes[l->nscopes].file = file;
    l->nscopes++;
}

static void set_registry(layer *l, const char *url, size_t len, const char *file)
{
    free(l->registry);
    l->registry = sl_xstrndup(url, len);
    l->registry_file = file;
}

/* ---- .npmrc ------------------------------------------------------------- */

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\f' || ch == '\v';
}

static void trim(const char **s, size_t *len)
{
    while (*len && is_space(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && is_space((*s)[*len - 1]))
        (*len)--;
}

/* A value as npm's ini reader takes it: quoted values lose their quotes;
 * unquoted ones end at an unescaped ';' or '#' (an inline comment), with
 * "\;" "\#" "\\" unescaped. The result goes to out (cap bytes). */
static size_t ini_value(const char *s, size_t len, char *out, size_t cap)
{
    trim(&s, &len);
    size_t k = 0;
    if (len >= 2 && ((s[0] == '"' && s[len - 1] == '"') || (s[0] == '\'' && s[len - 1] == '\''))) {
        for (size_t i = 1; i + 1 < len && k + 1 < cap; i++)
            out[k++] = s[i];
        out[k] = '\0';
        return k;
    }
    bool esc = false;
    for (size_t i = 0; i < len && k + 2 < cap; i++) {
        char ch = s[i];
        if (esc) {
            if (ch != '\\' && ch != ';' && ch != '#')
                out[k++] = '\\';
            out[k++] = ch;
            esc = false;
        } else if (ch == ';' || ch == '#') {
            break;
        } else if (ch == '\\') {
            esc = true;
        } else {
            out[k++] = ch;
        }
    }
    if (esc && k + 1 < cap)
        out[k++] = '\\';
    while (k && is_space(out[k - 1]))
        k--;
    out[k] = '\0';
    return k;
}

static bool is_scope_registry_key(const char *k, size_t len, size_t *scope_len)
{
    static const char suffix[] = ":registry";
    size_t sl = sizeof suffix - 1;
    if (len <= sl + 1 || k[0] != '@' || memcmp(k + len - sl, suffix, sl) != 0)
        return false;
    *scope_len = len - sl;
    return !memchr(k, '/', *scope_len);
}

/* replace-registry-host: npmjs, never, always, a host name, or (npm 11) a
 * URL whose host and path prefix select the URLs to rewrite. */
static bool set_replace(sl_npmcfg *c, const char *val, size_t vn, const char *file, int line,
                        sl_lockerr *err)
{
    free(c->repl_host);
    free(c->repl_path);
    c->repl_host = c->repl_path = NULL;
    c->repl_file = file;
    c->repl = REPL_HOST;
    if (vn == 5 && !memcmp(val, "npmjs", 5)) {
        c->repl_host = sl_xstrndup("registry.npmjs.org", 18);
        return true;
    }
    if (vn == 5 && !memcmp(val, "never", 5)) {
        c->repl = REPL_NEVER;
        return true;
    }
    if (vn == 6 && !memcmp(val, "always", 6)) {
        c->repl = REPL_ALWAYS;
        return true;
    }
    sl_url u;
    char shown[160];
    if (memmem(val, vn, "://", 3)) {
        if (!check_registry(val, vn, file, line, "replace-registry-host", err))
            return false;
        sl_url_parse(val, vn, &u);
        size_t pl = u.path_len;
        while (pl && u.path[pl - 1] == '/')
            pl--;
        c->repl_host = sl_xstrndup(u.host, u.host_len);
        if (pl)
            c->repl_path = sl_xstrndup(u.path, pl);
        return true;
    }
    if (vn == 0 || memmem(val, vn, "${", 2) || memchr(val, '/', vn)) {
        sl_lockerr_set(err, file, line, "replace-registry-host '%s' is not a host name",
                       sl_display_untrusted(val, vn, shown, sizeof shown, SL_DISPLAY_HEX));
        return false;
    }
    c->repl_host = sl_xstrndup(val, vn);
    return true;
}

bool sl_npmcfg_load_npmrc(sl_npmcfg *c, sl_project *p, sl_lockerr *err)
{
    size_t len;
    const char *path = NULL;
    err->msg[0] = '\0';
    const char *data = sl_project_file(p, ".npmrc", &len, &path, err);
    if (!data)
        return err->msg[0] == '\0';
    const char *file = keep_file(c, path ? path : ".npmrc");
    layer *l = &c->layers[0];

    char *key = sl_xrealloc(NULL, len + 1);
    char *val = sl_xrealloc(NULL, len + 1);
    bool ok = true, in_section = false;
    int line = 0;
    size_t pos = 0;
    while (ok && pos < len) {
        /* npm's ini reader splits on any run of CR/LF; count LF for lines. */
        const char *s = data + pos;
        size_t n = 0;
        while (pos + n < len && data[pos + n] != '\n' && data[pos + n] != '\r')
            n++;
        line++;
        pos += n;
        if (pos < len && data[pos] == '\r')
            pos++;
        if (pos < len && data[pos] == '\n')
            pos++;

        const char *t = s;
        size_t tn = n;
        trim(&t, &tn);
        if (tn == 0 || t[0] == ';' || t[0] == '#')
            continue;
        if (t[0] == '[' && t[tn - 1] == ']') {
            /* keys under a [section] are not top-level settings */
            in_section = true;
            continue;
        }
        const char *eq = memchr(s, '=', n);
        if (!eq || in_section)
            continue;                      /* a bare key is a boolean flag */
        size_t kn = ini_value(s, (size_t)(eq - s), key, len + 1);
        size_t vn = ini_value(eq + 1, n - (size_t)(eq + 1 - s), val, len + 1);
        size_t scope_len;
        if (kn == 8 && !memcmp(key, "registry", 8)) {
            ok = check_registry(val, vn, file, line, "registry", err);
            if (ok)
                set_registry(l, val, vn, file);
        } else if (is_scope_registry_key(key, kn, &scope_len)) {
            ok = check_registry(val, vn, file, line, key, err);
            if (ok)
                set_scope(l, key, scope_len, val, vn, file);
        } else if (kn == 21 && !memcmp(key, "replace-registry-host", 21)) {
            ok = set_replace(c, val, vn, file, line, err);
        }
    }
    free(key);
    free(val);
    return ok;
}

/* ---- .yarnrc (Yarn 1 syntax) ---------------------------------------- */

typedef struct yarnrc_ctx {
    sl_npmcfg *c;
    const char *file;
    sl_lockerr *err;
} yarnrc_ctx;

static bool yarnrc_line(void *vctx, sl_y1_event ev, int depth, const sl_y1_tok *key, size_t nkeys,
                        const sl_y1_tok *value, int line)
{
    yarnrc_ctx *x = vctx;
    (void)nkeys;
    if (ev != SL_Y1_PAIR || depth != 0 || value->kind != SL_Y1_STRING)
        return true;
    char k[256];
    size_t kn = sl_y1_text(key, k, sizeof k);
    if (kn >= sizeof k)
        return true;               /* no key we read is that long */
    size_t scope_len;
    bool is_reg = kn == 8 && !memcmp(k, "registry", 8);
    bool is_scope = is_scope_registry_key(k, kn, &scope_len);
    if (!is_reg && !is_scope)
        return true;
    size_t vn = sl_y1_text(value, NULL, 0);
    char *v = sl_xrealloc(NULL, vn + 1);
    sl_y1_text(value, v, vn + 1);
    bool ok = check_registry(v, vn, x->file, line, k, x->err);
    if (ok && is_reg)
        set_registry(&x->c->layers[1], v, vn, x->file);
    else if (ok)
        set_scope(&x->c->layers[1], k, scope_len, v, vn, x->file);
    free(v);
    return ok;
}

bool sl_npmcfg_load_yarnrc(sl_npmcfg *c, sl_project *p, sl_lockerr *err)
{
    size_t len;
    const char *path = NULL;
    err->msg[0] = '\0';
    const char *data = sl_project_file(p, ".yarnrc", &len, &path, err);
    if (!data)
        return err->msg[0] == '\0';
    yarnrc_ctx x = { c, keep_file(c, path ? path : ".yarnrc"), err };
    int line = 0;
    const char *why = NULL;
    if (!sl_y1_parse(data, len, yarnrc_line, &x, &line, &why)) {
        if (why)
            sl_lockerr_set(err, x.file, line, "%s", why);
        return false;
    }
    return true;
}

/* ---- .yarnrc.yml ------------------------------------------------------ */

static bool yml_registry(yaml_node_t *n, const char *file, const char *key, const char **out,
                         size_t *outlen, sl_lockerr *err)
{
    size_t len;
    const char *s = sl_yaml_str(n, &len);
    if (!s) {
        sl_lockerr_set(err, file, sl_yaml_line(n), "%s is not a string", key);
        return false;
    }
    if (!check_registry(s, len, file, sl_yaml_line(n), key, err))
        return false;
    *out = s;
    *outlen = len;
    return true;
}

bool sl_npmcfg_load_yarnrc_yml(sl_npmcfg *c, sl_project *p, sl_lockerr *err)
{
    size_t len;
    const char *path = NULL;
    err->msg[0] = '\0';
    const char *data = sl_project_file(p, ".yarnrc.yml", &len, &path, err);
    if (!data)
        return err->msg[0] == '\0';
    const char *file = keep_file(c, path ? path : ".yarnrc.yml");
    layer *l = &c->layers[0];

    yaml_parser_t parser;
    yaml_document_t doc;
    bool end = false, ok = true;
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    if (!sl_yaml_next(&parser, &doc, &end, file, err)) {
        yaml_parser_delete(&parser);
        return false;
    }
    if (end) {
        yaml_parser_delete(&parser);
        return true;               /* an empty file sets nothing */
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root->type != YAML_MAPPING_NODE) {
        sl_lockerr_set(err, file, sl_yaml_line(root), "not a mapping of settings");
        ok = false;
        goto done;
    }
    const char *s;
    size_t sn;
    yaml_node_t *reg = sl_yaml_get(&doc, root, "npmRegistryServer");
    if (reg) {
        if (!(ok = yml_registry(reg, file, "npmRegistryServer", &s, &sn, err)))
            goto done;
        set_registry(l, s, sn, file);
    }
    yaml_node_t *scopes = sl_yaml_get(&doc, root, "npmScopes");
    if (scopes && scopes->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *pr = scopes->data.mapping.pairs.start;
             pr < scopes->data.mapping.pairs.top; pr++) {
            size_t kn;
            const char *k = sl_yaml_str(yaml_document_get_node(&doc, pr->key), &kn);
            yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
            if (!k || kn == 0 || !v || v->type != YAML_MAPPING_NODE)
                continue;
            yaml_node_t *sreg = sl_yaml_get(&doc, v, "npmRegistryServer");
            if (!sreg)
                continue;
            if (!(ok = yml_registry(sreg, file, "npmRegistryServer", &s, &sn, err)))
                goto done;
            /* npmScopes keys are written without the '@' */
            char *scope = sl_xrealloc(NULL, kn + 2);
            scope[0] = '@';
            memcpy(scope + 1, k, kn);
            set_scope(l, scope, kn + 1, s, sn, file);
            free(scope);
        }
    } else if (scopes && scopes->type != YAML_SCALAR_NODE) {
        sl_lockerr_set(err, file, sl_yaml_line(scopes), "npmScopes is not a mapping");
        ok = false;
    }
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return ok;
}

/* ---- lookups ------------------------------------------------------------ */

bool sl_npm_scope(const char *name, size_t len, size_t *scope_len)
{
    if (len < 3 || name[0] != '@')
        return false;
    const char *slash = memchr(name, '/', len);
    if (!slash || slash == name + 1)
        return false;
    *scope_len = (size_t)(slash - name);
    return true;
}

const char *sl_npmcfg_registry(const sl_npmcfg *c, const char *name, size_t len, const char **file)
{
    size_t sl;
    if (sl_npm_scope(name, len, &sl)) {
        for (int i = 0; i < LAYERS; i++) {
            const layer *l = &c->layers[i];
            for (size_t k = 0; k < l->nscopes; k++) {
                if (strlen(l->scopes[k].scope) == sl && !memcmp(l->scopes[k].scope, name, sl)) {
                    *file = l->scopes[k].file;
                    return l->scopes[k].url;
                }
            }
        }
    }
    for (int i = 0; i < LAYERS; i++) {
        if (c->layers[i].registry) {
            *file = c->layers[i].registry_file;
            return c->layers[i].registry;
        }
    }
    *file = NULL;
    return c->default_registry;
}

bool sl_npmcfg_replaces(const sl_npmcfg *c, const sl_url *u, const char **file)
{
    *file = c->repl_file;
    if (c->repl != REPL_HOST)
        return c->repl == REPL_ALWAYS;
    if (!u || strlen(c->repl_host) != u->host_len || strncasecmp(c->repl_host, u->host, u->host_len))
        return false;
    if (!c->repl_path)
        return true;
    /* the path must be the prefix itself or under it */
    size_t pl = strlen(c->repl_path);
    return u->path_len >= pl && !memcmp(u->path, c->repl_path, pl) &&
           (u->path_len == pl || u->path[pl] == '/');
}

const char *sl_npmcfg_replace_prefix(const sl_npmcfg *c)
{
    return c->repl == REPL_HOST ? c->repl_path : NULL;
}

/* ---- adding entries -------------------------------------------------- */

bool sl_npm_add_host(sl_derived *d, const char *host, size_t host_len, int port,
                     const char *lockfile, const char *cfgfile, int line, sl_lockerr *err)
{
    char msg[400];
    if (!sl_derived_add(d, host, host_len, port, lockfile, msg, sizeof msg) ||
        (cfgfile && !sl_derived_add(d, host, host_len, port, cfgfile, msg, sizeof msg))) {
        sl_lockerr_set(err, lockfile, line, "%s", msg);
        return false;
    }
    return true;
}

bool sl_npm_add_registry(sl_derived *d, const sl_npmcfg *c, const char *name, size_t len,
                         const char *lockfile, int line, sl_lockerr *err)
{
    const char *file;
    const char *reg = sl_npmcfg_registry(c, name, len, &file);
    sl_url u;
    if (!sl_url_parse(reg, strlen(reg), &u) || u.port < 0) {
        /* only the built-in default can get here unchecked */
        sl_lockerr_set(err, file ? file : lockfile, 0, "registry '%s' is not a URL", reg);
        return false;
    }
    return sl_npm_add_host(d, u.host, u.host_len, u.port, lockfile, file, line, err);
}

/* The n-th '/'-separated segment of a URL path ("/o/r/archive/x"), 0-based. */
static bool path_segment(const sl_url *u, int n, const char **seg, size_t *len)
{
    const char *s = u->path, *end = u->path + u->path_len;
    if (s == end || *s != '/')
        return false;
    s++;
    for (int i = 0;; i++) {
        const char *e = memchr(s, '/', (size_t)(end - s));
        if (!e)
            e = end;
        if (i == n) {
            *seg = s;
            *len = (size_t)(e - s);
            return *len > 0;
        }
        if (e == end)
            return false;
        s = e + 1;
    }
}

static bool seg_is(const sl_url *u, int n, const char *word)
{
    const char *s;
    size_t len;
    return path_segment(u, n, &s, &len) && len == strlen(word) && !memcmp(s, word, len);
}

static bool host_is(const sl_url *u, const char *host)
{
    return u->host_len == strlen(host) && !strncasecmp(u->host, host, u->host_len);
}

/* R6: GitHub answers archive and API tarball downloads with a redirect to
 * codeload, release downloads with one to its release-assets host. */
static const char *redirect_host(const sl_url *u)
{
    if (u->port != 443 && u->port != 80)
        return NULL;
    if (host_is(u, "github.com") || host_is(u, "www.github.com")) {
        if (seg_is(u, 2, "archive") || seg_is(u, 2, "tarball") || seg_is(u, 2, "zipball"))
            return "codeload.github.com";
        if (seg_is(u, 2, "releases") && seg_is(u, 3, "download"))
            return "release-assets.githubusercontent.com";
    }
    if (host_is(u, "api.github.com") && seg_is(u, 0, "repos") &&
        (seg_is(u, 3, "tarball") || seg_is(u, 3, "zipball")))
        return "codeload.github.com";
    return NULL;
}

int sl_npm_add_url(sl_derived *d, const char *url, size_t len, const char *lockfile,
                   const char *cfgfile, int line, sl_lockerr *err)
{
    sl_url u;
    if (!sl_url_parse(url, len, &u))
        return 0;
    if (u.port < 0) {
        char shown[224];
        sl_lockerr_set(err, lockfile, line, "no valid port in URL '%s'",
                       sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX));
        return -1;
    }
    if (!sl_npm_add_host(d, u.host, u.host_len, u.port, lockfile, cfgfile, line, err))
        return -1;
    const char *extra = redirect_host(&u);
    if (extra && !sl_npm_add_host(d, extra, strlen(extra), 443, lockfile, cfgfile, line, err))
        return -1;
    return 1;
}

/* ---- --pins ------------------------------------------------------------ */

struct sl_npm_blocked {
    char *host;                    /* as the registry URL writes it */
    int port;
    char *why;
};

void sl_npm_pins_init(sl_npm_pins *p, sl_derived *d, const char *lockfile, sl_lockerr *err)
{
    memset(p, 0, sizeof *p);
    p->d = d;
    p->lockfile = lockfile;
    p->err = err;
}

void sl_npm_pins_free(sl_npm_pins *p)
{
    for (size_t i = 0; i < p->nblocked; i++) {
        free(p->blocked[i].host);
        free(p->blocked[i].why);
    }
    free(p->blocked);
    p->blocked = NULL;
    p->nblocked = p->capblocked = 0;
}

static const char *blocked_why(const sl_npm_pins *p, const char *host, size_t host_len, int port)
{
    for (size_t i = 0; i < p->nblocked; i++) {
        const sl_npm_blocked *b = &p->blocked[i];
        if (b->port == port && strlen(b->host) == host_len && !strncasecmp(b->host, host, host_len))
            return b->why;
    }
    return NULL;
}

/* Registries come from config files of bounded size; this bounds them anyway. */
#define MAX_BLOCKED 4096

void sl_npm_pins_block_scoped(sl_npm_pins *p, const char *registry, const char *name, size_t len,
                              const char *tool)
{
    size_t scope_len;
    sl_url u;
    if (!sl_npm_scope(name, len, &scope_len) || !sl_url_parse(registry, strlen(registry), &u) || u.port < 0 ||
        blocked_why(p, u.host, u.host_len, u.port) ||
        !sl_grow(&p->blocked, &p->capblocked, p->nblocked, sizeof *p->blocked, MAX_BLOCKED))
        return;
    int shown = len > 120 ? 120 : (int)len;
    int scope = (int)scope_len;
    char why[512];
    snprintf(why, sizeof why,
             "%s asks for the packument of %.*s as %.*s%%2f%.*s, which the gate refuses (an encoded '/'): "
             "this registry cannot be inspected",
             tool, shown, name, scope, name, shown > scope + 1 ? shown - scope - 1 : 0, name + scope_len + 1);
    sl_npm_blocked *b = &p->blocked[p->nblocked++];
    b->host = sl_xstrndup(u.host, u.host_len);
    b->port = u.port;
    b->why = sl_xstrdup(why);
}

static bool pin_failed(sl_npm_pins *p, int line, const char *msg)
{
    sl_lockerr_set(p->err, p->lockfile, line, "%s", msg);
    return false;
}

bool sl_npm_pin_fallback_host(sl_npm_pins *p, const char *host, size_t host_len, int port,
                              const char *cfgfile, const char *why, int line)
{
    char msg[400];
    if (!sl_derived_add_fallback(p->d, host, host_len, port, NULL, 0, p->lockfile, why, msg, sizeof msg) ||
        (cfgfile && !sl_derived_add_fallback(p->d, host, host_len, port, NULL, 0, cfgfile, why, msg, sizeof msg)))
        return pin_failed(p, line, msg);
    return true;
}

/* A URL the pins functions take: 1 parsed, 0 no network host, -1 a bad port
 * (err set). */
static int pin_parse(sl_npm_pins *p, const char *url, size_t len, sl_url *u, int line)
{
    if (!sl_url_parse(url, len, u))
        return 0;
    if (u->port < 0) {
        char shown[224];
        sl_lockerr_set(p->err, p->lockfile, line, "no valid port in URL '%s'",
                       sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX));
        return -1;
    }
    return 1;
}

/* A GitHub download answers with a redirect whose target (R6) only the
 * answer names. */
static bool pin_redirect(sl_npm_pins *p, const sl_url *u, const char *cfgfile, int line)
{
    const char *extra = redirect_host(u);
    return !extra || sl_npm_pin_fallback_host(p, extra, strlen(extra), 443, cfgfile,
                                              "GitHub redirects a download here, to a path not known offline", line);
}

/* A rule for the parsed URL, by host and path (the URL parsed once: a
 * lockfile has a hundred thousand of them). A path no rule can hold as it
 * is (a '*', which would be a wildcard; an ambiguous or malformed path)
 * leaves the host a fallback saying so, rather than failing the run. */
static int add_rule_url(sl_npm_pins *p, const sl_url *u, const char *const *digests, size_t n,
                        const char *cfgfile, const char *note, int line)
{
    char msg[400];
    const char *path = u->path_len ? u->path : "/";
    size_t plen = u->path_len ? u->path_len : 1;
    const char *why = u->scp_style                ? "it is not a web URL"
                      : memchr(path, '*', plen)   ? "a '*' in it would be a wildcard"
                      : sl_path_check(path, plen, true);
    if (!why)
        why = sl_path_ambiguous(path, plen);
    if (why) {
        snprintf(msg, sizeof msg, "not pinned: its URL's path cannot be a rule (%s)", why);
        return sl_npm_pin_fallback_host(p, u->host, u->host_len, u->port, cfgfile, msg, line) ? 1 : -1;
    }
    const char *files[2] = { p->lockfile, cfgfile };
    for (int i = 0; i < 2 && files[i]; i++)
        if (!sl_derived_add_rule(p->d, u->host, u->host_len, u->port, path, plen, digests, n, files[i], note, msg,
                                 sizeof msg))
            return pin_failed(p, line, msg) ? 1 : -1;
    return 1;
}

static int add_fallback_url(sl_npm_pins *p, const char *url, size_t len, const char *cfgfile, const char *why,
                            int line)
{
    char msg[400];
    int r = sl_derived_add_fallback_url(p->d, url, len, p->lockfile, why, msg, sizeof msg);
    if (r > 0 && cfgfile)
        r = sl_derived_add_fallback_url(p->d, url, len, cfgfile, why, msg, sizeof msg);
    if (r < 0)
        pin_failed(p, line, msg);
    return r;
}

int sl_npm_pin_fallback(sl_npm_pins *p, const char *url, size_t len, bool with_path, const char *cfgfile,
                        const char *why, int line)
{
    sl_url u;
    int r = pin_parse(p, url, len, &u, line);
    if (r <= 0)
        return r;
    const char *blocked = blocked_why(p, u.host, u.host_len, u.port);
    if (!with_path || blocked || u.scp_style)
        r = sl_npm_pin_fallback_host(p, u.host, u.host_len, u.port, cfgfile, blocked ? blocked : why, line) ? 1 : -1;
    else
        r = add_fallback_url(p, url, len, cfgfile, why, line);
    return r > 0 && !pin_redirect(p, &u, cfgfile, line) ? -1 : r;
}

int sl_npm_pin_tarball(sl_npm_pins *p, const char *url, size_t len, const char *sri, size_t sri_len,
                       const char *cfgfile, int line)
{
    char digests[SL_NPM_DIGESTS][SL_SRI_MAX];
    size_t n = sri ? sl_sri_strong(sri, sri_len, digests, SL_NPM_DIGESTS) : 0;
    if (n == 0) {
        const char *why = !sri || sri_len == 0 ? "no integrity in the lockfile"
                          : memmem(sri, sri_len, "sha1-", 5) ? "only a sha1 integrity, too weak to pin"
                                                              : "no sha256, sha384 or sha512 in its integrity";
        return sl_npm_pin_fallback(p, url, len, true, cfgfile, why, line);
    }
    sl_url u;
    int r = pin_parse(p, url, len, &u, line);
    if (r <= 0)
        return r;
    const char *blocked = blocked_why(p, u.host, u.host_len, u.port);
    if (blocked)
        return sl_npm_pin_fallback_host(p, u.host, u.host_len, u.port, cfgfile, blocked, line) ? 1 : -1;
    const char *list[SL_NPM_DIGESTS];
    for (size_t i = 0; i < n; i++)
        list[i] = digests[i];
    r = add_rule_url(p, &u, list, n, cfgfile, NULL, line);
    return r > 0 && !pin_redirect(p, &u, cfgfile, line) ? -1 : r;
}

int sl_npm_pin_metadata(sl_npm_pins *p, const char *url, size_t len, const char *cfgfile, const char *note,
                        int line)
{
    sl_url u;
    int r = pin_parse(p, url, len, &u, line);
    if (r <= 0)
        return r;
    const char *blocked = blocked_why(p, u.host, u.host_len, u.port);
    if (blocked)
        return sl_npm_pin_fallback_host(p, u.host, u.host_len, u.port, cfgfile, blocked, line) ? 1 : -1;
    return add_rule_url(p, &u, NULL, 0, cfgfile, note, line);
}

/* ---- registry URLs ---- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = sl_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* "scheme://host:port", port always written (IPv6 in brackets). */
static void sb_origin(sbuf *b, const sl_url *u)
{
    char port[8];
    bool v6 = memchr(u->host, ':', u->host_len) != NULL;
    sb_str(b, u->scheme);
    sb_str(b, v6 ? "://[" : "://");
    sb_put(b, u->host, u->host_len);
    snprintf(port, sizeof port, "%s:%d", v6 ? "]" : "", u->port);
    sb_str(b, port);
}

static bool parse_registry(const char *registry, sl_url *u)
{
    return sl_url_parse(registry, strlen(registry), u) && u->port >= 0 && !u->scp_style;
}

static bool is_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* "name" or "@scope/name" of the characters encodeURIComponent leaves as
 * they are, '*' excepted (a rule's wildcard): every npm name is. */
static bool name_in_path(const char *s, size_t n)
{
    size_t slashes = 0;
    if (n == 0 || n > 214 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '/') {
            if (s[0] != '@' || ++slashes > 1 || i == 1 || i + 1 == n || s[i + 1] == '.')
                return false;
        } else if (!(is_alnum(ch) || strchr("-._~!'()", ch) || (ch == '@' && i == 0))) {
            return false;
        }
    }
    return s[0] != '@' || slashes == 1;
}

/* A semver version: digits, letters, '.', '-', '+'. */
static bool version_in_path(const char *s, size_t n)
{
    if (n == 0 || n > 256 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(is_alnum(s[i]) || s[i] == '.' || s[i] == '-' || s[i] == '+'))
            return false;
    return true;
}

char *sl_npm_tarball_url(const char *registry, const char *name, size_t nlen, const char *version, size_t vlen)
{
    sl_url r;
    if (!parse_registry(registry, &r) || !name_in_path(name, nlen) || !version_in_path(version, vlen))
        return NULL;
    const char *plus = memchr(version, '+', vlen);
    if (plus)
        vlen = (size_t)(plus - version);       /* build metadata is not in the file name */
    const char *base = name;
    size_t scope_len;
    if (sl_npm_scope(name, nlen, &scope_len))
        base = name + scope_len + 1;
    sbuf b = { 0 };
    sb_origin(&b, &r);
    sb_put(&b, r.path, r.path_len);
    if (r.path_len == 0 || r.path[r.path_len - 1] != '/')
        sb_str(&b, "/");
    sb_put(&b, name, nlen);
    sb_str(&b, "/-/");
    sb_put(&b, base, nlen - (size_t)(base - name));
    sb_str(&b, "-");
    sb_put(&b, version, vlen);
    sb_str(&b, ".tgz");
    return b.s;
}

char *sl_npm_packument_url(const char *registry, const char *name, size_t nlen)
{
    sl_url r;
    if (!parse_registry(registry, &r) || !name_in_path(name, nlen))
        return NULL;
    size_t pl = r.path_len;
    while (pl && r.path[pl - 1] == '/')
        pl--;
    sbuf b = { 0 };
    sb_origin(&b, &r);
    sb_put(&b, r.path, pl);
    sb_str(&b, "/");
    const char *slash = memchr(name, '/', nlen);
    if (slash) {
        sb_put(&b, name, (size_t)(slash - name));
        sb_str(&b, "%2f");
        sb_put(&b, slash + 1, nlen - (size_t)(slash + 1 - name));
    } else {
        sb_put(&b, name, nlen);
    }
    return b.s;
}

char *sl_npm_registry_rewrite(const char *registry, const sl_url *u, const char *prefix)
{
    sl_url r;
    if (!parse_registry(registry, &r))
        return NULL;
    /* the registry's path without its trailing '/' (arborist makes it end
     * in one, #registryResolved takes it off); "/" alone is none */
    size_t pl = r.path_len;
    while (pl && r.path[pl - 1] == '/')
        pl--;
    const char *path = u->path_len ? u->path : "/";
    size_t len = u->path_len ? u->path_len : 1;
    size_t xl = prefix ? strlen(prefix) : 0;
    if (xl && len > xl && !memcmp(path, prefix, xl) && path[xl] == '/') {
        path += xl;
        len -= xl;
    }
    bool has_prefix = pl == 0 || (!xl && len >= pl && !memcmp(path, r.path, pl) && (len == pl || path[pl] == '/'));
    sbuf b = { .s = sl_xrealloc(NULL, 40 + r.host_len + pl + len), .cap = 40 + r.host_len + pl + len };
    sb_origin(&b, &r);
    if (!has_prefix)
        sb_put(&b, r.path, pl);
    sb_put(&b, path, len);
    return b.s;
}

char *sl_npm_registry_join(const char *registry, const char *ref, size_t rlen)
{
    sl_url r;
    if (!parse_registry(registry, &r) || rlen == 0 || memchr(ref, '\\', rlen) || memchr(ref, '?', rlen) ||
        memchr(ref, '#', rlen) || memchr(ref, '\0', rlen))
        return NULL;
    sbuf b = { 0 };
    if (rlen >= 2 && ref[0] == '/' && ref[1] == '/') {
        sb_str(&b, r.scheme);
        sb_str(&b, ":");
        sb_put(&b, ref, rlen);
        return b.s;
    }
    /* no "." or ".." segment: URL resolution would remove them */
    for (size_t i = 0; i < rlen;) {
        size_t j = i;
        while (j < rlen && ref[j] != '/')
            j++;
        if ((j - i == 1 && ref[i] == '.') || (j - i == 2 && ref[i] == '.' && ref[i + 1] == '.'))
            return NULL;
        if (i == 0 && ref[0] != '/' && memchr(ref, ':', j))
            return NULL;                    /* "x:..." is a URL of scheme x */
        i = j + 1;
    }
    sb_origin(&b, &r);
    if (ref[0] != '/') {
        sb_put(&b, r.path, r.path_len);
        if (r.path_len == 0 || r.path[r.path_len - 1] != '/')
            sb_str(&b, "/");
    }
    sb_put(&b, ref, rlen);
    return b.s;
}

int sl_npm_conflict_line(const char *data, size_t len)
{
    int line = 1;
    for (size_t pos = 0; pos < len; line++) {
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        if (n && s[n - 1] == '\r')
            n--;
        if (n >= 7 && (!memcmp(s, "<<<<<<<", 7) || !memcmp(s, ">>>>>>>", 7) ||
                       (n == 7 && !memcmp(s, "=======", 7))))
            return line;
        if (!nl)
            break;
        pos = (size_t)(nl - data) + 1;
    }
    return 0;
}

/* ---- the Yarn 1 text syntax ----------------------------------------- */

static bool is_alpha(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* One token at s[*i] (not a space). */
static bool y1_token(const char *s, size_t n, size_t *i, sl_y1_tok *t, const char **why)
{
    size_t p = *i;
    memset(t, 0, sizeof *t);
    if (s[p] == '"') {
        size_t q = p + 1;
        for (;;) {
            if (q >= n) {
                *why = "unterminated string";
                return false;
            }
            unsigned char ch = (unsigned char)s[q];
            if (ch == '"')
                break;
            if (ch < 0x20) {
                *why = "control character in a string";
                return false;
            }
            if (ch == '\\') {
                if (q + 1 >= n) {
                    *why = "unterminated string";
                    return false;
                }
                char e = s[q + 1];
                if (e == 'u') {
                    if (q + 5 >= n || sl_hex_value(s + q + 2, 4) < 0) {
                        *why = "bad \\u escape in a string";
                        return false;
                    }
                    q += 6;
                    continue;
                }
                if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                    *why = "bad escape in a string";
                    return false;
                }
                q += 2;
                continue;
            }
            q++;
        }
        t->kind = SL_Y1_STRING;
        t->s = s + p + 1;
        t->len = q - p - 1;
        t->quoted = true;
        *i = q + 1;
    } else if (is_digit(s[p])) {
        size_t q = p;
        while (q < n && is_digit(s[q]))
            q++;
        t->kind = SL_Y1_NUMBER;
        t->s = s + p;
        t->len = q - p;
        *i = q;
    } else if (is_alpha(s[p]) || s[p] == '/' || s[p] == '.' || s[p] == '-') {
        size_t q = p;
        while (q < n && s[q] != ':' && s[q] != ' ' && s[q] != ',' && s[q] != '\0' && s[q] != '\t')
            q++;
        t->s = s + p;
        t->len = q - p;
        t->kind = ((t->len == 4 && !memcmp(t->s, "true", 4)) || (t->len == 5 && !memcmp(t->s, "false", 5)))
                      ? SL_Y1_BOOL
                      : SL_Y1_STRING;
        *i = q;
    } else {
        *why = "unexpected character";
        return false;
    }
    /* a token ends at a delimiter */
    if (*i < n && s[*i] != ' ' && s[*i] != ':' && s[*i] != ',') {
        *why = "unexpected character after a value";
        return false;
    }
    return true;
}

static void skip_spaces(const char *s, size_t n, size_t *i)
{
    while (*i < n && s[*i] == ' ')
        (*i)++;
}

/* Nothing but a comment may follow. */
static bool at_line_end(const char *s, size_t n, size_t i)
{
    return i >= n || s[i] == '#';
}

bool sl_y1_parse(const char *data, size_t len, sl_y1_fn fn, void *ctx, int *line, const char **why)
{
    size_t pos = 0;
    int depth = 0;                 /* blocks open; a line may be at level 0..depth */
    *line = 0;
    *why = NULL;
    if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
        pos = 3;
    while (pos < len) {
        (*line)++;
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos = nl ? pos + n + 1 : len;
        if (n && s[n - 1] == '\r')
            n--;

        size_t i = 0;
        skip_spaces(s, n, &i);
        if (at_line_end(s, n, i))
            continue;              /* blank or comment */
        if (i % 2) {
            *why = "indentation is not a multiple of two spaces";
            return false;
        }
        int lvl = (int)(i / 2);
        if (lvl > depth) {
            *why = "unexpected indentation";
            return false;
        }
        while (depth > lvl) {
            depth--;
            if (!fn(ctx, SL_Y1_CLOSE, depth, NULL, 0, NULL, *line))
                return false;
        }

        sl_y1_tok key, tok;
        size_t nkeys = 1;
        if (!y1_token(s, n, &i, &key, why))
            return false;
        if (key.kind != SL_Y1_STRING) {
            *why = "expected a key";
            return false;
        }
        skip_spaces(s, n, &i);
        while (i < n && s[i] == ',') {
            i++;
            skip_spaces(s, n, &i);
            if (at_line_end(s, n, i)) {
                *why = "expected a key after ','";
                return false;
            }
            if (!y1_token(s, n, &i, &tok, why))
                return false;
            if (tok.kind != SL_Y1_STRING) {
                *why = "expected a key after ','";
                return false;
            }
            nkeys++;
            skip_spaces(s, n, &i);
        }
        if (i < n && s[i] == ':') {
            i++;
            skip_spaces(s, n, &i);
            if (!at_line_end(s, n, i)) {
                *why = "unexpected text after ':'";
                return false;
            }
            if (!fn(ctx, SL_Y1_OPEN, lvl, &key, nkeys, NULL, *line))
                return false;
            depth = lvl + 1;
            continue;
        }
        if (at_line_end(s, n, i)) {
            *why = "a key without a value";
            return false;
        }
        if (!y1_token(s, n, &i, &tok, why))
            return false;
        skip_spaces(s, n, &i);
        if (!at_line_end(s, n, i)) {
            *why = "unexpected text after a value";
            return false;
        }
        if (!fn(ctx, SL_Y1_PAIR, lvl, &key, nkeys, &tok, *line))
            return false;
    }
    while (depth > 0) {
        depth--;
        if (!fn(ctx, SL_Y1_CLOSE, depth, NULL, 0, NULL, *line))
            return false;
    }
    return true;
}

/* Counts every byte, writes those that fit (as snprintf does). */
static size_t put_utf8(char *out, size_t cap, size_t k, unsigned cp)
{
    char b[4];
    size_t n = sl_utf8_encode(cp, b);
    for (size_t i = 0; i < n; i++, k++)
        if (k + 1 < cap)
            out[k] = b[i];
    return k;
}

/* Four hex digits the tokenizer has checked already. */
static unsigned hex4(const char *s)
{
    return (unsigned)sl_hex_value(s, 4);
}

size_t sl_y1_text(const sl_y1_tok *t, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < t->len;) {
        char ch = t->s[i];
        if (!t->quoted || ch != '\\') {
            if (k + 1 < cap)
                out[k] = ch;
            k++;
            i++;
            continue;
        }
        char e = t->s[i + 1];     /* the parser checked every escape is whole */
        i += 2;
        if (e == 'u') {
            unsigned cp = hex4(t->s + i);
            i += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 <= t->len && t->s[i] == '\\' && t->s[i + 1] == 'u') {
                unsigned lo = hex4(t->s + i + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    i += 6;
                }
            }
            k = put_utf8(out, cap, k, cp);
            continue;
        }
        char v = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
        if (k + 1 < cap)
            out[k] = v;
        k++;
    }
    if (cap)
        out[k < cap ? k : cap - 1] = '\0';
    return k;
}

/* ---- libyaml documents ---------------------------------------------- */

static int line_of_offset(yaml_parser_t *parser, size_t offset)
{
    /* The reader reports a byte offset, not a line: count them. */
    const unsigned char *s = parser->input.string.start;
    size_t len = (size_t)(parser->input.string.end - s);
    int line = 1;
    for (size_t i = 0; i < offset && i < len; i++)
        if (s[i] == '\n')
            line++;
    return line;
}

bool sl_yaml_next(yaml_parser_t *parser, yaml_document_t *doc, bool *end, const char *path,
                  sl_lockerr *err)
{
    *end = false;
    if (!yaml_parser_load(parser, doc)) {
        int line;
        if (parser->error == YAML_READER_ERROR)
            line = line_of_offset(parser, parser->problem_offset);
        else if (parser->problem_mark.line || parser->problem_mark.column || !parser->context)
            line = (int)parser->problem_mark.line + 1;
        else
            line = (int)parser->context_mark.line + 1;
        /* At the end of a file without a final newline, libyaml counts
         * one line more than the file has. */
        int last = line_of_offset(parser, (size_t)-1);
        const unsigned char *stop = parser->input.string.end;
        if (stop > parser->input.string.start && stop[-1] == '\n')
            last--;
        if (line > last)
            line = last > 0 ? last : 1;
        sl_lockerr_set(err, path, line, "invalid YAML: %s%s%s",
                       parser->context ? parser->context : "", parser->context ? ", " : "",
                       parser->problem ? parser->problem : "cannot be parsed");
        return false;
    }
    if (!yaml_document_get_root_node(doc)) {
        yaml_document_delete(doc);
        *end = true;
    }
    return true;
}

yaml_node_t *sl_yaml_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    size_t klen = strlen(key);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == klen &&
            !memcmp(k->data.scalar.value, key, klen))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

const char *sl_yaml_str(const yaml_node_t *n, size_t *len)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    *len = n->data.scalar.length;
    return (const char *)n->data.scalar.value;
}

int sl_yaml_line(const yaml_node_t *n)
{
    return n ? (int)n->start_mark.line + 1 : 0;
}
