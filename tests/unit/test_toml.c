/* The strict TOML reader: table-driven.
 *
 * Valid documents are compared through a compact dump of the tree; invalid
 * ones by the line and a piece of the message. Every prefix of each
 * realistic lockfile is parsed: a cut inside a string, array, inline table
 * or header must be refused, a cut at a line end outside them must parse.
 * Inputs are copied into buffers of their exact size so that AddressSanitizer
 * sees any read past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml.h"

/* ---- helpers ---- */

/* dbuf, put, puts_, putf: testbuf.h */

/* "..." with \" \\ and \xHH for control bytes; other bytes as they are. */
static void put_quoted(dbuf *b, const char *s, size_t n)
{
    puts_(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            putf(b, "\\x%02x", c);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
    puts_(b, "\"");
}

static bool is_bare_key(const char *k)
{
    if (!*k)
        return false;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
              *k == '-' || *k == '_'))
            return false;
    return true;
}

/* Tables {k=v,...}, arrays [v,...], strings quoted, integers in decimal,
 * floats F, booleans true/false, date-times @text. */
static void dump(dbuf *b, const sl_toml *v)
{
    size_t n;
    const char *s;
    long long i;
    bool t;
    switch (sl_toml_kind_of(v)) {
    case SL_TOML_TABLE:
        puts_(b, "{");
        for (size_t k = 0; k < sl_toml_count(v); k++) {
            const char *key;
            const sl_toml *c = sl_toml_entry(v, k, &key);
            assert_non_null(c);
            assert_non_null(key);
            if (k)
                puts_(b, ",");
            if (is_bare_key(key))
                puts_(b, key);
            else
                put_quoted(b, key, strlen(key));
            puts_(b, "=");
            dump(b, c);
        }
        puts_(b, "}");
        break;
    case SL_TOML_ARRAY:
        puts_(b, "[");
        for (size_t k = 0; k < sl_toml_count(v); k++) {
            if (k)
                puts_(b, ",");
            dump(b, sl_toml_at(v, k));
        }
        puts_(b, "]");
        break;
    case SL_TOML_STRING:
        s = sl_toml_str(v, &n);
        assert_non_null(s);
        assert_int_equal(s[n], '\0');
        put_quoted(b, s, n);
        break;
    case SL_TOML_DATETIME:
        s = sl_toml_str(v, &n);
        assert_non_null(s);
        puts_(b, "@");
        put(b, s, n);
        break;
    case SL_TOML_INTEGER:
        assert_true(sl_toml_int(v, &i));
        putf(b, "%lld", i);
        break;
    case SL_TOML_FLOAT:
        puts_(b, "F");
        break;
    case SL_TOML_BOOL:
        assert_true(sl_toml_bool(v, &t));
        puts_(b, t ? "true" : "false");
        break;
    }
}

/* Parse from a heap copy of exactly len bytes, freed before returning: the
 * tree must not point into the input, and overreads are caught. */
static sl_toml *parse_copy(const char *doc, size_t len, char *err, size_t errcap, int *line)
{
    char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, doc, len);
    sl_toml *t = sl_toml_parse(buf, len, err, errcap, line);
    free(buf);
    return t;
}

static sl_toml *parse_ok(const char *doc)
{
    char err[256];
    int line = -1;
    sl_toml *t = parse_copy(doc, strlen(doc), err, sizeof err, &line);
    if (!t)
        fail_msg("refused at line %d: %s\n--- document:\n%s", line, err, doc);
    return t;
}

#define EXPECT_ERROR(doc, line, why) expect_error(doc, sizeof(doc) - 1, line, why)

static void expect_error(const char *doc, size_t len, int line, const char *why)
{
    char err[256];
    int got = -1;
    sl_toml *t = parse_copy(doc, len, err, sizeof err, &got);
    if (t) {
        sl_toml_free(t);
        fail_msg("accepted, expected \"%s\" at line %d:\n%.*s", why, line, (int)len, doc);
    }
    if (got != line || !strstr(err, why))
        fail_msg("got \"%s\" at line %d, expected \"%s\" at line %d:\n%.*s", err, got, why, line,
                 (int)len, doc);
}

static const sl_toml *path(const sl_toml *t, const char *dotted)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dotted);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
        if (sl_toml_kind_of(t) == SL_TOML_ARRAY)
            t = sl_toml_at(t, strtoul(k, NULL, 10));
        else
            t = sl_toml_get(t, k);
        if (!t)
            return NULL;
    }
    return t;
}

static const char *str_at(const sl_toml *t, const char *dotted)
{
    const sl_toml *v = path(t, dotted);
    return v ? sl_toml_str(v, NULL) : NULL;
}

static long long int_at(const sl_toml *t, const char *dotted)
{
    long long x = -424242;
    assert_true(sl_toml_int(path(t, dotted), &x));
    return x;
}

/* ---- valid documents ---- */

typedef struct valid_case {
    const char *doc;
    size_t len;
    const char *dump;
} valid_case;

#define V(doc, dump) { doc, sizeof(doc) - 1, dump }

