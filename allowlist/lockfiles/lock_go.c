/* Go modules: go.mod, with the project's go.sum and go.env.
 *
 * The modules a fresh `go mod download` / `go build` needs are those go.mod
 * requires (go >= 1.17 lists every module that provides a package) and
 * those go.sum records (their go.mod files make up the module graph), each
 * after go.mod's `replace`: a local replacement adds nothing, a remote one
 * fetches the replacement module instead.
 *
 * Where each module comes from follows the go command's environment, read
 * from go.env (KEY=VALUE lines, as $GOROOT/go.env and the GOENV file; lines
 * that are not that are ignored, as the go command ignores them):
 *  - GOPROXY (default https://proxy.golang.org,direct): every proxy URL in
 *    the list is emitted; `direct` only when it comes first, i.e. when it is
 *    the only way (after a proxy it is a fallback, LOCKFILES.md R3); `off`
 *    and file:// proxies reach nothing. proxy.golang.org redirects module
 *    zips to storage.googleapis.com (R6).
 *  - GOPRIVATE / GONOPROXY globs: matching modules are fetched directly from
 *    the host of their module path.
 *  - GOFLAGS=-mod=vendor, or a go >= 1.14 module with vendor/modules.txt and
 *    no -mod flag: everything comes from vendor/, nothing is reached.
 *
 * The checksum database (GOSUMDB, default sum.golang.org) is consulted only
 * for a required module version with no line at all in go.sum (a missing
 * zip hash alone is not counted: go.sum legitimately holds only the go.mod
 * hash of graph-only modules), unless GOSUMDB=off or GONOSUMDB/GOPRIVATE
 * matches. The go command reaches it through the first proxy that says it
 * supports it (proxy.golang.org does; for other proxies R9 assumes the same)
 * and directly otherwise, or at the URL GOSUMDB names.
 *
 * Any of go.mod, go.sum and go.env stands for its project, which is read
 * once (per_project). Without a go.mod, go.sum's modules are read as if a
 * go.mod required exactly those versions: a locked install (`go mod
 * download` against a go.mod written from them) fetches them through the
 * same GOPROXY, GOPRIVATE and GOFLAGS, and every one has a go.sum line, so
 * the checksum database is never needed; with no go version known, only
 * GOFLAGS=-mod=vendor turns vendoring on. go.env alone adds nothing (R4).
 *
 * With --pins nothing can be pinned (PINS.md "Go"): go.sum's h1: hash is
 * over the module's file tree, not over the .zip the proxy sends. The host
 * entries say so.
 *
 * Not modelled (LOCKFILES.md §4): vanity import paths (golang.org/x/... lives
 * on go.googlesource.com, gopkg.in on github.com: direct mode emits only the
 * module path's host, which answers ?go-get=1), GOINSECURE (plain http),
 * GOVCS, go.work workspaces, GOTOOLCHAIN toolchain downloads, and the
 * process environment (only go.env is read). */
#include "lockfile.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "text.h"

#define PATH_MAX_LEN 1024          /* longer module paths are refused */
#define DEFAULT_GOPROXY "https://proxy.golang.org,direct"
#define DEFAULT_GOSUMDB "sum.golang.org"

typedef struct span {
    const char *s;
    size_t n;
} span;

typedef struct req {
    span path, ver;
    int line;
} req;

typedef struct rep {
    span old, oldver;              /* oldver.n == 0: every version */
    span new, newver;              /* newver.n == 0: a local directory */
    int line;
} rep;

typedef struct sumline {
    span path, ver;                /* ver without "/go.mod" */
    int line;
} sumline;

typedef struct gomod {
    bool has_module, has_go;
    int go_major, go_minor;
    req *reqs;
    size_t nreq, capreq;
    rep *reps;
    size_t nrep, caprep;
    char *arena;                   /* decoded tokens; never longer than the input */
    size_t used;
} gomod;

enum { E_GOPROXY, E_GOPRIVATE, E_GONOPROXY, E_GONOSUMDB, E_GOSUMDB, E_GOFLAGS, E_COUNT };
static const char *const env_names[E_COUNT] = {
    "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOFLAGS",
};

typedef struct goenv {
    span val[E_COUNT];
    int line[E_COUNT];             /* 0: not set in go.env */
} goenv;

typedef enum { PX_URL, PX_FILE, PX_DIRECT, PX_OFF } pxkind;
typedef struct pxent {
    pxkind kind;
    span url;
} pxent;

typedef struct gorun {
    const char *mod_path, *sum_path, *env_path;   /* NULL when absent */
    const char *top;               /* what a default setting is blamed on: go.mod, else go.sum */
    goenv env;
    pxent px[32];
    size_t npx;
    sl_derived *out;
    sl_lockerr *err;
} gorun;

/* ---- small helpers ---- */

static bool span_eq(span a, span b)
{
    return a.n == b.n && !memcmp(a.s, b.s, a.n);
}

static bool span_is(span a, const char *s)
{
    return a.n == strlen(s) && !memcmp(a.s, s, a.n);
}

