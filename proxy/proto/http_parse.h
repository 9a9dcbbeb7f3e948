/* HTTP/1.x message heads and body framing, parsed strictly. Pure: bytes in,
 * results out, no I/O and no allocation. */
#ifndef SLUICE_HTTP_PARSE_H
#define SLUICE_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_HTTP_MAX_LINE    8192    /* request or status line, without its CRLF */
#define SL_HTTP_MAX_HEAD    32768   /* whole head, first byte to blank line
                                       (a tolerated leading CRLF included) */
#define SL_HTTP_MAX_HEADERS 100

/* Chunked framing limits. */
#define SL_CHUNK_MAX_DIGITS  16     /* hex digits of a chunk size */
#define SL_CHUNK_MAX_LINE    1024   /* size line with extensions, without CRLF */
#define SL_CHUNK_MAX_TRAILER 32768  /* trailer section, final CRLF included */

typedef enum sl_http_status {
    SL_HTTP_OK,          /* a complete head was parsed */
    SL_HTTP_INCOMPLETE,  /* need more bytes; nothing over the limits yet. Never
                            returned once len >= SL_HTTP_MAX_HEAD, so a buffer
                            of that size always gets a verdict. */
    SL_HTTP_BAD,         /* syntax error -> 400 */
    SL_HTTP_TOO_LARGE,   /* over a limit -> 431 */
} sl_http_status;

typedef struct sl_span {
    const char *p;
    size_t len;
} sl_span;

typedef struct sl_http_header {
    sl_span name;
    sl_span value;       /* leading and trailing OWS removed */
    bool hop_by_hop;     /* dropped when forwarding: the fixed hop-by-hop set
                            (Connection, Keep-Alive, Proxy-Connection,
                            Proxy-Authenticate, Proxy-Authorization, TE,
                            Trailer, Upgrade), any named in Connection, and in a
                            response with both TE and CL the Content-Length.
                            Transfer-Encoding is kept: chunked bodies are
                            relayed unchanged. */
} sl_http_header;

typedef enum sl_http_method {
    SL_METHOD_OTHER, SL_METHOD_GET, SL_METHOD_HEAD, SL_METHOD_POST, SL_METHOD_PUT,
    SL_METHOD_DELETE, SL_METHOD_OPTIONS, SL_METHOD_PATCH, SL_METHOD_TRACE,
    SL_METHOD_CONNECT,
} sl_http_method;

typedef struct sl_http_head {
    /* request line, or status line for responses */
    sl_http_method method;
    sl_span method_text;
    sl_span target;       /* request-target as sent */
    int version_minor;    /* HTTP/1.0 or HTTP/1.1 only */
    int status;           /* responses: 100..599 */
    sl_span reason;

    sl_http_header headers[SL_HTTP_MAX_HEADERS];
    size_t nheaders;
    size_t head_len;      /* bytes up to and including the blank line, counted
                             from buf[0] (a leading CRLF included) */

    /* framing */
    int64_t content_length;  /* -1 when absent, and in a response with TE */
    bool chunked;            /* Transfer-Encoding: chunked (final coding) */
    bool conn_close;         /* Connection: close, or HTTP/1.0 without keep-alive;
                                responses also: body delimited by close (a final
                                coding other than chunked, or neither CL nor TE
                                on a status >= 200 other than 204/304), or TE
                                together with CL */
    bool expect_continue;    /* Expect: 100-continue, in an HTTP/1.1 request */
    sl_span host;            /* Host header value (OWS trimmed, not otherwise
                                checked); p == NULL when absent */

    const char *error;       /* static text when the result is BAD or TOO_LARGE;
                                NULL otherwise */
} sl_http_head;

