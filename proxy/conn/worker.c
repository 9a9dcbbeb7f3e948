/* Worker threads: accepting clients and running their connections. */
#include "worker.h"

#include <errno.h>
#include <ifaddrs.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "dns.h"
#include "log.h"

sl_shared g_shared = { .lock = PTHREAD_MUTEX_INITIALIZER };

sl_policy *sl_shared_policy(void)
{
    pthread_mutex_lock(&g_shared.lock);
    sl_policy *p = sl_policy_ref(g_shared.policy);
    pthread_mutex_unlock(&g_shared.lock);
    return p;
}

static bool is_local_address(const sl_addr *a)
{
    struct ifaddrs *ifs, *i;
    bool found = false;
    if (getifaddrs(&ifs) != 0)
        return true;   /* cannot tell: refuse rather than risk a loop */
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        sl_addr x;
        sl_addr_from_sockaddr(i->ifa_addr, &x, NULL);
        found = sl_addr_equal(&x, a);
    }
    freeifaddrs(ifs);
    return found;
}

bool sl_is_own_listener(const sl_addr *a, int port)
{
    for (size_t i = 0; i < g_shared.nbound; i++) {
        const sl_bound *b = &g_shared.bound[i];
        if (b->port != port)
            continue;
        if (sl_addr_equal(&b->addr, a))
            return true;
        /* A wildcard listener answers on every local address. Asking the
         * kernel costs a netlink round trip, paid only when the port
         * matches ours, which real origins almost never do. */
        static const uint8_t zero[16];
        if (b->addr.family == a->family && memcmp(b->addr.b, zero, 16) == 0 && is_local_address(a))
            return true;
    }
    return false;
}

#define LOG_PAUSE_CHECK_MS 100

/* More than LOG_SOFT_MAX of decision log waits to be written: accept no
 * one (clients wait in the kernel's queue) until it drains, so that what
 * waits stays bounded and no line is ever dropped. Checked again every
 * LOG_PAUSE_CHECK_MS. */
static void pause_for_log(worker *w)
{
    if (w->log_paused)
        return;
    w->log_paused = true;
    for (size_t i = 0; i < w->nlisteners; i++)
        evconnlistener_disable(w->listeners[i]);
    struct timeval tv = { 0, LOG_PAUSE_CHECK_MS * 1000 };
    evtimer_add(w->accept_retry, &tv);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    (void)l;
    worker *w = arg;
    atomic_fetch_add(&g_shared.clients, 1);
    atomic_fetch_add(&g_shared.accepts, 1);
    conn_accept(w, fd, sa, salen);
    if (sl_log_backlogged())
        pause_for_log(w);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker *w = arg;
    if (w->draining)
        return;
    if (sl_log_backlogged()) {
        struct timeval tv = { 0, LOG_PAUSE_CHECK_MS * 1000 };
        evtimer_add(w->accept_retry, &tv);
        return;
    }
    w->log_paused = false;
    for (size_t i = 0; i < w->nlisteners; i++)
        evconnlistener_enable(w->listeners[i]);
}

/* Out of file descriptors: stop accepting for a moment rather than spin
 * on a listener that stays readable (relayd does the same). */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    (void)l;
    worker *w = arg;
    int err = EVUTIL_SOCKET_ERROR();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        fprintf(stderr, "sluice: accept: %s; pausing for a second\n", evutil_socket_error_to_string(err));
        for (size_t i = 0; i < w->nlisteners; i++)
            evconnlistener_disable(w->listeners[i]);
        struct timeval tv = { 1, 0 };
        evtimer_add(w->accept_retry, &tv);
    }
}

static void start_drain(worker *w)
{
    if (w->draining)
        return;
    w->draining = true;
    for (size_t i = 0; i < w->nlisteners; i++) {
        evconnlistener_free(w->listeners[i]);
        w->listeners[i] = NULL;
    }
    w->nlisteners = 0;
    evtimer_del(w->accept_retry);
    /* conn_drain may close (and free) the connection it is given. */
    for (conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        conn_drain(c);
    }
}

