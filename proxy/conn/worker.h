/* Workers: one thread, one event loop, one resolver and its own listening
 * sockets (SO_REUSEPORT) each. The main thread only handles signals and
 * tells workers what to do through atomic flags and an eventfd: nothing
 * crosses threads through libevent, so its event bases run without locks. */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

struct event_base;
struct event;
struct evconnlistener;
struct conn;
struct sl_dns;

typedef struct worker {
    bool inited;                 /* worker_init ran: worker_free has work */
    int index;
    pthread_t thread;
    struct event_base *base;
    struct sl_dns *dns;
    struct evconnlistener *listeners[SL_MAX_LISTEN];
    size_t nlisteners;
    int wake_fd;                 /* eventfd the main thread writes to */
    struct event *wake;          /* reads wake_fd */
    struct event *accept_retry;  /* after EMFILE: accepting resumes on a timer */
    atomic_bool drain, stop;     /* set by the main thread */
    bool draining;
    struct conn *conns;          /* every open connection of this worker */
    size_t nconns;
    /* Refusals whose replies wait for their log line; the count is read by
     * the log's progress callback (another thread), which wakes only the
     * workers that have some. */
    struct conn *log_waiters;
    atomic_int nlog_waiters;
    bool log_paused;             /* accepting paused: too much log waits to be written */
    uint64_t rng;                /* for connection ids */
    unsigned long swept_gen;     /* the policy generation of the last session sweep */
    long long swept_ms;          /* and when it ran (monotonic) */
} worker;

/* The listening sockets, bound by the main thread before workers start so
 * that port 0 resolves once and every worker shares it. */
typedef struct sl_bound {
    sl_addr addr;
    int port;                    /* as bound (never 0) */
    int fds[64];                 /* one per worker */
} sl_bound;

/* Process-wide state the workers read. */
typedef struct sl_shared {
    pthread_mutex_t lock;        /* guards `policy` */
    sl_policy *policy;
    sl_bound bound[SL_MAX_LISTEN];
    size_t nbound;
    atomic_int clients;          /* open client connections, all workers */
    atomic_ulong accepts;        /* clients accepted so far (for exit_idle_s) */
    atomic_ulong published;      /* policies published so far: a reload bumps it (session sweeps) */
} sl_shared;

extern sl_shared g_shared;

/* The current policy, with a reference the caller must drop. */
sl_policy *sl_shared_policy(void);

bool worker_init(worker *w, int index, char *err, size_t errcap);
void *worker_main(void *arg);
void worker_free(worker *w);
void worker_wake(worker *w);
/* The log's progress callback, for one worker (any thread): wakes it if
 * refusals of its wait for their log lines. */
void worker_log_progress(worker *w);

/* Whether addr:port is one of the gate's own listening sockets. */
bool sl_is_own_listener(const sl_addr *a, int port);

#endif
