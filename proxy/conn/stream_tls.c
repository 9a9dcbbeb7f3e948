/* The TLS transport of sl_stream: a session (crypto/tls.h) over a socket
 * stream. The owner sees plaintext in `in` and `out`; the raw stream below
 * carries the ciphertext. mbedtls never touches a socket: the session reads
 * ciphertext from raw->in and appends it to raw->out through two callbacks,
 * so everything runs on the event loop, as the socket stream does.
 *
 * The rules of stream.h hold: the owner is called back only from the loop
 * (raw's events, or this stream's own `kick` event for what an owner's call
 * found), one event per pass, and calling back is the last thing done.
 *
 * Bounds: plaintext in `in` never passes in_max; raw is not asked to read
 * while `in` is full, or while raw->in holds ciphertext not yet given to the
 * session (the session takes at most one record: what stays is bounded by
 * raw's in_max). Plaintext leaves `out` only while raw->out holds less than
 * OUT_AHEAD bytes, so a peer that does not read stops sluice at the owner's
 * own watermarks on `out`. What the session answers by itself while it
 * reads (alerts) stops its reading once raw->out holds RAW_OUT_MAX: then
 * it holds at most that plus the answers to one record's messages. */
#include "stream.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"

#define RECORD_MAX 16384                    /* plaintext in one TLS record */
#define RAW_IN_MAX (RECORD_MAX + 2048 + 5)  /* the biggest TLS 1.2 record on the wire */
#define OUT_AHEAD RECORD_MAX                /* ciphertext queued in raw->out before `out` waits */
/* Ciphertext queued in raw->out beyond which the session is given no more
 * of the peer's bytes: above what encrypt_out ever queues (OUT_AHEAD plus
 * one record), so only the session's own answers reach it (a warning alert
 * for each renegotiation request, say, which a peer that does not read
 * could otherwise make sluice queue without end). */
#define RAW_OUT_MAX (OUT_AHEAD + RAW_IN_MAX)

/* Plaintext is decrypted here and copied: `in` gets blocks the size of what
 * came, not of a record that might have (as in stream.c). */
static _Thread_local unsigned char scratch[RECORD_MAX];

typedef enum ts_phase { TS_HANDSHAKE, TS_OPEN, TS_DEAD } ts_phase;

typedef struct tls_stream {
    sl_stream s;
    sl_stream *raw;
    sl_tls *tls;              /* NULL when it could not be made: an ERROR is on its way */
    bool server;
    ts_phase phase;
    struct event *kick;       /* runs a step from the loop for what an owner's call found */
    /* events found, delivered one per loop pass in this order */
    bool ev_ready, ev_read, ev_error, ev_eof, ev_drained;
    int pend_error;           /* errno for the ERROR to come */
    bool eof_seen;            /* the session ended (EOF delivered after all READs) */
    bool out_waiting;         /* `out` had to wait: DRAINED once all of it is written */
    bool shut_wanted, shut_done;
} tls_stream;

static const char *side(const tls_stream *ts)
{
    return ts->server ? "client" : "upstream";
}

static void fail(tls_stream *ts, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Nothing more comes from this stream but the ERROR. */
static void fail(tls_stream *ts, int err, const char *fmt, ...)
{
    if (ts->phase == TS_DEAD)
        return;
    ts->phase = TS_DEAD;
    ts->pend_error = err;
    ts->ev_error = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ts->s.failure, sizeof ts->s.failure, fmt, ap);
    va_end(ap);
    ts->raw->want_read = false;
    sl_stream_update(ts->raw);
}

/* ---- the session's I/O: raw's buffers ---- */

static size_t ts_send(void *ctx, const unsigned char *p, size_t n)
{
    tls_stream *ts = ctx;
    if (evbuffer_add(ts->raw->out, p, n) != 0 && ts->phase != TS_DEAD)
        fail(ts, ENOMEM, "%s TLS: out of memory", side(ts));
    return n;
}

/* The peer's bytes are held back while what the session answered waits. */
static bool answers_wait(const tls_stream *ts)
{
    return evbuffer_get_length(ts->raw->out) >= RAW_OUT_MAX;
}

