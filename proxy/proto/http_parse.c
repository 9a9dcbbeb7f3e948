/* HTTP/1.x heads and chunked framing, parsed strictly (RFC 9110, RFC 9112).
 *
 * sluice sits between an untrusted client and an origin and relays bodies
 * unchanged, so it must frame every message exactly as a strict origin would:
 * anything two implementations might read differently (bare CR or LF,
 * obs-fold, whitespace before a colon, conflicting Content-Length, CL with
 * TE, a final coding other than chunked) is refused instead of guessed at.
 *
 * The head parser re-parses from the first byte on every call and keeps no
 * state; the chunked decoder is a byte-at-a-time state machine, so bodies
 * may arrive split anywhere. */
#include "http_parse.h"

#include <limits.h>
#include <string.h>

#define CL_MAX ((int64_t)1 << 62)

/* ---- character classes ---------------------------------------------------- */

/* tchar (RFC 9110 §5.6.2). */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* field-vchar / SP / HTAB, obs-text included: everything but CTLs. */
static bool is_field_byte(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* ASCII case-insensitive equality; locale-free on purpose. */
static bool ieq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return false;
    return true;
}

static bool span_ieq(sl_span s, const char *lit)
{
    return ieq(s.p, s.len, lit, strlen(lit));
}

static bool is_token(sl_span s)
{
    if (s.len == 0)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (!is_tchar((unsigned char)s.p[i]))
            return false;
    return true;
}

bool sl_http_header_is(const sl_http_header *h, const char *name)
{
    return span_ieq(h->name, name);
}

/* ---- lists ------------------------------------------------------------------ */

/* Next element of a comma-separated field value, OWS trimmed; may be empty.
 * *pos starts at 0 and ends past v.len. */
static bool list_next(sl_span v, size_t *pos, sl_span *elem)
{
    if (*pos > v.len)
        return false;
    size_t s = *pos, e = s;
    while (e < v.len && v.p[e] != ',')
        e++;
    *pos = e + 1;
    while (s < e && is_ows((unsigned char)v.p[s]))
        s++;
    while (e > s && is_ows((unsigned char)v.p[e - 1]))
        e--;
    elem->p = v.p + s;
    elem->len = e - s;
    return true;
}

/* ---- lines ------------------------------------------------------------------ */

enum { LINE_FOUND, LINE_SHORT, LINE_BAD };

/* Looks for the CRLF ending the line that starts at `pos`, not reading at or
 * past `lim`. LINE_FOUND: *stop is the CR. LINE_SHORT: no CRLF yet; *stop is
 * where the line's content ends so far (a CR in the last byte is not content,
 * its LF may still come). LINE_BAD: a CR or LF that is not part of a CRLF. */
static int find_eol(const char *buf, size_t pos, size_t lim, size_t *stop,
                    const char **err)
{
    for (size_t i = pos; i < lim; i++) {
        if (buf[i] == '\n') {
            *err = "bare LF in message head";
            return LINE_BAD;
        }
        if (buf[i] == '\r') {
            *stop = i;
            if (i + 1 >= lim)
                return LINE_SHORT;
            if (buf[i + 1] != '\n') {
                *err = "bare CR in message head";
                return LINE_BAD;
            }
            return LINE_FOUND;
        }
    }
    *stop = lim;
    return LINE_SHORT;
}

/* ---- start lines ------------------------------------------------------------ */

static bool parse_version(const char *p, size_t n, int *minor)
{
    if (n != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
        return false;
    *minor = p[7] - '0';
    return true;
}

static const struct {
    const char *name;
    sl_http_method m;
} methods[] = {
    {"GET", SL_METHOD_GET},         {"HEAD", SL_METHOD_HEAD},
    {"POST", SL_METHOD_POST},       {"PUT", SL_METHOD_PUT},
    {"DELETE", SL_METHOD_DELETE},   {"OPTIONS", SL_METHOD_OPTIONS},
    {"PATCH", SL_METHOD_PATCH},     {"TRACE", SL_METHOD_TRACE},
    {"CONNECT", SL_METHOD_CONNECT},
};

/* Methods are case-sensitive (RFC 9110 §9.1): "get" is SL_METHOD_OTHER. */
static sl_http_method method_of(sl_span t)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        size_t n = strlen(methods[i].name);
        if (t.len == n && memcmp(t.p, methods[i].name, n) == 0)
            return methods[i].m;
    }
    return SL_METHOD_OTHER;
}

