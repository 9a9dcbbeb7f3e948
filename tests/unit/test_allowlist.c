/* Allowlist lines, ports, matching, files, printing: table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allowlist.h"

static char errbuf[512];

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- Lines that parse ---- */

typedef struct good_line {
    const char *text;
    int added;             /* entries it adds: 0 or 1 */
    const char *formatted; /* sl_entry_format of the entry */
    sl_entry_kind kind;
    int port;
} good_line;

static const good_line good_lines[] = {
    /* the SPEC's examples, comments included */
    {"registry.npmjs.org          # this host, on connect_ports (CONNECT) and http_ports (HTTP)",
     1, "registry.npmjs.org", SL_ENTRY_EXACT, 0},
    {"*.githubusercontent.com     # any subdomain, not the apex", 1, "*.githubusercontent.com",
     SL_ENTRY_WILDCARD, 0},
    {".crates.io                  # the apex and any subdomain", 1, ".crates.io", SL_ENTRY_APEX, 0},
    {"example.com:8443            # this host, this port only", 1, "example.com:8443",
     SL_ENTRY_EXACT, 8443},
    {"203.0.113.7:443             # an IP literal; still subject to the non-public rule", 1,
     "203.0.113.7:443", SL_ENTRY_EXACT, 443},
    {"[2001:db8::7]:443           # an IPv6 literal, in brackets", 1, "[2001:db8::7]:443",
     SL_ENTRY_EXACT, 443},
    /* blank and comment lines */
    {"", 0, NULL, 0, 0},
    {"   ", 0, NULL, 0, 0},
    {"\t \r", 0, NULL, 0, 0},
    {"# a comment", 0, NULL, 0, 0},
    {"   # indented comment *.com", 0, NULL, 0, 0},
    {"#example.org", 0, NULL, 0, 0},
    /* whitespace, comments glued on, case, trailing dot */
    {"  example.org  ", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"\texample.org\t", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"example.org\r", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"example.org#comment", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"example.org\t# a comment\twith tokens", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"example.org:443#c", 1, "example.org:443", SL_ENTRY_EXACT, 443},
    {"Example.ORG.", 1, "example.org", SL_ENTRY_EXACT, 0},
    {"Example.ORG.:8080", 1, "example.org:8080", SL_ENTRY_EXACT, 8080},
    {"*.Example.Co.UK", 1, "*.example.co.uk", SL_ENTRY_WILDCARD, 0},
    {"*.example.co.uk", 1, "*.example.co.uk", SL_ENTRY_WILDCARD, 0},
    {".example.co.uk:8443", 1, ".example.co.uk:8443", SL_ENTRY_APEX, 8443},
    {"*.example.org:8443", 1, "*.example.org:8443", SL_ENTRY_WILDCARD, 8443},
    {"*.user.github.io", 1, "*.user.github.io", SL_ENTRY_WILDCARD, 0},
    /* Only the PSL's ICANN section counts (see PSL_CHECK_TYPE in
     * allowlist.c): the private section holds githubusercontent.com, and the
     * SPEC's example line above must load. github.io sits beside it. */
    {"*.github.io", 1, "*.github.io", SL_ENTRY_WILDCARD, 0},
    {".herokuapp.com", 1, ".herokuapp.com", SL_ENTRY_APEX, 0},
    {"*.www.ck", 1, "*.www.ck", SL_ENTRY_WILDCARD, 0},
    {"_acme.example.org", 1, "_acme.example.org", SL_ENTRY_EXACT, 0},
    {"203.0.113.7", 1, "203.0.113.7", SL_ENTRY_EXACT, 0},
    {"[2001:DB8:0::7]", 1, "[2001:db8::7]", SL_ENTRY_EXACT, 0},
    {"[::1]:65535", 1, "[::1]:65535", SL_ENTRY_EXACT, 65535},
    {"example.org:1", 1, "example.org:1", SL_ENTRY_EXACT, 1},
    /* Unicode entries become xn-- */
    {"b\xc3\xbc" "cher.example", 1, "xn--bcher-kva.example", SL_ENTRY_EXACT, 0},
    {"*.b\xc3\xbc" "cher.example:8443", 1, "*.xn--bcher-kva.example:8443", SL_ENTRY_WILDCARD, 8443},
    {".B\xc3\x9c" "CHER.example  # unicode apex", 1, ".xn--bcher-kva.example", SL_ENTRY_APEX, 0},
};

static void test_good_lines(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof good_lines / sizeof good_lines[0]; i++) {
        const good_line *g = &good_lines[i];
        sl_allowlist *al = sl_allowlist_new();
        assert_non_null(al);
        errbuf[0] = '\0';
        if (!sl_allowlist_add_line(al, g->text, strlen(g->text), "t.txt", 7, errbuf,
                                   sizeof errbuf)) {
            print_error("line '%s' refused: %s\n", g->text, errbuf);
            bad++;
        } else if ((int)sl_allowlist_count(al) != g->added) {
            print_error("line '%s' added %zu entries, expected %d\n", g->text,
                        sl_allowlist_count(al), g->added);
            bad++;
        } else if (g->added) {
            const sl_entry *e = sl_allowlist_entry(al, 0);
            char buf[300];
            sl_entry_format(e, buf, sizeof buf);
            if (strcmp(buf, g->formatted) != 0 || e->kind != g->kind || e->port != g->port ||
                e->line != 7 || strcmp(e->file, "t.txt") != 0) {
                print_error("line '%s' gave '%s' kind %d port %d, expected '%s' kind %d port %d\n",
                            g->text, buf, (int)e->kind, e->port, g->formatted, (int)g->kind,
                            g->port);
                bad++;
            }
            /* The printed form is itself a valid line meaning the same. */
            sl_allowlist *al2 = sl_allowlist_new();
            char buf2[300];
            if (!sl_allowlist_add_line(al2, buf, strlen(buf), "x", 1, errbuf, sizeof errbuf) ||
                strcmp(sl_entry_format(sl_allowlist_entry(al2, 0), buf2, sizeof buf2), buf) != 0) {
                print_error("formatted '%s' does not round-trip\n", buf);
                bad++;
            }
            sl_allowlist_free(al2);
        }
        sl_allowlist_free(al);
    }
    assert_int_equal(bad, 0);
}

/* ---- Lines that do not ---- */

typedef struct bad_line {
    const char *text;
    size_t len;            /* 0: strlen */
    const char *why;       /* substring of the message */
} bad_line;

static const bad_line bad_lines[] = {
    {"*.com", 0, "*.com covers the whole public suffix com"},
    {".com", 0, ".com covers the whole public suffix com"},
    {".co.uk", 0, ".co.uk covers the whole public suffix co.uk"},
    {"*.co.uk", 0, "*.co.uk covers the whole public suffix co.uk"},
    {"*.internal", 0, "covers the whole public suffix internal"},
    {".localhost", 0, "covers the whole public suffix localhost"},
    {"*.uk", 0, "public suffix uk"},
    {"*.ck", 0, "public suffix ck"},
    {"*.foo.ck", 0, "public suffix foo.ck"},
    {"*.COM.", 0, "public suffix com"},
    {"*.xn--fiqs8s", 0, "public suffix"},
    {"*.\xe4\xb8\xad\xe5\x9b\xbd", 0, "public suffix"},
    {"*.1.2.3.4", 0, "not an IP literal"},
    {".203.0.113.7", 0, "not an IP literal"},
    {"*.203.0.113.7:443", 0, "not an IP literal"},
    {"*.[2001:db8::7]", 0, "not an IP literal"},
    {".[::1]:443", 0, "not an IP literal"},
    {"example.org other.org", 0, "unexpected text"},
    {"example.org 443", 0, "unexpected text"},
    {"*", 0, "'*'"},
    {"*example.org", 0, "'*'"},
    {"**.example.org", 0, "'*'"},
    {"*.*.example.org", 0, "'*'"},
    {"foo.*.example.org", 0, "'*'"},
    {"example.*", 0, "'*'"},
    {"*.", 0, "missing host"},
    {".", 0, "missing host"},
    {":443", 0, "missing host"},
    {"..example.org", 0, "empty label"},
    {"*..example.org", 0, "empty label"},
    {"example..org", 0, "empty label"},
    {"example.org:", 0, "empty port"},
    {"example.org:0", 0, "bad port"},
    {"example.org:65536", 0, "bad port"},
    {"example.org:080", 0, "bad port"},
    {"example.org:+80", 0, "bad port"},
    {"example.org:443:1", 0, "bad port"},
    {"http://example.org", 0, "a URL is not an entry"},
    {"127.1", 0, "ambiguous numeric"},
    {"0x7f.0.0.1:443", 0, "ambiguous numeric"},
    {"2130706433", 0, "ambiguous numeric"},
    {"2001:db8::7", 0, "brackets"},
    {"2001:db8::7:443", 0, "brackets"},
    {"[fe80::1%eth0]", 0, "zone id"},
    {"[::1", 0, "unbalanced"},
    {"[::1]x", 0, "unexpected text after IPv6"},
    {"[127.0.0.1]", 0, "only for IPv6"},
    {"user@example.org", 0, "'@'"},
    {"ex%41mple.org", 0, "percent"},
    {"-example.org", 0, "'-'"},
    {"example.org/path", 0, "a path needs a method list in front"},
    {"\xff\xfe.example", 0, "UTF-8"},
    {"exa\0mple.org", 12, "NUL"},
};

