/* A strict TOML 1.0 reader.
 *
 * Lockfiles decide which hosts a sandbox may reach, so a document that is
 * truncated, ambiguous or malformed is refused rather than half-read. The
 * parser is a single forward pass over bytes that were first checked to be
 * UTF-8; it builds a tree of nodes, one per value.
 *
 * Bounds: containers nest at most MAX_DEPTH deep (this is also the bound on
 * every recursion), key parts are at most MAX_KEY bytes, documents at most
 * MAX_DOC bytes.
 *
 * Memory: every node, key, string and growable array of one document comes
 * from one arena, freed at once. A Cargo.lock with 100,000 packages is about
 * two million values; one malloc each would cost more than the parse.
 *
 * Table rules follow the spec's examples (and Python's tomllib, which passes
 * the toml-test suite):
 *  - a [header] may define a table once; tables created on the way to a
 *    header ("implicit") may be defined later, once;
 *  - a table created or extended by dotted keys belongs to the section
 *    (header, or inline table) that did it: no later header may define it and
 *    no later section may extend it with dotted keys, though a later header
 *    may define sub-tables below it;
 *  - inline tables and array literals are frozen once their closing bracket
 *    is read. */
#include "toml.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

#define MAX_DEPTH 64
#define MAX_KEY (64 * 1024)
#define MAX_DOC ((size_t)64 * 1024 * 1024)
/* Below this many keys a linear scan beats hashing. */
#define INDEX_MIN 16
#define CHUNK_MIN ((size_t)4096)
#define CHUNK_MAX ((size_t)1 << 20)

enum {
    F_EXPLICIT = 1,   /* table defined by a [header] or [[header]] */
    F_FROZEN = 2,     /* inline table or array literal, closed */
    F_AOT = 4,        /* array created by [[header]] */
    F_ROOT = 8,       /* the document: owns the arena */
};

/* Kept small: a big lockfile has millions of these. Counts fit in 32 bits
 * because documents are at most MAX_DOC bytes. */
typedef struct entry {
    const char *key;            /* NUL-terminated, in the arena */
    sl_toml *val;
    uint32_t klen, hash;
} entry;

struct sl_toml {
    unsigned char kind;         /* sl_toml_kind */
    unsigned char flags;
    unsigned char depth;        /* containers only: root is 0 */
    int line;
    unsigned section;           /* tables: section whose dotted keys made/extended it */
    union {
        struct { const char *s; size_t len; } str;   /* STRING, DATETIME */
        long long i;
        double f;
        bool b;
        struct {
            entry *e;
            uint32_t *idx;      /* open addressing, entry index + 1; 0 = empty */
            uint32_t n, cap, icap;
        } t;
        struct { sl_toml **v; uint32_t n, cap; } a;
    } u;
};

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

/* The root is the first member, so sl_toml_free can find the arena. */
typedef struct document {
    sl_toml root;
    chunk *chunks;
} document;

typedef struct sbuf {
    char *d;
    size_t n, cap;
} sbuf;

typedef struct parser {
    const char *p, *end;
    int line;
    unsigned sections;          /* counter: each header and inline table is one */
    bool failed;
    char *err;
    size_t errcap;
    int *errline;
    chunk *chunks;              /* the arena; the head is the one being filled */
    size_t next_chunk;
    sbuf scratch;               /* strings and quoted keys are decoded here first */
} parser;

/* A key as read. Bare parts point into the document until they are stored;
 * quoted parts are decoded into the arena at once. */
typedef struct keypath {
    struct { const char *s; size_t len; bool stored; } k[MAX_DEPTH];
    int n;
} keypath;

/* ---- errors ---- */

static void fail_at(parser *P, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail_at(parser *P, int line, const char *fmt, ...)
{
    if (P->failed)
        return;
    P->failed = true;
    if (P->errline)
        *P->errline = line;
    if (P->err && P->errcap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->err, P->errcap, fmt, ap);
        va_end(ap);
    }
}

#define FAIL(P, ...) fail_at((P), (P)->line, __VA_ARGS__)

/* The first `upto` parts of a key path, dotted, for a message: document
 * bytes are untrusted, so only printable ASCII is shown (a quote neither,
 * as messages quote the path in '...'), and only so much of it. */
static const char *show_path(char *buf, size_t cap, const keypath *kp, int upto)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < upto && o + 8 < cap; i++) {
        if (i)
            buf[o++] = '.';
        sl_display_untrusted(kp->k[i].s, kp->k[i].len, buf + o, cap - o, SL_DISPLAY_APOS);
        o += strlen(buf + o);
    }
    return buf;
}

/* ---- arena ---- */

static void *arena_alloc(parser *P, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    chunk *c = P->chunks;
    if (c && c->cap - c->used >= n) {
        void *r = (unsigned char *)c->data + c->used;
        c->used += n;
        return r;
    }
    bool own = n > P->next_chunk / 4;           /* a big block gets a chunk of its own */
    size_t cap = own ? n : P->next_chunk;
    chunk *nc = malloc(sizeof *nc + cap);
    if (!nc) {
        FAIL(P, "out of memory");
        return NULL;
    }
    nc->cap = cap;
    nc->used = n;
    if (own && c) {                             /* keep filling the current one */
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        P->chunks = nc;
        if (P->next_chunk < CHUNK_MAX)
            P->next_chunk *= 2;
    }
    return nc->data;
}

static void arena_free(chunk *c)
{
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
}

