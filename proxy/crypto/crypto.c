/* Everything sluice does with mbedtls: hashing (or the x86 SHA extensions
 * where the CPU has them), version information, and TLS for inspected
 * tunnels (tls.h): sessions, the inspection CA and its leaves, `ca init`.
 * The only file that includes mbedtls headers (make check-layout). */
#include "crypto.h"
#include "sha256ni.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/asn1.h>
#include <mbedtls/asn1write.h>
#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pem.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <mbedtls/sha512.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#include "addr.h"
#include "host.h"

const char *sl_crypto_version(void)
{
    static char v[32];
    if (!v[0])
        mbedtls_version_get_string(v);
    return v;
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void sl_sha256(const void *data, size_t len, unsigned char out[32])
{
    if (sl_sha256ni_available()) {
        sl_sha256ni s;
        sl_sha256ni_init(&s);
        sl_sha256ni_update(&s, data, len);
        sl_sha256ni_final(&s, out);
        return;
    }
    mbedtls_sha256_ret(data, len, out, 0);
}

void sl_chain_next(const char *prev, size_t prev_len, const char *text, size_t text_len,
                   char out_hex[65])
{
    unsigned char digest[32];
    if (sl_sha256ni_available()) {
        sl_sha256ni s;
        sl_sha256ni_init(&s);
        sl_sha256ni_update(&s, prev, prev_len);
        sl_sha256ni_update(&s, text, text_len);
        sl_sha256ni_final(&s, digest);
        to_hex(digest, sizeof digest, out_hex);
        return;
    }
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    mbedtls_sha256_starts_ret(&ctx, 0);
    mbedtls_sha256_update_ret(&ctx, (const unsigned char *)prev, prev_len);
    mbedtls_sha256_update_ret(&ctx, (const unsigned char *)text, text_len);
    mbedtls_sha256_finish_ret(&ctx, digest);
    mbedtls_sha256_free(&ctx);
    to_hex(digest, sizeof digest, out_hex);
}

/* ---- pinned bodies ---- */

enum { PIN_SHA256, PIN_SHA384, PIN_SHA512, PIN_NALG };

struct sl_pin {
    bool on[PIN_NALG];
    int order[PIN_NALG];                /* algorithms in the rule's first-named order */
    int norder;
    bool ni;                            /* sha256 on the SHA extensions */
    sl_sha256ni ni256;
    mbedtls_sha256_context c256;
    mbedtls_sha512_context c384, c512;
    const char *const *digests;         /* the rule's: it outlives the exchange */
    size_t ndigests;
};

static int pin_alg(const char *d)
{
    if (!strncmp(d, "sha256-", 7))
        return PIN_SHA256;
    if (!strncmp(d, "sha384-", 7))
        return PIN_SHA384;
    if (!strncmp(d, "sha512-", 7))
        return PIN_SHA512;
    return -1;
}

sl_pin *sl_pin_new(const char *const *digests, size_t n)
{
    sl_pin *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->digests = digests;
    p->ndigests = n;
    for (size_t i = 0; i < n; i++) {
        int a = pin_alg(digests[i]);
        if (a < 0 || p->on[a])
            continue;
        p->on[a] = true;
        p->order[p->norder++] = a;
    }
    if (!p->norder) {
        free(p);
        return NULL;
    }
    if (p->on[PIN_SHA256]) {
        p->ni = sl_sha256ni_available();
        if (p->ni) {
            sl_sha256ni_init(&p->ni256);
        } else {
            mbedtls_sha256_init(&p->c256);
            mbedtls_sha256_starts_ret(&p->c256, 0);
        }
    }
    if (p->on[PIN_SHA384]) {
        mbedtls_sha512_init(&p->c384);
        mbedtls_sha512_starts_ret(&p->c384, 1);
    }
    if (p->on[PIN_SHA512]) {
        mbedtls_sha512_init(&p->c512);
        mbedtls_sha512_starts_ret(&p->c512, 0);
    }
    return p;
}

void sl_pin_update(sl_pin *p, const void *data, size_t len)
{
    if (p->on[PIN_SHA256]) {
        if (p->ni)
            sl_sha256ni_update(&p->ni256, data, len);
        else
            mbedtls_sha256_update_ret(&p->c256, data, len);
    }
    if (p->on[PIN_SHA384])
        mbedtls_sha512_update_ret(&p->c384, data, len);
    if (p->on[PIN_SHA512])
        mbedtls_sha512_update_ret(&p->c512, data, len);
}

bool sl_pin_finish(sl_pin *p, char *actual, size_t cap)
{
    static const char *const names[PIN_NALG] = { "sha256-", "sha384-", "sha512-" };
    static const size_t lens[PIN_NALG] = { 32, 48, 64 };
    char sri[PIN_NALG][100];
    unsigned char md[64];
    for (int a = 0; a < PIN_NALG; a++) {
        if (!p->on[a])
            continue;
        if (a == PIN_SHA256 && p->ni)
            sl_sha256ni_final(&p->ni256, md);
        else if (a == PIN_SHA256)
            mbedtls_sha256_finish_ret(&p->c256, md);
        else
            mbedtls_sha512_finish_ret(a == PIN_SHA384 ? &p->c384 : &p->c512, md);
        size_t olen = 0;
        memcpy(sri[a], names[a], 7);
        mbedtls_base64_encode((unsigned char *)sri[a] + 7, sizeof sri[a] - 7, &olen, md, lens[a]);
        sri[a][7 + olen] = '\0';
    }
    bool match = false;
    for (size_t i = 0; i < p->ndigests && !match; i++) {
        int a = pin_alg(p->digests[i]);
        match = a >= 0 && !strcmp(sri[a], p->digests[i]);
    }
    size_t off = 0;
    if (cap)
        actual[0] = '\0';
    for (int k = 0; k < p->norder && off < cap; k++)
        off += (size_t)snprintf(actual + off, cap - off, "%s%s", k ? " " : "", sri[p->order[k]]);
    return match;
}

void sl_pin_free(sl_pin *p)
{
    if (!p)
        return;
    if (p->on[PIN_SHA256] && !p->ni)
        mbedtls_sha256_free(&p->c256);
    if (p->on[PIN_SHA384])
        mbedtls_sha512_free(&p->c384);
    if (p->on[PIN_SHA512])
        mbedtls_sha512_free(&p->c512);
    free(p);
}

void sl_random_hex(char *out, size_t n)
{
    unsigned char b[64];
    if (n > sizeof b)
        n = sizeof b;
    if (getrandom(b, n, 0) != (ssize_t)n) {
        /* getrandom on Linux >= 3.17 does not fail for n <= 256 once the
         * pool is initialised; fall back to something unique anyway. */
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)((uintptr_t)&b ^ (i * 131u));
    }
    to_hex(b, n, out);
}

/* ======================================================================
 * TLS for inspected tunnels (tls.h)
 * ====================================================================== */

/* ---- randomness ----
 * mbedtls_ctr_drbg is not safe to share between threads, and the configs
 * are shared by all workers: the configs' rng finds its own thread's DRBG,
 * seeded from getrandom the first time a thread needs one. */
