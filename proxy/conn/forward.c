/* Plain HTTP: the request head and body go to the origin, the response
 * comes back with its hop-by-hop headers removed. Bodies are relayed as they
 * are (chunked stays chunked); the parsers only find where they end, so the
 * two sides can never disagree on message boundaries. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "reply.h"

static void pump_request(conn *c);
static void pump_response(conn *c);

/* Backpressure by watermarks: a side stops reading while its partner holds
 * RELAY_HIGH bytes unsent, and resumes when that falls to half. */
#define RELAY_HIGH (256 * 1024)

/* Move up to max bytes from one side's input to the other's output.
 * Returns the bytes moved. */
static size_t relay_move(conn *c, bool from_client, size_t max)
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

/* From a write callback: resume the side paused for this one. */
static void relay_drained(conn *c, bool to_client)
{
    bool *paused = to_client ? &c->up_paused : &c->cli_paused;
    struct bufferevent *src = to_client ? c->up : c->cli, *dst = to_client ? c->cli : c->up;
    if (!*paused)
        return;
    *paused = false;
    bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
    bufferevent_enable(src, EV_READ);
}

/* Write what is queued for a side now, in the pass that queued it, as
 * libevent's own write callback would (unfreeze, write, freeze). Only a
 * rest the socket does not take waits for the bufferevent, whose writing is
 * enabled just for that and disabled again once it has drained
 * (forward_on_drained). Otherwise every message would cost an epoll change
 * to start watching for writability, a wake-up, and a change to stop. */
static void send_now(conn *c, bool to_client)
{
    struct bufferevent *bev = to_client ? c->cli : c->up;
    struct evbuffer *out = bufferevent_get_output(bev);
    if (evbuffer_get_length(out) > 0) {
        evbuffer_unfreeze(out, 1);
        evbuffer_write_atmost(out, bufferevent_getfd(bev), -1);   /* errors: found by the bufferevent */
        evbuffer_freeze(out, 1);
    }
    if (evbuffer_get_length(out) > 0)
        bufferevent_enable(bev, EV_WRITE);
    else
        relay_drained(c, to_client);   /* a source paused for this side may go on */
}

/* Close once everything queued for the client has been written. */
static void finish(conn *c, const char *end)
{
    c->x.finishing = end;
    bufferevent_disable(c->cli, EV_READ);
    if (c->up)
        bufferevent_disable(c->up, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
        conn_close(c, end);
}

static void origin_failed(conn *c, const char *end, const char *detail)
{
    if (!c->x.resp_head_done && c->x.bytes_down == 0) {
        sl_reply_origin_error(bufferevent_get_output(c->cli), detail);
        bufferevent_enable(c->cli, EV_WRITE);
        conn_close_upstream(c);
        finish(c, end);
        return;
    }
    conn_close(c, end);   /* mid-response: the client sees the cut */
}

static void exchange_done(conn *c)
{
    conn_log_close(c, "done");
    bool reuse = c->up && !c->x.resp_close && c->x.resp.kind != BODY_UNTIL_CLOSE && !c->up_eof;
    if (reuse) {
        c->up_reusable = true;
        bufferevent_enable(c->up, EV_READ);   /* to notice the origin closing it */
    } else {
        conn_close_upstream(c);
    }
    if (c->x.client_close || c->w->draining) {
        finish(c, "done");
        return;
    }
    conn_new_exchange(c);
    conn_set_state(c, CS_HEAD);
    conn_timer(c, c->pol->idle_ms);
    bufferevent_enable(c->cli, EV_READ);
    if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0)
        conn_on_head(c);   /* a pipelined request is already here */
}

static void maybe_done(conn *c)
{
    if (!c->x.resp.done)
        return;
    if (!c->x.req.done) {
        /* The origin answered before the request body ended (an early
         * 413, say): the rest of the body cannot be resynchronised. */
        c->x.client_close = true;
        c->x.resp_close = true;
        bufferevent_disable(c->cli, EV_READ);
        c->x.req.done = true;
    }
    exchange_done(c);
}

/* Move body bytes from one side to the other, up to the body's end. Returns
 * false if the connection was closed. */
static bool pump_body(conn *c, body *b, bool from_client)
{
    struct bufferevent *src = from_client ? c->cli : c->up;
    struct evbuffer *in = bufferevent_get_input(src);
    while (!b->done && evbuffer_get_length(in) > 0 && !(from_client ? c->cli_paused : c->up_paused)) {
        size_t avail = evbuffer_get_length(in);
        switch (b->kind) {
        case BODY_NONE:
            b->done = true;
            break;
        case BODY_LENGTH: {
            size_t n = relay_move(c, from_client, b->remaining < avail ? (size_t)b->remaining : avail);
            b->remaining -= n;
            if (b->remaining == 0)
                b->done = true;
            break;
        }
        case BODY_CHUNKED: {
            size_t n = avail < 65536 ? avail : 65536;
            const char *p = (const char *)evbuffer_pullup(in, (ssize_t)n);
            const char *err = "out of memory";
            long k = p ? sl_chunked_feed(&b->chunked, p, n, &err) : -1;
            if (k < 0) {
                if (from_client)
                    conn_close(c, "bad_request_body");
                else
                    origin_failed(c, "bad_response_body", err);
                return false;
            }
            relay_move(c, from_client, (size_t)k);
            if (b->chunked.done)
                b->done = true;
            break;
        }
        case BODY_UNTIL_CLOSE:
            relay_move(c, from_client, avail);
            break;
        }
    }
    return true;
}

