/* sluice audit: summary, denied and suggest reports (see audit_report.h). */
#include "audit_report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addr.h"
#include "allowlist.h"
#include "host.h"
#include "json.h"
#include "netclass.h"
#include "text.h"

#define HOST_KEEP 1024      /* longest host text kept per destination */
#define TS_LEN 32
#define MAX_NAMES 64        /* distinct reasons, methods, credential names; more fold into one */
#define PATH_KEEP 1024      /* the gate logs at most 1,024 bytes of a path (SPEC) */
#define SUG_PATHS 8         /* distinct refused paths told apart per row; past that, "many" */
/* The allowlist's longest line (allowlist.c): a longer suggestion could not be added. */
#define SUGGEST_LINE_MAX 1024

/* ---- small pieces ---- */

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h ? h : 1;   /* 0 marks an empty slot */
}

#define FNV0 0xcbf29ce484222325ULL

/* ---- the report ---- */

typedef struct rcount {
    uint16_t reason;
    unsigned long long allow, deny;
    char last[TS_LEN];
} rcount;

typedef struct dest {
    uint64_t hash;
    char *host;
    size_t host_len;
    long port;              /* -1: the line had none */
    unsigned long long allowed, denied, bytes_up, bytes_down, closes;
    char first[TS_LEN], last[TS_LEN];
    rcount inl[2];          /* the first reasons (most have one or two) ... */
    rcount *ext;            /* ... and the rest */
    size_t nreasons;
    /* --suggest, by kind of request: [0] plain HTTP, [1] CONNECT */
    unsigned long long sug_nal[2], sug_pna[2];
    unsigned long long last_refused[2], last_allowed[2];   /* line ordinals */
    bool nonpublic;
} dest;

/* A table of short names from the log (decoded, cut at 63 bytes). */
typedef struct names {
    char *v[MAX_NAMES];
    size_t n;
} names;

/* --suggest: the rule_not_matched refusals of one row. */
typedef struct sugpaths {
    unsigned long long refused[2];    /* by kind: [0] plain HTTP, [1] inside a tunnel */
    char last[TS_LEN];
    const char *first;                /* the first path refused (in the arena) */
    size_t first_len;
    bool first_cut;                   /* PATH_KEEP bytes: the gate may have cut it */
    size_t npaths;                    /* distinct paths refused, told apart by hash ... */
    bool many;                        /* ... up to SUG_PATHS */
    uint64_t hash[SUG_PATHS];
    unsigned long long last_refused[SUG_PATHS], last_allowed[SUG_PATHS];   /* line ordinals */
} sugpaths;

/* Requests to an inspected host: one row per host:port, method and path
 * prefix (path_prefix). */
typedef struct irow {
    uint64_t hash;
    uint32_t dest;
    uint16_t method;                  /* in sl_report.methods */
    const char *prefix;               /* in the arena */
    size_t prefix_len;
    bool wild;                        /* the prefix ends in a '*' of ours, not the path's */
    unsigned long long allowed, denied;
    uint64_t creds;                   /* bit i: credential i of sl_report.creds was set */
    sugpaths *sug;                    /* NULL until a rule_not_matched refusal */
} irow;

typedef struct dslot {
    uint32_t idx;           /* destination index + 1; 0: empty */
    uint32_t h32;           /* part of its hash: most misses never touch the destination */
} dslot;

typedef struct open_ent {
    uint64_t idh;           /* 0: empty */
    unsigned long long ord;
    uint32_t dest;
} open_ent;

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    char data[];
} chunk;

struct sl_report {
    dest *dests;
    size_t ndests, capdests;
    dslot *dmap;            /* open addressing; idx 0: empty */
    size_t dmap_cap;

    open_ent *open;
    size_t nopen, open_cap;

    uint64_t *clients;
    size_t nclients, clients_cap;

    names reasons, methods, creds;

    irow *rows;
    size_t nrows, caprows;
    dslot *rmap;
    size_t rmap_cap;

    chunk *arena;

    char from[TS_LEN], to[TS_LEN];
    unsigned long long lines, requests, allowed, denied, closes, bytes_up, bytes_down;
    unsigned long long malformed, unmatched, forgotten, other_events;
    unsigned long long inspected, no_tunnel;
    size_t nfiles;
};

sl_report *sl_report_new(void)
{
    return calloc(1, sizeof(sl_report));
}

void sl_report_free(sl_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ndests; i++)
        free(r->dests[i].ext);
    free(r->dests);
    free(r->dmap);
    free(r->open);
    free(r->clients);
    for (size_t i = 0; i < r->nrows; i++)
        free(r->rows[i].sug);
    free(r->rows);
    free(r->rmap);
    names *tabs[] = { &r->reasons, &r->methods, &r->creds };
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < tabs[t]->n; i++)
            free(tabs[t]->v[i]);
    while (r->arena) {
        chunk *c = r->arena;
        r->arena = c->next;
        free(c);
    }
    free(r);
}

void sl_report_malformed(sl_report *r) { r->malformed++; }
void sl_report_set_files(sl_report *r, size_t nfiles) { r->nfiles = nfiles; }

static char *arena_copy(sl_report *r, const char *s, size_t n)
{
    if (!r->arena || r->arena->cap - r->arena->used < n + 1) {
        size_t cap = n + 1 > 65536 ? n + 1 : 65536;
        chunk *c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = r->arena;
        c->used = 0;
        c->cap = cap;
        r->arena = c;
    }
    char *p = r->arena->data + r->arena->used;
    memcpy(p, s, n);
    p[n] = '\0';
    r->arena->used += n + 1;
    return p;
}

/* ---- destinations: host and port ---- */

static bool dmap_grow(sl_report *r)
{
    size_t cap = r->dmap_cap ? r->dmap_cap * 2 : 1024;
    dslot *m = calloc(cap, sizeof *m);
    if (!m)
        return false;
    for (size_t i = 0; i < r->ndests; i++) {
        size_t j = r->dests[i].hash & (cap - 1);
        while (m[j].idx)
            j = (j + 1) & (cap - 1);
        m[j] = (dslot){ (uint32_t)i + 1, (uint32_t)(r->dests[i].hash >> 32) };
    }
    free(r->dmap);
    r->dmap = m;
    r->dmap_cap = cap;
    return true;
}

static dest *get_dest(sl_report *r, const char *host, size_t len, long port)
{
    uint64_t h = mix(hash_bytes(&port, sizeof port, hash_bytes(host, len, FNV0)));
    if (r->dmap_cap) {
        for (size_t j = h & (r->dmap_cap - 1); r->dmap[j].idx; j = (j + 1) & (r->dmap_cap - 1)) {
            if (r->dmap[j].h32 != (uint32_t)(h >> 32))
                continue;
            dest *d = &r->dests[r->dmap[j].idx - 1];
            if (d->hash == h && d->port == port && d->host_len == len && memcmp(d->host, host, len) == 0)
                return d;
        }
    }
    if ((r->ndests + 1) * 2 > r->dmap_cap && !dmap_grow(r))
        return NULL;
    if (r->ndests == r->capdests) {
        size_t cap = r->capdests ? r->capdests * 2 : 256;
        dest *d = realloc(r->dests, cap * sizeof *d);
        if (!d)
            return NULL;
        r->dests = d;
        r->capdests = cap;
    }
    dest *d = &r->dests[r->ndests];
    memset(d, 0, sizeof *d);
    d->host = arena_copy(r, host, len);
    if (!d->host)
        return NULL;
    d->host_len = len;
    d->port = port;
    d->hash = h;
    size_t j = h & (r->dmap_cap - 1);
    while (r->dmap[j].idx)
        j = (j + 1) & (r->dmap_cap - 1);
    r->dmap[j] = (dslot){ (uint32_t)r->ndests + 1, (uint32_t)(h >> 32) };
    r->ndests++;
    return d;
}

/* ---- reasons ---- */

/* The index of a name in t; past MAX_NAMES - 1 distinct ones, the rest
 * share `fold`. -1: out of memory. */
