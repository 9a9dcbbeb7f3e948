/* Unit tests for allowlist/netclass.c.
 *
 * The reference is tests/unit/data/ipv{4,6}-special.tsv (copies of the
 * registry tables beside SPEC.md), read at run time from the repository
 * root, or from $SLUICE_TEST_DATA. The expected answers are computed here
 * from the file rows by longest-prefix match, independently of the tables
 * compiled into netclass.c, so a row missing or mistyped in either place
 * shows up as a failure. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netclass.h"

/* ---- reference rows, from the TSV files ---- */

typedef struct ref_row {
    int family;
    uint8_t b[16];
    unsigned prefix;
    bool yes;
    char cidr[64];   /* as written in the file */
} ref_row;

#define MAX_ROWS 256
static ref_row rows[MAX_ROWS];
static size_t nrows, nrows4, nrows6;

static int load_tsv(const char *dir, const char *name, int family)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        print_error("cannot open %s: %s (run from the repository root or set SLUICE_TEST_DATA)\n",
                    path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *cidr = line, *tab = strchr(line, '\t');
        if (!tab || nrows == MAX_ROWS)
            goto bad;
        *tab = '\0';
        char *flag = tab + 1, *tab2 = strchr(flag, '\t');
        if (!tab2)
            goto bad;
        *tab2 = '\0';
        ref_row *r = &rows[nrows];
        memset(r, 0, sizeof *r);
        if (strlen(cidr) >= sizeof r->cidr)
            goto bad;
        memcpy(r->cidr, cidr, strlen(cidr) + 1);
        char *slash = strchr(cidr, '/');
        if (!slash)
            goto bad;
        *slash = '\0';
        char *end;
        unsigned long p = strtoul(slash + 1, &end, 10);
        if (*end != '\0' || p > (family == AF_INET ? 32u : 128u))
            goto bad;
        if (inet_pton(family, cidr, r->b) != 1)
            goto bad;
        if (strcmp(flag, "yes") == 0)
            r->yes = true;
        else if (strcmp(flag, "no") != 0)
            goto bad;
        r->family = family;
        r->prefix = (unsigned)p;
        nrows++;
        n++;
        continue;
bad:
        print_error("%s:%d: cannot parse row\n", path, lineno);
        fclose(f);
        return -1;
    }
    fclose(f);
    return n;
}

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("SLUICE_TEST_DATA");
    if (!dir || !*dir)
        dir = "tests/unit/data";
    nrows = 0;
    int n4 = load_tsv(dir, "ipv4-special.tsv", AF_INET);
    if (n4 < 0)
        return -1;
    int n6 = load_tsv(dir, "ipv6-special.tsv", AF_INET6);
    if (n6 < 0)
        return -1;
    nrows4 = (size_t)n4;
    nrows6 = (size_t)n6;
    return 0;
}

/* ---- the oracle: longest prefix over the file rows ---- */

static unsigned nbytes(int family)
{
    return family == AF_INET ? 4 : 16;
}

static bool ref_in(const ref_row *r, int family, const uint8_t *a)
{
    if (r->family != family)
        return false;
    for (unsigned bit = 0; bit < r->prefix; bit++) {
        unsigned m = 0x80u >> (bit % 8);
        if ((a[bit / 8] & m) != (r->b[bit / 8] & m))
            return false;
    }
    return true;
}

static const ref_row *ref_lpm(int family, const uint8_t *a)
{
    const ref_row *best = NULL;
    for (size_t i = 0; i < nrows; i++)
        if (ref_in(&rows[i], family, a) && (!best || rows[i].prefix > best->prefix))
            best = &rows[i];
    return best;
}

/* No row: IPv4 is public; IPv6 only inside global unicast 2000::/3. */
static bool ref_table_public(int family, const uint8_t *a)
{
    const ref_row *r = ref_lpm(family, a);
    if (r)
        return r->yes;
    return family == AF_INET || (a[0] & 0xe0) == 0x20;
}