/* Connections of a session that was removed, changed or has expired
 * close within a second (SPEC): at once after a reload, otherwise every
 * SWEEP_MS, from the 100 ms check. */
#define SWEEP_MS 250

static void maybe_sweep(worker *w)
{
    unsigned long gen = atomic_load(&g_shared.published);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (gen == w->swept_gen && now - w->swept_ms < SWEEP_MS)
        return;
    w->swept_gen = gen;
    w->swept_ms = now;
    session_sweep(w);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    worker *w = arg;
    uint64_t n;
    if (fd >= 0 && read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        fprintf(stderr, "sluice: worker wake-up: %s\n", strerror(errno));
    /* Woken by the log's progress (or the 100 ms check, as a backstop). */
    conn_release_log_waiters(w);
    maybe_sweep(w);
    if (atomic_load(&w->drain))
        start_drain(w);
    if (atomic_load(&w->stop)) {
        while (w->conns)
            conn_close_now(w->conns, "shutdown");
        event_base_loopbreak(w->base);
        return;
    }
    if (w->draining && w->conns == NULL)
        event_base_loopbreak(w->base);
}

/* While draining, a worker leaves its loop when its last connection ends. */
static void on_drain_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    on_wake(-1, what, arg);
}

/* Called from the main thread. An eventfd rather than event_active: with
 * no libevent call across threads, the bases need no locking, which would
 * otherwise cost a lock and an unlock around every event change and
 * callback of every connection. */
void worker_wake(worker *w)
{
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        fprintf(stderr, "sluice: waking worker %d: %s\n", w->index, strerror(errno));
}

void worker_log_progress(worker *w)
{
    if (atomic_load(&w->nlog_waiters) > 0)
        worker_wake(w);
}

bool worker_init(worker *w, int index, char *err, size_t errcap)
{
    memset(w, 0, sizeof *w);
    w->inited = true;
    w->index = index;
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0) {
        snprintf(err, errcap, "eventfd: %s", strerror(errno));
        return false;
    }
    if (getrandom(&w->rng, sizeof w->rng, 0) != sizeof w->rng || w->rng == 0)
        w->rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() ^ ((uint64_t)index << 32);
    /* The changelist folds the enable/disable pairs a connection makes within
     * one loop pass into one epoll_ctl (or none). */
    struct event_config *cfg = event_config_new();
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    w->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    if (!w->base) {
        snprintf(err, errcap, "cannot create an event loop");
        return false;
    }
    w->dns = sl_dns_new(w->base, err, errcap);
    if (!w->dns)
        return false;
    w->wake = event_new(w->base, w->wake_fd, EV_PERSIST | EV_READ, on_wake, w);
    w->accept_retry = evtimer_new(w->base, on_accept_retry, w);
    if (!w->wake || !w->accept_retry) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    event_add(w->wake, NULL);
    for (size_t i = 0; i < g_shared.nbound; i++) {
        struct evconnlistener *l = evconnlistener_new(w->base, on_accept, w, LEV_OPT_CLOSE_ON_FREE, -1,
                                                      g_shared.bound[i].fds[index]);
        if (!l) {
            snprintf(err, errcap, "cannot listen: %s", strerror(errno));
            return false;
        }
        evconnlistener_set_error_cb(l, on_accept_error);
        w->listeners[w->nlisteners++] = l;
    }
    return true;
}

void *worker_main(void *arg)
{
    worker *w = arg;
    struct event *check = event_new(w->base, -1, EV_PERSIST, on_drain_check, w);
    struct timeval tv = { 0, 100 * 1000 };
    event_add(check, &tv);
    event_base_dispatch(w->base);
    event_free(check);
    return NULL;
}

void worker_free(worker *w)
{
    if (!w->inited)
        return;
    while (w->conns)
        conn_close_now(w->conns, "shutdown");
    for (size_t i = 0; i < w->nlisteners; i++)
        evconnlistener_free(w->listeners[i]);
    if (w->dns)
        sl_dns_free(w->dns);
    if (w->wake)
        event_free(w->wake);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->accept_retry)
        event_free(w->accept_retry);
    if (w->base)
        event_base_free(w->base);
}