static const valid_case valid_cases[] = {
    /* layout */
    V("", "{}"),
    V("# only a comment\n\n   \t\n# another\n", "{}"),
    V("a = 1", "{a=1}"),
    V("  a = 1  # comment\n\tb=2\n", "{a=1,b=2}"),
    V("\xef\xbb\xbf" "a = 1\n", "{a=1}"),
    V("a = 1\r\nb = 2\r\n# c\r\n", "{a=1,b=2}"),
    V("a = 1\n   ", "{a=1}"),
    V("# caf\xc3\xa9 \t comment\na = \"\xe2\x82\xac\" # \xf0\x9f\x98\x80\n", "{a=\"\xe2\x82\xac\"}"),
    /* keys */
    V("A-z_0 = 1\n1234 = 2\n-_- = 3\ntrue = 4\ninf = 5\n-1 = 6\n",
      "{A-z_0=1,1234=2,-_-=3,true=4,inf=5,-1=6}"),
    V("\"127.0.0.1\" = 1\n'a b' = 2\n\"\" = 3\n\"\\u00e9\" = 4\n'\"q\"' = 5\n\"\\t\" = 6\n",
      "{\"127.0.0.1\"=1,\"a b\"=2,\"\"=3,\"\xc3\xa9\"=4,\"\\\"q\\\"\"=5,\"\\x09\"=6}"),
    V("a.b.c = 1\na.b.d = 2\na . \"x.y\" . z = 3\n3.14 = 4\n",
      "{a={b={c=1,d=2},\"x.y\"={z=3}},3={14=4}}"),
    V("site.\"google.com\" = true\n'quoted'.bare = 1\n",
      "{site={\"google.com\"=true},quoted={bare=1}}"),
    V("a=1\nb =2\nc= 3\nd\t=\t4\n", "{a=1,b=2,c=3,d=4}"),
    /* basic strings */
    V("s = \"\\b\\t\\n\\f\\r\\\"\\\\\\u00e9\\U0001F600\"\n",
      "{s=\"\\x08\\x09\\x0a\\x0c\\x0d\\\"\\\\\xc3\xa9\xf0\x9f\x98\x80\"}"),
    V("s = \"tab\there # not a comment\"\n", "{s=\"tab\\x09here # not a comment\"}"),
    V("s = \"\\u0000\"\n", "{s=\"\\x00\"}"),
    V("s = \"\\U0010FFFF\\uD7FF\\uE000\\u007f\"\n",
      "{s=\"\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80\\x7f\"}"),
    V("s = \"\"\nt = 'x'\n", "{s=\"\",t=\"x\"}"),
    V("s = \"x # y\" # z\nt = \"[1, 2]\"\n", "{s=\"x # y\",t=\"[1, 2]\"}"),
    /* multi-line basic strings */
    V("s = \"\"\"\nline1\nline2\"\"\"\n", "{s=\"line1\\x0aline2\"}"),
    V("s = \"\"\"\r\nline1\r\nline2\"\"\"\r\n", "{s=\"line1\\x0aline2\"}"),
    V("s = \"\"\"\n\nblank first\"\"\"\n", "{s=\"\\x0ablank first\"}"),
    V("s = \"\"\"\\\n   The quick \\\n\n   fox \\   \n  jumps\\\n  \"\"\"\n", "{s=\"The quick fox jumps\"}"),
    V("s = \"\"\"a \"quoted\" \"\" b\"\"\"\n", "{s=\"a \\\"quoted\\\" \\\"\\\" b\"}"),
    V("s = \"\"\"\"a\"\"\"\"\"\n", "{s=\"\\\"a\\\"\\\"\"}"),
    V("s = \"\"\"\"\"\"\n", "{s=\"\"}"),
    V("s = \"\"\"x\\ty\\\"\"\"\"\n", "{s=\"x\\x09y\\\"\"}"),
    V("s = \"\"\"tab\there\"\"\"\n", "{s=\"tab\\x09here\"}"),
    /* literal strings */
    V("s = 'C:\\Users\\n'\n", "{s=\"C:\\\\Users\\\\n\"}"),
    V("s = '''\nfirst newline trimmed\n  kept\n'''\n", "{s=\"first newline trimmed\\x0a  kept\\x0a\"}"),
    V("s = ''''a'''''\n", "{s=\"'a''\"}"),
    V("s = '''\\no escapes \"\"\" here'''\n", "{s=\"\\\\no escapes \\\"\\\"\\\" here\"}"),
    V("s = 'tab\there'\nt = ''\n", "{s=\"tab\\x09here\",t=\"\"}"),
    V("s = '''a\r\nb'''\n", "{s=\"a\\x0ab\"}"),
    /* integers */
    V("a = +99\nb = 42\nc = 0\nd = -17\ne = 1_000\nf = 5_349_221\ng = 1_2_3\nh = +0\ni = -0\n",
      "{a=99,b=42,c=0,d=-17,e=1000,f=5349221,g=123,h=0,i=0}"),
    V("a = 0xDEADBEEF\nb = 0xdead_beef\nc = 0o755\nd = 0o0_1\ne = 0b1101_0110\nf = 0x0\ng = 0x00ff\n",
      "{a=3735928559,b=3735928559,c=493,d=1,e=214,f=0,g=255}"),
    V("max = 9223372036854775807\nmin = -9223372036854775808\nhex = 0x7fffffffffffffff\n"
      "oct = 0o777777777777777777777\n"
      "bin = 0b111111111111111111111111111111111111111111111111111111111111111\n",
      "{max=9223372036854775807,min=-9223372036854775808,hex=9223372036854775807,"
      "oct=9223372036854775807,bin=9223372036854775807}"),
    /* floats */
    V("a = +1.0\nb = 3.1415\nc = -0.01\nd = 5e+22\ne = 1e06\nf = -2E-2\ng = 6.626e-34\n"
      "h = 224_617.445_991_228\ni = 0.0\nj = -0.0\nk = 0e0\nl = 1e1_0\nm = 9_9.0_1e-0_1\n",
      "{a=F,b=F,c=F,d=F,e=F,f=F,g=F,h=F,i=F,j=F,k=F,l=F,m=F}"),
    V("a = inf\nb = +inf\nc = -inf\nd = nan\ne = +nan\nf = -nan\n", "{a=F,b=F,c=F,d=F,e=F,f=F}"),
    /* booleans */
    V("a = true\nb = false\n", "{a=true,b=false}"),
    /* date-times, kept as text */
    V("a = 1979-05-27T07:32:00Z\nb = 1979-05-27T00:32:00-07:00\nc = 1979-05-27T00:32:00.999999+07:30\n"
      "d = 1979-05-27 07:32:00Z\ne = 1979-05-27t07:32:00z\n",
      "{a=@1979-05-27T07:32:00Z,b=@1979-05-27T00:32:00-07:00,c=@1979-05-27T00:32:00.999999+07:30,"
      "d=@1979-05-27 07:32:00Z,e=@1979-05-27t07:32:00z}"),
    V("a = 1979-05-27T07:32:00\nb = 1979-05-27 00:32:00.5\nc = 1979-05-27\nd = 07:32:00\n"
      "e = 00:32:00.999999\nf = 2000-02-29\ng = 2016-12-31T23:59:60Z\nh = 0000-01-01\ni = 9999-12-31\n",
      "{a=@1979-05-27T07:32:00,b=@1979-05-27 00:32:00.5,c=@1979-05-27,d=@07:32:00,"
      "e=@00:32:00.999999,f=@2000-02-29,g=@2016-12-31T23:59:60Z,h=@0000-01-01,i=@9999-12-31}"),
    V("a = 1979-05-27 # a date, then a comment\nb = [1979-05-27 ,07:32:00]\nc = {d = 1979-05-27}\n",
      "{a=@1979-05-27,b=[@1979-05-27,@07:32:00],c={d=@1979-05-27}}"),
    /* arrays */
    V("a = []\nb = [ ]\nc = [1]\nd = [1, 2, 3,]\ne = [[1, 2], [\"a\"]]\n",
      "{a=[],b=[],c=[1],d=[1,2,3],e=[[1,2],[\"a\"]]}"),
    V("f = [1, \"x\", 1.5, true, 1979-05-27, [], {}, 'y', \"\"\"z\"\"\"]\n",
      "{f=[1,\"x\",F,true,@1979-05-27,[],{},\"y\",\"z\"]}"),
    V("a = [\n  1, # one\n\n  2 # two\n  , 3\n  # before the end\n]\n", "{a=[1,2,3]}"),
    V("a = [\r\n 1,\r\n 2,\r\n]\r\n", "{a=[1,2]}"),
    V("a = [[[[]]]]\nb = [[1], [2]]\n", "{a=[[[[]]]],b=[[1],[2]]}"),
    V("a = [ { b = 1 }, { b = 2 } ]\n", "{a=[{b=1},{b=2}]}"),
    V("a = [\"\"\"\nx\"\"\", '''\ny''']\n", "{a=[\"x\",\"y\"]}"),
    /* inline tables */
    V("a = {}\nb = { }\nc = {x = 1, y = \"z\"}\n", "{a={},b={},c={x=1,y=\"z\"}}"),
    V("d = { e.f = 1, e.g = 2, h = { i = [1] } }\n", "{d={e={f=1,g=2},h={i=[1]}}}"),
    V("a = {b = [1,\n 2]}\n", "{a={b=[1,2]}}"),
    V("a = {b = \"\"\"x\ny\"\"\"}\n", "{a={b=\"x\\x0ay\"}}"),
    V("animal = { type.name = \"pug\" }\n", "{animal={type={name=\"pug\"}}}"),
    /* tables */
    V("[a]\nb = 1\n[c]\n", "{a={b=1},c={}}"),
    V("[ a . \"b.c\" . 'd' ]\ne = 1\n", "{a={\"b.c\"={d={e=1}}}}"),
    V("[a.b.c]\nx = 1\n[a]\ny = 2\n", "{a={b={c={x=1}},y=2}}"),
    V("[a.b.c]\n[a]\nb.d = 1\n", "{a={b={c={},d=1}}}"),
    V("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n\n[fruit.apple.texture]\nsmooth = true\n",
      "{fruit={apple={color=\"red\",taste={sweet=true},texture={smooth=true}}}}"),
    V("a.b = 1\n[a.c]\nd = 2\n", "{a={b=1,c={d=2}}}"),
    V("a = 1\n[b]\na = 2\n[b.c]\na = 3\n", "{a=1,b={a=2,c={a=3}}}"),
    V("[x] # comment\n[y]\t\n  [z]\n", "{x={},y={},z={}}"),
    V("[\"\"]\na = 1\n", "{\"\"={a=1}}"),
    /* arrays of tables */
    V("[[p]]\nn = 1\n[[p]]\n[[p]]\nn = 3\n", "{p=[{n=1},{},{n=3}]}"),
    V("[[fruits]]\nname = \"apple\"\n[fruits.physical]\ncolor = \"red\"\n[[fruits.varieties]]\n"
      "name = \"red delicious\"\n[[fruits.varieties]]\nname = \"granny smith\"\n[[fruits]]\n"
      "name = \"banana\"\n[[fruits.varieties]]\nname = \"plantain\"\n",
      "{fruits=[{name=\"apple\",physical={color=\"red\"},varieties=[{name=\"red delicious\"},"
      "{name=\"granny smith\"}]},{name=\"banana\",varieties=[{name=\"plantain\"}]}]}"),
    V("[[a]]\n[a.b]\nc = 1\n[[a]]\n[a.b]\nc = 2\n", "{a=[{b={c=1}},{b={c=2}}]}"),
    V("[[a.b]]\nx = 1\n[a]\ny = 2\n", "{a={b=[{x=1}],y=2}}"),
    V("[[ a . b ]]\n[[a.b]] # two\n", "{a={b=[{},{}]}}"),
    V("[[a]]\nb.c = 1\n[[a]]\nb.c = 2\n", "{a=[{b={c=1}},{b={c=2}}]}"),
};

static void test_valid_documents(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof valid_cases / sizeof valid_cases[0]; i++) {
        const valid_case *c = &valid_cases[i];
        char err[256];
        int line = -1;
        sl_toml *t = parse_copy(c->doc, c->len, err, sizeof err, &line);
        if (!t)
            fail_msg("case %zu refused at line %d: %s\n%s", i, line, err, c->doc);
        dbuf b = { 0 };
        dump(&b, t);
        if (strcmp(b.d, c->dump) != 0)
            fail_msg("case %zu:\n%s\n got: %s\nwant: %s", i, c->doc, b.d, c->dump);
        free(b.d);
        sl_toml_free(t);
    }
}

/* ---- invalid documents ---- */

typedef struct bad_case {
    const char *doc;
    size_t len;            /* explicit, so that embedded NULs count */
    int line;
    const char *why;       /* substring of the message */
} bad_case;

#define B(doc, line, why) { doc, sizeof(doc) - 1, line, why }

