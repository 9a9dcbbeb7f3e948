/* Plain-HTTP exchanges: the request head and body go to the origin, the
 * response comes back with its hop-by-hop headers removed. Bodies are
 * relayed as they are (chunked stays chunked); the parsers only find where
 * they end, so the two sides can never disagree on message boundaries.
 *
 * The engine sees two sl_streams (c->cli, c->up) and nothing of sockets, so
 * HTTP inside an inspected TLS tunnel can run through it as well.
 *
 * The exchange is a sub-state machine of CS_FORWARD (fx_state, conn.h):
 *
 *   NONE/IDLE -> REQUEST -> AWAIT -> RESPONSE -> FLUSH -> IDLE or NONE
 *                   \______________/^
 *                    early response
 *
 * Every pass ends with the bytes it queued written (flushed), and what each
 * side is read for is derived from the sub-state when the callback leaves
 * (exchange_interest): a side is read only while its partner has fewer
 * than CONN_OUT_HIGH bytes unsent, and a stream never holds more than its
 * in_max unread. Those two rules bound everything a client or an origin can
 * make sluice hold: bodies, interim heads, response heads, the bytes of an
 * idle origin. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "crypto.h"
#include "reply.h"

static const char *const fx_names[] = {
    [FX_NONE] = "none", [FX_REQUEST] = "request", [FX_AWAIT] = "await",
    [FX_RESPONSE] = "response", [FX_FLUSH] = "flush", [FX_IDLE] = "idle",
};

static bool fx_legal(fx_state from, fx_state to)
{
    switch (to) {
    case FX_NONE:     return true;   /* the origin connection is dropped */
    case FX_REQUEST:  return from == FX_NONE || from == FX_IDLE;
    case FX_AWAIT:    return from == FX_REQUEST;
    case FX_RESPONSE: return from == FX_REQUEST || from == FX_AWAIT;
    case FX_FLUSH:    return from == FX_RESPONSE;
    case FX_IDLE:     return from == FX_FLUSH || from == FX_NONE;   /* NONE: a new inspected origin */
    }
    return false;
}

static void exchange_set(conn *c, fx_state to)
{
    if (!fx_legal(c->fx, to)) {
        fprintf(stderr, "sluice: BUG: connection %s: illegal exchange change %s -> %s\n", c->x.id,
                fx_names[c->fx], fx_names[to]);
        abort();
    }
    c->fx = to;
}

static size_t in_len(const sl_stream *s) { return evbuffer_get_length(s->in); }
static size_t out_len(const sl_stream *s) { return evbuffer_get_length(s->out); }

void exchange_drop_origin(conn *c)
{
    if (c->up) {
        sl_stream_free(c->up);   /* may be the stream calling back: it touches nothing after */
        c->up = NULL;
    }
    if (c->fx != FX_FLUSH)
        c->fx = FX_NONE;
}

/* An origin connection made (and its TLS done) before its first request:
 * kept like one between exchanges, so that it must stay silent too. */
void exchange_keep_origin(conn *c)
{
    free(c->up_name);
    c->up_name = strdup(c->x.host.name);   /* NULL (out of memory) only means no reuse */
    c->up_port = c->x.port;
    c->up_addr = c->x.addr;
    exchange_set(c, FX_IDLE);
}

bool exchange_can_reuse(conn *c)
{
    if (c->fx != FX_IDLE || !c->up || c->up_port != c->x.port || !c->up_name ||
        strcmp(c->up_name, c->x.host.name) != 0)
        return false;
    bool vetted = false;
    for (size_t i = 0; i < c->x.naddrs && !vetted; i++)
        vetted = sl_addr_equal(&c->x.addrs[i], &c->up_addr);
    /* A byte (or the close) that arrived since the last look would be read
     * as this request's response: such an origin is not reused. */
    return vetted && !sl_stream_pending(c->up);
}

