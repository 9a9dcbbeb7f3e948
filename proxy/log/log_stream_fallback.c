/* TEMPORARY, until log.c's session streams are merged: a weak no-op
 * sl_log_stream_put so that sessions.c links on a branch without them (no
 * stream is ever opened there, so every s->log is NULL). The real one in
 * log.c overrides it; delete this file once that is in. */
#include "log.h"

__attribute__((weak)) void sl_log_stream_put(sl_log_stream *s)
{
    (void)s;
}