static const bad_case bad_cases[] = {
    /* defined twice */
    B("a = 1\na = 2\n", 2, "key 'a' defined twice"),
    B("[package]\nname = \"x\"\nversion = \"1\"\nversion = \"2\"\n", 4, "key 'version' defined twice"),
    B("a = 1\n\"a\" = 2\n", 2, "key 'a' defined twice"),
    B("a = 1\n'a' = 2\n", 2, "key 'a' defined twice"),
    B("\"\\u0061\" = 1\na = 2\n", 2, "key 'a' defined twice"),
    B("a.b = 1\na.b = 2\n", 2, "key 'a.b' defined twice"),
    B("a = {b = 1, b = 2}\n", 1, "key 'b' defined twice"),
    B("a = {b.c = 1, b = 2}\n", 1, "key 'b' defined twice"),
    B("[a]\n[a]\n", 2, "table 'a' defined twice"),
    B("[a.b]\nc = 1\n[a.b]\n", 3, "table 'a.b' defined twice"),
    B("[a]\n[\"a\"]\n", 2, "table 'a' defined twice"),
    B("a.b = 1\n[a]\n", 2, "table 'a' defined twice"),
    B("a = {b = 1}\n[a]\n", 2, "table 'a' defined twice"),
    B("[fruit]\napple.color = \"red\"\n[fruit.apple]\n", 3, "table 'fruit.apple' defined twice"),
    B("[fruit]\napple.taste.sweet = true\n[fruit.apple.taste]\n", 3, "defined twice"),
    B("[a]\nb.c = 1\n[x]\n[a.b]\n", 4, "table 'a.b' defined twice"),
    B("[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", 4, "table 'b.c' defined twice"),
    B("[a.b]\n[a]\nb.c = 1\n", 3, "table 'b' defined twice"),
    B("[a]\nb.c = 1\n[a.x]\n[a]\n", 4, "table 'a' defined twice"),
    B("[a]\nb = 1\n[a.b]\n", 3, "cannot define table 'a.b': key already has a value"),
    B("[a.b]\n[a]\nb = 1\n", 3, "key 'b' defined twice"),
    B("[[a]]\n[a]\n", 2, "already an array of tables"),
    B("[a]\n[[a]]\n", 2, "already has a table"),
    B("a = []\n[[a]]\n", 2, "already has a value"),
    B("a = 1\n[[a]]\n", 2, "already has a value"),
    B("a = 1\n[a.b]\n", 2, "'a' is a value"),
    B("a = [{b = 1}]\n[a.c]\n", 2, "'a' is an array"),
    B("a = [{b = 1}]\n[[a]]\n", 2, "already has a value"),
    /* dotted keys and inline tables */
    B("a = 1\na.b = 2\n", 2, "key 'a' is already defined as a value"),
    B("a = [1]\na.b = 2\n", 2, "key 'a' is already defined as an array"),
    B("[[a]]\n[b]\n[a]\n", 3, "already an array of tables"),
    B("a = {}\n[a.b]\n", 2, "'a' is an inline table"),
    B("a = {b = {}}\n[a.b.c]\n", 2, "'a' is an inline table"),
    B("[product]\ntype = { name = \"Nail\" }\ntype.edible = false\n", 3,
      "cannot add keys to inline table 'type'"),
    B("[product]\ntype.name = \"Nail\"\ntype = { edible = false }\n", 3, "key 'type' defined twice"),
    B("t = { f = { a.c = 1 }, f.a.t = 2 }\n", 1, "cannot add keys to inline table 'f'"),
    B("a = {b = 1,}\n", 1, "trailing comma in inline table"),
    B("a = {,}\n", 1, "invalid character ','"),
    B("a = {b = 1 c = 2}\n", 1, "expected ',' or '}' in inline table"),
    B("a = {b = 1\n}\n", 1, "unterminated inline table"),
    B("a = {\nb = 1}\n", 1, "unterminated inline table"),
    B("a = {b = 1, # c\n}\n", 1, "expected a key"),
    /* truncation: strings */
    B("a = \"abc", 1, "unterminated string"),
    B("a = \"abc\nb = 1\n", 1, "unterminated string"),
    B("a = \"abc\r\nb = 1\n", 1, "unterminated string"),
    B("x = 1\ns = \"\"\"abc\ndef\n", 2, "unterminated string"),
    B("s = \"\"\"abc\"\"", 1, "unterminated string"),
    B("s = \"\"\"", 1, "unterminated string"),
    B("s = \"\"\"\n", 1, "unterminated string"),
    B("s = '''abc\n''", 1, "unterminated string"),
    B("s = '''", 1, "unterminated string"),
    B("s = 'abc", 1, "unterminated string"),
    B("s = 'abc\n'\n", 1, "unterminated string"),
    B("s = \"abc\\", 1, "unterminated string"),
    B("s = \"\\u00", 1, "unterminated string"),
    B("s = \"\\U0001F6", 1, "unterminated string"),
    B("s = \"\"\"abc\\", 1, "unterminated string"),
    B("s = \"\"\"abc\\   ", 1, "unterminated string"),
    B("s = \"\"\"abc\\\n\n  ", 1, "unterminated string"),
    B("\"abc", 1, "unterminated string"),
    B("[\"abc", 1, "unterminated string"),
    B("a = [\"x\", \"y", 1, "unterminated string"),
    /* truncation: arrays */
    B("x = 1\na = [1,\n2,\n", 2, "unterminated array"),
    B("a = [", 1, "unterminated array"),
    B("a = [1", 1, "unterminated array"),
    B("a = [1,", 1, "unterminated array"),
    B("a = [1, [2, 3]", 1, "unterminated array"),
    B("a = [\n  # comment", 1, "unterminated array"),
    B("a = [\n  # comment\n", 1, "unterminated array"),
    B("a = [\n  {b = 1},\n", 1, "unterminated array"),
    B("a = [1 2]\n", 1, "expected ',' or ']' in array"),
    B("a = [1,,2]\n", 1, "invalid value"),
    B("a = [,]\n", 1, "invalid value"),
    /* truncation: inline tables */
    B("a = {", 1, "unterminated inline table"),
    B("a = {b = 1", 1, "unterminated inline table"),
    B("a = {b = 1,", 1, "unterminated inline table"),
    B("a = {b = 1, ", 1, "unterminated inline table"),
    B("a = {b = [1, 2]", 1, "unterminated inline table"),
    B("a = {b = [1,\n2]", 1, "unterminated inline table"),
    B("a = {b = ", 1, "missing value"),
    B("a = {b", 1, "expected '=' after key"),
    /* truncation: headers, keys, values */
    B("[a", 1, "unterminated table header"),
    B("[a.b\n", 1, "unterminated table header"),
    B("[a\nb]\n", 1, "unterminated table header"),
    B("[[a]", 1, "unterminated table header"),
    B("[[a]\n", 1, "unterminated table header"),
    B("[[a", 1, "unterminated table header"),
    B("[", 1, "expected a key"),
    B("[[", 1, "expected a key"),
    B("x = 1\n[a.", 2, "expected a key"),
    B("a =", 1, "missing value"),
    B("a = \n", 1, "missing value"),
    B("a = # c\n", 1, "missing value"),
    B("a", 1, "expected '=' after key"),
    B("a\n", 1, "expected '=' after key"),
    B("a.", 1, "expected a key"),
    B("a = tr", 1, "invalid value"),
    B("a = fals", 1, "invalid value"),
    B("a = 1979-05", 1, "invalid date"),
    B("a = 1979-05-27T07:3", 1, "invalid time"),
    B("a = 07:3", 1, "invalid time"),
    B("a = 0x", 1, "invalid number"),
    B("a = 1e", 1, "invalid number"),
    B("a = 1.", 1, "invalid number"),
    B("a = -", 1, "invalid number"),
    B("a = +", 1, "invalid number"),
    /* structure */
    B("a = 1 b = 2\n", 1, "expected a newline"),
    B("a = 1,\n", 1, "expected a newline"),
    B("a = \"x\" \"y\"\n", 1, "expected a newline"),
    B("a = \"x\"y\n", 1, "expected a newline"),
    B("[a] b = 1\n", 1, "expected a newline"),
    B("[a]]\n", 1, "expected a newline"),
    B("[]\n", 1, "expected a key"),
    B("[a.]\n", 1, "expected a key"),
    B("[.a]\n", 1, "invalid character '.' in key"),
    B("[a..b]\n", 1, "invalid character '.' in key"),
    B("[[a] ]\n", 1, "expected ']]' after table name"),
    B("[ [a]]\n", 1, "invalid character '[' in key"),
    B("= 1\n", 1, "missing key before '='"),
    B(".a = 1\n", 1, "invalid character '.' in key"),
    B("a..b = 1\n", 1, "invalid character '.' in key"),
    B("a. = 1\n", 1, "missing key before '='"),
    B("a b = 1\n", 1, "expected '=' after key"),
    B("a = = 1\n", 1, "invalid value starting with '='"),
    B("\"\"\"a\"\"\" = 1\n", 1, "a multi-line string cannot be a key"),
    B("'''a''' = 1\n", 1, "a multi-line string cannot be a key"),
    B("a\xc3\xa9 = 1\n", 1, "expected '=' after key"),
    B("\xe2\x82\xac = 1\n", 1, "invalid character in key"),
    B("a = \xe2\x82\xac\n", 1, "invalid value"),
    B("x = 1\n\n  } = 2\n", 3, "invalid character '}' in key"),
    /* escapes */
    B("s = \"\\x41\"\n", 1, "invalid escape '\\x'"),
    B("s = \"\\e\"\n", 1, "invalid escape '\\e'"),
    B("s = \"\\a\"\n", 1, "invalid escape '\\a'"),
    B("s = \"\\0\"\n", 1, "invalid escape '\\0'"),
    B("s = \"\\'\"\n", 1, "invalid escape '\\''"),
    B("s = \"\\/\"\n", 1, "invalid escape '\\/'"),
    B("s = \"\\N\"\n", 1, "invalid escape '\\N'"),
    B("s = \"\\ \"\n", 1, "invalid escape"),
    B("s = \"\\\t\"\n", 1, "invalid escape"),
    B("s = \"\\\xc3\xa9\"\n", 1, "invalid escape"),
    B("s = \"\\u12\"\n", 1, "invalid \\u escape"),
    B("s = \"\\u12g4\"\n", 1, "invalid \\u escape"),
    B("s = \"\\u+123\"\n", 1, "invalid \\u escape"),
    B("s = \"\\U0000004\"\n", 1, "invalid \\U escape"),
    B("s = \"\\uD800\"\n", 1, "\\uD800 is not a Unicode scalar value"),
    B("s = \"\\uDFFF\"\n", 1, "not a Unicode scalar value"),
    B("s = \"\\uD83D\\uDE00\"\n", 1, "not a Unicode scalar value"),
    B("s = \"\\U00110000\"\n", 1, "not a Unicode scalar value"),
    B("s = \"\\UFFFFFFFF\"\n", 1, "not a Unicode scalar value"),
    B("s = \"\\U0000D800\"\n", 1, "not a Unicode scalar value"),
    B("s = \"\"\"\\ x\"\"\"\n", 1, "invalid escape"),
    B("s = \"\"\"\n\\q\"\"\"\n", 2, "invalid escape '\\q'"),
    B("s = \"\"\"a\\\rb\"\"\"\n", 1, "carriage return"),
    B("x = 1\n\"\\q\" = 1\n", 2, "invalid escape '\\q'"),
    B("[\"\\uDC00\"]\n", 1, "not a Unicode scalar value"),
    B("s = \"\"\"a\"\"\"\"\"\"\n", 1, "too many quotes"),
    B("s = '''a''''''\n", 1, "too many quotes"),
    /* numbers */
    B("a = 01\n", 1, "leading zero"),
    B("a = 00\n", 1, "leading zero"),
    B("a = 0_0\n", 1, "leading zero"),
    B("a = -01\n", 1, "leading zero"),
    B("a = +0_1\n", 1, "leading zero"),
    B("a = 01.5\n", 1, "leading zero"),
    B("a = 00e1\n", 1, "leading zero"),
    B("a = 1__2\n", 1, "invalid number"),
    B("a = 1_\n", 1, "invalid number"),
    B("a = _1\n", 1, "invalid value starting with '_'"),
    B("a = 0x_1\n", 1, "invalid number"),
    B("a = 0x1_\n", 1, "invalid number"),
    B("a = 0o_1\n", 1, "invalid number"),
    B("a = 0b1__0\n", 1, "invalid number"),
    B("a = 0X1\n", 1, "invalid number"),
    B("a = 0O7\n", 1, "invalid number"),
    B("a = 0B1\n", 1, "invalid number"),
    B("a = +0x1\n", 1, "a sign is not allowed"),
    B("a = -0b1\n", 1, "a sign is not allowed"),
    B("a = -0o7\n", 1, "a sign is not allowed"),
    B("a = 0o8\n", 1, "invalid number"),
    B("a = 0b2\n", 1, "invalid number"),
    B("a = 0xg\n", 1, "invalid number"),
    B("a = 0xaafz\n", 1, "invalid number"),
    B("a = 1.\n", 1, "invalid number"),
    B("a = .5\n", 1, "invalid value starting with '.'"),
    B("a = 1.e5\n", 1, "invalid number"),
    B("a = 1e+\n", 1, "invalid number"),
    B("a = 1e_5\n", 1, "invalid number"),
    B("a = 1_e5\n", 1, "invalid number"),
    B("a = 1.5_\n", 1, "invalid number"),
    B("a = 1._5\n", 1, "invalid number"),
    B("a = 1e5_\n", 1, "invalid number"),
    B("a = 1e5.5\n", 1, "invalid number"),
    B("a = 1.2.3\n", 1, "invalid number"),
    B("a = ++1\n", 1, "invalid number"),
    B("a = --1\n", 1, "invalid number"),
    B("a = 1-2\n", 1, "invalid number"),
    B("a = 1+2\n", 1, "invalid number"),
    B("a = 12abc\n", 1, "invalid number"),
    B("a = Inf\n", 1, "invalid value starting with 'I'"),
    B("a = NaN\n", 1, "invalid value starting with 'N'"),
    B("a = infinity\n", 1, "invalid number"),
    B("a = nan1\n", 1, "invalid number"),
    B("a = +-inf\n", 1, "invalid number"),
    B("a = 9223372036854775808\n", 1, "integer out of range"),
    B("a = -9223372036854775809\n", 1, "integer out of range"),
    B("a = 99999999999999999999999\n", 1, "integer out of range"),
    B("a = 0x8000000000000000\n", 1, "integer out of range"),
    B("a = 0xffffffffffffffffff\n", 1, "integer out of range"),
    B("a = 0o1000000000000000000000\n", 1, "integer out of range"),
    B("a = 0b1000000000000000000000000000000000000000000000000000000000000000\n", 1,
      "integer out of range"),
    /* date-times */
    B("a = 1979-05-27T07:32Z\n", 1, "invalid time"),
    B("a = 1979-05-27T07:32\n", 1, "invalid time"),
    B("a = 1979-13-01\n", 1, "invalid date"),
    B("a = 1979-00-01\n", 1, "invalid date"),
    B("a = 1979-01-00\n", 1, "invalid date"),
    B("a = 1979-01-32\n", 1, "invalid date"),
    B("a = 1979-02-30\n", 1, "invalid date"),
    B("a = 1979-02-29\n", 1, "invalid date"),
    B("a = 1900-02-29\n", 1, "invalid date"),
    B("a = 1979-04-31\n", 1, "invalid date"),
    B("a = 1979-5-27\n", 1, "invalid date"),
    B("a = 1979-05-7\n", 1, "invalid date"),
    B("a = 1979/05/27\n", 1, "expected a newline"),
    B("a = 1979-05-27T24:00:00\n", 1, "invalid time"),
    B("a = 1979-05-27T23:60:00\n", 1, "invalid time"),
    B("a = 1979-05-27T23:59:61\n", 1, "invalid time"),
    B("a = 1979-05-27T7:32:00\n", 1, "invalid time"),
    B("a = 1979-05-27T07:32:00.\n", 1, "no digits after '.'"),
    B("a = 1979-05-27T07:32:00.Z\n", 1, "no digits after '.'"),
    B("a = 1979-05-27T07:32:00+7:00\n", 1, "invalid time offset"),
    B("a = 1979-05-27T07:32:00+07\n", 1, "invalid time offset"),
    B("a = 1979-05-27T07:32:00+24:00\n", 1, "invalid time offset"),
    B("a = 1979-05-27T07:32:00+07:60\n", 1, "invalid time offset"),
    B("a = 1979-05-27T07:32:00Zjunk\n", 1, "expected a newline"),
    B("a = 1979-05-27T07:32:00ZZ\n", 1, "expected a newline"),
    B("a = 07:32:00Z\n", 1, "expected a newline"),
    B("a = 07:32:00+01:00\n", 1, "expected a newline"),
    B("a = 1979-05-27T\n", 1, "invalid time"),
    B("a = 1979-05-27 07:32\n", 1, "invalid time"),
    B("a = 1979-05-27X07:32:00\n", 1, "expected a newline"),
    B("a = 1979-05-27  07:32:00\n", 1, "expected a newline"),
    B("a = 24:00:00\n", 1, "invalid time"),
    B("a = 7:32:00\n", 1, "expected a newline"),
    /* booleans */
    B("a = True\n", 1, "invalid value starting with 'T'"),
    B("a = FALSE\n", 1, "invalid value starting with 'F'"),
    B("a = truex\n", 1, "invalid value"),
    B("a = true_\n", 1, "invalid value"),
    B("a = null\n", 1, "invalid number"),
    B("a = yes\n", 1, "invalid value starting with 'y'"),
    /* control characters */
    B("s = \"a\x01" "b\"\n", 1, "control character in string"),
    B("s = \"a\x7f\"\n", 1, "control character in string"),
    B("s = \"a\x00" "b\"\n", 1, "control character in string"),
    B("s = 'a\x00" "b'\n", 1, "control character in string"),
    B("s = 'a\x1b" "b'\n", 1, "control character in string"),
    B("s = \"\"\"a\x0b" "b\"\"\"\n", 1, "control character in string"),
    B("s = '''\nx\ny\x08" "z'''\n", 3, "control character in string"),
    B("s = \"a\rb\"\n", 1, "control character in string"),
    B("s = '''a\rb'''\n", 1, "carriage return"),
    B("s = \"\"\"a\rb\"\"\"\n", 1, "carriage return"),
    B("# a\x01\n", 1, "control character in comment"),
    B("# a\x7f\n", 1, "control character in comment"),
    B("a = 1 # \x00\n", 1, "control character in comment"),
    B("x = 1\n# a\rb\n", 2, "control character in comment"),
    B("a = 1\rb = 2\n", 1, "carriage return"),
    B("a = 1\r", 1, "carriage return"),
    B("a = 1\x0c\n", 1, "expected a newline"),
    B("a = 1\x0b\n", 1, "expected a newline"),
    B("\x00", 1, "invalid character in key"),
    B("a = 1\n\x1b[31m = 2\n", 2, "invalid character in key"),
    B("a = [1,\x0c 2]\n", 1, "invalid value"),
    /* invalid UTF-8, anywhere */
    B("a = \"\xc0\xaf\"\n", 1, "invalid UTF-8"),
    B("a = \"\xc1\xbf\"\n", 1, "invalid UTF-8"),
    B("a = \"\xe0\x80\xaf\"\n", 1, "invalid UTF-8"),
    B("a = \"\xf0\x80\x80\xaf\"\n", 1, "invalid UTF-8"),
    B("a = \"\xed\xa0\x80\"\n", 1, "invalid UTF-8"),
    B("a = \"\xed\xbf\xbf\"\n", 1, "invalid UTF-8"),
    B("a = \"\xf4\x90\x80\x80\"\n", 1, "invalid UTF-8"),
    B("a = \"\xf5\x80\x80\x80\"\n", 1, "invalid UTF-8"),
    B("a = \"\xff\"\n", 1, "invalid UTF-8"),
    B("a = \"\x80\"\n", 1, "invalid UTF-8"),
    B("a = \"\xe2\x82\"\n", 1, "invalid UTF-8"),
    B("a = \"\xe2\x28\xa1\"\n", 1, "invalid UTF-8"),
    B("a = 1\n# \xff\n", 2, "invalid UTF-8"),
    B("a = 1\nb = 2\nc = '\xc3'", 3, "invalid UTF-8"),
    B("a = 1\nb = 2\nc = '\xf0\x9f\x98", 3, "invalid UTF-8"),
    B("'\xfe' = 1\n", 1, "invalid UTF-8"),
    B("\xef\xbb" "a = 1\n", 1, "invalid UTF-8"),
};

