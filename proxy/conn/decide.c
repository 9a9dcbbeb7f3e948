/* The decision, in SPEC order after parsing: allowlist (before any DNS),
 * resolution, classification of every answer, then connecting to the vetted
 * addresses (connect.c). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "connect.h"
#include "log.h"
#include "metrics.h"
#include "netclass.h"
#include "sessions.h"

static sl_verdict classify(conn *c, const sl_addr *a, char *scratch, size_t cap)
{
    const sl_policy *p = c->pol;
    sl_cidr_list allow = { p->allow_cidr, p->nallow_cidr }, deny = { p->deny_cidr, p->ndeny_cidr };
    sl_verdict v = sl_classify(a, allow, deny, scratch, cap);
    if (v.is_public && sl_is_own_listener(a, c->x.port)) {
        v.is_public = false;
        v.why = "the gate's own listening address";
    }
    return v;
}

/* An IP literal that is not public is refused before the allowlist is
 * consulted: no allowlist line can make it reachable, so the refusal must
 * not suggest one. A private address can be admitted with allow_cidr; a
 * metadata address (or one in deny_cidr) cannot be admitted at all. */
static bool refuse_literal(conn *c)
{
    char why[200], a[SL_ADDR_STRLEN];
    sl_verdict v = classify(c, &c->x.host.addr, why, sizeof why);
    if (v.is_public)
        return false;
    c->x.addr = c->x.host.addr;
    sl_addr_format(&c->x.host.addr, a, sizeof a);
    /* Would allow_cidr admit it? Classify as if everything were allowed. */
    static const sl_cidr everything[2] = { { { AF_INET, { 0 } }, 0 }, { { AF_INET6, { 0 } }, 0 } };
    const sl_policy *p = c->pol;
    sl_cidr_list all = { everything, 2 }, deny = { p->deny_cidr, p->ndeny_cidr };
    char scratch[200];
    bool admissible = sl_classify(&c->x.host.addr, all, deny, scratch, sizeof scratch).is_public &&
                      !sl_is_own_listener(&c->x.host.addr, c->x.port);
    if (admissible)
        conn_refuse(c, 403, "non_public_address",
                    "%s is not a public address (%s). An allowlist line cannot allow it; a private "
                    "mirror is admitted with [policy] allow_cidr = %s/%d together with an allowlist entry.",
                    a, v.why, a, c->x.host.addr.family == AF_INET ? 32 : 128);
    else
        conn_refuse(c, 403, "non_public_address", "%s is not a public address (%s), and cannot be allowed.",
                    a, v.why);
    return true;
}

static void on_connect(void *arg, int fd, const sl_addr *addr, int err);

/* The allowlist line that would allow this request. sl_allowlist_suggest
 * proposes none for a non-public literal; one that reaches this point is
 * admitted by allow_cidr (refuse_literal let it through), and then an entry
 * with its exact port is what is missing. */
static void suggest(conn *c, char *line, size_t cap)
{
    const sl_policy *p = c->pol;
    if (sl_allowlist_suggest(&c->x.host, c->x.port, c->x.is_connect, &p->connect_ports, &p->http_ports,
                             line, cap))
        return;
    char auth[SL_HOST_MAX + 3];
    snprintf(line, cap, "%s:%d", sl_host_authority(&c->x.host, auth, sizeof auth), c->x.port);
}

/* Every address of the answer must be public, however many it has: one
 * private address refuses the request. The first SL_DNS_MAX_ADDRS are
 * kept to connect to. */
