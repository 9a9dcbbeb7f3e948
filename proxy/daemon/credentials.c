/* The credentials file, the secrets, and the lookup (credentials.h). */
#include "credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text.h"

#define CRED_LINE_MAX 1024
#define CRED_NAME_MAX 64
#define CRED_HEADER_MAX 128
#define SECRET_MARK "{secret}"

typedef struct loader {
    sl_policy *p;
    sl_report_fn report;
    void *ctx;
    int errors;
    const char *file;
    int line;
    size_t cap;             /* of p->credentials */
} loader;

static void report(loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(loader *l, const char *fmt, ...)
{
    char msg[1024], full[PATH_MAX + 1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (l->line > 0)
        snprintf(full, sizeof full, "%s:%d: %s", l->file, l->line, msg);
    else
        snprintf(full, sizeof full, "%s: %s", l->file, msg);
    l->errors++;
    if (l->report)
        l->report(l->ctx, full);
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = strndup(s, n);
    if (!d) {
        perror("sluice: out of memory");
        exit(1);
    }
    return d;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static bool name_valid(const char *s, size_t n)
{
    if (n == 0 || n > CRED_NAME_MAX || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* tchar (RFC 9110 5.6.2). */
static bool header_valid(const char *s, size_t n)
{
    if (n == 0 || n > CRED_HEADER_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    return true;
}

/* Headers that frame the message, route it or belong to one hop: setting
 * one would let a credential change what the origin reads as the request. */
static bool header_refused(const char *s, size_t n)
{
    static const char *const refused[] = {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
        "proxy-authorization", "proxy-authenticate", "te", "trailer", "upgrade", "expect",
        "http2-settings",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (strlen(refused[i]) == n && strncasecmp(refused[i], s, n) == 0)
            return true;
    return false;
}

/* A header value's bytes: no control byte but HTAB (no CR, LF or NUL
 * above all: they would end the header). */
static const char *value_refused(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\r')
            return "a carriage return (CR)";
        if (c == '\n')
            return "a line break (LF)";
        if (c == '\0')
            return "a NUL byte";
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return "a control byte";
    }
    return NULL;
}

/* The secret for name into buf (len bytes, one trailing newline removed).
 * The file must be a regular file, not a link, owned by the gate's user and
 * not open to group or others; checked on the descriptor that is read. The
 * reasons never quote the content. */
static bool read_secret(loader *l, const char *dir, const char *name, char *buf, size_t *len)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        report(l, "credential '%s': secret path is too long", name);
        return false;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP)
            report(l, "credential '%s': secret %s is a symbolic link (secrets are read without following links)",
                   name, path);
        else
            report(l, "credential '%s': cannot read secret %s: %s", name, path, strerror(errno));
        return false;
    }
    struct stat st;
    bool ok = false;
    ssize_t got = 0;
    if (fstat(fd, &st) != 0) {
        report(l, "credential '%s': cannot stat secret %s: %s", name, path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        report(l, "credential '%s': secret %s is not a regular file", name, path);
    } else if (st.st_uid != geteuid()) {
        report(l, "credential '%s': secret %s is owned by uid %u, not by the gate's user (uid %u)", name, path,
               (unsigned)st.st_uid, (unsigned)geteuid());
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        report(l, "credential '%s': secret %s is open to group or others (mode %04o); chmod 600 it", name,
               path, (unsigned)(st.st_mode & 07777));
    } else {
        /* Up to two bytes more than the limit: a secret of the limit and
         * its newline, or one that is too long, whatever each read gives. */
        size_t have = 0;
        while (have < SL_SECRET_MAX + 2) {
            got = read(fd, buf + have, SL_SECRET_MAX + 2 - have);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            have += (size_t)got;
        }
        if (got < 0) {
            report(l, "credential '%s': cannot read secret %s: %s", name, path, strerror(errno));
        } else {
            if (have > 0 && buf[have - 1] == '\n')
                have--;
            const char *why = value_refused(buf, have);
            if (have > SL_SECRET_MAX)
                report(l, "credential '%s': secret %s is larger than %d bytes", name, path, SL_SECRET_MAX);
            else if (have == 0)
                report(l, "credential '%s': secret %s is empty", name, path);
            else if (why)
                report(l, "credential '%s': secret %s contains %s (only one trailing newline is removed)",
                       name, path, why);
            else {
                *len = have;
                ok = true;
            }
        }
    }
    close(fd);
    return ok;
}

static void add_credential(loader *l, const char *secret_dir, const char *name, size_t nlen, const char *host,
                           size_t hlen, const char *header, size_t hdlen, const char *tmpl, size_t tlen)
{
    sl_policy *p = l->p;
    char nm[CRED_NAME_MAX + 1], q[100];
    if (!name_valid(name, nlen)) {
        report(l, "bad credential name '%s' (letters, digits, '_', '.', '-'; at most %d)",
               sl_display_untrusted(name, nlen, q, sizeof q, SL_DISPLAY_QMARK), CRED_NAME_MAX);
        return;
    }
    memcpy(nm, name, nlen);
    nm[nlen] = '\0';
    for (size_t i = 0; i < p->ncredentials; i++)
        if (!strcmp(p->credentials[i].name, nm)) {
            report(l, "credential '%s' is defined twice (first at %s)", nm, p->credentials[i].where);
            return;
        }
    if (!header_valid(header, hdlen)) {
        report(l, "credential '%s': bad header name '%s'", nm,
               sl_display_untrusted(header, hdlen, q, sizeof q, SL_DISPLAY_QMARK));
        return;
    }
    if (header_refused(header, hdlen)) {
        report(l, "credential '%s': header '%.*s' frames or routes the request (hop-by-hop or framing); "
                  "a credential may not set it", nm, (int)hdlen, header);
        return;
    }
    const char *mark = memmem(tmpl, tlen, SECRET_MARK, strlen(SECRET_MARK));
    if (!mark || memmem(mark + 1, tlen - (size_t)(mark + 1 - tmpl), SECRET_MARK, strlen(SECRET_MARK))) {
        report(l, "credential '%s': the template must contain {secret} exactly once", nm);
        return;
    }
    const char *why = value_refused(tmpl, tlen);
    if (why) {
        report(l, "credential '%s': the template contains %s", nm, why);
        return;
    }

    /* The host is parsed into a list of its own first: p's list gets it
     * only with the credential, so that entry i stays credential i. */
    char err[600] = "";
    sl_allowlist *one = sl_allowlist_new();
    if (!one) {
        perror("sluice: out of memory");
        exit(1);
    }
    bool ok = sl_allowlist_add_line(one, host, hlen, l->file, l->line, err, sizeof err);
    const sl_entry *e = sl_allowlist_count(one) == 1 ? sl_allowlist_entry(one, 0) : NULL;
    if (!ok || !e || sl_entry_is_rule(e)) {
        report(l, "credential '%s': host: %s", nm, !ok ? err : "not a host");
        sl_allowlist_free(one);
        return;
    }
    for (size_t i = 0; i < p->ncredentials; i++) {
        const sl_entry *o = sl_allowlist_entry(p->credential_hosts, i);
        if (o->kind == e->kind && o->port == e->port && o->host.kind == e->host.kind &&
            !strcmp(o->host.name, e->host.name)) {
            report(l, "credential '%s' is for the same host as '%s' (%s): one header a host",
                   nm, p->credentials[i].name, p->credentials[i].where);
            sl_allowlist_free(one);
            return;
        }
    }
    sl_allowlist_free(one);

    /* Secrets last: nothing above depends on them, and a secret is read
     * only for a line that is otherwise good. */
    char *secret = malloc(SL_SECRET_MAX + 2);
    if (!secret) {
        perror("sluice: out of memory");
        exit(1);
    }
    size_t slen = 0;
    if (!secret_dir) {
        report(l, "credential '%s': [credentials] secret_dir is not set", nm);
        free(secret);
        return;
    }
    if (!read_secret(l, secret_dir, nm, secret, &slen)) {
        explicit_bzero(secret, SL_SECRET_MAX + 2);
        free(secret);
        return;
    }
    size_t pre = (size_t)(mark - tmpl), post = tlen - pre - strlen(SECRET_MARK);
    char *value = malloc(pre + slen + post + 1);
    if (!value) {
        perror("sluice: out of memory");
        exit(1);
    }
    memcpy(value, tmpl, pre);
    memcpy(value + pre, secret, slen);
    memcpy(value + pre + slen, mark + strlen(SECRET_MARK), post);
    value[pre + slen + post] = '\0';
    explicit_bzero(secret, SL_SECRET_MAX + 2);
    free(secret);

    if (!sl_allowlist_add_line(p->credential_hosts, host, hlen, l->file, l->line, err, sizeof err)) {
        perror("sluice: out of memory");   /* it parsed above: only memory can fail */
        exit(1);
    }
    if (p->ncredentials == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        sl_credential *nc = realloc(p->credentials, l->cap * sizeof *nc);
        if (!nc) {
            perror("sluice: out of memory");
            exit(1);
        }
        p->credentials = nc;
    }
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%d", l->file, l->line);
    p->credentials[p->ncredentials++] = (sl_credential){
        .name = xstrndup(nm, nlen),
        .header = xstrndup(header, hdlen),
        .value = value,
        .where = xstrndup(where, strlen(where)),
        .tmpl = xstrndup(tmpl, tlen),
    };
}

/* Which credentials some request rule covers, on a port both allow. A bare
 * host stands for connect_ports: credentials go only into inspected
 * CONNECT tunnels. */
typedef struct inspected_ctx {
    const sl_policy *p;
    bool *used;
} inspected_ctx;

static bool ports_meet(const sl_policy *p, int a, int b)
{
    if (a && b)
        return a == b;
    if (!a && !b)
        return true;
    return sl_ports_has(&p->connect_ports, a ? a : b);
}

static void note_inspected(void *vctx, const sl_entry *cred, const sl_entry *rule)
{
    inspected_ctx *c = vctx;
    if (ports_meet(c->p, cred->port, rule->port))
        c->used[sl_allowlist_index(c->p->credential_hosts, cred)] = true;
}

int sl_credentials_load(sl_policy *p, const char *path, const char *secret_dir, sl_report_fn rep, void *ctx)
{
    loader l = { .p = p, .report = rep, .ctx = ctx, .file = path };
    if (!p->credential_hosts) {
        p->credential_hosts = sl_allowlist_new();
        if (!p->credential_hosts) {
            perror("sluice: out of memory");
            exit(1);
        }
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        report(&l, "cannot read: %s", strerror(errno));
        return l.errors;
    }
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t got;
    while ((got = getline(&buf, &bufcap, f)) >= 0) {
        l.line++;
        size_t len = (size_t)got;
        if (len > 0 && buf[len - 1] == '\n')
            len--;
        if (len > CRED_LINE_MAX) {
            report(&l, "line longer than %d bytes", CRED_LINE_MAX);
            continue;
        }
        if (memchr(buf, '\0', len)) {
            report(&l, "NUL byte in line");
            continue;
        }
        size_t i = 0;
        while (i < len && is_ws(buf[i]))
            i++;
        while (len > i && is_ws(buf[len - 1]))
            len--;
        if (i == len || buf[i] == '#')
            continue;
        /* NAME HOST HEADER, then the rest of the line is TEMPLATE. */
        const char *tok[3];
        size_t tl[3];
        int nt = 0;
        while (nt < 3 && i < len) {
            tok[nt] = buf + i;
            while (i < len && !is_ws(buf[i]))
                i++;
            tl[nt] = (size_t)(buf + i - tok[nt]);
            nt++;
            while (i < len && is_ws(buf[i]))
                i++;
        }
        if (nt < 3 || i == len) {
            report(&l, "expected NAME HOST HEADER TEMPLATE, e.g. 'npm registry.npmjs.org Authorization "
                       "Bearer {secret}'");
            continue;
        }
        add_credential(&l, secret_dir, tok[0], tl[0], tok[1], tl[1], tok[2], tl[2], buf + i, len - i);
    }
    free(buf);
    fclose(f);

    if (p->ncredentials) {
        bool *used = calloc(p->ncredentials, sizeof *used);
        if (!used) {
            perror("sluice: out of memory");
            exit(1);
        }
        inspected_ctx c = { p, used };
        sl_allowlist_overlaps(p->credential_hosts, false, p->allow, true, note_inspected, &c);
        for (size_t k = 0; k < p->ncredentials; k++) {
            if (used[k])
                continue;
            const sl_entry *e = sl_allowlist_entry(p->credential_hosts, k);
            char host[300];
            l.line = e->line;
            report(&l, "credential '%s' for %s would never be used: no request rule covers that host "
                       "(credentials are sent only on inspected requests)",
                   p->credentials[k].name, sl_entry_format(e, host, sizeof host));
        }
        free(used);
    }
    return l.errors;
}

void sl_credentials_free(sl_policy *p)
{
    for (size_t i = 0; i < p->ncredentials; i++) {
        sl_credential *c = &p->credentials[i];
        explicit_bzero((char *)c->value, strlen(c->value));
        free((char *)c->value);
        free((char *)c->name);
        free((char *)c->header);
        free((char *)c->where);
        free((char *)c->tmpl);
    }
    free(p->credentials);
    p->credentials = NULL;
    p->ncredentials = 0;
    sl_allowlist_free(p->credential_hosts);
    p->credential_hosts = NULL;
}

const sl_credential *sl_policy_credential(const sl_policy *p, const sl_host *h, int port, bool connect)
{
    if (p->ncredentials == 0)
        return NULL;
    const sl_entry *e;
    if (sl_allowlist_match(p->credential_hosts, h, port, connect, &p->connect_ports, &p->http_ports, &e) !=
        SL_MATCH_ALLOWED)
        return NULL;
    return &p->credentials[sl_allowlist_index(p->credential_hosts, e)];
}

void sl_credentials_print(const sl_policy *p, FILE *out)
{
    fprintf(out, "credentials: %zu%s\n", p->ncredentials, p->ncredentials ? "" : " (none)");
    if (p->credentials_file)
        fprintf(out, "  file           %s\n", p->credentials_file);
    if (p->secret_dir)
        fprintf(out, "  secret_dir     %s\n", p->secret_dir);
    for (size_t i = 0; i < p->ncredentials; i++) {
        const sl_credential *c = &p->credentials[i];
        char host[300];
        sl_entry_format(sl_allowlist_entry(p->credential_hosts, i), host, sizeof host);
        /* The template as written: "{secret}" is never expanded here. */
        fprintf(out, "  %-14s %-28s %s: %s  (%s)\n", c->name, host, c->header, c->tmpl, c->where);
    }
}
