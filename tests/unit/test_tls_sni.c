/* Unit tests for the ClientHello server-name parser (proxy/proto/tls_sni.c).
 *
 * Hellos are built from a table of cases by a small builder, so each case can
 * bend exactly one length or field. Every case is also run through generic
 * checks: every prefix, trailing bytes, and re-framing into other record
 * sizes. Inputs are always copied into a heap block of exactly their length,
 * so ASan catches any read past the end. One real hello comes from mbedtls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ssl.h>

#include "tls_sni.h"

/* Room for a 16 KiB handshake framed one byte per record (6 bytes each). */
#define BIG 120000

typedef struct bb {
    uint8_t b[BIG];
    size_t n;
} bb;

static void put8(bb *o, unsigned v)
{
    assert_true(o->n < BIG);
    o->b[o->n++] = (uint8_t)v;
}

static void put16(bb *o, unsigned v)
{
    put8(o, v >> 8 & 0xff);
    put8(o, v & 0xff);
}

static void putn(bb *o, const void *p, size_t n)
{
    assert_true(n <= BIG - o->n);
    if (n > 0)
        memcpy(o->b + o->n, p, n);
    o->n += n;
}

/* A length prefix: reserve it, write the contents, then fill in the real
 * length plus a deliberate error `delta`. */
static size_t open_len(bb *o, int width)
{
    size_t at = o->n;
    for (int i = 0; i < width; i++)
        put8(o, 0);
    return at;
}

