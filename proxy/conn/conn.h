/* A client connection: one struct, one state machine, one close path, one
 * free point.
 *
 * A connection carries one exchange at a time: a CONNECT tunnel, or one
 * plain-HTTP request and its response (a keep-alive client then starts the
 * next exchange, checked on its own).
 *
 * The free rule (proxy/README.md, "The connection's lifetime"): every
 * function the event loop calls for a connection is one of conn.c's
 * callbacks, which enter the connection, run the steps, and leave it.
 * conn_close() only marks the connection CS_CLOSED and stops its I/O; the
 * memory is freed when the outermost callback leaves. So a step three calls
 * deep may close, and every caller up the stack still holds a valid struct:
 * after a call that can close, a step checks conn_live() to decide whether
 * to go on, and forgetting to is a logic slip, never a use-after-free. */
#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "allowlist.h"
#include "config.h"
#include "dns.h"
#include "http_parse.h"
#include "stream.h"
#include "worker.h"

struct event;
struct sl_connector;
struct sl_credential;
struct sl_pin;
struct sl_session;
struct sl_log_stream;

/* What a request's Proxy-Authorization said (session.c). */
typedef enum auth_verdict {
    AUTH_OFF,        /* the gate has no sessions: the header is not read */
    AUTH_ANONYMOUS,  /* none sent, and none needed ([sessions] require = no) */
    AUTH_OK,         /* a session's, and the connection's (conn.session) */
    AUTH_MISSING,    /* none sent, and one needed: 407 auth_required */
    AUTH_FAILED,     /* wrong, garbled, expired, or another session's: 407 auth_failed */
} auth_verdict;

/* An inspected tunnel: what lasts across the requests inside it (each is
 * an exchange of its own, in conn.x). inspect.c. */
typedef struct inspect {
    char id[17];                  /* the tunnel's id: every request line carries it */
    sl_host host;
    int port;
    sl_addr addrs[SL_DNS_MAX_ADDRS];   /* vetted for the CONNECT; requests reconnect to these only */
    size_t naddrs;
    const sl_entry *rule;         /* the first rule covering the host */
    char sni[256];                /* the ClientHello's name, for the CONNECT's decision line (logged later) */
    int n;                        /* requests read so far */
    enum { IN_UPSTREAM, IN_CLIENT, IN_REQUESTS } phase;   /* whose handshake CS_TLS waits for */
    bool client_ready;            /* the client's handshake is done */
    bool allowed;                 /* the CONNECT's allow line is logged: a close line follows */
    struct timespec t_allowed;
    uint64_t bytes_up, bytes_down;   /* all requests' so far */
    char upstream_failure[200];   /* the origin's TLS failed: each request gets 502 */
} inspect;

#define CONN_MAGIC 0x5c0ca11eu

/* The most a side's input buffer holds before reading pauses: room for the
 * largest request or response head or ClientHello, and for what a client
 * sends ahead while its request is decided and connected. */
#define CONN_READ_AHEAD (64 * 1024)

/* Backpressure: bytes are moved toward a side only while fewer than this
 * wait to be written to it. */
#define CONN_OUT_HIGH (256 * 1024)

typedef enum conn_state {
    CS_HEAD,         /* reading a request head */
    CS_RESOLVING,    /* waiting for DNS */
    CS_CONNECTING,   /* connecting to the vetted addresses */
    CS_SNI,          /* tunnel to 443: 200 sent, waiting for the ClientHello */
    CS_TUNNEL,       /* relaying bytes both ways (relay.c) */
    CS_TLS,          /* an inspected tunnel's TLS handshakes (inspect.c): the origin's,
                        then the client's; or a new origin connection's, for a request */
    CS_FORWARD,      /* plain HTTP: an exchange (sub-state in x.fx) */
    CS_CLOSING,      /* what is queued (a refusal, sluice's own error reply, the
                        last response) is written, then a linger, then the close */
    CS_CLOSED,       /* closed: freed when the outermost callback leaves */
} conn_state;

/* The plain-HTTP exchange, and the origin connection it uses (exchange.c).
 * Checked like conn_state: exchange_set(). */
