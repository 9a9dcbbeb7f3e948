/* The allowlist a locked install needs (sluice allow-from-lockfile): a set of
 * host:port entries, each with the files that required it, printed sorted
 * as LOCKFILES.md R1 says. Entries are the daemon's own sl_entry. */
#ifndef SLUICE_DERIVE_H
#define SLUICE_DERIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "allowlist.h"
#include "url.h"

typedef struct sl_derived sl_derived;

sl_derived *sl_derived_new(void);
void sl_derived_free(sl_derived *d);

/* Add host:port, required by `file` (copied). The host is validated and
 * normalised like an allowlist entry (case, trailing dot, IDN). Returns
 * false with a message in err if the host is not a valid host. */
bool sl_derived_add(sl_derived *d, const char *host, size_t host_len, int port, const char *file,
                    char *err, size_t errcap);

/* Add the host:port a URL points at. Returns 1 if added, 0 if the URL names
 * no network host (local path, file:, link:, workspace:...), -1 on an invalid
 * host or unknown port (message in err). */
int sl_derived_add_url(sl_derived *d, const char *url, size_t len, const char *file, char *err,
                       size_t errcap);

/* ---- --pins (SPEC part 2, "Pinned artifacts") ----
 *
 * With pins on, a reader that knows where an artifact is and what its bytes
 * hash to adds a GET rule with the digests; the metadata a locked install
 * reads (index pages, sparse-index files) as GET rules without digests; and
 * what it cannot pin as a fallback with a note saying why. Readers that
 * know nothing of pins keep adding host entries. Without pins, readers add
 * host entries only, as before. */
void sl_derived_set_pins(sl_derived *d, bool on);
bool sl_derived_pins(const sl_derived *d);

/* A GET rule for host:port and a path pattern (starting with '/'; '*' is a
 * wildcard, as in allowlists), pinned to digests (SRI strings, each one
 * sl_digest_check accepts; ndigests 0: an unpinned rule, for metadata).
 * `note` (may be NULL, copied) goes in the line's comment after the files
 * ("index page"). Adding the same host:port and pattern again merges:
 * digests and files are joined, the first note stays; a pinned and an
 * unpinned rule for one pattern make a pinned one (the bytes must match).
 * False with a message in err on an invalid host or port, a path the rule
 * syntax refuses, or an invalid digest. */
bool sl_derived_add_rule(sl_derived *d, const char *host, size_t host_len, int port, const char *path,
                         size_t path_len, const char *const *digests, size_t ndigests, const char *file,
                         const char *note, char *err, size_t errcap);

/* The same for a URL: its path (query and fragment dropped) taken as
 * literal bytes. A path a rule cannot hold literally ('*', or one the
 * ambiguity check refuses: "%2f", dot segments) falls back as
 * sl_derived_add_fallback_url does, with a note saying so. Returns 1 if
 * added, 0 if the URL names no network host, -1 on error (err). */
int sl_derived_add_rule_url(sl_derived *d, const char *url, size_t len, const char *const *digests,
                            size_t ndigests, const char *file, const char *note, char *err, size_t errcap);

/* What cannot be pinned: host:port, with `why` (copied) in the comment.
 * With a path (or from a URL): when the output has rules for the same
 * host:port (the host is inspected, and a host entry for it would be
 * shadowed), it is printed as an unpinned GET rule for that path instead;
 * otherwise as a host entry. path NULL: always a host entry. */
bool sl_derived_add_fallback(sl_derived *d, const char *host, size_t host_len, int port, const char *path,
                             size_t path_len, const char *file, const char *why, char *err, size_t errcap);
int sl_derived_add_fallback_url(sl_derived *d, const char *url, size_t len, const char *file, const char *why,
                                char *err, size_t errcap);

/* SRI text ("sha256-<base64>") from a hex digest, as pip, Cargo, uv and
 * Gradle write them ("sha256", 64 hex digits). alg is "sha256", "sha384" or
 * "sha512" (case-insensitive); out needs SL_SRI_MAX bytes. False when the
 * algorithm is not one of those or hex is not exactly its length in hex. */
#define SL_SRI_MAX 96
bool sl_sri_from_hex(const char *alg, size_t alg_len, const char *hex, size_t hex_len, char *out);

/* The digests of an SRI list as npm and Yarn write it ("sha512-... sha1-...",
 * space-separated): the ones a rule can carry (sha256/384/512, valid and
 * without options) into out, at most max of them; returns how many. */
size_t sl_sri_strong(const char *s, size_t len, char (*out)[SL_SRI_MAX], size_t max);

size_t sl_derived_count(sl_derived *d);   /* resolves pending fallbacks first */

/* Sorted bytewise by their text (rules, "GET ...", sort before host
 * entries); valid until the next add. */
const sl_entry *sl_derived_entry(sl_derived *d, size_t i, const char *const **files, size_t *nfiles);

/* R1 text: "host:port  # file, file" lines; rules as "GET host:port/path
 * DIGEST...  # file, file: note". */
void sl_derived_print(sl_derived *d, FILE *out);
/* The same as JSON: {"entries":[{"entry":"host:port","host":...,"port":...,"files":[...]}]};
 * a rule also has "method", "path", "digests" and, with one, "note". */
void sl_derived_print_json(sl_derived *d, FILE *out);

#endif
