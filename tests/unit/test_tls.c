/* TLS streams (proxy/conn/stream_tls.c over proxy/crypto/crypto.c): real
 * handshakes on an event loop, between sluice's own client and server
 * streams over socketpairs, and against openssl s_server / s_client on
 * loopback, with certificates openssl makes for each run
 * (tests/unit/data/tls/mkcerts.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
/* <sanitizer/allocator_interface.h>, which Debian ships only with clang */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>

#include "stream.h"
#include "tls.h"

static char dir[64];
static struct event_base *base;
static sl_tls_server *srv;   /* the test CA as sluice's inspection CA */
static sl_tls_client *cli;   /* trusts the test CA */

static const char *path(const char *name)
{
    static char bufs[8][256];
    static int i;
    char *b = bufs[i++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* ---- a stream's owner, recording what it is told ---- */

typedef struct peer {
    sl_stream *s;
    int ready, reads, eofs, errors, drained;
    int err;
    char failure[160];
    struct evbuffer *got;       /* plaintext received, when consuming */
    bool consume;
    size_t in_peak;
    int free_on;                /* free the stream on this event (-1: never) */
    bool late_event;            /* an event after ERROR */
    bool reentered;             /* an event from inside an owner's call */
} peer;

static bool in_call;

static void on_event(sl_stream *s, sl_stream_event ev, void *arg)
{
    peer *p = arg;
    if (in_call)
        p->reentered = true;
    if (p->errors)
        p->late_event = true;
    size_t inl = evbuffer_get_length(s->in);
    if (inl > p->in_peak)
        p->in_peak = inl;
    switch (ev) {
    case SL_STREAM_READY: p->ready++; break;
    case SL_STREAM_READ: p->reads++; break;
    case SL_STREAM_EOF: p->eofs++; break;
    case SL_STREAM_ERROR:
        p->errors++;
        p->err = s->error;
        break;
    case SL_STREAM_DRAINED: p->drained++; break;
    }
    if (s->failure[0])
        snprintf(p->failure, sizeof p->failure, "%s", s->failure);
    if ((int)ev == p->free_on) {
        sl_stream_free(s);
        p->s = NULL;
        return;
    }
    if (p->consume && inl > 0) {
        evbuffer_add_buffer(p->got, s->in);
        in_call = true;
        sl_stream_update(s);
        in_call = false;
    }
}

static void peer_init(peer *p)
{
    memset(p, 0, sizeof *p);
    p->got = evbuffer_new();
    p->consume = true;
    p->free_on = -1;
}

static void peer_done(peer *p)
{
    sl_stream_free(p->s);
    evbuffer_free(p->got);
    memset(p, 0, sizeof *p);
}

static void call_flush(peer *p)
{
    in_call = true;
    sl_stream_flush(p->s);
    in_call = false;
}

static void call_update(peer *p)
{
    in_call = true;
    sl_stream_update(p->s);
    in_call = false;
}

static void want(peer *p, bool on)
{
    p->s->want_read = on;
    call_update(p);
}

/* ---- the loop ---- */

static bool timed_out;

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    timed_out = true;
}

typedef bool (*cond_fn)(void *);

static bool run_until(cond_fn cond, void *arg, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    struct event *t = evtimer_new(base, on_timeout, NULL);
    timed_out = false;
    evtimer_add(t, &tv);
    while (!cond(arg) && !timed_out)
        event_base_loop(base, EVLOOP_ONCE);
    event_free(t);
    return cond(arg);
}

static void run_for(int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    struct event *t = evtimer_new(base, on_timeout, NULL);
    timed_out = false;
    evtimer_add(t, &tv);
    while (!timed_out)
        event_base_loop(base, EVLOOP_ONCE);
    event_free(t);
}

static bool both_settled(void *arg)
{
    peer *p = arg;   /* p[0], p[1] */
    return (p[0].ready || p[0].errors) && (p[1].ready || p[1].errors);
}

static bool settled(void *arg)
{
    peer *p = arg;
    return p->ready || p->errors;
}

static bool errored(void *arg)
{
    return ((peer *)arg)->errors > 0;
}

static bool ended(void *arg)
{
    peer *p = arg;
    return p->eofs > 0 || p->errors > 0;
}

typedef struct want_bytes {
    peer *p;
    size_t n;
} want_bytes;

static bool got_bytes(void *arg)
{
    want_bytes *w = arg;
    return evbuffer_get_length(w->p->got) >= w->n || w->p->errors;
}

/* ---- plumbing ---- */

static sl_stream *raw_stream(int fd)
{
    sl_stream *s = sl_stream_socket(base, fd, 65536, NULL, NULL);
    assert_non_null(s);
    return s;
}

/* A client and a server stream over a socketpair; fds[0] is the
 * client's socket, fds[1] the server's (owned by the streams). */
static void make_pair(peer p[2], sl_tls_client *c, const char *chost, sl_tls_server *sv, const char *shost,
                      size_t cmax, size_t smax, int fds[2])
{
    int f[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, f), 0);
    peer_init(&p[0]);
    peer_init(&p[1]);
    p[0].s = sl_stream_tls_client(raw_stream(f[0]), c, chost, cmax, on_event, &p[0]);
    p[1].s = sl_stream_tls_server(raw_stream(f[1]), sv, shost, smax, on_event, &p[1]);
    assert_non_null(p[0].s);
    assert_non_null(p[1].s);
    want(&p[0], true);
    want(&p[1], true);
    if (fds) {
        fds[0] = f[0];
        fds[1] = f[1];
    }
}

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

/* n bytes from a to b, written in pieces of `piece`; b receives them all. */
static void send_check(peer *a, peer *b, size_t n, size_t piece, unsigned seed)
{
    unsigned char *buf = malloc(n ? n : 1);
    pattern(buf, n, seed);
    evbuffer_drain(b->got, evbuffer_get_length(b->got));
    for (size_t off = 0; off < n; off += piece) {
        size_t k = n - off < piece ? n - off : piece;
        evbuffer_add(a->s->out, buf + off, k);
        call_flush(a);
    }
    want_bytes w = { b, n };
    assert_true(run_until(got_bytes, &w, 10000));
    assert_int_equal(evbuffer_get_length(b->got), n);
    assert_memory_equal(evbuffer_pullup(b->got, -1), buf, n);
    assert_int_equal(b->errors, 0);
    free(buf);
}

