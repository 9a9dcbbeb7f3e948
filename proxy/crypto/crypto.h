/* Everything sluice needs from mbedtls, behind one small interface (the only
 * file that includes mbedtls headers is crypto.c). */
#ifndef SLUICE_CRYPTO_H
#define SLUICE_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>

const char *sl_crypto_version(void);

/* The decision log's hash chain: hex(SHA-256(prev || text)), where prev is
 * the previous line's chain (or, for a stream's first line, the stream id)
 * as ASCII and text is the line as written without its chain field. */
void sl_chain_next(const char *prev, size_t prev_len, const char *text, size_t text_len,
                   char out_hex[65]);

/* SHA-256 of data (a session token's, checked per request: SHA-NI where
 * the CPU has it). */
void sl_sha256(const void *data, size_t len, unsigned char out[32]);

/* n random bytes as 2n lowercase hex digits (out must hold 2n+1). */
void sl_random_hex(char *out, size_t n);

/* A body hashed against a pinned rule's digests (SPEC part 2, "Pinned
 * artifacts"): every algorithm the digests name (sha256, sha384, sha512)
 * runs over the same bytes, once each, however many digests name it. */
typedef struct sl_pin sl_pin;

/* digests: SRI strings a rule carries (already checked: sl_digest_check).
 * NULL when out of memory or none names a known algorithm. */
sl_pin *sl_pin_new(const char *const *digests, size_t n);
void sl_pin_update(sl_pin *p, const void *data, size_t len);
/* The body is whole: true if it hashes to one of the digests. `actual`
 * receives the body's digests as SRI, one per algorithm the rule names, in
 * the order the rule first names them, space-separated (cap: SL_PIN_ACTUAL_MAX). */
#define SL_PIN_ACTUAL_MAX 300
bool sl_pin_finish(sl_pin *p, char *actual, size_t cap);
void sl_pin_free(sl_pin *p);

#endif