static int name_index(names *t, const sl_astr *s, const char *fold)
{
    if (!s->esc)
        for (size_t i = 0; i < t->n; i++)
            if (strncmp(t->v[i], s->p, s->len) == 0 && t->v[i][s->len] == '\0')
                return (int)i;
    char buf[64];
    size_t n = sl_astr_decode(s, buf, sizeof buf);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i], buf) == 0)
            return (int)i;
    if (t->n >= MAX_NAMES - 1) {
        /* Too many kinds: the rest share the last slot. */
        n = (size_t)snprintf(buf, sizeof buf, "%s", fold);
        for (size_t i = 0; i < t->n; i++)
            if (strcmp(t->v[i], buf) == 0)
                return (int)i;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return -1;
    memcpy(copy, buf, n + 1);
    t->v[t->n] = copy;
    return (int)t->n++;
}

static const rcount *reason_at(const dest *d, size_t i)
{
    return i < 2 ? &d->inl[i] : &d->ext[i - 2];
}

static rcount *dest_reason(dest *d, int reason)
{
    for (size_t i = 0; i < d->nreasons; i++)
        if (reason_at(d, i)->reason == reason)
            return (rcount *)reason_at(d, i);
    rcount *rc;
    if (d->nreasons < 2) {
        rc = &d->inl[d->nreasons];
    } else {
        rc = realloc(d->ext, (d->nreasons - 1) * sizeof *rc);
        if (!rc)
            return NULL;
        d->ext = rc;
        rc = &d->ext[d->nreasons - 2];
    }
    d->nreasons++;
    memset(rc, 0, sizeof *rc);
    rc->reason = (uint16_t)reason;
    return rc;
}

/* A destination's reasons, most frequent first (free the result). */
static rcount *sorted_reasons(const sl_report *r, const dest *d);


/* ---- clients: a set of address hashes ---- */

static bool client_add(sl_report *r, const sl_astr *s)
{
    char buf[128];
    size_t n = sl_astr_decode(s, buf, sizeof buf);
    /* "127.0.0.1:50122" and "[::1]:50122": the address, not the port. */
    char *colon = memrchr(buf, ':', n);
    if (colon && colon > buf) {
        bool digits = colon[1] != '\0';
        for (char *p = colon + 1; *p; p++)
            digits = digits && *p >= '0' && *p <= '9';
        if (digits)
            n = (size_t)(colon - buf);
    }
    uint64_t h = mix(hash_bytes(buf, n, FNV0));
    if ((r->nclients + 1) * 2 > r->clients_cap) {
        size_t cap = r->clients_cap ? r->clients_cap * 2 : 256;
        uint64_t *m = calloc(cap, sizeof *m);
        if (!m)
            return false;
        for (size_t i = 0; i < r->clients_cap; i++) {
            if (!r->clients[i])
                continue;
            size_t j = r->clients[i] & (cap - 1);
            while (m[j])
                j = (j + 1) & (cap - 1);
            m[j] = r->clients[i];
        }
        free(r->clients);
        r->clients = m;
        r->clients_cap = cap;
    }
    size_t j = h & (r->clients_cap - 1);
    while (r->clients[j]) {
        if (r->clients[j] == h)
            return true;
        j = (j + 1) & (r->clients_cap - 1);
    }
    r->clients[j] = h;
    r->nclients++;
    return true;
}

/* ---- connections allowed and not yet closed: id -> destination ---- */

static bool open_rebuild(sl_report *r, size_t cap, unsigned long long keep_after)
{
    open_ent *m = calloc(cap, sizeof *m);
    if (!m)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < r->open_cap; i++) {
        open_ent *e = &r->open[i];
        if (!e->idh)
            continue;
        if (e->ord <= keep_after) {
            r->forgotten++;
            continue;
        }
        size_t j = e->idh & (cap - 1);
        while (m[j].idh)
            j = (j + 1) & (cap - 1);
        m[j] = *e;
        n++;
    }
    free(r->open);
    r->open = m;
    r->open_cap = cap;
    r->nopen = n;
    return true;
}

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* The map is full: forget the oldest quarter. */
static bool open_forget_oldest(sl_report *r)
{
    unsigned long long *ords = malloc(r->nopen * sizeof *ords);
    if (!ords)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < r->open_cap; i++)
        if (r->open[i].idh)
            ords[n++] = r->open[i].ord;
    qsort(ords, n, sizeof *ords, cmp_ull);
    unsigned long long cut = ords[n / 4];
    free(ords);
    return open_rebuild(r, r->open_cap, cut);
}

static bool open_put(sl_report *r, uint64_t idh, unsigned long long ord, uint32_t d)
{
    if (r->nopen >= SL_REPORT_OPEN_MAX && !open_forget_oldest(r))
        return false;
    if ((r->nopen + 1) * 2 > r->open_cap && !open_rebuild(r, r->open_cap ? r->open_cap * 2 : 1024, 0))
        return false;
    size_t j = idh & (r->open_cap - 1);
    while (r->open[j].idh) {
        if (r->open[j].idh == idh) {   /* the same id again: the newer one wins */
            r->open[j].ord = ord;
            r->open[j].dest = d;
            return true;
        }
        j = (j + 1) & (r->open_cap - 1);
    }
    r->open[j] = (open_ent){ idh, ord, d };
    r->nopen++;
    return true;
}

/* Remove and return the destination index + 1, or 0. */
static uint32_t open_take(sl_report *r, uint64_t idh)
{
    if (!r->open_cap)
        return 0;
    size_t mask = r->open_cap - 1, j = idh & mask;
    while (r->open[j].idh && r->open[j].idh != idh)
        j = (j + 1) & mask;
    if (!r->open[j].idh)
        return 0;
    uint32_t d = r->open[j].dest + 1;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; r->open[k].idh; k = (k + 1) & mask) {
        size_t home = r->open[k].idh & mask;
        bool movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
        if (movable) {
            r->open[hole] = r->open[k];
            hole = k;
        }
    }
    r->open[hole].idh = 0;
    r->nopen--;
    return d;
}

/* The destination of an open connection, index + 1, or 0; it stays open. */
static uint32_t open_find(const sl_report *r, uint64_t idh)
{
    if (!r->open_cap)
        return 0;
    size_t mask = r->open_cap - 1;
    for (size_t j = idh & mask; r->open[j].idh; j = (j + 1) & mask)
        if (r->open[j].idh == idh)
            return r->open[j].dest + 1;
    return 0;
}

/* ---- inspected requests: host:port, method and path prefix ---- */

/* No space, control byte, DEL or byte >= 0x80. */
static bool printable_word(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] >= 0x7f)
            return false;
    return true;
}

static const sl_astr no_value = { "(none)", 6, false, true };

/* The row a path counts in: its first two segments, then a '*' of ours
 * (*wild): "/repos/acme/widgets/issues" counts in "/repos/acme/" + '*'. A
 * path of at most two segments is its own row, unless the gate may have
 * cut it: then it ends in a '*' of ours too. out has room for n + 2 bytes. */
static size_t path_prefix(const char *p, size_t n, bool cut, char *out, bool *wild)
{
    size_t i = 0, slashes = 0;
    while (i < n && !(p[i] == '/' && ++slashes == 3))
        i++;
    *wild = i < n || cut;
    if (i < n)
        n = i + 1;
    memcpy(out, p, n);
    if (*wild)
        out[n++] = '*';
    return n;
}

static bool rmap_grow(sl_report *r)
{
    size_t cap = r->rmap_cap ? r->rmap_cap * 2 : 1024;
    dslot *m = calloc(cap, sizeof *m);
    if (!m)
        return false;
    for (size_t i = 0; i < r->nrows; i++) {
        size_t j = r->rows[i].hash & (cap - 1);
        while (m[j].idx)
            j = (j + 1) & (cap - 1);
        m[j] = (dslot){ (uint32_t)i + 1, (uint32_t)(r->rows[i].hash >> 32) };
    }
    free(r->rmap);
    r->rmap = m;
    r->rmap_cap = cap;
    return true;
}