static int getrandom_entropy(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    while (len > 0) {
        ssize_t n = getrandom(out, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return MBEDTLS_ERR_ENTROPY_SOURCE_FAILED;
        out += n;
        len -= (size_t)n;
    }
    return 0;
}

static _Thread_local mbedtls_ctr_drbg_context tl_drbg;
static _Thread_local bool tl_drbg_ready;

static int rng(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    if (!tl_drbg_ready) {
        static const unsigned char pers[] = "sluice tls";
        mbedtls_ctr_drbg_init(&tl_drbg);
        int r = mbedtls_ctr_drbg_seed(&tl_drbg, getrandom_entropy, NULL, pers, sizeof pers - 1);
        if (r != 0) {
            mbedtls_ctr_drbg_free(&tl_drbg);
            return r;
        }
        tl_drbg_ready = true;
    }
    while (len > 0) {
        size_t n = len < MBEDTLS_CTR_DRBG_MAX_REQUEST ? len : MBEDTLS_CTR_DRBG_MAX_REQUEST;
        int r = mbedtls_ctr_drbg_random(&tl_drbg, out, n);
        if (r != 0)
            return r;
        out += n;
        len -= n;
    }
    return 0;
}

/* ---- messages ---- */

/* Appends to a message buffer, cutting at its end. */
typedef struct msgbuf {
    char *p;
    size_t cap, len;
} msgbuf;

static void msg_add(msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void msg_add(msgbuf *m, const char *fmt, ...)
{
    if (!m->cap || m->len + 1 >= m->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->p + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        m->len = m->len + (size_t)n < m->cap ? m->len + (size_t)n : m->cap - 1;
}

static void set_err(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t cap, const char *fmt, ...)
{
    if (!cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* A peer's text (a certificate's names) made safe to show: printable
 * ASCII, at most cap-1 bytes. */
static void clean_copy(char *dst, size_t cap, const unsigned char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++)
        dst[o++] = src[i] >= 0x20 && src[i] < 0x7f ? (char)src[i] : '?';
    if (cap)
        dst[o] = '\0';
}

/* mbedtls' text for an error, without its "SSL - " module prefix. */
static void mbed_strerror(int ret, char *buf, size_t cap)
{
    char tmp[200];
    mbedtls_strerror(ret, tmp, sizeof tmp);
    const char *p = tmp, *dash = strstr(tmp, " - ");
    if (dash && dash - tmp <= 12)
        p = dash + 3;
    set_err(buf, cap, "%s", p);
    if (cap && buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
}

static const char *alert_name(int a)
{
    switch (a) {
    case 0: return "close_notify";
    case 10: return "unexpected_message";
    case 20: return "bad_record_mac";
    case 22: return "record_overflow";
    case 40: return "handshake_failure";
    case 42: return "bad_certificate";
    case 43: return "unsupported_certificate";
    case 44: return "certificate_revoked";
    case 45: return "certificate_expired";
    case 46: return "certificate_unknown";
    case 47: return "illegal_parameter";
    case 48: return "unknown_ca";
    case 49: return "access_denied";
    case 50: return "decode_error";
    case 51: return "decrypt_error";
    case 70: return "protocol_version";
    case 71: return "insufficient_security";
    case 80: return "internal_error";
    case 86: return "inappropriate_fallback";
    case 90: return "user_canceled";
    case 100: return "no_renegotiation";
    case 109: return "missing_extension";
    case 110: return "unsupported_extension";
    case 112: return "unrecognized_name";
    case 116: return "certificate_required";
    case 120: return "no_application_protocol";
    default: return "unknown";
    }
}

static time_t x509_time_t(const mbedtls_x509_time *t)
{
    struct tm tm = { .tm_year = t->year - 1900, .tm_mon = t->mon - 1, .tm_mday = t->day,
                     .tm_hour = t->hour, .tm_min = t->min, .tm_sec = t->sec };
    return timegm(&tm);
}

static void x509_time_str(const mbedtls_x509_time *t, char *buf, size_t cap)
{
    set_err(buf, cap, "%04d-%02d-%02d %02d:%02d:%02d UTC", t->year, t->mon, t->day, t->hour, t->min,
            t->sec);
}

/* ---- what both sides share ---- */

/* TLS 1.2, ECDHE with AEAD only. The leaves are ECDSA; the RSA suites are
 * for origins with RSA certificates. X25519 first: in mbedtls 2.28 it costs
 * 2.6 ms of CPU a key exchange here, P-256 2.8 (the client's order decides
 * on the server side). */
static const int tls_suites[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    0,
};
static const mbedtls_ecp_group_id tls_curves[] = {
    MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1, MBEDTLS_ECP_DP_NONE,
};
static const char *tls_alpn[] = { "http/1.1", NULL };

static int conf_common(mbedtls_ssl_config *c, int endpoint)
{
    int r = mbedtls_ssl_config_defaults(c, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (r != 0)
        return r;
    mbedtls_ssl_conf_min_version(c, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(c, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_ciphersuites(c, tls_suites);
    mbedtls_ssl_conf_curves(c, tls_curves);
    mbedtls_ssl_conf_rng(c, rng, NULL);
    mbedtls_ssl_conf_renegotiation(c, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
    mbedtls_ssl_conf_session_tickets(c, MBEDTLS_SSL_SESSION_TICKETS_DISABLED);
    return mbedtls_ssl_conf_alpn_protocols(c, tls_alpn);
}

/* A host as sluice names it: a DNS name (lower-cased here) or an IP
 * literal (IPv6 with or without brackets). */
typedef struct tls_host {
    char name[SL_HOST_MAX + 1];
    bool ip;
    sl_addr addr;
} tls_host;

static bool tls_host_parse(const char *host, tls_host *h, char *err, size_t cap)
{
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n > SL_HOST_MAX) {
        set_err(err, cap, "bad host name for TLS");
        return false;
    }
    memset(h, 0, sizeof *h);
    h->ip = sl_addr_parse(host, n, &h->addr);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)host[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            set_err(err, cap, "bad host name for TLS");
            return false;
        }
        h->name[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
    h->name[n] = '\0';
    return true;
}

/* ---- name constraints (RFC 5280 4.2.1.10) ----
 * mbedtls 2.28 neither writes nor reads this extension: sluice builds it for
 * `ca init --permit` and reads it back from the CA it is given, so that it
 * never makes a leaf the CA's own constraints forbid (clients would refuse
 * it; mbedtls would not even notice). */

typedef struct nc_name {
    bool ip;
    char dns[SL_HOST_MAX + 2];   /* dNSName base, lower case */
    int family;                  /* iPAddress base */
    uint8_t addr[16], mask[16];
} nc_name;

typedef struct nc_set {          /* one certificate's constraints */
    nc_name *permit, *exclude;
    size_t npermit, nexclude;
} nc_set;

static void nc_set_free(nc_set *s)
{
    free(s->permit);
    free(s->exclude);
    memset(s, 0, sizeof *s);
}

static bool nc_push(nc_name **v, size_t *n, const nc_name *x)
{
    if (*n >= 256)
        return false;
    nc_name *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return false;
    nv[(*n)++] = *x;
    *v = nv;
    return true;
}

/* GeneralSubtrees ::= SEQUENCE SIZE (1..MAX) OF GeneralSubtree (the
 * [0]/[1] IMPLICIT tag already read: p..end are its contents). 0 or an
 * mbedtls error; *unsupported set for a name type sluice cannot judge. */
static int nc_parse_subtrees(unsigned char *p, const unsigned char *end, nc_name **v, size_t *n,
                             int *unsupported)
{
    while (p < end) {
        size_t len;
        int r = mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
        if (r != 0)
            return r;
        const unsigned char *sub_end = p + len;
        if (sub_end - p < 2)
            return MBEDTLS_ERR_ASN1_OUT_OF_DATA;
        unsigned char tag = *p++;
        size_t glen;
        if ((r = mbedtls_asn1_get_len(&p, sub_end, &glen)) != 0)
            return r;
        nc_name x;
        memset(&x, 0, sizeof x);
        if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)) {          /* dNSName */
            if (glen > SL_HOST_MAX)
                return MBEDTLS_ERR_ASN1_INVALID_LENGTH;
            for (size_t i = 0; i < glen; i++) {
                unsigned char ch = p[i];
                if (ch <= 0x20 || ch >= 0x7f)
                    return MBEDTLS_ERR_ASN1_INVALID_DATA;
                x.dns[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
            }
            if (!nc_push(v, n, &x))
                return MBEDTLS_ERR_ASN1_ALLOC_FAILED;
        } else if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7)) {   /* iPAddress: address, mask */
            if (glen != 8 && glen != 32)
                return MBEDTLS_ERR_ASN1_INVALID_LENGTH;
            x.ip = true;
            x.family = glen == 8 ? AF_INET : AF_INET6;
            memcpy(x.addr, p, glen / 2);
            memcpy(x.mask, p + glen / 2, glen / 2);
            if (!nc_push(v, n, &x))
                return MBEDTLS_ERR_ASN1_ALLOC_FAILED;
        } else {
            *unsupported = tag & 0x1f;
        }
        p = (unsigned char *)sub_end;   /* minimum/maximum are not used in PKIX */
    }
    return 0;
}

static int nc_parse(unsigned char *p, const unsigned char *end, nc_set *s, int *unsupported)
{
    size_t len;
    int r = mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
    if (r != 0)
        return r;
    if (p + len != end)
        return MBEDTLS_ERR_ASN1_LENGTH_MISMATCH;
    while (p < end) {
        unsigned char tag = *p;
        p++;
        if ((r = mbedtls_asn1_get_len(&p, end, &len)) != 0)
            return r;
        if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 0))
            r = nc_parse_subtrees(p, p + len, &s->permit, &s->npermit, unsupported);
        else if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 1))
            r = nc_parse_subtrees(p, p + len, &s->exclude, &s->nexclude, unsupported);
        else
            r = MBEDTLS_ERR_ASN1_UNEXPECTED_TAG;
        if (r != 0)
            return r;
        p += len;
    }
    return 0;
}

/* As OpenSSL (nc_dns) and RFC 5280 read a dNSName constraint: "example.com"
 * covers it and every name under it; ".example.com" only names under it;
 * "" everything. */
