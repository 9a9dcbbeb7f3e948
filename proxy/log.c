/* The decision log file. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static bool log_is_stdout;
static bool write_failed;   /* report a failing log once, not per line */

static int open_path(const char *path, char *err, size_t errcap)
{
    if (strcmp(path, "-") == 0)
        return STDOUT_FILENO;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        snprintf(err, errcap, "%s: cannot open log: %s", path, strerror(errno));
    return fd;
}

bool sl_log_open(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;
    pthread_mutex_lock(&lock);
    log_fd = fd;
    log_is_stdout = fd == STDOUT_FILENO;
    pthread_mutex_unlock(&lock);
    return true;
}

bool sl_log_reopen(const char *path, char *err, size_t errcap)
{
    int fd = open_path(path, err, errcap);
    if (fd < 0)
        return false;
    pthread_mutex_lock(&lock);
    if (log_fd >= 0 && !log_is_stdout)
        close(log_fd);
    log_fd = fd;
    log_is_stdout = fd == STDOUT_FILENO;
    write_failed = false;
    pthread_mutex_unlock(&lock);
    return true;
}

void sl_log_write(const char *line, size_t len)
{
    pthread_mutex_lock(&lock);
    size_t off = 0;
    while (log_fd >= 0 && off < len) {
        ssize_t n = write(log_fd, line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!write_failed)
                fprintf(stderr, "sluice: decision log write failed: %s\n",
                        n < 0 ? strerror(errno) : "short write");
            write_failed = true;
            break;
        }
        off += (size_t)n;
    }
    pthread_mutex_unlock(&lock);
}

void sl_log_close(void)
{
    pthread_mutex_lock(&lock);
    if (log_fd >= 0 && !log_is_stdout)
        close(log_fd);
    log_fd = -1;
    pthread_mutex_unlock(&lock);
}

void sl_log_timestamp(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}
