/*
 * floor: the relay floor of the benchmark. A deliberately minimal forward
 * proxy, written to make as few system calls per connection as it can, so
 * that the table has a column showing what relaying itself costs on this
 * machine (where every system call is expensive, in user time as well as in
 * system time). It is not a gate and must never be used as one.
 *
 *   floor --listen IP:PORT --allow IP:PORT [--allow IP:PORT]... [--threads N]
 *
 * --threads defaults to the number of online CPUs (sluice runs one worker
 * per core). Each thread has its own listening socket (SO_REUSEPORT; the
 * kernel spreads new connections over them), TCP_NODELAY set on the
 * listener (accepted sockets inherit it), and its own epoll. Every socket
 * is registered once, edge-triggered (close takes it out again): the
 * origin for reading and writing (the connect's end is a writable edge),
 * the client for reading only, since a client socket added for writing
 * reports itself writable at once, which costs a wake-up per connection.
 * Only a client that stops taking bytes (bulk) is modified, once, to be
 * told when it is writable again.
 *
 * A client sends one request head (at most 8 KiB, possibly in pieces):
 *   CONNECT a.b.c.d:port HTTP/1.1    if a.b.c.d:port is an --allow entry:
 *       connect, wait until writable, SO_ERROR (the connect must be known to
 *       have worked before the client is told so), "200 Connection
 *       established", then relay bytes both ways. Bytes the client sent
 *       after the head go to the origin first.
 *   GET http://a.b.c.d:port/... HTTP/1.1   (absolute form, any method): if
 *       allowed, connect the same way, send the head and everything after
 *       it to the origin unchanged, and relay raw bytes both ways for the
 *       rest of the connection. There is NO per-request parsing: the first
 *       head decides where the whole client connection goes, and later
 *       requests on it (keep-alive) are never looked at. That is the point:
 *       it is the cheapest thing that can carry the bench's keep-alive
 *       requests, not an HTTP proxy.
 *   anything else, or not allowed: 403 (a head that is not HTTP/1.x or
 *       longer than 8 KiB: 400; a connect that fails: 502), the write side
 *       shut, and the socket closed once the client closes.
 * A direction's bytes go recv -> send through one 64 KiB buffer per thread;
 * a rest the destination does not take is held (allocated only then) and
 * that direction stops reading until it is written. After 256 KiB a
 * direction moves its bytes with splice(2) through a 1 MiB pipe, as
 * sluice's relay does (see SPLICE_AFTER for what that measured). EOF on one
 * side shuts the other's write side; both ended, or any error, closes both.
 *
 * What it omits, compared with sluice (each of these costs sluice time per
 * connection that the floor does not pay):
 *   - policy: no host names, wildcards, CIDR rules, port rules, the check
 *     that an address is public unicast, TLS SNI checks on port 443, or
 *     admission control; only an exact IPv4:port allowlist;
 *   - DNS: none (targets must be IPv4 literals);
 *   - the decision log: no allow/deny/close lines, no SHA-256 hash chain,
 *     no log thread;
 *   - HTTP: no per-request parsing, header rewriting (Via, hop-by-hop
 *     headers), origin-form rewriting, error pages or keep-alive handling
 *     of its own: after the first head a connection is a byte stream;
 *   - timeouts (head, connect, idle) and limits (clients, head size beyond
 *     the 8 KiB buffer, per-client), metrics, the admin endpoint, graceful
 *     drain, configuration reload.
 *
 * Prints "READY" on standard output once listening. SIGTERM/SIGINT close
 * every connection, free everything and end it with status 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"

#define HEAD_CAP  8192            /* the longest request head */
#define SCRATCH   (64 * 1024)     /* one recv; per thread */
#define PIPE_BYTES (1 << 20)
#define MAX_ALLOW 64
#define MAX_THREADS 256
#define NEVENTS   256

