/*
 * loadgen: the benchmark's load generator. One thread, epoll, edge-triggered.
 *
 *   loadgen MODE [--proxy IP:PORT] --target HOST:PORT [--connect IP:PORT]
 *           [-c N] [-d SECONDS] [--warmup SECONDS] [--rate R]
 *           [--bytes N] [--bulk-name NAME] [-n N] [--steps A,B,...] [--hold SECONDS]
 *           [--timeout-ms MS] [--cpu-pid PID]...
 *           [--tls --ca PEM [--sni NAME]]
 *           [--proxy-auth NAME:TOKEN | --proxy-auth-file FILE]
 *
 * MODE
 *   tunnel  C clients, each in a loop: connect, CONNECT HOST:PORT, one small
 *           GET through the tunnel and its response, close. Without --proxy
 *           (direct): connect to the origin, the same GET, close.
 *   http    C keep-alive clients, each sending absolute-form GETs
 *           (GET http://HOST:PORT/small) one after another. Direct: the same
 *           in origin-form to the origin. A response that says
 *           "Connection: close" (or an HTTP/1.0 one) makes the client
 *           reconnect for the next request; counted as "reconnects".
 *   bulk    one tunnel (direct: one connection) reading --bytes bytes
 *           (GET /bulk/N, or /bulk/N/NAME with --bulk-name NAME: the same
 *           body under a path a policy may pin); MB/s from the request to
 *           the last byte.
 *   idle    opens -n tunnels (CONNECT, 200) and holds them; direct: -n plain
 *           connections. At each count in --steps it prints a line
 *           {"event":"at","n":N,...} and waits for a line on standard input
 *           before it goes on; after the last step it holds until standard
 *           input closes or says "stop", or --hold seconds pass.
 *
 * --tls     TLS to the origin, through the tunnel (or directly without
 *           --proxy), verified against --ca with the name --sni (default:
 *           the host of --target); OpenSSL, TLS 1.2 as bench/benchtls.h
 *           sets it, a full handshake every time. Through an inspecting
 *           proxy it is the proxy that answers: --ca is then its CA. Per
 *           mode: tunnel = connect, CONNECT, handshake, one GET,
 *           close_notify, close; http = C kept-alive tunnels (CONNECT and
 *           the handshake once), origin-form GETs inside; bulk = one GET in
 *           one tunnel (MB/s from the request on); idle = tunnels held once
 *           their handshake is done and one GET answered: a proxy that
 *           bumps the client's side first (squid) connects to the origin
 *           only for the first request, and a kept-alive tunnel between two
 *           requests holds both sides.
 * --rate R  (tunnel, http) fixed offered load: operations are started at R per
 *           second whether or not earlier ones finished (at most C at once;
 *           the rest wait in a queue), and latency runs from each operation's
 *           scheduled start, so a stall is counted, not hidden.
 * --connect where TCP connections go when there is no --proxy (default:
 *           the --target address, which must then be an IP literal).
 * --cpu-pid PID  utime/stime of PID (all threads) are read from /proc at the
 *           start and the end of the measured window; reported per PID.
 * --proxy-auth NAME:TOKEN  sends "Proxy-Authorization: Basic
 *           base64(NAME:TOKEN)" to the proxy: in the CONNECT (tunnel, bulk,
 *           idle, and every --tls mode) and in every plain-HTTP request
 *           (http), never inside a tunnel, where the origin would get it.
 * --proxy-auth-file FILE  one NAME:TOKEN a line (blank lines skipped); the
 *           i-th connection opened uses line i mod n, so tunnels spread over
 *           every session and keep-alive connections over the first C. Every
 *           request is built before the run: the header costs nothing per
 *           request here.
 *
 * The measured window starts after --warmup seconds and lasts -d seconds.
 * Prints one JSON object on standard output. Exit status: 0 if at least one
 * operation was measured, 1 otherwise, 2 on usage errors.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "benchtls.h"

#include <openssl/evp.h>

#define IN_CAP   8192
#define SCRATCH  (1u << 20)
#define MAX_PIDS 16
/* --proxy-auth-file: a line (NAME:TOKEN) and the whole file's lines; a
 * session name is at most 64 bytes and the gate takes tokens of up to 256 */
#define AUTH_LINE_MAX  1024
#define AUTH_LINES_MAX 1000000

enum mode { M_TUNNEL, M_HTTP, M_BULK, M_IDLE };

enum state {
    S_FREE,          /* no socket */
    S_CONNECTING,    /* TCP connect in progress */
    S_SEND_CONNECT,  /* writing CONNECT */
    S_PROXY_HEAD,    /* reading the proxy's reply to CONNECT */
    S_TLS_HS,        /* --tls: the handshake */
    S_SEND_REQ,      /* writing the request */
    S_RESP_HEAD,     /* reading the response head */
    S_RESP_BODY,     /* reading the response body */
    S_KA_IDLE,       /* http: connected, waiting for the next operation */
    S_HOLD,          /* idle: tunnel established, held */
};

enum err {
    E_CONNECT, E_PROXY_STATUS, E_HTTP_STATUS, E_EOF, E_TIMEOUT, E_PROTOCOL, E_IO, E_TLS, E_N
};
static const char *err_names[E_N] = {
    "connect", "proxy_status", "http_status", "eof", "timeout", "protocol", "io", "tls"
};

/* The bytes one connection sends: the CONNECT and the request, each with
 * the connection's Proxy-Authorization where it goes. */
struct reqset {
    char *connect, *work;
    size_t connect_len, work_len;
};

struct conn {
    int fd;
    const struct reqset *rs;   /* set when the socket opens */
    enum state state;
    bool in_op;            /* an operation is assigned */
    bool reused;           /* http: this connection already served a request */
    bool retried;          /* http: the op was resent once after a stale keep-alive */
    bool resp_close;       /* the response asks to close afterwards */
    bool body_to_eof;      /* no Content-Length: the body runs to EOF */
    SSL *ssl;              /* --tls: the session, once the socket reaches the origin */
    uint64_t op_start;     /* ns; scheduled start in --rate mode */
    uint64_t deadline;     /* ns */
    uint64_t body_left;
    size_t out_off;
    const char *out;
    size_t out_len;
    size_t in_len;
    char in[IN_CAP];
};