void exchange_interest(conn *c, bool *cli, bool *up)
{
    bool room_to_client = out_len(c->cli) < CONN_OUT_HIGH;
    switch (c->fx) {
    case FX_REQUEST:
        /* The body goes while the origin takes it; once it is done, what
         * the client sends is its next request, which waits (in_max). */
        *cli = c->x.req.done || c->x.req_abandoned || out_len(c->up) < CONN_OUT_HIGH;
        *up = room_to_client;
        return;
    case FX_AWAIT:
    case FX_RESPONSE:
        *cli = true;
        *up = room_to_client;
        return;
    case FX_FLUSH:
        *cli = true;
        *up = c->up != NULL;   /* a kept origin is watched: it must stay silent */
        return;
    case FX_NONE:
    case FX_IDLE:
        break;
    }
    *cli = *up = false;
}

/* ---- moving body bytes ---- */

/* Below this, bytes are copied rather than their blocks handed over: a
 * peer that sends one byte per segment would otherwise make each byte a
 * block of its own (about 1 KiB) in the other side's output, and
 * CONN_OUT_HIGH, which counts bytes, would let 256 Ki such blocks pile up.
 * Copied, small moves fill the output's last block. */
#define MOVE_COPY_MAX 4096

static void move(conn *c, bool from_client, size_t n)
{
    sl_stream *src = from_client ? c->cli : c->up, *dst = from_client ? c->up : c->cli;
    if (n == 0)
        return;
    if (n <= MOVE_COPY_MAX) {
        char buf[MOVE_COPY_MAX];
        evbuffer_remove(src->in, buf, n);
        evbuffer_add(dst->out, buf, n);
    } else if (n == in_len(src)) {
        evbuffer_add_buffer(dst->out, src->in);
    } else {
        evbuffer_remove_buffer(src->in, dst->out, n);
    }
    if (from_client)
        c->x.bytes_up += n;
    else
        c->x.bytes_down += n;
    conn_touch(c);
}

/* ---- pinned bodies (SPEC part 2, "Pinned artifacts") ----
 *
 * The body of a 2xx to a GET rule with digests is hashed as it is moved;
 * the bytes that complete it (the last of a Content-Length body, the last
 * chunk of a chunked one) are hashed first and moved only once the digest
 * matched: they arrive in the same pass, so nothing waits in memory.
 *
 * Beyond SPEC, a body is first held whole, up to [tls] pin_hold_kib and while
 * the gate-wide PIN_HOLD_TOTAL allows, and reaches the client only once it
 * matched: npm (pacote) extracts a tarball as it downloads it, so a swapped
 * package relayed up to its held-back end would already be written under
 * node_modules (and removed again) when the reset comes. Held, a swapped
 * artifact of that size never reaches the client at all. A bigger body, or
 * one over the budget, is let go and streams as SPEC says. */
#define PIN_HOLD_TOTAL ((size_t)256 << 20)

static size_t pin_hold_max(const conn *c)
{
    return (size_t)c->pol->pin_hold_kib << 10;
}

static _Atomic size_t pin_held_total;

void exchange_release_hold(conn *c)
{
    if (c->x.pin_held) {
        evbuffer_free(c->x.pin_held);
        c->x.pin_held = NULL;
    }
    if (c->x.pin_reserved) {
        atomic_fetch_sub(&pin_held_total, c->x.pin_reserved);
        c->x.pin_reserved = 0;
    }
}

/* Let a held body go to the client: it streams from here on. Its budget
 * stays reserved until the exchange ends, since its bytes are now waiting
 * in the client's output. */
static void pin_unhold(conn *c)
{
    if (!c->x.pin_held)
        return;
    evbuffer_add_buffer(c->cli->out, c->x.pin_held);
    evbuffer_free(c->x.pin_held);
    c->x.pin_held = NULL;
}

/* Hold the first n bytes of in, if the body is being held and there is
 * room; false (and the body let go) when not. */
static bool pin_hold(conn *c, struct evbuffer *in, size_t n)
{
    if (!c->x.pin_held)
        return false;
    if (c->x.pin_reserved + n > pin_hold_max(c) ||
        atomic_fetch_add(&pin_held_total, n) + n > PIN_HOLD_TOTAL) {
        if (c->x.pin_reserved + n <= pin_hold_max(c))
            atomic_fetch_sub(&pin_held_total, n);   /* the add above was made */
        pin_unhold(c);
        return false;
    }
    c->x.pin_reserved += n;
    evbuffer_remove_buffer(in, c->x.pin_held, n);
    c->x.bytes_down += n;
    conn_touch(c);
    return true;
}

