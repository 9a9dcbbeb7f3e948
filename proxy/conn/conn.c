/* Connection lifecycle: accept, state changes, the free rule, dispatching
 * stream events, the timer, the decision log lines, refusals and the one
 * close path. */
#include "conn.h"

#include <assert.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connect.h"
#include "credentials.h"
#include "crypto.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "relay.h"
#include "sessions.h"
#include "tls_sni.h"

_Static_assert(CONN_READ_AHEAD > SL_HTTP_MAX_HEAD && CONN_READ_AHEAD >= 2 * SL_SNI_MAX_BYTES,
               "a client's read-ahead must hold a whole head or ClientHello");

static const char *const state_names[] = {
    [CS_HEAD] = "head", [CS_RESOLVING] = "resolving", [CS_CONNECTING] = "connecting",
    [CS_SNI] = "sni", [CS_TUNNEL] = "tunnel", [CS_TLS] = "tls", [CS_FORWARD] = "forward",
    [CS_CLOSING] = "closing", [CS_CLOSED] = "closed",
};

/* Legal transitions; anything else is a bug, and the gate stops rather
 * than run a connection in a state nobody reasoned about. */
static bool legal(conn_state from, conn_state to)
{
    switch (to) {
    case CS_HEAD:       return from == CS_FORWARD || from == CS_HEAD || from == CS_TLS;
    case CS_RESOLVING:  return from == CS_HEAD;
    case CS_CONNECTING: return from == CS_HEAD || from == CS_RESOLVING || from == CS_FORWARD;   /* a retry */
    case CS_SNI:        return from == CS_CONNECTING;
    case CS_TUNNEL:     return from == CS_CONNECTING || from == CS_SNI;
    case CS_TLS:        return from == CS_SNI || from == CS_CONNECTING;
    case CS_FORWARD:    return from == CS_CONNECTING || from == CS_RESOLVING || from == CS_HEAD ||
                               from == CS_TLS;
    case CS_CLOSING:    return from != CS_TUNNEL && from != CS_CLOSING && from != CS_CLOSED;
    case CS_CLOSED:     return from != CS_CLOSED;
    }
    return false;
}

void conn_set_state(conn *c, conn_state to)
{
    assert(c->magic == CONN_MAGIC);
    if (!legal(c->state, to)) {
        fprintf(stderr, "sluice: BUG: connection %s: illegal state change %s -> %s\n", c->x.id,
                state_names[c->state], state_names[to]);
        abort();
    }
    c->state = to;
}

double conn_ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) * 1e3 + (double)(now.tv_nsec - t->tv_nsec) / 1e6;
}

void conn_touch(conn *c)
{
    clock_gettime(CLOCK_MONOTONIC_COARSE, &c->last_active);
}

/* ---- the free rule ---- */

static void conn_free(conn *c);

void conn_enter(conn *c)
{
    assert(c->magic == CONN_MAGIC);
    c->depth++;
}

/* What each side should be read for, derived from the state every time a
 * callback leaves, rather than switched on and off along the way. */
static void refresh_interest(conn *c)
{
    bool cli = false, up = false;
    switch (c->state) {
    case CS_HEAD:
    case CS_RESOLVING:
    case CS_CONNECTING:
        /* What the client sends meanwhile (bytes ahead of a tunnel, a
         * body, the next request) waits in its buffer, under in_max. */
        cli = true;
        up = c->fx == FX_IDLE;   /* an idle origin is watched: one byte and it goes */
        break;
    case CS_SNI:
        cli = true;
        break;
    case CS_TLS:
        /* A handshake reads as it needs; a kept origin is watched. */
        cli = true;
        up = c->up != NULL;
        break;
    case CS_FORWARD:
        exchange_interest(c, &cli, &up);
        break;
    case CS_CLOSING:
        cli = c->x.lingering;    /* discarding what still comes, once the reply is out */
        break;
    case CS_TUNNEL:
    case CS_CLOSED:
        return;
    }
    if (c->cli) {
        c->cli->want_read = cli;
        sl_stream_update(c->cli);
    }
    if (c->up) {
        c->up->want_read = up;
        sl_stream_update(c->up);
    }
}