/* ---- options ---- */
static enum mode mode;
static bool via_proxy;
static struct sockaddr_in dst;      /* where TCP goes */
static const char *target;          /* HOST:PORT */
static int conc = 1;
static double duration_s = 5, warmup_s = 0.5, hold_s = 60;
static double rate;
static uint64_t bulk_bytes = 1ull << 30;
static const char *bulk_name;       /* bulk: GET /bulk/N/NAME */
static int idle_n = 1000;
static int steps[32], n_steps;
static uint64_t op_timeout_ns = 10ull * 1000000000ull;
static pid_t cpu_pids[MAX_PIDS];
static int n_cpu_pids;
static bool use_tls;
static const char *tls_ca, *tls_sni;
static SSL_CTX *tls_ctx;

/* ---- prebuilt requests: one set, or one per --proxy-auth-file line ---- */
static struct reqset *reqs;
static size_t n_reqs;
static uint64_t conns_opened;       /* the i of "connection i uses line i mod n" */
static const char *auth_one, *auth_file;

/* ---- state ---- */
static int ep;
static struct conn *conns;
static uint64_t t_start, t_meas, t_end;
static bool measuring_done;
static uint64_t ops, ops_warm, reconnects;
static uint64_t errs[E_N], errs_warm;
static char last_error[256];
static uint32_t *lat;
static size_t n_lat, cap_lat;
static char scratch[SCRATCH];
/* --rate */
static int tfd = -1;
static uint64_t sched_issued;       /* operations scheduled so far */
static uint64_t *queue;             /* scheduled start times waiting for a slot */
static size_t q_head, q_tail, q_cap;
static uint64_t sched_in_window, done_in_window, last_done;
/* bulk */
static uint64_t bulk_t0, bulk_t1, bulk_got;
/* idle */
static int idle_open, idle_pending, idle_step, idle_dropped;
static bool idle_paused, idle_holding, idle_stop, stdin_watched, idle_partial;
static uint64_t idle_step_t0;
/* cpu */
struct cpusample { uint64_t ut, st; bool ok; };
static struct cpusample cpu0[MAX_PIDS], cpu1[MAX_PIDS];
static uint64_t mach0_busy, mach0_total, mach1_busy, mach1_total;
static struct rusage ru0, ru1;
static long clk_tck;
static volatile sig_atomic_t got_signal;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(const char *why)
{
    if (why)
        fprintf(stderr, "loadgen: %s\n", why);
    fprintf(stderr,
            "usage: loadgen tunnel|http|bulk|idle [--proxy IP:PORT] --target HOST:PORT [--connect IP:PORT]\n"
            "               [-c N] [-d SECONDS] [--warmup SECONDS] [--rate R] [--bytes N] [--bulk-name NAME]\n"
            "               [-n N]\n"
            "               [--steps A,B,...] [--hold SECONDS] [--timeout-ms MS] [--cpu-pid PID]...\n"
            "               [--tls --ca PEM [--sni NAME]]\n"
            "               [--proxy-auth NAME:TOKEN | --proxy-auth-file FILE]\n");
    exit(2);
}

/* ---- /proc sampling ---- */
static struct cpusample read_cpu(pid_t pid)
{
    struct cpusample s = { 0, 0, false };
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return s;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return s;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return s;
    /* fields after ")": state(3) ppid(4) ... utime(14) stime(15) */
    unsigned long long ut, st;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return s;
    s.ut = ut;
    s.st = st;
    s.ok = true;
    return s;
}

static void read_machine(uint64_t *busy, uint64_t *total)
{
    *busy = *total = 0;
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return;
    unsigned long long v[10] = { 0 };
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 8) {
        uint64_t t = 0;
        for (int i = 0; i < 8; i++)
            t += v[i];
        *total = t;
        *busy = t - v[3] - v[4];    /* minus idle and iowait */
    }
    fclose(f);
}

static void sample_start(void)
{
    for (int i = 0; i < n_cpu_pids; i++)
        cpu0[i] = read_cpu(cpu_pids[i]);
    read_machine(&mach0_busy, &mach0_total);
    getrusage(RUSAGE_SELF, &ru0);
}

static void sample_end(void)
{
    for (int i = 0; i < n_cpu_pids; i++)
        cpu1[i] = read_cpu(cpu_pids[i]);
    read_machine(&mach1_busy, &mach1_total);
    getrusage(RUSAGE_SELF, &ru1);
}

