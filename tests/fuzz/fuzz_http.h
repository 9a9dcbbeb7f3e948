/* Checks shared by fuzz_http_request.c and fuzz_http_response.c. */
#ifndef SLUICE_FUZZ_HTTP_H
#define SLUICE_FUZZ_HTTP_H

#include <strings.h>

#include "fuzz_util.h"
#include "http_parse.h"

typedef sl_http_status (*http_parse_fn)(const char *buf, size_t len, sl_http_head *out);

/* 4 KiB each: kept off the stack. */
static sl_http_head g_head, g_head2;

static bool span_in(sl_span s, const char *buf, size_t len)
{
    return s.p == NULL ? s.len == 0 : (s.p >= buf && s.len <= len && s.p + s.len <= buf + len);
}

static bool is_ows_c(char c)
{
    return c == ' ' || c == '\t';
}

static bool name_is(sl_span n, const char *lit)
{
    return n.len == strlen(lit) && !strncasecmp(n.p, lit, n.len);
}

/* Invariants of any result; more for OK. */
static void check_head(const sl_http_head *h, sl_http_status st, const char *buf, size_t len,
                       bool request)
{
    FUZZ_CHECK(st == SL_HTTP_OK || st == SL_HTTP_INCOMPLETE || st == SL_HTTP_BAD ||
                   st == SL_HTTP_TOO_LARGE,
               "status %d", (int)st);
    if (st == SL_HTTP_BAD || st == SL_HTTP_TOO_LARGE)
        FUZZ_CHECK(h->error != NULL && h->error[0], "refusal without an error text");
    if (st == SL_HTTP_INCOMPLETE)
        FUZZ_CHECK(len < SL_HTTP_MAX_HEAD, "INCOMPLETE at %zu bytes (limit %d)", len,
                   SL_HTTP_MAX_HEAD);
    if (st != SL_HTTP_OK)
        return;
    FUZZ_CHECK(h->error == NULL, "OK with an error text '%s'", h->error);
    FUZZ_CHECK(h->head_len >= 4 && h->head_len <= len && h->head_len <= SL_HTTP_MAX_HEAD,
               "head_len %zu of %zu", h->head_len, len);
    FUZZ_CHECK(!memcmp(buf + h->head_len - 4, "\r\n\r\n", 4), "head does not end in CRLF CRLF");
    FUZZ_CHECK(h->nheaders <= SL_HTTP_MAX_HEADERS, "%zu headers", h->nheaders);
    FUZZ_CHECK(h->version_minor == 0 || h->version_minor == 1, "HTTP/1.%d", h->version_minor);
    FUZZ_CHECK(h->content_length >= -1, "content_length %lld", (long long)h->content_length);
    size_t hl = h->head_len;
    FUZZ_CHECK(span_in(h->method_text, buf, hl) && span_in(h->target, buf, hl) &&
                   span_in(h->reason, buf, hl) && span_in(h->host, buf, hl),
               "start-line span outside the head");
    if (request) {
        FUZZ_CHECK(h->target.len > 0 && h->method_text.len > 0, "empty method or target");
        for (size_t i = 0; i < h->target.len; i++)
            FUZZ_CHECK(h->target.p[i] >= 0x21 && h->target.p[i] <= 0x7e, "target byte 0x%02x",
                       (unsigned char)h->target.p[i]);
    } else {
        FUZZ_CHECK(h->status >= 100 && h->status <= 599, "status %d", h->status);
    }

    bool has_te = false, has_cl = false;
    size_t hosts = 0;
    for (size_t i = 0; i < h->nheaders; i++) {
        const sl_http_header *x = &h->headers[i];
        FUZZ_CHECK(span_in(x->name, buf, hl) && span_in(x->value, buf, hl), "header %zu outside", i);
        FUZZ_CHECK(x->name.len > 0, "empty header name");
        FUZZ_CHECK(x->value.len == 0 ||
                       (!is_ows_c(x->value.p[0]) && !is_ows_c(x->value.p[x->value.len - 1])),
                   "header value not trimmed");
        for (size_t k = 0; k < x->value.len; k++) {
            unsigned char c = (unsigned char)x->value.p[k];
            FUZZ_CHECK(c != '\r' && c != '\n' && c != 0, "CR/LF/NUL in header value");
        }
        static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection",
                                           "Proxy-Authenticate", "Proxy-Authorization",
                                           "TE", "Trailer", "Upgrade" };
        for (size_t k = 0; k < sizeof hop / sizeof hop[0]; k++)
            if (name_is(x->name, hop[k]))
                FUZZ_CHECK(x->hop_by_hop, "%s not marked hop-by-hop", hop[k]);
        FUZZ_CHECK(sl_http_header_is(x, "Host") == name_is(x->name, "host"), "sl_http_header_is");
        if (name_is(x->name, "Transfer-Encoding")) {
            has_te = true;
            FUZZ_CHECK(!x->hop_by_hop, "Transfer-Encoding dropped");
        }
        if (name_is(x->name, "Content-Length"))
            has_cl = true;
        if (name_is(x->name, "Host")) {
            hosts++;
            FUZZ_CHECK(h->host.p == x->value.p && h->host.len == x->value.len, "host span");
        }
    }
    FUZZ_CHECK(hosts <= 1, "%zu Host headers accepted", hosts);
    FUZZ_CHECK(hosts == 1 || h->host.p == NULL, "host set without a Host header");
    /* Framing: what decides where the body ends. */
    if (request) {
        FUZZ_CHECK(!(has_te && has_cl), "request with both TE and CL accepted");
        FUZZ_CHECK(h->chunked == has_te, "request chunked=%d but TE present=%d", h->chunked, has_te);
        FUZZ_CHECK((h->content_length >= 0) == has_cl, "request CL %lld but CL header present=%d",
                   (long long)h->content_length, has_cl);
        FUZZ_CHECK(!(has_te && h->version_minor == 0), "TE in HTTP/1.0 accepted");
        FUZZ_CHECK(hosts == 1 || h->version_minor == 0 || h->method == SL_METHOD_CONNECT,
                   "HTTP/1.1 request without Host accepted");
    } else {
        if (has_te) {
            FUZZ_CHECK(h->content_length == -1, "response with TE keeps CL %lld",
                       (long long)h->content_length);
            for (size_t i = 0; i < h->nheaders; i++)
                if (has_cl && name_is(h->headers[i].name, "Content-Length"))
                    FUZZ_CHECK(h->headers[i].hop_by_hop, "CL forwarded next to TE");
            if (has_cl)
                FUZZ_CHECK(h->conn_close, "TE+CL response keeps the connection");
        } else {
            FUZZ_CHECK(!h->chunked, "chunked without TE");
            FUZZ_CHECK((h->content_length >= 0) == has_cl, "response CL");
        }
        if (!has_te && !has_cl && h->status >= 200 && h->status != 204 && h->status != 304)
            FUZZ_CHECK(h->conn_close, "unframed response body not delimited by close");
    }
}