static void test_invalid_documents(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        expect_error(c->doc, c->len, c->line, c->why);
    }
}

/* a.x under [b] is b.a.x: it neither clashes with [[a]] nor blocks [a.c]. */
static void test_dotted_keys_are_relative_to_the_current_table(void **state)
{
    (void)state;
    sl_toml *t = parse_ok("[[a]]\n[b]\na.x = 1\n[a.c]\nd = 1\n[x]\n");
    assert_int_equal(int_at(t, "b.a.x"), 1);
    assert_int_equal(int_at(t, "a.0.c.d"), 1);
    sl_toml_free(t);
}

/* ---- accessors ---- */

static void test_accessors(void **state)
{
    (void)state;
    sl_toml *t = parse_ok("name = \"serde\"\nn = -42\nf = 1.5\nb = true\nd = 1979-05-27\n"
                          "nul = \"a\\u0000b\"\narr = [1, \"two\"]\n[t]\nk = 'v'\n");
    size_t len = 99;
    long long n = 0;
    bool bv = false;
    const char *key = "unset";

    assert_int_equal(sl_toml_kind_of(t), SL_TOML_TABLE);
    assert_int_equal(sl_toml_count(t), 8);
    assert_string_equal(sl_toml_get_str(t, "name"), "serde");
    assert_null(sl_toml_get_str(t, "n"));           /* not a string */
    assert_null(sl_toml_get_str(t, "d"));           /* a date-time is not a string here */
    assert_null(sl_toml_get_str(t, "missing"));
    assert_null(sl_toml_get_str(t, "t"));
    assert_string_equal(sl_toml_get_str(sl_toml_get(t, "t"), "k"), "v");

    assert_true(sl_toml_int(sl_toml_get(t, "n"), &n));
    assert_int_equal(n, -42);
    assert_true(sl_toml_int(sl_toml_get(t, "n"), NULL));
    assert_false(sl_toml_int(sl_toml_get(t, "f"), &n));
    assert_false(sl_toml_int(sl_toml_get(t, "name"), &n));
    assert_int_equal(sl_toml_kind_of(sl_toml_get(t, "f")), SL_TOML_FLOAT);
    assert_true(sl_toml_bool(sl_toml_get(t, "b"), &bv));
    assert_true(bv);
    assert_false(sl_toml_bool(sl_toml_get(t, "n"), &bv));

    const sl_toml *d = sl_toml_get(t, "d");
    assert_int_equal(sl_toml_kind_of(d), SL_TOML_DATETIME);
    assert_string_equal(sl_toml_str(d, &len), "1979-05-27");
    assert_int_equal(len, 10);

    const char *s = sl_toml_str(sl_toml_get(t, "nul"), &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 4);
    assert_null(sl_toml_str(sl_toml_get(t, "n"), &len));
    assert_int_equal(len, 0);
    assert_non_null(sl_toml_str(sl_toml_get(t, "name"), NULL));

    const sl_toml *arr = sl_toml_get(t, "arr");
    assert_int_equal(sl_toml_kind_of(arr), SL_TOML_ARRAY);
    assert_int_equal(sl_toml_count(arr), 2);
    assert_true(sl_toml_int(sl_toml_at(arr, 0), &n));
    assert_int_equal(n, 1);
    assert_string_equal(sl_toml_str(sl_toml_at(arr, 1), NULL), "two");
    assert_null(sl_toml_at(arr, 2));
    assert_null(sl_toml_at(arr, (size_t)-1));
    assert_null(sl_toml_at(t, 0));                  /* a table is not an array */
    assert_null(sl_toml_get(arr, "0"));             /* nor the other way round */
    assert_null(sl_toml_entry(arr, 0, &key));
    assert_null(key);
    assert_int_equal(sl_toml_count(sl_toml_get(t, "n")), 0);

    const sl_toml *e = sl_toml_entry(t, 0, &key);
    assert_string_equal(key, "name");
    assert_ptr_equal(e, sl_toml_get(t, "name"));
    e = sl_toml_entry(t, 7, &key);
    assert_string_equal(key, "t");
    assert_non_null(sl_toml_entry(t, 1, NULL));
    key = "unset";
    assert_null(sl_toml_entry(t, 8, &key));
    assert_null(key);

    /* NULL stands for an absent value everywhere */
    assert_int_equal(sl_toml_kind_of(NULL), SL_TOML_TABLE);
    assert_int_equal(sl_toml_line(NULL), 0);
    assert_null(sl_toml_get(NULL, "a"));
    assert_null(sl_toml_get(t, NULL));
    assert_int_equal(sl_toml_count(NULL), 0);
    assert_null(sl_toml_entry(NULL, 0, &key));
    assert_null(sl_toml_at(NULL, 0));
    assert_null(sl_toml_str(NULL, &len));
    assert_false(sl_toml_int(NULL, &n));
    assert_false(sl_toml_bool(NULL, &bv));
    assert_null(sl_toml_get_str(NULL, "a"));
    assert_null(sl_toml_get(sl_toml_get(t, "nope"), "deeper"));
    sl_toml_free(NULL);
    sl_toml_free(t);
}