static int span_cmp(span a, span b)
{
    int c = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
    return c ? c : (a.n < b.n ? -1 : a.n > b.n);
}

/* Untrusted text for a message: printable ASCII, the rest as '?', cut. */
static const char *shown(span t, char *buf, size_t cap)
{
    return sl_display_untrusted(t.s, t.n, buf, cap, SL_DISPLAY_QMARK);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- go.mod ---- */

typedef enum { T_IDENT, T_STRING, T_LPAREN, T_RPAREN, T_ARROW } tkind;
typedef struct tok {
    tkind kind;
    span t;
} tok;

#define LINE_TOKENS_MAX 16         /* no directive takes more than 5 */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Split one line into tokens, as golang.org/x/mod/modfile's lexer does.
 * Strings are decoded into the arena. Returns the count, -1 on error. */
static int lex_line(gomod *m, const char *p, const char *end, tok *toks, int line,
                    const char *path, sl_lockerr *err)
{
    int n = 0;
    while (p < end) {
        if (is_space(*p)) {
            p++;
            continue;
        }
        if (end - p >= 2 && p[0] == '/' && p[1] == '/')
            break;                 /* a comment to the end of the line */
        if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
            sl_lockerr_set(err, path, line, "mod files must use // comments, not /* */ comments");
            return -1;
        }
        if (n == LINE_TOKENS_MAX) {
            sl_lockerr_set(err, path, line, "too many fields on one line");
            return -1;
        }
        tok *t = &toks[n++];
        if (*p == '(' || *p == ')') {
            t->kind = *p == '(' ? T_LPAREN : T_RPAREN;
            t->t = (span){ p, 1 };
            p++;
            continue;
        }
        if (*p == '"' || *p == '`') {
            char q = *p++;
            char *dst = m->arena + m->used;
            size_t k = 0;
            for (;;) {
                if (p >= end) {
                    sl_lockerr_set(err, path, line, "unterminated quoted string");
                    return -1;
                }
                char c = *p++;
                if (c == q)
                    break;
                if (c == '\\' && q == '"') {
                    if (p >= end) {
                        sl_lockerr_set(err, path, line, "unterminated quoted string");
                        return -1;
                    }
                    c = *p++;
                    if (c != '"' && c != '\\') {
                        /* Module paths and versions have no use for other
                         * escapes; refusing them keeps decoding trivial. */
                        sl_lockerr_set(err, path, line, "unsupported escape '\\%c' in quoted string",
                                       (c >= 0x20 && c < 0x7f) ? c : '?');
                        return -1;
                    }
                }
                dst[k++] = c;
            }
            m->used += k;
            t->kind = T_STRING;
            t->t = (span){ dst, k };
            continue;
        }
        if (end - p >= 2 && p[0] == '=' && p[1] == '>' && (end - p == 2 || is_space(p[2]))) {
            t->kind = T_ARROW;
            t->t = (span){ p, 2 };
            p += 2;
            continue;
        }
        const char *s = p;
        while (p < end && !is_space(*p) && *p != '(' && *p != ')' && *p != '"' && *p != '`' &&
               !(end - p >= 2 && p[0] == '/' && (p[1] == '/' || p[1] == '*')))
            p++;
        t->kind = T_IDENT;
        t->t = (span){ s, (size_t)(p - s) };
    }
    return n;
}

static bool is_word(const tok *t)
{
    return t->kind == T_IDENT || t->kind == T_STRING;
}

/* modfile.IsDirectoryPath: a replacement that is a local directory. */
static bool is_dir_path(span p)
{
    static const char *const prefixes[] = { "./", "../", "/", ".\\", "..\\", "\\" };
    if (span_is(p, ".") || span_is(p, ".."))
        return true;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t k = strlen(prefixes[i]);
        if (p.n >= k && !memcmp(p.s, prefixes[i], k))
            return true;
    }
    return p.n >= 2 && p.s[1] == ':' &&
           ((p.s[0] >= 'a' && p.s[0] <= 'z') || (p.s[0] >= 'A' && p.s[0] <= 'Z'));
}

static bool check_path(span p, int line, const char *path, sl_lockerr *err)
{
    char tmp[96];
    if (p.n == 0 || p.n > PATH_MAX_LEN || memchr(p.s, '\0', p.n)) {
        sl_lockerr_set(err, path, line, "invalid module path '%s'", shown(p, tmp, sizeof tmp));
        return false;
    }
    for (size_t i = 0; i < p.n; i++)
        if ((unsigned char)p.s[i] <= ' ' || p.s[i] == 0x7f) {
            sl_lockerr_set(err, path, line, "invalid module path '%s'", shown(p, tmp, sizeof tmp));
            return false;
        }
    return true;
}

