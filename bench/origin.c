/*
 * origin: the benchmark's origin server. One thread, epoll, edge-triggered,
 * HTTP/1.1 with keep-alive (HTTP/1.0 and "Connection: close" are honoured).
 *
 *   origin --listen IP:PORT [--listen IP:PORT]... [--decoy IP:PORT]
 *          [--small-bytes N]
 *
 * Paths (the request target may be origin-form or absolute-form):
 *   /bulk/N    200 with an N-byte body, streamed from a static buffer
 *   /stats     200 with JSON counters: accepts, decoy_accepts, requests
 *   anything   200 with a small body of --small-bytes 'x' bytes (default 64)
 *
 * A --decoy listener counts its accepts (decoy_accepts) and answers every
 * request with 200 and the body "DECOY REACHED": the harness checks that no
 * proxy lets a client reach it. Prints "READY" on standard output once all
 * listeners accept. SIGTERM/SIGINT end it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addr.h"

#define IN_CAP   16384
#define OUT_CAP  1024
#define BULK_BUF (1u << 20)
#define MAX_LISTEN 8

struct conn {
    int fd;
    bool decoy;
    bool rd_eof;
    bool close_after;
    size_t in_len;
    char in[IN_CAP];
    /* pending output: head[out_off..out_len) then bulk_left bytes of body */
    size_t out_off, out_len;
    uint64_t bulk_left;
    char out[OUT_CAP];
};

struct listener {
    int fd;
    bool decoy;
};

static char bulk_buf[BULK_BUF];
static size_t small_bytes = 64;
static char *small_body;
static uint64_t n_accepts, n_decoy_accepts, n_requests;
static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void die(const char *what)
{
    fprintf(stderr, "origin: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int make_listener(const char *addr)
{
    struct sockaddr_in sa;
    if (parse_addr(addr, &sa) < 0) {
        fprintf(stderr, "origin: bad address %s (want IPv4:PORT)\n", addr);
        exit(2);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "origin: bind %s: %s\n", addr, strerror(errno));
        exit(1);
    }
    if (listen(fd, 4096) < 0)
        die("listen");
    return fd;
}

/* Case-insensitive search for a header line "name: value" in head[0..len);
 * returns a pointer to the value (spaces skipped) or NULL. */
static const char *find_header(const char *head, size_t len, const char *name, size_t *vlen)
{
    size_t nlen = strlen(name);
    const char *p = memchr(head, '\n', len);
    const char *end = head + len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nlen && strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

static bool has_token(const char *v, size_t vlen, const char *tok)
{
    size_t tlen = strlen(tok);
    for (size_t i = 0; i + tlen <= vlen; i++)
        if (strncasecmp(v + i, tok, tlen) == 0)
            return true;
    return false;
}

static void conn_close(int ep, struct conn *c)
{
    (void)ep;
    close(c->fd);
    free(c);
}

/* If a complete request head is buffered, consume it and set up the
 * response. Returns 1 if a response was set up, 0 if more input is needed,
 * -1 on a malformed request (the connection is then closed). */
static int take_request(struct conn *c)
{
    char *hend = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!hend) {
        if (c->in_len == IN_CAP)
            return -1;
        return 0;
    }
    size_t hlen = (size_t)(hend - c->in) + 4;
    /* request line: METHOD SP TARGET SP VERSION */
    const char *sp1 = memchr(c->in, ' ', hlen);
    if (!sp1)
        return -1;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', hlen - (size_t)(target - c->in));
    if (!sp2)
        return -1;
    size_t tlen = (size_t)(sp2 - target);
    bool http10 = (size_t)(hend - sp2) >= 9 && memcmp(sp2 + 1, "HTTP/1.0", 8) == 0;
    /* absolute-form: skip scheme and authority */
    if (tlen > 7 && strncasecmp(target, "http://", 7) == 0) {
        const char *slash = memchr(target + 7, '/', tlen - 7);
        if (slash) {
            tlen -= (size_t)(slash - target);
            target = slash;
        } else {
            target = "/";
            tlen = 1;
        }
    }
    size_t vlen = 0;
    const char *conn = find_header(c->in, hlen, "connection", &vlen);
    bool close_after = http10 ? !(conn && has_token(conn, vlen, "keep-alive"))
                              : (conn && has_token(conn, vlen, "close"));
    uint64_t body_in = 0;
    const char *cl = find_header(c->in, hlen, "content-length", &vlen);
    if (cl)
        body_in = strtoull(cl, NULL, 10);
    if (body_in > IN_CAP - hlen)
        return -1;              /* the bench never sends request bodies */
    if (c->in_len < hlen + body_in)
        return 0;

    n_requests++;
    const char *ka = close_after ? "close" : "keep-alive";
    int n;
    if (c->decoy) {
        static const char body[] = "DECOY REACHED\n";
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: %s\r\n\r\n%s",
                     sizeof body - 1, ka, body);
        c->bulk_left = 0;
    } else if (tlen > 6 && memcmp(target, "/bulk/", 6) == 0) {
        uint64_t len = strtoull(target + 6, NULL, 10);
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %" PRIu64 "\r\nConnection: %s\r\n\r\n", len, ka);
        c->bulk_left = len;
    } else if (tlen == 6 && memcmp(target, "/stats", 6) == 0) {
        char body[256];
        int bl = snprintf(body, sizeof body,
                          "{\"accepts\":%" PRIu64 ",\"decoy_accepts\":%" PRIu64
                          ",\"requests\":%" PRIu64 "}\n", n_accepts, n_decoy_accepts, n_requests);
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "Cache-Control: no-store\r\nConnection: %s\r\n\r\n%s", bl, ka, body);
        c->bulk_left = 0;
    } else {
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: %s\r\n\r\n%s",
                     small_bytes, ka, small_body);
        c->bulk_left = 0;
    }
    c->out_off = 0;
    c->out_len = (size_t)n;
    c->close_after = close_after;
    size_t used = hlen + body_in;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    return 1;
}

