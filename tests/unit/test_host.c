/* Host, authority and config-host parsing: table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "host.h"

#define OK(in, kind, norm) { in, sizeof(in) - 1, true, kind, norm, NULL }
#define BAD(in, why) { in, sizeof(in) - 1, false, SL_HOST_NAME, NULL, why }

typedef struct host_case {
    const char *in;
    size_t len;            /* explicit, so that embedded NULs count */
    bool ok;
    sl_host_kind kind;
    const char *norm;      /* expected normalised text when ok */
    const char *why;       /* substring of the error when !ok (NULL: any) */
} host_case;

/* 63- and 64-byte labels; names of 253 and 254 bytes. */
#define L63 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define L64 L63 "a"
#define L61 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
/* 63+1+63+1+63+1+61 = 253 */
#define N253 L63 "." L63 "." L63 "." L61
#define N254 L63 "." L63 "." L63 "." L61 "b"

static const host_case host_cases[] = {
    /* DNS names */
    OK("example.org", SL_HOST_NAME, "example.org"),
    OK("a", SL_HOST_NAME, "a"),
    OK("localhost", SL_HOST_NAME, "localhost"),
    OK("registry.npmjs.org", SL_HOST_NAME, "registry.npmjs.org"),
    OK("Example.ORG", SL_HOST_NAME, "example.org"),
    OK("EXAMPLE.ORG.", SL_HOST_NAME, "example.org"),
    OK("example.org.", SL_HOST_NAME, "example.org"),
    OK("MiXeD-CaSe.Example", SL_HOST_NAME, "mixed-case.example"),
    OK("a-b.example", SL_HOST_NAME, "a-b.example"),
    OK("a--b.example", SL_HOST_NAME, "a--b.example"),
    OK("xn--bcher-kva.example", SL_HOST_NAME, "xn--bcher-kva.example"),
    OK("_dmarc.example.org", SL_HOST_NAME, "_dmarc.example.org"),
    OK("a_b.example", SL_HOST_NAME, "a_b.example"),
    OK("_", SL_HOST_NAME, "_"),
    OK("123.example", SL_HOST_NAME, "123.example"),
    OK("0x7f.example", SL_HOST_NAME, "0x7f.example"),
    OK("1.2.3.example", SL_HOST_NAME, "1.2.3.example"),
    OK("example.org1", SL_HOST_NAME, "example.org1"),
    OK("example.1org", SL_HOST_NAME, "example.1org"),
    OK("www.0xg", SL_HOST_NAME, "www.0xg"),
    OK("x.0xfg", SL_HOST_NAME, "x.0xfg"),
    OK("9a", SL_HOST_NAME, "9a"),
    OK(L63 ".example", SL_HOST_NAME, L63 ".example"),
    OK(N253, SL_HOST_NAME, N253),
    OK(N253 ".", SL_HOST_NAME, N253),
    BAD(L64 ".example", "label longer than 63"),
    BAD("x." L64, "label longer than 63"),
    BAD(N254, "longer than 253"),
    BAD(N254 ".", "longer than 253"),
    BAD("", "empty host"),
    BAD(".", "empty host"),
    BAD("..", "empty label"),
    BAD("example.org..", "empty label"),
    BAD("a..", "empty label"),
    BAD(".example.org", "empty label"),
    BAD("a..b", "empty label"),
    BAD("-a.example", "'-'"),
    BAD("a-.example", "'-'"),
    BAD("a.-b.example", "'-'"),
    BAD("example.org-", "'-'"),
    BAD("-", "'-'"),
    BAD("exa mple.org", "space"),
    BAD(" example.org", "space"),
    BAD("example.org ", "space"),
    BAD("example.org\t", "space"),
    BAD("exa\0mple.org", "NUL"),
    BAD("example.org\0", "NUL"),
    BAD("exa\nmple.org", "control"),
    BAD("example.org\r", "control"),
    BAD("exa\x7fmple.org", "control"),
    BAD("b\xc3\xbc" "cher.example", "non-ASCII"),
    BAD("\xff.example", "non-ASCII"),
    BAD("example%2eorg", "percent"),
    BAD("%65xample.org", "percent"),
    BAD("user@example.org", "'@'"),
    BAD("@example.org", "'@'"),
    BAD("example.org/", "invalid character"),
    BAD("example.org/path", "invalid character"),
    BAD("exa*mple.org", "invalid character"),
    BAD("*.example.org", "invalid character"),
    BAD("example.org?", "invalid character"),
    BAD("example.org#x", "invalid character"),
    BAD("exa\\mple.org", "invalid character"),
    BAD("example.org:443", "':'"),
    BAD("ex\"ample.org", "invalid character"),
    BAD("example,org", "invalid character"),

    /* IPv4: only the canonical dotted quad */
    OK("127.0.0.1", SL_HOST_IPV4, "127.0.0.1"),
    OK("0.0.0.0", SL_HOST_IPV4, "0.0.0.0"),
    OK("255.255.255.255", SL_HOST_IPV4, "255.255.255.255"),
    OK("203.0.113.7", SL_HOST_IPV4, "203.0.113.7"),
    OK("10.0.0.1", SL_HOST_IPV4, "10.0.0.1"),
    OK("1.2.3.4", SL_HOST_IPV4, "1.2.3.4"),
    OK("100.64.0.0", SL_HOST_IPV4, "100.64.0.0"),
    BAD("127.1", "ambiguous numeric"),
    BAD("127.0.1", "ambiguous numeric"),
    BAD("0x7f.0.0.1", "ambiguous numeric"),
    BAD("0X7F.0.0.1", "ambiguous numeric"),
    BAD("0x7f000001", "ambiguous numeric"),
    BAD("0X7F000001", "ambiguous numeric"),
    BAD("2130706433", "ambiguous numeric"),
    BAD("0177.0.0.1", "ambiguous numeric"),
    BAD("017700000001", "ambiguous numeric"),
    BAD("1.2.3.4.5", "ambiguous numeric"),
    BAD("1.2.3.04", "ambiguous numeric"),
    BAD("01.2.3.4", "ambiguous numeric"),
    BAD("256.0.0.1", "ambiguous numeric"),
    BAD("1.2.3.256", "ambiguous numeric"),
    BAD("127.0.0.1.", "ambiguous numeric"),
    BAD("1.2.3.0x4", "ambiguous numeric"),
    BAD("0x", "ambiguous numeric"),
    BAD("example.0x", "ambiguous numeric"),
    BAD("example.123", "ambiguous numeric"),
    BAD("example.0x1f", "ambiguous numeric"),
    BAD("0", "ambiguous numeric"),
    BAD("4294967296", "ambiguous numeric"),
    BAD("99999999999999999999", "ambiguous numeric"),
    BAD("1.2.3.4.", "ambiguous numeric"),
    BAD("1.2..4", "empty label"),
    BAD("1.2.3.-4", "'-'"),

    /* IPv6: bracketed, no zone id */
    OK("[::1]", SL_HOST_IPV6, "::1"),
    OK("[::]", SL_HOST_IPV6, "::"),
    OK("[2001:db8::7]", SL_HOST_IPV6, "2001:db8::7"),
    OK("[2001:DB8::7]", SL_HOST_IPV6, "2001:db8::7"),
    OK("[2001:0db8:0000:0000:0000:0000:0000:0007]", SL_HOST_IPV6, "2001:db8::7"),
    OK("[fe80::1]", SL_HOST_IPV6, "fe80::1"),
    OK("[::ffff:127.0.0.1]", SL_HOST_IPV6, "::ffff:127.0.0.1"),
    OK("[64:ff9b::a00:1]", SL_HOST_IPV6, "64:ff9b::a00:1"),
    BAD("::1", "brackets"),
    BAD("2001:db8::7", "brackets"),
    BAD("[::1", "unbalanced"),
    BAD("::1]", "bracket"),
    BAD("[::1]]", "extra bracket"),
    BAD("[[::1]]", "extra bracket"),
    BAD("[]", "empty IPv6"),
    BAD("[", "unbalanced"),
    BAD("]", "bracket"),
    BAD("[fe80::1%eth0]", "zone id"),
    BAD("[fe80::1%25eth0]", "zone id"),
    BAD("[127.0.0.1]", "only for IPv6"),
    BAD("[example.org]", "only for IPv6"),
    BAD("[::1 ]", "bad IPv6"),
    BAD("[1:2:3:4:5:6:7:8:9]", "bad IPv6"),
    BAD("[::g]", "bad IPv6"),
    BAD("[:::1]", "bad IPv6"),
    BAD("[::1]:443", "unbalanced"),
    BAD("a[::1]", "bracket"),
};