static bool pinned(const conn *c)
{
    return c->x.rule && sl_entry_is_rule(c->x.rule) && c->x.rule->ndigests > 0;
}

static void pin_data(void *ctx, const char *p, size_t n)
{
    sl_pin_update(ctx, p, n);
}

/* Hash the first n bytes of in. */
static void pin_hash(sl_pin *pin, struct evbuffer *in, size_t n)
{
    struct evbuffer_ptr at;
    evbuffer_ptr_set(in, &at, 0, EVBUFFER_PTR_SET);
    while (n > 0) {
        struct evbuffer_iovec v[16];
        int nv = evbuffer_peek(in, (ev_ssize_t)n, &at, v, 16);
        if (nv <= 0)
            return;
        for (int i = 0; i < nv && i < 16 && n > 0; i++) {
            size_t len = v[i].iov_len < n ? v[i].iov_len : n;
            sl_pin_update(pin, v[i].iov_base, len);
            n -= len;
            evbuffer_ptr_set(in, &at, len, EVBUFFER_PTR_ADD);
        }
    }
}

/* The body is whole: true if it matched. On a mismatch both connections
 * are reset (conn_reset): the client never gets the end of the body. */
static bool pin_verdict(conn *c)
{
    char actual[SL_PIN_ACTUAL_MAX];
    bool ok = sl_pin_finish(c->x.pin, actual, sizeof actual);
    sl_pin_free(c->x.pin);
    c->x.pin = NULL;
    if (ok)
        return true;
    /* The rule's digests, while they fit a log line's room for them; the
     * rest are counted (the line names the rule, which has them all). */
    const sl_entry *r = c->x.rule;
    size_t cap = 3000, off = 0, i = 0;
    char *expected = malloc(cap);
    if (expected) {
        expected[0] = '\0';
        for (; i < r->ndigests && off + strlen(r->digests[i]) + 2 < cap; i++)
            off += (size_t)snprintf(expected + off, cap - off, "%s%s", i ? " " : "", r->digests[i]);
        c->x.expected_more = r->ndigests - i;
    }
    c->x.expected = expected;
    c->x.actual = strdup(actual);
    c->x.verdict = "integrity_mismatch";
    c->x.end_detail = "the body does not hash to a digest its rule pins; both connections were reset "
                      "before its end";
    conn_reset(c, "integrity_mismatch");
    return false;
}

/* Why a pinned 2xx response cannot be checked (SPEC), or NULL. */
static const char *pin_unverifiable(const sl_http_head *h, body_kind kind)
{
    for (size_t i = 0; i < h->nheaders; i++) {
        const sl_http_header *hd = &h->headers[i];
        if (sl_http_header_is(hd, "content-encoding") &&
            !(hd->value.len == 8 && strncasecmp(hd->value.p, "identity", 8) == 0))
            return "the origin's response has a Content-Encoding other than identity: a digest pins "
                   "the artifact's own bytes";
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        const sl_http_header *hd = &h->headers[i];
        if (sl_http_header_is(hd, "transfer-encoding") &&
            !(hd->value.len == 7 && strncasecmp(hd->value.p, "chunked", 7) == 0))
            return "the origin's response has a transfer coding besides chunked: a client that decodes it "
                   "would get other bytes than the ones hashed";
    }
    if (kind == BODY_UNTIL_CLOSE)
        return "the origin's response has neither Content-Length nor chunked framing: its end, and "
               "so its digest, cannot be known before the client has it";
    return NULL;
}

/* Feed up to `max` bytes of src's input to the chunked parser, segment by
 * segment (no copy into one block); the chunk data goes to pin when there
 * is one. Returns the bytes that belong to the body, or -1 on a syntax
 * error. */
static long feed_chunked(sl_chunked *ch, struct evbuffer *in, size_t max, const char **err, sl_pin *pin)
{
    struct evbuffer_iovec v[8];
    int nv = evbuffer_peek(in, (ev_ssize_t)max, NULL, v, 8);
    long total = 0;
    for (int i = 0; i < nv && i < 8 && (size_t)total < max && !ch->done; i++) {
        size_t len = v[i].iov_len;
        if (len > max - (size_t)total)
            len = max - (size_t)total;
        long k = pin ? sl_chunked_feed_data(ch, v[i].iov_base, len, err, pin_data, pin)
                     : sl_chunked_feed(ch, v[i].iov_base, len, err);
        if (k < 0)
            return -1;
        total += k;
    }
    return total;
}

