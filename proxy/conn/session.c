/* Sessions on the hot path (SPEC part 2): a request's Proxy-Authorization,
 * the connection's session, the allowlist it sees, and closing the
 * connections of a session that was removed, changed or expired.
 *
 * The credentials are read with the head (session_read_head) and acted on
 * once the target is known (session_admit, first in conn_decide), so that a
 * 407 line names what the client tried to reach. A connection is bound to
 * the first session it authenticates as; every later request on it must
 * carry that session's credentials again, or it is refused and closed. */
#include <string.h>
#include <time.h>

#include "conn.h"
#include "log.h"
#include "proxy_auth.h"
#include "sessions.h"

struct sl_log_stream *conn_log_stream(const conn *c)
{
    return c->session ? c->session->log : NULL;
}

static void failed(conn *c, const char *why)
{
    c->x.auth = AUTH_FAILED;
    c->x.auth_why = why;
}

/* A request is decided by the policy current when its head arrived, not
 * the one its connection was accepted under: otherwise a connection opened
 * before a reload could still authenticate as a session the reload
 * removed, or with its old token (an idle connection for header_ms, an
 * anonymous keep-alive one for as long as it is kept alive). A session's
 * connection moves with it, onto the same session in the new policy; one
 * whose session is gone, has another token or has expired is no longer
 * that session's, and its credentials are then judged like anyone's (a
 * 407). Requests inside an inspected tunnel stay on the CONNECT's policy:
 * the tunnel's rule lives there. */
void session_refresh_policy(conn *c)
{
    unsigned long gen = atomic_load(&g_shared.published);
    if (gen == c->pol_published)
        return;
    sl_policy *now = sl_shared_policy();
    c->pol_published = gen;
    if (c->session) {
        const sl_session *s = c->session;
        const sl_session *n = sl_policy_session(now, s->name, s->name_len);
        bool same = n && memcmp(n->token_sha256, s->token_sha256, sizeof s->token_sha256) == 0 &&
                    !sl_session_expired(n, time(NULL));
        c->session = same ? n : NULL;
    }
    sl_policy_unref(c->pol);
    c->pol = now;
}

void session_read_head(conn *c, const sl_http_head *h)
{
    const sl_policy *p = c->pol;
    c->x.auth = AUTH_OFF;
    if (!p->sessions_dir)
        return;
    const sl_http_header *cred = NULL;
    size_t n = 0;
    for (size_t i = 0; i < h->nheaders; i++)
        if (sl_http_header_is(&h->headers[i], "proxy-authorization")) {
            cred = &h->headers[i];
            n++;
        }
    if (n == 0) {
        /* A connection that is a session's stays one: no request on it
         * goes out as anonymous. */
        c->x.auth = p->sessions_require || c->session ? AUTH_MISSING : AUTH_ANONYMOUS;
        return;
    }
    if (n > 1) {
        failed(c, "more than one Proxy-Authorization header");
        return;
    }
    static _Thread_local sl_proxy_auth a;
    const char *why = sl_proxy_auth_parse(cred->value.p, cred->value.len, &a);
    memcpy(c->x.claimed, a.user, a.user_len + 1);   /* both SL_PROXY_AUTH_USER_MAX + 1 */
    if (why) {
        failed(c, why);
        return;
    }
    const sl_session *s = sl_policy_session(p, a.user, a.user_len);
    /* An unknown name costs the same hash as a known one. */
    static const sl_session nobody;
    bool ok = sl_session_token_ok(s ? s : &nobody, a.pass, a.pass_len) && s;
    sl_proxy_auth_clear(&a);
    if (!ok) {
        failed(c, "the name and token are not a session's of this gate");
        return;
    }
    if (sl_session_expired(s, time(NULL))) {
        failed(c, "the session has expired");
        return;
    }
    if (c->session && c->session != s) {
        failed(c, "this connection is another session's, and a connection cannot change sessions");
        return;
    }
    c->session = s;
    c->x.auth = AUTH_OK;
}

bool session_admit(conn *c)
{
    switch (c->x.auth) {
    case AUTH_OFF:
    case AUTH_ANONYMOUS:
    case AUTH_OK:
        return true;
    case AUTH_MISSING:
        conn_refuse(c, 407, "auth_required",
                    "This gate serves sessions: send the session's credentials, as a proxy URL "
                    "http://NAME:TOKEN@gate:port gives them (Proxy-Authorization: Basic).%s",
                    c->session ? " Every request on a session's connection carries them." : "");
        return false;
    case AUTH_FAILED:
        break;
    }
    conn_refuse(c, 407, "auth_failed", "The credentials were refused: %s.", c->x.auth_why);
    return false;
}

static bool revoked(const conn *c, const sl_policy *now_pol, time_t now)
{
    const sl_session *s = c->session;
    if (now_pol == c->pol)
        return sl_session_expired(s, now);
    /* A reload: the session must still be there, with the same token, and
     * not expired by the new file (which may have moved its expiry). */
    const sl_session *n = sl_policy_session(now_pol, s->name, s->name_len);
    return !n || memcmp(n->token_sha256, s->token_sha256, sizeof s->token_sha256) != 0 ||
           sl_session_expired(n, now);
}

void session_sweep(worker *w)
{
    sl_policy *now_pol = sl_shared_policy();
    time_t now = time(NULL);
    /* conn_close_now frees the connection it is given. */
    for (conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->session && revoked(c, now_pol, now))
            conn_close_now(c, "session_revoked");
    }
    sl_policy_unref(now_pol);
}

sl_match_result conn_match(const conn *c, const sl_entry **rule)
{
    const sl_policy *p = c->pol;
    sl_match_result m = sl_allowlist_match(p->allow, &c->x.host, c->x.port, c->x.is_connect, &p->connect_ports,
                                           &p->http_ports, rule);
    const sl_allowlist *own = c->session ? c->session->allow : NULL;
    if (!own)
        return m;
    const sl_entry *r2 = NULL;
    sl_match_result m2 = sl_allowlist_match(own, &c->x.host, c->x.port, c->x.is_connect, &p->connect_ports,
                                            &p->http_ports, &r2);
    /* As one list, the global one first: request rules in either make the
     * host inspected (rules narrow, a plain entry in the other list allows
     * nothing more); otherwise a plain entry in either allows it. */
    if (m == SL_MATCH_INSPECTED)
        return m;
    if (m2 == SL_MATCH_INSPECTED || (m != SL_MATCH_ALLOWED && m2 == SL_MATCH_ALLOWED)) {
        *rule = r2;
        return m2;
    }
    if (m == SL_MATCH_ALLOWED || m == SL_MATCH_PORT_NOT_ALLOWED)
        return m;
    *rule = r2;
    return m2;
}

sl_match_result conn_match_request(const conn *c, bool tls, const char *path, size_t len, const sl_entry **rule)
{
    const sl_policy *p = c->pol;
    sl_match_result m = sl_allowlist_match_request(p->allow, &c->x.host, c->x.port, tls, &p->connect_ports,
                                                   &p->http_ports, c->x.method_text, path, len, rule);
    const sl_allowlist *own = c->session ? c->session->allow : NULL;
    if (m == SL_MATCH_ALLOWED || !own)
        return m;
    return sl_allowlist_match_request(own, &c->x.host, c->x.port, tls, &p->connect_ports, &p->http_ports,
                                      c->x.method_text, path, len, rule);
}
