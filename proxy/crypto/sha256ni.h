/* SHA-256 on the x86 SHA extensions, for the decision log's hash chain.
 *
 * Why not only mbedtls: every log line is hashed, two or more per
 * connection, and mbedtls 2.28 has no path for these instructions (its
 * SHA-256 is portable C, about 300 MB/s here; this is about five times
 * that). crypto.c uses this where the CPU has the extensions and mbedtls
 * everywhere else; the unit tests hold the two to the same digests. */
#ifndef SLUICE_SHA256NI_H
#define SLUICE_SHA256NI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether this CPU has the SHA extensions (and SSSE3/SSE4.1, which the
 * code also uses). Always false off x86-64. */
bool sl_sha256ni_available(void);

typedef struct sl_sha256ni {
    uint32_t h[8];
    uint8_t block[64];
    size_t used;          /* bytes in block */
    uint64_t total;       /* bytes hashed so far */
} sl_sha256ni;

/* Only when sl_sha256ni_available(). */
void sl_sha256ni_init(sl_sha256ni *s);
void sl_sha256ni_update(sl_sha256ni *s, const void *data, size_t len);
void sl_sha256ni_final(sl_sha256ni *s, uint8_t digest[32]);

#endif
