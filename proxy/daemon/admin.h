/* The admin endpoint ([admin] listen, off by default): GET /healthz,
 * /metrics (Prometheus text) and /pins (pinned DNS answers, JSON). It runs
 * on the main thread's loop, on its own port, never the proxy's. */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;

/* Starts serving on "IP:PORT". The bound address is printed on stderr as
 * "sluice: admin on ADDR:PORT". */
bool sl_admin_start(struct event_base *base, const char *listen, char *err, size_t errcap);
void sl_admin_stop(void);

/* /healthz answers 503 while the gate is draining. */
void sl_admin_set_draining(void);

#endif