static const uint8_t meta4[][4] = {
    { 169, 254, 169, 254 }, { 169, 254, 170, 2 }, { 169, 254, 169, 253 },
    { 168, 63, 129, 16 }, { 100, 100, 100, 200 }, { 192, 0, 0, 192 },
};

static bool ref_meta4(const uint8_t *v4)
{
    for (size_t i = 0; i < sizeof meta4 / sizeof meta4[0]; i++)
        if (memcmp(v4, meta4[i], 4) == 0)
            return true;
    return false;
}

static bool ref_meta6(const uint8_t *a)
{
    static const uint8_t aws[16] = { 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 };
    return memcmp(a, aws, 16) == 0;
}

/* The IPv4 addresses carried by an IPv6 address, written from 16-bit
 * groups rather than bytes so it is not a copy of the implementation. */
static int ref_embedded(const uint8_t *b, uint8_t out[2][4])
{
    uint16_t g[8];
    for (int i = 0; i < 8; i++)
        g[i] = (uint16_t)(b[2 * i] << 8 | b[2 * i + 1]);
#define PUT(k, hi, lo) (out[k][0] = (uint8_t)((hi) >> 8), out[k][1] = (uint8_t)(hi), \
                        out[k][2] = (uint8_t)((lo) >> 8), out[k][3] = (uint8_t)(lo))
    if (!g[0] && !g[1] && !g[2] && !g[3] && !g[4] && g[5] == 0xffff)       /* mapped */
        return PUT(0, g[6], g[7]), 1;
    if (!g[0] && !g[1] && !g[2] && !g[3] && !g[4] && !g[5])                /* compatible */
        return PUT(0, g[6], g[7]), 1;
    if (!g[0] && !g[1] && !g[2] && !g[3] && g[4] == 0xffff && !g[5])       /* translated */
        return PUT(0, g[6], g[7]), 1;
    if (g[0] == 0x64 && g[1] == 0xff9b && !g[2] && !g[3] && !g[4] && !g[5]) /* NAT64 /96 */
        return PUT(0, g[6], g[7]), 1;
    if (g[0] == 0x64 && g[1] == 0xff9b && g[2] == 1)                       /* NAT64 /48 */
        return PUT(0, g[3], (uint16_t)((g[4] & 0xff) << 8 | g[5] >> 8)), 1;
    if (g[0] == 0x2002)                                                    /* 6to4 */
        return PUT(0, g[1], g[2]), 1;
    if (g[0] == 0x2001 && g[1] == 0) {                                     /* Teredo */
        PUT(0, g[2], g[3]);
        PUT(1, (uint16_t)~g[6], (uint16_t)~g[7]);
        return 2;
    }
#undef PUT
    return 0;
}

static bool ref_v4_nonpublic(const uint8_t *v4)
{
    return ref_meta4(v4) || !ref_table_public(AF_INET, v4);
}

static const sl_cidr_list NONE = { NULL, 0 };

static sl_verdict classify(const sl_addr *a, sl_cidr_list allow, sl_cidr_list deny,
                           char *scratch, size_t cap)
{
    sl_verdict v = sl_classify(a, allow, deny, scratch, cap);
    assert_non_null(v.why);
    if (v.is_public)
        assert_string_equal(v.why, "");
    else
        assert_true(v.why[0] != '\0');
    return v;
}

/* Checks one address against the oracle and counts (and prints) a mismatch,
 * so a test reports every bad address, not just the first. */
typedef struct tally {
    unsigned checked, embedded, failed;
} tally;