static void test_bad_lines(void **state)
{
    (void)state;
    int bad = 0;
    sl_allowlist *al = sl_allowlist_new();
    for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
        const bad_line *b = &bad_lines[i];
        size_t len = b->len ? b->len : strlen(b->text);
        errbuf[0] = '\0';
        if (sl_allowlist_add_line(al, b->text, len, "t.txt", 3, errbuf, sizeof errbuf)) {
            print_error("line '%s' accepted\n", b->text);
            bad++;
        } else if (!strstr(errbuf, b->why)) {
            print_error("line '%s': message '%s' lacks '%s'\n", b->text, errbuf, b->why);
            bad++;
        } else if (strstr(errbuf, "t.txt")) {
            print_error("line '%s': message '%s' carries FILE:LINE\n", b->text, errbuf);
            bad++;
        }
    }
    assert_int_equal(sl_allowlist_count(al), 0);
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

static void test_line_length(void **state)
{
    (void)state;
    sl_allowlist *al = sl_allowlist_new();
    static char line[SL_ENTRY_LINE_MAX + 100];
    /* SL_ENTRY_LINE_MAX bytes: a short entry and a long comment is fine */
    memset(line, ' ', sizeof line);
    memcpy(line, "example.org #", 13);
    assert_true(sl_allowlist_add_line(al, line, SL_ENTRY_LINE_MAX, "f", 1, errbuf, sizeof errbuf));
    assert_false(sl_allowlist_add_line(al, line, SL_ENTRY_LINE_MAX + 1, "f", 2, errbuf, sizeof errbuf));
    assert_non_null(strstr(errbuf, "longer than 16384"));
    /* a rule may carry SL_ENTRY_FIELDS_MAX - 2 digests, not more */
    size_t n = (size_t)snprintf(line, sizeof line, "GET example.org/a.tgz");
    static const char zeros[] = " sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";   /* 32 zero bytes */
    for (int i = 0; i < SL_ENTRY_FIELDS_MAX - 2; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s", zeros);
    assert_true(sl_allowlist_add_line(al, line, n, "f", 3, errbuf, sizeof errbuf));
    assert_int_equal(sl_allowlist_entry(al, 1)->ndigests, SL_ENTRY_FIELDS_MAX - 2);
    n += (size_t)snprintf(line + n, sizeof line - n, "%s", zeros);
    assert_false(sl_allowlist_add_line(al, line, n, "f", 4, errbuf, sizeof errbuf));
    assert_non_null(strstr(errbuf, "more than 256 fields"));
    assert_int_equal(sl_allowlist_count(al), 2);
    sl_allowlist_free(al);
}

/* ---- Ports ---- */

typedef struct ports_case {
    const char *in;
    bool ok;
    size_t n;
    uint16_t v[4];
} ports_case;

static const ports_case ports_cases[] = {
    {"443", true, 1, {443}},
    {"443, 8443", true, 2, {443, 8443}},
    {"80 8080", true, 2, {80, 8080}},
    {"80,8080", true, 2, {80, 8080}},
    {"  443  ", true, 1, {443}},
    {"443 ,8443", true, 2, {443, 8443}},
    {"443 , 8443 9443", true, 3, {443, 8443, 9443}},
    {"443,443", true, 1, {443}},
    {"443 8443 443", true, 2, {443, 8443}},
    {"1, 65535", true, 2, {1, 65535}},
    {"", false, 0, {0}},
    {"   ", false, 0, {0}},
    {"0", false, 0, {0}},
    {"65536", false, 0, {0}},
    {"080", false, 0, {0}},
    {"+443", false, 0, {0}},
    {"-1", false, 0, {0}},
    {"443,", false, 0, {0}},
    {",443", false, 0, {0}},
    {"443,,80", false, 0, {0}},
    {"443;80", false, 0, {0}},
    {"https", false, 0, {0}},
    {"443x", false, 0, {0}},
    {"4430000", false, 0, {0}},
};

static void test_ports(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof ports_cases / sizeof ports_cases[0]; i++) {
        const ports_case *c = &ports_cases[i];
        sl_ports p;
        errbuf[0] = '\0';
        bool ok = sl_ports_parse(c->in, &p, errbuf, sizeof errbuf);
        if (ok != c->ok) {
            print_error("ports '%s': expected %s (%s)\n", c->in, c->ok ? "ok" : "error", errbuf);
            bad++;
            continue;
        }
        if (!ok) {
            if (errbuf[0] == '\0') {
                print_error("ports '%s': no message\n", c->in);
                bad++;
            }
            continue;
        }
        if (p.n != c->n || memcmp(p.v, c->v, c->n * sizeof p.v[0]) != 0) {
            print_error("ports '%s': wrong set (n=%zu)\n", c->in, p.n);
            bad++;
        }
    }
    assert_int_equal(bad, 0);

    /* at most 32 distinct; duplicates do not count */
    char s[512] = "";
    for (int i = 1; i <= 32; i++)
        snprintf(s + strlen(s), sizeof s - strlen(s), "%d,%d ", 1000 + i, 1000 + i);
    sl_ports p;
    assert_true(sl_ports_parse(s, &p, errbuf, sizeof errbuf));
    assert_int_equal(p.n, 32);
    assert_true(sl_ports_has(&p, 1032));
    assert_false(sl_ports_has(&p, 1033));
    snprintf(s + strlen(s), sizeof s - strlen(s), "2000");
    assert_false(sl_ports_parse(s, &p, errbuf, sizeof errbuf));
    assert_non_null(strstr(errbuf, "too many"));
    assert_false(sl_ports_has(NULL, 443));
}

/* ---- Matching ---- */

static const char *const match_list[] = {
    "registry.npmjs.org",          /* 1 */
    "*.githubusercontent.com",     /* 2 */
    ".crates.io",                  /* 3 */
    "example.com:8443",            /* 4 */
    "203.0.113.7:443",             /* 5 */
    "[2001:db8::7]:443",           /* 6 */
    "plain.example",               /* 7 */
    "*.wild.example",              /* 8 */
    ".apex.example",               /* 9 */
    "special.apex.example:8080",   /* 10 */
    "*.deep.apex.example",         /* 11 */
    ".apex.example:9000",          /* 12 */
    "198.51.100.1",                /* 13 */
    "[2001:db8::1]",               /* 14 */
    "plain.example",               /* 15: a duplicate, never the rule */
    "exact.apex.example",          /* 16 */
    "*.ports.example:8443",        /* 17 */
    ".ports.example",              /* 18 */
    "*.eq.example",                /* 19 */
    ".eq.example",                 /* 20: same suffix as 19, later */
    "# a comment line",            /* 21 */
    "B\xc3\x9c" "CHER.example",    /* 22 */
};

typedef struct match_case {
    const char *host;      /* request authority host, parsed with sl_host_parse */
    int port;
    bool connect;
    sl_match_result want;
    int line;              /* the rule's line when allowed */
} match_case;

#define C true
#define H false
#define A SL_MATCH_ALLOWED
#define NO SL_MATCH_NO_ENTRY
#define PNA SL_MATCH_PORT_NOT_ALLOWED

