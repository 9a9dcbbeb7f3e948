/* CONNECT tunnels: the 200 reply, the SNI check for port 443, then the
 * hand-over to the relay (relay.c). */
#include <event2/buffer.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "conn.h"
#include "metrics.h"
#include "reply.h"
#include "relay.h"
#include "tls_sni.h"

/* Raw bytes sluice holds while waiting for a ClientHello: the handshake
 * limit plus room for record headers. */
#define SNI_RAW_MAX (2 * SL_SNI_MAX_BYTES)

/* After the allow line: the relay takes the sockets. */
static void begin_relay(conn *c)
{
    conn_set_state(c, CS_TUNNEL);
    sl_metrics_tunnel(+1);
    conn_touch(c);
    conn_timer(c, c->pol->idle_ms);
    relay_start(c);   /* closes c itself on failure */
}

static bool sni_matches(const conn *c, const char *sni, size_t len)
{
    if (len > 0 && sni[len - 1] == '.')
        len--;
    return c->x.host.kind == SL_HOST_NAME && len == c->x.host.len &&
           strncasecmp(sni, c->x.host.name, len) == 0;
}

static void check_sni(conn *c)
{
    struct evbuffer *in = c->cli->in;
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return;
    if (len > SNI_RAW_MAX)
        len = SNI_RAW_MAX;
    const uint8_t *p = evbuffer_pullup(in, (ssize_t)len);
    char name[256];
    size_t nlen = 0;
    sl_sni_result r = p ? sl_tls_sni(p, len, name, sizeof name, &nlen) : SL_SNI_MALFORMED;
    if (r == SL_SNI_NEED_MORE && len < SNI_RAW_MAX && !c->cli->eof)
        return;
    if (r == SL_SNI_NEED_MORE)
        r = SL_SNI_MALFORMED;

    const char *why = NULL;
    char detail[600];
    switch (r) {
    case SL_SNI_FOUND:
        c->x.sni = name;   /* for the decision line below; cleared after it */
        if (!sni_matches(c, name, nlen)) {
            snprintf(detail, sizeof detail, "ClientHello names %s, not %s", name, c->x.host.name);
            why = detail;
        }
        break;
    case SL_SNI_ABSENT:
        if (c->x.host.kind == SL_HOST_NAME)
            why = "ClientHello has no server name";
        break;
    default:
        snprintf(detail, sizeof detail, "first bytes are not a TLS ClientHello (%s)", sl_sni_result_str(r));
        why = detail;
        break;
    }
    if (why) {
        /* Nothing has reached the origin: the client's bytes are dropped;
         * the client gets the 200 already queued, then the close. */
        conn_log_decision(c, false, "sni_mismatch", why);
        c->x.sni = NULL;
        conn_finish(c, "refused");
        return;
    }
    if (c->x.inspected) {
        inspect_begin(c);   /* TLS with the origin, then with the client; keeps the SNI for its line */
        return;
    }
    /* The 200 is out already: a log that fails now can only cut the
     * tunnel (conn_allow refuses), and nothing reaches the origin. */
    bool allowed = conn_allow(c);   /* its line names the SNI */
    c->x.sni = NULL;
    if (allowed)
        begin_relay(c);
}

void tunnel_start(conn *c)
{
    /* An inspected tunnel reads the ClientHello in any case: its name
     * must be the CONNECT host, and TLS is terminated here. */
    if ((c->pol->sni_check && c->x.port == 443) || c->x.inspected) {
        conn_set_state(c, CS_SNI);
        sl_reply_connect_ok(c->cli->out);
        sl_stream_flush(c->cli);
        conn_timer(c, c->pol->header_ms);
        check_sni(c);
        /* The client may have ended (or failed) while DNS and the connect
         * ran, with nothing sent: no event will come for that now. */
        if (conn_live(c) && c->state == CS_SNI && evbuffer_get_length(c->cli->in) == 0 &&
            (c->cli->eof || c->cli->error))
            tunnel_on_client(c, c->cli->error ? SL_STREAM_ERROR : SL_STREAM_EOF);
        return;
    }
    if (!conn_allow(c))
        return;
    sl_reply_connect_ok(c->cli->out);
    begin_relay(c);
}

/* Until the ClientHello is checked the tunnel runs on streams; after
 * that, relay.c owns the sockets and this is not called. */
void tunnel_on_client(conn *c, sl_stream_event ev)
{
    switch (ev) {
    case SL_STREAM_READ:
        check_sni(c);
        return;
    case SL_STREAM_EOF:
        if (evbuffer_get_length(c->cli->in) > 0) {
            check_sni(c);   /* a ClientHello and the end in one go: decided on what came */
            return;
        }
        conn_log_decision(c, false, "sni_mismatch", "client closed before sending a ClientHello");
        conn_close(c, "client_eof");
        return;
    case SL_STREAM_ERROR:
        conn_log_decision(c, false, "sni_mismatch", "client connection failed before a ClientHello");
        conn_close(c, "client_error");
        return;
    case SL_STREAM_DRAINED:
        return;   /* the 200 went out */
    case SL_STREAM_READY:
        return;   /* TLS streams only: never the client's socket here */
    }
}
