/* The inspection config (proxy/daemon/config.c [tls]) and the credentials
 * (proxy/daemon/credentials.c): keys, their errors with FILE:LINE, the
 * secret files' checks, sl_policy_credential, and what `sluice check`
 * prints. Every secret here holds a marker that no report and no printout
 * may contain. Each case has a directory of its own under one mkdtemp
 * directory, removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "credentials.h"
#include "tls.h"

#define MARK "S3CR3T-MARKER"

static char g_root[256];
static int g_ncase;

#define MAX_REPORTS 32
static struct {
    int n;
    char msg[MAX_REPORTS][2048];
} R;

static void collect(void *ctx, const char *msg)
{
    (void)ctx;
    if (R.n < MAX_REPORTS)
        snprintf(R.msg[R.n], sizeof R.msg[0], "%s", msg);
    R.n++;
}

static void dump_reports(void)
{
    print_message("  %d report(s):\n", R.n);
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        print_message("    [%d] %s\n", i, R.msg[i]);
}

static void new_case_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/c%03d", g_root, ++g_ncase);
    assert_int_equal(mkdir(dir, 0700), 0);
}

/* DIR/name with text and mode; sub-directories made as needed. */
static void put(const char *dir, const char *name, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *slash = strrchr(path, '/');
    if (slash > path + strlen(dir)) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* A CA pair as config files (their contents are not read here). */
/* A real CA (the policy loads it: an inspecting policy carries its CA),
 * made once per run. */
static char *ca_pem, *ca_key;

static void put_ca(const char *dir)
{
    if (!ca_pem) {
        char err[256];
        if (!sl_tls_make_ca(30, NULL, 0, &ca_pem, &ca_key, err, sizeof err))
            fail_msg("sl_tls_make_ca: %s", err);
    }
    put(dir, "ca/ca.pem", ca_pem, 0644);
    put(dir, "ca/ca.key", ca_key, 0600);
}

static const char k_tls[] = "[tls]\nca_cert = ca/ca.pem\nca_key = ca/ca.key\n";

static sl_policy *load_ini(const char *dir, const char *ini, char *cfg, size_t cap)
{
    snprintf(cfg, cap, "%s/sluice.ini", dir);
    put(dir, "sluice.ini", ini, 0600);
    static const char *dns[] = { "192.0.2.53" };
    sl_options o = { .workers = -1, .config = cfg, .dns_server = { dns, 1 } };
    memset(&R, 0, sizeof R);
    return sl_policy_load(&o, collect, NULL);
}

static bool has_report(const char *where, const char *frag)
{
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        if (strncmp(R.msg[i], where, strlen(where)) == 0 && strstr(R.msg[i], frag))
            return true;
    return false;
}

static void expect_report(const char *where, const char *frag)
{
    if (!has_report(where, frag)) {
        dump_reports();
        fail_msg("no report '%s...%s'", where, frag);
    }
}

static void expect_no_secret_in_reports(void)
{
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        if (strstr(R.msg[i], MARK)) {
            dump_reports();
            fail_msg("a report shows the secret");
        }
}

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

static bool has_line_with(const char *out, ...)
{
    for (const char *line = out; *line;) {
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

/* ---- [tls] ---- */

static void test_tls_defaults(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16];
    new_case_dir(dir, sizeof dir);
    sl_policy *p = load_ini(dir, "[policy]\nallow = example.org\n", cfg, sizeof cfg);
    assert_non_null(p);
    assert_null(p->tls_ca_cert);
    assert_null(p->tls_ca_key);
    assert_string_equal(p->tls_upstream_ca, "/etc/ssl/certs/ca-certificates.crt");
    assert_int_equal(p->tls_leaf_days, 7);
    assert_false(p->inspects);
    assert_int_equal(p->ncredentials, 0);
    assert_null(sl_policy_credential(p, &sl_allowlist_entry(p->allow, 0)->host, 443, true));
    char *out = print_policy(p);
    ASSERT_LINE(out, "tls:", "nothing is inspected");
    ASSERT_LINE(out, "ca_cert", "(not set)");
    ASSERT_LINE(out, "upstream_ca", "/etc/ssl/certs/ca-certificates.crt");
    ASSERT_LINE(out, "leaf_days", "7");
    ASSERT_LINE(out, "credentials: 0 (none)");
    /* a list without rules prints as before */
    ASSERT_LINE(out, "allowlist: 1 entry");
    assert_null(strstr(out, "inspected hosts"));
    free(out);
    sl_policy_unref(p);
}

static void test_tls_keys(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16], want[PATH_MAX + 32];
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "bundle.pem", ca_pem, 0644);   /* any readable bundle */
    sl_policy *p = load_ini(dir,
                            "[policy]\nallow = GET example.org/*\n"
                            "[tls]\nca_cert = ca/ca.pem\nca_key = ca/ca.key\nupstream_ca = bundle.pem\n"
                            "leaf_days = 825\n",
                            cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_true(p->inspects);
    snprintf(want, sizeof want, "%s/ca/ca.pem", dir);
    assert_string_equal(p->tls_ca_cert, want);
    snprintf(want, sizeof want, "%s/ca/ca.key", dir);
    assert_string_equal(p->tls_ca_key, want);
    snprintf(want, sizeof want, "%s/bundle.pem", dir);
    assert_string_equal(p->tls_upstream_ca, want);
    assert_int_equal(p->tls_leaf_days, 825);
    char *out = print_policy(p);
    assert_null(strstr(out, "nothing is inspected"));
    ASSERT_LINE(out, "ca_key", "/ca/ca.key");
    ASSERT_LINE(out, "leaf_days", "825");
    free(out);
    sl_policy_unref(p);

    /* leaf_days' range, and the keys once only */
    static const struct {
        const char *ini, *frag;
        int line;
    } bad[] = {
        { "[tls]\nleaf_days = 0\n", "leaf_days", 2 },
        { "[tls]\nleaf_days = 826\n", "leaf_days", 2 },
        { "[tls]\n\nleaf_days = seven\n", "leaf_days", 3 },
        { "[tls]\nleaf_days = 7\nleaf_days = 8\n", "given twice", 3 },
        { "[tls]\nca_cert =\n", "ca_cert: empty path", 2 },
        { "[tls]\nbogus = 1\n", "unknown key 'bogus' in [tls]", 2 },
        { "[credentials]\nfiles = x\n", "unknown key 'files' in [credentials]", 2 },
        { "[credentials]\nsecret_dir =\n", "secret_dir: empty path", 2 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        new_case_dir(dir, sizeof dir);
        p = load_ini(dir, bad[i].ini, cfg, sizeof cfg);
        assert_null(p);
        snprintf(want, sizeof want, "%s:%d: ", cfg, bad[i].line);
        expect_report(want, bad[i].frag);
    }
}

/* Request rules need the CA: the error names the first rule's FILE:LINE,
 * wherever the rule came from. */
static void test_rules_need_the_ca(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16], want[PATH_MAX + 32];
    new_case_dir(dir, sizeof dir);
    put(dir, "list.txt", "example.org\n# c\nGET,HEAD registry.npmjs.org/*\nGET api.github.com/*\n", 0644);
    sl_policy *p = load_ini(dir, "[policy]\nallowlist = list.txt\n", cfg, sizeof cfg);
    assert_null(p);
    assert_int_equal(R.n, 1);
    snprintf(want, sizeof want, "%s/list.txt:3: ", dir);
    expect_report(want, "request rules need the inspection CA: set [tls] ca_cert and ca_key");

    new_case_dir(dir, sizeof dir);
    p = load_ini(dir, "[policy]\nallow = example.org\nallow = GET example.org/x\n", cfg, sizeof cfg);
    assert_null(p);
    snprintf(want, sizeof want, "%s:3: ", cfg);
    expect_report(want, "request rules need the inspection CA");

    /* --allow: no line */
    new_case_dir(dir, sizeof dir);
    static const char *allows[] = { "GET example.org/x" };
    static const char *dns[] = { "192.0.2.53" };
    sl_options o = { .workers = -1, .allow = { allows, 1 }, .dns_server = { dns, 1 } };
    memset(&R, 0, sizeof R);
    assert_null(sl_policy_load(&o, collect, NULL));
    expect_report("--allow: ", "request rules need the inspection CA");

    /* one half of the pair */
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    p = load_ini(dir, "[policy]\nallow = example.org\n[tls]\n\nca_cert = ca/ca.pem\n", cfg, sizeof cfg);
    assert_null(p);
    snprintf(want, sizeof want, "%s:5: ", cfg);
    expect_report(want, "ca_cert without ca_key");
    p = load_ini(dir, "[tls]\nca_key = ca/ca.key\n", cfg, sizeof cfg);
    assert_null(p);
    snprintf(want, sizeof want, "%s:2: ", cfg);
    expect_report(want, "ca_key without ca_cert");
}

static void test_tls_files_checked(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16], want[PATH_MAX + 32], path[PATH_MAX + 16];
    static const mode_t open_modes[] = { 0644, 0640, 0604, 0620, 0602, 0610 };
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        new_case_dir(dir, sizeof dir);
        put_ca(dir);
        snprintf(path, sizeof path, "%s/ca/ca.key", dir);
        assert_int_equal(chmod(path, open_modes[i]), 0);
        sl_policy *p = load_ini(dir, k_tls, cfg, sizeof cfg);
        assert_null(p);
        snprintf(want, sizeof want, "%s:3: ", cfg);
        char frag[64];
        snprintf(frag, sizeof frag, "is open to group or others (mode %04o)", (unsigned)open_modes[i]);
        expect_report(want, frag);
    }
    /* 0400 is fine; a missing cert is an error at its line */
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    snprintf(path, sizeof path, "%s/ca/ca.key", dir);
    assert_int_equal(chmod(path, 0400), 0);
    sl_policy *p = load_ini(dir, k_tls, cfg, sizeof cfg);
    assert_non_null(p);
    sl_policy_unref(p);
    snprintf(path, sizeof path, "%s/ca/ca.pem", dir);
    assert_int_equal(unlink(path), 0);
    p = load_ini(dir, k_tls, cfg, sizeof cfg);
    assert_null(p);
    snprintf(want, sizeof want, "%s:2: ", cfg);
    expect_report(want, "cannot read");

    /* upstream_ca: needed only with rules; at its line, or the first rule's */
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    char ini[512];
    snprintf(ini, sizeof ini, "%supstream_ca = nowhere.pem\n", k_tls);
    p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_non_null(p);
    sl_policy_unref(p);
    snprintf(ini, sizeof ini, "%supstream_ca = nowhere.pem\n[policy]\nallow = GET example.org/*\n", k_tls);
    p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_null(p);
    snprintf(want, sizeof want, "%s:4: ", cfg);
    expect_report(want, "upstream_ca");
    snprintf(ini, sizeof ini, "%supstream_ca = ca\n[policy]\nallow = GET example.org/*\n", k_tls);
    p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_null(p);
    expect_report(want, "not a regular file");
}