/* ---- results ---- */
static void record_latency(uint64_t ns)
{
    if (n_lat == cap_lat) {
        cap_lat = cap_lat ? cap_lat * 2 : 65536;
        uint32_t *n = realloc(lat, cap_lat * sizeof *lat);
        if (!n) {
            fprintf(stderr, "loadgen: out of memory\n");
            exit(1);
        }
        lat = n;
    }
    uint64_t us = ns / 1000;
    lat[n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static bool in_window(uint64_t op_start, uint64_t t)
{
    if (rate > 0)
        return op_start >= t_meas && op_start < t_end;
    return t >= t_meas && t <= t_end && !measuring_done;
}

static void note_error(struct conn *c, enum err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note_error(struct conn *c, enum err e, const char *fmt, ...)
{
    uint64_t t = now_ns();
    if (mode == M_IDLE || mode == M_BULK || in_window(c->op_start, t))
        errs[e]++;
    else
        errs_warm++;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(last_error, sizeof last_error, "%s: ", err_names[e]);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
}

/* ---- connections ---- */
static void conn_reset(struct conn *c)
{
    SSL_free(c->ssl);
    c->ssl = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = S_FREE;
    c->reused = false;
    c->in_len = 0;
}

static bool conn_open(struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        note_error(c, E_CONNECT, "socket: %s", strerror(errno));
        return false;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) {
        note_error(c, E_CONNECT, "connect: %s", strerror(errno));
        close(fd);
        return false;
    }
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        note_error(c, E_IO, "epoll_ctl: %s", strerror(errno));
        close(fd);
        return false;
    }
    c->fd = fd;
    c->rs = &reqs[conns_opened++ % n_reqs];
    c->state = S_CONNECTING;
    c->in_len = 0;
    c->reused = false;
    return true;
}

/* read(2) and write(2) on the connection, through TLS once it has started:
 * -1 with errno EAGAIN while TLS waits for the socket; EPROTO on a TLS
 * error, whose message is then in last_error. */
static ssize_t c_read(struct conn *c, void *p, size_t n)
{
    return c->ssl ? bench_tls_read(c->ssl, p, n, last_error, sizeof last_error) : read(c->fd, p, n);
}

/* TLS: c->out + c->out_off only moves on success, so a write that waited
 * is repeated with the same arguments, as OpenSSL wants. */
static ssize_t c_write(struct conn *c, const void *p, size_t n)
{
    return c->ssl ? bench_tls_write(c->ssl, p, n, last_error, sizeof last_error) : write(c->fd, p, n);
}

/* The socket is through to the origin (directly, or by CONNECT): the TLS
 * session starts on it. false if it could not be set up. */
static bool tls_begin(struct conn *c)
{
    c->ssl = bench_tls_new(tls_ctx, c->fd, tls_sni);
    if (!c->ssl)
        return false;
    c->state = S_TLS_HS;
    return true;
}

static void set_send(struct conn *c, enum state st, const char *buf, size_t len)
{
    c->state = st;
    c->out = buf;
    c->out_len = len;
    c->out_off = 0;
}

static void start_work_request(struct conn *c)
{
    c->in_len = 0;
    set_send(c, S_SEND_REQ, c->rs->work, c->rs->work_len);
}

/* After the TCP connection is up: CONNECT (via a proxy) or the request. */
static void after_connect(struct conn *c)
{
    if (via_proxy && (mode != M_HTTP || use_tls)) {
        set_send(c, S_SEND_CONNECT, c->rs->connect, c->rs->connect_len);
    } else if (use_tls) {
        if (!tls_begin(c))
            c->state = S_FREE;   /* drive() fails it */
    } else if (mode == M_IDLE) {
        c->state = S_HOLD;
        idle_open++;
        idle_pending--;
        c->in_op = false;
    } else {
        start_work_request(c);
    }
}

static void start_op(struct conn *c, uint64_t op_start);
static void op_failed(struct conn *c);

/* Parse a response head in c->in. Returns head length, 0 if incomplete, -1 if bad. */
static long parse_head(struct conn *c, int *status, uint64_t *clen, bool *has_clen, bool *close_it, bool *chunked)
{
    char *h = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!h)
        return c->in_len >= IN_CAP ? -1 : 0;
    size_t hlen = (size_t)(h - c->in) + 4;
    if (c->in_len < 12 || memcmp(c->in, "HTTP/1.", 7) != 0)
        return -1;
    bool http10 = c->in[7] == '0';
    *status = atoi(c->in + 9);
    *has_clen = false;
    *chunked = false;
    bool ka = false, cl = false;
    const char *end = c->in + hlen;
    const char *line = memchr(c->in, '\n', hlen);
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        size_t ll = (size_t)(eol - line);
        if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0) {
            *clen = strtoull(line + 15, NULL, 10);
            *has_clen = true;
        } else if (ll > 11 && strncasecmp(line, "connection:", 11) == 0) {
            for (size_t i = 11; i + 5 <= ll; i++) {
                if (strncasecmp(line + i, "close", 5) == 0)
                    cl = true;
                if (i + 10 <= ll && strncasecmp(line + i, "keep-alive", 10) == 0)
                    ka = true;
            }
        } else if (ll > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) {
            *chunked = true;
        }
        line = eol;
    }
    *close_it = cl || (http10 && !ka);
    return (long)hlen;
}

static void op_done(struct conn *c)
{
    uint64_t t = now_ns();
    if (mode == M_BULK) {
        bulk_t1 = t;
        ops = 1;
        c->in_op = false;
        conn_reset(c);
        return;
    }
    if (mode == M_IDLE) {
        /* --tls: the tunnel's one request is answered; hold it */
        c->in_op = false;
        c->state = S_HOLD;
        c->in_len = 0;
        idle_open++;
        idle_pending--;
        return;
    }
    /* a client that is done says so (one record), as curl does */
    if (c->ssl && (mode == M_TUNNEL || c->resp_close))
        SSL_shutdown(c->ssl);
    if (in_window(c->op_start, t)) {
        ops++;
        record_latency(t - c->op_start);
        if (rate > 0) {
            done_in_window++;
            if (t > last_done)
                last_done = t;
        }
    } else {
        ops_warm++;
    }
    c->in_op = false;
    if (mode == M_TUNNEL || c->resp_close) {
        if (mode == M_HTTP)
            reconnects++;
        conn_reset(c);
    } else {
        c->state = S_KA_IDLE;
        c->reused = true;
    }
}