static const char *arena_str(parser *P, const char *s, size_t n)
{
    char *d = arena_alloc(P, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- nodes ---- */

static sl_toml *node_new(parser *P, sl_toml_kind kind, int line)
{
    sl_toml *v = arena_alloc(P, sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->kind = (unsigned char)kind;
    v->line = line;
    return v;
}

/* Containers: refuse before allocating anything deeper than the bound, so
 * that the parser's recursion stays bounded. */
static sl_toml *container_new(parser *P, sl_toml_kind kind, int line, int depth)
{
    if (depth > MAX_DEPTH) {
        FAIL(P, "nesting deeper than %d", MAX_DEPTH);
        return NULL;
    }
    sl_toml *v = node_new(P, kind, line);
    if (v)
        v->depth = (unsigned char)depth;
    return v;
}

static uint32_t hash_key(const char *s, size_t len)
{
    uint32_t h = 2166136261u;           /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static entry *table_find(const sl_toml *t, const char *key, size_t len, uint32_t h)
{
    if (t->u.t.idx) {
        size_t mask = t->u.t.icap - 1;
        for (size_t i = h & mask;; i = (i + 1) & mask) {
            uint32_t slot = t->u.t.idx[i];
            if (!slot)
                return NULL;
            entry *e = &t->u.t.e[slot - 1];
            if (e->hash == h && e->klen == len && memcmp(e->key, key, len) == 0)
                return e;
        }
    }
    for (size_t i = 0; i < t->u.t.n; i++) {
        entry *e = &t->u.t.e[i];
        if (e->hash == h && e->klen == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

static void index_put(sl_toml *t, size_t ei)
{
    size_t mask = t->u.t.icap - 1;
    size_t i = t->u.t.e[ei].hash & mask;
    while (t->u.t.idx[i])
        i = (i + 1) & mask;
    t->u.t.idx[i] = (uint32_t)(ei + 1);
}

/* Grows an arena block of n elements of size sz to room for n + 1; the
 * old block stays in the arena until the document is freed. */
static void *grow(parser *P, void *old, uint32_t *cap, uint32_t n, size_t sz, uint32_t first)
{
    if (n < *cap)
        return old;
    uint32_t nc = *cap ? *cap * 2 : first;
    void *d = arena_alloc(P, nc * sz);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, old, n * sz);
    *cap = nc;
    return d;
}

/* Adds key -> val; key is NUL-terminated in the arena. The caller has
 * checked the key is absent. */
static bool table_add(parser *P, sl_toml *t, const char *key, size_t klen, uint32_t h, sl_toml *val)
{
    entry *e = grow(P, t->u.t.e, &t->u.t.cap, t->u.t.n, sizeof *e, 8);
    if (!e)
        return false;
    t->u.t.e = e;
    uint32_t n = t->u.t.n + 1;
    if (n > INDEX_MIN && (size_t)n * 2 > t->u.t.icap) {
        uint32_t icap = t->u.t.icap ? t->u.t.icap * 2 : 64;
        while (n * 2 > icap)
            icap *= 2;
        uint32_t *idx = arena_alloc(P, icap * sizeof *idx);
        if (!idx)
            return false;
        memset(idx, 0, icap * sizeof *idx);
        t->u.t.idx = idx;
        t->u.t.icap = icap;
        for (uint32_t i = 0; i < t->u.t.n; i++)
            index_put(t, i);
    }
    t->u.t.e[t->u.t.n] = (entry){ key, val, (uint32_t)klen, h };
    if (t->u.t.idx)
        index_put(t, t->u.t.n);
    t->u.t.n = n;
    return true;
}

static bool array_add(parser *P, sl_toml *a, sl_toml *v)
{
    sl_toml **items = grow(P, a->u.a.v, &a->u.a.cap, a->u.a.n, sizeof *items, 4);
    if (!items)
        return false;
    a->u.a.v = items;
    a->u.a.v[a->u.a.n++] = v;
    return true;
}

/* ---- string buffer ---- */

static bool sb_put(parser *P, sbuf *b, const char *s, size_t n)
{
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap - b->n < n + 1)
            cap *= 2;
        char *d = realloc(b->d, cap);
        if (!d) {
            FAIL(P, "out of memory");
            return false;
        }
        b->d = d;
        b->cap = cap;
    }
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
    return true;
}

static bool sb_putc(parser *P, sbuf *b, char c)
{
    return sb_put(P, b, &c, 1);
}

/* ---- UTF-8 ---- */

/* Whole-document check first, so that nothing later has to decode. Refuses
 * overlong forms, surrogates and code points past U+10FFFF. */
static bool check_utf8(parser *P, const unsigned char *s, size_t len)
{
    int line = 1;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c == '\n')
                line++;
            i++;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else {
            fail_at(P, line, "invalid UTF-8");
            return false;
        }
        if (len - i - 1 < n) {
            fail_at(P, line, "invalid UTF-8 (truncated sequence)");
            return false;
        }
        for (size_t k = 1; k <= n; k++) {
            unsigned cc = s[i + k];
            if (cc < (k == 1 ? lo : 0x80) || cc > (k == 1 ? hi : 0xbf)) {
                fail_at(P, line, "invalid UTF-8");
                return false;
            }
        }
        i += n + 1;
    }
    return true;
}

static bool put_codepoint(parser *P, sbuf *b, uint32_t cp)
{
    char u[4];
    return sb_put(P, b, u, sl_utf8_encode(cp, u));
}

/* ---- lexing helpers ---- */

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

/* Control characters TOML refuses in strings and comments (tab is fine). */
static bool is_control(int c)
{
    unsigned char u = (unsigned char)c;
    return (u < 0x20 && u != '\t') || u == 0x7f;
}

static bool at_eof(const parser *P) { return P->p >= P->end; }

static int peek(const parser *P, size_t off)
{
    return (size_t)(P->end - P->p) > off ? (unsigned char)P->p[off] : -1;
}

static void skip_ws(parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t'))
        P->p++;
}

/* At '\n' or "\r\n": consume it. A lone CR is refused. */
static bool eat_newline(parser *P)
{
    if (peek(P, 0) == '\n') {
        P->p++;
        P->line++;
        return true;
    }
    if (peek(P, 0) == '\r') {
        if (peek(P, 1) == '\n') {
            P->p += 2;
            P->line++;
            return true;
        }
        FAIL(P, "carriage return not followed by a newline");
    }
    return false;
}

static bool at_newline(const parser *P)
{
    return peek(P, 0) == '\n' || (peek(P, 0) == '\r' && peek(P, 1) == '\n');
}

/* At '#': skip to the end of the line, leaving the newline. */
static bool skip_comment(parser *P)
{
    P->p++;
    while (P->p < P->end && *P->p != '\n') {
        if (*P->p == '\r' && peek(P, 1) == '\n')
            break;
        if (is_control(*P->p)) {
            FAIL(P, "control character in comment");
            return false;
        }
        P->p++;
    }
    return true;
}

/* Spaces, newlines and comments, as allowed between array elements. */
static bool skip_ws_nl(parser *P)
{
    for (;;) {
        skip_ws(P);
        if (at_eof(P))
            return true;
        if (*P->p == '#') {
            if (!skip_comment(P))
                return false;
        } else if (*P->p == '\n' || *P->p == '\r') {
            if (!eat_newline(P))
                return false;
        } else {
            return true;
        }
    }
}

/* ---- strings ---- */

/* After a backslash: one escape into b. `start` is the string's first line. */
static bool read_escape(parser *P, sbuf *b, int start)
{
    P->p++;                                     /* the backslash */
    if (at_eof(P)) {
        fail_at(P, start, "unterminated string");
        return false;
    }
    char c = *P->p++;
    switch (c) {
    case 'b': return sb_putc(P, b, '\b');
    case 't': return sb_putc(P, b, '\t');
    case 'n': return sb_putc(P, b, '\n');
    case 'f': return sb_putc(P, b, '\f');
    case 'r': return sb_putc(P, b, '\r');
    case '"': return sb_putc(P, b, '"');
    case '\\': return sb_putc(P, b, '\\');
    case 'u':
    case 'U': {
        int n = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < n; i++) {
            int h = peek(P, 0);
            if (h < 0) {
                fail_at(P, start, "unterminated string");
                return false;
            }
            if (sl_hexval(h) < 0) {
                FAIL(P, "invalid \\%c escape: expected %d hex digits", c, n);
                return false;
            }
            cp = (cp << 4) | (uint32_t)sl_hexval(h);
            P->p++;
        }
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
            FAIL(P, "escape \\%c%0*X is not a Unicode scalar value", c, n, (unsigned)cp);
            return false;
        }
        return put_codepoint(P, b, cp);
    }
    default:
        if (c > 0x20 && c < 0x7f)
            FAIL(P, "invalid escape '\\%c'", c);
        else
            FAIL(P, "invalid escape");
        return false;
    }
}

