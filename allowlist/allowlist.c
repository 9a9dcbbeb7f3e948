/* Allowlists: parsing entries, matching requests against them, printing. */
#include "allowlist.h"

#include <errno.h>
#include <libpsl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "netclass.h"
#include "rules.h"
#include "text.h"

#define LINE_MAX_BYTES SL_ENTRY_LINE_MAX

/* ---- A small open-addressing hash table ----
 *
 * Written here because Debian offers no C hash table library we already
 * depend on (glib would be a large dependency for one table; hsearch(3) is
 * single-instance and cannot delete or iterate). Linear probing, power-of-two
 * capacity, load kept at or below 1/2. A slot stores a key's hash and a
 * 1-based value; the key itself lives with the value (an entry's host name
 * or an interned file name), so the table is compared through a callback.
 * Keys come from configuration, never from requests, so a client cannot
 * choose colliding keys; FNV-1a is enough. */

typedef struct ht_slot {
    uint32_t hash;
    uint32_t val;          /* index + 1; 0 marks an empty slot */
} ht_slot;

typedef struct htab {
    ht_slot *slots;
    size_t cap;            /* 0 or a power of two */
    size_t n;
} htab;

typedef bool (*ht_eq_fn)(const void *ctx, uint32_t idx, const char *key, size_t len);

static uint32_t hash_str(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* Index of the value for key, or -1. */
static int64_t ht_find(const htab *t, uint32_t hash, const char *key, size_t len,
                       ht_eq_fn eq, const void *ctx)
{
    if (t->cap == 0)
        return -1;
    size_t mask = t->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const ht_slot *sl = &t->slots[i];
        if (sl->val == 0)
            return -1;
        if (sl->hash == hash && eq(ctx, sl->val - 1, key, len))
            return (int64_t)(sl->val - 1);
    }
}

static void ht_place(ht_slot *slots, size_t cap, uint32_t hash, uint32_t val)
{
    size_t mask = cap - 1;
    size_t i = hash & mask;
    while (slots[i].val != 0)
        i = (i + 1) & mask;
    slots[i].hash = hash;
    slots[i].val = val;
}

/* Adds a key known to be absent. */
static bool ht_insert(htab *t, uint32_t hash, uint32_t idx)
{
    if ((t->n + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        ht_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return false;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].val)
                ht_place(ns, ncap, t->slots[i].hash, t->slots[i].val);
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    ht_place(t->slots, t->cap, hash, idx + 1);
    t->n++;
    return true;
}

/* ---- The list ---- */

typedef struct item {
    sl_entry e;            /* first: sl_allowlist_index relies on it */
    uint32_t next;         /* next entry with the same key, index + 1; 0: none */
    uint32_t last;         /* for the first entry of a key: the last one, index */
    void *block;           /* a rule's strings, one allocation */
} item;

/* Plain entries and request rules have tables of their own, so that
 * matching one kind never walks the other's entries. */
typedef struct keyindex {
    htab exact;            /* host text (name or canonical IP) -> first exact entry */
    htab suffix;           /* suffix -> first wildcard/apex entry */
} keyindex_t;

struct sl_allowlist {
    item *items;           /* insertion order */
    size_t n, cap;
    keyindex_t plain, rules;
    size_t nrules;
    char **files;          /* interned provenance strings */
    size_t nfiles, capfiles;
    htab filetab;
};

sl_allowlist *sl_allowlist_new(void)
{
    return calloc(1, sizeof(sl_allowlist));
}

void sl_allowlist_free(sl_allowlist *al)
{
    if (!al)
        return;
    for (size_t i = 0; i < al->n; i++)
        free(al->items[i].block);
    free(al->items);
    free(al->plain.exact.slots);
    free(al->plain.suffix.slots);
    free(al->rules.exact.slots);
    free(al->rules.suffix.slots);
    for (size_t i = 0; i < al->nfiles; i++)
        free(al->files[i]);
    free(al->files);
    free(al->filetab.slots);
    free(al);
}

size_t sl_allowlist_count(const sl_allowlist *al)
{
    return al->n;
}

const sl_entry *sl_allowlist_entry(const sl_allowlist *al, size_t i)
{
    return i < al->n ? &al->items[i].e : NULL;
}

size_t sl_allowlist_index(const sl_allowlist *al, const sl_entry *e)
{
    return (size_t)((const item *)(const void *)e - al->items);
}

static bool file_eq(const void *ctx, uint32_t idx, const char *key, size_t len)
{
    const sl_allowlist *al = ctx;
    const char *f = al->files[idx];
    return strncmp(f, key, len) == 0 && f[len] == '\0';
}