/* Run the connection as far as it goes. Returns false if it was reset. */
static void drive(struct conn *c, uint32_t events)
{
    if (c->state == S_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            note_error(c, E_CONNECT, "connect: %s", strerror(err));
            op_failed(c);
            return;
        }
        after_connect(c);
        if (c->state == S_FREE) {
            note_error(c, E_TLS, "could not set up a TLS session");
            op_failed(c);
            return;
        }
    }
    for (;;) {
        switch (c->state) {
        case S_TLS_HS: {
            char why[256];
            int r = bench_tls_handshake(c->ssl, why, sizeof why);
            if (r == 0)
                return;
            if (r < 0) {
                note_error(c, E_TLS, "%s%s", why, via_proxy ? " (through the proxy)" : "");
                op_failed(c);
                return;
            }
            start_work_request(c);
            continue;
        }
        case S_SEND_CONNECT:
        case S_SEND_REQ: {
            ssize_t w = c->state == S_SEND_CONNECT ? write(c->fd, c->out + c->out_off, c->out_len - c->out_off)
                                                   : c_write(c, c->out + c->out_off, c->out_len - c->out_off);
            if (w < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    return;
                if (c->state == S_SEND_REQ && c->reused && !c->retried) {
                    /* stale keep-alive connection: reconnect and resend */
                    c->retried = true;
                    reconnects++;
                    conn_reset(c);
                    if (conn_open(c))
                        return;
                    op_failed(c);
                    return;
                }
                note_error(c, E_IO, "write: %s", strerror(errno));
                op_failed(c);
                return;
            }
            c->out_off += (size_t)w;
            if (c->out_off < c->out_len)
                continue;
            c->state = c->state == S_SEND_CONNECT ? S_PROXY_HEAD : S_RESP_HEAD;
            c->in_len = 0;
            if (c->state == S_RESP_HEAD && mode == M_BULK && !bulk_t0)
                bulk_t0 = now_ns();
            continue;
        }
        case S_PROXY_HEAD:
        case S_RESP_HEAD: {
            ssize_t r = c->state == S_PROXY_HEAD ? read(c->fd, c->in + c->in_len, IN_CAP - c->in_len)
                                                 : c_read(c, c->in + c->in_len, IN_CAP - c->in_len);
            if (r < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    return;
                if (errno == EPROTO) {
                    char why[256];
                    snprintf(why, sizeof why, "%s", last_error);
                    note_error(c, E_TLS, "reading the response: %s", why);
                    op_failed(c);
                    return;
                }
                if (c->state == S_RESP_HEAD && c->reused && !c->retried && c->in_len == 0) {
                    c->retried = true;
                    reconnects++;
                    conn_reset(c);
                    if (conn_open(c))
                        return;
                    op_failed(c);
                    return;
                }
                note_error(c, E_IO, "read: %s", strerror(errno));
                op_failed(c);
                return;
            }
            if (r == 0) {
                if (c->state == S_RESP_HEAD && c->reused && !c->retried && c->in_len == 0) {
                    c->retried = true;
                    reconnects++;
                    conn_reset(c);
                    if (conn_open(c))
                        return;
                    op_failed(c);
                    return;
                }
                note_error(c, E_EOF, "%s closed the connection %s",
                           c->state == S_PROXY_HEAD ? "proxy" : "peer",
                           c->in_len ? "mid-head" : "before replying");
                op_failed(c);
                return;
            }
            c->in_len += (size_t)r;
            int status = 0;
            uint64_t clen = 0;
            bool has_clen, close_it, chunked;
            long hl = parse_head(c, &status, &clen, &has_clen, &close_it, &chunked);
            if (hl == 0)
                continue;
            if (hl < 0) {
                note_error(c, E_PROTOCOL, "malformed response head");
                op_failed(c);
                return;
            }
            if (c->state == S_PROXY_HEAD) {
                if (status != 200) {
                    char *eol = memchr(c->in, '\r', c->in_len);
                    note_error(c, E_PROXY_STATUS, "CONNECT answered: %.*s",
                               eol ? (int)(eol - c->in) : 40, c->in);
                    op_failed(c);
                    return;
                }
                if ((size_t)hl != c->in_len) {
                    note_error(c, E_PROTOCOL, "bytes after the CONNECT reply");
                    op_failed(c);
                    return;
                }
                c->in_len = 0;
                if (use_tls) {
                    if (!tls_begin(c)) {
                        note_error(c, E_TLS, "could not set up a TLS session");
                        op_failed(c);
                        return;
                    }
                    continue;
                }
                if (mode == M_IDLE) {
                    c->state = S_HOLD;
                    idle_open++;
                    idle_pending--;
                    c->in_op = false;
                    return;
                }
                start_work_request(c);
                continue;
            }
            if (status != 200) {
                char *eol = memchr(c->in, '\r', c->in_len);
                note_error(c, E_HTTP_STATUS, "response: %.*s", eol ? (int)(eol - c->in) : 40, c->in);
                op_failed(c);
                return;
            }
            if (chunked) {
                note_error(c, E_PROTOCOL, "chunked response (not expected from the bench origin)");
                op_failed(c);
                return;
            }
            c->resp_close = close_it;
            c->body_to_eof = !has_clen;
            size_t extra = c->in_len - (size_t)hl;
            if (has_clen && extra > clen) {
                note_error(c, E_PROTOCOL, "more bytes than Content-Length");
                op_failed(c);
                return;
            }
            c->body_left = has_clen ? clen - extra : 0;
            if (mode == M_BULK)
                bulk_got += extra;
            c->in_len = 0;
            c->state = S_RESP_BODY;
            if (has_clen && c->body_left == 0) {
                op_done(c);
                return;
            }
            continue;
        }
        case S_RESP_BODY: {
            size_t want = SCRATCH;
            if (!c->body_to_eof && c->body_left < want)
                want = (size_t)c->body_left;
            ssize_t r = c_read(c, scratch, want);
            if (r < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    return;
                if (errno == EPROTO) {
                    char why[256];
                    snprintf(why, sizeof why, "%s", last_error);
                    note_error(c, E_TLS, "reading the body: %s", why);
                    op_failed(c);
                    return;
                }
                note_error(c, E_IO, "read body: %s", strerror(errno));
                op_failed(c);
                return;
            }
            if (r == 0) {
                if (c->body_to_eof) {
                    c->resp_close = true;
                    op_done(c);
                    return;
                }
                note_error(c, E_EOF, "closed mid-body, %" PRIu64 " bytes short", c->body_left);
                op_failed(c);
                return;
            }
            if (mode == M_BULK)
                bulk_got += (uint64_t)r;
            if (!c->body_to_eof) {
                c->body_left -= (uint64_t)r;
                if (c->body_left == 0) {
                    op_done(c);
                    return;
                }
            }
            continue;
        }
        case S_KA_IDLE:
        case S_HOLD: {
            /* nothing is expected: EOF or an error means the peer dropped it
             * (a held TLS tunnel: any byte at all, a close_notify included) */
            ssize_t r = c->state == S_KA_IDLE ? c_read(c, c->in, IN_CAP) : read(c->fd, c->in, IN_CAP);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (c->state == S_HOLD) {
                idle_dropped++;
                idle_open--;
                if (r > 0)
                    snprintf(last_error, sizeof last_error, "idle tunnel got unexpected bytes");
                else
                    snprintf(last_error, sizeof last_error, "idle tunnel dropped: %s",
                             r == 0 ? "EOF" : strerror(errno));
            }
            conn_reset(c);
            return;
        }
        default:
            return;
        }
    }
}

