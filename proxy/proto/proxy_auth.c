/* Proxy-Authorization: Basic. The base64 is decoded here rather than by
 * mbedtls_base64_decode: that one (for PEM) skips spaces and line breaks
 * inside its input, and a credential must have exactly one spelling, so
 * that what the gate checks is what every client and log sees. */
#include "proxy_auth.h"

#include <string.h>
#include <strings.h>

/* Every request of a session carries this: a table, not a chain of tests. */
#define B64_ROW(c) [c] = 1 + (c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : \
                              c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : 63)
static const unsigned char b64_table[256] = {
    B64_ROW('A'), B64_ROW('B'), B64_ROW('C'), B64_ROW('D'), B64_ROW('E'), B64_ROW('F'), B64_ROW('G'),
    B64_ROW('H'), B64_ROW('I'), B64_ROW('J'), B64_ROW('K'), B64_ROW('L'), B64_ROW('M'), B64_ROW('N'),
    B64_ROW('O'), B64_ROW('P'), B64_ROW('Q'), B64_ROW('R'), B64_ROW('S'), B64_ROW('T'), B64_ROW('U'),
    B64_ROW('V'), B64_ROW('W'), B64_ROW('X'), B64_ROW('Y'), B64_ROW('Z'), B64_ROW('a'), B64_ROW('b'),
    B64_ROW('c'), B64_ROW('d'), B64_ROW('e'), B64_ROW('f'), B64_ROW('g'), B64_ROW('h'), B64_ROW('i'),
    B64_ROW('j'), B64_ROW('k'), B64_ROW('l'), B64_ROW('m'), B64_ROW('n'), B64_ROW('o'), B64_ROW('p'),
    B64_ROW('q'), B64_ROW('r'), B64_ROW('s'), B64_ROW('t'), B64_ROW('u'), B64_ROW('v'), B64_ROW('w'),
    B64_ROW('x'), B64_ROW('y'), B64_ROW('z'), B64_ROW('0'), B64_ROW('1'), B64_ROW('2'), B64_ROW('3'),
    B64_ROW('4'), B64_ROW('5'), B64_ROW('6'), B64_ROW('7'), B64_ROW('8'), B64_ROW('9'), B64_ROW('+'),
    B64_ROW('/'),
};

static int b64_value(unsigned char ch)
{
    return (int)b64_table[ch] - 1;
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
    explicit_bzero(a->pass, sizeof a->pass);   /* not optimised away: the token must not linger */
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
        explicit_bzero(dec, sizeof dec);   /* a failed decode may have written some */
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
    if (colon && ulen > 0 && ulen <= SL_PROXY_AUTH_USER_MAX && !memchr(dec, '\0', ulen)) {
        /* The name, even of refused credentials: the log says who it
         * claimed to be (escaped; a NUL would cut it, so then none).
         * Never the token. */
        memcpy(out->user, dec, ulen);
        out->user[ulen] = '\0';
        out->user_len = ulen;
    }
    if (!why) {
        memcpy(out->pass, colon + 1, plen);
        out->pass[plen] = '\0';
        out->pass_len = plen;
    }
    explicit_bzero(dec, (size_t)n);
    if (why) {
        sl_proxy_auth_clear(out);
        return why;
    }
    return NULL;
}