/* Prints a mismatch and returns false, so that a table run reports every
 * failing row before it fails. */
static bool check_case(const host_case *c, bool ok, const sl_host *h, const char *err, int idx)
{
    if (ok != c->ok) {
        print_error("case %d: '%.*s' expected %s, got %s (%s)\n", idx, (int)c->len, c->in,
                    c->ok ? "ok" : "error", ok ? "ok" : "error", ok ? h->name : err);
        return false;
    }
    if (ok && (h->kind != c->kind || strcmp(h->name, c->norm) != 0 ||
               h->len != strlen(c->norm))) {
        print_error("case %d: '%.*s' gave kind %d '%s' (len %zu), expected kind %d '%s'\n",
                    idx, (int)c->len, c->in, (int)h->kind, h->name, h->len, (int)c->kind,
                    c->norm);
        return false;
    }
    if (!ok && (err == NULL || (c->why && !strstr(err, c->why)))) {
        print_error("case %d: '%.*s' error '%s' lacks '%s'\n", idx, (int)c->len, c->in,
                    err ? err : "(null)", c->why);
        return false;
    }
    return true;
}

static void test_host_table(void **state)
{
    (void)state;
    size_t n = sizeof host_cases / sizeof host_cases[0];
    assert_true(n >= 100);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const host_case *c = &host_cases[i];
        sl_host h;
        const char *err = NULL;
        bool ok = sl_host_parse(c->in, c->len, &h, &err);
        bad += !check_case(c, ok, &h, err, (int)i);
    }
    assert_int_equal(bad, 0);
}