/* A request head. Rejects: obs-fold, whitespace before a colon, a bare CR or
 * LF, control bytes in values, invalid tokens, versions other than 1.0/1.1,
 * more than one Host, Content-Length that is not a decimal or that conflicts
 * with another (identical repeats are folded), Content-Length together with
 * Transfer-Encoding, a Transfer-Encoding whose last coding is not chunked, a
 * Connection header naming Host, Content-Length or Transfer-Encoding.
 * Also rejects: more than one empty line before the request line (exactly one
 * CRLF is skipped, RFC 9112 §2.2), a request-target byte outside 0x21..0x7E,
 * an HTTP/1.1 request other than CONNECT without Host (RFC 9112 §3.2), any
 * Transfer-Encoding in HTTP/1.0, chunked anywhere but last or twice, empty
 * elements in Content-Length or Transfer-Encoding lists (empty Connection
 * elements are ignored). Does not check the target's form: see
 * sl_http_parse_absolute, and sl_authority_parse for CONNECT. */
sl_http_status sl_http_parse_request(const char *buf, size_t len, sl_http_head *out);

/* A response head from an origin. Same strictness; Transfer-Encoding with
 * Content-Length is allowed here (chunked wins, as RFC 9112 says) but the
 * response is then marked conn_close and its Content-Length hop_by_hop. A
 * final coding other than chunked means the body ends at close. The status
 * line is "HTTP/1.x SP 3DIGIT [SP reason]": the SP before an empty reason may
 * be missing; status 100..599; no leading empty line is tolerated. */
sl_http_status sl_http_parse_response(const char *buf, size_t len, sl_http_head *out);

/* True if the header's name equals `name`, case-insensitive. */
bool sl_http_header_is(const sl_http_header *h, const char *name);

/* An absolute-form target "http://host[:port]/path?query". The authority and
 * the origin-form path ("/" when empty) are returned as spans into target.
 * Refuses other schemes, userinfo, fragments, and spaces or control bytes
 * (and non-ASCII). The scheme is case-insensitive. The authority is only
 * split off (up to the first '/' or '?'), not validated: pass it to
 * sl_authority_parse.
 * When the authority is followed directly by a query ("http://h?q"), *path is
 * "?q": it starts with '?', and the caller must send "/" before it
 * (sl_http_path_needs_slash tells). */
bool sl_http_parse_absolute(sl_span target, sl_span *authority, sl_span *path,
                            const char **err);

/* True when a path from sl_http_parse_absolute starts with '?' and the
 * origin-form request line needs a "/" written before it. */
bool sl_http_path_needs_slash(sl_span path);

/* Chunked body framing. The body is relayed as it is; this only finds its
 * end and checks its syntax (sizes in hex, at most 16 digits, extensions and
 * trailers bounded, CRLF line ends). */
typedef struct sl_chunked {
    int state;
    uint64_t remaining;   /* bytes left in the current chunk's data */
    size_t line_len;      /* bytes in the current size/trailer line */
    size_t trailer_bytes;
    bool trailer_field;   /* a trailer field has begun (not just the final CRLF) */
    bool done;
} sl_chunked;

void sl_chunked_init(sl_chunked *c);

/* Feed bytes. Returns the number of bytes that belong to the body (<= len;
 * fewer only once the body has ended, *c.done then true), or -1 on a syntax
 * error (with *err set, when err is not NULL; every later call fails too).
 * Once done, returns 0: the bytes after the final CRLF are the next message.
 * Whitespace after the size is allowed only before ';' ("5 ;x" yes, "5 " no);
 * trailer lines must be "token:value" without CTLs or obs-fold. */
long sl_chunked_feed(sl_chunked *c, const char *buf, size_t len, const char **err);

/* The same, and data(ctx, p, n) is called for each run of chunk data in
 * buf (the body's content without its framing), in order: a pinned body is
 * hashed over these bytes. */
typedef void (*sl_chunk_data_fn)(void *ctx, const char *p, size_t n);
long sl_chunked_feed_data(sl_chunked *c, const char *buf, size_t len, const char **err,
                          sl_chunk_data_fn data, void *ctx);

/* Whether the last chunk's size line has been read: all the content is in,
 * only trailers and the final CRLF may follow. */
bool sl_chunked_data_done(const sl_chunked *c);

/* Whether a response to a request with `method` and status carries a body
 * (no body for HEAD, 1xx, 204, 304, nor for a 2xx to CONNECT). */
bool sl_http_response_has_body(sl_http_method request_method, int status);

#endif