/* Bulk through one tunnel (`loadgen bulk`, 1 GiB, in a network namespace
 * of its own on this 2-core VM, three rounds, alternated): splice through a
 * 1 MiB pipe after 256 KiB gave 851-908 MB/s at 0.43-0.59 s of CPU per GiB
 * (almost all system time); recv/send through the 64 KiB buffer all the way
 * 646-818 MB/s at 0.95-1.19 s per GiB (sluice, splicing: 794-951 MB/s at
 * 0.47-0.55 s). So splice is kept. -DFLOOR_NO_SPLICE builds the other. */
#ifdef FLOOR_NO_SPLICE
#define SPLICE_AFTER UINT64_MAX
#else
#define SPLICE_AFTER (256u * 1024)
#endif

/* epoll data: a pair's address with the end (0 client, 1 origin) in bit 0;
 * these two values are never addresses. */
#define TAG_LISTENER 0u
#define TAG_STOP     2u

enum state {
    S_HEAD,        /* reading the client's request head */
    S_CONNECTING,  /* connect to the origin in progress */
    S_RELAY,       /* bytes both ways */
    S_REFUSED,     /* refusal sent, write side shut: waiting for the client's EOF */
};

/* Direction i: from end i to end 1 - i. */
struct dir {
    char *held;                 /* bytes read, not yet written (malloc'd, only then) */
    uint32_t held_off, held_len;
    int pipe[2];                /* after SPLICE_AFTER bytes */
    uint32_t in_pipe;
    uint64_t moved;
    bool eof;                   /* the source said EOF */
    bool shut;                  /* ... and the destination's write side is shut */
};

struct pair {
    struct pair *prev, *next;   /* the thread's live pairs; next: its dead list */
    int fd[2];                  /* client, origin (-1 until there is one) */
    uint8_t state;
    bool dead;
    bool is_connect;            /* CONNECT (200 to send) or absolute-form */
    bool readable[2];           /* edge-triggered: may have bytes or EOF to read */
    bool hup[2];                /* EOF or an error is pending: read to the end */
    bool out_armed[2];          /* registered for EPOLLOUT */
    struct dir d[2];
    char *head;                 /* a head that came in pieces (HEAD_CAP bytes) */
    uint32_t head_len;
};

struct worker {
    pthread_t tid;
    int ep, lfd, stopfd;
    bool accept_paused;
    struct timespec resume_at;
    struct pair *live, *dead;
    char scratch[SCRATCH];
};

static struct sockaddr_in allow[MAX_ALLOW];
static int n_allow;

