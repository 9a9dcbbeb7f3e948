/* sl_json_load (allowlist/lockfiles/jsonload.c) against json_loadb.
 *
 * Every document is parsed by both, with a tiny threshold so that small
 * documents take the parallel path, on 2, 3 and 7 threads. They must agree
 * exactly: both NULL with the same error text, source, line, column and
 * position, or both a tree that is json_equal and dumps (JSON_COMPACT, so in
 * insertion order) to the same text, with the same error fields too.
 * Documents come from a table of tricky cases, from a seeded generator
 * (random nesting, strings full of brackets, commas, quotes and escapes,
 * duplicate keys, whitespace anywhere), from mutating those, and from every
 * prefix of a few lockfiles. A counter the module exports for tests shows
 * which documents really took the parallel path: a serial-only
 * implementation fails here. Inputs are copied into buffers of their exact
 * size so that AddressSanitizer sees any read past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testbuf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonload.h"

/* ---- helpers ---- */

/* dbuf, put, puts_, putf: testbuf.h */

static const unsigned THREADS[] = { 2, 3, 7 };

static void same_error(const json_error_t *a, const json_error_t *b)
{
    assert_string_equal(a->text, b->text);
    assert_string_equal(a->source, b->source);
    assert_int_equal(a->line, b->line);
    assert_int_equal(a->column, b->column);
    assert_int_equal(a->position, b->position);
}

/* Parses doc[0..len) both ways; returns whether ours took the parallel
 * path. ok (if not NULL) says whether the document is valid. */
static bool check_ex(const char *doc, size_t len, size_t threshold, unsigned nthreads, bool *ok)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, doc, len);
    json_error_t ea, eb;
    json_t *a = json_loadb(copy, len, 0, &ea);
    unsigned long before = sl_json_load_parallel_count();
    json_t *b = sl_json_load_ex(copy, len, &eb, threshold, nthreads);
    bool parallel = sl_json_load_parallel_count() != before;
    if (!a) {
        if (b)
            fail_msg("sl_json_load accepted what json_loadb refused (%s): %.*s", ea.text, (int)len, doc);
        assert_false(parallel);
    } else {
        if (!b)
            fail_msg("sl_json_load refused (%s) what json_loadb accepted: %.*s", eb.text, (int)len, doc);
        assert_true(json_equal(a, b));
        char *da = json_dumps(a, JSON_COMPACT), *db = json_dumps(b, JSON_COMPACT);
        assert_non_null(da);
        assert_non_null(db);
        if (strcmp(da, db))
            fail_msg("trees differ:\n json_loadb   %s\n sl_json_load %s", da, db);
        free(da);
        free(db);
    }
    same_error(&ea, &eb);
    if (ok)
        *ok = a != NULL;
    json_decref(a);
    json_decref(b);
    free(copy);
    return parallel;
}

/* On every thread count; returns whether they took the parallel path
 * (asserting they agree on it). */
static bool check(const char *doc, size_t len, bool *ok)
{
    bool p0 = check_ex(doc, len, 0, THREADS[0], ok);
    for (size_t i = 1; i < sizeof THREADS / sizeof THREADS[0]; i++) {
        bool p = check_ex(doc, len, 0, THREADS[i], NULL);
        /* a one-slice plan is still parallel: the split can only differ */
        assert_int_equal(p, p0);
    }
    return p0;
}

static char *read_fixture(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (run from the repository root)", path);
    dbuf b = { 0 };
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        put(&b, tmp, n);
    fclose(f);
    *len = b.n;
    return b.d;
}

/* ---- jansson's own behaviour, which the merge relies on ---- */

