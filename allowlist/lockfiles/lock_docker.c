/* Dockerfile / Containerfile: the registries a build pulls images from.
 *
 * What a build pulls: every FROM image that is not an earlier stage or
 * `scratch`, `COPY --from=<image>` and `RUN --mount=...,from=<image>`, the
 * `# syntax=<image>` frontend, and `ADD <url>` sources (the builder itself
 * fetches those). Global ARG defaults (before the first FROM) are
 * substituted in FROM lines, stage ARG/ENV values in COPY/RUN/ADD flags and
 * sources, as BuildKit does.
 *
 * An ARG declared without a default (or a platform ARG such as TARGETARCH)
 * has a value only at build time: when the registry host of an image depends
 * on one, we cannot know it and refuse with FILE:LINE rather than guess.
 * A reference to it in the tag or digest alone is fine.
 *
 * With --pins nothing is pinned (PINS.md "the rest"): an image digest names
 * a manifest, and the layers it lists come from URLs the registry gives at
 * pull time (redirects to CDNs); ADD sources are not pinned either. The host
 * entries say so.
 *
 * Not modelled (LOCKFILES.md §2, §4): `RUN` steps (they need their own
 * allowlist), --build-arg overrides, registry mirrors configured in the
 * daemon, ONBUILD triggers (they run in the child build), region- or
 * time-dependent blob hosts of MCR, Quay, GCR/Artifact Registry, and the
 * token realm of a private registry (R9: same host as the registry). */
#include "lockfile.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "growbuf.h"

#define MAX_VARS 4096          /* ARG/ENV definitions kept per scope */
#define MAX_STAGES 4096
#define MAX_WORDS 65536        /* words of one instruction */
#define MAX_HEREDOCS 16
#define MAX_SUBST_DEPTH 8
#define UNKNOWN '\x01'         /* marks text only known at build time */

typedef struct dbuf {
    char *p;
    size_t n, cap;
    bool oom;
} dbuf;

static void db_put(dbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void db_putc(dbuf *b, char c)
{
    db_put(b, &c, 1);
}

/* ---- Variables (ARG defaults, ENV values) ---- */

typedef struct var {
    char *name;
    char *val;        /* may contain UNKNOWN */
    char *why;        /* the variable to blame when val contains UNKNOWN */
} var;

typedef struct scope {
    var *v;
    size_t n, cap;
} scope;

static void scope_clear(scope *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].name);
        free(s->v[i].val);
        free(s->v[i].why);
    }
    s->n = 0;
}

static void scope_free(scope *s)
{
    scope_clear(s);
    free(s->v);
    s->v = NULL;
    s->cap = 0;
}

static const var *scope_get(const scope *s, const char *name, size_t len)
{
    for (size_t i = s->n; i-- > 0;)
        if (strlen(s->v[i].name) == len && memcmp(s->v[i].name, name, len) == 0)
            return &s->v[i];
    return NULL;
}

/* Replaces an earlier definition of the same name. `why` may be NULL. */
static bool scope_set(scope *s, const char *name, size_t len, const char *val, size_t vlen,
                      const char *why)
{
    var *v = (var *)scope_get(s, name, len);
    if (!v) {
        if (!sl_grow(&s->v, &s->cap, s->n, sizeof s->v[0], MAX_VARS))
            return false;
        v = &s->v[s->n++];
        v->name = strndup(name, len);
        v->val = v->why = NULL;
    }
    free(v->val);
    free(v->why);
    v->val = strndup(val, vlen);
    v->why = why ? strdup(why) : NULL;
    return v->name && v->val && (!why || v->why);
}

/* BuildKit's automatic platform ARGs and the proxy ARGs: usable without a
 * declaration, their value comes from the builder. */