/* Move body bytes from one side to the other, up to the body's end, while
 * the destination has room. False on a malformed body (*err says why);
 * nothing of this pass's bytes is moved then. A pinned body that fails its
 * digest resets the connection (true, and conn_live() is false). */
static bool pump_body(conn *c, body *b, bool from_client, const char **err)
{
    sl_stream *src = from_client ? c->cli : c->up, *dst = from_client ? c->up : c->cli;
    sl_pin *pin = from_client ? NULL : c->x.pin;
    while (!b->done && in_len(src) > 0 && out_len(dst) < CONN_OUT_HIGH) {
        size_t avail = in_len(src);
        switch (b->kind) {
        case BODY_NONE:
            b->done = true;
            break;
        case BODY_LENGTH: {
            size_t n = b->remaining < avail ? (size_t)b->remaining : avail;
            if (pin) {
                pin_hash(pin, src->in, n);
                bool last = n == b->remaining;
                if (pin_hold(c, src->in, n)) {
                    b->remaining -= n;
                    b->done = last;
                    if (last) {
                        if (!pin_verdict(c))
                            return true;   /* reset: the held body goes with the exchange */
                        pin_unhold(c);
                    }
                    break;
                }
                if (last && !pin_verdict(c))
                    return true;   /* the last bytes stay unsent: reset */
                pin = c->x.pin;    /* NULL once the verdict is in */
            }
            move(c, from_client, n);
            b->remaining -= n;
            b->done = b->remaining == 0;
            break;
        }
        case BODY_CHUNKED: {
            bool had_data = pin && sl_chunked_data_done(&b->chunked);
            long k = feed_chunked(&b->chunked, src->in, avail < 65536 ? avail : 65536, err, pin);
            if (k < 0)
                return false;
            bool verdict = pin && !had_data && sl_chunked_data_done(&b->chunked);
            bool held = pin && k > 0 && pin_hold(c, src->in, (size_t)k);
            if (verdict) {
                /* The last chunk is in this pass: none of it goes before the verdict. */
                if (!pin_verdict(c))
                    return true;
                pin_unhold(c);
                pin = NULL;
            }
            if (held) {
                b->done = b->chunked.done;
                break;
            }
            if (from_client && c->x.cred && b->chunked.trailer_field) {
                /* A trailer could carry the credential's header beside the
                 * gate's (an origin may merge trailers into the head): not
                 * one byte of it is passed on; the origin gets a cut body. */
                *err = "a trailer field in a request that carries a credential";
                return false;
            }
            move(c, from_client, (size_t)k);
            b->done = b->chunked.done;
            if (k == 0 && !b->done)
                return true;   /* cannot happen (the parser takes every byte until done); no spin */
            break;
        }
        case BODY_UNTIL_CLOSE:
            move(c, from_client, avail);
            break;
        }
    }
    return true;
}

/* ---- ending an exchange ---- */

/* The exchange cannot go on. While no byte of a final response head has
 * reached the client's socket, sluice answers itself (status: 400 for the
 * client's own fault, 502/504 for the origin's); after that the client can
 * only be cut off. */
