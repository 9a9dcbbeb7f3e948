/* sluice audit: the log reader, the JSON line scanner, the chain check and
 * the reports. Logs are written here by a small writer of the test's own,
 * following SPEC's format (not the daemon's log.c), into temporary files;
 * the command runs in-process with its output captured. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "allowlist.h"
#include "audit.h"
#include "audit_input.h"
#include "audit_report.h"
#include "audit_verify.h"
#include "crypto.h"

static char tmpdir[256];

static const char *tpath(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

/* ---- running the command ---- */

static char out_text[1 << 20], err_text[1 << 16];

static void slurp(FILE *f, char *buf, size_t cap)
{
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static int audit_argv(int argc, char **argv)
{
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    int rc = sl_audit_main(argc, argv, out, err);
    slurp(out, out_text, sizeof out_text);
    slurp(err, err_text, sizeof err_text);
    return rc;
}

/* audit("--verify", path, NULL) */
static int audit(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "audit";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return audit_argv(argc, argv);
}

static json_t *out_json(void)
{
    json_error_t e;
    json_t *j = json_loads(out_text, 0, &e);
    if (!j)
        fail_msg("output is not JSON (%s at %d): %s", e.text, e.position, out_text);
    return j;
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("no integer %s in %s", key, json_dumps(o, 0));
    return json_integer_value(v);
}

/* ---- a log writer of the test's own, after SPEC ---- */

typedef struct lw {
    FILE *f;
    gzFile gz;
    char stream[33];
    unsigned long long seq;
    char chain[65];
    bool reopened;
} lw;

static void lw_open(lw *w, const char *path, bool gz)
{
    if (gz) {
        w->gz = gzopen(path, "wb");
        assert_non_null(w->gz);
    } else {
        w->f = fopen(path, "w");
        assert_non_null(w->f);
    }
}

static void lw_start(lw *w, const char *path, const char *stream, bool gz)
{
    memset(w, 0, sizeof *w);
    snprintf(w->stream, sizeof w->stream, "%s", stream);
    lw_open(w, path, gz);
}

static void lw_close(lw *w)
{
    if (w->f)
        fclose(w->f);
    if (w->gz)
        gzclose(w->gz);
    w->f = NULL;
    w->gz = NULL;
}

/* logrotate: the next line goes to a new file and names where it continues from. */
static void lw_rotate(lw *w, const char *path, bool gz)
{
    lw_close(w);
    lw_open(w, path, gz);
    w->reopened = true;
}

static void lw_raw(lw *w, const char *s, size_t n)
{
    if (w->gz)
        assert_int_equal(gzwrite(w->gz, s, (unsigned)n), (int)n);
    else
        assert_int_equal(fwrite(s, 1, n, w->f), n);
}

/* body: a JSON object without its closing brace */
static void lw_put(lw *w, const char *body)
{
    char text[32768], next[65], line[33000];
    int n;
    if (w->seq == 0)
        n = snprintf(text, sizeof text, "%s,\"stream\":\"%s\",\"seq\":1}", body, w->stream);
    else if (w->reopened)
        n = snprintf(text, sizeof text,
                     "%s,\"stream\":\"%s\",\"continues_seq\":%llu,\"continues_chain\":\"%s\",\"seq\":%llu}",
                     body, w->stream, w->seq, w->chain, w->seq + 1);
    else
        n = snprintf(text, sizeof text, "%s,\"seq\":%llu}", body, w->seq + 1);
    if (w->seq == 0)
        sl_chain_next(w->stream, strlen(w->stream), text, (size_t)n, next);
    else
        sl_chain_next(w->chain, 64, text, (size_t)n, next);
    int m = snprintf(line, sizeof line, "%.*s,\"chain\":\"%s\"}\n", n - 1, text, next);
    lw_raw(w, line, (size_t)m);
    memcpy(w->chain, next, 65);
    w->seq++;
    w->reopened = false;
}

static unsigned tick;

static void ts(char *buf)
{
    unsigned t = tick++;
    sprintf(buf, "2026-12-02T%02u:%02u:%02u.%06uZ", 9 + t / 3600, t / 60 % 60, t % 60, t * 7 % 1000000);
}

static void lw_decision(lw *w, const char *id, const char *client, const char *method, const char *host,
                        int port, bool allow, const char *reason)
{
    char body[2048], t[40];
    ts(t);
    snprintf(body, sizeof body,
             "{\"ts\":\"%s\",\"event\":\"decision\",\"id\":\"%s\",\"client\":\"%s\",\"method\":\"%s\","
             "\"host\":\"%s\",\"port\":%d,\"decision\":\"%s\",\"reason\":\"%s\"%s",
             t, id, client, method, host, port, allow ? "allow" : "deny", reason,
             allow ? ",\"rule\":\"allowlist.txt:1\",\"addr\":\"11.0.0.1\",\"dns_ms\":1.5" : "");
    lw_put(w, body);
}

static void lw_close_line(lw *w, const char *id, long long up, long long down)
{
    char body[512], t[40];
    ts(t);
    snprintf(body, sizeof body,
             "{\"ts\":\"%s\",\"event\":\"close\",\"id\":\"%s\",\"bytes_up\":%lld,\"bytes_down\":%lld,"
             "\"duration_ms\":12.5,\"end\":\"client_eof\"",
             t, id, up, down);
    lw_put(w, body);
}

/* The CONNECT of an inspected tunnel (SPEC part 2): its decision line. */
static void lw_tunnel(lw *w, const char *id, const char *host, int port)
{
    lw_decision(w, id, "127.0.0.1:40100", "CONNECT", host, port, true, "inspected");
}

/* A request line inside tunnel `id`. path and credential are JSON text as
 * they appear between the quotes (escapes and all); credential NULL: none. */
static void lw_request(lw *w, const char *id, int n, const char *method, const char *host, const char *path,
                       bool allow, const char *reason, const char *credential)
{
    static char body[30000];
    char t[40], cred[200] = "";
    ts(t);
    if (credential)
        snprintf(cred, sizeof cred, ",\"credential\":\"%s\"", credential);
    snprintf(body, sizeof body,
             "{\"ts\":\"%s\",\"event\":\"request\",\"id\":\"%s\",\"n\":%d,\"method\":\"%s\",\"host\":\"%s\","
             "\"path\":\"%s\",\"decision\":\"%s\",\"reason\":\"%s\"%s%s,\"status\":%d,\"bytes_up\":311,"
             "\"bytes_down\":1830,\"duration_ms\":41.2%s",
             t, id, n, method, host, path, allow ? "allow" : "deny", reason,
             allow ? ",\"rule\":\"allow.txt:4\"" : "", cred, allow ? 200 : 403,
             allow ? "" : ",\"detail\":\"no rule allows it\"");
    lw_put(w, body);
}

/* A plain-HTTP request to an inspected host: a decision line with a path. */
static void lw_plain_rule(lw *w, const char *id, const char *host, int port, const char *method, const char *path,
                          bool allow)
{
    char body[4096], t[40];
    ts(t);
    snprintf(body, sizeof body,
             "{\"ts\":\"%s\",\"event\":\"decision\",\"id\":\"%s\",\"client\":\"127.0.0.1:40200\","
             "\"method\":\"%s\",\"host\":\"%s\",\"port\":%d,\"decision\":\"%s\",\"reason\":\"%s\","
             "\"path\":\"%s\"%s",
             t, id, method, host, port, allow ? "allow" : "deny", allow ? "rule" : "rule_not_matched", path,
             allow ? ",\"rule\":\"allow.txt:9\",\"addr\":\"11.0.0.1\"" : "");
    lw_put(w, body);
}

#define STREAM_A "0123456789abcdef0123456789abcdef"
#define STREAM_B "fedcba9876543210fedcba9876543210"

/* A mixed log: 7 allowed (with closes), 3+2+1 denied, 3 clients. */
static void mixed_log(lw *w)
{
    char id[20];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "a%015d", i);
        lw_decision(w, id, i % 2 ? "127.0.0.1:40001" : "127.0.0.1:40002", "CONNECT", "origin.test", 443,
                    true, "allowlisted");
        lw_close_line(w, id, 100 + i, 1000 * (i + 1));
    }
    lw_decision(w, "b000000000000001", "10.1.1.1:1", "GET", "origin.test", 80, true, "allowlisted");
    lw_decision(w, "b000000000000002", "10.1.1.1:2", "GET", "origin2.test", 80, true, "allowlisted");
    lw_close_line(w, "b000000000000002", 7, 70);
    lw_close_line(w, "b000000000000001", 5, 50);
    for (int i = 0; i < 3; i++)
        lw_decision(w, "c000000000000000", "127.0.0.1:5", "CONNECT", "denied.test", 443, false, "not_allowlisted");
    lw_decision(w, "c000000000000001", "127.0.0.1:5", "CONNECT", "private.test", 443, false, "non_public_address");
    lw_decision(w, "c000000000000002", "127.0.0.1:5", "CONNECT", "private.test", 443, false, "non_public_address");
    lw_decision(w, "c000000000000003", "127.0.0.1:6", "CONNECT", "origin.test", 8443, false, "port_not_allowed");
}

/* ---- files as lines, for tampering ---- */

typedef struct lines {
    char *v[4096];
    size_t n;
} lines;

static void read_lines(const char *path, lines *l)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    l->n = 0;
    while ((n = getline(&buf, &cap, f)) > 0) {
        if (buf[n - 1] == '\n')
            buf[n - 1] = '\0';
        l->v[l->n++] = strdup(buf);
    }
    free(buf);
    fclose(f);
}

static void write_lines(const char *path, const lines *l, bool last_newline)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < l->n; i++)
        fprintf(f, "%s%s", l->v[i], i + 1 < l->n || last_newline ? "\n" : "");
    fclose(f);
}

