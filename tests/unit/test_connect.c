/* Happy Eyeballs (proxy/conn/connect.c) on loopback only: addresses in
 * 127.0.0.0/8 that answer, refuse, or drop SYNs (a listener whose accept
 * queue is full), driven through a real event loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "connect.h"

static struct event_base *base;
static int port;
static int fds[64], nfds;

typedef struct result {
    bool done;
    int fd, err;
    sl_addr addr;
    double ms;
} result;

static struct timespec t0;

static double ms_since_t0(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t0.tv_nsec) / 1e6;
}

static void on_result(void *arg, int fd, const sl_addr *addr, int err)
{
    result *r = arg;
    r->done = true;
    r->fd = fd;
    r->err = err;
    r->addr = *addr;
    r->ms = ms_since_t0();
}

static sl_addr v4(const char *s)
{
    sl_addr a;
    assert_true(sl_addr_parse(s, strlen(s), &a));
    return a;
}

static int listener(const char *ip, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, ip, &sa.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, backlog), 0);
    fds[nfds++] = fd;
    return fd;
}

/* A listener that never accepts, its queue filled: further SYNs are dropped. */
static void blackhole(const char *ip)
{
    listener(ip, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, ip, &sa.sin_addr);
    for (int i = 0; i < 8; i++) {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        fds[nfds++] = c;
        connect(c, (struct sockaddr *)&sa, sizeof sa);
        struct pollfd p = { .fd = c, .events = POLLOUT };
        if (poll(&p, 1, 300) == 0)
            return;   /* this SYN was dropped: the queue is full */
    }
    fail_msg("could not fill the accept queue of %s", ip);
}

static int setup(void **state)
{
    (void)state;
    base = event_base_new();
    /* A free port on loopback, used on several 127.x addresses. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    port = ntohs(sa.sin_port);
    close(fd);
    blackhole("127.0.0.2");
    blackhole("127.0.0.3");
    listener("127.0.0.4", 16);   /* answers */
    /* 127.0.0.5: nothing listens, so a connect is refused at once */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    event_base_free(base);
    return 0;
}

static result run(const char *const *ips, size_t n, int stagger_ms, int deadline_ms, double limit_ms)
{
    sl_addr a[16];
    for (size_t i = 0; i < n; i++)
        a[i] = v4(ips[i]);
    result r = { 0 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sl_connector *k = sl_connect_start(base, a, n, port, stagger_ms, deadline_ms, on_result, &r);
    assert_non_null(k);
    assert_false(r.done);   /* never from inside the call */
    while (!r.done && ms_since_t0() < limit_ms)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), poll(NULL, 0, 1);
    if (!r.done)
        sl_connect_cancel(k);
    return r;
}

static void test_the_next_address_starts_after_the_stagger(void **state)
{
    (void)state;
    const char *ips[] = { "127.0.0.2", "127.0.0.4" };
    result r = run(ips, 2, 250, 10000, 3000);
    assert_true(r.done && r.fd >= 0);
    assert_memory_equal(r.addr.b, "\x7f\0\0\x04", 4);
    assert_true(r.ms >= 240 && r.ms < 450);
    close(r.fd);
}

static void test_a_refused_address_gives_way_at_once(void **state)
{
    (void)state;
    const char *ips[] = { "127.0.0.5", "127.0.0.4" };
    result r = run(ips, 2, 5000, 10000, 3000);
    assert_true(r.done && r.fd >= 0);
    assert_memory_equal(r.addr.b, "\x7f\0\0\x04", 4);
    assert_true(r.ms < 200);   /* not the 5 s stagger */
    close(r.fd);
}

/* With a stagger far beyond the deadline, only the attempt's own deadline
 * (deadline / addresses, here 750 ms) moves on from a blackholed address. */
static void test_an_attempt_gives_way_at_its_own_deadline(void **state)
{
    (void)state;
    const char *ips[] = { "127.0.0.2", "127.0.0.4" };
    result r = run(ips, 2, 60000, 1500, 3000);
    assert_true(r.done && r.fd >= 0);
    assert_memory_equal(r.addr.b, "\x7f\0\0\x04", 4);
    assert_true(r.ms >= 700 && r.ms < 1400);
    close(r.fd);
}

/* The last attempt left is not cut by its own deadline: the caller's
 * deadline decides (a 504 connect_timeout, not a 502). */
static void test_the_last_attempt_waits_for_the_callers_deadline(void **state)
{
    (void)state;
    const char *ips[] = { "127.0.0.2", "127.0.0.3" };
    result r = run(ips, 2, 100, 1000, 2500);
    assert_false(r.done);   /* still trying when the caller gives up */
}

static void test_every_address_refused_is_reported_from_the_loop(void **state)
{
    (void)state;
    const char *ips[] = { "127.0.0.5" };
    result r = run(ips, 1, 250, 10000, 2000);
    assert_true(r.done);
    assert_int_equal(r.fd, -1);
    assert_int_equal(r.err, ECONNREFUSED);
    assert_memory_equal(r.addr.b, "\x7f\0\0\x05", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_next_address_starts_after_the_stagger),
        cmocka_unit_test(test_a_refused_address_gives_way_at_once),
        cmocka_unit_test(test_an_attempt_gives_way_at_its_own_deadline),
        cmocka_unit_test(test_the_last_attempt_waits_for_the_callers_deadline),
        cmocka_unit_test(test_every_address_refused_is_reported_from_the_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