static irow *get_row(sl_report *r, uint32_t di, int method, const char *prefix, size_t len)
{
    uint64_t key[2] = { di, (uint64_t)method };
    uint64_t h = mix(hash_bytes(prefix, len, hash_bytes(key, sizeof key, FNV0)));
    if (r->rmap_cap) {
        for (size_t j = h & (r->rmap_cap - 1); r->rmap[j].idx; j = (j + 1) & (r->rmap_cap - 1)) {
            if (r->rmap[j].h32 != (uint32_t)(h >> 32))
                continue;
            irow *w = &r->rows[r->rmap[j].idx - 1];
            if (w->hash == h && w->dest == di && w->method == method && w->prefix_len == len &&
                memcmp(w->prefix, prefix, len) == 0)
                return w;
        }
    }
    if ((r->nrows + 1) * 2 > r->rmap_cap && !rmap_grow(r))
        return NULL;
    if (r->nrows == r->caprows) {
        size_t cap = r->caprows ? r->caprows * 2 : 256;
        irow *v = realloc(r->rows, cap * sizeof *v);
        if (!v)
            return NULL;
        r->rows = v;
        r->caprows = cap;
    }
    irow *w = &r->rows[r->nrows];
    memset(w, 0, sizeof *w);
    w->prefix = arena_copy(r, prefix, len);
    if (!w->prefix)
        return NULL;
    w->prefix_len = len;
    w->dest = di;
    w->method = (uint16_t)method;
    w->hash = h;
    size_t j = h & (r->rmap_cap - 1);
    while (r->rmap[j].idx)
        j = (j + 1) & (r->rmap_cap - 1);
    r->rmap[j] = (dslot){ (uint32_t)r->nrows + 1, (uint32_t)(h >> 32) };
    r->nrows++;
    return w;
}

/* Where path hash ph is among the row's refused paths, or SUG_PATHS. */
static size_t sug_slot(const sugpaths *sp, uint64_t ph)
{
    for (size_t k = 0; k < sp->npaths; k++)
        if (sp->hash[k] == ph)
            return k;
    return SUG_PATHS;
}

/* A request to an inspected host: a request line, or a plain-HTTP decision
 * line the rules decided. kind: 1 inside a tunnel, 0 plain HTTP. */
static bool inspected_request(sl_report *r, const sl_afields *f, uint32_t di, int kind, bool allow,
                              const char *ts, size_t tslen)
{
    char path[PATH_KEEP + 8], prefix[PATH_KEEP + 2];
    /* 8 spare bytes: a path the gate cut decodes to PATH_KEEP bytes or more */
    size_t plen = sl_astr_decode(&f->path, path, sizeof path);
    bool cut = plen >= PATH_KEEP;
    if (cut)
        plen = PATH_KEEP;
    bool wild;
    size_t xlen = path_prefix(path, plen, cut, prefix, &wild);
    int method = name_index(&r->methods, f->method.set ? &f->method : &no_value, "(other)");
    if (method < 0)
        return false;
    irow *w = get_row(r, di, method, prefix, xlen);
    if (!w)
        return false;
    w->wild = wild;
    r->inspected++;
    if (f->credential.set) {
        int c = name_index(&r->creds, &f->credential, "(other)");
        if (c < 0)
            return false;
        w->creds |= 1ULL << c;
    }
    uint64_t ph = mix(hash_bytes(path, plen, FNV0));
    if (allow) {
        w->allowed++;
        size_t k = w->sug ? sug_slot(w->sug, ph) : SUG_PATHS;
        if (k < SUG_PATHS)
            w->sug->last_allowed[k] = r->lines;
        return true;
    }
    w->denied++;
    if (!sl_astr_eq(&f->reason, "rule_not_matched"))
        return true;
    sugpaths *sp = w->sug;
    if (!sp) {
        sp = w->sug = calloc(1, sizeof *sp);
        if (!sp || !(sp->first = arena_copy(r, path, plen)))
            return false;
        sp->first_len = plen;
        sp->first_cut = cut;
    }
    sp->refused[kind]++;
    if (tslen && strcmp(ts, sp->last) > 0)
        memcpy(sp->last, ts, tslen + 1);
    size_t k = sug_slot(sp, ph);
    if (k == SUG_PATHS && sp->npaths < SUG_PATHS) {
        k = sp->npaths++;
        sp->hash[k] = ph;
    } else if (k == SUG_PATHS) {
        sp->many = true;
    }
    if (k < SUG_PATHS)
        sp->last_refused[k] = r->lines;
    return true;
}

/* ---- taking lines in ---- */

/* ts is NUL-terminated, shorter than TS_LEN. */
static void ts_minmax(char *first, char *last, const char *ts, size_t len)
{
    if (!len)
        return;
    if (!first[0] || strcmp(ts, first) < 0)
        memcpy(first, ts, len + 1);
    if (!last[0] || strcmp(ts, last) > 0)
        memcpy(last, ts, len + 1);
}

static int suggest_reason(const sl_astr *reason)
{
    if (sl_astr_eq(reason, "not_allowlisted"))
        return 0;
    if (sl_astr_eq(reason, "port_not_allowed"))
        return 1;
    return -1;
}

bool sl_report_line(sl_report *r, const sl_afields *f)
{
    char ts[TS_LEN];
    r->lines++;
    size_t tslen = sl_astr_decode(&f->ts, ts, sizeof ts);
    /* Timestamps are printed as they are: one with a byte that could drive
     * a terminal (or a space) is no timestamp. */
    if (!printable_word(ts, tslen)) {
        ts[0] = '\0';
        tslen = 0;
    }
    ts_minmax(r->from, r->to, ts, tslen);

    bool is_request = sl_astr_eq(&f->event, "request");
    if (is_request || sl_astr_eq(&f->event, "decision")) {
        char host[HOST_KEEP];
        size_t hlen = sl_astr_decode(&f->host, host, sizeof host);
        long port = f->port.set && f->port.v <= 65535 ? (long)f->port.v : -1;
        uint64_t idh = f->id.set ? mix(hash_bytes(f->id.p, f->id.len, FNV0)) : 0;
        if (is_request) {
            /* A request line has no port: its tunnel's CONNECT line has. */
            uint32_t t = idh ? open_find(r, idh) : 0;
            port = t ? r->dests[t - 1].port : -1;
            if (!t)
                r->no_tunnel++;
            else if (!f->host.set) {
                hlen = r->dests[t - 1].host_len;
                memcpy(host, r->dests[t - 1].host, hlen);
            }
        }
        dest *d = get_dest(r, host, hlen, port);
        if (!d)
            return false;
        bool allow = sl_astr_eq(&f->decision, "allow");
        int reason = name_index(&r->reasons, f->reason.set ? &f->reason : &no_value, "other");
        if (reason < 0)
            return false;
        rcount *rc = dest_reason(d, reason);
        if (!rc)
            return false;
        r->requests++;
        if (allow) {
            r->allowed++;
            d->allowed++;
            rc->allow++;
        } else {
            r->denied++;
            d->denied++;
            rc->deny++;
            if (tslen && strcmp(ts, rc->last) > 0)
                memcpy(rc->last, ts, tslen + 1);
        }
        ts_minmax(d->first, d->last, ts, tslen);
        uint32_t di = (uint32_t)(d - r->dests);
        if (is_request)
            return inspected_request(r, f, di, 1, allow, ts, tslen);
        /* Plain HTTP to an inspected host: the rules decided. */
        if ((sl_astr_eq(&f->reason, "rule") || sl_astr_eq(&f->reason, "rule_not_matched")) &&
            !inspected_request(r, f, di, 0, allow, ts, tslen))
            return false;
        if (f->client.set && !client_add(r, &f->client))
            return false;
        int kind = sl_astr_eq(&f->method, "CONNECT") ? 1 : 0;
        /* A tunnel whose origin failed TLS is refused, yet its client gets
         * its 502 inside the tunnel, on a request line. */
        bool tunnel = allow || sl_astr_eq(&f->reason, "upstream_tls_failed");
        if (tunnel && idh && !open_put(r, idh, r->lines, di))
            return false;
        if (allow) {
            d->last_allowed[kind] = r->lines;
        } else {
            int s = suggest_reason(&f->reason);
            if (s == 0)
                d->sug_nal[kind]++;
            else if (s == 1)
                d->sug_pna[kind]++;
            if (s >= 0)
                d->last_refused[kind] = r->lines;
            if (sl_astr_eq(&f->reason, "non_public_address"))
                d->nonpublic = true;
        }
    } else if (sl_astr_eq(&f->event, "close")) {
        unsigned long long up = f->bytes_up.set ? f->bytes_up.v : 0;
        unsigned long long down = f->bytes_down.set ? f->bytes_down.v : 0;
        r->closes++;
        r->bytes_up += up;
        r->bytes_down += down;
        uint32_t d = f->id.set ? open_take(r, mix(hash_bytes(f->id.p, f->id.len, FNV0))) : 0;
        if (d) {
            dest *dd = &r->dests[d - 1];
            dd->bytes_up += up;
            dd->bytes_down += down;
            dd->closes++;
        } else {
            r->unmatched++;
        }
    } else {
        r->other_events++;
    }
    return true;
}

