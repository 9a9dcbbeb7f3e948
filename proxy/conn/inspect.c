/* Inspected tunnels (SPEC part 2, Inspection): a CONNECT to a host that
 * request rules cover is not relayed. After the 200 and the SNI check
 * (tunnel.c), sluice completes TLS with the origin first, verified against
 * upstream_ca and the CONNECT host, then with the client, presenting a
 * leaf for that host signed by the inspection CA. Each request inside is
 * then read, matched and forwarded like plain HTTP, through the same
 * exchange engine (exchange.c), over the two TLS streams.
 *
 *   SNI -> TLS (origin's handshake, then the client's) -> HEAD -> FORWARD -> HEAD ...
 *                                                          \-> CONNECTING -> TLS -> FORWARD
 *                                                              (a new origin connection)
 *
 * The tunnel's own record (conn->in) outlives its requests: its id, host,
 * vetted addresses, and the CONNECT's allow line, whose close line ends
 * the tunnel. */
#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "tls.h"

/* Which handshake is under way in CS_TLS. */
static bool first_upstream(const conn *c) { return !c->in->client_ready && c->in->phase == IN_UPSTREAM; }

static void start_client_tls(conn *c)
{
    inspect *in = c->in;
    if (c->cli->error || c->cli->eof) {   /* gone while the origin's handshake ran */
        c->x.end_detail = "the client closed the connection before its TLS handshake";
        conn_close(c, c->cli->error ? "client_error" : "client_eof");
        return;
    }
    in->phase = IN_CLIENT;
    conn_timer(c, c->pol->header_ms);   /* a client that stops mid-handshake */
    c->cli = sl_stream_tls_server(c->cli, c->pol->tls_server, in->host.name, CONN_READ_AHEAD, conn_on_stream, c);
    sl_metrics_certs_cached(sl_tls_server_cached(c->pol->tls_server));
    if (!c->cli) {
        sl_metrics_tls_failure(true);
        c->x.end_detail = "no certificate could be made for the host";
        conn_close(c, "client_tls_failed");
    }
}

void inspect_begin(conn *c)
{
    inspect *in = calloc(1, sizeof *in);
    if (!in) {
        conn_close(c, "out_of_memory");
        c->x.sni = NULL;   /* check_sni's, on its stack */
        return;
    }
    memcpy(in->id, c->x.id, sizeof in->id);
    in->host = c->x.host;
    in->port = c->x.port;
    in->naddrs = c->x.naddrs;
    memcpy(in->addrs, c->x.addrs, c->x.naddrs * sizeof *c->x.addrs);
    in->rule = c->x.rule;
    in->phase = IN_UPSTREAM;
    /* check_sni's name lives on its stack: the decision line comes later. */
    if (c->x.sni) {
        snprintf(in->sni, sizeof in->sni, "%s", c->x.sni);
        c->x.sni = in->sni;
    }
    c->in = in;
    conn_set_state(c, CS_TLS);
    conn_timer(c, c->pol->connect_ms);
    c->up = sl_stream_tls_client(c->up, c->pol->tls_client, in->host.name, CONN_READ_AHEAD, conn_on_stream, c);
    if (!c->up)
        conn_close(c, "out_of_memory");
}

void inspect_connected(conn *c)
{
    free(c->up_name);
    c->up_name = strdup(c->x.host.name);   /* NULL (out of memory) only means no reuse */
    c->up_port = c->x.port;
    c->up_addr = c->x.addr;
    c->in->phase = IN_UPSTREAM;
    conn_set_state(c, CS_TLS);
    conn_timer(c, c->pol->connect_ms);
    c->up = sl_stream_tls_client(c->up, c->pol->tls_client, c->in->host.name, CONN_READ_AHEAD, conn_on_stream, c);
    if (!c->up)
        conn_refuse(c, 502, "connect_failed", "Could not connect to %s port %d: out of memory.", c->x.host.name,
                    c->x.port);
}

/* The origin's certificate (or its handshake) failed: it gets no request. */
static void upstream_failed(conn *c, const char *why)
{
    inspect *in = c->in;
    sl_metrics_tls_failure(false);
    snprintf(in->upstream_failure, sizeof in->upstream_failure, "%s", why);
    exchange_drop_origin(c);
    if (first_upstream(c)) {
        char detail[400];
        snprintf(detail, sizeof detail, "TLS with the origin failed: %s", in->upstream_failure);
        conn_log_decision(c, false, "upstream_tls_failed", detail);
        /* The 200 is out and the client is in its handshake: it gets its
         * 502 inside TLS, as the answer to its first request. */
        start_client_tls(c);
        return;
    }
    c->x.cred = NULL;   /* nothing was sent: its line names no credential */
    conn_refuse(c, 502, "upstream_tls_failed",
                "TLS with %s failed: %s. sluice sends no request to an origin it cannot verify.",
                in->host.name, in->upstream_failure);
}

