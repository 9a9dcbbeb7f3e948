/* Connection lifecycle: accept, state changes, the timer, the decision log
 * lines, refusals, and the one close path. */
#include "conn.h"

#include <assert.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "relay.h"
#include "tls_sni.h"

_Static_assert(CONN_READ_AHEAD > SL_HTTP_MAX_HEAD && CONN_READ_AHEAD >= 2 * SL_SNI_MAX_BYTES,
               "a client's read-ahead must hold a whole head or ClientHello");

static void on_read(struct bufferevent *bev, void *arg);
static void on_write(struct bufferevent *bev, void *arg);
static void on_event(struct bufferevent *bev, short what, void *arg);
static void refusal_send(conn *c);
static void conn_log_wait_end(conn *c);

static const char *const state_names[] = {
    [CS_HEAD] = "head", [CS_RESOLVING] = "resolving", [CS_CONNECTING] = "connecting",
    [CS_SNI] = "sni", [CS_TUNNEL] = "tunnel", [CS_FORWARD] = "forward",
    [CS_REFUSING] = "refusing",
};

/* Legal transitions; anything else is a bug caught in debug builds. */
static bool legal(conn_state from, conn_state to)
{
    switch (to) {
    case CS_HEAD:       return from == CS_FORWARD || from == CS_HEAD;
    case CS_RESOLVING:  return from == CS_HEAD;
    case CS_CONNECTING: return from == CS_HEAD || from == CS_RESOLVING;
    case CS_SNI:        return from == CS_CONNECTING;
    case CS_TUNNEL:     return from == CS_CONNECTING || from == CS_SNI;
    case CS_FORWARD:    return from == CS_CONNECTING || from == CS_RESOLVING || from == CS_HEAD;
    case CS_REFUSING:   return from != CS_TUNNEL && from != CS_REFUSING;
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

/* ---- the timer ---- */

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn *c = arg;
    assert(c->magic == CONN_MAGIC);
    switch (c->state) {
    case CS_HEAD:
        if (evbuffer_get_length(bufferevent_get_input(c->cli)) == 0 && c->nexchanges > 0) {
            conn_close(c, "idle_timeout");
            return;
        }
        conn_refuse(c, 408, "bad_request", "The request head did not arrive within %d ms.",
                    c->pol->header_ms);
        return;
    case CS_RESOLVING:
        return;   /* the DNS waiter has its own deadline */
    case CS_CONNECTING:
        conn_refuse(c, 504, "connect_timeout", "Connecting to %s port %d took longer than %d ms.",
                    c->x.host.name, c->x.port, c->pol->connect_ms);
        return;
    case CS_SNI:
        conn_log_decision(c, false, "sni_mismatch", "no TLS ClientHello within header_ms");
        conn_linger_close(c);
        return;
    case CS_TUNNEL:
    case CS_FORWARD: {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        long idle = (now.tv_sec - c->last_active.tv_sec) * 1000 +
                    (now.tv_nsec - c->last_active.tv_nsec) / 1000000;
        if (idle >= c->pol->idle_ms) {
            conn_close(c, "idle_timeout");
            return;
        }
        /* Activity only stamps a time; the timer catches up lazily. */
        struct timeval tv = { (c->pol->idle_ms - idle) / 1000, ((c->pol->idle_ms - idle) % 1000) * 1000 };
        evtimer_add(c->timer, &tv);
        return;
    }
    case CS_REFUSING:
        if (c->log_waiting) {
            /* A log this slow that is not failing yet: the line is queued,
             * on its way; the client has waited long enough. */
            conn_log_wait_end(c);
            conn_timer(c, c->pol->header_ms);
            refusal_send(c);
            return;
        }
        conn_close(c, "refused");
        return;
    }
}

/* A new client's first bytes are read here rather than by the
 * bufferevent, which asks the kernel how much is readable (an ioctl)
 * before each read: a syscall per connection that one recv does without.
 * Later reads (the rest of a head sent in pieces, bytes sent ahead, a
 * keep-alive client's next requests) are the bufferevent's. */
#define FIRST_READ 4096

static void on_first_bytes(evutil_socket_t fd, short what, void *arg)
{
    conn *c = arg;
    assert(c->magic == CONN_MAGIC);
    /* The bufferevent's reading goes on before this event comes off, so
     * the socket's epoll entry stays as it is. Then the event becomes the
     * connection's plain timer. */
    bufferevent_enable(c->cli, EV_READ);
    event_del(c->timer);
    event_assign(c->timer, c->w->base, -1, 0, on_timer, c);
    if (!(what & EV_READ)) {
        on_timer(-1, EV_TIMEOUT, c);   /* nothing within header_ms */
        return;
    }
    /* Read into a per-thread buffer and copy: the input buffer then gets a
     * block the size of what came, not of what might have (a client that
     * stalls mid-head holds no more than it sent). */
    static _Thread_local char first[FIRST_READ];
    ssize_t n = recv(fd, first, sizeof first, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_close(c, n == 0 ? "client_eof" : "client_error");
        return;
    }
    if (n > 0) {
        /* A bufferevent's input is closed for adding at its end except
         * while it reads itself; this read stands in for its own. */
        struct evbuffer *in = bufferevent_get_input(c->cli);
        evbuffer_unfreeze(in, 0);
        int added = evbuffer_add(in, first, (size_t)n);
        evbuffer_freeze(in, 0);
        if (added != 0) {
            conn_close(c, "out_of_memory");
            return;
        }
    }
    double left = c->pol->header_ms - conn_ms_since(&c->x.t_start);
    conn_timer(c, left >= 1 ? (int)left : 1);
    if (n > 0)
        conn_on_head(c);
    /* else woken for nothing: the bufferevent reads what comes */
}

void conn_timer(conn *c, int ms)
{
    c->timer_ms = ms;
    if (ms <= 0) {
        evtimer_del(c->timer);
        return;
    }
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(c->timer, &tv);
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
}

uint64_t conn_log_decision(conn *c, bool allow, const char *reason, const char *detail)
{
    char buf[8192], ts[40], a[SL_ADDR_STRLEN], rule[300];
    sl_json j;
    sl_json_begin(&j, buf, sizeof buf);
    json_common(&j, ts, "decision", c);
    sl_json_cstr(&j, "client", c->client);
    sl_json_cstr(&j, "method", c->x.method_text);
    sl_json_str(&j, "host", c->x.host.name, c->x.host.len);
    sl_json_int(&j, "port", c->x.port > 0 ? c->x.port : 0);
    sl_json_cstr(&j, "decision", allow ? "allow" : "deny");
    sl_json_cstr(&j, "reason", reason);
    if (c->x.rule) {
        size_t n = strlen(c->x.rule->file);
        if (n + 16 > sizeof rule)
            n = sizeof rule - 16;   /* cut; a file name is never this long */
        memcpy(rule, c->x.rule->file, n);
        rule[n] = '\0';
        if (c->x.rule->line > 0) {
            rule[n] = ':';
            sl_fmt_uint(rule + n + 1, (unsigned)c->x.rule->line);
        }
        sl_json_cstr(&j, "rule", rule);
    }
    if (c->x.addr.family)
        sl_json_cstr(&j, "addr", sl_addr_format(&c->x.addr, a, sizeof a));
    if (c->x.dns_done)
        sl_json_ms(&j, "dns_ms", c->x.dns_ms);
    if (c->x.sni)
        sl_json_cstr(&j, "sni", c->x.sni);
    if (detail && *detail)
        sl_json_cstr(&j, "detail", detail);
    sl_metrics_decision(allow, reason);
    /* A refusal's reply waits for this ticket (conn_refuse). */
    uint64_t ticket = sl_log_line(buf, sl_json_open_len(&j));
    if (allow) {
        c->x.allowed = true;
        clock_gettime(CLOCK_MONOTONIC, &c->x.t_allowed);
    }
    return ticket;
}

void conn_log_close(conn *c, const char *end)
{
    char buf[1024], ts[40];
    sl_json j;
    sl_json_begin(&j, buf, sizeof buf);
    json_common(&j, ts, "close", c);
    sl_json_int(&j, "bytes_up", (long long)c->x.bytes_up);
    sl_json_int(&j, "bytes_down", (long long)c->x.bytes_down);
    sl_json_ms(&j, "duration_ms", conn_ms_since(&c->x.t_allowed));
    sl_json_cstr(&j, "end", end);
    sl_metrics_bytes(c->x.bytes_up, c->x.bytes_down);
    sl_log_line(buf, sl_json_open_len(&j));
    c->x.allowed = false;   /* one close line per allowed exchange */
}

/* ---- refusals ---- */

/* Send what is queued, then shut the write side and read (and discard)
 * until the client closes or a short deadline: closing with unread input
 * would make the kernel send a reset that can destroy the reply before the
 * client reads it. */
#define LINGER_MS 2000

static void linger_after_flush(conn *c)
{
    if (c->cli_shut || evbuffer_get_length(bufferevent_get_output(c->cli)) > 0)
        return;
    c->cli_shut = true;
    shutdown(bufferevent_getfd(c->cli), SHUT_WR);
    evbuffer_drain(bufferevent_get_input(c->cli), evbuffer_get_length(bufferevent_get_input(c->cli)));
    bufferevent_enable(c->cli, EV_READ);
    conn_timer(c, LINGER_MS);
}

/* What is queued for the client goes out, then the linger. */
static void refusal_send(conn *c)
{
    bufferevent_enable(c->cli, EV_WRITE);
    linger_after_flush(c);
}

/* ---- a refusal waits for its log line ----
 *
 * A refusal's reply is sent only once its decision line is written
 * (sl_log_written), unless the log is failing: then the line waits in
 * memory and the reply goes at once. Meanwhile the reply sits in the
 * client's output with writing off, and the connection is on its worker's
 * log_waiters list; the log's progress callback wakes the worker
 * (worker_log_progress), which calls conn_release_log_waiters. The
 * refusal's timer (header_ms) bounds the wait as well. */

/* Whether the reply must wait: if so, c is now on the list. */
static bool conn_wait_for_log(conn *c, uint64_t ticket)
{
    if (sl_log_written(ticket))
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
    if (sl_log_written(ticket) || sl_log_failing(NULL, 0)) {
        conn_log_wait_end(c);
        return false;
    }
    bufferevent_disable(c->cli, EV_WRITE);
    return true;
}

static void conn_log_wait_end(conn *c)
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

void conn_release_log_waiters(worker *w)
{
    if (!w->log_waiters)
        return;
    bool all = sl_log_failing(NULL, 0);
    for (conn *c = w->log_waiters, *next; c; c = next) {
        next = c->log_next;
        if (all || sl_log_written(c->log_ticket)) {
            conn_log_wait_end(c);
            refusal_send(c);
        }
    }
}

/* Close the client once what is queued for it is sent; with a ticket, not
 * before that log line is written. */
static void linger_close_after_log(conn *c, uint64_t ticket)
{
    if (c->x.dns) {
        sl_dns_cancel(c->x.dns);
        c->x.dns = NULL;
    }
    conn_close_upstream(c);
    conn_set_state(c, CS_REFUSING);
    bufferevent_disable(c->cli, EV_READ);
    bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
    conn_timer(c, c->pol->header_ms);
    if (!conn_wait_for_log(c, ticket))
        refusal_send(c);
}

void conn_linger_close(conn *c)
{
    linger_close_after_log(c, 0);
}

void conn_refuse(conn *c, int status, const char *reason, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);

    uint64_t ticket = conn_log_decision(c, false, reason, detail);
    sl_reply_refusal(bufferevent_get_output(c->cli), status, reason, detail);
    linger_close_after_log(c, ticket);
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

    /* TCP_NODELAY comes from the listening socket (Linux copies it to
     * accepted ones): no setsockopt per client. */
    c->cli = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->cli) {
        close(fd);
        conn_close(c, "out_of_memory");
        return;
    }
    bufferevent_setcb(c->cli, on_read, on_write, on_event, c);
    bufferevent_set_max_single_read(c->cli, 64 * 1024);
    bufferevent_setwatermark(c->cli, EV_READ, 0, CONN_READ_AHEAD);
    /* Writing is enabled where a reply is queued: enabled now, with
     * nothing to write, it would cost an epoll change and a wake-up. */

    /* Over max_clients, or the log cannot be written: refuse with 503. A
     * gate that cannot record decisions makes none (it fails closed). */
    char why[256];
    bool full = atomic_load(&g_shared.clients) > c->pol->max_clients;
    if (full || sl_log_failing(why, sizeof why)) {
        c->timer = evtimer_new(w->base, on_timer, c);
        if (!c->timer) {
            conn_close(c, "out_of_memory");
            return;
        }
        bufferevent_enable(c->cli, EV_READ);
        conn_timer(c, c->pol->header_ms);
        snprintf(c->x.method_text, sizeof c->x.method_text, "-");
        if (full)
            conn_refuse(c, 503, "too_many_clients", "The gate already serves %d clients (max_clients).",
                        c->pol->max_clients);
        else
            conn_refuse(c, 503, "log_unavailable", "The gate cannot write its decision log (%s).", why);
        return;
    }

    /* Until the first bytes come, the timer event also waits for them
     * (on_first_bytes); the head's deadline runs from now. */
    c->timer = event_new(w->base, fd, EV_READ | EV_PERSIST, on_first_bytes, c);
    if (!c->timer) {
        conn_close(c, "out_of_memory");
        return;
    }
    c->timer_ms = c->pol->header_ms;
    struct timeval tv = { c->timer_ms / 1000, (c->timer_ms % 1000) * 1000 };
    event_add(c->timer, &tv);
}

