/* IP addresses and CIDR blocks. */
#include "addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strict dotted quad: inet_pton(AF_INET) already refuses 127.1, hex and
 * octal, but accepts nothing we need beyond it; we still check for leading
 * zeros ourselves because glibc's inet_pton accepts "01.2.3.4". */
static bool parse_v4(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return false;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3) {
            v = v * 10 + (unsigned)(s[i] - '0');
            i++;
        }
        size_t digits = i - start;
        if (digits == 0 || v > 255 || (digits > 1 && s[start] == '0'))
            return false;
        out[part] = (uint8_t)v;
    }
    return i == len;
}

bool sl_addr_parse(const char *s, size_t len, sl_addr *out)
{
    memset(out, 0, sizeof *out);
    /* A NUL inside would end the copy inet_pton sees: "::1\0x" is no address. */
    if (len == 0 || len >= SL_ADDR_STRLEN || memchr(s, '\0', len))
        return false;
    if (memchr(s, ':', len) == NULL) {
        if (!parse_v4(s, len, out->b))
            return false;
        out->family = AF_INET;
        return true;
    }
    char tmp[SL_ADDR_STRLEN];
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    /* inet_pton refuses zone ids ("%eth0") and brackets. */
    if (inet_pton(AF_INET6, tmp, out->b) != 1)
        return false;
    out->family = AF_INET6;
    return true;
}

const char *sl_addr_format(const sl_addr *a, char *buf, size_t cap)
{
    /* IPv4 by hand: glibc's inet_ntop formats it with sprintf, which was a
     * tenth of the gate's instructions per tunnel (two addresses each). */
    if (a->family == AF_INET && cap >= 16) {
        char *p = buf;
        for (int i = 0; i < 4; i++) {
            unsigned v = a->b[i];
            if (v >= 100)
                *p++ = (char)('0' + v / 100);
            if (v >= 10)
                *p++ = (char)('0' + v / 10 % 10);
            *p++ = (char)('0' + v % 10);
            *p++ = i < 3 ? '.' : '\0';
        }
        return buf;
    }
    if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->b, buf, (socklen_t)cap))
        snprintf(buf, cap, "?");
    return buf;
}

bool sl_addr_equal(const sl_addr *a, const sl_addr *b)
{
    return a->family == b->family &&
           memcmp(a->b, b->b, a->family == AF_INET ? 4 : 16) == 0;
}

static unsigned addr_bits(const sl_addr *a)
{
    return a->family == AF_INET ? 32 : 128;
}

bool sl_cidr_parse(const char *s, sl_cidr *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    if (!sl_addr_parse(s, alen, &out->base)) {
        snprintf(err, errcap, "'%.*s' is not an IP address", (int)(alen > 60 ? 60 : alen), s);
        return false;
    }
    unsigned max = addr_bits(&out->base);
    out->prefix = max;
    if (slash) {
        const char *p = slash + 1;
        char *end;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0')) {
            snprintf(err, errcap, "bad prefix length in '%s'", s);
            return false;
        }
        unsigned long v = strtoul(p, &end, 10);
        if (*end != '\0' || v > max) {
            snprintf(err, errcap, "bad prefix length in '%s' (0..%u)", s, max);
            return false;
        }
        out->prefix = (unsigned)v;
    }
    for (unsigned bit = out->prefix; bit < max; bit++) {
        if (out->base.b[bit / 8] & (0x80u >> (bit % 8))) {
            snprintf(err, errcap, "'%s' has host bits set below /%u", s, out->prefix);
            return false;
        }
    }
    return true;
}

const char *sl_cidr_format(const sl_cidr *c, char *buf, size_t cap)
{
    char a[SL_ADDR_STRLEN];
    snprintf(buf, cap, "%s/%u", sl_addr_format(&c->base, a, sizeof a), c->prefix);
    return buf;
}

bool sl_cidr_contains(const sl_cidr *c, const sl_addr *a)
{
    if (c->base.family != a->family)
        return false;
    unsigned full = c->prefix / 8, rest = c->prefix % 8;
    if (memcmp(c->base.b, a->b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (c->base.b[full] & mask) == (a->b[full] & mask);
}

void sl_addr_from_sockaddr(const struct sockaddr *sa, sl_addr *out, int *port)
{
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        out->family = AF_INET;
        memcpy(out->b, &in->sin_addr, 4);
        if (port)
            *port = ntohs(in->sin_port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        out->family = AF_INET6;
        memcpy(out->b, &in6->sin6_addr, 16);
        if (port)
            *port = ntohs(in6->sin6_port);
    }
}

socklen_t sl_addr_to_sockaddr(const sl_addr *a, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (a->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        memcpy(&in->sin_addr, a->b, 4);
        return sizeof *in;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    memcpy(&in6->sin6_addr, a->b, 16);
    return sizeof *in6;
}
