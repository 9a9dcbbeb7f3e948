/* The server name from a TLS ClientHello (RFC 8446 §4.1.2 and §5.1, RFC 6066
 * §3). The proxy decides whether a CONNECT tunnel may go on from this name, so
 * the parser is strict: anything a careful server could read differently from
 * us is MALFORMED rather than guessed at.
 *
 * Lengths are checked incrementally: every field lies inside the length its
 * parent declared, so a field that overruns its parent is MALFORMED at once,
 * even when the rest of the hello has not arrived; a field that lies inside its
 * parent but past the bytes received is NEED_MORE. A prefix of a valid hello
 * is therefore always NEED_MORE, and once a prefix is MALFORMED every longer
 * input is too. */
#include "tls_sni.h"

#include <stdbool.h>
#include <string.h>

enum {
    GO = -1,               /* internal: parsed, carry on (never returned) */

    REC_HANDSHAKE = 22,
    REC_HDR = 5,
    REC_MAX = 16384,       /* TLSPlaintext.length <= 2^14 */
    TLS_MAJOR = 3,
    TLS_MINOR_MAX = 4,     /* 3.0 (SSL 3) .. 3.4 (TLS 1.3 on the wire is 3.3) */

    HS_CLIENT_HELLO = 1,
    HS_HDR = 4,            /* msg_type(1) length(3) */
    RANDOM_LEN = 32,
    SESSION_ID_MAX = 32,

    EXT_SERVER_NAME = 0,
    NAME_TYPE_HOST = 0,
    HOST_NAME_MAX_LEN = 255,
};

/* A cursor over a field of which only a prefix may have arrived. `end` is where
 * the declared length says the field stops, `avail` how far the bytes received
 * reach; off <= avail <= end. */
typedef struct rd {
    const uint8_t *p;
    size_t off, avail, end;
} rd;

#define TRY(expr)                                                              \
    do {                                                                       \
        int try_ = (expr);                                                     \
        if (try_ != GO)                                                        \
            return try_;                                                       \
    } while (0)

static int take(rd *r, size_t n, const uint8_t **out)
{
    if (n > r->end - r->off)
        return SL_SNI_MALFORMED;   /* overruns the length of its parent */
    if (n > r->avail - r->off)
        return SL_SNI_NEED_MORE;   /* inside its parent, not received yet */
    *out = r->p + r->off;
    r->off += n;
    return GO;
}

static int get8(rd *r, size_t *v)
{
    const uint8_t *b;
    TRY(take(r, 1, &b));
    *v = b[0];
    return GO;
}

static int get16(rd *r, size_t *v)
{
    const uint8_t *b;
    TRY(take(r, 2, &b));
    *v = (size_t)b[0] << 8 | b[1];
    return GO;
}

/* Letters, digits, '.', '-', '_': what a DNS name can hold. Everything else -
 * NUL above all, which a C string would cut short into a different name - is
 * refused rather than compared. */