static const match_case match_cases[] = {
    /* bare exact entry: connect_ports for CONNECT, http_ports for HTTP */
    {"registry.npmjs.org", 443, C, A, 1},
    {"registry.npmjs.org", 80, H, A, 1},
    {"registry.npmjs.org", 80, C, PNA, 0},
    {"registry.npmjs.org", 443, H, PNA, 0},
    {"registry.npmjs.org", 8443, C, PNA, 0},
    {"Registry.NPMJS.org.", 443, C, A, 1},
    {"npmjs.org", 443, C, NO, 0},
    {"x.registry.npmjs.org", 443, C, NO, 0},
    {"registry.npmjs.org.evil", 443, C, NO, 0},
    /* wildcard: subdomains only */
    {"githubusercontent.com", 443, C, NO, 0},
    {"raw.githubusercontent.com", 443, C, A, 2},
    {"a.b.githubusercontent.com", 443, C, A, 2},
    {"RAW.GitHubUserContent.com.", 80, H, A, 2},
    {"xgithubusercontent.com", 443, C, NO, 0},
    {"raw.githubusercontent.com", 22, C, PNA, 0},
    /* apex: apex and subdomains */
    {"crates.io", 443, C, A, 3},
    {"static.crates.io", 443, C, A, 3},
    {"a.b.c.crates.io", 80, H, A, 3},
    {"notcrates.io", 443, C, NO, 0},
    {"io", 443, C, NO, 0},
    /* explicit port: that port, for both kinds of request */
    {"example.com", 8443, C, A, 4},
    {"example.com", 8443, H, A, 4},
    {"example.com", 443, C, PNA, 0},
    {"example.com", 80, H, PNA, 0},
    {"www.example.com", 8443, C, NO, 0},
    /* IP literals: exact address entries only */
    {"203.0.113.7", 443, C, A, 5},
    {"203.0.113.7", 443, H, A, 5},
    {"203.0.113.7", 80, H, PNA, 0},
    {"203.0.113.8", 443, C, NO, 0},
    {"[2001:db8::7]", 443, C, A, 6},
    {"[2001:DB8:0:0::7]", 443, C, A, 6},
    {"[2001:db8::7]", 8443, C, PNA, 0},
    {"[::ffff:203.0.113.7]", 443, C, NO, 0},
    {"[2001:db8::8]", 443, C, NO, 0},
    {"198.51.100.1", 443, C, A, 13},
    {"198.51.100.1", 80, H, A, 13},
    {"198.51.100.1", 8080, H, PNA, 0},
    {"[2001:db8::1]", 443, C, A, 14},
    /* duplicates: the earliest */
    {"plain.example", 443, C, A, 7},
    {"wild.example", 443, C, NO, 0},
    {"x.wild.example", 443, C, A, 8},
    /* most specific rule that allows the port */
    {"apex.example", 443, C, A, 9},
    {"apex.example", 9000, C, A, 12},
    {"x.apex.example", 9000, H, A, 12},
    {"apex.example", 22, C, PNA, 0},
    {"special.apex.example", 8080, C, A, 10},
    {"special.apex.example", 8080, H, A, 10},
    {"special.apex.example", 443, C, A, 9},
    {"x.special.apex.example", 8080, C, PNA, 0},
    {"x.deep.apex.example", 443, C, A, 11},
    {"deep.apex.example", 443, C, A, 9},
    {"exact.apex.example", 443, C, A, 16},
    {"exact.apex.example", 9000, C, A, 12},
    {"x.ports.example", 8443, C, A, 17},
    {"x.ports.example", 8443, H, A, 17},
    {"x.ports.example", 443, C, A, 18},
    {"ports.example", 443, C, A, 18},
    {"ports.example", 8443, C, PNA, 0},
    {"x.ports.example", 8080, C, PNA, 0},
    {"x.eq.example", 443, C, A, 19},
    {"eq.example", 443, C, A, 20},
    {"xn--bcher-kva.example", 443, C, A, 22},
    {"unrelated.example", 443, C, NO, 0},
    {"example", 443, C, NO, 0},
};

static sl_allowlist *load_lines(const char *const *lines, size_t n)
{
    sl_allowlist *al = sl_allowlist_new();
    assert_non_null(al);
    for (size_t i = 0; i < n; i++) {
        if (!sl_allowlist_add_line(al, lines[i], strlen(lines[i]), "match.txt", (int)i + 1,
                                   errbuf, sizeof errbuf))
            fail_msg("line %zu '%s': %s", i + 1, lines[i], errbuf);
    }
    return al;
}

static void parse_ports(const char *s, sl_ports *p)
{
    if (!sl_ports_parse(s, p, errbuf, sizeof errbuf))
        fail_msg("ports '%s': %s", s, errbuf);
}

static void test_match(void **state)
{
    (void)state;
    sl_allowlist *al = load_lines(match_list, sizeof match_list / sizeof match_list[0]);
    assert_int_equal(sl_allowlist_count(al), 21);
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    int bad = 0;
    for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++) {
        const match_case *c = &match_cases[i];
        sl_host h;
        const char *err;
        if (!sl_host_parse(c->host, strlen(c->host), &h, &err))
            fail_msg("host '%s': %s", c->host, err);
        const sl_entry *rule = (const sl_entry *)1;
        sl_match_result r = sl_allowlist_match(al, &h, c->port, c->connect, &cp, &hp, &rule);
        int line = rule ? rule->line : 0;
        if (r != c->want || line != c->line) {
            print_error("%s %s:%d: got result %d line %d, expected %d line %d\n",
                        c->connect ? "CONNECT" : "HTTP", c->host, c->port, (int)r, line,
                        (int)c->want, c->line);
            bad++;
        }
    }
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

static void test_match_no_ports(void **state)
{
    (void)state;
    /* NULL default port sets: bare entries allow nothing, explicit ones still work */
    static const char *const lines[] = {"example.org", "example.net:443"};
    sl_allowlist *al = load_lines(lines, 2);
    sl_host h;
    const char *err;
    const sl_entry *rule;
    assert_true(sl_host_parse("example.org", 11, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, NULL, NULL, &rule), PNA);
    assert_null(rule);
    assert_true(sl_host_parse("example.net", 11, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, NULL, NULL, &rule), A);
    assert_int_equal(rule->line, 2);
    assert_int_equal(sl_allowlist_match(al, &h, 443, false, NULL, NULL, NULL), A);
    sl_allowlist_free(al);
}

static void test_match_empty_list(void **state)
{
    (void)state;
    sl_allowlist *al = sl_allowlist_new();
    sl_ports cp;
    parse_ports("443", &cp);
    sl_host h;
    const char *err;
    const sl_entry *rule;
    assert_true(sl_host_parse("example.org", 11, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, &cp, &cp, &rule), NO);
    assert_null(rule);
    assert_true(sl_host_parse("[::1]", 5, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, &cp, &cp, &rule), NO);
    assert_int_equal(sl_allowlist_count(al), 0);
    assert_null(sl_allowlist_entry(al, 0));
    sl_allowlist_free(al);
}

/* 5,000 entries of every kind: each still matches its own line and nothing
 * near it. */
#define BIG 5000