static void check_against_reference(const sl_addr *a, tally *t)
{
    char scratch[128], txt[SL_ADDR_STRLEN];
    sl_verdict v = classify(a, NONE, NONE, scratch, sizeof scratch);
    sl_addr_format(a, txt, sizeof txt);
    t->checked++;

    bool want_public;
    const char *want_prefix = NULL;  /* why must start with this, when set */
    char rowbuf[80];
    uint8_t emb[2][4];
    int ne = a->family == AF_INET6 ? ref_embedded(a->b, emb) : 0;
    bool emb_bad = false;
    for (int i = 0; i < ne; i++)
        emb_bad |= ref_v4_nonpublic(emb[i]);
    /* 64:ff9b:1::/48 may also be used as a /96 (RFC 8215), IPv4 in the low bits. */
    if (a->family == AF_INET6 && a->b[0] == 0 && a->b[1] == 0x64 && a->b[2] == 0xff &&
        a->b[3] == 0x9b && a->b[4] == 0 && a->b[5] == 1 && ref_meta4(a->b + 12))
        emb_bad = true;

    if ((a->family == AF_INET && ref_meta4(a->b)) || (a->family == AF_INET6 && ref_meta6(a->b))) {
        want_public = false;
        want_prefix = "cloud metadata address";
    } else if (emb_bad) {
        /* Embedded rules take over; the explicit tests check the reason. */
        want_public = false;
        t->embedded++;
    } else {
        want_public = ref_table_public(a->family, a->b);
        const ref_row *r = ref_lpm(a->family, a->b);
        if (!want_public && r) {
            snprintf(rowbuf, sizeof rowbuf, "%s ", r->cidr);
            want_prefix = rowbuf;
        }
    }
    if (v.is_public != want_public ||
        (want_prefix && strncmp(v.why, want_prefix, strlen(want_prefix)) != 0)) {
        print_error("%s: got %s \"%s\", want %s%s%s\n", txt,
                    v.is_public ? "public" : "non-public", v.why,
                    want_public ? "public" : "non-public",
                    want_prefix ? " starting with " : "", want_prefix ? want_prefix : "");
        t->failed++;
    }
}

static void set_bytes(sl_addr *a, int family, const uint8_t *b)
{
    memset(a, 0, sizeof *a);
    a->family = family;
    memcpy(a->b, b, nbytes(family));
}

/* a +/- 1 over n big-endian bytes; false when it wraps. */
static bool step(uint8_t *b, unsigned n, int dir)
{
    for (unsigned i = n; i-- > 0;) {
        if (dir > 0 ? b[i]++ != 0xff : b[i]-- != 0x00)
            return true;
    }
    return false;
}

