/* Proxy-Authorization: Basic (RFC 7617) of "NAME:TOKEN", parsed strictly:
 * the scheme (any case), one space, canonical base64 with its padding, a
 * colon in the decoded text. Pure; bounded by its output's arrays. */
#ifndef SLUICE_PROXY_AUTH_H
#define SLUICE_PROXY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define SL_PROXY_AUTH_USER_MAX 64
#define SL_PROXY_AUTH_PASS_MAX 256
/* The most header value bytes read: the encoded form of the two above. */
#define SL_PROXY_AUTH_VALUE_MAX (6 + 4 * ((SL_PROXY_AUTH_USER_MAX + 1 + SL_PROXY_AUTH_PASS_MAX + 2) / 3))

typedef struct sl_proxy_auth {
    char user[SL_PROXY_AUTH_USER_MAX + 1];
    size_t user_len;
    char pass[SL_PROXY_AUTH_PASS_MAX + 1];
    size_t pass_len;
} sl_proxy_auth;

/* NULL when the value is well formed (out filled); otherwise a static
 * text saying what is wrong ("not Basic", "bad base64", "no colon",
 * "too long", ...). On a failure the token is wiped from out; the name is
 * kept when the value decoded to one of at most SL_PROXY_AUTH_USER_MAX
 * bytes, none of them NUL, before a colon (for the log, which escapes it),
 * else empty. */
const char *sl_proxy_auth_parse(const char *value, size_t len, sl_proxy_auth *out);

/* Wipes the token. */
void sl_proxy_auth_clear(sl_proxy_auth *a);

#endif
