/* The splice relay: per direction a pipe, filled from the source socket and
 * drained into the destination. Backpressure is the pipe itself: while it
 * cannot be drained, the source is not read. Half-close: when a source ends
 * and its pipe is empty, the destination's write side is shut. */
#include "splice.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

#define CHUNK (1 << 20)   /* as much as the pipe takes */

typedef struct direction {
    int src, dst;
    int pipe[2];
    size_t in_pipe;
    bool src_eof, shut, blocked;   /* blocked: dst full, waiting to write */
    struct event *rd, *wr;         /* src readable, dst writable */
} direction;

struct splice_state {
    direction d[2];                /* 0: client -> origin, 1: origin -> client */
};

static bool pump(conn *c, int i);

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn *c = arg;
    /* Either direction may be waiting on this socket: try both. */
    if (pump(c, 0))
        pump(c, 1);
}

/* Moves what it can and returns with events armed for what it waits on.
 * Returns false if the connection was closed (and freed). */
static bool pump(conn *c, int i)
{
    direction *d = &c->sp->d[i];
    if (d->shut)
        return true;
    for (;;) {
        if (d->in_pipe > 0) {
            ssize_t n = splice(d->pipe[0], NULL, d->dst, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->in_pipe -= (size_t)n;
                if (i == 0)
                    c->x.bytes_up += (uint64_t)n;
                else
                    c->x.bytes_down += (uint64_t)n;
                conn_touch(c);
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN) {
                if (!d->blocked) {
                    d->blocked = true;
                    event_del(d->rd);
                    event_add(d->wr, NULL);
                }
                return true;
            }
            conn_close(c, i == 0 ? "origin_error" : "client_error");
            return false;
        }
        if (d->blocked) {
            d->blocked = false;
            event_del(d->wr);
            if (!d->src_eof)
                event_add(d->rd, NULL);
        }
        if (d->src_eof) {
            d->shut = true;
            shutdown(d->dst, SHUT_WR);
            if (c->sp->d[1 - i].shut) {
                conn_close(c, c->cli_eof_first ? "client_eof" : "origin_eof");
                return false;
            }
            return true;
        }
        if (d->pipe[0] < 0 && pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
            d->pipe[0] = d->pipe[1] = -1;
            conn_close(c, "out_of_descriptors");
            return false;
        }
        ssize_t n = splice(d->src, NULL, d->pipe[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            d->in_pipe += (size_t)n;
            continue;
        }
        if (n == 0) {
            if (!c->cli_eof && !c->up_eof)
                c->cli_eof_first = i == 0;
            if (i == 0)
                c->cli_eof = true;
            else
                c->up_eof = true;
            d->src_eof = true;
            event_del(d->rd);
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
            return true;   /* rd stays armed */
        conn_close(c, i == 0 ? "client_error" : "origin_error");
        return false;
    }
}

bool splice_start(conn *c)
{
    struct splice_state *sp = calloc(1, sizeof *sp);
    if (!sp)
        return false;
    int fds[2] = { bufferevent_getfd(c->cli), bufferevent_getfd(c->up) };
    for (int i = 0; i < 2; i++) {
        direction *d = &sp->d[i];
        d->src = fds[i];
        d->dst = fds[1 - i];
        d->pipe[0] = d->pipe[1] = -1;
        d->rd = event_new(c->w->base, d->src, EV_READ | EV_PERSIST, on_ready, c);
        d->wr = event_new(c->w->base, d->dst, EV_WRITE | EV_PERSIST, on_ready, c);
        if (!d->rd || !d->wr) {
            c->sp = sp;
            splice_free(c);
            return false;
        }
    }
    /* The bufferevents keep owning the sockets (they close them), but stop
     * watching them. */
    bufferevent_disable(c->cli, EV_READ | EV_WRITE);
    bufferevent_disable(c->up, EV_READ | EV_WRITE);
    c->sp = sp;
    event_add(sp->d[0].rd, NULL);
    event_add(sp->d[1].rd, NULL);
    return true;
}

void splice_free(conn *c)
{
    struct splice_state *sp = c->sp;
    if (!sp)
        return;
    for (int i = 0; i < 2; i++) {
        direction *d = &sp->d[i];
        if (d->rd)
            event_free(d->rd);
        if (d->wr)
            event_free(d->wr);
        if (d->pipe[0] >= 0)
            close(d->pipe[0]);
        if (d->pipe[1] >= 0)
            close(d->pipe[1]);
    }
    free(sp);
    c->sp = NULL;
}