/* The config parser agrees with the request parser on every ASCII case. */
static void test_host_table_config(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
        const host_case *c = &host_cases[i];
        bool non_ascii = false;
        for (size_t j = 0; j < c->len; j++)
            non_ascii |= (unsigned char)c->in[j] >= 0x80;
        if (non_ascii)
            continue;
        sl_host h;
        const char *err = NULL;
        bool ok = sl_host_parse_config(c->in, c->len, &h, &err);
        bad += !check_case(c, ok, &h, err, (int)i);
    }
    assert_int_equal(bad, 0);
}

static void test_ip_addr_filled(void **state)
{
    (void)state;
    sl_host h;
    const char *err;
    assert_true(sl_host_parse("203.0.113.7", 11, &h, &err));
    assert_int_equal(h.addr.family, AF_INET);
    assert_int_equal(h.addr.b[0], 203);
    assert_int_equal(h.addr.b[3], 7);
    assert_true(sl_host_parse("[::ffff:127.0.0.1]", 18, &h, &err));
    assert_int_equal(h.addr.family, AF_INET6);
    assert_int_equal(h.addr.b[10], 0xff);
    assert_int_equal(h.addr.b[12], 127);
    /* The length is honoured: the tail after len is not read. */
    assert_true(sl_host_parse("example.org:443", 11, &h, &err));
    assert_string_equal(h.name, "example.org");
}

/* ---- Authorities ---- */

typedef struct auth_case {
    const char *in;
    bool port_required;
    bool ok;
    const char *host;      /* normalised */
    int port;
    const char *why;
} auth_case;

static const auth_case auth_cases[] = {
    {"example.org:443", true, true, "example.org", 443, NULL},
    {"example.org:443", false, true, "example.org", 443, NULL},
    {"example.org", false, true, "example.org", -1, NULL},
    {"example.org", true, false, NULL, 0, "missing port"},
    {"Example.Org.:8443", true, true, "example.org", 8443, NULL},
    {"[::1]:443", true, true, "::1", 443, NULL},
    {"[::1]", false, true, "::1", -1, NULL},
    {"[::1]", true, false, NULL, 0, "missing port"},
    {"[2001:db8::7]:8080", false, true, "2001:db8::7", 8080, NULL},
    {"127.0.0.1:80", true, true, "127.0.0.1", 80, NULL},
    {"example.org:1", true, true, "example.org", 1, NULL},
    {"example.org:65535", true, true, "example.org", 65535, NULL},
    {"example.org:0", true, false, NULL, 0, "out of range"},
    {"example.org:65536", true, false, NULL, 0, "out of range"},
    {"example.org:99999", true, false, NULL, 0, "out of range"},
    {"example.org:100000", true, false, NULL, 0, "out of range"},
    {"example.org:080", true, false, NULL, 0, "leading zero"},
    {"example.org:00443", true, false, NULL, 0, NULL},
    {"example.org:+80", true, false, NULL, 0, "decimal"},
    {"example.org:-80", true, false, NULL, 0, "decimal"},
    {"example.org: 80", true, false, NULL, 0, "decimal"},
    {"example.org:80 ", true, false, NULL, 0, "decimal"},
    {"example.org:0x50", true, false, NULL, 0, "decimal"},
    {"example.org:", true, false, NULL, 0, "empty port"},
    {"example.org:", false, false, NULL, 0, "empty port"},
    {"example.org:443:1", true, false, NULL, 0, "decimal"},
    {"example.org:443/", true, false, NULL, 0, "decimal"},
    {":443", true, false, NULL, 0, "empty host"},
    {"", false, false, NULL, 0, "empty host"},
    {"[::1]:", true, false, NULL, 0, "empty port"},
    {"[::1]x", false, false, NULL, 0, "unexpected text"},
    {"[::1]]:443", true, false, NULL, 0, "unexpected text"},
    {"[::1:443", true, false, NULL, 0, "unbalanced"},
    {"::1:443", true, false, NULL, 0, "brackets"},
    {"2001:db8::7", false, false, NULL, 0, "brackets"},
    {"[fe80::1%25eth0]:443", true, false, NULL, 0, "zone id"},
    {"127.1:443", true, false, NULL, 0, "ambiguous numeric"},
    {"2130706433:80", true, false, NULL, 0, "ambiguous numeric"},
    {"user@example.org:443", true, false, NULL, 0, "'@'"},
    {"example.org%3a443", true, false, NULL, 0, "percent"},
};

