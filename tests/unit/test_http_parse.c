/* Unit tests for proxy/proto/http_parse.c: strict HTTP/1.x heads, absolute-form
 * targets and chunked framing. Table-driven: each row is one behaviour. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

/* A literal with its exact length, so rows may hold NUL bytes. */
#define RAW(s) .raw = (s), .len = sizeof(s) - 1

static const char *status_name(sl_http_status s)
{
    switch (s) {
    case SL_HTTP_OK: return "OK";
    case SL_HTTP_INCOMPLETE: return "INCOMPLETE";
    case SL_HTTP_BAD: return "BAD";
    case SL_HTTP_TOO_LARGE: return "TOO_LARGE";
    }
    return "?";
}

static bool span_is(sl_span s, const char *want)
{
    return s.p != NULL && s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

/* Is `name` one of the '|'-separated names in `list` (case-insensitive)? */
static bool in_list(const char *list, sl_span name)
{
    if (list == NULL)
        return false;
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, '|');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == name.len && strncasecmp(p, name.p, n) == 0)
            return true;
        if (!e)
            return false;
        p = e + 1;
    }
}

/* Fails the test with the row's name, so a table failure says which row. */
static void expect_status(const char *row, sl_http_status got, sl_http_status want,
                          const sl_http_head *h)
{
    if (got != want)
        fail_msg("%s: got %s (%s), want %s", row, status_name(got),
                 h->error ? h->error : "no error", status_name(want));
}

/* ---- requests ------------------------------------------------------------- */

typedef struct req_case {
    const char *name;
    const char *raw;
    size_t len;
    sl_http_status want;
    const char *err;       /* BAD/TOO_LARGE: a substring of the error */
    /* checked for OK */
    sl_http_method method;
    const char *target;
    int minor;
    bool has_cl;
    int64_t cl;
    bool chunked, close, expect;
    const char *host;      /* NULL: no Host */
    const char *hop;       /* exactly these header names are hop_by_hop */
    size_t nheaders;
} req_case;

