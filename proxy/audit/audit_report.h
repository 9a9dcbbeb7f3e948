/* sluice audit --summary, --denied and --suggest: what the decision log says,
 * gathered line by line and printed as a table or as JSON.
 *
 * Request lines (the requests inside an inspected tunnel) count as requests
 * of their tunnel's host:port, found by id among the open connections; they
 * and the plain-HTTP decisions the rules made also count in rows per
 * host:port, method and path prefix.
 *
 * Memory grows with the number of distinct host:port destinations (with
 * their reasons), of distinct client addresses (8 bytes each), of rows of
 * inspected requests (a few hundred bytes and the prefix each; the first
 * path refused too, when one was), and of connections allowed but not yet
 * closed at that point of the log. That last
 * map is bounded: at most SL_REPORT_OPEN_MAX open connections are
 * remembered; past that the oldest quarter is forgotten, and their close
 * lines, if they come, count in the totals but not per destination
 * ("unmatched closes"). Nothing is kept per line. */
#ifndef SLUICE_AUDIT_REPORT_H
#define SLUICE_AUDIT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "allowlist.h"
#include "audit_input.h"

#define SL_REPORT_OPEN_MAX (1u << 18)

typedef struct sl_report sl_report;

sl_report *sl_report_new(void);
void sl_report_free(sl_report *r);

/* Take in one log line (scanned by sl_aline_scan). False only when out of memory. */
bool sl_report_line(sl_report *r, const sl_afields *f);
/* A line that could not be read as one: counted and shown in the report. */
void sl_report_malformed(sl_report *r);
void sl_report_set_files(sl_report *r, size_t nfiles);

void sl_report_summary(const sl_report *r, FILE *out, bool json);
void sl_report_denied(const sl_report *r, FILE *out, bool json);
/* Allowlist lines for destinations refused as not_allowlisted or
 * port_not_allowed (never those whose host was refused as
 * non_public_address, nor non-public IP literals, nor hosts allowed since),
 * written with sl_allowlist_suggest for these port sets; and request rules
 * for rule_not_matched refusals, one per host:port, method and path prefix
 * (the exact path when only one was refused there), never for a path the
 * gate refuses as ambiguous or one allowed since. */
void sl_report_suggest(const sl_report *r, FILE *out, bool json, const sl_ports *connect_ports,
                       const sl_ports *http_ports);

/* Totals, for tests. */
typedef struct sl_report_totals {
    unsigned long long lines, requests, allowed, denied, closes, bytes_up, bytes_down;
    unsigned long long clients, destinations, malformed, unmatched_closes, forgotten_open;
    unsigned long long inspected, no_tunnel, rows;   /* requests to inspected hosts; rows of them */
} sl_report_totals;
void sl_report_get_totals(const sl_report *r, sl_report_totals *t);

/* Output helpers shared with audit.c. A JSON string (with its quotes),
 * ASCII only: every other character is a \u escape, invalid UTF-8 U+FFFD. */
void sl_audit_json_str(FILE *out, const char *s, size_t len);
/* Text for a terminal: printable ASCII as is, other bytes as \xNN.
 * Returns the columns written. */
size_t sl_audit_text(FILE *out, const char *s, size_t len);

#endif