static ssize_t ts_recv(void *ctx, unsigned char *p, size_t n)
{
    tls_stream *ts = ctx;
    if (answers_wait(ts))
        return 0;   /* raw's DRAINED steps again */
    if (evbuffer_get_length(ts->raw->in) == 0)
        return ts->raw->eof ? -1 : 0;
    return evbuffer_remove(ts->raw->in, p, n);
}

static size_t in_len(const sl_stream *s) { return evbuffer_get_length(s->in); }
static size_t out_len(const sl_stream *s) { return evbuffer_get_length(s->out); }

/* ---- the steps ---- */

static void arm_raw(tls_stream *ts)
{
    bool want;
    if (ts->phase == TS_DEAD)
        want = false;
    else if (ts->phase == TS_HANDSHAKE)
        want = true;   /* the handshake reads what it needs, whatever the owner wants */
    else
        want = ts->s.want_read && !ts->eof_seen && in_len(&ts->s) < ts->s.in_max && in_len(ts->raw) == 0 &&
               !answers_wait(ts);
    ts->raw->want_read = want;
    sl_stream_update(ts->raw);
}

static void handshake(tls_stream *ts)
{
    char err[140];
    sl_tls_status st = sl_tls_handshake(ts->tls, err, sizeof err);
    if (out_len(ts->raw) > 0)
        sl_stream_flush(ts->raw);
    if (st == SL_TLS_DONE) {
        ts->phase = TS_OPEN;
        ts->ev_ready = true;
    } else if (st == SL_TLS_FAIL) {
        fail(ts, EPROTO, "%s TLS: %s", side(ts), err);
    }
}

/* Plaintext from what raw holds, into `in`, while there is room. */
static void pump_in(tls_stream *ts)
{
    sl_stream *s = &ts->s;
    while (ts->phase == TS_OPEN && !ts->eof_seen && s->want_read && in_len(s) < s->in_max) {
        size_t raw_before = in_len(ts->raw);
        if (raw_before == 0 && sl_tls_pending(ts->tls) == 0 && !ts->raw->eof)
            return;   /* nothing to decrypt: wait for raw */
        size_t room = s->in_max - in_len(s);
        if (room > sizeof scratch)
            room = sizeof scratch;
        size_t got = 0;
        char err[140];
        sl_tls_status st = sl_tls_read(ts->tls, scratch, room, &got, err, sizeof err);
        if (got > 0 && evbuffer_add(s->in, scratch, got) != 0) {
            fail(ts, ENOMEM, "%s TLS: out of memory", side(ts));
            return;
        }
        if (out_len(ts->raw) > 0)
            sl_stream_flush(ts->raw);   /* an alert the session answered with */
        switch (st) {
        case SL_TLS_DONE:
            ts->ev_read = true;
            break;
        case SL_TLS_WANT:
            /* A record that carried no data (a warning alert) also says
             * WANT: go on while it consumed something. */
            if (in_len(ts->raw) == raw_before && sl_tls_pending(ts->tls) == 0)
                return;
            break;
        case SL_TLS_CLOSED:
            ts->eof_seen = true;
            ts->ev_eof = true;
            if (err[0])   /* no close_notify: HTTP framing tells whether anything was cut */
                snprintf(s->failure, sizeof s->failure, "%s TLS: %s", side(ts), err);
            return;
        case SL_TLS_FAIL:
            fail(ts, EPROTO, "%s TLS: %s", side(ts), err);
            return;
        }
    }
}

static void maybe_shut(tls_stream *ts)
{
    if (!ts->shut_wanted || ts->shut_done || ts->phase != TS_OPEN || out_len(&ts->s) > 0)
        return;
    ts->shut_done = true;
    sl_tls_close_notify(ts->tls);
    sl_stream_flush(ts->raw);
    sl_stream_shutdown(ts->raw);   /* once raw->out, the close_notify last, is written */
}