/* Move the connection as far as it can go without blocking. */
static void drive(int ep, struct conn *c)
{
    for (;;) {
        bool progress = false;
        bool out_pending = c->out_off < c->out_len || c->bulk_left > 0;
        if (out_pending) {
            ssize_t w;
            if (c->out_off < c->out_len) {
                struct iovec iov[2] = {
                    { c->out + c->out_off, c->out_len - c->out_off },
                    { bulk_buf, c->bulk_left < BULK_BUF ? (size_t)c->bulk_left : BULK_BUF },
                };
                w = writev(c->fd, iov, c->bulk_left ? 2 : 1);
                if (w > 0) {
                    size_t head_left = c->out_len - c->out_off;
                    if ((size_t)w >= head_left) {
                        c->out_off = c->out_len;
                        c->bulk_left -= (uint64_t)((size_t)w - head_left);
                    } else {
                        c->out_off += (size_t)w;
                    }
                }
            } else {
                w = write(c->fd, bulk_buf, c->bulk_left < BULK_BUF ? (size_t)c->bulk_left : BULK_BUF);
                if (w > 0)
                    c->bulk_left -= (uint64_t)w;
            }
            if (w > 0) {
                progress = true;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                conn_close(ep, c);
                return;
            }
            out_pending = c->out_off < c->out_len || c->bulk_left > 0;
        }
        if (!out_pending) {
            if (c->close_after) {
                conn_close(ep, c);
                return;
            }
            int r = take_request(c);
            if (r < 0) {
                conn_close(ep, c);
                return;
            }
            if (r > 0)
                continue;
        }
        if (!c->rd_eof && c->in_len < IN_CAP) {
            ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
            if (r > 0) {
                c->in_len += (size_t)r;
                progress = true;
            } else if (r == 0) {
                c->rd_eof = true;
                progress = true;
            } else if (errno != EAGAIN && errno != EINTR) {
                conn_close(ep, c);
                return;
            }
        }
        if (c->rd_eof && !out_pending) {
            /* the client closed; nothing more can come */
            if (take_request(c) <= 0) {
                conn_close(ep, c);
                return;
            }
            continue;
        }
        if (!progress)
            return;
    }
}

static void do_accept(int ep, struct listener *l)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE)
                fprintf(stderr, "origin: accept: %s\n", strerror(errno));
            return;
        }
        if (l->decoy)
            n_decoy_accepts++;
        else
            n_accepts++;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->decoy = l->decoy;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        drive(ep, c);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: origin --listen IP:PORT [--listen IP:PORT]... [--decoy IP:PORT] [--small-bytes N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *listen_addrs[MAX_LISTEN];
    int n_listen = 0;
    const char *decoy = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc && n_listen < MAX_LISTEN)
            listen_addrs[n_listen++] = argv[++i];
        else if (strcmp(argv[i], "--decoy") == 0 && i + 1 < argc)
            decoy = argv[++i];
        else if (strcmp(argv[i], "--small-bytes") == 0 && i + 1 < argc)
            small_bytes = strtoul(argv[++i], NULL, 10);
        else
            usage();
    }
    if (n_listen == 0 || small_bytes > 512)
        usage();
    small_body = malloc(small_bytes + 1);
    memset(small_body, 'x', small_bytes);
    small_body[small_bytes] = 0;
    memset(bulk_buf, 'b', sizeof bulk_buf);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct listener ls[MAX_LISTEN + 1];
    int nl = 0;
    for (int i = 0; i < n_listen; i++)
        ls[nl++] = (struct listener){ make_listener(listen_addrs[i]), false };
    if (decoy)
        ls[nl++] = (struct listener){ make_listener(decoy), true };
    for (int i = 0; i < nl; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ls[i] };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ls[i].fd, &ev) < 0)
            die("epoll_ctl");
    }
    printf("READY\n");
    fflush(stdout);

    struct epoll_event evs[256];
    while (!stop) {
        int n = epoll_wait(ep, evs, 256, 500);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            bool is_listener = false;
            for (int j = 0; j < nl; j++)
                if (p == &ls[j]) {
                    do_accept(ep, &ls[j]);
                    is_listener = true;
                    break;
                }
            if (!is_listener)
                drive(ep, p);
        }
    }
    fprintf(stderr, "origin: stopped: %" PRIu64 " accepts, %" PRIu64 " decoy accepts, %" PRIu64 " requests\n",
            n_accepts, n_decoy_accepts, n_requests);
    return 0;
}