/* Single-line basic ("...") or literal ('...') string; at the quote. */
static bool read_string_line(parser *P, sbuf *b, char q)
{
    int start = P->line;
    P->p++;
    for (;;) {
        if (at_eof(P) || at_newline(P)) {
            fail_at(P, start, "unterminated string");
            return false;
        }
        char c = *P->p;
        if (c == q) {
            P->p++;
            return true;
        }
        if (c == '\\' && q == '"') {
            if (!read_escape(P, b, start))
                return false;
            continue;
        }
        if (is_control(c)) {
            FAIL(P, "control character in string");
            return false;
        }
        /* copy a run of ordinary bytes at once */
        const char *s = P->p;
        while (P->p < P->end && *P->p != q && !(q == '"' && *P->p == '\\') && !is_control(*P->p))
            P->p++;
        if (!sb_put(P, b, s, (size_t)(P->p - s)))
            return false;
    }
}

/* Multi-line basic ("""...""") or literal ('''...''') string; at the first
 * of the three quotes. */
static bool read_string_multi(parser *P, sbuf *b, char q)
{
    int start = P->line;
    P->p += 3;
    if (at_newline(P))                          /* a newline right after the opening is trimmed */
        eat_newline(P);
    for (;;) {
        if (at_eof(P)) {
            fail_at(P, start, "unterminated string");
            return false;
        }
        char c = *P->p;
        if (c == q) {
            size_t n = 0;
            while (P->p + n < P->end && P->p[n] == q)
                n++;
            if (n >= 3) {
                /* up to two quotes may sit right before the closing three */
                if (n > 5) {
                    FAIL(P, "too many quotes at the end of a multi-line string");
                    return false;
                }
                P->p += n;
                return sb_put(P, b, P->p - n, n - 3);
            }
            if (!sb_put(P, b, P->p, n))
                return false;
            P->p += n;
            continue;
        }
        if (c == '\\' && q == '"') {
            /* line-ending backslash: trim it, the newline, and all
             * whitespace and newlines that follow */
            const char *r = P->p + 1;
            while (r < P->end && (*r == ' ' || *r == '\t'))
                r++;
            if (r < P->end && (*r == '\n' || *r == '\r')) {
                P->p = r;
                if (!eat_newline(P)) {
                    if (!P->failed)
                        FAIL(P, "invalid escape");
                    return false;
                }
                for (;;) {
                    skip_ws(P);
                    if (at_eof(P) || (*P->p != '\n' && *P->p != '\r'))
                        break;
                    if (!eat_newline(P))
                        return false;
                }
                continue;
            }
            if (r >= P->end && r > P->p + 1) {
                fail_at(P, start, "unterminated string");
                return false;
            }
            if (!read_escape(P, b, start))
                return false;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (!eat_newline(P))
                return false;
            if (!sb_putc(P, b, '\n'))
                return false;
            continue;
        }
        if (is_control(c)) {
            FAIL(P, "control character in string");
            return false;
        }
        const char *s = P->p;
        while (P->p < P->end && *P->p != q && !(q == '"' && *P->p == '\\') && !is_control(*P->p))
            P->p++;
        if (!sb_put(P, b, s, (size_t)(P->p - s)))
            return false;
    }
}

