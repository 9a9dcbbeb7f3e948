/* The ClientHello parser (proxy/proto/tls_sni.c, sl_tls_sni), as
 * proxy/conn/tunnel.c calls it on the first bytes of a tunnel to port 443.
 *
 * Properties: a found name is NUL-terminated at its length, 1..255 bytes of
 * letters, digits, '.', '-', '_'; it is never truncated (a buffer too small
 * for it gives MALFORMED) and the answer does not depend on whether a
 * buffer is given; the verdict does not change as bytes arrive: every
 * prefix of a complete hello is NEED_MORE or the same verdict (same name),
 * and a prefix that is NOT_TLS or MALFORMED stays so. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tls_sni.h"

static bool host_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[256], name2[256];
    size_t nlen = 9999, nlen2 = 9999;
    memset(name, 'X', sizeof name);
    sl_sni_result r = sl_tls_sni(data, size, name, sizeof name, &nlen);
    FUZZ_CHECK(r == SL_SNI_FOUND || r == SL_SNI_ABSENT || r == SL_SNI_NEED_MORE ||
                   r == SL_SNI_NOT_TLS || r == SL_SNI_MALFORMED,
               "result %d", (int)r);
    FUZZ_CHECK(sl_sni_result_str(r) != NULL, "result string");
    if (r == SL_SNI_FOUND) {
        FUZZ_CHECK(nlen >= 1 && nlen <= 255 && name[nlen] == '\0' && strlen(name) == nlen,
                   "name length %zu", nlen);
        for (size_t i = 0; i < nlen; i++)
            FUZZ_CHECK(host_byte(name[i]), "byte 0x%02x in the server name", (unsigned char)name[i]);
        /* Never truncated. */
        char small[256];
        FUZZ_CHECK(sl_tls_sni(data, size, small, nlen, &nlen2) == SL_SNI_MALFORMED,
                   "a %zu-byte name in a %zu-byte buffer", nlen, nlen);
        FUZZ_CHECK(sl_tls_sni(data, size, small, nlen + 1, &nlen2) == SL_SNI_FOUND && nlen2 == nlen &&
                       !strcmp(small, name),
                   "exact-size buffer");
    }
    sl_sni_result r0 = sl_tls_sni(data, size, NULL, 0, &nlen2);
    FUZZ_CHECK(r0 == r || (r == SL_SNI_MALFORMED && r0 == SL_SNI_FOUND), "with no buffer: %d vs %d",
               (int)r0, (int)r);

    /* Prefixes. */
    size_t cuts[40], ncut = 0;
    uint64_t seed = fuzz_hash(data, size < 64 ? size : 64);
    if (size <= 40) {
        for (size_t k = 0; k < size; k++)
            cuts[ncut++] = k;
    } else {
        for (size_t k = 0; k < 12; k++)
            cuts[ncut++] = k;
        cuts[ncut++] = size - 1;
        while (ncut < 40)
            cuts[ncut++] = (size_t)(fuzz_rand(&seed) % size);
    }
    for (size_t i = 0; i < ncut; i++) {
        size_t k = cuts[i];
        sl_sni_result rp = sl_tls_sni(data, k, name2, sizeof name2, &nlen2);
        if (r == SL_SNI_FOUND || r == SL_SNI_ABSENT || r == SL_SNI_NEED_MORE)
            FUZZ_CHECK(rp == SL_SNI_NEED_MORE || rp == r,
                       "%zu bytes give %s, but %zu of them give %s", size, sl_sni_result_str(r), k,
                       sl_sni_result_str(rp));
        if (rp == SL_SNI_FOUND && r == SL_SNI_FOUND)
            FUZZ_CHECK(nlen2 == nlen && !strcmp(name, name2), "name changes as bytes arrive");
        if (rp == SL_SNI_NOT_TLS || rp == SL_SNI_MALFORMED)
            FUZZ_CHECK(r == rp, "%zu bytes give %s, but %zu of them give %s", size,
                       sl_sni_result_str(r), k, sl_sni_result_str(rp));
        if (rp == SL_SNI_FOUND || rp == SL_SNI_ABSENT)
            FUZZ_CHECK(r == rp, "a complete hello at %zu bytes becomes %s at %zu", k,
                       sl_sni_result_str(r), size);
    }
    return 0;
}