/* A module version: "v" and a digit (semantic versions, pseudo-versions). */
static bool check_version(span v, int line, const char *path, sl_lockerr *err)
{
    char tmp[96];
    if (v.n < 2 || v.s[0] != 'v' || v.s[1] < '0' || v.s[1] > '9' || v.n > 256) {
        sl_lockerr_set(err, path, line, "invalid version '%s': must be of the form v1.2.3",
                       shown(v, tmp, sizeof tmp));
        return false;
    }
    for (size_t i = 0; i < v.n; i++)
        if ((unsigned char)v.s[i] <= ' ' || v.s[i] == 0x7f) {
            sl_lockerr_set(err, path, line, "invalid version '%s'", shown(v, tmp, sizeof tmp));
            return false;
        }
    return true;
}

/* One directive, verb and arguments (block entries come with their verb). */
static bool directive(gomod *m, span verb, const tok *a, int na, int line, const char *path,
                      sl_lockerr *err)
{
    char tmp[64], tmp2[64];
    for (int i = 0; i < na; i++)
        if (!is_word(&a[i]) && !(a[i].kind == T_ARROW && span_is(verb, "replace"))) {
            sl_lockerr_set(err, path, line, "unexpected '%s' in %s directive",
                           shown(a[i].t, tmp, sizeof tmp), shown(verb, tmp2, sizeof tmp2));
            return false;
        }
    if (span_is(verb, "module")) {
        if (na != 1) {
            sl_lockerr_set(err, path, line, "usage: module module/path");
            return false;
        }
        if (m->has_module) {
            sl_lockerr_set(err, path, line, "repeated module statement");
            return false;
        }
        m->has_module = true;
        return check_path(a[0].t, line, path, err);
    }
    if (span_is(verb, "go")) {
        span v = na == 1 ? a[0].t : (span){ "", 0 };
        if (na != 1 || v.n == 0 || v.s[0] < '0' || v.s[0] > '9') {
            sl_lockerr_set(err, path, line, "usage: go 1.23");
            return false;
        }
        /* major.minor, enough for the vendor-directory rule */
        size_t i = 0;
        int maj = 0, min = 0;
        while (i < v.n && v.s[i] >= '0' && v.s[i] <= '9' && maj < 1000)
            maj = maj * 10 + (v.s[i++] - '0');
        if (i < v.n && v.s[i] == '.')
            for (i++; i < v.n && v.s[i] >= '0' && v.s[i] <= '9' && min < 1000; i++)
                min = min * 10 + (v.s[i] - '0');
        m->has_go = true;
        m->go_major = maj;
        m->go_minor = min;
        return true;
    }
    if (span_is(verb, "toolchain") || span_is(verb, "godebug") || span_is(verb, "tool") ||
        span_is(verb, "ignore")) {
        if (na != 1) {
            sl_lockerr_set(err, path, line, "usage: %s takes one argument",
                           shown(verb, tmp, sizeof tmp));
            return false;
        }
        return true;
    }
    if (span_is(verb, "retract"))
        return na >= 1 || (sl_lockerr_set(err, path, line, "usage: retract version"), false);
    if (span_is(verb, "require") || span_is(verb, "exclude")) {
        if (na != 2) {
            sl_lockerr_set(err, path, line, "usage: %s module/path v1.2.3",
                           shown(verb, tmp, sizeof tmp));
            return false;
        }
        if (!check_path(a[0].t, line, path, err) || !check_version(a[1].t, line, path, err))
            return false;
        if (span_is(verb, "require")) {
            if (m->nreq == m->capreq)
                m->reqs = sl_xrealloc(m->reqs, (m->capreq = m->capreq ? m->capreq * 2 : 16) *
                                                sizeof *m->reqs);
            m->reqs[m->nreq++] = (req){ a[0].t, a[1].t, line };
        }
        return true;
    }
    if (span_is(verb, "replace")) {
        int arrow = na >= 2 && a[1].kind == T_ARROW ? 1 : na >= 3 && a[2].kind == T_ARROW ? 2 : -1;
        int right = na - arrow - 1;
        if (arrow < 0 || right < 1 || right > 2) {
            sl_lockerr_set(err, path, line,
                           "usage: replace module/path [v1.2.3] => other/module v1.4 | ../local/dir");
            return false;
        }
        for (int i = 0; i < na; i++)
            if (i != arrow && a[i].kind == T_ARROW) {
                sl_lockerr_set(err, path, line, "unexpected '=>' in replace directive");
                return false;
            }
        rep r = { .old = a[0].t, .new = a[arrow + 1].t, .line = line };
        if (!check_path(r.old, line, path, err) || !check_path(r.new, line, path, err))
            return false;
        if (arrow == 2) {
            r.oldver = a[1].t;
            if (!check_version(r.oldver, line, path, err))
                return false;
        }
        bool local = is_dir_path(r.new);
        if (right == 2) {
            if (local) {
                sl_lockerr_set(err, path, line,
                               "replacement module directory path must not have version");
                return false;
            }
            r.newver = a[arrow + 2].t;
            if (!check_version(r.newver, line, path, err))
                return false;
        } else if (!local) {
            sl_lockerr_set(err, path, line, "replacement module without version must be directory "
                                            "path (rooted or starting with ./ or ../)");
            return false;
        }
        if (m->nrep == m->caprep)
            m->reps = sl_xrealloc(m->reps, (m->caprep = m->caprep ? m->caprep * 2 : 8) *
                                            sizeof *m->reps);
        m->reps[m->nrep++] = r;
        return true;
    }
    sl_lockerr_set(err, path, line, "unknown directive: %s", shown(verb, tmp, sizeof tmp));
    return false;
}

