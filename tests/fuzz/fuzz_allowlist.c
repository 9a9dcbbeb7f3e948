/* The allowlist line parser and matcher (allowlist/allowlist.c):
 * sl_allowlist_add_line, sl_ports_parse, sl_allowlist_match,
 * sl_entry_format, sl_allowlist_suggest. Request rules (fuzz_rule.c covers
 * them in depth) are lines like any other here.
 *
 * Input: allowlist lines, then optionally a NUL and
 *   line 1: connect_ports (e.g. "443, 8443"), line 2: http_ports,
 *   further lines: queries "host:port".
 * Bad port lists fall back to 443 / 80.
 *
 * Properties:
 *   - a line adds at most one entry; an entry prints as a line that parses
 *     back to the same entry;
 *   - every entry allows what it names: its host (for a wildcard, a
 *     subdomain) on its port (a bare entry: on a connect port);
 *   - for every query the matcher agrees with a brute-force reference over
 *     all entries (result, and the rule: the earliest request rule that
 *     covers host:port, else the most specific plain entry, then earliest);
 *   - a suggested line, added to an empty list, allows the query; a
 *     non-public IP literal gets no line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "fuzz_util.h"
#include "host.h"
#include "netclass.h"

static bool covers(const sl_entry *e, const sl_host *h)
{
    if (h->kind != SL_HOST_NAME)
        return e->kind == SL_ENTRY_EXACT && e->host.kind == h->kind &&
               sl_addr_equal(&e->host.addr, &h->addr);
    if (e->host.kind != SL_HOST_NAME)
        return false;
    if (e->kind == SL_ENTRY_EXACT)
        return e->host.len == h->len && !memcmp(e->host.name, h->name, h->len);
    bool sub = h->len > e->host.len && h->name[h->len - e->host.len - 1] == '.' &&
               !memcmp(h->name + h->len - e->host.len, e->host.name, e->host.len);
    if (e->kind == SL_ENTRY_WILDCARD)
        return sub;
    return sub || (e->host.len == h->len && !memcmp(e->host.name, h->name, h->len));
}

static bool allows(const sl_entry *e, int port, bool connect, const sl_ports *cp, const sl_ports *hp)
{
    return e->port ? e->port == port : sl_ports_has(connect ? cp : hp, port);
}

/* Rank: exact beats any suffix; then longer suffix. */
static long rank(const sl_entry *e)
{
    return e->kind == SL_ENTRY_EXACT ? 100000 : (long)e->host.len;
}

static void check_query(const sl_allowlist *al, const sl_host *h, int port, bool connect,
                        const sl_ports *cp, const sl_ports *hp)
{
    const sl_entry *rule = (const sl_entry *)1;
    sl_match_result r = sl_allowlist_match(al, h, port, connect, cp, hp, &rule);

    /* Request rules first: the earliest that covers host:port makes it
     * inspected. Otherwise the most specific plain entry. */
    const sl_entry *best = NULL, *first_rule = NULL;
    bool seen = false;
    for (size_t i = 0; i < sl_allowlist_count(al); i++) {
        const sl_entry *e = sl_allowlist_entry(al, i);
        if (!covers(e, h))
            continue;
        seen = true;
        if (!allows(e, port, connect, cp, hp))
            continue;
        if (sl_entry_is_rule(e)) {
            if (!first_rule)
                first_rule = e;
        } else if (!best || rank(e) > rank(best)) {
            best = e;
        }
    }
    if (first_rule)
        best = first_rule;
    sl_match_result want = first_rule ? SL_MATCH_INSPECTED
                           : best     ? SL_MATCH_ALLOWED
                           : seen     ? SL_MATCH_PORT_NOT_ALLOWED
                                      : SL_MATCH_NO_ENTRY;
    char a[300], b[300];
    FUZZ_CHECK(r == want, "match(%s, %d, %s) = %d, reference says %d", h->name, port,
               connect ? "connect" : "http", (int)r, (int)want);
    if (r == SL_MATCH_ALLOWED || r == SL_MATCH_INSPECTED) {
        FUZZ_CHECK(rule == best, "match(%s, %d) chose rule '%s', reference '%s'", h->name, port,
                   rule && rule != (const sl_entry *)1 ? sl_entry_format(rule, a, sizeof a) : "(none)",
                   sl_entry_format(best, b, sizeof b));
    } else {
        FUZZ_CHECK(rule == NULL, "no match but a rule");
    }

    /* The suggested line allows the request; a non-public IP literal, which
     * no line lets through, gets none. */
    char line[400], err[512];
    bool nonpublic = h->kind != SL_HOST_NAME &&
                     !sl_classify(&h->addr, (sl_cidr_list){ NULL, 0 }, (sl_cidr_list){ NULL, 0 },
                                  NULL, 0).is_public;
    bool suggested = sl_allowlist_suggest(h, port, connect, cp, hp, line, sizeof line);
    FUZZ_CHECK(suggested == !nonpublic, "suggest(%s) = %d for a%s address", h->name, suggested,
               nonpublic ? " non-public" : " public or named");
    if (!suggested) {
        FUZZ_CHECK(line[0] == '\0', "no suggestion, but a line '%s'", line);
        return;
    }
    sl_allowlist *one = sl_allowlist_new();
    FUZZ_CHECK(sl_allowlist_add_line(one, line, strlen(line), "suggest", 1, err, sizeof err),
               "suggested line '%s' for %s:%d does not parse: %s", line, h->name, port, err);
    FUZZ_CHECK(sl_allowlist_match(one, h, port, connect, cp, hp, NULL) == SL_MATCH_ALLOWED,
               "suggested line '%s' does not allow %s:%d", line, h->name, port);
    sl_allowlist_free(one);
}