static void free_lines(lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

/* ---- fixtures ---- */

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sluice-test-audit-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    tick = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- tests: the hash ---- */

static void test_chain_is_sha256_of_prev_then_text(void **state)
{
    (void)state;
    char out[65];
    sl_chain_next("", 0, "abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sl_chain_next("a", 1, "bc", 2, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- tests: the JSON line scanner ---- */

static void test_scanner_accepts_json_objects_and_picks_fields(void **state)
{
    (void)state;
    static const char *good[] = {
        "{}",
        " { \"a\" : 1 } ",
        "{\"host\":\"x\\\"y\\\\z\\u00e9\\ud83d\\ude00\",\"port\":443,\"seq\":7}",
        "{\"nested\":{\"a\":[1,2.5,-3e10,true,false,null,\"s\"]},\"seq\":0}",
        "{\"host\":\"h\xc3\xa9\xe2\x82\xac\xf0\x9f\x92\xa9\"}",
        "{\"port\":-1}",
        "{\"port\":1.5}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sl_afields f;
        const char *why = NULL;
        size_t at = 0;
        if (!sl_aline_scan(good[i], strlen(good[i]), &f, &why, &at))
            fail_msg("rejected %s: %s at %zu", good[i], why, at);
    }
    sl_afields f;
    const char *l = good[2];
    assert_true(sl_aline_scan(l, strlen(l), &f, NULL, NULL));
    char host[64];
    sl_astr_decode(&f.host, host, sizeof host);
    assert_string_equal(host, "x\"y\\z\xc3\xa9\xf0\x9f\x98\x80");
    assert_true(f.port.set);
    assert_int_equal(f.port.v, 443);
    assert_int_equal(f.seq.v, 7);
    assert_false(f.chain.set);
    /* a number of the wrong kind leaves the field unset */
    assert_true(sl_aline_scan(good[5], strlen(good[5]), &f, NULL, NULL));
    assert_false(f.port.set);
    assert_true(sl_aline_scan(good[6], strlen(good[6]), &f, NULL, NULL));
    assert_false(f.port.set);
}

static void test_scanner_rejects_what_is_not_one_json_object(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "   ",
        "[1]",
        "{\"a\":1",
        "{\"a\":1}}",
        "{\"a\":1} x",
        "{\"a\" 1}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":tru}",
        "{\"a\":\"\x01\"}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\\u12g4\"}",
        "{\"a\":\"\xff\"}",
        "{\"a\":\"\xc0\xaf\"}",          /* overlong */
        "{\"a\":\"\xed\xa0\x80\"}",      /* surrogate */
        "{a:1}",
        "{\"a\":1,}",
        "{\"seq\":1,\"seq\":2}",          /* a field audit reads, twice */
        "{\"a\":[1,2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_afields f;
        const char *why = NULL;
        if (sl_aline_scan(bad[i], strlen(bad[i]), &f, &why, NULL))
            fail_msg("accepted bad line %zu: %s", i, bad[i]);
        assert_non_null(why);
    }
    /* nesting is bounded */
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    char line[420];
    snprintf(line, sizeof line, "{\"a\":%.400s}", deep);
    sl_afields f;
    assert_false(sl_aline_scan(line, strlen(line), &f, NULL, NULL));
}

/* The scanner looks at eight bytes at a time: a byte that matters must be
 * seen at every offset, next to every other kind. */
static void test_scanner_sees_each_special_byte_at_every_offset(void **state)
{
    (void)state;
    static const struct { const char *ins; bool ok; size_t decoded; } kinds[] = {
        { "\\\"", true, 1 },     /* escaped quote */
        { "\\\\", true, 1 },    /* escaped backslash */
        { "\\u00e9", true, 2 },
        { "\xc3\xa9", true, 2 },
        { "\xf0\x9f\x92\xa9", true, 4 },
        { "\x7f", true, 1 },
        { "\x1f", false, 0 },
        { "\t", false, 0 },
        { "\x80", false, 0 },
        { "\xc3", false, 0 },
        { "\"", false, 0 },        /* a bare quote ends the string early */
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t off = 0; off < 24; off++) {
            char val[64], line[128];
            memset(val, 'x', off);
            snprintf(val + off, sizeof val - off, "%sxxxxxxxxxxx", kinds[k].ins);
            int n = snprintf(line, sizeof line, "{\"host\":\"%s\",\"port\":1}", val);
            sl_afields f;
            bool ok = sl_aline_scan(line, (size_t)n, &f, NULL, NULL);
            if (ok != kinds[k].ok)
                fail_msg("kind %zu at offset %zu: %s (%s)", k, off, ok ? "accepted" : "rejected", line);
            if (ok) {
                char host[64];
                assert_int_equal(sl_astr_decode(&f.host, host, sizeof host), off + kinds[k].decoded + 11);
                assert_true(f.port.set);
            }
        }
    }
}

/* ---- tests: the reader ---- */

static void test_reader_limits_lines_to_one_mib_and_goes_on(void **state)
{
    (void)state;
    const char *p = tpath("long.log");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("first\n", f);
    for (size_t i = 0; i < SL_AIN_LINE_MAX; i++)
        putc('a', f);               /* exactly the limit: accepted */
    putc('\n', f);
    for (size_t i = 0; i < SL_AIN_LINE_MAX + 1; i++)
        putc('b', f);               /* one over: refused, by its number */
    putc('\n', f);
    for (size_t i = 0; i < 3 * SL_AIN_LINE_MAX; i++)
        putc('c', f);
    fputs("\nlast", f);             /* no newline */
    fclose(f);
    char err[200];
    sl_ain *in = sl_ain_open(p, err, sizeof err);
    assert_non_null(in);
    sl_aline l;
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_LINE);
    assert_int_equal(l.len, 5);
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_LINE);
    assert_int_equal(l.len, SL_AIN_LINE_MAX);
    assert_int_equal(l.lineno, 2);
    assert_true(l.complete);
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_LONG);
    assert_int_equal(l.lineno, 3);
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_LONG);
    assert_int_equal(l.lineno, 4);
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_LINE);
    assert_int_equal(l.lineno, 5);
    assert_int_equal(l.len, 4);
    assert_memory_equal(l.text, "last", 4);
    assert_false(l.complete);
    assert_int_equal(sl_ain_next(in, &l), SL_AIN_EOF);
    sl_ain_close(in);

    /* the command names the line */
    assert_int_equal(audit("--verify", p, NULL), 1);
    assert_non_null(strstr(err_text, "long.log:1: not valid JSON"));
}

static void test_reader_names_a_file_it_cannot_open(void **state)
{
    (void)state;
    assert_int_equal(audit("--summary", tpath("missing.log"), NULL), 2);
    assert_non_null(strstr(err_text, "missing.log: cannot open"));
    assert_string_equal(out_text, "");
    assert_int_equal(audit("--verify", tmpdir, NULL), 2);
    assert_non_null(strstr(err_text, "is a directory"));
}

/* ---- tests: summary, denied, suggest ---- */

static void test_summary_totals_and_bytes_per_destination(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("mixed.log"), STREAM_A, false);
    mixed_log(&w);
    lw_close(&w);
    assert_int_equal(audit("--summary", "--json", tpath("mixed.log"), NULL), 0);
    json_t *j = out_json();
    json_t *t = json_object_get(j, "totals");
    assert_int_equal(jint(t, "requests"), 13);
    assert_int_equal(jint(t, "allowed"), 7);
    assert_int_equal(jint(t, "denied"), 6);
    assert_int_equal(jint(t, "bytes_up"), 100 + 101 + 102 + 103 + 104 + 7 + 5);
    assert_int_equal(jint(t, "bytes_down"), 15000 + 70 + 50);
    assert_int_equal(jint(t, "closes"), 7);
    assert_int_equal(jint(j, "clients"), 2);          /* addresses, not ports */
    assert_int_equal(jint(j, "lines"), w.seq);
    assert_int_equal(jint(j, "unmatched_closes"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "from")), "2026-12-02T09:00:00.000000Z");
    json_t *hosts = json_object_get(j, "hosts");
    assert_int_equal(json_array_size(hosts), 6);
    json_t *top = json_array_get(hosts, 0);            /* most requests first */
    assert_string_equal(json_string_value(json_object_get(top, "host")), "origin.test");
    assert_int_equal(jint(top, "port"), 443);
    assert_int_equal(jint(top, "allowed"), 5);
    assert_int_equal(jint(top, "bytes_up"), 510);
    assert_int_equal(jint(top, "bytes_down"), 15000);
    assert_int_equal(jint(json_object_get(top, "reasons"), "allowlisted"), 5);
    bool saw_origin2 = false;
    for (size_t i = 0; i < json_array_size(hosts); i++) {
        json_t *h = json_array_get(hosts, i);
        if (strcmp(json_string_value(json_object_get(h, "host")), "origin2.test") == 0) {
            saw_origin2 = true;
            assert_int_equal(jint(h, "bytes_up"), 7);
            assert_int_equal(jint(h, "bytes_down"), 70);
            assert_int_equal(jint(h, "port"), 80);
        }
    }
    assert_true(saw_origin2);
    json_decref(j);

    /* the table says the same */
    assert_int_equal(audit(tpath("mixed.log"), NULL), 0);
    assert_non_null(strstr(out_text, "13 requests: 7 allowed, 6 denied; 2 clients"));
    assert_non_null(strstr(out_text, "origin.test:443"));
}

static void test_denied_lists_refusals_most_frequent_first(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("mixed.log"), STREAM_A, false);
    mixed_log(&w);
    lw_close(&w);
    assert_int_equal(audit("--denied", "--json", tpath("mixed.log"), NULL), 0);
    json_t *j = out_json();
    json_t *d = json_object_get(j, "denied");
    assert_int_equal(json_array_size(d), 3);
    static const struct { const char *host; int port; const char *reason; int count; } want[] = {
        { "denied.test", 443, "not_allowlisted", 3 },
        { "private.test", 443, "non_public_address", 2 },
        { "origin.test", 8443, "port_not_allowed", 1 },
    };
    for (size_t i = 0; i < 3; i++) {
        json_t *row = json_array_get(d, i);
        assert_string_equal(json_string_value(json_object_get(row, "host")), want[i].host);
        assert_int_equal(jint(row, "port"), want[i].port);
        assert_string_equal(json_string_value(json_object_get(row, "reason")), want[i].reason);
        assert_int_equal(jint(row, "count"), want[i].count);
    }
    json_decref(j);
    assert_int_equal(audit("--denied", tpath("mixed.log"), NULL), 0);
    char *a = strstr(out_text, "denied.test:443"), *b = strstr(out_text, "private.test:443"),
         *c = strstr(out_text, "origin.test:8443");
    assert_true(a && b && c && a < b && b < c);
    assert_null(strstr(out_text, " origin.test:443 "));   /* allowed requests are not listed */
    assert_null(strstr(out_text, " allowlisted"));
}