/* method SP request-target SP HTTP-version, nothing else. */
static bool parse_request_line(const char *l, size_t n, sl_http_head *out)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)l[i]))
        i++;
    if (i == 0) {
        out->error = "request method is not a token";
        return false;
    }
    if (i >= n || l[i] != ' ') {
        out->error = "request line: method must be followed by one space";
        return false;
    }
    out->method_text = (sl_span){l, i};
    out->method = method_of(out->method_text);

    size_t ts = ++i;
    /* Visible ASCII only: no spaces, no controls, and no raw 0x80-0xFF, which
     * is not valid in a URI and which implementations decode differently. */
    while (i < n && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7f)
        i++;
    if (i == ts) {
        out->error = "request line: empty request target or more than one space";
        return false;
    }
    if (i >= n) {
        out->error = "request line: no HTTP version";
        return false;
    }
    if (l[i] != ' ') {
        out->error = "request line: invalid byte in request target";
        return false;
    }
    out->target = (sl_span){l + ts, i - ts};
    i++;
    if (!parse_version(l + i, n - i, &out->version_minor)) {
        out->error = "request line: version must be exactly HTTP/1.0 or HTTP/1.1";
        return false;
    }
    return true;
}

/* HTTP-version SP 3DIGIT [SP reason]. The SP before an empty reason is
 * optional: "HTTP/1.1 204" and "HTTP/1.1 204 " are both accepted, as many
 * origins send the former. */
static bool parse_status_line(const char *l, size_t n, sl_http_head *out)
{
    if (n < 12 || !parse_version(l, 8, &out->version_minor) || l[8] != ' ') {
        out->error = "status line: expected HTTP/1.0 or HTTP/1.1 and a space";
        return false;
    }
    int st = 0;
    for (size_t i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9') {
            out->error = "status line: status code is not three digits";
            return false;
        }
        st = st * 10 + (l[i] - '0');
    }
    if (st < 100 || st > 599) {
        out->error = "status line: status code outside 100..599";
        return false;
    }
    out->status = st;
    if (n == 12) {
        out->reason = (sl_span){l + 12, 0};
        return true;
    }
    if (l[12] != ' ') {
        out->error = "status line: status code must be followed by a space";
        return false;
    }
    for (size_t i = 13; i < n; i++) {
        if (!is_field_byte((unsigned char)l[i])) {
            out->error = "status line: control byte in reason phrase";
            return false;
        }
    }
    out->reason = (sl_span){l + 13, n - 13};
    return true;
}

/* ---- field lines ------------------------------------------------------------ */

static bool parse_field_line(const char *l, size_t n, sl_http_header *h,
                             const char **err)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)l[i]))
        i++;
    if (i < n && is_ows((unsigned char)l[i])) {
        /* RFC 9112 §5.1: MUST reject; proxies that strip it get smuggled past. */
        *err = "whitespace between header name and colon";
        return false;
    }
    if (i >= n || l[i] != ':') {
        *err = "header name is not a token or has no colon";
        return false;
    }
    if (i == 0) {
        *err = "empty header name";
        return false;
    }
    for (size_t k = i + 1; k < n; k++) {
        if (!is_field_byte((unsigned char)l[k])) {
            *err = "control byte in header value";
            return false;
        }
    }
    size_t s = i + 1, e = n;
    while (s < e && is_ows((unsigned char)l[s]))
        s++;
    while (e > s && is_ows((unsigned char)l[e - 1]))
        e--;
    h->name = (sl_span){l, i};
    h->value = (sl_span){l + s, e - s};
    h->hop_by_hop = false;
    return true;
}

/* ---- header semantics ------------------------------------------------------- */

static const char *const fixed_hop_by_hop[] = {
    "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
    "Proxy-Authorization", "TE", "Trailer", "Upgrade",
};

/* 1*DIGIT, or a list of identical ones ("5, 5" -> 5). Empty elements, signs,
 * spaces inside a number, hex: all refused. */
static bool parse_content_length(sl_span v, int64_t *out)
{
    size_t pos = 0;
    sl_span el;
    int64_t first = -1;
    while (list_next(v, &pos, &el)) {
        if (el.len == 0)
            return false;
        int64_t x = 0;
        for (size_t i = 0; i < el.len; i++) {
            if (el.p[i] < '0' || el.p[i] > '9')
                return false;
            int d = el.p[i] - '0';
            if (x > (CL_MAX - d) / 10) /* before multiplying: no overflow */
                return false;
            x = x * 10 + d;
        }
        if (first >= 0 && x != first)
            return false;
        first = x;
    }
    *out = first;
    return true;
}