void conn_close(conn *c, const char *end)
{
    assert(c->magic == CONN_MAGIC);
    conn_log_wait_end(c);
    if (c->x.allowed)
        conn_log_close(c, end);
    if (c->state == CS_TUNNEL)
        sl_metrics_tunnel(-1);
    if (c->x.dns)
        sl_dns_cancel(c->x.dns);
    relay_free(c);
    if (c->x.up_head)
        evbuffer_free(c->x.up_head);
    if (c->up)
        bufferevent_free(c->up);
    if (c->cli)
        bufferevent_free(c->cli);
    if (c->timer)
        event_free(c->timer);
    free(c->up_name);

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

void conn_drain(conn *c)
{
    /* A keep-alive client between requests has nothing in flight. */
    if (c->state == CS_HEAD && evbuffer_get_length(bufferevent_get_input(c->cli)) == 0)
        conn_close(c, "shutdown");
}

void conn_attach_upstream(conn *c)
{
    bufferevent_setcb(c->up, on_read, on_write, on_event, c);
    bufferevent_set_max_single_read(c->up, 64 * 1024);
    bufferevent_enable(c->up, EV_READ | EV_WRITE);
}

void conn_new_exchange(conn *c)
{
    if (c->x.up_head)
        evbuffer_free(c->x.up_head);
    memset(&c->x, 0, sizeof c->x);
    new_id(c);
    c->scanned = 0;
    c->cli_paused = c->up_paused = false;
}

/* ---- callbacks: dispatch by state ---- */

static void on_read(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    assert(c->magic == CONN_MAGIC);
    bool from_client = bev == c->cli;
    switch (c->state) {
    case CS_HEAD:
        if (from_client)
            conn_on_head(c);
        else   /* an idle kept-alive origin must not talk */
            conn_close_upstream(c);
        return;
    case CS_SNI:
    case CS_TUNNEL:
        tunnel_on_read(c, from_client);
        return;
    case CS_FORWARD:
        forward_on_read(c, from_client);
        return;
    case CS_REFUSING:
        if (from_client)   /* lingering: discard what the client still sends */
            evbuffer_drain(bufferevent_get_input(c->cli), evbuffer_get_length(bufferevent_get_input(c->cli)));
        return;
    case CS_RESOLVING:
    case CS_CONNECTING:
        return;   /* reading is off; bytes wait in the buffer */
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    assert(c->magic == CONN_MAGIC);
    bool to_client = bev == c->cli;
    switch (c->state) {
    case CS_REFUSING:
        if (to_client)
            linger_after_flush(c);
        return;
    case CS_SNI:      /* the 200 went out; the ClientHello is awaited */
    case CS_TUNNEL:   /* relay.c has the sockets */
        return;
    case CS_FORWARD:
        forward_on_drained(c, to_client);
        return;
    case CS_HEAD:
        /* A response's rest went out after its exchange ended: forward.c
         * writes the next one itself (send_now). */
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            bufferevent_disable(bev, EV_WRITE);
        if (to_client && c->w->draining && evbuffer_get_length(bufferevent_get_output(c->cli)) == 0 &&
            evbuffer_get_length(bufferevent_get_input(c->cli)) == 0)
            conn_close(c, "shutdown");
        return;
    case CS_RESOLVING:
    case CS_CONNECTING:
        return;
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    conn *c = arg;
    assert(c->magic == CONN_MAGIC);
    bool client_side = bev == c->cli;

    if (c->state == CS_CONNECTING && !client_side) {
        if (what & BEV_EVENT_CONNECTED) {
            conn_connected(c);
            return;
        }
        conn_connect_failed(c, what);
        return;
    }
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    bool eof_only = (what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR);

    switch (c->state) {
    case CS_HEAD:
        if (!client_side) {
            conn_close_upstream(c);
            return;
        }
        conn_close(c, eof_only ? "client_eof" : "client_error");
        return;
    case CS_SNI:
    case CS_TUNNEL:
        if (eof_only) {
            tunnel_on_eof(c, client_side);
            return;
        }
        conn_close(c, client_side ? "client_error" : "origin_error");
        return;
    case CS_FORWARD:
        if (eof_only) {
            forward_on_eof(c, client_side);
            return;
        }
        conn_close(c, client_side ? "client_error" : "origin_error");
        return;
    case CS_RESOLVING:
    case CS_CONNECTING:
        if (client_side && eof_only) {
            /* A client may send its request (or a tunnel's first bytes)
             * and half-close before the origin is reached: the request
             * still goes, and the end is passed on after it. */
            c->cli_eof = c->cli_eof_first = true;
            if (!c->x.is_connect)
                c->x.client_close = true;
            return;
        }
        /* fall through */
    case CS_REFUSING:
        if (client_side)
            conn_close(c, eof_only ? "client_eof" : "client_error");
        else
            conn_close_upstream(c);   /* a kept-alive origin went away */
        return;
    }
}