/* ---- [credentials] ---- */

static void test_credentials_good(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16];
    sl_policy *p;
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "secrets/npm", MARK "-npm\n", 0600);
    put(dir, "secrets/int", MARK "-int", 0600);
    put(dir, "secrets/deep", MARK "-deep\n", 0600);
    put(dir, "secrets/gh", "a b\tc " MARK "\n", 0600);
    put(dir, "secrets/ip", MARK "-ip\n", 0600);
    put(dir, "creds.txt",
        "# NAME  HOST                HEADER         TEMPLATE\n"
        "npm     registry.npmjs.org  Authorization  Bearer {secret}\n"
        "\n"
        "   # an indented comment\n"
        "int     .internal.example.org  X-Token  {secret}\n"
        "deep    a.b.internal.example.org  X-Deep  pre {secret} post   \r\n"
        "gh      api.github.com:8443  authorization  token {secret}\n"
        "ip      93.184.216.34  Cookie  session={secret}; lang=en\n",
        0644);
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[policy]\nallow = GET,HEAD registry.npmjs.org/*\nallow = GET .internal.example.org/*\n"
             "allow = GET api.github.com:8443/*\nallow = example.net\nallow = GET 93.184.216.34/*\n%s"
             "[credentials]\nfile = creds.txt\nsecret_dir = secrets\n",
             k_tls);
    p = load_ini(dir, ini, cfg, sizeof cfg);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(p->ncredentials, 5);
    const sl_credential *c = &p->credentials[0];
    assert_string_equal(c->name, "npm");
    assert_string_equal(c->header, "Authorization");
    assert_string_equal(c->value, "Bearer " MARK "-npm");   /* one trailing newline removed */
    assert_string_equal(c->tmpl, "Bearer {secret}");
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/creds.txt:2", dir);
    assert_string_equal(c->where, want);
    assert_string_equal(p->credentials[1].value, MARK "-int");   /* no newline: nothing removed */
    assert_string_equal(p->credentials[2].value, "pre " MARK "-deep post");
    assert_string_equal(p->credentials[3].header, "authorization");   /* as written */
    assert_string_equal(p->credentials[3].value, "token a b\tc " MARK);
    assert_string_equal(p->credentials[4].value, "session=" MARK "-ip; lang=en");

    /* Lookups: most specific host form, ports as allowlist entries. */
    static const struct {
        const char *host;
        int port;
        bool connect;
        const char *name;     /* NULL: none */
    } q[] = {
        { "registry.npmjs.org", 443, true, "npm" },
        { "Registry.NPMJS.org.", 443, true, "npm" },
        { "registry.npmjs.org", 80, false, "npm" },     /* the lead drops the header on plain HTTP */
        { "registry.npmjs.org", 8443, true, NULL },
        { "x.registry.npmjs.org", 443, true, NULL },
        { "internal.example.org", 443, true, "int" },
        { "x.internal.example.org", 443, true, "int" },
        { "a.b.internal.example.org", 443, true, "deep" },   /* exact beats the apex */
        { "x.a.b.internal.example.org", 443, true, "int" },
        { "api.github.com", 8443, true, "gh" },
        { "api.github.com", 443, true, NULL },
        { "93.184.216.34", 443, true, "ip" },
        { "example.net", 443, true, NULL },
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        sl_host h;
        const char *err;
        assert_true(sl_host_parse(q[i].host, strlen(q[i].host), &h, &err));
        const sl_credential *got = sl_policy_credential(p, &h, q[i].port, q[i].connect);
        if ((got == NULL) != (q[i].name == NULL) || (got && strcmp(got->name, q[i].name)))
            fail_msg("credential for %s:%d: %s, expected %s", q[i].host, q[i].port, got ? got->name : "none",
                     q[i].name ? q[i].name : "none");
    }

    /* check prints the template, never the secret */
    char *out = print_policy(p);
    assert_null(strstr(out, MARK));
    ASSERT_LINE(out, "credentials: 5");
    ASSERT_LINE(out, "npm", "registry.npmjs.org", "Authorization: Bearer {secret}", "creds.txt:2");
    ASSERT_LINE(out, "int", ".internal.example.org", "X-Token: {secret}");
    ASSERT_LINE(out, "gh", "api.github.com:8443", "authorization: token {secret}");
    ASSERT_LINE(out, "secret_dir", "/secrets");
    free(out);
    sl_policy_unref(p);

    /* Secrets are read at load: a changed file gives the new value. */
    put(dir, "secrets/npm", MARK "-rotated\n", 0600);
    p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_non_null(p);
    assert_string_equal(p->credentials[0].value, "Bearer " MARK "-rotated");
    sl_policy_unref(p);
}

