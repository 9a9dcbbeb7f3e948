/* The config loader: defaults, the INI file, command-line options, their
 * precedence, every error with its FILE:LINE, and `sluice check`'s printout.
 * Table-driven. Every case writes its files into a directory of its own under
 * one mkdtemp directory, removed at the end.
 *
 * Cases named "BUG ..." are regressions: bugs the first version of the
 * loader had (each comment says which), asserted fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* ---- scaffolding: a temp tree, files, collected reports ---- */

static char g_root[256];       /* the mkdtemp directory */
static int g_ncase;            /* cases so far: each gets g_root/cNNN */

#define MAX_REPORTS 64
static struct {
    int n;
    char msg[MAX_REPORTS][2048];
    bool used[MAX_REPORTS];
} R;

static void collect(void *ctx, const char *msg)
{
    (void)ctx;
    if (R.n < MAX_REPORTS)
        snprintf(R.msg[R.n], sizeof R.msg[R.n], "%s", msg);
    R.n++;
}

/* The table row being run, named when something fails. */
static char g_label[256];

static void dump_reports(void)
{
    if (g_label[0])
        print_message("  case: %s\n", g_label);
    print_message("  %d report(s):\n", R.n);
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        print_message("    [%d] %s\n", i, R.msg[i]);
}

/* A fresh directory for one case; its path into dir. */
static void new_case_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/c%03d", g_root, ++g_ncase);
    assert_int_equal(mkdir(dir, 0700), 0);
}

static void put_bytes(const char *dir, const char *name, const char *data, size_t len, char *path,
                      size_t cap)
{
    char buf[PATH_MAX];
    if (!path) {
        path = buf;
        cap = sizeof buf;
    }
    snprintf(path, cap, "%s/%s", dir, name);
    /* make the parent directory of "sub/file" */
    char *slash = strrchr(path, '/');
    if (slash > path + strlen(dir)) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void put(const char *dir, const char *name, const char *text, char *path, size_t cap)
{
    put_bytes(dir, name, text, strlen(text), path, cap);
}

static sl_options no_opts(void)
{
    return (sl_options){ .workers = -1 };
}

static const char *k_cli_dns[] = { "192.0.2.53" };

static sl_policy *load(const sl_options *o)
{
    memset(&R, 0, sizeof R);
    return sl_policy_load(o, collect, NULL);
}

/* Write `ini` as DIR/sluice.ini (path into cfg) and load it with `o`. */
static sl_policy *load_ini(const char *dir, const char *ini, size_t len, sl_options *o, char *cfg,
                           size_t cap)
{
    put_bytes(dir, "sluice.ini", ini, len, cfg, cap);
    o->config = cfg;
    return load(o);
}

/* A string literal and its length, for load_ini. */
#define INI(lit) lit, sizeof lit - 1

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Consume one report that is exactly "FILE:LINE: ...FRAG..." (or
 * "FILE: ...FRAG..." for line 0); false (and a note) if there is none. */
static bool find_report(const char *file, int line, const char *frag)
{
    char prefix[PATH_MAX + 32];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", file, line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", file);
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++) {
        if (!R.used[i] && starts_with(R.msg[i], prefix) &&
            strstr(R.msg[i] + strlen(prefix), frag)) {
            R.used[i] = true;
            return true;
        }
    }
    print_message("  missing report \"%s...%s...\"\n", prefix, frag);
    return false;
}

static void expect_report(const char *file, int line, const char *frag)
{
    if (!find_report(file, line, frag)) {
        dump_reports();
        fail_msg("missing report");
    }
}

static void expect_nreports(int n)
{
    if (R.n != n) {
        dump_reports();
        fail_msg("expected %d report(s), got %d", n, R.n);
    }
}

static bool any_report_contains(const char *frag)
{
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        if (strstr(R.msg[i], frag))
            return true;
    return false;
}

static const char *addr_str(const sl_addr *a, char *buf, size_t cap)
{
    return sl_addr_format(a, buf, cap);
}

static void assert_listen(const sl_listen *l, const char *addr, int port, const char *where)
{
    char a[SL_ADDR_STRLEN];
    assert_string_equal(addr_str(&l->addr, a, sizeof a), addr);
    assert_int_equal(l->port, port);
    assert_string_equal(l->where, where);
}

static void assert_dns(const sl_dns_server *d, const char *addr, int port)
{
    char a[SL_ADDR_STRLEN];
    assert_string_equal(addr_str(&d->addr, a, sizeof a), addr);
    assert_int_equal(d->port, port);
}

static void assert_entry(const sl_policy *p, size_t i, const char *text, const char *file, int line)
{
    char buf[300];
    assert_true(i < sl_allowlist_count(p->allow));
    const sl_entry *e = sl_allowlist_entry(p->allow, i);
    assert_string_equal(sl_entry_format(e, buf, sizeof buf), text);
    assert_string_equal(e->file, file);
    assert_int_equal(e->line, line);
}

static void assert_ports(const sl_ports *p, const uint16_t *v, size_t n)
{
    assert_int_equal(p->n, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(p->v[i], v[i]);
}

static void assert_cidr(const sl_cidr *c, const char *text)
{
    char buf[64];
    assert_string_equal(sl_cidr_format(c, buf, sizeof buf), text);
}

static int cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

static void assert_builtin_defaults_except_dns_and_listen(const sl_policy *p)
{
    assert_int_equal(p->workers, cpus());
    assert_true(p->workers >= 1);
    assert_int_equal(p->max_clients, 4096);
    assert_int_equal(p->shutdown_grace_ms, 10000);
    assert_int_equal(p->exit_idle_s, 0);
    assert_int_equal(sl_allowlist_count(p->allow), 0);
    assert_int_equal(p->nallowlist_files, 0);
    assert_ports(&p->connect_ports, (const uint16_t[]){ 443 }, 1);
    assert_ports(&p->http_ports, (const uint16_t[]){ 80 }, 1);
    assert_int_equal(p->nallow_cidr, 0);
    assert_int_equal(p->ndeny_cidr, 0);
    assert_true(p->sni_check);
    assert_int_equal(p->dns_timeout_ms, 2000);
    assert_int_equal(p->min_ttl_s, 5);
    assert_int_equal(p->max_ttl_s, 300);
    assert_int_equal(p->header_ms, 10000);
    assert_int_equal(p->connect_ms, 10000);
    assert_int_equal(p->idle_ms, 300000);
    assert_string_equal(p->log_path, "-");
    assert_null(p->admin_listen);
}

/* ---- defaults ---- */

static void test_defaults_no_config(void **state)
{
    (void)state;
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load(&o);
    if (!p)
        dump_reports();
    assert_non_null(p);
    expect_nreports(0);
    assert_null(p->config_path);
    assert_int_equal(p->nlisten, 1);
    assert_listen(&p->listen[0], "127.0.0.1", 3128, "default");
    assert_int_equal(p->ndns, 1);
    assert_dns(&p->dns[0], "192.0.2.53", 53);
    assert_false(p->dns_from_resolv_conf);
    assert_builtin_defaults_except_dns_and_listen(p);
    assert_true(p->generation > 0);
    sl_policy_unref(p);
}

/* With nothing at all the DNS servers come from /etc/resolv.conf, whose
 * content depends on the machine: either some were found, or exactly the
 * "no DNS server" error was reported. */
static void test_defaults_nothing_given(void **state)
{
    (void)state;
    sl_options o = no_opts();
    sl_policy *p = load(&o);
    if (p) {
        expect_nreports(0);
        assert_true(p->ndns >= 1);
        assert_true(p->ndns <= SL_MAX_DNS);
        assert_true(p->dns_from_resolv_conf);
        for (size_t i = 0; i < p->ndns; i++)
            assert_int_equal(p->dns[i].port, 53);
        assert_int_equal(p->nlisten, 1);
        assert_listen(&p->listen[0], "127.0.0.1", 3128, "default");
        assert_builtin_defaults_except_dns_and_listen(p);
        sl_policy_unref(p);
    } else {
        expect_nreports(1);
        assert_non_null(strstr(R.msg[0], "no DNS server"));
    }
}

/* An empty file and a file of comments only are the defaults too. */
static void test_defaults_empty_config(void **state)
{
    (void)state;
    static const char *texts[] = { "", "\n\n", "# only\n; comments\n\n   # indented\n" };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char dir[PATH_MAX], cfg[PATH_MAX];
        new_case_dir(dir, sizeof dir);
        sl_options o = no_opts();
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
        sl_policy *p = load_ini(dir, texts[i], strlen(texts[i]), &o, cfg, sizeof cfg);
        if (!p)
            dump_reports();
        assert_non_null(p);
        assert_string_equal(p->config_path, cfg);
        assert_int_equal(p->nlisten, 1);
        assert_listen(&p->listen[0], "127.0.0.1", 3128, "default");
        assert_builtin_defaults_except_dns_and_listen(p);
        sl_policy_unref(p);
    }
}

/* ---- every key ---- */

static const char all_keys_ini[] =
    "# sluice test config\n"                       /* 1 */
    "; a semicolon comment\n"                      /* 2 */
    "[proxy]\n"                                    /* 3 */
    "listen = 127.0.0.1:0\n"                       /* 4 */
    "listen = [::1]:8080 ; an inline comment\n"    /* 5 */
    "workers = 3\n"                                /* 6 */
    "max_clients = 17\n"                           /* 7 */
    "shutdown_grace_ms = 250\n"                    /* 8 */
    "exit_idle_s = 9\n"                            /* 9 */
    "\n"                                           /* 10 */
    "[policy]\n"                                   /* 11 */
    "allowlist = lists/a.txt\n"                    /* 12 */
    "allowlist = b.txt   ; relative to the config\n" /* 13 */
    "allow = example.org:8443\n"                   /* 14 */
    "allow = *.example.net\n"                      /* 15 */
    "connect_ports = 443, 8443 563\n"              /* 16 */
    "http_ports = 80,8080\n"                       /* 17 */
    "allow_cidr = 10.20.0.5/32\n"                  /* 18 */
    "allow_cidr = 2001:db8::/32\n"                 /* 19 */
    "deny_cidr = 192.0.2.0/24\n"                   /* 20 */
    "deny_cidr = 8.8.8.8\n"                        /* 21 */
    "sni_check = no\n"                             /* 22 */
    "[dns]\n"                                      /* 23 */
    "server = 127.0.0.53:53\n"                     /* 24 */
    "server = [2001:db8::53]:5353\n"               /* 25 */
    "server = 192.0.2.10\n"                        /* 26 */
    "timeout_ms = 1500\n"                          /* 27 */
    "min_ttl_s = 1\n"                              /* 28 */
    "max_ttl_s = 60\n"                             /* 29 */
    "[timeouts]\n"                                 /* 30 */
    "header_ms = 111\n"                            /* 31 */
    "connect_ms = 222\n"                           /* 32 */
    "idle_ms = 333\n"                              /* 33 */
    "[log]\n"                                      /* 34 */
    "path = logs/decisions.log\n"                  /* 35 */
    "[admin]\n"                                    /* 36 */
    "listen = 127.0.0.1:9090\n";                   /* 37 */