static bool finish_head(sl_http_head *out, bool request)
{
    size_t hosts = 0;
    bool have_cl = false, have_te = false, te_chunked_last = false;
    int64_t cl = -1;

    for (size_t i = 0; i < out->nheaders; i++) {
        sl_http_header *h = &out->headers[i];
        for (size_t k = 0; k < sizeof fixed_hop_by_hop / sizeof fixed_hop_by_hop[0]; k++)
            if (sl_http_header_is(h, fixed_hop_by_hop[k]))
                h->hop_by_hop = true;

        if (sl_http_header_is(h, "Host")) {
            if (++hosts > 1) {
                out->error = "more than one Host header";
                return false;
            }
            out->host = h->value;
        } else if (sl_http_header_is(h, "Content-Length")) {
            int64_t x;
            if (!parse_content_length(h->value, &x)) {
                out->error = "Content-Length is not a decimal number (or list of identical ones) up to 2^62";
                return false;
            }
            if (have_cl && x != cl) {
                out->error = "conflicting Content-Length headers";
                return false;
            }
            have_cl = true;
            cl = x;
        } else if (sl_http_header_is(h, "Transfer-Encoding")) {
            /* Several TE lines form one list, in order. chunked must be the
             * final coding and appear once: a coding after chunked, or chunked
             * twice, is a classic desync and is refused in both directions. */
            size_t pos = 0;
            sl_span el;
            have_te = true;
            while (list_next(h->value, &pos, &el)) {
                if (!is_token(el)) {
                    out->error = "Transfer-Encoding is not a list of tokens";
                    return false;
                }
                if (te_chunked_last) {
                    out->error = "Transfer-Encoding: chunked is not the final coding";
                    return false;
                }
                te_chunked_last = span_ieq(el, "chunked");
            }
        } else if (sl_http_header_is(h, "Expect")) {
            /* RFC 9110 §10.1.1: ignored in an HTTP/1.0 request */
            if (span_ieq(h->value, "100-continue") && out->version_minor == 1)
                out->expect_continue = true;
        }
    }

    /* Connection options: after the loop above, so that a header named in a
     * Connection field is marked wherever it sits in the head. */
    bool opt_close = false, opt_keep_alive = false;
    for (size_t i = 0; i < out->nheaders; i++) {
        if (!sl_http_header_is(&out->headers[i], "Connection"))
            continue;
        size_t pos = 0;
        sl_span el;
        while (list_next(out->headers[i].value, &pos, &el)) {
            if (el.len == 0)
                continue; /* RFC 9110 §5.6.1.2: empty list elements are ignored */
            if (!is_token(el)) {
                out->error = "Connection is not a list of tokens";
                return false;
            }
            /* Dropping these on the way would make sluice and the origin
             * frame the message differently (or lose the Host check). */
            if (span_ieq(el, "Content-Length") || span_ieq(el, "Transfer-Encoding") ||
                span_ieq(el, "Host")) {
                out->error = "Connection names Content-Length, Transfer-Encoding or Host";
                return false;
            }
            if (span_ieq(el, "close"))
                opt_close = true;
            else if (span_ieq(el, "keep-alive"))
                opt_keep_alive = true;
            for (size_t k = 0; k < out->nheaders; k++)
                if (ieq(out->headers[k].name.p, out->headers[k].name.len, el.p, el.len))
                    out->headers[k].hop_by_hop = true;
        }
    }
    out->conn_close = opt_close || (out->version_minor == 0 && !opt_keep_alive);

    if (have_te && out->version_minor == 0) {
        /* HTTP/1.0 has no chunked coding; an intermediary may frame by CL. */
        out->error = "Transfer-Encoding in an HTTP/1.0 message";
        return false;
    }

    if (request) {
        if (hosts == 0 && out->version_minor == 1 && out->method != SL_METHOD_CONNECT) {
            out->error = "HTTP/1.1 request without Host";
            return false;
        }
        if (have_te && have_cl) {
            out->error = "both Content-Length and Transfer-Encoding";
            return false;
        }
        if (have_te && !te_chunked_last) {
            out->error = "Transfer-Encoding: the final coding of a request must be chunked";
            return false;
        }
        out->chunked = have_te;
        out->content_length = have_cl ? cl : -1;
        return true;
    }

    /* Responses (RFC 9112 §6.3). */
    if (have_te) {
        out->chunked = te_chunked_last;
        out->content_length = -1;
        if (!te_chunked_last)
            out->conn_close = true; /* the body ends when the connection does */
        if (have_cl) {
            /* TE wins; the CL must not reach the client (§6.3 rule 3), and
             * the connection is not reused after such a response. */
            out->conn_close = true;
            for (size_t i = 0; i < out->nheaders; i++)
                if (sl_http_header_is(&out->headers[i], "Content-Length"))
                    out->headers[i].hop_by_hop = true;
        }
    } else if (have_cl) {
        out->content_length = cl;
    } else {
        out->content_length = -1;
        /* No framing: a body, if any, is delimited by close. Statuses that
         * never have a body do not force a close. */
        if (out->status >= 200 && out->status != 204 && out->status != 304)
            out->conn_close = true;
    }
    return true;
}