static void upstream_ready(conn *c)
{
    if (first_upstream(c)) {
        if (c->cli->error)   /* conn_allow_as closes after the allow line */
            c->x.end_detail = "the client's connection failed before its TLS handshake";
        if (!conn_allow_as(c, "inspected"))
            return;
        exchange_keep_origin(c);   /* idle until the first request: it must stay silent */
        start_client_tls(c);
        return;
    }
    c->in->phase = IN_REQUESTS;
    exchange_start(c);   /* a new origin connection for the waiting request */
}

static void client_ready(conn *c)
{
    inspect *in = c->in;
    in->client_ready = true;
    in->phase = IN_REQUESTS;
    if (c->x.allowed) {
        /* The CONNECT's allow line: its close line ends the tunnel. */
        in->allowed = true;
        in->t_allowed = c->x.t_allowed;
        c->x.allowed = false;
    }
    conn_new_exchange(c);
    conn_set_state(c, CS_HEAD);
    conn_timer(c, c->pol->idle_ms);
    if (evbuffer_get_length(c->cli->in) > 0)
        conn_kick(c);   /* a request came with the handshake's last flight */
}

static void client_failed(conn *c, const char *end, const char *why)
{
    sl_metrics_tls_failure(true);
    c->x.end_detail = why;
    conn_close(c, end);
}

void inspect_on_stream(conn *c, bool from_client, sl_stream_event ev)
{
    inspect *in = c->in;
    if (!from_client) {
        if (in->phase != IN_UPSTREAM)
            return;   /* the kept origin's events are handled in conn_on_stream */
        switch (ev) {
        case SL_STREAM_READY:
            upstream_ready(c);
            return;
        case SL_STREAM_ERROR:
            upstream_failed(c, c->up->failure[0] ? c->up->failure : strerror(c->up->error));
            return;
        case SL_STREAM_EOF:
            upstream_failed(c, "the origin closed the connection during the TLS handshake");
            return;
        case SL_STREAM_READ:
        case SL_STREAM_DRAINED:
            return;
        }
        return;
    }
    switch (ev) {
    case SL_STREAM_READY:
        client_ready(c);
        return;
    case SL_STREAM_ERROR:
    case SL_STREAM_EOF:
        if (in->phase == IN_CLIENT) {
            if (ev == SL_STREAM_ERROR)
                client_failed(c, "client_tls_failed", c->cli->failure[0] ? c->cli->failure : strerror(c->cli->error));
            else
                client_failed(c, "client_eof", "the client closed the connection during the TLS handshake");
        }
        /* While the origin's handshake runs, the client's end is kept in
         * its stream: the CONNECT (or the waiting request) was made, so it
         * is decided on what the origin does, as a request in CONNECTING
         * is; conn_allow_as and start_client_tls then act on it. */
        return;
    case SL_STREAM_READ:
    case SL_STREAM_DRAINED:
        return;   /* bytes wait (bounded by in_max) for the handshake or the request */
    }
}

void inspect_on_timeout(conn *c)
{
    inspect *in = c->in;
    if (in->phase == IN_CLIENT) {
        client_failed(c, "client_tls_failed", "no complete TLS handshake within header_ms");
        return;
    }
    char why[120];
    snprintf(why, sizeof why, "no complete TLS handshake from the origin within %d ms (connect_ms)",
             c->pol->connect_ms);
    upstream_failed(c, why);
}

void inspect_decide(conn *c)
{
    inspect *in = c->in;
    char why[256];
    if (sl_log_failing_in(conn_log_stream(c), why, sizeof why)) {
        conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", why);
        return;
    }
    if (in->upstream_failure[0]) {
        conn_refuse(c, 502, "upstream_tls_failed",
                    "TLS with %s failed: %s. sluice sends no request to an origin it cannot verify.",
                    in->host.name, in->upstream_failure);
        return;
    }
    if (!request_rules(c))
        return;
    if (exchange_can_reuse(c)) {
        c->x.addr = c->up_addr;
        c->x.reused = true;
        exchange_start(c);
        return;
    }
    conn_connect(c);   /* to the addresses vetted for the CONNECT, never others */
}

void inspect_fill_exchange(conn *c)
{
    inspect *in = c->in;
    memcpy(c->x.id, in->id, sizeof c->x.id);
    c->x.host = in->host;
    c->x.port = in->port;
    c->x.naddrs = in->naddrs;
    memcpy(c->x.addrs, in->addrs, in->naddrs * sizeof *in->addrs);
    clock_gettime(CLOCK_MONOTONIC, &c->x.t_start);
}

void inspect_log_close(conn *c, const char *end)
{
    inspect *in = c->in;
    if (!in->allowed)
        return;
    in->allowed = false;
    /* The CONNECT's close line, with the bytes of all its requests. */
    conn_log_close_line(c, in->bytes_up, in->bytes_down, &in->t_allowed, end);
}

void inspect_free(conn *c)
{
    free(c->in);
    c->in = NULL;
}
