/* Standard error that never blocks the gate.
 *
 * sluice's messages (and its decision log, with `path = -` and `2>&1`) may
 * go to a pipe nobody reads. A blocking write(2) to it would stop whichever
 * thread wrote: the main thread (signals, the log's stall check, SIGTERM)
 * included. So while the gate runs, file descriptor 2 is the write end of a
 * pipe of our own, non-blocking, and a small forwarder process copies it to
 * the real standard error with blocking writes. If the pipe fills (the real
 * standard error is stalled), a message is dropped, never waited for.
 *
 * A process rather than a thread: if the gate dies (a sanitizer report, an
 * abort), the forwarder still drains what the gate wrote before it died,
 * then ends when the pipe's write end goes with the gate. */
#include "stderr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PIPE_BYTES (1 << 20)
#define STOP_WAIT_MS 3000

static int real_stderr = -1;
static pid_t forwarder = -1;

static void forward(int in, int out)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n == 0)
            _exit(0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1);   /* the real standard error is gone: nothing to keep */
            off += w;
        }
    }
}

void sl_stderr_start(void)
{
    struct stat st;
    /* A file, a terminal or /dev/null does not stall for good; a pipe or a
     * socket can. */
    if (fstat(STDERR_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return;
    fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);   /* the default 64 KiB if the limit says no */
    int saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    fflush(stderr);
    pid_t pid = fork();   /* before any thread starts */
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        close(saved);
        return;
    }
    if (pid == 0) {
        /* Signals meant for the gate (a Ctrl-C to the process group) must
         * not end the forwarder before it has copied the gate's last words. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        close(p[1]);
        forward(p[0], saved);
    }
    close(p[0]);
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    dup2(p[1], STDERR_FILENO);   /* the O_NONBLOCK flag is this pipe's own, shared with no one */
    close(p[1]);
    real_stderr = saved;
    forwarder = pid;
}

void sl_stderr_stop(void)
{
    if (forwarder < 0)
        return;
    fflush(stderr);
    /* The real standard error back on fd 2: that closes the pipe's write
     * end, and the forwarder ends once it has copied everything. */
    dup2(real_stderr, STDERR_FILENO);
    close(real_stderr);
    real_stderr = -1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t r = waitpid(forwarder, NULL, WNOHANG);
        if (r == forwarder || (r < 0 && errno != EINTR))
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > STOP_WAIT_MS) {
            /* The real standard error is stalled: what is left in the pipe
             * cannot be delivered; the forwarder must not outlive us. */
            kill(forwarder, SIGKILL);
            waitpid(forwarder, NULL, 0);
            break;
        }
        poll(NULL, 0, 10);
    }
    forwarder = -1;
}