static sl_policy *load_all_keys(char *dir, size_t dcap, char *cfg, size_t ccap)
{
    new_case_dir(dir, dcap);
    put(dir, "lists/a.txt", "a.example\n# comment\n\n*.b.example:8443\n", NULL, 0);
    put(dir, "b.txt", "[2001:db8::7]:443\n", NULL, 0);
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, all_keys_ini, strlen(all_keys_ini), &o, cfg, ccap);
    if (!p)
        dump_reports();
    assert_non_null(p);
    expect_nreports(0);
    return p;
}

static void test_every_key(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 32];
    sl_policy *p = load_all_keys(dir, sizeof dir, cfg, sizeof cfg);

    assert_string_equal(p->config_path, cfg);
    /* [proxy] */
    assert_int_equal(p->nlisten, 2);
    snprintf(want, sizeof want, "%s:4", cfg);
    assert_listen(&p->listen[0], "127.0.0.1", 0, want);
    snprintf(want, sizeof want, "%s:5", cfg);
    assert_listen(&p->listen[1], "::1", 8080, want);
    assert_int_equal(p->listen[1].addr.family, AF_INET6);
    assert_int_equal(p->workers, 3);
    assert_int_equal(p->max_clients, 17);
    assert_int_equal(p->shutdown_grace_ms, 250);
    assert_int_equal(p->exit_idle_s, 9);
    /* [policy]: files in key order, each file's entries in line order, then
     * the inline entries */
    assert_int_equal(p->nallowlist_files, 2);
    char a_txt[PATH_MAX + 16], b_txt[PATH_MAX + 16];
    snprintf(a_txt, sizeof a_txt, "%s/lists/a.txt", dir);
    snprintf(b_txt, sizeof b_txt, "%s/b.txt", dir);
    assert_string_equal(p->allowlist_files[0], a_txt);
    assert_string_equal(p->allowlist_files[1], b_txt);
    assert_int_equal(sl_allowlist_count(p->allow), 5);
    assert_entry(p, 0, "a.example", a_txt, 1);
    assert_entry(p, 1, "*.b.example:8443", a_txt, 4);
    assert_entry(p, 2, "[2001:db8::7]:443", b_txt, 1);
    assert_entry(p, 3, "example.org:8443", cfg, 14);
    assert_entry(p, 4, "*.example.net", cfg, 15);
    assert_ports(&p->connect_ports, (const uint16_t[]){ 443, 8443, 563 }, 3);
    assert_ports(&p->http_ports, (const uint16_t[]){ 80, 8080 }, 2);
    assert_int_equal(p->nallow_cidr, 2);
    assert_cidr(&p->allow_cidr[0], "10.20.0.5/32");
    assert_cidr(&p->allow_cidr[1], "2001:db8::/32");
    assert_int_equal(p->ndeny_cidr, 2);
    assert_cidr(&p->deny_cidr[0], "192.0.2.0/24");
    assert_cidr(&p->deny_cidr[1], "8.8.8.8/32");
    assert_false(p->sni_check);
    /* [dns] */
    assert_int_equal(p->ndns, 3);
    assert_dns(&p->dns[0], "127.0.0.53", 53);
    assert_dns(&p->dns[1], "2001:db8::53", 5353);
    assert_dns(&p->dns[2], "192.0.2.10", 53);
    assert_false(p->dns_from_resolv_conf);
    assert_int_equal(p->dns_timeout_ms, 1500);
    assert_int_equal(p->min_ttl_s, 1);
    assert_int_equal(p->max_ttl_s, 60);
    /* [timeouts] */
    assert_int_equal(p->header_ms, 111);
    assert_int_equal(p->connect_ms, 222);
    assert_int_equal(p->idle_ms, 333);
    /* [log], relative to the config file's directory */
    snprintf(want, sizeof want, "%s/logs/decisions.log", dir);
    assert_string_equal(p->log_path, want);
    /* [admin] */
    assert_string_equal(p->admin_listen, "127.0.0.1:9090");
    sl_policy_unref(p);
}

/* The SPEC's own example config, verbatim (its comments, its '…'). */
static void test_spec_example(void **state)
{
    (void)state;
    static const char ini[] =
        "[proxy]\n"
        "listen = 127.0.0.1:3128          ; \xe2\x80\xa6  also [::1]:3128\n"
        "workers = 0                      ; 0 = one per CPU\n"
        "max_clients = 4096\n"
        "shutdown_grace_ms = 10000\n"
        "exit_idle_s = 0                  ; >0: exit 0 after this long with no client "
        "(per-session gates reap themselves)\n"
        "\n"
        "[policy]\n"
        "allowlist = allowlist.txt        ; \xe2\x80\xa6\n"
        "allow = example.org:8443         ; \xe2\x80\xa6  inline allowlist entry\n"
        "connect_ports = 443              ; ports a bare entry permits for CONNECT\n"
        "http_ports = 80                  ; ports a bare entry permits for plain HTTP\n"
        "allow_cidr = 10.20.0.5/32        ; \xe2\x80\xa6  exceptions to the non-public rule (a private mirror)\n"
        "deny_cidr = 192.0.2.0/24         ; \xe2\x80\xa6  extra denials on top of the built-in ones\n"
        "sni_check = yes                  ; CONNECT tunnels: ClientHello SNI must equal the CONNECT host\n"
        "\n"
        "[dns]\n"
        "server = 127.0.0.53:53           ; \xe2\x80\xa6  default: nameservers of /etc/resolv.conf\n"
        "timeout_ms = 2000\n"
        "min_ttl_s = 5                    ; answers are pinned at least this long\n"
        "max_ttl_s = 300\n"
        "\n"
        "[timeouts]\n"
        "header_ms = 10000                ; whole request head must arrive by then\n"
        "connect_ms = 10000\n"
        "idle_ms = 300000                 ; a tunnel with no bytes either way for this long is closed\n"
        "\n"
        "[log]\n"
        "path = -                         ; '-' is standard output\n"
        "\n"
        "[admin]\n"
        "listen =                         ; off by default; e.g. 127.0.0.1:9090 for /healthz, /metrics, /pins\n";
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 32];
    new_case_dir(dir, sizeof dir);
    put(dir, "allowlist.txt",
        "registry.npmjs.org          # this host, on connect_ports (CONNECT) and http_ports (HTTP)\n"
        "*.githubusercontent.com     # any subdomain, not the apex\n"
        ".crates.io                  # the apex and any subdomain\n"
        "example.com:8443            # this host, this port only\n"
        "203.0.113.7:443             # an IP literal; still subject to the non-public rule\n"
        "[2001:db8::7]:443           # an IPv6 literal, in brackets\n",
        NULL, 0);
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    expect_nreports(0);
    snprintf(want, sizeof want, "%s:2", cfg);
    assert_int_equal(p->nlisten, 1);
    assert_listen(&p->listen[0], "127.0.0.1", 3128, want);
    assert_int_equal(p->workers, cpus());
    assert_int_equal(sl_allowlist_count(p->allow), 7);
    assert_entry(p, 6, "example.org:8443", cfg, 10);
    assert_int_equal(p->ndns, 1);
    assert_dns(&p->dns[0], "127.0.0.53", 53);
    assert_string_equal(p->log_path, "-");
    assert_null(p->admin_listen);
    sl_policy_unref(p);
}

/* ---- every key: valid values, repeats ---- */

typedef struct key_case {
    const char *section, *key, *value;
    bool repeat;            /* marked "…" in the SPEC */
} key_case;

static const key_case key_cases[] = {
    { "proxy", "listen", "127.0.0.1:3128", true },
    { "proxy", "workers", "2", false },
    { "proxy", "max_clients", "10", false },
    { "proxy", "shutdown_grace_ms", "1", false },
    { "proxy", "exit_idle_s", "1", false },
    { "policy", "allowlist", "allow.txt", true },
    { "policy", "allow", "example.org", true },
    { "policy", "connect_ports", "443", false },
    { "policy", "http_ports", "80", false },
    { "policy", "allow_cidr", "10.0.0.0/8", true },
    { "policy", "deny_cidr", "192.0.2.0/24", true },
    { "policy", "sni_check", "yes", false },
    { "dns", "server", "192.0.2.53", true },
    { "dns", "timeout_ms", "100", false },
    { "dns", "min_ttl_s", "1", false },
    { "dns", "max_ttl_s", "100", false },
    { "timeouts", "header_ms", "5", false },
    { "timeouts", "connect_ms", "5", false },
    { "timeouts", "idle_ms", "5", false },
    { "log", "path", "x.log", false },
    { "admin", "listen", "127.0.0.1:9090", false },
};