static const char R200[] = "HTTP/1.1 200 Connection established\r\n\r\n";
static const char R400[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char R403[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char R502[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static void die(const char *what)
{
    fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: floor --listen IP:PORT --allow IP:PORT [--allow IP:PORT]... [--threads N]\n");
    exit(2);
}

/* ---- pairs ---- */

/* The one way a pair ends: both sockets closed (which also takes them out
 * of epoll), its buffers freed; the struct itself is freed after the
 * current batch of events, which may still name it. */
static void pair_close(struct worker *w, struct pair *p)
{
    if (p->dead)
        return;
    p->dead = true;
    for (int i = 0; i < 2; i++) {
        if (p->fd[i] >= 0)
            close(p->fd[i]);
        p->fd[i] = -1;
        free(p->d[i].held);
        p->d[i].held = NULL;
        if (p->d[i].pipe[0] >= 0) {
            close(p->d[i].pipe[0]);
            close(p->d[i].pipe[1]);
        }
    }
    free(p->head);
    p->head = NULL;
    if (p->prev)
        p->prev->next = p->next;
    else
        w->live = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->next = w->dead;
    w->dead = p;
}

static void free_dead(struct worker *w)
{
    while (w->dead) {
        struct pair *p = w->dead;
        w->dead = p->next;
        free(p);
    }
}

static bool hold(struct dir *d, const char *b, size_t n)
{
    d->held = malloc(n);
    if (!d->held)
        return false;
    memcpy(d->held, b, n);
    d->held_off = 0;
    d->held_len = (uint32_t)n;
    return true;
}

static bool is_allowed(const struct sockaddr_in *sa)
{
    for (int i = 0; i < n_allow; i++)
        if (allow[i].sin_addr.s_addr == sa->sin_addr.s_addr && allow[i].sin_port == sa->sin_port)
            return true;
    return false;
}

/* ---- relay ---- */

/* The destination end is full: be told when it is writable. */
static bool arm_out(struct worker *w, struct pair *p, int end)
{
    if (p->out_armed[end])
        return true;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                              .data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)end };
    if (epoll_ctl(w->ep, EPOLL_CTL_MOD, p->fd[end], &ev) < 0)
        return false;
    p->out_armed[end] = true;
    return true;
}

/* Wait for end to be writable; false if the pair was closed. */
static bool wait_out(struct worker *w, struct pair *p, int end)
{
    if (arm_out(w, p, end))
        return true;
    pair_close(w, p);
    return false;
}

/* Write what direction i holds: held bytes, or what is in its pipe.
 * 1: all written; 0: the destination is full (EPOLLOUT armed); -1: the
 * pair was closed. */
static int flush(struct worker *w, struct pair *p, int i)
{
    struct dir *d = &p->d[i];
    int dst = p->fd[1 - i];
    while (d->held_len > 0 || d->in_pipe > 0) {
        ssize_t n = d->held_len > 0
                        ? send(dst, d->held + d->held_off, d->held_len, MSG_NOSIGNAL)
                        : splice(d->pipe[0], NULL, dst, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return wait_out(w, p, 1 - i) ? 0 : -1;
        if (n <= 0) {
            pair_close(w, p);
            return -1;
        }
        d->moved += (uint64_t)n;
        if (d->held_len > 0) {
            d->held_off += (uint32_t)n;
            d->held_len -= (uint32_t)n;
            if (d->held_len == 0) {
                free(d->held);
                d->held = NULL;
            }
        } else {
            d->in_pipe -= (uint32_t)n;
        }
    }
    return 1;
}

/* Move what direction i can move now. Returns with the pair closed, or with
 * the direction waiting: for its destination to take held bytes (an EPOLLOUT
 * edge on it), or for its source to have more (an EPOLLIN edge). */
static void pump(struct worker *w, struct pair *p, int i)
{
    struct dir *d = &p->d[i];
    int src = p->fd[i], dst = p->fd[1 - i];
    if (d->shut)
        return;
    for (;;) {
        if (flush(w, p, i) <= 0)
            return;
        if (d->eof) {
            d->shut = true;
            /* both ended: close() sends the FINs, no shutdown needed */
            if (p->d[1 - i].shut)
                pair_close(w, p);
            else
                shutdown(dst, SHUT_WR);
            return;
        }
        if (!p->readable[i])
            return;
        if (d->pipe[0] < 0 && d->moved >= SPLICE_AFTER) {
            if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == 0)
                fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
            else
                d->pipe[0] = d->pipe[1] = -1;   /* keep copying */
        }
        ssize_t n;
        if (d->pipe[0] >= 0)
            n = splice(src, NULL, d->pipe[1], NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        else
            n = recv(src, w->scratch, SCRATCH, 0);
        if (n == 0) {
            d->eof = true;
            p->readable[i] = false;
            continue;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                p->readable[i] = false;
                return;
            }
            pair_close(w, p);
            return;
        }
        if (d->pipe[0] >= 0) {
            d->in_pipe = (uint32_t)n;
            continue;
        }
        ssize_t s = send(dst, w->scratch, (size_t)n, MSG_NOSIGNAL);
        if (s < 0 && (errno == EAGAIN || errno == EINTR))
            s = 0;
        if (s < 0) {
            pair_close(w, p);
            return;
        }
        d->moved += (uint64_t)s;
        if (s < n) {
            if (!hold(d, w->scratch + s, (size_t)(n - s)))
                pair_close(w, p);
            else
                wait_out(w, p, 1 - i);
            return;
        }
        /* A short read emptied the socket: the next bytes bring a new edge.
         * Only an EOF or error already reported must still be read. */
        if (n < SCRATCH && !p->hup[i]) {
            p->readable[i] = false;
            return;
        }
    }
}

/* ---- refusals ---- */

/* Read and drop what the client sends until it closes. */
static void drain(struct worker *w, struct pair *p)
{
    while (p->readable[0]) {
        ssize_t n = recv(p->fd[0], w->scratch, SCRATCH, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            p->readable[0] = false;
            return;
        }
        if (n <= 0) {
            pair_close(w, p);
            return;
        }
        if (n < SCRATCH && !p->hup[0])
            p->readable[0] = false;
    }
}

/* Answer with a refusal, shut the write side, and close once the client
 * has closed, so that it is not reset before it reads the answer. */
static void refuse(struct worker *w, struct pair *p, const char *reply, size_t len)
{
    (void)!send(p->fd[0], reply, len, MSG_NOSIGNAL);   /* < 100 bytes into an empty buffer */
    shutdown(p->fd[0], SHUT_WR);
    if (p->fd[1] >= 0) {
        close(p->fd[1]);
        p->fd[1] = -1;
    }
    free(p->head);
    p->head = NULL;
    free(p->d[0].held);
    p->d[0].held = NULL;
    p->d[0].held_len = 0;
    p->state = S_REFUSED;
    drain(w, p);
}

/* ---- the head ---- */

/* Parses the head buf[0..hlen) (which ends in CRLF CRLF). 0: allowed, *sa
 * is where to go; -1: not allowed or not a form the floor relays (403);
 * -2: not HTTP (400). */
static int parse_head(const char *buf, size_t hlen, struct sockaddr_in *sa, bool *is_connect)
{
    const char *eol = memchr(buf, '\n', hlen);
    size_t llen = (size_t)(eol - buf);
    if (llen > 0 && buf[llen - 1] == '\r')
        llen--;
    const char *sp1 = memchr(buf, ' ', llen);
    if (!sp1 || sp1 == buf)
        return -2;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', llen - (size_t)(target - buf));
    if (!sp2 || sp2 == target)
        return -2;
    const char *ver = sp2 + 1;
    if ((size_t)(buf + llen - ver) != 8 || memcmp(ver, "HTTP/1.", 7) != 0)
        return -2;
    size_t mlen = (size_t)(sp1 - buf), tlen = (size_t)(sp2 - target);
    char auth[64];
    *is_connect = mlen == 7 && memcmp(buf, "CONNECT", 7) == 0;
    if (*is_connect) {
        if (tlen >= sizeof auth)
            return -1;
        memcpy(auth, target, tlen);
        auth[tlen] = 0;
    } else {
        if (tlen < 8 || strncasecmp(target, "http://", 7) != 0)
            return -1;
        const char *a = target + 7, *end = target + tlen;
        const char *slash = memchr(a, '/', (size_t)(end - a));
        size_t alen = (size_t)((slash ? slash : end) - a);
        if (alen + 4 > sizeof auth)
            return -1;
        memcpy(auth, a, alen);
        auth[alen] = 0;
        if (!memchr(auth, ':', alen))
            memcpy(auth + alen, ":80", 4);
    }
    if (parse_addr(auth, sa) < 0 || !is_allowed(sa))
        return -1;
    return 0;
}

/* The head is complete: buf[0..have) holds it (hlen bytes) and what came
 * after it. buf is either the thread's scratch or p->head. */
static void decide(struct worker *w, struct pair *p, char *buf, size_t hlen, size_t have)
{
    struct sockaddr_in sa;
    bool is_connect = false;
    int r = parse_head(buf, hlen, &sa, &is_connect);
    if (r == -2) {
        refuse(w, p, R400, sizeof R400 - 1);
        return;
    }
    if (r < 0) {
        refuse(w, p, R403, sizeof R403 - 1);
        return;
    }
    /* what goes to the origin first: the bytes after a CONNECT's head, or a
     * request's head and all after it */
    const char *first = is_connect ? buf + hlen : buf;
    size_t first_len = is_connect ? have - hlen : have;
    if (first_len > 0) {
        if (buf == p->head && !is_connect) {
            p->d[0].held = p->head;            /* hand the buffer over */
            p->d[0].held_off = 0;
            p->d[0].held_len = (uint32_t)have;
            p->head = NULL;
        } else if (!hold(&p->d[0], first, first_len)) {
            pair_close(w, p);
            return;
        }
    }
    free(p->head);
    p->head = NULL;
    p->is_connect = is_connect;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        refuse(w, p, R502, sizeof R502 - 1);
        return;
    }
    p->fd[1] = fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        refuse(w, p, R502, sizeof R502 - 1);
        return;
    }
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                              .data.u64 = (uint64_t)(uintptr_t)p | 1u };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        refuse(w, p, R502, sizeof R502 - 1);
        return;
    }
    p->out_armed[1] = true;
    p->state = S_CONNECTING;
}

