#include "health.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host.h"

#define TIMEOUT_MS 3000

static int remaining_ms(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long spent = (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
    return spent >= TIMEOUT_MS ? 0 : (int)(TIMEOUT_MS - spent);
}

static bool wait_for(int fd, short events, const struct timespec *start)
{
    struct pollfd p = { .fd = fd, .events = events };
    int ms = remaining_ms(start);
    return ms > 0 && poll(&p, 1, ms) == 1 && !(p.revents & POLLNVAL);
}

int sl_cmd_health(int argc, char **argv)
{
    sl_host h;
    int port;
    const char *err;
    if (argc != 2 || !sl_authority_parse(argv[1], strlen(argv[1]), true, &h, &port, &err) ||
        h.kind == SL_HOST_NAME) {
        fprintf(stderr, "usage: sluice health IP:PORT   (the gate's [admin] listen address)\n");
        return 2;
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct sockaddr_storage ss;
    socklen_t len = sl_addr_to_sockaddr(&h.addr, port, &ss);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("sluice health: socket");
        return 1;
    }
    int rc = 1;
    char buf[512];
    size_t got = 0;
    static const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS)
        goto out;
    if (!wait_for(fd, POLLOUT, &start) || send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1))
        goto out;
    while (got < sizeof buf - 1 && wait_for(fd, POLLIN, &start)) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    rc = strncmp(buf, "HTTP/1.1 200 ", 13) == 0 || strncmp(buf, "HTTP/1.0 200 ", 13) == 0 ? 0 : 1;
out:
    if (rc != 0) {
        char *eol = strpbrk(buf, "\r\n");
        if (eol)
            *eol = '\0';
        fprintf(stderr, "sluice health: %s: %s\n", argv[1], got ? buf : "no answer");
    }
    close(fd);
    return rc;
}