static bool nc_dns_match(const char *base, const char *name)
{
    size_t bl = strlen(base), nl = strlen(name);
    if (bl == 0)
        return true;
    if (nl < bl)
        return false;
    if (nl > bl && base[0] != '.' && name[nl - bl - 1] != '.')
        return false;
    return strcasecmp(name + nl - bl, base) == 0;
}

static bool nc_ip_match(const nc_name *c, const sl_addr *a)
{
    if (c->family != a->family)
        return false;
    size_t n = a->family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < n; i++)
        if ((a->b[i] & c->mask[i]) != (c->addr[i] & c->mask[i]))
            return false;
    return true;
}

static bool nc_matches(const nc_name *c, const tls_host *h)
{
    if (c->ip != h->ip)
        return false;
    return h->ip ? nc_ip_match(c, &h->addr) : nc_dns_match(c->dns, h->name);
}

/* Whether a leaf for h passes one certificate's constraints. Constraints
 * of one name type bind only names of that type. */
static bool nc_permits(const nc_set *s, const tls_host *h)
{
    for (size_t i = 0; i < s->nexclude; i++)
        if (nc_matches(&s->exclude[i], h))
            return false;
    bool any_of_type = false;
    for (size_t i = 0; i < s->npermit; i++) {
        if (s->permit[i].ip != h->ip)
            continue;
        any_of_type = true;
        if (nc_matches(&s->permit[i], h))
            return true;
    }
    return !any_of_type;
}

/* ---- the inspection CA and its leaves ---- */

#define TICKET_S 3600   /* lifetime of a session ticket's key */

typedef struct leaf leaf;
struct leaf {
    leaf *hnext;              /* hash chain */
    leaf *prev, *next;        /* LRU list, most recent first */
    unsigned refs;            /* the cache's, and one per session; under srv->lock */
    bool cached;
    time_t renew_at;          /* an hour before it expires: made again from then */
    mbedtls_x509_crt crt;     /* the leaf; its next is the server's CA chain (shared) */
    mbedtls_ssl_config conf;
    /* Each leaf has its own ticket key: a ticket is good only for the host
     * it was issued for, so a tunnel to one host cannot resume a session
     * made for another (RFC 6066 section 3: the server must not resume
     * when the name differs; mbedtls 2.28 does not check). */
    mbedtls_ssl_ticket_context tickets;
    char host[];
};

struct sl_tls_server {
    mbedtls_x509_crt ca;              /* ca_cert's certificates, the CA first */
    mbedtls_pk_context ca_key;
    mbedtls_pk_context leaf_key;      /* one P-256 key pair for every leaf */
    mbedtls_md_type_t md;
    unsigned char ca_ski[64];
    size_t ca_ski_len;
    nc_set *nc;                       /* the name constraints of each certificate that has some */
    size_t nnc;
    time_t ca_not_after;
    int leaf_days;
    size_t cache_max;
    pthread_mutex_t lock;
    leaf **buckets;
    size_t nbuckets, ncached;
    uint64_t made;
    leaf *lru_head, *lru_tail;
};

/* What the extension callback collects while the CA file is parsed. */
typedef struct ca_ext {
    sl_tls_server *srv;
    bool first;
    int unsupported_nc;       /* a constraint on a name type other than DNS and IP */
} ca_ext;

static int ca_ext_cb(void *ctx, mbedtls_x509_crt const *crt, mbedtls_x509_buf const *oid, int critical,
                     const unsigned char *p, const unsigned char *end)
{
    (void)crt;
    ca_ext *ce = ctx;
    if (MBEDTLS_OID_CMP(MBEDTLS_OID_NAME_CONSTRAINTS, oid) == 0) {
        nc_set s;
        memset(&s, 0, sizeof s);
        int r = nc_parse((unsigned char *)p, end, &s, &ce->unsupported_nc);
        nc_set *nv = r == 0 ? realloc(ce->srv->nc, (ce->srv->nnc + 1) * sizeof *nv) : NULL;
        if (!nv) {
            nc_set_free(&s);
            return r != 0 ? r : MBEDTLS_ERR_X509_ALLOC_FAILED;
        }
        nv[ce->srv->nnc++] = s;
        ce->srv->nc = nv;
        return 0;
    }
    if (MBEDTLS_OID_CMP(MBEDTLS_OID_SUBJECT_KEY_IDENTIFIER, oid) == 0) {
        unsigned char *q = (unsigned char *)p;
        size_t len;
        if (mbedtls_asn1_get_tag(&q, end, &len, MBEDTLS_ASN1_OCTET_STRING) == 0 && ce->first &&
            len <= sizeof ce->srv->ca_ski) {
            memcpy(ce->srv->ca_ski, q, len);
            ce->srv->ca_ski_len = len;
        }
        return 0;
    }
    /* Another extension mbedtls does not know: harmless unless critical. */
    return critical ? MBEDTLS_ERR_X509_INVALID_EXTENSIONS : 0;
}

static bool read_fd_all(int fd, unsigned char **out, size_t *len, size_t max)
{
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap + 1);
    if (!b)
        return false;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                mbedtls_platform_zeroize(b, n);
                free(b);
                errno = EFBIG;
                return false;
            }
            unsigned char *nb = malloc(cap * 2 + 1);
            if (!nb) {
                mbedtls_platform_zeroize(b, n);
                free(b);
                return false;
            }
            memcpy(nb, b, n);
            mbedtls_platform_zeroize(b, n);
            free(b);
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            mbedtls_platform_zeroize(b, n);
            free(b);
            errno = e;
            return false;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';   /* mbedtls wants PEM NUL-terminated, counted in the length */
    *out = b;
    *len = n;
    return true;
}

/* The CA file: its PEM certificates (or one DER), each parsed with the
 * extension callback, so that name constraints are read and not refused. */
