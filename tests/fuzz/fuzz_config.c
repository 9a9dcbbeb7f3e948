/* The daemon's config loader (proxy/daemon/config.c, sl_policy_load): the INI file
 * through inih and sluice's own line reader, every key's value parser, and
 * the allowlist files it names (allowlist/allowlist.c,
 * sl_allowlist_load_file), then sl_policy_print.
 *
 * Input (fuzz_util.h): NAME "\0" DATA ( "\0\0" NAME "\0" DATA )*. The first
 * file is the config, loaded as "fuzz/NAME"; the others are files a config
 * may name: "allowlist.txt" is "fuzz/allowlist.txt" (allowlist paths are
 * relative to the config's directory), "/etc/resolv.conf" replaces the
 * system's (read when no DNS server is configured).
 *
 * Nothing touches the disk: the build renames fopen to sl_fuzz_fopen and
 * open to sl_fuzz_open in config.o, allowlist.o and credentials.o (objcopy
 * --redefine-sym); they serve only the input's files (fmemopen, or a memfd
 * of mode 0600 for open: [tls] files and secrets, "fuzz/secrets/NAME" for
 * secret_dir = secrets); any other path does not exist. The one exception:
 * [sessions] dir is looked up with stat(2) on the disk (the harness serves
 * no directories), where "fuzz/..." does not exist, so a config with it is
 * refused after its keys are parsed; the session files themselves are
 * covered by tests/unit/test_sessions.c.
 *
 * Properties: a refused config reports at least one error; every report is
 * a non-empty "WHERE: message" line; an accepted policy is consistent
 * (listen addresses, ports, workers, TTLs in range, allowlist entries
 * with provenance; request rules only with the CA; credentials with a
 * header value free of CR, LF and NUL, each found again by its own host)
 * and prints. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "credentials.h"
#include "fuzz_util.h"

static fuzz_file g_files[FUZZ_MAX_FILES];
static size_t g_nfiles;

FILE *sl_fuzz_fopen(const char *path, const char *mode);
FILE *sl_fuzz_fopen(const char *path, const char *mode)
{
    (void)mode;
    for (size_t i = 0; i < g_nfiles; i++) {
        const char *n = g_files[i].name;
        bool match = !strcmp(path, n) || (!strncmp(path, "fuzz/", 5) && !strcmp(path + 5, n));
        if (!match)
            continue;
        if (g_files[i].len == 0)
            return fopen("/dev/null", "r");
        return fmemopen((void *)g_files[i].data, g_files[i].len, "r");
    }
    errno = ENOENT;
    return NULL;
}

static const fuzz_file *find_file(const char *path)
{
    for (size_t i = 0; i < g_nfiles; i++) {
        const char *n = g_files[i].name;
        if (!strcmp(path, n) || (!strncmp(path, "fuzz/", 5) && !strcmp(path + 5, n)))
            return &g_files[i];
    }
    return NULL;
}

/* open(2) for the loaders: an input file as a memfd (a regular file of
 * ours, mode 0600), so that fstat checks pass as they would on a good
 * file. */
int sl_fuzz_open(const char *path, int flags, ...);
int sl_fuzz_open(const char *path, int flags, ...)
{
    (void)flags;
    const fuzz_file *f = find_file(path);
    if (!f) {
        errno = ENOENT;
        return -1;
    }
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (f->len && write(fd, f->data, f->len) != (ssize_t)f->len)
        abort();
    if (lseek(fd, 0, SEEK_SET) != 0 || fchmod(fd, 0600) != 0)
        abort();
    return fd;
}

static size_t g_nreports;