static void read_head(struct worker *w, struct pair *p)
{
    while (p->readable[0]) {
        char *buf = p->head ? p->head : w->scratch;
        size_t have = p->head ? p->head_len : 0;
        ssize_t n = recv(p->fd[0], buf + have, HEAD_CAP - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            p->readable[0] = false;
            return;
        }
        if (n <= 0) {               /* gone before a whole head: no answer */
            pair_close(w, p);
            return;
        }
        size_t from = have > 3 ? have - 3 : 0;
        size_t room = HEAD_CAP - have;
        have += (size_t)n;
        if ((size_t)n < room && !p->hup[0])
            p->readable[0] = false;      /* a short read emptied the socket */
        char *end = memmem(buf + from, have - from, "\r\n\r\n", 4);
        if (end) {
            decide(w, p, buf, (size_t)(end - buf) + 4, have);
            return;
        }
        if (have == HEAD_CAP) {
            refuse(w, p, R400, sizeof R400 - 1);
            return;
        }
        if (!p->head) {             /* the head comes in pieces: keep it */
            p->head = malloc(HEAD_CAP);
            if (!p->head) {
                pair_close(w, p);
                return;
            }
            memcpy(p->head, buf, have);
        }
        p->head_len = (uint32_t)have;
    }
}

/* The origin socket is writable (or failed): did the connect work? */
static void connected(struct worker *w, struct pair *p)
{
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(p->fd[1], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        refuse(w, p, R502, sizeof R502 - 1);
        return;
    }
    p->state = S_RELAY;
    if (p->is_connect) {
        ssize_t n = send(p->fd[0], R200, sizeof R200 - 1, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            pair_close(w, p);
            return;
        }
        if (n < 0)
            n = 0;
        if ((size_t)n < sizeof R200 - 1 && !hold(&p->d[1], R200 + n, sizeof R200 - 1 - (size_t)n)) {
            pair_close(w, p);
            return;
        }
    }
    pump(w, p, 0);
    if (!p->dead)
        pump(w, p, 1);
}