/* Many entries share one file name: keep one copy of each. */
static const char *intern_file(sl_allowlist *al, const char *file)
{
    if (!file)
        file = "";
    size_t len = strlen(file);
    uint32_t h = hash_str(file, len);
    int64_t i = ht_find(&al->filetab, h, file, len, file_eq, al);
    if (i >= 0)
        return al->files[i];
    if (al->nfiles == al->capfiles) {
        size_t ncap = al->capfiles ? al->capfiles * 2 : 4;
        char **nf = realloc(al->files, ncap * sizeof *nf);
        if (!nf)
            return NULL;
        al->files = nf;
        al->capfiles = ncap;
    }
    char *copy = strdup(file);
    if (!copy)
        return NULL;
    if (!ht_insert(&al->filetab, h, (uint32_t)al->nfiles)) {
        free(copy);
        return NULL;
    }
    al->files[al->nfiles++] = copy;
    return copy;
}

static bool entry_eq(const void *ctx, uint32_t idx, const char *key, size_t len)
{
    const sl_allowlist *al = ctx;
    const sl_host *h = &al->items[idx].e.host;
    return h->len == len && memcmp(h->name, key, len) == 0;
}

/* Appends e and links it under its key, keeping insertion order per key.
 * A rule's strings (block) belong to the list from here on, whatever
 * happens. */
static bool add_entry(sl_allowlist *al, const sl_entry *e, void *block)
{
    if (al->n >= UINT32_MAX - 1) {
        free(block);
        return false;
    }
    if (al->n == al->cap) {
        /* From 4: a session's own list has a few entries, and 10,000 lists
         * starting at 64 held 250 MB (each reload touched more of it). */
        size_t ncap = al->cap ? al->cap * 2 : 4;
        item *ni = realloc(al->items, ncap * sizeof *ni);
        if (!ni) {
            free(block);
            return false;
        }
        al->items = ni;
        al->cap = ncap;
    }
    uint32_t idx = (uint32_t)al->n;
    item *it = &al->items[idx];
    it->e = *e;
    it->next = 0;
    it->last = idx;
    it->block = NULL;

    keyindex_t *ix = sl_entry_is_rule(e) ? &al->rules : &al->plain;
    htab *t = e->kind == SL_ENTRY_EXACT ? &ix->exact : &ix->suffix;
    uint32_t h = hash_str(e->host.name, e->host.len);
    int64_t first = ht_find(t, h, e->host.name, e->host.len, entry_eq, al);
    if (first >= 0) {
        item *head = &al->items[first];
        al->items[head->last].next = idx + 1;
        head->last = idx;
    } else if (!ht_insert(t, h, idx)) {
        free(block);
        return false;
    }
    it->block = block;
    al->n++;
    if (sl_entry_is_rule(e))
        al->nrules++;
    return true;
}

/* ---- Ports ---- */

/* Decimal 1..65535 without sign or leading zero. */
static bool parse_port_num(const char *s, size_t len, int *out)
{
    if (len == 0 || len > 5 || (s[0] == '0'))
        return false;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return false;
    *out = v;
    return true;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

bool sl_ports_parse(const char *s, sl_ports *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (is_ws(*p))
        p++;
    if (*p == '\0') {
        snprintf(err, errcap, "empty port list");
        return false;
    }
    for (;;) {
        const char *tok = p;
        while (*p && !is_ws(*p) && *p != ',')
            p++;
        size_t tlen = (size_t)(p - tok);
        int v;
        if (tlen == 0) {
            snprintf(err, errcap, "empty item in port list '%.64s'", s);
            return false;
        }
        if (!parse_port_num(tok, tlen, &v)) {
            snprintf(err, errcap, "bad port '%.*s' (1..65535)", (int)(tlen > 32 ? 32 : tlen), tok);
            return false;
        }
        if (!sl_ports_has(out, v)) {
            if (out->n == sizeof out->v / sizeof out->v[0]) {
                snprintf(err, errcap, "too many ports (at most %zu)", sizeof out->v / sizeof out->v[0]);
                return false;
            }
            out->v[out->n++] = (uint16_t)v;
        }
        while (is_ws(*p))
            p++;
        if (*p == '\0')
            return true;
        if (*p == ',') {
            p++;
            while (is_ws(*p))
                p++;
            if (*p == '\0') {
                snprintf(err, errcap, "trailing ',' in port list");
                return false;
            }
        }
    }
}

bool sl_ports_has(const sl_ports *p, int port)
{
    if (!p)
        return false;
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i] == port)
            return true;
    return false;
}

/* ---- Public suffixes ---- */

/* Which part of the list counts. Only the ICANN section: the private
 * section lists githubusercontent.com next to github.io (same submitter,
 * same block), so PSL_TYPE_ANY would refuse the SPEC's own example line
 * "*.githubusercontent.com". With PSL_TYPE_ANY, *.github.io and
 * *.herokuapp.com would be refused too, and so would that example.
 * The implicit "*" rule stays on: an unknown TLD (*.internal) is refused. */
#define PSL_CHECK_TYPE PSL_TYPE_ICANN

static const psl_ctx_t *g_psl;
static pthread_once_t g_psl_once = PTHREAD_ONCE_INIT;

/* The distribution's list (kept current by the publicsuffix package) when
 * it is newer than the copy built into libpsl. Loaded once and kept for the
 * life of the process: it is read-only, and reloads need not re-read it. */
