/* Loading the policy from defaults, the INI file and the command line. */
#include "config.h"

#include "credentials.h"
#include "lockfile.h"
#include "sessions.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>

/* The built-in defaults, in one place (SPEC: defaults < config < flags). */
static void set_defaults(sl_policy *p)
{
    p->workers = 0;
    p->max_clients = 4096;
    p->shutdown_grace_ms = 10000;
    p->exit_idle_s = 0;
    p->connect_ports = (sl_ports){ .v = { 443 }, .n = 1 };
    p->http_ports = (sl_ports){ .v = { 80 }, .n = 1 };
    p->sni_check = true;
    p->dns_timeout_ms = 2000;
    p->min_ttl_s = 5;
    p->max_ttl_s = 300;
    p->header_ms = 10000;
    p->connect_ms = 10000;
    p->idle_ms = 300000;
    p->tls_leaf_days = 7;
    p->pin_hold_kib = 8192;
}
#define DEFAULT_LISTEN "127.0.0.1:3128"
#define DEFAULT_LOG "-"

/* inih as Debian builds it reads lines of at most INI_MAX_LINE bytes
 * including the newline and NUL, and silently splits longer ones. */
#define INI_LINE_LIMIT 198

typedef struct loader {
    sl_policy *p;
    sl_report_fn report;
    void *ctx;
    int errors;

    const char *file;       /* config file as named */
    char dir[PATH_MAX];     /* its directory, for relative paths */
    const char *text;       /* file contents */
    size_t pos, size;
    int line;               /* line the reader last returned */
    bool seen[64];          /* non-repeatable keys seen */
    int ca_cert_line, ca_key_line, upstream_ca_line, cred_file_line;   /* for the checks at the end */
    bool listen_from_config, dns_from_config;
    int ttl_line;
    int admin_line;           /* line of min_ttl_s or max_ttl_s, for the range check */
    int sessions_dir_line, sessions_require_line;
    bool sessions_require;    /* as given; meaningful when sessions_require_line */
    int first_syntax_line;  /* reported by read_line; inih reports it again */
} loader;

static void report(loader *l, const char *where, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void report(loader *l, const char *where, int line, const char *fmt, ...)
{
    char msg[1024], full[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(full, sizeof full, "%s:%d: %s", where, line, msg);
    else
        snprintf(full, sizeof full, "%s: %s", where, msg);
    l->errors++;
    l->report(l->ctx, full);
}

static void report_cb(void *ctx, const char *msg)
{
    loader *l = ctx;
    l->errors++;
    l->report(l->ctx, msg);
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        perror("sluice: out of memory");
        exit(1);
    }
    return d;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        perror("sluice: out of memory");
        exit(1);
    }
    return q;
}

static char *resolve_path(const loader *l, const char *path)
{
    if (path[0] == '/' || !l->file || l->dir[0] == '\0')
        return xstrdup(path);
    size_t n = strlen(l->dir) + strlen(path) + 2;
    char *s = xrealloc(NULL, n);
    snprintf(s, n, "%s/%s", l->dir, path);
    return s;
}

/* Whole decimal in [lo, hi]. */
static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on") || !strcmp(s, "1"))
        *out = true;
    else if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off") || !strcmp(s, "0"))
        *out = false;
    else
        return false;
    return true;
}

/* "IP:PORT" or "[IPv6]:PORT"; with default_port >= 0 the port may be left
 * out. Host names are refused: a gate must not depend on DNS to start. */
static bool parse_ip_port(const char *s, int default_port, bool allow_port0, sl_addr *addr,
                          int *port, char *err, size_t errcap)
{
    const char *host = s, *colon = NULL;
    size_t hlen;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb) {
            snprintf(err, errcap, "'%s': missing ']'", s);
            return false;
        }
        host = s + 1;
        hlen = (size_t)(rb - host);
        if (rb[1] == ':')
            colon = rb + 1;
        else if (rb[1] != '\0') {
            snprintf(err, errcap, "'%s': unexpected text after ']'", s);
            return false;
        }
    } else {
        colon = strrchr(s, ':');
        if (colon && strchr(s, ':') != colon) {
            snprintf(err, errcap, "'%s': write IPv6 addresses in brackets, [::1]:3128", s);
            return false;
        }
        hlen = colon ? (size_t)(colon - s) : strlen(s);
    }
    if (!sl_addr_parse(host, hlen, addr)) {
        snprintf(err, errcap, "'%s' is not an IP address (host names are not accepted here)", s);
        return false;
    }
    if (s[0] != '[' && addr->family == AF_INET6) {
        snprintf(err, errcap, "'%s': write IPv6 addresses in brackets", s);
        return false;
    }
    if (s[0] == '[' && addr->family == AF_INET) {
        snprintf(err, errcap, "'%s': brackets are only for IPv6 addresses", s);
        return false;
    }
    if (!colon) {
        if (default_port < 0) {
            snprintf(err, errcap, "'%s': a port is required", s);
            return false;
        }
        *port = default_port;
        return true;
    }
    long v;
    if (!parse_int(colon + 1, allow_port0 ? 0 : 1, 65535, &v) || (colon[1] == '0' && colon[2])) {
        snprintf(err, errcap, "'%s': bad port", s);
        return false;
    }
    *port = (int)v;
    return true;
}