/* ---- events ---- */

static void on_event(struct worker *w, struct pair *p, int end, uint32_t ev)
{
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        p->readable[end] = true;
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        p->hup[end] = true;
    switch (p->state) {
    case S_HEAD:
        if (end == 0)
            read_head(w, p);
        break;
    case S_CONNECTING:
        /* a client's bytes wait in its socket until the origin is there */
        if (end == 1 && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            connected(w, p);
        break;
    case S_RELAY: {
        /* writable: the direction into this end may have bytes to finish */
        struct dir *into = &p->d[1 - end];
        if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && (into->held_len || into->in_pipe))
            pump(w, p, 1 - end);
        if (!p->dead && p->readable[end])
            pump(w, p, end);
        break;
    }
    case S_REFUSED:
        if (end == 0)
            drain(w, p);
        break;
    }
}

static void pause_accept(struct worker *w)
{
    fprintf(stderr, "floor: accept: %s; pausing for a second\n", strerror(errno));
    epoll_ctl(w->ep, EPOLL_CTL_DEL, w->lfd, NULL);
    w->accept_paused = true;
    clock_gettime(CLOCK_MONOTONIC, &w->resume_at);
    w->resume_at.tv_sec += 1;
}

static void resume_accept(struct worker *w)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec < w->resume_at.tv_sec ||
        (now.tv_sec == w->resume_at.tv_sec && now.tv_nsec < w->resume_at.tv_nsec))
        return;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTENER };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->lfd, &ev) == 0)
        w->accept_paused = false;
}