void conn_leave(conn *c)
{
    assert(c->magic == CONN_MAGIC && c->depth > 0);
    if (--c->depth > 0)
        return;
    if (c->state == CS_CLOSED)
        conn_free(c);   /* the one place a connection is freed */
    else
        refresh_interest(c);
}

/* ---- the timer ---- */

static void log_wait_end(conn *c);
static void closing_send(conn *c);

static void on_timeout(conn *c)
{
    switch (c->state) {
    case CS_HEAD:
        if (evbuffer_get_length(c->cli->in) == 0 && c->nexchanges > 0) {
            conn_close(c, "idle_timeout");   /* a keep-alive client that sent nothing more */
            return;
        }
        if (c->in)
            c->in->n++;   /* a request was begun: its line has the next n */
        conn_refuse(c, 408, "bad_request", "The request head did not arrive within %d ms.",
                    c->pol->header_ms);
        return;
    case CS_RESOLVING:
        return;   /* the DNS waiter has its own deadline */
    case CS_CONNECTING: {
        char a[SL_ADDR_STRLEN];
        if (c->x.connector)
            c->x.addr = *sl_connect_last(c->x.connector);
        conn_cancel_connect(c);
        conn_refuse(c, 504, "connect_timeout", "Connecting to %s (last tried %s) port %d took longer than %d ms.",
                    c->x.host.name, sl_addr_format(&c->x.addr, a, sizeof a), c->x.port, c->pol->connect_ms);
        return;
    }
    case CS_SNI:
        conn_log_decision(c, false, "sni_mismatch", "no TLS ClientHello within header_ms");
        conn_finish(c, "refused");
        return;
    case CS_TLS:
        inspect_on_timeout(c);
        return;
    case CS_TUNNEL:
    case CS_FORWARD: {
        /* A peer that reads slowly but steadily is not idle: bytes written
         * since the last look count as activity (the relay stamps its own). */
        if (c->state == CS_FORWARD) {
            uint64_t w = c->cli->written + (c->up ? c->up->written : 0);
            if (w != c->idle_written) {
                c->idle_written = w;
                conn_touch(c);
            }
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        long idle = (now.tv_sec - c->last_active.tv_sec) * 1000 +
                    (now.tv_nsec - c->last_active.tv_nsec) / 1000000;
        if (idle >= c->pol->idle_ms) {
            if (c->state == CS_FORWARD)
                exchange_on_timeout(c);
            else
                conn_close(c, "idle_timeout");
            return;
        }
        /* Activity only stamps a time; the timer catches up lazily. */
        conn_timer(c, c->pol->idle_ms - (int)idle);
        return;
    }
    case CS_CLOSING:
        if (c->log_waiting) {
            /* A log this slow that is not failing yet: the line is queued,
             * on its way; the client has waited long enough. */
            log_wait_end(c);
            conn_timer(c, c->pol->header_ms);
            closing_send(c);
            return;
        }
        conn_close(c, c->x.finishing ? c->x.finishing : "refused");
        return;
    case CS_CLOSED:
        return;
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn *c = arg;
    conn_enter(c);
    if (c->kicked) {
        /* A waiting request's turn (conn_kick); the timer then goes back
         * to the deadline it was given meanwhile. */
        c->kicked = false;
        conn_timer(c, c->timer_ms);
        if (c->state == CS_HEAD)
            conn_on_head(c);
    } else {
        on_timeout(c);
    }
    conn_leave(c);
}

void conn_timer(conn *c, int ms)
{
    c->timer_ms = ms;
    if (c->kicked)
        return;   /* the kick re-arms it with this */
    if (ms <= 0) {
        evtimer_del(c->timer);
        return;
    }
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(c->timer, &tv);
}

void conn_kick(conn *c)
{
    if (c->kicked)
        return;
    c->kicked = true;
    static const struct timeval now = { 0, 0 };
    evtimer_add(c->timer, &now);
}

/* ---- ids and log lines ---- */

/* The client and rule texts are made by hand (sl_fmt_uint): snprintf cost
 * more than the rest of an accept. */

/* "addr:port" or "[addr]:port". */
static void format_client(char *out, size_t cap, const char *addr, bool v6, int port)
{
    size_t n = strlen(addr);
    if (n + 16 > cap) {
        snprintf(out, cap, v6 ? "[%s]:%d" : "%s:%d", addr, port);
        return;
    }
    char *p = out;
    if (v6)
        *p++ = '[';
    memcpy(p, addr, n);
    p += n;
    if (v6)
        *p++ = ']';
    *p++ = ':';
    sl_fmt_uint(p, (unsigned)port);
}

static void new_id(conn *c)
{
    /* xorshift64*: ids need to be unique in a month of logs, not secret. */
    uint64_t x = c->w->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->w->rng = x;
    x *= 0x2545F4914F6CDD1DULL;
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, x >>= 4)
        c->x.id[i] = hex[x & 15];
    c->x.id[16] = '\0';
}

static void json_common(sl_json *j, char *ts, const char *event, const conn *c)
{
    sl_log_timestamp(ts, 40);
    sl_json_cstr(j, "ts", ts);
    sl_json_cstr(j, "event", event);
    sl_json_cstr(j, "id", c->x.id);
    if (c->session)   /* every line a session causes (SPEC part 2) */
        sl_json_cstr(j, "session", c->session->name);
}

/* "FILE:LINE" of an entry. */
static const char *rule_text(const sl_entry *e, char *rule, size_t cap)
{
    size_t n = strlen(e->file);
    if (n + 16 > cap)
        n = cap - 16;   /* cut; a file name is never this long */
    memcpy(rule, e->file, n);
    rule[n] = '\0';
    if (e->line > 0) {
        rule[n] = ':';
        sl_fmt_uint(rule + n + 1, (unsigned)e->line);
    }
    return rule;
}

/* Whether the exchange is a request inside an inspected tunnel: its lines
 * are `request` lines (SPEC), one per request, written when it ends (or
 * when it is refused). */
static bool in_tunnel(const conn *c) { return c->in && !c->x.is_connect; }

/* The fields of a request to an inspected host (plain HTTP or in a tunnel). */
static void json_request_fields(sl_json *j, const conn *c)
{
    if (c->x.path) {
        size_t n = strlen(c->x.path);
        sl_json_str(j, "path", c->x.path, n < 1024 ? n : 1024);   /* SPEC: at most 1,024 bytes */
    }
    if (c->x.cred)
        sl_json_cstr(j, "credential", c->x.cred->name);
    if (c->x.suggest && *c->x.suggest)
        sl_json_cstr(j, "suggest", c->x.suggest);
}

/* A pinned body that failed its digest: what the rule wanted, what came. */
static void json_pin_fields(sl_json *j, const conn *c)
{
    if (c->x.expected)
        sl_json_cstr(j, "expected", c->x.expected);
    if (c->x.expected_more)
        sl_json_int(j, "expected_more", (long long)c->x.expected_more);
    if (c->x.actual)
        sl_json_cstr(j, "actual", c->x.actual);
}

/* A request line of an inspected tunnel. */
static uint64_t log_request_line(conn *c, bool allow, const char *reason, const char *detail, const char *end)
{
    char buf[8192], ts[40], rule[300];
    sl_json j;
    sl_json_begin(&j, buf, sizeof buf);
    json_common(&j, ts, "request", c);
    sl_json_int(&j, "n", c->in->n);
    sl_json_cstr(&j, "method", c->x.method_text);
    sl_json_str(&j, "host", c->x.host.name, c->x.host.len);
    if (c->x.path)
        json_request_fields(&j, c);
    else if (c->x.suggest && *c->x.suggest)
        sl_json_cstr(&j, "suggest", c->x.suggest);
    sl_json_cstr(&j, "decision", allow ? "allow" : "deny");
    sl_json_cstr(&j, "reason", reason);
    if ((allow || c->x.verdict) && c->x.rule)   /* a pinned body refused: the rule that pins it */
        sl_json_cstr(&j, "rule", rule_text(c->x.rule, rule, sizeof rule));
    if (c->x.status)
        sl_json_int(&j, "status", c->x.status);
    sl_json_int(&j, "bytes_up", (long long)c->x.bytes_up);
    sl_json_int(&j, "bytes_down", (long long)c->x.bytes_down);
    sl_json_ms(&j, "duration_ms", conn_ms_since(&c->x.t_start));
    if (end && strcmp(end, "done") != 0)
        sl_json_cstr(&j, "end", end);
    json_pin_fields(&j, c);
    if (detail && *detail)
        sl_json_cstr(&j, "detail", detail);
    sl_metrics_request(allow, reason);
    if (c->session)
        sl_metrics_session_decision(c->session->metrics_slot, allow);
    c->in->bytes_up += c->x.bytes_up;
    c->in->bytes_down += c->x.bytes_down;
    return sl_log_line_in(conn_log_stream(c), buf, sl_json_open_len(&j));
}

uint64_t conn_log_decision(conn *c, bool allow, const char *reason, const char *detail)
{
    if (in_tunnel(c)) {
        /* An allowed request's line is written when it ends, with its
         * status and bytes; a refusal's now. */
        c->x.decided = true;
        if (allow) {
            c->x.allowed = true;
            clock_gettime(CLOCK_MONOTONIC, &c->x.t_allowed);
            return 0;
        }
        return log_request_line(c, false, reason, detail, NULL);
    }
    char buf[8192], ts[40], a[SL_ADDR_STRLEN], rule[300];
    sl_json j;
    sl_json_begin(&j, buf, sizeof buf);
    json_common(&j, ts, "decision", c);
    sl_json_cstr(&j, "client", c->client);
    if (c->x.auth == AUTH_FAILED && c->x.claimed[0] && !(c->session && strcmp(c->x.claimed, c->session->name) == 0))
        sl_json_cstr(&j, "session_claimed", c->x.claimed);   /* the name only, never the token */
    sl_json_cstr(&j, "method", c->x.method_text);
    sl_json_str(&j, "host", c->x.host.name, c->x.host.len);
    sl_json_int(&j, "port", c->x.port > 0 ? c->x.port : 0);
    sl_json_cstr(&j, "decision", allow ? "allow" : "deny");
    sl_json_cstr(&j, "reason", reason);
    if (c->x.rule)
        sl_json_cstr(&j, "rule", rule_text(c->x.rule, rule, sizeof rule));
    json_request_fields(&j, c);
    if (c->x.addr.family)
        sl_json_cstr(&j, "addr", sl_addr_format(&c->x.addr, a, sizeof a));
    if (c->x.dns_done)
        sl_json_ms(&j, "dns_ms", c->x.dns_ms);
    if (c->x.connect_done && allow)
        sl_json_ms(&j, "connect_ms", c->x.connect_ms);
    if (c->x.sni)
        sl_json_cstr(&j, "sni", c->x.sni);
    if (detail && *detail)
        sl_json_cstr(&j, "detail", detail);
    sl_metrics_decision(allow, reason);
    if (c->session)
        sl_metrics_session_decision(c->session->metrics_slot, allow);
    c->x.decided = true;
    /* A refusal's reply waits for this ticket (conn_refuse). */
    uint64_t ticket = sl_log_line_in(conn_log_stream(c), buf, sl_json_open_len(&j));
    if (allow) {
        c->x.allowed = true;
        clock_gettime(CLOCK_MONOTONIC, &c->x.t_allowed);
    }
    return ticket;
}

void conn_log_close(conn *c, const char *end)
{
    if (!c->x.allowed)
        return;   /* one close line per allowed exchange */
    if (in_tunnel(c)) {
        if (c->x.verdict)   /* a pinned body refused after it was allowed */
            log_request_line(c, false, c->x.verdict, c->x.end_detail, end);
        else
            log_request_line(c, true, c->x.rule && sl_entry_is_rule(c->x.rule) ? "rule" : "allowlisted", NULL,
                             end);
        c->x.allowed = false;
        return;
    }
    conn_log_close_line(c, c->x.bytes_up, c->x.bytes_down, &c->x.t_allowed, end);
    c->x.allowed = false;
}

void conn_log_close_line(conn *c, uint64_t up, uint64_t down, const struct timespec *since, const char *end)
{
    char buf[8192], ts[40];   /* a pinned body's digests may be in it */
    sl_json j;
    sl_json_begin(&j, buf, sizeof buf);
    json_common(&j, ts, "close", c);
    sl_json_int(&j, "bytes_up", (long long)up);
    sl_json_int(&j, "bytes_down", (long long)down);
    sl_json_ms(&j, "duration_ms", conn_ms_since(since));
    sl_json_cstr(&j, "end", end);
    if (c->x.verdict && !c->in) {
        /* plain HTTP: the decision line said allow before the body came */
        char rule[300];
        sl_json_cstr(&j, "reason", c->x.verdict);
        if (c->x.rule)
            sl_json_cstr(&j, "rule", rule_text(c->x.rule, rule, sizeof rule));
        if (c->x.status)
            sl_json_int(&j, "status", c->x.status);
        json_pin_fields(&j, c);
    }
    if (c->x.end_detail)
        sl_json_cstr(&j, "detail", c->x.end_detail);
    sl_metrics_bytes(up, down);
    sl_log_line_in(conn_log_stream(c), buf, sl_json_open_len(&j));
}

/* ---- closing: the reply first, then a linger, then the close ---- */

/* Send what is queued, then shut the write side and read (and discard)
 * until the client closes or a short deadline: closing with unread input
 * would make the kernel send a reset that can destroy the reply before the
 * client reads it. */
#define LINGER_MS 2000

static void linger_if_flushed(conn *c)
{
    if (c->x.lingering || !sl_stream_flushed(c->cli))
        return;   /* a TLS stream's last records may still wait for the socket */
    c->x.lingering = true;
    if (c->x.abrupt)   /* a FIN and no close_notify: the end the client would have seen from the origin */
        shutdown(sl_stream_fd(c->cli), SHUT_WR);
    else
        sl_stream_shutdown(c->cli);
    evbuffer_drain(c->cli->in, evbuffer_get_length(c->cli->in));
    if (c->cli->eof) {   /* the client has already closed its side: nothing to wait for */
        conn_close(c, c->x.finishing);
        return;
    }
    conn_timer(c, LINGER_MS);
}

/* ---- a refusal waits for its log line ----
 *
 * A refusal's reply is sent only once its decision line is written
 * (sl_log_written), unless the log is failing: then the line waits in
 * memory and the reply goes at once. Meanwhile the reply sits unsent in the
 * client's output and the connection is on its worker's log_waiters list;
 * the log's progress callback wakes the worker (worker_log_progress),
 * which calls conn_release_log_waiters. The closing timer (header_ms)
 * bounds the wait as well. */

static void log_wait_end(conn *c)
{
    if (!c->log_waiting)
        return;
    worker *w = c->w;
    if (c->log_prev)
        c->log_prev->log_next = c->log_next;
    else if (w->log_waiters == c)
        w->log_waiters = c->log_next;
    if (c->log_next)
        c->log_next->log_prev = c->log_prev;
    c->log_prev = c->log_next = NULL;
    c->log_waiting = false;
    atomic_fetch_sub(&w->nlog_waiters, 1);
}

/* Whether the reply must wait: if so, c is now on the list. */
static bool wait_for_log(conn *c, uint64_t ticket)
{
    sl_log_stream *ls = conn_log_stream(c);
    if (sl_log_written_in(ls, ticket))
        return false;
    worker *w = c->w;
    c->log_ticket = ticket;
    c->log_waiting = true;
    c->log_prev = NULL;
    c->log_next = w->log_waiters;
    if (w->log_waiters)
        w->log_waiters->log_prev = c;
    w->log_waiters = c;
    /* Counted before asking again: either the writer sees the count and
     * wakes us, or we see what it wrote (both sequentially consistent). */
    atomic_fetch_add(&w->nlog_waiters, 1);
    if (sl_log_written_in(ls, ticket) || sl_log_failing_in(ls, NULL, 0)) {
        log_wait_end(c);
        return false;
    }
    return true;
}

/* What is queued for the client goes out, then the linger. */
static void closing_send(conn *c)
{
    sl_stream_flush(c->cli);
    linger_if_flushed(c);
}

void conn_release_log_waiters(worker *w)
{
    if (!w->log_waiters)
        return;
    for (conn *c = w->log_waiters, *next; c; c = next) {
        next = c->log_next;
        sl_log_stream *ls = conn_log_stream(c);
        if (sl_log_failing_in(ls, NULL, 0) || sl_log_written_in(ls, c->log_ticket)) {
            conn_enter(c);
            log_wait_end(c);
            closing_send(c);
            conn_leave(c);
        }
    }
}

/* conn_finish, and for a refusal (ticket > 0) not before its line is
 * written. */
static void finish_after_log(conn *c, const char *end, uint64_t ticket)
{
    if (!conn_live(c) || c->state == CS_CLOSING)
        return;
    conn_log_close(c, end);
    if (c->x.dns) {
        sl_dns_cancel(c->x.dns);
        c->x.dns = NULL;
    }
    conn_cancel_connect(c);
    exchange_drop_origin(c);
    if (c->cli->error) {
        conn_close(c, end);   /* nobody to reply to */
        return;
    }
    conn_set_state(c, CS_CLOSING);
    c->x.finishing = end;
    conn_timer(c, c->pol->header_ms);   /* a client that does not read its reply */
    if (!wait_for_log(c, ticket))
        closing_send(c);
}

void conn_finish(conn *c, const char *end)
{
    finish_after_log(c, end, 0);
}

bool conn_allow(conn *c)
{
    return conn_allow_as(c, c->x.rule && sl_entry_is_rule(c->x.rule) ? "rule" : "allowlisted");
}

bool conn_allow_as(conn *c, const char *reason)
{
    char why[256];
    /* The log may have failed since the request was first checked (DNS and
     * connecting take time): a gate that cannot record makes no allow. */
    if (sl_log_failing_in(conn_log_stream(c), why, sizeof why)) {
        conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", why);
        return false;
    }
    conn_log_decision(c, true, reason, NULL);
    if (c->cli->error) {   /* the client went away while this was decided */
        conn_close(c, "client_error");
        return false;
    }
    return true;
}

void conn_refuse(conn *c, int status, const char *reason, const char *fmt, ...)
{
    if (!conn_live(c) || c->state == CS_CLOSING)
        return;
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);

    c->x.status = status;
    if (c->x.allowed && !in_tunnel(c)) {
        /* After its allow line (a retry's new origin connection failed):
         * the request's close line says how it ended. */
        c->x.end_detail = detail;
        sl_reply_error(c->cli->out, status, detail);
        conn_finish(c, reason);
        c->x.end_detail = NULL;
        return;
    }
    c->x.allowed = false;   /* in a tunnel, the request's one line is this refusal */
    uint64_t ticket = conn_log_decision(c, false, reason, detail);
    sl_reply_refusal(c->cli->out, status, reason, detail);
    finish_after_log(c, "refused", ticket);
}