static void test_value_lines(void **state)
{
    (void)state;
    sl_toml *t = parse_ok("a = 1\n\n[t]\nb = [\n  1,\n  2\n]\nc = \"\"\"x\ny\"\"\"\nd = 2\n"
                          "[[p]]\n[[p]]\ne.f = 1\n[x.y]\n[q.r]\n\n[q]\n");
    assert_int_equal(sl_toml_line(t), 1);
    assert_int_equal(sl_toml_line(path(t, "a")), 1);
    assert_int_equal(sl_toml_line(path(t, "t")), 3);
    assert_int_equal(sl_toml_line(path(t, "t.b")), 4);
    assert_int_equal(sl_toml_line(path(t, "t.b.1")), 6);
    assert_int_equal(sl_toml_line(path(t, "t.c")), 8);
    assert_int_equal(sl_toml_line(path(t, "t.d")), 10);
    assert_int_equal(sl_toml_line(path(t, "p")), 11);
    assert_int_equal(sl_toml_line(path(t, "p.0")), 11);
    assert_int_equal(sl_toml_line(path(t, "p.1")), 12);
    assert_int_equal(sl_toml_line(path(t, "p.1.e")), 13);
    assert_int_equal(sl_toml_line(path(t, "p.1.e.f")), 13);
    assert_int_equal(sl_toml_line(path(t, "x")), 14);
    assert_int_equal(sl_toml_line(path(t, "x.y")), 14);
    assert_int_equal(sl_toml_line(path(t, "q")), 17);  /* where it is defined, not first named */
    sl_toml_free(t);

    /* CRLF counts as one line end */
    EXPECT_ERROR("a = 1\r\nb = 2\r\n\r\na = 3\r\n", 4, "key 'a' defined twice");
}

static void test_error_reporting_edges(void **state)
{
    (void)state;
    char err[8];
    int line = 77;
    assert_null(sl_toml_parse("a = ", 4, NULL, 0, NULL));
    assert_null(sl_toml_parse("a = ", 4, err, 0, &line));
    assert_int_equal(line, 1);
    memset(err, 'x', sizeof err);
    assert_null(sl_toml_parse("a = 1\na = 2\n", 12, err, sizeof err, &line));
    assert_int_equal(line, 2);
    assert_true(strlen(err) < sizeof err);          /* truncated, still terminated */
    assert_string_equal(err, "key 'a'");

    char big[128];
    line = 77;
    sl_toml *t = sl_toml_parse("a = 1\n", 6, big, sizeof big, &line);
    assert_non_null(t);
    assert_string_equal(big, "");
    assert_int_equal(line, 0);
    sl_toml_free(t);

    t = sl_toml_parse(NULL, 0, big, sizeof big, &line);
    assert_non_null(t);
    assert_int_equal(sl_toml_count(t), 0);
    sl_toml_free(t);
    assert_null(sl_toml_parse(NULL, 5, big, sizeof big, &line));

    /* untrusted key text is not echoed raw into messages */
    EXPECT_ERROR("\"\\u001b[31m\" = 1\n\"\\u001b[31m\" = 2\n", 2, "key '?[31m' defined twice");
    /* nor are two quoted keys back to back read as one */
    EXPECT_ERROR("'it''s' = 1\n", 1, "expected '=' after key");
}

/* ---- limits ---- */

static char *repeat(const char *head, const char *unit, size_t n, const char *mid, const char *unit2,
                    size_t n2, const char *tail)
{
    dbuf b = { 0 };
    puts_(&b, head);
    for (size_t i = 0; i < n; i++)
        puts_(&b, unit);
    puts_(&b, mid);
    for (size_t i = 0; i < n2; i++)
        puts_(&b, unit2);
    puts_(&b, tail);
    return b.d;
}

static void expect_depth(char *doc, bool ok)
{
    char err[256];
    int line;
    sl_toml *t = parse_copy(doc, strlen(doc), err, sizeof err, &line);
    if (ok) {
        if (!t)
            fail_msg("refused: %s", err);
        sl_toml_free(t);
    } else {
        assert_null(t);
        assert_non_null(strstr(err, "64"));
    }
    free(doc);
}

static void test_nesting_depth_limit(void **state)
{
    (void)state;
    /* the root is depth 0: a = [...] is a container at depth 1 */
    expect_depth(repeat("a = ", "[", 64, "", "]", 64, "\n"), true);
    expect_depth(repeat("a = ", "[", 65, "", "]", 65, "\n"), false);
    expect_depth(repeat("a = ", "{b = ", 63, "{}", "}", 63, "\n"), true);
    expect_depth(repeat("a = ", "{b = ", 64, "{}", "}", 64, "\n"), false);
    expect_depth(repeat("a = ", "[{b = ", 32, "1", "}]", 32, "\n"), true);
    expect_depth(repeat("a = ", "[{b = ", 32, "[]", "}]", 32, "\n"), false);
    /* dotted keys: 64 parts make tables down to depth 63 */
    expect_depth(repeat("", "k.", 63, "k = []", "", 0, "\n"), true);
    expect_depth(repeat("", "k.", 63, "k = [[]]", "", 0, "\n"), false);
    expect_depth(repeat("", "k.", 64, "k = 1", "", 0, "\n"), false);
    /* headers */
    expect_depth(repeat("[", "k.", 63, "k]\nv = 1", "", 0, "\n"), true);
    expect_depth(repeat("[", "k.", 63, "k]\nv = []", "", 0, "\n"), false);
    expect_depth(repeat("[", "k.", 64, "k]", "", 0, "\n"), false);
    expect_depth(repeat("[[", "k.", 62, "k]]\nv = 1", "", 0, "\n"), true);
    expect_depth(repeat("[[", "k.", 63, "k]]", "", 0, "\n"), false);
    expect_depth(repeat("[", "k.", 62, "k]\nv.w = 1", "", 0, "\n"), true);
    expect_depth(repeat("[", "k.", 62, "k]\nv.w.x = 1", "", 0, "\n"), false);
    /* hostile nesting is refused at the bound, without deep recursion */
    expect_depth(repeat("a = ", "[", 1000000, "", "", 0, ""), false);
    expect_depth(repeat("a = ", "{b = ", 200000, "", "", 0, ""), false);
    expect_depth(repeat("a = ", "[{b = ", 100000, "", "", 0, ""), false);
    expect_depth(repeat("", "k.", 100000, "k = 1", "", 0, "\n"), false);
}

static void test_key_length_limit(void **state)
{
    (void)state;
    char err[256];
    int line;
    size_t max = 64 * 1024;
    char *key = malloc(max + 2);
    assert_non_null(key);
    memset(key, 'k', max + 1);
    key[max] = '\0';

    dbuf b = { 0 };
    puts_(&b, key);
    puts_(&b, " = 1\n\"");
    puts_(&b, key);
    puts_(&b, "x\" = 2\n");
    /* the bare key of exactly 64 KiB is fine; the quoted one a byte longer is not */
    sl_toml *t = parse_copy(b.d, b.n, err, sizeof err, &line);
    assert_null(t);
    assert_int_equal(line, 2);
    assert_non_null(strstr(err, "key longer than 65536 bytes"));
    free(b.d);

    b = (dbuf){ 0 };
    puts_(&b, key);
    puts_(&b, " = 1\n'");
    puts_(&b, key);
    puts_(&b, "' = 2\n");
    t = parse_copy(b.d, b.n, err, sizeof err, &line);
    assert_null(t);                                 /* same key twice */
    assert_non_null(strstr(err, "defined twice"));
    assert_int_equal(line, 2);
    free(b.d);

    b = (dbuf){ 0 };
    puts_(&b, "[t.");
    puts_(&b, key);
    puts_(&b, "]\nv = 1\n");
    t = parse_copy(b.d, b.n, err, sizeof err, &line);
    assert_non_null(t);
    assert_int_equal(int_at(sl_toml_get(sl_toml_get(t, "t"), key), "v"), 1);
    sl_toml_free(t);
    free(b.d);

    key[max] = 'k';
    key[max + 1] = '\0';
    b = (dbuf){ 0 };
    puts_(&b, "a.");
    puts_(&b, key);
    puts_(&b, " = 1\n");
    t = parse_copy(b.d, b.n, err, sizeof err, &line);
    assert_null(t);
    assert_non_null(strstr(err, "key longer than 65536 bytes"));
    free(b.d);
    free(key);
}

/* Above ~16 keys a table is indexed by hash: lookups, order and duplicate
 * detection must be the same on both sides of that threshold. */
static void test_many_keys(void **state)
{
    (void)state;
    for (size_t n = 1; n <= 5000; n = n < 40 ? n + 1 : n * 3) {
        dbuf b = { 0 };
        for (size_t i = 0; i < n; i++)
            putf(&b, "k%zu = %zu\n", i * 7919 % 100003, i);
        sl_toml *t = parse_ok(b.d);
        assert_int_equal(sl_toml_count(t), n);
        for (size_t i = 0; i < n; i++) {
            char k[32];
            snprintf(k, sizeof k, "k%zu", i * 7919 % 100003);
            long long v = -1;
            assert_true(sl_toml_int(sl_toml_get(t, k), &v));
            assert_int_equal(v, (long long)i);
            const char *ek;
            assert_ptr_equal(sl_toml_entry(t, i, &ek), sl_toml_get(t, k));
            assert_string_equal(ek, k);
        }
        assert_null(sl_toml_get(t, "k100004"));
        assert_null(sl_toml_get(t, ""));
        sl_toml_free(t);

        /* the same key again, at the end */
        putf(&b, "k%zu = 0\n", (n / 2) * 7919 % 100003);
        char want[64];
        snprintf(want, sizeof want, "key 'k%zu' defined twice", (n / 2) * 7919 % 100003);
        expect_error(b.d, b.n, (int)n + 1, want);
        free(b.d);
    }

    /* many sub-tables by header, then one defined again */
    dbuf b = { 0 };
    for (int i = 0; i < 3000; i++)
        putf(&b, "[t.k%d]\nv = %d\n", i, i);
    sl_toml *t = parse_ok(b.d);
    assert_int_equal(sl_toml_count(sl_toml_get(t, "t")), 3000);
    assert_int_equal(int_at(t, "t.k2999.v"), 2999);
    sl_toml_free(t);
    puts_(&b, "[t.k17]\n");
    expect_error(b.d, b.n, 6001, "table 't.k17' defined twice");
    free(b.d);
}

