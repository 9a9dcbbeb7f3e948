/* `sluice ca init`: the CA in memory (crypto/tls.h), then DIR/ca.key (0600)
 * and DIR/ca.pem (0644), each created with O_EXCL so that an existing CA is
 * never overwritten. A failure midway removes what this run created. */
#include "ca.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allowlist.h"
#include "host.h"
#include "tls.h"

#define PERMIT_MAX 64

static const char usage[] =
    "usage: sluice ca init DIR [--days N] [--permit HOST]...\n"
    "  writes DIR/ca.pem (the certificate clients must trust, mode 0644) and\n"
    "  DIR/ca.key (its private key, mode 0600): an ECDSA P-256 CA for [tls]\n"
    "  --days N        validity in days (default 365)\n"
    "  --permit HOST   X.509 name constraints: the CA can only sign for HOST and\n"
    "                  names under it (repeatable; .HOST means the same), and for\n"
    "                  no IP address; without --permit it can sign for any name\n";

/* HOST or .HOST as an allowlist author writes it (Unicode allowed): the
 * DNS name it stands for, or NULL with a message. */
static char *permit_name(const char *arg)
{
    const char *s = arg[0] == '.' ? arg + 1 : arg;
    sl_host h;
    const char *why = NULL;
    if (strchr(s, '*') || !sl_host_parse_config(s, strlen(s), &h, &why) || h.kind != SL_HOST_NAME) {
        fprintf(stderr, "sluice ca init: --permit %s: %s\n", arg,
                why ? why : "a DNS name or .suffix, not an IP address or a wildcard");
        return NULL;
    }
    /* A constraint for a whole public suffix (.com) would permit nearly
     * everything: refused as the allowlist refuses such an entry. */
    char line[SL_HOST_MAX + 2], err[256];
    snprintf(line, sizeof line, ".%s", h.name);
    sl_allowlist *al = sl_allowlist_new();
    bool ok = al && sl_allowlist_add_line(al, line, strlen(line), "--permit", 1, err, sizeof err);
    sl_allowlist_free(al);
    if (!ok) {
        fprintf(stderr, "sluice ca init: --permit %s: %s\n", arg, al ? err : "out of memory");
        return NULL;
    }
    return strdup(h.name);
}

/* Writes text to a new file (O_EXCL) with exactly `mode`. 0, or an errno. */
static int write_new(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return errno;
    int e = 0;
    size_t len = strlen(text), off = 0;
    if (fchmod(fd, mode) != 0)   /* the umask may have taken bits of 0644 */
        e = errno;
    while (!e && off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            e = errno;
        else
            off += (size_t)n;
    }
    if (!e && fsync(fd) != 0)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    if (e)
        unlink(path);
    return e;
}

int sl_cmd_ca(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "init") != 0) {
        fputs(usage, argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr);
        return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 2;
    }
    enum { O_DAYS = 256, O_PERMIT };
    static const struct option longopts[] = {
        { "days", required_argument, NULL, O_DAYS },
        { "permit", required_argument, NULL, O_PERMIT },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int days = 365, rc = 2;
    char *permit[PERMIT_MAX];
    size_t npermit = 0;
    const char *dir = NULL;
    optind = 1;
    int ch;
    /* argv[1] is "init": options and DIR follow in any order */
    while ((ch = getopt_long(argc - 1, argv + 1, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_DAYS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg < '0' || *optarg > '9' || *end || v < 1 || v > 36500) {
                fprintf(stderr, "sluice ca init: --days: '%s' is not a number of days in 1..36500\n", optarg);
                goto out;
            }
            days = (int)v;
            break;
        }
        case O_PERMIT:
            if (npermit == PERMIT_MAX) {
                fprintf(stderr, "sluice ca init: at most %d --permit names\n", PERMIT_MAX);
                goto out;
            }
            if (!(permit[npermit] = permit_name(optarg)))
                goto out;
            npermit++;
            break;
        case 'h':
            fputs(usage, stdout);
            rc = 0;
            goto out;
        default:
            fputs(usage, stderr);
            goto out;
        }
    }
    if (optind != argc - 2) {
        fputs(usage, stderr);
        goto out;
    }
    dir = argv[1 + optind];

    char cert_path[4096], key_path[4096];
    if (snprintf(cert_path, sizeof cert_path, "%s/ca.pem", dir) >= (int)sizeof cert_path ||
        snprintf(key_path, sizeof key_path, "%s/ca.key", dir) >= (int)sizeof key_path) {
        fprintf(stderr, "sluice ca init: %s: path too long\n", dir);
        goto out;
    }
    struct stat st;
    if (lstat(cert_path, &st) == 0 || lstat(key_path, &st) == 0) {
        fprintf(stderr, "sluice ca init: %s exists: refusing to overwrite a CA (remove both files first)\n",
                lstat(cert_path, &st) == 0 ? cert_path : key_path);
        goto out;
    }
    bool made_dir = false;
    if (mkdir(dir, 0755) == 0)
        made_dir = true;
    else if (errno != EEXIST) {
        fprintf(stderr, "sluice ca init: %s: %s\n", dir, strerror(errno));
        rc = 1;
        goto out;
    }

    char *cert = NULL, *key = NULL, err[256];
    rc = 1;
    if (!sl_tls_make_ca(days, (const char *const *)permit, npermit, &cert, &key, err, sizeof err)) {
        fprintf(stderr, "sluice ca init: %s\n", err);
    } else {
        int e = write_new(key_path, key, 0600);
        if (e) {
            fprintf(stderr, "sluice ca init: %s: %s\n", key_path, strerror(e));
        } else if ((e = write_new(cert_path, cert, 0644)) != 0) {
            fprintf(stderr, "sluice ca init: %s: %s\n", cert_path, strerror(e));
            unlink(key_path);
        } else {
            rc = 0;
        }
    }
    free(cert);
    sl_tls_free_secret(key);
    if (rc != 0 && made_dir)
        rmdir(dir);
    if (rc == 0) {
        printf("sluice: wrote %s (give it to clients to trust) and %s (keep it secret)\n", cert_path, key_path);
        printf("sluice: ECDSA P-256 CA, valid %d days", days);
        for (size_t i = 0; i < npermit; i++)
            printf("%s%s", i ? ", " : ", may sign only for ", permit[i]);
        printf("\n[tls]\nca_cert = %s\nca_key = %s\n", cert_path, key_path);
    }
out:
    for (size_t i = 0; i < npermit; i++)
        free(permit[i]);
    return rc;
}