void sl_report_get_totals(const sl_report *r, sl_report_totals *t)
{
    memset(t, 0, sizeof *t);
    t->lines = r->lines;
    t->requests = r->requests;
    t->allowed = r->allowed;
    t->denied = r->denied;
    t->closes = r->closes;
    t->bytes_up = r->bytes_up;
    t->bytes_down = r->bytes_down;
    t->clients = r->nclients;
    t->destinations = r->ndests;
    t->malformed = r->malformed;
    t->unmatched_closes = r->unmatched;
    t->forgotten_open = r->forgotten;
    t->inspected = r->inspected;
    t->no_tunnel = r->no_tunnel;
    t->rows = r->nrows;
}

/* ---- output helpers ---- */

void sl_audit_json_str(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    putc('"', out);
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            putc((int)c, out);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            putc('\\', out);
            putc((int)c, out);
            i++;
            continue;
        }
        if (c == '\n' || c == '\r' || c == '\t') {
            fputs(c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t", out);
            i++;
            continue;
        }
        uint32_t cp;
        size_t n = sl_utf8_decode(s + i, len - i, &cp);
        if (n == 0) {
            cp = 0xfffd;
            n = 1;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            fprintf(out, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
        } else {
            fprintf(out, "\\u%04x", cp);
        }
        i += n;
    }
    putc('"', out);
}

size_t sl_audit_text(FILE *out, const char *str, size_t len)
{
    return sl_display_write(out, str, len, SL_DISPLAY_HEX);
}

static void pad(FILE *out, size_t have, size_t want)
{
    for (; have < want; have++)
        putc(' ', out);
}

/* host:port for a person: IPv6 in brackets, no port when there was none. */
static size_t print_dest(FILE *out, const dest *d)
{
    size_t cols = 0;
    bool v6 = memchr(d->host, ':', d->host_len) != NULL;
    if (d->host_len == 0)
        cols += (size_t)fprintf(out, "(no host)");
    else {
        if (v6)
            cols += (size_t)fprintf(out, "[");
        cols += sl_audit_text(out, d->host, d->host_len);
        if (v6)
            cols += (size_t)fprintf(out, "]");
    }
    if (d->port >= 0)
        cols += (size_t)fprintf(out, ":%ld", d->port);
    return cols;
}

/* Columns print_dest takes. */
static size_t dest_width(const dest *d)
{
    size_t w = d->host_len ? 0 : 9;
    for (size_t i = 0; i < d->host_len; i++) {
        char form[4];
        w += sl_display_byte((unsigned char)d->host[i], SL_DISPLAY_HEX, form);
    }
    if (memchr(d->host, ':', d->host_len))
        w += 2;
    if (d->port >= 0)
        w += d->port >= 10000 ? 6 : d->port >= 1000 ? 5 : d->port >= 100 ? 4 : d->port >= 10 ? 3 : 2;
    return w;
}

static void human_bytes(char *buf, size_t cap, unsigned long long v)
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double x = (double)v;
    size_t u = 0;
    while (x >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        x /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", v);
    else
        snprintf(buf, cap, "%.1f %s", x, units[u]);
}

/* "2026-12-02T09:00:00.123456Z" -> "2026-12-02T09:00:00Z" for tables. */
static const char *short_ts(const char *ts, char *buf, size_t cap)
{
    if (!ts[0])
        return "-";
    const char *dot = strchr(ts, '.');
    if (dot && strlen(ts) >= 20 && ts[strlen(ts) - 1] == 'Z')
        snprintf(buf, cap, "%.*sZ", (int)(dot - ts), ts);
    else
        snprintf(buf, cap, "%s", ts);
    return buf;
}

