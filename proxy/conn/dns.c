/* c-ares driven by libevent, and the pinned-answer cache.
 *
 * One channel per worker. The socket-state callback keeps one event per
 * c-ares socket; one timer follows ares_timeout() after every submit and
 * every process call. When a reload changes the servers, a new channel takes
 * new lookups and the old one is destroyed once its queries have finished
 * (ares_set_servers_* refuses to run with queries pending). c-ares 1.18
 * cannot cancel one query, so a lookup is a `query` shared by its waiters;
 * a waiter that gives up (timeout, closed connection) just leaves it. */
#include "dns.h"

#include <ares.h>
#include <arpa/inet.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "host.h"

#define CACHE_BUCKETS 4096
#define CACHE_MAX 16384

typedef struct channel channel;

typedef struct sock_ev {
    ares_socket_t fd;
    struct event *ev;
    struct sock_ev *next;
} sock_ev;

struct channel {
    sl_dns *dns;
    ares_channel ch;
    struct event *timer;
    sock_ev *socks;
    unsigned long generation;   /* policy generation whose servers it uses */
    int pending;                /* queries not yet called back */
    bool retired, destroying;
    channel *next_retired;
};

typedef struct query query;

struct sl_dns_wait {
    query *q;
    sl_dns_cb cb;
    void *arg;
    struct event *timer;
    sl_dns_wait *prev, *next;
};

struct query {
    sl_dns *dns;
    channel *chan;
    char name[SL_HOST_MAX + 1];
    sl_dns_wait *waiters;
    query *hnext;               /* in the pending table */
    bool submitting, answered;
    sl_dns_answer ans;
};

typedef struct cache_entry {
    char name[SL_HOST_MAX + 1];
    size_t n;
    int ttl_s;
    long inserted;              /* monotonic seconds */
    long hard_expiry;           /* inserted + max_ttl_s at insertion */
    struct cache_entry *next;
    sl_addr addrs[];            /* the whole answer */
} cache_entry;

struct sl_dns {
    struct event_base *base;
    channel *cur;
    channel *retired;
    query *pending[CACHE_BUCKETS];
};

/* The pinned answers, shared by all workers so that a name is resolved once
 * per TTL for the whole gate, and /pins can show them. Lookups are short
 * and rare next to relaying, so one lock is enough. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache[CACHE_BUCKETS];
static size_t ncache;

static void cache_clear_locked(void);

static long now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec;
}

static unsigned hash_name(const char *s)
{
    unsigned h = 2166136261u;   /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % CACHE_BUCKETS;
}

bool sl_dns_global_init(char *err, size_t errcap)
{
    int rc = ares_library_init(ARES_LIB_INIT_ALL);
    if (rc != ARES_SUCCESS) {
        snprintf(err, errcap, "c-ares: %s", ares_strerror(rc));
        return false;
    }
    return true;
}

void sl_dns_global_cleanup(void)
{
    pthread_mutex_lock(&cache_lock);
    cache_clear_locked();
    pthread_mutex_unlock(&cache_lock);
    ares_library_cleanup();
}

const char *sl_dns_version(void)
{
    return ares_version(NULL);
}

/* ---- the channel on the event loop ---- */

static void reschedule(channel *c)
{
    struct timeval tv, *tvp = ares_timeout(c->ch, NULL, &tv);
    if (tvp)
        evtimer_add(c->timer, tvp);
    else
        evtimer_del(c->timer);
}

static void channel_maybe_destroy(channel *c);