static void on_report(void *ctx, const char *msg)
{
    (void)ctx;
    g_nreports++;
    if (getenv("FUZZ_CONFIG_SHOW"))   /* to see why a seed is refused */
        fprintf(stderr, "report: %s\n", msg);
    FUZZ_CHECK(msg && msg[0], "empty report");
    FUZZ_CHECK(strstr(msg, ": ") != NULL, "report without 'WHERE: ': '%s'", msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_nfiles = fuzz_split_files(data, size, g_files, FUZZ_MAX_FILES);
    if (g_nfiles == 0 || strchr(g_files[0].name, '/'))
        return -1;
    char path[300];
    snprintf(path, sizeof path, "fuzz/%s", g_files[0].name);
    sl_options opt;
    memset(&opt, 0, sizeof opt);
    opt.config = path;
    opt.workers = -1;
    g_nreports = 0;
    sl_policy *p = sl_policy_load(&opt, on_report, NULL);
    if (!p) {
        FUZZ_CHECK(g_nreports > 0, "config refused without an error");
        return 0;
    }
    FUZZ_CHECK(p->nlisten >= 1 && p->nlisten <= SL_MAX_LISTEN, "%zu listen addresses", p->nlisten);
    for (size_t i = 0; i < p->nlisten; i++)
        FUZZ_CHECK(p->listen[i].port >= 0 && p->listen[i].port <= 65535, "listen port %d",
                   p->listen[i].port);
    FUZZ_CHECK(p->workers >= 1 && p->workers <= 64, "workers %d", p->workers);
    FUZZ_CHECK(p->connect_ports.n >= 1 && p->http_ports.n >= 1, "empty port list");
    FUZZ_CHECK(p->min_ttl_s <= p->max_ttl_s, "ttl %d..%d", p->min_ttl_s, p->max_ttl_s);
    FUZZ_CHECK(p->ndns <= SL_MAX_DNS, "%zu DNS servers", p->ndns);
    FUZZ_CHECK(p->log_path && p->log_path[0], "no log path");
    for (size_t i = 0; i < sl_allowlist_count(p->allow); i++) {
        const sl_entry *e = sl_allowlist_entry(p->allow, i);
        FUZZ_CHECK(e->file && e->file[0], "entry %zu without provenance", i);
    }
    bool rules = false;
    for (size_t i = 0; i < sl_allowlist_count(p->allow); i++)
        rules |= sl_entry_is_rule(sl_allowlist_entry(p->allow, i));
    FUZZ_CHECK(rules == p->inspects, "inspects %d with rules %d", p->inspects, rules);
    FUZZ_CHECK(!rules || (p->tls_ca_cert && p->tls_ca_key), "request rules without the CA");
    FUZZ_CHECK(p->tls_leaf_days >= 1 && p->tls_leaf_days <= 825, "leaf_days %d", p->tls_leaf_days);
    if (getenv("FUZZ_CONFIG_SHOW"))
        fprintf(stderr, "accepted: %zu entries, %zu credentials, inspects %d\n", sl_allowlist_count(p->allow), p->ncredentials, p->inspects);
    FUZZ_CHECK(p->ncredentials == 0 || sl_allowlist_count(p->credential_hosts) == p->ncredentials,
               "%zu credentials, %zu hosts", p->ncredentials, sl_allowlist_count(p->credential_hosts));
    for (size_t i = 0; i < p->ncredentials; i++) {
        const sl_credential *c = &p->credentials[i];
        FUZZ_CHECK(!strpbrk(c->value, "\r\n") && c->value[0], "credential '%s': bad value", c->name);
        FUZZ_CHECK(strstr(c->tmpl, "{secret}") != NULL, "credential '%s': template", c->name);
        const sl_entry *e = sl_allowlist_entry(p->credential_hosts, i);
        if (e->kind == SL_ENTRY_EXACT) {
            int port = e->port ? e->port : p->connect_ports.v[0];
            const sl_credential *got = sl_policy_credential(p, &e->host, port, true);
            FUZZ_CHECK(got == c, "credential '%s' not found by its host", c->name);
        }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        abort();
    sl_policy_print(p, m);
    fclose(m);
    FUZZ_CHECK(len > 0, "nothing printed");
    free(buf);
    sl_policy_unref(p);
    return 0;
}