static void psl_init(void)
{
    g_psl = psl_latest(NULL);
    if (!g_psl)
        g_psl = psl_builtin();
}

static const psl_ctx_t *psl_get(void)
{
    pthread_once(&g_psl_once, psl_init);
    return g_psl;
}

/* ---- Lines ---- */

static void put_err(char *err, size_t errcap, const char *msg, const char *tok, size_t toklen)
{
    /* Quote at most 80 bytes of the offending text (then "..."), control
     * bytes shown as '?' so that a message cannot drive a terminal; a
     * Unicode host name stays readable. */
    char q[80 + 4];
    sl_display_untrusted(tok, toklen, q, sizeof q, SL_DISPLAY_KEEP_HIGH);
    snprintf(err, errcap, "%s: '%s'", msg, q);
}

/* Parses one entry token (no spaces, no comment) into e. */
static bool parse_entry(const char *tok, size_t tlen, sl_entry *e, char *err, size_t errcap)
{
    const char *p = tok;
    size_t n = tlen;
    e->kind = SL_ENTRY_EXACT;
    if (n >= 2 && p[0] == '*' && p[1] == '.') {
        e->kind = SL_ENTRY_WILDCARD;
        p += 2;
        n -= 2;
    } else if (n >= 1 && p[0] == '.') {
        e->kind = SL_ENTRY_APEX;
        p += 1;
        n -= 1;
    }
    if (memchr(p, '*', n)) {
        put_err(err, errcap, "'*' is only allowed as a leading '*.'", tok, tlen);
        return false;
    }

    /* Split host and port. */
    size_t hlen;
    if (n > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (!close) {
            put_err(err, errcap, "unbalanced '[' in entry", tok, tlen);
            return false;
        }
        hlen = (size_t)(close - p) + 1;
        if (hlen < n && p[hlen] != ':') {
            put_err(err, errcap, "unexpected text after IPv6 literal", tok, tlen);
            return false;
        }
    } else {
        const char *colon = memchr(p, ':', n);
        hlen = colon ? (size_t)(colon - p) : n;
        sl_addr a;
        if (colon && memchr(colon + 1, ':', n - hlen - 1) && sl_addr_parse(p, n, &a)) {
            put_err(err, errcap, "an IPv6 literal must be in brackets", tok, tlen);
            return false;
        }
    }
    if (hlen == 0) {
        put_err(err, errcap, "missing host", tok, tlen);
        return false;
    }
    e->port = 0;
    if (hlen < n) {
        const char *ps = p + hlen + 1;
        size_t plen = n - hlen - 1;
        if (plen == 0) {
            put_err(err, errcap, "empty port", tok, tlen);
            return false;
        }
        if (!parse_port_num(ps, plen, &e->port)) {
            put_err(err, errcap, "bad port (1..65535, no leading zero)", tok, tlen);
            return false;
        }
    }

    const char *why = NULL;
    if (!sl_host_parse_config(p, hlen, &e->host, &why)) {
        char msg[128];
        snprintf(msg, sizeof msg, "bad host (%s)", why ? why : "invalid");
        put_err(err, errcap, msg, tok, tlen);
        return false;
    }
    if (e->kind == SL_ENTRY_EXACT)
        return true;

    if (e->host.kind != SL_HOST_NAME) {
        put_err(err, errcap, e->kind == SL_ENTRY_WILDCARD
                                 ? "a wildcard entry needs a DNS name, not an IP literal"
                                 : "an apex entry needs a DNS name, not an IP literal",
                tok, tlen);
        return false;
    }
    /* A wildcard over a public suffix (*.com, .co.uk) would let anyone who
     * registers a name there through: refuse it. */
    const psl_ctx_t *psl = psl_get();
    if (!psl) {
        snprintf(err, errcap, "cannot check '%.*s' against the public suffix list: libpsl has no list",
                 (int)(tlen > 80 ? 80 : tlen), tok);
        return false;
    }
    if (psl_is_public_suffix2(psl, e->host.name, PSL_CHECK_TYPE)) {
        snprintf(err, errcap, "%s%s covers the whole public suffix %s",
                 e->kind == SL_ENTRY_WILDCARD ? "*." : ".", e->host.name, e->host.name);
        return false;
    }
    return true;
}

/* A host has a '.', ':' or '['; a method list never does. */
static bool host_like(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] == '.' || t[i] == ':' || t[i] == '[')
            return true;
    return false;
}

static bool has_upper_only(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] >= 'a' && t[i] <= 'z')
            return false;
    return true;
}

typedef struct token {
    const char *p;
    size_t n;
} token;

/* The length of a rule as sl_entry_format writes it. */
static size_t rule_line_len(const sl_entry *e)
{
    char host[SL_HOST_MAX + 16];
    size_t n = strlen(e->methods) + 1 + strlen(sl_entry_format_host(e, host, sizeof host)) +
               strlen(e->path);
    for (size_t i = 0; i < e->ndigests; i++)
        n += 1 + strlen(e->digests[i]);
    return n;
}

/* "METHODS HOST[:PORT]PATH [DIGEST ...]" from its tokens into e, its strings
 * in one allocation (*block). */
