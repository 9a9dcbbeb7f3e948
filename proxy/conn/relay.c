/* The tunnel relay: two directions, each a source socket, a destination
 * socket, the bytes read but not yet written ("held"), and later a pipe.
 *
 * Backpressure: a direction holding bytes stops reading its source and
 * waits for its destination to become writable. At most one read's worth
 * (RELAY_READ bytes) is ever held per direction in sluice's memory; in
 * splice mode, up to a pipe's worth (PIPE_BYTES) waits in the kernel.
 * Half-close: when a source ends and everything before the end is written,
 * the destination's write side is shut; when both are shut, the tunnel is
 * over. */
#include "relay.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

#define RELAY_READ (64 * 1024)     /* one read; also the most a direction holds */
#define SPLICE_CHUNK (1 << 20)     /* as much as the pipe takes */
#define PIPE_BYTES (1 << 20)
#define MAX_ROUNDS 8               /* reads per wake-up before other sockets get a turn */

typedef struct direction {
    int src, dst;
    char *held;                    /* bytes read, not yet written (malloc'd) */
    size_t held_off, held_len;
    int pipe[2];                   /* splice mode: the pipe, and what is in it */
    size_t in_pipe;
    bool spliced;
    uint64_t moved;                /* bytes written to dst */
    size_t own;                    /* held bytes that are sluice's (the 200): not counted */
    bool src_eof, shut, blocked;   /* blocked: dst full, waiting to write */
    struct event *rd, *wr;         /* src readable; dst writable (made when first needed) */
} direction;

struct relay {
    direction d[2];                /* 0: client -> origin, 1: origin -> client */
    int fd[2];                     /* client, origin: owned, closed in relay_free */
};

/* One copy buffer per worker thread: a direction's bytes stay here only
 * between its read and its write. */
static _Thread_local char scratch[RELAY_READ];

static bool pump(conn *c, int i);

/* The loop calls these for a tunnel's sockets: they enter and leave the
 * connection (the free rule, conn.h). */
static void on_client_to_origin(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn *c = arg;
    conn_enter(c);
    pump(c, 0);
    conn_leave(c);
}

static void on_origin_to_client(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn *c = arg;
    conn_enter(c);
    pump(c, 1);
    conn_leave(c);
}

static event_callback_fn const callbacks[2] = { on_client_to_origin, on_origin_to_client };

static const char *src_error(int i) { return i == 0 ? "client_error" : "origin_error"; }
static const char *dst_error(int i) { return i == 0 ? "origin_error" : "client_error"; }

static void delivered(conn *c, int i, size_t n)
{
    direction *d = &c->rl->d[i];
    size_t own = n < d->own ? n : d->own;
    d->own -= own;
    n -= own;
    d->moved += n;
    if (i == 0)
        c->x.bytes_up += n;
    else
        c->x.bytes_down += n;
    conn_touch(c);
}

/* The destination is full: stop reading, wait for it. False: out of memory
 * (the caller closes). */
static bool block(conn *c, int i)
{
    direction *d = &c->rl->d[i];
    if (d->blocked)
        return true;
    if (!d->wr) {
        d->wr = event_new(c->w->base, d->dst, EV_WRITE | EV_PERSIST, callbacks[i], c);
        if (!d->wr)
            return false;
    }
    d->blocked = true;
    event_del(d->rd);
    event_add(d->wr, NULL);
    return true;
}

static void unblock(direction *d)
{
    if (!d->blocked)
        return;
    d->blocked = false;
    event_del(d->wr);
    if (!d->src_eof)
        event_add(d->rd, NULL);
}

static void source_ended(conn *c, int i)
{
    direction *d = &c->rl->d[i];
    if (!c->cli_eof && !c->up_eof)
        c->cli_eof_first = i == 0;
    if (i == 0)
        c->cli_eof = true;
    else
        c->up_eof = true;
    d->src_eof = true;
    event_del(d->rd);
}

/* Hold the unwritten rest of a read. */
static bool hold(direction *d, const char *p, size_t n)
{
    d->held = malloc(n);
    if (!d->held)
        return false;
    memcpy(d->held, p, n);
    d->held_off = 0;
    d->held_len = n;
    return true;
}

/* Write what the direction holds (bytes or pipe contents). Returns 1 when
 * all is written, 0 when the destination is full, -1 on an error. */
