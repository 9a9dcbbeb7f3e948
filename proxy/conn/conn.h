/* A client connection: one struct, one state machine, one close path.
 *
 * A connection carries one exchange at a time: a CONNECT tunnel, or one
 * plain-HTTP request and its response (a keep-alive client then starts the
 * next exchange, checked on its own). */
#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "allowlist.h"
#include "config.h"
#include "dns.h"
#include "http_parse.h"
#include "worker.h"

struct bufferevent;
struct event;

#define CONN_MAGIC 0x5c0ca11eu

/* The most a client's input buffer holds before reading pauses: room for
 * the largest request head or ClientHello, and for what a client sends
 * ahead while its request is decided and connected. */
#define CONN_READ_AHEAD (64 * 1024)

typedef enum conn_state {
    CS_HEAD,         /* reading a request head */
    CS_RESOLVING,    /* waiting for DNS */
    CS_CONNECTING,   /* connecting to the vetted addresses in order */
    CS_SNI,          /* tunnel to 443: 200 sent, waiting for the ClientHello */
    CS_TUNNEL,       /* relaying bytes both ways */
    CS_FORWARD,      /* plain HTTP: relaying the request and its response */
    CS_REFUSING,     /* writing a refusal, then closing */
} conn_state;

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
    sl_addr addrs[SL_DNS_MAX_ADDRS];
    size_t naddrs, next_addr;
    sl_addr addr;                 /* the address connected to */
    double dns_ms;
    bool dns_done;
    sl_dns_wait *dns;
    bool allowed;                 /* an allow decision was logged */
    uint64_t bytes_up, bytes_down;
    const char *sni;              /* the ClientHello's name, while its decision is logged */

    /* plain HTTP */
    struct evbuffer *up_head;     /* the rewritten request head */
    body req, resp;
    bool resp_head_done;
    bool client_close;            /* close the client after this exchange */
    bool client_http10;
    bool resp_close;              /* the origin won't keep the connection */
    const char *finishing;        /* set: close with this end once the client has it all */
} exchange;

typedef struct conn {
    unsigned magic;
    conn_state state;
    worker *w;
    sl_policy *pol;
    struct bufferevent *cli, *up;
    struct event *timer;
    char client[64];              /* "addr:port" of the client */
    struct conn *prev, *next;     /* in w->conns */
    int nexchanges;
    size_t scanned;               /* head bytes already searched for a newline */
    bool cli_eof, up_eof;
    bool cli_shut;                /* a refusal sent: the client's write side is shut */
    bool up_reusable;             /* kept-alive origin connection for the next request */
    char *up_name;                /* the kept-alive origin's host name (malloc'd) */
    int up_port;
    sl_addr up_addr;
    bool cli_eof_first;           /* which side ended a tunnel first */
    bool cli_paused, up_paused;   /* reading stopped until the partner drains */
    struct relay *rl;             /* CS_TUNNEL: the relay owns the sockets (cli, up NULL) */
    struct timespec last_active;
    int timer_ms;                 /* what the timer was armed for */
    /* A refusal whose log line is not written yet: its reply waits, in
     * w->log_waiters (see conn_wait_for_log). */
    bool log_waiting;
    uint64_t log_ticket;
    struct conn *log_prev, *log_next;
    exchange x;
} conn;

/* Accept a client socket into worker w (takes ownership of fd). */
void conn_accept(worker *w, int fd, const struct sockaddr *sa, int salen);

/* The one close path: logs the close line of an allowed exchange with
 * `end`, frees both sides and everything pending. Callers return at once. */
void conn_close(conn *c, const char *end);

/* Stop taking new requests (drain): an idle keep-alive client is closed. */
void conn_drain(conn *c);

/* Checked state change. */
void conn_set_state(conn *c, conn_state to);

/* Arm the connection's single timer; 0 disarms. */
void conn_timer(conn *c, int ms);

/* Decision log lines. A decision line returns its log ticket. */
uint64_t conn_log_decision(conn *c, bool allow, const char *reason, const char *detail);
void conn_log_close(conn *c, const char *end);

/* Close the client once its queued output is sent (lingering briefly so a
 * reply is not lost to a reset); the origin side is closed at once. */
void conn_linger_close(conn *c);

/* Refuse the exchange: log, reply with status and reason, close. The
 * reply goes out once its log line is written, or at once while the log is
 * failing (the line then waits in memory). */
void conn_refuse(conn *c, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The next steps, in the files that own them. */
void conn_on_head(conn *c);                  /* request.c: a head may be complete */
void conn_decide(conn *c);                   /* decide.c: allowlist, DNS, classify, connect */
void conn_connected(conn *c);                /* decide.c -> tunnel.c / forward.c */
void conn_connect_failed(conn *c, short what);  /* decide.c: try the next address */
void conn_close_upstream(conn *c);           /* decide.c: drop a kept-alive origin */
void conn_attach_upstream(conn *c);          /* conn.c: callbacks on c->up */
void conn_new_exchange(conn *c);             /* conn.c: reset for the next request */
void tunnel_start(conn *c);                  /* tunnel.c */
void forward_start(conn *c);                 /* forward.c */
void forward_client_data(conn *c);           /* forward.c */

/* Per-state handlers the bufferevent callbacks dispatch to. */
void tunnel_on_read(conn *c, bool from_client);   /* CS_SNI only */
void tunnel_on_eof(conn *c, bool from_client);    /* CS_SNI only */
void forward_on_read(conn *c, bool from_client);
void forward_on_eof(conn *c, bool from_client);
void forward_on_drained(conn *c, bool to_client);

/* The log wrote more (or started or stopped failing): send the replies of
 * this worker's refusals whose lines are now written (all of them while it
 * fails). Called by the worker on its wake-up. */
void conn_release_log_waiters(worker *w);

double conn_ms_since(const struct timespec *t);
void conn_touch(conn *c);

#endif