static bool parse_rule(const token *t, size_t nt, sl_entry *e, void **block, char *err,
                       size_t errcap)
{
    if (!sl_methods_check(t[0].p, t[0].n, err, errcap))
        return false;
    const char *slash = memchr(t[1].p, '/', t[1].n);
    if (!slash) {
        put_err(err, errcap, "missing path: a request rule is METHODS HOST[:PORT]PATH, e.g. "
                "'GET example.org/*'", t[1].p, t[1].n);
        return false;
    }
    size_t hlen = (size_t)(slash - t[1].p);
    const char *path = slash;
    size_t plen = t[1].n - hlen;
    if (hlen == 0) {
        put_err(err, errcap, "missing host before the path", t[1].p, t[1].n);
        return false;
    }
    if (!parse_entry(t[1].p, hlen, e, err, errcap))
        return false;
    const char *why = sl_path_check(path, plen, true);
    if (why) {
        char msg[160];
        snprintf(msg, sizeof msg, "bad path pattern (%s)", why);
        put_err(err, errcap, msg, path, plen);
        return false;
    }
    size_t ndig = nt - 2, total = t[0].n + 1 + plen + 1 + ndig * sizeof(char *);
    for (size_t i = 2; i < nt; i++) {
        why = sl_digest_check(t[i].p, t[i].n);
        if (why && (t[i].n < 3 || memcmp(t[i].p, "sha", 3) != 0))
            why = "unexpected text after the path: only digests (sha256-, sha384- or sha512-...) may follow";
        if (why) {
            put_err(err, errcap, why, t[i].p, t[i].n);
            return false;
        }
        total += t[i].n + 1;
    }
    if (ndig > 0 && !(t[0].n == 3 && memcmp(t[0].p, "GET", 3) == 0)) {
        put_err(err, errcap, "only a GET rule may carry digests (a digest pins what GET fetches)",
                t[0].p, t[0].n);
        return false;
    }

    /* One block: the digest pointers first (aligned), then the strings. */
    char *b = malloc(total);
    if (!b) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    const char **digs = (const char **)(void *)b;
    char *w = b + ndig * sizeof(char *);
    memcpy(w, t[0].p, t[0].n);
    w[t[0].n] = '\0';
    e->methods = w;
    w += t[0].n + 1;
    memcpy(w, path, plen);
    w[plen] = '\0';
    e->path = w;
    w += plen + 1;
    for (size_t i = 0; i < ndig; i++) {
        memcpy(w, t[i + 2].p, t[i + 2].n);
        w[t[i + 2].n] = '\0';
        digs[i] = w;
        w += t[i + 2].n + 1;
    }
    e->digests = ndig ? digs : NULL;
    e->ndigests = ndig;
    *block = b;
    /* The host's xn-- form can be longer than the Unicode one: the line as
     * printed must still be one this parser reads. */
    if (rule_line_len(e) > LINE_MAX_BYTES) {
        snprintf(err, errcap, "rule is longer than %d bytes once its host is in ASCII (xn--) form",
                 LINE_MAX_BYTES);
        free(b);
        *block = NULL;
        return false;
    }
    return true;
}

bool sl_allowlist_add_line(sl_allowlist *al, const char *text, size_t len,
                           const char *file, int line, char *err, size_t errcap)
{
    if (len > LINE_MAX_BYTES) {
        snprintf(err, errcap, "line longer than %d bytes", LINE_MAX_BYTES);
        return false;
    }
    if (len > 0 && memchr(text, '\0', len)) {
        snprintf(err, errcap, "NUL byte in line");
        return false;
    }
    const char *hash = len > 0 ? memchr(text, '#', len) : NULL;
    size_t n = hash ? (size_t)(hash - text) : len;
    size_t b = 0;
    while (b < n && is_ws(text[b]))
        b++;
    size_t cut = n;
    while (n > b && is_ws(text[n - 1]))
        n--;
    if (b == n)
        return true;                         /* blank or comment only */

    token t[SL_ENTRY_FIELDS_MAX];
    size_t nt = 0;
    for (size_t i = b; i < n;) {
        size_t j = i;
        while (j < n && !is_ws(text[j]))
            j++;
        if (nt == SL_ENTRY_FIELDS_MAX) {
            snprintf(err, errcap, "more than %d fields on one line", SL_ENTRY_FIELDS_MAX);
            return false;
        }
        t[nt++] = (token){ text + i, j - i };
        while (j < n && is_ws(text[j]))
            j++;
        i = j;
    }

    sl_entry e;
    memset(&e, 0, sizeof e);
    void *block = NULL;
    /* A rule line: its first token is a method list ("*", "GET,HEAD"), or a
     * mistyped one ("get", "G@T") before something with a path. A host with
     * text after it ("example.org x", "bad host!") is not one. */
    bool rule = nt >= 2 && !host_like(t[0].p, t[0].n) &&
                (has_upper_only(t[0].p, t[0].n) || memchr(t[1].p, '/', t[1].n));
    if (rule) {
        if (hash && n == cut) {
            /* '#' right after the path or a digest: a fragment is never
             * sent, and a comment needs a space before it. */
            put_err(err, errcap, "'#' in a rule (a comment needs a space before it)", t[nt - 1].p,
                    (size_t)(text + len - t[nt - 1].p));
            return false;
        }
        if (!parse_rule(t, nt, &e, &block, err, errcap))
            return false;
    } else {
        if (nt > 1) {
            put_err(err, errcap, "unexpected text after the entry (one entry a line)", t[1].p,
                    (size_t)(text + n - t[1].p));
            return false;
        }
        if (memmem(t[0].p, t[0].n, "://", 3)) {
            put_err(err, errcap, "a URL is not an entry: write its host (and :PORT)", t[0].p, t[0].n);
            return false;
        }
        if (memchr(t[0].p, '/', t[0].n)) {
            put_err(err, errcap, "a path needs a method list in front (a request rule: "
                    "'GET example.org/path')", t[0].p, t[0].n);
            return false;
        }
        if (!parse_entry(t[0].p, t[0].n, &e, err, errcap))
            return false;
    }
    e.line = line;
    e.file = intern_file(al, file);
    if (!e.file) {
        free(block);
        snprintf(err, errcap, "out of memory");
        return false;
    }
    if (!add_entry(al, &e, block)) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    return true;
}