/* Every line of the output that is not a comment is an allowlist entry. */
static size_t check_allowlist_lines(const char *text, char entries[][300], size_t cap)
{
    sl_allowlist *al = sl_allowlist_new();
    size_t n = 0;
    int lineno = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char err[300];
        lineno++;
        if (!sl_allowlist_add_line(al, p, len, "suggest", lineno, err, sizeof err))
            fail_msg("suggest line %d is not a valid allowlist line (%s): %.*s", lineno, err, (int)len, p);
        if (len && p[0] != '#') {
            const char *hash = memchr(p, '#', len);
            size_t el = hash ? (size_t)(hash - p) : len;
            while (el && p[el - 1] == ' ')
                el--;
            assert_true(n < cap);
            snprintf(entries[n++], 300, "%.*s", (int)el, p);
            assert_non_null(hash);                         /* every entry says why */
        }
        p += len + (nl ? 1 : 0);
    }
    sl_allowlist_free(al);
    return n;
}

/* A line of out_text that starts with `prefix` and holds `needle`. */
static bool line_with(const char *prefix, const char *needle)
{
    for (const char *p = out_text; *p;) {
        const char *nl = strchrnul(p, '\n');
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
            if (strstr(line, needle))
                return true;
        }
        p = *nl ? nl + 1 : nl;
    }
    return false;
}

static bool has_entry(char entries[][300], size_t n, const char *e)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(entries[i], e) == 0)
            return true;
    return false;
}

static void test_suggest_writes_allowlist_lines_never_for_non_public(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("s.log"), STREAM_A, false);
    mixed_log(&w);
    /* the same host by CONNECT :443 and plain HTTP :80: one bare line */
    lw_decision(&w, "d1", "127.0.0.1:7", "GET", "denied.test", 80, false, "not_allowlisted");
    lw_decision(&w, "d2", "127.0.0.1:7", "GET", "web.test", 8080, false, "not_allowlisted");
    lw_decision(&w, "d3", "127.0.0.1:7", "GET", "web443.test", 443, false, "not_allowlisted");
    lw_decision(&w, "d4", "127.0.0.1:7", "CONNECT", "2c0f:fff0::1", 443, false, "not_allowlisted");
    lw_decision(&w, "d5", "127.0.0.1:7", "CONNECT", "2c0f:fff0::1", 9000, false, "not_allowlisted");
    lw_decision(&w, "d6", "127.0.0.1:7", "CONNECT", "11.0.0.9", 443, false, "not_allowlisted");
    lw_decision(&w, "d7", "127.0.0.1:7", "CONNECT", "10.0.0.1", 443, false, "not_allowlisted");
    /* refused as not allowlisted once, then (allowed and) non-public: never */
    lw_decision(&w, "d8", "127.0.0.1:7", "CONNECT", "sneaky.test", 443, false, "not_allowlisted");
    lw_decision(&w, "d9", "127.0.0.1:7", "CONNECT", "sneaky.test", 443, false, "non_public_address");
    lw_decision(&w, "da", "127.0.0.1:7", "CONNECT", "sneaky.test", 8443, false, "not_allowlisted");
    /* other reasons are never suggested */
    lw_decision(&w, "db", "127.0.0.1:7", "CONNECT", "dnsfail.test", 443, false, "dns_error");
    lw_decision(&w, "dc", "127.0.0.1:7", "GET", "a\\\"b\\u0001", 80, false, "bad_request");
    lw_decision(&w, "dd", "127.0.0.1:7", "CONNECT", "sni.test", 443, false, "sni_mismatch");
    /* refused, then allowed after a reload: nothing to add */
    lw_decision(&w, "de", "127.0.0.1:7", "CONNECT", "later.test", 443, false, "not_allowlisted");
    lw_decision(&w, "df", "127.0.0.1:7", "CONNECT", "later.test", 443, true, "allowlisted");
    lw_close(&w);

    assert_int_equal(audit("--suggest", tpath("s.log"), NULL), 0);
    char entries[32][300];
    size_t n = check_allowlist_lines(out_text, entries, 32);
    static const char *want[] = {
        "denied.test", "origin.test:8443", "web.test:8080", "web443.test:443",
        "[2c0f:fff0::1]", "[2c0f:fff0::1]:9000", "11.0.0.9",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!has_entry(entries, n, want[i]))
            fail_msg("no suggestion %s in:\n%s", want[i], out_text);
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_string_equal(entries[0], "denied.test");      /* most requests first */
    assert_true(line_with("denied.test ", "  # 4 requests, not_allowlisted"));
    assert_true(line_with("origin.test:8443 ", "  # 1 request, port_not_allowed"));
    for (size_t i = 0; i < n; i++) {
        assert_null(strstr(entries[i], "private"));
        assert_null(strstr(entries[i], "sneaky"));
        assert_null(strstr(entries[i], "10.0.0.1"));
        assert_null(strstr(entries[i], "later"));
        assert_null(strstr(entries[i], "dnsfail"));
        assert_null(strstr(entries[i], "sni"));
    }
    /* a host refused as non_public_address is named only in a comment */
    assert_non_null(strstr(out_text, "# not suggested: sneaky.test:443"));

    /* the same as JSON */
    assert_int_equal(audit("--suggest", "--json", tpath("s.log"), NULL), 0);
    json_t *j = out_json();
    json_t *s = json_object_get(j, "suggestions");
    assert_int_equal(json_array_size(s), n);
    assert_string_equal(json_string_value(json_object_get(json_array_get(s, 0), "line")), "denied.test");
    assert_int_equal(jint(json_array_get(s, 0), "requests"), 4);
    json_decref(j);

    /* other default ports, as the gate's config may say */
    assert_int_equal(audit("--suggest", "--connect-ports", "443 9000", tpath("s.log"), NULL), 0);
    n = check_allowlist_lines(out_text, entries, 32);
    assert_true(has_entry(entries, n, "[2c0f:fff0::1]"));
    assert_false(has_entry(entries, n, "[2c0f:fff0::1]:9000"));
}

/* Old logs hold not_allowlisted refusals of IP literals the gate now
 * refuses as non_public_address before it looks at the allowlist. None
 * gets a line; a private one gets a note that allow_cidr is the way; a
 * metadata address, which nothing admits, is not mentioned at all. */
static void test_suggest_never_proposes_a_non_public_literal(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("np.log"), STREAM_A, false);
    lw_decision(&w, "e1", "127.0.0.1:7", "GET", "169.254.169.254", 80, false, "not_allowlisted");
    lw_decision(&w, "e2", "127.0.0.1:7", "GET", "169.254.169.254", 80, false, "not_allowlisted");
    lw_decision(&w, "e3", "127.0.0.1:7", "CONNECT", "fd00:ec2::254", 443, false, "not_allowlisted");
    lw_decision(&w, "e4", "127.0.0.1:7", "CONNECT", "::ffff:169.254.169.254", 443, false,
                "not_allowlisted");
    lw_decision(&w, "e5", "127.0.0.1:7", "CONNECT", "10.1.2.3", 443, false, "not_allowlisted");
    lw_decision(&w, "e6", "127.0.0.1:7", "GET", "127.0.0.1", 8080, false, "port_not_allowed");
    lw_decision(&w, "e7", "127.0.0.1:7", "CONNECT", "fc00::5", 443, false, "not_allowlisted");
    lw_decision(&w, "e8", "127.0.0.1:7", "CONNECT", "10.9.9.9", 443, false, "not_allowlisted");
    lw_decision(&w, "e9", "127.0.0.1:7", "CONNECT", "10.9.9.9", 443, false, "non_public_address");
    lw_decision(&w, "ea", "127.0.0.1:7", "CONNECT", "11.0.0.9", 443, false, "not_allowlisted");
    lw_close(&w);

    assert_int_equal(audit("--suggest", tpath("np.log"), NULL), 0);
    char entries[8][300];
    size_t n = check_allowlist_lines(out_text, entries, 8);
    assert_int_equal(n, 1);
    assert_string_equal(entries[0], "11.0.0.9");
    static const struct {
        const char *dest, *why;
    } noted[] = {
        { "10.1.2.3:443", "10.0.0.0/8 Private-Use" },
        { "127.0.0.1:8080", "Loopback" },
        { "[fc00::5]:443", "fc00::/7" },
        { "10.9.9.9:443", "10.0.0.0/8 Private-Use" },
    };
    for (size_t i = 0; i < sizeof noted / sizeof noted[0]; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "# not suggested: %s ", noted[i].dest);
        if (!line_with(prefix, noted[i].why) || !line_with(prefix, "allow_cidr"))
            fail_msg("no allow_cidr note for %s in:\n%s", noted[i].dest, out_text);
    }
    assert_null(strstr(out_text, "169.254"));
    assert_null(strstr(out_text, "ec2"));
    assert_null(strstr(out_text, "metadata"));

    assert_int_equal(audit("--suggest", "--json", tpath("np.log"), NULL), 0);
    json_t *j = out_json();
    json_t *sug = json_object_get(j, "suggestions"), *skipped = json_object_get(j, "skipped");
    assert_int_equal(json_array_size(sug), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sug, 0), "line")), "11.0.0.9");
    assert_int_equal(json_array_size(skipped), 4);
    for (size_t i = 0; i < json_array_size(skipped); i++) {
        const char *host = json_string_value(json_object_get(json_array_get(skipped, i), "host"));
        const char *why = json_string_value(json_object_get(json_array_get(skipped, i), "why"));
        assert_null(strstr(host, "169.254"));
        assert_non_null(strstr(why, "allow_cidr"));
    }
    json_decref(j);
}