static void test_jansson_duplicate_keys(void **state)
{
    (void)state;
    /* A later duplicate replaces the value and keeps the first's place. */
    json_error_t e;
    json_t *j = json_loadb("{\"a\":1,\"b\":2,\"a\":3}", 19, 0, &e);
    assert_non_null(j);
    char *d = json_dumps(j, JSON_COMPACT);
    assert_string_equal(d, "{\"a\":3,\"b\":2}");
    free(d);
    /* json_object_update does the same, member by member. */
    json_t *x = json_loadb("{\"a\":1,\"b\":2}", 13, 0, &e), *y = json_loadb("{\"c\":5,\"a\":3}", 13, 0, &e);
    assert_int_equal(json_object_update(x, y), 0);
    d = json_dumps(x, JSON_COMPACT);
    assert_string_equal(d, "{\"a\":3,\"b\":2,\"c\":5}");
    free(d);
    json_decref(j);
    json_decref(x);
    json_decref(y);
    /* On success json_loadb leaves the position at the end of the input. */
    j = json_loadb("{} ", 3, 0, &e);
    assert_non_null(j);
    assert_int_equal(e.position, 3);
    assert_int_equal(e.line, -1);
    json_decref(j);
}

/* ---- a table of tricky documents ---- */

typedef struct tcase {
    const char *doc;
    int parallel;          /* 1: must take the parallel path; 0: must not; -1: either */
} tcase;