static void test_key_once_and_twice(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof key_cases / sizeof *key_cases; i++) {
        const key_case *k = &key_cases[i];
        for (int times = 1; times <= 3; times++) {
            char dir[PATH_MAX], cfg[PATH_MAX], ini[512], frag[128];
            new_case_dir(dir, sizeof dir);
            put(dir, "allow.txt", "listed.example\n", NULL, 0);
            int n = snprintf(ini, sizeof ini, "[%s]\n", k->section);
            for (int t = 0; t < times; t++)
                n += snprintf(ini + n, sizeof ini - (size_t)n, "%s = %s\n", k->key, k->value);
            sl_options o = no_opts();
            o.dns_server = (sl_strv){ k_cli_dns, 1 };
            snprintf(g_label, sizeof g_label, "[%s] %s x%d", k->section, k->key, times);
            sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
            if (times == 1 || k->repeat) {
                if (!p)
                    dump_reports();
                assert_non_null(p);
                expect_nreports(0);
                sl_policy_unref(p);
            } else {
                assert_null(p);
                snprintf(frag, sizeof frag, "'%s' given twice in [%s]", k->key, k->section);
                expect_report(cfg, 3, frag);
                if (times == 3)
                    expect_report(cfg, 4, frag);
                expect_nreports(times - 1);
            }
        }
    }
    g_label[0] = '\0';
}

/* Repeated keys accumulate, across sections opened again too. */
static void test_repeated_keys_accumulate(void **state)
{
    (void)state;
    static const char ini[] =
        "[proxy]\n"                    /* 1 */
        "listen = 127.0.0.1:1001\n"    /* 2 */
        "listen = 127.0.0.1:1002\n"    /* 3 */
        "[policy]\n"                   /* 4 */
        "allowlist = one.txt\n"        /* 5 */
        "allow = a.example\n"          /* 6 */
        "allow_cidr = 10.0.0.0/8\n"    /* 7 */
        "deny_cidr = 192.0.2.0/24\n"   /* 8 */
        "[dns]\n"                      /* 9 */
        "server = 192.0.2.1\n"         /* 10 */
        "[proxy]\n"                    /* 11 */
        "listen = [::1]:1003\n"        /* 12 */
        "[policy]\n"                   /* 13 */
        "allowlist = two.txt\n"        /* 14 */
        "allow = b.example:81\n"       /* 15 */
        "allow_cidr = 172.16.0.0/12\n" /* 16 */
        "deny_cidr = 198.51.100.0/24\n" /* 17 */
        "deny_cidr = 2001:db8::/32\n"  /* 18 */
        "[dns]\n"                      /* 19 */
        "server = 192.0.2.2:5353\n";   /* 20 */
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 32], one[PATH_MAX + 16],
        two[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    put(dir, "one.txt", "one.example\n", one, sizeof one);
    put(dir, "two.txt", "\ntwo.example\n", two, sizeof two);
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(p->nlisten, 3);
    snprintf(want, sizeof want, "%s:2", cfg);
    assert_listen(&p->listen[0], "127.0.0.1", 1001, want);
    snprintf(want, sizeof want, "%s:3", cfg);
    assert_listen(&p->listen[1], "127.0.0.1", 1002, want);
    snprintf(want, sizeof want, "%s:12", cfg);
    assert_listen(&p->listen[2], "::1", 1003, want);
    assert_int_equal(p->nallowlist_files, 2);
    assert_string_equal(p->allowlist_files[0], one);
    assert_string_equal(p->allowlist_files[1], two);
    assert_int_equal(sl_allowlist_count(p->allow), 4);
    assert_entry(p, 0, "one.example", one, 1);
    assert_entry(p, 1, "a.example", cfg, 6);
    assert_entry(p, 2, "two.example", two, 2);
    assert_entry(p, 3, "b.example:81", cfg, 15);
    assert_int_equal(p->nallow_cidr, 2);
    assert_cidr(&p->allow_cidr[0], "10.0.0.0/8");
    assert_cidr(&p->allow_cidr[1], "172.16.0.0/12");
    assert_int_equal(p->ndeny_cidr, 3);
    assert_cidr(&p->deny_cidr[0], "192.0.2.0/24");
    assert_cidr(&p->deny_cidr[1], "198.51.100.0/24");
    assert_cidr(&p->deny_cidr[2], "2001:db8::/32");
    assert_int_equal(p->ndns, 2);
    assert_dns(&p->dns[0], "192.0.2.1", 53);
    assert_dns(&p->dns[1], "192.0.2.2", 5353);
    sl_policy_unref(p);
}

/* 16 listen addresses and 8 DNS servers are the most; one more is an error
 * on its line. */
static void test_list_limits(void **state)
{
    (void)state;
    for (int extra = 0; extra <= 1; extra++) {
        char dir[PATH_MAX], cfg[PATH_MAX], ini[2048];
        new_case_dir(dir, sizeof dir);
        int n = snprintf(ini, sizeof ini, "[proxy]\n");
        for (int i = 0; i < SL_MAX_LISTEN + extra; i++)
            n += snprintf(ini + n, sizeof ini - (size_t)n, "listen = 127.0.0.1:%d\n", 2000 + i);
        n += snprintf(ini + n, sizeof ini - (size_t)n, "[dns]\n");
        for (int i = 0; i < SL_MAX_DNS + extra; i++)
            n += snprintf(ini + n, sizeof ini - (size_t)n, "server = 192.0.2.%d\n", 1 + i);
        sl_options o = no_opts();
        sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
        if (!extra) {
            if (!p)
                dump_reports();
            assert_non_null(p);
            assert_int_equal(p->nlisten, SL_MAX_LISTEN);
            assert_int_equal(p->ndns, SL_MAX_DNS);
            assert_int_equal(p->listen[SL_MAX_LISTEN - 1].port, 2000 + SL_MAX_LISTEN - 1);
            sl_policy_unref(p);
        } else {
            assert_null(p);
            int listen_line = 1 + SL_MAX_LISTEN + 1;
            int dns_line = listen_line + 1 + SL_MAX_DNS + 1;
            expect_report(cfg, listen_line, "too many listen addresses");
            expect_report(cfg, dns_line, "too many DNS servers");
            expect_nreports(2);
        }
    }
}

static void test_bools(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool v;
    } cases[] = {
        { "yes", true }, { "YES", true }, { "true", true }, { "True", true }, { "on", true },
        { "1", true }, { "no", false }, { "No", false }, { "false", false }, { "FALSE", false },
        { "off", false }, { "0", false }, { "no ; inline comment", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[PATH_MAX], cfg[PATH_MAX], ini[128];
        new_case_dir(dir, sizeof dir);
        snprintf(ini, sizeof ini, "[policy]\nsni_check = %s\n", cases[i].text);
        sl_options o = no_opts();
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
        snprintf(g_label, sizeof g_label, "sni_check = %s", cases[i].text);
        sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
        if (!p)
            dump_reports();
        assert_non_null(p);
        if (p->sni_check != cases[i].v)
            fail_msg("%s: got %d", g_label, p->sni_check);
        sl_policy_unref(p);
    }
    g_label[0] = '\0';
}

/* ---- numbers: bounds, both sides ---- */

typedef struct num_case {
    const char *section, *key, *value;
    size_t field;        /* offsetof(sl_policy, ...) */
    bool ok;
    int want;            /* when ok */
    const char *pre;     /* a line before, in the same section, or NULL */
} num_case;

#define F(x) offsetof(sl_policy, x)
static const num_case num_cases[] = {
    { "proxy", "workers", "1", F(workers), true, 1, NULL },
    { "proxy", "workers", "64", F(workers), true, 64, NULL },
    { "proxy", "workers", "65", F(workers), false, 0, NULL },
    { "proxy", "workers", "-1", F(workers), false, 0, NULL },
    { "proxy", "max_clients", "1", F(max_clients), true, 1, NULL },
    { "proxy", "max_clients", "1000000", F(max_clients), true, 1000000, NULL },
    { "proxy", "max_clients", "0", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "1000001", F(max_clients), false, 0, NULL },
    { "proxy", "shutdown_grace_ms", "0", F(shutdown_grace_ms), true, 0, NULL },
    { "proxy", "shutdown_grace_ms", "3600000", F(shutdown_grace_ms), true, 3600000, NULL },
    { "proxy", "shutdown_grace_ms", "3600001", F(shutdown_grace_ms), false, 0, NULL },
    { "proxy", "exit_idle_s", "0", F(exit_idle_s), true, 0, NULL },
    { "proxy", "exit_idle_s", "31536000", F(exit_idle_s), true, 31536000, NULL },
    { "proxy", "exit_idle_s", "31536001", F(exit_idle_s), false, 0, NULL },
    { "dns", "timeout_ms", "1", F(dns_timeout_ms), true, 1, NULL },
    { "dns", "timeout_ms", "600000", F(dns_timeout_ms), true, 600000, NULL },
    { "dns", "timeout_ms", "0", F(dns_timeout_ms), false, 0, NULL },
    { "dns", "timeout_ms", "600001", F(dns_timeout_ms), false, 0, NULL },
    { "dns", "min_ttl_s", "0", F(min_ttl_s), true, 0, NULL },
    { "dns", "min_ttl_s", "300", F(min_ttl_s), true, 300, NULL },
    { "dns", "min_ttl_s", "86400", F(min_ttl_s), true, 86400, "max_ttl_s = 86400" },
    { "dns", "min_ttl_s", "86401", F(min_ttl_s), false, 0, NULL },
    { "dns", "max_ttl_s", "0", F(max_ttl_s), true, 0, "min_ttl_s = 0" },
    { "dns", "max_ttl_s", "5", F(max_ttl_s), true, 5, NULL },
    { "dns", "max_ttl_s", "86400", F(max_ttl_s), true, 86400, NULL },
    { "dns", "max_ttl_s", "86401", F(max_ttl_s), false, 0, NULL },
    { "timeouts", "header_ms", "1", F(header_ms), true, 1, NULL },
    { "timeouts", "header_ms", "3600000", F(header_ms), true, 3600000, NULL },
    { "timeouts", "header_ms", "0", F(header_ms), false, 0, NULL },
    { "timeouts", "header_ms", "3600001", F(header_ms), false, 0, NULL },
    { "timeouts", "connect_ms", "1", F(connect_ms), true, 1, NULL },
    { "timeouts", "connect_ms", "3600000", F(connect_ms), true, 3600000, NULL },
    { "timeouts", "connect_ms", "0", F(connect_ms), false, 0, NULL },
    { "timeouts", "connect_ms", "3600001", F(connect_ms), false, 0, NULL },
    { "timeouts", "idle_ms", "1", F(idle_ms), true, 1, NULL },
    { "timeouts", "idle_ms", "86400000", F(idle_ms), true, 86400000, NULL },
    { "timeouts", "idle_ms", "0", F(idle_ms), false, 0, NULL },
    { "timeouts", "idle_ms", "86400001", F(idle_ms), false, 0, NULL },
    /* not a whole decimal number */
    { "proxy", "max_clients", "", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "+5", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "5.0", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "1e3", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "0x10", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "10 clients", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "ten", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "99999999999999999999", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "10 # '#' is no inline comment", F(max_clients), false, 0, NULL },
    { "proxy", "max_clients", "10;20", F(max_clients), false, 0, NULL }, /* ';' needs a space */
    { "timeouts", "idle_ms", "-0", F(idle_ms), false, 0, NULL },
    /* inline comments (' ;') are stripped, whitespace too */
    { "proxy", "max_clients", "12 ; twelve", F(max_clients), true, 12, NULL },
    { "proxy", "max_clients", "13\t; tab, then comment", F(max_clients), true, 13, NULL },
    { "proxy", "max_clients", "  14   ", F(max_clients), true, 14, NULL },
};
#undef F

