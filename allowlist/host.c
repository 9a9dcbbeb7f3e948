/* Host names and authorities: strict parsing and normalisation.
 *
 * The proxy decides on the text of a host before DNS is asked anything, so
 * the text must mean exactly one thing. We therefore accept only a narrow
 * grammar and refuse everything a resolver or URL parser might read in more
 * than one way (inet_aton-style numbers, zone ids, percent-encoding, ...). */
#include "host.h"

#include <idn2.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX 63
/* Longest Unicode host text we hand to libidn2: generous (a UTF-8 name can
 * be several times longer than its xn-- form) but bounded. */
#define CONFIG_HOST_MAX 1024

static bool fail(const char **err, const char *msg)
{
    if (err)
        *err = msg;
    return false;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A label inet_aton or the WHATWG URL parser would read as a number:
 * decimal/octal digits, or 0x followed by hex digits (possibly none). */
static bool label_is_numeric(const char *s, size_t len)
{
    if (len == 0)
        return false;
    if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        for (size_t i = 2; i < len; i++)
            if (!is_hex(s[i]))
                return false;
        return true;
    }
    for (size_t i = 0; i < len; i++)
        if (!is_digit(s[i]))
            return false;
    return true;
}

/* Bracketed IPv6: "[" inet_pton-form "]", no zone id. */
static bool parse_v6_literal(const char *s, size_t len, sl_host *out, const char **err)
{
    if (len < 2 || s[len - 1] != ']')
        return fail(err, "unbalanced '[' in host");
    const char *in = s + 1;
    size_t n = len - 2;
    if (n == 0)
        return fail(err, "empty IPv6 literal");
    /* '%' would be a zone id ("fe80::1%eth0" or the URL form "%25eth0"):
     * meaningless off-link and a parser differential, so refused. */
    if (memchr(in, '%', n))
        return fail(err, "zone id not allowed in IPv6 literal");
    if (memchr(in, '[', n) || memchr(in, ']', n))
        return fail(err, "extra bracket in IPv6 literal");
    if (!memchr(in, ':', n))
        return fail(err, "brackets are only for IPv6 literals");
    if (!sl_addr_parse(in, n, &out->addr) || out->addr.family != AF_INET6)
        return fail(err, "bad IPv6 literal");
    out->kind = SL_HOST_IPV6;
    sl_addr_format(&out->addr, out->name, sizeof out->name);
    out->len = strlen(out->name);
    return true;
}

bool sl_host_parse(const char *s, size_t len, sl_host *out, const char **err)
{
    memset(out, 0, sizeof *out);
    if (len == 0)
        return fail(err, "empty host");
    if (s[0] == '[')
        return parse_v6_literal(s, len, out, err);

    /* Byte checks first, so that the reason names the real problem. */
    bool colon = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0)
            return fail(err, "NUL byte in host");
        if (c >= 0x80)
            return fail(err, "non-ASCII byte in host");
        if (c == ' ' || c == '\t')
            return fail(err, "space in host");
        if (c < 0x20 || c == 0x7f)
            return fail(err, "control character in host");
        if (c == '%')
            return fail(err, "percent-encoding in host");
        if (c == '@')
            return fail(err, "'@' (userinfo) in host");
        if (c == '[' || c == ']')
            return fail(err, "misplaced bracket in host");
        if (c == ':')
            colon = true;
    }
    if (colon) {
        sl_addr a;
        if (sl_addr_parse(s, len, &a))
            return fail(err, "IPv6 literal must be in brackets");
        return fail(err, "':' in host");
    }

    /* One trailing dot is the DNS root and means nothing here. */
    bool trailing_dot = false;
    if (s[len - 1] == '.') {
        trailing_dot = true;
        len--;
    }
    if (len == 0)
        return fail(err, "empty host");
    if (len > SL_HOST_MAX)
        return fail(err, "host name longer than 253 bytes");

    size_t start = 0, last_start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        size_t n = i - start;
        if (n == 0)
            return fail(err, "empty label in host");
        if (n > LABEL_MAX)
            return fail(err, "label longer than 63 bytes in host");
        for (size_t j = start; j < i; j++) {
            char c = s[j];
            if (!(is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '-' || c == '_'))
                return fail(err, "invalid character in host");
        }
        if (s[start] == '-' || s[i - 1] == '-')
            return fail(err, "label starts or ends with '-'");
        last_start = start;
        start = i + 1;
    }

    /* A numeric last label makes resolvers and URL parsers read the whole
     * name as an IPv4 address in one of inet_aton's forms (127.1,
     * 0x7f.0.0.1, 2130706433, 0177.0.0.1). Only the canonical dotted quad
     * is unambiguous; everything else numeric is refused. A trailing dot on
     * an address is not canonical either. */
    if (label_is_numeric(s + last_start, len - last_start)) {
        if (trailing_dot || !sl_addr_parse(s, len, &out->addr))
            return fail(err, "ambiguous numeric host");
        out->kind = SL_HOST_IPV4;
        sl_addr_format(&out->addr, out->name, sizeof out->name);
        out->len = strlen(out->name);
        return true;
    }

    out->kind = SL_HOST_NAME;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        out->name[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    out->name[len] = '\0';
    out->len = len;
    return true;
}

