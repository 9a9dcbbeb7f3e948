/* The decision log: one JSON line per decision and per close, hash-chained
 * (SPEC: seq, chain, stream), and failing closed.
 *
 * Workers and the main thread only append lines to memory, under a lock
 * held for a memcpy. One writer thread chains them, in the order of their
 * tickets, and does every write(2), outside the lock. Lines gather for up
 * to 100 ms or 64 KiB, so that one write takes many. A caller that must
 * not answer before its line is written (a refusal) keeps the ticket and
 * asks sl_log_written(), which has that line written at once; the
 * progress callback tells it when to ask again.
 *
 * The log is failing while a write fails (disk full, I/O error, quota),
 * while its file has been deleted, while one write(2) has been blocked for
 * more than a second (a pipe nobody reads, a hung disk), or while more
 * than LOG_SOFT_MAX bytes wait. The gate then refuses new clients (503)
 * and stops accepting above LOG_SOFT_MAX, so no line is ever dropped: they
 * wait in memory until they can be written. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Above this many bytes waiting, the log is failing and the gate accepts
 * no new client (sl_log_backlogged). */
#define LOG_SOFT_MAX ((size_t)8 << 20)

/* Open the log and start its writer thread. */
bool sl_log_open(const char *path, char *err, size_t errcap);
/* Reopen the path (logrotate's SIGUSR1), or switch to another. The file is
 * opened here; the writer switches to it after the write under way (it
 * never waits for one). The next line names the seq and chain it
 * continues from. */
bool sl_log_reopen(const char *path, char *err, size_t errcap);

/* Append a line; never waits for I/O. `body` is a JSON object WITHOUT its
 * closing brace; the log adds stream/continuation fields, seq and chain.
 * Returns its ticket: 1, 2, 3... in the order lines are chained (so in seq
 * order); 0 only if the line could not be kept (out of memory). */
uint64_t sl_log_line(const char *body, size_t len);

/* Whether the line with this ticket has been written (its write(2)
 * returned). True for ticket 0. Asking about a line not written yet tells
 * the writer that someone waits for it: it is written at once, rather than
 * gathered with later ones (for up to 100 ms or 64 KiB). */
bool sl_log_written(uint64_t ticket);

/* Called by the writer thread (or whichever thread changes the state)
 * after lines were written, and whenever the failing state changes; never
 * with a lock of the log held. It must be quick and thread-safe. Set it
 * before workers start; setting NULL waits for a call under way to end. */
void sl_log_set_progress_cb(void (*cb)(void));

/* True while more than LOG_SOFT_MAX bytes wait to be written. */
bool sl_log_backlogged(void);

/* Called every 100 ms by the main thread; never blocks: notices a write
 * blocked for too long, or too much waiting, and marks the log failing. */
void sl_log_tick(void);

/* Whether the log is failing now; `why` gets the reason. */
bool sl_log_failing(char *why, size_t cap);

/* At exit, after the workers stopped: lets the writer write what waits, for
 * at most 3 s while it is stuck in a write, then reports on standard error
 * what could not be written. */
void sl_log_close(void);

/* "2026-12-02T09:00:00.123456Z" into buf (cap >= 32), now, UTC. */
void sl_log_timestamp(char *buf, size_t cap);

/* ---- streams of their own (sessions, SPEC part 2) ----
 *
 * A session with `log` set writes its lines to a stream of its own: its
 * own file, seq, chain and stream id, verifiable on its own, and its own
 * failing state (a session whose stream fails is refused 503
 * log_unavailable; the others go on). The same writer thread writes every
 * stream. NULL everywhere below means the gate's log. */
typedef struct sl_log_stream sl_log_stream;

/* The stream writing to path: an open one (the same path on a reload is
 * the same stream, its chain goes on) with one more reference, or a new
 * one. NULL with err set when the file cannot be opened, when it is the
 * gate's own log file, or when it is a FIFO nobody reads (a session's file
 * is written without blocking, so that it cannot hold up the others). Any
 * thread, once sl_log_open has run. */
sl_log_stream *sl_log_stream_get(const char *path, char *err, size_t errcap);
/* Drops a reference; the last one closes the stream once its lines are
 * written. Any thread. NULL does nothing. */
void sl_log_stream_put(sl_log_stream *s);

uint64_t sl_log_line_in(sl_log_stream *s, const char *body, size_t len);
bool sl_log_written_in(sl_log_stream *s, uint64_t ticket);
bool sl_log_failing_in(sl_log_stream *s, char *why, size_t cap);

#endif