static void test_numbers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof num_cases / sizeof *num_cases; i++) {
        const num_case *c = &num_cases[i];
        char dir[PATH_MAX], cfg[PATH_MAX], ini[256], frag[160];
        new_case_dir(dir, sizeof dir);
        snprintf(ini, sizeof ini, "[%s]\n%s%s%s = %s\n", c->section, c->pre ? c->pre : "",
                 c->pre ? "\n" : "", c->key, c->value);
        sl_options o = no_opts();
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
        snprintf(g_label, sizeof g_label, "[%s] %s = %s", c->section, c->key, c->value);
        sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
        if (c->ok) {
            if (!p)
                dump_reports();
            assert_non_null(p);
            int got = *(const int *)((const char *)p + c->field);
            if (got != c->want)
                fail_msg("%s: got %d, want %d", g_label, got, c->want);
            sl_policy_unref(p);
        } else {
            assert_null(p);
            snprintf(frag, sizeof frag, "%s: '", c->key);
            expect_report(cfg, c->pre ? 3 : 2, frag);
            expect_nreports(1);
        }
    }
    g_label[0] = '\0';
}

/* workers = 0 means one per CPU: resolved, never left at 0. */
static void test_workers_zero_resolved(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, INI("[proxy]\nworkers = 0\n"), &o, cfg, sizeof cfg);
    assert_non_null(p);
    assert_int_equal(p->workers, cpus());
    assert_true(p->workers >= 1 && p->workers <= 64);
    sl_policy_unref(p);
}

/* ---- errors, with their FILE:LINE ---- */

typedef struct xerr {
    int line;            /* 0: "FILE: message" */
    const char *frag;    /* in the message */
    const char *file;    /* NULL: the config file; else relative to the case dir */
} xerr;

typedef struct err_case {
    const char *name;
    const char *ini;
    const char *aux_name, *aux_text; /* one more file in the case directory */
    bool cfg_dns;        /* the ini sets [dns] server: no --dns-server */
    int nerr;            /* exactly this many reports */
    xerr want[16];   /* nerr of them */
} err_case;

static const char many_errors_ini[] =
    "stray = 1\n"                       /* 1: outside any section */
    "[proxy]\n"                         /* 2 */
    "listen = localhost:3128\n"         /* 3: host name */
    "workers = 65\n"                    /* 4: out of range */
    "workers = 2\n"                     /* 5: twice */
    "colour = blue\n"                   /* 6: unknown key */
    "[policy]\n"                        /* 7 */
    "sni_check = maybe\n"               /* 8: bad bool */
    "allow_cidr = 10.0.0.1/8\n"         /* 9: host bits */
    "deny_cidr = 10.0.0.0/33\n"         /* 10: prefix */
    "connect_ports = 443,,8443\n"       /* 11: ports */
    "allow = *.com\n"                   /* 12: public suffix */
    "allowlist = list.txt\n"            /* 13: list.txt:2 */
    "[extra]\n"                         /* 14: unknown section */
    "key = value\n"                     /* 15: (in it: not reported again) */
    "[timeouts]\n"                      /* 16 */
    "idle_ms = 0\n"                     /* 17: out of range */
    "this line has no equals sign\n";   /* 18: syntax */
/* 14 errors in all */

