/* The decision log: one JSON line per decision and per close, appended to a
 * file or standard output. Shared by all workers; each line is written with
 * one write(2) under a lock, so lines never interleave. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* Opens `path` ("-" is standard output) for appending. */
bool sl_log_open(const char *path, char *err, size_t errcap);
/* Reopens the same path (logrotate's SIGUSR1), or switches to a new one. */
bool sl_log_reopen(const char *path, char *err, size_t errcap);
void sl_log_write(const char *line, size_t len);
void sl_log_close(void);

/* "2026-12-02T09:00:00.123456Z" into buf (cap >= 32), now, UTC. */
void sl_log_timestamp(char *buf, size_t cap);

#endif