static void close_len(bb *o, size_t at, int width, int delta)
{
    long v = (long)(o->n - at - (size_t)width) + delta;
    assert_true(v >= 0 && v < 1L << (8 * width));
    for (int i = 0; i < width; i++)
        o->b[at + (size_t)i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

/* ---- the case table ---------------------------------------------------- */

enum { X_END, X_SNI, X_RAW };
#define EMPTY (-1)   /* for counts whose 0 means "default" */

typedef struct ext_spec {
    int kind;             /* X_SNI: server_name built from tcase.sni */
    uint16_t type;
    const char *data;
    size_t len;
    int d_len;            /* error added to this extension's length */
} ext_spec;

typedef struct sni_entry {
    uint8_t type;
    const char *name;     /* NULL with len > 0: a generated name of len bytes */
    size_t len;           /* 0: strlen(name) */
    int d_len;
} sni_entry;              /* {0, NULL, 0, 0} ends the list */

typedef struct tcase {
    const char *what;
    sl_sni_result want;
    const char *want_name;   /* FOUND: NULL means the generated name of want_len */
    size_t want_len;

    const char *raw;         /* when set: the input verbatim, nothing built */
    size_t raw_len;

    int hs_type;             /* 0: ClientHello */
    int d_hs;
    int hello_ver;           /* 0: 0x0303 */
    int sid_len;             /* 0: 8 bytes */
    int d_sid;
    int n_ciphers;           /* 0: 3 */
    int d_ciphers;
    int odd_cipher;          /* 1: one extra byte inside the suites, counted */
    int n_comp;              /* 0: 1 */
    int d_comp;
    bool no_exts;            /* no extensions block at all */
    int d_exts;
    ext_spec ext[6];
    sni_entry sni[3];
    int d_list;
    size_t pad_hs_to;        /* add a padding extension up to this hs size */

    size_t frag[4];          /* hs bytes in the first records; 0 ends, the
                                last record takes the rest */
    int rec_ver;             /* 0: 0x0301 */
    int later_ver;           /* records after the first; 0: 0x0303 */
    int d_rec;               /* error in the first record's length */
    int inject_type;         /* a 1-byte record of this type after the first */
} tcase;

#define RAW(t, s)      {X_RAW, t, s, sizeof(s) - 1, 0}
#define RAWD(t, s, d)  {X_RAW, t, s, sizeof(s) - 1, d}
#define E_SNI          {X_SNI, 0, NULL, 0, 0}
#define E_SNID(d)      {X_SNI, 0, NULL, 0, d}
#define E_ALPN         RAW(16, "\x00\x0c\x02h2\x08http/1.1")
#define E_SV           RAW(43, "\x04\x03\x04\x03\x03")
#define E_EMS          RAW(23, "")
#define E_GROUPS       RAW(10, "\x00\x04\x00\x1d\x00\x17")
/* encrypted_client_hello, outer: type, suite, config id, enc, payload */
#define E_ECH          RAW(0xfe0d, "\x00\x00\x01\x00\x01\x42\x00\x04" "ABCD" "\x00\x05" "inner")
#define NAME "registry.example.org"
#define SNI(nm)        .sni = {{0, nm, 0, 0}}
#define INPUT(s)       .raw = s, .raw_len = sizeof(s) - 1
#define WANT_FOUND     .want = SL_SNI_FOUND, .want_name = NAME

static const tcase cases[] = {
    /* well-formed */
    {"simple hello with SNI", WANT_FOUND, .ext = {E_SNI}, SNI(NAME)},
    {"no extensions block", .want = SL_SNI_ABSENT, .no_exts = true},
    {"empty extensions block", .want = SL_SNI_ABSENT},
    {"extensions but no SNI", .want = SL_SNI_ABSENT, .ext = {E_ALPN, E_SV, E_EMS}},
    {"SNI among several extensions", WANT_FOUND,
     .ext = {E_GROUPS, E_EMS, E_SNI, E_ALPN, E_SV}, SNI(NAME)},
    {"SNI first of several", WANT_FOUND, .ext = {E_SNI, E_GROUPS, E_SV}, SNI(NAME)},
    {"SNI last of several", WANT_FOUND, .ext = {E_GROUPS, E_SV, E_EMS, E_SNI}, SNI(NAME)},
    {"ECH: the outer SNI is the one", .want = SL_SNI_FOUND,
     .want_name = "public.example.net", .ext = {E_SNI, E_SV, E_ECH},
     SNI("public.example.net")},
    {"trailing dot kept", .want = SL_SNI_FOUND, .want_name = NAME ".",
     .ext = {E_SNI}, SNI(NAME ".")},
    {"case kept", .want = SL_SNI_FOUND, .want_name = "Registry.EXAMPLE.org",
     .ext = {E_SNI}, SNI("Registry.EXAMPLE.org")},
    {"hyphen, underscore, digits", .want = SL_SNI_FOUND,
     .want_name = "_a-b.0-9.example", .ext = {E_SNI}, SNI("_a-b.0-9.example")},
    {"one-byte name", .want = SL_SNI_FOUND, .want_name = "a", .ext = {E_SNI}, SNI("a")},
    {"255-byte name", .want = SL_SNI_FOUND, .want_len = 255, .ext = {E_SNI},
     .sni = {{0, NULL, 255, 0}}},
    {"session id 32", WANT_FOUND, .sid_len = 32, .ext = {E_SNI}, SNI(NAME)},
    {"session id empty", WANT_FOUND, .sid_len = EMPTY, .ext = {E_SNI}, SNI(NAME)},
    {"one cipher suite", WANT_FOUND, .n_ciphers = 1, .ext = {E_SNI}, SNI(NAME)},
    {"hello version 3.0", WANT_FOUND, .hello_ver = 0x0300, .ext = {E_SNI}, SNI(NAME)},
    {"record version 3.0", WANT_FOUND, .rec_ver = 0x0300, .ext = {E_SNI}, SNI(NAME)},
    {"record version 3.4", WANT_FOUND, .rec_ver = 0x0304, .ext = {E_SNI}, SNI(NAME)},
    {"CCS record after a complete hello", WANT_FOUND, .inject_type = 20,
     .ext = {E_SNI}, SNI(NAME)},
    {"hs exactly 16384 bytes", WANT_FOUND, .ext = {E_SNI}, SNI(NAME),
     .pad_hs_to = 16384, .frag = {8192}},
    /* A longer record than the hello: the rest is not the hello's business. */
    {"record length +1", WANT_FOUND, .d_rec = 1, .ext = {E_SNI}, SNI(NAME)},

    /* split across records */
    {"2 records", WANT_FOUND, .frag = {10}, .ext = {E_SNI}, SNI(NAME)},
    {"2 records, split inside the name", WANT_FOUND, .frag = {80},
     .ext = {E_GROUPS, E_SNI}, SNI(NAME)},
    {"3 records", WANT_FOUND, .frag = {50, 30}, .ext = {E_SNI, E_ALPN}, SNI(NAME)},
    {"3 records, hs header split", WANT_FOUND, .frag = {1, 2}, .ext = {E_SNI}, SNI(NAME)},
    {"hs header alone in a record", WANT_FOUND, .frag = {4}, .ext = {E_SNI}, SNI(NAME)},
    {"2 records, no SNI", .want = SL_SNI_ABSENT, .frag = {20}, .ext = {E_ALPN}},
    {"alert record in the middle", .want = SL_SNI_MALFORMED, .frag = {10},
     .inject_type = 21, .ext = {E_SNI}, SNI(NAME)},
    {"CCS record in the middle", .want = SL_SNI_MALFORMED, .frag = {10},
     .inject_type = 20, .ext = {E_SNI}, SNI(NAME)},
    {"application data in the middle", .want = SL_SNI_MALFORMED, .frag = {10},
     .inject_type = 23, .ext = {E_SNI}, SNI(NAME)},
    {"later record major 2", .want = SL_SNI_MALFORMED, .frag = {10},
     .later_ver = 0x0203, .ext = {E_SNI}, SNI(NAME)},
    {"later record minor 5", .want = SL_SNI_MALFORMED, .frag = {10},
     .later_ver = 0x0305, .ext = {E_SNI}, SNI(NAME)},

    /* off by one, one length at a time */
    {"session id +1", .want = SL_SNI_MALFORMED, .d_sid = 1, .ext = {E_SNI}, SNI(NAME)},
    {"session id -1", .want = SL_SNI_MALFORMED, .d_sid = -1, .ext = {E_SNI}, SNI(NAME)},
    {"session id 33", .want = SL_SNI_MALFORMED, .sid_len = 33, .ext = {E_SNI}, SNI(NAME)},
    {"ciphers +1", .want = SL_SNI_MALFORMED, .d_ciphers = 1, .ext = {E_SNI}, SNI(NAME)},
    {"ciphers -1", .want = SL_SNI_MALFORMED, .d_ciphers = -1, .ext = {E_SNI}, SNI(NAME)},
    {"ciphers +2", .want = SL_SNI_MALFORMED, .d_ciphers = 2, .ext = {E_SNI}, SNI(NAME)},
    {"ciphers -2", .want = SL_SNI_MALFORMED, .d_ciphers = -2, .ext = {E_SNI}, SNI(NAME)},
    {"ciphers odd, length consistent", .want = SL_SNI_MALFORMED, .odd_cipher = 1,
     .ext = {E_SNI}, SNI(NAME)},
    {"no ciphers", .want = SL_SNI_MALFORMED, .n_ciphers = EMPTY, .ext = {E_SNI}, SNI(NAME)},
    {"compression +1", .want = SL_SNI_MALFORMED, .d_comp = 1, .ext = {E_SNI}, SNI(NAME)},
    {"compression -1", .want = SL_SNI_MALFORMED, .d_comp = -1, .ext = {E_SNI}, SNI(NAME)},
    {"compression +1, no extensions", .want = SL_SNI_MALFORMED, .d_comp = 1,
     .no_exts = true},
    {"no compression", .want = SL_SNI_MALFORMED, .n_comp = EMPTY, .ext = {E_SNI}, SNI(NAME)},
    {"extensions total +1", .want = SL_SNI_MALFORMED, .d_exts = 1, .ext = {E_SNI}, SNI(NAME)},
    {"extensions total -1", .want = SL_SNI_MALFORMED, .d_exts = -1, .ext = {E_SNI}, SNI(NAME)},
    {"empty extensions total +1", .want = SL_SNI_MALFORMED, .d_exts = 1},
    {"SNI extension +1", .want = SL_SNI_MALFORMED, .ext = {E_SNID(1), E_ALPN}, SNI(NAME)},
    {"SNI extension -1", .want = SL_SNI_MALFORMED, .ext = {E_SNID(-1), E_ALPN}, SNI(NAME)},
    {"last SNI extension +1", .want = SL_SNI_MALFORMED, .ext = {E_SNID(1)}, SNI(NAME)},
    {"last SNI extension -1", .want = SL_SNI_MALFORMED, .ext = {E_SNID(-1)}, SNI(NAME)},
    {"middle extension +1", .want = SL_SNI_MALFORMED,
     .ext = {E_SNI, RAWD(16, "\x00\x0c\x02h2\x08http/1.1", 1), E_SV}, SNI(NAME)},
    {"middle extension -1", .want = SL_SNI_MALFORMED,
     .ext = {E_SNI, RAWD(16, "\x00\x0c\x02h2\x08http/1.1", -1), E_SV}, SNI(NAME)},
    {"last extension +1", .want = SL_SNI_MALFORMED,
     .ext = {E_SNI, E_ALPN, RAWD(43, "\x04\x03\x04\x03\x03", 1)}, SNI(NAME)},
    {"last extension -1", .want = SL_SNI_MALFORMED,
     .ext = {E_SNI, E_ALPN, RAWD(43, "\x04\x03\x04\x03\x03", -1)}, SNI(NAME)},
    {"server_name list +1", .want = SL_SNI_MALFORMED, .d_list = 1, .ext = {E_SNI}, SNI(NAME)},
    {"server_name list -1", .want = SL_SNI_MALFORMED, .d_list = -1, .ext = {E_SNI}, SNI(NAME)},
    {"name +1", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, .sni = {{0, NAME, 0, 1}}},
    {"name -1", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, .sni = {{0, NAME, 0, -1}}},
    {"handshake length +1", .want = SL_SNI_MALFORMED, .d_hs = 1, .ext = {E_SNI}, SNI(NAME)},
    {"handshake length -1", .want = SL_SNI_MALFORMED, .d_hs = -1, .ext = {E_SNI}, SNI(NAME)},
    {"record length -1", .want = SL_SNI_MALFORMED, .d_rec = -1, .ext = {E_SNI}, SNI(NAME)},

    /* server_name contents */
    {"two SNI extensions", .want = SL_SNI_MALFORMED, .ext = {E_SNI, E_EMS, E_SNI}, SNI(NAME)},
    {"two host_name entries", .want = SL_SNI_MALFORMED, .ext = {E_SNI},
     .sni = {{0, NAME, 0, 0}, {0, "evil.example", 0, 0}}},
    {"host_name then another type", .want = SL_SNI_MALFORMED, .ext = {E_SNI},
     .sni = {{0, NAME, 0, 0}, {1, "x", 0, 0}}},
    {"name type 1", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, .sni = {{1, NAME, 0, 0}}},
    {"empty server_name list", .want = SL_SNI_MALFORMED, .ext = {E_SNI}},
    {"empty server_name extension", .want = SL_SNI_MALFORMED, .ext = {RAW(0, "")}},
    {"empty name", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI("")},
    {"256-byte name", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, .sni = {{0, NULL, 256, 0}}},
    {"name with NUL inside", .want = SL_SNI_MALFORMED, .ext = {E_SNI},
     .sni = {{0, "registry\0.example.org", 21, 0}}},
    {"name with NUL at the end", .want = SL_SNI_MALFORMED, .ext = {E_SNI},
     .sni = {{0, NAME "\0", sizeof NAME, 0}}},
    {"name with space", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI("registry .example.org")},
    {"name with slash", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI("registry.example.org/x")},
    {"name with port", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI(NAME ":443")},
    {"name with star", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI("*.example.org")},
    {"name with byte 0x80", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI("regi\x80stry.org")},
    {"name with newline", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI(NAME "\n")},

    /* other fields */
    {"handshake type 2", .want = SL_SNI_MALFORMED, .hs_type = 2, .ext = {E_SNI}, SNI(NAME)},
    /* hs_type 0 means ClientHello, so type 0 is spelt 0x100 (low byte used) */
    {"handshake type 0", .want = SL_SNI_MALFORMED, .hs_type = 0x100, .ext = {E_SNI}, SNI(NAME)},
    {"hello version major 2", .want = SL_SNI_MALFORMED, .hello_ver = 0x0203,
     .ext = {E_SNI}, SNI(NAME)},
    {"hello version 3.5", .want = SL_SNI_MALFORMED, .hello_ver = 0x0305,
     .ext = {E_SNI}, SNI(NAME)},
    {"record version 3.5", .want = SL_SNI_MALFORMED, .rec_ver = 0x0305, .ext = {E_SNI}, SNI(NAME)},
    {"record major 2", .want = SL_SNI_NOT_TLS, .rec_ver = 0x0201, .ext = {E_SNI}, SNI(NAME)},
    {"record major 4", .want = SL_SNI_NOT_TLS, .rec_ver = 0x0401, .ext = {E_SNI}, SNI(NAME)},
    {"hs 16385 bytes (oversized)", .want = SL_SNI_MALFORMED, .ext = {E_SNI}, SNI(NAME),
     .pad_hs_to = 16385, .frag = {8192}},

    /* raw inputs */
    {"empty input", .want = SL_SNI_NEED_MORE, INPUT("")},
    {"one byte 0x16", .want = SL_SNI_NEED_MORE, INPUT("\x16")},
    {"partial record header", .want = SL_SNI_NEED_MORE, INPUT("\x16\x03\x01\x01")},
    {"header, partial hs header", .want = SL_SNI_NEED_MORE,
     INPUT("\x16\x03\x01\x01\x00\x01\x00")},
    {"HTTP request", .want = SL_SNI_NOT_TLS,
     INPUT("GET / HTTP/1.1\r\nHost: registry.example.org\r\n\r\n")},
    {"HTTP CONNECT in the tunnel", .want = SL_SNI_NOT_TLS,
     INPUT("CONNECT registry.example.org:443 HTTP/1.1\r\n\r\n")},
    {"SSLv2 hello", .want = SL_SNI_NOT_TLS,
     INPUT("\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10\x07\x00\xc0")},
    {"bad major (\\x16\\x02)", .want = SL_SNI_NOT_TLS, INPUT("\x16\x02\x00\x00\x05")},
    {"bad major, 2 bytes", .want = SL_SNI_NOT_TLS, INPUT("\x16\x02")},
    {"alert record first", .want = SL_SNI_NOT_TLS, INPUT("\x15\x03\x01\x00\x02\x02\x28")},
    {"record length 0", .want = SL_SNI_MALFORMED, INPUT("\x16\x03\x01\x00\x00")},
    {"record length 16385", .want = SL_SNI_MALFORMED, INPUT("\x16\x03\x01\x40\x01")},
    {"record length 0x4100, 4 bytes", .want = SL_SNI_MALFORMED, INPUT("\x16\x03\x01\x41")},
    {"hs length 0xffffff", .want = SL_SNI_MALFORMED,
     INPUT("\x16\x03\x01\x00\x04\x01\xff\xff\xff")},
};

/* ---- building ----------------------------------------------------------- */

static void gen_name(char *out, size_t n)
{
    /* 63-byte labels: a plausible DNS name of any length */
    for (size_t i = 0; i < n; i++)
        out[i] = i % 64 == 63 ? '.' : (char)('a' + i % 26);
}

static void build_sni(bb *o, const tcase *c)
{
    size_t list = open_len(o, 2);
    for (int i = 0; i < 3; i++) {
        const sni_entry *e = &c->sni[i];
        if (e->name == NULL && e->len == 0)
            break;
        put8(o, e->type);
        size_t at = open_len(o, 2);
        if (e->name == NULL) {
            char g[300];
            assert_true(e->len <= sizeof g);
            gen_name(g, e->len);
            putn(o, g, e->len);
        } else {
            putn(o, e->name, e->len ? e->len : strlen(e->name));
        }
        close_len(o, at, 2, e->d_len);
    }
    close_len(o, list, 2, c->d_list);
}

/* The handshake message, from its type byte on. */
static void build_hs(bb *o, const tcase *c)
{
    static const uint16_t suites[] = {0x1301, 0x1302, 0xc02f, 0xc030};
    o->n = 0;
    put8(o, c->hs_type ? (unsigned)c->hs_type & 0xff : 1);
    size_t hs = open_len(o, 3);
    put16(o, c->hello_ver ? (unsigned)c->hello_ver : 0x0303);
    for (unsigned i = 0; i < 32; i++)
        put8(o, i * 7 + 1);

    int n = c->sid_len == EMPTY ? 0 : c->sid_len ? c->sid_len : 8;
    size_t at = open_len(o, 1);
    for (int i = 0; i < n; i++)
        put8(o, 0x11 + (unsigned)i);
    close_len(o, at, 1, c->d_sid);

    n = c->n_ciphers == EMPTY ? 0 : c->n_ciphers ? c->n_ciphers : 3;
    at = open_len(o, 2);
    for (int i = 0; i < n; i++)
        put16(o, suites[i]);
    if (c->odd_cipher)
        put8(o, 0x13);
    close_len(o, at, 2, c->d_ciphers);

    n = c->n_comp == EMPTY ? 0 : c->n_comp ? c->n_comp : 1;
    at = open_len(o, 1);
    for (int i = 0; i < n; i++)
        put8(o, 0);
    close_len(o, at, 1, c->d_comp);

    if (!c->no_exts) {
        size_t exts = open_len(o, 2);
        for (int i = 0; i < 6 && c->ext[i].kind != X_END; i++) {
            const ext_spec *e = &c->ext[i];
            put16(o, e->kind == X_SNI ? 0 : e->type);
            at = open_len(o, 2);
            if (e->kind == X_SNI)
                build_sni(o, c);
            else
                putn(o, e->data, e->len);
            close_len(o, at, 2, e->d_len);
        }
        if (c->pad_hs_to) {
            /* padding (21) sized so the handshake is exactly pad_hs_to */
            assert_true(c->pad_hs_to >= o->n + 4);
            size_t p = c->pad_hs_to - o->n - 4;
            put16(o, 21);
            put16(o, (unsigned)p);
            for (size_t i = 0; i < p; i++)
                put8(o, 0);
        }
        close_len(o, exts, 2, c->d_exts);
    }
    close_len(o, hs, 3, c->d_hs);
}

static void put_record(bb *o, unsigned type, unsigned ver, const uint8_t *p,
                       size_t n, int d_len)
{
    put8(o, type);
    put16(o, ver);
    size_t at = open_len(o, 2);
    putn(o, p, n);
    close_len(o, at, 2, d_len);
}

static void frame(bb *o, const bb *hs, const tcase *c)
{
    size_t off = 0;
    o->n = 0;
    for (int i = 0; i == 0 || off < hs->n; i++) {
        size_t f = i < 4 && c->frag[i] ? c->frag[i] : hs->n - off;
        if (f > hs->n - off)
            f = hs->n - off;
        unsigned ver = i == 0 ? (c->rec_ver ? (unsigned)c->rec_ver : 0x0301)
                              : (c->later_ver ? (unsigned)c->later_ver : 0x0303);
        put_record(o, 22, ver, hs->b + off, f, i == 0 ? c->d_rec : 0);
        off += f;
        if (i == 0 && c->inject_type)
            put_record(o, (unsigned)c->inject_type, 0x0303, (const uint8_t *)"\x01", 1, 0);
    }
}

/* The handshake in records of k bytes each. */
static void reframe(bb *o, const uint8_t *hs, size_t n, size_t k)
{
    o->n = 0;
    for (size_t off = 0; off < n; off += k)
        put_record(o, 22, 0x0301, hs + off, n - off < k ? n - off : k, 0);
}

/* ---- running ------------------------------------------------------------ */

typedef struct outcome {
    sl_sni_result r;
    char name[256];
    size_t len;
} outcome;

/* Parse a heap copy of exactly n bytes, so any over-read trips ASan. */
static outcome parse(const uint8_t *in, size_t n)
{
    outcome o;
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n)
        memcpy(copy, in, n);
    memset(o.name, 'X', sizeof o.name);
    o.len = 9999;
    o.r = sl_tls_sni(copy, n, o.name, sizeof o.name, &o.len);
    free(copy);
    if (o.r == SL_SNI_FOUND) {
        assert_true(o.len >= 1 && o.len <= 255);
        assert_int_equal(o.name[o.len], '\0');
        assert_int_equal(strlen(o.name), o.len);
    }
    return o;
}

static bool is_final(sl_sni_result r)
{
    return r == SL_SNI_FOUND || r == SL_SNI_ABSENT;
}

/* A prefix is NEED_MORE or the final verdict, and once the verdict appears it
 * stays. When the input ends exactly where a valid hello does, every prefix is
 * NEED_MORE: a hello is never judged early. Long inputs are sampled to keep
 * the quadratic cost down. */
#define CASE_FAIL(...)                                                         \
    do {                                                                       \
        print_error(__VA_ARGS__);                                              \
        print_error("\n");                                                     \
        return false;                                                          \
    } while (0)

static bool check_prefixes(const tcase *c, const uint8_t *in, size_t n, sl_sni_result full,
                           bool exact)
{
    bool decided = false;
    for (size_t k = 0; k < n; k++) {
        if (n > 4096 && k > 2048 && k < n - 2048 && k % 61 != 0)
            continue;
        sl_sni_result r = parse(in, k).r;
        if ((r != SL_SNI_NEED_MORE && r != full) || (decided && r != full) ||
            (exact && is_final(full) && r != SL_SNI_NEED_MORE))
            CASE_FAIL("%s: prefix %zu of %zu is %s (whole input: %s)", c->what, k, n,
                      sl_sni_result_str(r), sl_sni_result_str(full));
        if (r == full)
            decided = true;
    }
    return true;
}

static bool check_name(const tcase *c, const outcome *o)
{
    char gen[300];
    const char *want = c->want_name;
    size_t want_len = c->want_len;
    if (want == NULL) {
        gen_name(gen, want_len);
        gen[want_len] = '\0';
        want = gen;
    }
    if (want_len == 0)
        want_len = strlen(want);
    if (o->len != want_len || strcmp(o->name, want) != 0)
        CASE_FAIL("%s: name \"%s\" (%zu), want \"%s\"", c->what, o->name, o->len, want);
    return true;
}

static bb hs_buf, in_buf, tmp_buf;

static bool run_case(const tcase *c)
{
    const uint8_t *in;
    size_t n;
    if (c->raw != NULL) {
        in = (const uint8_t *)c->raw;
        n = c->raw_len;
    } else {
        build_hs(&hs_buf, c);
        frame(&in_buf, &hs_buf, c);
        in = in_buf.b;
        n = in_buf.n;
    }

    outcome o = parse(in, n);
    if (o.r != c->want)
        CASE_FAIL("%s: got %s, want %s", c->what, sl_sni_result_str(o.r),
                  sl_sni_result_str(c->want));
    if (o.r == SL_SNI_FOUND && !check_name(c, &o))
        return false;
    if (!check_prefixes(c, in, n, o.r, c->d_rec == 0 && c->inject_type == 0))
        return false;

    if (!is_final(o.r))
        return true;
    /* Whatever follows a complete hello changes nothing. */
    memcpy(tmp_buf.b, in, n);
    memcpy(tmp_buf.b + n, "\x17\x03\x03\x00\x05junk", 10);
    outcome t = parse(tmp_buf.b, n + 10);
    if (t.r != o.r)
        CASE_FAIL("%s: with trailing bytes %s", c->what, sl_sni_result_str(t.r));

    /* The same handshake in records of any size gives the same answer. */
    if (c->raw != NULL || c->d_rec || c->inject_type)
        return true;
    static const size_t sizes[] = {1, 2, 3, 5, 64, 1000, 16384};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        reframe(&tmp_buf, hs_buf.b, hs_buf.n, sizes[i]);
        t = parse(tmp_buf.b, tmp_buf.n);
        if (t.r != o.r || (o.r == SL_SNI_FOUND && strcmp(t.name, o.name) != 0))
            CASE_FAIL("%s: in %zu-byte records %s", c->what, sizes[i],
                      sl_sni_result_str(t.r));
    }
    return true;
}

