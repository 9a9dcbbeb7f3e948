/* The plain-HTTP exchange engine, in process, over a memory transport
 * (memstream.h) instead of sockets: the real request parser, decision,
 * origin reuse and exchange code, driven from both sides with every byte
 * stream split at every offset, one byte per read, and peers that stop
 * reading. It shows that the engine needs nothing of sockets (the socket
 * stream is one transport of two), and it pins down, deterministically,
 * what the end-to-end hostile suites check over real sockets.
 *
 * The connection starts as if a first exchange had left an idle origin
 * connection to 127.0.0.1:PORT (the memory origin); every request goes to
 * that origin and reuses it. Nothing here connects anywhere: PORT is a
 * loopback port this test bound and closed, so even a bug that made the
 * engine connect would reach only a closed local port. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ca.h"
#include "conn.h"
#include "log.h"
#include "memstream.h"

static struct event_base *base;
static worker w;
static sl_policy *pol;
static int port;
static char dir[64], logpath[128];
/* The writer thread writes lines within 100 ms: the decisions are counted
 * once per test, against the sum of what each run wanted. */
static long g_want_decisions;

/* ---- fixture ---- */

static int closed_loopback_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void report(void *ctx, const char *msg)
{
    (void)ctx;
    fail_msg("config: %s", msg);
}

/* The pinned artifacts' policy: 127.0.0.1:PORT is inspected (plain HTTP
 * to it is matched against its rules), /p/ is pinned to sha256("hello")
 * and sha512("hello"), /e to the digest of nothing, and the rest of the
 * host is open. */
#define PIN_HELLO_256 "sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ="
#define PIN_HELLO_512 "sha512-m3HSJL1i83hdltRq0+o9czGb+8KJDKra4t/3JRlnPKcjI8PZm6XBHXx6zG4UuMXaDEZjR1wuXDre9G9zvN7AQw=="
#define PIN_EMPTY_256 "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="

static int setup_with(bool pins)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-test-exchange-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    port = closed_loopback_port();
    char ini[128];
    snprintf(ini, sizeof ini, "%s/sluice.ini", dir);
    snprintf(logpath, sizeof logpath, "%s/decisions.log", dir);
    FILE *f = fopen(ini, "w");
    if (pins) {
        char cadir[128];
        snprintf(cadir, sizeof cadir, "%s/ca", dir);
        char *argv[] = { "ca", "init", cadir, NULL };
        if (sl_cmd_ca(3, argv) != 0)
            return -1;
        fprintf(f, "[policy]\nallow = GET 127.0.0.1:%d/p/* " PIN_HELLO_256 " " PIN_HELLO_512 "\n"
                   "allow = GET 127.0.0.1:%d/e " PIN_EMPTY_256 "\nallow = * 127.0.0.1:%d/*\n"
                   "allow_cidr = 127.0.0.1/32\n[tls]\nca_cert = %s/ca.pem\nca_key = %s/ca.key\n",
                port, port, port, cadir, cadir);
    } else {
        fprintf(f, "[policy]\nallow = 127.0.0.1:%d\nallow_cidr = 127.0.0.1/32\n", port);
    }
    fprintf(f, "[dns]\nserver = 127.0.0.53\n[log]\npath = %s\n", logpath);
    fclose(f);
    sl_options o = { .config = ini, .workers = -1 };
    pol = sl_policy_load(&o, report, NULL);
    if (!pol)
        return -1;
    g_shared.policy = pol;
    char err[200];
    if (!sl_log_open(logpath, err, sizeof err))
        return -1;
    g_want_decisions = 0;
    base = event_base_new();
    memset(&w, 0, sizeof w);
    w.base = base;
    w.rng = 0x1234567;
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return setup_with(false);
}

static int setup_pins(void **state)
{
    (void)state;
    return setup_with(true);
}

