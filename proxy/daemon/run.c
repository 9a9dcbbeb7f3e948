/* sluice run: start-up, the worker threads, signals, reload, drain and
 * exit_idle_s. */
#include "run.h"

#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "dns.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "sessions.h"
#include "stderr.h"
#include "worker.h"

static const sl_options *g_opts;
static worker *g_workers;
static int g_nworkers;
static struct event_base *g_main;

static void reload_policy(void);

static bool same_listen(const sl_policy *a, const sl_policy *b)
{
    if (a->nlisten != b->nlisten)
        return false;
    for (size_t i = 0; i < a->nlisten; i++)
        if (!sl_addr_equal(&a->listen[i].addr, &b->listen[i].addr) || a->listen[i].port != b->listen[i].port)
            return false;
    return true;
}

static void reload(void)
{
    sl_notify("RELOADING=1");
    reload_policy();
    sl_notify("READY=1");
}

static void reload_policy(void)
{
    sl_policy *p = sl_policy_load(g_opts, sl_report_stderr, "sluice: reload failed: ");
    if (!p) {
        fprintf(stderr, "sluice: reload failed; keeping the old policy\n");
        sl_metrics_reload(false);
        return;
    }
    /* Before the policy is published: its sessions' streams (the same path
     * is the same stream, so a kept session's chain goes on). */
    if (!sl_sessions_open_logs(p, sl_report_stderr, "sluice: reload failed: ")) {
        fprintf(stderr, "sluice: reload failed; keeping the old policy\n");
        sl_metrics_reload(false);
        sl_policy_unref(p);
        return;
    }
    sl_policy *old = sl_shared_policy();
    if (!same_listen(old, p))
        fprintf(stderr, "sluice: note: listen addresses change only on restart\n");
    if (strcmp(old->log_path, p->log_path) != 0) {
        char err[400];
        if (!sl_log_reopen(p->log_path, err, sizeof err)) {
            fprintf(stderr, "sluice: reload failed: %s; keeping the old policy\n", err);
            sl_metrics_reload(false);
            sl_policy_unref(p);
            sl_policy_unref(old);
            return;
        }
    }
    pthread_mutex_lock(&g_shared.lock);
    sl_policy *prev = g_shared.policy;
    g_shared.policy = p;
    pthread_mutex_unlock(&g_shared.lock);
    atomic_fetch_add(&g_shared.published, 1);
    for (int i = 0; i < g_nworkers; i++)   /* revoked sessions' connections close now */
        worker_wake(&g_workers[i]);
    sl_policy_unref(prev);
    sl_policy_unref(old);
    sl_metrics_reload(true);
    fprintf(stderr, "sluice: reloaded policy (%zu allowlist entries)\n", sl_allowlist_count(p->allow));
}

static void start_drain(void);
static void on_grace(evutil_socket_t fd, short what, void *arg);
static bool draining;

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        reload();
    } else if (sig == SIGUSR1) {
        sl_policy *p = sl_shared_policy();
        char err[400];
        if (!sl_log_reopen(p->log_path, err, sizeof err))
            fprintf(stderr, "sluice: %s\n", err);
        sl_policy_unref(p);
    } else if (!draining) {
        fprintf(stderr, "sluice: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        start_drain();
    } else {
        fprintf(stderr, "sluice: %s again: not waiting for the grace period\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        on_grace(-1, 0, NULL);
    }
}

/* exit_idle_s: a per-session gate whose caller died exits by itself. */
static struct timespec idle_since;
static unsigned long idle_accepts;

/* Shutdown: workers stop accepting and finish what is open; the main loop
 * keeps watching the log (sl_log_tick) until they are done or the grace
 * runs out. */
static atomic_int workers_running;
static struct event *grace_timer;

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    fprintf(stderr, "sluice: shutdown_grace_ms over: closing what is still open\n");
    for (int i = 0; i < g_nworkers; i++) {
        atomic_store(&g_workers[i].stop, true);
        worker_wake(&g_workers[i]);
    }
}