static void test_table(void **state)
{
    (void)state;
    size_t failed = 0, total = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < total; i++)
        failed += !run_case(&cases[i]);
    print_message("      %zu table cases, %zu failed\n", total, failed);
    assert_int_equal(failed, 0);
}

/* ---- the output buffer -------------------------------------------------- */

static void test_output_buffer(void **state)
{
    (void)state;
    build_hs(&hs_buf, &cases[0]);
    frame(&in_buf, &hs_buf, &cases[0]);
    char name[sizeof NAME];
    size_t len = 0;

    /* Too small to hold the name and its NUL: refused, never truncated. */
    assert_int_equal(sl_tls_sni(in_buf.b, in_buf.n, name, sizeof NAME - 1, &len),
                     SL_SNI_MALFORMED);
    assert_int_equal(sl_tls_sni(in_buf.b, in_buf.n, name, sizeof NAME, &len),
                     SL_SNI_FOUND);
    assert_string_equal(name, NAME);
    assert_int_equal(len, strlen(NAME));
    /* A roomy buffer does not stretch the 255-byte limit. */
    static const tcase long_name = {"256 bytes", .ext = {E_SNI}, .sni = {{0, NULL, 256, 0}}};
    static char roomy[1024];
    build_hs(&hs_buf, &long_name);
    frame(&tmp_buf, &hs_buf, &long_name);
    assert_int_equal(sl_tls_sni(tmp_buf.b, tmp_buf.n, roomy, sizeof roomy, &len),
                     SL_SNI_MALFORMED);

    /* Callers only after the verdict may pass no buffer. */
    len = 0;
    assert_int_equal(sl_tls_sni(in_buf.b, in_buf.n, NULL, 0, &len), SL_SNI_FOUND);
    assert_int_equal(len, strlen(NAME));
    assert_int_equal(sl_tls_sni(in_buf.b, in_buf.n, NULL, 0, NULL), SL_SNI_FOUND);
}

