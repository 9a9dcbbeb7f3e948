/* Host names and authorities as they appear in requests and allowlists. Pure. */
#ifndef SLUICE_HOST_H
#define SLUICE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include "addr.h"

#define SL_HOST_MAX 253    /* longest DNS name, without the trailing dot */

typedef enum sl_host_kind { SL_HOST_NAME, SL_HOST_IPV4, SL_HOST_IPV6 } sl_host_kind;

typedef struct sl_host {
    sl_host_kind kind;
    /* Normalised text: a name lower-case ASCII without a trailing dot; an IP
     * literal in inet_ntop form (IPv6 without brackets). */
    char name[SL_HOST_MAX + 1];
    size_t len;
    sl_addr addr;          /* valid for IP literals */
} sl_host;

/* A request's host: a DNS name (LDH labels, '_' allowed, 1..63 octets a label,
 * at most 253 in all, one trailing dot dropped, case folded), a canonical
 * dotted-quad, or a bracketed IPv6 literal without zone id. ASCII only.
 * Anything that looks numeric but is not a canonical dotted quad (last label
 * all digits or 0x-hex: 127.1, 0x7f.0.0.1, 2130706433, 0177.0.0.1, 1.2.3.4.5,
 * and an address with a trailing dot, 127.0.0.1.) is refused, as is an
 * IPv6 literal without brackets. On error returns false and sets *err to a
 * short static reason. `s` need not be NUL-terminated; a NUL inside is an
 * error. */
bool sl_host_parse(const char *s, size_t len, sl_host *out, const char **err);

/* "host:port" (CONNECT target; port required) or "host[:port]" (URL
 * authority; port optional, *port = -1 when absent). Port 1..65535, decimal,
 * no sign, no leading zeros beyond "0"-less form. */
bool sl_authority_parse(const char *s, size_t len, bool port_required,
                        sl_host *out, int *port, const char **err);

/* Like sl_host_parse, but for an allowlist author: also accepts Unicode
 * (UTF-8), converted to its xn-- form with libidn2 (IDNA 2008, TR46
 * non-transitional). */
bool sl_host_parse_config(const char *s, size_t len, sl_host *out, const char **err);

/* Host text as it is written in an authority: IPv6 in brackets. */
const char *sl_host_authority(const sl_host *h, char *buf, size_t cap); /* cap >= SL_HOST_MAX+3 */

#endif