static void closing_on_client(conn *c, sl_stream_event ev)
{
    switch (ev) {
    case SL_STREAM_READ:
        evbuffer_drain(c->cli->in, evbuffer_get_length(c->cli->in));
        return;
    case SL_STREAM_DRAINED:
        linger_if_flushed(c);
        return;
    case SL_STREAM_EOF:
        /* A client may half-close and still read its reply. */
        if (c->x.lingering)
            conn_close(c, c->x.finishing);
        return;
    case SL_STREAM_ERROR:
        conn_close(c, c->x.finishing);
        return;
    case SL_STREAM_READY:
        return;   /* TLS streams only, handled before this state */
    }
}

/* ---- accept and close ---- */

void conn_accept(worker *w, int fd, const struct sockaddr *sa, int salen)
{
    (void)salen;
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        atomic_fetch_sub(&g_shared.clients, 1);
        return;
    }
    c->magic = CONN_MAGIC;
    c->w = w;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    c->pol_published = atomic_load(&g_shared.published);   /* before: a reload between only refreshes once more */
    c->pol = sl_shared_policy();
    c->state = CS_HEAD;
    sl_addr a;
    int port;
    char as[SL_ADDR_STRLEN];
    sl_addr_from_sockaddr(sa, &a, &port);
    sl_addr_format(&a, as, sizeof as);
    format_client(c->client, sizeof c->client, as, a.family == AF_INET6, port);
    new_id(c);
    clock_gettime(CLOCK_MONOTONIC, &c->x.t_start);

    conn_enter(c);
    /* TCP_NODELAY comes from the listening socket (Linux copies it to
     * accepted ones): no setsockopt per client. */
    c->cli = sl_stream_socket(w->base, fd, CONN_READ_AHEAD, conn_on_stream, c);
    c->timer = evtimer_new(w->base, on_timer, c);
    if (!c->cli || !c->timer) {
        conn_close(c, "out_of_memory");
        conn_leave(c);
        return;
    }
    conn_timer(c, c->pol->header_ms);

    /* Over max_clients, or the log cannot be written: refuse with 503. A
     * gate that cannot record decisions makes none (it fails closed). */
    char why[256];
    bool full = atomic_load(&g_shared.clients) > c->pol->max_clients;
    if (full || sl_log_failing(why, sizeof why)) {
        snprintf(c->x.method_text, sizeof c->x.method_text, "-");
        if (full)
            conn_refuse(c, 503, "too_many_clients", "The gate already serves %d clients (max_clients).",
                        c->pol->max_clients);
        else
            conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", why);
    }
    conn_leave(c);   /* reading starts here, from the state */
}

