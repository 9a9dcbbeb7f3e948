/* Connecting to vetted addresses, Happy Eyeballs style (RFC 8305 §4-5):
 * the addresses are interleaved by family (starting with the family of the
 * first one), a new attempt starts every `stagger_ms` while none has
 * connected, and at once when one fails; the first to connect wins and the
 * others are closed. Only the given addresses are ever connected to.
 *
 * Each attempt has a deadline of its own, deadline_ms divided among the
 * addresses (at least 500 ms): past it, the attempt is closed and the
 * next address tried at once, so a connection never holds many sockets
 * that go nowhere. The last attempt left keeps trying: the whole ends at
 * the caller's deadline (connect_ms), with sl_connect_cancel. */
#ifndef SLUICE_CONNECT_H
#define SLUICE_CONNECT_H

#include <stddef.h>

#include "addr.h"

struct event_base;

#define SL_CONNECT_STAGGER_MS 250   /* RFC 8305's recommended Connection Attempt Delay */

typedef struct sl_connector sl_connector;

/* fd >= 0: a connected non-blocking socket, now the callee's, to `addr`.
 * fd < 0: every address failed; `addr` is the last one tried, `err` its
 * errno. Called from the event loop only, once; the connector is already
 * freed when it runs. */
typedef void (*sl_connect_cb)(void *arg, int fd, const sl_addr *addr, int err);

/* Starts connecting. NULL when out of memory. */
sl_connector *sl_connect_start(struct event_base *base, const sl_addr *addrs, size_t n, int port,
                               int stagger_ms, int deadline_ms, sl_connect_cb cb, void *arg);

/* Closes every attempt; the callback never runs. */
void sl_connect_cancel(sl_connector *k);

/* The address of the latest attempt started (for a connect_timeout). */
const sl_addr *sl_connect_last(const sl_connector *k);

#endif
