/*
 * syscost: what one system call costs on this machine, in user and in
 * system time. On a virtual machine the entry and exit alone can cost far
 * more than on bare metal, and part of it is charged as user time, so the
 * bench prints this beside its table: any relay pays it a few dozen times
 * per connection.
 *
 *   syscost [N]          N calls of each kind (default 1,000,000)
 *
 * Times N calls of syscall(SYS_getppid) (the cheapest call there is: no
 * argument, no lock) and, separately, N recv() calls on an empty
 * non-blocking socketpair (each fails with EAGAIN: a socket call that does
 * no work), with getrusage(RUSAGE_SELF) before and after each loop, and
 * prints one JSON line, nanoseconds per call:
 *
 *   {"getppid":{"user_ns":..,"sys_ns":..},"recv_eagain":{"user_ns":..,"sys_ns":..}}
 *
 * rusage splits the time by where the CPU was at each scheduler tick, so
 * the split is a sample; over a loop of a second or so it is a fair one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

struct cost { double user_ns, sys_ns; };

static int64_t tv_ns(struct timeval tv)
{
    return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

static struct cost per_call(const struct rusage *a, const struct rusage *b, long n)
{
    struct cost c;
    c.user_ns = (double)(tv_ns(b->ru_utime) - tv_ns(a->ru_utime)) / (double)n;
    c.sys_ns = (double)(tv_ns(b->ru_stime) - tv_ns(a->ru_stime)) / (double)n;
    return c;
}

int main(int argc, char **argv)
{
    long n = 1000000;
    if (argc > 2 || (argc == 2 && (n = strtol(argv[1], NULL, 10)) < 1)) {
        fprintf(stderr, "usage: syscost [N]\n");
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("syscost: socketpair");
        return 1;
    }
    char byte;
    if (recv(sv[0], &byte, 1, 0) != -1 || errno != EAGAIN) {
        fprintf(stderr, "syscost: recv on an empty socket did not fail with EAGAIN\n");
        return 1;
    }

    struct rusage r0, r1, r2;
    getrusage(RUSAGE_SELF, &r0);
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    getrusage(RUSAGE_SELF, &r1);
    for (long i = 0; i < n; i++)
        (void)!recv(sv[0], &byte, 1, 0);
    getrusage(RUSAGE_SELF, &r2);

    struct cost g = per_call(&r0, &r1, n), r = per_call(&r1, &r2, n);
    printf("{\"getppid\":{\"user_ns\":%.1f,\"sys_ns\":%.1f},\"recv_eagain\":{\"user_ns\":%.1f,\"sys_ns\":%.1f}}\n",
           g.user_ns, g.sys_ns, r.user_ns, r.sys_ns);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