/* ---- heads ------------------------------------------------------------------ */

/* The head ends beyond `lim`: more bytes may complete it, unless the
 * head limit is already reached. */
static sl_http_status short_result(sl_http_head *out, size_t lim)
{
    if (lim == SL_HTTP_MAX_HEAD) {
        out->error = "message head larger than 32 KiB";
        return SL_HTTP_TOO_LARGE;
    }
    return SL_HTTP_INCOMPLETE;
}

/* Limits are checked before anything is declared incomplete: scanning stops
 * at SL_HTTP_MAX_HEAD bytes, so a buffer of that size never yields
 * SL_HTTP_INCOMPLETE. */
static sl_http_status parse_head(const char *buf, size_t len, sl_http_head *out,
                                 bool request)
{
    memset(out, 0, sizeof *out);
    out->content_length = -1;
    out->method = SL_METHOD_OTHER;

    size_t lim = len < SL_HTTP_MAX_HEAD ? len : SL_HTTP_MAX_HEAD;

    size_t pos = 0;
    /* RFC 9112 §2.2: a server SHOULD ignore at least one empty line before
     * the request line. Exactly one is tolerated (a client that sent CRLF
     * after a previous POST body); two or more are refused. Its two bytes
     * count in head_len and in the head limit. Responses get no such grace. */
    if (request && lim > 0 && buf[0] == '\r') {
        if (lim < 2)
            return short_result(out, lim);
        if (buf[1] != '\n') {
            out->error = "bare CR in message head";
            return SL_HTTP_BAD;
        }
        pos = 2;
        if (pos < lim && buf[pos] == '\r') {
            out->error = "more than one empty line before the request line";
            return SL_HTTP_BAD;
        }
    }

    /* Start line, at most SL_HTTP_MAX_LINE bytes before its CRLF. */
    size_t line_lim = pos + SL_HTTP_MAX_LINE + 2;
    if (line_lim > lim)
        line_lim = lim;
    size_t stop;
    switch (find_eol(buf, pos, line_lim, &stop, &out->error)) {
    case LINE_BAD:
        return SL_HTTP_BAD;
    case LINE_SHORT:
        if (stop - pos > SL_HTTP_MAX_LINE) {
            out->error = request ? "request line longer than 8 KiB"
                                 : "status line longer than 8 KiB";
            return SL_HTTP_TOO_LARGE;
        }
        return short_result(out, lim);
    default:
        break;
    }
    if (request ? !parse_request_line(buf + pos, stop - pos, out)
                : !parse_status_line(buf + pos, stop - pos, out))
        return SL_HTTP_BAD;
    pos = stop + 2;

    /* Field lines, up to the empty line. */
    for (;;) {
        if (pos >= lim)
            return short_result(out, lim);
        if (buf[pos] == '\r') {
            if (pos + 1 >= lim)
                return short_result(out, lim);
            if (buf[pos + 1] != '\n') {
                out->error = "bare CR in message head";
                return SL_HTTP_BAD;
            }
            out->head_len = pos + 2;
            break;
        }
        if (buf[pos] == ' ' || buf[pos] == '\t') {
            /* obs-fold, or whitespace before the first field (§2.2, §5.2) */
            out->error = "header line starts with whitespace (obs-fold)";
            return SL_HTTP_BAD;
        }
        if (out->nheaders == SL_HTTP_MAX_HEADERS) {
            out->error = "more than 100 headers";
            return SL_HTTP_TOO_LARGE;
        }
        switch (find_eol(buf, pos, lim, &stop, &out->error)) {
        case LINE_BAD:
            return SL_HTTP_BAD;
        case LINE_SHORT:
            return short_result(out, lim);
        default:
            break;
        }
        if (!parse_field_line(buf + pos, stop - pos, &out->headers[out->nheaders],
                              &out->error))
            return SL_HTTP_BAD;
        out->nheaders++;
        pos = stop + 2;
    }

    return finish_head(out, request) ? SL_HTTP_OK : SL_HTTP_BAD;
}