static bool is_multi(const parser *P, char q)
{
    return peek(P, 0) == q && peek(P, 1) == q && peek(P, 2) == q;
}

/* ---- keys ---- */

/* Part i of a key, NUL-terminated in the arena, for a new table entry. */
static const char *key_store(parser *P, keypath *kp, int i)
{
    if (!kp->k[i].stored) {
        const char *s = arena_str(P, kp->k[i].s, kp->k[i].len);
        if (!s)
            return NULL;
        kp->k[i].s = s;
        kp->k[i].stored = true;
    }
    return kp->k[i].s;
}

/* simple-key *( ws "." ws simple-key ); leaves the position after the last
 * part's trailing whitespace. */
static bool read_key(parser *P, keypath *kp)
{
    kp->n = 0;
    for (;;) {
        if (kp->n == MAX_DEPTH) {
            FAIL(P, "key has more than %d parts", MAX_DEPTH);
            return false;
        }
        int c = peek(P, 0);
        if (c >= 0 && is_bare(c)) {
            const char *s = P->p;
            while (P->p < P->end && is_bare((unsigned char)*P->p))
                P->p++;
            if ((size_t)(P->p - s) > MAX_KEY) {
                FAIL(P, "key longer than %d bytes", MAX_KEY);
                return false;
            }
            kp->k[kp->n].s = s;
            kp->k[kp->n].len = (size_t)(P->p - s);
            kp->k[kp->n].stored = false;
        } else if (c == '"' || c == '\'') {
            if (is_multi(P, (char)c)) {
                FAIL(P, "a multi-line string cannot be a key");
                return false;
            }
            sbuf *b = &P->scratch;
            b->n = 0;
            if (!read_string_line(P, b, (char)c))
                return false;
            if (b->n > MAX_KEY) {
                FAIL(P, "key longer than %d bytes", MAX_KEY);
                return false;
            }
            if (!(kp->k[kp->n].s = arena_str(P, b->d ? b->d : "", b->n)))
                return false;
            kp->k[kp->n].len = b->n;
            kp->k[kp->n].stored = true;
        } else {
            if (c < 0 || c == '\n' || c == '\r' || c == '#' || c == ']')
                FAIL(P, "expected a key");
            else if (c == '=')
                FAIL(P, "missing key before '='");
            else if (c >= 0x20 && c < 0x7f)
                FAIL(P, "invalid character '%c' in key", c);
            else
                FAIL(P, "invalid character in key");
            return false;
        }
        kp->n++;
        skip_ws(P);
        if (peek(P, 0) != '.')
            return true;
        P->p++;
        skip_ws(P);
    }
}

/* ---- values ---- */

static sl_toml *read_value(parser *P, int depth);
static bool read_keyval(parser *P, sl_toml *tab, unsigned section);

static sl_toml *string_node(parser *P, sl_toml_kind kind, int line, const char *s, size_t n)
{
    sl_toml *v = node_new(P, kind, line);
    if (!v || !(v->u.str.s = arena_str(P, s, n)))
        return NULL;
    v->u.str.len = n;
    return v;
}

static sl_toml *read_string_value(parser *P)
{
    int line = P->line;
    char q = *P->p;
    if (!is_multi(P, q)) {
        /* most strings have no escapes: straight from the document */
        const char *s = P->p + 1, *r = s;
        while (r < P->end && *r != q && !(q == '"' && *r == '\\') && !is_control(*r))
            r++;
        if (r < P->end && *r == q) {
            P->p = r + 1;
            return string_node(P, SL_TOML_STRING, line, s, (size_t)(r - s));
        }
    }
    sbuf *b = &P->scratch;
    b->n = 0;
    bool ok = is_multi(P, q) ? read_string_multi(P, b, q) : read_string_line(P, b, q);
    if (!ok)
        return NULL;
    return string_node(P, SL_TOML_STRING, line, b->d ? b->d : "", b->n);
}

