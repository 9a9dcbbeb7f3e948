/* Address classification: SPEC "Decisions" step 5.
 *
 * The tables below follow the IANA IPv4 and IPv6 Special-Purpose Address
 * Registries as published October 2025, with the additions of
 * data/ipv4-special.tsv and data/ipv6-special.tsv (multicast, 240.0.0.0/4,
 * the IETF-reserved and IANA-reserved IPv6 space, site-local, the
 * IPv4-translated form). tests/unit/test_netclass.c checks every block of
 * those files against this code, so a change to one must go to the other. */
#include "netclass.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

typedef struct nc_row {
    uint8_t b[16];
    uint8_t prefix;
    bool global;       /* "globally reachable" column: yes = public */
    const char *why;   /* "CIDR name": the reason logged when not public */
} nc_row;

/* The reason string is the row's CIDR, spelt as in the TSV, and a short
 * name. IPv4 rows build both from the same tokens so they cannot disagree. */
#define V4(a, b, c, d, len, glob, name) \
    { { a, b, c, d }, len, glob, #a "." #b "." #c "." #d "/" #len " " name }
#define W(g) (uint8_t)((unsigned)(g) >> 8), (uint8_t)((unsigned)(g) & 0xffu)
#define V6(g0, g1, g2, g3, g4, g5, g6, g7, len, glob, text) \
    { { W(g0), W(g1), W(g2), W(g3), W(g4), W(g5), W(g6), W(g7) }, len, glob, text }
#define YES true
#define NO false

static const nc_row v4_rows[] = {
    V4(0, 0, 0, 0, 8, NO, "This network"),
    V4(0, 0, 0, 0, 32, NO, "This host on this network"),
    V4(10, 0, 0, 0, 8, NO, "Private-Use"),
    V4(100, 64, 0, 0, 10, NO, "Shared Address Space"),
    V4(127, 0, 0, 0, 8, NO, "Loopback"),
    V4(169, 254, 0, 0, 16, NO, "Link Local"),
    V4(172, 16, 0, 0, 12, NO, "Private-Use"),
    V4(192, 0, 0, 0, 24, NO, "IETF Protocol Assignments"),
    V4(192, 0, 0, 0, 29, NO, "IPv4 Service Continuity Prefix"),
    V4(192, 0, 0, 8, 32, NO, "IPv4 dummy address"),
    V4(192, 0, 0, 9, 32, YES, "Port Control Protocol Anycast"),
    V4(192, 0, 0, 10, 32, YES, "Traversal Using Relays around NAT Anycast"),
    V4(192, 0, 0, 170, 32, NO, "NAT64/DNS64 Discovery"),
    V4(192, 0, 0, 171, 32, NO, "NAT64/DNS64 Discovery"),
    V4(192, 0, 2, 0, 24, NO, "Documentation (TEST-NET-1)"),
    V4(192, 31, 196, 0, 24, YES, "AS112-v4"),
    V4(192, 52, 193, 0, 24, YES, "AMT"),
    /* IANA left "Globally Reachable" empty when it terminated this entry;
     * the data files read that as no, and so do we. */
    V4(192, 88, 99, 0, 24, NO, "Deprecated 6to4 Relay Anycast"),
    V4(192, 88, 99, 2, 32, NO, "6a44-relay anycast address"),
    V4(192, 168, 0, 0, 16, NO, "Private-Use"),
    V4(192, 175, 48, 0, 24, YES, "Direct Delegation AS112 Service"),
    V4(198, 18, 0, 0, 15, NO, "Benchmarking"),
    V4(198, 51, 100, 0, 24, NO, "Documentation (TEST-NET-2)"),
    V4(203, 0, 113, 0, 24, NO, "Documentation (TEST-NET-3)"),
    V4(224, 0, 0, 0, 4, NO, "Multicast"),
    V4(224, 0, 0, 0, 24, NO, "Multicast Local Network Control Block"),
    V4(232, 0, 0, 0, 8, NO, "Multicast Source-Specific"),
    V4(233, 252, 0, 0, 24, NO, "Multicast MCAST-TEST-NET"),
    V4(239, 0, 0, 0, 8, NO, "Multicast Administratively Scoped"),
    V4(240, 0, 0, 0, 4, NO, "Reserved (former Class E)"),
    V4(255, 255, 255, 255, 32, NO, "Limited Broadcast"),
};

/* Together these rows cover the whole IPv6 space, so every address has a
 * longest match; the reserved sub-blocks of 2000::/3 override its yes. */
static const nc_row v6_rows[] = {
    V6(0, 0, 0, 0, 0, 0, 0, 0, 128, NO, "::/128 Unspecified Address"),
    V6(0, 0, 0, 0, 0, 0, 0, 1, 128, NO, "::1/128 Loopback Address"),
    V6(0, 0, 0, 0, 0, 0, 0, 0, 96, NO, "::/96 IPv4-compatible"),
    V6(0, 0, 0, 0, 0, 0xffff, 0, 0, 96, NO, "::ffff:0:0/96 IPv4-mapped"),
    V6(0, 0, 0, 0, 0xffff, 0, 0, 0, 96, NO, "::ffff:0:0:0/96 IPv4-translated"),
    V6(0, 0, 0, 0, 0, 0, 0, 0, 8, NO, "::/8 Reserved by IETF"),
    V6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0, 96, YES, "64:ff9b::/96 NAT64 well-known prefix"),
    V6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0, 48, NO, "64:ff9b:1::/48 NAT64 local-use prefix"),
    V6(0x100, 0, 0, 0, 0, 0, 0, 0, 8, NO, "100::/8 Reserved by IETF"),
    V6(0x100, 0, 0, 0, 0, 0, 0, 0, 64, NO, "100::/64 Discard-Only"),
    V6(0x100, 0, 0, 1, 0, 0, 0, 0, 64, NO, "100:0:0:1::/64 Dummy IPv6 Prefix"),
    V6(0x200, 0, 0, 0, 0, 0, 0, 0, 7, NO, "200::/7 Reserved by IETF"),
    V6(0x400, 0, 0, 0, 0, 0, 0, 0, 6, NO, "400::/6 Reserved by IETF"),
    V6(0x800, 0, 0, 0, 0, 0, 0, 0, 5, NO, "800::/5 Reserved by IETF"),
    V6(0x1000, 0, 0, 0, 0, 0, 0, 0, 4, NO, "1000::/4 Reserved by IETF"),
    V6(0x2000, 0, 0, 0, 0, 0, 0, 0, 3, YES, "2000::/3 Global Unicast"),
    V6(0x2001, 0, 0, 0, 0, 0, 0, 0, 23, NO, "2001::/23 IETF Protocol Assignments"),
    V6(0x2001, 0, 0, 0, 0, 0, 0, 0, 32, NO, "2001::/32 Teredo"),
    V6(0x2001, 1, 0, 0, 0, 0, 0, 1, 128, YES, "2001:1::1/128 Port Control Protocol Anycast"),
    V6(0x2001, 1, 0, 0, 0, 0, 0, 2, 128, YES, "2001:1::2/128 TURN Anycast"),
    V6(0x2001, 1, 0, 0, 0, 0, 0, 3, 128, YES, "2001:1::3/128 DNS-SD SRP Anycast"),
    V6(0x2001, 2, 0, 0, 0, 0, 0, 0, 48, NO, "2001:2::/48 Benchmarking"),
    V6(0x2001, 3, 0, 0, 0, 0, 0, 0, 32, YES, "2001:3::/32 AMT"),
    V6(0x2001, 4, 0x112, 0, 0, 0, 0, 0, 48, YES, "2001:4:112::/48 AS112-v6"),
    V6(0x2001, 0x10, 0, 0, 0, 0, 0, 0, 28, NO, "2001:10::/28 Deprecated (ORCHID)"),
    V6(0x2001, 0x20, 0, 0, 0, 0, 0, 0, 28, YES, "2001:20::/28 ORCHIDv2"),
    V6(0x2001, 0x30, 0, 0, 0, 0, 0, 0, 28, YES, "2001:30::/28 Drone Remote ID DETs"),
    V6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0, 32, NO, "2001:db8::/32 Documentation"),
    V6(0x2002, 0, 0, 0, 0, 0, 0, 0, 16, NO, "2002::/16 6to4"),
    V6(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0, 48, YES, "2620:4f:8000::/48 Direct Delegation AS112 Service"),
    V6(0x2d00, 0, 0, 0, 0, 0, 0, 0, 8, NO, "2d00::/8 IANA Reserved"),
    V6(0x2e00, 0, 0, 0, 0, 0, 0, 0, 7, NO, "2e00::/7 IANA Reserved"),
    V6(0x3000, 0, 0, 0, 0, 0, 0, 0, 5, NO, "3000::/5 IANA Reserved"),
    V6(0x3800, 0, 0, 0, 0, 0, 0, 0, 6, NO, "3800::/6 IANA Reserved"),
    V6(0x3c00, 0, 0, 0, 0, 0, 0, 0, 7, NO, "3c00::/7 IANA Reserved"),
    V6(0x3e00, 0, 0, 0, 0, 0, 0, 0, 8, NO, "3e00::/8 IANA Reserved"),
    V6(0x3f00, 0, 0, 0, 0, 0, 0, 0, 9, NO, "3f00::/9 IANA Reserved"),
    V6(0x3f80, 0, 0, 0, 0, 0, 0, 0, 10, NO, "3f80::/10 IANA Reserved"),
    V6(0x3fc0, 0, 0, 0, 0, 0, 0, 0, 11, NO, "3fc0::/11 IANA Reserved"),
    V6(0x3fe0, 0, 0, 0, 0, 0, 0, 0, 12, NO, "3fe0::/12 IANA Reserved"),
    V6(0x3ff0, 0, 0, 0, 0, 0, 0, 0, 13, NO, "3ff0::/13 IANA Reserved"),
    V6(0x3ff8, 0, 0, 0, 0, 0, 0, 0, 14, NO, "3ff8::/14 IANA Reserved"),
    V6(0x3ffc, 0, 0, 0, 0, 0, 0, 0, 15, NO, "3ffc::/15 IANA Reserved"),
    V6(0x3ffe, 0, 0, 0, 0, 0, 0, 0, 16, NO, "3ffe::/16 Former 6bone"),
    V6(0x3fff, 0, 0, 0, 0, 0, 0, 0, 20, NO, "3fff::/20 Documentation"),
    V6(0x4000, 0, 0, 0, 0, 0, 0, 0, 3, NO, "4000::/3 Reserved by IETF"),
    V6(0x5f00, 0, 0, 0, 0, 0, 0, 0, 16, NO, "5f00::/16 Segment Routing (SRv6) SIDs"),
    V6(0x6000, 0, 0, 0, 0, 0, 0, 0, 3, NO, "6000::/3 Reserved by IETF"),
    V6(0x8000, 0, 0, 0, 0, 0, 0, 0, 3, NO, "8000::/3 Reserved by IETF"),
    V6(0xa000, 0, 0, 0, 0, 0, 0, 0, 3, NO, "a000::/3 Reserved by IETF"),
    V6(0xc000, 0, 0, 0, 0, 0, 0, 0, 3, NO, "c000::/3 Reserved by IETF"),
    V6(0xe000, 0, 0, 0, 0, 0, 0, 0, 4, NO, "e000::/4 Reserved by IETF"),
    V6(0xf000, 0, 0, 0, 0, 0, 0, 0, 5, NO, "f000::/5 Reserved by IETF"),
    V6(0xf800, 0, 0, 0, 0, 0, 0, 0, 6, NO, "f800::/6 Reserved by IETF"),
    V6(0xfc00, 0, 0, 0, 0, 0, 0, 0, 7, NO, "fc00::/7 Unique-Local"),
    V6(0xfe00, 0, 0, 0, 0, 0, 0, 0, 9, NO, "fe00::/9 Reserved by IETF"),
    V6(0xfe80, 0, 0, 0, 0, 0, 0, 0, 10, NO, "fe80::/10 Link-Local Unicast"),
    V6(0xfec0, 0, 0, 0, 0, 0, 0, 0, 10, NO, "fec0::/10 Site-Local (deprecated)"),
    V6(0xff00, 0, 0, 0, 0, 0, 0, 0, 8, NO, "ff00::/8 Multicast"),
};