static void on_sock(evutil_socket_t fd, short what, void *arg)
{
    channel *c = arg;
    ares_process_fd(c->ch, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
                    (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
    reschedule(c);
    channel_maybe_destroy(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    channel *c = arg;
    ares_process_fd(c->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    reschedule(c);
    channel_maybe_destroy(c);
}

static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
    channel *c = data;
    sock_ev **pp = &c->socks, *s;
    while ((s = *pp) && s->fd != fd)
        pp = &s->next;
    if (!readable && !writable) {
        if (s) {
            event_free(s->ev);
            *pp = s->next;
            free(s);
        }
        return;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return;   /* c-ares then times the query out */
        s->fd = fd;
        s->next = c->socks;
        c->socks = s;
    } else {
        event_free(s->ev);
    }
    short what = EV_PERSIST | (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
    s->ev = event_new(c->dns->base, fd, what, on_sock, c);
    if (s->ev)
        event_add(s->ev, NULL);
}

static channel *channel_new(sl_dns *d, const sl_policy *p, char *err, size_t errcap)
{
    channel *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    c->dns = d;
    c->generation = p ? p->generation : 0;
    struct ares_options o;
    memset(&o, 0, sizeof o);
    int mask = ARES_OPT_FLAGS | ARES_OPT_SOCK_STATE_CB | ARES_OPT_LOOKUPS | ARES_OPT_DOMAINS |
               ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
    o.flags = ARES_FLAG_NOSEARCH;
    o.sock_state_cb = on_sock_state;
    o.sock_state_cb_data = c;
    o.lookups = (char *)"b";   /* DNS only: never /etc/hosts */
    o.domains = NULL;
    o.ndomains = 0;
    int t = p ? p->dns_timeout_ms : 2000;
    o.timeout = t / 2 > 50 ? t / 2 : 50;   /* two tries fit in the lookup's own deadline */
    o.tries = 2;
    int rc = ares_init_options(&c->ch, &o, mask);
    if (rc != ARES_SUCCESS) {
        snprintf(err, errcap, "c-ares: %s", ares_strerror(rc));
        free(c);
        return NULL;
    }
    if (p && p->ndns) {
        struct ares_addr_port_node nodes[SL_MAX_DNS];
        memset(nodes, 0, sizeof nodes);
        for (size_t i = 0; i < p->ndns; i++) {
            nodes[i].family = p->dns[i].addr.family;
            memcpy(&nodes[i].addr, p->dns[i].addr.b, p->dns[i].addr.family == AF_INET ? 4 : 16);
            nodes[i].udp_port = p->dns[i].port;
            nodes[i].tcp_port = p->dns[i].port;
            nodes[i].next = i + 1 < p->ndns ? &nodes[i + 1] : NULL;
        }
        rc = ares_set_servers_ports(c->ch, nodes);
        if (rc != ARES_SUCCESS) {
            snprintf(err, errcap, "c-ares servers: %s", ares_strerror(rc));
            ares_destroy(c->ch);
            free(c);
            return NULL;
        }
    }
    c->timer = evtimer_new(d->base, on_timer, c);
    return c;
}

static void channel_destroy(channel *c)
{
    ares_destroy(c->ch);   /* calls back pending queries with ARES_EDESTRUCTION */
    while (c->socks) {
        sock_ev *s = c->socks;
        c->socks = s->next;
        event_free(s->ev);
        free(s);
    }
    event_free(c->timer);
    free(c);
}

static void channel_destroy_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    channel_destroy(arg);
}

static void channel_maybe_destroy(channel *c)
{
    if (!c->retired || c->pending > 0 || c->destroying)
        return;
    c->destroying = true;
    sl_dns *d = c->dns;
    for (channel **pp = &d->retired; *pp; pp = &(*pp)->next_retired) {
        if (*pp == c) {
            *pp = c->next_retired;
            break;
        }
    }
    /* Not from inside this channel's own callbacks: defer to the loop. */
    event_base_once(d->base, -1, EV_TIMEOUT, channel_destroy_cb, c, &(struct timeval){ 0, 0 });
}

sl_dns *sl_dns_new(struct event_base *base, char *err, size_t errcap)
{
    (void)err;
    (void)errcap;
    sl_dns *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->base = base;
    return d;
}

static void cache_clear_locked(void)
{
    for (size_t i = 0; i < CACHE_BUCKETS; i++) {
        while (cache[i]) {
            cache_entry *e = cache[i];
            cache[i] = e->next;
            free(e);
        }
    }
    ncache = 0;
}

void sl_dns_free(sl_dns *d)
{
    if (!d)
        return;
    /* Waiters belong to connections, which are closed before this. Queries
     * still in flight are answered with ARES_EDESTRUCTION and freed. */
    if (d->cur) {
        channel *c = d->cur;
        d->cur = NULL;
        channel_destroy(c);
    }
    while (d->retired) {
        channel *c = d->retired;
        d->retired = c->next_retired;
        channel_destroy(c);
    }
    free(d);
}

/* ---- the cache ---- */

static int clamp_ttl(int ttl, const sl_policy *p)
{
    return ttl < p->min_ttl_s ? p->min_ttl_s : ttl > p->max_ttl_s ? p->max_ttl_s : ttl;
}

static bool cache_get(const sl_policy *p, const char *name, sl_dns_answer *out)
{
    long now = now_s();
    bool hit = false;
    pthread_mutex_lock(&cache_lock);
    cache_entry **pp = &cache[hash_name(name)], *e;
    while ((e = *pp)) {
        if (now >= e->hard_expiry) {
            *pp = e->next;
            free(e);
            ncache--;
            continue;
        }
        if (strcmp(e->name, name) == 0) {
            if (now < e->inserted + clamp_ttl(e->ttl_s, p)) {
                memset(out, 0, sizeof *out);
                out->addrs = malloc(e->n * sizeof *e->addrs);
                if (out->addrs) {
                    out->status = SL_DNS_OK;
                    memcpy(out->addrs, e->addrs, e->n * sizeof *e->addrs);
                    out->n = e->n;
                    out->ttl_s = e->ttl_s;
                    out->cached = true;
                    hit = true;
                }
            }
            break;
        }
        pp = &e->next;
    }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

static void cache_put(const char *name, const sl_dns_answer *a)
{
    long now = now_s();
    unsigned h = hash_name(name);
    cache_entry *e = calloc(1, sizeof *e + a->n * sizeof *a->addrs);
    if (!e)
        return;
    snprintf(e->name, sizeof e->name, "%s", name);
    memcpy(e->addrs, a->addrs, a->n * sizeof *a->addrs);
    e->n = a->n;
    e->ttl_s = a->ttl_s;
    e->inserted = now;
    /* Bounds are applied on read with the reader's policy; the entry goes
     * for good after the largest bound any policy can set. */
    e->hard_expiry = now + 86400;

    pthread_mutex_lock(&cache_lock);
    for (cache_entry **pp = &cache[h], *old; (old = *pp); pp = &old->next) {
        if (strcmp(old->name, name) == 0) {
            *pp = old->next;
            free(old);
            ncache--;
            break;
        }
    }
    if (ncache >= CACHE_MAX)
        cache_clear_locked();   /* crude, and rare: a gate serves a short allowlist */
    e->next = cache[h];
    cache[h] = e;
    ncache++;
    pthread_mutex_unlock(&cache_lock);
}

void sl_dns_render_pins(struct evbuffer *out, const sl_policy *p)
{
    long now = now_s();
    json_t *list = json_array();
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < CACHE_BUCKETS; i++) {
        for (cache_entry *e = cache[i]; e; e = e->next) {
            long left = e->inserted + clamp_ttl(e->ttl_s, p) - now;
            if (left <= 0)
                continue;
            json_t *addrs = json_array();
            char a[SL_ADDR_STRLEN];
            for (size_t k = 0; k < e->n; k++)
                json_array_append_new(addrs, json_string(sl_addr_format(&e->addrs[k], a, sizeof a)));
            json_array_append_new(list, json_pack("{s:s, s:o, s:i, s:I}", "name", e->name, "addrs", addrs,
                                                  "ttl_s", e->ttl_s, "expires_in_s", (json_int_t)left));
        }
    }
    pthread_mutex_unlock(&cache_lock);
    json_t *root = json_pack("{s:o}", "pins", list);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (text) {
        evbuffer_add(out, text, strlen(text));
        evbuffer_add(out, "\n", 1);
        free(text);
    }
    json_decref(root);
}

/* ---- queries and waiters ---- */

static void pending_remove(sl_dns *d, query *q)
{
    for (query **pp = &d->pending[hash_name(q->name)]; *pp; pp = &(*pp)->hnext) {
        if (*pp == q) {
            *pp = q->hnext;
            return;
        }
    }
}

static void waiter_unlink(sl_dns_wait *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else if (w->q)
        w->q->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

static void waiter_free(sl_dns_wait *w)
{
    if (w->timer)
        event_free(w->timer);
    free(w);
}

/* Hand the answer to every waiter. A callback may cancel other waiters of
 * this query, so take them one at a time from the live list. */
static void deliver(query *q)
{
    sl_dns_wait *w;
    while ((w = q->waiters)) {
        waiter_unlink(w);
        w->q = NULL;
        sl_dns_cb cb = w->cb;
        void *arg = w->arg;
        waiter_free(w);
        cb(arg, &q->ans);
    }
    free(q->ans.addrs);
    free(q);
}

static void deliver_deferred(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    deliver(arg);
}

static unsigned hash_addr(const sl_addr *x)
{
    unsigned h = 2166136261u ^ (unsigned)x->family;   /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ x->b[i]) * 16777619u;
    return h;
}

/* Every distinct address of the answer, in its order, into a->addrs (all
 * of them: each one is checked before anything is connected to). NULL, or
 * why the answer is refused. */
static const char *collect(const struct ares_addrinfo *ai, sl_dns_answer *a)
{
    size_t total = 0;
    for (const struct ares_addrinfo_node *n = ai->nodes; n; n = n->ai_next)
        total += n->ai_family == AF_INET || n->ai_family == AF_INET6;
    if (total == 0)
        return "no A or AAAA records";
    if (total > SL_DNS_MAX_ANSWER)
        return "the answer has more addresses than sluice checks (4096)";
    a->addrs = malloc(total * sizeof *a->addrs);
    /* Duplicates are found through a small open-addressed table of indices,
     * so a huge answer costs its length, not its square. */
    enum { SLOTS = 2 * SL_DNS_MAX_ANSWER };
    unsigned short *slot = calloc(SLOTS, sizeof *slot);   /* index + 1; 0 is free */
    if (!a->addrs || !slot) {
        free(slot);
        free(a->addrs);
        a->addrs = NULL;
        return "out of memory";
    }
    int ttl = -1;
    for (const struct ares_addrinfo_node *n = ai->nodes; n; n = n->ai_next) {
        if (n->ai_family != AF_INET && n->ai_family != AF_INET6)
            continue;
        sl_addr x;
        sl_addr_from_sockaddr(n->ai_addr, &x, NULL);
        unsigned h = hash_addr(&x) % SLOTS;
        bool dup = false;
        while (slot[h] && !(dup = sl_addr_equal(&a->addrs[slot[h] - 1], &x)))
            h = (h + 1) % SLOTS;
        if (dup)
            continue;
        a->addrs[a->n] = x;
        slot[h] = (unsigned short)(++a->n);
        if (ttl < 0 || n->ai_ttl < ttl)
            ttl = n->ai_ttl;
    }
    free(slot);
    for (const struct ares_addrinfo_cname *cn = ai->cnames; cn; cn = cn->next)
        if (cn->ttl < ttl)
            ttl = cn->ttl;
    a->ttl_s = ttl < 0 ? 0 : ttl;
    return NULL;
}

void sl_dns_answer_done(sl_dns_answer *a)
{
    free(a->addrs);
    a->addrs = NULL;
    a->n = 0;
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
    (void)timeouts;
    query *q = arg;
    sl_dns_answer *a = &q->ans;
    memset(a, 0, sizeof *a);
    q->chan->pending--;
    pending_remove(q->dns, q);

    if (status == ARES_SUCCESS && ai) {
        a->error = collect(ai, a);
        a->status = a->error ? SL_DNS_ERROR : SL_DNS_OK;
    } else if (status == ARES_ETIMEOUT) {
        a->status = SL_DNS_TIMEOUT;
    } else {
        a->status = SL_DNS_ERROR;
        a->error = status == ARES_ENOTFOUND ? "no such name (NXDOMAIN)"
                 : status == ARES_ENODATA   ? "no A or AAAA records"
                 : status == ARES_ECONNREFUSED ? "DNS server refused"
                 : status == ARES_EDESTRUCTION ? "resolver shut down"
                 : "DNS lookup failed";
    }
    if (ai)
        ares_freeaddrinfo(ai);
    q->answered = true;

    if (status == ARES_EDESTRUCTION) {
        /* sl_dns_free: the connections, and so the waiters, are gone. */
        deliver(q);
        return;
    }
    /* Cache with the policy of no one in particular: bounds are applied on
     * read with the reader's policy; the hard expiry uses the largest bound
     * any policy allows. */
    if (a->status == SL_DNS_OK)
        cache_put(q->name, a);
    if (q->submitting) {
        /* Called back inside ares_getaddrinfo: hand over from the loop. */
        event_base_once(q->dns->base, -1, EV_TIMEOUT, deliver_deferred, q, &(struct timeval){ 0, 0 });
        return;
    }
    deliver(q);
}

static void on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sl_dns_wait *w = arg;
    waiter_unlink(w);
    w->q = NULL;
    sl_dns_cb cb = w->cb;
    void *cbarg = w->arg;
    waiter_free(w);
    sl_dns_answer a;
    memset(&a, 0, sizeof a);
    a.status = SL_DNS_TIMEOUT;
    cb(cbarg, &a);
}

static channel *current_channel(sl_dns *d, const sl_policy *p)
{
    char err[200];
    if (d->cur && d->cur->generation == p->generation)
        return d->cur;
    channel *c = channel_new(d, p, err, sizeof err);
    if (!c)
        return d->cur;   /* keep the old servers rather than fail lookups */
    if (d->cur) {
        d->cur->retired = true;
        d->cur->next_retired = d->retired;
        d->retired = d->cur;
        channel_maybe_destroy(d->cur);
    }
    d->cur = c;
    return c;
}

sl_dns_wait *sl_dns_resolve(sl_dns *d, const sl_policy *p, const char *name, sl_dns_cb cb,
                            void *arg, sl_dns_answer *now)
{
    if (cache_get(p, name, now))
        return NULL;

    sl_dns_wait *w = calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->cb = cb;
    w->arg = arg;
    w->timer = evtimer_new(d->base, on_wait_timeout, w);
    if (!w->timer)
        goto fail;
    struct timeval tv = { p->dns_timeout_ms / 1000, (p->dns_timeout_ms % 1000) * 1000 };
    evtimer_add(w->timer, &tv);

    /* Join a query already under way for this name. */
    for (query *q = d->pending[hash_name(name)]; q; q = q->hnext) {
        if (strcmp(q->name, name) == 0 && q->chan->generation == p->generation) {
            w->q = q;
            w->next = q->waiters;
            if (q->waiters)
                q->waiters->prev = w;
            q->waiters = w;
            return w;
        }
    }

    channel *c = current_channel(d, p);
    query *q = c ? calloc(1, sizeof *q) : NULL;
    if (!q)
        goto fail;
    q->dns = d;
    q->chan = c;
    snprintf(q->name, sizeof q->name, "%s", name);
    q->waiters = w;
    w->q = q;
    unsigned h = hash_name(name);
    q->hnext = d->pending[h];
    d->pending[h] = q;
    c->pending++;

    struct ares_addrinfo_hints hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = ARES_AI_NOSORT;   /* keep the server's order; no probing connects */
    q->submitting = true;
    ares_getaddrinfo(c->ch, name, NULL, &hints, on_answer, q);
    q->submitting = false;
    reschedule(c);
    return w;

fail:
    if (w)
        waiter_free(w);
    memset(now, 0, sizeof *now);
    now->status = SL_DNS_ERROR;
    now->error = "out of memory";
    return NULL;
}

void sl_dns_cancel(sl_dns_wait *w)
{
    if (!w)
        return;
    waiter_unlink(w);
    waiter_free(w);
}