/* Plaintext from `out` into records in raw->out while raw->out is short. */
static void encrypt_out(tls_stream *ts)
{
    sl_stream *s = &ts->s;
    while (ts->phase == TS_OPEN && out_len(s) > 0) {
        if (out_len(ts->raw) >= OUT_AHEAD) {
            sl_stream_flush(ts->raw);
            if (out_len(ts->raw) >= OUT_AHEAD)
                break;   /* the socket is full: raw's DRAINED brings the rest */
        }
        size_t n = out_len(s) < RECORD_MAX ? out_len(s) : RECORD_MAX;
        unsigned char *p = evbuffer_pullup(s->out, (ev_ssize_t)n);
        char err[140];
        if (!p) {
            fail(ts, ENOMEM, "%s TLS: out of memory", side(ts));
            return;
        }
        if (sl_tls_write(ts->tls, p, n, err, sizeof err) != SL_TLS_DONE) {
            fail(ts, EPROTO, "%s TLS: %s", side(ts), err);
            return;
        }
        evbuffer_drain(s->out, n);
        s->written += n;
    }
    if (out_len(ts->raw) > 0)
        sl_stream_flush(ts->raw);
    if (ts->phase != TS_OPEN)
        return;
    if (out_len(s) > 0 || out_len(ts->raw) > 0)
        ts->out_waiting = true;
    else if (ts->out_waiting) {
        ts->out_waiting = false;
        ts->ev_drained = true;
    }
    maybe_shut(ts);
}

/* Whether the loop should run a step: plaintext can be made without
 * anything new from the socket. */
static bool step_due(const tls_stream *ts)
{
    const sl_stream *s = &ts->s;
    if (ts->phase == TS_HANDSHAKE)
        return (in_len(ts->raw) > 0 || ts->raw->eof) && !answers_wait(ts);
    if (ts->phase != TS_OPEN)
        return false;
    if (out_len(ts->raw) < OUT_AHEAD && (out_len(s) > 0 || (ts->shut_wanted && !ts->shut_done)))
        return true;   /* plaintext written before READY, or a shutdown asked for then */
    return s->want_read && !ts->eof_seen && in_len(s) < s->in_max &&
           (sl_tls_pending(ts->tls) > 0 || ((in_len(ts->raw) > 0 || ts->raw->eof) && !answers_wait(ts)));
}

static void step(tls_stream *ts)
{
    if (ts->phase == TS_HANDSHAKE)
        handshake(ts);
    /* Nothing is read for the owner before it has had READY. */
    if (ts->phase == TS_OPEN && !ts->ev_ready) {
        encrypt_out(ts);
        pump_in(ts);
    }
    arm_raw(ts);
}

static bool events_left(const tls_stream *ts)
{
    return ts->ev_ready || ts->ev_read || ts->ev_error || ts->ev_eof || ts->ev_drained;
}

/* One event to the owner, from the loop, the last thing done. The rest
 * (and a step still due) go on the next pass through `kick`. */
static void deliver(tls_stream *ts)
{
    sl_stream *s = &ts->s;
    sl_stream_event ev;
    if (ts->ev_ready) {
        ts->ev_ready = false;
        ev = SL_STREAM_READY;
    } else if (ts->ev_read) {
        ts->ev_read = false;
        ev = SL_STREAM_READ;
    } else if (ts->ev_error) {
        ts->ev_error = ts->ev_eof = ts->ev_drained = false;
        s->error = ts->pend_error;
        ev = SL_STREAM_ERROR;
    } else if (ts->ev_eof) {
        ts->ev_eof = false;
        s->eof = true;
        ev = SL_STREAM_EOF;
    } else if (ts->ev_drained) {
        ts->ev_drained = false;
        ev = SL_STREAM_DRAINED;
    } else {
        return;
    }
    if (s->error == 0 && (events_left(ts) || step_due(ts)))
        event_active(ts->kick, EV_TIMEOUT, 1);
    s->cb(s, ev, s->arg);   /* last: the owner may free us */
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    tls_stream *ts = arg;
    if (ts->s.error)
        return;
    if (ts->phase != TS_DEAD)
        step(ts);
    deliver(ts);
}

static void on_raw(sl_stream *raw, sl_stream_event ev, void *arg)
{
    tls_stream *ts = arg;
    if (ts->s.error)
        return;
    if (ev == SL_STREAM_ERROR && ts->phase != TS_DEAD) {
        fail(ts, raw->error ? raw->error : EIO, "%s connection failed%s: %s", side(ts),
             ts->phase == TS_HANDSHAKE ? " during the TLS handshake" : "", strerror(raw->error ? raw->error : EIO));
    } else if (ts->phase != TS_DEAD) {
        step(ts);
    }
    deliver(ts);
}

/* ---- the operations ---- */

static void after_call(tls_stream *ts)
{
    if (ts->s.error == 0 && (events_left(ts) || step_due(ts)))
        event_active(ts->kick, EV_TIMEOUT, 1);   /* from the loop, never from the owner's call */
}