/* n exact digits at s (bounds-checked against end) as a number, or -1. */
static int digits(const char *s, const char *end, int n)
{
    if (end - s < n)
        return -1;
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* HH:MM:SS[.fraction]; seconds are required in TOML 1.0. */
static bool read_time(parser *P)
{
    const char *s = P->p, *e = P->end;
    int hh = digits(s, e, 2), mm = -1, ss = -1;
    if (hh >= 0 && e - s >= 3 && s[2] == ':')
        mm = digits(s + 3, e, 2);
    if (mm >= 0 && e - s >= 6 && s[5] == ':')
        ss = digits(s + 6, e, 2);
    if (hh < 0 || mm < 0 || ss < 0 || hh > 23 || mm > 59 || ss > 60) {
        FAIL(P, "invalid time");
        return false;
    }
    P->p += 8;
    if (peek(P, 0) == '.') {
        P->p++;
        const char *f = P->p;
        while (P->p < P->end && is_digit((unsigned char)*P->p))
            P->p++;
        if (P->p == f) {
            FAIL(P, "invalid time: no digits after '.'");
            return false;
        }
    }
    return true;
}

static bool leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Offset date-times, local date-times, local dates and local times; kept as
 * their text. At a digit known to start one. */
static sl_toml *read_datetime(parser *P)
{
    static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    int line = P->line;
    const char *s = P->p, *e = P->end;
    if (e - s >= 3 && is_digit((unsigned char)s[0]) && is_digit((unsigned char)s[1]) && s[2] == ':') {
        if (!read_time(P))
            return NULL;
    } else {
        int y = digits(s, e, 4), m = -1, d = -1;
        if (y >= 0 && e - s >= 5 && s[4] == '-')
            m = digits(s + 5, e, 2);
        if (m >= 0 && e - s >= 8 && s[7] == '-')
            d = digits(s + 8, e, 2);
        if (y < 0 || m < 1 || m > 12 || d < 1 ||
            d > mdays[m - 1] + (m == 2 && leap(y))) {
            FAIL(P, "invalid date");
            return NULL;
        }
        P->p += 10;
        int c = peek(P, 0);
        /* a space separates date and time only if a time follows; otherwise
         * it is just whitespace after a local date */
        if (c == 'T' || c == 't' ||
            (c == ' ' && peek(P, 1) >= 0 && is_digit(peek(P, 1)) && peek(P, 2) >= 0 &&
             is_digit(peek(P, 2)) && peek(P, 3) == ':')) {
            P->p++;
            if (!read_time(P))
                return NULL;
            c = peek(P, 0);
            if (c == 'Z' || c == 'z') {
                P->p++;
            } else if (c == '+' || c == '-') {
                const char *o = P->p + 1;
                int oh = digits(o, e, 2), om = -1;
                if (oh >= 0 && e - o >= 3 && o[2] == ':')
                    om = digits(o + 3, e, 2);
                if (oh < 0 || om < 0 || oh > 23 || om > 59) {
                    FAIL(P, "invalid time offset");
                    return NULL;
                }
                P->p += 6;
            }
        }
    }
    return string_node(P, SL_TOML_DATETIME, line, s, (size_t)(P->p - s));
}

/* DIGIT *( DIGIT / "_" DIGIT ) in the given base, from s; returns the end,
 * or NULL if no digit or a misplaced underscore. */
static const char *scan_digits(const char *s, const char *e, int base)
{
    const char *p = s;
    for (;;) {
        if (p >= e || sl_hexval((unsigned char)*p) < 0 || sl_hexval((unsigned char)*p) >= base)
            return NULL;
        p++;
        while (p < e && sl_hexval((unsigned char)*p) >= 0 && sl_hexval((unsigned char)*p) < base)
            p++;
        if (p < e && *p == '_') {
            p++;
            continue;
        }
        return p;
    }
}

/* Integers and floats. The token is every byte that can be part of one;
 * the grammar is then checked on the whole token. */
static sl_toml *read_number(parser *P)
{
    int line = P->line;
    const char *s = P->p, *e;
    while (P->p < P->end && (is_bare((unsigned char)*P->p) || *P->p == '.' || *P->p == '+'))
        P->p++;
    e = P->p;
    const char *q = s;
    bool neg = false, sign = false;
    if (q < e && (*q == '+' || *q == '-')) {
        neg = *q == '-';
        sign = true;
        q++;
    }
    size_t rest = (size_t)(e - q);
    if ((rest == 3 && memcmp(q, "inf", 3) == 0) || (rest == 3 && memcmp(q, "nan", 3) == 0)) {
        sl_toml *v = node_new(P, SL_TOML_FLOAT, line);
        if (v)
            v->u.f = q[0] == 'i' ? (neg ? -INFINITY : INFINITY) : NAN;
        return v;
    }
    if (rest >= 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'o' || q[1] == 'b')) {
        int base = q[1] == 'x' ? 16 : q[1] == 'o' ? 8 : 2;
        if (sign) {
            FAIL(P, "a sign is not allowed on a hexadecimal, octal or binary integer");
            return NULL;
        }
        const char *d = scan_digits(q + 2, e, base);
        if (d != e) {
            FAIL(P, "invalid number");
            return NULL;
        }
        unsigned long long u = 0;
        for (const char *r = q + 2; r < e; r++) {
            if (*r == '_')
                continue;
            if (u > ((unsigned long long)INT64_MAX - (unsigned)sl_hexval((unsigned char)*r)) / (unsigned)base) {
                FAIL(P, "integer out of range");
                return NULL;
            }
            u = u * (unsigned)base + (unsigned)sl_hexval((unsigned char)*r);
        }
        sl_toml *v = node_new(P, SL_TOML_INTEGER, line);
        if (v)
            v->u.i = (long long)u;
        return v;
    }
    /* decimal: int part, then optional fraction and exponent */
    const char *ie = scan_digits(q, e, 10);
    if (!ie) {
        FAIL(P, "invalid number");
        return NULL;
    }
    if (q[0] == '0' && ie - q > 1) {
        FAIL(P, "leading zero in number");
        return NULL;
    }
    const char *r = ie;
    bool isfloat = false;
    if (r < e && *r == '.') {
        r = scan_digits(r + 1, e, 10);
        if (!r) {
            FAIL(P, "invalid number");
            return NULL;
        }
        isfloat = true;
    }
    if (r < e && (*r == 'e' || *r == 'E')) {
        r++;
        if (r < e && (*r == '+' || *r == '-'))
            r++;
        r = scan_digits(r, e, 10);
        if (!r) {
            FAIL(P, "invalid number");
            return NULL;
        }
        isfloat = true;
    }
    if (r != e) {
        FAIL(P, "invalid number");
        return NULL;
    }
    if (isfloat) {
        sbuf *b = &P->scratch;
        b->n = 0;
        for (const char *x = s; x < e; x++)
            if (*x != '_' && !sb_putc(P, b, *x))
                return NULL;
        sl_toml *v = node_new(P, SL_TOML_FLOAT, line);
        if (v)
            v->u.f = strtod(b->d, NULL);
        return v;
    }
    /* accumulate negatively so that INT64_MIN fits */
    long long acc = 0;
    for (const char *x = q; x < ie; x++) {
        if (*x == '_')
            continue;
        int dg = *x - '0';
        if (acc < (INT64_MIN + dg) / 10) {
            FAIL(P, "integer out of range");
            return NULL;
        }
        acc = acc * 10 - dg;
    }
    if (!neg && acc == INT64_MIN) {
        FAIL(P, "integer out of range");
        return NULL;
    }
    sl_toml *v = node_new(P, SL_TOML_INTEGER, line);
    if (v)
        v->u.i = neg ? acc : -acc;
    return v;
}