static void report_line(sl_report_fn report, void *ctx, const char *path, long line,
                        const char *msg)
{
    if (!report)
        return;
    char buf[4096 + 512];
    if (line > 0)
        snprintf(buf, sizeof buf, "%s:%ld: %s", path, line, msg);
    else
        snprintf(buf, sizeof buf, "%s: %s", path, msg);
    report(ctx, buf);
}

int sl_allowlist_load_file(sl_allowlist *al, const char *path, sl_report_fn report, void *ctx)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        char msg[300];
        snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
        report_line(report, ctx, path, 0, msg);
        return -1;
    }
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t got;
    long lineno = 0;
    int errors = 0;
    char err[512];
    while ((got = getline(&buf, &bufcap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)got;
        if (len > 0 && buf[len - 1] == '\n')
            len--;
        const char *text = buf;
        /* A UTF-8 byte-order mark, as some editors write, is not an entry. */
        if (lineno == 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
            text += 3;
            len -= 3;
        }
        if (!sl_allowlist_add_line(al, text, len, path, (int)lineno, err, sizeof err)) {
            report_line(report, ctx, path, lineno, err);
            errors++;
        }
    }
    int rerr = ferror(f) ? errno : 0;
    free(buf);
    fclose(f);
    if (rerr) {
        char msg[300];
        snprintf(msg, sizeof msg, "cannot read: %s", strerror(rerr));
        report_line(report, ctx, path, 0, msg);
        return -1;
    }
    return errors;
}

/* ---- Matching ---- */

static bool entry_allows(const sl_entry *e, int port, bool connect,
                         const sl_ports *connect_ports, const sl_ports *http_ports)
{
    if (e->port != 0)
        return e->port == port;
    return sl_ports_has(connect ? connect_ports : http_ports, port);
}

/* The keys under which entries covering a host sit: its exact key, then
 * each of its suffixes from the longest (the host itself first). A chain is
 * one key's entries in insertion order. */
enum chain_kind {
    CH_EXACT_NAME,     /* exact entries for a name: those that are names */
    CH_EXACT_IP,       /* exact entries for an IP literal: the same address */
    CH_SUFFIX_SELF,    /* suffix entries for the host itself: apex ones only */
    CH_SUFFIX,         /* suffix entries for a proper suffix: all */
};

#define MAX_CHAINS (1 + (SL_HOST_MAX + 1) / 2 + 1)

typedef struct chain {
    int64_t cur;       /* index of the next entry in the chain, -1 at its end */
    enum chain_kind kind;
} chain;

static bool chain_covers(const sl_allowlist *al, const chain *c, const sl_host *h)
{
    const sl_entry *e = &al->items[c->cur].e;
    switch (c->kind) {
    case CH_EXACT_NAME:
        return e->host.kind == SL_HOST_NAME;
    case CH_EXACT_IP:
        return e->host.kind == h->kind && sl_addr_equal(&e->host.addr, &h->addr);
    case CH_SUFFIX_SELF:
        return e->kind != SL_ENTRY_WILDCARD;   /* *.example.org is not example.org */
    case CH_SUFFIX:
        return true;
    }
    return false;
}

static int64_t chain_next(const sl_allowlist *al, int64_t i)
{
    return (int64_t)al->items[i].next - 1;
}

/* The non-empty chains of one index for host h, most specific first.
 * Cost: one probe per label of the host, whatever the list size. */
