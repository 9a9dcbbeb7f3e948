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

/* Lines kept in memory while the file cannot be written. Past this, new
 * lines (only refusals can be made then: the gate admits no one) are
 * counted as lost and reported, rather than growing without bound. */
#define BUF_MAX (8u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static char *log_path;
static dev_t log_dev;
static ino_t log_ino;

static char *buf;
static size_t buf_len, buf_cap;

static char stream[33];
static unsigned long long seq;
static char chain[65];
static bool continues;          /* the next line starts a reopened file */
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

static void remember_identity(void)
{
    struct stat st;
    if (log_fd >= 0 && fstat(log_fd, &st) == 0) {
        log_dev = st.st_dev;
        log_ino = st.st_ino;
    }
}

static void set_failing(const char *why)
{
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

/* Write the buffer out; on failure keep what was not written. */
static void flush_locked(void)
{
    size_t off = 0;
    while (log_fd >= 0 && off < buf_len) {
        ssize_t n = write(log_fd, buf + off, buf_len - off);
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
    }
    if (off > 0) {
        memmove(buf, buf + off, buf_len - off);
        buf_len -= off;
    }
    if (buf_len == 0 && log_fd >= 0 && atomic_load(&failing)) {
        /* Writes work again; but a removed file is still failing. */
        struct stat st;
        if (is_stdout() || (stat(log_path, &st) == 0 && st.st_ino == log_ino && st.st_dev == log_dev))
            set_ok();
    }
}

static bool reserve(size_t n)
{
    if (buf_len + n <= buf_cap)
        return true;
    if (buf_len + n > BUF_MAX)
        return false;
    size_t cap = buf_cap ? buf_cap : 65536;
    while (cap < buf_len + n)
        cap *= 2;
    char *b = realloc(buf, cap);
    if (!b)
        return false;
    buf = b;
    buf_cap = cap;
    return true;
}

void sl_log_line(const char *body, size_t len, bool sync)
{
    char extra[256], tail[96];
    pthread_mutex_lock(&lock);
    size_t elen = 0;
    if (seq == 0)
        elen = (size_t)snprintf(extra, sizeof extra, ",\"stream\":\"%s\"", stream);
    else if (continues)
        elen = (size_t)snprintf(extra, sizeof extra,
                                ",\"stream\":\"%s\",\"continues_seq\":%llu,\"continues_chain\":\"%s\"",
                                stream, seq, chain);
    int tlen = snprintf(tail, sizeof tail, ",\"seq\":%llu}", seq + 1);
    /* The chained text is the line without its chain field. */
    size_t need = len + elen + (size_t)tlen + 80;
    if (!reserve(need)) {
        if (lost++ == 0)
            fprintf(stderr, "sluice: decision log buffer full while the log fails; lines are being lost\n");
        pthread_mutex_unlock(&lock);
        return;
    }
    char *line = buf + buf_len;
    memcpy(line, body, len);
    memcpy(line + len, extra, elen);
    memcpy(line + len + elen, tail, (size_t)tlen);
    size_t text_len = len + elen + (size_t)tlen;
    char next[65];
    if (seq == 0)
        sl_chain_next(stream, strlen(stream), line, text_len, next);
    else
        sl_chain_next(chain, 64, line, text_len, next);
    /* Replace the closing brace with the chain field. */
    int clen = snprintf(line + text_len - 1, 80, ",\"chain\":\"%s\"}\n", next);
    buf_len += text_len - 1 + (size_t)clen;
    memcpy(chain, next, sizeof chain);
    seq++;
    continues = false;
    if (sync || buf_len >= 65536)
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
    remember_identity();
    sl_random_hex(stream, 16);
    seq = 0;
    pthread_mutex_unlock(&lock);
    return true;
}

bool sl_log_reopen(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    pthread_mutex_lock(&lock);
    if (fd < 0) {
        set_failing(err);
        pthread_mutex_unlock(&lock);
        return false;
    }
    flush_locked();   /* what the old file can still take */
    if (log_fd >= 0 && !is_stdout())
        close(log_fd);
    log_fd = fd;
    if (strcmp(log_path ? log_path : "", path) != 0) {
        free(log_path);
        log_path = strdup(path);
    }
    remember_identity();
    /* Lines still buffered were chained before the reopen; the marker goes
     * on the first line chained after it, which follows them. */
    if (seq > 0)
        continues = true;
    flush_locked();
    pthread_mutex_unlock(&lock);
    return true;
}

void sl_log_tick(void)
{
    pthread_mutex_lock(&lock);
    if (log_fd >= 0 && !is_stdout() && log_path) {
        struct stat st;
        if (stat(log_path, &st) != 0 || st.st_ino != log_ino || st.st_dev != log_dev) {
            /* Removed or replaced under us: what we write would vanish.
             * Fail closed, and try to create it again. */
            char why[300], err[300];
            snprintf(why, sizeof why, "%s was removed or replaced", log_path);
            set_failing(why);
            int fd = open_path(log_path, err, sizeof err);
            if (fd >= 0) {
                close(log_fd);
                log_fd = fd;
                remember_identity();
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
    if (why) {
        pthread_mutex_lock(&lock);
        snprintf(why, cap, "%s", fail_why);
        pthread_mutex_unlock(&lock);
    }
    return true;
}

void sl_log_close(void)
{
    pthread_mutex_lock(&lock);
    flush_locked();
    if (buf_len > 0)
        fprintf(stderr, "sluice: %zu bytes of decision log could not be written at exit\n", buf_len);
    if (lost > 0)
        fprintf(stderr, "sluice: %llu decision log lines were lost while the log failed\n", lost);
    if (log_fd >= 0 && !is_stdout())
        close(log_fd);
    log_fd = -1;
    free(buf);
    buf = NULL;
    buf_len = buf_cap = 0;
    free(log_path);
    log_path = NULL;
    pthread_mutex_unlock(&lock);
}

void sl_log_timestamp(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}
