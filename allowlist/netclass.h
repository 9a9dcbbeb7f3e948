/* Address classification: is an address a public unicast destination?
 * Follows the IANA IPv4 and IPv6 special-purpose address registries, plus
 * multicast, reserved space, the cloud metadata addresses and every form of
 * IPv6 that embeds an IPv4 address. Pure. */
#ifndef SLUICE_NETCLASS_H
#define SLUICE_NETCLASS_H

#include "addr.h"

typedef struct sl_cidr_list {
    const sl_cidr *v;
    size_t n;
} sl_cidr_list;

typedef struct sl_verdict {
    bool is_public;
    /* Why not public, for logs and refusal bodies, e.g.
     * "10.0.0.0/8 Private-Use", "deny_cidr 192.0.2.0/24",
     * "cloud metadata address", "embeds 10.1.2.3: 10.0.0.0/8 Private-Use".
     * Points to static storage or into `scratch`; empty when public. */
    const char *why;
} sl_verdict;

/* Order: deny_cidr denies; the metadata addresses are denied even inside
 * allow_cidr; allow_cidr admits; otherwise the registries decide (longest
 * prefix wins) and an embedded IPv4 address must itself be public.
 * allow_cidr is matched against the address as given, so a v4 allow_cidr
 * does not admit the IPv4-mapped form; deny_cidr and the metadata rule
 * also look at the IPv4 an IPv6 form embeds. Reasons that name an address
 * are written into `scratch` (128 bytes is ample; with none, a shorter
 * static reason is used). Never allocates. */
sl_verdict sl_classify(const sl_addr *a, sl_cidr_list allow, sl_cidr_list deny,
                       char *scratch, size_t scratchcap);

#endif
