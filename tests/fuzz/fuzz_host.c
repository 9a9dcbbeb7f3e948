/* Hosts and authorities (allowlist/host.c): sl_host_parse,
 * sl_authority_parse (port optional and required), sl_host_parse_config
 * (Unicode via libidn2), sl_host_authority.
 *
 * Properties: a parsed host is normalised (length, lower case, no trailing
 * dot, IP literals in inet_ntop form) and parses again to itself; its
 * authority form parses back to it; a config host (IDN converted) is a host
 * a request can name, i.e. sl_host_parse accepts its text unchanged; an
 * authority with a required port has one in 1..65535, and the same text is
 * accepted with the port optional. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "fuzz_util.h"
#include "host.h"

static bool same_host(const sl_host *a, const sl_host *b)
{
    return a->kind == b->kind && a->len == b->len && !memcmp(a->name, b->name, a->len) &&
           (a->kind == SL_HOST_NAME || sl_addr_equal(&a->addr, &b->addr));
}

static void check_host(const sl_host *h, const char *what, const uint8_t *in, size_t n)
{
    char shown[1200], buf[SL_HOST_MAX + 3];
    fuzz_show(in, n, shown, sizeof shown);
    FUZZ_CHECK(h->len > 0 && h->len <= SL_HOST_MAX && h->len == strlen(h->name),
               "%s('%s'): bad length %zu", what, shown, h->len);
    FUZZ_CHECK(h->name[h->len - 1] != '.', "%s('%s'): trailing dot kept", what, shown);
    for (size_t i = 0; i < h->len; i++) {
        unsigned char c = (unsigned char)h->name[i];
        FUZZ_CHECK(c > 0x20 && c < 0x7f && !(c >= 'A' && c <= 'Z'),
                   "%s('%s'): byte 0x%02x in normalised name '%s'", what, shown, c, h->name);
    }
    if (h->kind == SL_HOST_NAME) {
        sl_addr a;
        FUZZ_CHECK(!sl_addr_parse(h->name, h->len, &a), "%s('%s'): name '%s' is an address", what,
                   shown, h->name);
    } else {
        char t[SL_ADDR_STRLEN];
        FUZZ_CHECK(h->addr.family == (h->kind == SL_HOST_IPV4 ? AF_INET : AF_INET6),
                   "%s('%s'): family", what, shown);
        sl_addr_format(&h->addr, t, sizeof t);
        FUZZ_CHECK(!strcmp(t, h->name), "%s('%s'): name '%s' is not the address text '%s'", what,
                   shown, h->name, t);
    }
    /* Idempotent, through the request parser. */
    sl_host h2;
    const char *why = NULL;
    sl_host_authority(h, buf, sizeof buf);
    bool ok = h->kind == SL_HOST_IPV6 ? sl_host_parse(buf, strlen(buf), &h2, &why)
                                      : sl_host_parse(h->name, h->len, &h2, &why);
    FUZZ_CHECK(ok && same_host(h, &h2), "%s('%s') gives '%s', which sl_host_parse %s", what, shown,
               h->name, ok ? "reads differently" : why);
    int port = 0;
    ok = sl_authority_parse(buf, strlen(buf), false, &h2, &port, &why);
    FUZZ_CHECK(ok && same_host(h, &h2) && port == -1, "%s('%s'): authority '%s' does not read back",
               what, shown, buf);
    char hp[SL_HOST_MAX + 16];
    int m = snprintf(hp, sizeof hp, "%s:443", buf);
    ok = sl_authority_parse(hp, (size_t)m, true, &h2, &port, &why);
    FUZZ_CHECK(ok && same_host(h, &h2) && port == 443, "%s('%s'): '%s' does not read back", what,
               shown, hp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char shown[1200];
    const char *why;
    sl_host h, h2;
    int port, port2;

    why = NULL;
    if (sl_host_parse(s, size, &h, &why)) {
        check_host(&h, "sl_host_parse", data, size);
        /* (A NUL inside: sl_host_parse must refuse it, as sl_host_parse_config does.) */
        bool agree = sl_host_parse_config(s, size, &h2, &why) && same_host(&h, &h2);
        if (memchr(data, 0, size))
            FUZZ_CHECK_ID("addr-nul", agree, "sl_host_parse accepts '%s', which holds a NUL",
                          fuzz_show(data, size, shown, sizeof shown));
        else
            FUZZ_CHECK(agree, "sl_host_parse_config disagrees with sl_host_parse on '%s'",
                       fuzz_show(data, size, shown, sizeof shown));
    } else {
        FUZZ_CHECK(why != NULL, "sl_host_parse refused without a reason");
    }

    why = NULL;
    bool req = sl_authority_parse(s, size, true, &h, &port, &why);
    if (req) {
        check_host(&h, "sl_authority_parse(required)", data, size);
        FUZZ_CHECK(port >= 1 && port <= 65535, "required port %d", port);
        FUZZ_CHECK(sl_authority_parse(s, size, false, &h2, &port2, &why) && same_host(&h, &h2) &&
                       port2 == port,
                   "authority accepted with the port required but not with it optional");
    } else {
        FUZZ_CHECK(why != NULL, "sl_authority_parse refused without a reason");
    }
    why = NULL;
    if (sl_authority_parse(s, size, false, &h, &port, &why)) {
        check_host(&h, "sl_authority_parse(optional)", data, size);
        FUZZ_CHECK(port == -1 || (port >= 1 && port <= 65535), "optional port %d", port);
    }

    why = NULL;
    if (sl_host_parse_config(s, size, &h, &why))
        check_host(&h, "sl_host_parse_config", data, size);
    else
        FUZZ_CHECK(why != NULL, "sl_host_parse_config refused without a reason");
    return 0;
}
