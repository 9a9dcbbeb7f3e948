/* probe: the one program in the test "sandbox" image (tests/e2e/test_container.py).
 *
 * A static binary that runs in a FROM-scratch container and tries, on the
 * test's behalf, every way out of the sandbox: through the gate, straight
 * to an address, DNS, and the routing table. It uses IP literals only (no
 * getaddrinfo, no NSS) and prints one result line per attempt.
 *
 *   probe fetch PROXY_IP PROXY_PORT URL [TIMEOUT_MS]
 *       GET URL (absolute form) through the proxy, Connection: close; prints
 *       "status NNN", "body LENGTH" and then the body as it came (the head
 *       goes to stderr). Exit 0 when a response arrived, 1 otherwise.
 *   probe connect IP PORT [TIMEOUT_MS]
 *       a TCP connect; prints "connected" or "error NAME" / "timeout".
 *       Exit 0 only when it connected.
 *   probe dns NAME [TIMEOUT_MS [SERVER...]]
 *       an A query over UDP to each SERVER (default: the nameserver lines of
 *       /etc/resolv.conf); prints "SERVER answer RCODE", "SERVER error NAME"
 *       or "SERVER timeout", or "no nameserver" when there is none.
 *       Exit 0 when any server answered.
 *   probe routes
 *       prints "route4 DEST/PREFIX DEV" and "route6 DEST/PREFIX DEV" for the
 *       routing table (/proc/net/route, /proc/net/ipv6_route), skipping
 *       local and multicast entries of the IPv6 table.
 *
 * Build: gcc -static -O2 -o probe probe.c (the test does this).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e)
{
    switch (e) {
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case ECONNRESET: return "ECONNRESET";
    case EINVAL: return "EINVAL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    default: return strerrorname_np(e) ? strerrorname_np(e) : "E?";
    }
}

static int parse_addr(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((unsigned short)port);
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((unsigned short)port);
        *len = sizeof *a6;
        return 0;
    }
    fprintf(stderr, "probe: not an IP address: %s\n", ip);
    return -1;
}

/* Connect with a timeout. Returns the socket, or -1 with a line printed. */
static int tcp_connect(const char *ip, int port, int timeout_ms, int quiet_ok)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_addr(ip, port, &ss, &len) < 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        printf("error %s\n", errname(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
        printf("error %s\n", errname(errno));
        close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, timeout_ms);
    if (n == 0) {
        printf("timeout\n");
        close(fd);
        return -1;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        printf("error %s\n", errname(err));
        close(fd);
        return -1;
    }
    if (!quiet_ok)
        printf("connected\n");
    return fd;
}

static int cmd_connect(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int fd = tcp_connect(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 3000, 0);
    if (fd < 0)
        return 1;
    close(fd);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmd_fetch(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    const char *url = argv[4];
    int timeout_ms = argc > 5 ? atoi(argv[5]) : 10000;
    const char *h = strstr(url, "://");
    if (!h)
        return 2;
    h += 3;
    size_t hl = strcspn(h, "/");
    int fd = tcp_connect(argv[2], atoi(argv[3]), timeout_ms, 1);
    if (fd < 0)
        return 1;
    char req[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n",
                     url, (int)hl, h);
    if (n <= 0 || (size_t)n >= sizeof req)
        return 2;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        printf("error %s\n", errname(errno));
        return 1;
    }
    static char buf[1 << 20];
    size_t got = 0;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof buf - 1)
            break;
    }
    close(fd);
    buf[got] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) != 0 || got < 12) {
        printf("error no-response (%zu bytes)\n", got);
        return 1;
    }
    printf("status %.3s\n", buf + 9);
    char *body = memmem(buf, got, "\r\n\r\n", 4);
    if (body) {
        /* the head on stderr, for the test's messages; the body, as it
           came, on stdout after a line with its length */
        fwrite(buf, 1, (size_t)(body - buf), stderr);
        fputs("\n", stderr);
        body += 4;
        printf("body %zu\n", got - (size_t)(body - buf));
        fwrite(body, 1, got - (size_t)(body - buf), stdout);
        fflush(stdout);
    }
    return 0;
}