static const err_case err_cases[] = {
    /* unknown keys: in each section, and a key of another section */
    { "unknown key", "[proxy]\nlisten = 127.0.0.1:3128\nbogus = 1\n", NULL, NULL, false, 1,
      { { 3, "unknown key 'bogus' in [proxy]", NULL } } },
    { "unknown key policy", "[policy]\nallow_host = example.org\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'allow_host' in [policy]", NULL } } },
    { "unknown key dns", "[dns]\n\nport = 53\n", NULL, NULL, false, 1,
      { { 3, "unknown key 'port' in [dns]", NULL } } },
    { "unknown key timeouts", "[timeouts]\nread_ms = 1\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'read_ms' in [timeouts]", NULL } } },
    { "unknown key log", "[log]\nlevel = debug\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'level' in [log]", NULL } } },
    { "unknown key admin", "[admin]\nport = 9090\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'port' in [admin]", NULL } } },
    { "key of another section", "[proxy]\nallowlist = a.txt\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'allowlist' in [proxy]", NULL } } },
    { "key names are case-sensitive", "[proxy]\nListen = 127.0.0.1:3128\n", NULL, NULL, false, 1,
      { { 2, "unknown key 'Listen'", NULL } } },
    /* unknown sections: with keys (reported once), empty, at the end */
    { "unknown section", "[proxy]\nworkers = 1\n[bogus]\nkey = 1\nother = 2\n", NULL, NULL, false,
      1, { { 3, "unknown section [bogus]", NULL } } },
    { "empty unknown section", "[proxy]\nworkers = 1\n\n[nothing]\n", NULL, NULL, false, 1,
      { { 4, "unknown section [nothing]", NULL } } },
    { "empty unknown section first", "[nothing]\n[proxy]\nworkers = 2\n", NULL, NULL, false, 1,
      { { 1, "unknown section [nothing]", NULL } } },
    { "empty unknown section, no newline", "[proxy]\n[nothing]", NULL, NULL, false, 1,
      { { 2, "unknown section [nothing]", NULL } } },
    { "section names are case-sensitive", "[Proxy]\n", NULL, NULL, false, 1,
      { { 1, "unknown section [Proxy]", NULL } } },
    { "unknown section, indented, with comment", "  [bogus]   ; comment\n", NULL, NULL, false,
      1, { { 1, "unknown section [bogus]", NULL } } },
    /* keys outside any section */
    { "key outside a section", "workers = 2\n[proxy]\n", NULL, NULL, false, 1,
      { { 1, "'workers' is outside any section", NULL } } },
    { "key outside a section after comments", "# c\n\nlisten = 127.0.0.1:1\n", NULL, NULL, false,
      1, { { 3, "'listen' is outside any section", NULL } } },
    /* twice: in a section opened again */
    { "twice across reopened section", "[dns]\ntimeout_ms = 1\n[proxy]\n[dns]\ntimeout_ms = 2\n",
      NULL, NULL, false, 1, { { 5, "'timeout_ms' given twice in [dns]", NULL } } },
    /* listen */
    { "listen host name", "[proxy]\nlisten = localhost:3128\n", NULL, NULL, false, 1,
      { { 2, "listen: 'localhost:3128' is not an IP address", NULL } } },
    { "listen missing port", "[proxy]\nlisten = 127.0.0.1\n", NULL, NULL, false, 1,
      { { 2, "listen: '127.0.0.1': a port is required", NULL } } },
    { "listen IPv6 missing port", "[proxy]\nlisten = [::1]\n", NULL, NULL, false, 1,
      { { 2, "a port is required", NULL } } },
    { "listen bare IPv6 with port", "[proxy]\nlisten = ::1:3128\n", NULL, NULL, false, 1,
      { { 2, "brackets", NULL } } },
    { "listen bare IPv6", "[proxy]\nlisten = 2001:db8::1\n", NULL, NULL, false, 1,
      { { 2, "brackets", NULL } } },
    { "listen port 65536", "[proxy]\nlisten = 127.0.0.1:65536\n", NULL, NULL, false, 1,
      { { 2, "listen: '127.0.0.1:65536': bad port", NULL } } },
    { "listen IPv6 port 65536", "[proxy]\nlisten = [::1]:65536\n", NULL, NULL, false, 1,
      { { 2, "bad port", NULL } } },
    { "listen empty port", "[proxy]\nlisten = 127.0.0.1:\n", NULL, NULL, false, 1,
      { { 2, "bad port", NULL } } },
    { "listen port with sign", "[proxy]\nlisten = 127.0.0.1:+80\n", NULL, NULL, false, 1,
      { { 2, "bad port", NULL } } },
    { "listen port leading zero", "[proxy]\nlisten = 127.0.0.1:080\n", NULL, NULL, false, 1,
      { { 2, "bad port", NULL } } },
    { "listen port junk", "[proxy]\nlisten = 127.0.0.1:80x\n", NULL, NULL, false, 1,
      { { 2, "bad port", NULL } } },
    { "listen missing ]", "[proxy]\nlisten = [::1:3128\n", NULL, NULL, false, 1,
      { { 2, "missing ']'", NULL } } },
    { "listen text after ]", "[proxy]\nlisten = [::1]3128\n", NULL, NULL, false, 1,
      { { 2, "unexpected text after ']'", NULL } } },
    { "listen zone id", "[proxy]\nlisten = [fe80::1%eth0]:3128\n", NULL, NULL, false, 1,
      { { 2, "not an IP address", NULL } } },
    { "listen ambiguous IPv4", "[proxy]\nlisten = 127.1:3128\n", NULL, NULL, false, 1,
      { { 2, "not an IP address", NULL } } },
    { "listen empty", "[proxy]\nlisten =\n", NULL, NULL, false, 1,
      { { 2, "listen: ", NULL } } },
    /* BUG: config.c parse_ip_port (lines 139-168) accepts an IPv4 address in
     * brackets ("[127.0.0.1]:3128"); the allowlist refuses the same form
     * ("brackets are only for IPv6 literals"). */
    { "BUG listen IPv4 in brackets", "[proxy]\nlisten = [127.0.0.1]:3128\n", NULL, NULL, false, 1,
      { { 2, "listen: ", NULL } } },
    /* an indented line after a key is inih's continuation of that key; it
     * must at least be an error on its own line, never silently taken */
    { "indented key continues the previous one",
      "[proxy]\nlisten = 127.0.0.1:1\n    workers = 2\n", NULL, NULL, false, 1,
      { { 3, "", NULL } } },
    /* CIDRs */
    { "allow_cidr host bits", "[policy]\nallow_cidr = 10.0.0.1/8\n", NULL, NULL, false, 1,
      { { 2, "allow_cidr: '10.0.0.1/8' has host bits set", NULL } } },
    { "deny_cidr host bits v6", "[policy]\ndeny_cidr = 2001:db8::1/32\n", NULL, NULL, false, 1,
      { { 2, "deny_cidr: '2001:db8::1/32' has host bits set", NULL } } },
    { "deny_cidr /33", "[policy]\ndeny_cidr = 10.0.0.0/33\n", NULL, NULL, false, 1,
      { { 2, "deny_cidr: bad prefix length", NULL } } },
    { "allow_cidr /129", "[policy]\nallow_cidr = 2001:db8::/129\n", NULL, NULL, false, 1,
      { { 2, "allow_cidr: bad prefix length", NULL } } },
    { "allow_cidr empty prefix", "[policy]\nallow_cidr = 10.0.0.0/\n", NULL, NULL, false, 1,
      { { 2, "allow_cidr: bad prefix length", NULL } } },
    { "allow_cidr host name", "[policy]\nallow_cidr = example.org/24\n", NULL, NULL, false, 1,
      { { 2, "allow_cidr: 'example.org' is not an IP address", NULL } } },
    { "deny_cidr empty", "[policy]\ndeny_cidr =\n", NULL, NULL, false, 1,
      { { 2, "deny_cidr: ", NULL } } },
    /* bools */
    { "bad bool", "[policy]\nsni_check = maybe\n", NULL, NULL, false, 1,
      { { 2, "sni_check: 'maybe' is not yes or no", NULL } } },
    { "bad bool 2", "[policy]\nsni_check = 2\n", NULL, NULL, false, 1,
      { { 2, "sni_check: '2'", NULL } } },
    { "empty bool", "[policy]\nsni_check =\n", NULL, NULL, false, 1,
      { { 2, "sni_check: ''", NULL } } },
    /* port lists */
    { "ports 0", "[policy]\nconnect_ports = 0\n", NULL, NULL, false, 1,
      { { 2, "connect_ports: bad port '0'", NULL } } },
    { "ports 65536", "[policy]\nhttp_ports = 80, 65536\n", NULL, NULL, false, 1,
      { { 2, "http_ports: bad port '65536'", NULL } } },
    { "ports empty", "[policy]\nconnect_ports =\n", NULL, NULL, false, 1,
      { { 2, "connect_ports: empty port list", NULL } } },
    { "ports empty item", "[policy]\nconnect_ports = 443,,8443\n", NULL, NULL, false, 1,
      { { 2, "connect_ports: empty item", NULL } } },
    { "ports trailing comma", "[policy]\nconnect_ports = 443,\n", NULL, NULL, false, 1,
      { { 2, "connect_ports: trailing ','", NULL } } },
    { "ports leading comma", "[policy]\nhttp_ports = ,80\n", NULL, NULL, false, 1,
      { { 2, "http_ports: ", NULL } } },
    { "ports name", "[policy]\nhttp_ports = http\n", NULL, NULL, false, 1,
      { { 2, "http_ports: bad port 'http'", NULL } } },
    { "ports semicolon", "[policy]\nhttp_ports = 80;8080\n", NULL, NULL, false, 1,
      { { 2, "http_ports: bad port", NULL } } },
    { "ports too many", "[policy]\nconnect_ports = 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
      "19 20 21 22 23 24 25 26 27 28 29 30 31 32 33\n", NULL, NULL, false, 1,
      { { 2, "connect_ports: too many ports", NULL } } },
    /* inline allowlist entries */
    { "allow public suffix", "[policy]\nallow = example.org\nallow = *.com\n", NULL, NULL, false,
      1, { { 3, "allow: ", NULL } } },
    { "allow empty", "[policy]\nallow =\n", NULL, NULL, false, 1,
      { { 2, "allow: empty entry", NULL } } },
    { "allow comment only", "[policy]\nallow = # nothing\n", NULL, NULL, false, 1,
      { { 2, "allow: empty entry", NULL } } },
    { "allow two entries", "[policy]\nallow = a.example b.example\n", NULL, NULL, false, 1,
      { { 2, "allow: unexpected text", NULL } } },
    { "allow bad port", "[policy]\nallow = a.example:0\n", NULL, NULL, false, 1,
      { { 2, "allow: ", NULL } } },
    { "allow ambiguous IPv4", "[policy]\nallow = 127.1\n", NULL, NULL, false, 1,
      { { 2, "allow: ", NULL } } },
    /* allowlist files: a bad line is that file's FILE:LINE */
    { "bad allowlist line", "[policy]\nallowlist = list.txt\n", "list.txt",
      "good.example\n\n# c\n*.com\nbad host name\ngood2.example:99999\n", false, 3,
      { { 4, "public suffix", "list.txt" }, { 5, "unexpected text", "list.txt" },
        { 6, "", "list.txt" } } },
    { "allowlist in a subdirectory", "[policy]\nallowlist = sub/list.txt\n", "sub/list.txt",
      "\xef\xbb\xbfok.example\n-bad-.example\n", false, 1,
      { { 2, "", "sub/list.txt" } } },
    { "allowlist missing", "[policy]\nallowlist = missing.txt\n", NULL, NULL, false, 1,
      { { 0, "No such file or directory", "missing.txt" } } },
    { "allowlist is a directory", "[policy]\nallowlist = adir\n", "adir/x", "", false, 1,
      { { 0, "Is a directory", "adir" } } },
    /* dns */
    { "dns server host name", "[dns]\nserver = 192.0.2.1\nserver = dns.google\n", NULL, NULL,
      true, 1, { { 3, "server: 'dns.google' is not an IP address", NULL } } },
    { "dns server port 0", "[dns]\nserver = 192.0.2.1\nserver = 192.0.2.2:0\n", NULL, NULL, true,
      1, { { 3, "server: '192.0.2.2:0': bad port", NULL } } },
    { "dns server bare IPv6", "[dns]\nserver = 192.0.2.1\nserver = 2001:db8::1\n", NULL, NULL,
      true, 1, { { 3, "brackets", NULL } } },
    { "dns server port 65536", "[dns]\nserver = [2001:db8::1]:65536\nserver = 192.0.2.1\n", NULL,
      NULL, true, 1, { { 2, "bad port", NULL } } },
    /* admin */
    { "admin missing port", "[admin]\nlisten = 127.0.0.1\n", NULL, NULL, false, 1,
      { { 2, "admin listen: '127.0.0.1': a port is required", NULL } } },
    /* admin port 0 is allowed (the kernel picks; sluice prints it) */
    { "admin same as proxy listen", "[proxy]\nlisten = 127.0.0.1:3128\n[admin]\nlisten = 127.0.0.1:3128\n", NULL, NULL, false, 1,
      { { 4, "admin listen 127.0.0.1:3128 is also a proxy listen address", NULL } } },
    { "admin host name", "[admin]\nlisten = localhost:9090\n", NULL, NULL, false, 1,
      { { 2, "admin listen: 'localhost:9090' is not an IP address", NULL } } },
    /* syntax */
    { "syntax: no '='", "[proxy]\nworkers 4\n", NULL, NULL, false, 1,
      { { 2, "syntax error", NULL } } },
    { "syntax: no ']'", "[proxy\nworkers = 1\n", NULL, NULL, false, 2,
      { { 1, "syntax error", NULL }, { 2, "'workers' is outside any section", NULL } } },
    { "syntax: in an unknown section", "[bogus]\njunk\n", NULL, NULL, false, 2,
      { { 1, "unknown section [bogus]", NULL }, { 2, "syntax error", NULL } } },
    { "syntax after other errors", "[proxy]\nbogus = 1\nworkers = x\njunk line\n", NULL, NULL,
      false, 3,
      { { 2, "unknown key 'bogus'", NULL }, { 3, "workers: 'x'", NULL },
        { 4, "syntax error", NULL } } },
    /* BUG: config.c load_ini (lines 528-530) reports only the first syntax
     * error: ini_parse_stream returns the line of the first one only, and
     * the loader has no other way to see the others. Every bad line must be
     * reported. */
    { "BUG two syntax errors", "[proxy]\njunk one\nworkers = 2\njunk two\n", NULL, NULL, false, 2,
      { { 2, "syntax error", NULL }, { 4, "syntax error", NULL } } },
    /* BUG: config.c read_line (lines 460-467) looks for '[' at the start of
     * the line, but on line 1 a UTF-8 byte-order mark comes first (inih skips
     * it, INI_ALLOW_BOM); an unknown section there goes unreported and the
     * keys in it are dropped silently: the load succeeds. */
    { "BUG unknown section after a BOM", "\xef\xbb\xbf[bogus]\nkey = 1\n", NULL, NULL, false, 1,
      { { 1, "unknown section [bogus]", NULL } } },
    /* several errors in one file: every one reported, each at its line */
    { "many errors", many_errors_ini, "list.txt", "ok.example\nnot a host\n", false, 14,
      { { 1, "'stray' is outside any section", NULL },
        { 3, "listen: 'localhost:3128'", NULL },
        { 4, "workers: '65'", NULL },
        { 5, "'workers' given twice", NULL },
        { 6, "unknown key 'colour'", NULL },
        { 8, "sni_check: 'maybe'", NULL },
        { 9, "allow_cidr: ", NULL },
        { 10, "deny_cidr: ", NULL },
        { 11, "connect_ports: ", NULL },
        { 12, "allow: ", NULL },
        { 2, "unexpected text", "list.txt" },
        { 14, "unknown section [extra]", NULL },
        { 17, "idle_ms: '0'", NULL },
        { 18, "syntax error", NULL } } },
};

