/* `sluice session new`: a fresh 128-bit token, stored only as its SHA-256
 * in DIR/NAME.ini, written under a temporary dotfile name (the gate skips
 * dotfiles) and moved into place without replacing an existing session. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "allowlist.h"
#include "crypto.h"
#include "sessions.h"

#define ALLOWLISTS_MAX 64
#define TTL_MAX_S (3650L * 86400)     /* ten years */
#define DEFAULT_PROXY "127.0.0.1:3128"

static const char usage[] =
    "usage: sluice session new NAME [--dir DIR] [--allowlist FILE]... [--ttl DURATION] [-c CONFIG]\n"
    "  writes DIR/NAME.ini (mode 0640) for a new session with a fresh token, and\n"
    "  prints its proxy URL, http://NAME:TOKEN@HOST:PORT, once: the token is\n"
    "  stored only as its SHA-256 and cannot be shown again\n"
    "  NAME             1-64 of A-Z a-z 0-9 . _ -, not starting with '.'\n"
    "  -c, --config F   the gate's config: DIR defaults to its [sessions] dir,\n"
    "                   HOST:PORT is its first [proxy] listen (else 127.0.0.1:3128)\n"
    "  --dir DIR        the sessions directory (required without -c)\n"
    "  --allowlist FILE the session's own allowlist (repeatable); a relative path\n"
    "                   is relative to DIR, as the gate reads it; it must load\n"
    "  --ttl DURATION   expires after 90s, 30m, 8h, 7d (at most 3650d); default never\n"
    "  An existing session is never replaced (exit 2).\n";

/* What `session new` takes from the gate's config. */
typedef struct cfg_read {
    char dir[PATH_MAX];       /* the config's directory */
    char *sessions_dir;       /* resolved; NULL: none */
    char *listen;             /* the first [proxy] listen, as written */
} cfg_read;

static int on_cfg_key(void *user, const char *section, const char *name, const char *value)
{
    cfg_read *c = user;
    if (!strcmp(section, "sessions") && !strcmp(name, "dir") && value[0] && !c->sessions_dir) {
        /* Relative to the config's directory, as the gate resolves it. */
        size_t n = strlen(c->dir) + strlen(value) + 2;
        c->sessions_dir = malloc(n);
        if (c->sessions_dir && value[0] == '/')
            snprintf(c->sessions_dir, n, "%s", value);
        else if (c->sessions_dir)
            snprintf(c->sessions_dir, n, "%s/%s", c->dir, value);
    } else if (!strcmp(section, "proxy") && !strcmp(name, "listen") && value[0] && !c->listen) {
        c->listen = strdup(value);
    }
    return 1;
}

/* Only the two keys: the rest of the config (its CA key, its secrets) is
 * none of this command's business, and may not be readable by whoever runs
 * it. `sluice check` is the place to see that the config is good. */
static bool read_config(const char *path, cfg_read *c)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(c->dir, sizeof c->dir, ".");
    else if (slash == path)
        snprintf(c->dir, sizeof c->dir, "/");
    else
        snprintf(c->dir, sizeof c->dir, "%.*s", (int)(slash - path), path);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "sluice session new: %s: %s\n", path, strerror(errno));
        return false;
    }
    ini_parse_file(f, on_cfg_key, c);
    fclose(f);
    return true;
}

/* 90s, 30m, 8h, 7d: a whole positive number and one unit. */
static bool parse_ttl(const char *s, long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    long v = strtol(s, &end, 10);
    long unit = end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600 : end[0] == 'd' ? 86400 : 0;
    if (errno || v <= 0 || !unit || end[1] != '\0' || v > TTL_MAX_S / unit)
        return false;
    *out = v * unit;
    return true;
}

/* A value the gate's INI reader gives back exactly: one line, no inline
 * comment (" ;"), nothing inih would trim. */
static const char *ini_value_problem(const char *v)
{
    size_t n = strlen(v);
    if (n == 0)
        return "empty";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return "contains a control character";
    if (v[0] == ' ' || v[n - 1] == ' ')
        return "starts or ends with a space";
    if (strstr(v, " ;") || v[0] == ';')
        return "contains ' ;' (the config reader takes it for a comment)";
    if (n > 180)
        return "longer than 180 characters (the config reader's lines are short)";
    return NULL;
}

/* The session's allowlists as the gate will read them: relative to DIR. */
static bool allowlists_load(const char *dir, char **files, size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        const char *why = ini_value_problem(files[i]);
        if (why) {
            fprintf(stderr, "sluice session new: --allowlist '%s': %s\n", files[i], why);
            ok = false;
            continue;
        }
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", files[i][0] == '/' ? "" : dir, files[i]) >= (int)sizeof path) {
            fprintf(stderr, "sluice session new: --allowlist %s: path too long\n", files[i]);
            ok = false;
            continue;
        }
        const char *p = files[i][0] == '/' ? files[i] : path;
        sl_allowlist *al = sl_allowlist_new();
        if (!al) {
            perror("sluice session new");
            return false;
        }
        int errors = sl_allowlist_load_file(al, p, sl_report_stderr, "sluice session new: ");
        sl_allowlist_free(al);
        if (errors != 0) {
            if (files[i][0] != '/')
                fprintf(stderr, "sluice session new: (a relative --allowlist is read from %s, as the gate "
                                "reads it)\n", dir);
            ok = false;
        }
    }
    return ok;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* text into path, never replacing it: a temporary dotfile in the same
 * directory, then renameat2(RENAME_NOREPLACE) (link(2) where the file
 * system has no such rename). 0, EEXIST, or another errno. */