static void parse_ports(const uint8_t *p, size_t n, sl_ports *out, int dflt)
{
    char *s = fuzz_strndup(p, n);
    char err[256];
    if (!sl_ports_parse(s, out, err, sizeof err)) {
        out->n = 1;
        out->v[0] = (uint16_t)dflt;
    } else {
        FUZZ_CHECK(out->n >= 1 && out->n <= 32, "%zu ports", out->n);
        for (size_t i = 0; i < out->n; i++) {
            FUZZ_CHECK(out->v[i] >= 1, "port 0 in list");
            for (size_t k = 0; k < i; k++)
                FUZZ_CHECK(out->v[i] != out->v[k], "duplicate port %u", out->v[i]);
            FUZZ_CHECK(sl_ports_has(out, out->v[i]), "sl_ports_has");
        }
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size;
    const uint8_t *nul = memchr(data, 0, size);
    const uint8_t *lend = nul ? nul : end;

    sl_allowlist *al = sl_allowlist_new();
    char err[512], text[SL_ENTRY_LINE_MAX + 1], again[SL_ENTRY_LINE_MAX + 1], shown[2200];
    int lineno = 0;
    for (const uint8_t *p = data; p < lend;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(lend - p));
        const uint8_t *le = nl ? nl : lend;
        size_t before = sl_allowlist_count(al);
        err[0] = '\0';
        bool ok = sl_allowlist_add_line(al, (const char *)p, (size_t)(le - p), "fuzz.txt", ++lineno,
                                        err, sizeof err);
        size_t after = sl_allowlist_count(al);
        FUZZ_CHECK(after == before || (ok && after == before + 1), "line %d: count %zu -> %zu (ok=%d)",
                   lineno, before, after, ok);
        FUZZ_CHECK(ok || err[0], "line %d refused without a message", lineno);
        if (after > before) {
            const sl_entry *e = sl_allowlist_entry(al, after - 1);
            FUZZ_CHECK(e->line == lineno && e->file && !strcmp(e->file, "fuzz.txt"), "provenance");
            FUZZ_CHECK(e->host.len == strlen(e->host.name) && e->host.len <= SL_HOST_MAX,
                       "host length");
            sl_entry_format(e, text, sizeof text);
            sl_allowlist *al2 = sl_allowlist_new();
            FUZZ_CHECK(sl_allowlist_add_line(al2, text, strlen(text), "again", 1, err, sizeof err),
                       "entry from '%s' prints as '%s', which does not parse: %s",
                       fuzz_show(p, (size_t)(le - p), shown, sizeof shown), text, err);
            FUZZ_CHECK(sl_allowlist_count(al2) == 1, "printed entry adds no entry");
            const sl_entry *e2 = sl_allowlist_entry(al2, 0);
            sl_entry_format(e2, again, sizeof again);
            FUZZ_CHECK(!strcmp(text, again) && e2->kind == e->kind && e2->port == e->port &&
                           e2->host.kind == e->host.kind,
                       "'%s' reads back as '%s'", text, again);
            sl_allowlist_free(al2);
        }
        if (!nl)
            break;
        p = nl + 1;
    }

    sl_ports cp, hp;
    const uint8_t *q = nul ? nul + 1 : end;
    const uint8_t *l1 = memchr(q, '\n', (size_t)(end - q));
    parse_ports(q, l1 ? (size_t)(l1 - q) : (size_t)(end - q), &cp, 443);
    q = l1 ? l1 + 1 : end;
    const uint8_t *l2 = memchr(q, '\n', (size_t)(end - q));
    if (q < end)
        parse_ports(q, l2 ? (size_t)(l2 - q) : (size_t)(end - q), &hp, 80);
    else
        hp.n = 1, hp.v[0] = 80;
    q = l2 ? l2 + 1 : end;

    /* Every entry allows what it names. */
    for (size_t i = 0; i < sl_allowlist_count(al); i++) {
        const sl_entry *e = sl_allowlist_entry(al, i);
        sl_host h = e->host;
        if (e->kind == SL_ENTRY_WILDCARD) {
            char sub[SL_HOST_MAX + 8];
            int n = snprintf(sub, sizeof sub, "a.%s", e->host.name);
            const char *why;
            if (n <= 0 || (size_t)n >= sizeof sub || !sl_host_parse(sub, (size_t)n, &h, &why))
                continue;
        }
        int port = e->port ? e->port : cp.v[0];
        const sl_entry *rule;
        sl_match_result r = sl_allowlist_match(al, &h, port, true, &cp, &hp, &rule);
        /* A plain entry may be shadowed by a rule: then the host is inspected. */
        FUZZ_CHECK(r == (sl_entry_is_rule(e) ? SL_MATCH_INSPECTED : SL_MATCH_ALLOWED) ||
                       (!sl_entry_is_rule(e) && r == SL_MATCH_INSPECTED),
                   "entry '%s' does not allow %s:%d (result %d)",
                   sl_entry_format(e, text, sizeof text), h.name, port, (int)r);
        check_query(al, &h, port, true, &cp, &hp);
        check_query(al, &h, port, false, &cp, &hp);
        check_query(al, &h, port == 65535 ? 1 : port + 1, true, &cp, &hp);
    }

    /* Queries. */
    for (int nq = 0; q < end && nq < 64; nq++) {
        const uint8_t *nl = memchr(q, '\n', (size_t)(end - q));
        const uint8_t *qe = nl ? nl : end;
        sl_host h;
        int port;
        const char *why;
        if (sl_authority_parse((const char *)q, (size_t)(qe - q), true, &h, &port, &why)) {
            check_query(al, &h, port, true, &cp, &hp);
            check_query(al, &h, port, false, &cp, &hp);
        }
        q = nl ? nl + 1 : end;
    }
    sl_allowlist_free(al);
    return 0;
}
