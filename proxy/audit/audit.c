/* sluice audit: the command line, and reading the logs in order. */
#include "audit.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "allowlist.h"
#include "audit_input.h"
#include "audit_report.h"
#include "audit_verify.h"
#include "sessions.h"

#define SHOWN_WARNINGS 10   /* malformed lines named one by one; then only counted */
#define KEEP_OPEN 8         /* up to this many logs stay open from their first line on */

static const char usage[] =
    "usage: sluice audit [--summary|--denied|--suggest|--verify] [--json] [--follow]\n"
    "                    [--session NAME] LOG...\n"
    "\n"
    "Reads decision logs: plain or gzip'd, several in any order (rotated files are\n"
    "put back in order by their first lines), '-' for standard input.\n"
    "\n"
    "  --summary   (default) per host:port: allowed and denied, reasons, bytes up and\n"
    "              down, first and last seen; the time span, clients and totals.\n"
    "              Requests inside inspected tunnels count for their tunnel's\n"
    "              host:port, and get a table of their own: per host:port, method\n"
    "              and path prefix (the first two segments, then *), allowed and\n"
    "              denied, and the credentials sluice set\n"
    "  --denied    every refused host:port with its reason and count, most frequent\n"
    "              first (rule_not_matched inside inspected tunnels included)\n"
    "  --suggest   allowlist lines for what was refused as not_allowlisted or\n"
    "              port_not_allowed, each with a comment; never for a host refused as\n"
    "              non_public_address, nor for an IP literal that is not public.\n"
    "              Request rules (METHOD HOST/PATH) for what was refused as\n"
    "              rule_not_matched: one per host, method and path prefix, or the\n"
    "              exact path when it is the only one refused there; never for a\n"
    "              path the gate would refuse as ambiguous, and never a query string\n"
    "  --verify    check the hash chain: 'ok: N lines, stream S' for each stream, or\n"
    "              exit 1 naming the first bad line as FILE:LINE\n"
    "  --session NAME\n"
    "              only the lines of session NAME (their \"session\" field): every\n"
    "              report above counts only those; anonymous clients' lines and\n"
    "              auth_failed lines (which name no session) are left out.\n"
    "              --verify ignores it: a chain is verified whole\n"
    "  --json      print JSON instead of a table\n"
    "  --follow    keep reading the last log as it grows, across rotation (like\n"
    "              tail -F); reports are printed again whenever it catches up;\n"
    "              stop with SIGINT or SIGTERM\n"
    "  --connect-ports LIST, --http-ports LIST\n"
    "              the gate's connect_ports and http_ports (default 443 and 80),\n"
    "              so --suggest writes a bare host where a port is a default one\n"
    "\n"
    "Memory stays constant with the log's length: it grows with the number of\n"
    "distinct host:port pairs and clients, of distinct host:port, method and path\n"
    "prefix of inspected requests, and with connections open at once (at most\n"
    "262144 remembered).\n"
    "\n"
    "exit codes: 0 success; 1 --verify found a bad line, or a log could not be read\n"
    "to its end (compressed data corrupt); 2 usage error or a log cannot be read\n";

enum mode { M_SUMMARY, M_DENIED, M_SUGGEST, M_VERIFY };
static const char *const mode_names[] = { "--summary", "--denied", "--suggest", "--verify" };

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

typedef struct run {
    FILE *out, *err;
    enum mode mode;
    bool json, follow;
    sl_ports connect_ports, http_ports;
    const char *session;     /* --session: only its lines; NULL: all */
    sl_report *report;
    sl_verify *verify;
    unsigned long long warnings;
    bool dirty, printed;
    /* where the last line read left off, to pick the next file */
    bool have_cur;
    char cur_stream[33];
    unsigned long long cur_seq;
} run;

static void print_report(run *r)
{
    switch (r->mode) {
    case M_SUMMARY: sl_report_summary(r->report, r->out, r->json); break;
    case M_DENIED: sl_report_denied(r->report, r->out, r->json); break;
    case M_SUGGEST:
        sl_report_suggest(r->report, r->out, r->json, &r->connect_ports, &r->http_ports);
        break;
    case M_VERIFY: break;
    }
    fflush(r->out);
    r->dirty = false;
    r->printed = true;
}

