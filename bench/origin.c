/*
 * origin: the benchmark's origin server. One thread, epoll, edge-triggered,
 * HTTP/1.1 with keep-alive (HTTP/1.0 and "Connection: close" are honoured).
 *
 *   origin --listen IP:PORT [--listen IP:PORT]... [--decoy IP:PORT]
 *          [--tls-listen IP:PORT --cert PEM --key PEM]
 *          [--rogue IP:PORT --rogue-cert PEM --rogue-key PEM]
 *          [--small-bytes N]
 *
 * Paths (the request target may be origin-form or absolute-form):
 *   /bulk/N    200 with an N-byte body, every byte 'b' (0x62), streamed from
 *              a static buffer; bench/run.py computes the pinned runs'
 *              digests from exactly these bytes (BULK_FILL there)
 *   /bulk/N/NAME  the same N bytes: NAME only gives the same body another
 *              path, so that a policy can pin one path and leave another
 *              unpinned (the pinned bulk runs)
 *   /stats     200 with JSON counters: accepts, decoy_accepts, requests
 *   anything   200 with a small body of --small-bytes 'x' bytes (default 64)
 *
 * A --decoy listener counts its accepts (decoy_accepts) and answers every
 * request with 200 and the body "DECOY REACHED": the harness checks that no
 * proxy lets a client reach it.
 *
 * --tls-listen serves the same paths over TLS (bench/benchtls.h: OpenSSL,
 * TLS 1.2, full handshakes only) with the certificate --cert and its key --key.
 * --rogue is a TLS listener whose certificate (--rogue-cert) no proxy under
 * test trusts: it serves like the TLS one but counts its requests
 * (rogue_requests), and the harness checks that an inspecting proxy sends it
 * none. /stats adds tls_accepts, tls_handshakes, tls_requests,
 * rogue_accepts and rogue_requests.
 *
 * Prints "READY" on standard output once all listeners accept.
 * SIGTERM/SIGINT end it.
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
#include "benchtls.h"

#define IN_CAP   16384
#define OUT_CAP  1024
#define BULK_BUF (1u << 20)
#define MAX_LISTEN 8

enum listen_kind { L_PLAIN, L_DECOY, L_TLS, L_ROGUE };

struct conn {
    int fd;
    bool decoy;
    bool rogue;
    bool hs_done;               /* TLS: the handshake is complete */
    SSL *ssl;                   /* NULL on a plain connection */
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
    enum listen_kind kind;
    SSL_CTX *tls;
};

static char bulk_buf[BULK_BUF];
static size_t small_bytes = 64;
static char *small_body;
static uint64_t n_accepts, n_decoy_accepts, n_requests;
static uint64_t n_tls_accepts, n_tls_handshakes, n_tls_requests, n_rogue_accepts, n_rogue_requests;
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
    SSL_free(c->ssl);
    close(c->fd);
    free(c);
}

/* read(2) and write(2) on the connection, through TLS when it has it:
 * -1 with errno EAGAIN while TLS wants the socket, EPROTO on a TLS error. */
static ssize_t conn_read(struct conn *c, void *p, size_t n)
{
    char err[256];
    return c->ssl ? bench_tls_read(c->ssl, p, n, err, sizeof err) : read(c->fd, p, n);
}

/* TLS: the callers compute p and n from state that only a successful
 * write changes, so a write that waited is repeated as OpenSSL wants. */