/* ---- operations and scheduling ---- */
static void start_op(struct conn *c, uint64_t op_start)
{
    c->in_op = true;
    c->retried = false;
    c->op_start = op_start;
    c->deadline = now_ns() + op_timeout_ns;
    if (c->state == S_KA_IDLE) {
        start_work_request(c);
        drive(c, EPOLLOUT);
        return;
    }
    if (!conn_open(c)) {
        op_failed(c);
        return;
    }
}

static bool q_push(uint64_t t)
{
    if (q_tail - q_head == q_cap) {
        size_t ncap = q_cap ? q_cap * 2 : 4096;
        uint64_t *n = malloc(ncap * sizeof *n);
        if (!n)
            return false;
        for (size_t i = 0; i < q_tail - q_head; i++)
            n[i] = queue[(q_head + i) % q_cap];
        free(queue);
        q_tail -= q_head;
        q_head = 0;
        queue = n;
        q_cap = ncap;
    }
    queue[q_tail++ % q_cap] = t;
    return true;
}

static void dispatch(void);

static void op_failed(struct conn *c)
{
    c->in_op = false;
    if (mode == M_IDLE)
        idle_pending--;
    if (rate > 0 && c->op_start >= t_meas && c->op_start < t_end)
        done_in_window++;
    conn_reset(c);
}

/* Give free slots work. Closed loop: every free slot starts an operation at
 * once. --rate: slots take scheduled starts from the queue. */
static void dispatch(void)
{
    if (measuring_done)
        return;
    if (mode == M_BULK || mode == M_IDLE)
        return;
    for (int i = 0; i < conc; i++) {
        struct conn *c = &conns[i];
        if (c->in_op)
            continue;
        if (rate > 0) {
            if (q_head == q_tail)
                return;
            uint64_t t = queue[q_head++ % q_cap];
            start_op(c, t);
        } else {
            start_op(c, now_ns());
        }
    }
}

static void on_timer(void)
{
    uint64_t exp;
    if (read(tfd, &exp, sizeof exp) != sizeof exp)
        return;
    uint64_t period = (uint64_t)(1e9 / rate);
    uint64_t now = now_ns();
    while (t_start + sched_issued * period <= now) {
        uint64_t t = t_start + sched_issued * period;
        if (t >= t_end)
            break;
        sched_issued++;
        if (t >= t_meas)
            sched_in_window++;
        q_push(t);
    }
}

static void check_timeouts(uint64_t now)
{
    int n = mode == M_IDLE ? idle_n : conc;
    for (int i = 0; i < n; i++) {
        struct conn *c = &conns[i];
        if (c->in_op && c->fd >= 0 && now > c->deadline) {
            note_error(c, E_TIMEOUT, "no progress for %" PRIu64 " ms (state %d)",
                       op_timeout_ns / 1000000, (int)c->state);
            op_failed(c);
        }
    }
}

/* ---- idle mode ---- */
static void idle_fill(void)
{
    if (idle_paused || idle_holding || idle_stop)
        return;
    int target_n = steps[idle_step];
    for (int i = 0; i < idle_n && idle_open + idle_pending < target_n && idle_pending < conc; i++) {
        struct conn *c = &conns[i];
        if (c->fd >= 0 || c->in_op)
            continue;
        idle_pending++;
        c->in_op = true;
        c->op_start = now_ns();
        c->deadline = c->op_start + op_timeout_ns;
        if (!conn_open(c)) {
            op_failed(c);
            return;
        }
    }
}

