/* allowlist/text.c: hex digits, UTF-8 encoding and untrusted text for
 * messages. Table-driven, plus exhaustive checks where the input space is
 * small enough (every byte, every code point). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"

/* ---- sl_hexval, sl_hex_value ---- */

static void test_hexval_takes_exactly_the_hex_digits(void **state)
{
    (void)state;
    static const char digits[] = "0123456789abcdef";
    for (int c = -200; c < 256; c++) {
        int want = -1;
        if (c >= 0 && isxdigit(c))
            want = (int)(strchr(digits, tolower(c)) - digits);
        if (sl_hexval(c) != want)
            fail_msg("sl_hexval(%d) = %d, want %d", c, sl_hexval(c), want);
    }
    /* a signed char above 0x7f is negative: never a digit */
    assert_int_equal(sl_hexval((char)0xe6), -1);
    assert_int_equal(sl_hexval(EOF), -1);
}

static void test_hex_value_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t n;
        int64_t want;
    } cases[] = {
        { "0000", 4, 0 },
        { "ffff", 4, 0xffff },
        { "FfFf", 4, 0xffff },
        { "12aB", 4, 0x12ab },
        { "d83d", 4, 0xd83d },
        { "12g4", 4, -1 },
        { "12 4", 4, -1 },
        { "+123", 4, -1 },      /* strtoul would take a sign, a space, "0x" */
        { "0x12", 4, -1 },
        { "\xff" "123", 4, -1 },
        { "1234", 3, 0x123 },   /* only n digits are read */
        { "", 0, 0 },
        { "ffffffff", 8, 0xffffffffLL },
        { "7fffffff", 8, 0x7fffffffLL },
        { "123456789", 9, -1 }, /* more than 8 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (sl_hex_value(cases[i].s, cases[i].n) != cases[i].want)
            fail_msg("sl_hex_value(\"%s\", %zu) = %lld, want %lld", cases[i].s, cases[i].n,
                     (long long)sl_hex_value(cases[i].s, cases[i].n), (long long)cases[i].want);
}

/* ---- sl_utf8_encode ---- */

static void test_utf8_encode_table(void **state)
{
    (void)state;
    static const struct {
        uint32_t cp;
        const char *want;
        size_t n;
    } cases[] = {
        { 0x0, "\0", 1 },
        { 0x41, "A", 1 },
        { 0x7f, "\x7f", 1 },
        { 0x80, "\xc2\x80", 2 },
        { 0xe9, "\xc3\xa9", 2 },
        { 0x7ff, "\xdf\xbf", 2 },
        { 0x800, "\xe0\xa0\x80", 3 },
        { 0xd800, "\xed\xa0\x80", 3 },   /* a lone surrogate is encoded as is */
        { 0xdfff, "\xed\xbf\xbf", 3 },
        { 0xfffd, "\xef\xbf\xbd", 3 },
        { 0xffff, "\xef\xbf\xbf", 3 },
        { 0x10000, "\xf0\x90\x80\x80", 4 },
        { 0x1f600, "\xf0\x9f\x98\x80", 4 },
        { 0x10ffff, "\xf4\x8f\xbf\xbf", 4 },
        { 0x110000, "", 0 },
        { 0xffffffff, "", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4] = { 'x', 'x', 'x', 'x' };
        size_t n = sl_utf8_encode(cases[i].cp, out);
        if (n != cases[i].n || memcmp(out, cases[i].want, n) != 0)
            fail_msg("sl_utf8_encode(U+%04X): %zu bytes, want %zu", (unsigned)cases[i].cp, n,
                     cases[i].n);
        if (n == 0 && memcmp(out, "xxxx", 4) != 0)
            fail_msg("sl_utf8_encode(U+%X) wrote although it failed", (unsigned)cases[i].cp);
    }
}

/* Every scalar value, through the log's own decoder: the shortest form, and
 * the same code point back. */
static void test_utf8_encode_round_trips_every_scalar_value(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        char out[4];
        size_t n = sl_utf8_encode(cp, out);
        size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        uint32_t back = 0;
        if (n != want || sl_utf8_decode((const unsigned char *)out, n, &back) != n || back != cp)
            fail_msg("U+%04X: %zu bytes, decoded as U+%04X", (unsigned)cp, n, (unsigned)back);
    }
}