/* One case; true if it went as expected, else notes why and false. */
static bool run_err_case(const err_case *c)
{
    char dir[PATH_MAX], cfg[PATH_MAX], file[PATH_MAX + 64];
    bool ok = true;
    snprintf(g_label, sizeof g_label, "%s", c->name);
    new_case_dir(dir, sizeof dir);
    if (c->aux_name)
        put(dir, c->aux_name, c->aux_text, NULL, 0);
    sl_options o = no_opts();
    if (!c->cfg_dns)
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, c->ini, strlen(c->ini), &o, cfg, sizeof cfg);
    if (p) {
        sl_policy_unref(p);
        print_message("  loaded, expected %d error(s)\n", c->nerr);
        ok = false;
    }
    for (int i = 0; i < c->nerr; i++) {
        const xerr *x = &c->want[i];
        if (x->file)
            snprintf(file, sizeof file, "%s/%s", dir, x->file);
        else
            snprintf(file, sizeof file, "%s", cfg);
        ok &= find_report(file, x->line, x->frag);
    }
    if (R.n != c->nerr) {
        print_message("  expected %d report(s), got %d\n", c->nerr, R.n);
        ok = false;
    }
    if (!ok)
        dump_reports();
    g_label[0] = '\0';
    return ok;
}

static int run_err_cases(bool bugs)
{
    int failed = 0;
    for (size_t i = 0; i < sizeof err_cases / sizeof *err_cases; i++)
        if ((strncmp(err_cases[i].name, "BUG", 3) == 0) == bugs)
            failed += !run_err_case(&err_cases[i]);
    return failed;
}

static void test_errors(void **state)
{
    (void)state;
    assert_int_equal(run_err_cases(false), 0);
}

/* The cases marked BUG above, apart, so that they do not hide the others. */
static void test_errors_bugs(void **state)
{
    (void)state;
    assert_int_equal(run_err_cases(true), 0);
}

/* Lines up to 198 characters are read whole; a longer one is an error at its
 * line, and its tail is never read as a line of its own. */
static void test_long_lines(void **state)
{
    (void)state;
    char host190[191], host191[192], pad[6000];
    /* 63 + 1 + 63 + 1 + 50 + 12 = 190 */
    snprintf(host190, sizeof host190, "%.63s.%.63s.%.50s.example.org",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
             "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
    assert_int_equal(strlen(host190), 190);
    snprintf(host191, sizeof host191, "d%s", host190);

    /* 198 characters: fine, CRLF or not */
    for (int crlf = 0; crlf <= 1; crlf++) {
        char dir[PATH_MAX], cfg[PATH_MAX], ini[512], line[256];
        snprintf(line, sizeof line, "allow = %s", host190);
        assert_int_equal(strlen(line), 198);
        snprintf(ini, sizeof ini, "[policy]%s\n%s%s\n", crlf ? "\r" : "", line, crlf ? "\r" : "");
        new_case_dir(dir, sizeof dir);
        sl_options o = no_opts();
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
        sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
        if (!p)
            dump_reports();
        assert_non_null(p);
        assert_int_equal(sl_allowlist_count(p->allow), 1);
        assert_entry(p, 0, host190, cfg, 2);
        sl_policy_unref(p);
    }

    /* longer: each an error at its line; later lines keep their numbers */
    char dir[PATH_MAX], cfg[PATH_MAX];
    static char ini[16384];
    int n = 0;
    n += snprintf(ini + n, sizeof ini - (size_t)n, "[policy]\n");                    /* 1 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "allow = %s\n", host190);         /* 2 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "allow = %s\n", host191);         /* 3: 199 */
    /* 4: 21 + 178 + 15 = 214 characters; were it cut at 199, the tail
     * would be read as a line of its own: an unknown key */
    memset(pad, 'x', sizeof pad);
    n += snprintf(ini + n, sizeof ini - (size_t)n, "allow = ok.example ; %.*sbogus_tail4 = 1\n",
                  178, pad);
    n += snprintf(ini + n, sizeof ini - (size_t)n, "bogus = 1\n");                   /* 5 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "allow = ok2.example ; %.*sbogus_tail = 1\n",
                  200, pad);                                                      /* 6: 236 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "bogus2 = 1\n");                  /* 7 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "# %.*s\n", 5000, pad);           /* 8 */
    n += snprintf(ini + n, sizeof ini - (size_t)n, "bogus3 = 1");                    /* 9, no \n */
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, ini, (size_t)n, &o, cfg, sizeof cfg);
    assert_null(p);
    expect_report(cfg, 3, "line is 199 characters long");
    expect_report(cfg, 4, "line is 214 characters long");
    expect_report(cfg, 5, "unknown key 'bogus'");
    expect_report(cfg, 6, "line is 236 characters long");
    expect_report(cfg, 7, "unknown key 'bogus2'");
    expect_report(cfg, 8, "line is 5002 characters long");
    expect_report(cfg, 9, "unknown key 'bogus3'");
    expect_nreports(7);
    assert_false(any_report_contains("bogus_tail"));
    assert_false(any_report_contains("xxxxx"));
}

/* A NUL byte is an error at its line; the rest of the file is read. */
static void test_nul_byte(void **state)
{
    (void)state;
    static const char ini[] = "[proxy]\nwor\0kers = 1\nbogus = 2\n";
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, ini, sizeof ini - 1, &o, cfg, sizeof cfg);
    assert_null(p);
    expect_report(cfg, 2, "NUL byte");
    expect_report(cfg, 3, "unknown key 'bogus'");
    expect_nreports(2);
}

/* CRLF line ends and a byte-order mark: read. */
static void test_line_ends_and_bom(void **state)
{
    (void)state;
    static const char ini[] =
        "\xef\xbb\xbf[proxy]\r\n"
        "listen = 127.0.0.1:4000\r\n"
        "workers = 5\r\n"
        "\r\n"
        "[policy]\r\n"
        "allow = crlf.example\r\n"
        "sni_check = no ; comment\r\n";
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    snprintf(want, sizeof want, "%s:2", cfg);
    assert_listen(&p->listen[0], "127.0.0.1", 4000, want);
    assert_int_equal(p->workers, 5);
    assert_entry(p, 0, "crlf.example", cfg, 6);
    assert_false(p->sni_check);
    sl_policy_unref(p);
}

/* Comments: '#' and ';' lines, indented too, anywhere; ' ;' inline. */
static void test_comments(void **state)
{
    (void)state;
    static const char ini[] =
        "# leading comment with = sign and [brackets]\n"  /* 1 */
        "; another = with [proxy]\n"                       /* 2 */
        "[proxy] ; comment after a section\n"              /* 3 */
        "# listen = 10.0.0.1:1\n"                          /* 4 */
        "listen = 127.0.0.1:4001 ; listen = 10.0.0.2:2\n"  /* 5 */
        "    # indented comment after a key\n"             /* 6 */
        "\t; tab-indented comment\n"                       /* 7 */
        "max_clients = 33\t; tab before the comment\n"     /* 8 */
        "[policy]\n"                                       /* 9 */
        ";allow = commented.example\n"                     /* 10 */
        "#allow = commented2.example\n"                    /* 11 */
        "allow = kept.example # allowlist-style comment\n" /* 12 */
        "allow = kept2.example ; ini comment\n"            /* 13 */
        "[log]\n"                                          /* 14 */
        "path = out.log ; comment\n";                      /* 15 */
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(p->nlisten, 1);
    snprintf(want, sizeof want, "%s:5", cfg);
    assert_listen(&p->listen[0], "127.0.0.1", 4001, want);
    assert_int_equal(p->max_clients, 33);
    assert_int_equal(sl_allowlist_count(p->allow), 2);
    assert_entry(p, 0, "kept.example", cfg, 12);
    assert_entry(p, 1, "kept2.example", cfg, 13);
    snprintf(want, sizeof want, "%s/out.log", dir);
    assert_string_equal(p->log_path, want);
    sl_policy_unref(p);
}

/* ---- the config file itself ---- */

static void test_config_unreadable(void **state)
{
    (void)state;
    char dir[PATH_MAX], path[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };

    snprintf(path, sizeof path, "%s/missing.ini", dir);
    o.config = path;
    assert_null(load(&o));
    expect_report(path, 0, "No such file or directory");
    expect_nreports(1);

    o.config = dir;   /* a directory */
    assert_null(load(&o));
    expect_report(dir, 0, "Is a directory");
    expect_nreports(1);
}

/* ---- min_ttl_s above max_ttl_s ---- */

/* BUG: config.c sl_policy_load (lines 614-616) reports "FILE: min_ttl_s (N)
 * is above max_ttl_s (M)" with no line. Every config error names its
 * FILE:LINE: here the line of min_ttl_s or of max_ttl_s (either is fine). */