static void pump_request(conn *c)
{
    if (c->x.req.done)
        return;   /* what the client sends now is its next request: it waits */
    if (!pump_body(c, &c->x.req, true))
        return;
    send_now(c, false);
    if (c->x.req.done) {
        c->cli_paused = false;
        maybe_done(c);
    } else if (c->cli_eof && evbuffer_get_length(bufferevent_get_input(c->cli)) == 0) {
        conn_close(c, "client_eof");   /* the body can no longer be completed */
    }
}

/* The response head the client gets: the origin's status line, its
 * end-to-end headers, and our own Connection header when needed. */
static void write_response_head(conn *c, const char *p, const sl_http_head *h, bool final)
{
    struct evbuffer *out = bufferevent_get_output(c->cli);
    size_t before = evbuffer_get_length(out);
    const char *eol = memchr(p, '\r', h->head_len);
    evbuffer_add(out, p, (size_t)(eol - p));
    evbuffer_add(out, "\r\n", 2);
    for (size_t i = 0; i < h->nheaders; i++) {
        const sl_http_header *hd = &h->headers[i];
        if (hd->hop_by_hop)
            continue;
        evbuffer_add(out, hd->name.p, hd->name.len);
        evbuffer_add(out, ": ", 2);
        evbuffer_add(out, hd->value.p, hd->value.len);
        evbuffer_add(out, "\r\n", 2);
    }
    if (final && c->x.client_close)
        evbuffer_add_printf(out, "Connection: close\r\n");
    else if (final && c->x.client_http10)
        evbuffer_add_printf(out, "Connection: keep-alive\r\n");
    evbuffer_add(out, "\r\n", 2);
    c->x.bytes_down += evbuffer_get_length(out) - before;
}

static void pump_response(conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->up);
    static _Thread_local sl_http_head h;   /* 4 KiB: not on a callback's stack */

    while (!c->x.resp_head_done) {
        size_t len = evbuffer_get_length(in);
        if (len == 0)
            goto send;   /* interim (1xx) heads may be queued */
        size_t n = len < SL_HTTP_MAX_HEAD + 1 ? len : SL_HTTP_MAX_HEAD + 1;
        const char *p = (const char *)evbuffer_pullup(in, (ssize_t)n);
        sl_http_status st = p ? sl_http_parse_response(p, n, &h) : SL_HTTP_BAD;
        if (st == SL_HTTP_INCOMPLETE)
            goto send;
        if (st != SL_HTTP_OK || h.status == 101) {
            origin_failed(c, "bad_response", st == SL_HTTP_OK ? "unexpected 101 Switching Protocols"
                                             : h.error ? h.error : "malformed response head");
            return;
        }
        bool final = h.status >= 200;
        if (final) {
            body *b = &c->x.resp;
            if (!sl_http_response_has_body(c->x.method, h.status)) {
                b->kind = BODY_NONE;
                b->done = true;
            } else if (h.chunked) {
                b->kind = BODY_CHUNKED;
                sl_chunked_init(&b->chunked);
            } else if (h.content_length >= 0) {
                b->kind = BODY_LENGTH;
                b->remaining = (uint64_t)h.content_length;
                b->done = h.content_length == 0;
            } else {
                b->kind = BODY_UNTIL_CLOSE;
                c->x.client_close = true;   /* only the close can tell the client it ended */
            }
            c->x.resp_close = h.conn_close;
            c->x.resp_head_done = true;
        }
        write_response_head(c, p, &h, final);
        evbuffer_drain(in, h.head_len);
        conn_touch(c);
    }
    if (!pump_body(c, &c->x.resp, false))
        return;
    send_now(c, true);
    maybe_done(c);
    return;
send:
    send_now(c, true);
}

void forward_start(conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->up);
    c->x.bytes_up += evbuffer_get_length(c->x.up_head);
    evbuffer_add_buffer(out, c->x.up_head);
    evbuffer_free(c->x.up_head);
    c->x.up_head = NULL;
    conn_touch(c);
    conn_timer(c, c->pol->idle_ms);
    /* Writes go out through send_now; the origin's writing was on only
     * for its connect. */
    bufferevent_disable(c->up, EV_WRITE);
    bufferevent_enable(c->up, EV_READ);
    if (c->x.req.done)
        send_now(c, false);
    else {
        bufferevent_enable(c->cli, EV_READ);
        pump_request(c);
        if (c->state != CS_FORWARD || c->x.finishing)
            return;
    }
    if (evbuffer_get_length(bufferevent_get_input(c->up)) > 0)
        pump_response(c);
}

void forward_on_read(conn *c, bool from_client)
{
    if (c->x.finishing)
        return;
    if (from_client)
        pump_request(c);
    else
        pump_response(c);
}

void forward_on_eof(conn *c, bool from_client)
{
    if (c->x.finishing) {
        if (from_client)
            conn_close(c, c->x.finishing);
        return;
    }
    if (from_client) {
        if (!c->x.req.done) {
            conn_close(c, "client_eof");
            return;
        }
        /* A half-close after a whole request: the response still goes. */
        c->cli_eof = true;
        c->x.client_close = true;
        return;
    }
    c->up_eof = true;
    pump_response(c);   /* whatever arrived with the EOF */
    if (c->state != CS_FORWARD || c->x.finishing || c->x.resp.done)
        return;
    if (c->x.resp.kind == BODY_UNTIL_CLOSE && c->x.resp_head_done) {
        c->x.resp.done = true;
        maybe_done(c);
        return;
    }
    origin_failed(c, "origin_eof", "the origin closed the connection before the response ended");
}

void forward_on_drained(conn *c, bool to_client)
{
    if (c->x.finishing) {
        if (to_client && evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
            conn_close(c, c->x.finishing);
        return;
    }
    struct bufferevent *bev = to_client ? c->cli : c->up;
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        bufferevent_disable(bev, EV_WRITE);   /* send_now writes the next message */
    relay_drained(c, to_client);
}
