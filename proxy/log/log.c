/* The decision log file, its hash chain, its writer thread and its write
 * policy.
 *
 * Who owns what: `pending` and the requests to the writer are shared under
 * `lock`, which is held for a memcpy or a few assignments, never across
 * I/O, a callback or a message. The file, the chain and the lines being
 * written are the writer thread's alone. What other threads read without
 * the lock (failing, how far writing got, how much waits, whether a write
 * is under way) is atomic. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "json.h"
#include "metrics.h"

/* Only a guard against running out of memory: above LOG_SOFT_MAX the gate
 * accepts no one, and the connections already open add a line or two
 * each, so nothing near this waits unless something else is wrong. */
#define LOG_HARD_MAX ((size_t)256 << 20)
/* Bodies chained per write: a refusal behind a backlog waits for no more
 * hashing than this before lines start to go out. */
#define CHAIN_ROUND ((size_t)256 << 10)
/* A write(2) blocked this long makes the log failing (a pipe nobody reads,
 * a hung disk). */
#define STALL_MS 1000
/* After a write error, the next try; also how often the writer checks that
 * its file was not deleted. */
#define RETRY_MS 100
/* At exit, how long the writer may still take. */
#define EXIT_WAIT_MS 3000
/* Lines gather in memory up to this much, or for at most RETRY_MS, before
 * the writer takes them: one write(2) for many lines. A line someone waits
 * for (sl_log_written said no: a refusal) is taken at once. */
#define GATHER_MAX ((size_t)64 << 10)
/* The log recovers once the writer has written everything it had taken
 * and less than this arrived meanwhile (its next write takes it): under a
 * steady stream of refusals, "nothing at all waits" may never be seen. */
#define CAUGHT_UP ((size_t)64 << 10)

typedef struct buffer {
    char *p;
    size_t len, cap;
} buffer;

/* ---- shared, under `lock` ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t writer_cond;   /* wakes the writer */
static pthread_cond_t ended_cond;    /* the writer has ended */
static buffer pending;               /* bodies not taken by the writer yet, one per '\n' */
static uint64_t tickets;             /* handed out so far */
static uint64_t taken;               /* tickets the writer has taken */
static uint64_t wanted;              /* the highest ticket someone waits for */
static bool writer_waiting;          /* in its timed wait: signal it when a line is due */
static bool writer_running, closing, writer_ended;
static bool abandoned;               /* sl_log_close stopped waiting: write nothing more */
static int switch_fd = -1;           /* sl_log_reopen's file, for the writer to take */
static char *switch_path;
static char fail_why[256];
static char cur_name[256];           /* what the writer writes to, for messages */
static unsigned long long lost;      /* lines not kept (LOG_HARD_MAX or out of memory) */

/* ---- read without the lock ---- */
static atomic_bool failing;
static atomic_uint_fast64_t written;   /* tickets 1..written are written */
static atomic_size_t pending_bytes;    /* pending.len */
static atomic_size_t writer_bytes;     /* taken by the writer and not written yet */
static atomic_llong write_since_ms;    /* when the write under way began (monotonic); 0: none */

/* Failing and recovering, and their messages, one at a time and in order.
 * Taken by the writer and the main thread only, never by a worker. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

/* The progress callback is called under cb_lock, so that clearing it waits
 * for a call under way (the workers it wakes are freed next). */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*progress_cb)(void);

/* ---- the writer thread's own (sl_log_open's before it starts) ---- */
static pthread_t writer;
static int log_fd = -1;          /* -1: deleted, not created again yet */
static char *log_path;
static buffer batch;             /* bodies taken from pending */
static size_t batch_off;         /* the bodies before this are chained */
static buffer out;               /* chained lines, one round of them */
static size_t out_off;           /* bytes of out written */
static char stream[33];
static unsigned long long seq;
static char chain[65];
static bool continues;           /* the next line chained starts a new file */
/* The chain as it was when `out` was chained, and where its bodies start
 * in `batch`: lines chained but not written when the file changes are
 * chained again, so that the new file's first line carries the
 * continuation. */