static int tcp_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t l = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &l);
    *port = ntohs(sa.sin_port);
    return fd;
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static int accept_one(int lfd)
{
    struct pollfd pf = { .fd = lfd, .events = POLLIN };
    assert_int_equal(poll(&pf, 1, 10000), 1);
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* A child running argv with stdin from /dev/null and stdout+stderr into
 * a pipe (*out). */
static pid_t spawn(char *const argv[], int *out)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    *out = p[0];
    return pid;
}

/* Everything a child wrote until it exits (at most 10 s), NUL-terminated. */
static char *collect(pid_t pid, int out)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        struct pollfd pf = { .fd = out, .events = POLLIN };
        if (poll(&pf, 1, 10000) != 1)
            break;
        ssize_t r = read(out, b + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == cap - 1)
            break;
    }
    b[n] = '\0';
    close(out);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return b;
}

/* ---- setup ---- */

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    const char *data = getenv("SLUICE_TEST_DATA");
    if (!data || !*data)
        data = "tests/unit/data";
    snprintf(dir, sizeof dir, "/tmp/sluice-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh %s/tls/mkcerts.sh %s", data, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "mkcerts.sh failed\n");
        return -1;
    }
    base = event_base_new();
    char err[256];
    srv = sl_tls_server_new(path("ca.pem"), path("ca.key"), 7, 64, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "server: %s\n", err);
        return -1;
    }
    cli = sl_tls_client_new(path("ca.pem"), err, sizeof err);
    if (!cli) {
        fprintf(stderr, "client: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sl_tls_client_free(cli);
    sl_tls_server_free(srv);
    event_base_free(base);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- handshakes between sluice's two sides ---- */

static void test_handshake_then_bytes_both_ways(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    assert_int_equal(p[0].ready, 1);
    assert_int_equal(p[1].ready, 1);
    assert_int_equal(p[0].errors + p[1].errors, 0);
    static const size_t sizes[] = { 1, 2, 100, 16383, 16384, 16385, 32775, 300000 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        send_check(&p[0], &p[1], sizes[i], sizes[i], (unsigned)i);
        send_check(&p[1], &p[0], sizes[i], sizes[i], (unsigned)i + 100);
    }
    /* written: every plaintext byte that left `out` */
    assert_int_equal(evbuffer_get_length(p[0].s->out), 0);
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        total += sizes[i];
    assert_int_equal(p[0].s->written, total);
    assert_int_equal(p[1].s->written, total);
    assert_false(p[0].reentered || p[1].reentered);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* The owner's in_max bounds the plaintext held, whatever sizes come. */
static void test_in_max_bounds_plaintext(void **state)
{
    (void)state;
    static const size_t maxes[] = { 1, 7, 4096, 16384, 20000 };
    for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++) {
        peer p[2];
        make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, maxes[m], NULL);
        assert_true(run_until(both_settled, p, 10000));
        send_check(&p[0], &p[1], 50000, 50000, 3);
        send_check(&p[0], &p[1], 777, 1, 4);   /* one byte a flush */
        assert_true(p[1].in_peak <= maxes[m]);
        peer_done(&p[0]);
        peer_done(&p[1]);
    }
}

static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

/* Plaintext that trickles in one byte a record costs what it holds, not a
 * buffer block a record (a head that stalls byte by byte, 64 KiB of it). */
static void test_one_byte_records_cost_their_bytes(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    p[1].consume = false;
    size_t before = heap_in_use();
    for (int i = 0; i < 20000; i++) {
        evbuffer_add(p[0].s->out, "x", 1);
        call_flush(&p[0]);   /* one record each */
        if (i % 500 == 499)
            run_for(1);
    }
    run_until(got_bytes, &(want_bytes){ &p[1], 1 << 30 }, 300);
    assert_int_equal(evbuffer_get_length(p[1].s->in), 20000);
    size_t grew = heap_in_use() - before;
    if (grew > 40000)   /* 23,680 here; 65,664 with 16 KiB reservations a record */
        fail_msg("20,000 bytes in one-byte records took %zu bytes of heap", grew);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* A relay between the two sides that moves at most k bytes a loop pass,
 * so that records and the handshake arrive split at every size. */
typedef struct relay {
    int a, b;
    size_t k;
    struct event *ea, *eb;
} relay;

static void relay_move(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    relay *r = arg;
    int to = fd == r->a ? r->b : r->a;
    char buf[65536];
    ssize_t n = recv(fd, buf, r->k < sizeof buf ? r->k : sizeof buf, 0);
    if (n > 0)
        assert_int_equal(send(to, buf, (size_t)n, MSG_NOSIGNAL), n);
    else if (n == 0)
        shutdown(to, SHUT_WR);
}

static void test_every_split_size(void **state)
{
    (void)state;
    static const size_t ks[] = { 1, 2, 3, 5, 8, 13, 64, 517, 4096, 16389 };
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        int c[2], s[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, c), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, s), 0);
        relay r = { .a = c[1], .b = s[1], .k = ks[i] };
        r.ea = event_new(base, r.a, EV_READ | EV_PERSIST, relay_move, &r);
        r.eb = event_new(base, r.b, EV_READ | EV_PERSIST, relay_move, &r);
        event_add(r.ea, NULL);
        event_add(r.eb, NULL);
        peer p[2];
        peer_init(&p[0]);
        peer_init(&p[1]);
        p[0].s = sl_stream_tls_client(raw_stream(c[0]), cli, "upstream.test", 65536, on_event, &p[0]);
        p[1].s = sl_stream_tls_server(raw_stream(s[0]), srv, "upstream.test", 65536, on_event, &p[1]);
        want(&p[0], true);
        want(&p[1], true);
        assert_true(run_until(both_settled, p, 20000));
        assert_int_equal(p[0].ready + p[1].ready, 2);
        send_check(&p[0], &p[1], 20000, 20000, 5);
        send_check(&p[1], &p[0], 20000, 6000, 6);
        peer_done(&p[0]);
        peer_done(&p[1]);
        event_free(r.ea);
        event_free(r.eb);
        close(c[1]);
        close(s[1]);
    }
}

