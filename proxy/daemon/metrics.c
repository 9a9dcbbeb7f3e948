/* Counters and latency histograms, rendered in Prometheus text format. */
#include "metrics.h"

#include <event2/buffer.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* A counter by decision and reason. Each decision renders its known
 * reasons, zeros included, so a series exists before its first event; the
 * last reason of each list is "other", for any reason not listed. */
#define MAX_REASONS 20

typedef struct by_reason {
    const char *name, *help;
    const char *const *reasons[2];   /* [0] deny, [1] allow */
    size_t n[2];
    atomic_ullong count[2][MAX_REASONS];
} by_reason;

#define COUNT(a) (sizeof a / sizeof *a)

static const char *const decision_allow[] = { "allowlisted", "inspected", "rule", "other" };
static const char *const decision_deny[] = {
    "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address", "dns_error",
    "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch", "too_many_clients",
    "log_unavailable", "shutdown", "rule_not_matched", "upstream_tls_failed", "integrity_unverifiable",
    "auth_required", "auth_failed", "session_revoked", "other",
};
/* Requests inside an inspected tunnel: refused by the rules or the path
 * check, or failed on the way to the origin (a reconnect). */
static const char *const request_allow[] = { "rule", "other" };
static const char *const request_deny[] = {
    "rule_not_matched", "bad_request", "upstream_tls_failed", "connect_failed", "connect_timeout",
    "log_unavailable", "integrity_mismatch", "integrity_unverifiable", "other",
};
_Static_assert(COUNT(decision_deny) <= MAX_REASONS && COUNT(request_deny) <= MAX_REASONS, "MAX_REASONS");

static by_reason decisions = {
    .name = "sluice_requests_total",
    .help = "Decisions made (one per decision line), by decision and reason.",
    .reasons = { decision_deny, decision_allow },
    .n = { COUNT(decision_deny), COUNT(decision_allow) },
};
static by_reason inspected = {
    .name = "sluice_inspected_requests_total",
    .help = "Requests inside inspected tunnels (one per request line), by decision and reason.",
    .reasons = { request_deny, request_allow },
    .n = { COUNT(request_deny), COUNT(request_allow) },
};
#undef COUNT

/* Upper bounds in milliseconds; the last bucket is +Inf. */
static const double bounds_ms[] = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000 };
#define NBOUNDS (sizeof bounds_ms / sizeof *bounds_ms)

typedef struct histogram {
    atomic_ullong bucket[NBOUNDS + 1];   /* non-cumulative; summed when rendered */
    atomic_ullong count;
    atomic_ullong sum_us;
} histogram;

static atomic_ullong bytes_up, bytes_down;
static atomic_llong tunnels;
static histogram dns_hist, connect_hist;
static atomic_ullong reloads, reload_failures, log_errors;
static atomic_ullong tls_failures[2];   /* [0] upstream, [1] client */
static atomic_ullong certs_cached;

#define ADD(var, n) atomic_fetch_add_explicit(&(var), (n), memory_order_relaxed)
#define GET(var) atomic_load_explicit(&(var), memory_order_relaxed)

static void count_reason(by_reason *c, bool allow, const char *reason)
{
    size_t n = c->n[allow], i = 0;
    while (i + 1 < n && !(reason && strcmp(c->reasons[allow][i], reason) == 0))
        i++;
    ADD(c->count[allow][i], 1);   /* the last one is "other" */
}

/* ---- by session ---- */
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static char *slot_name[SL_METRICS_SESSION_LABELS];   /* set once, under slot_lock; never freed */
static atomic_int nslots;
static atomic_ullong session_count[SL_METRICS_SESSION_LABELS + 1][2];

int sl_metrics_session_slot(const char *name)
{
    pthread_mutex_lock(&slot_lock);
    int n = atomic_load(&nslots), i = 0;
    while (i < n && strcmp(slot_name[i], name) != 0)
        i++;
    if (i == n) {
        char *copy = n < SL_METRICS_SESSION_LABELS ? strdup(name) : NULL;
        if (copy) {
            slot_name[n] = copy;
            atomic_store(&nslots, n + 1);   /* after the name: render reads names below nslots */
        } else {
            i = SL_METRICS_SESSION_LABELS;
        }
    }
    pthread_mutex_unlock(&slot_lock);
    return i;
}

void sl_metrics_session_decision(int slot, bool allow)
{
    if (slot < 0 || slot > SL_METRICS_SESSION_LABELS)
        slot = SL_METRICS_SESSION_LABELS;
    atomic_fetch_add_explicit(&session_count[slot][allow], 1, memory_order_relaxed);
}

static void render_sessions(struct evbuffer *out)
{
    int n = atomic_load(&nslots);
    if (n == 0)
        return;
    evbuffer_add_printf(out, "# HELP sluice_session_decisions_total Decisions and request lines of sessions, by "
                             "session (at most %d labels; the rest under session=\"_other\") and decision.\n"
                             "# TYPE sluice_session_decisions_total counter\n", SL_METRICS_SESSION_LABELS);
    for (int i = 0; i <= n && i <= SL_METRICS_SESSION_LABELS; i++) {
        /* session names are [A-Za-z0-9._-]: nothing to escape in a label */
        const char *name = i < n ? slot_name[i] : "_other";
        if (i == n && n < SL_METRICS_SESSION_LABELS &&
            !(atomic_load_explicit(&session_count[SL_METRICS_SESSION_LABELS][0], memory_order_relaxed) |
              atomic_load_explicit(&session_count[SL_METRICS_SESSION_LABELS][1], memory_order_relaxed)))
            break;   /* no _other series while every session has its own */
        int k = i < n ? i : SL_METRICS_SESSION_LABELS;
        for (int a = 1; a >= 0; a--)
            evbuffer_add_printf(out, "sluice_session_decisions_total{session=\"%s\",decision=\"%s\"} %llu\n", name,
                                a ? "allow" : "deny",
                                atomic_load_explicit(&session_count[k][a], memory_order_relaxed));
    }
}