static struct {
    unsigned long long seq;
    char chain[65];
    bool continues;
    size_t batch_off;
} round_start;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool is_stdout_path(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

static void name_of(const char *path, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", is_stdout_path(path) ? "standard output" : path ? path : "log");
}

static int open_path(const char *path, char *err, size_t errcap)
{
    if (is_stdout_path(path))
        return STDOUT_FILENO;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        snprintf(err, errcap, "%s: cannot open log: %s", path, strerror(errno));
    return fd;
}

static void close_log_fd(int fd, const char *path)
{
    if (fd >= 0 && !is_stdout_path(path))
        close(fd);
}

/* A log file unlinked under us takes every later line with it. A renamed
 * one (logrotate before its SIGUSR1) still keeps them: not a failure. */
static bool file_deleted(void)
{
    struct stat st;
    return log_fd >= 0 && !is_stdout_path(log_path) && fstat(log_fd, &st) == 0 && st.st_nlink == 0;
}

static bool reserve(buffer *b, size_t n, size_t max)
{
    if (b->len + n <= b->cap)
        return true;
    if (b->len + n > max)
        return false;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

/* ---- the progress callback and the failing state ---- */

void sl_log_set_progress_cb(void (*cb)(void))
{
    pthread_mutex_lock(&cb_lock);
    progress_cb = cb;
    pthread_mutex_unlock(&cb_lock);
}

static void notify(void)
{
    pthread_mutex_lock(&cb_lock);
    if (progress_cb)
        progress_cb();
    pthread_mutex_unlock(&cb_lock);
}

/* With report_lock held. Whether the log was not failing before. */
static bool fail_locked(const char *why)
{
    if (atomic_load(&failing))
        return false;
    pthread_mutex_lock(&lock);
    snprintf(fail_why, sizeof fail_why, "%s", why);
    atomic_store(&failing, true);
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "sluice: decision log unwritable: %s; refusing new clients (503) until it works\n", why);
    return true;
}

static void set_failing(const char *why)
{
    pthread_mutex_lock(&report_lock);
    bool started = fail_locked(why);
    pthread_mutex_unlock(&report_lock);
    if (started)
        notify();
}

static size_t writer_held(void)
{
    return (out.len - out_off) + (batch.len - batch_off);
}

/* The writer: the log works again once what waited is written. */
static void try_recover(void)
{
    if (!atomic_load(&failing))
        return;
    pthread_mutex_lock(&report_lock);
    bool recovered = false;
    if (atomic_load(&failing) && log_fd >= 0 && writer_held() == 0 && atomic_load(&write_since_ms) == 0 &&
        atomic_load(&pending_bytes) < CAUGHT_UP && !file_deleted()) {
        atomic_store(&failing, false);
        fprintf(stderr, "sluice: decision log writable again; accepting clients\n");
        recovered = true;
    }
    pthread_mutex_unlock(&report_lock);
    if (recovered)
        notify();
}

/* ---- chaining (the writer) ---- */

/* ',"seq":N}' by hand (printf was a third of the writer's own cost);
 * returns its length. */
static size_t seq_field(char *dst, unsigned long long v)
{
    memcpy(dst, ",\"seq\":", 7);
    char *end = sl_fmt_uint(dst + 7, v);
    *end++ = '}';
    *end = '\0';
    return (size_t)(end - dst);
}

/* Chain the next bodies of `batch` into the empty `out`: their
 * stream/continuation fields, seq and chain. */
static void chain_round(void)
{
    round_start.seq = seq;
    memcpy(round_start.chain, chain, sizeof chain);
    round_start.continues = continues;
    round_start.batch_off = batch_off;
    size_t start = batch_off;
    while (batch_off < batch.len && batch_off - start < CHAIN_ROUND) {
        const char *body = batch.p + batch_off;
        const char *nl = memchr(body, '\n', batch.len - batch_off);
        size_t len = (size_t)(nl - body);
        char extra[256], tail[96];
        size_t elen = 0;
        if (seq == 0)
            elen = (size_t)snprintf(extra, sizeof extra, ",\"stream\":\"%s\"", stream);
        else if (continues)
            elen = (size_t)snprintf(extra, sizeof extra,
                                    ",\"stream\":\"%s\",\"continues_seq\":%llu,\"continues_chain\":\"%s\"",
                                    stream, seq, chain);
        size_t tlen = seq_field(tail, seq + 1);
        if (!reserve(&out, len + elen + tlen + 80, (size_t)-1))
            break;   /* out of memory: the rest waits for the next round */
        char *line = out.p + out.len;
        memcpy(line, body, len);
        memcpy(line + len, extra, elen);
        memcpy(line + len + elen, tail, tlen);
        /* The chained text is the line without its chain field. */
        size_t text_len = len + elen + tlen;
        char next[65];
        if (seq == 0)
            sl_chain_next(stream, strlen(stream), line, text_len, next);
        else
            sl_chain_next(chain, 64, line, text_len, next);
        char *p = line + text_len - 1;
        memcpy(p, ",\"chain\":\"", 10);
        memcpy(p + 10, next, 64);
        memcpy(p + 74, "\"}\n", 3);
        out.len += text_len - 1 + 77;
        memcpy(chain, next, sizeof chain);
        seq++;
        continues = false;
        batch_off += len + 1;
    }
}

static uint64_t count_lines(const char *p, size_t n)
{
    uint64_t k = 0;
    for (const char *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        k++;
    return k;
}

/* Lines chained but not (completely) written go back to being bodies, and
 * the chain back to the last line written: they are chained again for the
 * next file. */
static void unchain_unwritten(void)
{
    if (out_off == out.len) {
        out.len = out_off = 0;
        return;
    }
    uint64_t k = 0;
    const char *last_nl = NULL;
    for (const char *p = out.p, *end = out.p + out_off; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++) {
        k++;
        last_nl = p;
    }
    if (k == 0) {
        seq = round_start.seq;
        memcpy(chain, round_start.chain, sizeof chain);
        continues = round_start.continues;
    } else {
        /* a line ends in ,"chain":"<64 hex>"}\n */
        seq = round_start.seq + k;
        memcpy(chain, last_nl - 66, 64);
        chain[64] = '\0';
        continues = false;
    }
    size_t off = round_start.batch_off;
    for (uint64_t i = 0; i < k; i++)
        off = (size_t)((const char *)memchr(batch.p + off, '\n', batch.len - off) - batch.p) + 1;
    batch_off = off;
    out.len = out_off = 0;
}

/* ---- writing (the writer) ---- */

/* One write(2) of up to n bytes of `out` from out_off. Returns the bytes
 * written; 0 when interrupted, or when a non-blocking descriptor (a pipe
 * its other users made so) could take nothing within RETRY_MS: the write
 * still counts as under way, for the stall check; -1 on an error. */
static ssize_t write_out(size_t n)
{
    if (atomic_load(&write_since_ms) == 0)
        atomic_store(&write_since_ms, now_ms());
    ssize_t r = write(log_fd, out.p + out_off, n);
    if (r < 0 && errno == EINTR)
        return 0;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        struct pollfd pfd = { .fd = log_fd, .events = POLLOUT };
        poll(&pfd, 1, RETRY_MS);
        return 0;
    }
    int e = errno;
    atomic_store(&write_since_ms, 0);
    if (r == 0) {
        e = EIO;   /* a regular file or pipe never takes nothing */
        r = -1;
    }
    errno = e;
    return r;
}

static void lines_written(uint64_t k)
{
    atomic_store(&writer_bytes, writer_held());
    if (k > 0) {
        atomic_fetch_add(&written, k);
        notify();
    }
}

static void write_failed(int e)
{
    char why[300];
    sl_metrics_log_error();
    snprintf(why, sizeof why, "%s: %s", cur_name, strerror(e));
    set_failing(why);
}

/* Chain a round if none is under way, and write some of it. False on a
 * write error (or when nothing could be chained). */
static bool write_round(void)
{
    if (out_off == out.len) {
        out.len = out_off = 0;
        chain_round();
        if (out.len == 0)
            return false;
    }
    ssize_t n = write_out(out.len - out_off);
    if (n < 0) {
        write_failed(errno);
        return false;
    }
    uint64_t k = count_lines(out.p + out_off, (size_t)n);
    out_off += (size_t)n;
    if (out_off == out.len && batch_off == batch.len) {
        /* A buffer that grew in a backlog is given back. */
        if (batch.cap > ((size_t)1 << 20)) {
            free(batch.p);
            batch.p = NULL;
            batch.cap = 0;
        }
        batch.len = batch_off = 0;
    }
    lines_written(k);
    try_recover();
    return true;
}

/* A line the disk took only part of before it filled, when the file is
 * left (a reopen, or exit): cut off again (a regular file, and not
 * standard output, which others may write to), so that the file ends on a
 * whole line. The line then counts as not written: it goes whole to the
 * next file, or is reported at exit. */
static void cut_half_line(void)
{
    if (is_stdout_path(log_path))
        return;
    size_t line_start = out_off;
    while (line_start > 0 && out.p[line_start - 1] != '\n')
        line_start--;
    size_t half = out_off - line_start;
    struct stat st;
    if (half > 0 && fstat(log_fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= half &&
        ftruncate(log_fd, st.st_size - (off_t)half) == 0) {
        out_off = line_start;
        atomic_store(&writer_bytes, writer_held());
    }
}

/* Before leaving a file, finish the line it has half of; or cut it. */
static void finish_line(void)
{
    const char *nl = memchr(out.p + out_off, '\n', out.len - out_off);
    size_t end = (size_t)(nl - out.p) + 1;
    while (out_off < end) {
        ssize_t n = write_out(end - out_off);
        if (n < 0)
            break;
        out_off += (size_t)n;
    }
    if (out_off == end)
        lines_written(1);
    else
        cut_half_line();
}

/* Take the file sl_log_reopen opened (or the one created again after a
 * deletion). */
static void switch_to(int fd, char *path)
{
    if (log_fd >= 0 && out_off < out.len && out_off > 0 && out.p[out_off - 1] != '\n')
        finish_line();
    unchain_unwritten();
    close_log_fd(log_fd, log_path);
    log_fd = fd;
    if (path) {
        free(log_path);
        log_path = path;
    }
    /* The first line chained from now on opens the new file. */
    if (seq > 0)
        continues = true;
    atomic_store(&write_since_ms, 0);
    atomic_store(&writer_bytes, writer_held());
    pthread_mutex_lock(&lock);
    name_of(log_path, cur_name, sizeof cur_name);
    pthread_mutex_unlock(&lock);
}

/* Every RETRY_MS: a file deleted under us fails closed (what we write
 * would vanish) and is created again; its first line names where the
 * chain was. Returns whether there is a file to write to. */
static bool check_file(void)
{
    if (file_deleted()) {
        char why[300];
        snprintf(why, sizeof why, "%s was deleted", log_path);
        sl_metrics_log_error();
        set_failing(why);
        unchain_unwritten();
        close(log_fd);
        log_fd = -1;
        atomic_store(&write_since_ms, 0);
        atomic_store(&writer_bytes, writer_held());
    }
    if (log_fd < 0) {
        char err[300];
        int fd = open_path(log_path, err, sizeof err);
        if (fd < 0)
            return false;
        switch_to(fd, NULL);
    }
    if (writer_held() == 0)
        try_recover();
    return true;
}

/* With `lock` held: the bodies appended so far become the writer's. */
static void take_pending(void)
{
    buffer t = batch;
    batch = pending;
    batch_off = 0;
    pending = t;
    pending.len = 0;
    taken = tickets;
    atomic_store_explicit(&pending_bytes, 0, memory_order_relaxed);
    atomic_store(&writer_bytes, writer_held());
}

static void *writer_main(void *arg)
{
    (void)arg;
    bool retry_later = false;   /* a write failed: the next try at the next check */
    bool close_seen = false;
    bool flush_due = false;     /* RETRY_MS since the last check: write what gathered */
    bool close_checked = false;
    long long next_check = now_ms() + RETRY_MS;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (abandoned)
            break;
        if (switch_fd >= 0) {
            int fd = switch_fd;
            char *path = switch_path;
            switch_fd = -1;
            switch_path = NULL;
            pthread_mutex_unlock(&lock);
            switch_to(fd, path);
            retry_later = false;
            pthread_mutex_lock(&lock);
            continue;
        }
        if (closing && !close_seen) {
            /* One more try of everything, at once; a failure now ends it. */
            close_seen = true;
            retry_later = false;
            next_check = 0;
        }
        long long now = now_ms();
        if (now >= next_check && !(close_seen && close_checked)) {
            /* At exit, the file is checked once (not deleted, or created
             * again), then only written. */
            close_checked = close_seen;
            next_check = now + RETRY_MS;
            flush_due = true;
            pthread_mutex_unlock(&lock);
            bool have_file = check_file();
            retry_later = false;
            pthread_mutex_lock(&lock);
            if (close_seen && !have_file)
                break;
            continue;
        }
        if (writer_held() == 0 && pending.len > 0 &&
            (flush_due || closing || wanted > taken || pending.len >= GATHER_MAX)) {
            take_pending();
            flush_due = false;
        }
        bool work = writer_held() > 0;
        if (work && !retry_later && log_fd >= 0) {
            pthread_mutex_unlock(&lock);
            retry_later = !write_round();
            if (close_seen && retry_later) {
                cut_half_line();   /* giving up: what stays on disk ends whole */
                pthread_mutex_lock(&lock);
                break;
            }
            pthread_mutex_lock(&lock);
            continue;
        }
        if (closing && !work)
            break;
        writer_waiting = true;
        long long wait = next_check > now ? next_check - now : RETRY_MS;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&writer_cond, &lock, &until);
        writer_waiting = false;
    }
    writer_ended = true;
    pthread_cond_broadcast(&ended_cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* ---- the interface ---- */

uint64_t sl_log_line(const char *body, size_t len)
{
    pthread_mutex_lock(&lock);
    if (!reserve(&pending, len + 1, LOG_HARD_MAX)) {
        bool first = lost++ == 0;
        size_t waiting = pending.len;
        pthread_mutex_unlock(&lock);
        if (first)
            fprintf(stderr, "sluice: decision log: %zu MiB wait to be written, more than memory allows; "
                            "lines are being lost\n", waiting >> 20);
        return 0;
    }
    memcpy(pending.p + pending.len, body, len);
    pending.p[pending.len + len] = '\n';
    pending.len += len + 1;
    uint64_t ticket = ++tickets;
    atomic_store_explicit(&pending_bytes, pending.len, memory_order_relaxed);
    bool wake = writer_waiting && pending.len >= GATHER_MAX;
    if (wake)
        writer_waiting = false;
    pthread_mutex_unlock(&lock);
    if (wake)
        pthread_cond_signal(&writer_cond);
    return ticket;
}

bool sl_log_written(uint64_t ticket)
{
    if (ticket <= atomic_load(&written))
        return true;
    /* Someone waits for it: the writer takes it without gathering more. */
    pthread_mutex_lock(&lock);
    bool wake = false;
    uint64_t want = ticket < tickets ? ticket : tickets;
    if (want > wanted) {
        wanted = want;
        wake = writer_waiting;
        writer_waiting = false;
    }
    pthread_mutex_unlock(&lock);
    if (wake)
        pthread_cond_signal(&writer_cond);
    return ticket <= atomic_load(&written);
}

bool sl_log_backlogged(void)
{
    return atomic_load_explicit(&pending_bytes, memory_order_relaxed) +
           atomic_load_explicit(&writer_bytes, memory_order_relaxed) > LOG_SOFT_MAX;
}

static void init_conds(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&writer_cond, &ca);
    pthread_cond_init(&ended_cond, &ca);
    pthread_condattr_destroy(&ca);
}

bool sl_log_open(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;
    char *copy = strdup(path);
    if (!copy) {
        close_log_fd(fd, path);
        snprintf(err, errcap, "out of memory");
        return false;
    }
    init_conds();
    log_fd = fd;
    log_path = copy;
    sl_random_hex(stream, 16);
    seq = 0;
    continues = false;
    atomic_store(&failing, false);
    atomic_store(&written, 0);
    tickets = taken = wanted = 0;
    closing = writer_ended = abandoned = false;
    name_of(path, cur_name, sizeof cur_name);
    /* Signals are the main thread's: the writer starts with them blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&writer, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errcap, "cannot start the log writer: %s", strerror(rc));
        close_log_fd(fd, path);
        log_fd = -1;
        free(log_path);
        log_path = NULL;
        return false;
    }
    writer_running = true;
    return true;
}

bool sl_log_reopen(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;   /* the old file still takes the lines */
    char *copy = strdup(path);
    if (!copy) {
        close_log_fd(fd, path);
        snprintf(err, errcap, "out of memory");
        return false;
    }
    pthread_mutex_lock(&lock);
    if (switch_fd >= 0) {   /* one the writer has not taken yet */
        close_log_fd(switch_fd, switch_path);
        free(switch_path);
    }
    switch_fd = fd;
    switch_path = copy;
    pthread_mutex_unlock(&lock);
    pthread_cond_signal(&writer_cond);
    return true;
}

void sl_log_tick(void)
{
    long long since = atomic_load(&write_since_ms);
    if (since != 0 && now_ms() - since >= STALL_MS && !atomic_load(&failing)) {
        char name[256], why[320];
        pthread_mutex_lock(&lock);
        memcpy(name, cur_name, sizeof name);
        pthread_mutex_unlock(&lock);
        snprintf(why, sizeof why, "%s: a write has been blocked for %d ms", name, STALL_MS);
        pthread_mutex_lock(&report_lock);
        /* Asked again: the write may have ended, and the log recovered,
         * since (both under report_lock). */
        since = atomic_load(&write_since_ms);
        bool started = since != 0 && now_ms() - since >= STALL_MS && fail_locked(why);
        pthread_mutex_unlock(&report_lock);
        if (started) {
            sl_metrics_log_error();
            notify();
        }
    }
    if (sl_log_backlogged() && !atomic_load(&failing)) {
        char why[200];
        size_t waiting = atomic_load(&pending_bytes) + atomic_load(&writer_bytes);
        snprintf(why, sizeof why, "%zu KiB wait to be written (more than %zu MiB)", waiting >> 10,
                 LOG_SOFT_MAX >> 20);
        set_failing(why);
    }
}

bool sl_log_failing(char *why, size_t cap)
{
    if (!atomic_load(&failing))
        return false;
    pthread_mutex_lock(&lock);
    bool still = atomic_load(&failing);
    if (still && why)
        snprintf(why, cap, "%s", fail_why);
    pthread_mutex_unlock(&lock);
    return still;
}

void sl_log_close(void)
{
    pthread_mutex_lock(&lock);
    if (!writer_running) {
        pthread_mutex_unlock(&lock);
        return;
    }
    closing = true;
    pthread_cond_signal(&writer_cond);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += EXIT_WAIT_MS / 1000;
    while (!writer_ended && pthread_cond_timedwait(&ended_cond, &lock, &until) != ETIMEDOUT)
        ;
    bool ended = writer_ended;
    abandoned = !ended;
    size_t left = pending.len;
    unsigned long long nlost = lost;
    pthread_mutex_unlock(&lock);
    left += atomic_load(&writer_bytes);
    if (left > 0)
        fprintf(stderr, "sluice: %zu bytes of decision log could not be written at exit\n", left);
    if (nlost > 0)
        fprintf(stderr, "sluice: %llu decision log lines were lost (out of memory)\n", nlost);
    if (!ended)
        return;   /* stuck in a write: it stays, its buffers reachable, until the process ends */
    pthread_join(writer, NULL);
    writer_running = false;
    close_log_fd(log_fd, log_path);
    log_fd = -1;
    if (switch_fd >= 0)
        close_log_fd(switch_fd, switch_path);
    switch_fd = -1;
    free(switch_path);
    switch_path = NULL;
    free(log_path);
    log_path = NULL;
    free(pending.p);
    free(batch.p);
    free(out.p);
    memset(&pending, 0, sizeof pending);
    memset(&batch, 0, sizeof batch);
    memset(&out, 0, sizeof out);
    batch_off = out_off = 0;
    atomic_store(&pending_bytes, 0);
    atomic_store(&writer_bytes, 0);
    pthread_cond_destroy(&writer_cond);
    pthread_cond_destroy(&ended_cond);
}

static void digits(char *p, long v, int n)
{
    for (int i = n - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

void sl_log_timestamp(char *dst, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* gmtime_r once per second per thread; the rest by hand (this runs for
     * every log line). */
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local struct tm cached_tm;
    if (ts.tv_sec != cached_sec) {
        gmtime_r(&ts.tv_sec, &cached_tm);
        cached_sec = ts.tv_sec;
    }
    tm = cached_tm;
    if (cap >= 28 && tm.tm_year + 1900 < 10000) {
        char *p = dst;
        digits(p, tm.tm_year + 1900, 4);
        p[4] = '-';
        digits(p + 5, tm.tm_mon + 1, 2);
        p[7] = '-';
        digits(p + 8, tm.tm_mday, 2);
        p[10] = 'T';
        digits(p + 11, tm.tm_hour, 2);
        p[13] = ':';
        digits(p + 14, tm.tm_min, 2);
        p[16] = ':';
        digits(p + 17, tm.tm_sec, 2);
        p[19] = '.';
        digits(p + 20, ts.tv_nsec / 1000, 6);
        p[26] = 'Z';
        p[27] = '\0';
        return;
    }
    snprintf(dst, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}
