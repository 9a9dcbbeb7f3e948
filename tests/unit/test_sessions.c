/* Session files (proxy/daemon/sessions.c) and [sessions] (config.c): what
 * loads, what is skipped, every error with its FILE:LINE, the lookup by
 * name, the token check, the expiry form, and what `sluice check` prints
 * (never a whole hash). Each case has a directory of its own under one
 * mkdtemp directory, removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "crypto.h"
#include "metrics.h"
#include "sessions.h"
#include "tls.h"

static char g_root[256];
static int g_ncase;

#define MAX_REPORTS 64
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

/* DIR/name with text; sub-directories made as needed. */
static void put(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* hex(SHA-256(token)), as `session new` writes it. */
static void hash_hex(const char *token, char out[65])
{
    sl_chain_next("", 0, token, strlen(token), out);
}

/* A session file with token's hash and then `rest`. */
static void put_session(const char *dir, const char *name, const char *token, const char *rest)
{
    char h[65], text[4096], file[300];
    hash_hex(token, h);
    snprintf(text, sizeof text, "[session]\ntoken_sha256 = %s\n%s", h, rest);
    snprintf(file, sizeof file, "sessions.d/%s", name);
    put(dir, file, text);
}

static sl_policy *load_ini(const char *dir, const char *ini)
{
    char cfg[PATH_MAX];
    snprintf(cfg, sizeof cfg, "%s/sluice.ini", dir);
    put(dir, "sluice.ini", ini);
    static const char *dns[] = { "192.0.2.53" };
    sl_options o = { .workers = -1, .config = cfg, .dns_server = { dns, 1 } };
    memset(&R, 0, sizeof R);
    return sl_policy_load(&o, collect, NULL);
}

static const char k_sessions[] = "[sessions]\ndir = sessions.d\n";

static bool has_report(const char *where, const char *frag)
{
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++)
        if (strncmp(R.msg[i], where, strlen(where)) == 0 && strstr(R.msg[i], frag))
            return true;
    return false;
}