/* ---- tests: --verify ---- */

static void write_mixed(const char *name)
{
    lw w;
    lw_start(&w, tpath(name), STREAM_A, false);
    mixed_log(&w);
    lw_close(&w);
}

static void test_verify_passes_an_untouched_log(void **state)
{
    (void)state;
    write_mixed("ok.log");
    assert_int_equal(audit("--verify", tpath("ok.log"), NULL), 0);
    assert_string_equal(out_text, "ok: 20 lines, stream " STREAM_A "\n");
    assert_string_equal(err_text, "");
    assert_int_equal(audit("--verify", "--json", tpath("ok.log"), NULL), 0);
    json_t *j = out_json();
    assert_true(json_is_true(json_object_get(j, "ok")));
    assert_int_equal(jint(j, "lines"), 20);
    json_decref(j);
}

/* Tamper with a copy and expect `FILE:LINE: ...what...` and exit 1. */
static void expect_break(const char *name, size_t lineno, const char *what)
{
    char want[300];
    assert_int_equal(audit("--verify", tpath(name), NULL), 1);
    snprintf(want, sizeof want, "%s:%zu: ", tpath(name), lineno);
    if (strncmp(err_text, want, strlen(want)) != 0)
        fail_msg("expected '%s...', got: %s", want, err_text);
    if (!strstr(err_text, what))
        fail_msg("expected '%s' in: %s", what, err_text);
    assert_null(strstr(out_text, "ok:"));
}

static void test_verify_names_the_line_for_each_tampering(void **state)
{
    (void)state;
    write_mixed("orig.log");
    lines l;

    /* one byte edited: a close line's byte count */
    read_lines(tpath("orig.log"), &l);
    char *p = strstr(l.v[5], "\"bytes_up\":10");
    assert_non_null(p);
    p[12] = '9';
    write_lines(tpath("edited.log"), &l, true);
    free_lines(&l);
    expect_break("edited.log", 6, "chain mismatch");

    /* one byte edited in the first line (chained from the stream id) */
    read_lines(tpath("orig.log"), &l);
    p = strstr(l.v[0], "origin.test");
    p[0] = 'O';
    write_lines(tpath("edited1.log"), &l, true);
    free_lines(&l);
    expect_break("edited1.log", 1, "chain mismatch");

    /* a line deleted */
    read_lines(tpath("orig.log"), &l);
    free(l.v[7]);
    memmove(&l.v[7], &l.v[8], (l.n - 8) * sizeof l.v[0]);
    l.n--;
    write_lines(tpath("deleted.log"), &l, true);
    free_lines(&l);
    expect_break("deleted.log", 8, "seq 9 follows seq 7");

    /* the last line deleted is a clean cut: nothing can tell (SPEC's chain
     * has no end marker); the line before the last is not */
    read_lines(tpath("orig.log"), &l);
    free(l.v[l.n - 2]);
    l.v[l.n - 2] = l.v[l.n - 1];
    l.n--;
    write_lines(tpath("deleted2.log"), &l, true);
    free_lines(&l);
    expect_break("deleted2.log", 19, "seq 20 follows seq 18");

    /* two lines swapped */
    read_lines(tpath("orig.log"), &l);
    char *t = l.v[10];
    l.v[10] = l.v[11];
    l.v[11] = t;
    write_lines(tpath("swapped.log"), &l, true);
    free_lines(&l);
    expect_break("swapped.log", 11, "seq 12 follows seq 10");

    /* a line inserted: a copy of another */
    read_lines(tpath("orig.log"), &l);
    char *copy = strdup(l.v[12]);
    memmove(&l.v[4], &l.v[3], (l.n - 3) * sizeof l.v[0]);
    l.v[3] = copy;
    l.n++;
    write_lines(tpath("inserted.log"), &l, true);
    free_lines(&l);
    expect_break("inserted.log", 4, "seq 13 follows seq 3");

    /* a line inserted: forged with the right seq, and the lines after renumbered */
    read_lines(tpath("orig.log"), &l);
    {
        lw w;
        lw_start(&w, tpath("forged.log"), STREAM_A, false);
        for (size_t i = 0; i < 3; i++) {
            lw_raw(&w, l.v[i], strlen(l.v[i]));
            lw_raw(&w, "\n", 1);
        }
        /* the forger knows the format but not how to rewrite what follows */
        w.seq = 3;
        char *c = strstr(l.v[2], "\"chain\":\"") + 9;
        memcpy(w.chain, c, 64);
        w.chain[64] = '\0';
        lw_decision(&w, "ffffffffffffffff", "127.0.0.1:1", "CONNECT", "evil.test", 443, true, "allowlisted");
        for (size_t i = 3; i < l.n; i++) {
            lw_raw(&w, l.v[i], strlen(l.v[i]));
            lw_raw(&w, "\n", 1);
        }
        lw_close(&w);
    }
    free_lines(&l);
    expect_break("forged.log", 5, "seq 4 repeats");

    /* the tail cut mid-line */
    read_lines(tpath("orig.log"), &l);
    l.v[l.n - 1][40] = '\0';
    write_lines(tpath("cut.log"), &l, false);
    free_lines(&l);
    expect_break("cut.log", 20, "last line is incomplete (truncated)");

    /* only the final newline missing */
    read_lines(tpath("orig.log"), &l);
    write_lines(tpath("nonl.log"), &l, false);
    free_lines(&l);
    expect_break("nonl.log", 20, "last line is incomplete (truncated)");

    /* the head deleted: the stream's first line is gone */
    read_lines(tpath("orig.log"), &l);
    write_lines(tpath("nohead.log"), &(lines){ .n = 0 }, true);
    FILE *f = fopen(tpath("nohead.log"), "w");
    for (size_t i = 2; i < l.n; i++)
        fprintf(f, "%s\n", l.v[i]);
    fclose(f);
    free_lines(&l);
    expect_break("nohead.log", 1, "first line is missing");

    /* not JSON; no chain; chain not last */
    read_lines(tpath("orig.log"), &l);
    l.v[2][0] = ' ';
    l.v[2][1] = '[';
    write_lines(tpath("notjson.log"), &l, true);
    free_lines(&l);
    expect_break("notjson.log", 3, "not valid JSON");

    read_lines(tpath("orig.log"), &l);
    strcpy(strstr(l.v[4], ",\"chain\""), "}");
    write_lines(tpath("nochain.log"), &l, true);
    free_lines(&l);
    expect_break("nochain.log", 5, "no chain field");
}

static void test_verify_reads_gzip_and_files_in_any_order(void **state)
{
    (void)state;
    /* one stream over three files: the oldest rotated and compressed */
    lw w;
    lw_start(&w, tpath("gate.log.2.gz"), STREAM_A, true);
    mixed_log(&w);
    lw_rotate(&w, tpath("gate.log.1"), false);
    mixed_log(&w);
    lw_rotate(&w, tpath("gate.log"), false);
    mixed_log(&w);
    lw_close(&w);
    const char *a = tpath("gate.log"), *b = tpath("gate.log.1"), *c = tpath("gate.log.2.gz");
    const char *orders[][3] = { { c, b, a }, { a, b, c }, { b, a, c }, { a, c, b } };
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(audit("--verify", orders[i][0], orders[i][1], orders[i][2], NULL), 0);
        assert_string_equal(out_text, "ok: 60 lines, stream " STREAM_A "\n");
        assert_int_equal(audit("--summary", "--json", orders[i][0], orders[i][1], orders[i][2], NULL), 0);
        json_t *j = out_json();
        assert_int_equal(jint(json_object_get(j, "totals"), "requests"), 39);
        assert_int_equal(jint(json_object_get(j, "totals"), "closes"), 21);
        assert_int_equal(jint(j, "unmatched_closes"), 0);
        json_decref(j);
    }
    /* only the newer files: verified from where they start, and said so */
    assert_int_equal(audit("--verify", a, b, NULL), 0);
    assert_non_null(strstr(out_text, "ok: 40 lines, stream " STREAM_A " (seq 21..60"));
    /* the middle file missing: the continuation does not meet its line */
    assert_int_equal(audit("--verify", a, c, NULL), 1);
    char want[300];
    snprintf(want, sizeof want, "%s:1: continues stream " STREAM_A " from seq 40, but its last line was seq 20",
             a);
    assert_non_null(strstr(err_text, want));

    /* a second stream (the gate restarted) in the same file */
    lw_start(&w, tpath("two.log"), STREAM_A, false);
    mixed_log(&w);
    lw_close(&w);
    lw_start(&w, tpath("two.tmp"), STREAM_B, false);
    mixed_log(&w);
    lw_close(&w);
    FILE *dst = fopen(tpath("two.log"), "a"), *src = fopen(tpath("two.tmp"), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, src)) > 0)
        fwrite(buf, 1, n, dst);
    fclose(src);
    fclose(dst);
    assert_int_equal(audit("--verify", tpath("two.log"), NULL), 0);
    assert_string_equal(out_text, "ok: 20 lines, stream " STREAM_A "\nok: 20 lines, stream " STREAM_B "\n");

    /* a gzip file cut short */
    FILE *g = fopen(c, "rb");
    char gz[65536];
    size_t gl = fread(gz, 1, sizeof gz, g);
    fclose(g);
    FILE *h = fopen(tpath("short.gz"), "wb");
    fwrite(gz, 1, gl - 12, h);   /* the trailer and a little data */
    fclose(h);
    assert_int_equal(audit("--verify", tpath("short.gz"), NULL), 1);
    assert_non_null(strstr(err_text, "short.gz:"));
    assert_int_equal(audit("--summary", tpath("short.gz"), NULL), 1);
    assert_non_null(strstr(out_text, "sluice audit: 1 file"));   /* what could be read */

    /* a gzip file corrupt in the middle: said once, and the end */
    for (size_t i = gl / 2; i < gl / 2 + 16; i++)
        gz[i] ^= 0x5a;
    h = fopen(tpath("corrupt.gz"), "wb");
    fwrite(gz, 1, gl, h);
    fclose(h);
    assert_int_equal(audit("--verify", tpath("corrupt.gz"), NULL), 1);
    assert_non_null(strstr(err_text, "corrupt.gz:"));
    assert_int_equal(audit("--summary", tpath("corrupt.gz"), NULL), 1);
    assert_non_null(strstr(err_text, "compressed data is corrupt"));
    assert_non_null(strstr(out_text, "sluice audit: 1 file"));
}