static void test_match_big(void **state)
{
    (void)state;
    sl_allowlist *al = sl_allowlist_new();
    char line[128];
    for (int i = 0; i < BIG; i++) {
        switch (i % 5) {
        case 0: snprintf(line, sizeof line, "host%d.example.net", i); break;
        case 1: snprintf(line, sizeof line, "*.w%d.example.net", i); break;
        case 2: snprintf(line, sizeof line, ".a%d.example.net", i); break;
        case 3: snprintf(line, sizeof line, "p%d.example.net:%d", i, 1024 + i); break;
        default: snprintf(line, sizeof line, "10.%d.%d.1", i / 256, i % 256); break;
        }
        if (!sl_allowlist_add_line(al, line, strlen(line), "big.txt", i + 1, errbuf, sizeof errbuf))
            fail_msg("%s: %s", line, errbuf);
    }
    assert_int_equal(sl_allowlist_count(al), BIG);
    /* All share one interned file name. */
    assert_ptr_equal(sl_allowlist_entry(al, 0)->file, sl_allowlist_entry(al, BIG - 1)->file);

    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    int bad = 0;
    for (int i = 0; i < BIG; i++) {
        char yes[128], no[128];
        int port = 443;
        switch (i % 5) {
        case 0:
            snprintf(yes, sizeof yes, "host%d.example.net", i);
            snprintf(no, sizeof no, "x.host%d.example.net", i);
            break;
        case 1:
            snprintf(yes, sizeof yes, "x.y.w%d.example.net", i);
            snprintf(no, sizeof no, "w%d.example.net", i);
            break;
        case 2:
            snprintf(yes, sizeof yes, "a%d.example.net", i);
            snprintf(no, sizeof no, "a%dx.example.net", i);
            break;
        case 3:
            port = 1024 + i;
            snprintf(yes, sizeof yes, "p%d.example.net", i);
            snprintf(no, sizeof no, "p%d.example.org", i);
            break;
        default:
            snprintf(yes, sizeof yes, "10.%d.%d.1", i / 256, i % 256);
            snprintf(no, sizeof no, "10.%d.%d.2", i / 256, i % 256);
            break;
        }
        sl_host h;
        const char *err;
        const sl_entry *rule;
        assert_true(sl_host_parse(yes, strlen(yes), &h, &err));
        if (sl_allowlist_match(al, &h, port, true, &cp, &hp, &rule) != A || rule->line != i + 1) {
            print_error("big: %s:%d not matched by line %d\n", yes, port, i + 1);
            bad++;
        }
        assert_true(sl_host_parse(no, strlen(no), &h, &err));
        if (sl_allowlist_match(al, &h, port, true, &cp, &hp, &rule) != NO) {
            print_error("big: %s:%d matched\n", no, port);
            bad++;
        }
    }
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

/* ---- Files ---- */

typedef struct reports {
    char msg[16][600];
    int n;
} reports;

static void collect(void *ctx, const char *msg)
{
    reports *r = ctx;
    if (r->n < 16)
        snprintf(r->msg[r->n], sizeof r->msg[0], "%s", msg);
    r->n++;
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/sluice-test-allowlist-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("\xef\xbb\xbf# allowlist with good and bad lines\n" /* 1 */
          "registry.npmjs.org\n"                                /* 2 */
          "\n"                                                   /* 3 */
          "*.com\n"                                              /* 4 bad */
          "  .crates.io   # apex\r\n"                            /* 5 */
          "127.1\n"                                              /* 6 bad */
          "example.org extra\n"                                  /* 7 bad */
          "[2001:db8::7]:443\n",                                 /* 8 */
          f);
    for (int i = 0; i < SL_ENTRY_LINE_MAX + 100; i++)            /* 9 bad: too long */
        fputc(i < 11 ? "example.org"[i] : ' ', f);
    fputs("\n*.example.co.uk:8443\n"                             /* 10 */
          "example.org:0",                                       /* 11 bad, no final newline */
          f);
    assert_int_equal(fclose(f), 0);

    sl_allowlist *al = sl_allowlist_new();
    reports r = {0};
    int errors = sl_allowlist_load_file(al, path, collect, &r);
    assert_int_equal(errors, 5);
    assert_int_equal(r.n, 5);
    const int bad_lines_at[] = {4, 6, 7, 9, 11};
    const char *bad_why[] = {"public suffix com", "ambiguous numeric", "unexpected text",
                             "longer than 16384", "bad port"};
    for (int i = 0; i < 5; i++) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, bad_lines_at[i]);
        if (strncmp(r.msg[i], prefix, strlen(prefix)) != 0 || !strstr(r.msg[i], bad_why[i]))
            fail_msg("report %d is '%s', expected prefix '%s' and '%s'", i, r.msg[i], prefix,
                     bad_why[i]);
    }
    assert_int_equal(sl_allowlist_count(al), 4);
    const int good_at[] = {2, 5, 8, 10};
    const char *good_text[] = {"registry.npmjs.org", ".crates.io", "[2001:db8::7]:443",
                               "*.example.co.uk:8443"};
    for (size_t i = 0; i < 4; i++) {
        const sl_entry *e = sl_allowlist_entry(al, i);
        char buf[300];
        assert_string_equal(sl_entry_format(e, buf, sizeof buf), good_text[i]);
        assert_int_equal(e->line, good_at[i]);
        assert_string_equal(e->file, path);
        assert_ptr_not_equal(e->file, path);
    }
    assert_ptr_equal(sl_allowlist_entry(al, 0)->file, sl_allowlist_entry(al, 3)->file);

    /* Unreadable files: one report, no FILE:LINE, nothing added. */
    unlink(path);
    r.n = 0;
    assert_int_equal(sl_allowlist_load_file(al, path, collect, &r), -1);
    assert_int_equal(r.n, 1);
    char want[128];
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", path);
    assert_string_equal(r.msg[0], want);

    r.n = 0;
    assert_int_equal(sl_allowlist_load_file(al, "/tmp", collect, &r), -1);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.msg[0], "/tmp: cannot read: Is a directory");
    assert_int_equal(sl_allowlist_count(al), 4);
    sl_allowlist_free(al);
}

static void test_file_interned(void **state)
{
    (void)state;
    sl_allowlist *al = sl_allowlist_new();
    char name[32];
    snprintf(name, sizeof name, "--allow");
    assert_true(sl_allowlist_add_line(al, "a.example", 9, name, 0, errbuf, sizeof errbuf));
    snprintf(name, sizeof name, "other.txt");
    assert_true(sl_allowlist_add_line(al, "b.example", 9, name, 4, errbuf, sizeof errbuf));
    snprintf(name, sizeof name, "--allow");
    assert_true(sl_allowlist_add_line(al, "c.example", 9, name, 0, errbuf, sizeof errbuf));
    snprintf(name, sizeof name, "scribbled");
    assert_string_equal(sl_allowlist_entry(al, 0)->file, "--allow");
    assert_string_equal(sl_allowlist_entry(al, 1)->file, "other.txt");
    assert_ptr_equal(sl_allowlist_entry(al, 0)->file, sl_allowlist_entry(al, 2)->file);
    assert_int_equal(sl_allowlist_entry(al, 0)->line, 0);
    sl_allowlist_free(al);
}

/* ---- Suggestions ---- */

typedef struct suggest_case {
    const char *host;
    int port;
    bool connect;
    const char *want;
} suggest_case;

static const suggest_case suggest_cases[] = {
    {"example.org", 443, C, "example.org"},
    {"example.org", 8443, C, "example.org"},
    {"example.org", 80, C, "example.org:80"},
    {"example.org", 80, H, "example.org"},
    {"example.org", 443, H, "example.org:443"},
    {"Example.ORG.", 9000, H, "example.org:9000"},
    /* public literals (not the documentation blocks, which are not) */
    {"11.0.0.9", 443, C, "11.0.0.9"},
    {"11.0.0.9", 22, C, "11.0.0.9:22"},
    {"[2c0f:fff0::1]", 443, C, "[2c0f:fff0::1]"},
    {"[2c0f:fff0::1]", 8080, H, "[2c0f:fff0::1]:8080"},
};

/* IP literals the gate refuses whatever the allowlist says: no line. */
static const char *const no_line_hosts[] = {
    "169.254.169.254",      /* cloud metadata */
    "[fd00:ec2::254]",      /* AWS metadata over IPv6 */
    "168.63.129.16",        /* Azure */
    "10.0.0.1",
    "192.168.1.1",
    "127.0.0.1",
    "0.0.0.0",
    "100.64.0.1",           /* shared address space */
    "203.0.113.7",          /* documentation */
    "224.0.0.1",            /* multicast */
    "255.255.255.255",
    "[::1]",
    "[fe80::1]",
    "[fc00::1]",
    "[2001:db8::7]",        /* documentation */
    "[::ffff:10.0.0.1]",    /* IPv4-mapped */
    "[64:ff9b::a9fe:a9fe]", /* NAT64 of 169.254.169.254 */
    "[2002:a00:1::]",       /* 6to4 of 10.0.0.1 */
};

