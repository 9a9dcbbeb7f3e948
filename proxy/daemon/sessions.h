/* Sessions (SPEC part 2): one gate, many sandboxes. `[sessions] dir` holds
 * one NAME.ini per session: the SHA-256 of its token, its own allowlists,
 * an optional log stream of its own and an optional expiry. A session's
 * token is never held by the gate, only its hash; never log or print
 * either in full. */
#ifndef SLUICE_SESSIONS_H
#define SLUICE_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "allowlist.h"
#include "config.h"

#define SL_SESSION_NAME_MAX 64     /* [A-Za-z0-9._-], not starting with '.' */
#define SL_SESSION_TOKEN_MAX 256   /* bytes of a token a client may send */
#define SL_SESSIONS_MAX 100000     /* session files read from one dir; more is an error */

struct sl_log_stream;

typedef struct sl_session {
    char *name;
    size_t name_len;               /* strlen(name): the lookup compares lengths first */
    unsigned char token_sha256[32];
    sl_allowlist *allow;           /* its own entries; NULL: none */
    char **allowlist_files;        /* as loaded, for `check` */
    size_t nallowlist_files;
    char *log_path;                /* NULL: its lines go to the gate's log */
    struct sl_log_stream *log;     /* opened by `run` (sl_sessions_open_logs); NULL: the gate's log */
    int log_line;                  /* the `log =` line of the file, for messages */
    time_t expires;                /* 0: never */
    char *file;                    /* the session file, for messages */
    int metrics_slot;              /* its /metrics label (sl_metrics_session_slot) */
} sl_session;

/* Reads every NAME.ini in dir into p->sessions, sorted by name. Needs
 * p->connect_ports and p->http_ports final (the session allowlists are
 * read with them). Every error is reported as "FILE:LINE: message" and
 * never quotes a hash; returns how many there were. A file whose name is
 * not NAME.ini (a dotfile, an editor's backup, Kubernetes' ..data) is
 * skipped. */
int sl_sessions_load(sl_policy *p, const char *dir, sl_report_fn report, void *ctx);

/* Frees p's sessions (and drops their log streams). */
void sl_sessions_free(sl_policy *p);

/* The session of that name, or NULL. O(log n). */
const sl_session *sl_policy_session(const sl_policy *p, const char *name, size_t len);

/* Whether token (as the client sent it) is s's, in time independent of
 * where it differs. */
bool sl_session_token_ok(const sl_session *s, const char *token, size_t len);

/* Whether s has expired at `now`. */
static inline bool sl_session_expired(const sl_session *s, time_t now)
{
    return s->expires != 0 && now >= s->expires;
}

/* `run`: opens the log streams of the sessions that name one (before the
 * policy is used). Errors name the session file's log line. */
bool sl_sessions_open_logs(sl_policy *p, sl_report_fn report, void *ctx);

/* Whether name[0..n) is a session name: 1..SL_SESSION_NAME_MAX of
 * [A-Za-z0-9._-], not starting with '.'. */
bool sl_session_name_valid(const char *name, size_t n);

/* `expires`: exactly YYYY-MM-DDTHH:MM:SSZ (UTC, a real date, 1970 on). */
bool sl_session_parse_expires(const char *s, time_t *out);

/* `sluice check`'s sessions section: name, file, allowlists, log, expiry,
 * and the first 8 hex digits of the token's hash, never more. */
void sl_sessions_print(const sl_policy *p, FILE *out);

#endif