/* ---- sl_display_byte ---- */

static const unsigned all_flags[] = {
    SL_DISPLAY_QMARK,
    SL_DISPLAY_HEX,
    SL_DISPLAY_KEEP_HIGH,
    SL_DISPLAY_APOS,
    SL_DISPLAY_HEX | SL_DISPLAY_KEEP_HIGH,
    SL_DISPLAY_HEX | SL_DISPLAY_APOS,
    SL_DISPLAY_KEEP_HIGH | SL_DISPLAY_APOS,
    SL_DISPLAY_HEX | SL_DISPLAY_KEEP_HIGH | SL_DISPLAY_APOS,
};

static void test_display_byte_table(void **state)
{
    (void)state;
    static const struct {
        unsigned char c;
        unsigned flags;
        const char *want;
    } cases[] = {
        { 'a', SL_DISPLAY_QMARK, "a" },
        { ' ', SL_DISPLAY_QMARK, " " },
        { '~', SL_DISPLAY_QMARK, "~" },
        { '\\', SL_DISPLAY_QMARK, "\\" },
        { '\'', SL_DISPLAY_QMARK, "'" },
        { '\n', SL_DISPLAY_QMARK, "?" },
        { 0x1b, SL_DISPLAY_QMARK, "?" },
        { 0x7f, SL_DISPLAY_QMARK, "?" },
        { 0x80, SL_DISPLAY_QMARK, "?" },
        { 0xff, SL_DISPLAY_QMARK, "?" },
        { '\'', SL_DISPLAY_APOS, "?" },
        { '"', SL_DISPLAY_APOS, "\"" },
        { 0xc3, SL_DISPLAY_KEEP_HIGH, "\xc3" },
        { 0x9b, SL_DISPLAY_KEEP_HIGH, "\x9b" },
        { 0x1b, SL_DISPLAY_KEEP_HIGH, "?" },
        { 0x7f, SL_DISPLAY_KEEP_HIGH, "?" },
        { 'a', SL_DISPLAY_HEX, "a" },
        { '\\', SL_DISPLAY_HEX, "\\x5c" },
        { '\0', SL_DISPLAY_HEX, "\\x00" },
        { '\n', SL_DISPLAY_HEX, "\\x0a" },
        { 0x7f, SL_DISPLAY_HEX, "\\x7f" },
        { 0xab, SL_DISPLAY_HEX, "\\xab" },
        { 0xab, SL_DISPLAY_HEX | SL_DISPLAY_KEEP_HIGH, "\xab" },
        { '\'', SL_DISPLAY_HEX | SL_DISPLAY_APOS, "\\x27" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4];
        size_t n = sl_display_byte(cases[i].c, cases[i].flags, out);
        if (n != strlen(cases[i].want) || memcmp(out, cases[i].want, n) != 0)
            fail_msg("byte 0x%02x, flags %u: got %.*s, want %s", cases[i].c, cases[i].flags,
                     (int)n, out, cases[i].want);
    }
}

/* Whatever the flags, no control byte and no DEL comes out; a byte above
 * 0x7f only when asked for; printable ASCII other than '\' (with HEX) and
 * '\'' (with APOS) is itself. */