static void print_cpu_json(FILE *f)
{
    fprintf(f, "\"cpu\":[");
    for (int i = 0; i < n_cpu_pids; i++) {
        double ut = -1, st = -1;
        if (cpu0[i].ok && cpu1[i].ok) {
            ut = (double)(cpu1[i].ut - cpu0[i].ut) * 1e6 / (double)clk_tck;
            st = (double)(cpu1[i].st - cpu0[i].st) * 1e6 / (double)clk_tck;
        }
        fprintf(f, "%s{\"pid\":%d,\"utime_us\":%.0f,\"stime_us\":%.0f}", i ? "," : "",
                (int)cpu_pids[i], ut, st);
    }
    double sut = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6 +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec);
    double sst = (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
                 (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
    double mt = (double)(mach1_total - mach0_total);
    fprintf(f, "],\"self_cpu\":{\"utime_us\":%.0f,\"stime_us\":%.0f},\"machine_busy\":%.3f",
            sut, sst, mt > 0 ? (double)(mach1_busy - mach0_busy) / mt : -1.0);
}

static void idle_report_step(int n)
{
    sample_end();
    double secs = (double)(now_ns() - idle_step_t0) / 1e9;
    printf("{\"event\":\"at\",\"n\":%d,\"partial\":%s,\"open\":%d,\"dropped\":%d,\"errors\":%" PRIu64
           ",\"seconds\":%.3f,", n, idle_partial ? "true" : "false", idle_open, idle_dropped,
           errs[E_CONNECT] + errs[E_PROXY_STATUS] + errs[E_EOF] + errs[E_TIMEOUT] + errs[E_PROTOCOL] + errs[E_IO] +
           errs[E_TLS],
           secs);
    print_cpu_json(stdout);
    printf("}\n");
    fflush(stdout);
}

static void on_stdin(void)
{
    char buf[256];
    ssize_t r = read(0, buf, sizeof buf - 1);
    if (r <= 0) {
        idle_stop = true;
        epoll_ctl(ep, EPOLL_CTL_DEL, 0, NULL);
        return;
    }
    buf[r] = 0;
    if (strstr(buf, "stop") || idle_holding)
        idle_stop = true;
    else if (idle_paused) {
        idle_paused = false;
        idle_step++;
        idle_step_t0 = now_ns();
        sample_start();
    }
}

static int json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    return fputc('"', f);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void on_signal(int sig) { (void)sig; got_signal = 1; }

/* A NAME:TOKEN as Basic wants it: a name, then a colon (the user-id of
 * RFC 7617 has none), then the token; printable ASCII without spaces. */
static bool cred_ok(const char *cred, size_t len)
{
    const char *colon = memchr(cred, ':', len);
    if (!colon || colon == cred || (size_t)(colon - cred) + 1 == len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (cred[i] <= ' ' || cred[i] > '~')
            return false;
    return true;
}

/* The requests one connection sends; cred (NULL: none) goes into the
 * CONNECT, and into the request when that goes to the proxy itself (plain
 * HTTP), never into one sent through a tunnel. */
static void build_reqset(struct reqset *rs, const char *cred, size_t cred_len)
{
    /* the header's name, the base64 of at most AUTH_LINE_MAX bytes, CRLF, NUL */
    char auth[32 + 4 * ((AUTH_LINE_MAX + 2) / 3) + 1] = "";
    if (cred) {
        if (cred_len > AUTH_LINE_MAX)
            abort();   /* both callers bound it */
        static const char pre[] = "Proxy-Authorization: Basic ";
        memcpy(auth, pre, sizeof pre - 1);
        int n = EVP_EncodeBlock((unsigned char *)auth + sizeof pre - 1, (const unsigned char *)cred, (int)cred_len);
        memcpy(auth + sizeof pre - 1 + n, "\r\n", 3);
    }
    bool work_to_proxy = mode == M_HTTP && via_proxy && !use_tls;
    int n = asprintf(&rs->connect, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-bench\r\n%s\r\n",
                     target, target, auth);
    int m;
    if (mode == M_BULK)
        m = asprintf(&rs->work, "GET /bulk/%" PRIu64 "%s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-bench\r\n\r\n",
                     bulk_bytes, bulk_name ? "/" : "", bulk_name ? bulk_name : "", target);
    else if (work_to_proxy)
        m = asprintf(&rs->work, "GET http://%s/small HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-bench\r\n%s\r\n",
                     target, target, auth);
    else
        m = asprintf(&rs->work, "GET /small HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-bench\r\n\r\n", target);
    if (n < 0 || m < 0) {
        fprintf(stderr, "loadgen: out of memory\n");
        exit(1);
    }
    rs->connect_len = (size_t)n;
    rs->work_len = (size_t)m;
}

/* --proxy-auth-file: one request set per line. Exits 2 on a bad file. */
static void load_auth_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "loadgen: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t cap = 0;
    char line[AUTH_LINE_MAX + 2];
    unsigned long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        bool ended = len && line[len - 1] == '\n';
        if (!ended && !feof(f)) {
            fprintf(stderr, "loadgen: %s:%lu: longer than %d bytes\n", path, lineno, AUTH_LINE_MAX);
            exit(2);
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len == 0)
            continue;
        if (len > AUTH_LINE_MAX || !cred_ok(line, len)) {
            fprintf(stderr, "loadgen: %s:%lu: not NAME:TOKEN\n", path, lineno);
            exit(2);
        }
        if (n_reqs == AUTH_LINES_MAX) {
            fprintf(stderr, "loadgen: %s: more than %d lines\n", path, AUTH_LINES_MAX);
            exit(2);
        }
        if (n_reqs == cap) {
            cap = cap ? cap * 2 : 1024;
            struct reqset *nr = realloc(reqs, cap * sizeof *nr);
            if (!nr) {
                fprintf(stderr, "loadgen: out of memory\n");
                exit(1);
            }
            reqs = nr;
        }
        build_reqset(&reqs[n_reqs++], line, len);
    }
    bool err = ferror(f);
    fclose(f);
    if (err || n_reqs == 0) {
        fprintf(stderr, "loadgen: %s: %s\n", path, err ? "read error" : "no NAME:TOKEN line");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage(NULL);
    if (strcmp(argv[1], "tunnel") == 0)
        mode = M_TUNNEL;
    else if (strcmp(argv[1], "http") == 0)
        mode = M_HTTP;
    else if (strcmp(argv[1], "bulk") == 0)
        mode = M_BULK;
    else if (strcmp(argv[1], "idle") == 0)
        mode = M_IDLE;
    else
        usage("unknown mode");
    const char *proxy = NULL, *connect_to = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) usage("missing value"); i++; } while (0)
        if (strcmp(a, "--proxy") == 0) { NEED(); proxy = v; }
        else if (strcmp(a, "--target") == 0) { NEED(); target = v; }
        else if (strcmp(a, "--connect") == 0) { NEED(); connect_to = v; }
        else if (strcmp(a, "-c") == 0) { NEED(); conc = atoi(v); }
        else if (strcmp(a, "-d") == 0) { NEED(); duration_s = atof(v); }
        else if (strcmp(a, "--warmup") == 0) { NEED(); warmup_s = atof(v); }
        else if (strcmp(a, "--rate") == 0) { NEED(); rate = atof(v); }
        else if (strcmp(a, "--bytes") == 0) { NEED(); bulk_bytes = strtoull(v, NULL, 10); }
        else if (strcmp(a, "--bulk-name") == 0) { NEED(); bulk_name = v; }
        else if (strcmp(a, "-n") == 0) { NEED(); idle_n = atoi(v); }
        else if (strcmp(a, "--hold") == 0) { NEED(); hold_s = atof(v); }
        else if (strcmp(a, "--timeout-ms") == 0) { NEED(); op_timeout_ns = strtoull(v, NULL, 10) * 1000000ull; }
        else if (strcmp(a, "--tls") == 0) use_tls = true;
        else if (strcmp(a, "--ca") == 0) { NEED(); tls_ca = v; }
        else if (strcmp(a, "--sni") == 0) { NEED(); tls_sni = v; }
        else if (strcmp(a, "--proxy-auth") == 0) { NEED(); auth_one = v; }
        else if (strcmp(a, "--proxy-auth-file") == 0) { NEED(); auth_file = v; }
        else if (strcmp(a, "--cpu-pid") == 0) {
            NEED();
            if (n_cpu_pids == MAX_PIDS)
                usage("too many --cpu-pid");
            cpu_pids[n_cpu_pids++] = (pid_t)atoi(v);
        } else if (strcmp(a, "--steps") == 0) {
            NEED();
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t && n_steps < 32; t = strtok_r(NULL, ",", &save))
                steps[n_steps++] = atoi(t);
            free(dup);
        } else
            usage("unknown option");