static void test_result_str(void **state)
{
    (void)state;
    const sl_sni_result all[] = {SL_SNI_FOUND, SL_SNI_ABSENT, SL_SNI_NEED_MORE,
                                 SL_SNI_NOT_TLS, SL_SNI_MALFORMED};
    for (size_t i = 0; i < 5; i++) {
        const char *s = sl_sni_result_str(all[i]);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, sl_sni_result_str(all[j]));
    }
    assert_string_equal(sl_sni_result_str(SL_SNI_FOUND), "found");
    assert_string_equal(sl_sni_result_str(SL_SNI_MALFORMED), "malformed");
    assert_string_equal(sl_sni_result_str((sl_sni_result)42), "unknown");
}

/* ---- a real ClientHello from mbedtls ---------------------------------------- */

typedef struct capture {
    uint8_t b[8192];
    size_t n;
} capture;

static int cap_send(void *ctx, const unsigned char *buf, size_t len)
{
    capture *c = ctx;
    if (len > sizeof c->b - c->n)
        return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    memcpy(c->b + c->n, buf, len);
    c->n += len;
    return (int)len;
}

static int cap_recv(void *ctx, unsigned char *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return MBEDTLS_ERR_SSL_WANT_READ;   /* no server: stop after the hello */
}

/* The hello is never used for a real handshake, so a counter will do. */
static int counter_rng(void *ctx, unsigned char *out, size_t len)
{
    unsigned *k = ctx;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)(++*k * 131u);
    return 0;
}