static void test_display_byte_never_emits_a_control_byte(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof all_flags / sizeof all_flags[0]; f++) {
        unsigned flags = all_flags[f];
        for (int c = 0; c < 256; c++) {
            char out[4];
            size_t n = sl_display_byte((unsigned char)c, flags, out);
            assert_true(n == 1 || (n == 4 && (flags & SL_DISPLAY_HEX)));
            for (size_t k = 0; k < n; k++) {
                unsigned char o = (unsigned char)out[k];
                if (o < 0x20 || o == 0x7f || (o >= 0x80 && !(flags & SL_DISPLAY_KEEP_HIGH)))
                    fail_msg("byte 0x%02x, flags %u: emits 0x%02x", c, flags, o);
            }
            bool plain = c >= 0x20 && c < 0x7f && !(c == '\\' && (flags & SL_DISPLAY_HEX)) &&
                         !(c == '\'' && (flags & SL_DISPLAY_APOS));
            if (plain && (n != 1 || out[0] != (char)c))
                fail_msg("printable 0x%02x, flags %u: not kept", c, flags);
        }
    }
}

/* ---- sl_display_untrusted ---- */

#define T(s) s, sizeof(s) - 1
#define A10 "aaaaaaaaaa"
#define A80 A10 A10 A10 A10 A10 A10 A10 A10

static void test_display_untrusted_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t len;
        size_t cap;
        unsigned flags;
        const char *want;
    } cases[] = {
        { T(""), 16, SL_DISPLAY_QMARK, "" },
        { T("registry.npmjs.org"), 64, SL_DISPLAY_QMARK, "registry.npmjs.org" },
        { T("a\nb\x1b[2Jc"), 64, SL_DISPLAY_QMARK, "a?b?[2Jc" },
        { T("b\xc3\xbc" "cher"), 64, SL_DISPLAY_QMARK, "b??cher" },
        { T("b\xc3\xbc" "cher\n"), 64, SL_DISPLAY_KEEP_HIGH, "b\xc3\xbc" "cher?" },
        { T("it's"), 64, SL_DISPLAY_APOS, "it?s" },
        { T("a\\b\x01\xff"), 64, SL_DISPLAY_HEX, "a\\x5cb\\x01\\xff" },
        { T("nul\0inside"), 64, SL_DISPLAY_HEX, "nul\\x00inside" },
        /* '?': cap - 4 bytes of text fit; one more is cut, with "..." */
        { T("abcd"), 8, SL_DISPLAY_QMARK, "abcd" },
        { T("abcde"), 8, SL_DISPLAY_QMARK, "abcd..." },
        { T("abcdefghij"), 8, SL_DISPLAY_QMARK, "abcd..." },
        { T("\n\n\n\n\n"), 8, SL_DISPLAY_QMARK, "????..." },
        /* \xNN: room is kept for the longest form, whatever the byte */
        { T("abcde"), 12, SL_DISPLAY_HEX, "abcde" },
        { T("abcdef"), 12, SL_DISPLAY_HEX, "abcde..." },
        { T("\x01\x02"), 12, SL_DISPLAY_HEX, "\\x01\\x02" },
        { T("\x01\x02\x03"), 12, SL_DISPLAY_HEX, "\\x01\\x02..." },
        /* the allowlist's messages: 80 bytes, then "..." */
        { T(A80), 84, SL_DISPLAY_KEEP_HIGH, A80 },
        { T(A80 "b"), 84, SL_DISPLAY_KEEP_HIGH, A80 "..." },
        /* tiny buffers */
        { T("abc"), 4, SL_DISPLAY_QMARK, "..." },
        { T(""), 4, SL_DISPLAY_QMARK, "" },
        { T("abc"), 3, SL_DISPLAY_QMARK, "" },
        { T("abc"), 1, SL_DISPLAY_HEX, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[128];
        memset(buf, 'Z', sizeof buf);
        const char *r = sl_display_untrusted(cases[i].s, cases[i].len, buf, cases[i].cap, cases[i].flags);
        assert_ptr_equal(r, buf);
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("case %zu (cap %zu, flags %u): got \"%s\", want \"%s\"", i, cases[i].cap,
                     cases[i].flags, buf, cases[i].want);
        if (buf[cases[i].cap] != 'Z')
            fail_msg("case %zu: wrote past cap %zu", i, cases[i].cap);
    }
    /* cap 0: nothing at all is written */
    char one = 'Z';
    sl_display_untrusted("abc", 3, &one, 0, SL_DISPLAY_QMARK);
    assert_int_equal(one, 'Z');
}