static bool parse_gomod(gomod *m, const char *path, const char *data, size_t len,
                        sl_lockerr *err)
{
    memset(m, 0, sizeof *m);
    m->arena = sl_xrealloc(NULL, len + 1);
    const char *p = data, *end = data + len;
    int line = 0, block_line = 0;
    span block = { NULL, 0 };      /* the verb of an open block */
    tok toks[LINE_TOKENS_MAX];
    if (memchr(data, '\0', len)) {
        const char *z = memchr(data, '\0', len);
        int zl = 1;
        for (const char *q = data; q < z; q++)
            zl += *q == '\n';
        sl_lockerr_set(err, path, zl, "NUL byte: not a go.mod");
        return false;
    }
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        int n = lex_line(m, p, le, toks, line, path, err);
        p = nl ? nl + 1 : end;
        if (n < 0)
            return false;
        if (n == 0)
            continue;
        if (block.s) {
            if (toks[0].kind == T_RPAREN) {
                if (n != 1) {
                    sl_lockerr_set(err, path, line, "unexpected text after ')'");
                    return false;
                }
                block.s = NULL;
                continue;
            }
            if (!directive(m, block, toks, n, line, path, err))
                return false;
            continue;
        }
        if (toks[0].kind != T_IDENT) {
            sl_lockerr_set(err, path, line, "expected a directive (module, go, require, replace, ...)");
            return false;
        }
        if (n >= 2 && toks[1].kind == T_LPAREN) {
            static const char *const blockable[] = { "require", "exclude", "replace", "retract",
                                                     "godebug", "tool", "ignore" };
            bool ok = false;
            for (size_t i = 0; i < sizeof blockable / sizeof *blockable; i++)
                ok = ok || span_is(toks[0].t, blockable[i]);
            if (!ok) {
                char tmp[64];
                sl_lockerr_set(err, path, line, "%s does not take a block",
                               shown(toks[0].t, tmp, sizeof tmp));
                return false;
            }
            if (n == 3 && toks[2].kind == T_RPAREN)
                continue;          /* "require ()" */
            if (n != 2) {
                sl_lockerr_set(err, path, line, "a block's '(' must end its line");
                return false;
            }
            block = toks[0].t;
            block_line = line;
            continue;
        }
        if (!directive(m, toks[0].t, toks + 1, n - 1, line, path, err))
            return false;
    }
    if (block.s) {
        sl_lockerr_set(err, path, block_line, "unterminated block: missing ')'");
        return false;
    }
    if (!m->has_module) {
        sl_lockerr_set(err, path, 0, "no module directive: not a go.mod");
        return false;
    }
    return true;
}

static void gomod_free(gomod *m)
{
    free(m->reqs);
    free(m->reps);
    free(m->arena);
}

/* ---- go.sum ---- */

static int cmp_sum(const void *a, const void *b)
{
    const sumline *x = a, *y = b;
    int c = span_cmp(x->path, y->path);
    return c ? c : span_cmp(x->ver, y->ver);
}

/* "path version[/go.mod] hash" per line, three fields exactly (the go
 * command refuses anything else as a malformed go.sum). Each line names a
 * module version to fetch, so its path and version must be ones go.mod
 * would accept in a require. */
static bool parse_gosum(const char *path, const char *data, size_t len, sumline **out,
                        size_t *nout, sl_lockerr *err)
{
    sumline *v = NULL;
    size_t n = 0, cap = 0;
    const char *p = data, *end = data + len;
    int line = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        span f[3];
        int nf = 0;
        for (const char *q = p; q < le;) {
            if (is_space(*q)) {
                q++;
                continue;
            }
            const char *s = q;
            while (q < le && !is_space(*q))
                q++;
            if (nf < 3)
                f[nf] = (span){ s, (size_t)(q - s) };
            nf++;
        }
        p = nl ? nl + 1 : end;
        if (nf == 0)
            continue;
        if (nf != 3 || memchr(f[0].s, '\0', f[0].n) || memchr(f[1].s, '\0', f[1].n)) {
            sl_lockerr_set(err, path, line, "malformed go.sum: %s", nf != 3 ?
                           "wrong number of fields" : "NUL byte");
            free(v);
            return false;
        }
        if (f[1].n > 7 && !memcmp(f[1].s + f[1].n - 7, "/go.mod", 7))
            f[1].n -= 7;
        if (!check_path(f[0], line, path, err) || !check_version(f[1], line, path, err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            sl_lockerr_set(err, path, line, "malformed go.sum: %s", why);
            free(v);
            return false;
        }
        if (n == cap)
            v = sl_xrealloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
        v[n++] = (sumline){ f[0], f[1], line };
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_sum);
    *out = v;
    *nout = n;
    return true;
}