static sl_toml *read_array(parser *P, int depth)
{
    int start = P->line;
    sl_toml *a = container_new(P, SL_TOML_ARRAY, start, depth);
    if (!a)
        return NULL;
    P->p++;                                     /* [ */
    for (;;) {
        if (!skip_ws_nl(P))
            return NULL;
        if (at_eof(P)) {
            fail_at(P, start, "unterminated array");
            return NULL;
        }
        if (*P->p == ']') {
            P->p++;
            break;
        }
        sl_toml *v = read_value(P, depth + 1);
        if (!v || !array_add(P, a, v))
            return NULL;
        if (!skip_ws_nl(P))
            return NULL;
        if (at_eof(P)) {
            fail_at(P, start, "unterminated array");
            return NULL;
        }
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        if (*P->p == ']') {
            P->p++;
            break;
        }
        FAIL(P, "expected ',' or ']' in array");
        return NULL;
    }
    a->flags |= F_FROZEN;
    return a;
}

static sl_toml *read_inline_table(parser *P, int depth)
{
    int start = P->line;
    sl_toml *t = container_new(P, SL_TOML_TABLE, start, depth);
    if (!t)
        return NULL;
    unsigned section = ++P->sections;
    P->p++;                                     /* { */
    skip_ws(P);
    if (peek(P, 0) == '}') {
        P->p++;
    } else {
        for (;;) {
            if (at_eof(P) || at_newline(P)) {
                fail_at(P, start, "unterminated inline table");
                return NULL;
            }
            if (*P->p == '}') {
                FAIL(P, "trailing comma in inline table");
                return NULL;
            }
            if (!read_keyval(P, t, section))
                return NULL;
            skip_ws(P);
            if (at_eof(P) || at_newline(P)) {
                fail_at(P, start, "unterminated inline table");
                return NULL;
            }
            if (*P->p == ',') {
                P->p++;
                skip_ws(P);
                continue;
            }
            if (*P->p == '}') {
                P->p++;
                break;
            }
            FAIL(P, "expected ',' or '}' in inline table");
            return NULL;
        }
    }
    t->flags |= F_FROZEN;
    return t;
}

/* depth: what the value's depth would be if it is a container. Every
 * recursion passes through here with depth + 1, and containers refuse
 * depth > MAX_DEPTH before recursing. */
static sl_toml *read_value(parser *P, int depth)
{
    int c = peek(P, 0);
    switch (c) {
    case '"':
    case '\'':
        return read_string_value(P);
    case '[':
        return read_array(P, depth);
    case '{':
        return read_inline_table(P, depth);
    case 't':
    case 'f': {
        bool t = c == 't';
        size_t n = t ? 4 : 5;
        if ((size_t)(P->end - P->p) >= n && memcmp(P->p, t ? "true" : "false", n) == 0 &&
            (peek(P, n) < 0 || !is_bare(peek(P, n)))) {
            sl_toml *v = node_new(P, SL_TOML_BOOL, P->line);
            if (v)
                v->u.b = t;
            P->p += n;
            return v;
        }
        FAIL(P, "invalid value");
        return NULL;
    }
    case -1:
    case '\n':
    case '\r':
    case '#':
        FAIL(P, "missing value");
        return NULL;
    default:
        break;
    }
    if (is_digit(c)) {
        const char *s = P->p, *e = P->end;
        if ((digits(s, e, 4) >= 0 && e - s > 4 && s[4] == '-') ||
            (digits(s, e, 2) >= 0 && e - s > 2 && s[2] == ':'))
            return read_datetime(P);
        return read_number(P);
    }
    if (c == '+' || c == '-' || c == 'i' || c == 'n')
        return read_number(P);
    if (c >= 0x20 && c < 0x7f)
        FAIL(P, "invalid value starting with '%c'", c);
    else
        FAIL(P, "invalid value");
    return NULL;
}

/* ---- tables ---- */