/* A report that starts with DIR/rel_where and contains frag. */
static void expect_report(const char *dir, const char *rel_where, const char *frag)
{
    char where[PATH_MAX];
    snprintf(where, sizeof where, "%s/%s", dir, rel_where);
    if (!has_report(where, frag)) {
        dump_reports();
        fail_msg("no report '%s...%s'", where, frag);
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

/* ---- loading ---- */

static void test_good_dir_and_what_is_skipped(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    put(dir, "allow.txt", "global.test\n");
    put(dir, "sessions.d/b.allow", "b-only.test\n*.b-wild.test:8443\n");
    put(dir, "sessions.d/lists/more.allow", "b-more.test\n");
    put_session(dir, "b.ini", "tok-b",
                "allowlist = b.allow\nallowlist = lists/more.allow\nlog = logs/b.jsonl\n"
                "expires = 2030-01-02T03:04:05Z\n");
    put_session(dir, "a.ini", "tok-a", "");
    put_session(dir, "a.b.ini", "tok-ab", "; a comment\n\n");
    /* Not NAME.ini: never read (each would be an error if it were). */
    put(dir, "sessions.d/.hidden.ini", "garbage\n");
    put(dir, "sessions.d/x.ini~", "garbage\n");
    put(dir, "sessions.d/notes.txt", "garbage\n");
    put(dir, "sessions.d/bad name.ini", "garbage\n");
    put_session(dir, "..2026_12_03/k8s.ini", "tok-k", "");
    /* Kubernetes' volume layout: NAME.ini -> ..data/NAME.ini -> ..TIMESTAMP/NAME.ini */
    char link_path[PATH_MAX + 64];
    snprintf(link_path, sizeof link_path, "%s/sessions.d/..data", dir);
    assert_int_equal(symlink("..2026_12_03", link_path), 0);
    snprintf(link_path, sizeof link_path, "%s/sessions.d/k8s.ini", dir);
    assert_int_equal(symlink("..data/k8s.ini", link_path), 0);
    char ini[512];
    snprintf(ini, sizeof ini, "[policy]\nallowlist = allow.txt\n%s", k_sessions);
    sl_policy *p = load_ini(dir, ini);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_int_equal(R.n, 0);
    assert_true(p->sessions_require);   /* the default with dir */
    assert_int_equal(p->nsessions, 4);
    /* By name: "a" before "a.b" (though "a.ini" sorts after "a.b.ini"). */
    assert_string_equal(p->sessions[0].name, "a");
    assert_string_equal(p->sessions[1].name, "a.b");
    assert_string_equal(p->sessions[2].name, "b");
    assert_string_equal(p->sessions[3].name, "k8s");
    assert_true(sl_session_token_ok(&p->sessions[3], "tok-k", 5));

    const sl_session *b = sl_policy_session(p, "b", 1);
    assert_non_null(b);
    assert_ptr_equal(b, &p->sessions[2]);
    assert_true(sl_session_token_ok(b, "tok-b", 5));
    assert_false(sl_session_token_ok(b, "tok-a", 5));
    assert_non_null(b->allow);
    assert_int_equal(sl_allowlist_count(b->allow), 3);
    assert_int_equal(b->nallowlist_files, 2);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/sessions.d/lists/more.allow", dir);
    assert_string_equal(b->allowlist_files[1], want);
    snprintf(want, sizeof want, "%s/sessions.d/logs/b.jsonl", dir);
    assert_string_equal(b->log_path, want);
    assert_null(b->log);
    assert_int_equal(b->expires, 1893553445);   /* date -u -d 2030-01-02T03:04:05Z +%s */
    assert_true(b->metrics_slot >= 0 && b->metrics_slot <= SL_METRICS_SESSION_LABELS);   /* its /metrics label */
    snprintf(want, sizeof want, "%s/sessions.d/b.ini", dir);
    assert_string_equal(b->file, want);

    const sl_session *a = sl_policy_session(p, "a", 1);
    assert_non_null(a);
    assert_null(a->allow);
    assert_null(a->log_path);
    assert_int_equal(a->expires, 0);
    /* The session's entries are its own: the global list is unchanged. */
    assert_int_equal(sl_allowlist_count(p->allow), 1);
    assert_false(p->inspects);
    sl_policy_unref(p);
}

static void test_every_error_names_file_and_line(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    put(dir, "sessions.d/ok.allow", "ok.test\n");
    put(dir, "sessions.d/bad.allow", "fine.test\nbad host!\n");
    put(dir, "sessions.d/badhex.ini", "[session]\ntoken_sha256 = 9f86d081zz\n");
    put(dir, "sessions.d/short.ini",
        "[session]\ntoken_sha256 = 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0\n");
    put(dir, "sessions.d/notoken.ini", "; nothing yet\n[session]\nallowlist = ok.allow\n");
    put(dir, "sessions.d/empty.ini", "");
    put_session(dir, "unknown.ini", "t", "colour = blue\n");
    put_session(dir, "badexp.ini", "t", "expires = 2026-12-31 00:00:00Z\n");
    put_session(dir, "noallow.ini", "t", "allowlist = missing.allow\n");
    put_session(dir, "badline.ini", "t", "allowlist = bad.allow\n");
    put_session(dir, "twice.ini", "t", "[session]\nlog = x\n");
    put_session(dir, "section.ini", "t", "[other]\nkey = 1\n");
    put_session(dir, "dup.ini", "t", "expires = 2030-01-01T00:00:00Z\nexpires = 2031-01-01T00:00:00Z\n");
    put(dir, "sessions.d/outside.ini", "log = x\n[session]\n");
    put_session(dir, "syntax.ini", "t", "just words\n");
    put(dir, "gate.log", "");
    put_session(dir, "gatelog.ini", "t", "log = ../gate.log\n");
    /* One good file among them. */
    put_session(dir, "good.ini", "t", "allowlist = ok.allow\n");

    char ini[256];
    snprintf(ini, sizeof ini, "[log]\npath = gate.log\n%s", k_sessions);
    sl_policy *p = load_ini(dir, ini);
    assert_null(p);
    expect_report(dir, "sessions.d/badhex.ini:2: ", "token_sha256: not 64 hex digits");
    expect_report(dir, "sessions.d/short.ini:2: ", "token_sha256: not 64 hex digits");
    expect_report(dir, "sessions.d/notoken.ini:2: ", "no token_sha256");
    expect_report(dir, "sessions.d/empty.ini:1: ", "no [session] section");
    expect_report(dir, "sessions.d/unknown.ini:3: ", "unknown key 'colour'");
    expect_report(dir, "sessions.d/badexp.ini:3: ", "expires");
    expect_report(dir, "sessions.d/noallow.ini:3: ", "missing.allow: cannot read");
    expect_report(dir, "sessions.d/bad.allow:2: ", "");   /* the list's own line */
    expect_report(dir, "sessions.d/twice.ini:3: ", "[session] again");
    expect_report(dir, "sessions.d/section.ini:3: ", "unknown section [other]");
    expect_report(dir, "sessions.d/dup.ini:4: ", "'expires' given twice");
    expect_report(dir, "sessions.d/outside.ini:1: ", "outside any section");
    expect_report(dir, "sessions.d/syntax.ini:3: ", "syntax error");
    expect_report(dir, "sessions.d/gatelog.ini:3: ", "the gate's own log");
    /* Nothing else, and nothing about the good file. */
    for (int i = 0; i < R.n && i < MAX_REPORTS; i++) {
        assert_null(strstr(R.msg[i], "good.ini"));
        assert_null(strstr(R.msg[i], "9f86d081884c7d65"));   /* no report quotes a hash */
    }
    if (R.n != 15) {
        dump_reports();
        fail_msg("expected 15 reports, got %d", R.n);
    }
}

static void test_sessions_config_errors(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    assert_null(load_ini(dir, "[sessions]\ndir = nowhere\n"));
    expect_report(dir, "sluice.ini:2: ", "nowhere");
    put(dir, "file.txt", "");
    assert_null(load_ini(dir, "[sessions]\n\ndir = file.txt\n"));
    expect_report(dir, "sluice.ini:3: ", "not a directory");
    assert_null(load_ini(dir, "[sessions]\nrequire = no\n"));
    expect_report(dir, "sluice.ini:2: ", "require without dir");
    mkdir(strcat(strcpy((char[PATH_MAX]){ 0 }, dir), "/sessions.d"), 0700);
    assert_null(load_ini(dir, "[sessions]\ndir = sessions.d\nrequire = maybe\n"));
    expect_report(dir, "sluice.ini:3: ", "not yes or no");
    assert_null(load_ini(dir, "[sessions]\ndir = sessions.d\nflavour = x\n"));
    expect_report(dir, "sluice.ini:3: ", "unknown key 'flavour' in [sessions]");

    sl_policy *p = load_ini(dir, "[sessions]\ndir = sessions.d\nrequire = no\n");
    assert_non_null(p);
    assert_false(p->sessions_require);
    assert_int_equal(p->nsessions, 0);
    sl_policy_unref(p);
    p = load_ini(dir, "");
    assert_non_null(p);
    assert_null(p->sessions_dir);
    assert_false(p->sessions_require);
    sl_policy_unref(p);
}

/* A session's request rule needs the CA as a global one does, and makes
 * the policy an inspecting one. */
static void test_session_rules_need_the_ca(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    put(dir, "sessions.d/r.allow", "plain.test\nGET rules.test/x/*\n");
    put_session(dir, "r.ini", "t", "allowlist = r.allow\n");
    assert_null(load_ini(dir, k_sessions));
    expect_report(dir, "sessions.d/r.allow:2: ", "request rules need the inspection CA");

    char *pem = NULL, *key = NULL, err[256];
    if (!sl_tls_make_ca(30, NULL, 0, &pem, &key, err, sizeof err))
        fail_msg("sl_tls_make_ca: %s", err);
    put(dir, "ca/ca.pem", pem);
    put(dir, "ca/ca.key", key);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/ca/ca.key", dir);
    assert_int_equal(chmod(path, 0600), 0);
    free(pem);
    sl_tls_free_secret(key);
    char ini[512];
    snprintf(ini, sizeof ini, "%s[tls]\nca_cert = ca/ca.pem\nca_key = ca/ca.key\nupstream_ca = ca/ca.pem\n",
             k_sessions);
    sl_policy *p = load_ini(dir, ini);
    if (!p)
        dump_reports();
    assert_non_null(p);
    assert_true(p->inspects);
    assert_non_null(p->tls_server);
    sl_policy_unref(p);
}

/* ---- lookup and token ---- */

static void test_lookup_by_name(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    const char *names[] = { "m", "a", "zz", "ab", "a-b", "A", "x.y_z", "b" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char f[80];
        snprintf(f, sizeof f, "%s.ini", names[i]);
        put_session(dir, f, names[i], "");
    }
    sl_policy *p = load_ini(dir, k_sessions);
    assert_non_null(p);
    assert_int_equal(p->nsessions, sizeof names / sizeof *names);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const sl_session *s = sl_policy_session(p, names[i], strlen(names[i]));
        assert_non_null(s);
        assert_string_equal(s->name, names[i]);
        assert_true(sl_session_token_ok(s, names[i], strlen(names[i])));   /* each its own token */
    }
    /* Not NUL-terminated: the length decides. */
    const char buf[] = "abzz";
    assert_string_equal(sl_policy_session(p, buf, 2)->name, "ab");
    assert_string_equal(sl_policy_session(p, buf, 1)->name, "a");
    assert_null(sl_policy_session(p, buf, 3));
    assert_null(sl_policy_session(p, buf, 0));
    assert_null(sl_policy_session(p, "c", 1));
    assert_null(sl_policy_session(p, "zzz", 3));
    assert_null(sl_policy_session(p, "", 0));
    char longname[100];
    memset(longname, 'a', sizeof longname);
    assert_null(sl_policy_session(p, longname, sizeof longname));
    sl_policy_unref(p);
}

static void test_token_ok(void **state)
{
    (void)state;
    sl_session s = { .name = "t" };
    const char tok[] = "0123456789abcdef0123456789abcdef";
    char h[65];
    hash_hex(tok, h);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        s.token_sha256[i] = (unsigned char)v;
    }
    assert_true(sl_session_token_ok(&s, tok, strlen(tok)));
    char wrong[sizeof tok];
    memcpy(wrong, tok, sizeof tok);
    wrong[31] ^= 1;
    assert_false(sl_session_token_ok(&s, wrong, strlen(wrong)));
    wrong[31] ^= 1;
    wrong[0] = 'X';
    assert_false(sl_session_token_ok(&s, wrong, strlen(wrong)));
    assert_false(sl_session_token_ok(&s, tok, strlen(tok) - 1));   /* a prefix */
    assert_false(sl_session_token_ok(&s, "", 0));
    char longer[64];
    snprintf(longer, sizeof longer, "%sx", tok);
    assert_false(sl_session_token_ok(&s, longer, strlen(longer)));
    /* A token is compared as bytes: its length is part of it. */
    char with_nul[sizeof tok + 1];
    memcpy(with_nul, tok, sizeof tok);
    assert_false(sl_session_token_ok(&s, with_nul, sizeof tok));   /* the NUL included */
    char huge[SL_SESSION_TOKEN_MAX + 2];
    memset(huge, 'a', sizeof huge);
    assert_false(sl_session_token_ok(&s, huge, sizeof huge));
    /* The hash of the empty token, for a session made with it, holds. */
    hash_hex("", h);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        s.token_sha256[i] = (unsigned char)v;
    }
    assert_true(sl_session_token_ok(&s, "", 0));
    assert_false(sl_session_token_ok(&s, tok, strlen(tok)));
}

