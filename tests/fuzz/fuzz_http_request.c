/* Request heads (proxy/proto/http_parse.c, sl_http_parse_request), then what the
 * daemon does with an accepted head (proxy/conn/request.c): the CONNECT target
 * through sl_authority_parse, an absolute-form target through
 * sl_http_parse_absolute and sl_authority_parse, and the Host header.
 *
 * Properties (fuzz_http.h): spans inside the head, trimmed values, the
 * hop-by-hop set marked, framing consistent with the headers (no TE+CL,
 * chunked iff TE, CL iff a Content-Length header, no TE in HTTP/1.0, Host
 * required in HTTP/1.1), and a verdict that does not change as bytes
 * arrive: every prefix of a complete head is INCOMPLETE, a prefix that is
 * refused means the whole is refused, bytes after the head change nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_http.h"
#include "host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    check_prefixes(sl_http_parse_request, buf, size, true);

    size_t n = size < SL_HTTP_MAX_HEAD + 1 ? size : SL_HTTP_MAX_HEAD + 1;
    if (sl_http_parse_request(buf, n, &g_head) != SL_HTTP_OK)
        return 0;
    const sl_http_head *h = &g_head;
    sl_host host;
    int port;
    const char *err;
    if (h->method == SL_METHOD_CONNECT) {
        if (sl_authority_parse(h->target.p, h->target.len, true, &host, &port, &err))
            FUZZ_CHECK(port >= 1 && port <= 65535, "CONNECT port %d", port);
    } else if (h->target.p[0] != '/') {
        sl_span authority, path;
        if (sl_http_parse_absolute(h->target, &authority, &path, &err)) {
            FUZZ_CHECK(span_in(authority, h->target.p, h->target.len), "authority outside target");
            FUZZ_CHECK(path.len > 0 && (path.p[0] == '/' || path.p[0] == '?'), "path '%.*s'",
                       (int)path.len, path.p);
            FUZZ_CHECK(sl_http_path_needs_slash(path) == (path.p[0] == '?'), "needs_slash");
            if (sl_authority_parse(authority.p, authority.len, false, &host, &port, &err))
                FUZZ_CHECK(port == -1 || (port >= 1 && port <= 65535), "URL port %d", port);
        } else {
            FUZZ_CHECK(err != NULL, "absolute target refused without a reason");
        }
    }
    if (h->host.p)
        (void)sl_authority_parse(h->host.p, h->host.len, false, &host, &port, &err);
    static const int statuses[] = { 100, 101, 200, 204, 206, 304, 404, 599 };
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        (void)sl_http_response_has_body(h->method, statuses[i]);
    return 0;
}