static size_t collect_chains(const sl_allowlist *al, const keyindex_t *ix, const sl_host *h,
                             chain *out)
{
    size_t n = 0;
    if (ix->exact.n == 0 && ix->suffix.n == 0)
        return 0;
    /* IP literals are keyed by their canonical text, which is a function of
     * the address; chain_covers confirms with sl_addr_equal. */
    char ipbuf[SL_ADDR_STRLEN];
    const char *key = h->name;
    size_t klen = h->len;
    bool ip = h->kind != SL_HOST_NAME;
    if (ip) {
        key = sl_addr_format(&h->addr, ipbuf, sizeof ipbuf);
        klen = strlen(key);
    }
    int64_t i = ht_find(&ix->exact, hash_str(key, klen), key, klen, entry_eq, al);
    if (i >= 0)
        out[n++] = (chain){ i, ip ? CH_EXACT_IP : CH_EXACT_NAME };
    if (ip || ix->suffix.n == 0)
        return n;                        /* only DNS names have suffixes */
    for (size_t off = 0; off < h->len;) {
        const char *suf = h->name + off;
        size_t slen = h->len - off;
        i = ht_find(&ix->suffix, hash_str(suf, slen), suf, slen, entry_eq, al);
        if (i >= 0)
            out[n++] = (chain){ i, off == 0 ? CH_SUFFIX_SELF : CH_SUFFIX };
        const char *dot = memchr(suf, '.', slen);
        if (!dot)
            break;
        off = (size_t)(dot - h->name) + 1;
    }
    return n;
}

/* The first rule in insertion order that covers host:port, or NULL;
 * *host_seen when some rule covers the host. */
static const sl_entry *first_rule(const sl_allowlist *al, const sl_host *h, int port, bool connect,
                                  const sl_ports *cp, const sl_ports *hp, bool *host_seen)
{
    chain ch[MAX_CHAINS];
    size_t n = collect_chains(al, &al->rules, h, ch);
    int64_t best = -1;
    for (size_t k = 0; k < n; k++) {
        for (chain c = ch[k]; c.cur >= 0 && (best < 0 || c.cur < best); c.cur = chain_next(al, c.cur)) {
            if (!chain_covers(al, &c, h))
                continue;
            *host_seen = true;
            if (entry_allows(&al->items[c.cur].e, port, connect, cp, hp)) {
                best = c.cur;
                break;
            }
        }
    }
    return best >= 0 ? &al->items[best].e : NULL;
}

/* Plain candidates are visited most specific first (exact, then suffixes
 * from the longest), and within one key in insertion order; the first that
 * allows the port wins. Rules, checked first, are found the same way. */
sl_match_result sl_allowlist_match(const sl_allowlist *al, const sl_host *h, int port,
                                   bool connect, const sl_ports *connect_ports,
                                   const sl_ports *http_ports, const sl_entry **rule)
{
    if (rule)
        *rule = NULL;
    bool host_seen = false;
    if (al->nrules) {
        const sl_entry *r = first_rule(al, h, port, connect, connect_ports, http_ports, &host_seen);
        if (r) {
            if (rule)
                *rule = r;
            return SL_MATCH_INSPECTED;
        }
    }
    chain ch[MAX_CHAINS];
    size_t n = collect_chains(al, &al->plain, h, ch);
    for (size_t k = 0; k < n; k++) {
        for (chain c = ch[k]; c.cur >= 0; c.cur = chain_next(al, c.cur)) {
            if (!chain_covers(al, &c, h))
                continue;
            host_seen = true;
            const sl_entry *e = &al->items[c.cur].e;
            if (entry_allows(e, port, connect, connect_ports, http_ports)) {
                if (rule)
                    *rule = e;
                return SL_MATCH_ALLOWED;
            }
        }
    }
    return host_seen ? SL_MATCH_PORT_NOT_ALLOWED : SL_MATCH_NO_ENTRY;
}

/* The rules covering host:port come from several chains (the exact key and
 * each suffix); they are merged by index, so that they are tried in
 * insertion order across host forms. */
sl_match_result sl_allowlist_match_request(const sl_allowlist *al, const sl_host *h, int port,
        bool connect, const sl_ports *connect_ports, const sl_ports *http_ports,
        const char *method, const char *path, size_t path_len, const sl_entry **rule)
{
    if (rule)
        *rule = NULL;
    if (al->nrules == 0)
        return SL_MATCH_RULE_NOT_MATCHED;
    size_t mlen = strlen(method);
    chain ch[MAX_CHAINS];
    size_t n = collect_chains(al, &al->rules, h, ch);
    for (;;) {
        size_t k = n;
        for (size_t j = 0; j < n; j++)
            if (ch[j].cur >= 0 && (k == n || ch[j].cur < ch[k].cur))
                k = j;
        if (k == n)
            return SL_MATCH_RULE_NOT_MATCHED;
        bool covers = chain_covers(al, &ch[k], h);
        const sl_entry *e = &al->items[ch[k].cur].e;
        ch[k].cur = chain_next(al, ch[k].cur);
        if (covers && entry_allows(e, port, connect, connect_ports, http_ports) &&
            sl_methods_include(e->methods, method, mlen) &&
            sl_glob_match(e->path, strlen(e->path), path, path_len, NULL)) {
            if (rule)
                *rule = e;
            return SL_MATCH_ALLOWED;
        }
    }
}