static bool parse_ts(const char *ts, double *out)
{
    struct tm tm = { 0 };
    int n = 0;
    if (sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    double frac = 0;
    if (ts[n] == '.') {
        /* digits only: strtod would take "1e802" and make the span infinite */
        int k = n + 1;
        while (ts[k] >= '0' && ts[k] <= '9')
            k++;
        if (k == n + 1 || k - n > 10)
            return false;
        frac = strtod(ts + n, NULL);
    }
    *out = (double)timegm(&tm) + frac;
    return true;
}

static void print_span(FILE *out, const char *from, const char *to)
{
    double a, b;
    if (!parse_ts(from, &a) || !parse_ts(to, &b) || !(b - a >= 0 && b - a <= 1e15))
        return;
    unsigned long long s = (unsigned long long)(b - a);
    unsigned long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
    if (d)
        fprintf(out, " (%llud %lluh %llum)", d, h, m);
    else if (h)
        fprintf(out, " (%lluh %llum %llus)", h, m, sec);
    else if (m)
        fprintf(out, " (%llum %llus)", m, sec);
    else
        fprintf(out, " (%.3f s)", b - a);
}

static void json_ts(FILE *out, const char *ts)
{
    if (ts[0])
        sl_audit_json_str(out, ts, strlen(ts));
    else
        fputs("null", out);
}

static void json_dest_key(FILE *out, const dest *d)
{
    fputs("\"host\":", out);
    sl_audit_json_str(out, d->host, d->host_len);
    if (d->port >= 0)
        fprintf(out, ",\"port\":%ld", d->port);
    else
        fputs(",\"port\":null", out);
}

/* ---- --summary ---- */

static const sl_report *sort_ctx;

static int cmp_dest_host(const dest *a, const dest *b)
{
    size_t n = a->host_len < b->host_len ? a->host_len : b->host_len;
    int c = memcmp(a->host, b->host, n);
    if (c)
        return c;
    if (a->host_len != b->host_len)
        return a->host_len < b->host_len ? -1 : 1;
    return a->port < b->port ? -1 : a->port > b->port;
}

static int cmp_summary(const void *x, const void *y)
{
    const dest *a = &sort_ctx->dests[*(const uint32_t *)x], *b = &sort_ctx->dests[*(const uint32_t *)y];
    unsigned long long na = a->allowed + a->denied, nb = b->allowed + b->denied;
    if (na != nb)
        return na > nb ? -1 : 1;
    return cmp_dest_host(a, b);
}

static int cmp_rcount(const void *x, const void *y);

static rcount *sorted_reasons(const sl_report *r, const dest *d)
{
    rcount *rs = malloc((d->nreasons + 1) * sizeof *rs);
    if (!rs)
        return NULL;
    for (size_t k = 0; k < d->nreasons; k++)
        rs[k] = *reason_at(d, k);
    sort_ctx = r;
    qsort(rs, d->nreasons, sizeof *rs, cmp_rcount);
    return rs;
}

static uint32_t *sorted_dests(const sl_report *r)
{
    uint32_t *idx = malloc((r->ndests + 1) * sizeof *idx);
    if (!idx)
        return NULL;
    for (size_t i = 0; i < r->ndests; i++)
        idx[i] = (uint32_t)i;
    sort_ctx = r;
    qsort(idx, r->ndests, sizeof *idx, cmp_summary);
    return idx;
}

static int cmp_rcount(const void *x, const void *y)
{
    const rcount *a = x, *b = y;
    unsigned long long na = a->allow + a->deny, nb = b->allow + b->deny;
    if (na != nb)
        return na > nb ? -1 : 1;
    return strcmp(sort_ctx->reasons.v[a->reason], sort_ctx->reasons.v[b->reason]);
}

static void print_notes(const sl_report *r, FILE *out)
{
    if (r->malformed)
        fprintf(out, "note: %llu line%s could not be read as log lines and %s skipped\n", r->malformed,
                r->malformed == 1 ? "" : "s", r->malformed == 1 ? "was" : "were");
    if (r->unmatched)
        fprintf(out, "note: %llu close line%s had no matching decision in these logs: "
                     "their bytes count in the totals only\n",
                r->unmatched, r->unmatched == 1 ? "" : "s");
    if (r->forgotten)
        fprintf(out, "note: more than %u connections were open at once; %llu were forgotten "
                     "(their bytes count in the totals only)\n",
                SL_REPORT_OPEN_MAX, r->forgotten);
    if (r->no_tunnel)
        fprintf(out, "note: %llu request line%s came from tunnels whose CONNECT line is in none of "
                     "these logs: %s port is unknown\n",
                r->no_tunnel, r->no_tunnel == 1 ? "" : "s", r->no_tunnel == 1 ? "its" : "their");
}

/* ---- the inspected requests, in --summary ---- */

static int cmp_row(const void *x, const void *y)
{
    const irow *a = &sort_ctx->rows[*(const uint32_t *)x], *b = &sort_ctx->rows[*(const uint32_t *)y];
    int c = cmp_dest_host(&sort_ctx->dests[a->dest], &sort_ctx->dests[b->dest]);
    if (!c)
        c = strcmp(sort_ctx->methods.v[a->method], sort_ctx->methods.v[b->method]);
    if (!c) {
        size_t n = a->prefix_len < b->prefix_len ? a->prefix_len : b->prefix_len;
        c = memcmp(a->prefix, b->prefix, n);
        if (!c && a->prefix_len != b->prefix_len)
            c = a->prefix_len < b->prefix_len ? -1 : 1;
    }
    return c;
}

/* Rows by host:port, method, then path (free the result). */
static uint32_t *sorted_rows(const sl_report *r)
{
    uint32_t *idx = malloc((r->nrows + 1) * sizeof *idx);
    if (!idx)
        return NULL;
    for (size_t i = 0; i < r->nrows; i++)
        idx[i] = (uint32_t)i;
    sort_ctx = r;
    qsort(idx, r->nrows, sizeof *idx, cmp_row);
    return idx;
}

static void json_rows(const sl_report *r, FILE *out, const uint32_t *idx)
{
    fputs("\"inspected\":[", out);
    for (size_t i = 0; i < r->nrows; i++) {
        const irow *w = &r->rows[idx[i]];
        fputs(i ? ",{" : "{", out);
        json_dest_key(out, &r->dests[w->dest]);
        fputs(",\"method\":", out);
        sl_audit_json_str(out, r->methods.v[w->method], strlen(r->methods.v[w->method]));
        fputs(",\"path\":", out);
        sl_audit_json_str(out, w->prefix, w->prefix_len);
        /* whether its last '*' is ours (the requests under it) or the path's own */
        fprintf(out, ",\"prefix\":%s,\"allowed\":%llu,\"denied\":%llu,\"credentials\":[",
                w->wild ? "true" : "false", w->allowed, w->denied);
        for (size_t k = 0, n = 0; k < r->creds.n; k++)
            if (w->creds >> k & 1) {
                fputs(n++ ? "," : "", out);
                sl_audit_json_str(out, r->creds.v[k], strlen(r->creds.v[k]));
            }
        fputs("]}", out);
    }
    putc(']', out);
}

/* At most 40 columns of a path in the table; the JSON has all of it. */
#define PATH_SHOWN 44

static void print_rows(const sl_report *r, FILE *out, const uint32_t *idx)
{
    size_t w = 19, mw = 6, pw = 4;
    char shown[PATH_SHOWN];
    for (size_t i = 0; i < r->nrows; i++) {
        const irow *row = &r->rows[idx[i]];
        size_t dw = dest_width(&r->dests[row->dest]);
        size_t ml = strlen(sl_display_untrusted(r->methods.v[row->method], strlen(r->methods.v[row->method]),
                                                shown, 16, SL_DISPLAY_HEX));
        size_t pl = strlen(sl_display_untrusted(row->prefix, row->prefix_len, shown, sizeof shown, SL_DISPLAY_HEX));
        w = dw > w ? dw : w;
        mw = ml > mw ? ml : mw;
        pw = pl > pw ? pl : pw;
    }
    if (w > 48)
        w = 48;
    fputs("\nINSPECTED HOST:PORT", out);
    pad(out, 19, w);
    fputs("  METHOD", out);
    pad(out, 6, mw);
    fputs("  PATH", out);
    pad(out, 4, pw);
    fputs("  ALLOWED   DENIED  CREDENTIALS\n", out);
    for (size_t i = 0; i < r->nrows; i++) {
        const irow *row = &r->rows[idx[i]];
        pad(out, print_dest(out, &r->dests[row->dest]), w);
        const char *m = r->methods.v[row->method];
        fprintf(out, "  %s", sl_display_untrusted(m, strlen(m), shown, 16, SL_DISPLAY_HEX));
        pad(out, strlen(shown), mw);
        fprintf(out, "  %s", sl_display_untrusted(row->prefix, row->prefix_len, shown, sizeof shown, SL_DISPLAY_HEX));
        pad(out, strlen(shown), pw);
        fprintf(out, "  %7llu  %7llu  ", row->allowed, row->denied);
        size_t n = 0;
        for (size_t k = 0; k < r->creds.n; k++)
            if (row->creds >> k & 1) {
                fputs(n++ ? "," : "", out);
                sl_audit_text(out, r->creds.v[k], strlen(r->creds.v[k]));
            }
        fputs(n ? "\n" : "-\n", out);
    }
}

void sl_report_summary(const sl_report *r, FILE *out, bool json)
{
    uint32_t *idx = sorted_dests(r), *ridx = sorted_rows(r);
    if (!idx || !ridx) {
        fputs("sluice: audit: out of memory\n", stderr);
        free(idx);
        free(ridx);
        return;
    }
    if (json) {
        fputs("{\"mode\":\"summary\",\"from\":", out);
        json_ts(out, r->from);
        fputs(",\"to\":", out);
        json_ts(out, r->to);
        fprintf(out, ",\"files\":%zu,\"lines\":%llu,\"clients\":%zu,"
                     "\"totals\":{\"requests\":%llu,\"allowed\":%llu,\"denied\":%llu,"
                     "\"bytes_up\":%llu,\"bytes_down\":%llu,\"closes\":%llu,\"inspected_requests\":%llu},"
                     "\"malformed_lines\":%llu,\"unmatched_closes\":%llu,\"forgotten_open\":%llu,"
                     "\"requests_without_tunnel\":%llu,\"hosts\":[",
                r->nfiles, r->lines, r->nclients, r->requests, r->allowed, r->denied, r->bytes_up,
                r->bytes_down, r->closes, r->inspected, r->malformed, r->unmatched, r->forgotten,
                r->no_tunnel);
        for (size_t i = 0; i < r->ndests; i++) {
            const dest *d = &r->dests[idx[i]];
            fputs(i ? ",{" : "{", out);
            json_dest_key(out, d);
            fprintf(out, ",\"requests\":%llu,\"allowed\":%llu,\"denied\":%llu,\"reasons\":{",
                    d->allowed + d->denied, d->allowed, d->denied);
            rcount *rs = sorted_reasons(r, d);
            for (size_t k = 0; rs && k < d->nreasons; k++) {
                if (k)
                    putc(',', out);
                const char *name = r->reasons.v[rs[k].reason];
                sl_audit_json_str(out, name, strlen(name));
                fprintf(out, ":%llu", rs[k].allow + rs[k].deny);
            }
            free(rs);
            fprintf(out, "},\"bytes_up\":%llu,\"bytes_down\":%llu,\"first_seen\":", d->bytes_up,
                    d->bytes_down);
            json_ts(out, d->first);
            fputs(",\"last_seen\":", out);
            json_ts(out, d->last);
            putc('}', out);
        }
        fputs("],", out);
        json_rows(r, out, ridx);
        fputs("}\n", out);
        free(idx);
        free(ridx);
        return;
    }

    char up[32], down[32], b1[TS_LEN], b2[TS_LEN];
    fprintf(out, "sluice audit: %zu file%s, %llu lines", r->nfiles, r->nfiles == 1 ? "" : "s", r->lines);
    if (r->from[0]) {
        fprintf(out, ", %s .. %s", r->from, r->to);
        print_span(out, r->from, r->to);
    }
    human_bytes(up, sizeof up, r->bytes_up);
    human_bytes(down, sizeof down, r->bytes_down);
    fprintf(out, "\n%llu request%s: %llu allowed, %llu denied; %zu client%s; %s up, %s down\n",
            r->requests, r->requests == 1 ? "" : "s", r->allowed, r->denied, r->nclients,
            r->nclients == 1 ? "" : "s", up, down);
    if (r->ndests) {
        size_t w = 9;
        for (size_t i = 0; i < r->ndests; i++) {
            size_t dw = dest_width(&r->dests[i]);
            if (dw > w)
                w = dw;
        }
        if (w > 48)
            w = 48;
        fputs("\n", out);
        fputs("HOST:PORT", out);
        pad(out, 9, w);
        fputs("  ALLOWED   DENIED         UP       DOWN  FIRST SEEN            LAST SEEN             REASONS\n", out);
        for (size_t i = 0; i < r->ndests; i++) {
            const dest *d = &r->dests[idx[i]];
            pad(out, print_dest(out, d), w);
            human_bytes(up, sizeof up, d->bytes_up);
            human_bytes(down, sizeof down, d->bytes_down);
            fprintf(out, "  %7llu  %7llu  %9s  %9s  %-20s  %-20s ", d->allowed, d->denied, up, down,
                    short_ts(d->first, b1, sizeof b1), short_ts(d->last, b2, sizeof b2));
            rcount *rs = sorted_reasons(r, d);
            for (size_t k = 0; rs && k < d->nreasons; k++) {
                const char *name = r->reasons.v[rs[k].reason];
                putc(' ', out);
                sl_audit_text(out, name, strlen(name));
                fprintf(out, " %llu", rs[k].allow + rs[k].deny);
            }
            free(rs);
            putc('\n', out);
        }
    }
    if (r->nrows)
        print_rows(r, out, ridx);
    print_notes(r, out);
    free(idx);
    free(ridx);
}

/* ---- --denied ---- */

typedef struct drow {
    uint32_t dest;
    uint16_t reason;
    unsigned long long count;
    const char *last;
} drow;

static int cmp_drow(const void *x, const void *y)
{
    const drow *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int c = cmp_dest_host(&sort_ctx->dests[a->dest], &sort_ctx->dests[b->dest]);
    if (c)
        return c;
    return strcmp(sort_ctx->reasons.v[a->reason], sort_ctx->reasons.v[b->reason]);
}

void sl_report_denied(const sl_report *r, FILE *out, bool json)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ndests; i++)
        for (size_t k = 0; k < r->dests[i].nreasons; k++)
            n += reason_at(&r->dests[i], k)->deny > 0;
    drow *rows = malloc((n + 1) * sizeof *rows);
    if (!rows) {
        fputs("sluice: audit: out of memory\n", stderr);
        return;
    }
    n = 0;
    for (size_t i = 0; i < r->ndests; i++)
        for (size_t k = 0; k < r->dests[i].nreasons; k++) {
            const rcount *rc = reason_at(&r->dests[i], k);
            if (rc->deny)
                rows[n++] = (drow){ (uint32_t)i, rc->reason, rc->deny, rc->last };
        }
    sort_ctx = r;
    qsort(rows, n, sizeof *rows, cmp_drow);
    if (json) {
        fprintf(out, "{\"mode\":\"denied\",\"denied_requests\":%llu,\"denied\":[", r->denied);
        for (size_t i = 0; i < n; i++) {
            fputs(i ? ",{" : "{", out);
            json_dest_key(out, &r->dests[rows[i].dest]);
            fputs(",\"reason\":", out);
            const char *name = r->reasons.v[rows[i].reason];
            sl_audit_json_str(out, name, strlen(name));
            fprintf(out, ",\"count\":%llu,\"last_seen\":", rows[i].count);
            json_ts(out, rows[i].last);
            putc('}', out);
        }
        fputs("]}\n", out);
        free(rows);
        return;
    }
    if (n == 0) {
        fprintf(out, "no request was denied (%llu request%s read)\n", r->requests,
                r->requests == 1 ? "" : "s");
    } else {
        size_t w = 9, rw = 6;
        for (size_t i = 0; i < n; i++) {
            size_t dw = dest_width(&r->dests[rows[i].dest]);
            size_t l = strlen(r->reasons.v[rows[i].reason]);
            w = dw > w ? dw : w;
            rw = l > rw ? l : rw;
        }
        if (w > 48)
            w = 48;
        fputs("  COUNT  HOST:PORT", out);
        pad(out, 9, w);
        fputs("  REASON", out);
        pad(out, 6, rw);
        fputs("  LAST SEEN\n", out);
        char b[TS_LEN];
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "%7llu  ", rows[i].count);
            pad(out, print_dest(out, &r->dests[rows[i].dest]), w);
            fputs("  ", out);
            pad(out, sl_audit_text(out, r->reasons.v[rows[i].reason], strlen(r->reasons.v[rows[i].reason])), rw);
            fprintf(out, "  %s\n", short_ts(rows[i].last, b, sizeof b));
        }
    }
    print_notes(r, out);
    free(rows);
}

