/* Absolute-form request targets (proxy/proto/http_parse.c,
 * sl_http_parse_absolute), then the authority through sl_authority_parse,
 * as proxy/conn/request.c does.
 *
 * Properties: the authority and path are inside the target (the path may be
 * the static "/"); the authority is not empty and holds no '@', '/', '?';
 * the path starts with '/' or '?', and sl_http_path_needs_slash says which;
 * only http:// (any case) is accepted; no byte outside 0x21..0x7e and no
 * '#' is accepted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_util.h"
#include "host.h"
#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_span target = { (const char *)data, size }, authority = { NULL, 0 }, path = { NULL, 0 };
    const char *err = (const char *)1;
    char shown[600];
    bool ok = sl_http_parse_absolute(target, &authority, &path, &err);
    if (!ok) {
        FUZZ_CHECK(err != NULL && err != (const char *)1, "refused without a reason");
        return 0;
    }
    fuzz_show(data, size, shown, sizeof shown);
    FUZZ_CHECK(size >= 7 && !strncasecmp((const char *)data, "http://", 7), "'%s' accepted", shown);
    for (size_t i = 0; i < size; i++)
        FUZZ_CHECK(data[i] >= 0x21 && data[i] <= 0x7e && data[i] != '#', "'%s' accepted", shown);
    FUZZ_CHECK(authority.len > 0 && authority.p >= target.p &&
                   authority.p + authority.len <= target.p + size,
               "authority outside the target");
    FUZZ_CHECK(!memchr(authority.p, '@', authority.len) && !memchr(authority.p, '/', authority.len) &&
                   !memchr(authority.p, '?', authority.len),
               "authority '%.*s'", (int)authority.len, authority.p);
    FUZZ_CHECK(path.len > 0 && (path.p[0] == '/' || path.p[0] == '?'), "path");
    FUZZ_CHECK((path.len == 1 && path.p[0] == '/') ||
                   (path.p >= target.p && path.p + path.len <= target.p + size),
               "path outside the target");
    FUZZ_CHECK(sl_http_path_needs_slash(path) == (path.p[0] == '?'), "needs_slash");
    if (path.p >= target.p && path.p < target.p + size)
        FUZZ_CHECK(path.p == authority.p + authority.len && path.p + path.len == target.p + size,
                   "authority and path do not make up the rest of the target");
    sl_host host;
    int port;
    if (sl_authority_parse(authority.p, authority.len, false, &host, &port, &err))
        FUZZ_CHECK(port == -1 || (port >= 1 && port <= 65535), "port %d", port);
    return 0;
}