static void test_suggest(void **state)
{
    (void)state;
    sl_ports cp, hp;
    parse_ports("443, 8443", &cp);
    parse_ports("80", &hp);
    int bad = 0;
    for (size_t i = 0; i < sizeof suggest_cases / sizeof suggest_cases[0]; i++) {
        const suggest_case *c = &suggest_cases[i];
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(c->host, strlen(c->host), &h, &err));
        char buf[300];
        bool ok = sl_allowlist_suggest(&h, c->port, c->connect, &cp, &hp, buf, sizeof buf);
        if (!ok || strcmp(buf, c->want) != 0) {
            print_error("suggest %s:%d: '%s', expected '%s'\n", c->host, c->port, buf, c->want);
            bad++;
            continue;
        }
        /* The suggestion, added to a list, allows exactly that request. */
        sl_allowlist *al = sl_allowlist_new();
        const sl_entry *rule;
        assert_true(sl_allowlist_add_line(al, buf, strlen(buf), "s", 1, errbuf, sizeof errbuf));
        if (sl_allowlist_match(al, &h, c->port, c->connect, &cp, &hp, &rule) != A) {
            print_error("suggest %s:%d: '%s' does not allow it\n", c->host, c->port, buf);
            bad++;
        }
        sl_allowlist_free(al);
    }
    for (size_t i = 0; i < sizeof no_line_hosts / sizeof no_line_hosts[0]; i++) {
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(no_line_hosts[i], strlen(no_line_hosts[i]), &h, &err));
        for (int k = 0; k < 2; k++) {
            char buf[300] = "stale";
            if (sl_allowlist_suggest(&h, k ? 443 : 8080, k == 1, &cp, &hp, buf, sizeof buf) ||
                buf[0] != '\0') {
                print_error("suggest %s: a line '%s' for a non-public address\n", no_line_hosts[i],
                            buf);
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
}

static void test_format_long(void **state)
{
    (void)state;
    /* The longest entry fits the documented 270 bytes. */
    char line[300];
    char label[64];
    memset(label, 'a', 63);
    label[63] = '\0';
    snprintf(line, sizeof line, "*.%s.%s.%s.%.59s:65535", label, label, label, label);
    sl_allowlist *al = sl_allowlist_new();
    assert_true(sl_allowlist_add_line(al, line, strlen(line), "f", 1, errbuf, sizeof errbuf));
    char buf[270];
    assert_string_equal(sl_entry_format(sl_allowlist_entry(al, 0), buf, sizeof buf), line);
    sl_allowlist_free(al);
}


/* ---- Request rules: lines ---- */

#define D256 "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
#define D512 "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="

typedef struct rule_line {
    const char *text;
    const char *formatted;
    const char *methods, *path;
    size_t ndigests;
    sl_entry_kind kind;
    int port;
} rule_line;

static const rule_line rule_lines[] = {
    /* the SPEC's examples, comments included */
    {"GET,HEAD registry.npmjs.org/*                    # reads only: npm publish (PUT) is refused",
     "GET,HEAD registry.npmjs.org/*", "GET,HEAD", "/*", 0, SL_ENTRY_EXACT, 0},
    {"GET api.github.com/repos/acme/*                  # one organisation, read-only",
     "GET api.github.com/repos/acme/*", "GET", "/repos/acme/*", 0, SL_ENTRY_EXACT, 0},
    {"* uploads.example.com/incoming/*                 # any method, under one path",
     "* uploads.example.com/incoming/*", "*", "/incoming/*", 0, SL_ENTRY_EXACT, 0},
    {"GET registry.npmjs.org/is-number/-/is-number-7.0.0.tgz " D512 "   # one artifact, pinned",
     "GET registry.npmjs.org/is-number/-/is-number-7.0.0.tgz " D512, "GET",
     "/is-number/-/is-number-7.0.0.tgz", 1, SL_ENTRY_EXACT, 0},
    /* host forms and ports */
    {"GET *.Example.ORG:8443/a", "GET *.example.org:8443/a", "GET", "/a", 0, SL_ENTRY_WILDCARD, 8443},
    {"GET .example.org/", "GET .example.org/", "GET", "/", 0, SL_ENTRY_APEX, 0},
    {"PUT 203.0.113.7:443/up/*", "PUT 203.0.113.7:443/up/*", "PUT", "/up/*", 0, SL_ENTRY_EXACT, 443},
    {"GET [2001:DB8::7]/x", "GET [2001:db8::7]/x", "GET", "/x", 0, SL_ENTRY_EXACT, 0},
    {"GET b\xc3\xbc" "cher.example/*", "GET xn--bcher-kva.example/*", "GET", "/*", 0, SL_ENTRY_EXACT, 0},
    /* whitespace, several digests, escapes kept as written */
    {"\tGET \t x.example/a%2Bb   " D256 "  " D512 " ", "GET x.example/a%2Bb " D256 " " D512, "GET",
     "/a%2Bb", 2, SL_ENTRY_EXACT, 0},
    {"DELETE,PATCH x.example/*.json", "DELETE,PATCH x.example/*.json", "DELETE,PATCH", "/*.json", 0,
     SL_ENTRY_EXACT, 0},
    {"GET x.example/a/b/ # trailing slash", "GET x.example/a/b/", "GET", "/a/b/", 0, SL_ENTRY_EXACT, 0},
};

static void test_rule_lines(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof rule_lines / sizeof rule_lines[0]; i++) {
        const rule_line *g = &rule_lines[i];
        sl_allowlist *al = sl_allowlist_new();
        if (!sl_allowlist_add_line(al, g->text, strlen(g->text), "r.txt", 4, errbuf, sizeof errbuf)) {
            print_error("rule '%s' refused: %s\n", g->text, errbuf);
            bad++;
            sl_allowlist_free(al);
            continue;
        }
        assert_int_equal(sl_allowlist_count(al), 1);
        const sl_entry *e = sl_allowlist_entry(al, 0);
        char buf[SL_ENTRY_LINE_MAX + 1], buf2[SL_ENTRY_LINE_MAX + 1];
        sl_entry_format(e, buf, sizeof buf);
        if (!sl_entry_is_rule(e) || strcmp(buf, g->formatted) || strcmp(e->methods, g->methods) ||
            strcmp(e->path, g->path) || e->ndigests != g->ndigests || e->kind != g->kind ||
            e->port != g->port || e->line != 4) {
            print_error("rule '%s' gave '%s' (methods '%s' path '%s' %zu digests kind %d port %d)\n",
                        g->text, buf, e->methods, e->path, e->ndigests, (int)e->kind, e->port);
            bad++;
        }
        if (g->ndigests && strcmp(e->digests[g->ndigests - 1], g->ndigests == 1 ? D512 : D512)) {
            print_error("rule '%s': digest '%s'\n", g->text, e->digests[g->ndigests - 1]);
            bad++;
        }
        /* The printed line reads back as the same rule. */
        sl_allowlist *al2 = sl_allowlist_new();
        if (!sl_allowlist_add_line(al2, buf, strlen(buf), "x", 1, errbuf, sizeof errbuf) ||
            strcmp(sl_entry_format(sl_allowlist_entry(al2, 0), buf2, sizeof buf2), buf) != 0) {
            print_error("formatted '%s' does not round-trip\n", buf);
            bad++;
        }
        sl_allowlist_free(al2);
        sl_allowlist_free(al);
    }
    assert_int_equal(bad, 0);
}

static const bad_line bad_rules[] = {
    /* methods */
    {"get example.org/x", 0, "lower-case method"},
    {"GET,head example.org/x", 0, "lower-case method"},
    {"GET,,HEAD example.org/x", 0, "empty method in the list"},
    {",GET example.org/x", 0, "empty method in the list"},
    {"GET, HEAD example.org/x", 0, "empty method at the end"},
    {"*,GET example.org/x", 0, "'*' stands alone"},
    {"G@T example.org/x", 0, "bad method ("},
    {"GET,GET example.org/x", 0, "listed twice"},
    /* host and path */
    {"GET example.org", 0, "missing path"},
    {"GET example.org:443", 0, "missing path"},
    {"* example.org", 0, "missing path"},
    {"GET /x", 0, "missing host"},
    {"GET *.com/x", 0, "covers the whole public suffix com"},
    {"GET example.org:0/x", 0, "bad port"},
    {"GET *.1.2.3.4/x", 0, "not an IP literal"},
    {"GET ex*ample.org/x", 0, "'*' is only allowed as a leading '*.'"},
    {"GET example.org/a b", 0, "bad digest"},   /* placeholder, replaced below */
    {"GET example.org/a#b", 0, "'#' in a rule"},
    {"GET example.org/a " D256 "#c", 0, "'#' in a rule"},
    {"GET example.org/a\x01", 0, "space or control"},
    {"GET example.org/caf\xc3\xa9", 0, "non-ASCII"},
    {"GET example.org/a\\b", 0, "backslash"},
    {"GET example.org/a?b=1", 0, "'?'"},
    {"GET example.org/a/../b", 0, "dot segment"},
    {"GET example.org/a/%2e%2E/*", 0, "dot segment"},
    {"GET example.org//x", 0, "empty segment"},
    {"GET example.org/a%2fb", 0, "encoded '/'"},
    {"GET example.org/a%5C", 0, "encoded '\\'"},
    {"GET example.org/a%00", 0, "%00"},
    {"GET example.org/a%", 0, "bad percent escape"},
    {"GET example.org/a%2*", 0, "bad percent escape"},
    {"GET example.org/a%zz", 0, "bad percent escape"},
    /* digests */
    {"GET example.org/a sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=", 0, "sha256-, sha384- or sha512-"},
    {"GET example.org/a sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU", 0, "44 base64"},
    {"GET example.org/a sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=", 0, "not canonical"},
    {"GET,HEAD example.org/a " D256, 0, "only a GET rule may carry digests"},
    {"* example.org/a " D256, 0, "only a GET rule may carry digests"},
    {"PUT example.org/a " D256, 0, "only a GET rule may carry digests"},
    /* not rules, but near misses */
    {"example.org/path", 0, "a path needs a method list in front"},
    {"http://example.org/x", 0, "a URL is not an entry"},
    {"example.org other.org", 0, "unexpected text"},
    {"Example.ORG other", 0, "unexpected text"},
};