static void test_ttl_order(void **state)
{
    (void)state;
    static const struct {
        const char *ini;
        int line_a, line_b;   /* the report may name either */
    } cases[] = {
        { "[dns]\nmin_ttl_s = 60\nmax_ttl_s = 30\n", 2, 3 },
        { "[dns]\nmax_ttl_s = 30\n\nmin_ttl_s = 60\n", 2, 4 },
        { "[dns]\nmin_ttl_s = 301\n", 2, 2 },                 /* max: the default 300 */
        { "[dns]\nmax_ttl_s = 4\n", 2, 2 },                   /* min: the default 5 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[PATH_MAX], cfg[PATH_MAX], pa[PATH_MAX + 16], pb[PATH_MAX + 16];
        new_case_dir(dir, sizeof dir);
        sl_options o = no_opts();
        o.dns_server = (sl_strv){ k_cli_dns, 1 };
        sl_policy *p = load_ini(dir, cases[i].ini, strlen(cases[i].ini), &o, cfg, sizeof cfg);
        if (p) {
            sl_policy_unref(p);
            fail_msg("case %zu: loaded", i);
        }
        expect_nreports(1);
        assert_non_null(strstr(R.msg[0], "min_ttl_s"));
        snprintf(pa, sizeof pa, "%s:%d: ", cfg, cases[i].line_a);
        snprintf(pb, sizeof pb, "%s:%d: ", cfg, cases[i].line_b);
        if (!starts_with(R.msg[0], pa) && !starts_with(R.msg[0], pb)) {
            dump_reports();
            fail_msg("BUG: expected \"%s...\" or \"%s...\"", pa, pb);
        }
    }
    /* equal is fine */
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, INI("[dns]\nmin_ttl_s = 7\nmax_ttl_s = 7\n"), &o, cfg, sizeof cfg);
    assert_non_null(p);
    assert_int_equal(p->min_ttl_s, 7);
    assert_int_equal(p->max_ttl_s, 7);
    sl_policy_unref(p);
}

/* ---- DNS servers: where they come from ---- */

static void test_dns_sources(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX];
    /* [dns] server given: /etc/resolv.conf is not read */
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, INI("[dns]\nserver = [2001:db8::1]\n"), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(p->ndns, 1);
    assert_dns(&p->dns[0], "2001:db8::1", 53);
    assert_false(p->dns_from_resolv_conf);
    sl_policy_unref(p);
}

/* BUG: config.c sl_policy_load (lines 598-602): when every [dns] server line
 * is bad, besides the error at each bad line the loader also reports "no DNS
 * server: set [dns] server or --dns-server (/etc/resolv.conf names none)",
 * which is false on both counts (a server was set; resolv.conf was not read).
 * Expected: only the error at the bad line. */
static void test_dns_bad_server_no_cascade(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, INI("[dns]\nserver = dns.example\n"), &o, cfg, sizeof cfg);
    assert_null(p);
    expect_report(cfg, 2, "server: 'dns.example' is not an IP address");
    assert_false(any_report_contains("resolv.conf"));
    expect_nreports(1);
}

/* ---- empty values ---- */

/* BUG: config.c on_key K_LOG_PATH (line 415): "path =" (empty) is taken and
 * resolved to the config file's directory ("DIR/"), so `sluice check` passes
 * and the gate fails only when it opens its log. Expected: an error at the
 * line (or, at the least, the default "-"). */
static void test_empty_log_path(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, INI("[log]\npath =\n"), &o, cfg, sizeof cfg);
    if (p) {
        char got[PATH_MAX + 16];
        snprintf(got, sizeof got, "%s", p->log_path);
        sl_policy_unref(p);
        if (strcmp(got, "-") != 0)
            fail_msg("BUG: empty [log] path accepted as '%s'", got);
    } else {
        expect_report(cfg, 2, "path");
        expect_nreports(1);
    }
}

/* "[admin] listen =" (empty) is off, as in the SPEC. */
static void test_admin_empty_is_off(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load_ini(dir, INI("[admin]\nlisten =   ; off\n"), &o, cfg, sizeof cfg);
    assert_non_null(p);
    assert_null(p->admin_listen);
    sl_policy_unref(p);
}

/* ---- relative paths: the config file's directory, not the cwd ---- */

static void test_relative_paths(void **state)
{
    (void)state;
    char dir[PATH_MAX], cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    new_case_dir(dir, sizeof dir);
    /* decoys in the cwd with the same names */
    put(dir, "allow.txt", "decoy.example\n", NULL, 0);
    put(dir, "sub/allow.txt", "real.example\n", NULL, 0);
    put(dir, "sub/deeper/more.txt", "deeper.example\n", NULL, 0);
    put(dir, "cli.txt", "cli.example\n", NULL, 0);
    put(dir, "abs.txt", "abs.example\n", NULL, 0);
    char ini[PATH_MAX + 256];
    snprintf(ini, sizeof ini,
             "[policy]\nallowlist = allow.txt\nallowlist = deeper/more.txt\nallowlist = %s/abs.txt\n"
             "[log]\npath = logs/x.log\n",
             dir);
    put(dir, "sub/sluice.ini", ini, NULL, 0);
    assert_int_equal(chdir(dir), 0);

    static const char *cli_lists[] = { "cli.txt" };
    sl_options o = no_opts();
    o.config = "sub/sluice.ini";   /* relative config path */
    o.allowlist = (sl_strv){ cli_lists, 1 };
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *p = load(&o);
    int rc = chdir(cwd);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(rc, 0);
    char abs[PATH_MAX + 16];
    snprintf(abs, sizeof abs, "%s/abs.txt", dir);
    assert_int_equal(p->nallowlist_files, 4);
    assert_string_equal(p->allowlist_files[0], "sub/allow.txt");
    assert_string_equal(p->allowlist_files[1], "sub/deeper/more.txt");
    assert_string_equal(p->allowlist_files[2], abs);
    assert_string_equal(p->allowlist_files[3], "cli.txt");   /* a flag: the cwd */
    assert_int_equal(sl_allowlist_count(p->allow), 4);
    assert_entry(p, 0, "real.example", "sub/allow.txt", 1);
    assert_entry(p, 1, "deeper.example", "sub/deeper/more.txt", 1);
    assert_entry(p, 2, "abs.example", abs, 1);
    assert_entry(p, 3, "cli.example", "cli.txt", 1);
    assert_string_equal(p->log_path, "sub/logs/x.log");
    sl_policy_unref(p);

    /* a config named without a directory: its directory is the cwd */
    put(dir, "top.ini", "[policy]\nallowlist = allow.txt\n[log]\npath = y.log\n", NULL, 0);
    assert_int_equal(chdir(dir), 0);
    o = no_opts();
    o.config = "top.ini";
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    p = load(&o);
    rc = chdir(cwd);
    assert_int_equal(rc, 0);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(sl_allowlist_count(p->allow), 1);
    assert_entry(p, 0, "decoy.example", p->allowlist_files[0], 1);
    assert_true(strcmp(p->log_path, "y.log") == 0 || strcmp(p->log_path, "./y.log") == 0);
    sl_policy_unref(p);
}

/* ---- precedence: flags > file > defaults ---- */

static void test_precedence(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX], want[PATH_MAX + 32], file_list[PATH_MAX + 16],
        cli_list[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    put(dir, "file.txt", "from-file.example\n", file_list, sizeof file_list);
    put(dir, "cli.txt", "from-cli-file.example\n", cli_list, sizeof cli_list);
    static const char ini[] =
        "[proxy]\n"
        "listen = 10.0.0.1:1\n"          /* 2 */
        "listen = 10.0.0.2:2\n"          /* 3 */
        "workers = 3\n"                  /* 4 */
        "max_clients = 99\n"             /* 5 */
        "[policy]\n"
        "allowlist = file.txt\n"         /* 7 */
        "allow = inline.example\n"       /* 8 */
        "[dns]\n"
        "server = 192.0.2.1\n"           /* 10 */
        "server = 192.0.2.2\n"           /* 11 */
        "[log]\n"
        "path = file.log\n";             /* 13 */

    /* the file over the defaults */
    sl_options o = no_opts();
    sl_policy *p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(p->nlisten, 2);
    snprintf(want, sizeof want, "%s:2", cfg);
    assert_listen(&p->listen[0], "10.0.0.1", 1, want);
    assert_int_equal(p->workers, 3);
    assert_int_equal(p->ndns, 2);
    assert_int_equal(sl_allowlist_count(p->allow), 2);
    snprintf(want, sizeof want, "%s/file.log", dir);
    assert_string_equal(p->log_path, want);
    sl_policy_unref(p);

    /* flags over the file: listen and dns_server replace, allowlist and
     * allow add, log and workers override; the rest stays the file's */
    static const char *listens[] = { "127.0.0.1:0", "[::1]:0" };
    static const char *dns[] = { "[2001:db8::53]:5353" };
    static const char *allows[] = { "flag.example:8443", "*.flag2.example" };
    const char *lists[] = { cli_list };
    o = no_opts();
    o.listen = (sl_strv){ listens, 2 };
    o.dns_server = (sl_strv){ dns, 1 };
    o.allowlist = (sl_strv){ lists, 1 };
    o.allow = (sl_strv){ allows, 2 };
    o.log = "cli.log";
    o.workers = 7;
    p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    expect_nreports(0);
    assert_int_equal(p->nlisten, 2);
    assert_listen(&p->listen[0], "127.0.0.1", 0, "--listen");
    assert_listen(&p->listen[1], "::1", 0, "--listen");
    assert_int_equal(p->ndns, 1);
    assert_dns(&p->dns[0], "2001:db8::53", 5353);
    assert_false(p->dns_from_resolv_conf);
    assert_int_equal(p->nallowlist_files, 2);
    assert_string_equal(p->allowlist_files[0], file_list);
    assert_string_equal(p->allowlist_files[1], cli_list);
    assert_int_equal(sl_allowlist_count(p->allow), 5);
    assert_entry(p, 0, "from-file.example", file_list, 1);
    assert_entry(p, 1, "inline.example", cfg, 8);
    assert_entry(p, 2, "from-cli-file.example", cli_list, 1);
    assert_entry(p, 3, "flag.example:8443", "--allow", 0);
    assert_entry(p, 4, "*.flag2.example", "--allow", 0);
    assert_string_equal(p->log_path, "cli.log");   /* as given: relative to the cwd */
    assert_int_equal(p->workers, 7);
    assert_int_equal(p->max_clients, 99);
    sl_policy_unref(p);

    /* --workers 0: one per CPU, over the file's 3 */
    o = no_opts();
    o.workers = 0;
    p = load_ini(dir, ini, strlen(ini), &o, cfg, sizeof cfg);
    assert_non_null(p);
    assert_int_equal(p->workers, cpus());
    sl_policy_unref(p);

    /* flags with no config: over the defaults */
    o = no_opts();
    o.listen = (sl_strv){ listens, 1 };
    o.dns_server = (sl_strv){ dns, 1 };
    o.allow = (sl_strv){ allows, 1 };
    o.log = "-";
    o.workers = 2;
    p = load(&o);
    assert_non_null(p);
    assert_int_equal(p->nlisten, 1);
    assert_listen(&p->listen[0], "127.0.0.1", 0, "--listen");
    assert_int_equal(p->workers, 2);
    assert_int_equal(sl_allowlist_count(p->allow), 1);
    assert_string_equal(p->log_path, "-");
    assert_int_equal(p->max_clients, 4096);
    sl_policy_unref(p);
}

