/* The server name from a TLS ClientHello. Pure: bytes in, a result out. */
#ifndef SLUICE_TLS_SNI_H
#define SLUICE_TLS_SNI_H

#include <stddef.h>
#include <stdint.h>

/* How many bytes of a ClientHello sluice waits for at most (the handshake
 * message may span several TLS records). */
#define SL_SNI_MAX_BYTES 16384

typedef enum sl_sni_result {
    SL_SNI_FOUND,      /* a complete ClientHello with a host_name */
    SL_SNI_ABSENT,     /* a complete ClientHello without server_name */
    SL_SNI_NEED_MORE,  /* so far a valid prefix of a ClientHello */
    SL_SNI_NOT_TLS,    /* the first bytes are not a TLS handshake record */
    SL_SNI_MALFORMED,  /* a TLS record, but not a well-formed ClientHello */
} sl_sni_result;

/* Examine the first `len` bytes a client sent. On SL_SNI_FOUND copies the
 * host_name (not NUL-terminated in the wire format; NUL-terminated here) into
 * name (cap >= 256) and sets *name_len. */
sl_sni_result sl_tls_sni(const uint8_t *buf, size_t len, char *name, size_t cap,
                         size_t *name_len);

const char *sl_sni_result_str(sl_sni_result r);

#endif