typedef struct cred_case {
    const char *line;      /* the credentials file's line 2 (line 1 is a comment) */
    const char *secret;    /* secrets/NAME's content (NULL: no file), mode 0600 */
    const char *frag;
} cred_case;

static const cred_case cred_cases[] = {
    /* the line */
    { "npm registry.npmjs.org Authorization", MARK, "expected NAME HOST HEADER TEMPLATE" },
    { "npm registry.npmjs.org", MARK, "expected NAME HOST HEADER TEMPLATE" },
    { "npm", MARK, "expected NAME HOST HEADER TEMPLATE" },
    { "n/pm registry.npmjs.org Authorization {secret}", MARK, "bad credential name" },
    { ".. registry.npmjs.org Authorization {secret}", MARK, "bad credential name" },
    { "npm registry.npmjs.org Author:ization {secret}", MARK, "bad header name" },
    { "npm registry.npmjs.org Host {secret}", MARK, "header 'Host' frames or routes" },
    { "npm registry.npmjs.org content-length {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org Transfer-Encoding {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org CONNECTION {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org Proxy-Authorization {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org Upgrade {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org TE {secret}", MARK, "frames or routes" },
    { "npm registry.npmjs.org Authorization Bearer", MARK, "{secret} exactly once" },
    { "npm registry.npmjs.org Authorization {secret}{secret}", MARK, "{secret} exactly once" },
    { "npm registry.npmjs.org Authorization {SECRET}", MARK, "{secret} exactly once" },
    { "npm registry.npmjs.org Authorization a\x01{secret}", MARK, "template contains a control byte" },
    { "npm registry.npmjs.org:0 Authorization {secret}", MARK, "host: bad port" },
    { "npm *.com Authorization {secret}", MARK, "public suffix" },
    { "npm registry.npmjs.org/x Authorization {secret}", MARK, "host: a path needs" },
    /* not inspected: never used */
    { "npm example.net Authorization {secret}", MARK, "would never be used" },
    { "npm registry.npmjs.org:8443 Authorization {secret}", MARK, "would never be used" },
    { "npm api.github.com Authorization {secret}", MARK, "would never be used" },
    { "npm x.registry.npmjs.org Authorization {secret}", MARK, "would never be used" },
    /* the secret */
    { "npm registry.npmjs.org Authorization {secret}", NULL, "cannot read secret" },
    { "npm registry.npmjs.org Authorization {secret}", "", "is empty" },
    { "npm registry.npmjs.org Authorization {secret}", "\n", "is empty" },
    { "npm registry.npmjs.org Authorization {secret}", MARK "\n\n", "contains a line break" },
    { "npm registry.npmjs.org Authorization {secret}", MARK "\r\n", "contains a carriage return" },
    { "npm registry.npmjs.org Authorization {secret}", MARK "\nX-Evil: 1\n", "contains a line break" },
    { "npm registry.npmjs.org Authorization {secret}", MARK "\x7f", "contains a control byte" },
    { "npm registry.npmjs.org Authorization {secret}", MARK "\x1b[2J", "contains a control byte" },
};