static bool has_sum(const sumline *v, size_t n, span path, span ver)
{
    sumline key = { path, ver, 0 };
    return n && bsearch(&key, v, n, sizeof *v, cmp_sum) != NULL;
}

/* ---- go.env ---- */

/* KEY=VALUE lines, read as the go command reads its env files: a line
 * without '=' or not starting with an upper-case letter is ignored; the
 * last setting of a key wins; an empty value means the default. */
static void parse_goenv(const char *data, size_t len, goenv *env)
{
    memset(env, 0, sizeof *env);
    const char *p = data, *end = data + len;
    int line = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(le - p));
        const char *s = p;
        p = nl ? nl + 1 : end;
        if (!eq || *s < 'A' || *s > 'Z')
            continue;
        if (le > eq && le[-1] == '\r')
            le--;                  /* written on Windows */
        span key = { s, (size_t)(eq - s) };
        for (int k = 0; k < E_COUNT; k++)
            if (span_is(key, env_names[k])) {
                env->val[k] = (span){ eq + 1, (size_t)(le - eq - 1) };
                env->line[k] = env->val[k].n ? line : 0;
            }
    }
}

/* The value in effect: go.env's, else the default. */
static span env_get(const gorun *g, int k, const char *def)
{
    if (g->env.line[k])
        return g->env.val[k];
    return (span){ def, def ? strlen(def) : 0 };
}

/* GOPROXY as the go command splits it (modfetch proxyList): entries
 * separated by ',' or '|', trimmed; "direct" and "off" end the list; a URL
 * without a scheme gets https://. */
static bool parse_goproxy(gorun *g)
{
    span v = env_get(g, E_GOPROXY, DEFAULT_GOPROXY);
    int line = g->env.line[E_GOPROXY];
    const char *file = line ? g->env_path : g->top;
    const char *p = v.s, *end = v.s + v.n;
    char tmp[128];
    g->npx = 0;
    while (p < end) {
        const char *s = p;
        while (p < end && *p != ',' && *p != '|')
            p++;
        span e = { s, (size_t)(p - s) };
        if (p < end)
            p++;
        while (e.n && is_space(e.s[0]))
            e.s++, e.n--;
        while (e.n && is_space(e.s[e.n - 1]))
            e.n--;
        if (e.n == 0)
            continue;
        if (g->npx == sizeof g->px / sizeof *g->px) {
            sl_lockerr_set(g->err, file, line, "GOPROXY: too many entries");
            return false;
        }
        pxent *x = &g->px[g->npx++];
        x->url = e;
        if (span_is(e, "direct") || span_is(e, "off")) {
            x->kind = span_is(e, "direct") ? PX_DIRECT : PX_OFF;
            return true;
        }
        bool has_scheme = false;
        for (size_t i = 0; i + 1 < e.n; i++)
            if (e.s[i] == ':' && e.s[i + 1] == '/')
                has_scheme = true;
        if (!has_scheme) {
            bool urlish = memchr(e.s, '.', e.n) || memchr(e.s, ':', e.n) || memchr(e.s, '/', e.n);
            if (!urlish || e.s[0] == '/') {
                sl_lockerr_set(g->err, file, line, "GOPROXY: invalid proxy URL '%s'",
                               shown(e, tmp, sizeof tmp));
                return false;
            }
            /* "proxy.corp.example:8443/go" means https://proxy.corp.example:8443/go */
            x->kind = PX_URL;
            x->url = e;
            continue;
        }
        if (e.n >= 7 && !strncmp(e.s, "file://", 7)) {
            x->kind = PX_FILE;
        } else if ((e.n >= 8 && !strncmp(e.s, "https://", 8)) ||
                   (e.n >= 7 && !strncmp(e.s, "http://", 7))) {
            x->kind = PX_URL;
        } else {
            sl_lockerr_set(g->err, file, line,
                           "GOPROXY: invalid proxy URL '%s': scheme must be https, http, or file",
                           shown(e, tmp, sizeof tmp));
            return false;
        }
    }
    if (g->npx == 0) {
        sl_lockerr_set(g->err, file, line, "GOPROXY list is not the empty string, but contains no entries");
        return false;
    }
    return true;
}

/* module.MatchPrefixPatterns: does a comma-separated glob list match a
 * prefix of the module path (as many elements as the glob has)? */
