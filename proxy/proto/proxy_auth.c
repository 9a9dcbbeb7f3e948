/* Proxy-Authorization: Basic. The base64 is decoded here rather than by
 * mbedtls_base64_decode: that one (for PEM) skips spaces and line breaks
 * inside its input, and a credential must have exactly one spelling, so
 * that what the gate checks is what every client and log sees. */
#include "proxy_auth.h"

#include <string.h>
#include <strings.h>

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

/* Canonical base64 (RFC 4648 4): length a multiple of 4, '=' only at the
 * end, and the unused bits of the last symbol zero. Returns the decoded
 * length, or -1. */
static long b64_decode(const char *in, size_t len, unsigned char *out, size_t cap)
{
    if (len == 0 || len % 4 != 0)
        return -1;
    size_t pad = 0;
    if (in[len - 1] == '=')
        pad = in[len - 2] == '=' ? 2 : 1;
    size_t n = len / 4 * 3 - pad;
    if (n > cap)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            unsigned char ch = (unsigned char)in[i + (size_t)k];
            bool in_pad = i + 4 == len && (size_t)k >= 4 - pad;
            v[k] = in_pad ? (ch == '=' ? 0 : -1) : b64_value(ch);
            if (v[k] < 0)
                return -1;
        }
        unsigned long w = (unsigned long)v[0] << 18 | (unsigned long)v[1] << 12 | (unsigned long)v[2] << 6 |
                          (unsigned long)v[3];
        unsigned char b[3] = { (unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w };
        size_t take = i + 4 == len ? 3 - pad : 3;
        if (i + 4 == len && ((pad == 1 && b[2] != 0) || (pad == 2 && b[1] != 0)))
            return -1;   /* bits past the data: another spelling of the same bytes */
        memcpy(out + o, b, take);
        o += take;
    }
    return (long)o;
}

void sl_proxy_auth_clear(sl_proxy_auth *a)
{
    volatile char *p = a->pass;   /* not optimised away: the token must not linger */
    for (size_t i = 0; i < sizeof a->pass; i++)
        p[i] = 0;
    a->pass_len = 0;
}

static const char *fail(sl_proxy_auth *out, const char *why)
{
    sl_proxy_auth_clear(out);
    out->user[0] = '\0';
    out->user_len = 0;
    return why;
}

const char *sl_proxy_auth_parse(const char *value, size_t len, sl_proxy_auth *out)
{
    unsigned char dec[SL_PROXY_AUTH_USER_MAX + 1 + SL_PROXY_AUTH_PASS_MAX];
    memset(out, 0, sizeof *out);
    if (len > SL_PROXY_AUTH_VALUE_MAX)
        return fail(out, "too long");
    if (len < 6 || strncasecmp(value, "Basic ", 6) != 0)
        return fail(out, "not Basic (the gate takes Basic credentials: http://NAME:TOKEN@gate)");
    const char *b = value + 6;
    size_t blen = len - 6;
    long n = b64_decode(b, blen, dec, sizeof dec);
    if (n < 0) {
        volatile unsigned char *d = dec;
        for (size_t i = 0; i < sizeof dec; i++)
            d[i] = 0;
        return fail(out, blen * 3 / 4 > sizeof dec ? "too long" : "bad base64");
    }
    const unsigned char *colon = memchr(dec, ':', (size_t)n);
    const char *why = NULL;
    size_t ulen = colon ? (size_t)(colon - dec) : 0, plen = colon ? (size_t)n - ulen - 1 : 0;
    if (!colon)
        why = "no colon between name and token";
    else if (ulen == 0)
        why = "no session name";
    else if (ulen > SL_PROXY_AUTH_USER_MAX || plen > SL_PROXY_AUTH_PASS_MAX)
        why = "too long";
    else {
        for (size_t i = 0; i < (size_t)n; i++)
            if (dec[i] < 0x21 || dec[i] > 0x7e) {   /* names and tokens are printable ASCII */
                why = "a control, space or non-ASCII byte in the credentials";
                break;
            }
    }
    if (colon && ulen > 0 && ulen <= SL_PROXY_AUTH_USER_MAX) {
        /* The name, even of refused credentials: the log says who it
         * claimed to be (escaped). Never the token. */
        memcpy(out->user, dec, ulen);
        out->user[ulen] = '\0';
        out->user_len = ulen;
    }
    if (!why) {
        memcpy(out->pass, colon + 1, plen);
        out->pass[plen] = '\0';
        out->pass_len = plen;
    }
    volatile unsigned char *d = dec;
    for (size_t i = 0; i < sizeof dec; i++)
        d[i] = 0;
    if (why) {
        sl_proxy_auth_clear(out);
        return why;
    }
    return NULL;
}
