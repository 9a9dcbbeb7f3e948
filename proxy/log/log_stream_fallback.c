/* TEMPORARY, until log.c's session streams are merged: a weak no-op
 * sl_log_stream_put so that sessions.c links on a branch without them (no
 * stream is ever opened there, so every s->log is NULL). The real one in
 * log.c overrides it; delete this file once that is in. */
#include "log.h"

__attribute__((weak)) void sl_log_stream_put(sl_log_stream *s)
{
    (void)s;
}

/* The same, for the hot path: with no stream ever opened, every line is
 * the gate's log's. */
__attribute__((weak)) uint64_t sl_log_line_in(sl_log_stream *s, const char *body, size_t len)
{
    (void)s;
    return sl_log_line(body, len);
}

__attribute__((weak)) bool sl_log_written_in(sl_log_stream *s, uint64_t ticket)
{
    (void)s;
    return sl_log_written(ticket);
}

__attribute__((weak)) bool sl_log_failing_in(sl_log_stream *s, char *why, size_t cap)
{
    (void)s;
    return sl_log_failing(why, cap);
}