static bool globs_match(span globs, span path)
{
    char pat[PATH_MAX_LEN + 1], pre[PATH_MAX_LEN + 1];
    if (!globs.s)
        return false;              /* not set */
    const char *p = globs.s, *end = globs.s + globs.n;
    while (p < end) {
        const char *s = p;
        while (p < end && *p != ',')
            p++;
        span g = { s, (size_t)(p - s) };
        if (p < end)
            p++;
        while (g.n && g.s[g.n - 1] == '/')
            g.n--;                 /* a trailing slash names the same prefix */
        if (g.n == 0 || g.n > PATH_MAX_LEN || path.n > PATH_MAX_LEN)
            continue;
        size_t slashes = 0;
        for (size_t i = 0; i < g.n; i++)
            slashes += g.s[i] == '/';
        size_t k = 0, seen = 0;
        for (; k < path.n; k++)
            if (path.s[k] == '/' && seen++ == slashes)
                break;
        if (seen < slashes)
            continue;              /* the path has fewer elements than the glob */
        memcpy(pat, g.s, g.n);
        pat[g.n] = '\0';
        memcpy(pre, path.s, k);
        pre[k] = '\0';
        if (fnmatch(pat, pre, FNM_PATHNAME) == 0)
            return true;
    }
    return false;
}

/* ---- emitting ---- */

/* Add host:port for each of up to three files. */
static bool add_for(gorun *g, const char *host, size_t hlen, int port, const char *const files[3],
                    const char *errfile, int errline)
{
    static const char why[] = "go.sum's h1: hashes a module's file tree, not the .zip downloaded";
    char msg[400];
    bool pins = sl_derived_pins(g->out);
    for (int i = 0; i < 3; i++)
        if (files[i] && !(pins ? sl_derived_add_fallback(g->out, host, hlen, port, NULL, 0, files[i], why, msg,
                                                         sizeof msg)
                               : sl_derived_add(g->out, host, hlen, port, files[i], msg, sizeof msg))) {
            sl_lockerr_set(g->err, errfile, errline, "%s", msg);
            return false;
        }
    return true;
}

static bool add_proxy(gorun *g, const pxent *x, const char *const files[3])
{
    char buf[PATH_MAX_LEN + 16], tmp[128];
    span u = x->url;
    if (!memmem(u.s, u.n, "://", 3)) {
        if (u.n > PATH_MAX_LEN)
            return false;
        memcpy(buf, "https://", 8);
        memcpy(buf + 8, u.s, u.n);
        u = (span){ buf, u.n + 8 };
    }
    int line = g->env.line[E_GOPROXY];
    const char *file = line ? g->env_path : g->top;
    sl_url url;
    if (!sl_url_parse(u.s, u.n, &url) || url.port < 0) {
        sl_lockerr_set(g->err, file, line, "GOPROXY: invalid proxy URL '%s'",
                       shown(x->url, tmp, sizeof tmp));
        return false;
    }
    if (!add_for(g, url.host, url.host_len, url.port, files, file, line))
        return false;
    /* R6: module zips are redirected to Google Cloud Storage. */
    if (url.host_len == 16 && !strncasecmp(url.host, "proxy.golang.org", 16))
        return add_for(g, "storage.googleapis.com", 22, 443, files, file, line);
    return true;
}

/* Direct mode: the host of the module path (the go command asks it with
 * ?go-get=1, or knows it as a code host, and fetches over https). */
static bool add_direct(gorun *g, span mpath, const char *const files[3], const char *errfile,
                       int errline)
{
    char tmp[128];
    const char *slash = memchr(mpath.s, '/', mpath.n);
    span host = { mpath.s, slash ? (size_t)(slash - mpath.s) : mpath.n };
    if (!memchr(host.s, '.', host.n)) {
        sl_lockerr_set(g->err, errfile, errline,
                       "module %s: malformed module path: missing dot in first path element",
                       shown(mpath, tmp, sizeof tmp));
        return false;
    }
    return add_for(g, host.s, host.n, 443, files, errfile, errline);
}

/* The replacement for path@ver, if any: a versioned replace wins over an
 * unversioned one. Returns NULL if there is none. */
static const rep *replacement(const gomod *m, span path, span ver)
{
    const rep *any = NULL;
    for (size_t i = 0; i < m->nrep; i++) {
        const rep *r = &m->reps[i];
        if (!span_eq(r->old, path))
            continue;
        if (r->oldver.n == 0)
            any = r;
        else if (span_eq(r->oldver, ver))
            return r;
    }
    return any;
}

/* Where one module comes from. *fetched: whether it can be fetched at all
 * (GOPROXY=off, or only file:// proxies, reach nothing). */
static bool route_module(gorun *g, span mpath, bool from_sum, const char *errfile, int errline,
                         bool *fetched)
{
    *fetched = true;
    span noproxy = g->env.line[E_GONOPROXY] ? g->env.val[E_GONOPROXY] : g->env.val[E_GOPRIVATE];
    bool private_cfg = g->env.line[E_GONOPROXY] || g->env.line[E_GOPRIVATE];
    const char *files[3] = { g->mod_path, from_sum ? g->sum_path : NULL, NULL };
    if (private_cfg && globs_match(noproxy, mpath)) {
        files[2] = g->env_path;
        return add_direct(g, mpath, files, errfile, errline);
    }
    if (g->env.line[E_GOPROXY])
        files[2] = g->env_path;
    bool any_url = false;
    for (size_t i = 0; i < g->npx; i++) {
        const pxent *x = &g->px[i];
        switch (x->kind) {
        case PX_URL:
            if (!add_proxy(g, x, files))
                return false;
            any_url = true;
            break;
        case PX_FILE:
            break;                 /* a local directory */
        case PX_DIRECT:
            /* Only when it is the only way: after a proxy it is a fallback. */
            return i == 0 ? add_direct(g, mpath, files, errfile, errline) : true;
        case PX_OFF:
            *fetched = any_url;
            return true;
        }
    }
    *fetched = any_url;
    return true;
}