/* ---- --suggest ---- */

typedef struct sugg {
    char *line;
    unsigned long long nal, pna, rnm;
    bool kinds[2];
    bool rule;              /* a request rule (rule_not_matched), else a host line */
    bool wider;             /* a '*' in the path could not be written: the rule allows more */
    size_t paths;           /* rules: distinct paths refused; SUG_PATHS + 1 for more */
    const char *last;
    uint32_t dest;
    int64_t row;            /* rules: the row it came from */
} sugg;

typedef struct skipped {
    uint32_t dest;
    int64_t row;            /* a request rule's row; -1 for a host line */
    unsigned long long count;
    char why[200];
} skipped;

/* Note what was not suggested (counts of one destination, or row, merge). */
static void skip(skipped *kv, size_t *nk, uint32_t di, int64_t row, unsigned long long count, const char *why)
{
    if (*nk > 0 && kv[*nk - 1].dest == di && kv[*nk - 1].row == row) {
        kv[*nk - 1].count += count;
        return;
    }
    skipped *k = &kv[(*nk)++];
    k->dest = di;
    k->row = row;
    k->count = count;
    snprintf(k->why, sizeof k->why, "%s", why);
}

static int cmp_sugg_line(const void *x, const void *y)
{
    return strcmp(((const sugg *)x)->line, ((const sugg *)y)->line);
}

static int cmp_sugg_count(const void *x, const void *y)
{
    const sugg *a = x, *b = y;
    unsigned long long na = a->nal + a->pna + a->rnm, nb = b->nal + b->pna + b->rnm;
    if (na != nb)
        return na > nb ? -1 : 1;
    return strcmp(a->line, b->line);
}

static int cmp_idx_host(const void *x, const void *y)
{
    const dest *a = &sort_ctx->dests[*(const uint32_t *)x], *b = &sort_ctx->dests[*(const uint32_t *)y];
    return cmp_dest_host(a, b);
}

static bool same_host(const dest *a, const dest *b)
{
    return a->host_len == b->host_len && memcmp(a->host, b->host, a->host_len) == 0;
}

static void print_reasons_comment(FILE *out, const sugg *s)
{
    unsigned long long n = s->nal + s->pna + s->rnm;
    fprintf(out, "# %llu request%s, ", n, n == 1 ? "" : "s");
    if (s->rule) {
        fputs("rule_not_matched", out);
        if (s->paths > SUG_PATHS)
            fprintf(out, ", more than %d paths", SUG_PATHS);
        else if (s->paths > 1)
            fprintf(out, ", %zu paths", s->paths);
        if (s->wider)
            fputs(", a '*' in the path cannot be written: this rule allows more", out);
    } else if (s->nal && s->pna) {
        fprintf(out, "not_allowlisted %llu, port_not_allowed %llu", s->nal, s->pna);
    } else {
        fputs(s->nal ? "not_allowlisted" : "port_not_allowed", out);
    }
    char b[TS_LEN];
    if (s->last && s->last[0])
        fprintf(out, ", last %s", short_ts(s->last, b, sizeof b));
}

/* Whether an IP literal is not a public address (the built-in rules; the
 * config's allow_cidr and deny_cidr are not known here). If so, why holds
 * the note to print: that only an allow_cidr can admit it; or nothing for
 * a cloud metadata address, which not even allow_cidr admits. */
static bool nonpublic_literal(const sl_addr *a, char *why, size_t cap)
{
    char scratch[128];
    sl_cidr_list none = { NULL, 0 };
    sl_verdict v = sl_classify(a, none, none, scratch, sizeof scratch);
    if (v.is_public)
        return false;
    /* What an allow_cidr of everything would admit is all it can admit. */
    sl_cidr all[2] = { { .base = { .family = AF_INET }, .prefix = 0 },
                       { .base = { .family = AF_INET6 }, .prefix = 0 } };
    if (!sl_classify(a, (sl_cidr_list){ all, 2 }, none, NULL, 0).is_public)
        why[0] = '\0';
    else
        snprintf(why, cap,
                 "not a public address (%s): refused whatever the allowlist says; "
                 "only an allow_cidr in the config can admit it", v.why);
    return true;
}