static void ts_flush(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    if (ts->phase == TS_OPEN)
        encrypt_out(ts);
    else if (ts->phase == TS_HANDSHAKE && out_len(s) > 0)
        ts->out_waiting = true;   /* written once the handshake is done */
    after_call(ts);
}

static void ts_update(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    arm_raw(ts);
    after_call(ts);
}

static void ts_shutdown(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    ts->shut_wanted = true;
    if (ts->phase == TS_OPEN)
        encrypt_out(ts);   /* then the close_notify, once `out` is encrypted */
    after_call(ts);
}

static bool ts_pending(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    return in_len(s) > 0 || ts->eof_seen || ts->phase == TS_DEAD || s->error ||
           (ts->tls && sl_tls_pending(ts->tls) > 0) || sl_stream_pending(ts->raw);
}

static bool ts_flushed(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    return out_len(s) == 0 && sl_stream_flushed(ts->raw);
}

static int ts_fd(const sl_stream *s)
{
    return sl_stream_fd(((const tls_stream *)s)->raw);
}

static int ts_release_fd(sl_stream *s)
{
    (void)s;
    return -1;   /* the session's state cannot go with the socket */
}

static void ts_free(sl_stream *s)
{
    tls_stream *ts = (tls_stream *)s;
    if (ts->kick)
        event_free(ts->kick);
    sl_tls_free(ts->tls);
    sl_stream_free(ts->raw);
    if (s->in)
        evbuffer_free(s->in);
    if (s->out)
        evbuffer_free(s->out);
    free(ts);
}

static const sl_stream_ops tls_ops = {
    .flush = ts_flush,
    .update = ts_update,
    .shutdown = ts_shutdown,
    .pending = ts_pending,
    .fd = ts_fd,
    .release_fd = ts_release_fd,
    .free = ts_free,
    .flushed = ts_flushed,
};

static sl_stream *tls_stream_new(sl_stream *raw, bool server, sl_tls_server *srv, sl_tls_client *cli,
                                 const char *host, size_t in_max, sl_stream_cb cb, void *arg)
{
    tls_stream *ts = calloc(1, sizeof *ts);
    if (!ts) {
        sl_stream_free(raw);
        return NULL;
    }
    ts->s.ops = &tls_ops;
    ts->s.in_max = in_max;
    ts->s.want_read = raw->want_read;
    ts->s.cb = cb;
    ts->s.arg = arg;
    ts->s.base = raw->base;
    ts->server = server;
    ts->raw = raw;
    raw->cb = on_raw;
    raw->arg = ts;
    if (raw->in_max < RAW_IN_MAX)
        raw->in_max = RAW_IN_MAX;
    ts->s.in = evbuffer_new();
    ts->s.out = evbuffer_new();
    ts->kick = event_new(raw->base, -1, 0, on_kick, ts);
    if (!ts->s.in || !ts->s.out || !ts->kick) {
        ts_free(&ts->s);
        return NULL;
    }
    char err[140];
    ts->tls = server ? sl_tls_accept(srv, host, ts_send, ts_recv, ts, err, sizeof err)
                     : sl_tls_connect(cli, host, ts_send, ts_recv, ts, err, sizeof err);
    if (!ts->tls)
        fail(ts, EPROTO, "%s TLS: %s", side(ts), err);   /* the owner hears it from the loop */
    else if (raw->error)   /* told to the owner already, and raw will not say it again */
        fail(ts, raw->error, "%s connection failed before the TLS handshake: %s", side(ts), strerror(raw->error));
    else
        arm_raw(ts);
    event_active(ts->kick, EV_TIMEOUT, 1);   /* the handshake starts from the loop */
    return &ts->s;
}

sl_stream *sl_stream_tls_server(sl_stream *raw, sl_tls_server *srv, const char *host, size_t in_max,
                                sl_stream_cb cb, void *arg)
{
    return tls_stream_new(raw, true, srv, NULL, host, in_max, cb, arg);
}

sl_stream *sl_stream_tls_client(sl_stream *raw, sl_tls_client *cli, const char *host, size_t in_max,
                                sl_stream_cb cb, void *arg)
{
    return tls_stream_new(raw, false, NULL, cli, host, in_max, cb, arg);
}