sl_http_status sl_http_parse_request(const char *buf, size_t len, sl_http_head *out)
{
    return parse_head(buf, len, out, true);
}

sl_http_status sl_http_parse_response(const char *buf, size_t len, sl_http_head *out)
{
    return parse_head(buf, len, out, false);
}

/* ---- absolute-form ---------------------------------------------------------- */

bool sl_http_parse_absolute(sl_span target, sl_span *authority, sl_span *path,
                            const char **err)
{
    const char *t = target.p;
    size_t n = target.len;
    *err = NULL;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f) {
            *err = "request target contains a space, a control byte or non-ASCII";
            return false;
        }
        if (c == '#') {
            *err = "request target contains a fragment ('#')";
            return false;
        }
    }

    size_t colon = 0;
    while (colon < n && t[colon] != ':' && t[colon] != '/' && t[colon] != '?')
        colon++;
    if (colon == 0 || colon >= n || t[colon] != ':') {
        *err = "request target is not an absolute URI (expected http://host/path)";
        return false;
    }
    sl_span scheme = {t, colon};
    if (span_ieq(scheme, "https")) {
        *err = "absolute-form https:// is not supported; use CONNECT";
        return false;
    }
    if (!span_ieq(scheme, "http")) {
        *err = "only http:// is supported in absolute-form; use CONNECT for TLS";
        return false;
    }
    if (n - colon < 3 || t[colon + 1] != '/' || t[colon + 2] != '/') {
        *err = "absolute URI without '//' authority";
        return false;
    }

    size_t as = colon + 3, ae = as;
    while (ae < n && t[ae] != '/' && t[ae] != '?')
        ae++;
    if (ae == as) {
        *err = "absolute URI with an empty host";
        return false;
    }
    if (memchr(t + as, '@', ae - as) != NULL) {
        *err = "absolute URI with userinfo ('@') is refused";
        return false;
    }
    *authority = (sl_span){t + as, ae - as};
    if (ae == n)
        *path = (sl_span){"/", 1};
    else
        *path = (sl_span){t + ae, n - ae}; /* starts with '/' or '?' */
    return true;
}

bool sl_http_path_needs_slash(sl_span path)
{
    return path.len > 0 && path.p[0] == '?';
}

/* ---- chunked ---------------------------------------------------------------- */

enum {
    CH_SIZE,          /* hex digits of the chunk size */
    CH_SIZE_BWS,      /* whitespace after the size: only ';' may follow */
    CH_EXT,           /* chunk extensions, up to CR */
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START, /* start of a trailer field line, or the final CRLF */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_END_LF,
    CH_DONE,
    CH_ERROR,
};

void sl_chunked_init(sl_chunked *c)
{
    memset(c, 0, sizeof *c);
    c->state = CH_SIZE;
}

/* allowlist/text.h has the shared sl_hexval, but proxy/proto/ may include
 * only its own headers and libc (make check-layout), so it keeps this one. */
static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = lower(ch);
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

long sl_chunked_feed(sl_chunked *c, const char *buf, size_t len, const char **err)
{
    return sl_chunked_feed_data(c, buf, len, err, NULL, NULL);
}

bool sl_chunked_data_done(const sl_chunked *c)
{
    return c->state >= CH_TRAILER_START && c->state <= CH_DONE;
}