const char *sl_path_ambiguous(const char *path, size_t len)
{
    return sl_path_check(path, len, false);
}

/* ---- Overlaps and warnings ---- */

static bool name_eq(const sl_host *a, const sl_host *b)
{
    return a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
}

/* a is a proper subdomain of b. */
static bool name_under(const sl_host *a, const sl_host *b)
{
    return a->len > b->len && a->name[a->len - b->len - 1] == '.' &&
           memcmp(a->name + a->len - b->len, b->name, b->len) == 0;
}

/* A suffix entry s covers the name h. */
static bool suffix_covers(const sl_entry *s, const sl_host *h)
{
    return name_under(h, &s->host) || (s->kind == SL_ENTRY_APEX && name_eq(h, &s->host));
}

bool sl_entry_hosts_overlap(const sl_entry *a, const sl_entry *b)
{
    if (a->host.kind != SL_HOST_NAME || b->host.kind != SL_HOST_NAME)
        return a->kind == SL_ENTRY_EXACT && b->kind == SL_ENTRY_EXACT && a->host.kind == b->host.kind &&
               sl_addr_equal(&a->host.addr, &b->host.addr);
    if (a->kind == SL_ENTRY_EXACT && b->kind == SL_ENTRY_EXACT)
        return name_eq(&a->host, &b->host);
    if (a->kind == SL_ENTRY_EXACT)
        return suffix_covers(b, &a->host);
    if (b->kind == SL_ENTRY_EXACT)
        return suffix_covers(a, &b->host);
    /* Two suffix forms share the subdomains of the longer one. */
    return name_eq(&a->host, &b->host) || name_under(&a->host, &b->host) ||
           name_under(&b->host, &a->host);
}

typedef void (*overlap_fn)(void *ctx, const sl_entry *ea, const sl_entry *eb);

/* For e, the entries of ix (in list l) keyed by e's host itself (exact and
 * suffix keys; unless proper_only) or by a proper suffix of it (suffix keys):
 * every entry whose host form is e's or wider. */
static void visit_wider(const sl_allowlist *l, const keyindex_t *ix, const sl_entry *e,
                        bool proper_only, bool e_first, overlap_fn fn, void *ctx)
{
    const sl_host *h = &e->host;
    if (!proper_only) {
        int64_t i = ht_find(&ix->exact, hash_str(h->name, h->len), h->name, h->len, entry_eq, l);
        for (; i >= 0; i = chain_next(l, i)) {
            const sl_entry *o = &l->items[i].e;
            if (sl_entry_hosts_overlap(e, o))
                e_first ? fn(ctx, e, o) : fn(ctx, o, e);
        }
    }
    if (h->kind != SL_HOST_NAME)
        return;
    for (size_t off = 0; off < h->len;) {
        const char *suf = h->name + off;
        size_t slen = h->len - off;
        if (off > 0 || !proper_only) {
            int64_t i = ht_find(&ix->suffix, hash_str(suf, slen), suf, slen, entry_eq, l);
            for (; i >= 0; i = chain_next(l, i)) {
                const sl_entry *o = &l->items[i].e;
                if (sl_entry_hosts_overlap(e, o))
                    e_first ? fn(ctx, e, o) : fn(ctx, o, e);
            }
        }
        const char *dot = memchr(suf, '.', slen);
        if (!dot)
            break;
        off = (size_t)(dot - h->name) + 1;
    }
}

/* Pass one finds, for each entry of a, the entries of b as wide as it or
 * wider (same key or a suffix of it); pass two, for each entry of b, the
 * entries of a strictly wider (a proper suffix as key). An overlap is one
 * of the two, never both. */
void sl_allowlist_overlaps(const sl_allowlist *a, bool a_rules, const sl_allowlist *b, bool b_rules,
                           void (*fn)(void *ctx, const sl_entry *ea, const sl_entry *eb), void *ctx)
{
    const keyindex_t *bix = b_rules ? &b->rules : &b->plain;
    const keyindex_t *aix = a_rules ? &a->rules : &a->plain;
    for (size_t i = 0; i < a->n; i++) {
        const sl_entry *e = &a->items[i].e;
        if (sl_entry_is_rule(e) == a_rules)
            visit_wider(b, bix, e, false, true, fn, ctx);
    }
    for (size_t i = 0; i < b->n; i++) {
        const sl_entry *e = &b->items[i].e;
        if (sl_entry_is_rule(e) == b_rules)
            visit_wider(a, aix, e, true, false, fn, ctx);
    }
}

typedef struct shadow_ctx {
    const sl_allowlist *al;
    int64_t *first;          /* per entry: the first rule shadowing it, index; -1 none */
} shadow_ctx;

static void note_shadow(void *vctx, const sl_entry *plain, const sl_entry *r)
{
    shadow_ctx *c = vctx;
    if (plain->port != r->port)
        return;
    size_t pi = sl_allowlist_index(c->al, plain);
    int64_t ri = (int64_t)sl_allowlist_index(c->al, r);
    if (c->first[pi] < 0 || ri < c->first[pi])
        c->first[pi] = ri;
}