void conn_close(conn *c, const char *end)
{
    assert(c->magic == CONN_MAGIC && c->depth > 0);
    if (c->state == CS_CLOSED)
        return;
    log_wait_end(c);
    if (c->x.head_parsed && !c->x.decided) {
        /* Closed while its request was still being decided (the gate
         * stopping, out of memory): the request was made, so it is logged,
         * refused for that cause. */
        char detail[200];
        snprintf(detail, sizeof detail, "The connection was closed (%s) before the request was decided.", end);
        conn_log_decision(c, false, end, detail);
    }
    conn_log_close(c, end);
    if (c->in)
        inspect_log_close(c, end);
    if (c->state == CS_TUNNEL)
        sl_metrics_tunnel(-1);
    if (c->x.dns) {
        sl_dns_cancel(c->x.dns);
        c->x.dns = NULL;
    }
    conn_cancel_connect(c);
    c->kicked = false;
    if (c->timer)
        evtimer_del(c->timer);
    /* No more events: the streams' and the relay's are stopped here, and
     * everything is freed when the outermost callback leaves. */
    relay_stop(c);
    if (c->cli) {
        c->cli->want_read = false;
        sl_stream_update(c->cli);
    }
    if (c->up) {
        c->up->want_read = false;
        sl_stream_update(c->up);
    }
    conn_set_state(c, CS_CLOSED);
}

