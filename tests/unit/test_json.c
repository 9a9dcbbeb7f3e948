/* The JSON line writer: escaping (quotes, backslashes, every control byte,
 * UTF-8 kept, invalid UTF-8 replaced), truncation, numbers. Every line it
 * produces is parsed back with jansson, and decoded strings are compared with
 * the text that was meant. Table-driven.
 *
 * Tests marked "BUG:" assert the correct behaviour of code that is wrong at
 * the time of writing; they fail until json.c is fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"

#define U_FFFD "\xef\xbf\xbd"
#define CANARY 0xa5
#define SLACK 512

/* A buffer with a guard zone after `cap`: the writer must never touch it. */
typedef struct guarded {
    unsigned char mem[16384 + SLACK];
    size_t cap;
} guarded;

static guarded G;

static char *guard_begin(size_t cap)
{
    assert_true(cap + SLACK <= sizeof G.mem);
    memset(G.mem, CANARY, sizeof G.mem);
    G.cap = cap;
    return (char *)G.mem;
}

static bool guard_intact(void)
{
    for (size_t i = G.cap; i < G.cap + SLACK; i++)
        if (G.mem[i] != CANARY)
            return false;
    return true;
}

static void show(const char *what, const char *buf, size_t n)
{
    print_message("  %s (%zu bytes): ", what, n);
    for (size_t i = 0; i < n && i < 600; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c >= 0x20 && c < 0x7f)
            print_message("%c", c);
        else
            print_message("\\x%02x", c);
    }
    print_message("\n");
}

/* Check one produced line: n is its length, it lies within the buffer, is
 * NUL-terminated, ends with "}\n", holds no other newline and no raw control
 * byte, and is one JSON object. Returns the object (caller decrefs) or NULL
 * with a note. */
static json_t *parse_line(const char *buf, size_t n, size_t cap)
{
    const char *why = NULL;
    json_error_t err;
    json_t *root = NULL;
    if (!guard_intact())
        why = "wrote past the end of the buffer";
    else if (n >= cap)
        why = "length >= cap";
    else if (buf[n] != '\0' || strlen(buf) != n)
        why = "length does not match the NUL";
    else if (n < 3 || buf[n - 2] != '}' || buf[n - 1] != '\n')
        why = "does not end with }\\n";
    else if (memchr(buf, '\n', n - 1))
        why = "newline inside the line";
    else {
        for (size_t i = 0; i < n - 1 && !why; i++)
            if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
                why = "raw control byte";
    }
    if (!why) {
        root = json_loadb(buf, n, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);
        if (!root)
            why = err.text;
        else if (!json_is_object(root)) {
            json_decref(root);
            root = NULL;
            why = "not an object";
        }
    }
    if (why) {
        print_message("  bad line: %s\n", why);
        show("line", buf, n < cap ? n : cap);
    }
    return root;
}

static bool str_is(json_t *root, const char *key, const char *want, size_t wlen)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_string(v)) {
        print_message("  \"%s\" is missing or not a string\n", key);
        return false;
    }
    size_t got = json_string_length(v);
    if (got != wlen || memcmp(json_string_value(v), want, wlen) != 0) {
        show("decoded", json_string_value(v), got);
        show("wanted ", want, wlen);
        return false;
    }
    return true;
}

/* ---- escaping: a table ---- */

typedef struct esc_case {
    const char *name;
    const char *in;
    size_t in_len;
    const char *decoded;   /* the text the line must carry (UTF-8) */
    size_t dec_len;
    const char *escaped;   /* exact sl_json_escape output, or NULL */
} esc_case;

#define B(lit) lit, sizeof lit - 1

/* Invalid UTF-8: every byte that does not begin a valid sequence becomes one
 * U+FFFD (the writer's policy: it advances one byte at a time), so a bad
 * two-byte sequence is two U+FFFD, and so on. */
