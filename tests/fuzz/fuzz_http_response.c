/* Response heads from an origin (proxy/proto/http_parse.c,
 * sl_http_parse_response), as proxy/conn/forward.c reads them.
 *
 * Properties (fuzz_http.h): as for requests, with the response framing
 * rules: with Transfer-Encoding the Content-Length is dropped (hop-by-hop)
 * and the connection closed, an unframed body is delimited by close, status
 * 100..599; and the verdict does not change as bytes arrive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    check_prefixes(sl_http_parse_response, buf, size, false);
    if (sl_http_parse_response(buf, size, &g_head) == SL_HTTP_OK) {
        static const sl_http_method methods[] = { SL_METHOD_GET, SL_METHOD_HEAD, SL_METHOD_CONNECT,
                                                  SL_METHOD_POST, SL_METHOD_OTHER };
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
            bool body = sl_http_response_has_body(methods[i], g_head.status);
            if (methods[i] == SL_METHOD_HEAD || g_head.status < 200 || g_head.status == 204 ||
                g_head.status == 304)
                FUZZ_CHECK(!body, "status %d to method %d has a body", g_head.status, (int)methods[i]);
        }
    }
    return 0;
}