/* What an exchange owns beyond its up_head. */
static void exchange_free_fields(conn *c)
{
    exchange_release_hold(c);
    if (c->x.retry_head)
        evbuffer_free(c->x.retry_head);
    c->x.retry_head = NULL;
    free(c->x.path);
    sl_pin_free(c->x.pin);
    free(c->x.expected);
    free(c->x.actual);
    c->x.path = c->x.expected = c->x.actual = NULL;
    c->x.pin = NULL;
}

static void conn_free(conn *c)
{
    relay_free(c);
    if (c->x.up_head)
        evbuffer_free(c->x.up_head);
    sl_stream_free(c->up);
    sl_stream_free(c->cli);
    if (c->timer)
        event_free(c->timer);
    free(c->up_name);
    exchange_free_fields(c);
    inspect_free(c);

    worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else if (w->conns == c)
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nconns--;
    sl_policy_unref(c->pol);
    c->magic = 0;
    free(c);
    atomic_fetch_sub(&g_shared.clients, 1);
}

void conn_close_now(conn *c, const char *end)
{
    conn_enter(c);
    conn_close(c, end);
    conn_leave(c);
}

static void set_reset(sl_stream *s)
{
    int fd = s ? sl_stream_fd(s) : -1;
    if (fd >= 0) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
}