static bool host_byte_ok(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* The server_name extension body, which has fully arrived (its extension
 * length was satisfied). Exactly one entry, and it must be a host_name: RFC
 * 6066 permits one name per type and no other type was ever defined, and the
 * entry format of an unknown type is not even parseable, so like OpenSSL we
 * refuse anything else instead of skipping it. */
static int parse_server_name(const uint8_t *d, size_t n, const uint8_t **host,
                             size_t *host_len)
{
    rd r = {d, 0, n, n};
    size_t list_len, type, len;
    const uint8_t *name;

    TRY(get16(&r, &list_len));
    if (list_len == 0 || list_len != r.end - r.off)
        return SL_SNI_MALFORMED;   /* server_name_list<1..2^16-1> fills it */
    TRY(get8(&r, &type));
    if (type != NAME_TYPE_HOST)
        return SL_SNI_MALFORMED;
    TRY(get16(&r, &len));
    TRY(take(&r, len, &name));
    if (r.off != r.end)
        return SL_SNI_MALFORMED;   /* a second entry */
    if (len == 0 || len > HOST_NAME_MAX_LEN)
        return SL_SNI_MALFORMED;
    for (size_t i = 0; i < len; i++)
        if (!host_byte_ok(name[i]))
            return SL_SNI_MALFORMED;
    *host = name;
    *host_len = len;
    return GO;
}

/* The ClientHello body (after the 4-byte handshake header). On GO the whole
 * body was consumed; *host is NULL when there was no server_name. */
static int parse_hello(rd *r, const uint8_t **host, size_t *host_len)
{
    const uint8_t *b;
    size_t n;
    bool seen_sni = false;

    TRY(take(r, 2, &b));           /* legacy_version */
    if (b[0] != TLS_MAJOR || b[1] > TLS_MINOR_MAX)
        return SL_SNI_MALFORMED;
    TRY(take(r, RANDOM_LEN, &b));

    TRY(get8(r, &n));              /* legacy_session_id<0..32> */
    if (n > SESSION_ID_MAX)
        return SL_SNI_MALFORMED;
    TRY(take(r, n, &b));

    TRY(get16(r, &n));             /* cipher_suites<2..2^16-2>, 2 bytes each */
    if (n < 2 || n % 2 != 0)
        return SL_SNI_MALFORMED;
    TRY(take(r, n, &b));

    TRY(get8(r, &n));              /* legacy_compression_methods<1..2^8-1> */
    if (n < 1)
        return SL_SNI_MALFORMED;
    TRY(take(r, n, &b));

    /* Extensions may be absent altogether (SSL 3 / early TLS 1.x hellos);
     * off == end also implies every byte has arrived. */
    if (r->off == r->end)
        return GO;
    TRY(get16(r, &n));
    if (n != r->end - r->off)
        return SL_SNI_MALFORMED;   /* the block must fill the hello exactly */

    while (r->off < r->end) {
        size_t type, len;
        TRY(get16(r, &type));
        TRY(get16(r, &len));
        TRY(take(r, len, &b));
        /* Only server_name matters. encrypted_client_hello (0xfe0d) is
         * skipped like any other: with ECH the outer SNI is the client-facing
         * server the tunnel really connects to, and that outer name is what
         * the CONNECT host must match; the inner hello is not ours to read. */
        if (type != EXT_SERVER_NAME)
            continue;
        if (seen_sni)
            return SL_SNI_MALFORMED;   /* two server_name extensions */
        seen_sni = true;
        TRY(parse_server_name(b, len, host, host_len));
    }
    return GO;
}

/* Check the `n` (1..5) bytes of a record header present. The first record
 * decides whether this is TLS at all; a bad header later on is a broken hello. */
static int check_record_header(const uint8_t *h, size_t n, bool first)
{
    if (h[0] != REC_HANDSHAKE)
        return first ? SL_SNI_NOT_TLS : SL_SNI_MALFORMED;
    if (n >= 2 && h[1] != TLS_MAJOR)
        return first ? SL_SNI_NOT_TLS : SL_SNI_MALFORMED;
    if (n >= 3 && h[2] > TLS_MINOR_MAX)
        return SL_SNI_MALFORMED;
    if (n >= 4 && h[3] > (REC_MAX >> 8))
        return SL_SNI_MALFORMED;   /* already more than 2^14 */
    if (n >= 5) {
        size_t len = (size_t)h[3] << 8 | h[4];
        /* Handshake records must not be empty (RFC 8446 §5.1). */
        if (len == 0 || len > REC_MAX)
            return SL_SNI_MALFORMED;
    }
    return GO;
}

/* Validate the handshake header bytes gathered so far and say how many
 * handshake bytes the complete ClientHello takes. */
static int handshake_need(const uint8_t *hs, size_t hs_n, size_t *need)
{
    if (hs_n >= 1 && hs[0] != HS_CLIENT_HELLO)
        return SL_SNI_MALFORMED;
    if (hs_n < HS_HDR) {
        *need = HS_HDR;
        return GO;
    }
    size_t body = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
    if (body > SL_SNI_MAX_BYTES - HS_HDR)
        return SL_SNI_MALFORMED;   /* more than sluice waits for */
    *need = HS_HDR + body;
    return GO;
}

sl_sni_result sl_tls_sni(const uint8_t *buf, size_t len, char *name, size_t cap,
                         size_t *name_len)
{
    /* The handshake bytes from consecutive records, glued together. A hello
     * is almost always in one record, but splitting it is legal and is an
     * easy way to dodge a filter that only looks at the first record. */
    uint8_t hs[SL_SNI_MAX_BYTES];
    size_t hs_n = 0, need = HS_HDR, pos = 0;

    for (;;) {
        TRY(handshake_need(hs, hs_n, &need));
        if (hs_n >= need || pos == len)
            break;                 /* complete, or everything received used */

        size_t have = len - pos;
        TRY(check_record_header(buf + pos, have < REC_HDR ? have : REC_HDR,
                                pos == 0));
        if (have < REC_HDR) {
            pos = len;
            continue;
        }
        size_t rec_len = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
        size_t got = have - REC_HDR < rec_len ? have - REC_HDR : rec_len;
        /* The buffer only fills up after the handshake header has been read
         * and accepted (need <= sizeof hs), so what does not fit lies past
         * the end of the hello and dropping it loses nothing. */
        size_t copy = got < sizeof hs - hs_n ? got : sizeof hs - hs_n;
        memcpy(hs + hs_n, buf + pos + REC_HDR, copy);
        hs_n += copy;
        pos += REC_HDR + got;
    }

    if (hs_n < HS_HDR)
        return SL_SNI_NEED_MORE;
    /* Whatever follows the hello (the rest of its record, further records
     * such as a TLS 1.3 compatibility ChangeCipherSpec or early data) is not
     * ours to judge. */
    rd r = {hs + HS_HDR, 0, (hs_n < need ? hs_n : need) - HS_HDR, need - HS_HDR};
    const uint8_t *host = NULL;
    size_t host_len = 0;
    TRY(parse_hello(&r, &host, &host_len));

    if (host == NULL)
        return SL_SNI_ABSENT;
    if (name != NULL) {
        /* A name that does not fit is never truncated into a different one;
         * failing closed is the only safe answer to a too-small buffer. */
        if (cap <= host_len)
            return SL_SNI_MALFORMED;
        memcpy(name, host, host_len);
        name[host_len] = '\0';
    }
    if (name_len != NULL)
        *name_len = host_len;
    return SL_SNI_FOUND;
}

const char *sl_sni_result_str(sl_sni_result r)
{
    switch (r) {
    case SL_SNI_FOUND:     return "found";
    case SL_SNI_ABSENT:    return "absent";
    case SL_SNI_NEED_MORE: return "need_more";
    case SL_SNI_NOT_TLS:   return "not_tls";
    case SL_SNI_MALFORMED: return "malformed";
    }
    return "unknown";
}
