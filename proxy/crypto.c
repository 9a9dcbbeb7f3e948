#include "crypto.h"

#include <mbedtls/version.h>

const char *sl_crypto_version(void)
{
    static char v[32];
    if (!v[0])
        mbedtls_version_get_string(v);
    return v;
}