static bool predefined_arg(const char *name, size_t len)
{
    static const char *const names[] = {
        "TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "BUILDPLATFORM",
        "BUILDOS", "BUILDARCH", "BUILDVARIANT", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
        "https_proxy", "FTP_PROXY", "ftp_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
        "all_proxy",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
            return true;
    return false;
}

static bool name_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

typedef struct subst {
    const scope *sc;
    char esc;
    char why[128];     /* first variable whose value is unknown */
} subst;

static void blame(subst *x, const char *name, size_t len)
{
    if (!x->why[0])
        snprintf(x->why, sizeof x->why, "%.*s", (int)(len < 100 ? len : 100), name);
}

/* Look a variable up and append its value: 1 non-empty, 0 known to be
 * empty (undeclared: Docker expands it to nothing), -1 unknown (a predefined
 * ARG). An ARG declared without a default holds UNKNOWN as its value. */
static int lookup(subst *x, const char *name, size_t len, dbuf *out, bool append)
{
    const var *v = scope_get(x->sc, name, len);
    if (!v)
        return predefined_arg(name, len) ? -1 : 0;
    if (strchr(v->val, UNKNOWN)) {
        if (v->why)
            blame(x, v->why, strlen(v->why));
        else
            blame(x, name, len);
    }
    if (append)
        db_put(out, v->val, strlen(v->val));
    return v->val[0] ? 1 : 0;
}

static void expand(subst *x, const char *s, size_t n, dbuf *out, int depth);

/* ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:+word}, ${NAME+word},
 * ${NAME:?msg}; anything else (pattern removal, substitution) is unknown.
 * `s` points after "${", `end` at the matching "}". */
static void expand_braced(subst *x, const char *s, const char *end, dbuf *out, int depth)
{
    const char *p = s;
    while (p < end && name_char(*p))
        p++;
    size_t nlen = (size_t)(p - s);
    if (nlen == 0 || !name_start(*s)) {
        db_putc(out, UNKNOWN);
        blame(x, s, (size_t)(end - s));
        return;
    }
    if (p == end) {
        if (lookup(x, s, nlen, out, true) < 0) {
            db_putc(out, UNKNOWN);
            blame(x, s, nlen);
        }
        return;
    }
    bool colon = *p == ':';
    if (colon)
        p++;
    char op = p < end ? *p : '\0';
    const char *word = p + 1;
    if (op != '-' && op != '+' && op != '?') {
        db_putc(out, UNKNOWN);
        blame(x, s, nlen);
        return;
    }
    const var *v = scope_get(x->sc, s, nlen);
    bool declared = v != NULL || predefined_arg(s, nlen);
    if (declared && (!v || strchr(v->val, UNKNOWN))) {
        /* Set or not is decided at build time. */
        db_putc(out, UNKNOWN);
        blame(x, s, nlen);
        return;
    }
    /* Known: undeclared (unset) or set to v->val. */
    bool set = v != NULL && (!colon || v->val[0] != '\0');
    if (op == '-') {
        if (set)
            lookup(x, s, nlen, out, true);
        else
            expand(x, word, (size_t)(end - word), out, depth + 1);
    } else if (op == '+') {
        if (set)
            expand(x, word, (size_t)(end - word), out, depth + 1);
    } else {
        if (set)
            lookup(x, s, nlen, out, true);
        else {
            db_putc(out, UNKNOWN);
            blame(x, s, nlen);
        }
    }
}

/* Shell-word expansion as BuildKit's lexer does it for instruction
 * arguments: $NAME, ${...}, the escape character, and quotes removed
 * (no expansion inside single quotes). */
static void expand(subst *x, const char *s, size_t n, dbuf *out, int depth)
{
    if (depth > MAX_SUBST_DEPTH) {
        db_putc(out, UNKNOWN);
        blame(x, "(nesting too deep)", 18);
        return;
    }
    char quote = '\0';
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (quote == '\'') {
            if (c == '\'')
                quote = '\0';
            else
                db_putc(out, c);
            continue;
        }
        if (c == x->esc && i + 1 < n) {
            db_putc(out, s[++i]);
            continue;
        }
        if (c == '"') {
            quote = quote ? '\0' : '"';
            continue;
        }
        if (c == '\'' && !quote) {
            quote = '\'';
            continue;
        }
        if (c != '$' || i + 1 >= n) {
            db_putc(out, c);
            continue;
        }
        if (s[i + 1] == '{') {
            /* Find the matching brace (defaults may nest ${...}). */
            size_t j = i + 2;
            int level = 1;
            for (; j < n; j++) {
                if (s[j] == '{')
                    level++;
                else if (s[j] == '}' && --level == 0)
                    break;
            }
            if (j >= n) {
                db_putc(out, UNKNOWN);
                blame(x, "(unterminated ${)", 17);
                return;
            }
            expand_braced(x, s + i + 2, s + j, out, depth);
            i = j;
        } else if (name_start(s[i + 1])) {
            size_t j = i + 1;
            while (j < n && name_char(s[j]))
                j++;
            if (lookup(x, s + i + 1, j - i - 1, out, true) < 0) {
                db_putc(out, UNKNOWN);
                blame(x, s + i + 1, j - i - 1);
            }
            i = j - 1;
        } else {
            db_putc(out, c);
        }
    }
}

/* ---- Logical lines ---- */

typedef struct reader {
    const char *data;
    size_t len;
    size_t pos;          /* next physical line */
    int lineno;          /* of the line at pos */
    char esc;
} reader;