void sl_metrics_decision(bool allow, const char *reason)
{
    count_reason(&decisions, allow, reason);
}

void sl_metrics_request(bool allow, const char *reason)
{
    count_reason(&inspected, allow, reason);
}

void sl_metrics_tls_failure(bool client_side)
{
    ADD(tls_failures[client_side], 1);
}

void sl_metrics_certs_cached(size_t n)
{
    atomic_store_explicit(&certs_cached, (unsigned long long)n, memory_order_relaxed);
}

void sl_metrics_bytes(unsigned long long up, unsigned long long down)
{
    ADD(bytes_up, up);
    ADD(bytes_down, down);
}

void sl_metrics_tunnel(int delta)
{
    ADD(tunnels, delta);
}

static void observe(histogram *h, double ms)
{
    size_t i = 0;
    while (i < NBOUNDS && ms > bounds_ms[i])
        i++;
    ADD(h->bucket[i], 1);
    ADD(h->count, 1);
    ADD(h->sum_us, (unsigned long long)(ms < 0 ? 0 : ms * 1000.0));
}

void sl_metrics_dns_ms(double ms)
{
    observe(&dns_hist, ms);
}

void sl_metrics_connect_ms(double ms)
{
    observe(&connect_hist, ms);
}

void sl_metrics_reload(bool ok)
{
    ADD(reloads, 1);
    if (!ok)
        ADD(reload_failures, 1);
}

void sl_metrics_log_error(void)
{
    ADD(log_errors, 1);
}

static void render_histogram(struct evbuffer *out, const char *name, const char *help, histogram *h)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (size_t i = 0; i < NBOUNDS; i++) {
        cum += GET(h->bucket[i]);
        evbuffer_add_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, bounds_ms[i] / 1000.0, cum);
    }
    cum += GET(h->bucket[NBOUNDS]);
    evbuffer_add_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, cum);
    evbuffer_add_printf(out, "%s_sum %.6f\n%s_count %llu\n", name, (double)GET(h->sum_us) / 1e6, name,
                        cum);
}

static void render_by_reason(struct evbuffer *out, by_reason *c)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s counter\n", c->name, c->help, c->name);
    for (int a = 1; a >= 0; a--)
        for (size_t i = 0; i < c->n[a]; i++)
            evbuffer_add_printf(out, "%s{decision=\"%s\",reason=\"%s\"} %llu\n", c->name,
                                a ? "allow" : "deny", c->reasons[a][i], GET(c->count[a][i]));
}

void sl_metrics_render(struct evbuffer *out, int clients, bool log_failing)
{
    render_by_reason(out, &decisions);
    evbuffer_add_printf(out,
                        "# HELP sluice_active_tunnels CONNECT tunnels open now.\n"
                        "# TYPE sluice_active_tunnels gauge\n"
                        "sluice_active_tunnels %lld\n"
                        "# HELP sluice_clients Client connections open now.\n"
                        "# TYPE sluice_clients gauge\n"
                        "sluice_clients %d\n"
                        "# HELP sluice_bytes_up_total Bytes relayed from clients to origins.\n"
                        "# TYPE sluice_bytes_up_total counter\n"
                        "sluice_bytes_up_total %llu\n"
                        "# HELP sluice_bytes_down_total Bytes relayed from origins to clients.\n"
                        "# TYPE sluice_bytes_down_total counter\n"
                        "sluice_bytes_down_total %llu\n",
                        GET(tunnels), clients, GET(bytes_up), GET(bytes_down));
    render_histogram(out, "sluice_dns_seconds", "Time to resolve a name (cache hits included).", &dns_hist);
    render_histogram(out, "sluice_connect_seconds", "Time to connect to an origin.", &connect_hist);
    evbuffer_add_printf(out,
                        "# HELP sluice_reloads_total Policy reloads attempted (SIGHUP).\n"
                        "# TYPE sluice_reloads_total counter\n"
                        "sluice_reloads_total %llu\n"
                        "# HELP sluice_reload_failures_total Reloads that failed and kept the old policy.\n"
                        "# TYPE sluice_reload_failures_total counter\n"
                        "sluice_reload_failures_total %llu\n"
                        "# HELP sluice_log_write_errors_total Failed writes of the decision log.\n"
                        "# TYPE sluice_log_write_errors_total counter\n"
                        "sluice_log_write_errors_total %llu\n"
                        "# HELP sluice_log_failing 1 while the decision log cannot be written.\n"
                        "# TYPE sluice_log_failing gauge\n"
                        "sluice_log_failing %d\n",
                        GET(reloads), GET(reload_failures), GET(log_errors), log_failing ? 1 : 0);
    render_by_reason(out, &inspected);
    evbuffer_add_printf(out,
                        "# HELP sluice_tls_handshake_failures_total TLS handshakes of inspected tunnels "
                        "that failed, by side (the client's, or the origin's).\n"
                        "# TYPE sluice_tls_handshake_failures_total counter\n"
                        "sluice_tls_handshake_failures_total{side=\"client\"} %llu\n"
                        "sluice_tls_handshake_failures_total{side=\"upstream\"} %llu\n"
                        "# HELP sluice_tls_certs_cached Certificates for inspected hosts in the cache now.\n"
                        "# TYPE sluice_tls_certs_cached gauge\n"
                        "sluice_tls_certs_cached %llu\n",
                        GET(tls_failures[1]), GET(tls_failures[0]), GET(certs_cached));
    render_sessions(out);
}
