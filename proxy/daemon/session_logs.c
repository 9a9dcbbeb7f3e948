/* sluice run: the log streams of the sessions that have `log` set
 * (sessions.h). Kept apart from sessions.c, which only reads files: this
 * is the one part that opens them for writing, and only `run` calls it. */
#include <stdio.h>

#include "log.h"
#include "sessions.h"

bool sl_sessions_open_logs(sl_policy *p, sl_report_fn report, void *ctx)
{
    for (size_t i = 0; i < p->nsessions; i++) {
        sl_session *s = &p->sessions[i];
        if (!s->log_path)
            continue;
        char err[512], msg[1200];
        s->log = sl_log_stream_get(s->log_path, err, sizeof err);
        if (!s->log) {
            snprintf(msg, sizeof msg, "%s: log: %s", s->file ? s->file : s->name, err);
            report(ctx, msg);
            /* What was got is dropped now, not when the policy is freed:
             * a reload that fails leaves the streams as they were. */
            for (size_t k = 0; k < i; k++) {
                sl_log_stream_put(p->sessions[k].log);
                p->sessions[k].log = NULL;
            }
            return false;
        }
    }
    return true;
}