/* A peer that does not read: plaintext waits in `out` (the owner's
 * watermarks see it), then goes, and DRAINED says so. */
static void test_backpressure_keeps_plaintext_in_out(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    want(&p[1], false);
    size_t n = 4 << 20;
    unsigned char *buf = malloc(n);
    pattern(buf, n, 9);
    evbuffer_add(p[0].s->out, buf, n);
    call_flush(&p[0]);
    run_for(300);
    size_t left = evbuffer_get_length(p[0].s->out);
    /* what left `out` is bounded by the socket buffers and one record or two */
    assert_true(left > 0);
    assert_false(sl_stream_flushed(p[0].s));
    assert_int_equal(p[0].s->written + left, n);
    assert_int_equal(p[0].drained, 0);
    assert_int_equal(p[1].reads, 0);
    assert_int_equal(evbuffer_get_length(p[1].s->in), 0);
    want(&p[1], true);
    want_bytes w = { &p[1], n };
    assert_true(run_until(got_bytes, &w, 20000));
    assert_memory_equal(evbuffer_pullup(p[1].got, -1), buf, n);
    run_for(50);
    assert_int_equal(p[0].drained, 1);
    assert_int_equal(p[0].s->written, n);
    assert_true(sl_stream_flushed(p[0].s));
    assert_true(p[1].in_peak <= 65536);
    free(buf);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* `out` empty is not "sent": a record may wait for the socket below it.
 * sl_stream_flushed says so, and DRAINED comes once it has gone. */
static void test_out_empty_is_not_flushed(void **state)
{
    (void)state;
    peer p[2];
    int fds[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, fds);
    assert_true(run_until(both_settled, p, 10000));
    int small = 4096;
    assert_int_equal(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    want(&p[1], false);
    unsigned char buf[14000];
    pattern(buf, sizeof buf, 3);
    evbuffer_add(p[0].s->out, buf, sizeof buf);
    call_flush(&p[0]);
    run_for(100);
    assert_int_equal(evbuffer_get_length(p[0].s->out), 0);
    assert_int_equal(p[0].s->written, sizeof buf);
    assert_false(sl_stream_flushed(p[0].s));
    assert_int_equal(p[0].drained, 0);
    want(&p[1], true);
    want_bytes w = { &p[1], sizeof buf };
    assert_true(run_until(got_bytes, &w, 5000));
    run_for(50);
    assert_true(sl_stream_flushed(p[0].s));
    assert_int_equal(p[0].drained, 1);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* close_notify is a clean end; a socket closed without it is an end with
 * the failure noted (truncation is for HTTP framing to judge). */
static void test_close_notify_and_truncation(void **state)
{
    (void)state;
    peer p[2];
    int fds[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, fds);
    assert_true(run_until(both_settled, p, 10000));
    evbuffer_add(p[0].s->out, "last words", 10);
    sl_stream_shutdown(p[0].s);
    assert_true(run_until(ended, &p[1], 5000));
    assert_int_equal(p[1].eofs, 1);
    assert_int_equal(p[1].errors, 0);
    assert_true(p[1].s->eof);
    assert_string_equal(p[1].failure, "");
    assert_int_equal(evbuffer_get_length(p[1].got), 10);
    peer_done(&p[0]);
    peer_done(&p[1]);

    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, fds);
    assert_true(run_until(both_settled, p, 10000));
    send_check(&p[0], &p[1], 100, 100, 1);
    shutdown(fds[0], SHUT_WR);   /* under the client's TLS: no close_notify */
    assert_true(run_until(ended, &p[1], 5000));
    assert_int_equal(p[1].eofs, 1);
    assert_int_equal(p[1].errors, 0);
    assert_non_null(strstr(p[1].failure, "without a TLS close_notify"));
    assert_non_null(strstr(p[1].failure, "client TLS"));
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* A record that does not decrypt is fatal, in words, on the side that got
 * it; the alert it answers with is fatal on the other. */
static void test_forged_record_fails_both_sides(void **state)
{
    (void)state;
    peer p[2];
    int fds[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, fds);
    assert_true(run_until(both_settled, p, 10000));
    send_check(&p[0], &p[1], 100, 100, 1);
    unsigned char rec[5 + 40] = { 23, 3, 3, 0, 40 };
    for (size_t i = 5; i < sizeof rec; i++)
        rec[i] = (unsigned char)(i * 37);
    assert_int_equal(send(fds[0], rec, sizeof rec, MSG_NOSIGNAL), (ssize_t)sizeof rec);
    assert_true(run_until(errored, &p[1], 5000));
    assert_int_equal(p[1].err, EPROTO);
    assert_string_equal(p[1].failure, "client TLS: TLS error: verification of the message MAC failed");
    assert_true(run_until(errored, &p[0], 5000));
    assert_string_equal(p[0].failure, "upstream TLS: the peer sent alert bad_record_mac (20)");
    assert_false(p[0].late_event || p[1].late_event);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* A client of mbedtls' own (tests may use it to cross-check), blocking, in
 * a thread: empty application-data records, which mbedtls_ssl_read alone
 * reports as 0, its "transport closed" value. */
static int fd_send(void *ctx, const unsigned char *b, size_t n)
{
    ssize_t r = send(*(int *)ctx, b, n, MSG_NOSIGNAL);
    return r < 0 ? MBEDTLS_ERR_NET_SEND_FAILED : (int)r;
}

static int fd_recv(void *ctx, unsigned char *b, size_t n)
{
    ssize_t r = recv(*(int *)ctx, b, n, 0);
    return r < 0 ? MBEDTLS_ERR_NET_RECV_FAILED : (int)r;
}

static int test_rng(void *ctx, unsigned char *b, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)rand();
    return 0;
}

static void *empty_records_client(void *arg)
{
    int fd = *(int *)arg;
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config_init(&conf);
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                MBEDTLS_SSL_PRESET_DEFAULT);
    mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE);
    mbedtls_ssl_conf_rng(&conf, test_rng, NULL);
    mbedtls_ssl_setup(&ssl, &conf);
    mbedtls_ssl_set_hostname(&ssl, "upstream.test");
    mbedtls_ssl_set_bio(&ssl, &fd, fd_send, fd_recv, NULL);
    void *ret = (void *)1;
    if (mbedtls_ssl_handshake(&ssl) == 0) {
        for (int i = 0; i < 3; i++)
            mbedtls_ssl_write(&ssl, (const unsigned char *)"", 0);
        mbedtls_ssl_write(&ssl, (const unsigned char *)"after", 5);
        mbedtls_ssl_close_notify(&ssl);
        ret = NULL;
    }
    mbedtls_ssl_free(&ssl);
    mbedtls_ssl_config_free(&conf);
    shutdown(fd, SHUT_WR);
    return ret;
}

static void test_empty_records_are_not_an_end(void **state)
{
    (void)state;
    int f[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f), 0);
    int cfd = f[0];
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, empty_records_client, &cfd), 0);
    fcntl(f[1], F_SETFL, O_NONBLOCK);
    peer p;
    peer_init(&p);
    p.s = sl_stream_tls_server(raw_stream(f[1]), srv, "upstream.test", 65536, on_event, &p);
    want(&p, true);
    assert_true(run_until(ended, &p, 10000));
    void *r;
    pthread_join(th, &r);
    assert_null(r);
    assert_int_equal(p.ready, 1);
    assert_int_equal(p.errors, 0);
    assert_int_equal(p.eofs, 1);
    assert_string_equal(p.failure, "");   /* the close_notify, not a cut */
    assert_int_equal(evbuffer_get_length(p.got), 5);
    assert_memory_equal(evbuffer_pullup(p.got, -1), "after", 5);
    peer_done(&p);
    close(f[0]);
}