static void test_credentials_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cred_cases / sizeof cred_cases[0]; i++) {
        const cred_case *c = &cred_cases[i];
        char dir[PATH_MAX], cfg[PATH_MAX + 16], creds[1200], want[PATH_MAX + 32];
        snprintf(creds, sizeof creds, "# credentials\n%s\n", c->line);
        new_case_dir(dir, sizeof dir);
        put_ca(dir);
        put(dir, "creds.txt", creds, 0644);
        mkdir(strcat(strcpy(want, dir), "/secrets"), 0700);
        if (c->secret)
            put(dir, "secrets/npm", c->secret, 0600);
        char ini[1024];
        snprintf(ini, sizeof ini,
                 "[policy]\nallow = GET,HEAD registry.npmjs.org/*\nallow = GET api.github.com:8443/*\n"
                 "allow = example.net\n%s[credentials]\nfile = creds.txt\nsecret_dir = secrets\n",
                 k_tls);
        sl_policy *p = load_ini(dir, ini, cfg, sizeof cfg);
        if (p) {
            sl_policy_unref(p);
            fail_msg("line '%s' accepted", c->line);
        }
        snprintf(want, sizeof want, "%s/creds.txt:2: ", dir);
        if (!has_report(want, c->frag)) {
            dump_reports();
            fail_msg("line '%s': no report '%s'", c->line, c->frag);
        }
        expect_no_secret_in_reports();
    }
}