/* The host part of an allowlist line for d and this kind of request (1:
 * CONNECT, 0: plain HTTP), from sl_allowlist_suggest. False when no line
 * can be written: why says why, or is empty when nothing is to be said (a
 * cloud metadata address). nonpublic: the host was refused as
 * non_public_address somewhere in the logs; no_port: what to say when the
 * log gave no port. */
static bool host_text(const dest *d, int kind, bool nonpublic, const char *no_port, const sl_ports *connect_ports,
                      const sl_ports *http_ports, char *line, size_t cap, char *why, size_t whycap)
{
    char text[SL_HOST_MAX + 3];
    const char *err = NULL;
    sl_host h;
    bool v6 = memchr(d->host, ':', d->host_len) != NULL;
    size_t tl = 0;
    if (d->host_len + 2 < sizeof text) {
        if (v6)
            text[tl++] = '[';
        memcpy(text + tl, d->host, d->host_len);
        tl += d->host_len;
        if (v6)
            text[tl++] = ']';
    }
    bool parsed = tl > 0 && sl_host_parse(text, tl, &h, &err);
    /* An IP literal that is not public: no line lets it through (old logs
     * still hold such not_allowlisted refusals). */
    if (parsed && h.kind != SL_HOST_NAME && nonpublic_literal(&h.addr, why, whycap))
        return false;
    if (nonpublic) {
        snprintf(why, whycap, "refused as non_public_address");
        return false;
    }
    if (!parsed) {
        snprintf(why, whycap, "not a host an allowlist can name (%s)",
                 err ? err : d->host_len ? "too long" : "empty");
        return false;
    }
    if (d->port < 1 || d->port > 65535) {
        snprintf(why, whycap, "%s", d->port < 0 ? no_port : "no port");
        return false;
    }
    if (!sl_allowlist_suggest(&h, (int)d->port, kind == 1, connect_ports, http_ports, line, cap)) {
        snprintf(why, whycap, "no allowlist line can allow it");
        return false;
    }
    return true;
}

/* SPEC: METHODS are upper-case method names. */
static bool rule_method(const char *m)
{
    size_t n = strlen(m);
    return n >= 1 && n <= 32 && strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == n;
}

/* The PATH of a rule for p[0..n), then '*' when star. A '*' of the path
 * cannot be written literally: the path ends with '*' there and allows more
 * (*wider). What the gate refuses as ambiguous (sl_path_ambiguous, the
 * rules' own check) gets no rule: a request with it is never matched, so a
 * log that says otherwise is not the gate's. NULL, with the text in out
 * (cap > n + 1), or why not. */
static const char *rule_path(const char *p, size_t n, bool star, char *out, bool *wider)
{
    if (n == 0 || p[0] != '/')
        return "not a path (it does not start with '/')";
    const char *at = memchr(p, '*', n);
    if (at) {
        n = (size_t)(at - p);
        *wider = star = true;
    }
    const char *why = sl_path_ambiguous(p, n);
    if (why) {
        static _Thread_local char text[200];
        snprintf(text, sizeof text, "the gate refuses such a path (%s)", why);
        return text;
    }
    memcpy(out, p, n);
    if (star)
        out[n++] = '*';
    out[n] = '\0';
    return NULL;
}