static void block_last(const ref_row *r, uint8_t *out)
{
    memcpy(out, r->b, 16);
    for (unsigned bit = r->prefix; bit < nbytes(r->family) * 8; bit++)
        out[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
}

/* Every block: its first and last address and the neighbours just outside. */
static void test_every_block_edges(void **state)
{
    (void)state;
    assert_true(nrows4 >= 30);
    assert_true(nrows6 >= 50);
    tally t = { 0 };
    for (size_t i = 0; i < nrows; i++) {
        const ref_row *r = &rows[i];
        unsigned n = nbytes(r->family);
        uint8_t lo[16], hi[16];
        memcpy(lo, r->b, 16);
        block_last(r, hi);
        sl_addr a;
        set_bytes(&a, r->family, lo);
        check_against_reference(&a, &t);
        set_bytes(&a, r->family, hi);
        check_against_reference(&a, &t);
        if (step(lo, n, -1)) {
            set_bytes(&a, r->family, lo);
            check_against_reference(&a, &t);
        }
        if (step(hi, n, +1)) {
            set_bytes(&a, r->family, hi);
            check_against_reference(&a, &t);
        }
    }
    print_message("block edges: %u addresses checked, %u judged by embedded IPv4\n",
                  t.checked, t.embedded);
    assert_true(t.checked >= 4 * (nrows4 + nrows6) - 8);
    assert_int_equal(t.failed, 0);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void random_bytes(uint8_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)rng();
}

/* Random addresses inside every block, and across the whole space. */
static void test_random_against_reference(void **state)
{
    (void)state;
    tally t = { 0 };
    for (size_t i = 0; i < nrows; i++) {
        const ref_row *r = &rows[i];
        unsigned n = nbytes(r->family);
        for (int k = 0; k < 64; k++) {
            uint8_t b[16] = { 0 };
            random_bytes(b, n);
            for (unsigned bit = 0; bit < r->prefix; bit++) {
                uint8_t m = (uint8_t)(0x80u >> (bit % 8));
                b[bit / 8] = (uint8_t)((b[bit / 8] & ~m) | (r->b[bit / 8] & m));
            }
            sl_addr a;
            set_bytes(&a, r->family, b);
            check_against_reference(&a, &t);
        }
    }
    for (int k = 0; k < 20000; k++) {
        uint8_t b[16] = { 0 };
        sl_addr a;
        random_bytes(b, 4);
        set_bytes(&a, AF_INET, b);
        check_against_reference(&a, &t);
        random_bytes(b, 16);
        set_bytes(&a, AF_INET6, b);
        check_against_reference(&a, &t);
        b[0] = (uint8_t)(0x20 | (b[0] & 0x1f));  /* inside 2000::/3 */
        set_bytes(&a, AF_INET6, b);
        check_against_reference(&a, &t);
    }
    print_message("random: %u addresses checked, %u judged by embedded IPv4\n",
                  t.checked, t.embedded);
    assert_int_equal(t.failed, 0);
}

/* The oracle itself: a few answers known by hand, so a broken oracle cannot
 * hide a broken classifier. */
static void test_reference_sanity(void **state)
{
    (void)state;
    static const struct { const char *s; int fam; bool pub; } c[] = {
        { "10.0.0.1", AF_INET, false },  { "1.1.1.1", AF_INET, true },
        { "192.0.0.9", AF_INET, true },  { "192.0.0.11", AF_INET, false },
        { "2001:1::1", AF_INET6, true }, { "2001:1::4", AF_INET6, false },
        { "3fff::1", AF_INET6, false },  { "2606:4700::1111", AF_INET6, true },
        { "64:ff9b::1.1.1.1", AF_INET6, true }, { "fe80::1", AF_INET6, false },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint8_t b[16] = { 0 };
        assert_int_equal(inet_pton(c[i].fam, c[i].s, b), 1);
        assert_int_equal(ref_table_public(c[i].fam, b), c[i].pub);
    }
}

/* ---- explicit cases ---- */

static sl_addr A(const char *s)
{
    sl_addr a;
    if (!sl_addr_parse(s, strlen(s), &a))
        fail_msg("test address '%s' does not parse", s);
    return a;
}

static sl_cidr C(const char *s)
{
    sl_cidr c;
    char err[128];
    if (!sl_cidr_parse(s, &c, err, sizeof err))
        fail_msg("test cidr '%s': %s", s, err);
    return c;
}

static void expect(const char *addr, sl_cidr_list allow, sl_cidr_list deny, bool pub,
                   const char *why)
{
    char scratch[128];
    sl_addr a = A(addr);
    sl_verdict v = classify(&a, allow, deny, scratch, sizeof scratch);
    if (v.is_public != pub || (why && strcmp(v.why, why) != 0))
        fail_msg("%s: got %s \"%s\", want %s \"%s\"", addr, v.is_public ? "public" : "non-public",
                 v.why, pub ? "public" : "non-public", why ? why : "(any)");
}

static void expect_plain(const char *addr, bool pub, const char *why)
{
    expect(addr, NONE, NONE, pub, why);
}

typedef enum form {
    F_MAPPED, F_COMPAT, F_TRANSLATED, F_NAT64, F_NAT64_LOCAL, F_6TO4, F_TEREDO_SERVER,
    F_TEREDO_CLIENT, F_COUNT
} form;

static const char *const form_name[F_COUNT] = {
    "mapped", "compatible", "translated", "NAT64 /96", "NAT64 /48", "6to4",
    "Teredo server", "Teredo client",
};

/* The registry row that refuses each form when its IPv4 is public (NULL:
 * public). */
static const char *const form_row[F_COUNT] = {
    "::ffff:0:0/96 ", "::/96 ", "::ffff:0:0:0/96 ", NULL, "64:ff9b:1::/48 ", "2002::/16 ",
    "2001::/32 ", "2001::/32 ",
};

/* Builds the form around v4; Teredo's other IPv4 is public 65.54.227.120
 * (server, RFC 4380's example) or 1.1.1.1 (client). */
static sl_addr build(form f, const uint8_t *v4)
{
    sl_addr a;
    memset(&a, 0, sizeof a);
    a.family = AF_INET6;
    uint8_t *b = a.b;
    static const uint8_t pub_server[4] = { 65, 54, 227, 120 }, pub_client[4] = { 1, 1, 1, 1 };
    switch (f) {
    case F_MAPPED:
        b[10] = b[11] = 0xff;
        memcpy(b + 12, v4, 4);
        break;
    case F_COMPAT:
        memcpy(b + 12, v4, 4);
        break;
    case F_TRANSLATED:
        b[8] = b[9] = 0xff;
        memcpy(b + 12, v4, 4);
        break;
    case F_NAT64:
        b[1] = 0x64, b[2] = 0xff, b[3] = 0x9b;
        memcpy(b + 12, v4, 4);
        break;
    case F_NAT64_LOCAL:  /* RFC 6052 /48: v4[0..1] at bits 48..63, u octet, v4[2..3] */
        b[1] = 0x64, b[2] = 0xff, b[3] = 0x9b, b[5] = 0x01;
        b[6] = v4[0], b[7] = v4[1], b[8] = 0, b[9] = v4[2], b[10] = v4[3];
        break;
    case F_6TO4:
        b[0] = 0x20, b[1] = 0x02;
        memcpy(b + 2, v4, 4);
        b[15] = 1;
        break;
    case F_TEREDO_SERVER:
    case F_TEREDO_CLIENT: {
        const uint8_t *srv = f == F_TEREDO_SERVER ? v4 : pub_server;
        const uint8_t *cli = f == F_TEREDO_CLIENT ? v4 : pub_client;
        b[0] = 0x20, b[1] = 0x01;
        memcpy(b + 4, srv, 4);
        b[8] = 0x80, b[10] = 0x63, b[11] = 0xbf;  /* flags, obfuscated port */
        for (int i = 0; i < 4; i++)
            b[12 + i] = (uint8_t)(cli[i] ^ 0xff);
        break;
    }
    case F_COUNT:
        break;
    }
    return a;
}

/* The builder agrees with hand-written literals of each layout. */
static void test_embedded_layouts(void **state)
{
    (void)state;
    static const uint8_t v4[4] = { 10, 1, 2, 3 };
    static const char *const lit[F_COUNT] = {
        "::ffff:10.1.2.3", "::10.1.2.3", "::ffff:0:10.1.2.3", "64:ff9b::10.1.2.3",
        "64:ff9b:1:a01:2:300::", "2002:a01:203::1", "2001:0:a01:203:8000:63bf:fefe:fefe",
        "2001:0:4136:e378:8000:63bf:f5fe:fdfc",
    };
    for (int f = 0; f < F_COUNT; f++) {
        sl_addr built = build((form)f, v4), want = A(lit[f]);
        if (!sl_addr_equal(&built, &want)) {
            char txt[SL_ADDR_STRLEN];
            fail_msg("%s: built %s, want %s", form_name[f], sl_addr_format(&built, txt, sizeof txt),
                     lit[f]);
        }
    }
}

static void test_embedded_forms(void **state)
{
    (void)state;
    static const struct { uint8_t v4[4]; const char *why; } cases[] = {
        { { 10, 1, 2, 3 }, "embeds 10.1.2.3: 10.0.0.0/8 Private-Use" },
        { { 127, 0, 0, 1 }, "embeds 127.0.0.1: 127.0.0.0/8 Loopback" },
        { { 169, 254, 169, 254 }, "embeds 169.254.169.254: cloud metadata address" },
        { { 168, 63, 129, 16 }, "embeds 168.63.129.16: cloud metadata address" },
        { { 1, 1, 1, 1 }, NULL },  /* public: only the block decides */
    };
    char scratch[128], txt[SL_ADDR_STRLEN];
    int checked = 0;
    for (int f = 0; f < F_COUNT; f++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            sl_addr a = build((form)f, cases[i].v4);
            sl_verdict v = classify(&a, NONE, NONE, scratch, sizeof scratch);
            sl_addr_format(&a, txt, sizeof txt);
            if (cases[i].why) {
                if (v.is_public || strcmp(v.why, cases[i].why) != 0)
                    fail_msg("%s %s: got \"%s\", want \"%s\"", form_name[f], txt, v.why, cases[i].why);
            } else if (form_row[f] == NULL) {
                if (!v.is_public)
                    fail_msg("%s %s: got \"%s\", want public", form_name[f], txt, v.why);
            } else if (v.is_public || strncmp(v.why, form_row[f], strlen(form_row[f])) != 0) {
                fail_msg("%s %s: got \"%s\", want \"%s...\"", form_name[f], txt, v.why, form_row[f]);
            }
            checked++;
        }
    }
    assert_int_equal(checked, F_COUNT * 5);
}