void sl_allowlist_warnings(const sl_allowlist *al, sl_report_fn report, void *ctx)
{
    if (al->nrules == 0 || !report)
        return;
    shadow_ctx c = { al, malloc(al->n * sizeof(int64_t)) };
    if (!c.first)
        return;
    for (size_t i = 0; i < al->n; i++)
        c.first[i] = -1;
    sl_allowlist_overlaps(al, false, al, true, note_shadow, &c);
    for (size_t i = 0; i < al->n; i++) {
        if (c.first[i] < 0)
            continue;
        const sl_entry *e = &al->items[i].e, *r = &al->items[c.first[i]].e;
        char where[300], rwhere[300], eh[SL_HOST_MAX + 16], rh[SL_HOST_MAX + 16], msg[1200];
        if (e->line > 0)
            snprintf(where, sizeof where, "%s:%d", e->file, e->line);
        else
            snprintf(where, sizeof where, "%s", e->file);
        if (r->line > 0)
            snprintf(rwhere, sizeof rwhere, "%s:%d", r->file, r->line);
        else
            snprintf(rwhere, sizeof rwhere, "%s", r->file);
        snprintf(msg, sizeof msg,
                 "%s: warning: '%s' is shadowed by the request rules for '%s' (first: %s): "
                 "where they apply, only request rules allow anything",
                 where, sl_entry_format_host(e, eh, sizeof eh), sl_entry_format_host(r, rh, sizeof rh),
                 rwhere);
        report(ctx, msg);
    }
    free(c.first);
}

/* ---- Printing ---- */

const char *sl_entry_format_host(const sl_entry *e, char *buf, size_t cap)
{
    char host[SL_HOST_MAX + 3];
    sl_host_authority(&e->host, host, sizeof host);
    const char *pre = e->kind == SL_ENTRY_WILDCARD ? "*." : e->kind == SL_ENTRY_APEX ? "." : "";
    if (e->port)
        snprintf(buf, cap, "%s%s:%d", pre, host, e->port);
    else
        snprintf(buf, cap, "%s%s", pre, host);
    return buf;
}

const char *sl_entry_format(const sl_entry *e, char *buf, size_t cap)
{
    if (!sl_entry_is_rule(e))
        return sl_entry_format_host(e, buf, cap);
    char host[SL_HOST_MAX + 16];
    sl_entry_format_host(e, host, sizeof host);
    size_t off = (size_t)snprintf(buf, cap, "%s %s%s", e->methods, host, e->path);
    for (size_t i = 0; i < e->ndigests && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, " %s", e->digests[i]);
    return buf;
}

bool sl_allowlist_suggest(const sl_host *h, int port, bool connect, const sl_ports *connect_ports,
                          const sl_ports *http_ports, char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    if (h->kind != SL_HOST_NAME) {
        /* Whatever the allowlist says, the gate refuses it as
         * non_public_address: a line for it would only mislead. */
        sl_cidr_list none = { NULL, 0 };
        if (!sl_classify(&h->addr, none, none, NULL, 0).is_public)
            return false;
    }
    char host[SL_HOST_MAX + 3];
    sl_host_authority(h, host, sizeof host);
    if (sl_ports_has(connect ? connect_ports : http_ports, port))
        snprintf(buf, cap, "%s", host);
    else
        snprintf(buf, cap, "%s:%d", host, port);
    return true;
}

bool sl_allowlist_suggest_rule(const sl_host *h, int port, bool connect, const sl_ports *connect_ports,
        const sl_ports *http_ports, const char *method, const char *path, size_t path_len,
        char *buf, size_t cap)
{
    char host[SL_HOST_MAX + 16];
    if (cap)
        buf[0] = '\0';
    if (cap == 0 || sl_path_ambiguous(path, path_len) ||
        !sl_allowlist_suggest(h, port, connect, connect_ports, http_ports, host, sizeof host))
        return false;
    size_t mlen = strlen(method);
    const char *m = sl_method_name_valid(method, mlen) ? method : "*";
    size_t head = strlen(m) + 1 + strlen(host);
    size_t room = cap - 1 < LINE_MAX_BYTES ? cap - 1 : LINE_MAX_BYTES;
    if (head + 2 > room)
        return false;                    /* not even a path of "/" and "*" fits */
    /* The literal part of the path: up to a '*' (a rule cannot hold one
     * literally), or what fits with a '*' after it. A cut never splits an
     * escape: the prefix stays a valid pattern. */
    size_t keep = path_len, star = 0;
    const char *st = memchr(path, '*', path_len);
    if (st)
        keep = (size_t)(st - path), star = 1;
    if (head + keep + star > room) {
        keep = room - head - 1;
        star = 1;
    }
    if (star) {
        for (size_t i = keep >= 2 ? keep - 2 : 0; i < keep; i++)
            if (path[i] == '%') {
                keep = i;
                break;
            }
    }
    snprintf(buf, cap, "%s %s%.*s%s", m, host, (int)keep, path, star ? "*" : "");
    return true;
}