/* Cloud metadata endpoints: denied even inside allow_cidr, because reaching
 * one hands out the host's credentials. GCP's 169.254.169.254 is shared. */
static const uint8_t metadata_v4[][4] = {
    { 169, 254, 169, 254 },  /* AWS, GCP, Azure IMDS, OpenStack, ... */
    { 169, 254, 170, 2 },    /* AWS ECS task metadata */
    { 169, 254, 169, 253 },  /* AWS VPC DNS */
    { 168, 63, 129, 16 },    /* Azure WireServer */
    { 100, 100, 100, 200 },  /* Alibaba Cloud */
    { 192, 0, 0, 192 },      /* Oracle Cloud */
};
static const nc_row metadata_v6[] = {
    V6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254, 128, NO, "fd00:ec2::254"),  /* AWS IMDS over IPv6 */
    V6(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254, 128, NO, "fd20:ce::254"),    /* GCP metadata over IPv6 */
};

#define N_OF(x) (sizeof(x) / sizeof((x)[0]))
#define METADATA_WHY "cloud metadata address"

static bool in_block(const uint8_t *a, const uint8_t *base, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;
    if (memcmp(a, base, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (a[full] & mask) == (base[full] & mask);
}

/* Longest prefix wins, so a more specific row overrides its parent either
 * way (192.0.0.9/32 yes inside 192.0.0.0/24 no; 3fff::/20 no in 2000::/3). */
static const nc_row *longest_match(const nc_row *rows, size_t n, const uint8_t *a)
{
    const nc_row *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (in_block(a, rows[i].b, rows[i].prefix) && (!best || rows[i].prefix > best->prefix))
            best = &rows[i];
    return best;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

static bool is_metadata_v4(const uint8_t *v4)
{
    for (size_t i = 0; i < N_OF(metadata_v4); i++)
        if (memcmp(v4, metadata_v4[i], 4) == 0)
            return true;
    return false;
}

/* IPv4 addresses an IPv6 address carries, by the layout of the block it is
 * in. Returns how many (0..2) and the prefix length of that block. */
typedef struct nc_embedded {
    uint8_t v4[2][4];
    size_t n;
    unsigned block_prefix;
} nc_embedded;

static void embedded_v4(const uint8_t *b, nc_embedded *e)
{
    static const uint8_t wkp[12] = { 0x00, 0x64, 0xff, 0x9b };  /* 64:ff9b::/96 */
    static const uint8_t lup[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };  /* 64:ff9b:1::/48 */
    e->n = 0;
    e->block_prefix = 0;
    if ((all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff) ||          /* ::ffff:a.b.c.d mapped */
        all_zero(b, 12) ||                                               /* ::a.b.c.d compatible */
        (all_zero(b, 8) && b[8] == 0xff && b[9] == 0xff && all_zero(b + 10, 2)) || /* translated */
        memcmp(b, wkp, sizeof wkp) == 0) {                               /* NAT64 /96 */
        memcpy(e->v4[e->n++], b + 12, 4);
        e->block_prefix = 96;
    } else if (memcmp(b, lup, sizeof lup) == 0) {
        /* RFC 6052 sec 2.2, /48: IPv4 in bits 48..63 and 72..87; bits
         * 64..71 are the u octet, which is skipped. */
        const uint8_t v4[4] = { b[6], b[7], b[9], b[10] };
        memcpy(e->v4[e->n++], v4, 4);
        e->block_prefix = 48;
    } else if (b[0] == 0x20 && b[1] == 0x02) {                           /* 6to4: bits 16..47 */
        memcpy(e->v4[e->n++], b + 2, 4);
        e->block_prefix = 16;
    } else if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) { /* Teredo */
        memcpy(e->v4[e->n++], b + 4, 4);                                 /* server */
        for (int i = 0; i < 4; i++)                                      /* client, obfuscated */
            e->v4[e->n][i] = (uint8_t)(b[12 + i] ^ 0xffu);
        e->n++;
        e->block_prefix = 32;
    }
}

/* An operator using 64:ff9b:1::/48 may carve a /96 from it (RFC 8215 sec
 * 4), putting the IPv4 in the low 32 bits instead. The block is non-public
 * either way; this only keeps allow_cidr from admitting a metadata address
 * spelt that way. */
static bool local_use_nat64_low32_is_metadata(const uint8_t *b)
{
    static const uint8_t lup[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };
    return memcmp(b, lup, sizeof lup) == 0 && is_metadata_v4(b + 12);
}

static sl_verdict refuse(const char *why)
{
    return (sl_verdict){ .is_public = false, .why = why };
}

/* "embeds A.B.C.D: REASON" in scratch; the bare reason when there is no room. */
static sl_verdict refuse_embedded(const uint8_t *v4, const char *why, char *scratch, size_t cap)
{
    if (!scratch || cap == 0)
        return refuse(why);
    snprintf(scratch, cap, "embeds %u.%u.%u.%u: %s", v4[0], v4[1], v4[2], v4[3], why);
    return refuse(scratch);
}

static const sl_cidr *first_containing(sl_cidr_list l, const sl_addr *a)
{
    for (size_t i = 0; i < l.n; i++)
        if (sl_cidr_contains(&l.v[i], a))
            return &l.v[i];
    return NULL;
}

static sl_verdict refuse_deny(const sl_cidr *c, const uint8_t *embedded, char *scratch, size_t cap)
{
    if (!scratch || cap == 0)
        return refuse("deny_cidr");
    char cb[64];
    sl_cidr_format(c, cb, sizeof cb);
    if (embedded)
        snprintf(scratch, cap, "embeds %u.%u.%u.%u: deny_cidr %s",
                 embedded[0], embedded[1], embedded[2], embedded[3], cb);
    else
        snprintf(scratch, cap, "deny_cidr %s", cb);
    return refuse(scratch);
}

sl_verdict sl_classify(const sl_addr *a, sl_cidr_list allow, sl_cidr_list deny,
                       char *scratch, size_t scratchcap)
{
    if (!a || (a->family != AF_INET && a->family != AF_INET6))
        return refuse("not an IP address");
    bool v6 = a->family == AF_INET6;
    nc_embedded emb = { .n = 0 };
    if (v6)
        embedded_v4(a->b, &emb);

    /* 1. deny_cidr, also against the IPv4 an IPv6 form carries: a NAT64
     * or 6to4 route to a denied host is that host. */
    const sl_cidr *c = first_containing(deny, a);
    if (c)
        return refuse_deny(c, NULL, scratch, scratchcap);
    for (size_t i = 0; i < emb.n; i++) {
        sl_addr e4 = { .family = AF_INET };
        memcpy(e4.b, emb.v4[i], 4);
        if ((c = first_containing(deny, &e4)) != NULL)
            return refuse_deny(c, emb.v4[i], scratch, scratchcap);
    }

    /* 2. Metadata, before allow_cidr: an allow_cidr of 169.254.0.0/16 must
     * not open the credentials endpoint, in any spelling. */
    if (!v6 && is_metadata_v4(a->b))
        return refuse(METADATA_WHY);
    if (v6) {
        for (size_t i = 0; i < N_OF(metadata_v6); i++)
            if (memcmp(a->b, metadata_v6[i].b, 16) == 0)
                return refuse(METADATA_WHY);
        for (size_t i = 0; i < emb.n; i++)
            if (is_metadata_v4(emb.v4[i]))
                return refuse_embedded(emb.v4[i], METADATA_WHY, scratch, scratchcap);
        if (local_use_nat64_low32_is_metadata(a->b))
            return refuse_embedded(a->b + 12, METADATA_WHY, scratch, scratchcap);
    }

    /* 3. allow_cidr, matched against the address exactly as resolved. A v4
     * allow_cidr does not admit ::ffff:10.20.0.5: IPv4-mapped answers are
     * refused outright (::ffff:0:0/96 is not public), so an operator who
     * wants one must list the IPv6 form. */
    if (first_containing(allow, a))
        return (sl_verdict){ .is_public = true, .why = "" };

    /* 4. Registries, then the embedded IPv4. */
    if (!v6) {
        const nc_row *r = longest_match(v4_rows, N_OF(v4_rows), a->b);
        if (r && !r->global)
            return refuse(r->why);
        return (sl_verdict){ .is_public = true, .why = "" };  /* no row: public */
    }
    const nc_row *r = longest_match(v6_rows, N_OF(v6_rows), a->b);
    /* A non-public row more specific than the embedding block (::/128 and
     * ::1/128 inside ::/96) names the address better than "embeds 0.0.0.1". */
    if (r && !r->global && r->prefix > emb.block_prefix && emb.n > 0)
        return refuse(r->why);
    /* A non-public embedded IPv4 refuses even inside a yes block (64:ff9b::/96). */
    for (size_t i = 0; i < emb.n; i++) {
        const nc_row *r4 = longest_match(v4_rows, N_OF(v4_rows), emb.v4[i]);
        if (r4 && !r4->global)
            return refuse_embedded(emb.v4[i], r4->why, scratch, scratchcap);
    }
    if (r)
        return r->global ? (sl_verdict){ .is_public = true, .why = "" } : refuse(r->why);
    /* Unreachable while the table covers all of the IPv6 space; to be safe,
     * only global unicast 2000::/3 counts as public. */
    if ((a->b[0] & 0xe0) == 0x20)
        return (sl_verdict){ .is_public = true, .why = "" };
    return refuse("outside global unicast 2000::/3");
}