static int teardown(void **state)
{
    (void)state;
    sl_log_close();
    event_base_free(base);
    g_shared.policy = NULL;
    sl_policy_unref(pol);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- one connection ---- */

typedef struct tconn {
    conn *c;
    mem_stream *cli, *up;         /* valid while their frees are 0 */
    int cli_frees, up_frees;
    struct evbuffer *to_cli, *to_up;   /* what each peer received */
} tconn;

static bool alive(void) { return w.nconns == 1; }

static void run(void)
{
    for (int i = 0; i < 200; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
}

static void tc_open(tconn *t, size_t cli_chunk, size_t up_chunk)
{
    memset(t, 0, sizeof *t);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(40000),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    atomic_fetch_add(&g_shared.clients, 1);
    conn_accept(&w, sv[1], (struct sockaddr *)&sa, sizeof sa);
    close(sv[0]);
    assert_int_equal(w.nconns, 1);
    conn *c = t->c = w.conns;
    /* The client's transport becomes a memory one ... */
    sl_stream_free(c->cli);
    t->to_cli = evbuffer_new();
    t->to_up = evbuffer_new();
    t->cli = mem_new(base, conn_on_stream, c, &t->cli_frees, t->to_cli);
    t->cli->read_chunk = cli_chunk;
    c->cli = &t->cli->s;
    /* ... and the origin a kept-alive memory one to 127.0.0.1:PORT. */
    t->up = mem_new(base, conn_on_stream, c, &t->up_frees, t->to_up);
    t->up->read_chunk = up_chunk;
    c->up = &t->up->s;
    c->fx = FX_IDLE;
    c->up_name = strdup("127.0.0.1");
    c->up_port = port;
    c->up_addr.family = AF_INET;
    memcpy(c->up_addr.b, "\x7f\0\0\x01", 4);
    conn_enter(c);
    conn_leave(c);   /* reading starts from the state */
}

/* What a peer has received so far, as a string (copied). */
static char *got(struct evbuffer *b, size_t *len)
{
    *len = evbuffer_get_length(b);
    char *p = malloc(*len + 1);
    evbuffer_copyout(b, p, *len);
    p[*len] = '\0';
    return p;
}

static void tc_close(tconn *t)
{
    if (alive())
        conn_close_now(t->c, "test");
    run();
    assert_int_equal(w.nconns, 0);
    evbuffer_free(t->to_cli);
    evbuffer_free(t->to_up);
}

static long log_decisions(void)
{
    FILE *f = fopen(logpath, "r");
    char line[16384];
    long n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, "\"event\":\"decision\"") != NULL;
    if (f)
        fclose(f);
    return n;
}


static void check_decisions(void)
{
    long n = 0;
    for (int i = 0; i < 300 && (n = log_decisions()) != g_want_decisions; i++)
        usleep(10 * 1000);
    assert_int_equal(n, g_want_decisions);
}

/* ---- scenarios ---- */

#define MAXR 3
typedef struct scenario {
    const char *name;
    const char *req;              /* what the client sends (%d: the port) */
    bool client_eof;              /* the client half-closes after it */
    const char *resp[MAXR];       /* the origin's answer to request k, sent once it arrived */
    const char *origin[MAXR];     /* every byte the origin must receive, request by request (%d: the port) */
    const char *want_client;      /* every byte the client must receive */
    bool want_client_prefix;      /* want_client is a prefix (sluice's own reply) */
    bool origin_kept;             /* the origin connection is still kept afterwards */
    bool conn_open;               /* the client connection is open afterwards (in CS_HEAD) */
    int decisions;
} scenario;

#define H "127.0.0.1:%d"
static const scenario scenarios[] = {
    { "get, Content-Length",
      "GET http://" H "/a HTTP/1.1\r\nHost: " H "\r\nAccept: */*\r\n\r\n", false,
      { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" },
      { "GET /a HTTP/1.1\r\nHost: " H "\r\nAccept: */*\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, true, true, 1 },
    { "chunked both ways, extensions and trailers",
      "POST http://" H "/u HTTP/1.1\r\nHost: " H "\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;x=1\r\nhello\r\n0\r\nT: v\r\n\r\n", false,
      { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n1\r\nd\r\n0\r\nX-T: 1\r\n\r\n" },
      { "POST /u HTTP/1.1\r\nHost: " H "\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nT: v\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n1\r\nd\r\n0\r\nX-T: 1\r\n\r\n",
      false, true, true, 1 },
    { "interim heads, then the final one",
      "GET http://" H "/i HTTP/1.1\r\nHost: " H "\r\n\r\n", false,
      { "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" },
      { "GET /i HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, true, true, 1 },
    { "two pipelined requests, each its own response",
      "GET http://" H "/1 HTTP/1.1\r\nHost: " H "\r\n\r\nGET http://" H "/2 HTTP/1.1\r\nHost: " H "\r\n\r\n", false,
      { "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo" },
      { "GET /1 HTTP/1.1\r\nHost: " H "\r\n\r\n", "GET /2 HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\noneHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo",
      false, true, true, 2 },
    { "two responses to one request: the second is never delivered",
      "GET http://" H "/x HTTP/1.1\r\nHost: " H "\r\n\r\n", false,
      { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB" },
      { "GET /x HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA", false, false, true, 1 },
    { "a body on a 204 is never delivered",
      "DELETE http://" H "/d HTTP/1.1\r\nHost: " H "\r\n\r\n", false,
      { "HTTP/1.1 204 No Content\r\n\r\nJUNK" },
      { "DELETE /d HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 204 No Content\r\n\r\n", false, false, true, 1 },
    { "a body on the answer to HEAD is never delivered",
      "HEAD http://" H "/h HTTP/1.1\r\nHost: " H "\r\n\r\n", false,
      { "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nJUNK" },
      { "HEAD /h HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", false, false, true, 1 },
    { "a malformed chunk size from the client: 400, and the origin has the head only",
      "POST http://" H "/ HTTP/1.1\r\nHost: " H "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false,
      { NULL },
      { "POST / HTTP/1.1\r\nHost: " H "\r\nTransfer-Encoding: chunked\r\n\r\n" },
      "HTTP/1.1 400 Bad Request\r\n", true, false, false, 1 },
    { "an early response: Connection: close, and the body stops",
      "POST http://" H "/big HTTP/1.1\r\nHost: " H "\r\nContent-Length: 10\r\n\r\nabc", false,
      { "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n" },
      { "POST /big HTTP/1.1\r\nHost: " H "\r\nContent-Length: 10\r\n\r\nabc" },
      "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false, false, false, 1 },
    { "a half-close after a whole request still gets the response",
      "GET http://" H "/hc HTTP/1.1\r\nHost: " H "\r\n\r\n", true,
      { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi" },
      { "GET /hc HTTP/1.1\r\nHost: " H "\r\n\r\n" },
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", false, false, false, 1 },
};

static char *fmt_port(const char *f)
{
    char *out = malloc(strlen(f) + 64);
    /* at most four %d in a template; unused arguments are harmless */
    sprintf(out, f, port, port, port, port);
    return out;
}

/* Runs a scenario with the client's bytes split at cs and each response at
 * rs (SIZE_MAX: whole); the streams read at most cchunk/uchunk bytes at a
 * time. Asserts everything scenario says. */
static void drive(const scenario *sc, size_t cs, size_t rs, size_t cchunk, size_t uchunk)
{
    g_want_decisions += sc->decisions;
    tconn t;
    tc_open(&t, cchunk, uchunk);
    char *req = fmt_port(sc->req), *origin[MAXR] = { NULL };
    char want_origin[4096] = "";
    for (int k = 0; k < MAXR && sc->origin[k]; k++) {
        origin[k] = fmt_port(sc->origin[k]);
        strcat(want_origin, origin[k]);
    }
    size_t rl = strlen(req);
    if (cs > rl)
        cs = rl;
    mem_send(t.cli, req, cs);
    run();
    if (alive())
        mem_send(t.cli, req + cs, rl - cs);
    run();
    if (sc->client_eof && alive()) {
        mem_eof(t.cli);
        run();
    }
    /* The origin answers request k once the bytes of requests 0..k are in. */
    size_t end = 0;
    for (int k = 0; k < MAXR && sc->resp[k]; k++) {
        end += strlen(origin[k]);
        size_t n;
        char *o = got(t.to_up, &n);
        free(o);
        if (n < end || !alive())
            break;   /* the request never reached the origin: nothing to answer */
        const char *r = sc->resp[k];
        size_t len = strlen(r), cut = rs < len ? rs : len;
        mem_send(t.up, r, cut);
        run();
        if (t.up_frees)
            break;   /* dropped: the rest would go nowhere */
        mem_send(t.up, r + cut, len - cut);
        run();
    }
    size_t n;
    char *o = got(t.to_up, &n), *cl = got(t.to_cli, &n);
    if (strcmp(o, want_origin) != 0 ||
        (sc->want_client_prefix ? strncmp(cl, sc->want_client, strlen(sc->want_client)) != 0
                                : strcmp(cl, sc->want_client) != 0))
        fail_msg("%s (client split %zu, origin split %zu, reads %zu/%zu):\n"
                 "origin got  [%s]\nwanted      [%s]\nclient got  [%s]\nwanted      [%s]",
                 sc->name, cs, rs, cchunk, uchunk, o, want_origin, cl, sc->want_client);
    if (sc->conn_open) {
        assert_true(alive());
        assert_int_equal(t.c->state, CS_HEAD);
        assert_int_equal(t.c->fx, sc->origin_kept ? FX_IDLE : FX_NONE);
        assert_int_equal(t.up_frees, sc->origin_kept ? 0 : 1);
    } else {
        assert_true(!alive() || t.c->state == CS_CLOSING);
    }
    if (!sc->origin_kept)
        assert_int_equal(t.up_frees, 1);
    tc_close(&t);
    free(o);
    free(cl);
    free(req);
    for (int k = 0; k < MAXR; k++)
        free(origin[k]);
}

static void test_every_client_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) {
        char *req = fmt_port(scenarios[i].req);
        size_t n = strlen(req);
        free(req);
        for (size_t cs = 0; cs <= n; cs++)
            drive(&scenarios[i], cs, SIZE_MAX, 65536, 65536);
    }
    check_decisions();
}

static void test_every_origin_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) {
        size_t n = 0;
        for (int k = 0; k < MAXR && scenarios[i].resp[k]; k++)
            n = strlen(scenarios[i].resp[k]) > n ? strlen(scenarios[i].resp[k]) : n;
        for (size_t rs = 0; rs <= n; rs++)
            drive(&scenarios[i], SIZE_MAX, rs, 65536, 65536);
    }
    check_decisions();
}

static void test_one_byte_per_read_both_sides(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++)
        drive(&scenarios[i], SIZE_MAX, SIZE_MAX, 1, 1);
    check_decisions();
}

/* A response head and its malformed first chunk: a 502 while nothing of
 * the head has gone out, a cut once it has. With the origin's bytes split
 * at every offset, the answer is a 502 exactly when the head and the bad
 * byte arrive in one read. */
static void test_bad_first_chunk_gives_502_unless_the_head_went_out(void **state)
{
    (void)state;
    static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    static const char resp[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    for (size_t rs = 0; rs <= strlen(resp); rs++) {
        tconn t;
        tc_open(&t, 65536, 65536);
        char *req = fmt_port("GET http://" H "/c HTTP/1.1\r\nHost: " H "\r\n\r\n");
        mem_send(t.cli, req, strlen(req));
        run();
        mem_send(t.up, resp, rs);
        run();
        if (!t.up_frees)
            mem_send(t.up, resp + rs, strlen(resp) - rs);
        run();
        size_t n;
        char *cl = got(t.to_cli, &n);
        if (rs == strlen(head)) {
            assert_string_equal(cl, head);   /* the head was out: the client is cut off */
            assert_false(alive());
        } else {
            assert_true(strncmp(cl, "HTTP/1.1 502 Bad Gateway\r\n", 26) == 0);
            assert_non_null(strstr(cl, "Connection: close\r\n"));
            assert_null(strstr(cl, "Transfer-Encoding"));
        }
        free(cl);
        free(req);
        tc_close(&t);
    }
}

/* Peers that do not read: whatever the other side sends, what sluice holds
 * stays under its bounds, and everything arrives once the peer reads. */
static void test_a_client_that_does_not_read_holds_the_origin_back(void **state)
{
    (void)state;
    tconn t;
    tc_open(&t, 65536, 65536);
    t.cli->window = 0;
    char *req = fmt_port("GET http://" H "/big HTTP/1.1\r\nHost: " H "\r\n\r\n");
    mem_send(t.cli, req, strlen(req));
    run();
    enum { BODY = 8 << 20 };
    char head[100];
    int hl = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BODY);
    mem_send(t.up, head, (size_t)hl);
    char *payload = malloc(BODY);
    for (size_t i = 0; i < BODY; i++)
        payload[i] = (char)('a' + i % 26);
    mem_send(t.up, payload, BODY);
    run();
    size_t held = evbuffer_get_length(t.c->cli->out) + evbuffer_get_length(t.c->up->in) +
                  evbuffer_get_length(t.c->cli->in);
    assert_true(held <= CONN_OUT_HIGH + 2 * CONN_READ_AHEAD);
    assert_true(evbuffer_get_length(t.up->wire) >= BODY - held);   /* the rest waits at the origin */
    mem_window(t.cli, SIZE_MAX);
    for (int i = 0; i < 400 && evbuffer_get_length(t.to_cli) < (size_t)hl + BODY; i++)
        run();
    assert_int_equal(evbuffer_get_length(t.to_cli), (size_t)hl + BODY);
    evbuffer_drain(t.to_cli, (size_t)hl);
    assert_memory_equal(evbuffer_pullup(t.to_cli, -1), payload, BODY);
    assert_true(alive() && t.c->fx == FX_IDLE);
    free(payload);
    free(req);
    tc_close(&t);
}

static void test_endless_interim_heads_to_a_client_that_does_not_read_stay_bounded(void **state)
{
    (void)state;
    tconn t;
    tc_open(&t, 65536, 65536);
    t.cli->window = 0;
    char *req = fmt_port("GET http://" H "/i HTTP/1.1\r\nHost: " H "\r\n\r\n");
    mem_send(t.cli, req, strlen(req));
    run();
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    for (int i = 0; i < 400000; i++)   /* 10 MB of interim heads */
        evbuffer_add(t.up->wire, cont, sizeof cont - 1);
    mem_update(&t.up->s);
    run();
    size_t held = evbuffer_get_length(t.c->cli->out) + evbuffer_get_length(t.c->up->in);
    assert_true(held <= CONN_OUT_HIGH + 2 * CONN_READ_AHEAD);
    /* everything sluice did not hold is still at the origin */
    assert_int_equal(evbuffer_get_length(t.up->wire), (size_t)400000 * (sizeof cont - 1) - held);
    free(req);
    tc_close(&t);
}

static void test_an_origin_that_does_not_read_holds_the_client_back(void **state)
{
    (void)state;
    tconn t;
    tc_open(&t, 65536, 65536);
    t.up->window = 0;
    enum { BODY = 4 << 20 };
    char *req = fmt_port("PUT http://" H "/up HTTP/1.1\r\nHost: " H "\r\nContent-Length: 4194304\r\n\r\n");
    mem_send(t.cli, req, strlen(req));
    char *payload = calloc(1, BODY);
    mem_send(t.cli, payload, BODY);
    run();
    size_t held = evbuffer_get_length(t.c->up->out) + evbuffer_get_length(t.c->cli->in);
    assert_true(held <= CONN_OUT_HIGH + 2 * CONN_READ_AHEAD);
    assert_true(evbuffer_get_length(t.cli->wire) >= BODY - held);
    mem_window(t.up, SIZE_MAX);
    for (int i = 0; i < 400 && t.c->fx != FX_AWAIT; i++)
        run();
    assert_int_equal(t.c->fx, FX_AWAIT);   /* the whole body went; the response is awaited */
    char *head = fmt_port("PUT /up HTTP/1.1\r\nHost: " H "\r\nContent-Length: 4194304\r\n\r\n");
    assert_int_equal(evbuffer_get_length(t.to_up), strlen(head) + BODY);
    assert_memory_equal(evbuffer_pullup(t.to_up, (ev_ssize_t)strlen(head)), head, strlen(head));
    free(head);
    free(payload);
    free(req);
    tc_close(&t);
}

/* A peer that sends one byte at a time into a side that does not drain:
 * what sluice queues is compact (bytes in few blocks), not one block per
 * byte. CONN_OUT_HIGH counts bytes; this is what keeps memory near it. */
static void test_a_trickle_of_single_bytes_is_queued_compactly(void **state)
{
    (void)state;
    tconn t;
    tc_open(&t, 1, 1);   /* every read takes one byte */
    t.up->window = 0;
    char *req = fmt_port("PUT http://" H "/t HTTP/1.1\r\nHost: " H "\r\nContent-Length: 100000000\r\n\r\n");
    mem_send(t.cli, req, strlen(req));
    run();
    enum { N = 200000 };
    char *bytes = malloc(N);
    memset(bytes, 'x', N);
    for (int round = 0; round < 50; round++) {
        mem_send(t.cli, bytes + round * (N / 50), N / 50);
        for (int i = 0; i < 40 && evbuffer_get_length(t.cli->wire) > 0; i++)
            run();
    }
    size_t queued = evbuffer_get_length(t.c->up->out);
    int blocks = evbuffer_peek(t.c->up->out, -1, NULL, NULL, 0);
    assert_true(queued >= 100000);   /* most of it got through the engine, byte by byte */
    /* One block per byte would be ~100 Ki blocks; compact is a few hundred. */
    assert_true((size_t)blocks * 1024 <= queued + 64 * 1024);
    free(bytes);
    free(req);
    tc_close(&t);
}

/* Bytes from the idle origin between requests close it; they never reach
 * the client, and the next request does not go on it. */
static void test_an_idle_origin_that_talks_is_dropped(void **state)
{
    (void)state;
    tconn t;
    tc_open(&t, 65536, 65536);
    mem_send(t.up, "HTTP/1.1 200 OK\r\n\r\n", 19);
    run();
    assert_int_equal(t.up_frees, 1);
    assert_null(t.c->up);
    assert_int_equal(t.c->fx, FX_NONE);
    size_t n;
    char *cl = got(t.to_cli, &n);
    assert_int_equal(n, 0);
    free(cl);
    tc_close(&t);
}

/* ---- pinned artifacts ---- */

/* The log's lines, for the pinned cases' verdicts. */
static char *log_text(void)
{
    usleep(150 * 1000);   /* the writer thread writes within 100 ms */
    FILE *f = fopen(logpath, "r");
    assert_non_null(f);
    struct evbuffer *b = evbuffer_new();
    char line[16384];
    while (fgets(line, sizeof line, f))
        evbuffer_add(b, line, strlen(line));
    fclose(f);
    size_t n;
    char *t = got(b, &n);
    evbuffer_free(b);
    return t;
}

static const char pin_req[] = "GET http://" H "/p/a.tgz HTTP/1.1\r\nHost: " H "\r\nAccept-Encoding: gzip, br\r\n\r\n";
static const char pin_req_up[] = "GET /p/a.tgz HTTP/1.1\r\nHost: " H "\r\nAccept-Encoding: identity\r\n\r\n";

/* Sends pin_req, then resp split at rs (and read uchunk bytes at a time);
 * eof: the origin ends after it. Returns what the client received. */
static char *pin_drive(tconn *t, const char *resp, size_t len, size_t rs, size_t uchunk, bool eof)
{
    tc_open(t, 65536, uchunk);
    char *req = fmt_port(pin_req), *up = fmt_port(pin_req_up);
    mem_send(t->cli, req, strlen(req));
    run();
    size_t n;
    char *o = got(t->to_up, &n);
    if (strcmp(o, up) != 0)
        fail_msg("the origin got [%s], wanted [%s]", o, up);
    free(o);
    size_t cut = rs < len ? rs : len;
    mem_send(t->up, resp, cut);
    run();
    if (!t->up_frees)
        mem_send(t->up, resp + cut, len - cut);
    run();
    if (eof && !t->up_frees) {
        mem_eof(t->up);
        run();
    }
    free(req);
    free(up);
    return got(t->to_cli, &n);
}

/* A right body arrives whole, split anywhere, and the connection goes on. */
static void test_a_pinned_body_that_matches_arrives_whole(void **state)
{
    (void)state;
    static const char *const resps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x\r\nlo\r\n0\r\nT: 1\r\n\r\n",
    };
    for (size_t i = 0; i < 2; i++)
        for (size_t uchunk = 1; uchunk <= 65536; uchunk *= 65536)
            for (size_t rs = 0; rs <= strlen(resps[i]); rs++) {
                tconn t;
                char *cl = pin_drive(&t, resps[i], strlen(resps[i]), rs, uchunk, false);
                if (strcmp(cl, resps[i]) != 0)
                    fail_msg("split %zu, reads %zu: the client got [%s]", rs, uchunk, cl);
                assert_true(alive());
                assert_int_equal(t.c->state, CS_HEAD);
                assert_int_equal(t.c->fx, FX_IDLE);
                free(cl);
                tc_close(&t);
            }
}

/* A wrong body, one byte short, or a reset before its end: split anywhere,
 * the client never has the whole body, and the connection is gone. */
static void test_a_pinned_body_that_does_not_match_never_arrives_whole(void **state)
{
    (void)state;
    static const struct { const char *resp, *whole; bool eof; } cases[] = {
        /* the last byte wrong */
        { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhellp", "hellp", false },
        /* the first byte wrong */
        { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nJello", "Jello", false },
        /* one byte short, then the origin closes */
        { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell", NULL, true },
        /* one byte short, as Content-Length says: a whole body, but not the pinned one */
        { "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nhell", "hell", false },
        /* one byte long, as Content-Length says */
        { "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello!", "hello!", false },
        /* chunked, the last chunk wrong */
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlp\r\n0\r\n\r\n", "0\r\n\r\n", false },
        /* chunked, one chunk missing, then the close */
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n", "hel\r\n0", true },
        /* chunked, a byte long */
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello!\r\n0\r\n\r\n", "0\r\n\r\n", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t uchunk = 1; uchunk <= 65536; uchunk *= 65536)
            for (size_t rs = 0; rs <= strlen(cases[i].resp); rs++) {
                tconn t;
                char *cl = pin_drive(&t, cases[i].resp, strlen(cases[i].resp), rs, uchunk, cases[i].eof);
                const char *cbody = strstr(cl, "\r\n\r\n");
                if (cbody && cases[i].whole && strstr(cbody + 4, cases[i].whole))
                    fail_msg("case %zu, split %zu, reads %zu: the client got the whole body [%s]", i, rs,
                             uchunk, cl);
                /* a small body is held whole until its digest is known: not one byte of a wrong one */
                if (cbody && cbody[4] != '\0')
                    fail_msg("case %zu, split %zu, reads %zu: the client got part of a wrong body [%s]", i, rs,
                             uchunk, cl);
                if (!strncmp(cl, "HTTP/1.1 200", 12) && alive() && t.c->state != CS_CLOSING)
                    fail_msg("case %zu, split %zu: the connection goes on after [%s]", i, rs, cl);
                free(cl);
                tc_close(&t);
            }
    char *t = log_text();
    assert_non_null(strstr(t, "\"reason\":\"integrity_mismatch\",\"rule\":\""));
    assert_non_null(strstr(t, "\"status\":200,\"expected\":"));
    assert_non_null(strstr(t, "\"expected\":\"" PIN_HELLO_256 " " PIN_HELLO_512 "\",\"actual\":\"sha256-"));
    free(t);
}

/* What cannot be checked is refused, and the rest passes unchanged. */
static void test_pinned_requests_that_cannot_be_checked(void **state)
{
    (void)state;
    tconn t;
    /* Range: refused before any origin */
    tc_open(&t, 65536, 65536);
    char *req = fmt_port("GET http://" H "/p/a.tgz HTTP/1.1\r\nHost: " H "\r\nRange: bytes=0-1\r\n\r\n");
    mem_send(t.cli, req, strlen(req));
    run();
    /* a refusal's reply waits for its log line: the worker is woken then */
    for (int i = 0; i < 100 && evbuffer_get_length(t.to_cli) == 0; i++) {
        usleep(10 * 1000);
        conn_release_log_waiters(&w);
        run();
    }
    size_t n;
    char *o = got(t.to_up, &n), *cl = got(t.to_cli, &n);
    assert_string_equal(o, "");
    if (strncmp(cl, "HTTP/1.1 403 Forbidden\r\n", 24) != 0 || !strstr(cl, "integrity_unverifiable"))
        fail_msg("a Range request got [%s]", cl);
    free(o), free(cl), free(req);
    tc_close(&t);
    static const struct { const char *resp; const char *want; } cases[] = {
        { "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 403 Forbidden\r\n" },
        { "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", "HTTP/1.1 403 Forbidden\r\n" },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 403 Forbidden\r\n" },
        /* other statuses pass unchanged */
        { "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope", "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope" },
        { "HTTP/1.1 304 Not Modified\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n" },
        { "HTTP/1.1 302 Found\r\nLocation: /q\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 302 Found\r\nLocation: /q\r\nContent-Length: 0\r\n\r\n" },
        { "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cl = pin_drive(&t, cases[i].resp, strlen(cases[i].resp), SIZE_MAX, 65536, false);
        if (strncmp(cl, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("case %zu: the client got [%s]", i, cl);
        if (i < 3) {
            assert_non_null(strstr(cl, "integrity_unverifiable"));
            assert_null(strstr(cl, "hello"));
        }
        free(cl);
        tc_close(&t);
    }
    /* an empty body pinned to the digest of nothing, and one that is not */
    for (int bad = 0; bad < 2; bad++) {
        tc_open(&t, 65536, 65536);
        req = fmt_port("GET http://" H "/e HTTP/1.1\r\nHost: " H "\r\n\r\n");
        mem_send(t.cli, req, strlen(req));
        run();
        const char *resp = bad ? "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx" : "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        mem_send(t.up, resp, strlen(resp));
        run();
        cl = got(t.to_cli, &n);
        if (bad)
            assert_null(strstr(cl, "\r\n\r\nx"));
        else
            assert_string_equal(cl, resp);
        assert_int_equal(alive() && t.c->state == CS_HEAD, !bad);
        free(cl), free(req);
        tc_close(&t);
    }
    char *log = log_text();
    assert_non_null(strstr(log, "\"end\":\"refused\",\"reason\":\"integrity_unverifiable\",\"rule\":\""));
    free(log);
}

/* ---- a kept origin that ends before its response ---- */

/* The request went on the kept origin, which ended before a byte of a
 * response: a GET goes once more, on a new connection to the vetted
 * address. Here that address is a closed port, so the new connection
 * fails: the client gets sluice's 502, and the request keeps its one
 * decision line (the allow), its close line saying connect_failed. A POST
 * is never sent twice: its 502 says the origin closed. */
static void test_a_kept_origin_that_ends_first_is_retried_once(void **state)
{
    (void)state;
    static const struct { const char *req; const char *end; } cases[] = {
        { "GET http://" H "/r HTTP/1.1\r\nHost: " H "\r\n\r\n", "\"end\":\"connect_failed\"" },
        { "POST http://" H "/r HTTP/1.1\r\nHost: " H "\r\nContent-Length: 1\r\n\r\nx",
          "\"end\":\"origin_eof\"" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tconn t;
        tc_open(&t, 65536, 65536);
        char *req = fmt_port(cases[k].req);
        mem_send(t.cli, req, strlen(req));
        run();
        assert_true(evbuffer_get_length(t.to_up) > 0);
        mem_eof(t.up);
        run();
        for (int i = 0; i < 200 && evbuffer_get_length(t.to_cli) == 0; i++) {
            usleep(5 * 1000);
            run();
        }
        size_t n;
        char *cl = got(t.to_cli, &n);
        if (strncmp(cl, "HTTP/1.1 502 ", 13) != 0)
            fail_msg("case %zu: the client got [%s]", k, cl);
        assert_int_equal(t.up_frees, 1);
        char id[40];
        snprintf(id, sizeof id, "\"id\":\"%s\"", t.c->x.id);
        free(cl);
        free(req);
        tc_close(&t);
        /* The request's lines: one decision (the allow) and one close. */
        char *log = log_text(), *decision = NULL, *close = NULL;
        int ndecisions = 0;
        for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
            if (!strstr(line, id))
                continue;
            if (strstr(line, "\"event\":\"decision\"")) {
                ndecisions++;
                decision = line;
            } else if (strstr(line, "\"event\":\"close\"")) {
                close = line;
            }
        }
        assert_int_equal(ndecisions, 1);
        assert_non_null(strstr(decision, "\"decision\":\"allow\""));
        if (!close || !strstr(close, cases[k].end))
            fail_msg("case %zu: the close line is not %s: %s", k, cases[k].end, close ? close : "(none)");
        free(log);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_client_split),
        cmocka_unit_test(test_every_origin_split),
        cmocka_unit_test(test_one_byte_per_read_both_sides),
        cmocka_unit_test(test_bad_first_chunk_gives_502_unless_the_head_went_out),
        cmocka_unit_test(test_a_client_that_does_not_read_holds_the_origin_back),
        cmocka_unit_test(test_endless_interim_heads_to_a_client_that_does_not_read_stay_bounded),
        cmocka_unit_test(test_an_origin_that_does_not_read_holds_the_client_back),
        cmocka_unit_test(test_an_idle_origin_that_talks_is_dropped),
        cmocka_unit_test(test_a_trickle_of_single_bytes_is_queued_compactly),
        cmocka_unit_test(test_a_kept_origin_that_ends_first_is_retried_once),
    };
    const struct CMUnitTest pins[] = {
        cmocka_unit_test(test_a_pinned_body_that_matches_arrives_whole),
        cmocka_unit_test(test_a_pinned_body_that_does_not_match_never_arrives_whole),
        cmocka_unit_test(test_pinned_requests_that_cannot_be_checked),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    return failed + cmocka_run_group_tests(pins, setup_pins, teardown);
}