/* The next physical line, without its newline (and a CR before it). */
static bool next_phys(reader *r, const char **line, size_t *n, int *lineno)
{
    if (r->pos >= r->len)
        return false;
    const char *s = r->data + r->pos;
    const char *nl = memchr(s, '\n', r->len - r->pos);
    size_t l = nl ? (size_t)(nl - s) : r->len - r->pos;
    r->pos += l + (nl ? 1 : 0);
    *lineno = r->lineno++;
    if (l > 0 && s[l - 1] == '\r')
        l--;
    *line = s;
    *n = l;
    return true;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static const char *skip_blank(const char *s, const char *e)
{
    while (s < e && is_blank(*s))
        s++;
    return s;
}

/* Join continuation lines into one instruction. Comment and empty lines
 * inside a continuation are dropped, as the Dockerfile parser does. */
static bool next_logical(reader *r, dbuf *out, int *start_line)
{
    const char *line;
    size_t n;
    int ln;
    bool cont = false;
    out->n = 0;
    if (out->p)
        out->p[0] = '\0';
    while (next_phys(r, &line, &n, &ln)) {
        const char *e = line + n;
        const char *t = skip_blank(line, e);
        if (t == e || *t == '#')
            continue;              /* blank or comment line, also inside a continuation */
        if (!cont)
            *start_line = ln;
        else
            t = line;              /* a continued line keeps its indentation */
        const char *end = e;
        while (end > t && is_blank(end[-1]))
            end--;
        if (end > t && end[-1] == r->esc) {
            /* The escape and the newline go; nothing is put in their place. */
            db_put(out, t, (size_t)(end - 1 - t));
            cont = true;
            continue;
        }
        db_put(out, t, (size_t)(end - t));
        return true;
    }
    return cont;                   /* a continuation running into EOF ends the instruction */
}

/* ---- Words ---- */

typedef struct word {
    const char *s;
    size_t n;
} word;

typedef struct words {
    word *w;
    size_t n, cap;
} words;

/* Split on blanks outside quotes, keeping at most MAX_WORDS words. */
static void split_words(const char *s, size_t n, char esc, words *ws)
{
    size_t i = 0;
    ws->n = 0;
    while (i < n && sl_grow(&ws->w, &ws->cap, ws->n, sizeof ws->w[0], MAX_WORDS)) {
        while (i < n && is_blank(s[i]))
            i++;
        if (i >= n)
            break;
        size_t st = i;
        char quote = '\0';
        while (i < n && (quote || !is_blank(s[i]))) {
            if (s[i] == esc && quote != '\'' && i + 1 < n)
                i++;
            else if (quote && s[i] == quote)
                quote = '\0';
            else if (!quote && (s[i] == '"' || s[i] == '\''))
                quote = s[i];
            i++;
        }
        ws->w[ws->n].s = s + st;
        ws->w[ws->n].n = i - st;
        ws->n++;
    }
}

static bool word_is(const word *w, const char *lit)
{
    return w->n == strlen(lit) && strncasecmp(w->s, lit, w->n) == 0;
}

static bool word_prefix(const word *w, const char *lit)
{
    size_t l = strlen(lit);
    return w->n >= l && strncasecmp(w->s, lit, l) == 0;
}

/* ---- Image references (distribution/reference grammar) ---- */

typedef struct ctx {
    const char *path;
    sl_derived *out;
    sl_lockerr *err;
    char **stages;                 /* lower-case names; NULL for an unnamed stage */
    size_t nstages, capstages;
    const char *why;               /* --pins: why a host entry is not pinned (NULL: PINS_WHY) */
} ctx;

#define PINS_WHY "image layers come from URLs the registry gives at pull time"
#define PINS_WHY_ADD "an ADD source is not pinned"

static bool add_host(ctx *c, int line, const char *host, size_t hlen, int port)
{
    char msg[256];
    if (!(sl_derived_pins(c->out) ? sl_derived_add_fallback(c->out, host, hlen, port, NULL, 0, c->path,
                                                            c->why ? c->why : PINS_WHY, msg, sizeof msg)
                                  : sl_derived_add(c->out, host, hlen, port, c->path, msg, sizeof msg))) {
        sl_lockerr_set(c->err, c->path, line, "%s", msg);
        return false;
    }
    return true;
}

static bool add_lit(ctx *c, int line, const char *host, int port)
{
    return add_host(c, line, host, strlen(host), port);
}

static bool lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}


/* path-component ("/" path-component)*: lower-case alphanumerics joined by
 * separators ('.', '_', '-'), no empty component. Text from UNKNOWN on is
 * not checked. */
static bool valid_repo(const char *s, size_t n)
{
    if (n == 0 || n > 255)
        return false;
    bool need_alnum = true;           /* at a component start or after a separator */
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == UNKNOWN)
            return true;
        if (lower_alnum(ch)) {
            need_alnum = false;
        } else if (ch == '/' || ch == '.' || ch == '_' || ch == '-') {
            if (need_alnum && !(ch == '_' && i > 0 && s[i - 1] == '_') &&
                !(ch == '-' && i > 0 && s[i - 1] == '-'))
                return false;
            need_alnum = true;
        } else {
            return false;
        }
    }
    return !need_alnum;
}

static bool valid_tag(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == UNKNOWN)
            return true;
        bool ok = lower_alnum(ch) || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                  (i > 0 && (ch == '.' || ch == '-'));
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_digest(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    if (memchr(s, UNKNOWN, n))
        return !colon || colon > s;
    if (!colon || colon == s)
        return false;
    for (const char *p = s; p < colon; p++)
        if (!lower_alnum(*p) && *p != '+' && *p != '.' && *p != '_' && *p != '-')
            return false;
    size_t hex = (size_t)(s + n - colon - 1);
    if (hex < 32)
        return false;
    for (const char *p = colon + 1; p < s + n; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return false;
    return true;
}

/* Printable form of a reference for messages: UNKNOWN shown as "?", any
 * other control byte as '.', so that a value known only at build time is
 * told from a byte in the file (why this is not sl_display_untrusted). */
static void show(const char *s, size_t n, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++)
        buf[k++] = s[i] == UNKNOWN ? '?' : ((unsigned char)s[i] < 0x20 ? '.' : s[i]);
    if (n > 0 && k + 4 >= cap && cap > 4) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
}

static bool ieq(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && strncasecmp(s, lit, n) == 0;
}