/* Standard input from a file for one run of the command, whatever fd 0 was
 * before (a terminal, /dev/null, or closed: then open() itself may hand out
 * fd 0). Returns what stdin_restore() needs. */
static int stdin_from(const char *path)
{
    int saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);   /* -1: stdin was closed */
    assert_true(saved >= 0 || errno == EBADF);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    if (fd != STDIN_FILENO) {
        assert_int_equal(dup2(fd, STDIN_FILENO), STDIN_FILENO);
        close(fd);
    }
    return saved;
}

static void stdin_restore(int saved)
{
    if (saved >= 0) {
        dup2(saved, STDIN_FILENO);
        close(saved);
    } else {
        close(STDIN_FILENO);
    }
}

static void test_reads_standard_input(void **state)
{
    (void)state;
    write_mixed("stdin.log");
    int saved = stdin_from(tpath("stdin.log"));
    int rc = audit("--verify", "-", NULL);
    stdin_restore(saved);
    assert_int_equal(rc, 0);
    assert_string_equal(out_text, "ok: 20 lines, stream " STREAM_A "\n");

    /* stdin with a file: still put in order */
    lw w;
    lw_start(&w, tpath("in.1"), STREAM_B, false);
    mixed_log(&w);
    lw_rotate(&w, tpath("in.0"), false);
    mixed_log(&w);
    lw_close(&w);
    saved = stdin_from(tpath("in.1"));
    rc = audit("--verify", tpath("in.0"), "-", NULL);
    stdin_restore(saved);
    assert_int_equal(rc, 0);
    assert_string_equal(out_text, "ok: 40 lines, stream " STREAM_B "\n");
    saved = stdin_from(tpath("in.1"));
    rc = audit("--denied", "--json", "-", NULL);
    stdin_restore(saved);
    assert_int_equal(rc, 0);
    json_t *j = out_json();
    assert_int_equal(jint(j, "denied_requests"), 6);
    json_decref(j);

    /* given twice: a usage error, whatever stdin holds */
    saved = stdin_from(tpath("in.1"));
    rc = audit("--verify", "-", "-", NULL);
    stdin_restore(saved);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err_text, "'-' (standard input) given more than once"));
    assert_string_equal(out_text, "");
    assert_int_equal(audit("--verify", tpath("in.0"), tpath("in.1"), tpath("in.0"), NULL), 2);
    assert_non_null(strstr(err_text, "in.0: given more than once"));
    assert_string_equal(out_text, "");
}

static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    write_mixed("u.log");
    assert_int_equal(audit(NULL), 2);
    assert_non_null(strstr(err_text, "no log given"));
    assert_int_equal(audit("--verify", "--denied", tpath("u.log"), NULL), 2);
    assert_non_null(strstr(err_text, "cannot be combined"));
    assert_int_equal(audit("--bogus", tpath("u.log"), NULL), 2);
    assert_int_equal(audit("--connect-ports", "0", tpath("u.log"), NULL), 2);
    assert_int_equal(audit("--help", NULL), 0);
    assert_non_null(strstr(out_text, "usage: sluice audit"));
    /* options after the files are options too */
    assert_int_equal(audit(tpath("u.log"), "--verify", NULL), 0);
    assert_non_null(strstr(out_text, "ok: 20 lines"));
}

static void test_summary_skips_and_counts_malformed_lines(void **state)
{
    (void)state;
    write_mixed("m.log");
    FILE *f = fopen(tpath("m.log"), "a");
    fputs("garbage\n{\"event\":\"decision\",\"host\":\"x.test\",\"port\":1,\"decision\":\"deny\",\"reason\":\"not_allowlisted\"}\n{\"cut", f);
    fclose(f);
    assert_int_equal(audit("--summary", "--json", tpath("m.log"), NULL), 0);
    json_t *j = out_json();
    assert_int_equal(jint(j, "malformed_lines"), 2);
    assert_int_equal(jint(json_object_get(j, "totals"), "requests"), 14);
    json_decref(j);
    assert_non_null(strstr(err_text, "m.log:21: not valid JSON"));
    assert_non_null(strstr(err_text, "m.log:23: last line is incomplete"));
}

static void test_many_kinds_of_reason_fold_into_other(void **state)
{
    (void)state;
    sl_report *r = sl_report_new();
    char line[400];
    for (unsigned i = 0; i < 200; i++) {
        int len = snprintf(line, sizeof line,
                           "{\"event\":\"decision\",\"id\":\"%u\",\"host\":\"h.test\",\"port\":443,"
                           "\"decision\":\"deny\",\"reason\":\"reason_%u\"}",
                           i, i);
        sl_afields f;
        assert_true(sl_aline_scan(line, (size_t)len, &f, NULL, NULL));
        assert_true(sl_report_line(r, &f));
    }
    FILE *out = tmpfile();
    sl_report_summary(r, out, true);
    slurp(out, out_text, sizeof out_text);
    json_t *j = out_json();
    json_t *reasons = json_object_get(json_array_get(json_object_get(j, "hosts"), 0), "reasons");
    assert_int_equal(json_object_size(reasons), 64);
    assert_int_equal(jint(reasons, "other"), 200 - 63);
    json_decref(j);
    sl_report_free(r);
}

/* ---- the open-connection map is bounded ---- */

static void test_open_connection_map_is_bounded(void **state)
{
    (void)state;
    sl_report *r = sl_report_new();
    char line[400];
    unsigned n = SL_REPORT_OPEN_MAX + SL_REPORT_OPEN_MAX / 2;
    for (unsigned i = 0; i < n; i++) {
        int len = snprintf(line, sizeof line,
                           "{\"ts\":\"2026-12-02T09:00:00Z\",\"event\":\"decision\",\"id\":\"%016x\","
                           "\"client\":\"127.0.0.1:1\",\"method\":\"CONNECT\",\"host\":\"h%u.test\",\"port\":443,"
                           "\"decision\":\"allow\",\"reason\":\"allowlisted\"}",
                           i, i % 100);
        sl_afields f;
        assert_true(sl_aline_scan(line, (size_t)len, &f, NULL, NULL));
        assert_true(sl_report_line(r, &f));
    }
    /* the newest still join; the oldest were forgotten */
    for (unsigned i = n - 10; i < n + 1; i++) {
        int len = snprintf(line, sizeof line,
                           "{\"ts\":\"2026-12-02T09:00:01Z\",\"event\":\"close\",\"id\":\"%016x\",\"bytes_up\":1,"
                           "\"bytes_down\":2}",
                           i == n ? 0 : i);
        sl_afields f;
        assert_true(sl_aline_scan(line, (size_t)len, &f, NULL, NULL));
        assert_true(sl_report_line(r, &f));
    }
    sl_report_totals t;
    sl_report_get_totals(r, &t);
    assert_true(t.forgotten_open >= SL_REPORT_OPEN_MAX / 2);
    assert_int_equal(t.unmatched_closes, 1);     /* id 0, forgotten */
    assert_int_equal(t.closes, 11);
    assert_int_equal(t.destinations, 100);
    assert_int_equal(t.clients, 1);
    sl_report_free(r);
}

/* ---- --follow ---- */

static void *rotate_while_followed(void *arg)
{
    (void)arg;
    struct timespec pause = { 0, 300 * 1000000L };
    lw w;
    nanosleep(&pause, NULL);
    lw_start(&w, tpath("live.log"), STREAM_B, false);
    setvbuf(w.f, NULL, _IONBF, 0);
    mixed_log(&w);
    nanosleep(&pause, NULL);
    rename(tpath("live.log"), tpath("live.log.1"));
    lw_rotate(&w, tpath("live.log"), false);
    setvbuf(w.f, NULL, _IONBF, 0);
    mixed_log(&w);
    lw_close(&w);
    nanosleep(&pause, NULL);
    nanosleep(&pause, NULL);
    kill(getpid(), SIGINT);
    return NULL;
}

static void test_follow_keeps_reading_across_rotation(void **state)
{
    (void)state;
    FILE *f = fopen(tpath("live.log"), "w");   /* empty at first */
    fclose(f);
    pthread_t t;
    /* SIGINT goes to the thread running the command, whose handler is set */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_create(&t, NULL, rotate_while_followed, NULL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    int rc = audit("--verify", "--follow", tpath("live.log"), NULL);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(out_text, "ok: 40 lines, stream " STREAM_B "\n");
}


/* ---- tests: inspected requests ---- */

/* A row of the summary's "inspected" array, or NULL. */
static json_t *find_row(json_t *rows, const char *host, long long port, const char *method, const char *path)
{
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *w = json_array_get(rows, i);
        json_t *p = json_object_get(w, "port");
        if (strcmp(json_string_value(json_object_get(w, "host")), host) == 0 &&
            (port < 0 ? json_is_null(p) : json_integer_value(p) == port) &&
            strcmp(json_string_value(json_object_get(w, "method")), method) == 0 &&
            strcmp(json_string_value(json_object_get(w, "path")), path) == 0)
            return w;
    }
    return NULL;
}

static json_t *need_row(json_t *rows, const char *host, long long port, const char *method, const char *path)
{
    json_t *w = find_row(rows, host, port, method, path);
    if (!w)
        fail_msg("no row %s:%lld %s %s in %s", host, port, method, path, json_dumps(rows, 0));
    return w;
}

