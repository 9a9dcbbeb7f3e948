/* Address classification (allowlist/netclass.c): sl_classify on 4- and
 * 16-byte addresses, with allow_cidr / deny_cidr lists from the input.
 *
 * Input: [flags] [16 address bytes] then 18-byte CIDRs:
 *   [bit0: allow(1)/deny(0), bit1: IPv6] [prefix] [16 base bytes]
 * (host bits are cleared, the prefix is taken modulo its maximum + 1).
 * flags bit0: the address is IPv6 (else the first 4 bytes are IPv4).
 *
 * Properties:
 *   - why is a non-empty string iff the address is not public, and fits
 *     the scratch buffer; the verdict does not depend on the scratch size;
 *   - an address inside a deny_cidr is never public;
 *   - a non-public IPv4 address is non-public in every IPv6 form that
 *     embeds it (mapped, compatible, translated, NAT64 /96 and /48, 6to4,
 *     Teredo server and client) when no allow_cidr admits that form;
 *   - a cloud metadata IPv4 address is refused in all those forms even with
 *     allow_cidr 0.0.0.0/0 and ::/0. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "fuzz_util.h"
#include "netclass.h"

#define MAX_CIDRS 16

static sl_verdict classify(const sl_addr *a, sl_cidr_list allow, sl_cidr_list deny)
{
    char scratch[128], small[8];
    memset(scratch, 'X', sizeof scratch);
    sl_verdict v = sl_classify(a, allow, deny, scratch, sizeof scratch);
    FUZZ_CHECK(v.why != NULL, "why is NULL");
    FUZZ_CHECK(memchr(v.why, '\0', 256) != NULL, "why not terminated");
    FUZZ_CHECK(v.is_public == (v.why[0] == '\0'), "public=%d with why '%s'", v.is_public, v.why);
    if (v.why >= scratch && v.why < scratch + sizeof scratch)
        FUZZ_CHECK(memchr(scratch, '\0', sizeof scratch) != NULL, "scratch overflow");
    sl_verdict w = sl_classify(a, allow, deny, NULL, 0);
    FUZZ_CHECK(w.is_public == v.is_public && w.why && (w.why[0] == '\0') == w.is_public,
               "verdict depends on the scratch buffer (none)");
    memset(small, 'X', sizeof small);
    w = sl_classify(a, allow, deny, small, sizeof small);
    FUZZ_CHECK(w.is_public == v.is_public && w.why && (w.why[0] == '\0') == w.is_public,
               "verdict depends on the scratch buffer (8 bytes)");
    if (w.why >= small && w.why < small + sizeof small)
        FUZZ_CHECK(memchr(small, '\0', sizeof small) != NULL, "small scratch overflow");
    return v;
}

static const uint8_t metadata_v4[][4] = {
    { 169, 254, 169, 254 }, { 169, 254, 170, 2 }, { 169, 254, 169, 253 },
    { 168, 63, 129, 16 },   { 100, 100, 100, 200 }, { 192, 0, 0, 192 },
};

/* The IPv6 forms that embed v4 (9 of them). */
static int embed(const uint8_t *v4, sl_addr out[9])
{
    memset(out, 0, 9 * sizeof *out);
    for (int i = 0; i < 9; i++)
        out[i].family = AF_INET6;
    uint8_t *b;
    b = out[0].b; b[10] = b[11] = 0xff; memcpy(b + 12, v4, 4);                  /* ::ffff:a */
    b = out[1].b; memcpy(b + 12, v4, 4);                                        /* ::a */
    b = out[2].b; b[8] = b[9] = 0xff; memcpy(b + 12, v4, 4);                    /* ::ffff:0:a */
    b = out[3].b; b[1] = 0x64; b[2] = 0xff; b[3] = 0x9b; memcpy(b + 12, v4, 4); /* 64:ff9b::a */
    b = out[4].b; b[1] = 0x64; b[2] = 0xff; b[3] = 0x9b; b[5] = 1;              /* 64:ff9b:1::/48 */
    b[6] = v4[0]; b[7] = v4[1]; b[9] = v4[2]; b[10] = v4[3];
    b = out[5].b; b[0] = 0x20; b[1] = 0x02; memcpy(b + 2, v4, 4);               /* 6to4 */
    b = out[6].b; b[0] = 0x20; b[1] = 0x01; memcpy(b + 4, v4, 4);               /* Teredo server */
    b = out[7].b; b[0] = 0x20; b[1] = 0x01; b[4] = 192; b[5] = 0; b[6] = 2; b[7] = 1;
    for (int i = 0; i < 4; i++)                                                  /* Teredo client */
        b[12 + i] = (uint8_t)(v4[i] ^ 0xff);
    b = out[8].b; b[1] = 0x64; b[2] = 0xff; b[3] = 0x9b; b[5] = 1; memcpy(b + 12, v4, 4); /* /96 in /48 */
    return 9;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17)
        return -1;
    sl_addr a;
    memset(&a, 0, sizeof a);
    bool v6 = data[0] & 1;
    a.family = v6 ? AF_INET6 : AF_INET;
    memcpy(a.b, data + 1, v6 ? 16 : 4);

    sl_cidr allow[MAX_CIDRS], deny[MAX_CIDRS];
    size_t na = 0, nd = 0;
    for (const uint8_t *p = data + 17; p + 18 <= data + size && na + nd < MAX_CIDRS; p += 18) {
        sl_cidr c;
        memset(&c, 0, sizeof c);
        c.base.family = (p[0] & 2) ? AF_INET6 : AF_INET;
        unsigned max = c.base.family == AF_INET6 ? 128 : 32;
        c.prefix = p[1] % (max + 1);
        memcpy(c.base.b, p + 2, max / 8);
        for (unsigned bit = c.prefix; bit < max; bit++)
            c.base.b[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
        if (p[0] & 1)
            allow[na++] = c;
        else
            deny[nd++] = c;
    }
    sl_cidr_list al = { allow, na }, dl = { deny, nd };
    sl_cidr_list none = { NULL, 0 };

    sl_verdict v = classify(&a, al, dl);
    for (size_t i = 0; i < nd; i++)
        if (sl_cidr_contains(&deny[i], &a))
            FUZZ_CHECK(!v.is_public, "address inside deny_cidr %zu is public", i);
    (void)classify(&a, none, none);

    if (!v6) {
        char t[SL_ADDR_STRLEN], t6[SL_ADDR_STRLEN];
        sl_addr forms[9];
        int n = embed(a.b, forms);
        bool pub4 = classify(&a, none, dl).is_public;
        for (int i = 0; i < n; i++) {
            sl_verdict w = classify(&forms[i], none, dl);
            if (!pub4)
                FUZZ_CHECK(!w.is_public, "%s is not public, but its form %d %s is",
                           sl_addr_format(&a, t, sizeof t), i,
                           sl_addr_format(&forms[i], t6, sizeof t6));
            for (size_t k = 0; k < nd; k++)
                if (sl_cidr_contains(&deny[k], &a))
                    FUZZ_CHECK(!w.is_public, "deny_cidr does not catch form %d %s of %s", i,
                               sl_addr_format(&forms[i], t6, sizeof t6),
                               sl_addr_format(&a, t, sizeof t));
        }
        /* Metadata: refused in every spelling, even when everything is allowed. */
        sl_cidr everything[2];
        memset(everything, 0, sizeof everything);
        everything[0].base.family = AF_INET;
        everything[1].base.family = AF_INET6;
        sl_cidr_list all = { everything, 2 };
        const uint8_t *md = metadata_v4[data[0] % 6];
        sl_addr m4 = { .family = AF_INET };
        memcpy(m4.b, md, 4);
        FUZZ_CHECK(!classify(&m4, all, none).is_public, "metadata address allowed");
        n = embed(md, forms);
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(!classify(&forms[i], all, none).is_public,
                       "metadata address %u.%u.%u.%u allowed in form %d %s", md[0], md[1], md[2],
                       md[3], i, sl_addr_format(&forms[i], t6, sizeof t6));
    }
    return 0;
}