static const esc_case esc_cases[] = {
    { "empty", B(""), B(""), "" },
    { "plain", B("registry.npmjs.org"), B("registry.npmjs.org"), "registry.npmjs.org" },
    { "quote", B("a\"b"), B("a\"b"), "a\\\"b" },
    { "backslash", B("a\\b"), B("a\\b"), "a\\\\b" },
    { "backslash quote", B("\\\""), B("\\\""), "\\\\\\\"" },
    { "quotes only", B("\"\"\""), B("\"\"\""), "\\\"\\\"\\\"" },
    { "trailing backslash", B("x\\"), B("x\\"), "x\\\\" },
    { "breakout attempt", B("\",\"decision\":\"allow\",\"x\":\""),
      B("\",\"decision\":\"allow\",\"x\":\""), NULL },
    { "new line attempt", B("a\"}\n{\"event\":\"decision\""), B("a\"}\n{\"event\":\"decision\""),
      "a\\\"}\\n{\\\"event\\\":\\\"decision\\\"" },
    { "slash kept", B("a/b"), B("a/b"), "a/b" },
    { "NUL", B("a\0b"), B("a\0b"), "a\\u0000b" },
    { "newline", B("\n"), B("\n"), "\\n" },
    { "return", B("\r"), B("\r"), "\\r" },
    { "tab", B("\t"), B("\t"), "\\t" },
    { "DEL", B("\x7f"), B("\x7f"), "\\u007f" },
    { "ESC", B("\x1b[31m"), B("\x1b[31m"), "\\u001b[31m" },
    { "unit separator", B("\x1f"), B("\x1f"), "\\u001f" },
    /* valid UTF-8, kept as is */
    { "2-byte e-acute", B("caf\xc3\xa9"), B("caf\xc3\xa9"), "caf\xc3\xa9" },
    { "2-byte U+0080", B("\xc2\x80"), B("\xc2\x80"), "\xc2\x80" },
    { "2-byte U+07FF", B("\xdf\xbf"), B("\xdf\xbf"), "\xdf\xbf" },
    { "3-byte euro", B("\xe2\x82\xac"), B("\xe2\x82\xac"), "\xe2\x82\xac" },
    { "3-byte U+0800", B("\xe0\xa0\x80"), B("\xe0\xa0\x80"), "\xe0\xa0\x80" },
    { "3-byte U+D7FF", B("\xed\x9f\xbf"), B("\xed\x9f\xbf"), "\xed\x9f\xbf" },
    { "3-byte U+E000", B("\xee\x80\x80"), B("\xee\x80\x80"), "\xee\x80\x80" },
    { "3-byte U+FFFD", B(U_FFFD), B(U_FFFD), U_FFFD },
    { "3-byte CJK", B("\xe4\xb8\xad\xe6\x96\x87"), B("\xe4\xb8\xad\xe6\x96\x87"),
      "\xe4\xb8\xad\xe6\x96\x87" },
    { "4-byte emoji", B("\xf0\x9f\x98\x80"), B("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80" },
    { "4-byte U+10000", B("\xf0\x90\x80\x80"), B("\xf0\x90\x80\x80"), "\xf0\x90\x80\x80" },
    { "4-byte U+10FFFF", B("\xf4\x8f\xbf\xbf"), B("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf" },
    { "mixed", B("b\xc3\xbc" "cher\xe2\x82\xac\xf0\x9f\x98\x80."),
      B("b\xc3\xbc" "cher\xe2\x82\xac\xf0\x9f\x98\x80."),
      "b\xc3\xbc" "cher\xe2\x82\xac\xf0\x9f\x98\x80." },
    /* invalid UTF-8 */
    { "lone continuation", B("a\x80" "b"), B("a" U_FFFD "b"), "a\\ufffdb" },
    { "lone continuation BF", B("\xbf"), B(U_FFFD), "\\ufffd" },
    { "continuations", B("\x80\x81"), B(U_FFFD U_FFFD), "\\ufffd\\ufffd" },
    { "overlong C0 80", B("\xc0\x80"), B(U_FFFD U_FFFD), "\\ufffd\\ufffd" },
    { "overlong C1 BF", B("\xc1\xbf"), B(U_FFFD U_FFFD), "\\ufffd\\ufffd" },
    { "overlong E0 80 80", B("\xe0\x80\x80"), B(U_FFFD U_FFFD U_FFFD),
      "\\ufffd\\ufffd\\ufffd" },
    { "overlong E0 9F BF", B("\xe0\x9f\xbf"), B(U_FFFD U_FFFD U_FFFD), NULL },
    { "overlong F0 80 80 80", B("\xf0\x80\x80\x80"), B(U_FFFD U_FFFD U_FFFD U_FFFD), NULL },
    { "overlong F0 8F BF BF", B("\xf0\x8f\xbf\xbf"), B(U_FFFD U_FFFD U_FFFD U_FFFD), NULL },
    { "surrogate ED A0 80", B("\xed\xa0\x80"), B(U_FFFD U_FFFD U_FFFD),
      "\\ufffd\\ufffd\\ufffd" },
    { "surrogate ED BF BF", B("\xed\xbf\xbf"), B(U_FFFD U_FFFD U_FFFD), NULL },
    { "surrogate pair", B("\xed\xa0\xbd\xed\xb8\x80"),
      B(U_FFFD U_FFFD U_FFFD U_FFFD U_FFFD U_FFFD), NULL },
    { "above U+10FFFF F4 90 80 80", B("\xf4\x90\x80\x80"), B(U_FFFD U_FFFD U_FFFD U_FFFD),
      "\\ufffd\\ufffd\\ufffd\\ufffd" },
    { "F5 lead", B("\xf5\x80\x80\x80"), B(U_FFFD U_FFFD U_FFFD U_FFFD), NULL },
    { "5-byte F8", B("\xf8\x88\x80\x80\x80"), B(U_FFFD U_FFFD U_FFFD U_FFFD U_FFFD), NULL },
    { "FE FF", B("\xfe\xff"), B(U_FFFD U_FFFD), NULL },
    { "lead then ASCII", B("\xc3" "A"), B(U_FFFD "A"), "\\ufffdA" },
    { "3-lead then ASCII", B("\xe2\x82" "A"), B(U_FFFD U_FFFD "A"), NULL },
    { "lead then lead", B("\xc3\xc3\xa9"), B(U_FFFD "\xc3\xa9"), NULL },
    { "truncated 2 at end", B("ab\xc3"), B("ab" U_FFFD), "ab\\ufffd" },
    { "truncated 3 at end", B("ab\xe2\x82"), B("ab" U_FFFD U_FFFD), "ab\\ufffd\\ufffd" },
    { "truncated 4 at end", B("ab\xf0\x9f\x98"), B("ab" U_FFFD U_FFFD U_FFFD), NULL },
    { "truncated 4 lead only", B("\xf0"), B(U_FFFD), "\\ufffd" },
    { "invalid then control", B("\xff\x01\""), B(U_FFFD "\x01\""), "\\ufffd\\u0001\\\"" },
};

/* The escaped text, on its own and in a line; the line parses back to the
 * decoded text. */
static void test_escape_table(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof esc_cases / sizeof *esc_cases; i++) {
        const esc_case *c = &esc_cases[i];
        bool ok = true;
        char out[1024];
        size_t n = sl_json_escape(out, sizeof out, c->in, c->in_len);
        if (n != strlen(out)) {
            print_message("  escape returned %zu for %zu bytes\n", n, strlen(out));
            ok = false;
        }
        if (c->escaped && strcmp(out, c->escaped) != 0) {
            show("escaped", out, strlen(out));
            show("wanted ", c->escaped, strlen(c->escaped));
            ok = false;
        }
        char *buf = guard_begin(4096);
        sl_json j;
        sl_json_begin(&j, buf, 4096);
        sl_json_cstr(&j, "event", "test");
        sl_json_str(&j, "v", c->in, c->in_len);
        sl_json_int(&j, "port", 443);
        size_t len = sl_json_end(&j);
        json_t *root = parse_line(buf, len, 4096);
        if (!root)
            ok = false;
        else {
            ok &= str_is(root, "v", c->decoded, c->dec_len);
            ok &= str_is(root, "event", "test", 4);
            ok &= json_object_size(root) == 3;
            ok &= json_integer_value(json_object_get(root, "port")) == 443;
            json_decref(root);
        }
        if (!ok) {
            print_message("  FAILED: %s\n", c->name);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* Every control byte 0x00..0x1f and 0x7f, alone and between text: escaped
 * (no raw control byte in the line), and decoded back to itself. */
static void test_every_control_byte(void **state)
{
    (void)state;
    int failed = 0;
    for (int c = 0; c <= 0x7f; c++) {
        if (c >= 0x20 && c < 0x7f)
            continue;
        char in[3] = { 'a', (char)c, 'b' };
        char out[64];
        size_t n = sl_json_escape(out, sizeof out, in, 3);
        bool ok = n >= 4 && out[0] == 'a' && out[n - 1] == 'b' && out[1] == '\\';
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)out[k] < 0x20 || out[k] == 0x7f)
                ok = false;
        char *buf = guard_begin(256);
        sl_json j;
        sl_json_begin(&j, buf, 256);
        sl_json_str(&j, "v", in, 3);
        sl_json_str(&j, "w", in + 1, 1);
        json_t *root = parse_line(buf, sl_json_end(&j), 256);
        if (!root)
            ok = false;
        else {
            ok &= str_is(root, "v", in, 3);
            ok &= str_is(root, "w", in + 1, 1);
            json_decref(root);
        }
        if (!ok) {
            print_message("  FAILED: byte 0x%02x\n", c);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* Every single byte 0x80..0xff alone is invalid UTF-8: one U+FFFD. */
static void test_every_high_byte_alone(void **state)
{
    (void)state;
    int failed = 0;
    for (int c = 0x80; c <= 0xff; c++) {
        char in[1] = { (char)c }, out[16];
        sl_json_escape(out, sizeof out, in, 1);
        char *buf = guard_begin(128);
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_str(&j, "v", in, 1);
        json_t *root = parse_line(buf, sl_json_end(&j), 128);
        bool ok = root && str_is(root, "v", U_FFFD, 3) && strcmp(out, "\\ufffd") == 0;
        json_decref(root);
        if (!ok) {
            print_message("  FAILED: byte 0x%02x\n", c);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* Every code point, encoded, round-trips: the scalar values unchanged, the
 * surrogates (as generalised UTF-8) replaced. */
static void test_every_code_point(void **state)
{
    (void)state;
    int failed = 0;
    for (uint32_t cp = 0x80; cp <= 0x10ffff && failed < 10; cp++) {
        unsigned char in[4];
        size_t len;
        if (cp < 0x800) {
            in[0] = (unsigned char)(0xc0 | cp >> 6);
            in[1] = (unsigned char)(0x80 | (cp & 0x3f));
            len = 2;
        } else if (cp < 0x10000) {
            in[0] = (unsigned char)(0xe0 | cp >> 12);
            in[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            in[2] = (unsigned char)(0x80 | (cp & 0x3f));
            len = 3;
        } else {
            in[0] = (unsigned char)(0xf0 | cp >> 18);
            in[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
            in[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            in[3] = (unsigned char)(0x80 | (cp & 0x3f));
            len = 4;
        }
        char out[32];
        size_t n = sl_json_escape(out, sizeof out, (const char *)in, len);
        bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
        bool ok = surrogate ? (n == 18 && strcmp(out, "\\ufffd\\ufffd\\ufffd") == 0)
                            : (n == len && memcmp(out, in, len) == 0);
        if (!ok) {
            print_message("  FAILED: U+%04X\n", (unsigned)cp);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* ---- sl_json_escape's bounds ---- */

static void test_escape_bounds(void **state)
{
    (void)state;
    char out[64];

    /* cap 0 writes nothing */
    memset(out, CANARY, sizeof out);
    assert_int_equal(sl_json_escape(out, 0, "abc", 3), 0);
    assert_int_equal((unsigned char)out[0], CANARY);

    /* cap 1: just the NUL */
    memset(out, CANARY, sizeof out);
    assert_int_equal(sl_json_escape(out, 1, "abc", 3), 0);
    assert_int_equal(out[0], '\0');
    assert_int_equal((unsigned char)out[1], CANARY);

    /* never more than cap - 1, never half an escape or half a character */
    static const struct {
        const char *in;
        size_t len;
    } inputs[] = {
        { B("abcdefghijklmnopqrstuvwxyz") },
        { B("\x01\x02\x03\x04\x05") },
        { B("\"\\\"\\\"\\") },
        { B("\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80") },
        { B("\xe2\x82\xac\xc3\xa9\xe2\x82\xac\xc3\xa9") },
        { B("\xff\xfe\x80\xc0\x80") },
        { B("a\n\"b\\\x7f" "c\xc3\xa9\xed\xa0\x80") },
    };
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        char full[256];
        size_t fn = sl_json_escape(full, sizeof full, inputs[i].in, inputs[i].len);
        for (size_t cap = 1; cap <= fn + 2; cap++) {
            memset(out, CANARY, sizeof out);
            size_t n = sl_json_escape(out, cap, inputs[i].in, inputs[i].len);
            assert_true(n <= cap - 1);
            assert_int_equal(out[n], '\0');
            assert_int_equal(strlen(out), n);
            assert_int_equal((unsigned char)out[cap], CANARY);
            /* a prefix of the full escape, cut between pieces: it parses */
            assert_memory_equal(out, full, n);
            char doc[300];
            snprintf(doc, sizeof doc, "[\"%s\"]", out);
            json_error_t err;
            json_t *v = json_loads(doc, JSON_ALLOW_NUL, &err);
            if (!v) {
                show("cut escape", out, n);
                fail_msg("case %zu cap %zu: %s", i, cap, err.text);
            }
            json_decref(v);
            /* and as long as it can be: the next piece would not fit */
            if (n < fn) {
                unsigned char b = (unsigned char)full[n];
                size_t next = b == '\\' ? (full[n + 1] == 'u' ? 6 : 2)
                              : b < 0x80  ? 1
                              : b >= 0xf0 ? 4
                              : b >= 0xe0 ? 3
                                          : 2;
                assert_true(n + next > cap - 1);
            } else {
                assert_int_equal(n, fn);
            }
        }
    }
}

/* ---- lines ---- */

static void test_line_shapes(void **state)
{
    (void)state;
    /* an empty object */
    char *buf = guard_begin(128);
    sl_json j;
    sl_json_begin(&j, buf, 128);
    size_t n = sl_json_end(&j);
    assert_int_equal(n, 3);
    assert_string_equal(buf, "{}\n");
    assert_true(guard_intact());

    /* the exact bytes of a small line */
    buf = guard_begin(256);
    sl_json_begin(&j, buf, 256);
    sl_json_cstr(&j, "event", "close");
    sl_json_int(&j, "bytes_up", 1234);
    sl_json_ms(&j, "duration_ms", 1376.94);
    sl_json_cstr(&j, "end", "client_eof");
    n = sl_json_end(&j);
    assert_string_equal(buf, "{\"event\":\"close\",\"bytes_up\":1234,\"duration_ms\":1376.9,"
                             "\"end\":\"client_eof\"}\n");
    assert_int_equal(n, strlen(buf));
    json_t *root = parse_line(buf, n, 256);
    assert_non_null(root);
    json_decref(root);

    /* NULL strings are empty strings */
    buf = guard_begin(128);
    sl_json_begin(&j, buf, 128);
    sl_json_cstr(&j, "a", NULL);
    sl_json_str(&j, "b", NULL, 5);
    sl_json_str(&j, "c", "xyz", 0);
    n = sl_json_end(&j);
    assert_string_equal(buf, "{\"a\":\"\",\"b\":\"\",\"c\":\"\"}\n");

    /* a decision line like conn.c's, every string hostile */
    buf = guard_begin(8192);
    sl_json_begin(&j, buf, 8192);
    sl_json_cstr(&j, "ts", "2026-12-02T09:00:00.123456Z");
    sl_json_cstr(&j, "event", "decision");
    sl_json_cstr(&j, "id", "0f3a9c12");
    sl_json_cstr(&j, "client", "127.0.0.1:50122");
    sl_json_cstr(&j, "method", "GE\"T\r\n");
    sl_json_str(&j, "host", B("evil\",\"decision\":\"allow\x00\xff\xed\xa0\x80.example"));
    sl_json_int(&j, "port", 443);
    sl_json_cstr(&j, "decision", "deny");
    sl_json_cstr(&j, "reason", "not_allowlisted");
    sl_json_cstr(&j, "rule", "allow\\list.txt:3");
    sl_json_ms(&j, "dns_ms", 3.14);
    n = sl_json_end(&j);
    root = parse_line(buf, n, 8192);
    assert_non_null(root);
    assert_int_equal(json_object_size(root), 11);
    assert_true(str_is(root, "decision", "deny", 4));
    assert_true(str_is(root, "method", B("GE\"T\r\n")));
    assert_true(str_is(root, "host", B("evil\",\"decision\":\"allow\x00" U_FFFD U_FFFD U_FFFD
                                       U_FFFD ".example")));
    assert_true(str_is(root, "rule", B("allow\\list.txt:3")));
    assert_int_equal(json_integer_value(json_object_get(root, "port")), 443);
    assert_true(fabs(json_real_value(json_object_get(root, "dns_ms")) - 3.1) < 1e-9);
    json_decref(root);
}

static void test_ints(void **state)
{
    (void)state;
    static const long long vals[] = { 0, 1, -1, 443, 65535, 1234567890123LL, LLONG_MAX,
                                      LLONG_MIN };
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        char *buf = guard_begin(128);
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_int(&j, "n", vals[i]);
        sl_json_cstr(&j, "after", "x");
        json_t *root = parse_line(buf, sl_json_end(&j), 128);
        assert_non_null(root);
        json_t *v = json_object_get(root, "n");
        assert_true(json_is_integer(v));
        assert_true(json_integer_value(v) == vals[i]);
        assert_true(str_is(root, "after", "x", 1));
        json_decref(root);
    }
}

static void test_ms(void **state)
{
    (void)state;
    static const struct {
        double in;
        const char *text;
    } cases[] = {
        { 0.0, "0.0" }, { 3.1, "3.1" }, { 3.14159, "3.1" }, { 1376.94, "1376.9" },
        { 0.96, "1.0" }, { 0.04, "0.0" }, { -5.0, "0.0" },
        { 86400000.0, "86400000.0" }, { 1e15, "1000000000000000.0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *buf = guard_begin(128), want[128];
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_ms(&j, "ms", cases[i].in);
        size_t n = sl_json_end(&j);
        snprintf(want, sizeof want, "{\"ms\":%s}\n", cases[i].text);
        assert_string_equal(buf, want);
        json_t *root = parse_line(buf, n, 128);
        assert_non_null(root);
        assert_true(json_is_number(json_object_get(root, "ms")));
        json_decref(root);
    }
}

/* BUG: json.c sl_json_ms (line 148) prints "%.1f" as is: NaN and infinity
 * come out as "nan"/"inf" (not JSON), so the line is not valid JSON.
 * Expected: a valid number (0.0, or a clamp) whatever double comes in. */
static void test_ms_not_finite(void **state)
{
    (void)state;
    static const double vals[] = { NAN, -NAN, INFINITY, -INFINITY };
    int failed = 0;
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        char *buf = guard_begin(128);
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_ms(&j, "ms", vals[i]);
        json_t *root = parse_line(buf, sl_json_end(&j), 128);
        if (!root || !json_is_number(json_object_get(root, "ms"))) {
            print_message("  FAILED: value %zu\n", i);
            failed++;
        }
        json_decref(root);
    }
    assert_int_equal(failed, 0);
}

/* BUG: json.c sl_json_ms (lines 146-148): a value whose "%.1f" form is
 * longer than tmp[48] (1e300 prints 303 characters) makes snprintf return
 * more than it wrote, and raw() then copies that many bytes out of the
 * 48-byte stack array: an out-of-bounds read (AddressSanitizer:
 * stack-buffer-overflow), and a cut number. The same pattern is in key()
 * (lines 104-107, tmp[80]) for a key name over ~76 characters. Expected: a valid line.
 * Run in a child process, so that AddressSanitizer's abort fails only this
 * test. */
static void test_ms_huge(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *buf = guard_begin(1024);
        sl_json j;
        sl_json_begin(&j, buf, 1024);
        sl_json_ms(&j, "ms", 1e300);
        sl_json_cstr(&j, "after", "x");
        size_t n = sl_json_end(&j);
        json_error_t err;
        json_t *root = guard_intact() && n < 1024
                           ? json_loads(buf, 0, &err) : NULL;
        int ok = root && json_is_number(json_object_get(root, "ms")) &&
                 json_number_value(json_object_get(root, "ms")) >= 1e15; /* clamped: a duration, not a float dump */
        json_decref(root);
        _exit(ok ? 0 : 3);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("BUG: sl_json_ms(1e300): child %s %d", WIFEXITED(st) ? "exited" : "killed by signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* ---- truncation ---- */

typedef struct long_value {
    const char *name;
    const char *unit;      /* repeated */
    size_t unit_len;
    const char *dec_unit;  /* what one unit decodes to */
    size_t dec_len;
} long_value;

static const long_value long_values[] = {
    { "ascii", B("a"), B("a") },
    { "quotes", B("\""), B("\"") },
    { "backslashes", B("\\"), B("\\") },
    { "control", B("\x01"), B("\x01") },
    { "mixed escapes", B("a\"\n\\\x7f"), B("a\"\n\\\x7f") },
    { "2-byte", B("\xc3\xa9"), B("\xc3\xa9") },
    { "3-byte", B("\xe2\x82\xac"), B("\xe2\x82\xac") },
    { "4-byte", B("\xf0\x9f\x98\x80"), B("\xf0\x9f\x98\x80") },
    { "invalid", B("\xff"), B(U_FFFD) },
    { "surrogates", B("\xed\xa0\x80"), B(U_FFFD U_FFFD U_FFFD) },
    { "mixed utf-8", B("x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
      B("x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") },
};

static size_t repeat(char *out, size_t cap, const char *unit, size_t ulen, size_t times)
{
    size_t n = 0;
    for (size_t i = 0; i < times && n + ulen <= cap; i++) {
        memcpy(out + n, unit, ulen);
        n += ulen;
    }
    return n;
}

/* The decoded value is a whole number of units: the writer cuts between
 * pieces, never inside a character or an escape. */
static bool whole_units(json_t *root, const long_value *lv, size_t max_units)
{
    json_t *v = json_object_get(root, "v");
    if (!json_is_string(v))
        return false;
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    /* a unit of several pieces may be cut inside: compare as a prefix of
     * the full decoded text */
    static char full[65536];
    size_t fn = repeat(full, sizeof full, lv->dec_unit, lv->dec_len, max_units);
    if (len > fn || memcmp(s, full, len) != 0) {
        show("decoded", s, len);
        return false;
    }
    return true;
}

/* A value longer than the buffer, as the last field: cut, and the line is
 * still one valid JSON object ending in "}\n", within the buffer. */
static void test_truncation_last_field(void **state)
{
    (void)state;
    static char value[32768];
    int failed = 0;
    for (size_t k = 0; k < sizeof long_values / sizeof *long_values; k++) {
        const long_value *lv = &long_values[k];
        size_t units = 8000 / lv->unit_len;
        size_t vlen = repeat(value, sizeof value, lv->unit, lv->unit_len, units);
        for (size_t cap = 128; cap <= 600; cap++) {
            char *buf = guard_begin(cap);
            sl_json j;
            sl_json_begin(&j, buf, cap);
            sl_json_cstr(&j, "event", "decision");
            sl_json_str(&j, "v", value, vlen);
            size_t n = sl_json_end(&j);
            json_t *root = parse_line(buf, n, cap);
            bool ok = root && str_is(root, "event", "decision", 8) && whole_units(root, lv, units);
            /* it was cut, and not to nothing: the value fills the line */
            ok = ok && json_string_length(json_object_get(root, "v")) > 0 && n + 12 >= cap;
            json_decref(root);
            if (!ok) {
                print_message("  FAILED: %s, cap %zu\n", lv->name, cap);
                if (++failed > 10)
                    fail_msg("too many failures");
            }
        }
    }
    assert_int_equal(failed, 0);
}

/* BUG: json.c, fields after a value that filled the buffer.
 *  - raw() (lines 96-97) cuts a key in the middle ("...\",\"po}"), so the
 *    line is no longer valid JSON: a long value followed by any field (as
 *    conn.c writes host, then port, decision, reason...) breaks the line.
 *  - sl_json_str (line 124): after a previous sl_json_str put its closing
 *    quote into the reserve, j->len is cap - 3 and `room = j->cap - RESERVE
 *    - j->len` wraps around to SIZE_MAX; sl_json_escape then has no bound,
 *    and sl_json_end (lines 153-155) writes '\n' and '\0' past cap. E.g. cap 128:
 *    str("a", 200 x 'a'), str("b", "x"), str("c", "y"), end -> 2 bytes
 *    written past the buffer (a longer "c" value writes that much further).
 * Expected: whatever is added, the line stays within cap, valid JSON, ending
 * in "}\n", with the fields that did fit intact. (The guard zone after cap
 * turns an overflow into a failed check here instead of a crash.) */
static void test_truncation_more_fields(void **state)
{
    (void)state;
    int failed = 0;
    char a[200];
    memset(a, 'a', sizeof a);

    /* the smallest cases first, spelled out */
    {
        /* three strings: the third is written past the buffer */
        char *buf = guard_begin(128);
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_str(&j, "a", a, sizeof a);
        sl_json_cstr(&j, "b", "x");
        sl_json_cstr(&j, "c", "y");
        size_t n = sl_json_end(&j);
        if (!guard_intact()) {
            print_message("  FAILED: str, str, str: wrote past the end of a 128-byte buffer\n");
            failed++;
        } else {
            json_t *root = parse_line(buf, n, 128);
            failed += !root;
            json_decref(root);
        }
    }
    {
        /* a string, then an int: the key is cut, the line is not JSON */
        char *buf = guard_begin(128);
        sl_json j;
        sl_json_begin(&j, buf, 128);
        sl_json_str(&j, "a", a, sizeof a);
        sl_json_int(&j, "port", 443);
        size_t n = sl_json_end(&j);
        json_t *root = parse_line(buf, n, 128);
        if (!root) {
            print_message("  FAILED: str, int: not a valid line\n");
            failed++;
        }
        json_decref(root);
    }

    static char value[32768];
    for (size_t k = 0; k < sizeof long_values / sizeof *long_values; k++) {
        const long_value *lv = &long_values[k];
        for (size_t units = 0; units <= 200; units += 1 + units / 16) {
            size_t vlen = repeat(value, sizeof value, lv->unit, lv->unit_len, units);
            for (size_t cap = 128; cap <= 400; cap += 3) {
                char *buf = guard_begin(cap);
                sl_json j;
                sl_json_begin(&j, buf, cap);
                sl_json_cstr(&j, "event", "decision");
                sl_json_str(&j, "v", value, vlen);
                sl_json_int(&j, "port", 443);
                sl_json_cstr(&j, "decision", "deny");
                sl_json_str(&j, "w", value, vlen < 16 ? vlen : 16);
                sl_json_ms(&j, "dns_ms", 1.5);
                size_t n = sl_json_end(&j);
                json_t *root = guard_intact() ? parse_line(buf, n, cap) : NULL;
                bool ok = root && str_is(root, "event", "decision", 8) &&
                          whole_units(root, lv, units);
                json_decref(root);
                if (!ok) {
                    print_message("  FAILED: %s x%zu, cap %zu%s\n", lv->name, units, cap,
                                  guard_intact() ? "" : " (wrote past the buffer)");
                    if (++failed >= 8)
                        fail_msg("BUG: lines broken by fields after a long value (first 8 shown)");
                }
            }
        }
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_table),
        cmocka_unit_test(test_every_control_byte),
        cmocka_unit_test(test_every_high_byte_alone),
        cmocka_unit_test(test_every_code_point),
        cmocka_unit_test(test_escape_bounds),
        cmocka_unit_test(test_line_shapes),
        cmocka_unit_test(test_ints),
        cmocka_unit_test(test_ms),
        cmocka_unit_test(test_truncation_last_field),
        /* BUG: these fail until json.c is fixed (see each comment) */
        cmocka_unit_test(test_ms_not_finite),
        cmocka_unit_test(test_truncation_more_fields),
        cmocka_unit_test(test_ms_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
