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

size_t sl_derived_count(const sl_derived *d);

/* Sorted bytewise by the "host:port" text; valid until the next add. */
const sl_entry *sl_derived_entry(sl_derived *d, size_t i, const char *const **files, size_t *nfiles);

/* R1 text: "host:port  # file, file" lines. */
void sl_derived_print(sl_derived *d, FILE *out);
/* The same as JSON: {"entries":[{"entry":"host:port","host":...,"port":...,"files":[...]}]} */
void sl_derived_print_json(sl_derived *d, FILE *out);

#endif