static void test_embedded_literals(void **state)
{
    (void)state;
    /* RFC 4380 sec 4 example: server 65.54.227.120, client 192.0.2.45. */
    expect_plain("2001:0:4136:e378:8000:63bf:3fff:fdd2", false,
                 "embeds 192.0.2.45: 192.0.2.0/24 Documentation (TEST-NET-1)");
    expect_plain("64:ff9b::7f00:1", false, "embeds 127.0.0.1: 127.0.0.0/8 Loopback");
    expect_plain("64:ff9b::192.168.1.1", false, "embeds 192.168.1.1: 192.168.0.0/16 Private-Use");
    expect_plain("64:ff9b::100.64.0.1", false,
                 "embeds 100.64.0.1: 100.64.0.0/10 Shared Address Space");
    expect_plain("64:ff9b::224.0.0.1", false,
                 "embeds 224.0.0.1: 224.0.0.0/24 Multicast Local Network Control Block");
    expect_plain("64:ff9b::192.0.0.9", true, "");      /* a yes /32 inside the embedded table */
    expect_plain("64:ff9b::8.8.8.8", true, "");
    expect_plain("::ffff:8.8.8.8", false, NULL);       /* mapped: refused outright */
    expect_plain("2002:808:808::1", false, NULL);      /* 6to4 is non-public itself */
    expect_plain("2002:c0a8:101::1", false, "embeds 192.168.1.1: 192.168.0.0/16 Private-Use");
    /* The u octet of the /48 layout is skipped, not read as part of the IPv4. */
    expect_plain("64:ff9b:1:c0a8:1:100::", false, "embeds 192.168.1.1: 192.168.0.0/16 Private-Use");
    /* ::/128 and ::1/128 are named by their own rows, not as "embeds 0.0.0.1". */
    expect_plain("::", false, "::/128 Unspecified Address");
    expect_plain("::1", false, "::1/128 Loopback Address");
    expect_plain("::2", false, "embeds 0.0.0.2: 0.0.0.0/8 This network");
}

