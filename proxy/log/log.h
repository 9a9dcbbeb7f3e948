/* The decision log: one JSON line per decision and per close, hash-chained
 * (SPEC: seq, chain, stream), buffered, and failing closed.
 *
 * Lines are appended to one process-wide buffer under a lock, in the order
 * their seq says. A refusal's line is written (write(2) done) before its
 * reply goes out; other lines at least every 100 ms (sl_log_tick). When
 * the file cannot be written (disk full, I/O error, the file removed or
 * replaced), the log reports failing and the gate refuses new clients
 * until writing works again; lines wait in memory meanwhile. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdbool.h>
#include <stddef.h>

bool sl_log_open(const char *path, char *err, size_t errcap);
/* Reopen the path (logrotate's SIGUSR1), or switch to another. The next
 * line names the seq and chain it continues from. */
bool sl_log_reopen(const char *path, char *err, size_t errcap);

/* Append a line. `body` is a JSON object WITHOUT its closing brace; the
 * log adds stream/continuation fields, seq and chain. With `sync` the
 * buffer is written before returning. */
void sl_log_line(const char *body, size_t len, bool sync);

/* Write what is buffered; check the file is still the one we write to.
 * Called every 100 ms by the main thread, and at exit. */
void sl_log_tick(void);

/* Whether the log cannot be written now; `why` gets the reason. */
bool sl_log_failing(char *why, size_t cap);

void sl_log_close(void);

/* "2026-12-02T09:00:00.123456Z" into buf (cap >= 32), now, UTC. */
void sl_log_timestamp(char *buf, size_t cap);

#endif