static const tcase CASES[] = {
    { "{\"a\":{\"x\":1,\"y\":2,\"z\":3},\"b\":2}", 1 },
    { "{\"packages\":{\"\":{\"name\":\"x\"},\"node_modules/a\":{\"version\":\"1.0.0\"},"
      "\"node_modules/b\":{\"version\":\"2.0.0\",\"packages\":{\"packages\":1}}},\"lockfileVersion\":3}", 1 },
    /* strings with brackets, commas, colons, quotes and escapes */
    { "{\"p\":{\"{\":\"}\",\",\":\",,\",\"\\\"\":\"\\\"}\",\"\\\\\":\"\\\\\",\"a\\\\\\\"b\":\"[,]\","
      "\"u\":\"\\u007b\\u002c\\u007d\",\"e\":\"\\u00e9\\ud83d\\ude00\",\"s\":\"\\/\\b\\f\\n\\r\\t\","
      "\"k:\":\"v:\"}}", 1 },
    { "{\"p\":{\"a\":\"\\\\\",\"b\":\"\\\\\\\\\",\"c\":\"\\\\\\\"\",\"d\":\"x\\\\\"}}", 1 },
    { "{\"p\":{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"\xe2\x82\xac\":1,\"b\":2}}", 1 },
    /* scalars of every kind next to the cuts */
    { "{\"p\":{\"a\":1,\"b\":-2.5e3,\"c\":true,\"d\":null,\"e\":false,\"f\":0,\"g\":1E-2,\"h\":[]}}", 1 },
    /* whitespace and newlines everywhere */
    { " \n\t{\r\n \"p\" \n:\n { \"a\" \n : 1 \n , \n\"b\" : [ 2 , 3 ] \t, \"c\":{ } } \n , \"q\" : 1 } \n\r\t ", 1 },
    /* duplicates inside the big object, across slices */
    { "{\"p\":{\"a\":1,\"b\":2,\"a\":3,\"c\":4,\"b\":5,\"a\":{\"z\":1},\"d\":6}}", 1 },
    { "{\"p\":{\"\\u0061\":1,\"b\":2,\"a\":3,\"c\":4}}", 1 },
    /* the big key elsewhere, nested */
    { "{\"p\":{\"p\":{\"p\":1},\"q\":{\"p\":[{\"p\":2}]},\"r\":3}}", 1 },
    /* a duplicate of the big key at the top level: serial */
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":3},\"q\":1,\"p\":2}", 0 },
    { "{\"p\":1,\"p\":{\"a\":1,\"b\":2,\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":3},\"\\u0070\":{}}", 0 },
    { "{\"q\":1,\"p\":{\"a\":1,\"b\":2,\"c\":3},\"q\":2}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":3},\"p\":{\"d\":4,\"e\":5,\"f\":6}}", 0 },
    /* empty and one-member big values */
    { "{\"p\":{}}", 1 },
    { "{\"p\":{ \n }}", 1 },
    { "{\"p\":{\"a\":[1,2,3]}}", 1 },
    { "{\"p\":{\"a\":{\"b\":{\"c\":{}}}}}", 1 },
    /* arrays */
    { "{\"packages\":[1,\"two\",{\"a\":\"b\"},[4,[5]],null,{\"x\":\"]\"}],\"n\":1}", 1 },
    { "{\"p\":[]}", 1 },
    { "{\"p\":[{}]}", 1 },
    { "{\"a\":[1,2,3,4,5,6,7,8],\"b\":{\"c\":1,\"d\":2,\"e\":3,\"f\":4}}", 1 },
    /* several big values */
    { "{\"a\":{\"x\":1,\"y\":2},\"m\":0,\"b\":{\"x\":3,\"y\":4},\"c\":[5,6,7]}", 1 },
    /* invalid: trailing garbage, stray commas, unbalanced */
    { "{\"p\":{\"a\":1,\"b\":2}} x", 0 },
    { "{\"p\":{\"a\":1,\"b\":2}}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2}}{}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2}},", 0 },
    { "{\"p\":{\"a\":1,}}", 0 },
    { "{\"p\":{\"a\":1,,\"b\":2}}", 0 },
    { "{\"p\":{,\"a\":1}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,}}", 0 },
    { "{\"p\":{\"a\":1 \"b\":2}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":x,\"d\":4,\"e\":5}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":tru}}", 0 },
    { "{\"p\":[1,,2]}", 0 },
    { "{\"p\":[1,]}", 0 },
    { "{\"p\":[,1]}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2]}", 0 },
    { "{\"p\":[1,2}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2}", 0 },
    { "{\"p\":{\"a\":\"1,\"b\":2}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":\"\\x\",\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":\"\\u12\",\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":\"\\ud800\",\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"\\u0000\":2,\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":\"x\ny\",\"c\":3}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":99999999999999999999999}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":1e99999}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":-}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":01}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":\"\xc3\"}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2,\"c\":\"\xff\"}}", 0 },
    { "{\"p\" {\"a\":1}}", 0 },
    { "{\"p\":{\"a\":1},\"q\"}", 0 },
    { "{{\"a\":1,\"b\":2}}", 0 },
    { "{\"p\":{\"a\":1,\"b\":2}", 0 },
    /* merge-conflict markers */
    { "{\n\"p\":{\n<<<<<<< HEAD\n\"a\":1,\n=======\n\"a\":2,\n>>>>>>> x\n\"b\":3}}\n", 0 },
    { "{\n\"p\":{\n\"x\":0,\n<<<<<<< HEAD\n\"a\":1,\n=======\n\"a\":2,\n>>>>>>> x\n\"b\":3}}\n", 0 },
    /* not an object at the top */
    { "[{\"a\":1,\"b\":2},{\"c\":3}]", 0 },
    { "\"str\"", 0 },
    { "1", 0 },
    { "null", 0 },
    { "", 0 },
    { " \n ", 0 },
    { "{", 0 },
    { "}", 0 },
    { "\xef\xbb\xbf{\"p\":{\"a\":1,\"b\":2}}", 0 },
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const char *d = CASES[i].doc;
        bool ok;
        bool p = check(d, strlen(d), &ok);
        if (CASES[i].parallel >= 0 && p != (CASES[i].parallel == 1))
            fail_msg("case %zu: parallel=%d, want %d: %s", i, p, CASES[i].parallel, d);
        /* err may be NULL */
        json_t *j = sl_json_load_ex(d, strlen(d), NULL, 0, 3);
        assert_int_equal(j != NULL, ok);
        json_decref(j);
    }
}

/* NUL bytes, which strlen-based cases cannot hold. */
static void test_nul_bytes(void **state)
{
    (void)state;
    static const char a[] = "{\"p\":{\"a\":1,\"b\":\"x\0y\",\"c\":3}}";
    static const char b[] = "{\"p\":{\"a\":1,\"b\":2,\"c\":3}}\0";
    static const char c[] = "{\"p\":{\"a\":1,\0\"b\":2,\"c\":3}}";
    static const char d[] = "\0{\"p\":{\"a\":1}}";
    assert_false(check(a, sizeof a - 1, NULL));
    assert_false(check(b, sizeof b - 1, NULL));
    assert_false(check(c, sizeof c - 1, NULL));
    assert_false(check(d, sizeof d - 1, NULL));
}

