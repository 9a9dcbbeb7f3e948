/* The Proxy-Authorization parser (proxy/proto/proxy_auth.c).
 *
 * Input: the first byte picks the mode, the rest is data.
 *   even: data is a header value as a client sends it;
 *   odd:  data is the decoded "NAME:TOKEN" text, which the harness encodes
 *         with its own base64 encoder behind "Basic ".
 *
 * Properties:
 *   - an accepted value is "Basic " (any case) and the canonical base64 of
 *     user ":" pass: encoding what came out gives back the input exactly,
 *     so a credential has one spelling;
 *   - user is 1..64 bytes, pass at most 256, both printable ASCII without
 *     space, user without ':';
 *   - in the odd mode, the encoding of a text within those rules is always
 *     accepted, with the same user and pass; one outside them never is;
 *   - on a refusal, out holds no byte of the token (the name, for the log,
 *     may stay, within its bound). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fuzz_util.h"
#include "proxy_auth.h"

static size_t encode(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned long w = (unsigned long)in[i] << 16;
        if (i + 1 < n)
            w |= (unsigned long)in[i + 1] << 8;
        if (i + 2 < n)
            w |= in[i + 2];
        out[o++] = tab[(w >> 18) & 63];
        out[o++] = tab[(w >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(w >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[w & 63] : '=';
    }
    return o;
}

static bool valid_text(const unsigned char *t, size_t n, size_t *ulen)
{
    const unsigned char *colon = memchr(t, ':', n);
    if (!colon)
        return false;
    *ulen = (size_t)(colon - t);
    if (*ulen == 0 || *ulen > 64 || n - *ulen - 1 > 256)
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x21 || t[i] > 0x7e)
            return false;
    return true;
}

static void check_clean(const sl_proxy_auth *a)
{
    for (size_t i = 0; i < sizeof a->pass; i++)
        FUZZ_CHECK(a->pass[i] == 0, "a refused value left token byte %zu in out", i);
    FUZZ_CHECK(a->pass_len == 0, "a refused value left the token's length set");
    FUZZ_CHECK(a->user_len <= 64 && strlen(a->user) == a->user_len, "a refused value's name is out of bounds");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    const unsigned char *d = data + 1;
    size_t n = size - 1;
    static char value[4096 * 2 + 16];
    size_t vlen;
    if (data[0] & 1) {
        memcpy(value, "Basic ", 6);
        vlen = 6 + encode(d, n, value + 6);
    } else {
        memcpy(value, d, n);
        vlen = n;
    }
    sl_proxy_auth a;
    const char *why = sl_proxy_auth_parse(value, vlen, &a);
    if (why) {
        check_clean(&a);
        if (data[0] & 1) {
            size_t ulen;
            FUZZ_CHECK(!valid_text(d, n, &ulen), "the encoding of a valid text was refused: %s", why);
        }
        return 0;
    }
    FUZZ_CHECK(a.user_len >= 1 && a.user_len <= 64 && a.pass_len <= 256, "lengths %zu %zu", a.user_len,
               a.pass_len);
    FUZZ_CHECK(strlen(a.user) == a.user_len && strlen(a.pass) == a.pass_len, "NUL inside the output");
    unsigned char text[64 + 1 + 256];
    memcpy(text, a.user, a.user_len);
    text[a.user_len] = ':';
    memcpy(text + a.user_len + 1, a.pass, a.pass_len);
    size_t tlen = a.user_len + 1 + a.pass_len, ulen;
    FUZZ_CHECK(valid_text(text, tlen, &ulen) && ulen == a.user_len, "accepted an invalid name or token");
    char again[512];
    size_t alen = encode(text, tlen, again);
    FUZZ_CHECK(vlen == 6 + alen && strncasecmp(value, "basic ", 6) == 0 && memcmp(value + 6, again, alen) == 0,
               "accepted a value that is not the one canonical spelling");
    if (data[0] & 1)
        FUZZ_CHECK(tlen == n && memcmp(text, d, n) == 0, "the text came back different");
    sl_proxy_auth_clear(&a);
    return 0;
}