/* The checksum database, reached as modfetch/sumdb.go's dbDial/initBase
 * decide: an explicit URL in GOSUMDB, else the first proxy of the list
 * (assumed to support /sumdb/<name>/supported; file:// ones are skipped),
 * else directly at https://<name>. */
static bool add_sumdb(gorun *g)
{
    char tmp[128];
    span v = env_get(g, E_GOSUMDB, DEFAULT_GOSUMDB);
    int line = g->env.line[E_GOSUMDB];
    const char *file = line ? g->env_path : g->top;
    span f[3];
    int nf = 0;
    for (const char *p = v.s, *end = v.s + v.n; p < end;) {
        if (is_space(*p)) {
            p++;
            continue;
        }
        const char *s = p;
        while (p < end && !is_space(*p))
            p++;
        if (nf < 3)
            f[nf] = (span){ s, (size_t)(p - s) };
        nf++;
    }
    if (nf == 0 || nf > 2) {
        sl_lockerr_set(g->err, file, line, "invalid GOSUMDB: %s", nf ? "too many fields" : "empty");
        return false;
    }
    const char *files[3] = { g->mod_path, g->sum_path, NULL };
    if (line || g->env.line[E_GOPROXY])
        files[2] = g->env_path;
    if (span_is(f[0], "sum.golang.google.cn") && nf == 1) {
        f[1] = (span){ "https://sum.golang.google.cn", 28 };
        nf = 2;
    }
    if (nf == 2) {
        sl_url u;
        if (!sl_url_parse(f[1].s, f[1].n, &u) || u.port < 0) {
            sl_lockerr_set(g->err, file, line, "invalid GOSUMDB URL '%s'",
                           shown(f[1], tmp, sizeof tmp));
            return false;
        }
        return add_for(g, u.host, u.host_len, u.port, files, file, line);
    }
    for (size_t i = 0; i < g->npx; i++) {
        if (g->px[i].kind == PX_URL)
            return add_proxy(g, &g->px[i], files);
        if (g->px[i].kind != PX_FILE)
            break;
    }
    /* Directly: the database's name up to its first '+' (key) is host[/path]. */
    span name = f[0];
    const char *plus = memchr(name.s, '+', name.n);
    if (plus)
        name.n = (size_t)(plus - name.s);
    const char *slash = memchr(name.s, '/', name.n);
    if (slash)
        name.n = (size_t)(slash - name.s);
    if (name.n == 0 || memchr(name.s, ':', name.n)) {
        sl_lockerr_set(g->err, file, line, "invalid GOSUMDB name '%s'", shown(f[0], tmp, sizeof tmp));
        return false;
    }
    return add_for(g, name.s, name.n, 443, files, file, line);
}

/* -mod from GOFLAGS: "vendor", "mod", "readonly" or "" (not given). */
static bool goflags_mod(gorun *g, span *mode)
{
    span v = g->env.val[E_GOFLAGS];
    *mode = (span){ "", 0 };
    if (!g->env.line[E_GOFLAGS])
        return true;
    for (const char *p = v.s, *end = v.s + v.n; p < end;) {
        if (is_space(*p)) {
            p++;
            continue;
        }
        const char *s = p;
        while (p < end && !is_space(*p))
            p++;
        span f = { s, (size_t)(p - s) };
        if (f.n >= 2 && f.s[0] == '-' && f.s[1] == '-')
            f.s++, f.n--;
        if (f.n < 5 || memcmp(f.s, "-mod=", 5))
            continue;
        span m = { f.s + 5, f.n - 5 };
        if (!span_is(m, "vendor") && !span_is(m, "mod") && !span_is(m, "readonly")) {
            char tmp[64];
            sl_lockerr_set(g->err, g->env_path, g->env.line[E_GOFLAGS],
                           "GOFLAGS: -mod=%s: must be readonly, vendor, or mod",
                           shown(m, tmp, sizeof tmp));
            return false;
        }
        *mode = m;
    }
    return true;
}

/* A file of the project: the bytes the driver gave when it is the one
 * asked for, else the project's. NULL with err->msg empty when absent. */
typedef struct gofile {
    const char *path, *data;
    size_t len;
} gofile;

static bool project_file(sl_project *proj, const char *rel, const gofile *given, gofile *f,
                         sl_lockerr *err)
{
    if (!strcmp(base_name(given->path), rel)) {
        *f = *given;
        return true;
    }
    err->msg[0] = '\0';
    f->path = NULL;
    f->data = sl_project_file(proj, rel, &f->len, &f->path, err);
    return err->msg[0] == '\0';
}