static bool load_ca_cert(sl_tls_server *srv, const char *path, char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (fd < 0 || !read_fd_all(fd, &buf, &len, 1 << 20)) {
        set_err(err, cap, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    close(fd);
    ca_ext ce = { .srv = srv, .first = true };
    int r = 0, count = 0;
    if (!strstr((const char *)buf, "-----BEGIN CERTIFICATE-----")) {
        r = mbedtls_x509_crt_parse_der_with_ext_cb(&srv->ca, buf, len, 1, ca_ext_cb, &ce);
        count = r == 0;
    } else {
        const char *at = (const char *)buf;
        while ((at = strstr(at, "-----BEGIN CERTIFICATE-----")) != NULL) {
            mbedtls_pem_context pem;
            mbedtls_pem_init(&pem);
            size_t used = 0;
            r = mbedtls_pem_read_buffer(&pem, "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----",
                                        (const unsigned char *)at, NULL, 0, &used);
            if (r == 0) {
                size_t der_len;
                const unsigned char *der = pem.buf;
                der_len = pem.buflen;
                r = mbedtls_x509_crt_parse_der_with_ext_cb(&srv->ca, der, der_len, 1, ca_ext_cb, &ce);
            }
            mbedtls_pem_free(&pem);
            if (r != 0)
                break;
            count++;
            ce.first = false;
            at += used ? used : 1;
        }
    }
    free(buf);
    if (r != 0 || count == 0) {
        char e[120];
        if (r != 0)
            mbed_strerror(r, e, sizeof e);
        else
            set_err(e, sizeof e, "no certificate in it");
        set_err(err, cap, "%s: cannot read the CA certificate: %s", path, e);
        return false;
    }
    if (ce.unsupported_nc) {
        set_err(err, cap, "%s: the CA has name constraints on names of type %d, which sluice cannot check "
                "(only DNS names and IP addresses)", path, ce.unsupported_nc);
        return false;
    }
    return true;
}

/* The CA key: a regular file not readable by group or others, checked on
 * the descriptor that is read (no window between the check and the read). */
static bool load_ca_key(sl_tls_server *srv, const char *path, char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        set_err(err, cap, "%s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        set_err(err, cap, "%s: the CA key must be a regular file", path);
        close(fd);
        return false;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        set_err(err, cap, "%s: the CA key has mode %04o: group or others may use it (chmod 600 %s)", path,
                (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return false;
    }
    unsigned char *buf;
    size_t len;
    if (!read_fd_all(fd, &buf, &len, 1 << 16)) {
        set_err(err, cap, "%s: %s", path, strerror(errno));
        close(fd);
        return false;
    }
    close(fd);
    int r = mbedtls_pk_parse_key(&srv->ca_key, buf, len + 1, NULL, 0);
    mbedtls_platform_zeroize(buf, len);
    free(buf);
    if (r != 0) {
        char e[120];
        if (r == MBEDTLS_ERR_PK_PASSWORD_REQUIRED)
            set_err(e, sizeof e, "it is encrypted (sluice needs it unencrypted, mode 0600)");
        else
            mbed_strerror(r, e, sizeof e);
        set_err(err, cap, "%s: cannot read the CA key: %s", path, e);
        return false;
    }
    if (!mbedtls_pk_can_do(&srv->ca_key, MBEDTLS_PK_ECKEY) && !mbedtls_pk_can_do(&srv->ca_key, MBEDTLS_PK_RSA)) {
        set_err(err, cap, "%s: the CA key is neither ECDSA nor RSA", path);
        return false;
    }
    return true;
}

static void leaf_destroy(leaf *lf)
{
    if (!lf)
        return;
    mbedtls_ssl_config_free(&lf->conf);
    mbedtls_ssl_ticket_free(&lf->tickets);
    lf->crt.next = NULL;   /* the CA chain is the server's */
    mbedtls_x509_crt_free(&lf->crt);
    free(lf);
}

sl_tls_server *sl_tls_server_new(const char *ca_cert, const char *ca_key, int leaf_days, size_t cache_max,
                                 char *err, size_t errcap)
{
    sl_tls_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        set_err(err, errcap, "out of memory");
        return NULL;
    }
    mbedtls_x509_crt_init(&srv->ca);
    mbedtls_pk_init(&srv->ca_key);
    mbedtls_pk_init(&srv->leaf_key);
    pthread_mutex_init(&srv->lock, NULL);
    srv->leaf_days = leaf_days > 0 ? leaf_days : 1;
    srv->cache_max = cache_max;
    if (!load_ca_cert(srv, ca_cert, err, errcap) || !load_ca_key(srv, ca_key, err, errcap))
        goto fail;
    if (!srv->ca.ca_istrue) {
        set_err(err, errcap, "%s: this certificate is not a CA (basicConstraints CA:TRUE is missing)", ca_cert);
        goto fail;
    }
    if ((srv->ca.ext_types & MBEDTLS_X509_EXT_KEY_USAGE) &&
        mbedtls_x509_crt_check_key_usage(&srv->ca, MBEDTLS_X509_KU_KEY_CERT_SIGN) != 0) {
        set_err(err, errcap, "%s: the CA's keyUsage does not allow signing certificates", ca_cert);
        goto fail;
    }
    if (mbedtls_pk_check_pair(&srv->ca.pk, &srv->ca_key) != 0) {
        set_err(err, errcap, "%s does not match %s: the key is not the CA certificate's", ca_key, ca_cert);
        goto fail;
    }
    char when[40];
    x509_time_str(&srv->ca.valid_to, when, sizeof when);
    if (mbedtls_x509_time_is_past(&srv->ca.valid_to)) {
        set_err(err, errcap, "%s: the CA certificate expired on %s", ca_cert, when);
        goto fail;
    }
    srv->ca_not_after = x509_time_t(&srv->ca.valid_to);
    srv->md = mbedtls_pk_can_do(&srv->ca_key, MBEDTLS_PK_ECKEY) && mbedtls_pk_get_bitlen(&srv->ca_key) > 256
                  ? MBEDTLS_MD_SHA384 : MBEDTLS_MD_SHA256;
    int r = mbedtls_pk_setup(&srv->leaf_key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
    if (r == 0)
        r = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(srv->leaf_key), rng, NULL);
    if (r != 0) {
        char e[120];
        mbed_strerror(r, e, sizeof e);
        set_err(err, errcap, "cannot make the leaf key: %s", e);
        goto fail;
    }
    srv->nbuckets = 16;
    while (srv->nbuckets < cache_max && srv->nbuckets < (1u << 20))
        srv->nbuckets <<= 1;
    srv->buckets = calloc(srv->nbuckets, sizeof *srv->buckets);
    if (!srv->buckets) {
        set_err(err, errcap, "out of memory");
        goto fail;
    }
    return srv;
fail:
    sl_tls_server_free(srv);
    return NULL;
}

void sl_tls_server_free(sl_tls_server *srv)
{
    if (!srv)
        return;
    for (leaf *lf = srv->lru_head, *next; lf; lf = next) {
        next = lf->next;
        leaf_destroy(lf);   /* sessions are gone: the server outlives them */
    }
    free(srv->buckets);
    for (size_t i = 0; i < srv->nnc; i++)
        nc_set_free(&srv->nc[i]);
    free(srv->nc);
    mbedtls_pk_free(&srv->leaf_key);
    mbedtls_pk_free(&srv->ca_key);
    mbedtls_x509_crt_free(&srv->ca);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

size_t sl_tls_server_cached(sl_tls_server *srv)
{
    pthread_mutex_lock(&srv->lock);
    size_t n = srv->ncached;
    pthread_mutex_unlock(&srv->lock);
    return n;
}

uint64_t sl_tls_server_made(sl_tls_server *srv)
{
    pthread_mutex_lock(&srv->lock);
    uint64_t n = srv->made;
    pthread_mutex_unlock(&srv->lock);
    return n;
}

static bool server_permits(const sl_tls_server *srv, const tls_host *h, char *err, size_t cap)
{
    for (size_t i = 0; i < srv->nnc; i++) {
        if (!nc_permits(&srv->nc[i], h)) {
            set_err(err, cap, "the inspection CA's name constraints do not permit %s%s", h->name,
                    h->ip ? " (an IP address)" : "");
            return false;
        }
    }
    return true;
}

bool sl_tls_server_permits(const sl_tls_server *srv, const char *host, char *err, size_t errcap)
{
    tls_host h;
    return tls_host_parse(host, &h, err, errcap) && server_permits(srv, &h, err, errcap);
}

/* DER helpers for the extensions mbedtls 2.28 has no writer for. Each
 * writes backwards from *p (mbedtls' convention); returns the length or a
 * negative error. */
/* The tag and length before len bytes already written: the header's size. */
static int der_hdr(unsigned char **p, unsigned char *start, size_t len, unsigned char tag)
{
    int ret;
    size_t n = 0;
    MBEDTLS_ASN1_CHK_ADD(n, mbedtls_asn1_write_len(p, start, len));
    MBEDTLS_ASN1_CHK_ADD(n, mbedtls_asn1_write_tag(p, start, tag));
    return (int)n;
}

/* A primitive value with its header: the whole size. */
static int der_raw(unsigned char **p, unsigned char *start, unsigned char tag, const void *v, size_t vlen)
{
    int ret;
    size_t n = 0;
    MBEDTLS_ASN1_CHK_ADD(n, mbedtls_asn1_write_raw_buffer(p, start, v, vlen));
    MBEDTLS_ASN1_CHK_ADD(n, der_hdr(p, start, n, tag));
    return (int)n;
}

/* A SEQUENCE header around the n bytes before *p: the whole size. */
static int der_seq(unsigned char **p, unsigned char *start, int n)
{
    if (n < 0)
        return n;
    int h = der_hdr(p, start, (size_t)n, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
    return h < 0 ? h : n + h;
}

static int add_ext(mbedtls_x509write_cert *w, const char *oid, size_t oid_len, int critical,
                   unsigned char *buf, size_t cap, unsigned char *p)
{
    return mbedtls_x509write_crt_set_extension(w, oid, oid_len, critical, p, (size_t)(buf + cap - p));
}

/* Random 16-byte serial, positive. */
static int set_serial(mbedtls_x509write_cert *w)
{
    unsigned char s[16];
    int r = rng(NULL, s, sizeof s);
    if (r != 0)
        return r;
    s[0] = (unsigned char)((s[0] & 0x7f) | 0x01);
    mbedtls_mpi serial;
    mbedtls_mpi_init(&serial);
    r = mbedtls_mpi_read_binary(&serial, s, sizeof s);
    if (r == 0)
        r = mbedtls_x509write_crt_set_serial(w, &serial);
    mbedtls_mpi_free(&serial);
    return r;
}

static int set_validity(mbedtls_x509write_cert *w, time_t from, time_t to)
{
    char nb[16], na[16];
    struct tm tm;
    strftime(nb, sizeof nb, "%Y%m%d%H%M%S", gmtime_r(&from, &tm));
    strftime(na, sizeof na, "%Y%m%d%H%M%S", gmtime_r(&to, &tm));
    return mbedtls_x509write_crt_set_validity(w, nb, na);
}

/* One named-data entry the writer frees with the rest (it owns oid and val). */
static int push_name(mbedtls_asn1_named_data **head, const unsigned char *oid, size_t oid_len, int tag,
                     const unsigned char *val, size_t val_len)
{
    mbedtls_asn1_named_data *d = mbedtls_calloc(1, sizeof *d);
    unsigned char *o = mbedtls_calloc(1, oid_len ? oid_len : 1), *v = mbedtls_calloc(1, val_len ? val_len : 1);
    if (!d || !o || !v) {
        mbedtls_free(d);
        mbedtls_free(o);
        mbedtls_free(v);
        return MBEDTLS_ERR_X509_ALLOC_FAILED;
    }
    memcpy(o, oid, oid_len);
    memcpy(v, val, val_len);
    d->oid.tag = MBEDTLS_ASN1_OID;
    d->oid.p = o;
    d->oid.len = oid_len;
    d->val.tag = tag;
    d->val.p = v;
    d->val.len = val_len;
    d->next = *head;
    *head = d;
    return 0;
}

/* The leaves' issuer is the CA's subject byte for byte (tags included):
 * the writer's list is written last-first, so it is built reversed. */
static int copy_issuer(mbedtls_x509write_cert *w, const mbedtls_x509_name *subject)
{
    for (const mbedtls_x509_name *n = subject; n; n = n->next) {
        if (!n->oid.p)
            continue;
        if (n->next_merged)
            return MBEDTLS_ERR_X509_FEATURE_UNAVAILABLE;   /* multi-valued RDNs: the writer cannot */
        int r = push_name(&w->issuer, n->oid.p, n->oid.len, n->val.tag, n->val.p, n->val.len);
        if (r != 0)
            return r;
    }
    return 0;
}

static leaf *leaf_make(sl_tls_server *srv, const tls_host *h, time_t now, char *err, size_t cap)
{
    size_t hl = strlen(h->name);
    leaf *lf = calloc(1, sizeof *lf + hl + 1);
    if (!lf) {
        set_err(err, cap, "out of memory");
        return NULL;
    }
    memcpy(lf->host, h->name, hl + 1);
    mbedtls_x509_crt_init(&lf->crt);
    mbedtls_ssl_config_init(&lf->conf);
    mbedtls_ssl_ticket_init(&lf->tickets);

    mbedtls_x509write_cert w;
    mbedtls_x509write_crt_init(&w);
    mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&w, srv->md);
    mbedtls_x509write_crt_set_subject_key(&w, &srv->leaf_key);
    mbedtls_x509write_crt_set_issuer_key(&w, &srv->ca_key);
    time_t until = now + (time_t)srv->leaf_days * 86400;
    if (until > srv->ca_not_after)
        until = srv->ca_not_after;   /* a leaf outliving its CA would only fail later */
    lf->renew_at = until - 3600;

    unsigned char ext[600], *p;
    const size_t ecap = sizeof ext;
    int r = set_serial(&w);
    if (r == 0)
        r = set_validity(&w, now - 3600, until);
    if (r == 0)
        r = copy_issuer(&w, &srv->ca.subject);
    /* CN = host for names that fit (ub-common-name is 64); IP literals go
     * in the SAN only. Without a CN the subject is empty and the SAN is
     * critical (RFC 5280 4.2.1.6). */
    bool cn = !h->ip && hl <= 64;
    if (r == 0 && cn)
        r = push_name(&w.subject, (const unsigned char *)MBEDTLS_OID_AT_CN, MBEDTLS_OID_SIZE(MBEDTLS_OID_AT_CN),
                      MBEDTLS_ASN1_UTF8_STRING, (const unsigned char *)h->name, hl);
    if (r == 0)
        r = mbedtls_x509write_crt_set_basic_constraints(&w, 0, -1);
    if (r == 0)
        r = mbedtls_x509write_crt_set_key_usage(&w, MBEDTLS_X509_KU_DIGITAL_SIGNATURE);
    if (r == 0) {   /* extendedKeyUsage: serverAuth */
        p = ext + ecap;
        int n = der_seq(&p, ext, mbedtls_asn1_write_oid(&p, ext, MBEDTLS_OID_SERVER_AUTH,
                                                         MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH)));
        r = n < 0 ? n : add_ext(&w, MBEDTLS_OID_EXTENDED_KEY_USAGE, MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE),
                                0, ext, ecap, p);
    }
    if (r == 0) {   /* subjectAltName: dNSName or iPAddress */
        int n;
        p = ext + ecap;
        if (h->ip)
            n = der_raw(&p, ext, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7, h->addr.b, h->addr.family == AF_INET ? 4 : 16);
        else
            n = der_raw(&p, ext, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2, h->name, hl);
        n = der_seq(&p, ext, n);
        r = n < 0 ? n : add_ext(&w, MBEDTLS_OID_SUBJECT_ALT_NAME, MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME),
                                !cn, ext, ecap, p);
    }
    if (r == 0 && srv->ca_ski_len) {   /* authorityKeyIdentifier: the CA's own SKI, as it wrote it */
        int n;
        p = ext + ecap;
        n = der_seq(&p, ext, der_raw(&p, ext, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 0, srv->ca_ski, srv->ca_ski_len));
        r = n < 0 ? n : add_ext(&w, MBEDTLS_OID_AUTHORITY_KEY_IDENTIFIER,
                                MBEDTLS_OID_SIZE(MBEDTLS_OID_AUTHORITY_KEY_IDENTIFIER), 0, ext, ecap, p);
    }
    unsigned char der[2048];
    int dlen = r == 0 ? mbedtls_x509write_crt_der(&w, der, sizeof der, rng, NULL) : r;
    mbedtls_x509write_crt_free(&w);
    r = dlen < 0 ? dlen : mbedtls_x509_crt_parse_der(&lf->crt, der + sizeof der - dlen, (size_t)dlen);
    if (r == 0) {
        lf->crt.next = &srv->ca;   /* the chain sent: leaf, then the CA file's certificates */
        r = conf_common(&lf->conf, MBEDTLS_SSL_IS_SERVER);
    }
    if (r == 0) {
        mbedtls_ssl_conf_authmode(&lf->conf, MBEDTLS_SSL_VERIFY_NONE);
        /* Session tickets (RFC 5077): a client's next connection resumes
         * without a key exchange or a signature, by far the dearest part
         * of a handshake in mbedtls 2.28. The key changes every TICKET_S
         * seconds. */
        r = mbedtls_ssl_ticket_setup(&lf->tickets, rng, NULL, MBEDTLS_CIPHER_AES_256_GCM, TICKET_S);
    }
    if (r == 0) {
        mbedtls_ssl_conf_session_tickets_cb(&lf->conf, mbedtls_ssl_ticket_write, mbedtls_ssl_ticket_parse,
                                            &lf->tickets);
        r = mbedtls_ssl_conf_own_cert(&lf->conf, &lf->crt, &srv->leaf_key);
    }
    if (r != 0) {
        char e[120];
        mbed_strerror(r, e, sizeof e);
        set_err(err, cap, "cannot make a certificate for %s: %s", h->name, e);
        leaf_destroy(lf);
        return NULL;
    }
    return lf;
}

static size_t host_hash(const char *s)
{
    uint64_t x = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++)
        x = (x ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)x;
}