static void inspected_log(lw *w)
{
    lw_tunnel(w, "t1", "registry.test", 443);
    lw_request(w, "t1", 1, "GET", "registry.test", "/is-number", true, "rule", "npm");
    lw_request(w, "t1", 2, "GET", "registry.test", "/is-number", true, "rule", "npm");
    lw_request(w, "t1", 3, "GET", "registry.test", "/is-number/-/is-number-7.0.0.tgz", true, "rule", "npm");
    lw_request(w, "t1", 4, "PUT", "registry.test", "/is-number", false, "rule_not_matched", NULL);
    lw_request(w, "t1", 5, "GET", "registry.test", "/repos/acme/widgets/issues", false, "rule_not_matched", NULL);
    lw_request(w, "t1", 6, "GET", "registry.test", "/repos/acme/gadgets", false, "rule_not_matched", NULL);
    lw_request(w, "t1", 7, "GET", "registry.test", "/a/%2e%2e/b", false, "bad_request", NULL);
    lw_close_line(w, "t1", 4000, 9000);
    lw_tunnel(w, "t2", "api.test", 8443);
    lw_request(w, "t2", 1, "GET", "api.test", "/repos/acme/x", true, "rule", "gh");
    lw_close_line(w, "t2", 10, 20);
    lw_plain_rule(w, "p1", "registry.test", 80, "GET", "/plain", true);
    lw_close_line(w, "p1", 5, 50);
}

static void test_request_lines_count_for_their_tunnel_and_in_rows(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("i.log"), STREAM_A, false);
    inspected_log(&w);
    lw_close(&w);
    assert_int_equal(audit("--summary", "--json", tpath("i.log"), NULL), 0);
    assert_string_equal(err_text, "");
    json_t *j = out_json();
    json_t *t = json_object_get(j, "totals");
    assert_int_equal(jint(t, "requests"), 2 + 8 + 1);        /* two CONNECTs, eight requests inside, one plain */
    assert_int_equal(jint(t, "allowed"), 2 + 4 + 1);
    assert_int_equal(jint(t, "denied"), 4);
    assert_int_equal(jint(t, "inspected_requests"), 8 + 1);
    /* bytes come from close lines only: the request lines' bytes are in them */
    assert_int_equal(jint(t, "bytes_up"), 4000 + 10 + 5);
    assert_int_equal(jint(j, "requests_without_tunnel"), 0);
    assert_int_equal(jint(j, "unmatched_closes"), 0);

    json_t *hosts = json_object_get(j, "hosts"), *reg = NULL;
    for (size_t i = 0; i < json_array_size(hosts); i++) {
        json_t *h = json_array_get(hosts, i);
        if (strcmp(json_string_value(json_object_get(h, "host")), "registry.test") == 0 && jint(h, "port") == 443)
            reg = h;
    }
    assert_non_null(reg);
    json_t *rs = json_object_get(reg, "reasons");
    assert_int_equal(jint(rs, "inspected"), 1);
    assert_int_equal(jint(rs, "rule"), 3);
    assert_int_equal(jint(rs, "rule_not_matched"), 3);
    assert_int_equal(jint(rs, "bad_request"), 1);
    assert_int_equal(jint(reg, "bytes_down"), 9000);

    json_t *rows = json_object_get(j, "inspected");
    assert_int_equal(json_array_size(rows), 7);
    json_t *r = need_row(rows, "registry.test", 443, "GET", "/is-number");
    assert_int_equal(jint(r, "allowed"), 2);
    assert_int_equal(jint(r, "denied"), 0);
    json_t *creds = json_object_get(r, "credentials");
    assert_int_equal(json_array_size(creds), 1);
    assert_string_equal(json_string_value(json_array_get(creds, 0)), "npm");
    assert_int_equal(jint(need_row(rows, "registry.test", 443, "GET", "/is-number/-/*"), "allowed"), 1);
    r = need_row(rows, "registry.test", 443, "PUT", "/is-number");
    assert_int_equal(jint(r, "denied"), 1);
    assert_int_equal(json_array_size(json_object_get(r, "credentials")), 0);
    /* the first two segments, then '*': both paths share a row */
    r = need_row(rows, "registry.test", 443, "GET", "/repos/acme/*");
    assert_int_equal(jint(r, "denied"), 2);
    assert_true(json_is_true(json_object_get(r, "prefix")));
    assert_true(json_is_false(json_object_get(need_row(rows, "registry.test", 443, "PUT", "/is-number"), "prefix")));
    assert_int_equal(jint(need_row(rows, "registry.test", 443, "GET", "/a/%2e%2e/*"), "denied"), 1);
    r = need_row(rows, "api.test", 8443, "GET", "/repos/acme/*");
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "credentials"), 0)), "gh");
    assert_int_equal(jint(need_row(rows, "registry.test", 80, "GET", "/plain"), "allowed"), 1);
    json_decref(j);

    /* the table says the same */
    assert_int_equal(audit(tpath("i.log"), NULL), 0);
    assert_non_null(strstr(out_text, "INSPECTED HOST:PORT"));
    assert_true(line_with("registry.test:443 ", "  GET     /repos/acme/*  "));
    assert_true(line_with("registry.test:443 ", "  GET     /is-number "));
    assert_true(line_with("registry.test:443 ", "  PUT     /is-number "));
    assert_true(line_with("api.test:8443 ", "  gh"));
    assert_true(line_with("registry.test:443 ", "inspected 1"));

    /* rule_not_matched is a refusal like the others */
    assert_int_equal(audit("--denied", "--json", tpath("i.log"), NULL), 0);
    j = out_json();
    json_t *d = json_object_get(j, "denied");
    json_t *top = json_array_get(d, 0);
    assert_string_equal(json_string_value(json_object_get(top, "reason")), "rule_not_matched");
    assert_string_equal(json_string_value(json_object_get(top, "host")), "registry.test");
    assert_int_equal(jint(top, "count"), 3);
    json_decref(j);
    assert_int_equal(audit("--denied", tpath("i.log"), NULL), 0);
    assert_true(line_with("      3  registry.test:443", "rule_not_matched"));

    /* the chain covers request lines like any other */
    assert_int_equal(audit("--verify", tpath("i.log"), NULL), 0);
    char want[100];
    snprintf(want, sizeof want, "ok: %llu lines, stream " STREAM_A "\n", w.seq);
    assert_string_equal(out_text, want);
}

static void test_verify_names_a_tampered_request_line(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("v.log"), STREAM_A, false);
    inspected_log(&w);
    lw_close(&w);
    lines l;
    read_lines(tpath("v.log"), &l);
    /* line 6: PUT /is-number refused; make it look allowed */
    assert_non_null(strstr(l.v[4], "\"method\":\"PUT\""));
    char *dec = strstr(l.v[4], "\"decision\":\"deny\"");
    assert_non_null(dec);
    memcpy(dec, "\"decision\":\"allo\"", 17);
    write_lines(tpath("v-edit.log"), &l, true);
    expect_break("v-edit.log", 5, "chain mismatch");
    free_lines(&l);

    /* a path edited by one byte */
    read_lines(tpath("v.log"), &l);
    char *p = strstr(l.v[5], "/repos/acme/widgets");
    assert_non_null(p);
    p[1] = 'R';
    write_lines(tpath("v-path.log"), &l, true);
    expect_break("v-path.log", 6, "chain mismatch");
    free_lines(&l);

    /* a request line deleted */
    read_lines(tpath("v.log"), &l);
    free(l.v[3]);
    memmove(&l.v[3], &l.v[4], (l.n - 4) * sizeof l.v[0]);
    l.n--;
    write_lines(tpath("v-del.log"), &l, true);
    expect_break("v-del.log", 4, "seq 5 follows seq 3");
    free_lines(&l);
}

/* Every line of --suggest output that is not a comment is a request rule
 * "METHOD HOST[:PORT]PATH  # ...": the host part is a valid allowlist entry
 * (checked by the allowlist itself), the path holds only what a rule can,
 * with '*' only at its end. */
static size_t check_rule_lines(const char *text, char entries[][1100], size_t cap)
{
    size_t n = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchrnul(p, '\n');
        size_t len = (size_t)(nl - p);
        if (len && p[0] != '#') {
            const char *hash = memchr(p, '#', len);
            assert_non_null(hash);
            size_t el = (size_t)(hash - p);
            while (el && p[el - 1] == ' ')
                el--;
            assert_true(n < cap && el < 1100);
            snprintf(entries[n], 1100, "%.*s", (int)el, p);
            const char *sp = strchr(entries[n], ' ');
            assert_non_null(sp);
            assert_int_equal(strspn(entries[n], "ABCDEFGHIJKLMNOPQRSTUVWXYZ"), (size_t)(sp - entries[n]));
            const char *slash = strchr(sp + 1, '/');
            if (sp[1] == '[')
                slash = strchr(strchr(sp, ']'), '/');
            assert_non_null(slash);
            sl_allowlist *al = sl_allowlist_new();
            char err[300];
            if (!sl_allowlist_add_line(al, sp + 1, (size_t)(slash - sp - 1), "suggest", 1, err, sizeof err))
                fail_msg("host of %s is not an allowlist entry: %s", entries[n], err);
            /* Once the allowlist reads request rules, the whole line must be one. */
            static const char probe[] = "GET example.org/x";
            if (sl_allowlist_add_line(al, probe, sizeof probe - 1, "probe", 1, err, sizeof err) &&
                !sl_allowlist_add_line(al, entries[n], strlen(entries[n]), "suggest", 1, err, sizeof err))
                fail_msg("%s is not a valid request rule: %s", entries[n], err);
            sl_allowlist_free(al);
            size_t pl = strlen(slash);
            size_t ok = strspn(slash, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()+,;=:@/%*");
            if (ok != pl)
                fail_msg("byte %zu of the path of %s", ok, entries[n]);
            const char *star = strchr(slash, '*');
            assert_true(!star || star[1] == '\0');
            assert_null(strchr(entries[n], '?'));
            n++;
        }
        p = *nl ? nl + 1 : nl;
    }
    return n;
}

static bool has_rule(char entries[][1100], size_t n, const char *e)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(entries[i], e) == 0)
            return true;
    return false;
}