/* The project: go.mod's requirements and go.sum's modules, or, without a
 * go.mod, go.sum's modules as if a go.mod required exactly those. */
static bool go_project(sl_project *proj, const gofile *given, sl_derived *out, sl_lockerr *err)
{
    gorun g = { .out = out, .err = err };
    gomod m;
    memset(&m, 0, sizeof m);
    sumline *sums = NULL, *reqd = NULL;
    size_t nsums = 0;
    bool ok = false;
    gofile mod, sum, env;
    if (!project_file(proj, "go.mod", given, &mod, err) ||
        !project_file(proj, "go.sum", given, &sum, err) ||
        !project_file(proj, "go.env", given, &env, err))
        goto out;
    if (!mod.data && !sum.data) {
        ok = true;                 /* go.env alone: config adds nothing (R4) */
        goto out;
    }
    if (mod.data) {
        g.mod_path = g.top = mod.path;
        if (!parse_gomod(&m, mod.path, mod.data, mod.len, err))
            goto out;
    }
    if (env.data) {
        g.env_path = env.path;
        parse_goenv(env.data, env.len, &g.env);
    }
    if (sum.data) {
        g.sum_path = sum.path;
        if (!g.top)
            g.top = sum.path;
        if (!parse_gosum(sum.path, sum.data, sum.len, &sums, &nsums, err))
            goto out;
    }

    span mode;
    if (!goflags_mod(&g, &mode) || !parse_goproxy(&g))
        goto out;
    if (span_is(mode, "vendor")) {
        ok = true;                 /* everything comes from vendor/ */
        goto out;
    }
    if (mode.n == 0 && m.has_go && (m.go_major > 1 || (m.go_major == 1 && m.go_minor >= 14))) {
        sl_lockerr e = { .msg = "" };
        size_t vlen;
        const char *vdata = sl_project_file(proj, "vendor/modules.txt", &vlen, NULL, &e);
        if (vdata) {
            ok = true;             /* the go command defaults to -mod=vendor */
            goto out;
        }
        if (e.msg[0]) {
            *err = e;
            goto out;
        }
    }

    /* The modules go.mod requires, then those only go.sum knows. */
    span nosumdb = g.env.line[E_GONOSUMDB] ? g.env.val[E_GONOSUMDB] : g.env.val[E_GOPRIVATE];
    span sumdb = env_get(&g, E_GOSUMDB, DEFAULT_GOSUMDB);
    bool need_sumdb = false;
    reqd = sl_xrealloc(NULL, (m.nreq ? m.nreq : 1) * sizeof *reqd);   /* after replace */
    size_t nreqd = 0;
    for (size_t i = 0; i < m.nreq; i++) {
        span p = m.reqs[i].path, v = m.reqs[i].ver;
        const rep *r = replacement(&m, p, v);
        if (r && r->newver.n == 0)
            continue;              /* a local directory */
        if (r)
            p = r->new, v = r->newver;
        int line = r ? r->line : m.reqs[i].line;
        reqd[nreqd++] = (sumline){ p, v, line };
        bool fetched;
        if (!route_module(&g, p, false, g.mod_path, line, &fetched))
            goto out;
        if (fetched && !span_is(sumdb, "off") && !globs_match(nosumdb, p) &&
            !has_sum(sums, nsums, p, v))
            need_sumdb = true;
    }
    if (nreqd)
        qsort(reqd, nreqd, sizeof *reqd, cmp_sum);
    for (size_t i = 0; i < nsums; i++) {
        if (i > 0 && span_eq(sums[i].path, sums[i - 1].path) && span_eq(sums[i].ver, sums[i - 1].ver))
            continue;
        span p = sums[i].path;
        if (has_sum(reqd, nreqd, p, sums[i].ver))
            continue;              /* routed above, as go.mod requires it */
        const rep *r = replacement(&m, p, sums[i].ver);
        if (r && r->newver.n == 0)
            continue;
        if (r)
            p = r->new;
        bool fetched;
        if (!route_module(&g, p, true, g.sum_path, sums[i].line, &fetched))
            goto out;
    }
    if (need_sumdb && !add_sumdb(&g))
        goto out;
    ok = true;
out:
    free(reqd);
    free(sums);
    gomod_free(&m);
    return ok;
}

static bool go_recognises(const char *base)
{
    return !strcmp(base, "go.mod") || !strcmp(base, "go.sum") || !strcmp(base, "go.env");
}

/* Any of go.mod, go.sum and go.env stands for its project (per_project:
 * the driver calls this once per directory). */
static bool go_read(const char *path, const char *data, size_t len, sl_project *proj,
                    sl_derived *out, sl_lockerr *err)
{
    gofile given = { path, data, len };
    return go_project(proj, &given, out, err);
}

const sl_lockreader sl_reader_go = {
    .name = "go",
    .recognises = go_recognises,
    .read = go_read,
    .per_project = true,
};