static int flush_held(conn *c, int i)
{
    direction *d = &c->rl->d[i];
    while (d->held_len > 0 || d->in_pipe > 0) {
        ssize_t n;
        if (d->held_len > 0)
            n = send(d->dst, d->held + d->held_off, d->held_len, MSG_NOSIGNAL);
        else
            n = splice(d->pipe[0], NULL, d->dst, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return -1;
        delivered(c, i, (size_t)n);
        if (d->held_len > 0) {
            d->held_off += (size_t)n;
            d->held_len -= (size_t)n;
            if (d->held_len == 0) {
                free(d->held);
                d->held = NULL;
                d->held_off = 0;
            }
        } else {
            d->in_pipe -= (size_t)n;
        }
    }
    return 1;
}

/* Moves what it can and returns with events armed for what it waits on;
 * with may_read false it only writes what is held. Returns false if the
 * connection was closed (it is freed when the callback leaves). */
static bool pump_ex(conn *c, int i, bool may_read)
{
    direction *d = &c->rl->d[i];
    if (d->shut)
        return true;
    for (int round = 0;; round++) {
        int f = flush_held(c, i);
        if (f < 0) {
            conn_close(c, dst_error(i));
            return false;
        }
        if (f == 0) {
            if (!block(c, i)) {
                conn_close(c, "out_of_memory");
                return false;
            }
            return true;
        }
        unblock(d);
        if (d->src_eof) {
            d->shut = true;
            if (c->rl->d[1 - i].shut) {   /* both ended: close() sends the FIN */
                conn_close(c, c->cli_eof_first ? "client_eof" : "origin_eof");
                return false;
            }
            shutdown(d->dst, SHUT_WR);
            return true;
        }
        if (!may_read || round >= MAX_ROUNDS)
            return true;   /* level-triggered: the loop calls again */

        if (!d->spliced && d->moved >= RELAY_SPLICE_AFTER) {
            if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == 0) {
                d->spliced = true;
                /* A bigger pipe moves more per splice; the default
                 * (64 KiB) is kept if the system limit says no. */
                fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
            } else {
                d->pipe[0] = d->pipe[1] = -1;   /* keep copying */
            }
        }
        ssize_t n;
        if (d->spliced)
            n = splice(d->src, NULL, d->pipe[1], NULL, SPLICE_CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        else
            n = recv(d->src, scratch, sizeof scratch, 0);
        if (n == 0) {
            source_ended(c, i);
            continue;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return true;   /* rd stays armed */
            conn_close(c, src_error(i));
            return false;
        }
        if (d->spliced) {
            d->in_pipe += (size_t)n;
            continue;
        }
        /* Straight on to the destination; only a rest that does not fit is
         * held. */
        ssize_t w = send(d->dst, scratch, (size_t)n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            w = 0;
        if (w < 0) {
            conn_close(c, dst_error(i));
            return false;
        }
        if (w > 0)
            delivered(c, i, (size_t)w);
        if (w < n) {
            if (!hold(d, scratch + w, (size_t)(n - w)) || !block(c, i)) {
                conn_close(c, "out_of_memory");
                return false;
            }
            return true;
        }
        if ((size_t)n < sizeof scratch)
            return true;   /* probably drained; if not, the loop calls again */
    }
}

static bool pump(conn *c, int i)
{
    return pump_ex(c, i, true);
}

/* Move what an evbuffer holds to the end of a direction's held bytes. */
static bool take(direction *d, struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    if (n == 0)
        return true;
    char *p = realloc(d->held, d->held_len + n);
    if (!p)
        return false;
    d->held = p;
    if (evbuffer_remove(b, p + d->held_len, n) != (int)n)
        return false;
    d->held_len += n;
    return true;
}

bool relay_start(conn *c)
{
    struct relay *rl = calloc(1, sizeof *rl);
    if (!rl) {
        conn_close(c, "out_of_memory");
        return false;
    }
    rl->fd[0] = rl->fd[1] = -1;
    c->rl = rl;
    /* The streams still own the sockets until released below. */
    int fds[2] = { sl_stream_fd(c->cli), sl_stream_fd(c->up) };
    for (int i = 0; i < 2; i++) {
        direction *d = &rl->d[i];
        d->src = fds[i];
        d->dst = fds[1 - i];
        d->pipe[0] = d->pipe[1] = -1;
        d->rd = event_new(c->w->base, d->src, EV_READ | EV_PERSIST, callbacks[i], c);
    }
    if (!rl->d[0].rd || !rl->d[1].rd) {
        conn_close(c, "out_of_memory");
        return false;
    }
    /* The relay's read events go in before the streams' come out, so a
     * socket that was being read stays in epoll as it is: no change. */
    c->cli_eof = c->cli->eof;   /* the client half-closed while the tunnel was set up */
    c->cli_eof_first = c->cli_eof;
    if (c->cli_eof)
        rl->d[0].src_eof = true;
    else
        event_add(rl->d[0].rd, NULL);
    event_add(rl->d[1].rd, NULL);
    rl->fd[0] = sl_stream_release_fd(c->cli);
    rl->fd[1] = sl_stream_release_fd(c->up);
    /* In stream order: what was queued for a side goes before what was read
     * from the other. What was queued for the client is sluice's own reply,
     * not tunnel payload. */
    if (!take(&rl->d[0], c->up->out) || !take(&rl->d[0], c->cli->in) || !take(&rl->d[1], c->cli->out) ||
        !((rl->d[1].own = rl->d[1].held_len), take(&rl->d[1], c->up->in))) {
        conn_close(c, "out_of_memory");
        return false;
    }
    sl_stream_free(c->cli);
    sl_stream_free(c->up);
    c->cli = c->up = NULL;
    /* Write what was held at once (the 200 reply, early bytes); reading
     * waits for the sockets to say there is something. */
    return pump_ex(c, 1, false) && pump_ex(c, 0, false);
}

/* conn_close: no more events; the sockets and memory go in relay_free. */
void relay_stop(conn *c)
{
    struct relay *rl = c->rl;
    if (!rl)
        return;
    for (int i = 0; i < 2; i++) {
        if (rl->d[i].rd)
            event_del(rl->d[i].rd);
        if (rl->d[i].wr)
            event_del(rl->d[i].wr);
    }
}

void relay_free(conn *c)
{
    struct relay *rl = c->rl;
    if (!rl)
        return;
    for (int i = 0; i < 2; i++) {
        direction *d = &rl->d[i];
        if (d->rd)
            event_free(d->rd);
        if (d->wr)
            event_free(d->wr);
        if (d->pipe[0] >= 0)
            close(d->pipe[0]);
        if (d->pipe[1] >= 0)
            close(d->pipe[1]);
        free(d->held);
        if (rl->fd[i] >= 0)
            close(rl->fd[i]);
    }
    free(rl);
    c->rl = NULL;
}