/* While want_read is false after READY nothing is read; then it all comes. */
static void test_want_read_false_holds_plaintext(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    want(&p[1], false);
    evbuffer_add(p[0].s->out, "hello", 5);
    call_flush(&p[0]);
    run_for(100);
    assert_int_equal(p[1].reads, 0);
    assert_true(sl_stream_pending(p[1].s));   /* the record waits, unread */
    want(&p[1], true);
    want_bytes w = { &p[1], 5 };
    assert_true(run_until(got_bytes, &w, 5000));
    assert_false(p[1].reentered);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* The owner may free a TLS stream inside any callback. */
static void test_free_inside_callbacks(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    p[0].free_on = SL_STREAM_READY;
    assert_true(run_until(settled, &p[0], 10000));
    assert_null(p[0].s);
    run_until(ended, &p[1], 5000);   /* the server sees the socket go */
    peer_done(&p[0]);
    peer_done(&p[1]);

    make_pair(p, cli, "upstream.test", srv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    p[1].free_on = SL_STREAM_READ;
    p[1].consume = false;
    evbuffer_add(p[0].s->out, "x", 1);
    call_flush(&p[0]);
    sl_stream_shutdown(p[0].s);   /* READ and EOF at once: only READ may come */
    run_for(200);
    assert_null(p[1].s);
    assert_int_equal(p[1].reads, 1);
    assert_int_equal(p[1].eofs, 0);
    peer_done(&p[0]);
    peer_done(&p[1]);

    make_pair(p, cli, "upstream.test", srv, "other.test", 65536, 65536, NULL);
    p[0].free_on = SL_STREAM_ERROR;
    assert_true(run_until(errored, &p[0], 10000));
    assert_null(p[0].s);
    run_for(50);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

/* ---- what the upstream's certificate can get wrong ---- */

static void test_wrong_name_from_sluice_leaf(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "upstream.test", srv, "other.test", 65536, 65536, NULL);
    assert_true(run_until(errored, &p[0], 10000));
    assert_int_equal(p[0].ready, 0);
    assert_int_equal(p[0].err, EPROTO);
    assert_string_equal(p[0].failure,
                        "upstream TLS: name mismatch: certificate is for other.test, not upstream.test");
    assert_false(p[0].late_event);
    peer_done(&p[0]);
    peer_done(&p[1]);
}

static void test_ip_literal_hosts(void **state)
{
    (void)state;
    peer p[2];
    make_pair(p, cli, "127.0.0.1", srv, "127.0.0.1", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    assert_int_equal(p[0].ready + p[1].ready, 2);
    peer_done(&p[0]);
    peer_done(&p[1]);

    make_pair(p, cli, "::1", srv, "[::1]", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    assert_int_equal(p[0].ready + p[1].ready, 2);
    peer_done(&p[0]);
    peer_done(&p[1]);

    /* mbedtls alone would accept any name here: sluice checks iPAddress */
    make_pair(p, cli, "127.0.0.2", srv, "127.0.0.1", 65536, 65536, NULL);
    assert_true(run_until(errored, &p[0], 10000));
    assert_string_equal(p[0].failure,
                        "upstream TLS: name mismatch: certificate is for 127.0.0.1, not 127.0.0.2");
    peer_done(&p[0]);
    peer_done(&p[1]);
}

typedef struct s_server {
    pid_t pid;
    int out, port;
} s_server;

static s_server start_s_server(const char *cert, const char *key, const char *extra)
{
    s_server s;
    char *argv[16];
    int n = 0;
    argv[n++] = "openssl";
    argv[n++] = "s_server";
    argv[n++] = "-accept";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "-cert";
    argv[n++] = (char *)cert;
    argv[n++] = "-key";
    argv[n++] = (char *)key;
    argv[n++] = "-www";
    if (extra)
        argv[n++] = (char *)extra;
    argv[n] = NULL;
    s.pid = spawn(argv, &s.out);
    char line[256];
    size_t got = 0;
    s.port = 0;
    while (got < sizeof line - 1) {
        struct pollfd pf = { .fd = s.out, .events = POLLIN };
        assert_int_equal(poll(&pf, 1, 10000), 1);
        ssize_t r = read(s.out, line + got, 1);
        assert_int_equal(r, 1);
        got++;
        line[got] = '\0';
        char *a = strstr(line, "ACCEPT 127.0.0.1:");
        if (a && line[got - 1] == '\n') {
            s.port = atoi(a + strlen("ACCEPT 127.0.0.1:"));
            break;
        }
        if (line[got - 1] == '\n')
            got = 0;
    }
    assert_true(s.port > 0);
    return s;
}

static void stop_s_server(s_server *s)
{
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    close(s->out);
}

/* One upstream handshake against openssl s_server presenting cert. */
static void upstream_against(const char *cert, const char *key, const char *extra, peer *p)
{
    s_server s = start_s_server(cert, key, extra);
    peer_init(p);
    p->s = sl_stream_tls_client(raw_stream(tcp_connect(s.port)), cli, "upstream.test", 65536, on_event, p);
    want(p, true);
    assert_true(run_until(settled, p, 10000));
    if (p->ready) {
        static const char req[] = "GET / HTTP/1.0\r\n\r\n";
        evbuffer_add(p->s->out, req, sizeof req - 1);
        call_flush(p);
        assert_true(run_until(ended, p, 10000));
    }
    stop_s_server(&s);
}

static void test_upstream_good_certificate(void **state)
{
    (void)state;
    peer p;
    upstream_against(path("good.pem"), path("good.key"), NULL, &p);
    assert_int_equal(p.ready, 1);
    assert_int_equal(p.errors, 0);
    evbuffer_add(p.got, "", 1);
    assert_non_null(strstr((char *)evbuffer_pullup(p.got, -1), "HTTP/1.0 200 ok"));
    peer_done(&p);
}

static void expect_upstream_failure(const char *name, const char *extra, const char *words)
{
    char cert[80], key[80];
    snprintf(cert, sizeof cert, "%s.pem", name);
    snprintf(key, sizeof key, "%s.key", name);
    peer p;
    upstream_against(path(cert), path(key), extra, &p);
    assert_int_equal(p.ready, 0);
    assert_int_equal(p.errors, 1);
    assert_int_equal(p.err, EPROTO);
    if (!strstr(p.failure, words))
        fail_msg("%s: failure '%s' does not say '%s'", name, p.failure, words);
    assert_int_equal(strncmp(p.failure, "upstream TLS: ", 14), 0);
    peer_done(&p);
}

static void test_upstream_expired(void **state)
{
    (void)state;
    expect_upstream_failure("expired", NULL, "certificate expired (notAfter ");
}

static void test_upstream_not_yet_valid(void **state)
{
    (void)state;
    expect_upstream_failure("future", NULL, "certificate not yet valid (notBefore ");
}

static void test_upstream_self_signed(void **state)
{
    (void)state;
    expect_upstream_failure("selfsigned", NULL, "self-signed certificate (CN=upstream.test), not in upstream_ca");
}

static void test_upstream_untrusted_ca(void **state)
{
    (void)state;
    expect_upstream_failure("untrusted", NULL, "untrusted chain: its issuer CN=sluice test other_ca is not in upstream_ca");
}

static void test_upstream_wrong_name(void **state)
{
    (void)state;
    expect_upstream_failure("wrongname", NULL,
                            "name mismatch: certificate is for other.test, www.other.test, not upstream.test");
}

static void test_upstream_alert(void **state)
{
    (void)state;
    /* s_server demanding a client certificate, which sluice has not */
    expect_upstream_failure("good", "-Verify=1", "the peer sent alert ");
}

/* ---- what a client can send ---- */

typedef struct s_client_run {
    peer p;
    char *out;
} s_client_run;

/* sluice's server stream for upstream.test against openssl s_client run
 * with the given arguments (and -CAfile ca.pem -verify_return_error). */
static void against_s_client(sl_tls_server *sv, const char *host, const char *cafile, char *const *args,
                             s_client_run *r)
{
    int port, lfd = tcp_listener(&port);
    char connect[32];
    snprintf(connect, sizeof connect, "127.0.0.1:%d", port);
    char *argv[24];
    int n = 0;
    argv[n++] = "openssl";
    argv[n++] = "s_client";
    argv[n++] = "-connect";
    argv[n++] = connect;
    argv[n++] = "-CAfile";
    argv[n++] = (char *)cafile;
    argv[n++] = "-verify_return_error";
    argv[n++] = "-verify_hostname";
    argv[n++] = (char *)host;
    argv[n++] = "-servername";
    argv[n++] = (char *)host;
    for (int i = 0; args && args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int out;
    pid_t pid = spawn(argv, &out);
    int fd = accept_one(lfd);
    close(lfd);
    peer_init(&r->p);
    r->p.s = sl_stream_tls_server(raw_stream(fd), sv, host, 65536, on_event, &r->p);
    want(&r->p, true);
    run_until(settled, &r->p, 10000);
    run_until(ended, &r->p, 10000);   /* s_client ends when its stdin does */
    r->out = collect(pid, out);
}

static void test_openssl_client_verifies_sluice_leaf(void **state)
{
    (void)state;
    s_client_run r;
    char *args[] = { "-alpn", "http/1.1", NULL };
    against_s_client(srv, "upstream.test", path("ca.pem"), args, &r);
    assert_int_equal(r.p.ready, 1);
    if (!strstr(r.out, "Verify return code: 0 (ok)") || !strstr(r.out, "ALPN protocol: http/1.1"))
        fail_msg("s_client said:\n%s", r.out);
    assert_non_null(strstr(r.out, "Protocol  : TLSv1.2"));
    peer_done(&r.p);
    free(r.out);
}

/* A client's next connection resumes with the ticket it was given: no key
 * exchange, no signature. */
static void test_session_ticket_resumes(void **state)
{
    (void)state;
    s_client_run r;
    char *out_args[] = { "-sess_out", (char *)path("sess.pem"), NULL };
    against_s_client(srv, "upstream.test", path("ca.pem"), out_args, &r);
    assert_int_equal(r.p.ready, 1);
    if (!strstr(r.out, "New, TLSv1.2") || !strstr(r.out, "TLS session ticket:"))
        fail_msg("s_client said:\n%s", r.out);
    peer_done(&r.p);
    free(r.out);
    char *in_args[] = { "-sess_in", (char *)path("sess.pem"), NULL };
    against_s_client(srv, "upstream.test", path("ca.pem"), in_args, &r);
    assert_int_equal(r.p.ready, 1);
    if (!strstr(r.out, "Reused, TLSv1.2"))
        fail_msg("s_client said:\n%s", r.out);
    peer_done(&r.p);
    free(r.out);
}

static void test_client_offering_only_h2(void **state)
{
    (void)state;
    s_client_run r;
    char *args[] = { "-alpn", "h2", NULL };
    against_s_client(srv, "upstream.test", path("ca.pem"), args, &r);
    assert_int_equal(r.p.ready, 0);
    assert_int_equal(r.p.errors, 1);
    assert_int_equal(r.p.err, EPROTO);
    assert_string_equal(r.p.failure, "client TLS: no ALPN protocol in common: sluice speaks http/1.1 only");
    if (!strstr(r.out, "no application protocol"))
        fail_msg("s_client said:\n%s", r.out);
    peer_done(&r.p);
    free(r.out);
}

/* A ClientHello over two records: mbedtls 2.28 alone fails it ("Processing
 * of the ClientHello handshake message failed"); sluice gathers it. */
static void test_client_hello_in_two_records(void **state)
{
    (void)state;
    char alpn[512];
    memset(alpn, 'x', sizeof alpn);
    memcpy(alpn, "http/1.1,", 9);
    alpn[9 + 200] = ',';
    alpn[9 + 200 + 1 + 200] = '\0';
    s_client_run r;
    char *args[] = { "-max_send_frag", "512", "-alpn", alpn, NULL };
    against_s_client(srv, "upstream.test", path("ca.pem"), args, &r);
    if (r.p.ready != 1)
        fail_msg("failure '%s'; s_client said:\n%s", r.p.failure, r.out);
    assert_non_null(strstr(r.out, "Verify return code: 0 (ok)"));
    peer_done(&r.p);
    free(r.out);
}

/* Bytes written straight into the server stream's socket. */
static void server_fed(const void *bytes, size_t n, bool close_after, peer *p)
{
    int f[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f), 0);
    peer_init(p);
    p->s = sl_stream_tls_server(raw_stream(f[1]), srv, "upstream.test", 65536, on_event, p);
    want(p, true);
    const unsigned char *b = bytes;
    while (n > 0) {
        ssize_t w = send(f[0], b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) {
            run_for(5);
            continue;
        }
        if (w < 0)
            break;   /* the stream has given up and closed */
        b += w;
        n -= (size_t)w;
    }
    if (close_after)
        shutdown(f[0], SHUT_WR);
    run_until(errored, p, 5000);
    close(f[0]);
}

static void test_client_sends_no_tls(void **state)
{
    (void)state;
    peer p;
    static const char req[] = "GET / HTTP/1.1\r\nHost: upstream.test\r\n\r\n";
    server_fed(req, sizeof req - 1, false, &p);
    assert_int_equal(p.errors, 1);
    assert_int_equal(p.err, EPROTO);
    assert_string_equal(p.failure, "client TLS: not TLS: the client's first byte is 0x47, not a handshake record");
    peer_done(&p);
}

static void test_client_hello_larger_than_a_record(void **state)
{
    (void)state;
    /* a ClientHello of 17,004 bytes announced in its first record */
    size_t body = 17000, n = 0;
    unsigned char *b = calloc(1, body + 100);
    b[n++] = 22; b[n++] = 3; b[n++] = 1; b[n++] = 0x40; b[n++] = 0x00;   /* 16,384 bytes */
    b[n++] = 1; b[n++] = 0; b[n++] = (unsigned char)(body >> 8); b[n++] = (unsigned char)body;
    b[n++] = 3; b[n++] = 3;
    n = 5 + 16384;
    peer p;
    server_fed(b, n, false, &p);
    assert_int_equal(p.errors, 1);
    assert_string_equal(p.failure, "client TLS: the ClientHello (17004 bytes) is larger than one TLS record "
                                   "(16384 bytes): not supported");
    peer_done(&p);
    free(b);
}

/* A socket stream that has failed already (its ERROR went to the owner
 * before the TLS stream existed) still ends in an ERROR. */
static void test_raw_failed_before(void **state)
{
    (void)state;
    int f[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f), 0);
    sl_stream *raw = raw_stream(f[1]);
    raw->error = ECONNRESET;
    peer p;
    peer_init(&p);
    p.s = sl_stream_tls_server(raw, srv, "upstream.test", 65536, on_event, &p);
    assert_true(run_until(errored, &p, 2000));
    assert_int_equal(p.err, ECONNRESET);
    assert_non_null(strstr(p.failure, "client connection failed before the TLS handshake"));
    peer_done(&p);
    close(f[0]);
}

static void test_client_stops_mid_handshake(void **state)
{
    (void)state;
    static const unsigned char part[] = { 22, 3, 1, 0, 200, 1, 0, 0, 196, 3, 3, 1, 2, 3 };
    peer p;
    server_fed(part, sizeof part, true, &p);
    assert_int_equal(p.errors, 1);
    assert_string_equal(p.failure, "client TLS: the peer closed the connection during the handshake");
    peer_done(&p);
}

/* ---- the leaf cache ---- */

static size_t no_send(void *ctx, const unsigned char *p, size_t n)
{
    (void)ctx;
    (void)p;
    return n;
}

static ssize_t no_recv(void *ctx, unsigned char *p, size_t n)
{
    (void)ctx;
    (void)p;
    (void)n;
    return 0;
}

static sl_tls *accept_for(sl_tls_server *sv, const char *host)
{
    char err[200];
    sl_tls *t = sl_tls_accept(sv, host, no_send, no_recv, NULL, err, sizeof err);
    if (!t)
        fail_msg("accept %s: %s", host, err);
    return t;
}

static void test_leaf_cache_bound_lru_and_reuse(void **state)
{
    (void)state;
    char err[200];
    sl_tls_server *sv = sl_tls_server_new(path("ca.pem"), path("ca.key"), 7, 2, err, sizeof err);
    assert_non_null(sv);
    sl_tls_free(accept_for(sv, "a.test"));
    sl_tls_free(accept_for(sv, "b.test"));
    assert_int_equal(sl_tls_server_made(sv), 2);
    sl_tls_free(accept_for(sv, "a.test"));   /* reused, and now the most recent */
    sl_tls_free(accept_for(sv, "A.Test"));   /* the same host */
    assert_int_equal(sl_tls_server_made(sv), 2);
    assert_int_equal(sl_tls_server_cached(sv), 2);
    sl_tls_free(accept_for(sv, "c.test"));   /* evicts b, the least recently used */
    assert_int_equal(sl_tls_server_cached(sv), 2);
    assert_int_equal(sl_tls_server_made(sv), 3);
    sl_tls_free(accept_for(sv, "a.test"));
    assert_int_equal(sl_tls_server_made(sv), 3);
    sl_tls_free(accept_for(sv, "b.test"));
    assert_int_equal(sl_tls_server_made(sv), 4);
    sl_tls_server_free(sv);
}

/* Workers share the cache: sessions made and freed from several threads at
 * once, over more hosts than it holds. */
typedef struct cache_worker {
    sl_tls_server *sv;
    int id;
} cache_worker;

static void *cache_hammer(void *arg)
{
    cache_worker *w = arg;
    char host[32], err[200];
    for (int i = 0; i < 150; i++) {
        snprintf(host, sizeof host, "h%d.test", (i * 7 + w->id) % 10);
        sl_tls *t = sl_tls_accept(w->sv, host, no_send, no_recv, NULL, err, sizeof err);
        if (!t)
            return (void *)1;
        sl_tls *u = sl_tls_accept(w->sv, host, no_send, no_recv, NULL, err, sizeof err);
        sl_tls_free(t);
        sl_tls_free(u);
    }
    return NULL;
}

static void test_leaf_cache_shared_by_threads(void **state)
{
    (void)state;
    char err[200];
    sl_tls_server *sv = sl_tls_server_new(path("ca.pem"), path("ca.key"), 7, 4, err, sizeof err);
    assert_non_null(sv);
    pthread_t th[4];
    cache_worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (cache_worker){ sv, i };
        assert_int_equal(pthread_create(&th[i], NULL, cache_hammer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    assert_int_equal(sl_tls_server_cached(sv), 4);
    assert_true(sl_tls_server_made(sv) >= 10);
    sl_tls_server_free(sv);
}

/* A leaf evicted while a session still uses it stays valid for it. */
static void test_evicted_leaf_in_use(void **state)
{
    (void)state;
    char err[200];
    sl_tls_server *sv = sl_tls_server_new(path("ca.pem"), path("ca.key"), 7, 1, err, sizeof err);
    assert_non_null(sv);
    peer p[2];
    make_pair(p, cli, "upstream.test", sv, "upstream.test", 65536, 65536, NULL);
    sl_tls_free(accept_for(sv, "other.test"));   /* evicts upstream.test's leaf */
    assert_int_equal(sl_tls_server_cached(sv), 1);
    assert_true(run_until(both_settled, p, 10000));
    assert_int_equal(p[0].ready + p[1].ready, 2);
    send_check(&p[1], &p[0], 1000, 1000, 2);
    peer_done(&p[0]);
    peer_done(&p[1]);
    sl_tls_server_free(sv);
}

/* A leaf within an hour of its end is made again (here because the CA
 * itself ends in 30 minutes, and leaves never outlive it). */
static void test_leaf_near_expiry_is_remade(void **state)
{
    (void)state;
    char err[200];
    sl_tls_server *sv = sl_tls_server_new(path("short_ca.pem"), path("short_ca.key"), 7, 8, err, sizeof err);
    assert_non_null(sv);
    sl_tls_free(accept_for(sv, "a.test"));
    sl_tls_free(accept_for(sv, "a.test"));
    assert_int_equal(sl_tls_server_made(sv), 2);
    assert_int_equal(sl_tls_server_cached(sv), 1);
    sl_tls_server_free(sv);
    assert_int_equal(sl_tls_server_made(srv) >= 1, 1);
    uint64_t before = sl_tls_server_made(srv);
    sl_tls_free(accept_for(srv, "fresh.test"));
    sl_tls_free(accept_for(srv, "fresh.test"));
    assert_int_equal(sl_tls_server_made(srv), before + 1);
}

/* ---- loading the CA ---- */

static void expect_server_error(const char *cert, const char *key, const char *words)
{
    char err[300];
    sl_tls_server *sv = sl_tls_server_new(cert, key, 7, 4, err, sizeof err);
    if (sv)
        fail_msg("%s / %s loaded", cert, key);
    if (!strstr(err, words))
        fail_msg("error '%s' does not say '%s'", err, words);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s %s", from, to);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(chmod(to, mode), 0);
}

static void test_ca_key_readable_by_group_refused(void **state)
{
    (void)state;
    copy_file(path("ca.key"), path("ca-0640.key"), 0640);
    char words[300];
    snprintf(words, sizeof words, "%s: the CA key has mode 0640: group or others may use it", path("ca-0640.key"));
    expect_server_error(path("ca.pem"), path("ca-0640.key"), words);
    copy_file(path("ca.key"), path("ca-0604.key"), 0604);
    expect_server_error(path("ca.pem"), path("ca-0604.key"), "mode 0604");
    expect_server_error(path("ca.pem"), dir, "must be a regular file");
}

static void test_ca_problems_refused(void **state)
{
    (void)state;
    expect_server_error(path("nonca.pem"), path("nonca.key"), "is not a CA");
    char words[300];
    snprintf(words, sizeof words, "%s does not match %s", path("other_ca.key"), path("ca.pem"));
    expect_server_error(path("ca.pem"), path("other_ca.key"), words);
    snprintf(words, sizeof words, "%s: No such file", path("missing.pem"));
    expect_server_error(path("missing.pem"), path("ca.key"), words);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "openssl pkey -in %s -aes256 -passout pass:x -out %s && chmod 600 %s",
             path("ca.key"), path("enc.key"), path("enc.key"));
    assert_int_equal(system(cmd), 0);
    expect_server_error(path("ca.pem"), path("enc.key"), "it is encrypted");
    char err[200];
    assert_null(sl_tls_client_new(path("missing.pem"), err, sizeof err));
    assert_non_null(strstr(err, "cannot read the upstream CA bundle"));
}

static void test_rsa_ca_accepted(void **state)
{
    (void)state;
    char err[200];
    sl_tls_server *sv = sl_tls_server_new(path("rsa_ca.pem"), path("rsa_ca.key"), 7, 4, err, sizeof err);
    if (!sv)
        fail_msg("%s", err);
    sl_tls_client *c = sl_tls_client_new(path("rsa_ca.pem"), err, sizeof err);
    assert_non_null(c);
    peer p[2];
    make_pair(p, c, "upstream.test", sv, "upstream.test", 65536, 65536, NULL);
    assert_true(run_until(both_settled, p, 10000));
    assert_int_equal(p[0].ready + p[1].ready, 2);
    peer_done(&p[0]);
    peer_done(&p[1]);
    sl_tls_client_free(c);
    sl_tls_server_free(sv);
}

/* ---- a CA from sl_tls_make_ca (sluice ca init) ---- */

static void write_text(const char *file, const char *text, mode_t mode)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    fchmod(fd, mode);
    close(fd);
}

static void test_made_ca_with_name_constraints(void **state)
{
    (void)state;
    char *cert, *key, err[300];
    const char *permit[] = { "example.test", "sluice.test" };
    assert_true(sl_tls_make_ca(30, permit, 2, &cert, &key, err, sizeof err));
    write_text(path("nc.pem"), cert, 0644);
    write_text(path("nc.key"), key, 0600);
    free(cert);
    sl_tls_free_secret(key);
    sl_tls_server *sv = sl_tls_server_new(path("nc.pem"), path("nc.key"), 7, 8, err, sizeof err);
    if (!sv)
        fail_msg("%s", err);
    static const char *yes[] = { "example.test", "registry.example.test", "a.b.sluice.test", "SLUICE.test" };
    static const char *no[] = { "other.test", "badexample.test", "example.test.evil", "192.0.2.1", "::1", "[::1]" };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!sl_tls_server_permits(sv, yes[i], err, sizeof err))
            fail_msg("%s refused: %s", yes[i], err);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        if (sl_tls_server_permits(sv, no[i], err, sizeof err))
            fail_msg("%s permitted", no[i]);
        assert_non_null(strstr(err, "name constraints do not permit"));
        assert_null(sl_tls_accept(sv, no[i], no_send, no_recv, NULL, err, sizeof err));
    }
    /* OpenSSL, which enforces name constraints, accepts sluice's leaf */
    s_client_run r;
    against_s_client(sv, "registry.example.test", path("nc.pem"), NULL, &r);
    assert_int_equal(r.p.ready, 1);
    if (!strstr(r.out, "Verify return code: 0 (ok)"))
        fail_msg("s_client said:\n%s", r.out);
    peer_done(&r.p);
    free(r.out);
    /* and the server stream refuses, in words, a host the CA may not sign for */
    peer p;
    int f[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f), 0);
    peer_init(&p);
    p.s = sl_stream_tls_server(raw_stream(f[1]), sv, "other.test", 65536, on_event, &p);
    assert_non_null(p.s);
    assert_int_equal(p.errors, 0);   /* from the loop, not from the call */
    assert_true(run_until(errored, &p, 5000));
    assert_string_equal(p.failure, "client TLS: the inspection CA's name constraints do not permit other.test");
    peer_done(&p);
    close(f[0]);
    sl_tls_server_free(sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_then_bytes_both_ways),
        cmocka_unit_test(test_in_max_bounds_plaintext),
        cmocka_unit_test(test_every_split_size),
        cmocka_unit_test(test_one_byte_records_cost_their_bytes),
        cmocka_unit_test(test_backpressure_keeps_plaintext_in_out),
        cmocka_unit_test(test_out_empty_is_not_flushed),
        cmocka_unit_test(test_close_notify_and_truncation),
        cmocka_unit_test(test_forged_record_fails_both_sides),
        cmocka_unit_test(test_empty_records_are_not_an_end),
        cmocka_unit_test(test_want_read_false_holds_plaintext),
        cmocka_unit_test(test_free_inside_callbacks),
        cmocka_unit_test(test_wrong_name_from_sluice_leaf),
        cmocka_unit_test(test_ip_literal_hosts),
        cmocka_unit_test(test_upstream_good_certificate),
        cmocka_unit_test(test_upstream_expired),
        cmocka_unit_test(test_upstream_not_yet_valid),
        cmocka_unit_test(test_upstream_self_signed),
        cmocka_unit_test(test_upstream_untrusted_ca),
        cmocka_unit_test(test_upstream_wrong_name),
        cmocka_unit_test(test_upstream_alert),
        cmocka_unit_test(test_openssl_client_verifies_sluice_leaf),
        cmocka_unit_test(test_session_ticket_resumes),
        cmocka_unit_test(test_client_offering_only_h2),
        cmocka_unit_test(test_client_hello_in_two_records),
        cmocka_unit_test(test_client_sends_no_tls),
        cmocka_unit_test(test_client_hello_larger_than_a_record),
        cmocka_unit_test(test_client_stops_mid_handshake),
        cmocka_unit_test(test_raw_failed_before),
        cmocka_unit_test(test_leaf_cache_bound_lru_and_reuse),
        cmocka_unit_test(test_leaf_cache_shared_by_threads),
        cmocka_unit_test(test_evicted_leaf_in_use),
        cmocka_unit_test(test_leaf_near_expiry_is_remade),
        cmocka_unit_test(test_ca_key_readable_by_group_refused),
        cmocka_unit_test(test_ca_problems_refused),
        cmocka_unit_test(test_rsa_ca_accepted),
        cmocka_unit_test(test_made_ca_with_name_constraints),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