static void test_rule_lines_bad(void **state)
{
    (void)state;
    int bad = 0;
    sl_allowlist *al = sl_allowlist_new();
    for (size_t i = 0; i < sizeof bad_rules / sizeof bad_rules[0]; i++) {
        const bad_line *b = &bad_rules[i];
        const char *why = b->why;
        /* a space ends the path: "b" is then read as a digest */
        if (!strcmp(b->text, "GET example.org/a b"))
            why = "sha256-, sha384- or sha512-";
        size_t len = b->len ? b->len : strlen(b->text);
        errbuf[0] = '\0';
        if (sl_allowlist_add_line(al, b->text, len, "t.txt", 3, errbuf, sizeof errbuf)) {
            print_error("rule '%s' accepted\n", b->text);
            bad++;
        } else if (!strstr(errbuf, why)) {
            print_error("rule '%s': message '%s' lacks '%s'\n", b->text, errbuf, why);
            bad++;
        }
    }
    assert_int_equal(sl_allowlist_count(al), 0);
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

/* A rule whose host grows in its xn-- form past SL_ENTRY_LINE_MAX bytes is
 * refused: its printed form would not read back. One that fits prints in
 * full. */
static void test_rule_line_length(void **state)
{
    (void)state;
    static char line[SL_ENTRY_LINE_MAX + 100], buf[SL_ENTRY_LINE_MAX + 1];
    size_t n = (size_t)snprintf(line, sizeof line, "GET example.org/");
    memset(line + n, 'a', SL_ENTRY_LINE_MAX - n);
    line[SL_ENTRY_LINE_MAX] = '\0';
    sl_allowlist *al = sl_allowlist_new();
    assert_true(sl_allowlist_add_line(al, line, SL_ENTRY_LINE_MAX, "f", 1, errbuf, sizeof errbuf));
    assert_string_equal(sl_entry_format(sl_allowlist_entry(al, 0), buf, sizeof buf), line);
    /* "ü" is 2 bytes written, "xn--tda" 7 once converted */
    n = (size_t)snprintf(line, sizeof line, "GET \xc3\xbc.example/");
    memset(line + n, 'a', SL_ENTRY_LINE_MAX - n);
    assert_false(sl_allowlist_add_line(al, line, SL_ENTRY_LINE_MAX, "f", 2, errbuf, sizeof errbuf));
    assert_non_null(strstr(errbuf, "xn--"));
    assert_int_equal(sl_allowlist_count(al), 1);
    sl_allowlist_free(al);
}

/* ---- Request rules: matching ---- */

static const char *const rule_list[] = {
    /* 1 */ "GET,HEAD registry.npmjs.org/*",
    /* 2 */ "registry.npmjs.org",                       /* shadowed */
    /* 3 */ "GET api.github.com/repos/acme/*",
    /* 4 */ "* .uploads.example/incoming/*",
    /* 5 */ "PUT x.uploads.example/special/*",          /* after line 4: never first */
    /* 6 */ "GET *.cdn.example/assets/*",
    /* 7 */ "POST b.cdn.example/api",
    /* 8 */ "b.cdn.example:8443",                       /* another port: plain */
    /* 9 */ "GET ports.example:8443/*",
    /* 10 */ "ports.example",                           /* 443: plain, not inspected */
    /* 11 */ "GET 198.51.100.7/ip/*",
    /* 12 */ "plain.example",
    /* 13 */ "GET api.github.com/*/issues",             /* after line 3 */
    /* 14 */ "* api.github.com/gists",
};

typedef struct rmatch_case {
    const char *host;
    int port;
    bool connect;
    sl_match_result want;
    int line;              /* sl_allowlist_match's rule */
} rmatch_case;

#define INS SL_MATCH_INSPECTED

static const rmatch_case rmatch_cases[] = {
    {"registry.npmjs.org", 443, C, INS, 1},    /* rules narrow: line 2 allows nothing more */
    {"registry.npmjs.org", 80, H, INS, 1},     /* plain HTTP is matched against rules too */
    {"registry.npmjs.org", 8443, C, PNA, 0},
    {"api.github.com", 443, C, INS, 3},
    {"uploads.example", 443, C, INS, 4},
    {"x.uploads.example", 443, C, INS, 4},     /* first in insertion order, across host forms */
    {"cdn.example", 443, C, NO, 0},            /* *.cdn.example is not cdn.example */
    {"a.cdn.example", 443, C, INS, 6},
    {"b.cdn.example", 443, C, INS, 6},         /* line 6 before line 7, though 7 is exact */
    {"b.cdn.example", 8443, C, A, 8},          /* no rule for that port: the plain entry */
    {"ports.example", 8443, C, INS, 9},
    {"ports.example", 443, C, A, 10},
    {"ports.example", 80, H, A, 10},
    {"ports.example", 22, C, PNA, 0},
    {"198.51.100.7", 443, C, INS, 11},
    {"198.51.100.8", 443, C, NO, 0},
    {"plain.example", 443, C, A, 12},
    {"other.example", 443, C, NO, 0},
};

typedef struct request_case {
    const char *host;
    int port;
    bool connect;
    const char *method, *path;
    int line;              /* 0: rule_not_matched */
} request_case;

static const request_case request_cases[] = {
    {"registry.npmjs.org", 443, C, "GET", "/is-number", 1},
    {"registry.npmjs.org", 443, C, "HEAD", "/", 1},
    {"registry.npmjs.org", 443, C, "PUT", "/is-number", 0},     /* npm publish */
    {"registry.npmjs.org", 443, C, "get", "/is-number", 0},     /* methods are exact */
    {"registry.npmjs.org", 80, H, "GET", "/x", 1},
    {"registry.npmjs.org", 8443, C, "GET", "/x", 0},            /* no rule for that port */
    {"api.github.com", 443, C, "GET", "/repos/acme/widget", 3},
    {"api.github.com", 443, C, "GET", "/repos/acme", 0},
    {"api.github.com", 443, C, "GET", "/repos/other/widget", 0},
    {"api.github.com", 443, C, "GET", "/repos/acme/x/issues", 3},  /* 3 before 13 */
    {"api.github.com", 443, C, "GET", "/repos/other/issues", 13},
    {"api.github.com", 443, C, "POST", "/repos/acme/x", 0},
    {"api.github.com", 443, C, "POST", "/gists", 14},
    {"api.github.com", 443, C, "POST", "/gists/1", 0},
    {"uploads.example", 443, C, "PUT", "/incoming/a.tar", 4},
    {"x.uploads.example", 443, C, "PUT", "/special/a", 5},
    {"x.uploads.example", 443, C, "PUT", "/incoming/a", 4},
    {"x.uploads.example", 443, C, "DELETE", "/special/a", 0},
    {"b.cdn.example", 443, C, "GET", "/assets/x.js", 6},
    {"b.cdn.example", 443, C, "POST", "/api", 7},
    {"b.cdn.example", 443, C, "POST", "/api/", 0},
    {"a.cdn.example", 443, C, "POST", "/api", 0},
    {"b.cdn.example", 8443, C, "GET", "/assets/x.js", 0},       /* not inspected on 8443 */
    {"ports.example", 8443, C, "GET", "/x", 9},
    {"ports.example", 443, C, "GET", "/x", 0},
    {"198.51.100.7", 443, C, "GET", "/ip/1", 11},
    {"198.51.100.7", 80, H, "GET", "/ip/1", 11},
    {"plain.example", 443, C, "GET", "/", 0},                   /* not inspected at all */
    {"other.example", 443, C, "GET", "/", 0},
};

static void test_rule_match(void **state)
{
    (void)state;
    sl_allowlist *al = load_lines(rule_list, sizeof rule_list / sizeof rule_list[0]);
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    int bad = 0;
    for (size_t i = 0; i < sizeof rmatch_cases / sizeof rmatch_cases[0]; i++) {
        const rmatch_case *c = &rmatch_cases[i];
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(c->host, strlen(c->host), &h, &err));
        const sl_entry *rule = (const sl_entry *)1;
        sl_match_result r = sl_allowlist_match(al, &h, c->port, c->connect, &cp, &hp, &rule);
        int line = rule ? rule->line : 0;
        if (r != c->want || line != c->line) {
            print_error("%s %s:%d: result %d line %d, expected %d line %d\n",
                        c->connect ? "CONNECT" : "HTTP", c->host, c->port, (int)r, line, (int)c->want,
                        c->line);
            bad++;
        }
    }
    for (size_t i = 0; i < sizeof request_cases / sizeof request_cases[0]; i++) {
        const request_case *c = &request_cases[i];
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(c->host, strlen(c->host), &h, &err));
        const sl_entry *rule = (const sl_entry *)1;
        sl_match_result r = sl_allowlist_match_request(al, &h, c->port, c->connect, &cp, &hp,
                                                       c->method, c->path, strlen(c->path), &rule);
        int line = rule ? rule->line : 0;
        sl_match_result want = c->line ? A : SL_MATCH_RULE_NOT_MATCHED;
        if (r != want || line != c->line) {
            print_error("%s %s:%d %s %s: result %d line %d, expected line %d\n",
                        c->connect ? "CONNECT" : "HTTP", c->host, c->port, c->method, c->path, (int)r,
                        line, c->line);
            bad++;
        }
    }
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

