/* The decision, in SPEC order after parsing: allowlist (before any DNS),
 * resolution, classification of every answer, then connecting to the vetted
 * addresses in order. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "netclass.h"

static void try_connect(conn *c);

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

/* Every answer must be public: one private address refuses the request. */
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
    memcpy(c->x.addrs, addrs, n * sizeof *addrs);
    c->x.naddrs = n;
    c->x.next_addr = 0;

    /* A kept-alive origin connection serves the request if it goes to the
     * same host and port and to an address vetted just now. */
    if (c->up && c->up_reusable && !c->x.is_connect && c->up_port == c->x.port &&
        c->up_name && strcmp(c->up_name, c->x.host.name) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (sl_addr_equal(&addrs[i], &c->up_addr)) {
                c->up_reusable = false;
                c->x.addr = c->up_addr;
                conn_set_state(c, CS_FORWARD);
                conn_log_decision(c, true, "allowlisted", NULL);
                forward_start(c);
                return;
            }
        }
    }
    conn_close_upstream(c);
    conn_set_state(c, CS_CONNECTING);
    clock_gettime(CLOCK_MONOTONIC, &c->x.t_connect);
    conn_timer(c, c->pol->connect_ms);
    try_connect(c);
}

static void on_dns(void *arg, const sl_dns_answer *ans)
{
    conn *c = arg;
    c->x.dns = NULL;
    c->x.dns_done = true;
    c->x.dns_ms = conn_ms_since(&c->x.t_start);
    sl_metrics_dns_ms(c->x.dns_ms);
    switch (ans->status) {
    case SL_DNS_TIMEOUT:
        conn_refuse(c, 504, "dns_timeout", "Resolving %s took longer than %d ms.", c->x.host.name,
                    c->pol->dns_timeout_ms);
        return;
    case SL_DNS_ERROR:
        conn_refuse(c, 502, "dns_error", "Resolving %s failed: %s.", c->x.host.name,
                    ans->error ? ans->error : "error");
        return;
    case SL_DNS_OK:
        vet_and_connect(c, ans->addrs, ans->n);
        return;
    }
}

void conn_decide(conn *c)
{
    const sl_policy *p = c->pol;
    const sl_entry *rule = NULL;
    char line[300];

    /* A keep-alive client's next request is a new decision: with the log
     * failing it is refused like a new client. */
    if (sl_log_failing(line, sizeof line)) {
        conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", line);
        return;
    }

    /* The client stays readable: what it sends meanwhile (bytes ahead of a
     * tunnel, a request body, the next request) waits in its buffer, which
     * the read watermark bounds (conn_accept), and is acted on in turn.
     * Turning reading off and on again would cost two epoll changes. */
    sl_match_result m = sl_allowlist_match(p->allow, &c->x.host, c->x.port, c->x.is_connect,
                                           &p->connect_ports, &p->http_ports, &rule);
    if (m == SL_MATCH_NO_ENTRY) {
        sl_allowlist_suggest(&c->x.host, c->x.port, c->x.is_connect, &p->connect_ports,
                             &p->http_ports, line, sizeof line);
        conn_refuse(c, 403, "not_allowlisted",
                    "%s is not on the allowlist. To allow it, add this line to an allowlist file:\n\n    %s\n",
                    c->x.host.name, line);
        return;
    }
    if (m == SL_MATCH_PORT_NOT_ALLOWED) {
        sl_allowlist_suggest(&c->x.host, c->x.port, c->x.is_connect, &p->connect_ports,
                             &p->http_ports, line, sizeof line);
        conn_refuse(c, 403, "port_not_allowed",
                    "%s is on the allowlist, but not port %d for %s. To allow it, add this line:\n\n    %s\n",
                    c->x.host.name, c->x.port, c->x.is_connect ? "CONNECT" : "plain HTTP", line);
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
    if (!c->x.dns)
        on_dns(c, &now);
}

/* ---- connecting ---- */

static void try_connect(conn *c)
{
    while (c->x.next_addr < c->x.naddrs) {
        const sl_addr *a = &c->x.addrs[c->x.next_addr++];
        struct sockaddr_storage ss;
        socklen_t sl = sl_addr_to_sockaddr(a, c->x.port, &ss);
        c->x.addr = *a;
        if (c->up)
            bufferevent_free(c->up);
        c->up = bufferevent_socket_new(c->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (!c->up)
            break;
        /* Callbacks go on only after the call: on an immediate failure
         * libevent would otherwise call back from inside it. */
        if (bufferevent_socket_connect(c->up, (struct sockaddr *)&ss, (int)sl) == 0) {
            conn_attach_upstream(c);
            return;   /* on_event reports the outcome */
        }
    }
    conn_refuse(c, 502, "connect_failed", "Could not connect to %s port %d.", c->x.host.name, c->x.port);
}

void conn_connect_failed(conn *c, short what)
{
    (void)what;
    int err = EVUTIL_SOCKET_ERROR();
    if (c->x.next_addr < c->x.naddrs) {
        try_connect(c);
        return;
    }
    char a[SL_ADDR_STRLEN];
    conn_refuse(c, 502, "connect_failed", "Could not connect to %s (%s) port %d: %s.", c->x.host.name,
                sl_addr_format(&c->x.addr, a, sizeof a), c->x.port,
                err ? evutil_socket_error_to_string(err) : "connection closed");
}

void conn_connected(conn *c)
{
    int one = 1;
    setsockopt(bufferevent_getfd(c->up), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sl_metrics_connect_ms(conn_ms_since(&c->x.t_connect));
    conn_timer(c, 0);
    if (c->x.is_connect) {
        tunnel_start(c);
        return;
    }
    /* Only the name is kept (not a whole sl_host): every connection,
     * idle tunnels included, would carry it. NULL (out of memory) just
     * means no reuse. */
    free(c->up_name);
    c->up_name = strdup(c->x.host.name);
    c->up_port = c->x.port;
    c->up_addr = c->x.addr;
    conn_set_state(c, CS_FORWARD);
    conn_log_decision(c, true, "allowlisted", NULL);
    forward_start(c);
}

void conn_close_upstream(conn *c)
{
    if (c->up) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    c->up_reusable = false;
    c->up_eof = c->up_paused = false;
}