static const req_case req_cases[] = {
    /* well-formed */
    {"simple CONNECT", RAW("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_CONNECT, "example.org:443", 1, .host = "example.org:443",
     .nheaders = 1},
    {"CONNECT without Host", RAW("CONNECT example.org:443 HTTP/1.1\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_CONNECT, "example.org:443", 1},
    {"absolute GET", RAW("GET http://example.org/a?b=c HTTP/1.1\r\nHost: example.org\r\n"
                         "User-Agent: t/1\r\nAccept: */*\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "http://example.org/a?b=c", 1, .host = "example.org",
     .nheaders = 3},
    {"HTTP/1.0 defaults to close, Host optional", RAW("GET http://a/ HTTP/1.0\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "http://a/", 0, .close = true},
    {"HTTP/1.0 keep-alive", RAW("GET http://a/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "http://a/", 0, .hop = "Connection", .nheaders = 1},
    {"HTTP/1.0 close beats keep-alive",
     RAW("GET http://a/ HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "http://a/", 0, .close = true, .hop = "Connection",
     .nheaders = 1},
    {"one leading CRLF tolerated", RAW("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .host = "a", .nheaders = 1},
    {"POST with Content-Length", RAW("POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "http://a/", 1, true, 5, .host = "a", .nheaders = 2},
    {"Content-Length 0", RAW("PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_PUT, "/x", 1, true, 0, .host = "a", .nheaders = 2},
    {"duplicate identical Content-Length folded",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, true, 5, .host = "a", .nheaders = 3},
    {"Content-Length list of identical values folded",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5,5\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, true, 5, .host = "a", .nheaders = 2},
    {"Content-Length leading zeros are still decimal",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, true, 7, .host = "a", .nheaders = 2},
    {"Content-Length 2^62 is the maximum",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4611686018427387904\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, true, INT64_C(4611686018427387904), .host = "a",
     .nheaders = 2},
    {"TE chunked", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, .chunked = true, .host = "a", .nheaders = 2},
    {"TE chunked is case-insensitive",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, .chunked = true, .host = "a", .nheaders = 2},
    {"TE gzip, chunked", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, .chunked = true, .host = "a", .nheaders = 2},
    {"TE across two lines, chunked last",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, .chunked = true, .host = "a", .nheaders = 3},
    {"Connection: Connection is harmless",
     RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: Connection\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .host = "a", .hop = "Connection", .nheaders = 2},
    {"Connection: close, x-foo marks X-Foo wherever it is",
     RAW("GET / HTTP/1.1\r\nX-Foo: 1\r\nHost: a\r\nConnection: close, x-foo\r\nX-Bar: 2\r\n"
         "x-FOO: 3\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .close = true, .host = "a",
     .hop = "Connection|X-Foo", .nheaders = 5},
    {"Connection empty list elements ignored",
     RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: ,close,, \r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .close = true, .host = "a", .hop = "Connection",
     .nheaders = 2},
    {"fixed hop-by-hop set; Transfer-Encoding kept",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nKeep-Alive: 5\r\nProxy-Connection: keep-alive\r\n"
         "Proxy-Authorization: Basic eA==\r\nProxy-Authenticate: x\r\nTE: trailers\r\n"
         "Trailer: X-T\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\nX-Keep: y\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_POST, "/", 1, .chunked = true, .host = "a",
     .hop = "Keep-Alive|Proxy-Connection|Proxy-Authorization|Proxy-Authenticate|TE|Trailer|Upgrade",
     .nheaders = 10},
    {"Expect: 100-continue", RAW("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
                                 "Content-Length: 1\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_PUT, "/", 1, true, 1, .expect = true, .host = "a", .nheaders = 3},
    {"Expect: 100-continue ignored in HTTP/1.0",
     RAW("PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_PUT, "/", 0, true, 1, .close = true, .nheaders = 2},
    {"Expect other value", RAW("PUT / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_PUT, "/", 1, .host = "a", .nheaders = 2},
    {"OWS trimmed around value", RAW("GET / HTTP/1.1\r\nHost: \t a.example \t \r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .host = "a.example", .nheaders = 1},
    {"empty header value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .host = "a", .nheaders = 2},
    {"HTAB and obs-text in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-V: a\tb \xff\x80\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_GET, "/", 1, .host = "a", .nheaders = 2},
    {"methods are case-sensitive: get is OTHER", RAW("get / HTTP/1.1\r\nHost: a\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_OTHER, "/", 1, .host = "a", .nheaders = 1},
    {"extension method", RAW("PROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_OTHER, "/d", 1, .host = "a", .nheaders = 1},
    {"asterisk target", RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
     SL_HTTP_OK, NULL, SL_METHOD_OPTIONS, "*", 1, .host = "a", .nheaders = 1},

    /* request line */
    {"two leading CRLFs", RAW("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "empty line"},
    {"leading bare LF", RAW("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "bare LF"},
    {"HTTP/2.0", RAW("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"HTTP/1.2", RAW("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"HTTP/0.9", RAW("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"lowercase version", RAW("GET / http/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"missing version", RAW("GET /\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "no HTTP version"},
    {"missing version after space", RAW("GET / \r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"trailing space after version", RAW("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"two spaces after method", RAW("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "space"},
    {"two spaces before version", RAW("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "version"},
    {"tab as separator", RAW("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "one space"},
    {"tab before version", RAW("GET /\tHTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "request target"},
    {"empty method", RAW(" / HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "method"},
    {"method not a token", RAW("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "method"},
    {"non-ASCII in target", RAW("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "target"},
    {"DEL in target", RAW("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "target"},
    {"NUL in target", RAW("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "target"},
    {"bare CR in request line", RAW("GET /\r HTTP/1.1\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "bare CR"},
    {"bare LF ends request line", RAW("GET / HTTP/1.1\nHost: a\r\n\r\n"), SL_HTTP_BAD, "bare LF"},
    {"LF-only message", RAW("GET / HTTP/1.1\nHost: a\n\n"), SL_HTTP_BAD, "bare LF"},
    {"empty request line", RAW("\r\n\r\n"), SL_HTTP_BAD, "empty line"},

    /* header lines */
    {"bare LF ends a header", RAW("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n"), SL_HTTP_BAD, "bare LF"},
    {"bare LF as blank line", RAW("GET / HTTP/1.1\r\nHost: a\r\n\n"), SL_HTTP_BAD, "bare LF"},
    {"bare CR inside a value", RAW("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n"), SL_HTTP_BAD, "bare CR"},
    {"CR CR LF", RAW("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n"), SL_HTTP_BAD, "bare CR"},
    {"bare CR as blank line", RAW("GET / HTTP/1.1\r\nHost: a\r\n\rX"), SL_HTTP_BAD, "bare CR"},
    {"NUL in value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\0b\r\n\r\n"), SL_HTTP_BAD, "control"},
    {"DEL in value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x7f\r\n\r\n"), SL_HTTP_BAD, "control"},
    {"VT in value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x0b\r\n\r\n"), SL_HTTP_BAD, "control"},
    {"obs-fold", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n"), SL_HTTP_BAD, "obs-fold"},
    {"obs-fold with tab", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n\ttwo\r\n\r\n"), SL_HTTP_BAD, "obs-fold"},
    {"whitespace before the first header", RAW("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), SL_HTTP_BAD, "whitespace"},
    {"space before colon", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n"),
     SL_HTTP_BAD, "whitespace between"},
    {"tab before colon", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length\t: 5\r\n\r\n"),
     SL_HTTP_BAD, "whitespace between"},
    {"empty header name", RAW("GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n"), SL_HTTP_BAD, "empty header name"},
    {"no colon", RAW("GET / HTTP/1.1\r\nHost: a\r\nJustAName\r\n\r\n"), SL_HTTP_BAD, "colon"},
    {"header name not a token", RAW("GET / HTTP/1.1\r\nHost: a\r\nX(a): b\r\n\r\n"), SL_HTTP_BAD, "token"},
    {"non-ASCII header name", RAW("GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: b\r\n\r\n"), SL_HTTP_BAD, "token"},

    /* Host */
    {"two Host headers", RAW("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), SL_HTTP_BAD, "Host"},
    {"two Host headers, different case", RAW("GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\n\r\n"),
     SL_HTTP_BAD, "Host"},
    {"HTTP/1.1 GET without Host", RAW("GET http://a/ HTTP/1.1\r\n\r\n"), SL_HTTP_BAD, "without Host"},

    /* Content-Length */
    {"conflicting Content-Length headers",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
     SL_HTTP_BAD, "conflicting"},
    {"Content-Length 5, 6", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length list then a differing header",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\nContent-Length: 6\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length with +", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length negative", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length with inner space", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length hex", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length empty", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length trailing comma", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length 2^62+1", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4611686018427387905\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"Content-Length overflowing 64 bits",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},

    /* Transfer-Encoding */
    {"TE with CL", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
     SL_HTTP_BAD, "both"},
    {"CL with TE (other order)",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
     SL_HTTP_BAD, "both"},
    {"TE gzip only", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"TE chunked, gzip", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"TE chunked twice", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"TE chunked then gzip on another line",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"TE empty", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n"), SL_HTTP_BAD, "tokens"},
    {"TE trailing comma", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n"),
     SL_HTTP_BAD, "tokens"},
    {"TE with parameter", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n"),
     SL_HTTP_BAD, "tokens"},
    {"TE near-miss xchunked", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"TE in HTTP/1.0", RAW("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), SL_HTTP_BAD, "HTTP/1.0"},

    /* Connection */
    {"Connection: content-length", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: content-length\r\n\r\n"),
     SL_HTTP_BAD, "Connection names"},
    {"Connection: Transfer-Encoding", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: close, Transfer-Encoding\r\n\r\n"),
     SL_HTTP_BAD, "Connection names"},
    {"Connection: HOST", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: HOST\r\n\r\n"),
     SL_HTTP_BAD, "Connection names"},
    {"Connection element not a token", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n"),
     SL_HTTP_BAD, "tokens"},

    /* incomplete */
    {"empty input", RAW(""), SL_HTTP_INCOMPLETE},
    {"lone CR", RAW("\r"), SL_HTTP_INCOMPLETE},
    {"leading CRLF only", RAW("\r\n"), SL_HTTP_INCOMPLETE},
    {"no blank line yet", RAW("GET / HTTP/1.1\r\nHost: a\r\n"), SL_HTTP_INCOMPLETE},
};

static void check_request_fields(const req_case *c, const sl_http_head *h)
{
    if (c->want != SL_HTTP_OK) {
        if (c->want != SL_HTTP_INCOMPLETE) {
            assert_non_null(h->error);
            if (c->err && strstr(h->error, c->err) == NULL)
                fail_msg("%s: error \"%s\" does not mention \"%s\"", c->name, h->error, c->err);
        }
        return;
    }
    assert_null(h->error);
    assert_int_equal(h->method, c->method);
    if (!span_is(h->target, c->target))
        fail_msg("%s: target \"%.*s\"", c->name, (int)h->target.len, h->target.p);
    assert_int_equal(h->version_minor, c->minor);
    assert_int_equal(h->content_length, c->has_cl ? c->cl : -1);
    assert_int_equal(h->chunked, c->chunked);
    if (h->conn_close != c->close)
        fail_msg("%s: conn_close %d", c->name, h->conn_close);
    assert_int_equal(h->expect_continue, c->expect);
    if (c->host)
        assert_true(span_is(h->host, c->host));
    else
        assert_null(h->host.p);
    assert_int_equal(h->nheaders, c->nheaders);
    for (size_t i = 0; i < h->nheaders; i++)
        if (h->headers[i].hop_by_hop != in_list(c->hop, h->headers[i].name))
            fail_msg("%s: header %.*s hop_by_hop=%d", c->name, (int)h->headers[i].name.len,
                     h->headers[i].name.p, h->headers[i].hop_by_hop);
    assert_int_equal(h->head_len, c->len);
}

static void test_request_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const req_case *c = &req_cases[i];
        sl_http_head h;
        expect_status(c->name, sl_http_parse_request(c->raw, c->len, &h), c->want, &h);
        check_request_fields(c, &h);
    }
}

/* A valid request arriving in pieces must never be judged before it is
 * whole: every strict prefix is INCOMPLETE, never BAD. */
static void test_request_every_prefix_is_incomplete(void **state)
{
    (void)state;
    size_t rows = 0;
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const req_case *c = &req_cases[i];
        if (c->want != SL_HTTP_OK)
            continue;
        rows++;
        for (size_t n = 0; n < c->len; n++) {
            sl_http_head h;
            char name[128];
            snprintf(name, sizeof name, "%s (prefix %zu)", c->name, n);
            expect_status(name, sl_http_parse_request(c->raw, n, &h), SL_HTTP_INCOMPLETE, &h);
            assert_null(h.error);
        }
    }
    assert_true(rows >= 25); /* the table really has OK rows to walk */
}

/* Bytes after the head (a body, a pipelined request) are not part of it. */
static void test_request_head_len_excludes_body(void **state)
{
    (void)state;
    static const char req[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET";
    sl_http_head h;
    assert_int_equal(sl_http_parse_request(req, sizeof req - 1, &h), SL_HTTP_OK);
    assert_int_equal(h.head_len, sizeof req - 1 - strlen("helloGET"));
    assert_int_equal(h.content_length, 5);

    /* a body that looks like a bare LF or garbage does not taint the head */
    static const char req2[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n\n\r\x01";
    assert_int_equal(sl_http_parse_request(req2, sizeof req2 - 1, &h), SL_HTTP_OK);
    assert_int_equal(h.head_len, sizeof req2 - 4);
}

static void test_request_methods(void **state)
{
    (void)state;
    static const struct {
        const char *m;
        sl_http_method want;
    } t[] = {
        {"GET", SL_METHOD_GET},         {"HEAD", SL_METHOD_HEAD},     {"POST", SL_METHOD_POST},
        {"PUT", SL_METHOD_PUT},         {"DELETE", SL_METHOD_DELETE}, {"OPTIONS", SL_METHOD_OPTIONS},
        {"PATCH", SL_METHOD_PATCH},     {"TRACE", SL_METHOD_TRACE},   {"CONNECT", SL_METHOD_CONNECT},
        {"Get", SL_METHOD_OTHER},       {"GETX", SL_METHOD_OTHER},    {"GE", SL_METHOD_OTHER},
        {"connect", SL_METHOD_OTHER},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char buf[128];
        int n = snprintf(buf, sizeof buf, "%s / HTTP/1.1\r\nHost: a\r\n\r\n", t[i].m);
        sl_http_head h;
        expect_status(t[i].m, sl_http_parse_request(buf, (size_t)n, &h), SL_HTTP_OK, &h);
        if (h.method != t[i].want)
            fail_msg("%s: method %d", t[i].m, h.method);
        assert_true(span_is(h.method_text, t[i].m));
    }
}

/* ---- request limits ----------------------------------------------------- */

/* "GET /aaa… HTTP/1.1" whose request line (without CRLF) is `line` bytes. */
static size_t make_long_line(char *buf, size_t line)
{
    const size_t fixed = strlen("GET / HTTP/1.1");
    memcpy(buf, "GET /", 5);
    memset(buf + 5, 'a', line - fixed);
    memcpy(buf + 5 + (line - fixed), " HTTP/1.1\r\nHost: a\r\n\r\n", 22);
    return line + 2 + 9 + 2;
}

static void test_request_line_limit(void **state)
{
    (void)state;
    char *buf = malloc(SL_HTTP_MAX_LINE + 64);
    assert_non_null(buf);
    sl_http_head h;

    size_t n = make_long_line(buf, SL_HTTP_MAX_LINE);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_OK);
    assert_int_equal(h.target.len, SL_HTTP_MAX_LINE - strlen("GET  HTTP/1.1"));
    /* up to the CR, and the CR without its LF, nothing is over the limit */
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_LINE, &h), SL_HTTP_INCOMPLETE);
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_LINE + 1, &h), SL_HTTP_INCOMPLETE);

    n = make_long_line(buf, SL_HTTP_MAX_LINE + 1);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_TOO_LARGE);
    assert_non_null(h.error);
    /* detected as soon as 8193 bytes have arrived without a CRLF */
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_LINE, &h), SL_HTTP_INCOMPLETE);
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_LINE + 1, &h), SL_HTTP_TOO_LARGE);

    /* the tolerated leading CRLF is not part of the request line */
    buf[0] = '\r';
    buf[1] = '\n';
    n = make_long_line(buf + 2, SL_HTTP_MAX_LINE);
    assert_int_equal(sl_http_parse_request(buf, n + 2, &h), SL_HTTP_OK);
    assert_int_equal(h.head_len, n + 2);
    free(buf);
}

/* Request line plus `nh` headers "X-nnn: v". */
static size_t make_headers(char *buf, size_t cap, size_t nh)
{
    size_t n = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (size_t i = 1; i < nh; i++)
        n += (size_t)snprintf(buf + n, cap - n, "X-%03zu: v\r\n", i);
    n += (size_t)snprintf(buf + n, cap - n, "\r\n");
    return n;
}

static void test_request_header_count_limit(void **state)
{
    (void)state;
    static char buf[4096];
    sl_http_head h;
    size_t n = make_headers(buf, sizeof buf, SL_HTTP_MAX_HEADERS);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_OK);
    assert_int_equal(h.nheaders, SL_HTTP_MAX_HEADERS);

    n = make_headers(buf, sizeof buf, SL_HTTP_MAX_HEADERS + 1);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_TOO_LARGE);
    assert_non_null(strstr(h.error, "headers"));
}

/* A head of exactly `total` bytes: request line, Host, one X-Pad header
 * sized to fit, blank line. */
static size_t make_head_of(char *buf, size_t total)
{
    const char *pre = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: ";
    size_t p = strlen(pre);
    memcpy(buf, pre, p);
    size_t pad = total - p - 4;
    memset(buf + p, 'p', pad);
    memcpy(buf + p + pad, "\r\n\r\n", 4);
    return total;
}

static void test_request_head_size_limit(void **state)
{
    (void)state;
    char *buf = malloc(SL_HTTP_MAX_HEAD + 4096);
    assert_non_null(buf);
    sl_http_head h;

    size_t n = make_head_of(buf, SL_HTTP_MAX_HEAD);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_OK);
    assert_int_equal(h.head_len, SL_HTTP_MAX_HEAD);
    assert_int_equal(sl_http_parse_request(buf, n - 1, &h), SL_HTTP_INCOMPLETE);

    n = make_head_of(buf, SL_HTTP_MAX_HEAD + 1);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_TOO_LARGE);
    /* the 32768-byte prefix can no longer become a valid head */
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_HEAD, &h), SL_HTTP_TOO_LARGE);
    assert_int_equal(sl_http_parse_request(buf, SL_HTTP_MAX_HEAD - 1, &h), SL_HTTP_INCOMPLETE);

    /* once the limit is reached, no length gets INCOMPLETE */
    n = make_head_of(buf, SL_HTTP_MAX_HEAD + 4000);
    for (size_t k = SL_HTTP_MAX_HEAD; k <= SL_HTTP_MAX_HEAD + 8; k++)
        assert_int_equal(sl_http_parse_request(buf, k, &h), SL_HTTP_TOO_LARGE);
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_TOO_LARGE);

    /* a leading CRLF counts toward the head limit */
    buf[0] = '\r';
    buf[1] = '\n';
    n = make_head_of(buf + 2, SL_HTTP_MAX_HEAD - 2) + 2;
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_OK);
    assert_int_equal(h.head_len, SL_HTTP_MAX_HEAD);
    n = make_head_of(buf + 2, SL_HTTP_MAX_HEAD - 1) + 2;
    assert_int_equal(sl_http_parse_request(buf, n, &h), SL_HTTP_TOO_LARGE);
    free(buf);
}

/* ---- responses ------------------------------------------------------------ */

typedef struct resp_case {
    const char *name;
    const char *raw;
    size_t len;
    sl_http_status want;
    const char *err;
    int status;
    const char *reason;
    int minor;
    bool has_cl;
    int64_t cl;
    bool chunked, close;
    const char *hop;
} resp_case;

static const resp_case resp_cases[] = {
    {"200 with Content-Length", RAW("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, true, 3},
    {"reason with spaces and obs-text", RAW("HTTP/1.1 404 Not \xe9 Found\r\nContent-Length: 0\r\n\r\n"),
     SL_HTTP_OK, NULL, 404, "Not \xe9 Found", 1, true, 0},
    {"204 with SP and empty reason", RAW("HTTP/1.1 204 \r\n\r\n"), SL_HTTP_OK, NULL, 204, "", 1},
    {"204 without SP", RAW("HTTP/1.1 204\r\n\r\n"), SL_HTTP_OK, NULL, 204, "", 1},
    {"100 Continue", RAW("HTTP/1.1 100 Continue\r\n\r\n"), SL_HTTP_OK, NULL, 100, "Continue", 1},
    {"103 Early Hints", RAW("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"),
     SL_HTTP_OK, NULL, 103, "Early Hints", 1},
    {"304 with Content-Length", RAW("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"),
     SL_HTTP_OK, NULL, 304, "Not Modified", 1, true, 10},
    {"304 without framing does not force close", RAW("HTTP/1.1 304 Not Modified\r\n\r\n"),
     SL_HTTP_OK, NULL, 304, "Not Modified", 1},
    {"chunked", RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, .chunked = true},
    {"gzip, chunked", RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, .chunked = true},
    {"close-delimited: no framing", RAW("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, .close = true},
    {"close-delimited: final coding gzip", RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, .close = true},
    {"TE and CL: chunked wins, CL dropped, close",
     RAW("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, .chunked = true, .close = true, .hop = "Content-Length"},
    {"Connection: close", RAW("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 1, true, 1, .close = true, .hop = "Connection"},
    {"HTTP/1.0 defaults to close", RAW("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 0, true, 1, .close = true},
    {"HTTP/1.0 keep-alive", RAW("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n"),
     SL_HTTP_OK, NULL, 200, "OK", 0, true, 1, .hop = "Connection"},
    {"599 is the highest status", RAW("HTTP/1.1 599 X\r\nContent-Length: 0\r\n\r\n"),
     SL_HTTP_OK, NULL, 599, "X", 1, true, 0},

    {"HTTP/1.0 with TE", RAW("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), SL_HTTP_BAD, "HTTP/1.0"},
    {"TE chunked, gzip", RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
     SL_HTTP_BAD, "final coding"},
    {"status 099", RAW("HTTP/1.1 099 X\r\n\r\n"), SL_HTTP_BAD, "100..599"},
    {"status 600", RAW("HTTP/1.1 600 X\r\n\r\n"), SL_HTTP_BAD, "100..599"},
    {"two-digit status", RAW("HTTP/1.1 20 OK\r\n\r\n"), SL_HTTP_BAD, "status"},
    {"four-digit status", RAW("HTTP/1.1 2000 OK\r\n\r\n"), SL_HTTP_BAD, "space"},
    {"status with letters", RAW("HTTP/1.1 2x0 OK\r\n\r\n"), SL_HTTP_BAD, "three digits"},
    {"HTTP/2", RAW("HTTP/2 200 OK\r\n\r\n"), SL_HTTP_BAD, "HTTP/1"},
    {"lowercase version", RAW("http/1.1 200 OK\r\n\r\n"), SL_HTTP_BAD, "HTTP/1"},
    {"two spaces before status", RAW("HTTP/1.1  200 OK\r\n\r\n"), SL_HTTP_BAD, "status"},
    {"tab before reason", RAW("HTTP/1.1 200\tOK\r\n\r\n"), SL_HTTP_BAD, "space"},
    {"control byte in reason", RAW("HTTP/1.1 200 O\x01K\r\n\r\n"), SL_HTTP_BAD, "reason"},
    {"leading CRLF", RAW("\r\nHTTP/1.1 200 OK\r\n\r\n"), SL_HTTP_BAD, "status line"},
    {"conflicting CL", RAW("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
     SL_HTTP_BAD, "Content-Length"},
    {"obs-fold", RAW("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"), SL_HTTP_BAD, "obs-fold"},
    {"bare LF", RAW("HTTP/1.1 200 OK\nContent-Length: 0\n\n"), SL_HTTP_BAD, "bare LF"},
    {"space before colon", RAW("HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"), SL_HTTP_BAD, "colon"},
    {"Connection names Transfer-Encoding",
     RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n"),
     SL_HTTP_BAD, "Connection names"},
    {"incomplete", RAW("HTTP/1.1 200 OK\r\n"), SL_HTTP_INCOMPLETE},
};

static void test_response_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++) {
        const resp_case *c = &resp_cases[i];
        sl_http_head h;
        expect_status(c->name, sl_http_parse_response(c->raw, c->len, &h), c->want, &h);
        if (c->want != SL_HTTP_OK) {
            if (c->want != SL_HTTP_INCOMPLETE && c->err && strstr(h.error, c->err) == NULL)
                fail_msg("%s: error \"%s\" does not mention \"%s\"", c->name, h.error, c->err);
            continue;
        }
        assert_null(h.error);
        assert_int_equal(h.status, c->status);
        if (!span_is(h.reason, c->reason))
            fail_msg("%s: reason \"%.*s\"", c->name, (int)h.reason.len, h.reason.p);
        assert_int_equal(h.version_minor, c->minor);
        assert_int_equal(h.content_length, c->has_cl ? c->cl : -1);
        assert_int_equal(h.chunked, c->chunked);
        if (h.conn_close != c->close)
            fail_msg("%s: conn_close %d", c->name, h.conn_close);
        for (size_t k = 0; k < h.nheaders; k++)
            if (h.headers[k].hop_by_hop != in_list(c->hop, h.headers[k].name))
                fail_msg("%s: header %.*s hop_by_hop=%d", c->name, (int)h.headers[k].name.len,
                         h.headers[k].name.p, h.headers[k].hop_by_hop);
        assert_int_equal(h.head_len, c->len);
    }
}

static void test_response_every_prefix_is_incomplete(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++) {
        const resp_case *c = &resp_cases[i];
        if (c->want != SL_HTTP_OK)
            continue;
        for (size_t n = 0; n < c->len; n++) {
            sl_http_head h;
            char name[128];
            snprintf(name, sizeof name, "%s (prefix %zu)", c->name, n);
            expect_status(name, sl_http_parse_response(c->raw, n, &h), SL_HTTP_INCOMPLETE, &h);
        }
    }
}

static void test_response_status_line_limit(void **state)
{
    (void)state;
    char *buf = malloc(SL_HTTP_MAX_LINE + 64);
    assert_non_null(buf);
    sl_http_head h;
    memcpy(buf, "HTTP/1.1 200 ", 13);
    memset(buf + 13, 'r', SL_HTTP_MAX_LINE - 13);
    memcpy(buf + SL_HTTP_MAX_LINE, "\r\n\r\n", 4);
    assert_int_equal(sl_http_parse_response(buf, SL_HTTP_MAX_LINE + 4, &h), SL_HTTP_OK);
    buf[SL_HTTP_MAX_LINE] = 'r';
    assert_int_equal(sl_http_parse_response(buf, SL_HTTP_MAX_LINE + 1, &h), SL_HTTP_TOO_LARGE);
    free(buf);
}

static void test_response_has_body(void **state)
{
    (void)state;
    static const struct {
        sl_http_method m;
        int status;
        bool want;
    } t[] = {
        {SL_METHOD_GET, 200, true},      {SL_METHOD_GET, 404, true},
        {SL_METHOD_POST, 500, true},     {SL_METHOD_HEAD, 200, false},
        {SL_METHOD_HEAD, 404, false},    {SL_METHOD_GET, 100, false},
        {SL_METHOD_GET, 101, false},     {SL_METHOD_GET, 199, false},
        {SL_METHOD_GET, 204, false},     {SL_METHOD_GET, 304, false},
        {SL_METHOD_GET, 205, true},      {SL_METHOD_CONNECT, 200, false},
        {SL_METHOD_CONNECT, 407, true},  {SL_METHOD_OTHER, 200, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (sl_http_response_has_body(t[i].m, t[i].status) != t[i].want)
            fail_msg("method %d status %d: want %d", t[i].m, t[i].status, t[i].want);
}

static void test_header_is(void **state)
{
    (void)state;
    sl_http_header h = {.name = {"Content-Length", 14}};
    assert_true(sl_http_header_is(&h, "content-length"));
    assert_true(sl_http_header_is(&h, "CONTENT-LENGTH"));
    assert_false(sl_http_header_is(&h, "Content-Lengt"));
    assert_false(sl_http_header_is(&h, "Content-Lengths"));
}

/* ---- absolute-form -------------------------------------------------------- */

typedef struct abs_case {
    const char *target;
    bool ok;
    const char *authority;  /* ok: expected */
    const char *path;       /* ok: expected */
    bool needs_slash;
    const char *err;        /* !ok: substring of the error */
} abs_case;

static const abs_case abs_cases[] = {
    {"http://example.org/a/b?c=d", .ok = true, .authority = "example.org", .path = "/a/b?c=d"},
    {"http://example.org", .ok = true, .authority = "example.org", .path = "/"},
    {"http://example.org/", .ok = true, .authority = "example.org", .path = "/"},
    {"http://example.org:8080", .ok = true, .authority = "example.org:8080", .path = "/"},
    {"http://example.org:8080/x", .ok = true, .authority = "example.org:8080", .path = "/x"},
    {"HTTP://Example.ORG/", .ok = true, .authority = "Example.ORG", .path = "/"},
    {"hTtP://x/", .ok = true, .authority = "x", .path = "/"},
    {"http://example.org?q=1", .ok = true, .authority = "example.org", .path = "?q=1", .needs_slash = true},
    {"http://[2001:db8::1]:80/x", .ok = true, .authority = "[2001:db8::1]:80", .path = "/x"},
    {"http://a/p@q:r", .ok = true, .authority = "a", .path = "/p@q:r"},      /* '@' in the path is fine */
    {"http://a//b", .ok = true, .authority = "a", .path = "//b"},
    {"http://user@host/", .err = "userinfo"},
    {"http://user:pw@host/", .err = "userinfo"},
    {"http://evil@good?x", .err = "userinfo"},
    {"http://host/#frag", .err = "fragment"},
    {"http://host#frag", .err = "fragment"},
    {"http:///path", .err = "empty host"},
    {"http://", .err = "empty host"},
    {"http://?q", .err = "empty host"},
    {"https://host/", .err = "absolute-form https:// is not supported; use CONNECT"},
    {"HTTPS://host/", .err = "use CONNECT"},
    {"ftp://host/", .err = "only http://"},
    {"ws://host/", .err = "only http://"},
    {"/path", .err = "not an absolute URI"},
    {"*", .err = "not an absolute URI"},
    {"", .err = "not an absolute URI"},
    {":foo", .err = "not an absolute URI"},
    {"example.org:443", .err = "only http://"},
    {"http:/host", .err = "'//'"},
    {"http:host", .err = "'//'"},
    {"http://host/a b", .err = "space"},
    {"http://host/\x01", .err = "control"},
    {"http://h\xc3\xa9/", .err = "non-ASCII"},
};

static void test_absolute_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof abs_cases / sizeof abs_cases[0]; i++) {
        const abs_case *c = &abs_cases[i];
        sl_span t = {c->target, strlen(c->target)};
        sl_span auth = {NULL, 0}, path = {NULL, 0};
        const char *err = NULL;
        bool ok = sl_http_parse_absolute(t, &auth, &path, &err);
        if (ok != c->ok)
            fail_msg("%s: got %d (%s)", c->target, ok, err ? err : "");
        if (!ok) {
            assert_non_null(err);
            if (strstr(err, c->err) == NULL)
                fail_msg("%s: error \"%s\" does not mention \"%s\"", c->target, err, c->err);
            continue;
        }
        if (!span_is(auth, c->authority) || !span_is(path, c->path))
            fail_msg("%s: authority \"%.*s\" path \"%.*s\"", c->target, (int)auth.len, auth.p,
                     (int)path.len, path.p);
        assert_int_equal(sl_http_path_needs_slash(path), c->needs_slash);
    }
}

/* ---- chunked -------------------------------------------------------------- */

typedef struct chunk_case {
    const char *name;
    const char *raw;
    size_t len;
    int tail;            /* bytes after the body's end; -1: a syntax error */
    bool done;           /* the body ended within raw */
    const char *err;
} chunk_case;

static const chunk_case chunk_cases[] = {
    {"one chunk", RAW("5\r\nhello\r\n0\r\n\r\n"), 0, true},
    {"two chunks", RAW("5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n"), 0, true},
    {"empty body", RAW("0\r\n\r\n"), 0, true},
    {"zeros in the last chunk", RAW("000\r\n\r\n"), 0, true},
    {"hex upper and lower", RAW("A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"), 0, true},
    {"extensions", RAW("5;name=val;q=\"x y\"\r\nhello\r\n0;last\r\n\r\n"), 0, true},
    {"BWS before ';'", RAW("5 \t;x\r\nhello\r\n0\r\n\r\n"), 0, true},
    {"trailers", RAW("5\r\nhello\r\n0\r\nX-Sum: abc\r\nY:\r\n\r\n"), 0, true},
    {"bytes after the end are not consumed", RAW("5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n"), 16, true},
    {"after the end, even garbage", RAW("0\r\n\r\n\n\x00"), 2, true},
    {"chunk data may hold CRLF", RAW("4\r\n\r\n\r\n\r\n0\r\n\r\n"), 0, true},
    {"16 hex digits", RAW("ffffffffffffffff\r\nabc"), 0, false},
    {"unfinished", RAW("5\r\nhel"), 0, false},
    {"before the trailer's end", RAW("0\r\nX: 1\r\n"), 0, false},
    {"last chunk, a trailer has begun", RAW("0\r\nX"), 0, false},

    {"empty size", RAW("\r\n"), -1, false, "not hexadecimal"},
    {"bad hex", RAW("g\r\nx\r\n"), -1, false, "not hexadecimal"},
    {"negative size", RAW("-5\r\nhello\r\n"), -1, false, "not hexadecimal"},
    {"0x prefix", RAW("0x5\r\nhello\r\n"), -1, false, "after chunk size"},
    {"17 hex digits", RAW("00000000000000005\r\nhello\r\n0\r\n\r\n"), -1, false, "16 hex digits"},
    {"space after size without extension", RAW("5 \r\nhello\r\n0\r\n\r\n"), -1, false, "whitespace"},
    {"leading space", RAW(" 5\r\nhello\r\n"), -1, false, "not hexadecimal"},
    {"bare LF after size", RAW("5\nhello\r\n0\r\n\r\n"), -1, false, "after chunk size"},
    {"bare CR after size", RAW("5\rhello\r\n"), -1, false, "CRLF"},
    {"missing CRLF after data", RAW("5\r\nhelloX\r\n0\r\n\r\n"), -1, false, "CRLF"},
    {"bare LF after data", RAW("5\r\nhello\n0\r\n\r\n"), -1, false, "CRLF"},
    {"CR without LF after data", RAW("5\r\nhello\rX"), -1, false, "CRLF"},
    {"control byte in extension", RAW("5;\x01\r\nhello\r\n0\r\n\r\n"), -1, false, "extension"},
    {"LF in extension", RAW("5;a\nb\r\nhello\r\n0\r\n\r\n"), -1, false, "extension"},
    {"trailer obs-fold", RAW("0\r\nA: b\r\n c\r\n\r\n"), -1, false, "obs-fold"},
    {"trailer without colon", RAW("0\r\nAbc\r\n\r\n"), -1, false, "token"},
    {"trailer with empty name", RAW("0\r\n: v\r\n\r\n"), -1, false, "token"},
    {"trailer name then space", RAW("0\r\nA : v\r\n\r\n"), -1, false, "token"},
    {"trailer with NUL", RAW("0\r\nA: \0\r\n\r\n"), -1, false, "control"},
    {"trailer bare LF", RAW("0\r\nA: b\n\r\n"), -1, false, "control"},
    {"final CR without LF", RAW("0\r\n\r\r"), -1, false, "CRLF"},
};

/* Feeds raw in pieces of `step` bytes (0: all at once). Returns the total
 * consumed, or -1 at the first error. Checks nothing is consumed after done. */
static long feed_pieces(const chunk_case *c, size_t step, const char **err)
{
    sl_chunked ch;
    sl_chunked_init(&ch);
    size_t off = 0;
    long total = 0;
    if (step == 0)
        step = c->len ? c->len : 1;
    while (off < c->len) {
        size_t n = c->len - off < step ? c->len - off : step;
        long r = sl_chunked_feed(&ch, c->raw + off, n, err);
        if (r < 0) {
            /* an error is final */
            const char *again = NULL;
            assert_int_equal(sl_chunked_feed(&ch, "0\r\n\r\n", 5, &again), -1);
            assert_non_null(again);
            return -1;
        }
        assert_true((size_t)r <= n);
        if ((size_t)r < n)
            assert_true(ch.done); /* fewer only once the body has ended */
        total += r;
        off += n;
    }
    assert_int_equal(ch.done, c->done);
    if (ch.done)
        assert_int_equal(sl_chunked_feed(&ch, "5\r\n", 3, NULL), 0);
    return total;
}

static void test_chunked_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof chunk_cases / sizeof chunk_cases[0]; i++) {
        const chunk_case *c = &chunk_cases[i];
        /* all at once, byte by byte, and in pieces of 2, 3 and 7 */
        static const size_t steps[] = {0, 1, 2, 3, 7};
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            const char *err = NULL;
            long got = feed_pieces(c, steps[s], &err);
            long want = c->tail < 0 ? -1 : (long)(c->len - (size_t)c->tail);
            if (got != want)
                fail_msg("%s (step %zu): got %ld, want %ld (%s)", c->name, steps[s], got, want,
                         err ? err : "");
            if (c->tail < 0) {
                assert_non_null(err);
                if (strstr(err, c->err) == NULL)
                    fail_msg("%s: error \"%s\" does not mention \"%s\"", c->name, err, c->err);
            }
        }
    }
}

/* Every split of a valid body in two pieces gives the same framing. */
static void test_chunked_every_split(void **state)
{
    (void)state;
    static const char body[] = "3;a=b\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nNEXT";
    const size_t len = sizeof body - 1, want = len - 4;
    for (size_t k = 0; k <= len; k++) {
        sl_chunked ch;
        const char *err = NULL;
        sl_chunked_init(&ch);
        long a = sl_chunked_feed(&ch, body, k, &err);
        long b = sl_chunked_feed(&ch, body + k, len - k, &err);
        if (a < 0 || b < 0 || (size_t)(a + b) != want || !ch.done)
            fail_msg("split at %zu: %ld + %ld (%s)", k, a, b, err ? err : "");
    }
}

/* trailer_field: set once a trailer field begins, never for the final CRLF
 * alone (exchange.c refuses trailers on requests that carry a credential). */
static void test_chunked_trailer_field_flag(void **state)
{
    (void)state;
    static const struct { const char *body; bool field; } cases[] = {
        { "0\r\n\r\n", false },
        { "3\r\nabc\r\n0\r\n\r\n", false },
        { "0\r\nAuthorization: x\r\n\r\n", true },
        { "0\r\nA", true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_chunked ch;
        sl_chunked_init(&ch);
        const char *err = NULL;
        assert_true(sl_chunked_feed(&ch, cases[i].body, strlen(cases[i].body), &err) >= 0);
        assert_int_equal(ch.trailer_field, cases[i].field);
    }
}

static void test_chunked_line_and_trailer_limits(void **state)
{
    (void)state;
    char *buf = malloc(SL_CHUNK_MAX_TRAILER + 64);
    assert_non_null(buf);
    const char *err = NULL;
    sl_chunked ch;

    /* size line of exactly 1024 bytes: "1;" + 1022 'x' */
    buf[0] = '1';
    buf[1] = ';';
    memset(buf + 2, 'x', SL_CHUNK_MAX_LINE - 2);
    memcpy(buf + SL_CHUNK_MAX_LINE, "\r\nZ\r\n0\r\n\r\n", 10);
    sl_chunked_init(&ch);
    assert_int_equal(sl_chunked_feed(&ch, buf, SL_CHUNK_MAX_LINE + 10, &err), SL_CHUNK_MAX_LINE + 10);
    assert_true(ch.done);
    /* 1025 bytes */
    memset(buf + 2, 'x', SL_CHUNK_MAX_LINE - 1);
    sl_chunked_init(&ch);
    assert_int_equal(sl_chunked_feed(&ch, buf, SL_CHUNK_MAX_LINE + 1, &err), -1);
    assert_non_null(strstr(err, "1024"));

    /* trailer section of exactly 32 KiB, final CRLF included */
    size_t n = 0;
    memcpy(buf, "0\r\nX: ", 6);
    n = 6;
    size_t pad = SL_CHUNK_MAX_TRAILER - strlen("X: ") - 4;
    memset(buf + n, 'v', pad);
    n += pad;
    memcpy(buf + n, "\r\n\r\n", 4);
    n += 4;
    sl_chunked_init(&ch);
    assert_int_equal(sl_chunked_feed(&ch, buf, n, &err), (long)n);
    assert_true(ch.done);
    /* one byte more */
    memset(buf + 6, 'v', pad + 1);
    memcpy(buf + 6 + pad + 1, "\r\n\r\n", 4);
    sl_chunked_init(&ch);
    assert_int_equal(sl_chunked_feed(&ch, buf, n + 1, &err), -1);
    assert_non_null(strstr(err, "32 KiB"));
    /* refused as soon as the limit is passed, not only at the final CRLF */
    memset(buf + 3, 'X', SL_CHUNK_MAX_TRAILER + 1);
    buf[4] = ':';
    sl_chunked_init(&ch);
    assert_int_equal(sl_chunked_feed(&ch, buf, 3 + SL_CHUNK_MAX_TRAILER, &err),
                     3 + SL_CHUNK_MAX_TRAILER);
    sl_chunked_init(&ch);
    err = NULL;
    assert_int_equal(sl_chunked_feed(&ch, buf, 3 + SL_CHUNK_MAX_TRAILER + 1, &err), -1);
    assert_non_null(strstr(err, "32 KiB"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_table),
        cmocka_unit_test(test_request_every_prefix_is_incomplete),
        cmocka_unit_test(test_request_head_len_excludes_body),
        cmocka_unit_test(test_request_methods),
        cmocka_unit_test(test_request_line_limit),
        cmocka_unit_test(test_request_header_count_limit),
        cmocka_unit_test(test_request_head_size_limit),
        cmocka_unit_test(test_response_table),
        cmocka_unit_test(test_response_every_prefix_is_incomplete),
        cmocka_unit_test(test_response_status_line_limit),
        cmocka_unit_test(test_response_has_body),
        cmocka_unit_test(test_header_is),
        cmocka_unit_test(test_absolute_table),
        cmocka_unit_test(test_chunked_table),
        cmocka_unit_test(test_chunked_every_split),
        cmocka_unit_test(test_chunked_trailer_field_flag),
        cmocka_unit_test(test_chunked_line_and_trailer_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