static leaf **bucket_of(sl_tls_server *srv, const char *host)
{
    return &srv->buckets[host_hash(host) & (srv->nbuckets - 1)];
}

static leaf *cache_find(sl_tls_server *srv, const char *host)
{
    for (leaf *lf = *bucket_of(srv, host); lf; lf = lf->hnext)
        if (!strcmp(lf->host, host))
            return lf;
    return NULL;
}

static void lru_unlink(sl_tls_server *srv, leaf *lf)
{
    if (lf->prev)
        lf->prev->next = lf->next;
    else
        srv->lru_head = lf->next;
    if (lf->next)
        lf->next->prev = lf->prev;
    else
        srv->lru_tail = lf->prev;
    lf->prev = lf->next = NULL;
}

static void lru_push_front(sl_tls_server *srv, leaf *lf)
{
    lf->prev = NULL;
    lf->next = srv->lru_head;
    if (srv->lru_head)
        srv->lru_head->prev = lf;
    srv->lru_head = lf;
    if (!srv->lru_tail)
        srv->lru_tail = lf;
}

/* Takes lf out of the cache (under the lock). Returns it when that was its
 * last reference, for the caller to destroy once the lock is released. */
static leaf *cache_evict(sl_tls_server *srv, leaf *lf)
{
    leaf **pp = bucket_of(srv, lf->host);
    while (*pp != lf)
        pp = &(*pp)->hnext;
    *pp = lf->hnext;
    lf->hnext = NULL;
    lru_unlink(srv, lf);
    lf->cached = false;
    srv->ncached--;
    return --lf->refs == 0 ? lf : NULL;
}

/* The leaf for h, with a reference for the caller. Two workers asking for
 * the same new host at once may both make one (a millisecond of signing);
 * the first to insert wins and the other's is dropped: no one waits on
 * another thread's work under the lock. */