/* ---- forms ---- */

static void test_expires_form(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        long long t;   /* -1: refused */
    } cases[] = {
        { "2026-12-31T00:00:00Z", 1798675200 },
        { "1970-01-01T00:00:01Z", 1 },
        { "2028-02-29T23:59:59Z", 1835481599 },   /* a leap day */
        { "2027-02-29T00:00:00Z", -1 },
        { "2100-02-29T00:00:00Z", -1 },           /* not a leap year */
        { "2026-13-01T00:00:00Z", -1 },
        { "2026-00-01T00:00:00Z", -1 },
        { "2026-04-31T00:00:00Z", -1 },
        { "2026-12-31T24:00:00Z", -1 },
        { "2026-12-31T23:60:00Z", -1 },
        { "2026-12-31T23:59:60Z", -1 },           /* no leap second */
        { "2026-12-31 00:00:00Z", -1 },
        { "2026-12-31T00:00:00", -1 },
        { "2026-12-31T00:00:00z", -1 },
        { "2026-12-31T00:00:00+00:00", -1 },
        { "2026-12-31T00:00:00.5Z", -1 },
        { "2026-12-31", -1 },
        { "1969-12-31T23:59:59Z", -1 },
        { "1970-01-01T00:00:00Z", -1 },            /* 0 means "never" */
        { "+026-12-31T00:00:00Z", -1 },
        { " 2026-12-31T00:00:00Z", -1 },
        { "", -1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        time_t t = 12345;
        bool ok = sl_session_parse_expires(cases[i].s, &t);
        if (ok != (cases[i].t >= 0) || (ok && (long long)t != cases[i].t))
            fail_msg("'%s': %s %lld", cases[i].s, ok ? "accepted as" : "refused", (long long)t);
    }
}

