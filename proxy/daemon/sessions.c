/* Session files (sessions.h): reading [sessions] dir, the lookup by name,
 * the token check, and what `sluice check` prints. sl_sessions_open_logs
 * lives with the log streams. */
#include "sessions.h"

#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crypto.h"
#include "log.h"
#include "metrics.h"
#include "text.h"

/* inih as Debian builds it splits longer lines (config.c has the same). */
#define INI_LINE_LIMIT 198
#define SESSION_FILE_MAX (64u << 10)

typedef struct loader {
    sl_policy *p;
    sl_report_fn report;
    void *ctx;
    int errors;

    const char *file;          /* the session file */
    char dir[PATH_MAX];        /* its directory: relative paths start here */
    const char *text;
    size_t pos, size;
    int line;
    int first_syntax_line;     /* reported by read_line; inih reports it again */
    int section_line;          /* of [session]; 0: none yet */
    int token_line, log_line, expires_line;
    sl_session *s;
} loader;

static void report(loader *l, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void report(loader *l, int line, const char *fmt, ...)
{
    char msg[1024], full[PATH_MAX + 1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(full, sizeof full, "%s:%d: %s", l->file, line, msg);
    else
        snprintf(full, sizeof full, "%s: %s", l->file, msg);
    l->errors++;
    l->report(l->ctx, full);
}

/* The allowlist reader's reports, counted as ours. */
static void report_cb(void *ctx, const char *msg)
{
    loader *l = ctx;
    l->errors++;
    l->report(l->ctx, msg);
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

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        perror("sluice: out of memory");
        exit(1);
    }
    return d;
}

static char *resolve_path(const loader *l, const char *path)
{
    if (path[0] == '/')
        return xstrdup(path);
    size_t n = strlen(l->dir) + strlen(path) + 2;
    char *s = xrealloc(NULL, n);
    snprintf(s, n, "%s/%s", l->dir, path);
    return s;
}

bool sl_session_name_valid(const char *s, size_t n)
{
    if (n == 0 || n > SL_SESSION_NAME_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return false;
    }
    return true;
}

static bool parse_sha256_hex(const char *s, unsigned char out[32])
{
    if (strlen(s) != 64)
        return false;
    for (size_t i = 0; i < 32; i++) {
        int hi = sl_hexval((unsigned char)s[2 * i]), lo = sl_hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Exactly YYYY-MM-DDTHH:MM:SSZ, a real date and time of day (no leap
 * second, no offset, no fraction): one form, so that no two people read
 * the same expiry differently. */
bool sl_session_parse_expires(const char *s, time_t *out)
{
    static const char form[] = "dddd-dd-ddTdd:dd:ddZ";
    if (strlen(s) != sizeof form - 1)
        return false;
    for (size_t i = 0; i < sizeof form - 1; i++)
        if (form[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != form[i])
            return false;
#define TWO(at) ((s[at] - '0') * 10 + (s[(at) + 1] - '0'))
    int y = TWO(0) * 100 + TWO(2), mo = TWO(5), d = TWO(8), h = TWO(11), mi = TWO(14), sec = TWO(17);
#undef TWO
    static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59)
        return false;
    if (d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
        return false;
    struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi,
                     .tm_sec = sec };
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || t <= 0)
        return false;
    *out = t;
    return true;
}

static void add_allowlist(loader *l, const char *value)
{
    sl_session *s = l->s;
    if (value[0] == '\0') {
        report(l, l->line, "allowlist: empty path");
        return;
    }
    char *path = resolve_path(l, value);
    /* Checked here so that a missing list names this line, not only itself. */
    FILE *f = fopen(path, "r");
    if (!f) {
        report(l, l->line, "allowlist %s: cannot read: %s", path, strerror(errno));
        free(path);
        return;
    }
    fclose(f);
    if (!s->allow) {
        s->allow = sl_allowlist_new();
        if (!s->allow) {
            perror("sluice: out of memory");
            exit(1);
        }
    }
    s->allowlist_files = xrealloc(s->allowlist_files, (s->nallowlist_files + 1) * sizeof(char *));
    s->allowlist_files[s->nallowlist_files++] = path;
    sl_policy_note_input(l->p, path, false);
    sl_allowlist_load_file(s->allow, path, report_cb, l);
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!strcmp(a, b))
        return true;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    loader *l = user;
    sl_session *s = l->s;
    if (section[0] == '\0') {
        report(l, l->line, "'%s' is outside any section (a session file holds one [session])", name);
        return 1;
    }
    if (strcmp(section, "session") != 0)
        return 1; /* reported once, by the reader, on the [section] line */
    if (!strcmp(name, "token_sha256")) {
        if (l->token_line) {
            report(l, l->line, "'token_sha256' given twice in [session] (first on line %d)", l->token_line);
            return 1;
        }
        l->token_line = l->line;
        /* Never quoted: a hash of a token is the next thing to it. */
        if (!parse_sha256_hex(value, s->token_sha256))
            report(l, l->line, "token_sha256: not 64 hex digits (the SHA-256 of the token, in hex; "
                               "`sluice session new` writes it)");
    } else if (!strcmp(name, "allowlist")) {
        add_allowlist(l, value);
    } else if (!strcmp(name, "log")) {
        if (l->log_line) {
            report(l, l->line, "'log' given twice in [session] (first on line %d)", l->log_line);
            return 1;
        }
        l->log_line = l->line;
        if (value[0] == '\0') {
            report(l, l->line, "log: empty path");
        } else {
            s->log_path = resolve_path(l, value);
            s->log_line = l->line;
            /* Two writers of one file, each with its own chain, would make
             * both unverifiable. (Sessions may share a stream.) */
            if (l->p->log_path && same_file(s->log_path, l->p->log_path))
                report(l, l->line, "log %s is the gate's own log; give the session a file of its own",
                       s->log_path);
        }
    } else if (!strcmp(name, "expires")) {
        if (l->expires_line) {
            report(l, l->line, "'expires' given twice in [session] (first on line %d)", l->expires_line);
            return 1;
        }
        l->expires_line = l->line;
        char q[100];
        if (!sl_session_parse_expires(value, &s->expires))
            report(l, l->line, "expires: '%s' is not a UTC time as YYYY-MM-DDTHH:MM:SSZ",
                   sl_display_untrusted(value, strlen(value), q, sizeof q, SL_DISPLAY_QMARK));
    } else {
        report(l, l->line, "unknown key '%s' in [session] (token_sha256, allowlist, log, expires)", name);
    }
    return 1;
}

/* inih's line source, as config.c's: counts lines for our messages,
 * reports lines inih would split, and checks the sections (inih does not
 * call back for an empty section, nor say that one comes twice). */
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
        report(l, l->line, "NUL byte in line");
        snprintf(str, (size_t)num, ";\n");
        return str;
    }
    if (len > INI_LINE_LIMIT || len + 2 > (size_t)num) {
        report(l, l->line, "line is %zu characters long; the config reader accepts at most %d", len,
               INI_LINE_LIMIT);
        snprintf(str, (size_t)num, ";\n");
        return str;
    }
    size_t bom = l->line == 1 && len >= 3 && memcmp(start, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    size_t i = bom;
    while (i < len && (start[i] == ' ' || start[i] == '\t'))
        i++;
    bool indented = i > bom;   /* inih reads an indented line as a continuation */
    if (i < len && start[i] == '[') {
        const char *rb = memchr(start + i, ']', len - i);
        size_t n = rb ? (size_t)(rb - start - i - 1) : 0;
        if (rb && !(n == 7 && !memcmp(start + i + 1, "session", 7)))
            report(l, l->line, "unknown section [%.*s] (a session file holds one [session])", (int)n,
                   start + i + 1);
        else if (rb && l->section_line)
            report(l, l->line, "[session] again (first on line %d): one session a file", l->section_line);
        else if (rb)
            l->section_line = l->line;
    } else if (i < len && !indented && start[i] != ';' && start[i] != '#' &&
               !memchr(start + i, '=', len - i) && !memchr(start + i, ':', len - i)) {
        report(l, l->line, "syntax error (expected [section], key = value, or a comment)");
        if (!l->first_syntax_line)
            l->first_syntax_line = l->line;
    }
    memcpy(str, start, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

/* The whole file, at most SESSION_FILE_MAX bytes. */
static char *read_small_file(loader *l, size_t *size)
{
    FILE *f = fopen(l->file, "rb");
    if (!f) {
        report(l, 0, "cannot read: %s", strerror(errno));
        return NULL;
    }
    char *buf = xrealloc(NULL, SESSION_FILE_MAX + 1);
    size_t n = fread(buf, 1, SESSION_FILE_MAX + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || n > SESSION_FILE_MAX) {
        if (bad)
            report(l, 0, "cannot read: %s", strerror(errno));
        else
            report(l, 0, "larger than %u KiB; a session file is a few lines", SESSION_FILE_MAX >> 10);
        free(buf);
        return NULL;
    }
    *size = n;
    return buf;
}

static void session_free(sl_session *s)
{
    free(s->name);
    sl_allowlist_free(s->allow);
    for (size_t i = 0; i < s->nallowlist_files; i++)
        free(s->allowlist_files[i]);
    free(s->allowlist_files);
    free(s->log_path);
    free(s->file);
    sl_log_stream_put(s->log);
    memset(s, 0, sizeof *s);
}

/* One session file into *s; the number of errors. */
static int load_one(sl_policy *p, const char *dir, const char *name, sl_session *s, sl_report_fn rep,
                    void *ctx)
{
    size_t n = strlen(dir) + strlen(name) + 6;
    *s = (sl_session){ .name = xstrdup(name), .name_len = strlen(name), .metrics_slot = sl_metrics_session_slot(name), .file = xrealloc(NULL, n) };
    snprintf(s->file, n, "%s/%s.ini", dir, name);
    loader l = { .p = p, .report = rep, .ctx = ctx, .file = s->file, .s = s };
    snprintf(l.dir, sizeof l.dir, "%s", dir);

    struct stat st;
    if (stat(s->file, &st) != 0) {
        report(&l, 0, "cannot read: %s", strerror(errno));
        return l.errors;
    }
    if (!S_ISREG(st.st_mode)) {
        report(&l, 0, "not a regular file");
        return l.errors;
    }
    char *text = read_small_file(&l, &l.size);
    if (!text)
        return l.errors;
    l.text = text;
    int rc = ini_parse_stream(read_line, &l, on_key, &l);
    if (rc > 0 && rc != l.first_syntax_line)
        report(&l, rc, "syntax error (expected [section], key = value, or a comment)");
    else if (rc < 0)
        report(&l, 0, "cannot parse");
    free(text);
    l.text = NULL;

    /* Where the missing key belongs: the [session] line, else the top. */
    if (!l.section_line)
        report(&l, 1, "no [session] section (token_sha256 = the SHA-256 of the token, in hex)");
    else if (!l.token_line)
        report(&l, l.section_line, "[session] has no token_sha256 (the SHA-256 of the token, in hex)");
    return l.errors;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sl_sessions_load(sl_policy *p, const char *dir, sl_report_fn rep, void *ctx)
{
    int errors = 0;
    char msg[PATH_MAX + 200];
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(msg, sizeof msg, "%s: cannot read the sessions directory: %s", dir, strerror(errno));
        rep(ctx, msg);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool too_many = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") != 0 || !sl_session_name_valid(e->d_name, len - 4))
            continue;   /* not NAME.ini: dotfiles, ..data, editors' backups */
        if (n == SL_SESSIONS_MAX) {
            too_many = true;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = xrealloc(names, cap * sizeof *names);
        }
        names[n] = xrealloc(NULL, len - 3);
        memcpy(names[n], e->d_name, len - 4);
        names[n][len - 4] = '\0';
        n++;
    }
    closedir(d);
    if (too_many) {
        snprintf(msg, sizeof msg, "%s: more than %d session files; at most %d are read", dir, SL_SESSIONS_MAX,
                 SL_SESSIONS_MAX);
        rep(ctx, msg);
        errors++;
    }
    /* By name, not by file name: "a" before "a.b" ("a.ini" sorts after "a.b.ini"). */
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    sl_session *v = n ? xrealloc(NULL, n * sizeof *v) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int e1 = too_many ? 0 : load_one(p, dir, names[i], &v[k], rep, ctx);
        if (too_many || e1) {
            if (!too_many)
                session_free(&v[k]);
            errors += e1;
        } else {
            k++;
        }
        free(names[i]);
    }
    free(names);
    p->sessions = v;
    p->nsessions = k;
    return errors;
}

void sl_sessions_free(sl_policy *p)
{
    for (size_t i = 0; i < p->nsessions; i++)
        session_free(&p->sessions[i]);
    free(p->sessions);
    p->sessions = NULL;
    p->nsessions = 0;
}

const sl_session *sl_policy_session(const sl_policy *p, const char *name, size_t len)
{
    if (len == 0 || len > SL_SESSION_NAME_MAX)
        return NULL;
    size_t lo = 0, hi = p->nsessions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = p->sessions[mid].name;
        size_t mlen = p->sessions[mid].name_len;
        int c = memcmp(m, name, mlen < len ? mlen : len);
        if (c == 0)
            c = mlen < len ? -1 : mlen > len;
        if (c == 0)
            return &p->sessions[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool sl_session_token_ok(const sl_session *s, const char *token, size_t len)
{
    if (len > SL_SESSION_TOKEN_MAX)
        return false;
    /* The comparison looks at every byte, wherever the first difference is. */
    unsigned char digest[32];
    sl_sha256(token, len, digest);
    volatile unsigned char diff = 0;
    for (size_t i = 0; i < 32; i++)
        diff |= digest[i] ^ s->token_sha256[i];
    explicit_bzero(digest, sizeof digest);
    return diff == 0;
}

static void format_utc(time_t t, char *buf, size_t cap)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, cap, "%lld", (long long)t);
}

void sl_sessions_print(const sl_policy *p, FILE *out)
{
    if (!p->sessions_dir) {
        fprintf(out, "sessions: (off; every client is anonymous)\n");
        return;
    }
    fprintf(out, "sessions: %zu\n  dir            %s\n  require        %s\n", p->nsessions, p->sessions_dir,
            p->sessions_require ? "yes (a client without credentials gets 407)"
                                : "no (a client without credentials is anonymous)");
    time_t now = time(NULL);
    char *line = xrealloc(NULL, SL_ENTRY_LINE_MAX + 1);   /* a rule's line can be long */
    for (size_t i = 0; i < p->nsessions; i++) {
        const sl_session *s = &p->sessions[i];
        char when[64];
        fprintf(out, "  %s\n    file           %s\n", s->name, s->file);
        /* Only a prefix, enough to tell sessions apart. */
        fprintf(out, "    token_sha256   %02x%02x%02x%02x\u2026\n", s->token_sha256[0], s->token_sha256[1],
                s->token_sha256[2], s->token_sha256[3]);
        if (s->expires) {
            format_utc(s->expires, when, sizeof when);
            fprintf(out, "    expires        %s%s\n", when, sl_session_expired(s, now) ? " (expired)" : "");
        } else {
            fprintf(out, "    expires        never\n");
        }
        fprintf(out, "    log            %s\n", s->log_path ? s->log_path : "(the gate's log)");
        size_t ne = s->allow ? sl_allowlist_count(s->allow) : 0;
        fprintf(out, "    allowlist      %zu entr%s%s\n", ne, ne == 1 ? "y" : "ies",
                ne ? " (besides the global allowlist)" : " (the global allowlist only)");
        for (size_t f = 0; f < s->nallowlist_files; f++)
            fprintf(out, "      file         %s\n", s->allowlist_files[f]);
        for (size_t k = 0; k < ne; k++) {
            const sl_entry *en = sl_allowlist_entry(s->allow, k);
            sl_entry_format(en, line, SL_ENTRY_LINE_MAX + 1);
            fprintf(out, "      %-40s %s:%d\n", line, en->file, en->line);
        }
    }
    free(line);
}