/* A list without rules answers every request with rule_not_matched, and
 * a rule-free host is matched as before. */
static void test_rule_match_no_rules(void **state)
{
    (void)state;
    static const char *const lines[] = {"example.org"};
    sl_allowlist *al = load_lines(lines, 1);
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    sl_host h;
    const char *err;
    const sl_entry *rule;
    assert_true(sl_host_parse("example.org", 11, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, &cp, &hp, &rule), A);
    assert_int_equal(sl_allowlist_match_request(al, &h, 443, true, &cp, &hp, "GET", "/", 1, &rule),
                     SL_MATCH_RULE_NOT_MATCHED);
    assert_null(rule);
    sl_allowlist_free(al);
}

/* Many rules for other hosts do not change the answer, and one host's
 * rules are still tried in their order. */
static void test_rule_match_big(void **state)
{
    (void)state;
    sl_allowlist *al = sl_allowlist_new();
    char line[128];
    for (int i = 0; i < 20000; i++) {
        snprintf(line, sizeof line, "GET h%d.example/p%d/*", i, i);
        assert_true(sl_allowlist_add_line(al, line, strlen(line), "big", i + 1, errbuf, sizeof errbuf));
    }
    for (int i = 0; i < 50; i++) {
        snprintf(line, sizeof line, "GET .one.example/v%d/*", i);
        assert_true(sl_allowlist_add_line(al, line, strlen(line), "big", 20001 + i, errbuf,
                                          sizeof errbuf));
    }
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    sl_host h;
    const char *err;
    const sl_entry *rule;
    assert_true(sl_host_parse("h777.example", 12, &h, &err));
    assert_int_equal(sl_allowlist_match(al, &h, 443, true, &cp, &hp, &rule), INS);
    assert_int_equal(rule->line, 778);
    assert_int_equal(sl_allowlist_match_request(al, &h, 443, true, &cp, &hp, "GET", "/p777/x", 7, &rule), A);
    assert_int_equal(rule->line, 778);
    assert_int_equal(sl_allowlist_match_request(al, &h, 443, true, &cp, &hp, "GET", "/p778/x", 7, &rule),
                     SL_MATCH_RULE_NOT_MATCHED);
    assert_true(sl_host_parse("a.one.example", 13, &h, &err));
    assert_int_equal(sl_allowlist_match_request(al, &h, 443, true, &cp, &hp, "GET", "/v49/x", 6, &rule), A);
    assert_int_equal(rule->line, 20050);
    sl_allowlist_free(al);
}

/* ---- Shadowing, overlaps ---- */

static char g_reports[16][1400];
static int g_nreports;

static void collect_report(void *ctx, const char *msg)
{
    (void)ctx;
    if (g_nreports < 16)
        snprintf(g_reports[g_nreports], sizeof g_reports[0], "%s", msg);
    g_nreports++;
}

static void test_warnings(void **state)
{
    (void)state;
    static const char *const lines[] = {
        /* 1 */ "registry.npmjs.org",           /* shadowed by 3 */
        /* 2 */ ".npmjs.org",                   /* shadowed for registry.npmjs.org */
        /* 3 */ "GET registry.npmjs.org/*",
        /* 4 */ "registry.npmjs.org:8443",      /* another port: not shadowed */
        /* 5 */ "example.org",                  /* nothing to do with the rules */
        /* 6 */ "GET *.cdn.example/*",
        /* 7 */ "cdn.example",                  /* the apex is not under *.cdn.example */
        /* 8 */ "a.b.cdn.example",              /* shadowed by 6 */
        /* 9 */ "*.cdn.example",                /* shadowed by 6 */
        /* 10 */ "GET .cdn.example/x",
        /* 11 */ "cdn.example:8443",
        /* 12 */ "198.51.100.7",                /* shadowed by 13 */
        /* 13 */ "GET 198.51.100.7/*",
        /* 14 */ "198.51.100.8",
    };
    sl_allowlist *al = load_lines(lines, sizeof lines / sizeof lines[0]);
    g_nreports = 0;
    sl_allowlist_warnings(al, collect_report, NULL);
    for (int i = 0; i < g_nreports && i < 16; i++)
        print_message("  %s\n", g_reports[i]);
    assert_int_equal(g_nreports, 6);
    assert_true(starts_with(g_reports[0], "match.txt:1: warning: 'registry.npmjs.org' is shadowed by the "
                                          "request rules for 'registry.npmjs.org' (first: match.txt:3)"));
    assert_true(starts_with(g_reports[1], "match.txt:2: warning: '.npmjs.org'"));
    assert_non_null(strstr(g_reports[1], "'registry.npmjs.org' (first: match.txt:3)"));
    assert_true(starts_with(g_reports[2], "match.txt:7: warning: 'cdn.example'"));
    assert_non_null(strstr(g_reports[2], "(first: match.txt:10)"));
    assert_true(starts_with(g_reports[3], "match.txt:8: warning: 'a.b.cdn.example'"));
    assert_non_null(strstr(g_reports[3], "(first: match.txt:6)"));
    assert_true(starts_with(g_reports[4], "match.txt:9: warning: '*.cdn.example'"));
    assert_non_null(strstr(g_reports[4], "(first: match.txt:6)"));
    assert_true(starts_with(g_reports[5], "match.txt:12: warning: '198.51.100.7'"));
    sl_allowlist_free(al);

    /* No rules, no warnings. */
    static const char *const plain[] = {"a.example", "a.example"};
    al = load_lines(plain, 2);
    g_nreports = 0;
    sl_allowlist_warnings(al, collect_report, NULL);
    assert_int_equal(g_nreports, 0);
    sl_allowlist_free(al);
}

static void test_hosts_overlap(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        bool overlap;
    } cases[] = {
        {"a.example", "a.example", true},
        {"a.example", "b.example", false},
        {"a.example", ".a.example", true},
        {"a.example", "*.a.example", false},
        {"x.a.example", "*.a.example", true},
        {"x.y.a.example", ".a.example", true},
        {"*.a.example", ".a.example", true},
        {"*.a.example", "*.b.a.example", true},
        {"*.a.example", ".b.a.example", true},
        {".a.example", ".b.example", false},
        {"*.a.example", "*.xa.example", false},
        {"xa.example", ".a.example", false},
        {"203.0.113.7", "203.0.113.7:443", true},   /* ports aside */
        {"203.0.113.7", "203.0.113.8", false},
        {"[2001:db8::7]", "[2001:db8:0::7]", true},
        {"[::ffff:203.0.113.7]", "203.0.113.7", false},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static const char *lines[2];
        lines[0] = cases[i].a;
        lines[1] = cases[i].b;
        sl_allowlist *al = load_lines(lines, 2);
        const sl_entry *a = sl_allowlist_entry(al, 0), *b = sl_allowlist_entry(al, 1);
        if (sl_entry_hosts_overlap(a, b) != cases[i].overlap ||
            sl_entry_hosts_overlap(b, a) != cases[i].overlap) {
            print_error("overlap('%s', '%s') != %d\n", cases[i].a, cases[i].b, cases[i].overlap);
            bad++;
        }
        sl_allowlist_free(al);
    }
    assert_int_equal(bad, 0);
}

