/* SHA-256 on the x86 SHA extensions (proxy/crypto/sha256ni.c) against FIPS 180-4's
 * examples and against mbedtls, and the log chain (sl_chain_next) against
 * a chain computed with mbedtls alone. Skipped where the CPU lacks the
 * extensions (sl_chain_next then uses mbedtls itself). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "sha256ni.h"

static void hex(const uint8_t *d, char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void ni_hex(const void *p, size_t n, char out[65])
{
    sl_sha256ni s;
    uint8_t d[32];
    sl_sha256ni_init(&s);
    sl_sha256ni_update(&s, p, n);
    sl_sha256ni_final(&s, d);
    hex(d, out);
}

static void mbed_hex(const void *p, size_t n, char out[65])
{
    uint8_t d[32];
    assert_int_equal(mbedtls_sha256_ret(p, n, d, 0), 0);
    hex(d, out);
}

static int need_ni(void **state)
{
    (void)state;
    if (!sl_sha256ni_available())
        fprintf(stderr, "no SHA extensions on this CPU: the SHA-NI tests are skipped\n");
    return 0;
}

#define SKIP_WITHOUT_NI()               \
    do {                                \
        if (!sl_sha256ni_available())   \
            skip();                     \
    } while (0)

/* FIPS 180-4 examples (and the empty message). */
static void test_known_digests(void **state)
{
    (void)state;
    SKIP_WITHOUT_NI();
    char out[65];
    ni_hex("", 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    ni_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    ni_hex(two, strlen(two), out);
    assert_string_equal(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    ni_hex(million, 1000000, out);
    assert_string_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

/* Every length across several blocks, so that each padding case (the
 * length fitting in the last block or needing another) is met. */
static void test_every_length_matches_mbedtls(void **state)
{
    (void)state;
    SKIP_WITHOUT_NI();
    uint8_t buf[600];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    char a[65], b[65];
    for (size_t n = 0; n <= sizeof buf; n++) {
        ni_hex(buf, n, a);
        mbed_hex(buf, n, b);
        assert_string_equal(a, b);
    }
}

/* The same bytes fed in pieces of every size give the same digest. */
static void test_pieces_match_one_call(void **state)
{
    (void)state;
    SKIP_WITHOUT_NI();
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    char whole[65];
    mbed_hex(buf, sizeof buf, whole);
    for (size_t piece = 1; piece <= 130; piece++) {
        sl_sha256ni s;
        uint8_t d[32];
        char out[65];
        sl_sha256ni_init(&s);
        for (size_t off = 0; off < sizeof buf; off += piece)
            sl_sha256ni_update(&s, buf + off, off + piece <= sizeof buf ? piece : sizeof buf - off);
        sl_sha256ni_final(&s, d);
        hex(d, out);
        assert_string_equal(out, whole);
    }
}

/* The log chain as sluice computes it equals SHA-256(prev || text) by
 * mbedtls, for a typical line and a long one. */
static void test_chain_equals_mbedtls(void **state)
{
    (void)state;
    const char *prev = "6d1f0b5a3c2e4d7f8a9b0c1d2e3f40516273849506a7b8c9dadbecfd0e1f2031";
    char text[3000];
    size_t lens[] = { 0, 1, 120, 310, sizeof text };
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)(' ' + i % 90);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        char got[65], want[65];
        sl_chain_next(prev, 64, text, lens[k], got);
        char *cat = malloc(64 + lens[k] + 1);
        assert_non_null(cat);
        memcpy(cat, prev, 64);
        memcpy(cat + 64, text, lens[k]);
        mbed_hex(cat, 64 + lens[k], want);
        free(cat);
        assert_string_equal(got, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_digests),
        cmocka_unit_test(test_every_length_matches_mbedtls),
        cmocka_unit_test(test_pieces_match_one_call),
        cmocka_unit_test(test_chain_equals_mbedtls),
    };
    return cmocka_run_group_tests(tests, need_ni, NULL);
}