static void start_drain(void)
{
    if (draining)
        return;
    draining = true;
    sl_notify("STOPPING=1");
    sl_admin_set_draining();
    sl_policy *p = sl_shared_policy();
    int grace = p->shutdown_grace_ms;
    sl_policy_unref(p);
    for (int i = 0; i < g_nworkers; i++) {
        atomic_store(&g_workers[i].drain, true);
        worker_wake(&g_workers[i]);
    }
    grace_timer = evtimer_new(g_main, on_grace, NULL);
    struct timeval tv = { grace / 1000, (grace % 1000) * 1000 };
    evtimer_add(grace_timer, &tv);
}

/* The log wrote lines, or started or stopped failing: the workers with
 * refusals waiting for their lines look again. */
static void on_log_progress(void)
{
    for (int i = 0; i < g_nworkers; i++)
        worker_log_progress(&g_workers[i]);
}

static void *run_worker(void *arg)
{
    worker_main(arg);
    atomic_fetch_sub(&workers_running, 1);
    return NULL;
}

static void on_log_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    sl_log_tick();
    if (draining && atomic_load(&workers_running) == 0)
        event_base_loopbreak(g_main);
}

static void on_idle_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long accepts = atomic_load(&g_shared.accepts);
    if (atomic_load(&g_shared.clients) > 0 || accepts != idle_accepts) {
        idle_since = now;
        idle_accepts = accepts;
        return;
    }
    sl_policy *p = sl_shared_policy();
    int limit = p->exit_idle_s;
    sl_policy_unref(p);
    if (limit > 0 && now.tv_sec - idle_since.tv_sec >= limit && !draining) {
        fprintf(stderr, "sluice: no client for %d s (exit_idle_s): exiting\n", limit);
        start_drain();
    }
}

static int bind_one(const sl_addr *a, int port, char *err, size_t errcap)
{
    struct sockaddr_storage ss;
    socklen_t len = sl_addr_to_sockaddr(a, port, &ss);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    char as[SL_ADDR_STRLEN];
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* One socket per worker on the same port; the kernel spreads clients. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        goto fail;
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    /* Accepted sockets inherit it: small relayed writes go out at once. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 1024) < 0)
        goto fail;
    return fd;
fail:
    snprintf(err, errcap, "cannot listen on %s port %d: %s", sl_addr_format(a, as, sizeof as), port,
             strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static bool bind_all(const sl_policy *p, int nworkers, char *err, size_t errcap)
{
    for (size_t i = 0; i < p->nlisten; i++) {
        sl_bound *b = &g_shared.bound[g_shared.nbound++];
        b->addr = p->listen[i].addr;
        b->port = p->listen[i].port;
        for (int k = 0; k < nworkers; k++) {
            b->fds[k] = bind_one(&b->addr, b->port, err, errcap);
            if (b->fds[k] < 0)
                return false;
            if (b->port == 0) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                getsockname(b->fds[k], (struct sockaddr *)&ss, &len);
                sl_addr_from_sockaddr((struct sockaddr *)&ss, &b->addr, &b->port);
            }
        }
    }
    return true;
}

/* Each client costs two descriptors, and up to 16 more while Happy
 * Eyeballs tries several addresses at once (connect.c): take the hard
 * limit, as max_clients may need it. */
static void raise_fd_limit(int max_clients)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_clients * 2 + 64)
        fprintf(stderr, "sluice: note: the open-file limit (%llu) is low for max_clients %d\n",
                (unsigned long long)rl.rlim_cur, max_clients);
}