/* sl_allowlist_overlaps finds every overlapping pair once, as the
 * pairwise check does, over a list of mixed forms. */
typedef struct pairs {
    const sl_allowlist *al;
    unsigned char seen[64][64];
} pairs;

static void note_pair(void *ctx, const sl_entry *a, const sl_entry *b)
{
    pairs *p = ctx;
    p->seen[sl_allowlist_index(p->al, a)][sl_allowlist_index(p->al, b)]++;
}

static void test_overlaps_enumeration(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "a.example", ".a.example", "*.a.example", "x.a.example", "*.x.a.example", ".c.example",
        "b.example", "*.c.example", "GET a.example/*", "GET .x.a.example/*", "GET *.b.example/*",
        "GET example/*", "GET y.x.a.example/", "GET 203.0.113.7/*", "203.0.113.7:8443",
        "GET .c.example/*", "GET *.a.example/*", "c.example", "GET z.c.example/*", "y.z.c.example",
        "GET *.y.z.c.example/*", "example",
    };
    size_t n = sizeof lines / sizeof lines[0];
    sl_allowlist *al = load_lines(lines, n);
    static pairs p;
    memset(&p, 0, sizeof p);
    p.al = al;
    sl_allowlist_overlaps(al, false, al, true, note_pair, &p);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            const sl_entry *a = sl_allowlist_entry(al, i), *b = sl_allowlist_entry(al, j);
            int want = !sl_entry_is_rule(a) && sl_entry_is_rule(b) && sl_entry_hosts_overlap(a, b);
            if (p.seen[i][j] != want) {
                print_error("pair ('%s', '%s') seen %d times, expected %d\n", lines[i], lines[j],
                            p.seen[i][j], want);
                bad++;
            }
        }
    sl_allowlist_free(al);
    assert_int_equal(bad, 0);
}

/* ---- Suggested rules ---- */

typedef struct suggest_rule_case {
    const char *host;
    int port;
    bool connect;
    const char *method, *path;
    const char *want;      /* NULL: no line */
} suggest_rule_case;

static const suggest_rule_case suggest_rule_cases[] = {
    {"registry.npmjs.org", 443, C, "PUT", "/is-number", "PUT registry.npmjs.org/is-number"},
    {"registry.npmjs.org", 80, H, "GET", "/a/b", "GET registry.npmjs.org/a/b"},
    {"registry.npmjs.org", 8443, C, "GET", "/", "GET registry.npmjs.org:8443/"},
    {"registry.npmjs.org", 443, H, "GET", "/", "GET registry.npmjs.org:443/"},
    {"api.github.com", 443, C, "get", "/x", "* api.github.com/x"},     /* not a rule's method */
    {"api.github.com", 443, C, "M.X", "/x", "* api.github.com/x"},
    {"api.github.com", 443, C, "GET", "/a*b", "GET api.github.com/a*"},  /* '*' is not literal */
    {"api.github.com", 443, C, "GET", "/a%2Bb", "GET api.github.com/a%2Bb"},
    {"93.184.216.34", 443, C, "GET", "/x", "GET 93.184.216.34/x"},
    {"[2c0f:fff0::1]", 8443, C, "GET", "/x", "GET [2c0f:fff0::1]:8443/x"},
    {"10.0.0.1", 443, C, "GET", "/x", NULL},                           /* non-public */
    {"169.254.169.254", 80, H, "GET", "/latest/meta-data", NULL},
    {"api.github.com", 443, C, "GET", "/a/../b", NULL},                /* ambiguous */
    {"api.github.com", 443, C, "GET", "//", NULL},
};

static void test_suggest_rule(void **state)
{
    (void)state;
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    int bad = 0;
    for (size_t i = 0; i < sizeof suggest_rule_cases / sizeof suggest_rule_cases[0]; i++) {
        const suggest_rule_case *c = &suggest_rule_cases[i];
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(c->host, strlen(c->host), &h, &err));
        char buf[SL_ENTRY_LINE_MAX + 1] = "stale";
        bool ok = sl_allowlist_suggest_rule(&h, c->port, c->connect, &cp, &hp, c->method, c->path,
                                            strlen(c->path), buf, sizeof buf);
        if (ok != (c->want != NULL) || strcmp(buf, c->want ? c->want : "") != 0) {
            print_error("suggest %s %s:%d%s: '%s', expected '%s'\n", c->method, c->host, c->port,
                        c->path, buf, c->want ? c->want : "");
            bad++;
            continue;
        }
        if (!ok)
            continue;
        /* The line parses, and it allows the request. */
        sl_allowlist *al = sl_allowlist_new();
        const sl_entry *rule;
        if (!sl_allowlist_add_line(al, buf, strlen(buf), "s", 1, errbuf, sizeof errbuf) ||
            sl_allowlist_match_request(al, &h, c->port, c->connect, &cp, &hp, c->method, c->path,
                                       strlen(c->path), &rule) != A) {
            print_error("suggested '%s' does not allow %s %s\n", buf, c->method, c->path);
            bad++;
        }
        sl_allowlist_free(al);
    }
    assert_int_equal(bad, 0);
}

/* A long path is cut with '*' where the room ends, never inside an escape;
 * the line still parses and allows the request. */
static void test_suggest_rule_long(void **state)
{
    (void)state;
    sl_ports cp, hp;
    parse_ports("443", &cp);
    parse_ports("80", &hp);
    sl_host h;
    const char *err;
    assert_true(sl_host_parse("x.example", 9, &h, &err));
    static char path[SL_ENTRY_LINE_MAX + 200];
    int bad = 0;
    for (size_t shift = 0; shift < 3; shift++) {
        /* "/" then "%41" repeated, shifted so that the cut falls on each
         * byte of an escape in turn */
        size_t n = 0;
        path[n++] = '/';
        for (size_t i = 0; i < shift; i++)
            path[n++] = 'b';
        while (n + 3 < sizeof path) {
            memcpy(path + n, "%41", 3);
            n += 3;
        }
        for (size_t cap = 40; cap <= SL_ENTRY_LINE_MAX + 8; cap += cap < 60 ? 1 : 487) {
            static char buf[SL_ENTRY_LINE_MAX + 16];
            if (!sl_allowlist_suggest_rule(&h, 443, true, &cp, &hp, "GET", path, n, buf, cap)) {
                print_error("no suggestion with cap %zu\n", cap);
                bad++;
                continue;
            }
            sl_allowlist *al = sl_allowlist_new();
            const sl_entry *rule;
            if (strlen(buf) >= cap || strlen(buf) > SL_ENTRY_LINE_MAX || buf[strlen(buf) - 1] != '*' ||
                !sl_allowlist_add_line(al, buf, strlen(buf), "s", 1, errbuf, sizeof errbuf) ||
                sl_allowlist_match_request(al, &h, 443, true, &cp, &hp, "GET", path, n, &rule) != A) {
                print_error("cap %zu: '%s' (%s)\n", cap, buf, errbuf);
                bad++;
            }
            sl_allowlist_free(al);
        }
    }
    char tiny[8];
    assert_false(sl_allowlist_suggest_rule(&h, 443, true, &cp, &hp, "GET", "/", 1, tiny, sizeof tiny));
    assert_string_equal(tiny, "");
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_lines),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_line_length),
        cmocka_unit_test(test_ports),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_match_no_ports),
        cmocka_unit_test(test_match_empty_list),
        cmocka_unit_test(test_match_big),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_file_interned),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_format_long),
        cmocka_unit_test(test_rule_lines),
        cmocka_unit_test(test_rule_lines_bad),
        cmocka_unit_test(test_rule_line_length),
        cmocka_unit_test(test_rule_match),
        cmocka_unit_test(test_rule_match_no_rules),
        cmocka_unit_test(test_rule_match_big),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_hosts_overlap),
        cmocka_unit_test(test_overlaps_enumeration),
        cmocka_unit_test(test_suggest_rule),
        cmocka_unit_test(test_suggest_rule_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