static void warn(run *r, const char *name, unsigned long long lineno, const char *what)
{
    sl_report_malformed(r->report);
    if (++r->warnings <= SHOWN_WARNINGS)
        fprintf(r->err, "%s:%llu: %s; skipped\n", name, lineno, what);
    else if (r->warnings == SHOWN_WARNINGS + 1)
        fprintf(r->err, "sluice: audit: more lines that are not log lines; only their count is shown\n");
}

static bool hex32(const sl_astr *s)
{
    if (!s->set || s->esc || s->len != 32)
        return false;
    for (size_t i = 0; i < 32; i++)
        if (!((s->p[i] >= '0' && s->p[i] <= '9') || (s->p[i] >= 'a' && s->p[i] <= 'f')))
            return false;
    return true;
}

static void verify_failed(run *r, const char *name, unsigned long long lineno, const char *why)
{
    fprintf(r->err, "%s:%llu: %s\n", name, lineno, why);
    if (r->json) {
        fputs("{\"mode\":\"verify\",\"ok\":false,\"file\":", r->out);
        sl_audit_json_str(r->out, name, strlen(name));
        fprintf(r->out, ",\"line\":%llu,\"error\":", lineno);
        sl_audit_json_str(r->out, why, strlen(why));
        fprintf(r->out, ",\"lines_ok\":%llu}\n", sl_verify_total(r->verify));
    }
}

/* Read one log to its end. Returns 0, or the exit status to stop with. */
static int read_log(run *r, sl_ain *in)
{
    const char *name = sl_ain_name(in);
    int rc = 0;
    for (;;) {
        sl_aline line;
        sl_ain_status st = sl_ain_next(in, &line);
        switch (st) {
        case SL_AIN_EOF:
            return rc;
        case SL_AIN_ERROR:
            fprintf(r->err, "sluice: audit: %s\n", sl_ain_error(in));
            return 2;
        case SL_AIN_BADGZ:
            if (r->mode == M_VERIFY) {
                verify_failed(r, name, sl_ain_lineno(in) + 1, sl_ain_error(in) + strlen(name) + 2);
                return 1;
            }
            fprintf(r->err, "sluice: audit: %s, after line %llu\n", sl_ain_error(in), sl_ain_lineno(in));
            rc = 1;
            continue;
        case SL_AIN_IDLE:
            if (r->mode != M_VERIFY && (r->dirty || !r->printed)) {
                if (r->printed && !r->json)
                    fputs("\n", r->out);
                print_report(r);
            }
            continue;
        case SL_AIN_LONG:
            if (r->mode == M_VERIFY) {
                verify_failed(r, name, line.lineno, "line is longer than 1 MiB");
                return 1;
            }
            warn(r, name, line.lineno, "line is longer than 1 MiB");
            continue;
        case SL_AIN_LINE:
            break;
        }
        if (r->mode == M_VERIFY) {
            char why[400];
            if (!sl_verify_line(r->verify, line.text, line.len, line.complete, why, sizeof why)) {
                verify_failed(r, name, line.lineno, why);
                return 1;
            }
            continue;
        }
        if (!line.complete) {
            warn(r, name, line.lineno, "last line is incomplete (truncated)");
            continue;
        }
        sl_afields f;
        const char *bad;
        size_t at;
        if (!sl_aline_scan(line.text, line.len, &f, &bad, &at)) {
            char what[160];
            snprintf(what, sizeof what, "not valid JSON (%s at byte %zu)", bad, at + 1);
            warn(r, name, line.lineno, what);
            continue;
        }
        /* Where the stream stands is noted below for every line, the
         * others' too: the next file to read depends on it. */
        bool wanted = !r->session || sl_astr_eq(&f.session, r->session);
        if (wanted && !sl_report_line(r->report, &f)) {
            fprintf(r->err, "sluice: audit: out of memory\n");
            return 1;
        }
        r->dirty |= wanted;
        if (hex32(&f.stream)) {
            memcpy(r->cur_stream, f.stream.p, 32);
            r->cur_stream[32] = '\0';
            r->have_cur = true;
        }
        if (f.seq.set)
            r->cur_seq = f.seq.v;
    }
}

