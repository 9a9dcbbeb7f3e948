/* Proxy-Authorization: Basic (proxy/proto/proxy_auth.c): what clients send
 * is read; every other spelling, and every value outside the bounds, is
 * refused with its reason, and leaves no token byte behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "proxy_auth.h"

static void ok(const char *value, const char *user, const char *pass)
{
    sl_proxy_auth a;
    const char *why = sl_proxy_auth_parse(value, strlen(value), &a);
    if (why)
        fail_msg("'%s' refused: %s", value, why);
    assert_string_equal(a.user, user);
    assert_int_equal(a.user_len, strlen(user));
    assert_string_equal(a.pass, pass);
    assert_int_equal(a.pass_len, strlen(pass));
    sl_proxy_auth_clear(&a);
    for (size_t i = 0; i < sizeof a.pass; i++)
        assert_int_equal(a.pass[i], 0);
}

static void no(const char *value, const char *reason_part)
{
    sl_proxy_auth a;
    memset(&a, 'x', sizeof a);
    const char *why = sl_proxy_auth_parse(value, strlen(value), &a);
    if (!why)
        fail_msg("'%s' accepted", value);
    if (!strstr(why, reason_part))
        fail_msg("'%s': reason '%s' does not say '%s'", value, why, reason_part);
    for (size_t i = 0; i < sizeof a.pass; i++)
        assert_int_equal(a.pass[i], 0);
    assert_int_equal(a.pass_len, 0);
    assert_true(a.user_len <= SL_PROXY_AUTH_USER_MAX && strlen(a.user) == a.user_len);
}

static void test_what_clients_send(void **state)
{
    (void)state;
    /* curl, Python, Node and git send "Basic " and base64 of NAME:TOKEN */
    ok("Basic YnVpbGQtNDI6MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "build-42",
       "0123456789abcdef0123456789abcdef");
    ok("basic Zm9vOmJhcg==", "foo", "bar");   /* the scheme is case-insensitive (RFC 9110 11.1) */
    ok("BASIC Zm9vOmJhcg==", "foo", "bar");
    ok("Basic YTo=", "a", "");                /* an empty token parses; no session has one */
    ok("Basic YTpiOmM=", "a", "b:c");         /* the first colon splits (RFC 7617) */
}

static void test_other_spellings_are_refused(void **state)
{
    (void)state;
    no("Bearer abc", "not Basic");
    no("Basic", "not Basic");
    no("Basic  Zm9vOmJhcg==", "bad base64");   /* two spaces */
    no("Basic Zm9vOmJhcg", "bad base64");      /* no padding */
    no("Basic Zm9vOmJhcg=", "bad base64");
    no("Basic Zm9vOmJhcg===", "bad base64");
    no("Basic Zm9v OmJhcg==", "bad base64");
    no("Basic Zm9vOmJhcg==\t", "bad base64");
    no("Basic Zm9vOmJhch==", "bad base64");    /* nonzero bits past the data: a second spelling */
    no("Basic Zm9v-mJhcg==", "bad base64");     /* base64url is not base64 */
    no("Basic Zm9vYmFy", "no colon");
    no("Basic OmJhcg==", "no session name");    /* ":bar" */
    no("Basic Zm9vOmJhIHI=", "space");          /* "foo:ba r" */
    no("Basic Zm9vOgBi", "control");            /* "foo:\0b" */
}

static void test_bounds(void **state)
{
    (void)state;
    char text[400], value[800];
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int ulen = 63; ulen <= 65; ulen++)
        for (int plen = 255; plen <= 257; plen += 2) {
            memset(text, 'u', (size_t)ulen);
            text[ulen] = ':';
            memset(text + ulen + 1, 'p', (size_t)plen);
            size_t n = (size_t)ulen + 1 + (size_t)plen, o = 6;
            memcpy(value, "Basic ", 6);
            for (size_t i = 0; i < n; i += 3) {
                unsigned long w = (unsigned long)(unsigned char)text[i] << 16 |
                                  (i + 1 < n ? (unsigned long)(unsigned char)text[i + 1] << 8 : 0) |
                                  (i + 2 < n ? (unsigned char)text[i + 2] : 0);
                value[o++] = tab[w >> 18 & 63];
                value[o++] = tab[w >> 12 & 63];
                value[o++] = i + 1 < n ? tab[w >> 6 & 63] : '=';
                value[o++] = i + 2 < n ? tab[w & 63] : '=';
            }
            value[o] = '\0';
            sl_proxy_auth a;
            const char *why = sl_proxy_auth_parse(value, o, &a);
            bool fits = ulen <= SL_PROXY_AUTH_USER_MAX && plen <= SL_PROXY_AUTH_PASS_MAX;
            if (fits && why)
                fail_msg("%d:%d refused: %s", ulen, plen, why);
            if (!fits && (!why || !strstr(why, "too long")))
                fail_msg("%d:%d not refused as too long: %s", ulen, plen, why ? why : "accepted");
        }
    /* A huge value is refused before it is decoded. */
    static char huge[20000];
    memcpy(huge, "Basic ", 6);
    memset(huge + 6, 'A', sizeof huge - 7);
    no(huge, "too long");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_clients_send),
        cmocka_unit_test(test_other_spellings_are_refused),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