/* An A query for name, id 0x5151, recursion desired. */
static size_t dns_query(const char *name, unsigned char *q)
{
    size_t n = 0;
    unsigned char hdr[12] = {0x51, 0x51, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(q, hdr, 12);
    n = 12;
    const char *p = name;
    while (*p) {
        size_t l = strcspn(p, ".");
        if (l == 0 || l > 63 || n + l + 2 > 300)
            return 0;
        q[n++] = (unsigned char)l;
        memcpy(q + n, p, l);
        n += l;
        p += l;
        if (*p == '.')
            p++;
    }
    q[n++] = 0;
    q[n++] = 0;
    q[n++] = 1;     /* A */
    q[n++] = 0;
    q[n++] = 1;     /* IN */
    return n;
}

static int dns_one(const char *server, const unsigned char *q, size_t qlen, int timeout_ms)
{
    struct sockaddr_storage ss;
    socklen_t len;
    printf("%s ", server);
    if (parse_addr(server, 53, &ss, &len) < 0) {
        printf("error bad-address\n");
        return 0;
    }
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        printf("error %s\n", errname(errno));
        return 0;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        printf("error %s\n", errname(errno));
        close(fd);
        return 0;
    }
    long long deadline = now_ms() + timeout_ms;
    int answered = 0;
    if (send(fd, q, qlen, 0) < 0) {
        printf("error %s\n", errname(errno));
        close(fd);
        return 0;
    }
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            printf("timeout\n");
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0) {
            printf("timeout\n");
            break;
        }
        unsigned char a[1500];
        ssize_t r = recv(fd, a, sizeof a, 0);
        if (r < 0) {
            printf("error %s\n", errname(errno));   /* e.g. ECONNREFUSED from an ICMP port unreachable */
            break;
        }
        if (r >= 12 && a[0] == 0x51 && a[1] == 0x51) {
            printf("answer rcode=%d ancount=%d\n", a[3] & 0x0f, (a[6] << 8) | a[7]);
            answered = 1;
            break;
        }
    }
    close(fd);
    return answered;
}

static int cmd_dns(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    unsigned char q[320];
    size_t qlen = dns_query(argv[2], q);
    if (!qlen)
        return 2;
    int timeout_ms = argc > 3 ? atoi(argv[3]) : 2000;
    int any = 0, tried = 0;
    if (argc > 4) {
        for (int i = 4; i < argc; i++, tried++)
            any |= dns_one(argv[i], q, qlen, timeout_ms);
    } else {
        FILE *f = fopen("/etc/resolv.conf", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char ns[128];
            if (sscanf(line, " nameserver %127s", ns) == 1) {
                any |= dns_one(ns, q, qlen, timeout_ms);
                tried++;
            }
        }
        if (f)
            fclose(f);
    }
    if (!tried)
        printf("no nameserver\n");
    return any ? 0 : 1;
}

static int prefix4(unsigned mask)
{
    return __builtin_popcount(mask);
}

static int cmd_routes(void)
{
    char line[512];
    FILE *f = fopen("/proc/net/route", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) {  /* header */
            while (fgets(line, sizeof line, f)) {
                char dev[64];
                unsigned dest, gw, flags, refcnt, use, metric, mask;
                if (sscanf(line, "%63s %x %x %x %u %u %u %x", dev, &dest, &gw, &flags, &refcnt, &use,
                           &metric, &mask) != 8)
                    continue;
                struct in_addr d = {.s_addr = dest};
                char ds[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &d, ds, sizeof ds);
                printf("route4 %s/%d %s\n", ds, prefix4(mask), dev);
            }
        }
        fclose(f);
    }
    f = fopen("/proc/net/ipv6_route", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char dst[33], src[33], nh[33], dev[64];
            unsigned plen, slen, metric, refcnt, use, flags;
            if (sscanf(line, "%32s %x %32s %x %32s %x %x %x %x %63s", dst, &plen, src, &slen, nh, &metric,
                       &refcnt, &use, &flags, dev) != 10)
                continue;
            if (!strcmp(dev, "lo"))
                continue;            /* local addresses and the unreachable default of lo */
            if (!strncmp(dst, "ff", 2))
                continue;            /* multicast */
            unsigned char b[16];
            for (int i = 0; i < 16; i++) {
                unsigned v;
                sscanf(dst + 2 * i, "%2x", &v);
                b[i] = (unsigned char)v;
            }
            char ds[INET6_ADDRSTRLEN];
            inet_ntop(AF_INET6, b, ds, sizeof ds);
            printf("route6 %s/%u %s\n", ds, plen, dev);
        }
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        goto usage;
    int rc = 2;
    if (!strcmp(argv[1], "fetch"))
        rc = cmd_fetch(argc, argv);
    else if (!strcmp(argv[1], "connect"))
        rc = cmd_connect(argc, argv);
    else if (!strcmp(argv[1], "dns"))
        rc = cmd_dns(argc, argv);
    else if (!strcmp(argv[1], "routes"))
        rc = cmd_routes();
    if (rc != 2)
        return rc;
usage:
    fprintf(stderr, "usage: probe fetch PROXY_IP PROXY_PORT URL [TIMEOUT_MS] | connect IP PORT [TIMEOUT_MS] |\n"
                    "       dns NAME [TIMEOUT_MS [SERVER...]] | routes\n");
    return 2;
}