typedef enum fx_state {
    FX_NONE,         /* no origin connection */
    FX_REQUEST,      /* sending the request; no final response head yet */
    FX_AWAIT,        /* the request is sent whole; awaiting the final head (1xx pass) */
    FX_RESPONSE,     /* relaying the final response's body */
    FX_FLUSH,        /* the exchange is over; the client is closed once it has it all */
    FX_IDLE,         /* between exchanges: the origin connection is kept alive */
} fx_state;

typedef enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE } body_kind;

typedef struct body {
    body_kind kind;
    uint64_t remaining;   /* BODY_LENGTH */
    sl_chunked chunked;   /* BODY_CHUNKED */
    bool done;
} body;

/* The exchange under way. Reset between keep-alive requests. */
typedef struct exchange {
    char id[17];
    struct timespec t_start;      /* head complete */
    struct timespec t_allowed;    /* decision made: allow */
    struct timespec t_connect;    /* connecting began */
    sl_http_method method;
    char method_text[24];
    bool is_connect;
    sl_host host;
    int port;
    const sl_entry *rule;         /* lives as long as conn->pol */
    sl_addr addrs[SL_DNS_MAX_ADDRS];   /* the vetted addresses to connect to */
    size_t naddrs;
    sl_addr addr;                 /* the address connected to (or refused) */
    double dns_ms, connect_ms;
    bool dns_done, connect_done;
    sl_dns_wait *dns;
    struct sl_connector *connector;
    bool head_parsed;             /* a whole request head: it gets a decision line */
    bool decided;                 /* its decision line was logged */
    bool allowed;                 /* an allow decision was logged */
    uint64_t bytes_up, bytes_down;
    const char *sni;              /* the ClientHello's name, while its decision is logged */

    /* plain HTTP */
    struct evbuffer *up_head;     /* the rewritten request head, until it is sent */
    body req, resp;
    bool req_abandoned;           /* an early response: the rest of the body is not sent */
    bool final_head;              /* the final response head is queued to the client */
    uint64_t final_at;            /* where it starts in the client stream (cli->written units) */
    bool client_close;            /* close the client after this exchange */
    bool client_http10;
    bool resp_close;              /* the origin won't keep the connection */
    const char *finishing;        /* CS_CLOSING: the end the connection closes with */

    /* request rules (plain HTTP to an inspected host, requests in a tunnel) */
    bool inspected;               /* CONNECT to an inspected host: TLS on both sides */
    char *path;                   /* the target's path without its query (malloc'd), for the log */
    const struct sl_credential *cred;   /* set on the request sent upstream (TLS only) */
    const char *suggest;          /* a refusal's line that would allow it, while it is logged */
    int status;                   /* the final response's status (or sluice's own) */
    const char *end_detail;       /* why it ended, for the close line (a TLS failure) */
    bool lingering;               /* CS_CLOSING: the reply is out; discarding input */
    bool abrupt;                  /* the body ended at an origin's close without a TLS close_notify:
                                     the client's connection ends without one too */

    /* pinned artifacts (SPEC part 2): the body of a 2xx to a GET rule with digests */
    struct sl_pin *pin;           /* hashing the response body as it streams */
    const char *verdict;          /* "integrity_mismatch", "integrity_unverifiable": the
                                     request's line is a refusal with this reason */
    char *expected, *actual;      /* a mismatch: the rule's digests and the body's (malloc'd) */
    size_t expected_more;         /* the rule's digests that did not fit in expected */
    struct evbuffer *pin_held;    /* a pinned body held whole until its digest is known (exchange.c) */
    size_t pin_reserved;          /* its bytes, counted in the gate-wide budget until the exchange ends */

    /* A request sent on a kept origin connection, which the origin may
     * have closed as it went (its idle timeout): when the origin ends
     * before any byte of a response, an idempotent request without a body
     * is sent once more on a new connection (RFC 9112 9.3.1). */
    bool reused;                  /* x goes on a kept origin connection */
    bool retrying;                /* the second try: allowed and sealed already */
    struct evbuffer *retry_head;  /* the sealed head, kept for that try */

    /* sessions (SPEC part 2): this request's credentials, read with its head */
    auth_verdict auth;
    const char *auth_why;         /* AUTH_FAILED: what was wrong (static text) */
    char claimed[65];             /* the session name the credentials named, for the log */
} exchange;