/* \xNN text back to bytes (for the round trip). */
static size_t unescape(const char *s, unsigned char *out)
{
    size_t n = 0;
    while (*s) {
        if (s[0] == '\\') {
            assert_int_equal(s[1], 'x');
            out[n++] = (unsigned char)sl_hex_value(s + 2, 2);
            s += 4;
        } else {
            out[n++] = (unsigned char)*s++;
        }
    }
    return n;
}

/* Random bytes, every cap and flag set: the result ends within cap and
 * holds no control byte; it is the whole text when that fits with room to
 * spare, else a prefix of it and "..."; and (\xNN, uncut) it reads back to
 * the input exactly. */
static void test_display_untrusted_random_properties(void **state)
{
    (void)state;
    srand(12345);
    for (int round = 0; round < 20000; round++) {
        unsigned char in[40];
        size_t len = (size_t)rand() % sizeof in;
        for (size_t i = 0; i < len; i++)
            in[i] = (unsigned char)(rand() % 4 ? rand() % 256 : 'a' + rand() % 26);
        unsigned flags = all_flags[(size_t)rand() % (sizeof all_flags / sizeof all_flags[0])];
        size_t cap = (size_t)rand() % 200, longest = (flags & SL_DISPLAY_HEX) ? 4 : 1;
        char buf[208], full[4 * sizeof in + 1];
        size_t whole = 0;
        for (size_t i = 0; i < len; i++)
            whole += sl_display_byte(in[i], flags, full + whole);
        full[whole] = '\0';
        memset(buf, 'Z', sizeof buf);
        sl_display_untrusted((const char *)in, len, buf, cap, flags);
        if (cap < 4) {
            assert_int_equal(buf[0], cap ? '\0' : 'Z');
            continue;
        }
        size_t n = strlen(buf);
        assert_true(n < cap);
        for (size_t i = 0; i < n; i++)
            assert_false((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f);
        bool cut = strcmp(buf, full) != 0;
        if (whole + longest + 3 <= cap)
            assert_false(cut);
        if (whole >= cap)
            assert_true(cut);
        if (cut) {
            assert_true(n >= 3 && !memcmp(buf + n - 3, "...", 3));
            assert_memory_equal(buf, full, n - 3);
        } else if ((flags & SL_DISPLAY_HEX) && !(flags & SL_DISPLAY_KEEP_HIGH)) {
            unsigned char back[sizeof in];
            assert_int_equal(unescape(buf, back), len);
            assert_memory_equal(back, in, len);
        }
    }
}

static void test_display_write_is_the_uncut_text(void **state)
{
    (void)state;
    static const char in[] = "host\x1b]0;pwned\x07\\x" "\xc3\xa9";
    for (size_t f = 0; f < sizeof all_flags / sizeof all_flags[0]; f++) {
        char *mem = NULL;
        size_t memlen = 0;
        FILE *out = open_memstream(&mem, &memlen);
        assert_non_null(out);
        size_t cols = sl_display_write(out, in, sizeof in - 1, all_flags[f]);
        assert_int_equal(fclose(out), 0);
        char want[256];
        sl_display_untrusted(in, sizeof in - 1, want, sizeof want, all_flags[f]);
        assert_int_equal(cols, memlen);
        assert_string_equal(mem, want);
        free(mem);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hexval_takes_exactly_the_hex_digits),
        cmocka_unit_test(test_hex_value_table),
        cmocka_unit_test(test_utf8_encode_table),
        cmocka_unit_test(test_utf8_encode_round_trips_every_scalar_value),
        cmocka_unit_test(test_display_byte_table),
        cmocka_unit_test(test_display_byte_never_emits_a_control_byte),
        cmocka_unit_test(test_display_untrusted_table),
        cmocka_unit_test(test_display_untrusted_random_properties),
        cmocka_unit_test(test_display_write_is_the_uncut_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