/* Dotted keys: step from t into its part i, creating the table if needed. */
static sl_toml *dotted_step(parser *P, sl_toml *t, keypath *kp, int i, unsigned section)
{
    char name[160];
    uint32_t h = hash_key(kp->k[i].s, kp->k[i].len);
    entry *e = table_find(t, kp->k[i].s, kp->k[i].len, h);
    if (!e) {
        sl_toml *nt = container_new(P, SL_TOML_TABLE, P->line, t->depth + 1);
        const char *key = nt ? key_store(P, kp, i) : NULL;
        if (!key || !table_add(P, t, key, kp->k[i].len, h, nt))
            return NULL;
        nt->section = section;
        return nt;
    }
    sl_toml *v = e->val;
    if (v->kind != SL_TOML_TABLE) {
        FAIL(P, "key '%s' is already defined as %s", show_path(name, sizeof name, kp, i + 1),
             v->kind == SL_TOML_ARRAY ? "an array" : "a value");
        return NULL;
    }
    if (v->flags & F_FROZEN) {
        FAIL(P, "cannot add keys to inline table '%s'", show_path(name, sizeof name, kp, i + 1));
        return NULL;
    }
    if ((v->flags & F_EXPLICIT) || (v->section && v->section != section)) {
        FAIL(P, "table '%s' defined twice (dotted keys cannot extend it here)",
             show_path(name, sizeof name, kp, i + 1));
        return NULL;
    }
    v->section = section;
    return v;
}

/* key = value into tab; at the key. */
static bool read_keyval(parser *P, sl_toml *tab, unsigned section)
{
    keypath kp;
    char name[160];
    if (!read_key(P, &kp))
        return false;
    if (peek(P, 0) != '=') {
        FAIL(P, "expected '=' after key");
        return false;
    }
    P->p++;
    skip_ws(P);
    sl_toml *t = tab;
    for (int i = 0; i + 1 < kp.n; i++)
        if (!(t = dotted_step(P, t, &kp, i, section)))
            return false;
    int last = kp.n - 1;
    uint32_t h = hash_key(kp.k[last].s, kp.k[last].len);
    if (table_find(t, kp.k[last].s, kp.k[last].len, h)) {
        FAIL(P, "key '%s' defined twice", show_path(name, sizeof name, &kp, kp.n));
        return false;
    }
    sl_toml *v = read_value(P, t->depth + 1);
    const char *key = v ? key_store(P, &kp, last) : NULL;
    return key && table_add(P, t, key, kp.k[last].len, h, v);
}

/* A new table under t at part i of a header's key. */
static sl_toml *header_table(parser *P, sl_toml *t, keypath *kp, int i, uint32_t h, int line)
{
    sl_toml *nt = container_new(P, SL_TOML_TABLE, line, t->depth + 1);
    const char *key = nt ? key_store(P, kp, i) : NULL;
    if (!key || !table_add(P, t, key, kp->k[i].len, h, nt))
        return NULL;
    return nt;
}

/* [a.b] or [[a.b]] at the '['; returns the table that keys now go into. */
static sl_toml *read_header(parser *P, sl_toml *root)
{
    int line = P->line;
    bool aot = peek(P, 1) == '[';
    keypath kp;
    char name[160], part[160];
    sl_toml *t = root;
    P->p += aot ? 2 : 1;
    skip_ws(P);
    if (!read_key(P, &kp))
        return NULL;
    if (peek(P, 0) != ']' || (aot && peek(P, 1) != ']')) {
        int c1 = peek(P, 1);
        if (at_eof(P) || at_newline(P) ||
            (aot && peek(P, 0) == ']' && (c1 < 0 || c1 == '\n' || c1 == '\r')))
            FAIL(P, "unterminated table header");
        else
            FAIL(P, "expected '%s' after table name", aot ? "]]" : "]");
        return NULL;
    }
    P->p += aot ? 2 : 1;
    for (int i = 0; i + 1 < kp.n; i++) {
        uint32_t h = hash_key(kp.k[i].s, kp.k[i].len);
        entry *e = table_find(t, kp.k[i].s, kp.k[i].len, h);
        if (!e) {
            if (!(t = header_table(P, t, &kp, i, h, line)))     /* implicit, may be defined later */
                return NULL;
            continue;
        }
        sl_toml *v = e->val;
        if (v->kind == SL_TOML_ARRAY && (v->flags & F_AOT)) {
            t = v->u.a.v[v->u.a.n - 1];         /* the latest [[...]] entry */
        } else if (v->kind == SL_TOML_TABLE && !(v->flags & F_FROZEN)) {
            t = v;
        } else {
            FAIL(P, "cannot define table '%s': '%s' is %s",
                 show_path(name, sizeof name, &kp, kp.n), show_path(part, sizeof part, &kp, i + 1),
                 v->kind == SL_TOML_TABLE ? "an inline table" :
                 v->kind == SL_TOML_ARRAY ? "an array" : "a value");
            return NULL;
        }
    }
    int last = kp.n - 1;
    uint32_t h = hash_key(kp.k[last].s, kp.k[last].len);
    entry *e = table_find(t, kp.k[last].s, kp.k[last].len, h);
    sl_toml *v = e ? e->val : NULL;
    if (e)
        show_path(name, sizeof name, &kp, kp.n);        /* for the messages below */
    if (!aot) {
        if (!v) {
            v = header_table(P, t, &kp, last, h, line);
        } else if (v->kind == SL_TOML_TABLE && !(v->flags & (F_FROZEN | F_EXPLICIT)) && !v->section) {
            v->line = line;                     /* an implicit table, now defined */
        } else {
            if (v->kind == SL_TOML_TABLE)
                FAIL(P, "table '%s' defined twice", name);
            else if (v->kind == SL_TOML_ARRAY && (v->flags & F_AOT))
                FAIL(P, "table '%s' is already an array of tables", name);
            else
                FAIL(P, "cannot define table '%s': key already has a value", name);
            return NULL;
        }
        if (v)
            v->flags |= F_EXPLICIT;
        return v;
    }
    if (!v) {
        v = container_new(P, SL_TOML_ARRAY, line, t->depth + 1);
        const char *key = v ? key_store(P, &kp, last) : NULL;
        if (!key || !table_add(P, t, key, kp.k[last].len, h, v))
            return NULL;
        v->flags |= F_AOT;
    } else if (v->kind != SL_TOML_ARRAY || !(v->flags & F_AOT)) {
        FAIL(P, "cannot define array of tables '%s': key already has a %s", name,
             v->kind == SL_TOML_TABLE ? "table" : "value");
        return NULL;
    }
    sl_toml *nt = container_new(P, SL_TOML_TABLE, line, v->depth + 1);
    if (!nt || !array_add(P, v, nt))
        return NULL;
    nt->flags |= F_EXPLICIT;
    return nt;
}

