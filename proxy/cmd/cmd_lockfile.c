/* `sluice allow-from-lockfile [--pins] [-o FILE] [--format text|json] PATH...`: the
 * options, the output, and the atomic -o write. The work is in
 * allowlist/lockfiles/lockfiles.c (the driver) and allowlist/lockfiles/derive.c (the set). */
#include "cmd_lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "derive.h"
#include "jsonarena.h"
#include "lockfile.h"

static const char usage[] =
    "usage: sluice allow-from-lockfile [--pins] [-o FILE] [--format text|json] PATH...\n"
    "\n"
    "Print the host:port allowlist entries that a locked install of a project's\n"
    "dependencies must reach, read offline from its lockfiles and package-manager\n"
    "config. A PATH is a lockfile or a directory to search for them.\n"
    "\n"
    "  -o FILE            write to FILE (atomically) instead of standard output\n"
    "      --pins         request rules instead of host entries: each artifact the\n"
    "                     lockfile gives a location and a digest for is pinned\n"
    "                     (GET host:port/path DIGEST), the metadata the locked\n"
    "                     install reads gets GET rules, and what cannot be pinned\n"
    "                     falls back to host entries whose comment says why\n"
    "      --format FMT   text (allowlist lines, the default) or json\n"
    "  -h, --help         show this help\n"
    "\n"
    "exit codes: 0 success, 1 the output could not be written,\n"
    "            2 usage error or a file that could not be read or understood\n";

static void report_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
}

/* Write `len` bytes to `path` so that a reader sees the old file or the new
 * one, never a part: a temporary file beside it, fsync, rename. The new
 * file keeps the old one's permissions, else 0666 less the umask. */
static bool write_atomic(const char *path, const char *data, size_t len, char *err, size_t errcap)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base) {
        snprintf(err, errcap, "%s: not a file name", path);
        return false;
    }
    char *tmp = malloc(dirlen + strlen(base) + 16);
    if (!tmp) {
        snprintf(err, errcap, "%s: out of memory", path);
        return false;
    }
    sprintf(tmp, "%.*s.%s.XXXXXX", (int)dirlen, path, base);

    mode_t mode;
    struct stat st;
    if (stat(path, &st) == 0) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }

    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "%s: cannot create a temporary file beside it: %s", path,
                 strerror(errno));
        free(tmp);
        return false;
    }
    const char *what = NULL;
    int saved = 0;
    for (size_t off = 0; off < len && !what;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            what = "write", saved = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    if (!what && fchmod(fd, mode) != 0)
        what = "chmod", saved = errno;
    if (!what && fsync(fd) != 0)
        what = "fsync", saved = errno;
    if (close(fd) != 0 && !what)
        what = "close", saved = errno;
    if (!what && rename(tmp, path) != 0)
        what = "rename", saved = errno;
    if (what) {
        snprintf(err, errcap, "%s: %s failed: %s", path, what, strerror(saved));
        unlink(tmp);
        free(tmp);
        return false;
    }
    free(tmp);
    /* The rename is durable once the directory is synced; best effort. */
    char *dir = dirlen ? strndup(path, dirlen) : strdup(".");
    if (dir) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return true;
}

int sl_cmd_allow_from_lockfile(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "format", required_argument, NULL, 'F' },
        { "pins", no_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *output = NULL;
    bool json = false, pins = false;
    int ch;
    optind = 0;                    /* GNU getopt: start afresh on this argv */
    while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'o':
            output = optarg;
            break;
        case 'F':
            if (!strcmp(optarg, "text")) {
                json = false;
            } else if (!strcmp(optarg, "json")) {
                json = true;
            } else {
                fprintf(stderr, "sluice: allow-from-lockfile: --format: '%s' is not text or json\n",
                        optarg);
                return 2;
            }
            break;
        case 'P':
            pins = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "sluice: allow-from-lockfile: no PATH given\n\n%s", usage);
        return 2;
    }

    /* jansson on huge pages (jsonarena.h): its page faults were most of
     * this command's time on a large package-lock.json. Only here, a
     * command that ends, never in the daemon; every jansson value of the
     * command lives between this and sl_jsonarena_end. */
    sl_jsonarena_begin();
    sl_derived *d = sl_derived_new();
    sl_derived_set_pins(d, pins);
    int errors = sl_lockfiles_derive((const char *const *)argv + optind, (size_t)(argc - optind),
                                     d, report_stderr, NULL);
    if (errors > 0) {
        fprintf(stderr, "sluice: allow-from-lockfile: %d error%s; no allowlist written\n", errors,
                errors == 1 ? "" : "s");
        sl_derived_free(d);
        sl_jsonarena_end();
        return 2;
    }

    /* Render whole first: nothing reaches the output unless all of it can. */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        perror("sluice: allow-from-lockfile");
        sl_derived_free(d);
        sl_jsonarena_end();
        return 1;
    }
    if (json)
        sl_derived_print_json(d, mem);
    else
        sl_derived_print(d, mem);
    bool ok = fclose(mem) == 0;
    sl_derived_free(d);
    sl_jsonarena_end();
    if (!ok) {
        fprintf(stderr, "sluice: allow-from-lockfile: out of memory\n");
        free(buf);
        return 1;
    }

    int rc = 0;
    if (output) {
        char err[1200];
        if (!write_atomic(output, buf, len, err, sizeof err)) {
            fprintf(stderr, "sluice: allow-from-lockfile: %s\n", err);
            rc = 1;
        }
    } else if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0) {
        fprintf(stderr, "sluice: allow-from-lockfile: writing standard output: %s\n",
                strerror(errno));
        rc = 1;
    }
    free(buf);
    return rc;
}