static void exchange_fail(conn *c, int status, const char *end, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool retry_on_new_origin(conn *c);

static void exchange_fail(conn *c, int status, const char *end, const char *fmt, ...)
{
    if (c->x.final_head && c->cli->written > c->x.final_at) {
        conn_close(c, end);
        return;
    }
    if (c->x.final_head) {
        /* Queued but unsent: take the final head (and what followed it)
         * back out, keeping what was before it (interim heads, the previous
         * response's rest). */
        size_t keep = (size_t)(c->x.final_at - c->cli->written), all = out_len(c->cli);
        struct evbuffer *head = evbuffer_new();
        if (!head) {
            conn_close(c, end);
            return;
        }
        evbuffer_remove_buffer(c->cli->out, head, keep);
        evbuffer_drain(c->cli->out, all - keep);
        evbuffer_add_buffer(c->cli->out, head);
        evbuffer_free(head);
        c->x.bytes_down -= all - keep < c->x.bytes_down ? all - keep : c->x.bytes_down;
        c->x.final_head = false;
    }
    char detail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    c->x.status = status;
    sl_reply_error(c->cli->out, status, detail);
    conn_finish(c, end);
}

/* A pinned 2xx that cannot be checked: refused instead of relayed (its
 * head has not gone to the client), and the origin connection dropped. */
static void refuse_unverifiable(conn *c, const char *why)
{
    c->x.verdict = "integrity_unverifiable";
    c->x.status = 403;
    c->x.end_detail = why;
    char detail[400];
    snprintf(detail, sizeof detail, "%s is pinned by %s:%d, but %s.", c->x.path ? c->x.path : "This artifact",
             c->x.rule->file, c->x.rule->line, why);
    sl_reply_refusal(c->cli->out, 403, "integrity_unverifiable", detail);
    conn_finish(c, "refused");
}

/* The response has left the origin whole: the next request may come once
 * the client has it (flush_done). */
static void flush_done(conn *c)
{
    bool kept = c->up != NULL;
    if (c->x.client_close || c->w->draining || c->cli->error ||
        (c->cli->eof && in_len(c->cli) == 0)) {
        conn_finish(c, c->x.abrupt ? "origin_eof" : "done");   /* the request's line is written already */
        return;
    }
    conn_new_exchange(c);
    exchange_set(c, kept ? FX_IDLE : FX_NONE);
    conn_set_state(c, CS_HEAD);
    conn_timer(c, c->pol->idle_ms);
    if (in_len(c->cli) > 0)
        conn_kick(c);   /* a pipelined request: from the loop, not from this stack */
}

static void exchange_complete(conn *c)
{
    conn_log_close(c, c->x.abrupt ? "origin_eof" : "done");
    bool reuse = c->up && !c->x.resp_close && c->x.resp.kind != BODY_UNTIL_CLOSE && c->x.req.done &&
                 !c->x.req_abandoned && !c->up->eof && !c->up->error && in_len(c->up) == 0 &&
                 out_len(c->up) == 0 && !c->x.client_close;
    exchange_set(c, FX_FLUSH);
    if (!reuse)
        exchange_drop_origin(c);   /* bytes after the response (a second one, a body on a 204) go with it */
    sl_stream_flush(c->cli);
    if (sl_stream_flushed(c->cli))   /* for TLS, encrypted is not yet sent: its DRAINED says when */
        flush_done(c);
}

/* ---- the two directions ---- */

static void pump_request(conn *c)
{
    const char *err = "malformed";
    if (!pump_body(c, &c->x.req, true, &err)) {
        exchange_fail(c, 400, "bad_request_body", "The request body is malformed: %s.", err);
        return;
    }
    if (c->x.req.done) {
        exchange_set(c, FX_AWAIT);
        return;
    }
    if (c->cli->eof && in_len(c->cli) == 0)
        conn_close(c, "client_eof");   /* the body can no longer be completed */
}

/* The response head the client gets: the origin's status line, its
 * end-to-end headers, and our own Connection header when needed. */
static void write_response_head(conn *c, const char *p, const sl_http_head *h, bool final)
{
    struct evbuffer *out = c->cli->out;
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
        evbuffer_add(out, "Connection: close\r\n", 19);
    else if (final && c->x.client_http10)
        evbuffer_add(out, "Connection: keep-alive\r\n", 24);
    evbuffer_add(out, "\r\n", 2);
    c->x.bytes_down += evbuffer_get_length(out) - before;
}

/* Response heads until the final one. False when the exchange ended. */
static bool pump_heads(conn *c)
{
    static _Thread_local sl_http_head h;   /* 4 KiB: not on a callback's stack */
    struct evbuffer *in = c->up->in;
    while (c->fx == FX_REQUEST || c->fx == FX_AWAIT) {
        size_t len = evbuffer_get_length(in);
        if (len > 0 && c->x.retry_head) {   /* the origin answers: this connection is the one */
            evbuffer_free(c->x.retry_head);
            c->x.retry_head = NULL;
        }
        if (len == 0 || out_len(c->cli) >= CONN_OUT_HIGH)
            break;   /* interim heads wait under the same watermark as bodies */
        size_t n = len < SL_HTTP_MAX_HEAD + 1 ? len : SL_HTTP_MAX_HEAD + 1;
        const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
        sl_http_status st = p ? sl_http_parse_response(p, n, &h) : SL_HTTP_BAD;
        if (st == SL_HTTP_INCOMPLETE)
            break;
        if (st != SL_HTTP_OK || h.status == 101) {
            exchange_fail(c, 502, "bad_response", "The origin's response is malformed: %s.",
                          st == SL_HTTP_OK ? "unexpected 101 Switching Protocols"
                          : h.error        ? h.error
                                           : "malformed response head");
            return false;
        }
        if (h.status < 200) {
            /* An HTTP/1.0 client must not get 1xx (RFC 9110 §15.2). */
            if (!c->x.client_http10) {
                write_response_head(c, p, &h, false);
                conn_touch(c);   /* dropped ones are no progress: an endless stream of them idles out */
            }
            evbuffer_drain(in, h.head_len);   /* p points into it: last */
            continue;
        }
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
        if (pinned(c) && h.status >= 200 && h.status < 300 && b->kind != BODY_NONE) {
            const char *why = pin_unverifiable(&h, b->kind);
            if (why) {
                refuse_unverifiable(c, why);
                return false;
            }
            c->x.pin = sl_pin_new(c->x.rule->digests, c->x.rule->ndigests);
            c->x.pin_held = c->x.pin && pin_hold_max(c) > 0 &&
                                    (b->kind != BODY_LENGTH || b->remaining <= pin_hold_max(c))
                                ? evbuffer_new() : NULL;   /* a bigger one streams from the start */
            if (!c->x.pin) {
                conn_close(c, "out_of_memory");
                return false;
            }
        }
        c->x.resp_close = h.conn_close;
        if (!c->x.req.done) {
            /* An early answer (a 413, say): the rest of the body is not
             * sent, and the client connection cannot be resynchronised. */
            c->x.req_abandoned = true;
            c->x.client_close = true;
        }
        c->x.final_head = true;
        c->x.status = h.status;
        c->x.final_at = c->cli->written + out_len(c->cli);
        write_response_head(c, p, &h, true);
        evbuffer_drain(in, h.head_len);
        conn_touch(c);
        exchange_set(c, FX_RESPONSE);
        if (c->x.pin && b->done && !pin_verdict(c))
            return false;   /* an empty body that is not the pinned one */
    }
    if ((c->fx == FX_REQUEST || c->fx == FX_AWAIT) && (c->up->eof || c->up->error) &&
        retry_on_new_origin(c))
        return false;
    if ((c->fx == FX_REQUEST || c->fx == FX_AWAIT) && (c->up->eof || c->up->error) &&
        out_len(c->cli) < CONN_OUT_HIGH) {
        exchange_fail(c, 502, c->up->error ? "origin_error" : "origin_eof",
                      "The origin closed the connection before its response.");
        return false;
    }
    return true;
}

static void pump_response(conn *c)
{
    if (!pump_heads(c) || c->fx != FX_RESPONSE)
        return;
    const char *err = "malformed";
    if (!pump_body(c, &c->x.resp, false, &err)) {
        exchange_fail(c, 502, "bad_response_body", "The origin's response body is malformed: %s.", err);
        return;
    }
    if (!conn_live(c))
        return;   /* a pinned body failed its digest */
    if (!c->x.resp.done && c->up->eof && in_len(c->up) == 0) {
        if (c->x.resp.kind != BODY_UNTIL_CLOSE) {
            exchange_fail(c, 502, "origin_eof", "The origin closed the connection before the response ended.");
            return;
        }
        c->x.resp.done = true;
        /* Over TLS only a close_notify makes this close the body's end;
         * without one it may be a cut (the stream says so in failure),
         * and the client must not be told otherwise. */
        c->x.abrupt = c->up->failure[0] != '\0';
    }
    if (c->x.resp.done)
        exchange_complete(c);
}

/* One pass: move what can move both ways, then write it. */
static void pump(conn *c)
{
    if (c->fx == FX_REQUEST && !c->x.req.done && !c->x.req_abandoned) {
        pump_request(c);
        if (!conn_live(c) || c->state != CS_FORWARD)
            return;
        sl_stream_flush(c->up);
    }
    if (c->cli->eof && c->x.req.done)
        c->x.client_close = true;   /* a half-close after a whole request: the response still goes */
    if (c->fx != FX_FLUSH)
        pump_response(c);
    if (conn_live(c) && c->state == CS_FORWARD)
        sl_stream_flush(c->cli);
}

/* ---- entry points ---- */

/* Whether the request may go again on a new connection, should the kept
 * one end before its response: idempotent, no body, and the one try left. */
static bool retryable(const conn *c)
{
    return c->x.reused && !c->x.retrying && c->x.req.kind == BODY_NONE &&
           (c->x.method == SL_METHOD_GET || c->x.method == SL_METHOD_HEAD || c->x.method == SL_METHOD_OPTIONS);
}

/* The kept origin ended (a FIN or an error) before any byte of the
 * response: the request goes once more, on a new connection to the same
 * vetted addresses. False when it may not. */
static bool retry_on_new_origin(conn *c)
{
    if (!c->x.retry_head || c->x.final_head || in_len(c->up) > 0)
        return false;
    c->x.up_head = c->x.retry_head;
    c->x.retry_head = NULL;
    c->x.retrying = true;
    c->x.reused = false;
    conn_connect(c);   /* drops the old origin; its allow line stands */
    return true;
}

void exchange_start(conn *c)
{
    conn_set_state(c, CS_FORWARD);
    exchange_set(c, FX_REQUEST);
    if (!c->x.retrying) {
        if (!conn_allow(c))
            return;
        request_seal_head(c);
        if (retryable(c) && (c->x.retry_head = evbuffer_new()) != NULL) {
            size_t n = evbuffer_get_length(c->x.up_head);
            evbuffer_add(c->x.retry_head, evbuffer_pullup(c->x.up_head, (ev_ssize_t)n), n);
        }
    }
    c->x.bytes_up += evbuffer_get_length(c->x.up_head);
    evbuffer_add_buffer(c->up->out, c->x.up_head);
    evbuffer_free(c->x.up_head);
    c->x.up_head = NULL;
    conn_touch(c);
    conn_timer(c, c->pol->idle_ms);
    if (c->x.req.done)
        exchange_set(c, FX_AWAIT);
    sl_stream_flush(c->up);
    pump(c);
}

void exchange_on_stream(conn *c, bool from_client, sl_stream_event ev)
{
    if (ev == SL_STREAM_ERROR) {
        if (from_client)
            conn_close(c, "client_error");
        else if (c->fx == FX_FLUSH)
            exchange_drop_origin(c);   /* the kept origin failed: just not reused */
        else if (!((c->fx == FX_REQUEST || c->fx == FX_AWAIT) && retry_on_new_origin(c)))
            exchange_fail(c, 502, "origin_error", "The connection to the origin failed.");
        return;
    }
    if (c->fx == FX_FLUSH) {
        if (!from_client) {
            exchange_drop_origin(c);   /* it spoke after its response: not reusable */
            return;
        }
        if (ev == SL_STREAM_DRAINED && sl_stream_flushed(c->cli)) {
            conn_touch(c);
            flush_done(c);
        }
        return;   /* a pipelined request waits in the buffer */
    }
    if (ev == SL_STREAM_DRAINED && from_client)
        conn_touch(c);   /* a slow reader is still reading */
    pump(c);
}

void exchange_on_timeout(conn *c)
{
    switch (c->fx) {
    case FX_REQUEST:
        if (!c->x.req.done && out_len(c->up) == 0) {
            exchange_fail(c, 408, "idle_timeout", "The request body stalled for %d ms (idle_ms).",
                          c->pol->idle_ms);
            return;
        }
        /* the origin is not taking the request or not answering */
        __attribute__((fallthrough));
    case FX_AWAIT:
    case FX_RESPONSE:
        exchange_fail(c, 504, "idle_timeout", "The origin sent no response within %d ms (idle_ms).",
                      c->pol->idle_ms);
        return;
    case FX_FLUSH:
    case FX_NONE:
    case FX_IDLE:
        conn_close(c, "idle_timeout");   /* a client that does not read its response */
        return;
    }
}
