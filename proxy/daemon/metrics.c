/* Counters and latency histograms, rendered in Prometheus text format. */
#include "metrics.h"

#include <event2/buffer.h>
#include <stdatomic.h>
#include <string.h>

static const char *const reasons[] = {
    "allowlisted", "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address",
    "dns_error", "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch",
    "too_many_clients", "log_unavailable",
};
#define NREASONS (sizeof reasons / sizeof *reasons)

/* Upper bounds in milliseconds; the last bucket is +Inf. */
static const double bounds_ms[] = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000 };
#define NBOUNDS (sizeof bounds_ms / sizeof *bounds_ms)

typedef struct histogram {
    atomic_ullong bucket[NBOUNDS + 1];   /* non-cumulative; summed when rendered */
    atomic_ullong count;
    atomic_ullong sum_us;
} histogram;

static atomic_ullong decisions[2][NREASONS];
static atomic_ullong bytes_up, bytes_down;
static atomic_llong tunnels;
static histogram dns_hist, connect_hist;
static atomic_ullong reloads, reload_failures, log_errors;

#define ADD(var, n) atomic_fetch_add_explicit(&(var), (n), memory_order_relaxed)
#define GET(var) atomic_load_explicit(&(var), memory_order_relaxed)

void sl_metrics_decision(bool allow, const char *reason)
{
    for (size_t i = 0; i < NREASONS; i++) {
        if (strcmp(reasons[i], reason) == 0) {
            ADD(decisions[allow][i], 1);
            return;
        }
    }
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

void sl_metrics_render(struct evbuffer *out, int clients, bool log_failing)
{
    evbuffer_add_printf(out, "# HELP sluice_requests_total Decisions made, by decision and reason.\n"
                             "# TYPE sluice_requests_total counter\n");
    /* allow always has reason allowlisted; deny has every other reason */
    for (int a = 1; a >= 0; a--)
        for (size_t i = 0; i < NREASONS; i++)
            if ((a == 1) == (i == 0))
                evbuffer_add_printf(out, "sluice_requests_total{decision=\"%s\",reason=\"%s\"} %llu\n",
                                    a ? "allow" : "deny", reasons[i], GET(decisions[a][i]));
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
}