/* jansson refuses more than 2048 levels; a slice is one level shallower than
 * in the whole document, so deep documents must be parsed serially. */
static void test_nesting_depth(void **state)
{
    (void)state;
    static const int depths[] = { 10, 500, 1000, 1023, 1024, 1025, 2044, 2045, 2046, 2047, 2048, 2049, 3000 };
    for (size_t k = 0; k < sizeof depths / sizeof depths[0]; k++) {
        for (int arrays = 0; arrays < 2; arrays++) {
            dbuf b = { 0 };
            puts_(&b, "{\"p\":{\"a\":1,\"b\":");
            for (int i = 0; i < depths[k]; i++)
                puts_(&b, arrays ? "[" : "{\"k\":");
            puts_(&b, "1");
            for (int i = 0; i < depths[k]; i++)
                puts_(&b, arrays ? "]" : "}");
            puts_(&b, ",\"c\":2},\"q\":3}");
            bool ok;
            bool p = check(b.d, b.n, &ok);
            /* depth of the innermost value: top, p, then depths[k] levels, the 1 */
            assert_int_equal(ok, depths[k] + 3 <= 2048);
            assert_int_equal(p, depths[k] + 2 <= 1024);
            free(b.d);
        }
    }
}

/* ---- generated documents ---- */

typedef struct gen {
    uint64_t s;
    dbuf b;
} gen;

static unsigned rnd(gen *g, unsigned n)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return (unsigned)(g->s % n);
}

static void ws(gen *g)
{
    static const char *W[] = { " ", "\n", "\t", "\r\n", "  ", "\n    " };
    while (rnd(g, 4) == 0)
        puts_(&g->b, W[rnd(g, 6)]);
}

/* String content that fools a naive scanner. */
static void gstring(gen *g, bool key)
{
    static const char *PIECES[] = {
        "a", "name", "node_modules/x", "{", "}", "[", "]", ",", ":", " ", "\\\"", "\\\\",
        "\\\\\\\"", "\\/", "\\n", "\\t", "\\u0041", "\\u007b", "\\u002c", "\\u0022", "\\u005c",
        "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\\\\\\\\",
        "https://registry.npmjs.org/a/-/a-1.0.0.tgz", "sha512-AbC+/=", "\\\\u0041",
    };
    static const char *KEYS[] = { "a", "b", "c", "\\u0061", "packages", "p", "{", "," };
    puts_(&g->b, "\"");
    if (key && rnd(g, 3) == 0) {
        puts_(&g->b, KEYS[rnd(g, sizeof KEYS / sizeof KEYS[0])]);   /* duplicates */
    } else {
        unsigned n = rnd(g, 5);
        for (unsigned i = 0; i < n; i++)
            puts_(&g->b, PIECES[rnd(g, sizeof PIECES / sizeof PIECES[0])]);
    }
    puts_(&g->b, "\"");
}

static void gvalue(gen *g, int depth, unsigned width);

static void gcontainer(gen *g, bool object, int depth, unsigned n)
{
    puts_(&g->b, object ? "{" : "[");
    ws(g);
    for (unsigned i = 0; i < n; i++) {
        if (i) {
            puts_(&g->b, ",");
            ws(g);
        }
        if (object) {
            gstring(g, true);
            ws(g);
            puts_(&g->b, ":");
            ws(g);
        }
        gvalue(g, depth + 1, 4);
        ws(g);
    }
    puts_(&g->b, object ? "}" : "]");
}