static leaf *leaf_get(sl_tls_server *srv, const tls_host *h, char *err, size_t cap)
{
    time_t now = time(NULL);
    leaf *dead[2] = { NULL, NULL }, *lf;
    pthread_mutex_lock(&srv->lock);
    lf = cache_find(srv, h->name);
    if (lf && now >= lf->renew_at) {
        dead[0] = cache_evict(srv, lf);
        lf = NULL;
    }
    if (lf) {
        lf->refs++;
        lru_unlink(srv, lf);
        lru_push_front(srv, lf);
    }
    pthread_mutex_unlock(&srv->lock);
    leaf_destroy(dead[0]);
    if (lf)
        return lf;

    leaf *made = leaf_make(srv, h, now, err, cap);
    if (!made)
        return NULL;
    dead[0] = NULL;
    pthread_mutex_lock(&srv->lock);
    srv->made++;
    lf = cache_find(srv, h->name);
    if (lf && now < lf->renew_at) {   /* another worker was quicker */
        lf->refs++;
        lru_unlink(srv, lf);
        lru_push_front(srv, lf);
        pthread_mutex_unlock(&srv->lock);
        leaf_destroy(made);
        return lf;
    }
    if (lf)
        dead[0] = cache_evict(srv, lf);
    made->refs = 1;   /* the caller's */
    if (srv->cache_max > 0) {
        made->refs++;
        made->cached = true;
        leaf **b = bucket_of(srv, made->host);
        made->hnext = *b;
        *b = made;
        lru_push_front(srv, made);
        srv->ncached++;
        if (srv->ncached > srv->cache_max)
            dead[1] = cache_evict(srv, srv->lru_tail);
    }
    pthread_mutex_unlock(&srv->lock);
    leaf_destroy(dead[0]);
    leaf_destroy(dead[1]);
    return made;
}

static void leaf_put(sl_tls_server *srv, leaf *lf)
{
    pthread_mutex_lock(&srv->lock);
    bool last = --lf->refs == 0;
    pthread_mutex_unlock(&srv->lock);
    if (last)
        leaf_destroy(lf);
}

/* ---- the upstream side ---- */

struct sl_tls_client {
    mbedtls_x509_crt ca;
    mbedtls_ssl_config conf;
};

sl_tls_client *sl_tls_client_new(const char *upstream_ca, char *err, size_t errcap)
{
    sl_tls_client *cli = calloc(1, sizeof *cli);
    if (!cli) {
        set_err(err, errcap, "out of memory");
        return NULL;
    }
    mbedtls_x509_crt_init(&cli->ca);
    mbedtls_ssl_config_init(&cli->conf);
    /* A bundle may hold a few certificates mbedtls cannot read (a critical
     * extension it does not know): the rest still count. */
    int r = mbedtls_x509_crt_parse_file(&cli->ca, upstream_ca);
    if (r < 0 || cli->ca.version == 0) {
        char e[120];
        if (r == MBEDTLS_ERR_PK_FILE_IO_ERROR || r == MBEDTLS_ERR_X509_FILE_IO_ERROR)
            set_err(e, sizeof e, "%s", access(upstream_ca, R_OK) != 0 ? strerror(errno) : "cannot read it");
        else if (r < 0)
            mbed_strerror(r, e, sizeof e);
        else
            set_err(e, sizeof e, "no certificate in it");
        set_err(err, errcap, "%s: cannot read the upstream CA bundle: %s", upstream_ca, e);
        sl_tls_client_free(cli);
        return NULL;
    }
    r = conf_common(&cli->conf, MBEDTLS_SSL_IS_CLIENT);
    if (r != 0) {
        char e[120];
        mbed_strerror(r, e, sizeof e);
        set_err(err, errcap, "TLS client setup: %s", e);
        sl_tls_client_free(cli);
        return NULL;
    }
    mbedtls_ssl_conf_authmode(&cli->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&cli->conf, &cli->ca, NULL);
    return cli;
}

void sl_tls_client_free(sl_tls_client *cli)
{
    if (!cli)
        return;
    mbedtls_ssl_config_free(&cli->conf);
    mbedtls_x509_crt_free(&cli->ca);
    free(cli);
}

/* ---- sessions ---- */

#define HELLO_MAX 16384   /* one record's plaintext: the most mbedtls takes a ClientHello in */

struct sl_tls {
    mbedtls_ssl_context ssl;
    sl_tls_send_fn send;
    sl_tls_recv_fn recv;
    void *ctx;
    bool server;
    sl_tls_server *srv;
    leaf *leaf;
    int sent_alert;           /* the last alert sluice sent in the clear, or -1 */
    bool transport_ended;     /* recv said the peer's side has ended */
    /* server: the ClientHello gathered from its records into one */
    unsigned char *hello;     /* 5 + HELLO_MAX bytes while the handshake runs */
    unsigned char rec_hdr[5];
    size_t rec_hdr_got, rec_left, hello_got, hello_need, hello_off;
    unsigned nrecords;
    bool hello_ready;
    /* client: the name checked, and what the verification saw */
    tls_host host;
    char peer_names[96];      /* the leaf's names, for "certificate is for X" */
    char untrusted[96];       /* the issuer that is not in upstream_ca */
    bool self_signed;
    char expired[40], not_yet[40];
};

static int bio_send(void *p, const unsigned char *buf, size_t len)
{
    sl_tls *t = p;
    /* A plaintext alert record (handshake time) says what sluice refused. */
    if (len == 7 && buf[0] == MBEDTLS_SSL_MSG_ALERT && buf[3] == 0 && buf[4] == 2)
        t->sent_alert = buf[6];
    size_t n = t->send(t->ctx, buf, len);
    return n == 0 ? MBEDTLS_ERR_SSL_WANT_WRITE : (int)n;
}