static void test_metadata(void **state)
{
    (void)state;
    static const char *const meta[] = {
        "169.254.169.254", "169.254.170.2", "169.254.169.253", "168.63.129.16",
        "100.100.100.200", "192.0.0.192", "fd00:ec2::254",
    };
    sl_cidr wide[] = { C("0.0.0.0/0"), C("::/0") };
    sl_cidr_list allow_all = { wide, 2 };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        expect_plain(meta[i], false, "cloud metadata address");
        expect(meta[i], allow_all, NONE, false, "cloud metadata address");
    }
    /* Azure's address sits in public space: only the metadata rule stops it. */
    expect_plain("168.63.129.17", true, "");
    expect_plain("64:ff9b::168.63.129.16", false, "embeds 168.63.129.16: cloud metadata address");
    expect("64:ff9b::168.63.129.16", allow_all, NONE, false,
           "embeds 168.63.129.16: cloud metadata address");
    expect("::ffff:169.254.169.254", allow_all, NONE, false,
           "embeds 169.254.169.254: cloud metadata address");
    expect("::169.254.170.2", allow_all, NONE, false,
           "embeds 169.254.170.2: cloud metadata address");
    expect("2002:a9fe:a9fe::1", allow_all, NONE, false,
           "embeds 169.254.169.254: cloud metadata address");
    /* 64:ff9b:1::/48 carved as a /96 (RFC 8215): IPv4 in the low 32 bits. */
    expect("64:ff9b:1::169.254.169.254", allow_all, NONE, false,
           "embeds 169.254.169.254: cloud metadata address");
    expect("fd00:ec2::253", allow_all, NONE, true, "");
    expect_plain("fd00:ec2::253", false, "fc00::/7 Unique-Local");
}