/* ---- realistic documents ---- */

static const char cargo_lock_v3[] =
    "# This file is automatically @generated by Cargo.\n"
    "# It is not intended for manual editing.\n"
    "version = 3\n"
    "\n"
    "[[package]]\n"
    "name = \"autocfg\"\n"
    "version = \"1.1.0\"\n"
    "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
    "checksum = \"d468802bab17cbc0cc575e9b053f41e72aa36bfa6b7f55e3529ffa43161b97fa\"\n"
    "\n"
    "[[package]]\n"
    "name = \"demo\"\n"
    "version = \"0.1.0\"\n"
    "dependencies = [\n"
    " \"autocfg\",\n"
    " \"left-pad\",\n"
    " \"serde 1.0.193\",\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"left-pad\"\n"
    "version = \"0.2.0\"\n"
    "source = \"git+https://git.example.org/tools/left-pad?branch=main#0123456789abcdef0123456789abcdef01234567\"\n"
    "\n"
    "[[package]]\n"
    "name = \"serde\"\n"
    "version = \"1.0.193\"\n"
    "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
    "checksum = \"25dd9975e68d0cb5aa1120c288333fc98731bd1dd12f561e468ea4728c042b89\"\n"
    "dependencies = [\n"
    " \"serde_derive\",\n"
    "]\n";

static void test_cargo_lock_v3(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(cargo_lock_v3);
    assert_int_equal(int_at(t, "version"), 3);
    const sl_toml *pk = sl_toml_get(t, "package");
    assert_int_equal(sl_toml_kind_of(pk), SL_TOML_ARRAY);
    assert_int_equal(sl_toml_count(pk), 4);
    assert_string_equal(str_at(t, "package.0.name"), "autocfg");
    assert_string_equal(str_at(t, "package.0.source"),
                        "registry+https://github.com/rust-lang/crates.io-index");
    assert_null(sl_toml_get_str(sl_toml_at(pk, 1), "source"));     /* the workspace member */
    assert_int_equal(sl_toml_count(path(t, "package.1.dependencies")), 3);
    assert_string_equal(str_at(t, "package.1.dependencies.2"), "serde 1.0.193");
    assert_string_equal(str_at(t, "package.2.source"),
                        "git+https://git.example.org/tools/left-pad?branch=main#"
                        "0123456789abcdef0123456789abcdef01234567");
    assert_int_equal(sl_toml_line(sl_toml_at(pk, 3)), 25);
    sl_toml_free(t);
}

static const char cargo_lock_v4[] =
    "# This file is automatically @generated by Cargo.\n"
    "# It is not intended for manual editing.\n"
    "version = 4\n"
    "\n"
    "[[package]]\n"
    "name = \"app\"\n"
    "version = \"0.1.0\"\n"
    "dependencies = [\n"
    " \"corp-log\",\n"
    " \"itoa\",\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"corp-log\"\n"
    "version = \"2.3.1\"\n"
    "source = \"sparse+https://cargo.corp.example:8443/index/\"\n"
    "checksum = \"0000000000000000000000000000000000000000000000000000000000000001\"\n"
    "\n"
    "[[package]]\n"
    "name = \"itoa\"\n"
    "version = \"1.0.10\"\n"
    "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
    "checksum = \"b1a46d1a171d865aa5f83f92695765caa047a9b4cbae2cbf37dbd613a793fd4c\"\n";

static void test_cargo_lock_v4(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(cargo_lock_v4);
    assert_int_equal(int_at(t, "version"), 4);
    assert_int_equal(sl_toml_count(sl_toml_get(t, "package")), 3);
    assert_string_equal(str_at(t, "package.1.source"), "sparse+https://cargo.corp.example:8443/index/");
    assert_string_equal(str_at(t, "package.2.version"), "1.0.10");
    sl_toml_free(t);
}

/* Cargo.lock v1 kept checksums under [metadata], keyed by quoted strings. */
static const char cargo_lock_v1[] =
    "[[package]]\n"
    "name = \"libc\"\n"
    "version = \"0.2.66\"\n"
    "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
    "\n"
    "[[package]]\n"
    "name = \"tool\"\n"
    "version = \"0.1.0\"\n"
    "dependencies = [\n"
    " \"libc 0.2.66 (registry+https://github.com/rust-lang/crates.io-index)\",\n"
    "]\n"
    "\n"
    "[metadata]\n"
    "\"checksum libc 0.2.66 (registry+https://github.com/rust-lang/crates.io-index)\" = "
    "\"d515b1f41455adea1313a4a2ac8a8a477634fbae63cc6100e3aebb207ce61558\"\n";

static void test_cargo_lock_v1_metadata(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(cargo_lock_v1);
    const sl_toml *m = sl_toml_get(t, "metadata");
    assert_int_equal(sl_toml_count(m), 1);
    assert_string_equal(
        sl_toml_get_str(m, "checksum libc 0.2.66 (registry+https://github.com/rust-lang/crates.io-index)"),
        "d515b1f41455adea1313a4a2ac8a8a477634fbae63cc6100e3aebb207ce61558");
    assert_string_equal(str_at(t, "package.1.dependencies.0"),
                        "libc 0.2.66 (registry+https://github.com/rust-lang/crates.io-index)");
    sl_toml_free(t);
}

static const char poetry_lock[] =
    "# This file is automatically @generated by Poetry 1.8.2 and should not be changed by hand.\n"
    "\n"
    "[[package]]\n"
    "name = \"certifi\"\n"
    "version = \"2024.2.2\"\n"
    "description = \"Python package for providing Mozilla's CA Bundle.\"\n"
    "optional = false\n"
    "python-versions = \">=3.6\"\n"
    "files = [\n"
    "    {file = \"certifi-2024.2.2-py3-none-any.whl\", hash = \"sha256:dc383c07b76109f368f6106eee2b593b04a011ea4d55f652c6ca24a754d1cdd1\"},\n"
    "    {file = \"certifi-2024.2.2.tar.gz\", hash = \"sha256:0569859f95fc761b18b45ef421b1290a0f65f147e92a1e5eb3e635f9a5e4e66f\"},\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"corp-utils\"\n"
    "version = \"1.4.0\"\n"
    "description = \"\"\n"
    "optional = false\n"
    "python-versions = \">=3.8\"\n"
    "files = [\n"
    "    {file = \"corp_utils-1.4.0-py3-none-any.whl\", hash = \"sha256:1111111111111111111111111111111111111111111111111111111111111111\"},\n"
    "]\n"
    "\n"
    "[package.dependencies]\n"
    "requests = \">=2.28\"\n"
    "urllib3 = {version = \">=1.26\", optional = true}\n"
    "\n"
    "[package.source]\n"
    "type = \"legacy\"\n"
    "url = \"https://pypi.corp.example:8443/simple\"\n"
    "reference = \"corp\"\n"
    "\n"
    "[[package]]\n"
    "name = \"mylib\"\n"
    "version = \"0.1.0\"\n"
    "description = \"A library from git\"\n"
    "optional = false\n"
    "python-versions = \"^3.9\"\n"
    "files = []\n"
    "develop = false\n"
    "\n"
    "[package.extras]\n"
    "dev = [\"black\", \"pytest (>=7.0)\"]\n"
    "\n"
    "[package.source]\n"
    "type = \"git\"\n"
    "url = \"https://github.com/example/mylib.git\"\n"
    "reference = \"main\"\n"
    "resolved_reference = \"4f1c0e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e\"\n"
    "\n"
    "[metadata]\n"
    "lock-version = \"2.0\"\n"
    "python-versions = \"^3.11\"\n"
    "content-hash = \"9b4e3f2a1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f\"\n";

static void test_poetry_lock(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(poetry_lock);
    assert_int_equal(sl_toml_count(sl_toml_get(t, "package")), 3);
    assert_string_equal(str_at(t, "metadata.lock-version"), "2.0");
    assert_string_equal(str_at(t, "package.0.files.1.file"), "certifi-2024.2.2.tar.gz");
    assert_null(path(t, "package.0.source"));
    assert_string_equal(str_at(t, "package.1.source.type"), "legacy");
    assert_string_equal(str_at(t, "package.1.source.url"), "https://pypi.corp.example:8443/simple");
    assert_string_equal(str_at(t, "package.1.dependencies.urllib3.version"), ">=1.26");
    assert_string_equal(str_at(t, "package.2.source.type"), "git");
    assert_string_equal(str_at(t, "package.2.source.resolved_reference"),
                        "4f1c0e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e");
    assert_int_equal(sl_toml_count(path(t, "package.2.files")), 0);
    assert_string_equal(str_at(t, "package.2.extras.dev.1"), "pytest (>=7.0)");
    assert_string_equal(str_at(t, "package.1.description"), "");
    sl_toml_free(t);
}

static const char uv_lock[] =
    "version = 1\n"
    "revision = 1\n"
    "requires-python = \">=3.12\"\n"
    "\n"
    "[[package]]\n"
    "name = \"demo\"\n"
    "version = \"0.1.0\"\n"
    "source = { editable = \".\" }\n"
    "dependencies = [\n"
    "    { name = \"httpx\" },\n"
    "    { name = \"internal\" },\n"
    "]\n"
    "\n"
    "[package.metadata]\n"
    "requires-dist = [\n"
    "    { name = \"httpx\", specifier = \">=0.27\" },\n"
    "    { name = \"internal\", git = \"https://git.example.org/py/internal?tag=v1.2\" },\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"httpx\"\n"
    "version = \"0.27.0\"\n"
    "source = { registry = \"https://pypi.org/simple\" }\n"
    "sdist = { url = \"https://files.pythonhosted.org/packages/5c/2d/httpx-0.27.0.tar.gz\", hash = \"sha256:a0cb\", size = 126413, upload-time = \"2024-02-21T13:07:52.465Z\" }\n"
    "wheels = [\n"
    "    { url = \"https://files.pythonhosted.org/packages/41/7b/httpx-0.27.0-py3-none-any.whl\", hash = \"sha256:71d5\", size = 75590 },\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"internal\"\n"
    "version = \"1.2.0\"\n"
    "source = { git = \"https://git.example.org/py/internal?tag=v1.2#0123456789abcdef0123456789abcdef01234567\" }\n";