static void test_authority_table(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof auth_cases / sizeof auth_cases[0]; i++) {
        const auth_case *c = &auth_cases[i];
        sl_host h;
        int port = 12345;
        const char *err = NULL;
        bool ok = sl_authority_parse(c->in, strlen(c->in), c->port_required, &h, &port, &err);
        if (ok != c->ok) {
            print_error("authority '%s' (port %s): expected %s, got %s (%s)\n", c->in,
                        c->port_required ? "required" : "optional", c->ok ? "ok" : "error",
                        ok ? "ok" : "error", ok ? h.name : err);
            bad++;
        } else if (ok && (strcmp(h.name, c->host) != 0 || port != c->port)) {
            print_error("authority '%s': got '%s' port %d, expected '%s' port %d\n", c->in,
                        h.name, port, c->host, c->port);
            bad++;
        } else if (!ok && c->why && !strstr(err, c->why)) {
            print_error("authority '%s': error '%s' lacks '%s'\n", c->in, err, c->why);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- Config side: Unicode ---- */

static const host_case config_cases[] = {
    OK("b\xc3\xbc" "cher.example", SL_HOST_NAME, "xn--bcher-kva.example"),
    OK("B\xc3\x9c" "CHER.Example.", SL_HOST_NAME, "xn--bcher-kva.example"),
    OK("a_b.b\xc3\xbc" "cher.example", SL_HOST_NAME, "a_b.xn--bcher-kva.example"),
    /* non-transitional: ß is kept, not mapped to "ss" */
    OK("fa\xc3\x9f.de", SL_HOST_NAME, "xn--fa-hia.de"),
    OK("\xe4\xbe\x8b\xe3\x81\x88.jp", SL_HOST_NAME, "xn--r8jz45g.jp"),
    OK("xn--bcher-kva.example", SL_HOST_NAME, "xn--bcher-kva.example"),
    BAD("\xff\xfe.example", "UTF-8"),
    BAD("b\xc3", "UTF-8"),
    BAD("b\xc3\xbc\0cher.example", "NUL"),
    BAD("b\xc3\xbc" "cher..example", "empty label"),
    BAD("b\xc3\xbc" "cher.example:443", NULL),
    BAD("ex ample.b\xc3\xbc", "space"),
    BAD("b\xc3\xbc%41.example", NULL),
    BAD("\xe2\x80\x8b.b\xc3\xbc", "empty label"),
};

static void test_config_table(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof config_cases / sizeof config_cases[0]; i++) {
        const host_case *c = &config_cases[i];
        sl_host h;
        const char *err = NULL;
        bool ok = sl_host_parse_config(c->in, c->len, &h, &err);
        bad += !check_case(c, ok, &h, err, (int)i);
    }
    assert_int_equal(bad, 0);
}

static void test_host_authority(void **state)
{
    (void)state;
    sl_host h;
    const char *err;
    char buf[SL_HOST_MAX + 3];
    assert_true(sl_host_parse("[2001:db8::7]", 13, &h, &err));
    assert_string_equal(sl_host_authority(&h, buf, sizeof buf), "[2001:db8::7]");
    assert_true(sl_host_parse("Example.Org.", 12, &h, &err));
    assert_string_equal(sl_host_authority(&h, buf, sizeof buf), "example.org");
    assert_true(sl_host_parse("203.0.113.7", 11, &h, &err));
    assert_string_equal(sl_host_authority(&h, buf, sizeof buf), "203.0.113.7");
    assert_true(sl_host_parse(N253, strlen(N253), &h, &err));
    assert_string_equal(sl_host_authority(&h, buf, sizeof buf), N253);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_table),
        cmocka_unit_test(test_host_table_config),
        cmocka_unit_test(test_ip_addr_filled),
        cmocka_unit_test(test_authority_table),
        cmocka_unit_test(test_config_table),
        cmocka_unit_test(test_host_authority),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