static char *join_line(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

/* Request rules for the rows' rule_not_matched refusals: one line per
 * host:port, method and path prefix; the exact path when it is the only
 * one refused there. Never a line for a refusal since allowed. */
static bool suggest_rules(const sl_report *r, const bool *nonpublic, const sl_ports *connect_ports,
                          const sl_ports *http_ports, sugg *sv, size_t *ns, skipped *kv, size_t *nk)
{
    for (size_t i = 0; i < r->nrows; i++) {
        const irow *w = &r->rows[i];
        const sugpaths *sp = w->sug;
        if (!sp)
            continue;
        bool pending = sp->many;
        for (size_t k = 0; k < sp->npaths; k++)
            pending = pending || sp->last_refused[k] > sp->last_allowed[k];
        if (!pending)
            continue;   /* each path refused was allowed since: the rules have it */
        const dest *d = &r->dests[w->dest];
        const char *method = r->methods.v[w->method];
        /* a path the gate may have cut is not known exactly: its prefix */
        bool exact = sp->npaths == 1 && !sp->many && !sp->first_cut;
        for (int kind = 1; kind >= 0; kind--) {
            unsigned long long n = sp->refused[kind];
            if (n == 0)
                continue;
            char host[300], why[200], path[PATH_KEEP + 2];
            bool wider = false;
            const char *bad = NULL;
            if (!host_text(d, kind, nonpublic[w->dest],
                           "its port is unknown: the tunnel's CONNECT line is in none of these logs", connect_ports,
                           http_ports, host, sizeof host, why, sizeof why))
                bad = why;
            else if (!rule_method(method))
                bad = "not a method a rule can name (upper-case letters)";
            else if (exact)
                bad = rule_path(sp->first, sp->first_len, false, path, &wider);
            else
                bad = rule_path(w->prefix, w->prefix_len - w->wild, w->wild, path, &wider);
            if (bad) {
                if (bad[0])
                    skip(kv, nk, w->dest, (int64_t)i, n, bad);
                continue;
            }
            char *line = join_line(method, " ", host);
            char *full = line ? join_line(line, path, "") : NULL;
            free(line);
            if (!full)
                return false;
            if (strlen(full) > SUGGEST_LINE_MAX) {
                free(full);
                skip(kv, nk, w->dest, (int64_t)i, n, "the rule would be longer than an allowlist line may be");
                continue;
            }
            /* A line is proposed only if the gate would take it: a path the
             * rules refuse as ambiguous (a hostile log can hold one the
             * gate never let through) gets a note instead. */
            char perr[200];
            sl_allowlist *probe = sl_allowlist_new();
            bool parses = probe && sl_allowlist_add_line(probe, full, strlen(full), "suggest", 1, perr, sizeof perr);
            sl_allowlist_free(probe);
            if (!parses) {
                free(full);
                skip(kv, nk, w->dest, (int64_t)i, n, "no request rule can be written for this path");
                continue;
            }
            sugg *s = &sv[(*ns)++];
            *s = (sugg){ .line = full, .rnm = n, .rule = true, .wider = wider, .last = sp->last,
                         .dest = w->dest, .row = (int64_t)i };
            s->kinds[kind] = true;
            s->paths = sp->many ? SUG_PATHS + 1 : sp->npaths;
        }
    }
    return true;
}

/* The path a skipped row is named by: the one refused, or the prefix of
 * several. --suggest writes no query string, not even in a note (the gate
 * logs none; a log that holds one is not the gate's): *query says one was
 * cut off. */
static const char *skipped_path(const irow *w, size_t *n, bool *query)
{
    bool exact = w->sug && w->sug->npaths == 1 && !w->sug->many && !w->sug->first_cut;
    const char *path = exact ? w->sug->first : w->prefix;
    *n = exact ? w->sug->first_len : w->prefix_len;
    const char *q = memchr(path, '?', *n);
    *query = q != NULL;
    if (q)
        *n = (size_t)(q - path);
    return path;
}

static void print_skipped_what(const sl_report *r, FILE *out, const skipped *k)
{
    if (k->row < 0) {
        print_dest(out, &r->dests[k->dest]);
        return;
    }
    const irow *w = &r->rows[k->row];
    const char *m = r->methods.v[w->method];
    char shown[200];   /* a note is one line: a long path is cut (the JSON has all of it) */
    fputs(sl_display_untrusted(m, strlen(m), shown, 40, SL_DISPLAY_HEX), out);
    putc(' ', out);
    print_dest(out, &r->dests[k->dest]);
    size_t n;
    bool query;
    const char *path = skipped_path(w, &n, &query);
    if (n == 0 || path[0] != '/')
        fputs(n ? " " : " (no path)", out);   /* not glued to the port */
    fputs(sl_display_untrusted(path, n, shown, sizeof shown, SL_DISPLAY_HEX), out);
    if (query)
        fputs("?...", out);
}

/* Whether two rules' rows stand for the one same path (the same row's two
 * kinds, or the same only path refused in two rows): their lines merge
 * without adding to the count of paths. */
static bool same_path(const sl_report *r, int64_t a, int64_t b)
{
    if (a == b)
        return true;
    if (a < 0 || b < 0)
        return false;
    const sugpaths *x = r->rows[a].sug, *y = r->rows[b].sug;
    return x->npaths == 1 && !x->many && !x->first_cut && y->npaths == 1 && !y->many && !y->first_cut &&
           x->first_len == y->first_len && memcmp(x->first, y->first, x->first_len) == 0;
}

void sl_report_suggest(const sl_report *r, FILE *out, bool json, const sl_ports *connect_ports,
                       const sl_ports *http_ports)
{
    size_t cap = 0, ns = 0, nk = 0;
    for (size_t i = 0; i < r->ndests; i++)
        cap += (r->dests[i].sug_nal[0] + r->dests[i].sug_pna[0] > 0) +
               (r->dests[i].sug_nal[1] + r->dests[i].sug_pna[1] > 0);
    for (size_t i = 0; i < r->nrows; i++)
        cap += r->rows[i].sug ? 2 : 0;
    sugg *sv = calloc(cap + 1, sizeof *sv);
    skipped *kv = calloc(cap + 1, sizeof *kv);
    uint32_t *idx = malloc((r->ndests + 1) * sizeof *idx);
    bool *nonpublic = calloc(r->ndests + 1, sizeof *nonpublic);
    if (!sv || !kv || !idx || !nonpublic)
        goto oom;
    /* Group destinations by host: a host refused anywhere as
     * non_public_address is never suggested, on any port. */
    for (size_t i = 0; i < r->ndests; i++)
        idx[i] = (uint32_t)i;
    sort_ctx = r;
    qsort(idx, r->ndests, sizeof *idx, cmp_idx_host);
    for (size_t g = 0; g < r->ndests;) {
        size_t e = g;
        bool np = false;
        for (; e < r->ndests && same_host(&r->dests[idx[e]], &r->dests[idx[g]]); e++)
            np = np || r->dests[idx[e]].nonpublic;
        for (size_t i = g; i < e; i++)
            nonpublic[idx[i]] = np;
        g = e;
    }
    for (size_t i = 0; i < r->ndests; i++) {
        const dest *d = &r->dests[idx[i]];
        for (int kind = 1; kind >= 0; kind--) {
            unsigned long long n = d->sug_nal[kind] + d->sug_pna[kind];
            if (n == 0)
                continue;
            if (d->last_allowed[kind] > d->last_refused[kind])
                continue;   /* allowed since: already in the allowlist */
            char line[300], why[200];
            if (!host_text(d, kind, nonpublic[idx[i]], "no port", connect_ports, http_ports, line, sizeof line,
                           why, sizeof why)) {
                if (why[0])
                    skip(kv, &nk, idx[i], -1, n, why);
                continue;
            }
            sugg *s = &sv[ns];
            if (!(s->line = strdup(line)))
                goto oom;
            ns++;
            s->nal = d->sug_nal[kind];
            s->pna = d->sug_pna[kind];
            s->kinds[kind] = true;
            s->last = d->last;
            s->dest = idx[i];
            s->row = -1;
        }
    }
    if (!suggest_rules(r, nonpublic, connect_ports, http_ports, sv, &ns, kv, &nk))
        goto oom;
    /* One line may come from both kinds (a bare host: CONNECT :443 and HTTP
     * :80), or from two rows (a '*' cut both paths short). */
    qsort(sv, ns, sizeof *sv, cmp_sugg_line);
    size_t m = 0;
    for (size_t i = 0; i < ns; i++) {
        if (m && strcmp(sv[m - 1].line, sv[i].line) == 0) {
            sugg *t = &sv[m - 1];
            t->nal += sv[i].nal;
            t->pna += sv[i].pna;
            t->rnm += sv[i].rnm;
            t->kinds[0] |= sv[i].kinds[0];
            t->kinds[1] |= sv[i].kinds[1];
            t->wider |= sv[i].wider;
            if (!same_path(r, t->row, sv[i].row))
                t->paths = t->paths + sv[i].paths > SUG_PATHS ? SUG_PATHS + 1 : t->paths + sv[i].paths;
            if (sv[i].last && (!t->last || strcmp(sv[i].last, t->last) > 0))
                t->last = sv[i].last;
            free(sv[i].line);
            continue;
        }
        sv[m++] = sv[i];
    }
    ns = m;
    qsort(sv, ns, sizeof *sv, cmp_sugg_count);

    if (json) {
        fputs("{\"mode\":\"suggest\",\"suggestions\":[", out);
        for (size_t i = 0; i < ns; i++) {
            const sugg *s = &sv[i];
            fputs(i ? ",{\"line\":" : "{\"line\":", out);
            sl_audit_json_str(out, s->line, strlen(s->line));
            fprintf(out, ",\"rule\":%s,\"requests\":%llu,\"reasons\":{", s->rule ? "true" : "false",
                    s->nal + s->pna + s->rnm);
            const char *sep = "";
            if (s->nal) {
                fprintf(out, "\"not_allowlisted\":%llu", s->nal);
                sep = ",";
            }
            if (s->pna) {
                fprintf(out, "%s\"port_not_allowed\":%llu", sep, s->pna);
                sep = ",";
            }
            if (s->rnm)
                fprintf(out, "%s\"rule_not_matched\":%llu", sep, s->rnm);
            fprintf(out, "},\"methods\":[%s%s%s],", s->kinds[1] ? "\"CONNECT\"" : "",
                    s->kinds[1] && s->kinds[0] ? "," : "", s->kinds[0] ? "\"HTTP\"" : "");
            if (s->rule)
                fprintf(out, "\"paths\":%zu,\"more_paths\":%s,\"wider\":%s,",
                        s->paths > SUG_PATHS ? (size_t)SUG_PATHS : s->paths, s->paths > SUG_PATHS ? "true" : "false",
                        s->wider ? "true" : "false");
            fputs("\"last_seen\":", out);
            json_ts(out, s->last ? s->last : "");
            putc('}', out);
        }
        fputs("],\"skipped\":[", out);
        for (size_t i = 0; i < nk; i++) {
            fputs(i ? ",{" : "{", out);
            json_dest_key(out, &r->dests[kv[i].dest]);
            if (kv[i].row >= 0) {
                const irow *w = &r->rows[kv[i].row];
                const char *mt = r->methods.v[w->method];
                fputs(",\"method\":", out);
                sl_audit_json_str(out, mt, strlen(mt));
                size_t n;
                bool query;
                const char *path = skipped_path(w, &n, &query);
                fputs(",\"path\":", out);
                sl_audit_json_str(out, path, n);
            }
            fprintf(out, ",\"requests\":%llu,\"why\":", kv[i].count);
            sl_audit_json_str(out, kv[i].why, strlen(kv[i].why));
            putc('}', out);
        }
        fputs("]}\n", out);
        goto out;
    }
    fprintf(out, "# sluice audit --suggest: %zu allowlist line%s for requests refused as "
                 "not_allowlisted, port_not_allowed or rule_not_matched.\n"
                 "# Review each one: these are what was tried, not necessarily what is needed.\n",
            ns, ns == 1 ? "" : "s");
    size_t w = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t l = strlen(sv[i].line);
        w = l > w ? l : w;
    }
    if (w > 40)
        w = 40;
    for (size_t i = 0; i < ns; i++) {
        fputs(sv[i].line, out);
        pad(out, strlen(sv[i].line), w);
        fputs("  ", out);
        print_reasons_comment(out, &sv[i]);
        putc('\n', out);
    }
    for (size_t i = 0; i < nk; i++) {
        fputs("# not suggested: ", out);
        print_skipped_what(r, out, &kv[i]);
        fprintf(out, " (%llu request%s): ", kv[i].count, kv[i].count == 1 ? "" : "s");
        sl_audit_text(out, kv[i].why, strlen(kv[i].why));
        putc('\n', out);
    }
    goto out;
oom:
    fputs("sluice: audit: out of memory\n", stderr);
out:
    for (size_t i = 0; sv && i < ns; i++)
        free(sv[i].line);
    free(sv);
    free(kv);
    free(idx);
    free(nonpublic);
}
