/* Allowlists: entries, their parsing and printing, and matching. */
#ifndef SLUICE_ALLOWLIST_H
#define SLUICE_ALLOWLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "host.h"

typedef enum sl_entry_kind {
    SL_ENTRY_EXACT,        /* example.org, 203.0.113.7, [2001:db8::7] */
    SL_ENTRY_WILDCARD,     /* *.example.org: any subdomain, not the apex */
    SL_ENTRY_APEX,         /* .example.org: the apex and any subdomain */
} sl_entry_kind;

typedef struct sl_entry {
    sl_entry_kind kind;
    sl_host host;          /* for wildcard/apex: the suffix, without "*." or "." */
    int port;              /* 0: a bare entry, ports come from connect_ports/http_ports */
    const char *file;      /* provenance: file name, "--allow", ...; owned by the list */
    int line;              /* 0 when it has no line */
    /* Request rules (SPEC part 2): "METHODS HOST[:PORT]PATH [DIGEST ...]".
     * The strings are owned by the list. */
    const char *methods;   /* NULL: a plain entry; "*" or "GET,HEAD" (validated, as written) */
    const char *path;      /* a request rule's pattern (starts with '/'; '*' = any run) */
    const char **digests;  /* SRI strings as written ("sha256-..."), validated; ndigests of them */
    size_t ndigests;
} sl_entry;

static inline bool sl_entry_is_rule(const sl_entry *e) { return e->methods != NULL; }

/* The longest allowlist line, and so the longest formatted entry: room for a
 * pinned rule with every digest a lockfile lists for one package (pip
 * requirements give one per wheel: 40 and more for a package like numpy). */
#define SL_ENTRY_LINE_MAX 16384
/* The most whitespace-separated fields a line may have (a rule's digests
 * are fields). */
#define SL_ENTRY_FIELDS_MAX 256

/* A set of ports, e.g. connect_ports = 443, 8443. */
typedef struct sl_ports {
    uint16_t v[32];
    size_t n;
} sl_ports;

/* "443", "443, 8443", "80 8080": ports 1..65535 separated by commas and/or
 * spaces, at most 32 distinct, duplicates folded, first-seen order. An empty
 * list is an error. */
bool sl_ports_parse(const char *s, sl_ports *out, char *err, size_t errcap);
bool sl_ports_has(const sl_ports *p, int port);

typedef struct sl_allowlist sl_allowlist;

sl_allowlist *sl_allowlist_new(void);
void sl_allowlist_free(sl_allowlist *al);

/* Parse one allowlist line (comments and blank lines allowed: they add
 * nothing) and add it: a plain entry (one host form) or a request rule
 * ("METHODS HOST[:PORT]PATH [DIGEST ...]": a line whose first token is a
 * method list). `file` is copied (interned: one copy per name). Lines over
 * 1024 bytes are an error. On error returns false with a message (without
 * the FILE:LINE prefix) in err. */
bool sl_allowlist_add_line(sl_allowlist *al, const char *text, size_t len,
                           const char *file, int line, char *err, size_t errcap);

/* Every line of a file. Errors are reported through `report`, one call per
 * bad line, as "FILE:LINE: message"; returns the number of errors (-1 when
 * the file cannot be read, also reported). */
typedef void (*sl_report_fn)(void *ctx, const char *msg);
int sl_allowlist_load_file(sl_allowlist *al, const char *path, sl_report_fn report, void *ctx);

size_t sl_allowlist_count(const sl_allowlist *al);
const sl_entry *sl_allowlist_entry(const sl_allowlist *al, size_t i);  /* in insertion order */

/* The index of an entry of this list (sl_allowlist_entry(al, i) == e). */
size_t sl_allowlist_index(const sl_allowlist *al, const sl_entry *e);

typedef enum sl_match_result {
    SL_MATCH_ALLOWED,
    SL_MATCH_NO_ENTRY,          /* not_allowlisted */
    SL_MATCH_PORT_NOT_ALLOWED,  /* a host entry exists, but not for this port */
    SL_MATCH_INSPECTED,         /* request rules cover host:port; *rule = the first (insertion order) */
    SL_MATCH_RULE_NOT_MATCHED,  /* only from sl_allowlist_match_request */
} sl_match_result;

/* Match host and port. `connect` selects connect_ports or http_ports for
 * bare entries (a NULL set allows nothing).
 *
 * When some request rule covers host:port (its host form covers the host,
 * exact, "*." and "." alike, and it allows the port as a plain entry
 * would), the result is SL_MATCH_INSPECTED and *rule is the first such rule
 * in insertion order: the requests inside are matched with
 * sl_allowlist_match_request, and a plain entry for the same host:port
 * allows nothing more (rules narrow).
 *
 * Otherwise plain entries decide. On SL_MATCH_ALLOWED *rule is the entry
 * that allowed it: the most specific entry that allows the port (exact
 * first, then apex/wildcard by longest suffix; among equals the earliest
 * inserted); otherwise *rule is NULL. SL_MATCH_PORT_NOT_ALLOWED when some
 * entry or rule covers the host but none allows the port. IP literal hosts
 * match only exact IP entries. Cost does not grow with the entries for other
 * hosts. Never does I/O. */
