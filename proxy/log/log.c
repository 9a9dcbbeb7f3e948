/* The decision log file, its hash chain and its write policy. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* Lines kept in memory while the file cannot be written. Past this, new
 * lines (only refusals can be made then: the gate admits no one) are
 * counted as lost and reported, rather than growing without bound. */
#define BUF_MAX (8u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static char *log_path;

/* Two buffers: `pending` holds line bodies not chained yet, one per '\n';
 * `out` holds chained lines not written yet. Lines are chained only when
 * `out` is empty, at write time, so that the first line written to a new
 * file (after a reopen, or a deleted file created again) is the one that
 * carries the continuation fields. */
typedef struct buffer {
    char *p;
    size_t len, cap;
} buffer;
static buffer pending, out;

static char stream[33];
static unsigned long long seq;
static char chain[65];
static bool continues;          /* the next line chained starts a new file */
static unsigned long long lost;

static atomic_bool failing;
static char fail_why[256];

static bool is_stdout(void)
{
    return log_fd == STDOUT_FILENO && log_path && strcmp(log_path, "-") == 0;
}

static int open_path(const char *path, char *err, size_t errcap)
{
    if (strcmp(path, "-") == 0)
        return STDOUT_FILENO;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        snprintf(err, errcap, "%s: cannot open log: %s", path, strerror(errno));
    return fd;
}

/* A log file unlinked under us takes every later line with it. A renamed
 * one (logrotate before its SIGUSR1) still keeps them: not a failure. */
static bool file_deleted(void)
{
    struct stat st;
    return log_fd >= 0 && !is_stdout() && fstat(log_fd, &st) == 0 && st.st_nlink == 0;
}

static void set_failing(const char *why)
{
    sl_metrics_log_error();
    if (!atomic_load(&failing)) {
        snprintf(fail_why, sizeof fail_why, "%s", why);
        fprintf(stderr, "sluice: decision log unwritable: %s; refusing new clients (503) until it works\n", why);
    }
    atomic_store(&failing, true);
}

static void set_ok(void)
{
    if (atomic_load(&failing))
        fprintf(stderr, "sluice: decision log writable again; accepting clients\n");
    atomic_store(&failing, false);
}

static bool reserve(buffer *b, size_t n)
{
    if (b->len + n <= b->cap)
        return true;
    if (b->len + n > BUF_MAX)
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

/* Give every pending body its stream/continuation fields, seq and chain. */
static void chain_pending(void)
{
    size_t off = 0;
    while (off < pending.len) {
        const char *body = pending.p + off;
        const char *nl = memchr(body, '\n', pending.len - off);
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
        if (!reserve(&out, len + elen + tlen + 80))
            break;   /* out of memory: the rest stays pending */
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
        off += len + 1;
    }
    if (off > 0) {
        memmove(pending.p, pending.p + off, pending.len - off);
        pending.len -= off;
    }
}

/* Write what is buffered; on failure keep what was not written. */
static void flush_locked(void)
{
    if (out.len == 0)
        chain_pending();
    size_t off = 0;
    while (log_fd >= 0 && off < out.len) {
        ssize_t n = write(log_fd, out.p + off, out.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            char why[200];
            snprintf(why, sizeof why, "%s: %s", log_path ? log_path : "log",
                     n < 0 ? strerror(errno) : "short write");
            set_failing(why);
            break;
        }
        off += (size_t)n;
        if (off == out.len && pending.len > 0) {
            /* everything chained is out: chain and write the rest */
            out.len = 0;
            off = 0;
            chain_pending();
        }
    }
    if (off > 0) {
        memmove(out.p, out.p + off, out.len - off);
        out.len -= off;
    }
    if (out.len == 0 && pending.len == 0 && log_fd >= 0 && atomic_load(&failing) && !file_deleted())
        set_ok();   /* writes work again */
}

void sl_log_line(const char *body, size_t len, bool sync)
{
    pthread_mutex_lock(&lock);
    if (!reserve(&pending, len + 1)) {
        if (lost++ == 0)
            fprintf(stderr, "sluice: decision log buffer full while the log fails; lines are being lost\n");
        pthread_mutex_unlock(&lock);
        return;
    }
    memcpy(pending.p + pending.len, body, len);
    pending.p[pending.len + len] = '\n';
    pending.len += len + 1;
    if (sync || pending.len >= 65536)
        flush_locked();
    pthread_mutex_unlock(&lock);
}

bool sl_log_open(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;
    pthread_mutex_lock(&lock);
    log_fd = fd;
    free(log_path);
    log_path = strdup(path);
    sl_random_hex(stream, 16);
    seq = 0;
    pthread_mutex_unlock(&lock);
    return true;
}

bool sl_log_reopen(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;   /* the old file still takes the lines */
    pthread_mutex_lock(&lock);
    flush_locked();   /* what the old file can still take */
    if (log_fd >= 0 && !is_stdout())
        close(log_fd);
    log_fd = fd;
    if (strcmp(log_path ? log_path : "", path) != 0) {
        free(log_path);
        log_path = strdup(path);
    }
    /* The first line chained from now on opens the new file. */
    if (seq > 0)
        continues = true;
    flush_locked();
    pthread_mutex_unlock(&lock);
    return true;
}

void sl_log_tick(void)
{
    pthread_mutex_lock(&lock);
    if (log_path && file_deleted()) {
        /* Removed under us: what we write would vanish. Fail closed, and
         * create it again (its first line names where the chain was). */
        {
            char why[300], err[300];
            snprintf(why, sizeof why, "%s was deleted", log_path);
            set_failing(why);
            int fd = open_path(log_path, err, sizeof err);
            if (fd >= 0) {
                close(log_fd);
                log_fd = fd;
                            if (seq > 0)
                    continues = true;
            }
        }
    }
    flush_locked();
    pthread_mutex_unlock(&lock);
}

bool sl_log_failing(char *why, size_t cap)
{
    if (!atomic_load(&failing))
        return false;
    /* Asked again under the lock: the tick that re-creates a deleted file
     * holds it until writing works again, so a client that comes in while
     * the new file already exists is not refused. */
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
    flush_locked();
    if (out.len + pending.len > 0)
        fprintf(stderr, "sluice: %zu bytes of decision log could not be written at exit\n", out.len + pending.len);
    if (lost > 0)
        fprintf(stderr, "sluice: %llu decision log lines were lost while the log failed\n", lost);
    if (log_fd >= 0 && !is_stdout())
        close(log_fd);
    log_fd = -1;
    free(pending.p);
    free(out.p);
    memset(&pending, 0, sizeof pending);
    memset(&out, 0, sizeof out);
    free(log_path);
    log_path = NULL;
    pthread_mutex_unlock(&lock);
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