static void test_allow_cidr(void **state)
{
    (void)state;
    sl_cidr one[] = { C("10.20.0.5/32") };
    sl_cidr_list allow = { one, 1 };
    expect("10.20.0.5", allow, NONE, true, "");
    expect("10.20.0.6", allow, NONE, false, "10.0.0.0/8 Private-Use");
    expect("10.20.0.4", allow, NONE, false, "10.0.0.0/8 Private-Use");
    /* Matched as given: the IPv4-mapped form is not admitted. */
    expect("::ffff:10.20.0.5", allow, NONE, false, "embeds 10.20.0.5: 10.0.0.0/8 Private-Use");
    expect("64:ff9b::10.20.0.5", allow, NONE, false, "embeds 10.20.0.5: 10.0.0.0/8 Private-Use");

    sl_cidr ll[] = { C("169.254.0.0/16") };
    sl_cidr_list allow_ll = { ll, 1 };
    expect("169.254.1.1", allow_ll, NONE, true, "");
    expect("169.254.169.254", allow_ll, NONE, false, "cloud metadata address");
    expect("169.254.170.2", allow_ll, NONE, false, "cloud metadata address");

    sl_cidr v6[] = { C("fd12:3456::/32"), C("::ffff:10.20.0.5/128") };
    sl_cidr_list allow6 = { v6, 2 };
    expect("fd12:3456::1", allow6, NONE, true, "");
    expect("fd12:3457::1", allow6, NONE, false, "fc00::/7 Unique-Local");
    expect("::ffff:10.20.0.5", allow6, NONE, true, "");  /* the v6 form, listed as such */
    expect("10.20.0.5", allow6, NONE, false, "10.0.0.0/8 Private-Use");
}

static void test_deny_cidr(void **state)
{
    (void)state;
    sl_cidr d[] = { C("93.184.216.0/24"), C("2606:4700::/32") };
    sl_cidr_list deny = { d, 2 };
    expect("93.184.216.34", NONE, deny, false, "deny_cidr 93.184.216.0/24");
    expect("93.184.215.255", NONE, deny, true, "");
    expect("93.184.217.0", NONE, deny, true, "");
    expect("2606:4700::1111", NONE, deny, false, "deny_cidr 2606:4700::/32");
    expect("2606:4701::1", NONE, deny, true, "");
    /* A NAT64 route to a denied host is that host. */
    expect("64:ff9b::93.184.216.34", NONE, deny, false,
           "embeds 93.184.216.34: deny_cidr 93.184.216.0/24");

    sl_cidr doc[] = { C("192.0.2.0/24") };
    sl_cidr_list deny_doc = { doc, 1 };
    expect("192.0.2.1", NONE, deny_doc, false, "deny_cidr 192.0.2.0/24");
}

static void test_deny_beats_allow(void **state)
{
    (void)state;
    sl_cidr a[] = { C("10.20.0.0/16") }, d[] = { C("10.20.0.5/32") };
    sl_cidr_list allow = { a, 1 }, deny = { d, 1 };
    expect("10.20.0.5", allow, deny, false, "deny_cidr 10.20.0.5/32");
    expect("10.20.0.6", allow, deny, true, "");
    sl_cidr pa[] = { C("1.1.1.0/24") }, pd[] = { C("1.1.1.1/32") };
    expect("1.1.1.1", (sl_cidr_list){ pa, 1 }, (sl_cidr_list){ pd, 1 }, false, "deny_cidr 1.1.1.1/32");
    /* deny_cidr comes before the metadata rule, so it names itself. */
    sl_cidr md[] = { C("169.254.0.0/16") };
    expect("169.254.169.254", NONE, (sl_cidr_list){ md, 1 }, false, "deny_cidr 169.254.0.0/16");
}

