/* Unit tests for allowlist/addr.c: strict literals, CIDR blocks, sockaddrs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "addr.h"

static bool parse(const char *s, sl_addr *out)
{
    return sl_addr_parse(s, strlen(s), out);
}

static void test_parse_accepts_canonical(void **state)
{
    (void)state;
    static const struct { const char *s; int fam; uint8_t b[16]; } ok[] = {
        { "1.2.3.4", AF_INET, { 1, 2, 3, 4 } },
        { "0.0.0.0", AF_INET, { 0 } },
        { "255.255.255.255", AF_INET, { 255, 255, 255, 255 } },
        { "10.0.0.1", AF_INET, { 10, 0, 0, 1 } },
        { "100.64.10.200", AF_INET, { 100, 64, 10, 200 } },
        { "::1", AF_INET6, { [15] = 1 } },
        { "::", AF_INET6, { 0 } },
        { "2001:db8::1", AF_INET6, { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 } },
        { "::ffff:1.2.3.4", AF_INET6, { [10] = 0xff, [11] = 0xff, 1, 2, 3, 4 } },
        { "FE80::ABCD", AF_INET6, { 0xfe, 0x80, [14] = 0xab, [15] = 0xcd } },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sl_addr a;
        if (!parse(ok[i].s, &a))
            fail_msg("'%s' refused", ok[i].s);
        assert_int_equal(a.family, ok[i].fam);
        assert_memory_equal(a.b, ok[i].b, 16);  /* IPv4: the rest is zero */
    }
}

static void test_parse_refuses(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1", "01.2.3.4", "1.2.3.04",
        "1.2.3.4.", "256.1.1.1", "1.2.3.256", "1.2.3.1000", " 1.2.3.4", "1.2.3.4 ",
        "1.2.3", "1.2.3.4.5", "1..2.3", ".1.2.3", "-1.2.3.4", "+1.2.3.4", "1.2.3.4/32",
        "fe80::1%eth0", "[::1]", "", ":::", "::g", "1:2:3:4:5:6:7:8:9", "localhost",
        "::ffff:1.2.3", "::ffff:01.2.3.4",
        "1111:2222:3333:4444:5555:6666:7777:8888:", /* too long as well as bad */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_addr a;
        if (parse(bad[i], &a))
            fail_msg("'%s' accepted", bad[i]);
    }
}

static void test_parse_uses_len(void **state)
{
    (void)state;
    sl_addr a;
    const char *s = "1.2.3.4:443";
    assert_true(sl_addr_parse(s, 7, &a));
    assert_int_equal(a.family, AF_INET);
    assert_int_equal(a.b[3], 4);
    assert_false(sl_addr_parse(s, 6, &a));   /* "1.2.3." */
    assert_false(sl_addr_parse(s, 0, &a));
    const char *v6 = "2001:db8::1]:443";
    assert_true(sl_addr_parse(v6, 11, &a));
    assert_int_equal(a.family, AF_INET6);
    assert_false(sl_addr_parse(v6, 12, &a));
}

static void test_format_and_equal(void **state)
{
    (void)state;
    static const char *const rt[] = {
        "1.2.3.4", "255.255.255.255", "0.0.0.0", "10.0.100.9", "192.168.1.10", "99.200.7.40",
        "::1", "2001:db8::1", "::ffff:1.2.3.4", "fe80::abcd",
    };
    char buf[SL_ADDR_STRLEN];
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        sl_addr a, b;
        assert_true(parse(rt[i], &a));
        assert_string_equal(sl_addr_format(&a, buf, sizeof buf), rt[i]);
        assert_true(parse(buf, &b));
        assert_true(sl_addr_equal(&a, &b));
    }
    sl_addr x, y;
    assert_true(parse("1.2.3.4", &x));
    assert_true(parse("1.2.3.5", &y));
    assert_false(sl_addr_equal(&x, &y));
    assert_true(parse("::ffff:1.2.3.4", &y));
    assert_false(sl_addr_equal(&x, &y));  /* different families */
    assert_true(parse("0.0.0.0", &x));
    assert_true(parse("::", &y));
    assert_false(sl_addr_equal(&x, &y));  /* same bytes, different families */
    assert_false(sl_addr_equal(&y, &x));
}

