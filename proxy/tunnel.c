/* CONNECT tunnels: the SNI check, then relaying bytes both ways with
 * backpressure and half-close. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "conn.h"
#include "metrics.h"
#include "reply.h"
#include "splice.h"
#include "tls_sni.h"

/* Raw bytes sluice holds while waiting for a ClientHello: the handshake
 * limit plus room for record headers. */
#define SNI_RAW_MAX (2 * SL_SNI_MAX_BYTES)

size_t relay_move(conn *c, bool from_client, size_t max)
{
    struct bufferevent *src = from_client ? c->cli : c->up, *dst = from_client ? c->up : c->cli;
    struct evbuffer *in = bufferevent_get_input(src), *out = bufferevent_get_output(dst);
    size_t n = evbuffer_get_length(in);
    if (n > max)
        n = max;
    if (n == 0)
        return 0;
    if (n == evbuffer_get_length(in))
        evbuffer_add_buffer(out, in);
    else
        evbuffer_remove_buffer(in, out, n);
    if (from_client)
        c->x.bytes_up += n;
    else
        c->x.bytes_down += n;
    conn_touch(c);
    if (evbuffer_get_length(out) >= RELAY_HIGH) {
        bufferevent_disable(src, EV_READ);
        if (from_client)
            c->cli_paused = true;
        else
            c->up_paused = true;
        bufferevent_setwatermark(dst, EV_WRITE, RELAY_HIGH / 2, 0);
    }
    return n;
}

void relay_drained(conn *c, bool to_client)
{
    bool *paused = to_client ? &c->up_paused : &c->cli_paused;
    struct bufferevent *src = to_client ? c->up : c->cli, *dst = to_client ? c->cli : c->up;
    if (!*paused)
        return;
    *paused = false;
    bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
    bufferevent_enable(src, EV_READ);
}

static void begin_relay(conn *c)
{
    conn_set_state(c, CS_TUNNEL);
    sl_metrics_tunnel(+1);
    conn_touch(c);
    conn_timer(c, c->pol->idle_ms);
    bufferevent_enable(c->cli, EV_READ);
    bufferevent_enable(c->up, EV_READ);
    relay_move(c, true, SIZE_MAX);   /* what the client sent ahead */
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
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return;
    if (len > SNI_RAW_MAX)
        len = SNI_RAW_MAX;
    const uint8_t *p = evbuffer_pullup(in, (ssize_t)len);
    char name[256];
    size_t nlen = 0;
    sl_sni_result r = p ? sl_tls_sni(p, len, name, sizeof name, &nlen) : SL_SNI_MALFORMED;
    if (r == SL_SNI_NEED_MORE && len < SNI_RAW_MAX)
        return;
    if (r == SL_SNI_NEED_MORE)
        r = SL_SNI_MALFORMED;

    const char *why = NULL;
    char detail[600];
    switch (r) {
    case SL_SNI_FOUND:
        snprintf(c->x.sni, sizeof c->x.sni, "%s", name);
        if (!sni_matches(c, name, nlen)) {
            snprintf(detail, sizeof detail, "ClientHello names %s, not %s", c->x.sni, c->x.host.name);
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
        conn_linger_close(c);
        return;
    }
    conn_log_decision(c, true, "allowlisted", NULL);
    begin_relay(c);
}

void tunnel_start(conn *c)
{
    if (c->pol->sni_check && c->x.port == 443) {
        conn_set_state(c, CS_SNI);
        sl_reply_connect_ok(bufferevent_get_output(c->cli));
        bufferevent_disable(c->up, EV_READ);
        bufferevent_enable(c->cli, EV_READ);
        conn_timer(c, c->pol->header_ms);
        check_sni(c);
        return;
    }
    conn_log_decision(c, true, "allowlisted", NULL);
    sl_reply_connect_ok(bufferevent_get_output(c->cli));
    begin_relay(c);
}

static void maybe_finish(conn *c)
{
    if (c->cli_eof && c->up_eof &&
        evbuffer_get_length(bufferevent_get_output(c->cli)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(c->up)) == 0)
        conn_close(c, c->cli_eof_first ? "client_eof" : "origin_eof");
}

/* Pass the EOF on once everything before it has been written. */
static void maybe_shutdown(conn *c, bool to_client)
{
    bool eof = to_client ? c->up_eof : c->cli_eof;
    bool *shut = to_client ? &c->cli_shut : &c->up_shut;
    struct bufferevent *dst = to_client ? c->cli : c->up;
    if (eof && !*shut && evbuffer_get_length(bufferevent_get_output(dst)) == 0) {
        *shut = true;
        shutdown(bufferevent_getfd(dst), SHUT_WR);
    }
}

/* A tunnel that has carried a bulk's worth of bytes, and has nothing left
 * in its buffers, hands its sockets to the splice relay. */
static void maybe_splice(conn *c)
{
    if (c->sp || c->cli_eof || c->up_eof || c->x.bytes_up + c->x.bytes_down < SPLICE_AFTER_BYTES ||
        evbuffer_get_length(bufferevent_get_input(c->cli)) || evbuffer_get_length(bufferevent_get_input(c->up)) ||
        evbuffer_get_length(bufferevent_get_output(c->cli)) || evbuffer_get_length(bufferevent_get_output(c->up)))
        return;
    splice_start(c);
}

void tunnel_on_read(conn *c, bool from_client)
{
    if (c->state == CS_SNI) {
        if (from_client)
            check_sni(c);
        return;
    }
    relay_move(c, from_client, SIZE_MAX);
}

void tunnel_on_eof(conn *c, bool from_client)
{
    if (c->state == CS_SNI) {
        conn_log_decision(c, false, "sni_mismatch", "client closed before sending a ClientHello");
        conn_close(c, "client_eof");
        return;
    }
    if (!c->cli_eof && !c->up_eof)
        c->cli_eof_first = from_client;
    if (from_client)
        c->cli_eof = true;
    else
        c->up_eof = true;
    relay_move(c, from_client, SIZE_MAX);
    maybe_shutdown(c, !from_client);
    maybe_finish(c);
}

void tunnel_on_drained(conn *c, bool to_client)
{
    if (c->state != CS_TUNNEL)
        return;
    relay_drained(c, to_client);
    maybe_shutdown(c, to_client);
    if (c->cli_eof && c->up_eof) {
        maybe_finish(c);
        return;
    }
    maybe_splice(c);
}