sl_match_result sl_allowlist_match(const sl_allowlist *al, const sl_host *h, int port,
                                   bool connect, const sl_ports *connect_ports,
                                   const sl_ports *http_ports, const sl_entry **rule);

/* One request to an inspected host:port: the first rule in insertion order
 * that covers host:port, includes `method` (NUL-terminated, compared
 * exactly) and whose pattern matches path (the target's path without
 * query; sl_path_ambiguous already said it is fine). SL_MATCH_ALLOWED
 * (*rule set) or SL_MATCH_RULE_NOT_MATCHED (*rule NULL). */
sl_match_result sl_allowlist_match_request(const sl_allowlist *al, const sl_host *h, int port,
        bool connect, const sl_ports *connect_ports, const sl_ports *http_ports,
        const char *method, const char *path, size_t path_len, const sl_entry **rule);

/* NULL when the path may be matched; else why it is refused (SPEC: dot
 * segments also percent-encoded, %2f %5c, backslash, %00, bad escapes; and
 * an empty segment, controls, non-ASCII bytes, more: see rules.h
 * sl_path_check). Pure; `path` starts with '/' and stops before '?'. */
const char *sl_path_ambiguous(const char *path, size_t len);

/* The text of an entry as a line of an allowlist file (no comment). A plain
 * entry needs cap >= 270; a rule's line may be up to SL_ENTRY_LINE_MAX
 * bytes (cap SL_ENTRY_LINE_MAX + 1); shorter caps cut it. */
const char *sl_entry_format(const sl_entry *e, char *buf, size_t cap);

/* Only the host form of an entry, with its port: "*.example.org:8443". */
const char *sl_entry_format_host(const sl_entry *e, char *buf, size_t cap); /* cap >= 270 */

/* Whether two entries' host forms have a name (or IP literal) in common,
 * ports aside: example.org and .example.org do, *.example.org and
 * example.org do not, *.a.example.org and .example.org do. */
bool sl_entry_hosts_overlap(const sl_entry *a, const sl_entry *b);

/* Calls fn once for every pair (ea of a, eb of b) whose host forms overlap,
 * ea among a's rules when a_rules (else among its plain entries), eb
 * likewise; in no particular order. Cost: the entries of both, times the
 * labels of their hosts, times the entries sharing a host; never a's
 * entries times b's. a and b may be the same list. */
void sl_allowlist_overlaps(const sl_allowlist *a, bool a_rules, const sl_allowlist *b, bool b_rules,
                           void (*fn)(void *ctx, const sl_entry *ea, const sl_entry *eb), void *ctx);

/* Warnings for `sluice check`, through report, as "FILE:LINE: warning: ...":
 * a plain entry shadowed by request rules for the same host (overlapping
 * host forms with the same port, or both bare), in the plain entries'
 * order, one for each. */
void sl_allowlist_warnings(const sl_allowlist *al, sl_report_fn report, void *ctx);

/* The exact line that would allow host:port for this kind of request, into
 * buf: a bare host when the port is a default one for it, host:port
 * otherwise; true. An IP literal that is not a public address
 * (sl_classify's built-in rules: private, loopback, link-local, cloud
 * metadata, ...) gets no line, since none would let it through: false,
 * and buf is the empty string. allow_cidr and deny_cidr are not consulted,
 * so a literal that only an allow_cidr admits gets no line either. */
bool sl_allowlist_suggest(const sl_host *h, int port, bool connect, const sl_ports *connect_ports,
                          const sl_ports *http_ports, char *buf, size_t cap);

/* The rule line that would allow this request ("GET host/path", the host
 * with :port when the port is not a default one); false and "" when none
 * can (a non-public IP literal, an ambiguous path, a cap too small for the
 * host). A method that a rule cannot list (lower-case, say) gets "*". A byte
 * of the path that a rule cannot hold literally ('*' itself) ends the line
 * with "*" at that point, and so does the end of the room (cap, or
 * SL_ENTRY_LINE_MAX). The line parses, and it allows the request. */
bool sl_allowlist_suggest_rule(const sl_host *h, int port, bool connect, const sl_ports *connect_ports,
        const sl_ports *http_ports, const char *method, const char *path, size_t path_len,
        char *buf, size_t cap);

#endif