typedef struct conn {
    unsigned magic;
    conn_state state;
    int depth;                    /* callbacks of this connection on the stack */
    bool kicked;                  /* the timer fires at once for a waiting request */
    worker *w;
    sl_policy *pol;
    sl_stream *cli, *up;          /* NULL in CS_TUNNEL: the relay owns the sockets */
    struct event *timer;
    char client[64];              /* "addr:port" of the client */
    struct conn *prev, *next;     /* in w->conns */
    int nexchanges;
    size_t scanned;               /* head bytes already searched for a newline */
    fx_state fx;
    char *up_name;                /* the origin connection's host name (malloc'd) */
    int up_port;
    sl_addr up_addr;
    bool cli_eof_first;           /* which side ended a tunnel first */
    bool cli_eof, up_eof;         /* CS_TUNNEL: the relay's record of the ends */
    struct relay *rl;             /* CS_TUNNEL */
    inspect *in;                  /* an inspected tunnel (NULL for any other connection) */
    struct timespec last_active;
    int timer_ms;                 /* what the timer was armed for */
    uint64_t idle_written;        /* CS_FORWARD: bytes written both ways at the timer's last look */
    /* A refusal whose log line is not written yet: its reply waits, in
     * w->log_waiters (see wait_for_log in conn.c). */
    bool log_waiting;
    uint64_t log_ticket;
    struct conn *log_prev, *log_next;
    /* The session the connection authenticated as (in pol): every later
     * request on it must be the same session's; its lines carry the name
     * and go to its stream. NULL: anonymous. */
    const struct sl_session *session;
    unsigned long pol_published;  /* g_shared.published when pol was taken */
    exchange x;
} conn;

static inline bool conn_live(const conn *c) { return c->state != CS_CLOSED; }

/* Accept a client socket into worker w (takes ownership of fd). */
void conn_accept(worker *w, int fd, const struct sockaddr *sa, int salen);

/* The one close path: logs the close line of an allowed exchange with
 * `end` (and a deny line for a request still being decided), stops all
 * reading and pending work (DNS, connect attempts, the relay's events),
 * marks the connection CS_CLOSED.
 * The memory is freed by the outermost callback (see the top of this
 * file). Closing a closed connection does nothing. */
void conn_close(conn *c, const char *end);

/* From outside any callback of c (the worker): close and free now. */
void conn_close_now(conn *c, const char *end);

/* Stop taking new requests (drain): an idle keep-alive client is closed. */
void conn_drain(conn *c);

/* Checked state change. */
void conn_set_state(conn *c, conn_state to);

/* Arm the connection's single timer; 0 disarms. */
void conn_timer(conn *c, int ms);

/* Run the waiting request's step from the event loop, not from the stack
 * that finished the previous exchange. */
void conn_kick(conn *c);

/* Decision log lines. A decision line returns its log ticket. */
uint64_t conn_log_decision(conn *c, bool allow, const char *reason, const char *detail);
void conn_log_close(conn *c, const char *end);
/* A close line with these totals (an inspected tunnel's, over its requests). */
void conn_log_close_line(conn *c, uint64_t up, uint64_t down, const struct timespec *since, const char *end);

/* End the connection gracefully: log the close line of an allowed
 * exchange with `end`, close the origin side at once, write what is queued
 * to the client, then linger briefly (so the reply is not lost to a reset)
 * and close. */
void conn_finish(conn *c, const char *end);

/* Reset the exchange for the client's next request. */
void conn_new_exchange(conn *c);

/* Close both connections with a TCP reset (SO_LINGER 0), discarding what
 * is queued: a pinned body that failed its digest must not reach the
 * client whole, nor look like a clean end. */
void conn_reset(conn *c, const char *end);