static void verify_ok(run *r)
{
    const sl_verify_stream *s;
    size_t n = sl_verify_streams(r->verify, &s);
    if (r->json) {
        fprintf(r->out, "{\"mode\":\"verify\",\"ok\":true,\"lines\":%llu,\"streams\":[",
                sl_verify_total(r->verify));
        for (size_t i = 0; i < n; i++)
            fprintf(r->out, "%s{\"stream\":\"%s\",\"lines\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,"
                            "\"from_start\":%s}",
                    i ? "," : "", s[i].id, s[i].lines, s[i].first_seq, s[i].last_seq,
                    s[i].from_start ? "true" : "false");
        fputs("]}\n", r->out);
        return;
    }
    if (n == 0)
        fprintf(r->out, "ok: 0 lines\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(r->out, "ok: %llu line%s, stream %s", s[i].lines, s[i].lines == 1 ? "" : "s", s[i].id);
        if (!s[i].from_start)
            fprintf(r->out, " (seq %llu..%llu: the lines before seq %llu are in no log given)",
                    s[i].first_seq, s[i].last_seq, s[i].first_seq);
        putc('\n', r->out);
    }
}

static int parse_args(int argc, char **argv, run *r, FILE *err)
{
    enum { O_SUMMARY = 256, O_DENIED, O_SUGGEST, O_VERIFY, O_JSON, O_FOLLOW, O_CPORTS, O_HPORTS, O_SESSION };
    static const struct option longopts[] = {
        { "summary", no_argument, NULL, O_SUMMARY },
        { "denied", no_argument, NULL, O_DENIED },
        { "suggest", no_argument, NULL, O_SUGGEST },
        { "verify", no_argument, NULL, O_VERIFY },
        { "json", no_argument, NULL, O_JSON },
        { "follow", no_argument, NULL, O_FOLLOW },
        { "connect-ports", required_argument, NULL, O_CPORTS },
        { "http-ports", required_argument, NULL, O_HPORTS },
        { "session", required_argument, NULL, O_SESSION },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int mode = -1;
    char perr[200];
    optind = 0;     /* glibc: start afresh (the command may run more than once in a process) */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "hf", longopts, NULL)) != -1) {
        switch (ch) {
        case O_SUMMARY:
        case O_DENIED:
        case O_SUGGEST:
        case O_VERIFY:
            if (mode >= 0 && mode != ch - O_SUMMARY) {
                fprintf(err, "sluice: audit: %s and %s cannot be combined\n", mode_names[mode],
                        mode_names[ch - O_SUMMARY]);
                return 2;
            }
            mode = ch - O_SUMMARY;
            break;
        case O_JSON: r->json = true; break;
        case 'f':
        case O_FOLLOW: r->follow = true; break;
        case O_CPORTS:
        case O_HPORTS:
            if (!sl_ports_parse(optarg, ch == O_CPORTS ? &r->connect_ports : &r->http_ports, perr,
                                sizeof perr)) {
                fprintf(err, "sluice: audit: %s: %s\n", ch == O_CPORTS ? "--connect-ports" : "--http-ports",
                        perr);
                return 2;
            }
            break;
        case O_SESSION:
            if (!sl_session_name_valid(optarg, strlen(optarg))) {
                fprintf(err, "sluice: audit: --session: '%s' is not a session name (1-%d of A-Z a-z 0-9 . _ -, "
                             "not starting with '.')\n", optarg, SL_SESSION_NAME_MAX);
                return 2;
            }
            r->session = optarg;
            break;
        case 'h': fputs(usage, r->out); return -1;
        default:
            if (optopt && optopt < 256)
                fprintf(err, "sluice: audit: unknown option '-%c'\n\n%s", optopt, usage);
            else
                fprintf(err, "sluice: audit: unknown or incomplete option '%s'\n\n%s", argv[optind - 1], usage);
            return 2;
        }
    }
    r->mode = mode < 0 ? M_SUMMARY : (enum mode)mode;
    if (optind >= argc) {
        fprintf(err, "sluice: audit: no log given (use '-' for standard input)\n\n%s", usage);
        return 2;
    }
    return 0;
}

/* Whether paths[i] names the same file as an earlier argument. */
static bool given_before(char **paths, size_t i)
{
    struct stat here, earlier;
    if (strcmp(paths[i], "-") == 0 || stat(paths[i], &here) != 0)
        return false;
    for (size_t k = 0; k < i; k++)
        if (strcmp(paths[k], "-") != 0 && stat(paths[k], &earlier) == 0 && here.st_dev == earlier.st_dev &&
            here.st_ino == earlier.st_ino)
            return true;
    return false;
}