static void test_cidr_parse(void **state)
{
    (void)state;
    static const struct { const char *s; int fam; unsigned prefix; const char *fmt; } ok[] = {
        { "10.0.0.0/8", AF_INET, 8, "10.0.0.0/8" },
        { "172.16.0.0/12", AF_INET, 12, "172.16.0.0/12" },
        { "1.2.3.4/32", AF_INET, 32, "1.2.3.4/32" },
        { "1.2.3.4", AF_INET, 32, "1.2.3.4/32" },
        { "0.0.0.0/0", AF_INET, 0, "0.0.0.0/0" },
        { "::/0", AF_INET6, 0, "::/0" },
        { "2001:db8::/32", AF_INET6, 32, "2001:db8::/32" },
        { "2001:db8::1", AF_INET6, 128, "2001:db8::1/128" },
        { "fe80::/10", AF_INET6, 10, "fe80::/10" },
        { "::ffff:10.0.0.0/104", AF_INET6, 104, "::ffff:10.0.0.0/104" },
    };
    char err[128], buf[64];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sl_cidr c;
        err[0] = '\0';
        if (!sl_cidr_parse(ok[i].s, &c, err, sizeof err))
            fail_msg("'%s' refused: %s", ok[i].s, err);
        assert_int_equal(c.base.family, ok[i].fam);
        assert_int_equal(c.prefix, ok[i].prefix);
        assert_string_equal(sl_cidr_format(&c, buf, sizeof buf), ok[i].fmt);
    }
    static const char *const bad[] = {
        "10.0.0.1/8",      /* host bits set */
        "11.0.0.0/7",      /* host bit in the first octet */
        "1.0.0.0/0",       /* any bit is a host bit under /0 */
        "2001:db8::1/64",
        "10.0.0.0/33", "::/129", "10.0.0.0/08", "10.0.0.0/00", "10.0.0.0/",
        "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8x", "10.0.0.0/ 8", "10.0.0.0/8/8",
        "10.0.0/8", "010.0.0.0/8", "", "/8", "[::1]/128", "fe80::%eth0/64",
        "10.0.0.0/4294967304",  /* 2^32 + 8: no wrap-around to /8 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_cidr c;
        err[0] = '\0';
        if (sl_cidr_parse(bad[i], &c, err, sizeof err))
            fail_msg("'%s' accepted", bad[i]);
        if (err[0] == '\0')
            fail_msg("'%s' refused without a message", bad[i]);
    }
}

static sl_cidr cidr(const char *s)
{
    sl_cidr c;
    char err[128];
    if (!sl_cidr_parse(s, &c, err, sizeof err))
        fail_msg("'%s': %s", s, err);
    return c;
}

static bool contains(const char *c, const char *a)
{
    sl_cidr blk = cidr(c);
    sl_addr x;
    if (!parse(a, &x))
        fail_msg("'%s' does not parse", a);
    return sl_cidr_contains(&blk, &x);
}

static void test_cidr_contains_edges(void **state)
{
    (void)state;
    static const struct { const char *c, *a; bool in; } t[] = {
        { "10.0.0.0/8", "10.0.0.0", true },
        { "10.0.0.0/8", "10.255.255.255", true },
        { "10.0.0.0/8", "9.255.255.255", false },
        { "10.0.0.0/8", "11.0.0.0", false },
        { "172.16.0.0/12", "172.16.0.0", true },
        { "172.16.0.0/12", "172.31.255.255", true },
        { "172.16.0.0/12", "172.15.255.255", false },
        { "172.16.0.0/12", "172.32.0.0", false },
        { "100.64.0.0/10", "100.127.255.255", true },
        { "100.64.0.0/10", "100.128.0.0", false },
        { "10.20.0.5/32", "10.20.0.5", true },
        { "10.20.0.5/32", "10.20.0.4", false },
        { "10.20.0.5/32", "10.20.0.6", false },
        { "0.0.0.0/0", "0.0.0.0", true },
        { "0.0.0.0/0", "255.255.255.255", true },
        { "0.0.0.0/0", "::", false },                 /* family must match */
        { "::/0", "0.0.0.0", false },
        { "::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true },
        { "10.0.0.0/8", "::ffff:10.0.0.1", false },   /* mapped is IPv6 */
        { "2001:db8::/33", "2001:db8::", true },
        { "2001:db8::/33", "2001:db8:7fff:ffff:ffff:ffff:ffff:ffff", true },
        { "2001:db8::/33", "2001:db8:8000::", false },
        { "2001:db8::/33", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false },
        { "fe80::/10", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true },
        { "fe80::/10", "fec0::", false },
        { "::1/128", "::1", true },
        { "::1/128", "::2", false },
        { "::/128", "::1", false },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (contains(t[i].c, t[i].a) != t[i].in)
            fail_msg("%s in %s: want %s", t[i].a, t[i].c, t[i].in ? "yes" : "no");
}

static void test_sockaddr_round_trip(void **state)
{
    (void)state;
    static const struct { const char *s; int port; } t[] = {
        { "1.2.3.4", 443 }, { "255.255.255.255", 65535 }, { "0.0.0.0", 0 },
        { "2001:db8::1", 8443 }, { "::ffff:10.0.0.1", 80 }, { "::", 1 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sl_addr a, b;
        assert_true(parse(t[i].s, &a));
        struct sockaddr_storage ss;
        memset(&ss, 0xa5, sizeof ss);
        socklen_t len = sl_addr_to_sockaddr(&a, t[i].port, &ss);
        if (a.family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
            assert_int_equal(len, sizeof(struct sockaddr_in));
            assert_int_equal(in->sin_family, AF_INET);
            assert_int_equal(ntohs(in->sin_port), t[i].port);
            assert_memory_equal(&in->sin_addr, a.b, 4);
        } else {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
            assert_int_equal(len, sizeof(struct sockaddr_in6));
            assert_int_equal(in6->sin6_family, AF_INET6);
            assert_int_equal(ntohs(in6->sin6_port), t[i].port);
            assert_memory_equal(&in6->sin6_addr, a.b, 16);
            assert_int_equal(in6->sin6_scope_id, 0);
            assert_int_equal(in6->sin6_flowinfo, 0);
        }
        int port = -1;
        memset(&b, 0x5a, sizeof b);
        sl_addr_from_sockaddr((const struct sockaddr *)&ss, &b, &port);
        assert_int_equal(port, t[i].port);
        assert_true(sl_addr_equal(&a, &b));
        assert_memory_equal(&a, &b, sizeof a);  /* unused bytes zeroed too */
        sl_addr_from_sockaddr((const struct sockaddr *)&ss, &b, NULL);  /* port optional */
        assert_true(sl_addr_equal(&a, &b));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts_canonical),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_uses_len),
        cmocka_unit_test(test_format_and_equal),
        cmocka_unit_test(test_cidr_parse),
        cmocka_unit_test(test_cidr_contains_edges),
        cmocka_unit_test(test_sockaddr_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
