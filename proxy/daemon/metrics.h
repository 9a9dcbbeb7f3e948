/* Counters for the admin endpoint's /metrics, shared by all workers
 * (relaxed atomics: a counter is read, never used to synchronise). */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;

void sl_metrics_decision(bool allow, const char *reason);
void sl_metrics_bytes(unsigned long long up, unsigned long long down);
void sl_metrics_tunnel(int delta);            /* +1 when a tunnel opens, -1 when it ends */
void sl_metrics_dns_ms(double ms);
void sl_metrics_connect_ms(double ms);
void sl_metrics_reload(bool ok);
void sl_metrics_log_error(void);
/* Inspection: one per request inside a tunnel (its request line's decision
 * and reason); a TLS handshake that failed, by side (the client's, or the
 * origin's: upstream); the leaf cache's size now (a gauge: the last value
 * set wins, so callers pass the one shared cache's size). A reason not
 * known here counts as "other": no decision goes uncounted. */
void sl_metrics_request(bool allow, const char *reason);
void sl_metrics_tls_failure(bool client_side);
void sl_metrics_certs_cached(size_t n);

/* Sessions: a counter of decisions by session. At most
 * SL_METRICS_SESSION_LABELS names get a label of their own, in the order
 * they are first loaded, kept for the life of the process (a reload keeps
 * a session's series); the rest are counted under session="_other", so a
 * gate with 100,000 sessions still renders a bounded page. */
#define SL_METRICS_SESSION_LABELS 256
/* The slot of a session name (any thread; at policy load, not per request):
 * 0..SL_METRICS_SESSION_LABELS-1, or SL_METRICS_SESSION_LABELS for _other. */
int sl_metrics_session_slot(const char *name);
void sl_metrics_session_decision(int slot, bool allow);

/* Prometheus text exposition format 0.0.4. `clients` is the gauge of open
 * client connections, `log_failing` whether the log is failing now. */
void sl_metrics_render(struct evbuffer *out, int clients, bool log_failing);

#endif