int sl_audit_main(int argc, char **argv, FILE *out, FILE *err)
{
    run r = { .out = out, .err = err };
    r.connect_ports = (sl_ports){ { 443 }, 1 };
    r.http_ports = (sl_ports){ { 80 }, 1 };
    int rc = parse_args(argc, argv, &r, err);
    if (rc)
        return rc < 0 ? 0 : rc;

    char **paths = argv + optind;
    size_t n = (size_t)(argc - optind);
    sl_ain_first *firsts = calloc(n, sizeof *firsts);
    bool *done = calloc(n, sizeof *done);
    sl_ain **kept = calloc(n, sizeof *kept);
    size_t nstdin = 0;
    struct sigaction sa, old_int, old_term;
    bool handlers = false;
    if (!firsts || !done || !kept) {
        fprintf(err, "sluice: audit: out of memory\n");
        rc = 1;
        goto out;
    }

    /* A log given twice is a usage error, said before anything is read (not
     * after waiting on a terminal for standard input's first line). */
    for (size_t i = 0; i < n; i++) {
        if (strcmp(paths[i], "-") == 0 && ++nstdin > 1) {
            fprintf(err, "sluice: audit: '-' (standard input) given more than once\n");
            rc = 2;
        } else if (given_before(paths, i)) {
            fprintf(err, "sluice: audit: %s: given more than once\n", paths[i]);
            rc = 2;
        }
    }
    if (rc)
        goto out;

    /* Every log's first line, first: it says where the log belongs, and a
     * log that cannot be read stops us before any output. A few logs stay
     * open from here on, so that a log rotated meanwhile (--follow) is still
     * the file whose first line was read; standard input always does. */
    for (size_t i = 0; i < n; i++) {
        char msg[600];
        sl_ain *in = sl_ain_open(paths[i], msg, sizeof msg);
        if (!in) {
            fprintf(err, "sluice: audit: %s\n", msg);
            rc = 2;
            continue;
        }
        sl_ain_status st = sl_ain_peek_first(in, &firsts[i]);
        if (st == SL_AIN_ERROR) {
            fprintf(err, "sluice: audit: %s\n", sl_ain_error(in));
            rc = 2;
        }
        if (sl_ain_is_stdin(in) || n <= KEEP_OPEN)
            kept[i] = in;
        else
            sl_ain_close(in);
    }
    if (rc)
        goto out;

    r.report = sl_report_new();
    r.verify = sl_verify_new();
    if (!r.report || !r.verify) {
        fprintf(err, "sluice: audit: out of memory\n");
        rc = 1;
        goto out;
    }
    sl_report_set_files(r.report, n);
    if (r.follow) {
        stop_flag = 0;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;   /* no SA_RESTART: a blocking read returns */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        handlers = true;
    }

    for (size_t left = n; left > 0; left--) {
        const char *stream = r.cur_stream;
        unsigned long long seq = r.cur_seq;
        bool have = r.have_cur;
        if (r.mode == M_VERIFY)
            have = sl_verify_position(r.verify, &stream, &seq);
        size_t i = sl_ain_pick_next(firsts, done, n, have, stream, seq);
        done[i] = true;
        sl_ain *in = kept[i];
        kept[i] = NULL;
        if (!in) {
            char msg[600];
            in = sl_ain_open(paths[i], msg, sizeof msg);
            if (!in) {
                fprintf(err, "sluice: audit: %s\n", msg);
                rc = 2;
                goto out;
            }
        }
        if (r.follow && left == 1)
            sl_ain_follow(in, &stop_flag);
        int st = read_log(&r, in);
        sl_ain_close(in);
        if (st > rc)
            rc = st;
        if (st == 2 || (st == 1 && r.mode == M_VERIFY))
            goto out;
    }

    if (r.mode == M_VERIFY)
        verify_ok(&r);
    else if (r.dirty || !r.printed)
        print_report(&r);
    if (r.warnings > SHOWN_WARNINGS)
        fprintf(err, "sluice: audit: %llu lines in all were not log lines and were skipped\n", r.warnings);

out:
    if (handlers) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    fflush(out);
    for (size_t i = 0; kept && i < n; i++)
        sl_ain_close(kept[i]);
    free(kept);
    sl_report_free(r.report);
    sl_verify_free(r.verify);
    free(firsts);
    free(done);
    return rc;
}

int sl_cmd_audit(int argc, char **argv)
{
    return sl_audit_main(argc, argv, stdout, stderr);
}