/* Bad flags: reported as "--flag: message". */
static void test_flag_errors(void **state)
{
    (void)state;
    char dir[PATH_MAX], missing[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    snprintf(missing, sizeof missing, "%s/nope.txt", dir);
    static const char *listens[] = { "127.0.0.1:3128", "localhost:1" };
    static const char *dns[] = { "192.0.2.1", "::1" };
    static const char *allows[] = { "*.com", "ok.example" };
    const char *lists[] = { missing };
    sl_options o = no_opts();
    o.listen = (sl_strv){ listens, 2 };
    o.dns_server = (sl_strv){ dns, 2 };
    o.allow = (sl_strv){ allows, 2 };
    o.allowlist = (sl_strv){ lists, 1 };
    assert_null(load(&o));
    expect_report("--listen", 0, "'localhost:1' is not an IP address");
    expect_report("--dns-server", 0, "brackets");
    expect_report("--allow", 0, "public suffix");
    expect_report(missing, 0, "No such file or directory");
    expect_nreports(4);
}

/* A policy is refcounted; every load gets a new generation. */
static void test_ref_generation(void **state)
{
    (void)state;
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    sl_policy *a = load(&o);
    sl_policy *b = load(&o);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(b->generation > a->generation);
    assert_ptr_equal(sl_policy_ref(a), a);
    sl_policy_unref(a);
    assert_int_equal(a->max_clients, 4096);   /* still alive: one ref left */
    sl_policy_unref(a);
    sl_policy_unref(b);
    sl_policy_unref(NULL);
}

/* ---- sl_policy_print ---- */

static char *print_policy(const sl_policy *p)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    sl_policy_print(p, f);
    assert_int_equal(fclose(f), 0);
    return out;
}

/* Some line of `out` contains every one of the strings (NULL-terminated). */
static bool has_line_with(const char *out, ...)
{
    const char *line = out;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        bool all = true;
        va_list ap;
        va_start(ap, out);
        for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
            if (!strstr(buf, s))
                all = false;
        va_end(ap);
        if (all)
            return true;
        line += len + (end ? 1 : 0);
    }
    return false;
}

#define ASSERT_LINE(out, ...)                                                        \
    do {                                                                             \
        if (!has_line_with((out), __VA_ARGS__, (const char *)NULL)) {                \
            print_message("%s", (out));                                              \
            fail_msg("no line with: %s", #__VA_ARGS__);                              \
        }                                                                            \
    } while (0)

static void test_print(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX], a_at[PATH_MAX + 32], b_at[PATH_MAX + 32],
        c_at[PATH_MAX + 32], logp[PATH_MAX + 32];
    sl_policy *p = load_all_keys(dir, sizeof dir, cfg, sizeof cfg);
    char *out = print_policy(p);
    snprintf(a_at, sizeof a_at, "%s:4", cfg);
    snprintf(b_at, sizeof b_at, "%s:5", cfg);
    ASSERT_LINE(out, "config", cfg);
    ASSERT_LINE(out, "127.0.0.1:0", a_at);
    ASSERT_LINE(out, "[::1]:8080", b_at);
    ASSERT_LINE(out, "workers", "3");
    ASSERT_LINE(out, "max_clients", "17");
    ASSERT_LINE(out, "shutdown_grace", "250 ms");
    ASSERT_LINE(out, "exit_idle", "9 s");
    ASSERT_LINE(out, "connect_ports", "443, 8443, 563");
    ASSERT_LINE(out, "http_ports", "80, 8080");
    ASSERT_LINE(out, "sni_check", "no");
    ASSERT_LINE(out, "allow_cidr", "10.20.0.5/32");
    ASSERT_LINE(out, "allow_cidr", "2001:db8::/32");
    ASSERT_LINE(out, "deny_cidr", "192.0.2.0/24");
    ASSERT_LINE(out, "deny_cidr", "8.8.8.8/32");
    ASSERT_LINE(out, "allowlist", "5 entries");
    /* each entry with its FILE:LINE */
    snprintf(a_at, sizeof a_at, "%s/lists/a.txt:1", dir);
    snprintf(b_at, sizeof b_at, "%s/lists/a.txt:4", dir);
    snprintf(c_at, sizeof c_at, "%s/b.txt:1", dir);
    ASSERT_LINE(out, "a.example ", a_at);
    ASSERT_LINE(out, "*.b.example:8443", b_at);
    ASSERT_LINE(out, "[2001:db8::7]:443", c_at);
    snprintf(a_at, sizeof a_at, "%s:14", cfg);
    snprintf(b_at, sizeof b_at, "%s:15", cfg);
    ASSERT_LINE(out, "example.org:8443", a_at);
    ASSERT_LINE(out, "*.example.net", b_at);
    ASSERT_LINE(out, "server", "127.0.0.53:53");
    ASSERT_LINE(out, "server", "[2001:db8::53]:5353");
    ASSERT_LINE(out, "server", "192.0.2.10:53");
    ASSERT_LINE(out, "timeout", "1500 ms");
    ASSERT_LINE(out, "ttl", "1..60 s");
    ASSERT_LINE(out, "header", "111 ms");
    ASSERT_LINE(out, "connect ", "222 ms");
    ASSERT_LINE(out, "idle", "333 ms");
    snprintf(logp, sizeof logp, "%s/logs/decisions.log", dir);
    ASSERT_LINE(out, "path", logp);
    ASSERT_LINE(out, "listen", "127.0.0.1:9090");
    assert_null(strstr(out, "resolv.conf"));
    assert_null(strstr(out, "everything is denied"));
    free(out);
    sl_policy_unref(p);

    /* the defaults, with flags */
    static const char *allows[] = { "flag.example:8443" };
    sl_options o = no_opts();
    o.dns_server = (sl_strv){ k_cli_dns, 1 };
    p = load(&o);
    assert_non_null(p);
    out = print_policy(p);
    ASSERT_LINE(out, "config", "none");
    ASSERT_LINE(out, "127.0.0.1:3128", "default");
    ASSERT_LINE(out, "allowlist", "0 entries", "everything is denied");
    ASSERT_LINE(out, "connect_ports", "443");
    ASSERT_LINE(out, "http_ports", "80");
    ASSERT_LINE(out, "sni_check", "yes");
    ASSERT_LINE(out, "server", "192.0.2.53:53");
    ASSERT_LINE(out, "timeout", "2000 ms");
    ASSERT_LINE(out, "ttl", "5..300 s");
    ASSERT_LINE(out, "header", "10000 ms");
    ASSERT_LINE(out, "connect ", "10000 ms");
    ASSERT_LINE(out, "idle", "300000 ms");
    ASSERT_LINE(out, "path", "standard output");
    ASSERT_LINE(out, "listen", "off");
    assert_null(strstr(out, "allow_cidr"));
    free(out);
    sl_policy_unref(p);

    o.allow = (sl_strv){ allows, 1 };
    p = load(&o);
    assert_non_null(p);
    out = print_policy(p);
    ASSERT_LINE(out, "allowlist", "1 entry");
    ASSERT_LINE(out, "flag.example:8443", "--allow");
    free(out);
    sl_policy_unref(p);
}

/* The inputs list ([policy] watch and [proxy] confine use it): the config,
 * each allowlist file, an allowlist directory as a directory, once each. */
static bool has_input(const sl_policy *p, const char *path, bool dir)
{
    for (size_t i = 0; i < p->ninputs; i++)
        if (p->inputs[i].dir == dir && strcmp(p->inputs[i].path, path) == 0)
            return true;
    return false;
}

static void test_inputs(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX], al[PATH_MAX], d[PATH_MAX + 8], inner[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    put(dir, "allow.txt", "a.example\n", al, sizeof al);
    put(dir, "more/x.txt", "b.example\n", inner, sizeof inner);
    snprintf(d, sizeof d, "%s/more", dir);
    sl_options o = no_opts();
    const char *flag_dns[] = { "192.0.2.53" };
    o.dns_server = (sl_strv){ flag_dns, 1 };
    sl_policy *p = load_ini(dir, INI("[policy]\nallowlist = allow.txt\nallowlist = allow.txt\nallowlist_dir = more\n"), &o,
                            cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_true(has_input(p, cfg, false));
    assert_true(has_input(p, al, false));
    assert_true(has_input(p, d, true));
    assert_true(has_input(p, inner, false));
    assert_false(has_input(p, "/etc/resolv.conf", false));   /* a --dns-server: not read */
    assert_int_equal(p->ninputs, 4);                         /* allow.txt twice is one input */
    sl_policy_unref(p);
}

/* ---- setup ---- */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/sluice-test-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(g_root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_no_config),
        cmocka_unit_test(test_defaults_nothing_given),
        cmocka_unit_test(test_defaults_empty_config),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_spec_example),
        cmocka_unit_test(test_key_once_and_twice),
        cmocka_unit_test(test_repeated_keys_accumulate),
        cmocka_unit_test(test_list_limits),
        cmocka_unit_test(test_bools),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_workers_zero_resolved),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_line_ends_and_bom),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_config_unreadable),
        cmocka_unit_test(test_dns_sources),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_admin_empty_is_off),
        cmocka_unit_test(test_relative_paths),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_ref_generation),
        cmocka_unit_test(test_print),
        /* BUG: these fail until the loader is fixed (see each comment) */
        cmocka_unit_test(test_errors_bugs),
        cmocka_unit_test(test_ttl_order),
        cmocka_unit_test(test_dns_bad_server_no_cascade),
        cmocka_unit_test(test_empty_log_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
