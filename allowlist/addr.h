/* IP addresses and CIDR blocks: parsing, formatting, containment. Pure. */
#ifndef SLUICE_ADDR_H
#define SLUICE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 address. IPv4 lives in b[0..3]; the rest is zero. */
typedef struct sl_addr {
    int family;            /* AF_INET or AF_INET6 */
    uint8_t b[16];
} sl_addr;

typedef struct sl_cidr {
    sl_addr base;          /* host bits are zero */
    unsigned prefix;       /* 0..32 or 0..128 */
} sl_cidr;

/* Longest text form: IPv6 with embedded IPv4, plus NUL. */
#define SL_ADDR_STRLEN 46

/* Canonical IPv4 (four decimal parts 0..255, no leading zeros) or IPv6 as
 * inet_pton accepts it, without brackets and without a zone id. `s` need not
 * be NUL-terminated. Anything else is false: 127.1, 0x7f.0.0.1, 2130706433,
 * 0177.0.0.1, fe80::1%eth0. */
bool sl_addr_parse(const char *s, size_t len, sl_addr *out);

/* inet_ntop form. Returns buf. */
const char *sl_addr_format(const sl_addr *a, char *buf, size_t cap);

bool sl_addr_equal(const sl_addr *a, const sl_addr *b);

/* "ADDR/PREFIX" or a bare ADDR (a host block). Host bits set below the
 * prefix are an error (10.0.0.1/8 is refused, as a typo guard). On error
 * writes a message into err and returns false. */
bool sl_cidr_parse(const char *s, sl_cidr *out, char *err, size_t errcap);
const char *sl_cidr_format(const sl_cidr *c, char *buf, size_t cap); /* cap >= 50 */
bool sl_cidr_contains(const sl_cidr *c, const sl_addr *a);

/* Conversions to and from socket addresses; port in host byte order. */
void sl_addr_from_sockaddr(const struct sockaddr *sa, sl_addr *out, int *port);
socklen_t sl_addr_to_sockaddr(const sl_addr *a, int port, struct sockaddr_storage *ss);

#endif