static int write_new_file(const char *dir, const char *name, const char *path, const char *text)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.ini.XXXXXX", dir, name) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = fchmod(fd, 0640) != 0 ? errno : 0;
    if (!e)
        e = write_all(fd, text, strlen(text));
    if (!e && fsync(fd) != 0)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
        e = errno;
        if (e == EINVAL || e == ENOSYS) {
            e = link(tmp, path) != 0 ? errno : 0;
            unlink(tmp);
        }
    }
    if (e)
        unlink(tmp);
    if (!e) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return e;
}

int sl_cmd_session(int argc, char **argv)
{
    bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (argc < 2 || strcmp(argv[1], "new") != 0) {
        if (!help)
            fprintf(stderr, "sluice session: %s\n\n", argc < 2 ? "which? (new)" : "unknown subcommand");
        fputs(usage, help ? stdout : stderr);
        return help ? 0 : 2;
    }
    enum { O_DIR = 256, O_ALLOWLIST, O_TTL };
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "dir", required_argument, NULL, O_DIR },
        { "allowlist", required_argument, NULL, O_ALLOWLIST },
        { "ttl", required_argument, NULL, O_TTL },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *config = NULL, *dir = NULL;
    char *allowlists[ALLOWLISTS_MAX];
    size_t nallow = 0;
    long ttl = 0;
    int rc = 2;
    cfg_read cfg = { .sessions_dir = NULL };
    char token[33] = "";
    optind = 1;
    int ch;
    /* argv[1] is "new": options and NAME follow in any order */
    while ((ch = getopt_long(argc - 1, argv + 1, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': config = optarg; break;
        case O_DIR: dir = optarg; break;
        case O_ALLOWLIST:
            if (nallow == ALLOWLISTS_MAX) {
                fprintf(stderr, "sluice session new: at most %d --allowlist files\n", ALLOWLISTS_MAX);
                goto out;
            }
            allowlists[nallow++] = optarg;
            break;
        case O_TTL:
            if (!parse_ttl(optarg, &ttl)) {
                fprintf(stderr, "sluice session new: --ttl: '%s' is not a duration like 90s, 30m, 8h or 7d "
                                "(at most 3650d)\n", optarg);
                goto out;
            }
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
        fprintf(stderr, "sluice session new: %s\n\n", optind > argc - 2 ? "NAME is missing" : "one NAME only");
        fputs(usage, stderr);
        goto out;
    }
    const char *name = argv[1 + optind];
    if (!sl_session_name_valid(name, strlen(name))) {
        fprintf(stderr, "sluice session new: '%s' is not a session name (1-%d of A-Z a-z 0-9 . _ -, not "
                        "starting with '.')\n", name, SL_SESSION_NAME_MAX);
        goto out;
    }
    if (config && !read_config(config, &cfg))
        goto out;
    if (!dir)
        dir = cfg.sessions_dir;
    if (!dir) {
        fprintf(stderr, config ? "sluice session new: %s has no [sessions] dir; give --dir DIR\n"
                               : "sluice session new: give --dir DIR (or -c CONFIG with a [sessions] dir)\n",
                config);
        goto out;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "sluice session new: sessions directory %s: %s\n", dir, strerror(errno));
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sluice session new: sessions directory %s: not a directory\n", dir);
        goto out;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s.ini", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "sluice session new: %s: path too long\n", dir);
        goto out;
    }
    if (lstat(path, &st) == 0) {
        fprintf(stderr, "sluice session new: session '%s' exists (%s): refusing to replace it (remove the "
                        "file first to give it a new token)\n", name, path);
        goto out;
    }
    if (!allowlists_load(dir, allowlists, nallow))
        goto out;

    char hash[65], expires[32] = "", now_s[32], text[8192];
    sl_random_hex(token, 16);
    sl_chain_next("", 0, token, strlen(token), hash);   /* hex(SHA-256(token)) */
    time_t now = time(NULL);
    struct tm tm;
    strftime(now_s, sizeof now_s, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    if (ttl) {
        time_t t = now + ttl;
        strftime(expires, sizeof expires, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    }
    size_t off = (size_t)snprintf(text, sizeof text,
                                  "; session %s, made by `sluice session new` at %s\n"
                                  "[session]\ntoken_sha256 = %s\n", name, now_s, hash);
    for (size_t i = 0; i < nallow && off < sizeof text; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "allowlist = %s\n", allowlists[i]);
    if (ttl && off < sizeof text)
        off += (size_t)snprintf(text + off, sizeof text - off, "expires = %s\n", expires);
    if (off >= sizeof text) {
        fprintf(stderr, "sluice session new: the session file would be too long\n");
        goto out;
    }
    int e = write_new_file(dir, name, path, text);
    if (e == EEXIST) {
        fprintf(stderr, "sluice session new: session '%s' appeared meanwhile (%s): not replaced\n", name, path);
        goto out;
    }
    if (e) {
        fprintf(stderr, "sluice session new: %s: %s\n", path, strerror(e));
        rc = 1;
        goto out;
    }
    /* The URL alone on standard output, for $(sluice session new ...). */
    printf("http://%s:%s@%s\n", name, token, cfg.listen ? cfg.listen : DEFAULT_PROXY);
    fflush(stdout);
    fprintf(stderr, "sluice: wrote %s%s%s; the token is in the URL above only (the file holds its "
                    "SHA-256): it cannot be shown again. The gate takes the session on its next reload "
                    "(SIGHUP).\n", path, ttl ? ", expires " : "", expires);
    rc = 0;
out:
    explicit_bzero(token, sizeof token);
    free(cfg.sessions_dir);
    free(cfg.listen);
    return rc;
}