static void test_name_form(void **state)
{
    (void)state;
    assert_true(sl_session_name_valid("build-42", 8));
    assert_true(sl_session_name_valid("A.b_c-9", 7));
    assert_true(sl_session_name_valid("a..", 3));
    char n64[65];
    memset(n64, 'x', 64);
    n64[64] = '\0';
    assert_true(sl_session_name_valid(n64, 64));
    char n65[66];
    memset(n65, 'x', 65);
    n65[65] = '\0';
    assert_false(sl_session_name_valid(n65, 65));
    assert_false(sl_session_name_valid("", 0));
    assert_false(sl_session_name_valid(".a", 2));
    assert_false(sl_session_name_valid("..data", 6));
    assert_false(sl_session_name_valid("a b", 3));
    assert_false(sl_session_name_valid("a/b", 3));
    assert_false(sl_session_name_valid("a:b", 3));   /* would end the Basic user */
    assert_false(sl_session_name_valid("caf\xc3\xa9", 5));
}

/* ---- check ---- */

static void test_check_prints_sessions_never_a_whole_hash(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    new_case_dir(dir, sizeof dir);
    put(dir, "sessions.d/w.allow", "w-only.test:8443\n");
    put_session(dir, "worker-1.ini", "tok-w",
                "allowlist = w.allow\nlog = w.jsonl\nexpires = 2001-01-01T00:00:00Z\n");
    put_session(dir, "plain.ini", "tok-p", "");
    sl_policy *p = load_ini(dir, k_sessions);
    assert_non_null(p);
    char *out = print_policy(p);
    char h[65], prefix[9], nine[10], want[PATH_MAX + 40];
    hash_hex("tok-w", h);
    memcpy(prefix, h, 8);
    prefix[8] = '\0';
    memcpy(nine, h, 9);
    nine[9] = '\0';
    assert_non_null(strstr(out, "sessions: 2"));
    assert_non_null(strstr(out, "  worker-1\n"));
    assert_non_null(strstr(out, "  plain\n"));
    assert_non_null(strstr(out, prefix));
    assert_null(strstr(out, nine));            /* 8 hex digits, never more */
    assert_null(strstr(out, h));
    assert_non_null(strstr(out, "2001-01-01T00:00:00Z (expired)"));
    assert_non_null(strstr(out, "w-only.test:8443"));
    snprintf(want, sizeof want, "%s/sessions.d/w.jsonl", dir);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "require        yes"));
    hash_hex("tok-p", h);
    memcpy(nine, h, 9);
    assert_null(strstr(out, nine));
    free(out);
    sl_policy_unref(p);
}

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
    snprintf(g_root, sizeof g_root, "%s/sluice-test-sessions-XXXXXX", tmp && *tmp ? tmp : "/tmp");
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
        cmocka_unit_test(test_good_dir_and_what_is_skipped),
        cmocka_unit_test(test_every_error_names_file_and_line),
        cmocka_unit_test(test_sessions_config_errors),
        cmocka_unit_test(test_session_rules_need_the_ca),
        cmocka_unit_test(test_lookup_by_name),
        cmocka_unit_test(test_token_ok),
        cmocka_unit_test(test_expires_form),
        cmocka_unit_test(test_name_form),
        cmocka_unit_test(test_check_prints_sessions_never_a_whole_hash),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