static ssize_t conn_write(struct conn *c, const void *p, size_t n)
{
    char err[256];
    return c->ssl ? bench_tls_write(c->ssl, p, n, err, sizeof err) : write(c->fd, p, n);
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
    if (c->rogue)
        n_rogue_requests++;
    else if (c->ssl)
        n_tls_requests++;
    const char *ka = close_after ? "close" : "keep-alive";
    int n;
    if (c->decoy) {
        static const char body[] = "DECOY REACHED\n";
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: %s\r\n\r\n%s",
                     sizeof body - 1, ka, body);
        c->bulk_left = 0;
    } else if (tlen > 6 && memcmp(target, "/bulk/", 6) == 0) {
        /* N, then the end of the path or /NAME (ignored) */
        uint64_t len = strtoull(target + 6, NULL, 10);
        n = snprintf(c->out, OUT_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %" PRIu64 "\r\nConnection: %s\r\n\r\n", len, ka);
        c->bulk_left = len;
    } else if (tlen == 6 && memcmp(target, "/stats", 6) == 0) {
        char body[512];
        int bl = snprintf(body, sizeof body,
                          "{\"accepts\":%" PRIu64 ",\"decoy_accepts\":%" PRIu64 ",\"requests\":%" PRIu64
                          ",\"tls_accepts\":%" PRIu64 ",\"tls_handshakes\":%" PRIu64 ",\"tls_requests\":%" PRIu64
                          ",\"rogue_accepts\":%" PRIu64 ",\"rogue_requests\":%" PRIu64 "}\n",
                          n_accepts, n_decoy_accepts, n_requests, n_tls_accepts, n_tls_handshakes,
                          n_tls_requests, n_rogue_accepts, n_rogue_requests);
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
    if (c->ssl && !c->hs_done) {
        char err[256];
        int r = bench_tls_handshake(c->ssl, err, sizeof err);
        if (r == 0)
            return;
        if (r < 0) {
            conn_close(ep, c);
            return;
        }
        c->hs_done = true;
        n_tls_handshakes++;
    }
    for (;;) {
        bool progress = false;
        bool out_pending = c->out_off < c->out_len || c->bulk_left > 0;
        if (out_pending) {
            ssize_t w;
            if (c->ssl) {
                /* one record per call: the head, then the body */
                if (c->out_off < c->out_len) {
                    w = conn_write(c, c->out + c->out_off, c->out_len - c->out_off);
                    if (w > 0)
                        c->out_off += (size_t)w;
                } else {
                    w = conn_write(c, bulk_buf, c->bulk_left < BULK_BUF ? (size_t)c->bulk_left : BULK_BUF);
                    if (w > 0)
                        c->bulk_left -= (uint64_t)w;
                }
            } else if (c->out_off < c->out_len) {
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
                if (c->ssl)
                    SSL_shutdown(c->ssl);
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
            ssize_t r = conn_read(c, c->in + c->in_len, IN_CAP - c->in_len);
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
        if (l->kind == L_DECOY)
            n_decoy_accepts++;
        else if (l->kind == L_TLS)
            n_tls_accepts++;
        else if (l->kind == L_ROGUE)
            n_rogue_accepts++;
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
        c->decoy = l->kind == L_DECOY;
        c->rogue = l->kind == L_ROGUE;
        if (l->tls && !(c->ssl = bench_tls_new(l->tls, fd, NULL))) {
            close(fd);
            free(c);
            continue;
        }
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
    fprintf(stderr, "usage: origin --listen IP:PORT [--listen IP:PORT]... [--decoy IP:PORT]\n"
                    "              [--tls-listen IP:PORT --cert PEM --key PEM]\n"
                    "              [--rogue IP:PORT --rogue-cert PEM --rogue-key PEM] [--small-bytes N]\n");
    exit(2);
}

/* The server context for cert and key; exits on error, naming the file. */
static SSL_CTX *tls_server_ctx(const char *cert, const char *key)
{
    char err[300];
    SSL_CTX *ctx = bench_tls_ctx(true, cert, key, NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "origin: %s\n", err);
        exit(1);
    }
    return ctx;
}

int main(int argc, char **argv)
{
    const char *listen_addrs[MAX_LISTEN];
    int n_listen = 0;
    const char *decoy = NULL;
    const char *tls_addr = NULL, *tls_cert = NULL, *tls_key = NULL;
    const char *rogue_addr = NULL, *rogue_cert = NULL, *rogue_key = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc && n_listen < MAX_LISTEN)
            listen_addrs[n_listen++] = argv[++i];
        else if (strcmp(argv[i], "--decoy") == 0 && i + 1 < argc)
            decoy = argv[++i];
        else if (strcmp(argv[i], "--tls-listen") == 0 && i + 1 < argc)
            tls_addr = argv[++i];
        else if (strcmp(argv[i], "--cert") == 0 && i + 1 < argc)
            tls_cert = argv[++i];
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            tls_key = argv[++i];
        else if (strcmp(argv[i], "--rogue") == 0 && i + 1 < argc)
            rogue_addr = argv[++i];
        else if (strcmp(argv[i], "--rogue-cert") == 0 && i + 1 < argc)
            rogue_cert = argv[++i];
        else if (strcmp(argv[i], "--rogue-key") == 0 && i + 1 < argc)
            rogue_key = argv[++i];
        else if (strcmp(argv[i], "--small-bytes") == 0 && i + 1 < argc)
            small_bytes = strtoul(argv[++i], NULL, 10);
        else
            usage();
    }
    if (n_listen == 0 || small_bytes > 512 || (tls_addr && (!tls_cert || !tls_key)) ||
        (rogue_addr && (!rogue_cert || !rogue_key)))
        usage();
    small_body = malloc(small_bytes + 1);
    memset(small_body, 'x', small_bytes);
    small_body[small_bytes] = 0;
    memset(bulk_buf, 'b', sizeof bulk_buf);   /* run.py's BULK_FILL: the pinned digests */

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
    struct listener ls[MAX_LISTEN + 3];
    int nl = 0;
    for (int i = 0; i < n_listen; i++)
        ls[nl++] = (struct listener){ make_listener(listen_addrs[i]), L_PLAIN, NULL };
    if (decoy)
        ls[nl++] = (struct listener){ make_listener(decoy), L_DECOY, NULL };
    if (tls_addr)
        ls[nl++] = (struct listener){ make_listener(tls_addr), L_TLS, tls_server_ctx(tls_cert, tls_key) };
    if (rogue_addr)
        ls[nl++] = (struct listener){ make_listener(rogue_addr), L_ROGUE, tls_server_ctx(rogue_cert, rogue_key) };
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
    fprintf(stderr, "origin: stopped: %" PRIu64 " accepts, %" PRIu64 " decoy accepts, %" PRIu64 " requests; TLS: %"
            PRIu64 " accepts, %" PRIu64 " handshakes, %" PRIu64 " requests; rogue: %" PRIu64 " accepts, %" PRIu64
            " requests\n", n_accepts, n_decoy_accepts, n_requests, n_tls_accepts, n_tls_handshakes, n_tls_requests,
            n_rogue_accepts, n_rogue_requests);
    return 0;
}
