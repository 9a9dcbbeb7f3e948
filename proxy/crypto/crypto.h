/* Everything sluice needs from mbedtls, behind one small interface (the only
 * file that includes mbedtls headers is crypto.c). */
#ifndef SLUICE_CRYPTO_H
#define SLUICE_CRYPTO_H

#include <stddef.h>

const char *sl_crypto_version(void);

/* The decision log's hash chain: hex(SHA-256(prev || text)), where prev is
 * the previous line's chain (or, for a stream's first line, the stream id)
 * as ASCII and text is the line as written without its chain field. */
void sl_chain_next(const char *prev, size_t prev_len, const char *text, size_t text_len,
                   char out_hex[65]);

/* n random bytes as 2n lowercase hex digits (out must hold 2n+1). */
void sl_random_hex(char *out, size_t n);

#endif
