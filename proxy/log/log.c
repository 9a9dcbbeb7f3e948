/* The decision log's streams, their hash chains, the one writer thread
 * that writes them all, and their write policy.
 *
 * A stream is one file with its own seq, chain, stream id, tickets and
 * failing state: the gate's log (`main_stream`, NULL in the interface),
 * and one per session `log` path (sl_log_stream_get). Each is written as
 * the gate's log always was; the writer serves the ones with work in
 * turn, one write(2) at a time.
 *
 * Who owns what: every stream's `pending`, its tickets, its requests to
 * the writer, the stream table and the lists are shared under `lock`,
 * which is held for a memcpy, a lookup or a few assignments, never across
 * I/O, a callback or a message. A stream's file, chain and the lines being
 * written are the writer thread's alone. What other threads read without
 * the lock (failing, how far writing got, how much waits, whether a write
 * is under way) is atomic.
 *
 * Lists: `all` holds every stream but the gate's (for reopen and the slow
 * round of checks); `active` holds the gate's log always, and any other
 * stream from its first line (or a reopen, or its last put) until the
 * writer has written it, checked it since, and found it idle. The writer
 * and sl_log_tick walk `active` only, so thousands of idle session
 * streams cost nothing per line or per tick. Only the writer removes a
 * stream from a list or frees one (and sl_log_close, after it ended). */
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
 * each, so nothing near this waits unless something else is wrong. Over
 * every stream's pending lines together. */
#define LOG_HARD_MAX ((size_t)256 << 20)
/* Bodies chained per write: a refusal behind a backlog waits for no more
 * hashing than this before lines start to go out. */
#define CHAIN_ROUND ((size_t)256 << 10)
/* A write(2) blocked this long makes the log failing (a pipe nobody reads,
 * a hung disk). */
#define STALL_MS 1000
/* After a write error, the next try; also how often the writer checks that
 * a file was not deleted. */
#define RETRY_MS 100
/* A pipe that takes nothing (EAGAIN) is waited for this long at most
 * before the writer turns to the other streams and comes back. */
#define EAGAIN_POLL_MS 10
/* Idle streams (nothing written since their last check, not failing)
 * checked per RETRY_MS, in turn (see check_round). */
#define IDLE_CHECKS 16
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
/* First buffer sizes: the gate's log is busy; a session's stream small,
 * as thousands may exist. */
#define MAIN_BUF ((size_t)64 << 10)
#define STREAM_BUF ((size_t)4 << 10)

typedef struct buffer {
    char *p;
    size_t len, cap;
} buffer;

struct sl_log_stream {
    /* ---- shared, under `lock` ---- */
    buffer pending;               /* bodies not taken by the writer yet, one per '\n' */
    uint64_t tickets;             /* handed out so far */
    uint64_t taken;               /* tickets the writer has taken */
    uint64_t wanted;              /* the highest ticket someone waits for */
    int switch_fd;                /* sl_log_reopen's file, for the writer to take; -1: none */
    char *switch_path;            /* the gate's log only: its new path, or NULL */
    char fail_why[256];
    char cur_name[256];           /* what the writer writes to, for messages */
    unsigned refs;                /* session streams: sl_log_stream_get's, less puts */
    bool active;                  /* on the active list */
    dev_t dev;                    /* the file open now (sl_log_stream_get compares) */
    ino_t ino;
    sl_log_stream *anext;         /* active list */
    sl_log_stream *next, *prev;   /* all list */
    sl_log_stream *hnext;         /* table bucket */

    /* ---- read without the lock ---- */
    atomic_bool failing;
    atomic_uint_fast64_t written;   /* tickets 1..written are written */
    atomic_size_t pending_bytes;    /* pending.len */
    atomic_size_t writer_bytes;     /* taken by the writer and not written yet */
    atomic_llong write_since_ms;    /* when the write under way began (monotonic); 0: none */

    /* ---- the writer thread's own ---- */
    int fd;                       /* -1: deleted, not created again yet */
    char *path;
    bool is_stdout;
    bool is_main;
    char *key;                    /* the path it was got by (session streams; never changes) */
    size_t first_cap;
    buffer batch;                 /* bodies taken from pending */
    size_t batch_off;             /* the bodies before this are chained */
    buffer out;                   /* chained lines, one round of them */
    size_t out_off;               /* bytes of out written */
    size_t held_shown;            /* what writer_bytes and writer_total count of it */
    char stream[33];
    unsigned long long seq;
    char chain[65];
    bool continues;               /* the next line chained starts a new file */
    bool retry_later;             /* a write failed: the next try at the next check */
    bool flush_due;               /* RETRY_MS since the last check: write what gathered */
    bool gave_up;                 /* at exit: nothing more can be written */
    bool wrote;                   /* wrote since its last check */
    long long checked_ms;         /* its last check */
    /* The chain as it was when `out` was chained, and where its bodies
     * start in `batch`: lines chained but not written when the file
     * changes are chained again, so that the new file's first line
     * carries the continuation. */
    struct {
        unsigned long long seq;
        char chain[65];
        bool continues;
        size_t batch_off;
    } round_start;
};

