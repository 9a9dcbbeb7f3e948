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
} sl_entry;

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
 * nothing) and add it. `file` is copied (interned: one copy per name). Lines
 * over 1024 bytes are an error. On error returns false with a message
 * (without the FILE:LINE prefix) in err. */
bool sl_allowlist_add_line(sl_allowlist *al, const char *text, size_t len,
                           const char *file, int line, char *err, size_t errcap);

/* Every line of a file. Errors are reported through `report`, one call per
 * bad line, as "FILE:LINE: message"; returns the number of errors (-1 when
 * the file cannot be read, also reported). */
typedef void (*sl_report_fn)(void *ctx, const char *msg);
int sl_allowlist_load_file(sl_allowlist *al, const char *path, sl_report_fn report, void *ctx);

size_t sl_allowlist_count(const sl_allowlist *al);
const sl_entry *sl_allowlist_entry(const sl_allowlist *al, size_t i);  /* in insertion order */

typedef enum sl_match_result {
    SL_MATCH_ALLOWED,
    SL_MATCH_NO_ENTRY,          /* not_allowlisted */
    SL_MATCH_PORT_NOT_ALLOWED,  /* a host entry exists, but not for this port */
} sl_match_result;

/* Match host and port. `connect` selects connect_ports or http_ports for
 * bare entries (a NULL set allows nothing). On SL_MATCH_ALLOWED *rule is the
 * entry that allowed it: the most specific entry that allows the port (exact
 * first, then apex/wildcard by longest suffix; among equals the earliest
 * inserted); otherwise *rule is NULL. SL_MATCH_PORT_NOT_ALLOWED when some
 * entry covers the host but none allows the port. IP literal hosts match only
 * exact IP entries. Cost does not grow with the list size. Never does I/O. */
sl_match_result sl_allowlist_match(const sl_allowlist *al, const sl_host *h, int port,
                                   bool connect, const sl_ports *connect_ports,
                                   const sl_ports *http_ports, const sl_entry **rule);

/* The text of an entry as a line of an allowlist file (no comment). */
const char *sl_entry_format(const sl_entry *e, char *buf, size_t cap); /* cap >= 270 */

/* The exact line that would allow host:port for this kind of request, into
 * buf: a bare host when the port is a default one for it, host:port
 * otherwise; true. An IP literal that is not a public address
 * (sl_classify's built-in rules: private, loopback, link-local, cloud
 * metadata, ...) gets no line, since none would let it through: false,
 * and buf is the empty string. allow_cidr and deny_cidr are not consulted,
 * so a literal that only an allow_cidr admits gets no line either. */
bool sl_allowlist_suggest(const sl_host *h, int port, bool connect, const sl_ports *connect_ports,
                          const sl_ports *http_ports, char *buf, size_t cap);

#endif