/* The allow decision, logged; false when the log has failed meanwhile (the
 * request is then refused with 503 log_unavailable). The reason is "rule"
 * when a request rule allowed it, "allowlisted" otherwise; conn_allow_as
 * names it. */
bool conn_allow(conn *c);
bool conn_allow_as(conn *c, const char *reason);

/* Refuse the exchange: log, reply with status and reason, finish. The
 * reply goes out once its log line is written, or at once while the log is
 * failing (the line then waits in memory, on its way). */
void conn_refuse(conn *c, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The next steps, in the files that own them. */
void conn_on_head(conn *c);                  /* request.c: a head may be complete */
void conn_decide(conn *c);                   /* decide.c: allowlist, DNS, classify, connect */
void conn_cancel_connect(conn *c);           /* decide.c: stop connecting attempts */
void conn_connect(conn *c);                  /* decide.c: connect to x.addrs (CS_CONNECTING) */
void tunnel_start(conn *c);                  /* tunnel.c */
void tunnel_on_client(conn *c, sl_stream_event ev);   /* tunnel.c: CS_SNI */
void exchange_start(conn *c);                /* exchange.c: CS_FORWARD on c->up */
void exchange_on_stream(conn *c, bool from_client, sl_stream_event ev);   /* exchange.c */
void exchange_on_timeout(conn *c);           /* exchange.c: idle_ms passed */
bool exchange_can_reuse(conn *c);            /* exchange.c: is the idle origin good for x? */
void exchange_drop_origin(conn *c);          /* exchange.c: close the origin connection */
void exchange_interest(conn *c, bool *cli, bool *up);   /* exchange.c: what CS_FORWARD reads */
void exchange_keep_origin(conn *c);          /* exchange.c: c->up is idle, for the next request */
void exchange_release_hold(conn *c);         /* exchange.c: a held pinned body goes, with its budget */
bool request_rules(conn *c);                 /* request.c: path check and rule match; false: refused */
void request_seal_head(conn *c);             /* request.c: the credential, then the head's end */
void inspect_begin(conn *c);                 /* inspect.c: CS_SNI passed for an inspected CONNECT */
void inspect_on_stream(conn *c, bool from_client, sl_stream_event ev);   /* inspect.c: CS_TLS */
void inspect_on_timeout(conn *c);            /* inspect.c: a handshake took too long */
void inspect_decide(conn *c);                /* inspect.c: a request inside the tunnel */
void inspect_connected(conn *c);             /* inspect.c: a new origin connection for it */
void inspect_fill_exchange(conn *c);         /* inspect.c: the tunnel's id, host, addresses into x */
void inspect_log_close(conn *c, const char *end);   /* inspect.c: the tunnel's close line */
void inspect_free(conn *c);
void session_refresh_policy(conn *c);        /* session.c: a new request goes by the current policy */
void session_read_head(conn *c, const sl_http_head *h);   /* session.c: the credentials into x.auth */
bool session_admit(conn *c);                 /* session.c: false: refused (407) */
void session_sweep(worker *w);               /* session.c: close connections of revoked or expired sessions */
/* The log stream of c's lines: its session's own, or NULL (the gate's). */
struct sl_log_stream *conn_log_stream(const conn *c);
/* The allowlist match for c: the global list, then its session's. */
sl_match_result conn_match(const conn *c, const sl_entry **rule);
sl_match_result conn_match_request(const conn *c, bool tls, const char *path, size_t len, const sl_entry **rule);

/* The log wrote more (or started or stopped failing): send the replies of
 * this worker's refusals whose lines are now written (all of them while it
 * fails). Called by the worker when it is woken. */
void conn_release_log_waiters(worker *w);

/* The stream callback for both sides (conn.c). */
void conn_on_stream(sl_stream *s, sl_stream_event ev, void *arg);

double conn_ms_since(const struct timespec *t);
void conn_touch(conn *c);

/* Callbacks from other modules into a connection go through these two, so
 * that the free rule holds (conn.c). */
void conn_enter(conn *c);
void conn_leave(conn *c);

#endif