/* One accept per readiness: the listener is level-triggered, so more
 * waiting connections are reported by the next epoll_wait (which the
 * thread makes anyway) instead of being found by an accept that fails. */
static void do_accept(struct worker *w)
{
    int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            pause_accept(w);
        return;
    }
    struct pair *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return;
    }
    p->fd[0] = fd;
    p->fd[1] = -1;
    p->d[0].pipe[0] = p->d[0].pipe[1] = p->d[1].pipe[0] = p->d[1].pipe[1] = -1;
    p->state = S_HEAD;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = (uint64_t)(uintptr_t)p };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        free(p);
        return;
    }
    p->next = w->live;
    if (w->live)
        w->live->prev = p;
    w->live = p;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[NEVENTS];
    bool stop = false;
    while (!stop) {
        int n = epoll_wait(w->ep, evs, NEVENTS, w->accept_paused ? 1000 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_LISTENER) {
                do_accept(w);
            } else if (tag == TAG_STOP) {
                stop = true;
            } else {
                struct pair *p = (struct pair *)(uintptr_t)(tag & ~(uint64_t)1);
                if (!p->dead)
                    on_event(w, p, (int)(tag & 1), evs[i].events);
            }
        }
        free_dead(w);
        if (w->accept_paused)
            resume_accept(w);
    }
    while (w->live)
        pair_close(w, w->live);
    free_dead(w);
    return NULL;
}

static int make_listener(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        die("setsockopt");
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0)
        die("bind");
    if (listen(fd, 4096) < 0)
        die("listen");
    return fd;
}

int main(int argc, char **argv)
{
    const char *listen_addr = NULL;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen_addr = argv[++i];
        } else if (strcmp(argv[i], "--allow") == 0 && i + 1 < argc && n_allow < MAX_ALLOW) {
            if (parse_addr(argv[++i], &allow[n_allow]) < 0) {
                fprintf(stderr, "floor: bad --allow %s (want IPv4:PORT)\n", argv[i]);
                return 2;
            }
            n_allow++;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > MAX_THREADS)
                usage();
        } else {
            usage();
        }
    }
    struct sockaddr_in lsa;
    if (!listen_addr || n_allow == 0)
        usage();
    if (parse_addr(listen_addr, &lsa) < 0) {
        fprintf(stderr, "floor: bad --listen %s (want IPv4:PORT)\n", listen_addr);
        return 2;
    }
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);      /* splice(2) to a reset socket */
    /* The workers inherit a mask without SIGTERM and SIGINT; the main thread
     * takes them with sigwait and wakes the workers through an eventfd. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    int stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stopfd < 0)
        die("eventfd");
    struct worker **ws = calloc((size_t)threads, sizeof *ws);
    if (!ws)
        die("calloc");
    for (long i = 0; i < threads; i++) {
        struct worker *w = calloc(1, sizeof *w);
        if (!w)
            die("calloc");
        ws[i] = w;
        w->lfd = make_listener(&lsa);
        w->stopfd = stopfd;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        if (w->ep < 0)
            die("epoll_create1");
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_LISTENER };
        struct epoll_event sev = { .events = EPOLLIN, .data.u64 = TAG_STOP };
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->lfd, &ev) < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, stopfd, &sev) < 0)
            die("epoll_ctl");
    }
    for (long i = 0; i < threads; i++) {
        int e = pthread_create(&ws[i]->tid, NULL, worker_main, ws[i]);
        if (e) {
            errno = e;
            die("pthread_create");
        }
    }
    printf("READY\n");
    fflush(stdout);

    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    uint64_t one = 1;
    if (write(stopfd, &one, sizeof one) != sizeof one)
        die("write eventfd");
    for (long i = 0; i < threads; i++) {
        pthread_join(ws[i]->tid, NULL);
        close(ws[i]->ep);
        close(ws[i]->lfd);
        free(ws[i]);
    }
    free(ws);
    close(stopfd);
    return 0;
}