long sl_chunked_feed_data(sl_chunked *c, const char *buf, size_t len, const char **err,
                          sl_chunk_data_fn data, void *ctx)
{
    const char *e = NULL;
    size_t i = 0;
    if (len > (size_t)LONG_MAX) /* the count must fit the return type */
        len = (size_t)LONG_MAX;

    while (i < len) {
        unsigned char ch = (unsigned char)buf[i];
        switch (c->state) {
        case CH_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                if (c->line_len == SL_CHUNK_MAX_DIGITS) {
                    e = "chunk size has more than 16 hex digits";
                    goto fail;
                }
                c->remaining = (c->remaining << 4) | (uint64_t)v;
                c->line_len++;
                i++;
                break;
            }
            if (c->line_len == 0) {
                e = "chunk size is not hexadecimal";
                goto fail;
            }
            if (ch == ';') {
                c->state = CH_EXT;
            } else if (is_ows(ch)) {
                c->state = CH_SIZE_BWS;
            } else if (ch == '\r') {
                c->state = CH_SIZE_LF;
                i++;
                break;
            } else {
                e = "invalid byte after chunk size";
                goto fail;
            }
            c->line_len++;
            i++;
            break;
        }
        case CH_SIZE_BWS:
            /* RFC 9112 §7.1.1 allows BWS before ';' only: "5 \r\n" is refused
             * because parsers disagree about it. */
            if (ch == ';')
                c->state = CH_EXT;
            else if (!is_ows(ch)) {
                e = "whitespace after chunk size not followed by an extension";
                goto fail;
            }
            goto size_line_byte;
        case CH_EXT:
            if (ch == '\r') {
                c->state = CH_SIZE_LF;
                i++;
                break;
            }
            if (!is_field_byte(ch)) {
                e = "control byte in chunk extension";
                goto fail;
            }
        size_line_byte:
            if (++c->line_len > SL_CHUNK_MAX_LINE) {
                e = "chunk size line longer than 1024 bytes";
                goto fail;
            }
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') {
                e = "chunk size line not ended by CRLF";
                goto fail;
            }
            i++;
            c->line_len = 0;
            c->state = c->remaining == 0 ? CH_TRAILER_START : CH_DATA;
            break;
        case CH_DATA: {
            size_t take = len - i;
            if ((uint64_t)take > c->remaining)
                take = (size_t)c->remaining;
            if (data && take)
                data(ctx, buf + i, take);
            c->remaining -= take;
            i += take;
            if (c->remaining == 0)
                c->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (ch != '\r') {
                e = "chunk data not followed by CRLF";
                goto fail;
            }
            c->state = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n') {
                e = "chunk data not followed by CRLF";
                goto fail;
            }
            c->state = CH_SIZE;
            c->line_len = 0;
            c->remaining = 0;
            i++;
            break;
        case CH_TRAILER_START:
            if (ch == '\r') {
                c->state = CH_END_LF;
                goto trailer_byte;
            }
            if (is_ows(ch)) {
                e = "trailer line starts with whitespace (obs-fold)";
                goto fail;
            }
            c->trailer_field = true;
            c->state = CH_TRAILER_NAME;
            /* fall through */
        case CH_TRAILER_NAME:
            if (ch == ':' && c->line_len > 0) {
                c->state = CH_TRAILER_VALUE;
            } else if (!is_tchar(ch)) {
                e = "trailer field name is not a token followed by ':'";
                goto fail;
            }
            c->line_len++;
            goto trailer_byte;
        case CH_TRAILER_VALUE:
            if (ch == '\r')
                c->state = CH_TRAILER_LF;
            else if (!is_field_byte(ch)) {
                e = "control byte in trailer field";
                goto fail;
            }
            goto trailer_byte;
        case CH_TRAILER_LF:
            if (ch != '\n') {
                e = "trailer line not ended by CRLF";
                goto fail;
            }
            c->state = CH_TRAILER_START;
            c->line_len = 0;
            goto trailer_byte;
        case CH_END_LF:
            if (ch != '\n') {
                e = "chunked body not ended by CRLF";
                goto fail;
            }
            if (++c->trailer_bytes > SL_CHUNK_MAX_TRAILER) {
                e = "chunked trailer section larger than 32 KiB";
                goto fail;
            }
            c->state = CH_DONE;
            c->done = true;
            i++;
            return (long)i; /* what follows is the next message */
        case CH_DONE:
            return (long)i;
        default:
            e = "chunked body already failed";
            goto fail;
        trailer_byte:
            if (++c->trailer_bytes > SL_CHUNK_MAX_TRAILER) {
                e = "chunked trailer section larger than 32 KiB";
                goto fail;
            }
            i++;
            break;
        }
    }
    if (c->state == CH_ERROR) {
        e = "chunked body already failed";
        goto fail;
    }
    return (long)i;

fail:
    c->state = CH_ERROR;
    if (err)
        *err = e;
    return -1;
}

bool sl_http_response_has_body(sl_http_method request_method, int status)
{
    if (request_method == SL_METHOD_HEAD)
        return false;
    if (status < 200 || status == 204 || status == 304)
        return false;
    /* A 2xx to CONNECT turns the connection into a tunnel (RFC 9112 §6.3). */
    if (request_method == SL_METHOD_CONNECT && status < 300)
        return false;
    return true;
}