/* The secret file: not a link, a regular file, the gate's own, mode 0600
 * or stricter; large ones refused. Each refusal names the file, never its
 * content. */
static void test_secret_files(void **state)
{
    (void)state;
    static const char creds[] = "npm registry.npmjs.org Authorization Bearer {secret}\n"
                                "int .internal.example.org X-Token {secret}\n";
    static const mode_t bad_modes[] = { 0644, 0640, 0604, 0660, 0606, 0620, 0602, 0610, 0601, 0700 };
    char dir[PATH_MAX], cfg[PATH_MAX + 16], want[PATH_MAX + 32], path[PATH_MAX + 32];
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[policy]\nallow = GET registry.npmjs.org/*\nallow = GET .internal.example.org/*\n%s"
             "[credentials]\nfile = creds.txt\nsecret_dir = secrets\n",
             k_tls);
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        new_case_dir(dir, sizeof dir);
        put_ca(dir);
        put(dir, "creds.txt", creds, 0644);
        put(dir, "secrets/npm", MARK, bad_modes[i]);
        put(dir, "secrets/int", MARK, 0600);
        sl_policy *p = load_ini(dir, ini, cfg, sizeof cfg);
        if (bad_modes[i] == 0700) {
            /* owner execute is the owner's business */
            assert_non_null(p);
            sl_policy_unref(p);
            continue;
        }
        assert_null(p);
        snprintf(want, sizeof want, "%s/creds.txt:1: ", dir);
        char frag[80];
        snprintf(frag, sizeof frag, "/secrets/npm is open to group or others (mode %04o)",
                 (unsigned)bad_modes[i]);
        expect_report(want, frag);
        assert_int_equal(R.n, 1);     /* int is fine */
        expect_no_secret_in_reports();
    }

    /* a symbolic link, even to a good file */
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "creds.txt", creds, 0644);
    put(dir, "secrets/real", MARK, 0600);
    put(dir, "secrets/int", MARK, 0600);
    snprintf(path, sizeof path, "%s/secrets/npm", dir);
    assert_int_equal(symlink("real", path), 0);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    snprintf(want, sizeof want, "%s/creds.txt:1: ", dir);
    expect_report(want, "is a symbolic link");
    expect_no_secret_in_reports();

    /* a directory, a FIFO (never blocks) */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    expect_report(want, "not a regular file");
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    expect_report(want, "not a regular file");
    assert_int_equal(unlink(path), 0);

    /* owned by someone else (the tests may run as root: chown works then) */
    put(dir, "secrets/npm", MARK, 0600);
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_null(load_ini(dir, ini, cfg, sizeof cfg));
        expect_report(want, "is owned by uid 65534, not by the gate's user (uid 0)");
        expect_no_secret_in_reports();
        assert_int_equal(chown(path, 0, 0), 0);
    }

    /* the largest secret, and one byte more */
    static char big[SL_SECRET_MAX + 2];
    memset(big, 'k', SL_SECRET_MAX);
    big[SL_SECRET_MAX] = '\0';
    put(dir, "secrets/npm", big, 0600);
    sl_policy *p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_non_null(p);
    assert_int_equal(strlen(p->credentials[0].value), strlen("Bearer ") + SL_SECRET_MAX);
    sl_policy_unref(p);
    big[SL_SECRET_MAX] = 'k';
    big[SL_SECRET_MAX + 1] = '\0';
    put(dir, "secrets/npm", big, 0600);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    expect_report(want, "is larger than 8192 bytes");

    /* file without secret_dir; a missing credentials file */
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "creds.txt", creds, 0644);
    snprintf(ini, sizeof ini, "[policy]\nallow = GET registry.npmjs.org/*\n%s[credentials]\nfile = creds.txt\n",
             k_tls);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    snprintf(want, sizeof want, "%s:7: ", cfg);
    expect_report(want, "[credentials] file needs secret_dir");
    snprintf(ini, sizeof ini,
             "[policy]\nallow = GET registry.npmjs.org/*\n%s[credentials]\nfile = nope.txt\nsecret_dir = s\n",
             k_tls);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    snprintf(want, sizeof want, "%s/nope.txt: ", dir);
    expect_report(want, "cannot read");
}