/* ---- document ---- */

static sl_toml *parse(parser *P)
{
    if (!check_utf8(P, (const unsigned char *)P->p, (size_t)(P->end - P->p)))
        return NULL;
    if (P->end - P->p >= 3 && memcmp(P->p, "\xef\xbb\xbf", 3) == 0)
        P->p += 3;                              /* a byte order mark carries no meaning */

    document *doc = arena_alloc(P, sizeof *doc);
    if (!doc)
        return NULL;
    memset(doc, 0, sizeof *doc);
    sl_toml *root = &doc->root;
    root->kind = SL_TOML_TABLE;
    root->line = 1;
    root->flags = F_ROOT | F_EXPLICIT;
    sl_toml *cur = root;
    unsigned section = 1;
    for (;;) {
        skip_ws(P);
        int c = peek(P, 0);
        if (c == '[') {
            if (!(cur = read_header(P, root)))
                return NULL;
            section = ++P->sections;
        } else if (c >= 0 && c != '#' && c != '\n' && c != '\r') {
            if (!read_keyval(P, cur, section))
                return NULL;
        }
        skip_ws(P);
        if (peek(P, 0) == '#' && !skip_comment(P))
            return NULL;
        if (at_eof(P))
            break;
        if (!eat_newline(P)) {
            c = peek(P, 0);
            if (!P->failed) {
                if (c >= 0x20 && c < 0x7f)
                    FAIL(P, "unexpected '%c': expected a newline", c);
                else
                    FAIL(P, "unexpected character: expected a newline");
            }
            return NULL;
        }
    }
    doc->chunks = P->chunks;
    return root;
}

sl_toml *sl_toml_parse(const char *data, size_t len, char *err, size_t errcap, int *errline)
{
    parser P = { .p = data, .end = data + len, .line = 1, .sections = 1,
                 .err = err, .errcap = errcap, .errline = errline,
                 .next_chunk = CHUNK_MIN };
    if (err && errcap)
        err[0] = '\0';
    if (errline)
        *errline = 0;
    if (!data && len) {
        fail_at(&P, 1, "no data");
        return NULL;
    }
    if (!data)
        P.p = P.end = "";
    if (len > MAX_DOC) {
        fail_at(&P, 1, "document larger than %zu bytes", MAX_DOC);
        return NULL;
    }
    sl_toml *root = parse(&P);
    free(P.scratch.d);
    if (!root) {
        if (!P.failed)
            fail_at(&P, P.line, "out of memory");
        arena_free(P.chunks);
    }
    return root;
}

void sl_toml_free(sl_toml *root)
{
    if (root && (root->flags & F_ROOT))
        arena_free(((document *)root)->chunks);
}

/* ---- access ---- */

sl_toml_kind sl_toml_kind_of(const sl_toml *v)
{
    return v ? (sl_toml_kind)v->kind : SL_TOML_TABLE;
}

int sl_toml_line(const sl_toml *v)
{
    return v ? v->line : 0;
}

const sl_toml *sl_toml_get(const sl_toml *table, const char *key)
{
    if (!table || !key || table->kind != SL_TOML_TABLE)
        return NULL;
    size_t len = strlen(key);
    entry *e = table_find(table, key, len, hash_key(key, len));
    return e ? e->val : NULL;
}

size_t sl_toml_count(const sl_toml *v)
{
    if (!v)
        return 0;
    if (v->kind == SL_TOML_TABLE)
        return v->u.t.n;
    if (v->kind == SL_TOML_ARRAY)
        return v->u.a.n;
    return 0;
}

const sl_toml *sl_toml_entry(const sl_toml *table, size_t i, const char **key)
{
    if (!table || table->kind != SL_TOML_TABLE || i >= table->u.t.n) {
        if (key)
            *key = NULL;
        return NULL;
    }
    if (key)
        *key = table->u.t.e[i].key;
    return table->u.t.e[i].val;
}

const sl_toml *sl_toml_at(const sl_toml *array, size_t i)
{
    if (!array || array->kind != SL_TOML_ARRAY || i >= array->u.a.n)
        return NULL;
    return array->u.a.v[i];
}

const char *sl_toml_str(const sl_toml *v, size_t *len)
{
    if (!v || (v->kind != SL_TOML_STRING && v->kind != SL_TOML_DATETIME)) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = v->u.str.len;
    return v->u.str.s;
}

bool sl_toml_int(const sl_toml *v, long long *out)
{
    if (!v || v->kind != SL_TOML_INTEGER)
        return false;
    if (out)
        *out = v->u.i;
    return true;
}

bool sl_toml_bool(const sl_toml *v, bool *out)
{
    if (!v || v->kind != SL_TOML_BOOL)
        return false;
    if (out)
        *out = v->u.b;
    return true;
}

const char *sl_toml_get_str(const sl_toml *table, const char *key)
{
    const sl_toml *v = sl_toml_get(table, key);
    return v && v->kind == SL_TOML_STRING ? v->u.str.s : NULL;
}