/* The hosts an image pull needs (LOCKFILES.md §3 for Docker Hub, ghcr.io). */
static bool pull_image(ctx *c, int line, const char *ref, size_t n, const char *why)
{
    char shown[160];
    show(ref, n, shown, sizeof shown);
    if (n == 0) {
        sl_lockerr_set(c->err, c->path, line, "empty image reference");
        return false;
    }
    const char *unk = memchr(ref, UNKNOWN, n);
    size_t m = unk ? (size_t)(unk - ref) : n;
    const char *slash = memchr(ref, '/', m);
    if (unk && !slash) {
        /* The unknown part may still be only a tag or digest: "python:${V}". */
        bool tag_before = memchr(ref, ':', m) || memchr(ref, '@', m);
        if (!tag_before || memchr(unk, '/', n - m)) {
            sl_lockerr_set(c->err, c->path, line,
                           "cannot determine the registry of image '%s': ARG %s has no default "
                           "value",
                           shown, why && why[0] ? why : "?");
            return false;
        }
    }

    const char *host = NULL, *rest = ref;
    size_t hlen = 0;
    int port = 443;
    if (slash) {
        const char *d = ref;
        size_t dl = (size_t)(slash - ref);
        bool registry = memchr(d, '.', dl) || memchr(d, ':', dl) || ieq(d, dl, "localhost");
        for (size_t i = 0; i < dl && !registry; i++)
            registry = d[i] >= 'A' && d[i] <= 'Z';
        if (registry) {
            const char *pc;
            if (dl > 0 && d[0] == '[') {
                const char *rb = memchr(d, ']', dl);
                if (!rb) {
                    sl_lockerr_set(c->err, c->path, line, "invalid registry in image '%s'", shown);
                    return false;
                }
                host = d + 1;
                hlen = (size_t)(rb - d - 1);
                pc = rb + 1 < slash ? rb + 1 : NULL;
                if (pc && *pc != ':') {
                    sl_lockerr_set(c->err, c->path, line, "invalid registry in image '%s'", shown);
                    return false;
                }
            } else {
                host = d;
                pc = memchr(d, ':', dl);
                hlen = pc ? (size_t)(pc - d) : dl;
            }
            if (pc) {
                long v = 0;
                const char *p = pc + 1;
                if (p == slash)
                    v = -1;
                for (; p < slash && v >= 0; p++) {
                    if (*p < '0' || *p > '9' || v > 65535)
                        v = -1;
                    else
                        v = v * 10 + (*p - '0');
                }
                if (v < 1 || v > 65535) {
                    sl_lockerr_set(c->err, c->path, line, "invalid registry port in image '%s'",
                                   shown);
                    return false;
                }
                port = (int)v;
            }
            rest = slash + 1;
        }
    }

    /* name[:tag][@digest] */
    size_t rn = (size_t)(ref + n - rest);
    size_t name_end = 0;
    while (name_end < rn && rest[name_end] != ':' && rest[name_end] != '@')
        name_end++;
    bool ok = valid_repo(rest, name_end);
    if (ok && name_end < rn) {
        const char *at = memchr(rest + name_end, '@', rn - name_end);
        size_t tag_end = at ? (size_t)(at - rest) : rn;
        if (rest[name_end] == ':')
            ok = valid_tag(rest + name_end + 1, tag_end - name_end - 1);
        if (ok && at)
            ok = valid_digest(at + 1, (size_t)(rest + rn - at - 1));
    }
    if (!ok) {
        sl_lockerr_set(c->err, c->path, line, "invalid image reference '%s'", shown);
        return false;
    }

    bool hub = !host || (port == 443 && (ieq(host, hlen, "docker.io") ||
                                         ieq(host, hlen, "index.docker.io") ||
                                         ieq(host, hlen, "registry-1.docker.io")));
    if (hub)
        return add_lit(c, line, "registry-1.docker.io", 443) &&
               add_lit(c, line, "auth.docker.io", 443) &&
               add_lit(c, line, "production.cloudflare.docker.com", 443) &&
               add_lit(c, line, "production.cloudfront.docker.com", 443);
    if (!add_host(c, line, host, hlen, port))
        return false;
    if (ieq(host, hlen, "ghcr.io"))
        return add_lit(c, line, "pkg-containers.githubusercontent.com", 443);
    return true;
}

/* ---- Stages ---- */

/* Glob match where UNKNOWN stands for any text. */
static bool glob_match(const char *pat, size_t pn, const char *s, size_t sn)
{
    size_t p = 0, i = 0, star_p = SIZE_MAX, star_i = 0;
    while (i < sn) {
        if (p < pn && pat[p] == UNKNOWN) {
            star_p = p++;
            star_i = i;
        } else if (p < pn && (pat[p] | 0x20) == (s[i] | 0x20) &&
                   ((pat[p] >= 'A' && pat[p] <= 'Z') || (pat[p] >= 'a' && pat[p] <= 'z')
                        ? true
                        : pat[p] == s[i])) {
            p++;
            i++;
        } else if (star_p != SIZE_MAX) {
            p = star_p + 1;
            i = ++star_i;
        } else {
            return false;
        }
    }
    while (p < pn && pat[p] == UNKNOWN)
        p++;
    return p == pn;
}

/* Whether `name` is (or, with unknown parts, may be) an earlier stage:
 * "base-${TARGETARCH}" may be "base-amd64"; a bare "${IMAGE}" is not taken
 * for a stage (it may as well be any image). */