/* The result for a buffer must not change as bytes arrive: every prefix of
 * a complete head is INCOMPLETE, a refusal stays a refusal, and the bytes
 * after the head do not change it. */
static void check_prefixes(http_parse_fn parse, const char *buf, size_t len, bool request)
{
    sl_http_status full = parse(buf, len, &g_head);
    check_head(&g_head, full, buf, len, request);
    size_t head_len = full == SL_HTTP_OK ? g_head.head_len : 0;
    size_t nhdr = g_head.nheaders;
    bool chunked = g_head.chunked;
    int64_t cl = g_head.content_length;

    size_t cuts[24], ncut = 0;
    uint64_t seed = fuzz_hash((const uint8_t *)buf, len < 64 ? len : 64);
    if (len <= 20) {
        for (size_t k = 0; k < len; k++)
            cuts[ncut++] = k;
    } else {
        cuts[ncut++] = 0;
        cuts[ncut++] = 1;
        cuts[ncut++] = len - 1;
        if (head_len) {
            cuts[ncut++] = head_len - 1;
            cuts[ncut++] = head_len;
        }
        while (ncut < 20)
            cuts[ncut++] = (size_t)(fuzz_rand(&seed) % len);
    }
    for (size_t i = 0; i < ncut; i++) {
        size_t k = cuts[i];
        sl_http_status st = parse(buf, k, &g_head2);
        check_head(&g_head2, st, buf, k, request);
        if (full == SL_HTTP_OK) {
            if (k < head_len)
                FUZZ_CHECK(st == SL_HTTP_INCOMPLETE,
                           "complete head (%zu bytes) but its %zu-byte prefix gives %d (%s)",
                           head_len, k, (int)st, g_head2.error ? g_head2.error : "");
            else
                FUZZ_CHECK(st == SL_HTTP_OK && g_head2.head_len == head_len &&
                               g_head2.nheaders == nhdr && g_head2.chunked == chunked &&
                               g_head2.content_length == cl,
                           "%zu bytes of a %zu-byte head parse differently", k, head_len);
        } else if (full == SL_HTTP_INCOMPLETE) {
            FUZZ_CHECK(st == SL_HTTP_INCOMPLETE, "incomplete at %zu bytes but %d at %zu", len,
                       (int)st, k);
        }
        if (st == SL_HTTP_BAD || st == SL_HTTP_TOO_LARGE)
            FUZZ_CHECK(full == SL_HTTP_BAD || full == SL_HTTP_TOO_LARGE,
                       "%zu-byte prefix refused (%s) but %zu bytes give %d", k, g_head2.error, len,
                       (int)full);
    }
}

#endif