static int bio_recv(void *p, unsigned char *buf, size_t len)
{
    sl_tls *t = p;
    if (t->hello && t->hello_off < 5 + t->hello_need) {
        size_t n = 5 + t->hello_need - t->hello_off;
        if (n > len)
            n = len;
        memcpy(buf, t->hello + t->hello_off, n);
        t->hello_off += n;
        return (int)n;
    }
    if (len > INT_MAX)
        len = INT_MAX;
    ssize_t n = t->recv(t->ctx, buf, len);
    if (n == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (n < 0)
        t->transport_ended = true;
    return n < 0 ? 0 : (int)n;   /* 0: the peer's side has ended */
}

/* mbedtls 2.28 takes a ClientHello only whole in one record (handshake
 * fragmentation is DTLS-only there), but a client may split it across
 * records (RFC 5246 6.2.1 allows it; big post-quantum key shares make it
 * common). The server reads the ClientHello's records itself and hands
 * mbedtls one record. Exactly the bytes of those records are read: what
 * follows stays with the owner. 1: ready; 0: more needed; -1: failure. */
static int gather_hello(sl_tls *t, char *err, size_t cap)
{
    for (;;) {
        if (t->rec_hdr_got < 5) {
            ssize_t n = t->recv(t->ctx, t->rec_hdr + t->rec_hdr_got, 5 - t->rec_hdr_got);
            if (n == 0)
                return 0;
            if (n < 0) {
                set_err(err, cap, "the peer closed the connection during the handshake");
                return -1;
            }
            t->rec_hdr_got += (size_t)n;
            if (t->rec_hdr_got < 5)
                continue;
            const unsigned char *h = t->rec_hdr;
            if (h[0] != MBEDTLS_SSL_MSG_HANDSHAKE) {
                if (t->nrecords == 0)
                    set_err(err, cap, "not TLS: the client's first byte is 0x%02x, not a handshake record", h[0]);
                else
                    set_err(err, cap, "a record of type %u inside the ClientHello", h[0]);
                return -1;
            }
            size_t rlen = (size_t)h[3] << 8 | h[4];
            if (h[1] != 3 || rlen == 0 || rlen > HELLO_MAX) {
                set_err(err, cap, "not a TLS record (version %u.%u, length %zu)", h[1], h[2], rlen);
                return -1;
            }
            if (t->nrecords++ == 0) {
                t->hello[0] = MBEDTLS_SSL_MSG_HANDSHAKE;
                t->hello[1] = h[1];
                t->hello[2] = h[2];
            }
            t->rec_left = rlen;
        }
        if (t->hello_got + t->rec_left > HELLO_MAX) {
            set_err(err, cap, "the ClientHello is larger than one TLS record (%d bytes): not supported",
                    HELLO_MAX);
            return -1;
        }
        while (t->rec_left > 0) {
            ssize_t n = t->recv(t->ctx, t->hello + 5 + t->hello_got, t->rec_left);
            if (n == 0)
                return 0;
            if (n < 0) {
                set_err(err, cap, "the peer closed the connection during the handshake");
                return -1;
            }
            t->hello_got += (size_t)n;
            t->rec_left -= (size_t)n;
        }
        t->rec_hdr_got = 0;
        const unsigned char *m = t->hello + 5;
        if (t->hello_need == 0 && t->hello_got >= 4) {
            if (m[0] != MBEDTLS_SSL_HS_CLIENT_HELLO) {
                set_err(err, cap, "the client's first handshake message (type %u) is not a ClientHello", m[0]);
                return -1;
            }
            size_t body = (size_t)m[1] << 16 | (size_t)m[2] << 8 | m[3];
            if (4 + body > HELLO_MAX) {
                set_err(err, cap, "the ClientHello (%zu bytes) is larger than one TLS record (%d bytes): "
                        "not supported", 4 + body, HELLO_MAX);
                return -1;
            }
            t->hello_need = 4 + body;
        }
        if (t->hello_need && t->hello_got > t->hello_need) {
            set_err(err, cap, "bytes after the ClientHello in its record");
            return -1;
        }
        if (t->hello_need && t->hello_got == t->hello_need) {
            t->hello[3] = (unsigned char)(t->hello_need >> 8);
            t->hello[4] = (unsigned char)t->hello_need;
            t->hello_ready = true;
            return 1;
        }
    }
}

/* Called by mbedtls for each certificate of the upstream's chain, the top
 * first. Notes what the failure message will name; checks IP literal hosts
 * against iPAddress names (mbedtls 2.28 matches DNS names only). */
static int verify_cb(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    sl_tls *t = ctx;
    if ((*flags & MBEDTLS_X509_BADCERT_EXPIRED) && !t->expired[0])
        x509_time_str(&crt->valid_to, t->expired, sizeof t->expired);
    if ((*flags & MBEDTLS_X509_BADCERT_FUTURE) && !t->not_yet[0])
        x509_time_str(&crt->valid_from, t->not_yet, sizeof t->not_yet);
    if ((*flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) && !t->untrusted[0]) {
        char dn[256];
        if (mbedtls_x509_dn_gets(dn, sizeof dn, &crt->issuer) < 0)
            strcpy(dn, "?");
        clean_copy(t->untrusted, sizeof t->untrusted, (const unsigned char *)dn, strlen(dn));
        t->self_signed = crt->issuer_raw.len == crt->subject_raw.len &&
                         !memcmp(crt->issuer_raw.p, crt->subject_raw.p, crt->subject_raw.len);
    }
    if (depth != 0)
        return 0;
    msgbuf m = { t->peer_names, sizeof t->peer_names, 0 };
    t->peer_names[0] = '\0';
    bool ip_ok = false;
    int shown = 0;
    if (crt->ext_types & MBEDTLS_X509_EXT_SUBJECT_ALT_NAME) {
        for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s; s = s->next) {
            int type = s->buf.tag & MBEDTLS_ASN1_TAG_VALUE_MASK;
            char one[80];
            if (type == 2) {
                clean_copy(one, sizeof one, s->buf.p, s->buf.len);
            } else if (type == 7 && (s->buf.len == 4 || s->buf.len == 16)) {
                sl_addr a = { .family = s->buf.len == 4 ? AF_INET : AF_INET6 };
                memcpy(a.b, s->buf.p, s->buf.len);
                if (t->host.ip && sl_addr_equal(&a, &t->host.addr))
                    ip_ok = true;
                sl_addr_format(&a, one, sizeof one);
            } else {
                continue;
            }
            if (shown < 3)
                msg_add(&m, "%s%s", shown ? ", " : "", one);
            else if (shown == 3)
                msg_add(&m, ", ...");
            shown++;
        }
    }
    if (!shown) {
        for (const mbedtls_x509_name *n = &crt->subject; n; n = n->next) {
            if (n->oid.p && MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0) {
                char one[80];
                clean_copy(one, sizeof one, n->val.p, n->val.len);
                msg_add(&m, "%s", one);
                shown++;
                break;
            }
        }
    }
    if (!shown)
        msg_add(&m, "no name");
    if (t->host.ip && !ip_ok)
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}

static void verify_words(const sl_tls *t, uint32_t flags, char *err, size_t cap)
{
    msgbuf m = { err, cap, 0 };
    if (cap)
        err[0] = '\0';
    const char *sep = "";
#define WORDS(...) do { msg_add(&m, "%s", sep); msg_add(&m, __VA_ARGS__); sep = "; "; } while (0)
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) {
        if (t->self_signed)
            WORDS("self-signed certificate (%s), not in upstream_ca", t->untrusted);
        else
            WORDS("untrusted chain: its issuer %s is not in upstream_ca", t->untrusted[0] ? t->untrusted : "?");
    }
    if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        WORDS("certificate expired (notAfter %s)", t->expired[0] ? t->expired : "?");
    if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        WORDS("certificate not yet valid (notBefore %s)", t->not_yet[0] ? t->not_yet : "?");
    if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
        WORDS("name mismatch: certificate is for %s, not %s", t->peer_names[0] ? t->peer_names : "?",
              t->host.name);
    if (flags & MBEDTLS_X509_BADCERT_REVOKED)
        WORDS("certificate revoked");
    if (flags & (MBEDTLS_X509_BADCERT_KEY_USAGE | MBEDTLS_X509_BADCERT_EXT_KEY_USAGE |
                 MBEDTLS_X509_BADCERT_NS_CERT_TYPE))
        WORDS("certificate not meant for a TLS server (key usage)");
    if (flags & MBEDTLS_X509_BADCERT_BAD_MD)
        WORDS("certificate signed with a hash that is not accepted");
    if (flags & (MBEDTLS_X509_BADCERT_BAD_PK | MBEDTLS_X509_BADCERT_BAD_KEY))
        WORDS("certificate key of a kind or size that is not accepted");
    if (flags & MBEDTLS_X509_BADCERT_MISSING)
        WORDS("no certificate");
    if (!m.len)
        WORDS("certificate rejected (flags 0x%x)", (unsigned)flags);
#undef WORDS
}

/* A failed step's message in words. */
static void describe(sl_tls *t, int ret, char *err, size_t cap)
{
    char e[120];
    if (ret == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        verify_words(t, mbedtls_ssl_get_verify_result(&t->ssl), err, cap);
    } else if (ret == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE) {
        int a = t->ssl.in_msg ? t->ssl.in_msg[1] : -1;
        set_err(err, cap, "the peer sent alert %s (%d)", alert_name(a), a);
    } else if (ret == MBEDTLS_ERR_SSL_CONN_EOF) {
        set_err(err, cap, "the peer closed the connection during the handshake");
    } else if (t->sent_alert == MBEDTLS_SSL_ALERT_MSG_NO_APPLICATION_PROTOCOL) {
        set_err(err, cap, "no ALPN protocol in common: sluice speaks http/1.1 only");
    } else if (t->sent_alert >= 0) {
        mbed_strerror(ret, e, sizeof e);
        set_err(err, cap, "handshake failed (sluice sent alert %s): %s", alert_name(t->sent_alert), e);
    } else {
        mbed_strerror(ret, e, sizeof e);
        set_err(err, cap, "TLS error: %s", e);
    }
}

static sl_tls *session_new(bool server, sl_tls_send_fn send, sl_tls_recv_fn recv, void *ctx)
{
    sl_tls *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->server = server;
    t->send = send;
    t->recv = recv;
    t->ctx = ctx;
    t->sent_alert = -1;
    mbedtls_ssl_init(&t->ssl);
    return t;
}

sl_tls *sl_tls_accept(sl_tls_server *srv, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                      void *ctx, char *err, size_t errcap)
{
    tls_host h;
    if (!tls_host_parse(host, &h, err, errcap) || !server_permits(srv, &h, err, errcap))
        return NULL;
    sl_tls *t = session_new(true, send, recv, ctx);
    if (!t) {
        set_err(err, errcap, "out of memory");
        return NULL;
    }
    t->srv = srv;
    t->host = h;
    t->leaf = leaf_get(srv, &h, err, errcap);
    if (!t->leaf) {
        sl_tls_free(t);
        return NULL;
    }
    t->hello = malloc(5 + HELLO_MAX);
    int r = t->hello ? mbedtls_ssl_setup(&t->ssl, &t->leaf->conf) : MBEDTLS_ERR_SSL_ALLOC_FAILED;
    if (r != 0) {
        mbed_strerror(r, err, errcap);
        sl_tls_free(t);
        return NULL;
    }
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    return t;
}