#undef NEED
    }
    if (!target)
        usage("--target is required");
    if (conc < 1 || duration_s <= 0 || warmup_s < 0 || rate < 0)
        usage("bad -c, -d, --warmup or --rate");
    if (use_tls != (tls_ca != NULL) || (tls_sni && !use_tls))
        usage("--tls needs --ca (and --ca, --sni need --tls)");
    if (use_tls) {
        static char host[256];
        const char *colon = strrchr(target, ':');
        size_t hl = colon ? (size_t)(colon - target) : strlen(target);
        if (!tls_sni) {
            if (hl == 0 || hl >= sizeof host)
                usage("bad --target host for --sni");
            memcpy(host, target, hl);
            host[hl] = 0;
            tls_sni = host;
        }
        char why[300];
        tls_ctx = bench_tls_ctx(false, NULL, NULL, tls_ca, why, sizeof why);
        if (!tls_ctx) {
            fprintf(stderr, "loadgen: %s\n", why);
            return 2;
        }
    }
    via_proxy = proxy != NULL;
    if (parse_addr(proxy ? proxy : connect_to ? connect_to : target, &dst) < 0)
        usage("bad --proxy/--connect/--target address (want IPv4:PORT)");
    if (mode == M_IDLE) {
        if (idle_n < 1)
            usage("bad -n");
        if (n_steps == 0)
            steps[n_steps++] = idle_n;
        for (int i = 0; i < n_steps; i++)
            if (steps[i] < 1 || steps[i] > idle_n || (i && steps[i] <= steps[i - 1]))
                usage("--steps must rise and end at most at -n");
        if (conc == 1)
            conc = 100;
    }
    if (mode == M_BULK)
        conc = 1;
    /* a path segment of letters, digits, - and _: nothing a proxy would
     * refuse as ambiguous, nothing that ends the request line */
    if (bulk_name) {
        size_t nl = strlen(bulk_name);
        if (mode != M_BULK || nl == 0 || nl > 64 || strspn(bulk_name, "abcdefghijklmnopqrstuvwxyz"
                                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != nl)
            usage("--bulk-name is for bulk mode: 1-64 letters, digits, - or _");
    }
    clk_tck = sysconf(_SC_CLK_TCK);

    /* requests */
    if (auth_one && auth_file)
        usage("--proxy-auth and --proxy-auth-file exclude each other");
    if ((auth_one || auth_file) && !via_proxy)
        usage("--proxy-auth and --proxy-auth-file need --proxy (the origin must not get a proxy's credentials)");
    if (auth_one && (strlen(auth_one) > AUTH_LINE_MAX || !cred_ok(auth_one, strlen(auth_one))))
        usage("--proxy-auth wants NAME:TOKEN");
    if (auth_file) {
        load_auth_file(auth_file);
    } else {
        reqs = calloc(1, sizeof *reqs);
        if (!reqs) {
            fprintf(stderr, "loadgen: out of memory\n");
            return 1;
        }
        n_reqs = 1;
        build_reqset(&reqs[0], auth_one, auth_one ? strlen(auth_one) : 0);
    }

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int n_conns = mode == M_IDLE ? idle_n : conc;
    conns = calloc((size_t)n_conns, sizeof *conns);
    if (!conns) {
        fprintf(stderr, "loadgen: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n_conns; i++)
        conns[i].fd = -1;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("loadgen: epoll_create1");
        return 1;
    }

    t_start = now_ns();
    t_meas = t_start + (uint64_t)(warmup_s * 1e9);
    t_end = t_meas + (uint64_t)(duration_s * 1e9);
    if (mode == M_BULK || mode == M_IDLE) {
        t_meas = t_start;
        t_end = t_start + (uint64_t)(duration_s * 1e9);   /* the time limit */
    }
    bool sampled_start = false;
    if (mode == M_BULK || mode == M_IDLE) {
        sample_start();
        sampled_start = true;
    }
    if (rate > 0 && (mode == M_TUNNEL || mode == M_HTTP)) {
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        uint64_t period = (uint64_t)(1e9 / rate);
        if (period == 0)
            usage("--rate too high");
        struct itimerspec its = {
            .it_interval = { (time_t)(period / 1000000000ull), (long)(period % 1000000000ull) },
            .it_value = { 0, 1 },
        };
        timerfd_settime(tfd, 0, &its, NULL);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tfd };
        epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
        /* http: open the keep-alive pool up front (during the warm-up) */
    }
    if (mode == M_IDLE) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ep };
        stdin_watched = epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) == 0;
        idle_step_t0 = now_ns();
        idle_fill();
    } else if (mode == M_BULK) {
        conns[0].in_op = true;
        conns[0].op_start = t_start;
        conns[0].deadline = t_end;
        if (!conn_open(&conns[0]))
            op_failed(&conns[0]);
    } else {
        dispatch();
    }

    struct epoll_event evs[512];
    uint64_t last_scan = now_ns();
    uint64_t hold_until = 0;
    bool timed_out = false;
    for (;;) {
        uint64_t now = now_ns();
        if (got_signal)
            break;
        if (!sampled_start && now >= t_meas) {
            sample_start();
            sampled_start = true;
        }
        if (mode == M_TUNNEL || mode == M_HTTP) {
            if (!measuring_done && now >= t_end) {
                sample_end();
                measuring_done = true;
                if (rate <= 0)
                    break;
            }
            if (measuring_done && rate > 0) {
                /* wait for the window's operations to finish */
                bool busy = false;
                for (int i = 0; i < conc; i++)
                    if (conns[i].in_op && conns[i].op_start >= t_meas && conns[i].op_start < t_end)
                        busy = true;
                if ((!busy && q_head == q_tail) || now > t_end + op_timeout_ns)
                    break;
                /* queued operations of the window still run */
                if (q_head != q_tail) {
                    for (int i = 0; i < conc && q_head != q_tail; i++)
                        if (!conns[i].in_op)
                            start_op(&conns[i], queue[q_head++ % q_cap]);
                }
            }
        } else if (mode == M_BULK) {
            if (!conns[0].in_op)
                break;
            if (now >= t_end) {
                timed_out = true;
                break;
            }
        } else if (mode == M_IDLE) {
            if (idle_stop)
                break;
            int goal = steps[idle_step];
            if (!idle_paused && !idle_holding && idle_open >= goal) {
                idle_report_step(goal);
                if (idle_step == n_steps - 1) {
                    idle_holding = true;
                    hold_until = now + (uint64_t)(hold_s * 1e9);
                } else if (stdin_watched) {
                    idle_paused = true;
                } else {
                    idle_step++;
                    idle_step_t0 = now;
                    sample_start();
                }
            }
            if (idle_holding && now > hold_until)
                break;
            if (!idle_paused && !idle_holding && now - idle_step_t0 > (uint64_t)(duration_s * 1e9)) {
                /* report what was reached (the controller samples at it),
                 * then hold like after the last step */
                snprintf(last_error, sizeof last_error,
                         "only %d of %d idle tunnels open after %.0f s", idle_open, goal, duration_s);
                timed_out = true;
                idle_partial = true;
                idle_report_step(idle_open);
                idle_holding = true;
                hold_until = now + (uint64_t)(hold_s * 1e9);
            }
            if (errs[E_CONNECT] + errs[E_PROXY_STATUS] + errs[E_EOF] + errs[E_PROTOCOL] + errs[E_IO] + errs[E_TLS] >
                (uint64_t)idle_n) {
                timed_out = true;
                break;
            }
            idle_fill();
        }
        if (now - last_scan > 100000000ull) {
            check_timeouts(now);
            last_scan = now;
        }
        if (mode != M_IDLE)
            dispatch();
        int timeout_ms = 50;
        int n = epoll_wait(ep, evs, 512, timeout_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("loadgen: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &tfd) {
                on_timer();
                continue;
            }
            if (p == &ep) {
                on_stdin();
                continue;
            }
            struct conn *c = p;
            if (c->fd < 0)
                continue;
            drive(c, evs[i].events);
        }
        if (mode == M_TUNNEL || mode == M_HTTP)
            dispatch();
    }
    uint64_t t_stop = now_ns();
    if (!measuring_done)
        sample_end();
    /* --rate: operations of the window that never finished count with their
     * age at the cutoff (a lower bound), so a gate that falls behind cannot
     * show a good p99 by finishing only the operations it got to */
    uint64_t incomplete = 0;
    if (rate > 0) {
        for (int i = 0; i < conc; i++)
            if (conns[i].in_op && conns[i].op_start >= t_meas && conns[i].op_start < t_end) {
                record_latency(t_stop - conns[i].op_start);
                incomplete++;
            }
        while (q_head != q_tail) {
            uint64_t t = queue[q_head++ % q_cap];
            if (t >= t_meas && t < t_end) {
                record_latency(t_stop - t);
                incomplete++;
            }
        }
    }

    /* results */
    uint64_t errors = 0;
    for (int i = 0; i < E_N; i++)
        errors += errs[i];
    double window = (double)(t_end - t_meas) / 1e9;
    if (mode == M_BULK)
        window = bulk_t1 ? (double)(bulk_t1 - bulk_t0) / 1e9 : (double)(t_stop - (bulk_t0 ? bulk_t0 : t_start)) / 1e9;
    if (mode == M_IDLE)
        window = (double)(t_stop - t_start) / 1e9;
    printf("{\"event\":\"result\",\"mode\":\"%s\",\"proxy\":", argv[1]);
    if (proxy)
        json_str(stdout, proxy);
    else
        printf("null");
    printf(",\"target\":");
    json_str(stdout, target);
    printf(",\"c\":%d,\"rate\":%.1f,\"window_s\":%.4f,\"ops\":%" PRIu64 ",\"ops_warmup\":%" PRIu64
           ",\"ops_per_s\":%.1f", conc, rate, window, ops, ops_warm, window > 0 ? (double)ops / window : 0);
    if (rate > 0)
        printf(",\"scheduled\":%" PRIu64 ",\"finished_of_scheduled\":%" PRIu64 ",\"incomplete\":%" PRIu64
               ",\"drain_s\":%.3f", sched_in_window, done_in_window, incomplete,
               last_done > t_end ? (double)(last_done - t_end) / 1e9 : 0.0);
    if (n_lat) {
        qsort(lat, n_lat, sizeof *lat, cmp_u32);
        double sum = 0;
        for (size_t i = 0; i < n_lat; i++)
            sum += lat[i];
        printf(",\"lat_us\":{\"n\":%zu,\"p50\":%u,\"p90\":%u,\"p99\":%u,\"p999\":%u,\"max\":%u,\"mean\":%.1f}",
               n_lat, lat[n_lat / 2], lat[(size_t)((double)n_lat * 0.9)], lat[(size_t)((double)n_lat * 0.99)],
               lat[(size_t)((double)n_lat * 0.999)], lat[n_lat - 1], sum / (double)n_lat);
    }
    if (mode == M_BULK) {
        double secs = bulk_t0 ? (double)((bulk_t1 ? bulk_t1 : t_stop) - bulk_t0) / 1e9 : 0;
        printf(",\"bytes\":%" PRIu64 ",\"bytes_wanted\":%" PRIu64 ",\"complete\":%s,\"mb_per_s\":%.1f",
               bulk_got, bulk_bytes, bulk_t1 && bulk_got == bulk_bytes ? "true" : "false",
               secs > 0 ? (double)bulk_got / secs / 1e6 : 0);
    }
    if (mode == M_IDLE)
        printf(",\"open\":%d,\"wanted\":%d,\"dropped\":%d", idle_open, idle_n, idle_dropped);
    printf(",\"reconnects\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"errors_by_kind\":{", reconnects, errors);
    for (int i = 0; i < E_N; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "", err_names[i], errs[i]);
    printf("},\"errors_outside_window\":%" PRIu64 ",\"timed_out\":%s,\"last_error\":", errs_warm,
           timed_out ? "true" : "false");
    json_str(stdout, last_error);
    printf(",");
    print_cpu_json(stdout);
    printf("}\n");
    fflush(stdout);

    int n_all = mode == M_IDLE ? idle_n : conc;
    for (int i = 0; i < n_all; i++)
        if (conns[i].fd >= 0)
            close(conns[i].fd);
    if (mode == M_BULK)
        return bulk_t1 && bulk_got == bulk_bytes ? 0 : 1;
    if (mode == M_IDLE)
        return idle_open > 0 && !timed_out ? 0 : 1;   /* timed out: the JSON says how far it got */
    return ops > 0 ? 0 : 1;
}