static void gvalue(gen *g, int depth, unsigned width)
{
    static const char *SCALARS[] = { "0", "-1", "123456789", "1.5e3", "-0.25", "1E-2", "true",
                                     "false", "null", "3.0" };
    unsigned k = rnd(g, depth < 5 ? 8 : 4);
    if (k < 2)
        puts_(&g->b, SCALARS[rnd(g, sizeof SCALARS / sizeof SCALARS[0])]);
    else if (k < 4)
        gstring(g, false);
    else
        gcontainer(g, k < 6, depth, rnd(g, width + 1));
}

/* A top-level object with a few small members and one or two big ones.
 * dup_top: the big key appears again at the top level. */
static void gdocument(gen *g, bool dup_top)
{
    g->b.n = 0;
    ws(g);
    puts_(&g->b, "{");
    ws(g);
    unsigned n = 1 + rnd(g, 5), big = rnd(g, n), big2 = rnd(g, 3) ? n : rnd(g, n);
    for (unsigned i = 0; i < n; i++) {
        if (i) {
            puts_(&g->b, ",");
            ws(g);
        }
        putf(&g->b, "\"k%u\"", i);
        ws(g);
        puts_(&g->b, ":");
        ws(g);
        if (i == big || i == big2)
            gcontainer(g, rnd(g, 4) != 0, 1, 10 + rnd(g, 60));
        else
            puts_(&g->b, rnd(g, 2) ? "1" : "\"small\"");
        ws(g);
    }
    if (dup_top) {
        puts_(&g->b, n ? "," : "");
        putf(&g->b, rnd(g, 2) ? "\"k%u\":0" : "\"\\u006b%u\":[]", big);
    }
    puts_(&g->b, "}");
    ws(g);
}

static void test_generated_documents(void **state)
{
    (void)state;
    gen g = { .s = 0x9e3779b97f4a7c15ull };
    size_t parallel = 0;
    for (int i = 0; i < 300; i++) {
        bool dup = i % 10 == 9;
        gdocument(&g, dup);
        bool ok;
        bool p = check_ex(g.b.d, g.b.n, 0, THREADS[i % 3], &ok);
        if (!ok)
            fail_msg("generated document %d is not valid JSON: %s", i, g.b.d);
        parallel += p;
        /* every valid one, unless its big key is repeated at the top */
        if (p == dup)
            fail_msg("document %d: parallel=%d with dup_top=%d: %s", i, p, dup, g.b.d);
    }
    assert_int_equal(parallel, 270);
    free(g.b.d);
}

/* Damaged documents: every verdict and error must still be json_loadb's. */
static void test_mutated_documents(void **state)
{
    (void)state;
    static const char BYTES[] = "{}[],:\"\\ \n0a-.e\0\xff\xc3";
    gen g = { .s = 0x1234567887654321ull };
    size_t refused = 0;
    for (int i = 0; i < 300; i++) {
        gdocument(&g, false);
        dbuf m = { 0 };
        put(&m, g.b.d, g.b.n);
        for (int k = 0; k < 1 + (int)rnd(&g, 3); k++) {
            size_t at = rnd(&g, (unsigned)m.n);
            switch (rnd(&g, 3)) {
            case 0:
                m.d[at] = BYTES[rnd(&g, sizeof BYTES - 1)];
                break;
            case 1:
                memmove(m.d + at, m.d + at + 1, m.n - at - 1);
                m.n--;
                break;
            default: {
                char c = BYTES[rnd(&g, sizeof BYTES - 1)];
                put(&m, " ", 1);
                memmove(m.d + at + 1, m.d + at, m.n - at - 1);
                m.d[at] = c;
                break;
            }
            }
        }
        bool ok;
        check_ex(m.d, m.n, 0, THREADS[i % 3], &ok);
        refused += !ok;
        free(m.d);
    }
    assert_true(refused > 200);             /* the mutations did break most */
    free(g.b.d);
}

/* ---- every prefix ---- */

static void every_prefix(const char *doc, size_t len)
{
    /* the whole document takes the parallel path */
    bool ok;
    assert_true(check(doc, len, &ok));
    assert_true(ok);
    for (size_t n = 0; n < len; n++)
        check_ex(doc, n, 0, THREADS[n % 3], NULL);
}