sl_tls *sl_tls_connect(sl_tls_client *cli, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                       void *ctx, char *err, size_t errcap)
{
    tls_host h;
    if (!tls_host_parse(host, &h, err, errcap))
        return NULL;
    sl_tls *t = session_new(false, send, recv, ctx);
    if (!t) {
        set_err(err, errcap, "out of memory");
        return NULL;
    }
    t->host = h;
    int r = mbedtls_ssl_setup(&t->ssl, &cli->conf);
    /* SNI and the name check for names; an IP literal gets neither (RFC
     * 6066 forbids one in SNI) and verify_cb checks its iPAddress. */
    if (r == 0 && !h.ip)
        r = mbedtls_ssl_set_hostname(&t->ssl, h.name);
    if (r != 0) {
        mbed_strerror(r, err, errcap);
        sl_tls_free(t);
        return NULL;
    }
    mbedtls_ssl_set_verify(&t->ssl, verify_cb, t);
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    return t;
}

void sl_tls_free(sl_tls *t)
{
    if (!t)
        return;
    mbedtls_ssl_free(&t->ssl);
    if (t->leaf)
        leaf_put(t->srv, t->leaf);
    if (t->hello) {
        mbedtls_platform_zeroize(t->hello, 5 + HELLO_MAX);
        free(t->hello);
    }
    free(t);
}

sl_tls_status sl_tls_handshake(sl_tls *t, char *err, size_t errcap)
{
    if (t->server && !t->hello_ready) {
        int g = gather_hello(t, err, errcap);
        if (g <= 0)
            return g == 0 ? SL_TLS_WANT : SL_TLS_FAIL;
    }
    int r = mbedtls_ssl_handshake(&t->ssl);
    if (r == 0) {
        if (t->hello) {
            free(t->hello);
            t->hello = NULL;
        }
        return SL_TLS_DONE;
    }
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
        return SL_TLS_WANT;
    describe(t, r, err, errcap);
    return SL_TLS_FAIL;
}

sl_tls_status sl_tls_read(sl_tls *t, void *p, size_t n, size_t *got, char *err, size_t errcap)
{
    *got = 0;
    if (n > INT_MAX)
        n = INT_MAX;
    int r = mbedtls_ssl_read(&t->ssl, p, n);
    if (r > 0) {
        *got = (size_t)r;
        return SL_TLS_DONE;
    }
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
        return SL_TLS_WANT;
    if (r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
        if (errcap)
            err[0] = '\0';
        return SL_TLS_CLOSED;
    }
    if (r == 0 && !t->transport_ended)
        return SL_TLS_WANT;   /* empty records: mbedtls returns 0 for two in a row too */
    if (r == 0) {   /* the transport ended without a close_notify */
        set_err(err, errcap, "the peer closed the connection without a TLS close_notify");
        return SL_TLS_CLOSED;
    }
    describe(t, r, err, errcap);
    return SL_TLS_FAIL;
}

sl_tls_status sl_tls_write(sl_tls *t, const void *p, size_t n, char *err, size_t errcap)
{
    const unsigned char *b = p;
    while (n > 0) {
        int r = mbedtls_ssl_write(&t->ssl, b, n);
        if (r <= 0) {
            describe(t, r, err, errcap);
            return SL_TLS_FAIL;
        }
        b += r;
        n -= (size_t)r;
    }
    return SL_TLS_DONE;
}

size_t sl_tls_pending(const sl_tls *t)
{
    return mbedtls_ssl_get_bytes_avail(&t->ssl);
}

void sl_tls_close_notify(sl_tls *t)
{
    mbedtls_ssl_close_notify(&t->ssl);
}

const char *sl_tls_alpn(const sl_tls *t)
{
    return mbedtls_ssl_get_alpn_protocol(&t->ssl);
}

/* ---- `sluice ca init` ---- */

/* NameConstraints for --permit: permittedSubtrees with each name as a
 * dNSName, and excludedSubtrees with every IPv4 and IPv6 address, since
 * without an iPAddress constraint RFC 5280 leaves IP names unconstrained.
 * mbedtls 2.28 has no writer for this extension: built by hand. */
static int write_name_constraints(unsigned char **p, unsigned char *start, const char *const *permit,
                                  size_t npermit)
{
    int ret;
    size_t n = 0, sub;
    static const unsigned char any4[8], any6[32];
    /* excludedSubtrees [1] */
    sub = 0;
    {
        size_t one = 0;
        MBEDTLS_ASN1_CHK_ADD(one, der_raw(p, start, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7, any6, sizeof any6));
        MBEDTLS_ASN1_CHK_ADD(one, der_hdr(p, start, one, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
        sub += one;
        one = 0;
        MBEDTLS_ASN1_CHK_ADD(one, der_raw(p, start, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7, any4, sizeof any4));
        MBEDTLS_ASN1_CHK_ADD(one, der_hdr(p, start, one, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
        sub += one;
    }
    MBEDTLS_ASN1_CHK_ADD(sub, der_hdr(p, start, sub, MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 1));
    n += sub;
    /* permittedSubtrees [0], in the order given */
    sub = 0;
    for (size_t i = npermit; i-- > 0;) {
        size_t one = 0;
        MBEDTLS_ASN1_CHK_ADD(one, der_raw(p, start, MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2, permit[i], strlen(permit[i])));
        MBEDTLS_ASN1_CHK_ADD(one, der_hdr(p, start, one, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
        sub += one;
    }
    MBEDTLS_ASN1_CHK_ADD(sub, der_hdr(p, start, sub, MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 0));
    n += sub;
    MBEDTLS_ASN1_CHK_ADD(n, der_hdr(p, start, n, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE));
    return (int)n;
}

bool sl_tls_make_ca(int days, const char *const *permit, size_t npermit, char **cert_pem, char **key_pem,
                    char *err, size_t errcap)
{
    *cert_pem = *key_pem = NULL;
    mbedtls_pk_context key;
    mbedtls_x509write_cert w;
    mbedtls_pk_init(&key);
    mbedtls_x509write_crt_init(&w);
    unsigned char *ext = NULL;
    size_t ext_cap = 64 + npermit * (SL_HOST_MAX + 8);
    char *cert = malloc(8192), *kp = malloc(2048);
    int r = cert && kp ? 0 : MBEDTLS_ERR_X509_ALLOC_FAILED;
    if (r == 0)
        r = mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
    if (r == 0)
        r = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key), rng, NULL);
    if (r == 0) {
        char id[9], subject[96];
        sl_random_hex(id, 4);
        snprintf(subject, sizeof subject, "CN=sluice inspection CA %s,O=sluice", id);
        mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
        mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
        mbedtls_x509write_crt_set_subject_key(&w, &key);
        mbedtls_x509write_crt_set_issuer_key(&w, &key);
        r = mbedtls_x509write_crt_set_subject_name(&w, subject);
        if (r == 0)
            r = mbedtls_x509write_crt_set_issuer_name(&w, subject);
    }
    time_t now = time(NULL);
    if (r == 0)
        r = set_serial(&w);
    if (r == 0)
        r = set_validity(&w, now - 3600, now + (time_t)days * 86400);
    if (r == 0)   /* CA:TRUE, pathlen:0, critical: this CA signs leaves only */
        r = mbedtls_x509write_crt_set_basic_constraints(&w, 1, 0);
    if (r == 0)   /* critical */
        r = mbedtls_x509write_crt_set_key_usage(&w, MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN);
    if (r == 0)
        r = mbedtls_x509write_crt_set_subject_key_identifier(&w);
    if (r == 0 && npermit > 0) {
        ext = malloc(ext_cap);
        if (!ext) {
            r = MBEDTLS_ERR_X509_ALLOC_FAILED;
        } else {
            unsigned char *p = ext + ext_cap;
            int n = write_name_constraints(&p, ext, permit, npermit);
            r = n < 0 ? n : add_ext(&w, MBEDTLS_OID_NAME_CONSTRAINTS, MBEDTLS_OID_SIZE(MBEDTLS_OID_NAME_CONSTRAINTS),
                                    1, ext, ext_cap, p);
        }
    }
    if (r == 0)
        r = mbedtls_x509write_crt_pem(&w, (unsigned char *)cert, 8192, rng, NULL);
    if (r == 0)
        r = mbedtls_pk_write_key_pem(&key, (unsigned char *)kp, 2048);
    mbedtls_x509write_crt_free(&w);
    mbedtls_pk_free(&key);
    free(ext);
    if (r != 0) {
        char e[120];
        mbed_strerror(r, e, sizeof e);
        set_err(err, errcap, "cannot make the CA: %s", e);
        free(cert);
        if (kp)
            mbedtls_platform_zeroize(kp, 2048);
        free(kp);
        return false;
    }
    *cert_pem = cert;
    *key_pem = kp;
    return true;
}

void sl_tls_free_secret(char *p)
{
    if (!p)
        return;
    mbedtls_platform_zeroize(p, strlen(p));
    free(p);
}