static void vet_and_connect(conn *c, const sl_addr *addrs, size_t n)
{
    char why[200], a[SL_ADDR_STRLEN];
    for (size_t i = 0; i < n; i++) {
        sl_verdict v = classify(c, &addrs[i], why, sizeof why);
        if (!v.is_public) {
            c->x.addr = addrs[i];
            sl_addr_format(&addrs[i], a, sizeof a);
            if (c->x.host.kind == SL_HOST_NAME)
                conn_refuse(c, 403, "non_public_address",
                            "%s resolves to %s, which is not a public address (%s).", c->x.host.name, a, v.why);
            else
                conn_refuse(c, 403, "non_public_address", "%s is not a public address (%s).", a, v.why);
            return;
        }
    }
    c->x.naddrs = n < SL_DNS_MAX_ADDRS ? n : SL_DNS_MAX_ADDRS;
    memcpy(c->x.addrs, addrs, c->x.naddrs * sizeof *addrs);

    /* A kept-alive origin connection serves the request if it goes to the
     * same host and port and to an address vetted just now, and is silent. */
    if (!c->x.is_connect && exchange_can_reuse(c)) {
        c->x.addr = c->up_addr;
        c->x.reused = true;
        exchange_start(c);
        return;
    }
    conn_connect(c);
}

void conn_connect(conn *c)
{
    exchange_drop_origin(c);
    conn_set_state(c, CS_CONNECTING);
    clock_gettime(CLOCK_MONOTONIC, &c->x.t_connect);
    conn_timer(c, c->pol->connect_ms);
    c->x.addr = c->x.addrs[0];
    c->x.connector = sl_connect_start(c->w->base, c->x.addrs, c->x.naddrs, c->x.port, SL_CONNECT_STAGGER_MS,
                                      c->pol->connect_ms, on_connect, c);
    if (!c->x.connector)
        conn_refuse(c, 502, "connect_failed", "Could not connect to %s port %d: out of memory.", c->x.host.name,
                    c->x.port);
}

static void on_dns(void *arg, const sl_dns_answer *ans)
{
    conn *c = arg;
    conn_enter(c);
    c->x.dns = NULL;
    c->x.dns_done = true;
    c->x.dns_ms = conn_ms_since(&c->x.t_start);
    sl_metrics_dns_ms(c->x.dns_ms);
    switch (ans->status) {
    case SL_DNS_TIMEOUT:
        conn_refuse(c, 504, "dns_timeout", "Resolving %s took longer than %d ms.", c->x.host.name,
                    c->pol->dns_timeout_ms);
        break;
    case SL_DNS_ERROR:
        conn_refuse(c, 502, "dns_error", "Resolving %s failed: %s.", c->x.host.name,
                    ans->error ? ans->error : "error");
        break;
    case SL_DNS_OK:
        vet_and_connect(c, ans->addrs, ans->n);
        break;
    }
    conn_leave(c);
}