static void test_every_prefix_of_lockfiles(void **state)
{
    (void)state;
    static const char *files[] = {
        "tests/lockfiles/npm/v1-mirror/package-lock.json",
        "tests/lockfiles/composer/github-dists/composer.lock",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len;
        char *d = read_fixture(files[i], &len);
        every_prefix(d, len);
        free(d);
    }
    gen g = { .s = 42 };
    do
        gdocument(&g, false);
    while (g.b.n > 2000);
    every_prefix(g.b.d, g.b.n);
    free(g.b.d);
}

/* ---- the real entry point and its threshold ---- */

static void test_threshold(void **state)
{
    (void)state;
    const char *small = "{\"p\":{\"a\":1,\"b\":2,\"c\":3}}";
    size_t n = strlen(small);
    assert_true(check_ex(small, n, n, 2, NULL));        /* at the threshold: parallel */
    assert_false(check_ex(small, n, n + 1, 2, NULL));   /* below it: serial */
    assert_false(check_ex(small, n, 0, 1, NULL));       /* one thread: serial */
    assert_false(check_ex(small, n, 0, 0, NULL));
    assert_true(check_ex(small, n, 0, 1000, NULL));     /* capped, still fine */

    /* sl_json_load: serial below 4 MiB */
    unsigned long before = sl_json_load_parallel_count();
    json_error_t e;
    json_t *j = sl_json_load(small, n, &e);
    assert_non_null(j);
    json_decref(j);
    assert_int_equal(sl_json_load_parallel_count(), before);

    /* NULL data is json_loadb's error */
    json_error_t ea, eb;
    assert_null(json_loadb(NULL, 0, 0, &ea));
    assert_null(sl_json_load_ex(NULL, 0, &eb, 0, 2));
    same_error(&ea, &eb);
}

/* A package-lock.json of 5 MiB: sl_json_load itself goes parallel. */
static void test_large_lockfile(void **state)
{
    (void)state;
    dbuf b = { 0 };
    puts_(&b, "{\n  \"name\": \"big\",\n  \"lockfileVersion\": 3,\n  \"packages\": {\n    \"\": {}");
    for (int i = 0; b.n < ((size_t)5 << 20); i++)
        putf(&b, ",\n    \"node_modules/p%05d\": {\n      \"version\": \"1.%d.0\",\n"
                 "      \"resolved\": \"https://registry.npmjs.org/p%05d/-/p%05d-1.%d.0.tgz\",\n"
                 "      \"integrity\": \"sha512-%064d\"\n    }", i, i % 50, i, i, i % 50, i);
    puts_(&b, "\n  }\n}\n");
    char *copy = malloc(b.n);
    assert_non_null(copy);
    memcpy(copy, b.d, b.n);
    json_error_t ea, eb;
    json_t *a = json_loadb(copy, b.n, 0, &ea);
    unsigned long before = sl_json_load_parallel_count();
    json_t *j = sl_json_load(copy, b.n, &eb);
    assert_non_null(a);
    assert_non_null(j);
    assert_true(json_equal(a, j));
    same_error(&ea, &eb);
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
        assert_int_equal(sl_json_load_parallel_count(), before + 1);
    else
        assert_int_equal(sl_json_load_parallel_count(), before);
    json_decref(a);
    json_decref(j);
    /* truncated: json_loadb's error, after the parallel attempt failed */
    a = json_loadb(copy, b.n - 3, 0, &ea);
    j = sl_json_load(copy, b.n - 3, &eb);
    assert_null(a);
    assert_null(j);
    same_error(&ea, &eb);
    free(copy);
    free(b.d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jansson_duplicate_keys),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_nesting_depth),
        cmocka_unit_test(test_generated_documents),
        cmocka_unit_test(test_mutated_documents),
        cmocka_unit_test(test_every_prefix_of_lockfiles),
        cmocka_unit_test(test_threshold),
        cmocka_unit_test(test_large_lockfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