/* ---- shared, under `lock` ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t writer_cond;   /* wakes the writer */
static pthread_cond_t ended_cond;    /* the writer has ended */
static bool writer_waiting;          /* in its timed wait: signal it when a line is due */
static bool writer_running, closing, writer_ended;
static bool abandoned;               /* sl_log_close stopped waiting: write nothing more */
static unsigned long long lost;      /* lines not kept (LOG_HARD_MAX or out of memory) */
static size_t pending_total;         /* every stream's pending.len */
static sl_log_stream main_stream = { .switch_fd = -1, .fd = -1, .is_main = true, .active = true };
static sl_log_stream *active_head = &main_stream, *active_tail = &main_stream;
static size_t nactive = 1;
static sl_log_stream *all_head;      /* session streams */
static size_t nstreams;
static sl_log_stream **table;        /* session streams by key; power-of-two buckets */
static size_t table_cap;
static sl_log_stream *serve_next;    /* where the writer's next turn starts */
static sl_log_stream *idle_next;     /* where the next round of idle checks starts */

/* ---- read without the lock ---- */
static atomic_size_t pending_total_bytes;   /* pending_total */
static atomic_size_t writer_total;          /* every stream's writer_bytes */
/* The write(2) under way and since when (for streams waiting behind it). */
static _Atomic(sl_log_stream *) in_write;
static atomic_llong in_write_since;

/* Failing and recovering, and their messages, one at a time and in order.
 * Taken by the writer and the main thread only, never by a worker; before
 * `lock` when both are. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

/* The progress callback is called under cb_lock, so that clearing it waits
 * for a call under way (the workers it wakes are freed next). */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*progress_cb)(void);

/* ---- the writer thread's own ---- */
static pthread_t writer;
static sl_log_stream **checks;       /* check_round's list */
static size_t checks_cap;

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

/* A session's file. Non-blocking, so that a FIFO there can never hold the
 * one writer thread (and every other stream) in a write: a FIFO without a
 * reader is an error here (ENXIO), a full one is waited for in turn
 * (EAGAIN). Regular files are not affected. */
static int open_stream_path(const char *path, char *err, size_t errcap)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0640);
    if (fd < 0)
        snprintf(err, errcap, "%s: cannot open log: %s", path, strerror(errno));
    return fd;
}

static void close_log_fd(int fd, bool is_stdout)
{
    if (fd >= 0 && !is_stdout)
        close(fd);
}

/* A log file unlinked under us takes every later line with it. A renamed
 * one (logrotate before its SIGUSR1) still keeps them: not a failure. */
static bool file_deleted(const sl_log_stream *s)
{
    struct stat st;
    return s->fd >= 0 && !s->is_stdout && fstat(s->fd, &st) == 0 && st.st_nlink == 0;
}

