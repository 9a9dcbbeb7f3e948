/* Name resolution through c-ares on a worker's libevent loop, with a cache of
 * answers pinned for their TTL, shared by all workers. The only file that
 * includes ares.h.
 *
 * Lookups ask A and AAAA, never consult /etc/hosts or search domains
 * (ARES_FLAG_NOSEARCH: a search domain could turn an allowed name into an
 * internal one), and concurrent lookups of one name share one query. */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

#include <stdbool.h>
#include <stddef.h>

#include "addr.h"
#include "config.h"

struct event_base;

/* How many of an answer's addresses a connection keeps to connect to. The
 * answer itself carries every distinct address it had (up to
 * SL_DNS_MAX_ANSWER), and all of them are checked. */
#define SL_DNS_MAX_ADDRS 16
/* More addresses than a DNS message over TCP can carry (64 KiB / 16 bytes
 * per A record): an answer above it is refused rather than cut. */
#define SL_DNS_MAX_ANSWER 4096

typedef enum sl_dns_status { SL_DNS_OK, SL_DNS_ERROR, SL_DNS_TIMEOUT } sl_dns_status;

typedef struct sl_dns_answer {
    sl_dns_status status;
    const char *error;      /* static text, for SL_DNS_ERROR */
    sl_addr *addrs;         /* every distinct address, in the answer's order */
    size_t n;
    int ttl_s;              /* smallest TTL of the answer, before clamping */
    bool cached;
} sl_dns_answer;

/* Frees the addresses of an answer sl_dns_resolve filled in at once
 * (`now`). Answers given to a callback belong to dns.c. */
void sl_dns_answer_done(sl_dns_answer *a);

typedef void (*sl_dns_cb)(void *arg, const sl_dns_answer *ans);

typedef struct sl_dns sl_dns;
typedef struct sl_dns_wait sl_dns_wait;

sl_dns *sl_dns_new(struct event_base *base, char *err, size_t errcap);
void sl_dns_free(sl_dns *d);

/* Process-wide c-ares set-up; call once before any thread starts. */
bool sl_dns_global_init(char *err, size_t errcap);
void sl_dns_global_cleanup(void);
const char *sl_dns_version(void);

/* Resolve `name` under policy p (servers, timeout, TTL bounds). A cached
 * answer is returned at once: *now is filled (release it with
 * sl_dns_answer_done) and the result is NULL. Else the callback runs later,
 * from the event loop, exactly once, unless sl_dns_cancel is called first;
 * the answer it gets is valid during the call. */
sl_dns_wait *sl_dns_resolve(sl_dns *d, const sl_policy *p, const char *name, sl_dns_cb cb,
                            void *arg, sl_dns_answer *now);
void sl_dns_cancel(sl_dns_wait *w);

/* The pinned answers now in the cache, as JSON, with their expiry under
 * policy p (for the admin endpoint's /pins). */
struct evbuffer;
void sl_dns_render_pins(struct evbuffer *out, const sl_policy *p);

#endif