static bool add_listen(loader *l, const char *value, const char *where, int line)
{
    sl_policy *p = l->p;
    char err[400];
    if (p->nlisten == SL_MAX_LISTEN) {
        report(l, where, line, "too many listen addresses (at most %d)", SL_MAX_LISTEN);
        return false;
    }
    sl_listen *ls = &p->listen[p->nlisten];
    if (!parse_ip_port(value, -1, true, &ls->addr, &ls->port, err, sizeof err)) {
        report(l, where, line, "listen: %s", err);
        return false;
    }
    if (line > 0)
        snprintf(ls->where, sizeof ls->where, "%s:%d", where, line);
    else
        snprintf(ls->where, sizeof ls->where, "%s", where);
    p->nlisten++;
    return true;
}

static bool add_dns(loader *l, const char *value, const char *where, int line)
{
    sl_policy *p = l->p;
    char err[400];
    if (p->ndns == SL_MAX_DNS) {
        report(l, where, line, "too many DNS servers (at most %d)", SL_MAX_DNS);
        return false;
    }
    sl_dns_server *d = &p->dns[p->ndns];
    if (!parse_ip_port(value, 53, false, &d->addr, &d->port, err, sizeof err)) {
        report(l, where, line, "server: %s", err);
        return false;
    }
    p->ndns++;
    return true;
}

static void add_cidr(loader *l, sl_cidr **v, size_t *n, const char *key, const char *value,
                     int line)
{
    sl_cidr c;
    char err[300];
    if (!sl_cidr_parse(value, &c, err, sizeof err)) {
        report(l, l->file, line, "%s: %s", key, err);
        return;
    }
    *v = xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = c;
}