static bool is_stage(const ctx *c, const char *name, size_t n, size_t before)
{
    bool literal = false;
    for (size_t i = 0; i < n && !literal; i++)
        literal = lower_alnum(name[i]) || (name[i] >= 'A' && name[i] <= 'Z');
    if (!literal)
        return false;
    for (size_t i = 0; i < before && i < c->nstages; i++)
        if (c->stages[i] && glob_match(name, n, c->stages[i], strlen(c->stages[i])))
            return true;
    return false;
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* The value of COPY --from= or RUN --mount=from=: a stage name, a stage
 * index, or an image. */
static bool pull_from(ctx *c, int line, const char *text, size_t n, const scope *sc, char esc)
{
    subst x = {.sc = sc, .esc = esc, .why = ""};
    dbuf v = {0};
    expand(&x, text, n, &v, 0);
    if (v.oom) {
        sl_lockerr_set(c->err, c->path, line, "out of memory");
        free(v.p);
        return false;
    }
    const char *s = v.p ? v.p : "";
    bool ok = true;
    if (all_digits(s, v.n)) {
        if (v.n > 6 || (size_t)atoi(s) >= c->nstages) {
            sl_lockerr_set(c->err, c->path, line, "--from=%s names no earlier stage", s);
            ok = false;
        }
    } else if (!is_stage(c, s, v.n, c->nstages)) {
        ok = pull_image(c, line, s, v.n, x.why);
    }
    free(v.p);
    return ok;
}

/* ---- Instructions ---- */

static const char *const instructions[] = {
    "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY",
    "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL",
    "HEALTHCHECK", "SHELL",
};

static bool known_instruction(const word *w)
{
    for (size_t i = 0; i < sizeof instructions / sizeof instructions[0]; i++)
        if (word_is(w, instructions[i]))
            return true;
    return false;
}

/* ARG NAME[=default] ... and ENV NAME=value ... / ENV NAME value. */
static bool define_vars(ctx *c, int line, const word *w, size_t nw, bool is_env, scope *sc,
                        const scope *global, bool in_stage, char esc)
{
    if (is_env && nw >= 2 && !memchr(w[1].s, '=', w[1].n)) {
        /* Legacy form: ENV NAME the rest of the line. */
        const char *vs = nw >= 3 ? w[2].s : w[1].s + w[1].n;
        const char *ve = w[nw - 1].s + w[nw - 1].n;
        if (nw < 3)
            ve = vs;
        subst x = {.sc = sc, .esc = esc, .why = ""};
        dbuf v = {0};
        expand(&x, vs, (size_t)(ve - vs), &v, 0);
        bool ok = !v.oom && scope_set(sc, w[1].s, w[1].n, v.p ? v.p : "", v.n,
                                      x.why[0] ? x.why : NULL);
        free(v.p);
        if (!ok)
            sl_lockerr_set(c->err, c->path, line, "too many variables");
        return ok;
    }
    for (size_t i = 1; i < nw; i++) {
        const char *eq = memchr(w[i].s, '=', w[i].n);
        size_t nlen = eq ? (size_t)(eq - w[i].s) : w[i].n;
        if (nlen == 0 || !name_start(w[i].s[0])) {
            sl_lockerr_set(c->err, c->path, line, "invalid %s name '%.*s'", is_env ? "ENV" : "ARG",
                           (int)(nlen > 64 ? 64 : nlen), w[i].s);
            return false;
        }
        bool ok;
        if (eq) {
            subst x = {.sc = sc, .esc = esc, .why = ""};
            dbuf v = {0};
            expand(&x, eq + 1, (size_t)(w[i].s + w[i].n - eq - 1), &v, 0);
            ok = !v.oom && scope_set(sc, w[i].s, nlen, v.p ? v.p : "", v.n,
                                     x.why[0] ? x.why : NULL);
            free(v.p);
        } else if (is_env) {
            sl_lockerr_set(c->err, c->path, line, "ENV %.*s has no value",
                           (int)(nlen > 64 ? 64 : nlen), w[i].s);
            return false;
        } else {
            /* ARG NAME: in a stage, the global default carries over. */
            const var *g = in_stage ? scope_get(global, w[i].s, nlen) : NULL;
            if (g && g->val)
                ok = scope_set(sc, w[i].s, nlen, g->val, strlen(g->val), g->why);
            else {
                char u = UNKNOWN;
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)(nlen > 100 ? 100 : nlen), w[i].s);
                ok = scope_set(sc, w[i].s, nlen, &u, 1, name);
            }
        }
        if (!ok) {
            sl_lockerr_set(c->err, c->path, line, "too many variables");
            return false;
        }
    }
    return true;
}