static bool reserve(buffer *b, size_t n, size_t first)
{
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : first;
    while (cap < b->len + n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static void buffer_free(buffer *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- the stream table and lists (under `lock`) ---- */

static size_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (size_t)h;
}

static sl_log_stream *table_find(const char *key)
{
    if (!table)
        return NULL;
    for (sl_log_stream *s = table[hash_key(key) & (table_cap - 1)]; s; s = s->hnext)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

static bool table_add(sl_log_stream *s)
{
    if (nstreams + 1 > table_cap) {
        size_t cap = table_cap ? table_cap * 2 : 64;
        sl_log_stream **t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < table_cap; i++)
            for (sl_log_stream *e = table[i], *n; e; e = n) {
                n = e->hnext;
                e->hnext = t[hash_key(e->key) & (cap - 1)];
                t[hash_key(e->key) & (cap - 1)] = e;
            }
        free(table);
        table = t;
        table_cap = cap;
    }
    sl_log_stream **b = &table[hash_key(s->key) & (table_cap - 1)];
    s->hnext = *b;
    *b = s;
    s->next = all_head;
    s->prev = NULL;
    if (all_head)
        all_head->prev = s;
    all_head = s;
    nstreams++;
    return true;
}

static void table_remove(sl_log_stream *s)
{
    for (sl_log_stream **pp = &table[hash_key(s->key) & (table_cap - 1)]; *pp; pp = &(*pp)->hnext)
        if (*pp == s) {
            *pp = s->hnext;
            break;
        }
    if (s->prev)
        s->prev->next = s->next;
    else
        all_head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (idle_next == s)
        idle_next = s->next;
    nstreams--;
}

static void activate(sl_log_stream *s)
{
    s->active = true;
    s->anext = NULL;
    active_tail->anext = s;
    active_tail = s;
    nactive++;
}

static void free_stream(sl_log_stream *s)
{
    close_log_fd(s->fd, false);
    close_log_fd(s->switch_fd, false);
    buffer_free(&s->pending);
    buffer_free(&s->batch);
    buffer_free(&s->out);
    free(s->key);
    free(s);
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

static void fail_message(const sl_log_stream *s, const char *why)
{
    if (s->is_main)
        fprintf(stderr, "sluice: decision log unwritable: %s; refusing new clients (503) until it works\n", why);
    else
        fprintf(stderr, "sluice: log stream %s unwritable: %s; refusing its sessions (503) until it works\n",
                s->key, why);
}

/* With report_lock and `lock` held. Whether s was not failing before. */
static bool mark_failing(sl_log_stream *s, const char *why)
{
    if (atomic_load(&s->failing))
        return false;
    snprintf(s->fail_why, sizeof s->fail_why, "%s", why);
    atomic_store(&s->failing, true);
    return true;
}

static void set_failing(sl_log_stream *s, const char *why)
{
    pthread_mutex_lock(&report_lock);
    pthread_mutex_lock(&lock);
    bool started = mark_failing(s, why);
    pthread_mutex_unlock(&lock);
    if (started)
        fail_message(s, why);
    pthread_mutex_unlock(&report_lock);
    if (started)
        notify();
}

static size_t writer_held(const sl_log_stream *s)
{
    return (s->out.len - s->out_off) + (s->batch.len - s->batch_off);
}

/* The writer: what s holds, for sl_log_backlogged and the tick. */
static void show_held(sl_log_stream *s)
{
    size_t h = writer_held(s);
    if (h != s->held_shown) {
        atomic_fetch_add(&writer_total, h - s->held_shown);   /* wraps to a subtraction */
        s->held_shown = h;
    }
    atomic_store(&s->writer_bytes, h);
}

/* The writer: s works again once what waited is written. */
static void try_recover(sl_log_stream *s)
{
    if (!atomic_load(&s->failing))
        return;
    pthread_mutex_lock(&report_lock);
    bool recovered = false;
    if (atomic_load(&s->failing) && s->fd >= 0 && writer_held(s) == 0 && atomic_load(&s->write_since_ms) == 0 &&
        atomic_load(&s->pending_bytes) < CAUGHT_UP && !file_deleted(s)) {
        atomic_store(&s->failing, false);
        if (s->is_main)
            fprintf(stderr, "sluice: decision log writable again; accepting clients\n");
        else
            fprintf(stderr, "sluice: log stream %s writable again\n", s->key);
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
static void chain_round(sl_log_stream *s)
{
    s->round_start.seq = s->seq;
    memcpy(s->round_start.chain, s->chain, sizeof s->chain);
    s->round_start.continues = s->continues;
    s->round_start.batch_off = s->batch_off;
    size_t start = s->batch_off;
    while (s->batch_off < s->batch.len && s->batch_off - start < CHAIN_ROUND) {
        const char *body = s->batch.p + s->batch_off;
        const char *nl = memchr(body, '\n', s->batch.len - s->batch_off);
        size_t len = (size_t)(nl - body);
        char extra[256], tail[96];
        size_t elen = 0;
        if (s->seq == 0)
            elen = (size_t)snprintf(extra, sizeof extra, ",\"stream\":\"%s\"", s->stream);
        else if (s->continues)
            elen = (size_t)snprintf(extra, sizeof extra,
                                    ",\"stream\":\"%s\",\"continues_seq\":%llu,\"continues_chain\":\"%s\"",
                                    s->stream, s->seq, s->chain);
        size_t tlen = seq_field(tail, s->seq + 1);
        if (!reserve(&s->out, len + elen + tlen + 80, s->first_cap))
            break;   /* out of memory: the rest waits for the next round */
        char *line = s->out.p + s->out.len;
        memcpy(line, body, len);
        memcpy(line + len, extra, elen);
        memcpy(line + len + elen, tail, tlen);
        /* The chained text is the line without its chain field. */
        size_t text_len = len + elen + tlen;
        char next[65];
        if (s->seq == 0)
            sl_chain_next(s->stream, strlen(s->stream), line, text_len, next);
        else
            sl_chain_next(s->chain, 64, line, text_len, next);
        char *p = line + text_len - 1;
        memcpy(p, ",\"chain\":\"", 10);
        memcpy(p + 10, next, 64);
        memcpy(p + 74, "\"}\n", 3);
        s->out.len += text_len - 1 + 77;
        memcpy(s->chain, next, sizeof s->chain);
        s->seq++;
        s->continues = false;
        s->batch_off += len + 1;
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
static void unchain_unwritten(sl_log_stream *s)
{
    if (s->out_off == s->out.len) {
        s->out.len = s->out_off = 0;
        return;
    }
    uint64_t k = 0;
    const char *last_nl = NULL;
    for (const char *p = s->out.p, *end = s->out.p + s->out_off; (p = memchr(p, '\n', (size_t)(end - p))) != NULL;
         p++) {
        k++;
        last_nl = p;
    }
    if (k == 0) {
        s->seq = s->round_start.seq;
        memcpy(s->chain, s->round_start.chain, sizeof s->chain);
        s->continues = s->round_start.continues;
    } else {
        /* a line ends in ,"chain":"<64 hex>"}\n */
        s->seq = s->round_start.seq + k;
        memcpy(s->chain, last_nl - 66, 64);
        s->chain[64] = '\0';
        s->continues = false;
    }
    size_t off = s->round_start.batch_off;
    for (uint64_t i = 0; i < k; i++)
        off = (size_t)((const char *)memchr(s->batch.p + off, '\n', s->batch.len - off) - s->batch.p) + 1;
    s->batch_off = off;
    s->out.len = s->out_off = 0;
}

/* ---- writing (the writer) ---- */

/* One write(2) of up to n bytes of `out` from out_off. Returns the bytes
 * written; 0 when interrupted, or when a non-blocking descriptor (a
 * session's FIFO, or a pipe its other users made so) could take nothing
 * within EAGAIN_POLL_MS: the write still counts as under way, for the
 * stall check; -1 on an error. */
static ssize_t write_out(sl_log_stream *s, size_t n)
{
    long long t = now_ms();
    if (atomic_load(&s->write_since_ms) == 0)
        atomic_store(&s->write_since_ms, t);
    atomic_store(&in_write, s);
    atomic_store(&in_write_since, t);
    ssize_t r = write(s->fd, s->out.p + s->out_off, n);
    int e = errno;
    atomic_store(&in_write_since, 0);
    if (r < 0 && e == EINTR)
        return 0;
    if (r < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
        struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
        poll(&pfd, 1, EAGAIN_POLL_MS);
        return 0;
    }
    atomic_store(&s->write_since_ms, 0);
    if (r == 0) {
        e = EIO;   /* a regular file or pipe never takes nothing */
        r = -1;
    }
    errno = e;
    return r;
}

static void lines_written(sl_log_stream *s, uint64_t k)
{
    show_held(s);
    if (k > 0) {
        atomic_fetch_add(&s->written, k);
        notify();
    }
}

static void write_failed(sl_log_stream *s, int e)
{
    char why[300], name[256];
    sl_metrics_log_error();
    pthread_mutex_lock(&lock);
    memcpy(name, s->cur_name, sizeof name);
    pthread_mutex_unlock(&lock);
    snprintf(why, sizeof why, "%s: %s", name, strerror(e));
    set_failing(s, why);
}

/* Chain a round if none is under way, and write some of it. False on a
 * write error (or when nothing could be chained). */
static bool write_round(sl_log_stream *s)
{
    if (s->out_off == s->out.len) {
        s->out.len = s->out_off = 0;
        chain_round(s);
        if (s->out.len == 0)
            return false;
    }
    ssize_t n = write_out(s, s->out.len - s->out_off);
    if (n < 0) {
        write_failed(s, errno);
        return false;
    }
    uint64_t k = count_lines(s->out.p + s->out_off, (size_t)n);
    s->out_off += (size_t)n;
    if (s->out_off == s->out.len && s->batch_off == s->batch.len) {
        /* A buffer that grew in a backlog is given back. */
        if (s->batch.cap > ((size_t)1 << 20))
            buffer_free(&s->batch);
        s->batch.len = s->batch_off = 0;
    }
    lines_written(s, k);
    try_recover(s);
    return true;
}

/* A line the disk took only part of before it filled, when the file is
 * left (a reopen, or exit): cut off again (a regular file, and not
 * standard output, which others may write to), so that the file ends on a
 * whole line. The line then counts as not written: it goes whole to the
 * next file, or is reported at exit. */
static void cut_half_line(sl_log_stream *s)
{
    if (s->is_stdout || s->fd < 0)
        return;
    size_t line_start = s->out_off;
    while (line_start > 0 && s->out.p[line_start - 1] != '\n')
        line_start--;
    size_t half = s->out_off - line_start;
    struct stat st;
    if (half > 0 && fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= half &&
        ftruncate(s->fd, st.st_size - (off_t)half) == 0) {
        s->out_off = line_start;
        show_held(s);
    }
}

/* Before leaving a file, finish the line it has half of; or cut it. */
static void finish_line(sl_log_stream *s)
{
    const char *nl = memchr(s->out.p + s->out_off, '\n', s->out.len - s->out_off);
    size_t end = (size_t)(nl - s->out.p) + 1;
    while (s->out_off < end) {
        ssize_t n = write_out(s, end - s->out_off);
        if (n < 0)
            break;
        s->out_off += (size_t)n;
    }
    if (s->out_off == end)
        lines_written(s, 1);
    else
        cut_half_line(s);
}

/* Take the file sl_log_reopen opened (or the one created again after a
 * deletion). */
static void switch_to(sl_log_stream *s, int fd, char *path)
{
    if (s->fd >= 0 && s->out_off < s->out.len && s->out_off > 0 && s->out.p[s->out_off - 1] != '\n')
        finish_line(s);
    unchain_unwritten(s);
    close_log_fd(s->fd, s->is_stdout);
    s->fd = fd;
    if (path) {
        free(s->path);
        s->path = path;
        s->is_stdout = is_stdout_path(path);
    }
    /* The first line chained from now on opens the new file. */
    if (s->seq > 0)
        s->continues = true;
    atomic_store(&s->write_since_ms, 0);
    show_held(s);
    struct stat st;
    bool have_id = fstat(fd, &st) == 0;
    pthread_mutex_lock(&lock);
    name_of(s->path, s->cur_name, sizeof s->cur_name);
    if (have_id) {
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    pthread_mutex_unlock(&lock);
}

/* A file deleted under us fails closed (what we write would vanish) and
 * is created again; its first line names where the chain was. Returns
 * whether there is a file to write to. */
static bool check_file(sl_log_stream *s)
{
    if (file_deleted(s)) {
        char why[300];
        snprintf(why, sizeof why, "%s was deleted", s->path);
        sl_metrics_log_error();
        set_failing(s, why);
        unchain_unwritten(s);
        close(s->fd);
        s->fd = -1;
        atomic_store(&s->write_since_ms, 0);
        show_held(s);
    }
    if (s->fd < 0) {
        char err[300];
        int fd = s->is_main ? open_path(s->path, err, sizeof err) : open_stream_path(s->path, err, sizeof err);
        if (fd < 0)
            return false;
        switch_to(s, fd, NULL);
    }
    if (writer_held(s) == 0)
        try_recover(s);
    return true;
}

/* With `lock` held: the bodies appended to s so far become the writer's. */
static void take_pending(sl_log_stream *s)
{
    buffer t = s->batch;
    s->batch = s->pending;
    s->batch_off = 0;
    s->pending = t;
    pending_total -= s->batch.len;
    s->pending.len = 0;
    s->taken = s->tickets;
    atomic_store_explicit(&s->pending_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&pending_total_bytes, pending_total, memory_order_relaxed);
    show_held(s);
}

/* With `lock` held: nothing for the writer to do for s, nor to check. */
static bool stream_idle(const sl_log_stream *s)
{
    return s->pending.len == 0 && writer_held(s) == 0 && s->switch_fd < 0 && !s->wrote &&
           !atomic_load(&s->failing) && atomic_load(&s->write_since_ms) == 0;
}

/* Every RETRY_MS, with `lock` held (it is let go while files are
 * checked): what gathered is due to be written, and deleted files are
 * noticed and created again.
 *
 * Checked are the active streams (the gate's log, every stream that wrote
 * since its last check, is failing, or has lines waiting) and, of the
 * idle rest, IDLE_CHECKS in turn, so that thousands of idle streams cost
 * IDLE_CHECKS fstat calls per round, not one each: a full turn over N of
 * them takes N / IDLE_CHECKS rounds of RETRY_MS. An idle stream whose file
 * was deleted loses nothing meanwhile (it writes nothing), and it is
 * checked before it writes again (serve_one); the turn only makes the
 * deletion show (failing, the file created again) sooner.
 *
 * Idle streams leave the active list here; one with no reference left is
 * closed and freed (its lines are all written by then). */
static void check_round(bool at_exit)
{
    size_t want = nactive + (at_exit ? 0 : IDLE_CHECKS);
    if (want > checks_cap) {
        sl_log_stream **c = realloc(checks, want * sizeof *c);
        if (c) {
            checks = c;
            checks_cap = want;
        }
    }
    size_t n = 0;
    for (sl_log_stream *s = active_head; s && n < checks_cap; s = s->anext) {
        s->flush_due = true;
        checks[n++] = s;
    }
    if (!at_exit) {
        for (size_t k = 0; k < IDLE_CHECKS && k < nstreams && n < checks_cap; k++) {
            sl_log_stream *s = idle_next ? idle_next : all_head;
            idle_next = s->next;
            if (!s->active)
                checks[n++] = s;
        }
    }
    pthread_mutex_unlock(&lock);
    long long now = now_ms();
    for (size_t i = 0; i < n; i++) {
        sl_log_stream *s = checks[i];
        bool have_file = check_file(s);
        s->checked_ms = now;
        s->wrote = false;
        s->retry_later = false;
        if (at_exit && !have_file)
            s->gave_up = true;   /* its lines are reported at exit */
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++)
        if (!checks[i]->active && atomic_load(&checks[i]->failing))
            activate(checks[i]);   /* checked every round until it recovers */
    sl_log_stream *gone = NULL;
    sl_log_stream *prev = NULL;
    for (sl_log_stream *s = active_head, *next; s; s = next) {
        next = s->anext;
        if (s->is_main || !stream_idle(s)) {
            prev = s;
            continue;
        }
        /* prev is never NULL: the gate's log is first and stays. */
        prev->anext = next;
        if (active_tail == s)
            active_tail = prev;
        if (serve_next == s)
            serve_next = next;
        nactive--;
        s->active = false;
        if (s->refs == 0) {
            table_remove(s);
            s->anext = gone;
            gone = s;
        } else {
            /* Its buffers are given back while it is idle (all of them
             * written: held is 0). */
            buffer_free(&s->pending);
            buffer_free(&s->batch);
            buffer_free(&s->out);
            s->batch_off = s->out_off = 0;
        }
    }
    if (gone) {
        pthread_mutex_unlock(&lock);
        for (sl_log_stream *s = gone, *next; s; s = next) {
            next = s->anext;
            free_stream(s);
        }
        pthread_mutex_lock(&lock);
    }
}

/* With `lock` held (let go while it writes): one turn of work on the next
 * stream that has some, from where the last turn ended, so that a busy
 * stream never keeps the others waiting. Returns whether it did
 * something. */
static bool serve_one(bool close_seen)
{
    sl_log_stream *s = serve_next ? serve_next : active_head;
    for (size_t i = 0; i < nactive; i++, s = s->anext ? s->anext : active_head) {
        if (s->switch_fd >= 0) {
            int fd = s->switch_fd;
            char *path = s->switch_path;
            s->switch_fd = -1;
            s->switch_path = NULL;
            serve_next = s;
            pthread_mutex_unlock(&lock);
            switch_to(s, fd, path);
            s->retry_later = false;
            pthread_mutex_lock(&lock);
            return true;
        }
        if (s->gave_up)
            continue;
        if (writer_held(s) == 0 && s->pending.len > 0 &&
            (s->flush_due || closing || s->wanted > s->taken || s->pending.len >= GATHER_MAX)) {
            take_pending(s);
            s->flush_due = false;
        }
        if (writer_held(s) == 0 || s->retry_later || s->fd < 0)
            continue;
        serve_next = s->anext;
        pthread_mutex_unlock(&lock);
        long long now = now_ms();
        if (!close_seen && now - s->checked_ms >= 2 * RETRY_MS) {
            /* Idle for a while: its file may have gone meanwhile. */
            check_file(s);
            s->checked_ms = now;
        }
        bool ok = s->fd >= 0 && write_round(s);
        s->wrote = true;
        if (!ok) {
            s->retry_later = true;
            if (close_seen) {
                cut_half_line(s);   /* giving up: what stays on disk ends whole */
                s->gave_up = true;
            }
        }
        pthread_mutex_lock(&lock);
        return true;
    }
    return false;
}

static void *writer_main(void *arg)
{
    (void)arg;
    bool close_seen = false;
    bool close_checked = false;
    long long next_check = now_ms() + RETRY_MS;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (abandoned)
            break;
        if (closing && !close_seen) {
            /* One more try of everything, at once; a failure now ends it. */
            close_seen = true;
            next_check = 0;
        }
        long long now = now_ms();
        if (now >= next_check && !(close_seen && close_checked)) {
            /* At exit, the files are checked once (not deleted, or created
             * again), then only written. */
            close_checked = close_seen;
            next_check = now + RETRY_MS;
            check_round(close_seen);
            continue;
        }
        if (serve_one(close_seen))
            continue;
        if (closing)
            break;   /* everything written, or given up */
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

uint64_t sl_log_line_in(sl_log_stream *s, const char *body, size_t len)
{
    if (!s)
        s = &main_stream;
    pthread_mutex_lock(&lock);
    if (pending_total + len + 1 > LOG_HARD_MAX || !reserve(&s->pending, len + 1, s->first_cap)) {
        bool first = lost++ == 0;
        size_t waiting = pending_total;
        pthread_mutex_unlock(&lock);
        if (first)
            fprintf(stderr, "sluice: decision log: %zu MiB wait to be written, more than memory allows; "
                            "lines are being lost\n", waiting >> 20);
        return 0;
    }
    memcpy(s->pending.p + s->pending.len, body, len);
    s->pending.p[s->pending.len + len] = '\n';
    s->pending.len += len + 1;
    pending_total += len + 1;
    uint64_t ticket = ++s->tickets;
    atomic_store_explicit(&s->pending_bytes, s->pending.len, memory_order_relaxed);
    atomic_store_explicit(&pending_total_bytes, pending_total, memory_order_relaxed);
    if (!s->active)
        activate(s);
    bool wake = writer_waiting && s->pending.len >= GATHER_MAX;
    if (wake)
        writer_waiting = false;
    pthread_mutex_unlock(&lock);
    if (wake)
        pthread_cond_signal(&writer_cond);
    return ticket;
}

uint64_t sl_log_line(const char *body, size_t len)
{
    return sl_log_line_in(&main_stream, body, len);
}

bool sl_log_written_in(sl_log_stream *s, uint64_t ticket)
{
    if (!s)
        s = &main_stream;
    if (ticket <= atomic_load(&s->written))
        return true;
    /* Someone waits for it: the writer takes it without gathering more. */
    pthread_mutex_lock(&lock);
    bool wake = false;
    uint64_t want = ticket < s->tickets ? ticket : s->tickets;
    if (want > s->wanted) {
        s->wanted = want;
        wake = writer_waiting;
        writer_waiting = false;
    }
    pthread_mutex_unlock(&lock);
    if (wake)
        pthread_cond_signal(&writer_cond);
    return ticket <= atomic_load(&s->written);
}

bool sl_log_written(uint64_t ticket)
{
    return sl_log_written_in(&main_stream, ticket);
}

bool sl_log_backlogged(void)
{
    return atomic_load_explicit(&pending_total_bytes, memory_order_relaxed) +
           atomic_load_explicit(&writer_total, memory_order_relaxed) > LOG_SOFT_MAX;
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
        close_log_fd(fd, is_stdout_path(path));
        snprintf(err, errcap, "out of memory");
        return false;
    }
    init_conds();
    sl_log_stream *s = &main_stream;
    s->fd = fd;
    s->path = copy;
    s->is_stdout = is_stdout_path(path);
    s->first_cap = MAIN_BUF;
    sl_random_hex(s->stream, 16);
    s->seq = 0;
    s->continues = false;
    s->checked_ms = now_ms();
    atomic_store(&s->failing, false);
    atomic_store(&s->written, 0);
    s->tickets = s->taken = s->wanted = 0;
    closing = writer_ended = abandoned = false;
    name_of(path, s->cur_name, sizeof s->cur_name);
    struct stat st;
    if (fstat(fd, &st) == 0) {
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    /* Signals are the main thread's: the writer starts with them blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&writer, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errcap, "cannot start the log writer: %s", strerror(rc));
        close_log_fd(fd, s->is_stdout);
        s->fd = -1;
        free(s->path);
        s->path = NULL;
        return false;
    }
    pthread_mutex_lock(&lock);
    writer_running = true;
    pthread_mutex_unlock(&lock);
    return true;
}

static sl_log_stream *stream_get(const char *path, char *err, size_t errcap);

/* One file is one stream, however its path is spelled ("dir/./x", a
 * symlinked directory): two streams, each with its own chain, appending to
 * one file would make it unverifiable. The file itself may not exist yet:
 * then its directory is resolved. NULL when neither resolves. */
static char *canonical_path(const char *path)
{
    char *whole = realpath(path, NULL);
    if (whole)
        return whole;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *rdir = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rdir || !*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        free(rdir);
        return NULL;
    }
    char *out = NULL;
    if (asprintf(&out, "%s/%s", strcmp(rdir, "/") == 0 ? "" : rdir, base) < 0)
        out = NULL;
    free(rdir);
    return out;
}

sl_log_stream *sl_log_stream_get(const char *given, char *err, size_t errcap)
{
    char *path = canonical_path(given);
    if (!path) {
        snprintf(err, errcap, "%s: cannot open log: %s", given, strerror(errno ? errno : ENOENT));
        return NULL;
    }
    sl_log_stream *got = stream_get(path, err, errcap);
    free(path);
    return got;
}

static sl_log_stream *stream_get(const char *path, char *err, size_t errcap)
{
    pthread_mutex_lock(&lock);
    if (!writer_running || closing) {
        pthread_mutex_unlock(&lock);
        snprintf(err, errcap, "%s: the decision log is not open", path);
        return NULL;
    }
    sl_log_stream *s = table_find(path);
    if (s) {
        s->refs++;
        pthread_mutex_unlock(&lock);
        return s;
    }
    pthread_mutex_unlock(&lock);

    int fd = open_stream_path(path, err, errcap);
    if (fd < 0)
        return NULL;
    struct stat st;
    s = calloc(1, sizeof *s);
    char *key = strdup(path);
    if (fstat(fd, &st) != 0 || !s || !key) {
        snprintf(err, errcap, "%s: %s", path, s && key ? strerror(errno) : "out of memory");
        close(fd);
        free(s);
        free(key);
        return NULL;
    }
    s->key = s->path = key;
    s->fd = fd;
    s->switch_fd = -1;
    s->first_cap = STREAM_BUF;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->refs = 1;
    s->checked_ms = now_ms();
    sl_random_hex(s->stream, 16);
    name_of(path, s->cur_name, sizeof s->cur_name);

    pthread_mutex_lock(&lock);
    const char *why = NULL;
    sl_log_stream *other = table_find(path);
    if (other) {
        other->refs++;   /* got by another thread meanwhile */
    } else if (st.st_dev == main_stream.dev && st.st_ino == main_stream.ino) {
        why = "is the gate's own log (leave `log` out to log there)";
    } else if (!table_add(s)) {
        why = "out of memory";
    }
    pthread_mutex_unlock(&lock);
    if (other || why) {
        if (why)
            snprintf(err, errcap, "%s: %s", path, why);
        free_stream(s);
        return other;
    }
    return s;
}

void sl_log_stream_put(sl_log_stream *s)
{
    if (!s || s->is_main)
        return;
    pthread_mutex_lock(&lock);
    if (--s->refs > 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    if (writer_running) {
        /* The writer closes and frees it once its lines are written. */
        if (!s->active)
            activate(s);
        pthread_mutex_unlock(&lock);
        return;
    }
    table_remove(s);   /* after sl_log_close: nothing waits in it */
    pthread_mutex_unlock(&lock);
    free_stream(s);
}

/* Every session stream at its own path again (SIGUSR1 after logrotate).
 * One that cannot be opened goes on writing to the file it has. */
static void reopen_streams(void)
{
    pthread_mutex_lock(&lock);
    size_t n = nstreams;
    sl_log_stream **v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v) {
        pthread_mutex_unlock(&lock);
        fprintf(stderr, "sluice: out of memory reopening the session log streams\n");
        return;
    }
    size_t k = 0;
    for (sl_log_stream *s = all_head; s && k < n; s = s->next) {
        s->refs++;   /* kept while the lock is let go */
        v[k++] = s;
    }
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < k; i++) {
        char err[400];
        int fd = open_stream_path(v[i]->key, err, sizeof err);
        if (fd < 0) {
            fprintf(stderr, "sluice: %s; it goes on writing to the file it had\n", err);
            continue;
        }
        pthread_mutex_lock(&lock);
        int old = v[i]->switch_fd;
        v[i]->switch_fd = fd;
        if (!v[i]->active)
            activate(v[i]);
        pthread_mutex_unlock(&lock);
        close_log_fd(old, false);
    }
    for (size_t i = 0; i < k; i++)
        sl_log_stream_put(v[i]);
    free(v);
}

bool sl_log_reopen(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;   /* the old file still takes the lines */
    char *copy = strdup(path);
    if (!copy) {
        close_log_fd(fd, is_stdout_path(path));
        snprintf(err, errcap, "out of memory");
        return false;
    }
    pthread_mutex_lock(&lock);
    if (main_stream.switch_fd >= 0) {   /* one the writer has not taken yet */
        close_log_fd(main_stream.switch_fd, is_stdout_path(main_stream.switch_path));
        free(main_stream.switch_path);
    }
    main_stream.switch_fd = fd;
    main_stream.switch_path = copy;
    pthread_mutex_unlock(&lock);
    reopen_streams();
    pthread_cond_signal(&writer_cond);
    return true;
}

bool sl_log_failing_in(sl_log_stream *s, char *why, size_t cap)
{
    if (!s)
        s = &main_stream;
    if (!atomic_load(&s->failing))
        return false;
    pthread_mutex_lock(&lock);
    bool still = atomic_load(&s->failing);
    if (still && why)
        snprintf(why, cap, "%s", s->fail_why);
    pthread_mutex_unlock(&lock);
    return still;
}

bool sl_log_failing(char *why, size_t cap)
{
    return sl_log_failing_in(&main_stream, why, cap);
}

/* Streams that start failing in one tick, at most (the rest, the next). */
#define TICK_FAILS 16

void sl_log_tick(void)
{
    struct {
        sl_log_stream *s;
        char why[600];
        bool stalled;
    } started[TICK_FAILS];
    int nstarted = 0;
    long long now = now_ms();
    /* report_lock first: a stream that starts failing here cannot recover
     * (and be freed) before its message is out. */
    pthread_mutex_lock(&report_lock);
    pthread_mutex_lock(&lock);
    /* The same stream before and after: the time is its write's (and it
     * cannot be freed while `lock` is held). */
    sl_log_stream *writing = atomic_load(&in_write);
    long long stuck_since = atomic_load(&in_write_since);
    sl_log_stream *stuck = stuck_since != 0 && now - stuck_since >= STALL_MS && atomic_load(&in_write) == writing
                               ? writing
                               : NULL;
    size_t total = atomic_load(&pending_total_bytes) + atomic_load(&writer_total);
    for (sl_log_stream *s = active_head; s && nstarted < TICK_FAILS; s = s->anext) {
        if (atomic_load(&s->failing))
            continue;
        long long since = atomic_load(&s->write_since_ms);
        size_t waiting = atomic_load(&s->pending_bytes) + atomic_load(&s->writer_bytes);
        char *why = started[nstarted].why;
        size_t cap = sizeof started[nstarted].why;
        bool stalled = false;
        if (since != 0 && now - since >= STALL_MS) {
            snprintf(why, cap, "%s: a write has been blocked for %d ms", s->cur_name, STALL_MS);
            stalled = true;
        } else if (waiting > LOG_SOFT_MAX) {
            snprintf(why, cap, "%zu KiB wait to be written (more than %zu MiB)", waiting >> 10, LOG_SOFT_MAX >> 20);
        } else if (total > LOG_SOFT_MAX && waiting >= CAUGHT_UP) {
            /* Many streams behind at once: those with a share of it stop
             * adding to it too (sl_log_backlogged already stops accepts). */
            snprintf(why, cap, "%zu KiB wait to be written in every stream together (more than %zu MiB)",
                     total >> 10, LOG_SOFT_MAX >> 20);
        } else if (stuck && stuck != s && waiting > 0) {
            /* One writer for every stream: its lines are not written
             * either while another's write is blocked. */
            snprintf(why, cap, "%s: waits behind %s, whose write has been blocked for %d ms", s->cur_name,
                     stuck->cur_name, STALL_MS);
        } else {
            continue;
        }
        mark_failing(s, why);
        started[nstarted].s = s;
        started[nstarted].stalled = stalled;
        nstarted++;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < nstarted; i++) {
        fail_message(started[i].s, started[i].why);
        if (started[i].stalled)
            sl_metrics_log_error();
    }
    pthread_mutex_unlock(&report_lock);
    if (nstarted > 0)
        notify();
}

/* What s could not write at exit. */
static size_t left_in(const sl_log_stream *s)
{
    return s->pending.len + atomic_load(&s->writer_bytes);
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
    size_t left = left_in(&main_stream);
    unsigned long long nlost = lost;
    /* Named below: a few of the session streams with lines left. */
    struct {
        char name[256];
        size_t left;
    } others[8];
    size_t nothers = 0, more = 0;
    for (sl_log_stream *s = all_head; s; s = s->next) {
        size_t l = left_in(s);
        if (l == 0)
            continue;
        if (nothers < 8) {
            snprintf(others[nothers].name, sizeof others[nothers].name, "%s", s->key);
            others[nothers++].left = l;
        } else {
            more++;
        }
    }
    pthread_mutex_unlock(&lock);
    if (left > 0)
        fprintf(stderr, "sluice: %zu bytes of decision log could not be written at exit\n", left);
    for (size_t i = 0; i < nothers; i++)
        fprintf(stderr, "sluice: %zu bytes of log stream %s could not be written at exit\n", others[i].left,
                others[i].name);
    if (more > 0)
        fprintf(stderr, "sluice: and lines of %zu more log streams\n", more);
    if (nlost > 0)
        fprintf(stderr, "sluice: %llu decision log lines were lost (out of memory)\n", nlost);
    if (!ended)
        return;   /* stuck in a write: it stays, its buffers reachable, until the process ends */
    pthread_join(writer, NULL);
    pthread_mutex_lock(&lock);
    writer_running = false;
    /* Streams still referenced keep their struct (their put frees it),
     * nothing else. */
    for (sl_log_stream *s = all_head, *next; s; s = next) {
        next = s->next;
        if (s->refs == 0) {
            table_remove(s);
            free_stream(s);
            continue;
        }
        close_log_fd(s->fd, false);
        close_log_fd(s->switch_fd, false);
        s->fd = s->switch_fd = -1;
        buffer_free(&s->pending);
        buffer_free(&s->batch);
        buffer_free(&s->out);
        s->active = false;
    }
    main_stream.anext = NULL;
    active_head = active_tail = &main_stream;
    nactive = 1;
    serve_next = idle_next = NULL;
    if (nstreams == 0) {
        free(table);
        table = NULL;
        table_cap = 0;
    }
    pthread_mutex_unlock(&lock);
    sl_log_stream *s = &main_stream;
    close_log_fd(s->fd, s->is_stdout);
    s->fd = -1;
    if (s->switch_fd >= 0)
        close_log_fd(s->switch_fd, is_stdout_path(s->switch_path));
    s->switch_fd = -1;
    free(s->switch_path);
    s->switch_path = NULL;
    free(s->path);
    s->path = NULL;
    buffer_free(&s->pending);
    buffer_free(&s->batch);
    buffer_free(&s->out);
    s->batch_off = s->out_off = 0;
    s->held_shown = 0;
    atomic_store(&s->pending_bytes, 0);
    atomic_store(&s->writer_bytes, 0);
    pending_total = 0;
    atomic_store(&pending_total_bytes, 0);
    atomic_store(&writer_total, 0);
    free(checks);
    checks = NULL;
    checks_cap = 0;
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