void conn_reset(conn *c, const char *end)
{
    set_reset(c->cli);
    set_reset(c->up);
    conn_close(c, end);
}

void conn_drain(conn *c)
{
    conn_enter(c);
    /* A keep-alive client between requests has nothing in flight. */
    if (c->state == CS_HEAD && evbuffer_get_length(c->cli->in) == 0)
        conn_close(c, "shutdown");
    conn_leave(c);
}

void conn_new_exchange(conn *c)
{
    if (c->x.up_head)
        evbuffer_free(c->x.up_head);
    exchange_free_fields(c);
    memset(&c->x, 0, sizeof c->x);
    if (c->in)
        inspect_fill_exchange(c);   /* requests in a tunnel carry its id */
    else
        new_id(c);
    c->scanned = 0;
}

/* ---- stream events: dispatch by state ---- */

static void head_on_client(conn *c, sl_stream_event ev)
{
    switch (ev) {
    case SL_STREAM_READ:
        conn_on_head(c);
        return;
    case SL_STREAM_EOF:
        /* A head cut short by the client's end is no request: nothing to
         * decide. (A whole head with the EOF right behind it was parsed by
         * the READ before.) */
        if (evbuffer_get_length(c->cli->in) > 0)
            conn_on_head(c);
        if (conn_live(c) && c->state == CS_HEAD)
            conn_close(c, "client_eof");
        return;
    case SL_STREAM_ERROR:
        conn_close(c, "client_error");
        return;
    case SL_STREAM_DRAINED:
        /* The previous response's rest went out. */
        if (c->w->draining && evbuffer_get_length(c->cli->in) == 0)
            conn_close(c, "shutdown");
        return;
    case SL_STREAM_READY:
        return;   /* TLS streams only, handled before this state */
    }
}