static void test_uv_lock(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(uv_lock);
    assert_int_equal(int_at(t, "version"), 1);
    assert_int_equal(int_at(t, "revision"), 1);
    assert_string_equal(str_at(t, "package.0.source.editable"), ".");
    assert_string_equal(str_at(t, "package.0.metadata.requires-dist.1.git"),
                        "https://git.example.org/py/internal?tag=v1.2");
    assert_string_equal(str_at(t, "package.1.source.registry"), "https://pypi.org/simple");
    assert_string_equal(str_at(t, "package.1.sdist.url"),
                        "https://files.pythonhosted.org/packages/5c/2d/httpx-0.27.0.tar.gz");
    assert_int_equal(int_at(t, "package.1.sdist.size"), 126413);
    assert_string_equal(str_at(t, "package.1.wheels.0.url"),
                        "https://files.pythonhosted.org/packages/41/7b/httpx-0.27.0-py3-none-any.whl");
    assert_string_equal(str_at(t, "package.2.source.git"),
                        "https://git.example.org/py/internal?tag=v1.2#0123456789abcdef0123456789abcdef01234567");
    sl_toml_free(t);
}

static const char pdm_lock[] =
    "# This file is @generated by PDM.\n"
    "# It is not intended for manual editing.\n"
    "\n"
    "[metadata]\n"
    "groups = [\"default\", \"dev\"]\n"
    "strategy = [\"inherit_metadata\", \"static_urls\"]\n"
    "lock_version = \"4.5.0\"\n"
    "content_hash = \"sha256:5d1f0b0c\"\n"
    "\n"
    "[[metadata.targets]]\n"
    "requires_python = \">=3.10\"\n"
    "\n"
    "[[package]]\n"
    "name = \"idna\"\n"
    "version = \"3.7\"\n"
    "requires_python = \">=3.5\"\n"
    "summary = \"Internationalized Domain Names in Applications (IDNA)\"\n"
    "groups = [\"default\"]\n"
    "files = [\n"
    "    {url = \"https://files.pythonhosted.org/packages/e5/3e/idna-3.7-py3-none-any.whl\", hash = \"sha256:82fe\"},\n"
    "    {url = \"https://mirror.corp.example/pypi/idna-3.7.tar.gz\", hash = \"sha256:028f\"},\n"
    "]\n"
    "\n"
    "[[package]]\n"
    "name = \"tomli\"\n"
    "version = \"2.0.1\"\n"
    "requires_python = \">=3.7\"\n"
    "summary = \"A lil' TOML parser\"\n"
    "groups = [\"dev\"]\n"
    "marker = \"python_version < \\\"3.11\\\"\"\n"
    "files = [\n"
    "    {file = \"tomli-2.0.1-py3-none-any.whl\", hash = \"sha256:939d\"},\n"
    "]\n";

static void test_pdm_lock(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(pdm_lock);
    assert_string_equal(str_at(t, "metadata.strategy.1"), "static_urls");
    assert_string_equal(str_at(t, "metadata.lock_version"), "4.5.0");
    assert_string_equal(str_at(t, "metadata.targets.0.requires_python"), ">=3.10");
    assert_string_equal(str_at(t, "package.0.files.1.url"), "https://mirror.corp.example/pypi/idna-3.7.tar.gz");
    assert_string_equal(str_at(t, "package.1.marker"), "python_version < \"3.11\"");
    assert_null(str_at(t, "package.1.files.0.url"));
    sl_toml_free(t);
}

static const char pyproject_toml[] =
    "[build-system]\n"
    "requires = [\"poetry-core>=1.0.0\"]\n"
    "build-backend = \"poetry.core.masonry.api\"\n"
    "\n"
    "[project]\n"
    "name = \"demo\"\n"
    "version = \"0.1.0\"\n"
    "description = \"\"\"\\\n"
    "    A demo project \\\n"
    "    for lockfile tests.\"\"\"\n"
    "dependencies = [\n"
    "    \"httpx>=0.27\",  # the HTTP client\n"
    "    'internal @ git+https://git.example.org/py/internal@v1.2',\n"
    "]\n"
    "\n"
    "[tool.poetry]\n"
    "packages = [{ include = \"demo\", from = \"src\" }]\n"
    "\n"
    "[tool.poetry.dependencies]\n"
    "python = \"^3.11\"\n"
    "requests = { version = \"^2.31\", source = \"corp\" }\n"
    "\n"
    "[[tool.poetry.source]]\n"
    "name = \"corp\"\n"
    "url = \"https://pypi.corp.example:8443/simple/\"\n"
    "priority = \"primary\"\n"
    "\n"
    "[[tool.poetry.source]]\n"
    "name = \"PyPI\"\n"
    "priority = \"supplemental\"\n"
    "\n"
    "[[tool.uv.index]]\n"
    "name = \"corp\"\n"
    "url = \"https://pypi.corp.example:8443/simple/\"\n"
    "default = true\n"
    "\n"
    "[[tool.pdm.source]]\n"
    "name = \"pypi\"\n"
    "url = \"https://mirror.corp.example/pypi/simple\"\n"
    "verify_ssl = true\n"
    "\n"
    "[tool.pytest.ini_options]\n"
    "addopts = '''\n"
    "  -ra\n"
    "  --strict-markers'''\n";

static void test_pyproject_sources(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(pyproject_toml);
    const sl_toml *src = path(t, "tool.poetry.source");
    assert_int_equal(sl_toml_kind_of(src), SL_TOML_ARRAY);
    assert_int_equal(sl_toml_count(src), 2);
    assert_string_equal(str_at(t, "tool.poetry.source.0.url"), "https://pypi.corp.example:8443/simple/");
    assert_string_equal(str_at(t, "tool.poetry.source.1.priority"), "supplemental");
    assert_null(str_at(t, "tool.poetry.source.1.url"));
    assert_string_equal(str_at(t, "tool.poetry.dependencies.requests.source"), "corp");
    bool d = false;
    assert_true(sl_toml_bool(path(t, "tool.uv.index.0.default"), &d));
    assert_true(d);
    assert_string_equal(str_at(t, "tool.pdm.source.0.name"), "pypi");
    assert_string_equal(str_at(t, "project.description"), "A demo project for lockfile tests.");
    assert_string_equal(str_at(t, "project.dependencies.1"),
                        "internal @ git+https://git.example.org/py/internal@v1.2");
    assert_string_equal(str_at(t, "tool.pytest.ini_options.addopts"), "  -ra\n  --strict-markers");
    sl_toml_free(t);
}

static const char cargo_config[] =
    "[source.crates-io]\n"
    "replace-with = \"corp-mirror\"\n"
    "\n"
    "[source.corp-mirror]\n"
    "registry = \"sparse+https://cargo.corp.example/index/\"\n"
    "\n"
    "[source.vendored-sources]\n"
    "directory = \"vendor\"\n"
    "\n"
    "[source.\"git+https://github.com/example/dep\"]\n"
    "git = \"https://github.com/example/dep\"\n"
    "replace-with = \"vendored-sources\"\n"
    "\n"
    "[registries.corp]\n"
    "index = \"sparse+https://cargo.corp.example:8443/index/\"\n"
    "\n"
    "[registries.crates-io]\n"
    "protocol = \"git\"\n"
    "\n"
    "[net]\n"
    "git-fetch-with-cli = true\n"
    "retry = 3\n"
    "\n"
    "[http]\n"
    "timeout = 30 # seconds\n";

static void test_cargo_config(void **state)
{
    (void)state;
    sl_toml *t = parse_ok(cargo_config);
    assert_string_equal(str_at(t, "source.crates-io.replace-with"), "corp-mirror");
    assert_string_equal(str_at(t, "source.corp-mirror.registry"), "sparse+https://cargo.corp.example/index/");
    assert_string_equal(str_at(t, "source.vendored-sources.directory"), "vendor");
    assert_string_equal(sl_toml_get_str(sl_toml_get(path(t, "source"), "git+https://github.com/example/dep"),
                                        "replace-with"),
                        "vendored-sources");
    assert_string_equal(str_at(t, "registries.corp.index"), "sparse+https://cargo.corp.example:8443/index/");
    assert_string_equal(str_at(t, "registries.crates-io.protocol"), "git");
    assert_int_equal(int_at(t, "http.timeout"), 30);
    sl_toml_free(t);

    /* the same settings written with dotted keys, as `cargo config` also reads them */
    t = parse_ok("source.crates-io.replace-with = \"vendored-sources\"\n"
                 "source.vendored-sources.directory = \"vendor\"\n"
                 "registries.crates-io.protocol = \"sparse\"\n");
    assert_string_equal(str_at(t, "source.crates-io.replace-with"), "vendored-sources");
    assert_string_equal(str_at(t, "source.vendored-sources.directory"), "vendor");
    sl_toml_free(t);
    EXPECT_ERROR("source.crates-io.replace-with = \"v\"\n[source.crates-io]\nx = 1\n", 2,
                 "table 'source.crates-io' defined twice");
}

/* ---- every prefix ---- */

enum { AT_ANY, AT_LINE_END, AT_INSIDE };

/* What a parse of doc[0..k) must do, for every k: AT_INSIDE, the cut falls
 * inside a string, array, inline table or header (refuse, at the line where
 * the innermost open one started or at the last line); AT_LINE_END, a line
 * end outside all of them (accept); AT_ANY, anything else (either, cleanly).
 * The fixtures avoid what this scanner does not model: "" directly before
 * another quote, and runs of more than three quotes. */