void conn_decide(conn *c)
{
    const sl_policy *p = c->pol;
    const sl_entry *rule = NULL;
    char line[300];

    if (c->in) {
        inspect_decide(c);   /* a request inside an inspected tunnel */
        return;
    }
    if (!session_admit(c))
        return;
    /* A keep-alive client's next request is a new decision: with the log
     * failing it is refused like a new client. A session with a stream of
     * its own is refused while that one fails, and only then. */
    if (sl_log_failing_in(conn_log_stream(c), line, sizeof line)) {
        conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", line);
        return;
    }
    if (c->x.host.kind != SL_HOST_NAME && refuse_literal(c))
        return;

    sl_match_result m = conn_match(c, &rule);
    if (m == SL_MATCH_INSPECTED) {
        /* Request rules cover the host: a CONNECT is inspected; a plain
         * request is matched by method and path now. */
        c->x.rule = rule;
        if (c->x.is_connect)
            c->x.inspected = true;
        else if (!request_rules(c))
            return;
        m = SL_MATCH_ALLOWED;
        rule = c->x.rule;
    }
    if (m == SL_MATCH_NO_ENTRY) {
        suggest(c, line, sizeof line);
        if (c->session)   /* the session's own list is where a sandbox's needs usually go */
            conn_refuse(c, 403, "not_allowlisted",
                        "%s is not on the allowlist of session %s (nor the global one). To allow it, add "
                        "this line to one of the session's allowlist files (or a global one):\n\n    %s\n",
                        c->x.host.name, c->session->name, line);
        else
            conn_refuse(c, 403, "not_allowlisted",
                        "%s is not on the allowlist. To allow it, add this line to an allowlist file:\n\n    %s\n",
                        c->x.host.name, line);
        return;
    }
    if (m == SL_MATCH_PORT_NOT_ALLOWED) {
        suggest(c, line, sizeof line);
        conn_refuse(c, 403, "port_not_allowed",
                    "%s is on the allowlist, but not port %d for %s. To allow it, add this line:\n\n    %s\n",
                    c->x.host.name, c->x.port, c->x.is_connect ? "CONNECT" : "plain HTTP", line);
        return;
    }
    if (m != SL_MATCH_ALLOWED) {   /* nothing else may come here: fail closed */
        conn_refuse(c, 403, "not_allowlisted", "%s is not allowed.", c->x.host.name);
        return;
    }
    c->x.rule = rule;

    if (c->x.host.kind != SL_HOST_NAME) {
        vet_and_connect(c, &c->x.host.addr, 1);
        return;
    }
    sl_dns_answer now;
    conn_set_state(c, CS_RESOLVING);
    c->x.dns = sl_dns_resolve(c->w->dns, p, c->x.host.name, on_dns, c, &now);
    if (!c->x.dns) {
        /* Answered at once (the cache): the same step, on this stack. */
        c->x.dns_done = true;
        c->x.dns_ms = conn_ms_since(&c->x.t_start);
        sl_metrics_dns_ms(c->x.dns_ms);
        if (now.status == SL_DNS_OK)
            vet_and_connect(c, now.addrs, now.n);
        else
            conn_refuse(c, 502, "dns_error", "Resolving %s failed: %s.", c->x.host.name,
                        now.error ? now.error : "error");
        sl_dns_answer_done(&now);
    }
}

/* ---- connecting ---- */

static void connected(conn *c, int fd, const sl_addr *addr)
{
    c->x.connect_ms = conn_ms_since(&c->x.t_connect);
    c->x.connect_done = true;
    sl_metrics_connect_ms(c->x.connect_ms);
    conn_timer(c, 0);
    c->x.addr = *addr;
    c->up = sl_stream_socket(c->w->base, fd, CONN_READ_AHEAD, conn_on_stream, c);
    if (!c->up) {
        conn_refuse(c, 502, "connect_failed", "Could not connect to %s port %d: out of memory.", c->x.host.name,
                    c->x.port);
        return;
    }
    if (c->x.is_connect) {
        tunnel_start(c);
        return;
    }
    if (c->in) {
        inspect_connected(c);   /* a new origin connection inside a tunnel: TLS first */
        return;
    }
    /* Only the name is kept (not a whole sl_host): every connection,
     * idle tunnels included, would carry it. NULL (out of memory) just
     * means no reuse. */
    free(c->up_name);
    c->up_name = strdup(c->x.host.name);
    c->up_port = c->x.port;
    c->up_addr = c->x.addr;
    exchange_start(c);
}

static void on_connect(void *arg, int fd, const sl_addr *addr, int err)
{
    conn *c = arg;
    conn_enter(c);
    c->x.connector = NULL;   /* it freed itself before calling */
    if (fd >= 0) {
        connected(c, fd, addr);
    } else {
        char a[SL_ADDR_STRLEN];
        c->x.addr = *addr;
        conn_refuse(c, 502, "connect_failed", "Could not connect to %s (%s) port %d: %s.", c->x.host.name,
                    sl_addr_format(addr, a, sizeof a), c->x.port, strerror(err));
    }
    conn_leave(c);
}

void conn_cancel_connect(conn *c)
{
    if (c->x.connector) {
        sl_connect_cancel(c->x.connector);
        c->x.connector = NULL;
    }
}
