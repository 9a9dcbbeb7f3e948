/* Hashing (mbedtls, or the x86 SHA extensions where the CPU has them) and
 * version information. */
#include "crypto.h"
#include "sha256ni.h"

#include <mbedtls/sha256.h>
#include <mbedtls/version.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/random.h>

const char *sl_crypto_version(void)
{
    static char v[32];
    if (!v[0])
        mbedtls_version_get_string(v);
    return v;
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void sl_chain_next(const char *prev, size_t prev_len, const char *text, size_t text_len,
                   char out_hex[65])
{
    unsigned char digest[32];
    if (sl_sha256ni_available()) {
        sl_sha256ni s;
        sl_sha256ni_init(&s);
        sl_sha256ni_update(&s, prev, prev_len);
        sl_sha256ni_update(&s, text, text_len);
        sl_sha256ni_final(&s, digest);
        to_hex(digest, sizeof digest, out_hex);
        return;
    }
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    mbedtls_sha256_starts_ret(&ctx, 0);
    mbedtls_sha256_update_ret(&ctx, (const unsigned char *)prev, prev_len);
    mbedtls_sha256_update_ret(&ctx, (const unsigned char *)text, text_len);
    mbedtls_sha256_finish_ret(&ctx, digest);
    mbedtls_sha256_free(&ctx);
    to_hex(digest, sizeof digest, out_hex);
}

void sl_random_hex(char *out, size_t n)
{
    unsigned char b[64];
    if (n > sizeof b)
        n = sizeof b;
    if (getrandom(b, n, 0) != (ssize_t)n) {
        /* getrandom on Linux >= 3.17 does not fail for n <= 256 once the
         * pool is initialised; fall back to something unique anyway. */
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)((uintptr_t)&b ^ (i * 131u));
    }
    to_hex(b, n, out);
}
