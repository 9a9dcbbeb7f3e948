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
#include "text.h"

#define LINE_MAX_BYTES 1024

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
    sl_entry e;
    uint32_t next;         /* next entry with the same key, index + 1; 0: none */
    uint32_t last;         /* for the first entry of a key: the last one, index */
} item;

struct sl_allowlist {
    item *items;           /* insertion order */
    size_t n, cap;
    htab exact;            /* host text (name or canonical IP) -> first exact entry */
    htab suffix;           /* suffix -> first wildcard/apex entry */
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
    free(al->items);
    free(al->exact.slots);
    free(al->suffix.slots);
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

/* Appends e and links it under its key, keeping insertion order per key. */
static bool add_entry(sl_allowlist *al, const sl_entry *e)
{
    if (al->n >= UINT32_MAX - 1)
        return false;
    if (al->n == al->cap) {
        size_t ncap = al->cap ? al->cap * 2 : 64;
        item *ni = realloc(al->items, ncap * sizeof *ni);
        if (!ni)
            return false;
        al->items = ni;
        al->cap = ncap;
    }
    uint32_t idx = (uint32_t)al->n;
    item *it = &al->items[idx];
    it->e = *e;
    it->next = 0;
    it->last = idx;

    htab *t = e->kind == SL_ENTRY_EXACT ? &al->exact : &al->suffix;
    uint32_t h = hash_str(e->host.name, e->host.len);
    int64_t first = ht_find(t, h, e->host.name, e->host.len, entry_eq, al);
    if (first >= 0) {
        item *head = &al->items[first];
        al->items[head->last].next = idx + 1;
        head->last = idx;
    } else if (!ht_insert(t, h, idx)) {
        return false;
    }
    al->n++;
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
    while (n > b && is_ws(text[n - 1]))
        n--;
    if (b == n)
        return true;                         /* blank or comment only */

    const char *tok = text + b;
    size_t tlen = n - b;
    size_t t1 = 0;
    while (t1 < tlen && !is_ws(tok[t1]))
        t1++;
    if (t1 < tlen) {
        size_t r = t1;
        while (is_ws(tok[r]))
            r++;
        put_err(err, errcap, "unexpected text after the entry (one entry a line)", tok + r,
                tlen - r);
        return false;
    }

    sl_entry e;
    memset(&e, 0, sizeof e);
    if (!parse_entry(tok, tlen, &e, err, errcap))
        return false;
    e.line = line;
    e.file = intern_file(al, file);
    if (!e.file || !add_entry(al, &e)) {
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

/* Candidates are visited most specific first (exact, then suffixes from the
 * longest), and within one key in insertion order; the first that allows the
 * port wins. Cost: one probe per label of the host, whatever the list size. */
sl_match_result sl_allowlist_match(const sl_allowlist *al, const sl_host *h, int port,
                                   bool connect, const sl_ports *connect_ports,
                                   const sl_ports *http_ports, const sl_entry **rule)
{
    if (rule)
        *rule = NULL;
    bool host_seen = false;

    /* Exact entries. IP literals are keyed by their canonical text, which is
     * a function of the address; sl_addr_equal confirms. */
    char ipbuf[SL_ADDR_STRLEN];
    const char *key = h->name;
    size_t klen = h->len;
    bool ip = h->kind != SL_HOST_NAME;
    if (ip) {
        key = sl_addr_format(&h->addr, ipbuf, sizeof ipbuf);
        klen = strlen(key);
    }
    int64_t i = ht_find(&al->exact, hash_str(key, klen), key, klen, entry_eq, al);
    for (; i >= 0; i = (int64_t)al->items[i].next - 1) {
        const sl_entry *e = &al->items[i].e;
        if (ip ? (e->host.kind == h->kind && sl_addr_equal(&e->host.addr, &h->addr))
               : e->host.kind == SL_HOST_NAME) {
            host_seen = true;
            if (entry_allows(e, port, connect, connect_ports, http_ports)) {
                if (rule)
                    *rule = e;
                return SL_MATCH_ALLOWED;
            }
        }
    }

    /* Wildcard and apex entries: only DNS names have suffixes. */
    if (!ip) {
        for (size_t off = 0; off < h->len;) {
            const char *suf = h->name + off;
            size_t slen = h->len - off;
            bool is_self = off == 0;
            i = ht_find(&al->suffix, hash_str(suf, slen), suf, slen, entry_eq, al);
            for (; i >= 0; i = (int64_t)al->items[i].next - 1) {
                const sl_entry *e = &al->items[i].e;
                if (e->kind == SL_ENTRY_WILDCARD && is_self)
                    continue;            /* *.example.org is not example.org */
                host_seen = true;
                if (entry_allows(e, port, connect, connect_ports, http_ports)) {
                    if (rule)
                        *rule = e;
                    return SL_MATCH_ALLOWED;
                }
            }
            const char *dot = memchr(suf, '.', slen);
            if (!dot)
                break;
            off = (size_t)(dot - h->name) + 1;
        }
    }
    return host_seen ? SL_MATCH_PORT_NOT_ALLOWED : SL_MATCH_NO_ENTRY;
}

/* ---- Printing ---- */

const char *sl_entry_format(const sl_entry *e, char *buf, size_t cap)
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
