/* The socket transport of sl_stream: raw events and evbuffers, no
 * bufferevent. A bufferevent asks the kernel how much is readable (an
 * ioctl) before every read; here a read is one recv. */
#include "stream.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* One read's worth. Bytes are read into this per-thread buffer and copied:
 * the input buffer then gets a block the size of what came, not of what
 * might have (a client that stalls mid-head holds no more than it sent). */
#define READ_MAX (64 * 1024)
static _Thread_local char scratch[READ_MAX];

typedef struct sock_stream {
    sl_stream s;
    struct event_base *base;
    int fd;
    struct event *rd, *wr;        /* wr is made when first needed */
    bool rd_on, wr_on;
    bool shut_wanted, shut_done;
} sock_stream;

static void arm_read(sock_stream *k, bool on)
{
    if (on == k->rd_on || !k->rd)
        return;
    k->rd_on = on;
    if (on)
        event_add(k->rd, NULL);
    else
        event_del(k->rd);
}

static void on_writable(evutil_socket_t fd, short what, void *arg);

static bool arm_write(sock_stream *k, bool on)
{
    if (on && !k->wr) {
        k->wr = event_new(k->base, k->fd, EV_WRITE | EV_PERSIST, on_writable, k);
        if (!k->wr)
            return false;
    }
    if (on == k->wr_on)
        return true;
    k->wr_on = on;
    if (on)
        event_add(k->wr, NULL);
    else
        event_del(k->wr);
    return true;
}

/* Write what `out` holds. 1: all written; 0: the socket is full; -1: an
 * error (in s.error). */
static int write_out(sock_stream *k)
{
    struct evbuffer *out = k->s.out;
    while (evbuffer_get_length(out) > 0) {
        int n = evbuffer_write_atmost(out, k->fd, -1);
        if (n > 0) {
            k->s.written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        k->s.error = n < 0 ? errno : EPIPE;
        return -1;
    }
    if (k->shut_wanted && !k->shut_done) {
        k->shut_done = true;
        shutdown(k->fd, SHUT_WR);
    }
    return 1;
}

static void fail(sock_stream *k)
{
    arm_read(k, false);
    arm_write(k, false);
    k->s.cb(&k->s, SL_STREAM_ERROR, k->s.arg);   /* last: the owner may free us */
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    sock_stream *k = arg;
    sl_stream *s = &k->s;
    size_t len = evbuffer_get_length(s->in);
    if (len >= s->in_max) {
        arm_read(k, false);
        return;
    }
    size_t room = s->in_max - len < sizeof scratch ? s->in_max - len : sizeof scratch;
    ssize_t n = recv(fd, scratch, room, 0);
    if (n > 0) {
        if (evbuffer_add(s->in, scratch, (size_t)n) != 0) {
            s->error = ENOMEM;
            fail(k);
            return;
        }
        if (len + (size_t)n >= s->in_max)
            arm_read(k, false);
        s->cb(s, SL_STREAM_READ, s->arg);
        return;
    }
    if (n == 0) {
        s->eof = true;
        arm_read(k, false);
        s->cb(s, SL_STREAM_EOF, s->arg);
        return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
    s->error = errno;
    fail(k);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sock_stream *k = arg;
    if (k->s.error) {   /* found by a flush: delivered from the loop */
        fail(k);
        return;
    }
    int r = write_out(k);
    if (r < 0) {
        fail(k);
        return;
    }
    if (r == 0)
        return;
    arm_write(k, false);
    k->s.cb(&k->s, SL_STREAM_DRAINED, k->s.arg);
}

static void sock_flush(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    if (s->error || k->fd < 0 || (k->wr_on && evbuffer_get_length(s->out) > 0))
        return;   /* an error is on its way, or the write event has it */
    int r = write_out(k);
    if (r == 1)
        return;
    if (!arm_write(k, true)) {
        s->error = ENOMEM;
        r = -1;
    }
    if (r < 0 && k->wr)
        event_active(k->wr, EV_WRITE, 1);   /* the error, from the loop */
}

static void sock_update(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    if (k->fd < 0)
        return;
    arm_read(k, s->want_read && !s->eof && !s->error && evbuffer_get_length(s->in) < s->in_max);
}

static void sock_shutdown(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    k->shut_wanted = true;
    if (!k->shut_done && k->fd >= 0 && !s->error && evbuffer_get_length(s->out) == 0) {
        k->shut_done = true;
        shutdown(k->fd, SHUT_WR);
    }
}

static bool sock_pending(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    if (evbuffer_get_length(s->in) > 0 || s->eof || s->error || k->fd < 0)
        return true;
    char b;
    ssize_t n = recv(k->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

static void drop_events(sock_stream *k)
{
    if (k->rd)
        event_free(k->rd);
    if (k->wr)
        event_free(k->wr);
    k->rd = k->wr = NULL;
    k->rd_on = k->wr_on = false;
}

static int sock_fd(const sl_stream *s)
{
    return ((const sock_stream *)s)->fd;
}

static int sock_release_fd(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    drop_events(k);
    int fd = k->fd;
    k->fd = -1;
    return fd;
}

static void sock_free(sl_stream *s)
{
    sock_stream *k = (sock_stream *)s;
    drop_events(k);
    if (k->fd >= 0)
        close(k->fd);
    if (s->in)
        evbuffer_free(s->in);
    if (s->out)
        evbuffer_free(s->out);
    free(k);
}

static const sl_stream_ops sock_ops = {
    .flush = sock_flush,
    .update = sock_update,
    .shutdown = sock_shutdown,
    .pending = sock_pending,
    .fd = sock_fd,
    .release_fd = sock_release_fd,
    .free = sock_free,
};

sl_stream *sl_stream_socket(struct event_base *base, int fd, size_t in_max, sl_stream_cb cb, void *arg)
{
    sock_stream *k = calloc(1, sizeof *k);
    if (!k) {
        close(fd);
        return NULL;
    }
    k->s.ops = &sock_ops;
    k->s.in_max = in_max;
    k->s.cb = cb;
    k->s.arg = arg;
    k->base = base;
    k->s.base = base;
    k->fd = fd;
    k->s.in = evbuffer_new();
    k->s.out = evbuffer_new();
    k->rd = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, k);
    if (!k->s.in || !k->s.out || !k->rd) {
        sock_free(&k->s);
        return NULL;
    }
    return &k->s;
}