static void mbedtls_hello(capture *cap, const char *host)
{
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
    unsigned ctr = 0;
    mbedtls_ssl_config_init(&conf);
    mbedtls_ssl_init(&ssl);
    assert_int_equal(mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT,
                                                 MBEDTLS_SSL_TRANSPORT_STREAM,
                                                 MBEDTLS_SSL_PRESET_DEFAULT), 0);
    mbedtls_ssl_conf_rng(&conf, counter_rng, &ctr);
    mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE);
    assert_int_equal(mbedtls_ssl_setup(&ssl, &conf), 0);
    if (host != NULL)
        assert_int_equal(mbedtls_ssl_set_hostname(&ssl, host), 0);
    cap->n = 0;
    mbedtls_ssl_set_bio(&ssl, cap, cap_send, cap_recv, NULL);
    assert_int_equal(mbedtls_ssl_handshake(&ssl), MBEDTLS_ERR_SSL_WANT_READ);
    mbedtls_ssl_free(&ssl);
    mbedtls_ssl_config_free(&conf);
    assert_true(cap->n > 5);
}

static bool host_ok(const outcome *o)
{
    for (size_t i = 0; i < o->len; i++) {
        char ch = o->name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_'))
            return false;
    }
    return true;
}

static void test_mbedtls_hello(void **state)
{
    (void)state;
    static capture cap;
    static const tcase real = {"mbedtls hello", WANT_FOUND};
    mbedtls_hello(&cap, NAME);

    outcome o = parse(cap.b, cap.n);
    assert_int_equal(o.r, SL_SNI_FOUND);
    assert_string_equal(o.name, NAME);
    assert_int_equal(o.len, strlen(NAME));
    check_prefixes(&real, cap.b, cap.n, o.r, true);

    /* The same hello cut into small records: reassembly, on real input. */
    size_t rec_len = (size_t)cap.b[3] << 8 | cap.b[4];
    assert_int_equal(rec_len + 5, cap.n);   /* mbedtls sends one record */
    for (size_t k = 1; k <= 64; k *= 2) {
        reframe(&tmp_buf, cap.b + 5, rec_len, k);
        outcome t = parse(tmp_buf.b, tmp_buf.n);
        assert_int_equal(t.r, SL_SNI_FOUND);
        assert_string_equal(t.name, NAME);
    }

    /* Damage every byte a few ways: never a crash or an over-read, never
     * NOT_TLS past the first two bytes, and a name found is always clean. */
    static uint8_t m[8192];
    for (size_t i = 0; i < cap.n; i++) {
        const uint8_t vals[] = {0x00, 0xff, (uint8_t)(cap.b[i] ^ 1), (uint8_t)(cap.b[i] ^ 0x80)};
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(m, cap.b, cap.n);
            m[i] = vals[v];
            outcome t = parse(m, cap.n);
            assert_true(t.r <= SL_SNI_MALFORMED);
            if (i >= 2)
                assert_int_not_equal(t.r, SL_SNI_NOT_TLS);
            if (t.r == SL_SNI_FOUND)
                assert_true(host_ok(&t));
        }
    }

    mbedtls_hello(&cap, NULL);
    assert_int_equal(parse(cap.b, cap.n).r, SL_SNI_ABSENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_output_buffer),
        cmocka_unit_test(test_result_str),
        cmocka_unit_test(test_mbedtls_hello),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