static void add_allowlist_file(loader *l, const char *path)
{
    sl_policy *p = l->p;
    p->allowlist_files = xrealloc(p->allowlist_files, (p->nallowlist_files + 1) * sizeof(char *));
    p->allowlist_files[p->nallowlist_files++] = xstrdup(path);
    sl_policy_note_input(p, path, false);
    sl_allowlist_load_file(p->allow, path, report_cb, l);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.txt file of a directory, in name order: the container layout
 * (/etc/sluice/allowlist.d) and config-management tools drop files there.
 * Dot-names are skipped (Kubernetes' ..data links among them). */
static void add_allowlist_dir(loader *l, const char *dir, const char *where, int line)
{
    sl_policy_note_input(l->p, dir, true);
    DIR *d = opendir(dir);
    if (!d) {
        report(l, where, line, "allowlist_dir %s: %s", dir, strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        names = xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            add_allowlist_file(l, path);
        free(names[i]);
    }
    free(names);
}

static void add_inline_allow(loader *l, const char *value, const char *where, int line)
{
    char err[400];
    if (!sl_allowlist_add_line(l->p->allow, value, strlen(value), where, line, err, sizeof err)) {
        report(l, where, line, "allow: %s", err);
        return;
    }
    char first = value[strspn(value, " \t")];
    if (first == '#' || first == '\0')
        report(l, where, line, "allow: empty entry");
}

/* --allow-from-lockfile: the entries a locked install needs, each with the
 * files that required it as its provenance ("derived from a, b"). */
static void add_derived(loader *l, const sl_strv *paths)
{
    for (size_t i = 0; i < paths->n; i++) {
        struct stat st;
        sl_policy_note_input(l->p, paths->v[i], stat(paths->v[i], &st) == 0 && S_ISDIR(st.st_mode));
    }
    sl_derived *d = sl_derived_new();
    if (!d) {
        report(l, "--allow-from-lockfile", 0, "out of memory");
        return;
    }
    int errors = sl_lockfiles_derive(paths->v, paths->n, d, report_cb, l);
    if (errors == 0) {
        for (size_t i = 0; i < sl_derived_count(d); i++) {
            const char *const *files;
            size_t nfiles;
            const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
            char line[300], from[1024], err[300];
            size_t off = (size_t)snprintf(from, sizeof from, "derived from ");
            for (size_t k = 0; k < nfiles && off < sizeof from; k++)
                off += (size_t)snprintf(from + off, sizeof from - off, "%s%s", k ? ", " : "", files[k]);
            sl_entry_format(e, line, sizeof line);
            if (!sl_allowlist_add_line(l->p->allow, line, strlen(line), from, 0, err, sizeof err))
                report(l, from, 0, "%s: %s", line, err);
        }
    }
    sl_derived_free(d);
}

/* ---- the INI file ---- */

enum key_id {
    K_LISTEN, K_WORKERS, K_MAX_CLIENTS, K_GRACE, K_EXIT_IDLE,
    K_ALLOWLIST, K_ALLOWLIST_DIR, K_ALLOW, K_CONNECT_PORTS, K_HTTP_PORTS, K_ALLOW_CIDR, K_DENY_CIDR, K_SNI,
    K_DNS_SERVER, K_DNS_TIMEOUT, K_MIN_TTL, K_MAX_TTL,
    K_HEADER_MS, K_CONNECT_MS, K_IDLE_MS,
    K_LOG_PATH, K_ADMIN_LISTEN,
    K_TLS_CA_CERT, K_TLS_CA_KEY, K_TLS_UPSTREAM_CA, K_TLS_LEAF_DAYS, K_TLS_PIN_HOLD,
    K_CRED_FILE, K_CRED_SECRET_DIR,
    K_SESSIONS_DIR, K_SESSIONS_REQUIRE,
};

static const struct key {
    const char *section, *name;
    enum key_id id;
    bool repeat;
} keys[] = {
    { "proxy", "listen", K_LISTEN, true },
    { "proxy", "workers", K_WORKERS, false },
    { "proxy", "max_clients", K_MAX_CLIENTS, false },
    { "proxy", "shutdown_grace_ms", K_GRACE, false },
    { "proxy", "exit_idle_s", K_EXIT_IDLE, false },
    { "policy", "allowlist", K_ALLOWLIST, true },
    { "policy", "allowlist_dir", K_ALLOWLIST_DIR, true },
    { "policy", "allow", K_ALLOW, true },
    { "policy", "connect_ports", K_CONNECT_PORTS, false },
    { "policy", "http_ports", K_HTTP_PORTS, false },
    { "policy", "allow_cidr", K_ALLOW_CIDR, true },
    { "policy", "deny_cidr", K_DENY_CIDR, true },
    { "policy", "sni_check", K_SNI, false },
    { "dns", "server", K_DNS_SERVER, true },
    { "dns", "timeout_ms", K_DNS_TIMEOUT, false },
    { "dns", "min_ttl_s", K_MIN_TTL, false },
    { "dns", "max_ttl_s", K_MAX_TTL, false },
    { "timeouts", "header_ms", K_HEADER_MS, false },
    { "timeouts", "connect_ms", K_CONNECT_MS, false },
    { "timeouts", "idle_ms", K_IDLE_MS, false },
    { "log", "path", K_LOG_PATH, false },
    { "admin", "listen", K_ADMIN_LISTEN, false },
    { "tls", "ca_cert", K_TLS_CA_CERT, false },
    { "tls", "ca_key", K_TLS_CA_KEY, false },
    { "tls", "upstream_ca", K_TLS_UPSTREAM_CA, false },
    { "tls", "leaf_days", K_TLS_LEAF_DAYS, false },
    { "tls", "pin_hold_kib", K_TLS_PIN_HOLD, false },
    { "credentials", "file", K_CRED_FILE, false },
    { "credentials", "secret_dir", K_CRED_SECRET_DIR, false },
    { "sessions", "dir", K_SESSIONS_DIR, false },
    { "sessions", "require", K_SESSIONS_REQUIRE, false },
};
static const char *const sections[] = { "proxy", "policy", "dns", "timeouts", "log", "admin", "tls",
                                        "credentials", "sessions" };

static bool known_section(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (strlen(sections[i]) == len && strncmp(sections[i], s, len) == 0)
            return true;
    return false;
}

static bool set_ms(loader *l, const char *name, const char *value, long lo, long hi, int *out)
{
    long v;
    if (!parse_int(value, lo, hi, &v)) {
        report(l, l->file, l->line, "%s: '%s' is not a whole number in %ld..%ld", name, value, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    loader *l = user;
    sl_policy *p = l->p;
    const struct key *k = NULL;
    char err[400];

    if (section[0] == '\0') {
        report(l, l->file, l->line, "'%s' is outside any section", name);
        return 1;
    }
    if (!known_section(section, strlen(section)))
        return 1; /* reported once, by the reader, on the [section] line */
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].name, name))
            k = &keys[i];
    if (!k) {
        report(l, l->file, l->line, "unknown key '%s' in [%s]", name, section);
        return 1;
    }
    if (!k->repeat) {
        if (l->seen[k->id]) {
            report(l, l->file, l->line, "'%s' given twice in [%s]", name, section);
            return 1;
        }
        l->seen[k->id] = true;
    }

    switch (k->id) {
    case K_LISTEN:
        if (!l->listen_from_config) {
            l->listen_from_config = true;
            p->nlisten = 0;
        }
        add_listen(l, value, l->file, l->line);
        break;
    case K_WORKERS:
        set_ms(l, name, value, 0, 64, &p->workers);
        break;
    case K_MAX_CLIENTS:
        set_ms(l, name, value, 1, 1000000, &p->max_clients);
        break;
    case K_GRACE:
        set_ms(l, name, value, 0, 3600000, &p->shutdown_grace_ms);
        break;
    case K_EXIT_IDLE:
        set_ms(l, name, value, 0, 86400 * 365, &p->exit_idle_s);
        break;
    case K_ALLOWLIST: {
        char *path = resolve_path(l, value);
        add_allowlist_file(l, path);
        free(path);
        break;
    }
    case K_ALLOWLIST_DIR: {
        char *path = resolve_path(l, value);
        add_allowlist_dir(l, path, l->file, l->line);
        free(path);
        break;
    }
    case K_ALLOW:
        add_inline_allow(l, value, l->file, l->line);
        break;
    case K_CONNECT_PORTS:
    case K_HTTP_PORTS:
        if (!sl_ports_parse(value, k->id == K_CONNECT_PORTS ? &p->connect_ports : &p->http_ports,
                            err, sizeof err))
            report(l, l->file, l->line, "%s: %s", name, err);
        break;
    case K_ALLOW_CIDR:
        add_cidr(l, &p->allow_cidr, &p->nallow_cidr, name, value, l->line);
        break;
    case K_DENY_CIDR:
        add_cidr(l, &p->deny_cidr, &p->ndeny_cidr, name, value, l->line);
        break;
    case K_SNI:
        if (!parse_bool(value, &p->sni_check))
            report(l, l->file, l->line, "sni_check: '%s' is not yes or no", value);
        break;
    case K_DNS_SERVER:
        if (!l->dns_from_config) {
            l->dns_from_config = true;
            p->ndns = 0;
        }
        add_dns(l, value, l->file, l->line);
        break;
    case K_DNS_TIMEOUT:
        set_ms(l, name, value, 1, 600000, &p->dns_timeout_ms);
        break;
    case K_MIN_TTL:
        set_ms(l, name, value, 0, 86400, &p->min_ttl_s);
        l->ttl_line = l->line;
        break;
    case K_MAX_TTL:
        set_ms(l, name, value, 0, 86400, &p->max_ttl_s);
        l->ttl_line = l->line;
        break;
    case K_HEADER_MS:
        set_ms(l, name, value, 1, 3600000, &p->header_ms);
        break;
    case K_CONNECT_MS:
        set_ms(l, name, value, 1, 3600000, &p->connect_ms);
        break;
    case K_IDLE_MS:
        set_ms(l, name, value, 1, 86400000, &p->idle_ms);
        break;
    case K_LOG_PATH:
        if (value[0] == '\0') {
            report(l, l->file, l->line, "path: empty (use - for standard output)");
            break;
        }
        free(p->log_path);
        p->log_path = strcmp(value, "-") ? resolve_path(l, value) : xstrdup("-");
        break;
    case K_TLS_CA_CERT:
    case K_TLS_CA_KEY:
    case K_TLS_UPSTREAM_CA:
    case K_CRED_FILE:
    case K_CRED_SECRET_DIR:
    case K_SESSIONS_DIR: {
        char **slot = k->id == K_TLS_CA_CERT       ? &p->tls_ca_cert
                      : k->id == K_TLS_CA_KEY      ? &p->tls_ca_key
                      : k->id == K_TLS_UPSTREAM_CA ? &p->tls_upstream_ca
                      : k->id == K_CRED_FILE       ? &p->credentials_file
                      : k->id == K_CRED_SECRET_DIR ? &p->secret_dir
                                                   : &p->sessions_dir;
        if (value[0] == '\0') {
            report(l, l->file, l->line, "%s: empty path", name);
            break;
        }
        free(*slot);
        *slot = resolve_path(l, value);
        if (k->id == K_TLS_CA_CERT)
            l->ca_cert_line = l->line;
        else if (k->id == K_TLS_CA_KEY)
            l->ca_key_line = l->line;
        else if (k->id == K_TLS_UPSTREAM_CA)
            l->upstream_ca_line = l->line;
        else if (k->id == K_CRED_FILE)
            l->cred_file_line = l->line;
        else if (k->id == K_SESSIONS_DIR)
            l->sessions_dir_line = l->line;
        break;
    }
    case K_SESSIONS_REQUIRE:
        if (!parse_bool(value, &l->sessions_require))
            report(l, l->file, l->line, "require: '%s' is not yes or no", value);
        l->sessions_require_line = l->line;
        break;
    case K_TLS_LEAF_DAYS:
        set_ms(l, name, value, 1, 825, &p->tls_leaf_days);
        break;
    case K_TLS_PIN_HOLD:
        set_ms(l, name, value, 0, 65536, &p->pin_hold_kib);
        break;
    case K_ADMIN_LISTEN:
        if (value[0] != '\0') {
            sl_addr a;
            int port;
            if (!parse_ip_port(value, -1, true, &a, &port, err, sizeof err))
                report(l, l->file, l->line, "admin listen: %s", err);
            else {
                free(p->admin_listen);
                p->admin_listen = xstrdup(value);
                l->admin_line = l->line;
            }
        }
        break;
    }
    return 1;
}

/* inih's line source. It counts lines for our messages, reports lines inih
 * would split, and checks section names (inih does not call back for an
 * empty section, so an unknown one would go unnoticed). */
static char *read_line(char *str, int num, void *stream)
{
    loader *l = stream;
    if (l->pos >= l->size)
        return NULL;
    const char *start = l->text + l->pos;
    const char *nl = memchr(start, '\n', l->size - l->pos);
    size_t len = nl ? (size_t)(nl - start) : l->size - l->pos;
    l->pos += len + (nl ? 1 : 0);
    l->line++;
    if (len > 0 && start[len - 1] == '\r')
        len--;

    if (memchr(start, '\0', len)) {
        report(l, l->file, l->line, "NUL byte in line");
        snprintf(str, (size_t)num, ";\n");
        return str;
    }
    if (len > INI_LINE_LIMIT || len + 2 > (size_t)num) {
        report(l, l->file, l->line, "line is %zu characters long; the config reader accepts at most %d",
               len, INI_LINE_LIMIT);
        snprintf(str, (size_t)num, ";\n");
        return str;
    }
    size_t bom = l->line == 1 && len >= 3 && memcmp(start, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    size_t i = bom;   /* inih skips a UTF-8 byte-order mark too */
    while (i < len && (start[i] == ' ' || start[i] == '\t'))
        i++;
    bool indented = i > bom;   /* inih reads an indented line as a continuation */
    if (i < len && start[i] == '[') {
        const char *rb = memchr(start + i, ']', len - i);
        if (rb && !known_section(start + i + 1, (size_t)(rb - start - i - 1)))
            report(l, l->file, l->line, "unknown section [%.*s]", (int)(rb - start - i - 1), start + i + 1);
    } else if (i < len && !indented && start[i] != ';' && start[i] != '#' &&
               !memchr(start + i, '=', len - i) && !memchr(start + i, ':', len - i)) {
        /* inih returns only the first such line; each one is reported here. */
        report(l, l->file, l->line, "syntax error (expected [section], key = value, or a comment)");
        if (!l->first_syntax_line)
            l->first_syntax_line = l->line;
    }
    memcpy(str, start, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

static bool read_file(const char *path, char **out, size_t *size, char *err, size_t errcap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "cannot open: %s", strerror(errno));
        return false;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            if (cap > (16u << 20)) {
                snprintf(err, errcap, "file is larger than 16 MiB");
                free(buf);
                fclose(f);
                return false;
            }
            buf = xrealloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errcap, "cannot read: %s", strerror(errno));
        free(buf);
        return false;
    }
    *out = buf;
    *size = n;
    return true;
}

static void load_ini(loader *l, const char *path)
{
    char err[300];
    char *text = NULL;
    l->file = path;
    sl_policy_note_input(l->p, path, false);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(l->dir, sizeof l->dir, "%.*s", (int)(slash - path), path);
    else
        snprintf(l->dir, sizeof l->dir, ".");
    if (slash == path)
        snprintf(l->dir, sizeof l->dir, "/");
    if (!read_file(path, &text, &l->size, err, sizeof err)) {
        report(l, path, 0, "%s", err);
        return;
    }
    l->text = text;
    int rc = ini_parse_stream(read_line, l, on_key, l);
    if (rc > 0 && rc != l->first_syntax_line)
        report(l, path, rc, "syntax error (expected [section], key = value, or a comment)");
    else if (rc < 0)
        report(l, path, 0, "cannot parse");
    free(text);
    l->text = NULL;
}

/* Default DNS servers: the nameserver lines of /etc/resolv.conf. */
static void dns_from_resolv_conf(loader *l)
{
    FILE *f = fopen("/etc/resolv.conf", "r");
    char line[512];
    sl_policy_note_input(l->p, "/etc/resolv.conf", false);
    if (!f)
        return;
    while (fgets(line, sizeof line, f) && l->p->ndns < SL_MAX_DNS) {
        char *s = line + strspn(line, " \t");
        if (strncmp(s, "nameserver", 10) != 0 || (s[10] != ' ' && s[10] != '\t'))
            continue;
        s += 10;
        s += strspn(s, " \t");
        s[strcspn(s, " \t\r\n#;%")] = '\0';
        sl_dns_server *d = &l->p->dns[l->p->ndns];
        if (sl_addr_parse(s, strlen(s), &d->addr)) {
            d->port = 53;
            l->p->ndns++;
        }
    }
    fclose(f);
    l->p->dns_from_resolv_conf = true;
}

/* Whether any list a request may be decided by (the global one, a
 * session's) has an entry with pred. */
static const sl_entry *first_entry(const sl_policy *p, bool (*pred)(const sl_entry *))
{
    for (size_t i = 0; i < sl_allowlist_count(p->allow); i++)
        if (pred(sl_allowlist_entry(p->allow, i)))
            return sl_allowlist_entry(p->allow, i);
    for (size_t k = 0; k < p->nsessions; k++) {
        const sl_allowlist *al = p->sessions[k].allow;
        for (size_t i = 0; al && i < sl_allowlist_count(al); i++)
            if (pred(sl_allowlist_entry(al, i)))
                return sl_allowlist_entry(al, i);
    }
    return NULL;
}

static bool is_rule(const sl_entry *e)
{
    return sl_entry_is_rule(e);
}

static bool is_name(const sl_entry *e)
{
    return e->host.kind == SL_HOST_NAME;
}

/* A file named by [tls]: it opens and is a regular file; with private,
 * it is not open to group or others either (the CA's key). Checked on the
 * descriptor, as it would be read. */
static void check_tls_file(loader *l, const char *cfg, int line, const char *key, const char *path,
                           bool private)
{
    sl_policy_note_input(l->p, path, false);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0) {
        report(l, cfg, line, "%s %s: cannot read: %s", key, path, strerror(errno));
        return;
    }
    if (fstat(fd, &st) != 0)
        report(l, cfg, line, "%s %s: cannot stat: %s", key, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        report(l, cfg, line, "%s %s: not a regular file", key, path);
    else if (private && (st.st_mode & (S_IRWXG | S_IRWXO)))
        report(l, cfg, line, "%s %s is open to group or others (mode %04o); chmod 600 it", key, path,
               (unsigned)(st.st_mode & 07777));
    close(fd);
}

/* After every allowlist: request rules need the CA; [tls] files must be
 * usable; credentials are read (their hosts must be inspected). */
static void check_inspection(loader *l, const char *config)
{
    sl_policy *p = l->p;
    const char *cfg = config ? config : "config";
    /* A session's request rules need the CA as the global ones do. */
    const sl_entry *first = first_entry(p, is_rule);
    p->inspects = first != NULL;

    if (p->tls_ca_cert && !p->tls_ca_key)
        report(l, cfg, l->ca_cert_line, "ca_cert without ca_key: the inspection CA needs both");
    if (p->tls_ca_key && !p->tls_ca_cert)
        report(l, cfg, l->ca_key_line, "ca_key without ca_cert: the inspection CA needs both");
    if (first && !(p->tls_ca_cert && p->tls_ca_key))
        report(l, first->file, first->line,
               "request rules need the inspection CA: set [tls] ca_cert and ca_key (sluice ca init DIR "
               "writes them)");
    if (p->tls_ca_cert)
        check_tls_file(l, cfg, l->ca_cert_line, "ca_cert", p->tls_ca_cert, false);
    if (p->tls_ca_key)
        check_tls_file(l, cfg, l->ca_key_line, "ca_key", p->tls_ca_key, true);
    /* The system bundle is needed only when something is inspected (the
     * gate image has none). */
    if (first)
        check_tls_file(l, l->upstream_ca_line ? cfg : first->file,
                       l->upstream_ca_line ? l->upstream_ca_line : first->line, "upstream_ca",
                       p->tls_upstream_ca, false);

    /* The CA and the upstream bundle, loaded once per policy (so a reload
     * reads them again): a connection keeps the policy, and with it the
     * leaves its session uses, until it ends. */
    if (first && l->errors == 0) {
        char err[512];
        p->tls_server = sl_tls_server_new(p->tls_ca_cert, p->tls_ca_key, p->tls_leaf_days, SL_LEAF_CACHE_MAX,
                                          err, sizeof err);
        if (!p->tls_server)
            report(l, cfg, l->ca_key_line ? l->ca_key_line : l->ca_cert_line, "[tls]: %s", err);
        p->tls_client = sl_tls_client_new(p->tls_upstream_ca, err, sizeof err);
        if (!p->tls_client)
            report(l, l->upstream_ca_line ? cfg : first->file,
                   l->upstream_ca_line ? l->upstream_ca_line : first->line, "upstream_ca: %s", err);
    }

    if (p->credentials_file) {
        if (!p->secret_dir)
            report(l, cfg, l->cred_file_line, "[credentials] file needs secret_dir (where the secrets are)");
        else {
            sl_policy_note_input(p, p->credentials_file, false);
            sl_policy_note_input(p, p->secret_dir, true);
            sl_credentials_load(p, p->credentials_file, p->secret_dir, report_cb, l);
        }
    }
}

/* [sessions]: after the global allowlist and the ports are final (the
 * sessions' lists are read with them), before the checks that look at
 * every list (DNS, inspection). */
static void load_sessions(loader *l, const char *config)
{
    sl_policy *p = l->p;
    const char *cfg = config ? config : "config";
    if (!p->sessions_dir) {
        if (l->sessions_require_line)
            report(l, cfg, l->sessions_require_line, "[sessions] require without dir: there are no sessions "
                                                     "to require");
        return;
    }
    p->sessions_require = l->sessions_require_line ? l->sessions_require : true;
    sl_policy_note_input(p, p->sessions_dir, true);
    struct stat st;
    if (stat(p->sessions_dir, &st) != 0) {
        report(l, cfg, l->sessions_dir_line, "[sessions] dir %s: %s", p->sessions_dir, strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        report(l, cfg, l->sessions_dir_line, "[sessions] dir %s: not a directory", p->sessions_dir);
        return;
    }
    sl_sessions_load(p, p->sessions_dir, report_cb, l);
}

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

sl_policy *sl_policy_load(const sl_options *opt, sl_report_fn rep, void *ctx)
{
    static atomic_ulong generation;
    sl_policy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    set_defaults(p);
    p->allow = sl_allowlist_new();
    p->log_path = xstrdup(DEFAULT_LOG);
    p->tls_upstream_ca = xstrdup(SL_DEFAULT_UPSTREAM_CA);
    loader l = { .p = p, .report = rep, .ctx = ctx };

    if (opt->config) {
        p->config_path = xstrdup(opt->config);
        load_ini(&l, opt->config);
    }
    l.file = NULL;
    l.dir[0] = '\0';

    /* Flags override the file: a repeatable flag replaces the file's list,
     * except allowlists and inline entries, which add to it. */
    if (opt->listen.n)
        p->nlisten = 0;
    for (size_t i = 0; i < opt->listen.n; i++)
        add_listen(&l, opt->listen.v[i], "--listen", 0);
    if (p->nlisten == 0)
        add_listen(&l, DEFAULT_LISTEN, "default", 0);
    if (opt->dns_server.n)
        p->ndns = 0;
    for (size_t i = 0; i < opt->dns_server.n; i++)
        add_dns(&l, opt->dns_server.v[i], "--dns-server", 0);
    if (p->ndns == 0 && !l.dns_from_config && !opt->dns_server.n)
        dns_from_resolv_conf(&l);
    for (size_t i = 0; i < opt->allowlist.n; i++)
        add_allowlist_file(&l, opt->allowlist.v[i]);
    for (size_t i = 0; i < opt->allowlist_dir.n; i++)
        add_allowlist_dir(&l, opt->allowlist_dir.v[i], "--allowlist-dir", 0);
    for (size_t i = 0; i < opt->allow.n; i++)
        add_inline_allow(&l, opt->allow.v[i], "--allow", 0);
    if (opt->allow_from_lockfile.n)
        add_derived(&l, &opt->allow_from_lockfile);
    if (opt->log) {
        free(p->log_path);
        p->log_path = xstrdup(opt->log);
    }
    if (opt->workers >= 0)
        p->workers = opt->workers;

    load_sessions(&l, opt->config);

    /* A gate whose allowlists have only IP literals (or nothing: the image's
     * default) never asks DNS, and may run where there is none. */
    bool needs_dns = first_entry(p, is_name) != NULL;
    if (p->ndns == 0 && !l.dns_from_config && !opt->dns_server.n && needs_dns)
        report(&l, opt->config ? opt->config : "dns", 0,
               "no DNS server for the host names on the allowlist: set [dns] server or --dns-server "
               "(/etc/resolv.conf names none)");
    if (p->min_ttl_s > p->max_ttl_s)
        report(&l, opt->config ? opt->config : "dns", l.ttl_line, "min_ttl_s (%d) is above max_ttl_s (%d)",
               p->min_ttl_s, p->max_ttl_s);
    if (p->workers == 0)
        p->workers = cpu_count();
    if (p->admin_listen) {
        sl_addr a;
        int port;
        char err[300];
        if (parse_ip_port(p->admin_listen, -1, true, &a, &port, err, sizeof err) && port != 0)
            for (size_t i = 0; i < p->nlisten; i++)
                if (p->listen[i].port == port && (sl_addr_equal(&p->listen[i].addr, &a)))
                    report(&l, opt->config ? opt->config : "admin", l.admin_line,
                           "admin listen %s is also a proxy listen address; give it its own port",
                           p->admin_listen);
    }

    check_inspection(&l, opt->config);

    if (l.errors) {
        sl_policy_unref(p);
        return NULL;
    }
    p->generation = ++generation;
    return p;
}

sl_policy *sl_policy_ref(sl_policy *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void sl_policy_unref(sl_policy *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    sl_allowlist_free(p->allow);
    for (size_t i = 0; i < p->nallowlist_files; i++)
        free(p->allowlist_files[i]);
    free(p->allowlist_files);
    free(p->allow_cidr);
    free(p->deny_cidr);
    free(p->config_path);
    free(p->log_path);
    free(p->admin_listen);
    free(p->tls_ca_cert);
    free(p->tls_ca_key);
    free(p->tls_upstream_ca);
    sl_tls_server_free(p->tls_server);
    sl_tls_client_free(p->tls_client);
    free(p->credentials_file);
    free(p->secret_dir);
    sl_credentials_free(p);
    sl_sessions_free(p);
    free(p->sessions_dir);
    for (size_t i = 0; i < p->ninputs; i++)
        free(p->inputs[i].path);
    free(p->inputs);
    free(p);
}

void sl_policy_note_input(sl_policy *p, const char *path, bool dir)
{
    for (size_t i = 0; i < p->ninputs; i++)
        if (p->inputs[i].dir == dir && strcmp(p->inputs[i].path, path) == 0)
            return;
    p->inputs = xrealloc(p->inputs, (p->ninputs + 1) * sizeof *p->inputs);
    p->inputs[p->ninputs++] = (sl_input){ .path = xstrdup(path), .dir = dir };
}

static void print_ports(FILE *out, const char *name, const sl_ports *ports)
{
    fprintf(out, "  %-14s", name);
    for (size_t i = 0; i < ports->n; i++)
        fprintf(out, "%s%u", i ? ", " : " ", ports->v[i]);
    fputc('\n', out);
}

/* Request rules grouped under their host form (host and port), groups in
 * the order of their first rule, rules in insertion order within one:
 * that is the order they are tried for a host that only one form covers. */
typedef struct rule_ref {
    const sl_entry *e;
    size_t idx, group;       /* group: the index of its group's first rule */
} rule_ref;

static int cmp_host_form(const sl_entry *a, const sl_entry *b)
{
    int c = strcmp(a->host.name, b->host.name);
    if (c)
        return c;
    if (a->kind != b->kind)
        return (int)a->kind - (int)b->kind;
    if (a->port != b->port)
        return a->port - b->port;
    return (int)a->host.kind - (int)b->host.kind;
}

static int cmp_by_form(const void *va, const void *vb)
{
    const rule_ref *a = va, *b = vb;
    int c = cmp_host_form(a->e, b->e);
    return c ? c : a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_by_group(const void *va, const void *vb)
{
    const rule_ref *a = va, *b = vb;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void print_rules(const sl_allowlist *al, size_t nrules, FILE *out)
{
    rule_ref *r = xrealloc(NULL, nrules * sizeof *r);
    size_t k = 0;
    for (size_t i = 0; i < sl_allowlist_count(al); i++)
        if (sl_entry_is_rule(sl_allowlist_entry(al, i)))
            r[k++] = (rule_ref){ sl_allowlist_entry(al, i), i, 0 };
    qsort(r, k, sizeof *r, cmp_by_form);
    size_t ngroups = 0;
    for (size_t i = 0; i < k; i++) {
        bool first = i == 0 || cmp_host_form(r[i - 1].e, r[i].e) != 0;
        r[i].group = first ? r[i].idx : r[i - 1].group;
        ngroups += first;
    }
    qsort(r, k, sizeof *r, cmp_by_group);
    fprintf(out, "inspected hosts: %zu (request rules under their host, each host's in the order tried)\n",
            ngroups);
    char host[300], text[SL_ENTRY_LINE_MAX + 1];
    for (size_t i = 0; i < k; i++) {
        const sl_entry *e = r[i].e;
        if (i == 0 || r[i].group != r[i - 1].group)
            fprintf(out, "  %s\n", sl_entry_format_host(e, host, sizeof host));
        size_t off = (size_t)snprintf(text, sizeof text, "%s %s", e->methods, e->path);
        for (size_t d = 0; d < e->ndigests && off < sizeof text; d++)
            off += (size_t)snprintf(text + off, sizeof text - off, " %s", e->digests[d]);
        if (e->line > 0)
            fprintf(out, "    %-38s %s:%d\n", text, e->file, e->line);
        else
            fprintf(out, "    %-38s %s\n", text, e->file);
    }
    free(r);
}

void sl_policy_print(const sl_policy *p, FILE *out)
{
    char a[SL_ADDR_STRLEN], line[300], c[64];

    fprintf(out, "config: %s\n", p->config_path ? p->config_path : "(none; built-in defaults)");
    fprintf(out, "listen:\n");
    for (size_t i = 0; i < p->nlisten; i++) {
        const sl_listen *ls = &p->listen[i];
        sl_addr_format(&ls->addr, a, sizeof a);
        fprintf(out, "  %s%s%s:%d  (%s)\n", ls->addr.family == AF_INET6 ? "[" : "", a,
                ls->addr.family == AF_INET6 ? "]" : "", ls->port, ls->where);
    }
    fprintf(out, "proxy:\n  workers        %d\n  max_clients    %d\n  shutdown_grace %d ms\n"
                 "  exit_idle      %d s%s\n",
            p->workers, p->max_clients, p->shutdown_grace_ms, p->exit_idle_s,
            p->exit_idle_s ? "" : " (never)");
    fprintf(out, "policy:\n");
    print_ports(out, "connect_ports", &p->connect_ports);
    print_ports(out, "http_ports", &p->http_ports);
    fprintf(out, "  sni_check      %s\n", p->sni_check ? "yes" : "no");
    for (size_t i = 0; i < p->nallow_cidr; i++)
        fprintf(out, "  allow_cidr     %s\n", sl_cidr_format(&p->allow_cidr[i], c, sizeof c));
    for (size_t i = 0; i < p->ndeny_cidr; i++)
        fprintf(out, "  deny_cidr      %s\n", sl_cidr_format(&p->deny_cidr[i], c, sizeof c));
    size_t n = sl_allowlist_count(p->allow), nrules = 0;
    for (size_t i = 0; i < n; i++)
        nrules += sl_entry_is_rule(sl_allowlist_entry(p->allow, i));
    if (nrules == 0)
        fprintf(out, "allowlist: %zu entr%s%s\n", n, n == 1 ? "y" : "ies",
                n ? "" : " (everything is denied)");
    else
        fprintf(out, "allowlist: %zu entr%s, %zu request rule%s\n", n - nrules, n - nrules == 1 ? "y" : "ies",
                nrules, nrules == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        const sl_entry *e = sl_allowlist_entry(p->allow, i);
        if (sl_entry_is_rule(e))
            continue;
        if (e->line > 0)
            fprintf(out, "  %-40s %s:%d\n", sl_entry_format(e, line, sizeof line), e->file, e->line);
        else
            fprintf(out, "  %-40s %s\n", sl_entry_format(e, line, sizeof line), e->file);
    }
    if (nrules)
        print_rules(p->allow, nrules, out);
    fprintf(out, "dns:%s\n", p->dns_from_resolv_conf ? " (from /etc/resolv.conf)" : "");
    for (size_t i = 0; i < p->ndns; i++) {
        sl_addr_format(&p->dns[i].addr, a, sizeof a);
        fprintf(out, "  server         %s%s%s:%d\n", p->dns[i].addr.family == AF_INET6 ? "[" : "",
                a, p->dns[i].addr.family == AF_INET6 ? "]" : "", p->dns[i].port);
    }
    fprintf(out, "  timeout        %d ms\n  ttl            %d..%d s\n", p->dns_timeout_ms,
            p->min_ttl_s, p->max_ttl_s);
    fprintf(out, "timeouts:\n  header         %d ms\n  connect        %d ms\n  idle           %d ms\n",
            p->header_ms, p->connect_ms, p->idle_ms);
    fprintf(out, "log:\n  path           %s\n", strcmp(p->log_path, "-") ? p->log_path : "- (standard output)");
    fprintf(out, "admin:\n  listen         %s\n", p->admin_listen ? p->admin_listen : "(off)");
    fprintf(out, "tls:%s\n", p->inspects ? "" : " (no request rules: nothing is inspected)");
    fprintf(out, "  ca_cert        %s\n", p->tls_ca_cert ? p->tls_ca_cert : "(not set)");
    fprintf(out, "  ca_key         %s\n", p->tls_ca_key ? p->tls_ca_key : "(not set)");
    fprintf(out, "  upstream_ca    %s\n", p->tls_upstream_ca);
    fprintf(out, "  leaf_days      %d\n", p->tls_leaf_days);
    fprintf(out, "  pin_hold_kib   %d\n", p->pin_hold_kib);
    sl_credentials_print(p, out);
    sl_sessions_print(p, out);
}

void sl_policy_warnings(const sl_policy *p, sl_report_fn rep, void *ctx)
{
    sl_allowlist_warnings(p->allow, rep, ctx);
    for (size_t i = 0; i < p->nsessions; i++)
        if (p->sessions[i].allow)
            sl_allowlist_warnings(p->sessions[i].allow, rep, ctx);
}

void sl_report_stderr(void *ctx, const char *msg)
{
    const char *prefix = ctx;
    fprintf(stderr, "%s%s\n", prefix ? prefix : "", msg);
}
