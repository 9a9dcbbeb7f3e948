/* IP addresses and CIDR blocks (allowlist/addr.c): sl_addr_parse against
 * glibc's inet_pton, sl_addr_format, sl_cidr_parse/format/contains.
 *
 * Properties: sl_addr_parse accepts exactly what inet_pton accepts (IPv4:
 * dotted quad; IPv6: inet_pton form) with the same bytes, and nothing with a
 * NUL inside; formatting and
 * parsing again is the identity; a CIDR's host bits are zero, it contains
 * its base, and its text parses back to it. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char shown[400], buf[SL_ADDR_STRLEN + 8];
    sl_addr a, b;
    bool ok = sl_addr_parse((const char *)data, size, &a);
    /* "`s` need not be NUL-terminated": a NUL inside is not an address. */
    if (memchr(data, 0, size))
        FUZZ_CHECK_ID("addr-nul", !ok, "sl_addr_parse accepts '%s', which holds a NUL",
                   fuzz_show(data, size, shown, sizeof shown));

    if (size < 64 && !memchr(data, 0, size)) {
        char s[64];
        memcpy(s, data, size);
        s[size] = '\0';
        unsigned char raw[16];
        int fam = memchr(s, ':', size) ? AF_INET6 : AF_INET;
        bool pton = inet_pton(fam, s, raw) == 1;
        FUZZ_CHECK(ok == pton, "sl_addr_parse('%s') = %d, inet_pton = %d",
                   fuzz_show(data, size, shown, sizeof shown), ok, pton);
        if (ok)
            FUZZ_CHECK(a.family == fam && !memcmp(a.b, raw, fam == AF_INET ? 4 : 16),
                       "sl_addr_parse('%s') bytes differ from inet_pton", s);
    }
    if (ok) {
        FUZZ_CHECK(a.family == AF_INET || a.family == AF_INET6, "family %d", a.family);
        if (a.family == AF_INET)
            for (int i = 4; i < 16; i++)
                FUZZ_CHECK(a.b[i] == 0, "IPv4 address with byte %d set", i);
        sl_addr_format(&a, buf, sizeof buf);
        FUZZ_CHECK(sl_addr_parse(buf, strlen(buf), &b) && sl_addr_equal(&a, &b),
                   "'%s' formats as '%s', which does not parse back",
                   fuzz_show(data, size, shown, sizeof shown), buf);
    }

    /* CIDR: NUL-terminated text. */
    char *s = fuzz_strndup(data, size);
    sl_cidr c, c2;
    char err[256], text[64];
    memset(err, 0, sizeof err);
    if (sl_cidr_parse(s, &c, err, sizeof err)) {
        unsigned max = c.base.family == AF_INET ? 32 : 128;
        FUZZ_CHECK(c.prefix <= max, "prefix %u", c.prefix);
        for (unsigned bit = c.prefix; bit < max; bit++)
            FUZZ_CHECK(!(c.base.b[bit / 8] & (0x80 >> (bit % 8))), "host bit %u set in '%s'", bit,
                       fuzz_show(data, size, shown, sizeof shown));
        FUZZ_CHECK(sl_cidr_contains(&c, &c.base), "CIDR does not contain its base");
        sl_cidr_format(&c, text, sizeof text);
        FUZZ_CHECK(sl_cidr_parse(text, &c2, err, sizeof err) && c2.prefix == c.prefix &&
                       sl_addr_equal(&c.base, &c2.base),
                   "CIDR '%s' formats as '%s', which does not parse back",
                   fuzz_show(data, size, shown, sizeof shown), text);
        if (ok)
            (void)sl_cidr_contains(&c, &a);
        /* The last address of the block is inside, the next one outside. */
        sl_addr last = c.base;
        for (unsigned bit = c.prefix; bit < max; bit++)
            last.b[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
        FUZZ_CHECK(sl_cidr_contains(&c, &last), "CIDR '%s' does not contain its last address", text);
        sl_addr next = last;
        int i = (int)max / 8 - 1;
        while (i >= 0 && ++next.b[i] == 0)
            i--;
        if (i >= 0 && c.prefix > 0)
            FUZZ_CHECK(!sl_cidr_contains(&c, &next), "CIDR '%s' contains the address after it", text);
    } else {
        FUZZ_CHECK(err[0] != '\0', "sl_cidr_parse refused without a message");
    }
    free(s);
    return 0;
}