static int run_gate(const sl_options *opts)
{
    g_opts = opts;
    char err[400];
    bool rc_admin_failed = false;
    sl_policy *p = sl_policy_load(g_opts, sl_report_stderr, "sluice: ");
    if (!p)
        return 2;
    if (!sl_log_open(p->log_path, err, sizeof err)) {
        fprintf(stderr, "sluice: %s\n", err);
        sl_policy_unref(p);
        return 1;
    }
    if (!sl_sessions_open_logs(p, sl_report_stderr, "sluice: ")) {
        sl_policy_unref(p);
        sl_log_close();
        return 1;
    }
    if (!sl_dns_global_init(err, sizeof err)) {
        fprintf(stderr, "sluice: %s\n", err);
        sl_policy_unref(p);
        sl_log_close();
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(p->max_clients);
    g_shared.policy = p;
    g_nworkers = p->workers;
    int rc = 1;
    if (!bind_all(p, g_nworkers, err, sizeof err)) {
        fprintf(stderr, "sluice: %s\n", err);
        goto out;
    }
    g_workers = calloc((size_t)g_nworkers, sizeof *g_workers);
    for (int i = 0; i < g_nworkers; i++) {
        if (!worker_init(&g_workers[i], i, err, sizeof err)) {
            fprintf(stderr, "sluice: %s\n", err);
            goto out;
        }
    }

    /* Signals go to the main thread only: workers start with them blocked. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    g_main = event_base_new();
    struct event *sigs[4];
    int signos[4] = { SIGHUP, SIGTERM, SIGINT, SIGUSR1 };
    for (int i = 0; i < 4; i++) {
        sigs[i] = evsignal_new(g_main, signos[i], on_signal, NULL);
        event_add(sigs[i], NULL);
    }
    /* Checked every 200 ms whatever exit_idle_s is, so a reload can turn it on. */
    clock_gettime(CLOCK_MONOTONIC, &idle_since);
    struct event *idle = event_new(g_main, -1, EV_PERSIST, on_idle_check, NULL);
    event_add(idle, &(struct timeval){ 0, 200 * 1000 });
    /* A log write blocked too long, or too much waiting, is noticed here. */
    struct event *log_tick = event_new(g_main, -1, EV_PERSIST, on_log_tick, NULL);
    event_add(log_tick, &(struct timeval){ 0, 100 * 1000 });
    sl_log_set_progress_cb(on_log_progress);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    atomic_store(&workers_running, g_nworkers);
    for (int i = 0; i < g_nworkers; i++)
        pthread_create(&g_workers[i].thread, NULL, run_worker, &g_workers[i]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (sl_allowlist_count(p->allow) == 0)
        fprintf(stderr, "sluice: the allowlist is empty: every request will be denied\n");
    if (p->admin_listen && !sl_admin_start(g_main, p->admin_listen, err, sizeof err)) {
        fprintf(stderr, "sluice: %s\n", err);
        start_drain();
        rc_admin_failed = true;
    }
    for (size_t i = 0; i < g_shared.nbound; i++) {
        char as[SL_ADDR_STRLEN];
        const sl_bound *b = &g_shared.bound[i];
        sl_addr_format(&b->addr, as, sizeof as);
        fprintf(stderr, b->addr.family == AF_INET6 ? "sluice: listening on [%s]:%d\n"
                                                   : "sluice: listening on %s:%d\n",
                as, b->port);
    }
    fprintf(stderr, "sluice: %d worker%s, %zu allowlist entries, log %s\n", g_nworkers,
            g_nworkers == 1 ? "" : "s", sl_allowlist_count(p->allow), p->log_path);
    {
        char st[200], as[SL_ADDR_STRLEN];
        sl_addr_format(&g_shared.bound[0].addr, as, sizeof as);
        snprintf(st, sizeof st, "READY=1\nSTATUS=listening on %s port %d", as, g_shared.bound[0].port);
        sl_notify(st);
    }

    event_base_dispatch(g_main);

    for (int i = 0; i < g_nworkers; i++)
        pthread_join(g_workers[i].thread, NULL);
    sl_admin_stop();
    if (grace_timer)
        event_free(grace_timer);
    for (int i = 0; i < 4; i++)
        event_free(sigs[i]);
    event_free(idle);
    event_free(log_tick);
    event_base_free(g_main);
    rc = rc_admin_failed ? 1 : 0;
    fprintf(stderr, "sluice: stopped\n");
out:
    /* No call may reach a worker being freed (it waits for one under way). */
    sl_log_set_progress_cb(NULL);
    for (int i = 0; g_workers && i < g_nworkers; i++)
        worker_free(&g_workers[i]);
    free(g_workers);
    for (size_t i = 0; i < g_shared.nbound; i++)
        for (int k = 0; k < g_nworkers; k++)
            if (rc != 0 && g_shared.bound[i].fds[k] > 0)
                close(g_shared.bound[i].fds[k]);
    sl_policy_unref(g_shared.policy);
    g_shared.policy = NULL;
    sl_log_close();
    sl_dns_global_cleanup();
    libevent_global_shutdown();
    return rc;
}

int sl_cmd_run(const sl_options *opts)
{
    sl_stderr_start();   /* before any thread: it forks */
    int rc = run_gate(opts);
    sl_stderr_stop();
    return rc;
}