/* Decimal 1..65535, no sign, no leading zero, nothing else. */
static bool parse_port(const char *s, size_t len, int *port, const char **err)
{
    if (len == 0)
        return fail(err, "empty port");
    if (len > 5)
        return fail(err, "port out of range");
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return fail(err, "port is not a decimal number");
        v = v * 10 + (s[i] - '0');
    }
    if (s[0] == '0' && len > 1)
        return fail(err, "leading zero in port");
    if (v < 1 || v > 65535)
        return fail(err, "port out of range");
    *port = v;
    return true;
}

bool sl_authority_parse(const char *s, size_t len, bool port_required,
                        sl_host *out, int *port, const char **err)
{
    memset(out, 0, sizeof *out);
    *port = -1;
    size_t hlen;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return fail(err, "unbalanced '[' in host");
        hlen = (size_t)(close - s) + 1;
        if (hlen < len && s[hlen] != ':')
            return fail(err, "unexpected text after IPv6 literal");
    } else {
        const char *colon = memchr(s, ':', len);
        hlen = colon ? (size_t)(colon - s) : len;
        sl_addr a;
        if (colon && memchr(colon + 1, ':', len - hlen - 1) &&
            sl_addr_parse(s, len, &a))
            return fail(err, "IPv6 literal must be in brackets");
    }
    if (hlen == 0)
        return fail(err, "empty host");
    if (!sl_host_parse(s, hlen, out, err))
        return false;
    if (hlen == len) {
        if (port_required)
            return fail(err, "missing port");
        return true;
    }
    /* s[hlen] == ':' here */
    return parse_port(s + hlen + 1, len - hlen - 1, port, err);
}

bool sl_host_parse_config(const char *s, size_t len, sl_host *out, const char **err)
{
    bool ascii = true;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') {
            memset(out, 0, sizeof *out);
            return fail(err, "NUL byte in host");
        }
        if ((unsigned char)s[i] >= 0x80)
            ascii = false;
    }
    if (ascii)
        return sl_host_parse(s, len, out, err);

    memset(out, 0, sizeof *out);
    if (len > CONFIG_HOST_MAX)
        return fail(err, "host name too long");
    char in[CONFIG_HOST_MAX + 1];
    memcpy(in, s, len);
    in[len] = '\0';
    /* IDNA 2008 with UTS #46 non-transitional mapping (ß stays ß), the
     * behaviour of current browsers and curl. libidn2 also refuses invalid
     * UTF-8. Its output goes through the ASCII parser, which re-checks every
     * rule (labels, length, numeric forms). */
    uint8_t *ace = NULL;
    int rc = idn2_lookup_u8((const uint8_t *)in, &ace,
                            IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
    if (rc != IDN2_OK) {
        idn2_free(ace);
        return fail(err, rc == IDN2_ENCODING_ERROR ? "host is not valid UTF-8"
                                                   : "invalid internationalised host name");
    }
    bool ok = sl_host_parse((const char *)ace, strlen((const char *)ace), out, err);
    idn2_free(ace);
    return ok;
}

const char *sl_host_authority(const sl_host *h, char *buf, size_t cap)
{
    if (cap == 0)
        return buf;
    size_t need = h->len + (h->kind == SL_HOST_IPV6 ? 2 : 0) + 1;
    if (need > cap) {
        buf[0] = '\0';
        return buf;
    }
    char *p = buf;
    if (h->kind == SL_HOST_IPV6)
        *p++ = '[';
    memcpy(p, h->name, h->len);
    p += h->len;
    if (h->kind == SL_HOST_IPV6)
        *p++ = ']';
    *p = '\0';
    return buf;
}