static bool do_from(ctx *c, int line, const word *w, size_t nw, const scope *global, char esc)
{
    size_t i = 1;
    while (i < nw && w[i].n >= 2 && w[i].s[0] == '-' && w[i].s[1] == '-')
        i++;                                   /* --platform=... */
    if (i >= nw) {
        sl_lockerr_set(c->err, c->path, line, "FROM names no image");
        return false;
    }
    const word *img = &w[i];
    char *stage = NULL;
    if (i + 1 < nw) {
        if (i + 3 != nw || !word_is(&w[i + 1], "AS")) {
            sl_lockerr_set(c->err, c->path, line, "FROM takes an image and an optional AS name");
            return false;
        }
        stage = strndup(w[i + 2].s, w[i + 2].n);
        if (!stage) {
            sl_lockerr_set(c->err, c->path, line, "out of memory");
            return false;
        }
        for (char *p = stage; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    }

    subst x = {.sc = global, .esc = esc, .why = ""};
    dbuf v = {0};
    expand(&x, img->s, img->n, &v, 0);
    bool ok = !v.oom;
    if (!ok)
        sl_lockerr_set(c->err, c->path, line, "out of memory");
    const char *s = v.p ? v.p : "";
    if (ok && !ieq(s, v.n, "scratch") && !is_stage(c, s, v.n, c->nstages))
        ok = pull_image(c, line, s, v.n, x.why);
    free(v.p);
    if (ok && !sl_grow(&c->stages, &c->capstages, c->nstages, sizeof c->stages[0],
                    MAX_STAGES)) {
        sl_lockerr_set(c->err, c->path, line, "too many stages");
        ok = false;
    }
    if (!ok) {
        free(stage);
        return false;
    }
    c->stages[c->nstages++] = stage;
    return true;
}

/* COPY --from=..., RUN --mount=...,from=... */
static bool do_flags(ctx *c, int line, const word *w, size_t nw, const scope *sc, char esc,
                     bool copy)
{
    for (size_t i = 1; i < nw && w[i].n >= 2 && w[i].s[0] == '-' && w[i].s[1] == '-'; i++) {
        if (copy && word_prefix(&w[i], "--from=")) {
            if (!pull_from(c, line, w[i].s + 7, w[i].n - 7, sc, esc))
                return false;
        } else if (!copy && word_prefix(&w[i], "--mount=")) {
            /* Comma-separated key=value fields; a field may be quoted. */
            const char *p = w[i].s + 8, *e = w[i].s + w[i].n;
            while (p < e) {
                const char *f = p;
                char quote = '\0';
                while (p < e && (quote || *p != ',')) {
                    if (quote && *p == quote)
                        quote = '\0';
                    else if (!quote && (*p == '"' || *p == '\''))
                        quote = *p;
                    p++;
                }
                const char *fs = f, *fe = p;
                if (fe - fs >= 2 && (*fs == '"' || *fs == '\'') && fe[-1] == *fs) {
                    fs++;
                    fe--;
                }
                if (fe - fs > 5 && strncasecmp(fs, "from=", 5) == 0 &&
                    !pull_from(c, line, fs + 5, (size_t)(fe - fs - 5), sc, esc))
                    return false;
                if (p < e)
                    p++;
            }
        }
    }
    return true;
}

/* A remote ADD source: the builder fetches it. */
static bool add_source(ctx *c, int line, const char *text, size_t n, const scope *sc, char esc)
{
    subst x = {.sc = sc, .esc = esc, .why = ""};
    dbuf v = {0};
    expand(&x, text, n, &v, 0);
    if (v.oom) {
        sl_lockerr_set(c->err, c->path, line, "out of memory");
        free(v.p);
        return false;
    }
    const char *s = v.p ? v.p : "";
    bool remote = strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0 ||
                  strncasecmp(s, "git://", 6) == 0 || strncasecmp(s, "ssh://", 6) == 0 ||
                  strncasecmp(s, "git@", 4) == 0;
    bool ok = true;
    if (remote) {
        /* The authority must be known; the rest of the URL may not be. */
        const char *a = strstr(s, "://");
        a = a ? a + 3 : s + 4;
        const char *ae = a;
        while (*ae && *ae != '/' && *ae != '?' && *ae != '#' && *ae != UNKNOWN &&
               !(s[0] == 'g' && s[3] == '@' && *ae == ':'))
            ae++;
        char shown[160];
        show(s, v.n, shown, sizeof shown);
        sl_url u;
        if (*ae == UNKNOWN) {
            sl_lockerr_set(c->err, c->path, line,
                           "cannot determine the host of ADD source '%s': %s has no default value",
                           shown, x.why[0] ? x.why : "?");
            ok = false;
        } else if (memchr(s, UNKNOWN, v.n) == NULL && !sl_url_parse(s, v.n, &u)) {
            sl_lockerr_set(c->err, c->path, line, "invalid ADD source URL '%s'", shown);
            ok = false;
        } else {
            /* Parse only up to the first unknown part: the host is before it. */
            const char *unk = memchr(s, UNKNOWN, v.n);
            size_t un = unk ? (size_t)(unk - s) : v.n;
            char msg[256];
            if (sl_url_parse(s, un, &u)) {
                int r = sl_derived_pins(c->out)
                            ? sl_derived_add_fallback_url(c->out, s, un, c->path, PINS_WHY_ADD, msg, sizeof msg)
                            : sl_derived_add_url(c->out, s, un, c->path, msg, sizeof msg);
                if (r < 0) {
                    sl_lockerr_set(c->err, c->path, line, "%s", msg);
                    ok = false;
                } else if (ieq(u.host, u.host_len, "github.com") && u.path) {
                    /* LOCKFILES.md §3: GitHub redirects these downloads. */
                    c->why = PINS_WHY_ADD;
                    if (memmem(u.path, u.path_len, "/releases/download/", 19))
                        ok = add_lit(c, line, "release-assets.githubusercontent.com", 443);
                    else if (memmem(u.path, u.path_len, "/archive/", 9))
                        ok = add_lit(c, line, "codeload.github.com", 443);
                    c->why = NULL;
                }
            } else {
                sl_lockerr_set(c->err, c->path, line, "invalid ADD source URL '%s'", shown);
                ok = false;
            }
        }
    }
    free(v.p);
    return ok;
}

static bool do_add(ctx *c, int line, const word *w, size_t nw, const char *rest, size_t rlen,
                   const scope *sc, char esc)
{
    size_t i = 1;
    while (i < nw && w[i].n >= 2 && w[i].s[0] == '-' && w[i].s[1] == '-')
        i++;
    if (i >= nw)
        return true;
    if (w[i].s[0] == '[') {
        /* JSON form; if it does not parse, Docker reads it as shell form. */
        const char *js = w[i].s;
        json_error_t je;
        json_t *a = json_loadb(js, (size_t)(rest + rlen - js), 0, &je);
        if (a && json_is_array(a)) {
            bool ok = true;
            size_t na = json_array_size(a);
            for (size_t k = 0; ok && k + 1 < na; k++) {
                json_t *it = json_array_get(a, k);
                if (json_is_string(it))
                    ok = add_source(c, line, json_string_value(it), json_string_length(it), sc,
                                    esc);
            }
            json_decref(a);
            return ok;
        }
        json_decref(a);
    }
    for (; i + 1 < nw; i++)
        if (!(w[i].n >= 2 && w[i].s[0] == '<' && w[i].s[1] == '<') &&
            !add_source(c, line, w[i].s, w[i].n, sc, esc))
            return false;
    return true;
}

/* Heredoc markers (<<EOF, <<-EOF, <<"EOF") outside quotes on a RUN, COPY
 * or ADD line. Returns how many terminators were stored. */
typedef struct heredoc {
    char word[64];
    bool strip_tabs;
} heredoc;

static size_t find_heredocs(const char *s, size_t n, heredoc *h, size_t max)
{
    size_t k = 0;
    char quote = '\0';
    for (size_t i = 0; i < n && k < max; i++) {
        if (quote) {
            if (s[i] == quote)
                quote = '\0';
            continue;
        }
        if (s[i] == '"' || s[i] == '\'') {
            quote = s[i];
            continue;
        }
        if (s[i] != '<' || i + 1 >= n || s[i + 1] != '<' || (i + 2 < n && s[i + 2] == '<') ||
            (i > 0 && s[i - 1] == '<'))
            continue;
        size_t j = i + 2;
        bool strip = j < n && s[j] == '-';
        if (strip)
            j++;
        char q = (j < n && (s[j] == '"' || s[j] == '\'')) ? s[j++] : '\0';
        size_t st = j;
        while (j < n && (name_char(s[j]) || s[j] == '.' || s[j] == '-'))
            j++;
        if (j == st || j - st >= sizeof h[k].word)
            continue;
        if (q && (j >= n || s[j] != q))
            continue;
        memcpy(h[k].word, s + st, j - st);
        h[k].word[j - st] = '\0';
        h[k].strip_tabs = strip;
        k++;
        i = j;
    }
    return k;
}

/* Parser directives: only at the very top, before any comment, blank line
 * or instruction. Known keys: syntax, escape, check. */
static bool directives(ctx *c, reader *r)
{
    bool seen_syntax = false, seen_escape = false;
    for (;;) {
        size_t pos = r->pos;
        int saved = r->lineno;
        const char *line;
        size_t n;
        int ln;
        if (!next_phys(r, &line, &n, &ln))
            return true;
        const char *e = line + n, *p = skip_blank(line, e);
        const char *key = NULL, *val = NULL, *ve = NULL;
        size_t klen = 0;
        if (p < e && *p == '#') {
            p = skip_blank(p + 1, e);
            key = p;
            while (p < e && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                p++;
            klen = (size_t)(p - key);
            p = skip_blank(p, e);
            if (p < e && *p == '=') {
                val = skip_blank(p + 1, e);
                ve = e;
                while (ve > val && is_blank(ve[-1]))
                    ve--;
            }
        }
        if (!val || !(ieq(key, klen, "syntax") || ieq(key, klen, "escape") ||
                      ieq(key, klen, "check"))) {
            r->pos = pos;
            r->lineno = saved;
            return true;
        }
        if (ieq(key, klen, "escape")) {
            if (seen_escape || ve - val != 1 || (*val != '\\' && *val != '`')) {
                sl_lockerr_set(c->err, c->path, ln, seen_escape ? "escape directive given twice"
                                                                : "invalid escape directive");
                return false;
            }
            seen_escape = true;
            r->esc = *val;
        } else if (ieq(key, klen, "syntax")) {
            if (seen_syntax) {
                sl_lockerr_set(c->err, c->path, ln, "syntax directive given twice");
                return false;
            }
            seen_syntax = true;
            /* BuildKit pulls the frontend image named here. */
            if (!pull_image(c, ln, val, (size_t)(ve - val), NULL))
                return false;
        }
    }
}

static bool parse(ctx *c, const char *data, size_t len)
{
    if (memchr(data, '\0', len) || memchr(data, UNKNOWN, len)) {
        sl_lockerr_set(c->err, c->path, 0, "not a Dockerfile: contains control bytes");
        return false;
    }
    reader r = {.data = data, .len = len, .lineno = 1, .esc = '\\'};
    if (!directives(c, &r))
        return false;

    scope globals = {0}, stages = {0};
    scope *global = &globals, *stage = &stages;
    words ws = {0};
    dbuf line = {0};
    bool ok = true;
    bool seen_from = false;
    int ln = 0;
    while (ok && next_logical(&r, &line, &ln)) {
        if (line.oom) {
            sl_lockerr_set(c->err, c->path, ln, "out of memory");
            ok = false;
            break;
        }
        split_words(line.p, line.n, r.esc, &ws);
        const word *w = ws.w;
        size_t nw = ws.n;
        if (nw == 0)
            continue;
        if (!known_instruction(&w[0])) {
            char shown[64];
            show(w[0].s, w[0].n, shown, sizeof shown);
            sl_lockerr_set(c->err, c->path, ln, "unknown instruction '%s': not a Dockerfile",
                           shown);
            ok = false;
            break;
        }
        if (!seen_from && !word_is(&w[0], "FROM") && !word_is(&w[0], "ARG")) {
            sl_lockerr_set(c->err, c->path, ln, "only ARG may come before the first FROM");
            ok = false;
            break;
        }
        if (word_is(&w[0], "FROM")) {
            ok = do_from(c, ln, w, nw, global, r.esc);
            scope_clear(stage);
            seen_from = true;
        } else if (word_is(&w[0], "ARG")) {
            ok = define_vars(c, ln, w, nw, false, seen_from ? stage : global, global, seen_from,
                             r.esc);
        } else if (word_is(&w[0], "ENV")) {
            ok = define_vars(c, ln, w, nw, true, stage, global, true, r.esc);
        } else if (word_is(&w[0], "COPY")) {
            ok = do_flags(c, ln, w, nw, stage, r.esc, true);
        } else if (word_is(&w[0], "RUN")) {
            ok = do_flags(c, ln, w, nw, stage, r.esc, false);
        } else if (word_is(&w[0], "ADD")) {
            ok = do_add(c, ln, w, nw, line.p, line.n, stage, r.esc);
        }
        if (ok && (word_is(&w[0], "RUN") || word_is(&w[0], "COPY") || word_is(&w[0], "ADD"))) {
            /* Skip heredoc bodies: their lines are not instructions. */
            heredoc h[MAX_HEREDOCS];
            size_t nh = find_heredocs(line.p, line.n, h, MAX_HEREDOCS);
            for (size_t k = 0; ok && k < nh; k++) {
                const char *pl;
                size_t pn;
                int pln;
                bool found = false;
                while (!found && next_phys(&r, &pl, &pn, &pln)) {
                    if (h[k].strip_tabs)
                        while (pn > 0 && *pl == '\t') {
                            pl++;
                            pn--;
                        }
                    found = pn == strlen(h[k].word) && memcmp(pl, h[k].word, pn) == 0;
                }
                if (!found) {
                    sl_lockerr_set(c->err, c->path, ln, "heredoc <<%s is not terminated",
                                   h[k].word);
                    ok = false;
                }
            }
        }
    }
    if (ok && !seen_from) {
        sl_lockerr_set(c->err, c->path, 0, "no FROM instruction: not a Dockerfile");
        ok = false;
    }
    scope_free(global);
    scope_free(stage);
    free(ws.w);
    free(line.p);
    return ok;
}

static bool docker_read(const char *path, const char *data, size_t len, sl_project *proj,
                        sl_derived *out, sl_lockerr *err)
{
    (void)proj;
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        sl_lockerr_set(err, path, 0, "out of memory");
        return false;
    }
    c->path = path;
    c->out = out;
    c->err = err;
    bool ok = parse(c, data, len);
    for (size_t i = 0; i < c->nstages; i++)
        free(c->stages[i]);
    free(c->stages);
    free(c);
    return ok;
}

/* Dockerfile, Containerfile, NAME.Dockerfile, Dockerfile.NAME (but not the
 * per-Dockerfile ignore file Dockerfile.dockerignore). */
static bool docker_recognises(const char *base)
{
    size_t n = strlen(base);
    if (n >= 13 && strcmp(base + n - 13, ".dockerignore") == 0)
        return false;
    if (strcmp(base, "Dockerfile") == 0 || strcmp(base, "dockerfile") == 0 ||
        strcmp(base, "Containerfile") == 0)
        return true;
    if (strncmp(base, "Dockerfile.", 11) == 0 && n > 11)
        return true;
    if (strncmp(base, "Containerfile.", 14) == 0 && n > 14)
        return true;
    if (n > 11 && (strcmp(base + n - 11, ".Dockerfile") == 0 ||
                   strcmp(base + n - 11, ".dockerfile") == 0))
        return true;
    return false;
}

const sl_lockreader sl_reader_docker = {
    .name = "docker",
    .recognises = docker_recognises,
    .read = docker_read,
};
