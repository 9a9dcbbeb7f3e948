/* sluice: the command line. Each command lives in its own place: run in
 * daemon/run.c, audit in audit/, the small tools in cmd/. */
#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "ca.h"
#include "cmd_lockfile.h"
#include "config.h"
#include "crypto.h"
#include "dns.h"
#include "health.h"
#include "run.h"
#include "session.h"

#define SLUICE_VERSION "0.1.0"

static const char usage[] =
    "usage: sluice COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  run      run the gate in the foreground\n"
    "  check    load config and allowlists, print the effective policy\n"
    "  allow-from-lockfile [-o FILE] [--format text|json] PATH...\n"
    "           print the allowlist a locked install of PATH's dependencies needs\n"
    "  audit [--summary|--denied|--suggest|--verify] [--json] [--follow] [--session NAME] LOG...\n"
    "           read decision logs ('-' is standard input; gzip'd logs too)\n"
    "  ca init DIR [--days N] [--permit HOST]...\n"
    "           make the inspection CA: DIR/ca.pem (0644) and DIR/ca.key (0600)\n"
    "  session new NAME [--dir DIR] [--allowlist FILE]... [--ttl DURATION] [-c CONFIG]\n"
    "           make a session: DIR/NAME.ini with a fresh token; prints its proxy URL\n"
    "           http://NAME:TOKEN@HOST:PORT, the token's only copy\n"
    "  health IP:PORT\n"
    "           exit 0 if the gate's admin endpoint answers /healthz with 200\n"
    "  version  print versions of sluice and its libraries\n"
    "\n"
    "options for run and check:\n"
    "  -c, --config FILE        INI config file\n"
    "      --listen ADDR:PORT   listen here (repeatable; replaces the config's)\n"
    "      --allowlist FILE     add an allowlist file (repeatable)\n"
    "      --allowlist-dir DIR  add every *.txt file in DIR (repeatable)\n"
    "      --allow HOST[:PORT]  add one allowlist entry (repeatable)\n"
    "      --allow-from-lockfile PATH  add what a locked install of PATH needs (repeatable)\n"
    "      --dns-server IP[:PORT]  DNS server (repeatable; replaces the config's)\n"
    "      --log FILE           decision log ('-' is standard output)\n"
    "      --workers N          worker threads (0: one per CPU)\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage or configuration error\n";

static void strv_push(sl_strv *s, const char *v)
{
    const char **n = realloc(s->v, (s->n + 1) * sizeof *n);
    if (!n) {
        perror("sluice");
        exit(1);
    }
    n[s->n++] = v;
    s->v = n;
}

static void strv_free(sl_strv *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static void options_free(sl_options *o)
{
    strv_free(&o->listen);
    strv_free(&o->allowlist);
    strv_free(&o->allowlist_dir);
    strv_free(&o->allow);
    strv_free(&o->dns_server);
    strv_free(&o->allow_from_lockfile);
}

/* Returns 0, or 2 on a usage error. */
static int parse_options(int argc, char **argv, sl_options *o)
{
    enum { O_LISTEN = 256, O_ALLOWLIST, O_ALLOWDIR, O_ALLOW, O_LOCKFILE, O_DNS, O_LOG, O_WORKERS };
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "listen", required_argument, NULL, O_LISTEN },
        { "allowlist", required_argument, NULL, O_ALLOWLIST },
        { "allow", required_argument, NULL, O_ALLOW },
        { "allowlist-dir", required_argument, NULL, O_ALLOWDIR },
        { "allow-from-lockfile", required_argument, NULL, O_LOCKFILE },
        { "dns-server", required_argument, NULL, O_DNS },
        { "log", required_argument, NULL, O_LOG },
        { "workers", required_argument, NULL, O_WORKERS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    memset(o, 0, sizeof *o);
    o->workers = -1;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': o->config = optarg; break;
        case O_LISTEN: strv_push(&o->listen, optarg); break;
        case O_ALLOWLIST: strv_push(&o->allowlist, optarg); break;
        case O_ALLOW: strv_push(&o->allow, optarg); break;
        case O_ALLOWDIR: strv_push(&o->allowlist_dir, optarg); break;
        case O_LOCKFILE: strv_push(&o->allow_from_lockfile, optarg); break;
        case O_DNS: strv_push(&o->dns_server, optarg); break;
        case O_LOG: o->log = optarg; break;
        case O_WORKERS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg < '0' || *optarg > '9' || *end || v > 64) {
                fprintf(stderr, "sluice: --workers: '%s' is not a number in 0..64\n", optarg);
                return 2;
            }
            o->workers = (int)v;
            break;
        }
        case 'h': fputs(usage, stdout); exit(0);
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

static sl_options g_opts;

static int cmd_check(void)
{
    sl_policy *p = sl_policy_load(&g_opts, sl_report_stderr, NULL);
    if (!p)
        return 2;
    sl_policy_print(p, stdout);
    sl_policy_warnings(p, sl_report_stderr, NULL);
    sl_policy_unref(p);
    return 0;
}

static int cmd_version(void)
{
    printf("sluice %s\nlibevent %s\nc-ares %s\nmbedtls %s\n", SLUICE_VERSION, event_get_version(),
           sl_dns_version(), sl_crypto_version());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version"))
        return cmd_version();
    if (!strcmp(cmd, "ca"))
        return sl_cmd_ca(argc - 1, argv + 1);
    if (!strcmp(cmd, "health"))
        return sl_cmd_health(argc - 1, argv + 1);
    if (!strcmp(cmd, "session"))
        return sl_cmd_session(argc - 1, argv + 1);
    if (!strcmp(cmd, "audit"))
        return sl_cmd_audit(argc - 1, argv + 1);
    if (!strcmp(cmd, "allow-from-lockfile"))
        return sl_cmd_allow_from_lockfile(argc - 1, argv + 1);
    if (strcmp(cmd, "run") && strcmp(cmd, "check")) {
        fprintf(stderr, "sluice: unknown command '%s'\n\n%s", cmd, usage);
        return 2;
    }
    int rc = parse_options(argc - 1, argv + 1, &g_opts);
    if (rc == 0)
        rc = !strcmp(cmd, "run") ? sl_cmd_run(&g_opts) : cmd_check();
    options_free(&g_opts);
    return rc;
}
