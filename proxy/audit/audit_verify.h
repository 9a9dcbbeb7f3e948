/* sluice audit --verify: the decision log's hash chain, line by line.
 *
 * Each line must be one JSON object ending in ,"seq":N,"chain":"<64 hex>"}
 * where chain = hex(SHA-256(prev || the line without its chain field)) and
 * prev is the previous line's chain, or for a stream's first line its
 * stream id. A stream's first line carries "stream"; the first line after
 * the gate reopened its log also carries continues_seq and continues_chain,
 * naming the line it follows (which may be in another file). Lines are fed
 * in order; the first bad one stops the check. Memory: a few bytes per
 * stream seen, nothing per line. */
#ifndef SLUICE_AUDIT_VERIFY_H
#define SLUICE_AUDIT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sl_verify sl_verify;

typedef struct sl_verify_stream {
    char id[33];
    unsigned long long lines;        /* checked in this run */
    unsigned long long first_seq, last_seq;
    bool from_start;                 /* its first line (seq 1) was among the lines */
    char last_chain[65];
} sl_verify_stream;

sl_verify *sl_verify_new(void);
void sl_verify_free(sl_verify *v);

/* Check the next line. `text` (without its newline) is written to while it
 * is hashed and restored before returning. `complete`: it ended with a
 * newline. Returns false with what is wrong (no FILE:LINE prefix) in why. */
bool sl_verify_line(sl_verify *v, char *text, size_t len, bool complete, char *why, size_t whycap);

/* The stream and seq of the last good line (for choosing the next file). */
bool sl_verify_position(const sl_verify *v, const char **stream, unsigned long long *seq);

/* Streams seen so far, in the order they were first seen. */
size_t sl_verify_streams(const sl_verify *v, const sl_verify_stream **streams);
unsigned long long sl_verify_total(const sl_verify *v);

#endif