static void test_public(void **state)
{
    (void)state;
    static const char *const pub[] = {
        "1.1.1.1", "8.8.8.8", "93.184.216.34", "2606:4700::1111", "2001:4860:4860::8888",
        "192.0.0.9", "192.0.0.10", "192.31.196.1", "192.175.48.42", "2001:1::1", "2001:1::3",
        "2001:3::1", "2001:4:112::1", "2001:20::1", "2620:4f:8000::42", "64:ff9b::1.1.1.1",
        "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "223.255.255.255",
        "2c0f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    };
    for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++)
        expect_plain(pub[i], true, "");
}

static void test_nonpublic(void **state)
{
    (void)state;
    expect_plain("10.1.2.3", false, "10.0.0.0/8 Private-Use");
    expect_plain("127.0.0.1", false, "127.0.0.0/8 Loopback");
    expect_plain("0.0.0.0", false, "0.0.0.0/32 This host on this network");
    expect_plain("0.1.2.3", false, "0.0.0.0/8 This network");
    expect_plain("169.254.1.1", false, "169.254.0.0/16 Link Local");
    expect_plain("192.0.0.8", false, "192.0.0.8/32 IPv4 dummy address");
    expect_plain("192.0.0.11", false, "192.0.0.0/24 IETF Protocol Assignments");
    expect_plain("192.88.99.1", false, "192.88.99.0/24 Deprecated 6to4 Relay Anycast");
    expect_plain("240.0.0.1", false, "240.0.0.0/4 Reserved (former Class E)");
    expect_plain("255.255.255.255", false, "255.255.255.255/32 Limited Broadcast");
    expect_plain("239.1.1.1", false, "239.0.0.0/8 Multicast Administratively Scoped");
    expect_plain("fe80::1", false, "fe80::/10 Link-Local Unicast");
    expect_plain("2001:db8::1", false, "2001:db8::/32 Documentation");
    expect_plain("2001:1::4", false, "2001::/23 IETF Protocol Assignments");
    expect_plain("3fff::1", false, "3fff::/20 Documentation");
    expect_plain("3ffe::1", false, "3ffe::/16 Former 6bone");
    expect_plain("5f00::1", false, "5f00::/16 Segment Routing (SRv6) SIDs");
    expect_plain("ff02::1", false, "ff00::/8 Multicast");
}

static void test_scratch_and_bad_input(void **state)
{
    (void)state;
    sl_addr a = A("64:ff9b::10.1.2.3");
    /* No scratch: still refused, with a static reason. */
    sl_verdict v = sl_classify(&a, NONE, NONE, NULL, 0);
    assert_false(v.is_public);
    assert_string_equal(v.why, "10.0.0.0/8 Private-Use");
    /* A tiny scratch is truncated, not overrun (ASan would see it). */
    char small[8];
    v = sl_classify(&a, NONE, NONE, small, sizeof small);
    assert_false(v.is_public);
    assert_string_equal(v.why, "embeds ");
    sl_cidr d[] = { C("10.0.0.0/8") };
    v = sl_classify(&a, NONE, (sl_cidr_list){ d, 1 }, NULL, 0);
    assert_false(v.is_public);
    assert_string_equal(v.why, "deny_cidr");

    sl_addr bad;
    memset(&bad, 0, sizeof bad);
    v = sl_classify(&bad, NONE, NONE, NULL, 0);
    assert_false(v.is_public);
    assert_true(v.why != NULL && v.why[0] != '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_sanity),
        cmocka_unit_test(test_every_block_edges),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_embedded_layouts),
        cmocka_unit_test(test_embedded_forms),
        cmocka_unit_test(test_embedded_literals),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_allow_cidr),
        cmocka_unit_test(test_deny_cidr),
        cmocka_unit_test(test_deny_beats_allow),
        cmocka_unit_test(test_public),
        cmocka_unit_test(test_nonpublic),
        cmocka_unit_test(test_scratch_and_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
