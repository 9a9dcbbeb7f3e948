/* `sluice audit`: reads decision logs (plain, gzip'd, or standard input as
 * "-", rotated files in any order) and prints a summary, the refusals,
 * allowlist suggestions, or checks the hash chain. */
#ifndef SLUICE_AUDIT_H
#define SLUICE_AUDIT_H

#include <stdio.h>

/* argv[0] is "audit". Returns the exit status: 0 success; 1 the chain is
 * broken (--verify) or a log could not be read to its end; 2 usage error or
 * a log that cannot be opened. */
int sl_cmd_audit(int argc, char **argv);

/* The same, writing to `out` and `err` (for tests). */
int sl_audit_main(int argc, char **argv, FILE *out, FILE *err);

#endif