static void test_suggest_writes_request_rules_for_rule_not_matched(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("r.log"), STREAM_A, false);
    lw_tunnel(&w, "t1", "registry.test", 443);
    int n = 1;
    /* two paths under one prefix: the prefix */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/repos/acme/widgets/issues", false, "rule_not_matched", NULL);
    lw_request(&w, "t1", n++, "GET", "registry.test", "/repos/acme/gadgets", false, "rule_not_matched", NULL);
    /* one path, tried three times: that path */
    for (int i = 0; i < 3; i++)
        lw_request(&w, "t1", n++, "GET", "registry.test", "/is-number/-/is-number-7.0.0.tgz", false,
                   "rule_not_matched", NULL);
    lw_request(&w, "t1", n++, "PUT", "registry.test", "/is-number", false, "rule_not_matched", NULL);
    /* allowed with a credential: no line, and the name appears nowhere */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/ok", true, "rule", "npmsecretname");
    /* refused, then allowed after a reload: nothing to add */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/later/x", false, "rule_not_matched", NULL);
    lw_request(&w, "t1", n++, "GET", "registry.test", "/later/x", true, "rule", "npmsecretname");
    /* ... but another path under the same prefix allowed is not this one */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/later/y/z", false, "rule_not_matched", NULL);
    lw_request(&w, "t1", n++, "GET", "registry.test", "/later/y/w", true, "rule", NULL);
    /* no line fixes these */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/a/%2e%2e/b", false, "bad_request", NULL);
    lw_request(&w, "t1", n++, "GET", "registry.test", "/tls", false, "upstream_tls_failed", NULL);
    /* a '*' in a path cannot be written: the rule ends there */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/files/a*b", false, "rule_not_matched", NULL);
    /* the same rule from a tunnel (443) and plain HTTP (80): one line */
    lw_request(&w, "t1", n++, "GET", "registry.test", "/both", false, "rule_not_matched", NULL);
    lw_close_line(&w, "t1", 1, 2);
    lw_plain_rule(&w, "p1", "registry.test", 80, "GET", "/both", false);
    lw_plain_rule(&w, "p2", "registry.test", 80, "HEAD", "/plain/x", false);
    /* not a default port */
    lw_tunnel(&w, "t2", "api.test", 8443);
    lw_request(&w, "t2", 1, "GET", "api.test", "/user", false, "rule_not_matched", NULL);
    /* a query string in a path (the gate logs none) is never written */
    lw_request(&w, "t2", 2, "GET", "api.test", "/search?q=secret", false, "rule_not_matched", NULL);
    /* many paths under one prefix */
    for (int i = 0; i < 12; i++) {
        char path[64];
        snprintf(path, sizeof path, "/pkgs/many/p%d", i);
        lw_request(&w, "t2", 3 + i, "GET", "api.test", path, false, "rule_not_matched", NULL);
    }
    lw_close_line(&w, "t2", 1, 2);
    /* a tunnel whose origin failed TLS: its request is refused, never suggested */
    lw_decision(&w, "t3", "127.0.0.1:7", "CONNECT", "badtls.test", 443, false, "upstream_tls_failed");
    lw_request(&w, "t3", 1, "GET", "badtls.test", "/", false, "upstream_tls_failed", NULL);
    /* an inspected host whose address is not public: never */
    lw_tunnel(&w, "t4", "flip.test", 443);
    lw_request(&w, "t4", 1, "GET", "flip.test", "/x", false, "rule_not_matched", NULL);
    lw_decision(&w, "t5", "127.0.0.1:7", "CONNECT", "flip.test", 443, false, "non_public_address");
    lw_close(&w);

    assert_int_equal(audit("--suggest", tpath("r.log"), NULL), 0);
    assert_string_equal(err_text, "");
    char entries[32][1100];
    size_t k = check_rule_lines(out_text, entries, 32);
    static const char *want[] = {
        "GET registry.test/repos/acme/*",
        "GET registry.test/is-number/-/is-number-7.0.0.tgz",
        "PUT registry.test/is-number",
        "GET registry.test/later/y/z",
        "GET registry.test/files/a*",
        "GET registry.test/both",
        "HEAD registry.test/plain/x",
        "GET api.test:8443/user",
        "GET api.test:8443/pkgs/many/*",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!has_rule(entries, k, want[i]))
            fail_msg("no rule %s in:\n%s", want[i], out_text);
    assert_int_equal(k, sizeof want / sizeof *want);
    assert_true(line_with("GET registry.test/is-number/-/is-number-7.0.0.tgz ", "# 3 requests, rule_not_matched"));
    assert_true(line_with("GET registry.test/repos/acme/* ", "# 2 requests, rule_not_matched, 2 paths"));
    assert_true(line_with("GET api.test:8443/pkgs/many/* ", "more than 8 paths"));
    assert_true(line_with("GET registry.test/files/a* ", "this rule allows more"));
    assert_true(line_with("GET registry.test/both ", "# 2 requests"));
    assert_null(strstr(out_text, "npmsecretname"));
    assert_null(strstr(out_text, "secret"));
    assert_null(strstr(out_text, "q="));
    assert_null(strstr(out_text, "%2e"));
    assert_null(strstr(out_text, "/tls"));
    assert_null(strstr(out_text, "badtls"));
    assert_null(strstr(out_text, "GET registry.test/later/x"));
    assert_non_null(strstr(out_text, "# not suggested: GET api.test:8443/search?... (1 request): the gate refuses such a path ('?' in path"));
    assert_non_null(strstr(out_text, "# not suggested: GET flip.test:443/x (1 request): refused as non_public_address"));

    assert_int_equal(audit("--suggest", "--json", tpath("r.log"), NULL), 0);
    json_t *j = out_json();
    json_t *sug = json_object_get(j, "suggestions");
    assert_int_equal(json_array_size(sug), k);
    for (size_t i = 0; i < json_array_size(sug); i++) {
        json_t *s = json_array_get(sug, i);
        assert_true(json_is_true(json_object_get(s, "rule")));
        assert_int_equal(jint(json_object_get(s, "reasons"), "rule_not_matched"), jint(s, "requests"));
        const char *line = json_string_value(json_object_get(s, "line"));
        json_t *methods = json_object_get(s, "methods");
        if (strcmp(line, "GET registry.test/both") == 0) {
            assert_int_equal(json_array_size(methods), 2);
            assert_int_equal(jint(s, "paths"), 1);   /* from two rows: still one path */
        }
        if (strcmp(line, "HEAD registry.test/plain/x") == 0) {
            assert_int_equal(json_array_size(methods), 1);
            assert_string_equal(json_string_value(json_array_get(methods, 0)), "HTTP");
        }
        if (strcmp(line, "GET api.test:8443/pkgs/many/*") == 0) {
            assert_int_equal(jint(s, "requests"), 12);
            assert_true(json_is_true(json_object_get(s, "more_paths")));
        }
        if (strcmp(line, "GET registry.test/files/a*") == 0)
            assert_true(json_is_true(json_object_get(s, "wider")));
    }
    json_t *skipped = json_object_get(j, "skipped");
    bool saw_query = false;
    for (size_t i = 0; i < json_array_size(skipped); i++) {
        json_t *s = json_array_get(skipped, i);
        json_t *path = json_object_get(s, "path");
        if (path && strcmp(json_string_value(path), "/search") == 0)
            saw_query = true;
        assert_true(!path || !strchr(json_string_value(path), '?'));
    }
    assert_true(saw_query);
    json_decref(j);

    /* 8443 a default port for CONNECT, as a gate's config may say */
    assert_int_equal(audit("--suggest", "--connect-ports", "443,8443", tpath("r.log"), NULL), 0);
    k = check_rule_lines(out_text, entries, 32);
    assert_true(has_rule(entries, k, "GET api.test/user"));
}

/* A log that starts inside a tunnel (its CONNECT line is in an older file
 * not given): the host is known, its port is not. */
static void test_request_lines_without_their_tunnel(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("o.log"), STREAM_A, false);
    lw_request(&w, "gone", 4, "GET", "registry.test", "/x/y", false, "rule_not_matched", NULL);
    lw_request(&w, "gone", 5, "GET", "registry.test", "/x/y", true, "rule", NULL);
    lw_request(&w, "gone", 6, "GET", "registry.test", "/x/z", false, "rule_not_matched", NULL);
    lw_close_line(&w, "gone", 1, 2);
    /* a cloud metadata address is never named, even without a port */
    lw_request(&w, "gone2", 1, "GET", "169.254.169.254", "/latest/meta-data", false, "rule_not_matched", NULL);
    lw_close(&w);
    assert_int_equal(audit("--summary", "--json", tpath("o.log"), NULL), 0);
    json_t *j = out_json();
    assert_int_equal(jint(j, "requests_without_tunnel"), 4);
    assert_int_equal(jint(j, "unmatched_closes"), 1);
    json_t *rows = json_object_get(j, "inspected");
    assert_int_equal(jint(need_row(rows, "registry.test", -1, "GET", "/x/y"), "allowed"), 1);
    json_decref(j);
    assert_int_equal(audit(tpath("o.log"), NULL), 0);
    assert_non_null(strstr(out_text, "note: 4 request lines came from tunnels whose CONNECT line is in none"));
    assert_int_equal(audit("--suggest", tpath("o.log"), NULL), 0);
    char entries[4][1100];
    assert_int_equal(check_rule_lines(out_text, entries, 4), 0);
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test/x/z (1 request): its port is unknown"));
    /* allowed since */
    assert_null(strstr(out_text, "/x/y"));
    assert_null(strstr(out_text, "169.254"));
}

/* What an attacker who can write into a log may put in a path. */
static const char *const hostile_paths[] = {
    "/\\u001b]0;pwned\\u0007/x",            /* OSC: sets a terminal's title */
    "/\\u001b[2J\\u001b[H/clear",            /* clears the screen */
    "/a\\nb/c\\r\\n/d",                      /* a newline would add a report line */
    "/nul\\u0000byte",                       /* decodes to U+FFFD */
    "/lone\\ud800surrogate",                 /* so does this */
    "/caf\\u00e9/\xc3\xa9t\xc3\xa9",         /* valid UTF-8: still not ASCII */
    "/%ff%fe/%c0%af",                        /* percent escapes of bytes that are not UTF-8: a valid path */
    "/star*/in*/the/path",
    "/*",
    "/back\\\\slash",
    "/sp ace/x",
    "/hash#frag",
    "/bidi\\u202e/x",
    "relative/path",
    "",
};

