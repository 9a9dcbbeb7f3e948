/* Everything sluice needs from mbedtls, behind one small interface (the only
 * file that includes mbedtls headers is crypto.c). */
#ifndef SLUICE_CRYPTO_H
#define SLUICE_CRYPTO_H

const char *sl_crypto_version(void);

#endif
