/* A second transport for the connection engine, in memory: an sl_stream
 * whose peer is the test. What the test "sends" waits on a wire until the
 * engine wants to read; what the engine writes goes to the peer only as far
 * as the peer's window allows (a peer that does not read). Events come from
 * the event loop, as the socket transport's do, so the engine runs exactly
 * as it does on sockets; nothing here touches the network. */
#ifndef SLUICE_TEST_MEMSTREAM_H
#define SLUICE_TEST_MEMSTREAM_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>

#include "stream.h"

typedef struct mem_stream {
    sl_stream s;
    struct event *rd, *wr;
    struct evbuffer *wire;      /* sent by the peer, not read yet */
    struct evbuffer *peer;      /* written to the peer (the test's: it outlives the stream) */
    size_t window;              /* how much more the peer takes */
    size_t read_chunk;          /* at most this much per read */
    bool peer_eof, peer_reset;
    bool shut, blocked;
    int *frees;                 /* incremented when the engine frees it */
} mem_stream;

static void mem_update(sl_stream *s)
{
    mem_stream *m = (mem_stream *)s;
    bool ready = evbuffer_get_length(m->wire) > 0 || m->peer_eof || m->peer_reset;
    if (s->want_read && !s->eof && !s->error && evbuffer_get_length(s->in) < s->in_max && ready)
        event_active(m->rd, EV_READ, 1);
}

static void mem_flush(sl_stream *s)
{
    mem_stream *m = (mem_stream *)s;
    if (s->error)
        return;
    size_t n = evbuffer_get_length(s->out);
    if (n > m->window)
        n = m->window;
    evbuffer_remove_buffer(s->out, m->peer, n);
    m->window -= n;
    s->written += n;
    m->blocked = evbuffer_get_length(s->out) > 0;
}

static void mem_on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mem_stream *m = arg;
    sl_stream *s = &m->s;
    if (!s->want_read || s->eof || s->error)
        return;
    if (m->peer_reset) {
        s->error = 104;   /* ECONNRESET */
        s->cb(s, SL_STREAM_ERROR, s->arg);
        return;
    }
    size_t room = s->in_max - evbuffer_get_length(s->in), n = evbuffer_get_length(m->wire);
    if (n > room)
        n = room;
    if (n > m->read_chunk)
        n = m->read_chunk;
    if (n > 0) {
        evbuffer_remove_buffer(m->wire, s->in, n);
        s->cb(s, SL_STREAM_READ, s->arg);
        return;
    }
    if (m->peer_eof && evbuffer_get_length(m->wire) == 0) {
        s->eof = true;
        s->cb(s, SL_STREAM_EOF, s->arg);
    }
}

static void mem_on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mem_stream *m = arg;
    if (!m->blocked)
        return;
    mem_flush(&m->s);
    if (!m->blocked)
        m->s.cb(&m->s, SL_STREAM_DRAINED, m->s.arg);
}

static void mem_shutdown(sl_stream *s) { ((mem_stream *)s)->shut = true; }

static bool mem_pending(sl_stream *s)
{
    mem_stream *m = (mem_stream *)s;
    return evbuffer_get_length(s->in) > 0 || evbuffer_get_length(m->wire) > 0 || m->peer_eof ||
           m->peer_reset || s->eof;
}

static size_t mem_unsent(const sl_stream *s) { return evbuffer_get_length(s->out); }
static int mem_fd(const sl_stream *s) { (void)s; return -1; }
static int mem_release_fd(sl_stream *s) { (void)s; return -1; }

static void mem_free(sl_stream *s)
{
    mem_stream *m = (mem_stream *)s;
    if (m->frees)
        (*m->frees)++;
    event_free(m->rd);
    event_free(m->wr);
    evbuffer_free(m->wire);
    evbuffer_free(s->in);
    evbuffer_free(s->out);
    free(m);
}

static const sl_stream_ops mem_ops = {
    .flush = mem_flush, .update = mem_update, .shutdown = mem_shutdown, .pending = mem_pending,
    .unsent = mem_unsent, .fd = mem_fd, .release_fd = mem_release_fd, .free = mem_free,
};

static inline mem_stream *mem_new(struct event_base *base, sl_stream_cb cb, void *arg, int *frees,
                                   struct evbuffer *peer)
{
    mem_stream *m = calloc(1, sizeof *m);
    m->s.ops = &mem_ops;
    m->s.in = evbuffer_new();
    m->s.out = evbuffer_new();
    m->s.in_max = 64 * 1024;
    m->s.cb = cb;
    m->s.arg = arg;
    m->wire = evbuffer_new();
    m->peer = peer;
    m->window = SIZE_MAX;
    m->read_chunk = 64 * 1024;
    m->frees = frees;
    m->rd = event_new(base, -1, 0, mem_on_read, m);
    m->wr = event_new(base, -1, 0, mem_on_write, m);
    return m;
}

/* The peer sends bytes. */
static inline void mem_send(mem_stream *m, const void *p, size_t n)
{
    evbuffer_add(m->wire, p, n);
    mem_update(&m->s);
}

/* The peer ends its side (after what it sent). */
static inline void mem_eof(mem_stream *m)
{
    m->peer_eof = true;
    mem_update(&m->s);
}

/* The peer takes n more bytes (SIZE_MAX: everything from now on). */
static inline void mem_window(mem_stream *m, size_t n)
{
    m->window = n == SIZE_MAX || SIZE_MAX - m->window < n ? SIZE_MAX : m->window + n;
    if (m->blocked)
        event_active(m->wr, EV_WRITE, 1);
}

#endif