/* No byte that could drive a terminal: printable ASCII and newlines only. */
static void assert_terminal_safe(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p >= 0x7f)
            fail_msg("byte 0x%02x at %zu of:\n%s", *p, (size_t)(p - (const unsigned char *)text), text);
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchrnul(p, '\n');
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
        n += strstr(line, needle) != NULL;
        p = *nl ? nl + 1 : nl;
    }
    return n;
}

static void test_hostile_paths_do_not_break_the_report(void **state)
{
    (void)state;
    const size_t npaths = sizeof hostile_paths / sizeof *hostile_paths;
    lw w;
    lw_start(&w, tpath("h.log"), STREAM_A, false);
    lw_tunnel(&w, "t1", "registry.test", 443);
    for (size_t i = 0; i < npaths; i++)
        lw_request(&w, "t1", (int)i + 1, "GET", "registry.test", hostile_paths[i], false, "rule_not_matched", NULL);
    /* very long: 6000 bytes in 1,500 segments; 5000 bytes in one */
    static char longp[8000];
    for (int i = 0; i < 1500; i++)
        memcpy(longp + 4 * i, "/seg", 4);
    longp[6000] = '\0';
    lw_request(&w, "t1", 50, "GET", "registry.test", longp, false, "rule_not_matched", NULL);
    longp[0] = '/';
    memset(longp + 1, 'a', 4999);
    longp[5000] = '\0';
    lw_request(&w, "t1", 51, "GET", "registry.test", longp, false, "rule_not_matched", NULL);
    /* escapes that decode to more bytes than the line holds: 1,000 \u00e9 */
    for (int i = 0; i < 1000; i++)
        memcpy(longp + 6 * i, "\\u00e9", 6);
    longp[0] = '/';
    longp[6000] = '\0';
    lw_request(&w, "t1", 52, "GET", "registry.test", longp, false, "rule_not_matched", NULL);
    /* a hostile method, reason, credential and timestamp */
    lw_request(&w, "t1", 53, "G\\u001b[31mET", "registry.test", "/m", false, "rule_not_matched", "c\\u001b[5mred");
    lw_request(&w, "t1", 54, "GET", "registry.test", "/r", false, "deny\\u001b[2J", NULL);
    lw_put(&w, "{\"ts\":\"\\u001b[2J2026\",\"event\":\"request\",\"id\":\"t1\",\"method\":\"GET\","
               "\"host\":\"registry.test\",\"path\":\"/t\",\"decision\":\"deny\",\"reason\":\"rule_not_matched\"");
    lw_close_line(&w, "t1", 1, 2);
    lw_close(&w);
    /* raw bytes that are not UTF-8 make a line that is not JSON: skipped, counted */
    FILE *f = fopen(tpath("h.log"), "a");
    fputs("{\"event\":\"request\",\"id\":\"t1\",\"host\":\"registry.test\",\"path\":\"/\xff\xfe\","
          "\"decision\":\"deny\",\"reason\":\"rule_not_matched\"}\n", f);
    fclose(f);

    /* the chain holds over all of it, up to the line appended unchained */
    assert_int_equal(audit("--verify", tpath("h.log"), NULL), 1);
    char want[200];
    snprintf(want, sizeof want, "%s:%llu: ", tpath("h.log"), w.seq + 1);
    assert_memory_equal(err_text, want, strlen(want));

    assert_int_equal(audit(tpath("h.log"), NULL), 0);
    assert_terminal_safe(out_text);
    assert_terminal_safe(err_text);
    /* one table line per row, whatever the path holds */
    const char *table = strstr(out_text, "INSPECTED HOST:PORT");
    assert_non_null(table);
    size_t rows_shown = count_lines_with(table, "registry.test:443  ");
    assert_int_equal(audit("--summary", "--json", tpath("h.log"), NULL), 0);
    json_t *j = out_json();
    assert_int_equal(jint(j, "malformed_lines"), 1);
    json_t *rows = json_object_get(j, "inspected");
    assert_int_equal(rows_shown, json_array_size(rows));
    /* paths as they were, in the JSON (a control byte escaped, not lost) */
    assert_non_null(need_row(rows, "registry.test", 443, "GET", "/\x1b]0;pwned\x07/x"));
    assert_non_null(need_row(rows, "registry.test", 443, "GET", "/a\nb/c\r\n/*"));
    assert_non_null(need_row(rows, "registry.test", 443, "GET", "/nul\xef\xbf\xbd" "byte"));
    assert_non_null(need_row(rows, "registry.test", 443, "GET", "/seg/seg/*"));
    assert_non_null(need_row(rows, "registry.test", 443, "G\x1b[31mET", "/m"));
    /* a path the gate would have cut at 1,024 bytes: its row says "and more" */
    char cutp[1100];
    cutp[0] = '/';
    memset(cutp + 1, 'a', 1023);
    cutp[1024] = '*';
    cutp[1025] = '\0';
    assert_true(json_is_true(json_object_get(need_row(rows, "registry.test", 443, "GET", cutp), "prefix")));
    /* a path's own '*' is not a prefix */
    assert_true(json_is_false(json_object_get(need_row(rows, "registry.test", 443, "GET", "/*"), "prefix")));
    json_decref(j);

    assert_int_equal(audit("--denied", tpath("h.log"), NULL), 0);
    assert_terminal_safe(out_text);
    assert_int_equal(audit("--suggest", tpath("h.log"), NULL), 0);
    assert_terminal_safe(out_text);
    char entries[32][1100];
    size_t k = check_rule_lines(out_text, entries, 32);
    static const char *ok[] = {
        "GET registry.test/star*",          /* cut at the first '*' */
        "GET registry.test/*",
        "GET registry.test/seg/seg/*",      /* cut by the gate: its prefix */
        "GET registry.test/t",              /* the hostile timestamp is dropped, not the line */
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!has_rule(entries, k, ok[i]))
            fail_msg("no rule %s in:\n%s", ok[i], out_text);
    assert_int_equal(k, sizeof ok / sizeof *ok);
    /* the rest are named in notes, escaped and on one line each */
    /* an overlong UTF-8 escape: the rules refuse such a path (allowlist/README), so no line */
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test:443/%ff%fe/%c0%af (1 request): "
                                     "the gate refuses such a path (overlong UTF-8 escape in path)"));
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test:443/\\x1b]0;pwned\\x07/x (1 request)"));
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test:443/a\\x0ab/c\\x0d\\x0a/d (1 request)"));
    assert_non_null(strstr(out_text, "# not suggested: G\\x1b[31mET registry.test:443/m (1 request): not a method"));
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test:443 relative/path (1 request): not a path"));
    assert_non_null(strstr(out_text, "# not suggested: GET registry.test:443 (no path) (1 request): not a path"));
    assert_non_null(strstr(out_text, "the rule would be longer than an allowlist line may be"));
    for (const char *p = out_text; (p = strstr(p, "# not suggested: ")); p++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(nl - p < 600);   /* a long path is cut in a note */
    }
    assert_int_equal(audit("--suggest", "--json", tpath("h.log"), NULL), 0);
    json_decref(out_json());
    assert_int_equal(audit("--denied", "--json", tpath("h.log"), NULL), 0);
    json_decref(out_json());
}

/* A reason, a method and timestamps come from the log as well. */
static void test_hostile_reason_and_timestamp_never_reach_the_terminal(void **state)
{
    (void)state;
    lw w;
    lw_start(&w, tpath("hr.log"), STREAM_A, false);
    lw_put(&w, "{\"ts\":\"\\u001b]0;x\\u0007\",\"event\":\"decision\",\"id\":\"d1\",\"method\":\"CONNECT\","
               "\"host\":\"a.test\",\"port\":443,\"decision\":\"deny\",\"reason\":\"not_allowlisted\"");
    lw_put(&w, "{\"ts\":\"2026-12-02T09:00:00.000000Z\",\"event\":\"decision\",\"id\":\"d2\",\"method\":\"CONNECT\","
               "\"host\":\"a.test\",\"port\":443,\"decision\":\"deny\",\"reason\":\"x\\u001b[2Jy\"");
    lw_close(&w);
    static const char *const modes[] = { "--summary", "--denied", "--suggest" };
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(audit(modes[i], tpath("hr.log"), NULL), 0);
        assert_terminal_safe(out_text);
    }
    assert_int_equal(audit("--summary", tpath("hr.log"), NULL), 0);
    assert_non_null(strstr(out_text, "x\\x1b[2Jy 1"));
    /* the timestamp that is not one is left out: the span is the other's */
    assert_non_null(strstr(out_text, "2026-12-02T09:00:00.000000Z .. 2026-12-02T09:00:00.000000Z"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_is_sha256_of_prev_then_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scanner_accepts_json_objects_and_picks_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scanner_rejects_what_is_not_one_json_object, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scanner_sees_each_special_byte_at_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_limits_lines_to_one_mib_and_goes_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_names_a_file_it_cannot_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_totals_and_bytes_per_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_denied_lists_refusals_most_frequent_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suggest_writes_allowlist_lines_never_for_non_public, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suggest_never_proposes_a_non_public_literal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_passes_an_untouched_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_names_the_line_for_each_tampering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_reads_gzip_and_files_in_any_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_standard_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors_exit_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_skips_and_counts_malformed_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_kinds_of_reason_fold_into_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_connection_map_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow_keeps_reading_across_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_lines_count_for_their_tunnel_and_in_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_names_a_tampered_request_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suggest_writes_request_rules_for_rule_not_matched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_lines_without_their_tunnel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_paths_do_not_break_the_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_reason_and_timestamp_never_reach_the_terminal, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