void conn_on_stream(sl_stream *s, sl_stream_event ev, void *arg)
{
    conn *c = arg;
    conn_enter(c);
    bool from_client = s == c->cli;
    if (!from_client && c->fx == FX_IDLE && ev != SL_STREAM_DRAINED) {
        /* An idle origin must not talk: whatever it sends (or its close)
         * belongs to no request. (Its last bytes, a TLS handshake's,
         * leaving late is no talk.) */
        exchange_drop_origin(c);
        goto out;
    }
    switch (c->state) {
    case CS_HEAD:
        if (from_client)
            head_on_client(c, ev);
        break;
    case CS_RESOLVING:
    case CS_CONNECTING:
        /* Bytes wait in the buffer (bounded by in_max); an EOF is kept in
         * the stream and acted on once the origin is reached: a request
         * (or a tunnel's first bytes) still goes. An error is kept too:
         * the request was made, so its decision is made and logged as for
         * any other (conn_allow and conn_finish then close at once). */
        break;
    case CS_SNI:
        if (from_client)
            tunnel_on_client(c, ev);
        else if (ev == SL_STREAM_ERROR)
            conn_close(c, "origin_error");
        break;
    case CS_TLS:
        inspect_on_stream(c, from_client, ev);
        break;
    case CS_FORWARD:
        exchange_on_stream(c, from_client, ev);
        break;
    case CS_CLOSING:
        if (from_client)
            closing_on_client(c, ev);
        break;
    case CS_TUNNEL:
    case CS_CLOSED:
        break;
    }
out:
    conn_leave(c);
}