static void classify(const char *doc, size_t len, unsigned char *at, int *open_line)
{
    enum { N, COMMENT, BASIC, LITERAL, ML_BASIC, ML_LITERAL } mode = N;
    int line = 1, str_line = 0, stack[64], sp = 0;
    size_t i = 0;
    at[0] = AT_LINE_END;
    open_line[0] = 0;
#define MARK()                                                                              \
    do {                                                                                    \
        bool in_str = mode != N && mode != COMMENT;                                         \
        at[i] = in_str || sp ? AT_INSIDE : doc[i - 1] == '\n' ? AT_LINE_END : AT_ANY;       \
        open_line[i] = in_str ? str_line : sp ? stack[sp - 1] : 0;                          \
    } while (0)
    while (i < len) {
        char c = doc[i];
        char q = c;
        switch (mode) {
        case N:
            if (c == '#') {
                mode = COMMENT;
            } else if (c == '"' || c == '\'') {
                str_line = line;
                if (i + 2 < len && doc[i + 1] == q && doc[i + 2] == q) {
                    mode = q == '"' ? ML_BASIC : ML_LITERAL;
                    at[i + 1] = at[i + 2] = AT_ANY;
                    i += 2;
                } else {
                    mode = q == '"' ? BASIC : LITERAL;
                }
            } else if (c == '[' || c == '{') {
                assert_true(sp < 64);
                stack[sp++] = line;
            } else if (c == ']' || c == '}') {
                assert_true(sp > 0);
                sp--;
            } else if (c == '\n') {
                line++;
            }
            i++;
            MARK();
            break;
        case COMMENT:
            if (c == '\n') {
                mode = N;
                line++;
            }
            i++;
            MARK();
            break;
        case BASIC:
        case LITERAL:
            if (c == '\\' && mode == BASIC) {
                i++;
                MARK();
            } else if (c == (mode == BASIC ? '"' : '\'')) {
                mode = N;
            }
            i++;
            MARK();
            break;
        case ML_BASIC:
        case ML_LITERAL:
            q = mode == ML_BASIC ? '"' : '\'';
            if (c == '\\' && mode == ML_BASIC) {
                i++;
                MARK();
                if (doc[i] == '\n')
                    line++;
            } else if (c == q && i + 2 < len && doc[i + 1] == q && doc[i + 2] == q) {
                i++;
                MARK();
                i++;
                MARK();
                mode = N;
            } else if (c == '\n') {
                line++;
            }
            i++;
            MARK();
            break;
        }
    }
#undef MARK
}

static void every_prefix(const char *doc, bool cuts_inside)
{
    size_t len = strlen(doc);
    unsigned char *at = malloc(len + 1);
    int *open_line = malloc((len + 1) * sizeof *open_line);
    assert_non_null(at);
    assert_non_null(open_line);
    classify(doc, len, at, open_line);
    size_t refused = 0, inside = 0;
    int last_line = 1;
    for (size_t k = 0; k <= len; k++) {
        if (k > 0 && doc[k - 1] == '\n')
            last_line++;
        char err[256];
        int line = -1;
        sl_toml *t = parse_copy(doc, k, err, sizeof err, &line);
        if (t) {
            dbuf b = { 0 };
            dump(&b, t);                            /* whatever was accepted is a sound tree */
            free(b.d);
            sl_toml_free(t);
            if (at[k] == AT_INSIDE)
                fail_msg("prefix of %zu bytes accepted, but it cuts inside something opened at "
                         "line %d:\n%.*s", k, open_line[k], (int)k, doc);
            continue;
        }
        refused++;
        if (line < 1 || line > last_line || !err[0])
            fail_msg("prefix of %zu bytes: bad error line %d (\"%s\")", k, line, err);
        if (at[k] == AT_LINE_END)
            fail_msg("prefix of %zu bytes ends a line but was refused at line %d: %s\n%.*s", k, line,
                     err, (int)k, doc);
        if (at[k] == AT_INSIDE) {
            inside++;
            if (line != open_line[k] && line != last_line)
                fail_msg("prefix of %zu bytes refused at line %d (%s); want line %d or %d", k, line,
                         err, open_line[k], last_line);
        }
    }
    assert_true(refused >= inside);
    if (cuts_inside)
        assert_true(inside > 0);
    free(at);
    free(open_line);
}

static void test_every_prefix_of_cargo_locks(void **state)
{
    (void)state;
    every_prefix(cargo_lock_v3, true);
    every_prefix(cargo_lock_v4, true);
    every_prefix(cargo_lock_v1, true);
}

static void test_every_prefix_of_python_locks(void **state)
{
    (void)state;
    every_prefix(poetry_lock, true);
    every_prefix(uv_lock, true);
    every_prefix(pdm_lock, true);
}

static void test_every_prefix_of_configs(void **state)
{
    (void)state;
    every_prefix(pyproject_toml, true);
    every_prefix(cargo_config, true);
}

/* The valid cases too, where the scanner models them. */
static void test_every_prefix_of_valid_cases(void **state)
{
    (void)state;
    size_t done = 0;
    for (size_t i = 0; i < sizeof valid_cases / sizeof valid_cases[0]; i++) {
        const char *d = valid_cases[i].doc;
        if (strlen(d) != valid_cases[i].len || strchr(d, '\r') || strstr(d, "\xef\xbb\xbf") ||
            strstr(d, "\"\"\"\"") || strstr(d, "''''"))
            continue;
        every_prefix(d, false);
        done++;
    }
    assert_true(done > 50);
}

/* Line ends may be CRLF throughout: the same tree comes out. */
static void test_crlf_documents_give_the_same_tree(void **state)
{
    (void)state;
    const char *docs[] = { cargo_lock_v3, poetry_lock, uv_lock, pdm_lock, pyproject_toml, cargo_config };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        dbuf crlf = { 0 };
        for (const char *p = docs[i]; *p; p++)
            put(&crlf, *p == '\n' ? "\r\n" : p, *p == '\n' ? 2 : 1);
        sl_toml *a = parse_ok(docs[i]), *b = parse_ok(crlf.d);
        dbuf da = { 0 }, db = { 0 };
        dump(&da, a);
        dump(&db, b);
        assert_string_equal(da.d, db.d);
        free(da.d);
        free(db.d);
        free(crlf.d);
        sl_toml_free(a);
        sl_toml_free(b);
    }
}

/* ---- robustness ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random edits of the realistic documents: every result is either a tree
 * or an error with a line, and nothing is read out of bounds or leaked. */
static void test_mutated_documents_never_crash(void **state)
{
    (void)state;
    static const char bytes[] = "\"'[]{}=.,#\n\r\t \\_-+:0123456789abcdefuUxobeEtTzZin\x00\x7f\xc3\xa9\xff";
    const char *docs[] = { cargo_lock_v3, cargo_lock_v4, cargo_lock_v1, poetry_lock, uv_lock,
                           pdm_lock, pyproject_toml, cargo_config };
    size_t accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *src = docs[rnd() % (sizeof docs / sizeof docs[0])];
        size_t len = strlen(src);
        char *d = malloc(len + 64);
        assert_non_null(d);
        memcpy(d, src, len);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits && len > 0; e++) {
            size_t at = rnd() % len;
            char c = bytes[rnd() % (sizeof bytes - 1)];
            switch (rnd() % 4) {
            case 0:                                 /* replace */
                d[at] = c;
                break;
            case 1:                                 /* delete */
                memmove(d + at, d + at + 1, len - at - 1);
                len--;
                break;
            case 2:                                 /* insert */
                memmove(d + at + 1, d + at, len - at);
                d[at] = c;
                len++;
                break;
            default:                                /* cut */
                len = at;
                break;
            }
        }
        char err[128];
        int line = -1;
        sl_toml *t = parse_copy(d, len, err, sizeof err, &line);
        if (t) {
            dbuf b = { 0 };
            dump(&b, t);
            free(b.d);
            sl_toml_free(t);
            accepted++;
        } else {
            assert_true(line >= 1);
            assert_true(err[0] != '\0');
            refused++;
        }
        free(d);
    }
    assert_true(accepted > 100 && refused > 100);
}

/* A Cargo.lock with 100,000 packages, parsed once. */
static void test_lockfile_with_100000_packages(void **state)
{
    (void)state;
    enum { N = 100000 };
    dbuf b = { 0 };
    puts_(&b, "# This file is automatically @generated by Cargo.\nversion = 3\n\n");
    for (int i = 0; i < N; i++)
        putf(&b,
             "[[package]]\nname = \"pkg-%06d\"\nversion = \"1.%d.0\"\n"
             "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
             "checksum = \"%064x\"\ndependencies = [\n \"pkg-%06d\",\n \"pkg-%06d 1.0.0\",\n]\n\n",
             i, i % 97, (unsigned)i * 2654435761u, (i + 1) % N, (i + 7) % N);
    puts_(&b, "[metadata]\nnote = \"end\"\n");
    char err[256];
    int line = -1;
    sl_toml *t = sl_toml_parse(b.d, b.n, err, sizeof err, &line);
    if (!t)
        fail_msg("refused at line %d: %s", line, err);
    const sl_toml *pk = sl_toml_get(t, "package");
    assert_int_equal(sl_toml_count(pk), N);
    for (int i = 0; i < N; i += 9973) {
        char want[32];
        const sl_toml *p = sl_toml_at(pk, (size_t)i);
        snprintf(want, sizeof want, "pkg-%06d", i);
        assert_string_equal(sl_toml_get_str(p, "name"), want);
        snprintf(want, sizeof want, "1.%d.0", i % 97);
        assert_string_equal(sl_toml_get_str(p, "version"), want);
        snprintf(want, sizeof want, "pkg-%06d 1.0.0", (i + 7) % N);
        assert_string_equal(sl_toml_str(sl_toml_at(sl_toml_get(p, "dependencies"), 1), NULL), want);
        assert_int_equal(sl_toml_line(p), 4 + 10 * i);
    }
    assert_string_equal(sl_toml_get_str(sl_toml_at(pk, N - 1), "name"), "pkg-099999");
    assert_string_equal(str_at(t, "metadata.note"), "end");
    sl_toml_free(t);
    free(b.d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_documents),
        cmocka_unit_test(test_invalid_documents),
        cmocka_unit_test(test_dotted_keys_are_relative_to_the_current_table),
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_value_lines),
        cmocka_unit_test(test_error_reporting_edges),
        cmocka_unit_test(test_nesting_depth_limit),
        cmocka_unit_test(test_key_length_limit),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_cargo_lock_v3),
        cmocka_unit_test(test_cargo_lock_v4),
        cmocka_unit_test(test_cargo_lock_v1_metadata),
        cmocka_unit_test(test_poetry_lock),
        cmocka_unit_test(test_uv_lock),
        cmocka_unit_test(test_pdm_lock),
        cmocka_unit_test(test_pyproject_sources),
        cmocka_unit_test(test_cargo_config),
        cmocka_unit_test(test_every_prefix_of_cargo_locks),
        cmocka_unit_test(test_every_prefix_of_python_locks),
        cmocka_unit_test(test_every_prefix_of_configs),
        cmocka_unit_test(test_every_prefix_of_valid_cases),
        cmocka_unit_test(test_crlf_documents_give_the_same_tree),
        cmocka_unit_test(test_mutated_documents_never_crash),
        cmocka_unit_test(test_lockfile_with_100000_packages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
