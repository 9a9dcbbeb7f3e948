/* Happy Eyeballs connecting (see connect.h). */
#include "connect.h"

#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_ADDRS 16
#define MIN_ATTEMPT_MS 500

typedef struct attempt {
    int fd;                 /* -1 once over */
    struct event *ev;
    sl_addr addr;
} attempt;

struct sl_connector {
    struct event_base *base;
    sl_addr order[MAX_ADDRS];
    size_t n, next;
    int port, stagger_ms, attempt_ms;
    attempt at[MAX_ADDRS];
    size_t nat, live;
    struct event *timer;    /* the stagger; also delivers a failure found while starting */
    bool failed;            /* every address failed: the timer delivers it */
    sl_addr last, last_failed;
    int last_err;
    sl_connect_cb cb;
    void *arg;
};

static void on_attempt(evutil_socket_t fd, short what, void *arg);
static void on_timer(evutil_socket_t fd, short what, void *arg);

/* RFC 8305 §4: alternate the families, starting with the first address's. */
static size_t interleave(const sl_addr *in, size_t n, sl_addr *out)
{
    if (n > MAX_ADDRS)
        n = MAX_ADDRS;
    int first = n ? in[0].family : 0;
    size_t a = 0, b = 0, k = 0;
    while (k < n) {
        while (a < n && in[a].family != first)
            a++;
        if (a < n)
            out[k++] = in[a++];
        while (b < n && in[b].family == first)
            b++;
        if (b < n && k < n)
            out[k++] = in[b++];
    }
    return k;
}

static void close_attempt(attempt *t)
{
    if (t->ev)
        event_free(t->ev);
    t->ev = NULL;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
}

static void connector_free(sl_connector *k)
{
    for (size_t i = 0; i < k->nat; i++)
        close_attempt(&k->at[i]);
    if (k->timer)
        event_free(k->timer);
    free(k);
}

/* Start attempts until one is under way or none is left. */
static void start_next(sl_connector *k)
{
    while (k->next < k->n) {
        const sl_addr *a = &k->order[k->next++];
        attempt *t = &k->at[k->nat];
        t->addr = *a;
        t->fd = -1;
        t->ev = NULL;
        k->last = *a;
        struct sockaddr_storage ss;
        socklen_t sl = sl_addr_to_sockaddr(a, k->port, &ss);
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            k->last_err = errno;
            k->last_failed = *a;
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int rc = connect(fd, (struct sockaddr *)&ss, sl);
        if (rc != 0 && errno != EINPROGRESS) {
            k->last_err = errno;
            k->last_failed = *a;
            close(fd);
            continue;
        }
        t->fd = fd;
        t->ev = event_new(k->base, fd, EV_WRITE, on_attempt, k);
        if (!t->ev) {
            k->last_err = ENOMEM;
            k->last_failed = *a;
            close(fd);
            t->fd = -1;
            continue;
        }
        k->nat++;
        k->live++;
        if (rc == 0) {
            event_active(t->ev, EV_WRITE, 1);   /* connected at once: reported from the loop */
        } else {
            struct timeval tv = { k->attempt_ms / 1000, (k->attempt_ms % 1000) * 1000 };
            event_add(t->ev, k->n > 1 ? &tv : NULL);
        }
        return;
    }
}

/* After an attempt started or ended: arm the stagger for the next one, or
 * note that everything failed. */
static void schedule(sl_connector *k)
{
    if (k->live == 0 && k->next >= k->n) {
        k->failed = true;
        event_active(k->timer, EV_TIMEOUT, 1);
        return;
    }
    if (k->next < k->n) {
        struct timeval tv = { k->stagger_ms / 1000, (k->stagger_ms % 1000) * 1000 };
        evtimer_add(k->timer, &tv);
    } else {
        evtimer_del(k->timer);
    }
}

static void deliver_failure(sl_connector *k)
{
    sl_connect_cb cb = k->cb;
    void *arg = k->arg;
    sl_addr last = k->last_failed;
    int err = k->last_err ? k->last_err : ECONNREFUSED;
    connector_free(k);
    cb(arg, -1, &last, err);
}

static void on_attempt(evutil_socket_t fd, short what, void *arg)
{
    sl_connector *k = arg;
    attempt *t = NULL;
    for (size_t i = 0; i < k->nat && !t; i++)
        if (k->at[i].fd == fd)
            t = &k->at[i];
    if (!t)
        return;
    int err = 0;
    if (what & EV_TIMEOUT) {
        /* This attempt's own deadline: it gives way to the next address.
         * The last one left keeps trying until the caller's deadline. */
        if (k->live == 1 && k->next >= k->n) {
            event_add(t->ev, NULL);
            return;
        }
        err = ETIMEDOUT;
    } else {
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
    }
    if (err == 0) {
        sl_connect_cb cb = k->cb;
        void *cbarg = k->arg;
        sl_addr won = t->addr;
        t->fd = -1;   /* the winner's socket goes to the caller */
        connector_free(k);
        cb(cbarg, (int)fd, &won, 0);
        return;
    }
    k->last_err = err;
    k->last_failed = t->addr;
    close_attempt(t);
    k->live--;
    start_next(k);   /* a failure starts the next attempt at once */
    if (k->live == 0 && k->next >= k->n) {
        deliver_failure(k);
        return;
    }
    schedule(k);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sl_connector *k = arg;
    if (k->failed) {
        deliver_failure(k);
        return;
    }
    start_next(k);
    schedule(k);
}

sl_connector *sl_connect_start(struct event_base *base, const sl_addr *addrs, size_t n, int port,
                               int stagger_ms, int deadline_ms, sl_connect_cb cb, void *arg)
{
    sl_connector *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->base = base;
    k->port = port;
    k->stagger_ms = stagger_ms;
    k->cb = cb;
    k->arg = arg;
    k->n = interleave(addrs, n, k->order);
    /* Each attempt's share of the whole, but not so little that a slow
     * network gets no connection at all. */
    k->attempt_ms = k->n ? deadline_ms / (int)k->n : deadline_ms;
    if (k->attempt_ms < MIN_ATTEMPT_MS)
        k->attempt_ms = MIN_ATTEMPT_MS;
    k->timer = evtimer_new(base, on_timer, k);
    if (!k->timer) {
        free(k);
        return NULL;
    }
    if (k->n)
        k->last = k->last_failed = k->order[0];
    start_next(k);
    schedule(k);
    return k;
}

void sl_connect_cancel(sl_connector *k)
{
    if (k)
        connector_free(k);
}

const sl_addr *sl_connect_last(const sl_connector *k)
{
    return &k->last;
}