static void test_credentials_duplicates(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16], want[PATH_MAX + 32];
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "secrets/a", MARK, 0600);
    put(dir, "secrets/b", MARK, 0600);
    put(dir, "creds.txt",
        "a registry.npmjs.org Authorization {secret}\n"
        "a registry.npmjs.org X-Other {secret}\n"
        "b Registry.NPMJS.org. X-Other {secret}\n",
        0644);
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[policy]\nallow = GET registry.npmjs.org/*\n%s[credentials]\nfile = creds.txt\nsecret_dir = secrets\n",
             k_tls);
    assert_null(load_ini(dir, ini, cfg, sizeof cfg));
    snprintf(want, sizeof want, "%s/creds.txt:2: ", dir);
    expect_report(want, "credential 'a' is defined twice (first at");
    snprintf(want, sizeof want, "%s/creds.txt:3: ", dir);
    expect_report(want, "credential 'b' is for the same host as 'a'");
    assert_int_equal(R.n, 2);
    expect_no_secret_in_reports();
}

/* ---- check's printout of rules, and the warnings ---- */

static void test_print_rules(void **state)
{
    (void)state;
    char dir[PATH_MAX], cfg[PATH_MAX + 16], at[PATH_MAX + 96];
    new_case_dir(dir, sizeof dir);
    put_ca(dir);
    put(dir, "list.txt",
        "registry.npmjs.org\n"
        "GET,HEAD registry.npmjs.org/*\n"
        "GET api.github.com/repos/acme/*\n"
        "example.org\n"
        "GET registry.npmjs.org/is-number/-/is-number-7.0.0.tgz "
        "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
        "* api.github.com/gists\n",
        0644);
    char ini[512];
    snprintf(ini, sizeof ini, "[policy]\nallowlist = list.txt\n%s", k_tls);
    sl_policy *p = load_ini(dir, ini, cfg, sizeof cfg);
    assert_non_null(p);
    char *out = print_policy(p);
    ASSERT_LINE(out, "allowlist: 2 entries, 4 request rules");
    snprintf(at, sizeof at, "%s/list.txt:1", dir);
    ASSERT_LINE(out, "  registry.npmjs.org ", at);
    ASSERT_LINE(out, "inspected hosts: 2");
    /* under its host, in order */
    const char *npm = strstr(out, "\n  registry.npmjs.org\n");
    const char *gh = strstr(out, "\n  api.github.com\n");
    assert_non_null(npm);
    assert_non_null(gh);
    assert_true(npm < gh);
    const char *r2 = strstr(npm, "    GET,HEAD /*"), *r5 = strstr(npm, "    GET /is-number/-/is-number-7.0.0.tgz sha256-");
    const char *r3 = strstr(gh, "    GET /repos/acme/*"), *r6 = strstr(gh, "    * /gists");
    assert_true(r2 && r5 && r3 && r6);
    assert_true(r2 < r5 && r5 < gh && gh < r3 && r3 < r6);
    snprintf(at, sizeof at, "%s/list.txt:6", dir);
    ASSERT_LINE(out, "* /gists", at);
    free(out);

    /* the warning: the plain entry for an inspected host */
    memset(&R, 0, sizeof R);
    sl_policy_warnings(p, collect, NULL);
    assert_int_equal(R.n, 1);
    snprintf(at, sizeof at, "%s/list.txt:1: warning: 'registry.npmjs.org' is shadowed", dir);
    expect_report(at, "(first: ");
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
    snprintf(g_root, sizeof g_root, "%s/sluice-test-creds-XXXXXX", tmp && *tmp ? tmp : "/tmp");
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
        cmocka_unit_test(test_tls_defaults),
        cmocka_unit_test(test_tls_keys),
        cmocka_unit_test(test_rules_need_the_ca),
        cmocka_unit_test(test_tls_files_checked),
        cmocka_unit_test(test_credentials_good),
        cmocka_unit_test(test_credentials_errors),
        cmocka_unit_test(test_secret_files),
        cmocka_unit_test(test_credentials_duplicates),
        cmocka_unit_test(test_print_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
