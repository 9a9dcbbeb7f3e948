/* npm-family configuration (.npmrc, .yarnrc, .yarnrc.yml), the Yarn 1 text
 * syntax and the helpers the npm, Yarn and pnpm readers share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npmrc.h"

/* ---- helpers ---------------------------------------------------------- */

typedef struct fixture {
    sl_project *proj;
    sl_npmcfg *cfg;
    sl_lockerr err;
} fixture;

static fixture *fx_new(const char *default_registry)
{
    fixture *f = test_calloc(1, sizeof *f);
    f->proj = sl_project_new("proj");
    f->cfg = sl_npmcfg_new(default_registry);
    return f;
}

static void fx_free(fixture *f)
{
    sl_npmcfg_free(f->cfg);
    sl_project_free(f->proj);
    test_free(f);
}

static void put(fixture *f, const char *rel, const char *text)
{
    sl_project_put(f->proj, rel, text, strlen(text));
}

/* The registry a package name resolves to, and the config file that said so
 * ("-" for the built-in default). */
static void assert_registry(fixture *f, const char *name, const char *want, const char *want_file)
{
    const char *file = NULL;
    const char *got = sl_npmcfg_registry(f->cfg, name, strlen(name), &file);
    assert_string_equal(got, want);
    assert_string_equal(file ? file : "-", want_file);
}

/* The derived entries as "host:port" lines, sorted, joined by spaces. */
static const char *entries(sl_derived *d, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sl_derived_count(d); i++) {
        char text[300];
        const sl_entry *e = sl_derived_entry(d, i, NULL, NULL);
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? " " : "", sl_entry_format(e, text, sizeof text));
    }
    return buf;
}

/* ---- .npmrc ----------------------------------------------------------- */

static void test_npmrc_absent_means_defaults(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.npmjs.org/");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_registry(f, "lodash", "https://registry.npmjs.org/", "-");
    assert_registry(f, "@corp/ui", "https://registry.npmjs.org/", "-");
    fx_free(f);
}

static void test_npmrc_registry_and_scopes(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.npmjs.org/");
    put(f, ".npmrc",
        "; comment\n"
        "# another comment\n"
        "registry = https://mirror.example/npm/   ; trailing comment\n"
        "@corp:registry=\"https://npm.corp.example:8443/\"\n"
        "@other:registry='https://other.example/'\n"
        "//npm.corp.example:8443/:_authToken=${TOKEN}\n"
        "always-auth\n"
        "@corp:registry=https://npm2.corp.example/\r\n"
        "[section]\n"
        "registry=https://in-a-section.example/\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_registry(f, "lodash", "https://mirror.example/npm/", "proj/.npmrc");
    /* a later line wins */
    assert_registry(f, "@corp/ui", "https://npm2.corp.example/", "proj/.npmrc");
    assert_registry(f, "@other/x", "https://other.example/", "proj/.npmrc");
    /* a scope without its own registry uses the default one */
    assert_registry(f, "@nobody/x", "https://mirror.example/npm/", "proj/.npmrc");
    /* "@corp" alone, or a name that only starts like a scope, is not scoped */
    assert_registry(f, "@corp", "https://mirror.example/npm/", "proj/.npmrc");
    fx_free(f);
}

static void test_npmrc_refuses_unusable_registries(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int line;
        const char *msg;
    } cases[] = {
        { "registry=npm.corp.example/\n", 1, "is not a registry URL" },
        { "a=1\nregistry=${NPM_REGISTRY}\n", 2, "environment variable" },
        { "\n\n@corp:registry=https://host:99999/\n", 3, "is not a registry URL" },
        { "@corp:registry=git@host:repo.git\n", 1, "is not a registry URL" },
        { "registry=\n", 1, "is not a registry URL" },
        { "replace-registry-host=\n", 1, "replace-registry-host" },
        { "replace-registry-host=host.example/path\n", 1, "not a host name" },
        { "replace-registry-host=https://\n", 1, "not a registry URL" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture *f = fx_new("https://registry.npmjs.org/");
        put(f, ".npmrc", cases[i].text);
        assert_false(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
        assert_string_equal(f->err.file, "proj/.npmrc");
        assert_int_equal(f->err.line, cases[i].line);
        assert_non_null(strstr(f->err.msg, cases[i].msg));
        fx_free(f);
    }
}

static void test_npmrc_auth_keys_are_ignored(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.npmjs.org/");
    put(f, ".npmrc",
        "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n"
        "//npm.pkg.github.com/:_authToken=ghp_xxx\n"
        "_auth=dXNlcjpwYXNz\n"
        "email=dev@example.com\n"
        "publishConfig=https://publish.example/\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_registry(f, "x", "https://registry.npmjs.org/", "-");
    fx_free(f);
}

/* Whether a resolved URL is rewritten under this .npmrc (NULL: none). */
static bool replaced(const char *npmrc, const char *url)
{
    fixture *f = fx_new("https://registry.npmjs.org/");
    if (npmrc)
        put(f, ".npmrc", npmrc);
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    sl_url u;
    const char *file;
    bool is_url = url && sl_url_parse(url, strlen(url), &u);
    bool r = sl_npmcfg_replaces(f->cfg, is_url ? &u : NULL, &file);
    assert_string_equal(file ? file : "-", npmrc ? "proj/.npmrc" : "-");
    fx_free(f);
    return r;
}

static void test_replace_registry_host_modes(void **state)
{
    (void)state;
    /* default: npmjs */
    assert_true(replaced(NULL, "https://registry.npmjs.org/x/-/x-1.tgz"));
    assert_true(replaced(NULL, "https://Registry.NPMJS.org/x/-/x-1.tgz"));
    assert_false(replaced(NULL, "https://registry.yarnpkg.com/x/-/x-1.tgz"));
    assert_false(replaced(NULL, "github:o/r#abc"));

    assert_false(replaced("replace-registry-host=never\n", "https://registry.npmjs.org/x.tgz"));

    assert_true(replaced("replace-registry-host=always\n", "https://anything.example/x.tgz"));
    assert_true(replaced("replace-registry-host=always\n", "github:o/r#abc"));

    const char *named = "replace-registry-host=npm-old.corp.example\n";
    assert_true(replaced(named, "https://npm-old.corp.example/x.tgz"));
    assert_false(replaced(named, "https://registry.npmjs.org/x.tgz"));

    /* npm 11: a URL selects a host and the path under it */
    const char *prefix = "replace-registry-host=https://remote.example.com/npm/b/\n";
    assert_true(replaced(prefix, "https://remote.example.com/npm/b/x-1.0.0.tgz"));
    assert_true(replaced(prefix, "http://remote.example.com/npm/b"));
    assert_false(replaced(prefix, "https://remote.example.com/npm/bb/x-1.0.0.tgz"));
    assert_false(replaced(prefix, "https://remote.example.com/x-1.0.0.tgz"));
    assert_false(replaced(prefix, "https://other.example.com/npm/b/x-1.0.0.tgz"));

    /* a later line wins */
    assert_true(replaced("replace-registry-host=never\nreplace-registry-host=npmjs\n",
                         "https://registry.npmjs.org/x.tgz"));
}

/* ---- .yarnrc ---------------------------------------------------------- */

static void test_yarnrc_is_asked_after_npmrc(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.yarnpkg.com");
    put(f, ".npmrc", "registry=https://npmrc.example/\n");
    put(f, ".yarnrc",
        "# yarn 1\n"
        "registry \"https://yarnrc.example/\"\n"
        "\"@corp:registry\" \"https://npm.corp.example:8443/\"\n"
        "\"--install.frozen-lockfile\" true\n"
        "lastUpdateCheck 1712345678901\n"
        "env:\n"
        "  FOO \"bar\"\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_true(sl_npmcfg_load_yarnrc(f->cfg, f->proj, &f->err));
    /* a scope from either file beats any default registry */
    assert_registry(f, "@corp/ui", "https://npm.corp.example:8443/", "proj/.yarnrc");
    /* .npmrc's default beats .yarnrc's */
    assert_registry(f, "left-pad", "https://npmrc.example/", "proj/.npmrc");
    fx_free(f);

    f = fx_new("https://registry.yarnpkg.com");
    put(f, ".yarnrc", "registry \"https://yarnrc.example/\"\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_true(sl_npmcfg_load_yarnrc(f->cfg, f->proj, &f->err));
    assert_registry(f, "left-pad", "https://yarnrc.example/", "proj/.yarnrc");
    fx_free(f);

    f = fx_new("https://registry.yarnpkg.com");
    put(f, ".npmrc", "@corp:registry=https://from-npmrc.example/\n");
    put(f, ".yarnrc", "\"@corp:registry\" \"https://from-yarnrc.example/\"\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    assert_true(sl_npmcfg_load_yarnrc(f->cfg, f->proj, &f->err));
    assert_registry(f, "@corp/x", "https://from-npmrc.example/", "proj/.npmrc");
    assert_registry(f, "x", "https://registry.yarnpkg.com", "-");
    fx_free(f);
}

static void test_yarnrc_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int line;
        const char *msg;
    } cases[] = {
        { "registry https://unquoted.example/\n", 1, "unexpected text after a value" },
        { "registry \"https://x.example/\n", 1, "unterminated string" },
        { "# ok\n   registry \"https://x.example/\"\n", 2, "indentation" },
        { "registry \"not a url\"\n", 1, "is not a registry URL" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture *f = fx_new("https://registry.yarnpkg.com");
        put(f, ".yarnrc", cases[i].text);
        assert_false(sl_npmcfg_load_yarnrc(f->cfg, f->proj, &f->err));
        assert_string_equal(f->err.file, "proj/.yarnrc");
        assert_int_equal(f->err.line, cases[i].line);
        assert_non_null(strstr(f->err.msg, cases[i].msg));
        fx_free(f);
    }
}

/* ---- .yarnrc.yml ------------------------------------------------------ */

static void test_yarnrc_yml(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.yarnpkg.com");
    put(f, ".yarnrc.yml",
        "nodeLinker: node-modules\n"
        "npmRegistryServer: \"https://verdaccio.example:4873\"\n"
        "npmScopes:\n"
        "  corp:\n"
        "    npmAuthToken: \"${TOKEN}\"\n"
        "    npmRegistryServer: https://npm.corp.example:8443\n"
        "  other:\n"
        "    npmAlwaysAuth: true\n");
    assert_true(sl_npmcfg_load_yarnrc_yml(f->cfg, f->proj, &f->err));
    assert_registry(f, "@corp/ui", "https://npm.corp.example:8443", "proj/.yarnrc.yml");
    assert_registry(f, "@other/x", "https://verdaccio.example:4873", "proj/.yarnrc.yml");
    assert_registry(f, "x", "https://verdaccio.example:4873", "proj/.yarnrc.yml");
    fx_free(f);

    /* an empty file sets nothing */
    f = fx_new("https://registry.yarnpkg.com");
    put(f, ".yarnrc.yml", "# nothing yet\n");
    assert_true(sl_npmcfg_load_yarnrc_yml(f->cfg, f->proj, &f->err));
    assert_registry(f, "x", "https://registry.yarnpkg.com", "-");
    fx_free(f);
}

static void test_yarnrc_yml_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int line;
        const char *msg;
    } cases[] = {
        { "npmRegistryServer: \"https://x.example\n", 1, "invalid YAML" },
        { "a: 1\n b: 2\nc: [\n", 2, "invalid YAML" },
        { "- just\n- a list\n", 1, "not a mapping" },
        { "npmRegistryServer: [a, b]\n", 1, "not a string" },
        { "npmScopes:\n  corp:\n    npmRegistryServer: \"${REG:-https://x.example}\"\n", 3,
          "environment variable" },
        { "npmScopes: [corp]\n", 1, "npmScopes is not a mapping" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture *f = fx_new("https://registry.yarnpkg.com");
        put(f, ".yarnrc.yml", cases[i].text);
        assert_false(sl_npmcfg_load_yarnrc_yml(f->cfg, f->proj, &f->err));
        assert_string_equal(f->err.file, "proj/.yarnrc.yml");
        assert_int_equal(f->err.line, cases[i].line);
        assert_non_null(strstr(f->err.msg, cases[i].msg));
        fx_free(f);
    }
}

/* ---- adding entries ----------------------------------------------------- */

static void test_add_url_adds_github_redirect_hosts(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        int ret;
        const char *want;
    } cases[] = {
        { "https://registry.npmjs.org/x/-/x-1.0.0.tgz", 1, "registry.npmjs.org:443" },
        { "https://github.com/o/r/archive/v1.tar.gz", 1, "codeload.github.com:443 github.com:443" },
        { "https://github.com/o/r/releases/download/v1/x.tgz", 1,
          "github.com:443 release-assets.githubusercontent.com:443" },
        { "https://api.github.com/repos/o/r/tarball/abc", 1, "api.github.com:443 codeload.github.com:443" },
        { "https://github.com/o/r.git", 1, "github.com:443" },
        { "http://npm.example:8080/x.tgz#sha1", 1, "npm.example:8080" },
        { "git+ssh://git@git.example:team/r.git#abc", 1, "git.example:22" },
        { "file:../x.tgz", 0, "" },
        { "../x", 0, "" },
        { "https://host.example:0/x", -1, "" },
        { "https://bad_host!.example/x", -1, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_derived *d = sl_derived_new();
        sl_lockerr err = { .msg = "" };
        char buf[512];
        int r = sl_npm_add_url(d, cases[i].url, strlen(cases[i].url), "lock", NULL, 7, &err);
        assert_int_equal(r, cases[i].ret);
        assert_string_equal(entries(d, buf, sizeof buf), cases[i].want);
        if (r < 0) {
            assert_string_equal(err.file, "lock");
            assert_int_equal(err.line, 7);
        }
        sl_derived_free(d);
    }
}

static void test_add_registry_names_the_config_file(void **state)
{
    (void)state;
    fixture *f = fx_new("https://registry.npmjs.org/");
    put(f, ".npmrc", "@corp:registry=https://npm.corp.example:8443/\n");
    assert_true(sl_npmcfg_load_npmrc(f->cfg, f->proj, &f->err));
    sl_derived *d = sl_derived_new();
    assert_true(sl_npm_add_registry(d, f->cfg, "@corp/ui", 8, "lock", 0, &f->err));
    assert_true(sl_npm_add_registry(d, f->cfg, "react", 5, "lock", 0, &f->err));
    const char *const *files;
    size_t nfiles;
    const sl_entry *e = sl_derived_entry(d, 0, &files, &nfiles);
    assert_string_equal(e->host.name, "npm.corp.example");
    assert_int_equal(e->port, 8443);
    assert_int_equal(nfiles, 2);
    assert_string_equal(files[0], "lock");
    assert_string_equal(files[1], "proj/.npmrc");
    e = sl_derived_entry(d, 1, &files, &nfiles);
    assert_string_equal(e->host.name, "registry.npmjs.org");
    assert_int_equal(nfiles, 1);
    sl_derived_free(d);
    fx_free(f);
}

static void test_conflict_line(void **state)
{
    (void)state;
    assert_int_equal(sl_npm_conflict_line("a\nb\n", 4), 0);
    assert_int_equal(sl_npm_conflict_line("", 0), 0);
    const char *t = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> x\n";
    assert_int_equal(sl_npm_conflict_line(t, strlen(t)), 2);
    t = "a\r\nb\r\n=======\r\n";
    assert_int_equal(sl_npm_conflict_line(t, strlen(t)), 3);
    t = "x\n  <<<<<<< indented is not a marker\n========== neither\n";
    assert_int_equal(sl_npm_conflict_line(t, strlen(t)), 0);
    t = ">>>>>>>";
    assert_int_equal(sl_npm_conflict_line(t, strlen(t)), 1);
}

static void test_scope(void **state)
{
    (void)state;
    size_t n = 0;
    assert_true(sl_npm_scope("@corp/ui", 8, &n));
    assert_int_equal(n, 5);
    assert_false(sl_npm_scope("corp/ui", 7, &n));
    assert_false(sl_npm_scope("@corp", 5, &n));
    assert_false(sl_npm_scope("@/ui", 4, &n));
    assert_false(sl_npm_scope("", 0, &n));
}

/* ---- the Yarn 1 syntax ---------------------------------------------------- */

typedef struct rec {
    char text[1024];
    size_t k;
} rec;

static bool record(void *ctx, sl_y1_event ev, int depth, const sl_y1_tok *key, size_t nkeys,
                   const sl_y1_tok *value, int line)
{
    rec *r = ctx;
    char kb[128] = "", vb[128] = "";
    if (key)
        sl_y1_text(key, kb, sizeof kb);
    if (value)
        sl_y1_text(value, vb, sizeof vb);
    const char *kind = ev == SL_Y1_OPEN ? "open" : ev == SL_Y1_PAIR ? "pair" : "close";
    r->k += (size_t)snprintf(r->text + r->k, sizeof r->text - r->k, "%d:%s%d", line, kind, depth);
    if (key)
        r->k += (size_t)snprintf(r->text + r->k, sizeof r->text - r->k, "(%s/%zu)", kb, nkeys);
    if (value)
        r->k += (size_t)snprintf(r->text + r->k, sizeof r->text - r->k, "=%s%s", vb,
                                 value->kind == SL_Y1_NUMBER ? "#" : value->kind == SL_Y1_BOOL ? "?" : "");
    r->k += (size_t)snprintf(r->text + r->k, sizeof r->text - r->k, " ");
    return true;
}

static void test_y1_events(void **state)
{
    (void)state;
    const char *t = "\xef\xbb\xbf# yarn lockfile v1\n"
                    "\n"
                    "\"a@^1\", a@^1.2:\n"
                    "  version \"1.2.0\"\n"
                    "  dependencies:\n"
                    "    b \"^2\"  # comment\n"
                    "  optional true\r\n"
                    "b@^2:\n"
                    "  version \"2.0.0\"\n"
                    "top 42\n";
    rec r = { .k = 0 };
    int line;
    const char *why;
    assert_true(sl_y1_parse(t, strlen(t), record, &r, &line, &why));
    assert_string_equal(r.text, "3:open0(a@^1/2) 4:pair1(version/1)=1.2.0 5:open1(dependencies/1) "
                                "6:pair2(b/1)=^2 7:close1 7:pair1(optional/1)=true? 8:close0 "
                                "8:open0(b@^2/1) 9:pair1(version/1)=2.0.0 10:close0 "
                                "10:pair0(top/1)=42# ");
}

static void test_y1_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int line;
        const char *why;
    } cases[] = {
        { "a:\n   b \"1\"\n", 2, "indentation is not a multiple of two spaces" },
        { "a \"1\"\n  b \"2\"\n", 2, "unexpected indentation" },
        { "a:\n    b \"2\"\n", 2, "unexpected indentation" },
        { "a \"unterminated\n", 1, "unterminated string" },
        { "a \"bad \\x escape\"\n", 1, "bad escape in a string" },
        { "a \"bad \\u12 escape\"\n", 1, "bad \\u escape in a string" },
        { "a \"tab\there\"\n", 1, "control character in a string" },
        { "a\n", 1, "a key without a value" },
        { "a: b\n", 1, "unexpected text after ':'" },
        { "a \"1\" \"2\"\n", 1, "unexpected text after a value" },
        { "a 1.2.3\n", 1, "unexpected character after a value" },
        { "\ta \"1\"\n", 1, "unexpected character" },
        { "@scope/a@1:\n", 1, "unexpected character" },
        { "a, :\n", 1, "unexpected character" },
        { "a, 12:\n", 1, "expected a key after ','" },
        { "12 \"x\"\n", 1, "expected a key" },
        { "{\n", 1, "unexpected character" },
        { "a \"x\\", 1, "unterminated string" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rec r = { .k = 0 };
        int line = -1;
        const char *why = NULL;
        assert_false(sl_y1_parse(cases[i].text, strlen(cases[i].text), record, &r, &line, &why));
        assert_int_equal(line, cases[i].line);
        assert_non_null(why);
        assert_string_equal(why, cases[i].why);
    }
}

static bool stop_at_pair(void *ctx, sl_y1_event ev, int depth, const sl_y1_tok *key, size_t nkeys,
                         const sl_y1_tok *value, int line)
{
    (void)ctx, (void)depth, (void)key, (void)nkeys, (void)value, (void)line;
    return ev != SL_Y1_PAIR;
}

static void test_y1_callback_stops_the_parse(void **state)
{
    (void)state;
    const char *t = "a:\n  b \"1\"\n";
    int line;
    const char *why = "unset";
    assert_false(sl_y1_parse(t, strlen(t), stop_at_pair, NULL, &line, &why));
    assert_null(why);
    assert_int_equal(line, 2);
}

static void test_y1_text_decodes_escapes(void **state)
{
    (void)state;
    static const struct {
        const char *raw;
        const char *want;
    } cases[] = {
        { "plain", "plain" },
        { "q\\\"\\\\\\/x", "q\"\\/x" },
        { "\\n\\t\\r\\b\\f", "\n\t\r\b\f" },
        { "\\u0041\\u00e9\\u20ac", "A\xc3\xa9\xe2\x82\xac" },
        { "\\ud83d\\ude00", "\xf0\x9f\x98\x80" },
        { "\\ud83dx", "\xed\xa0\xbdx" },    /* a lone surrogate, as JSON.parse keeps it */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_y1_tok t = { .kind = SL_Y1_STRING, .s = cases[i].raw, .len = strlen(cases[i].raw), .quoted = true };
        char buf[64];
        size_t n = sl_y1_text(&t, buf, sizeof buf);
        assert_int_equal(n, strlen(cases[i].want));
        assert_string_equal(buf, cases[i].want);
    }
    /* cut at the buffer, full length returned */
    sl_y1_tok t = { .kind = SL_Y1_STRING, .s = "abcdef", .len = 6, .quoted = false };
    char small[4];
    assert_int_equal(sl_y1_text(&t, small, sizeof small), 6);
    assert_string_equal(small, "abc");
    assert_int_equal(sl_y1_text(&t, NULL, 0), 6);
}

/* ---- libyaml documents ---------------------------------------------------- */

static void test_yaml_error_line_stays_in_the_file(void **state)
{
    (void)state;
    /* a flow mapping cut off at the end of a file with no final newline */
    const char *t = "a: 1\nb: {c: d";
    yaml_parser_t p;
    yaml_document_t doc;
    bool end;
    sl_lockerr err = { .msg = "" };
    assert_true(yaml_parser_initialize(&p));
    yaml_parser_set_input_string(&p, (const unsigned char *)t, strlen(t));
    assert_false(sl_yaml_next(&p, &doc, &end, "f.yaml", &err));
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.msg, "invalid YAML"));
    yaml_parser_delete(&p);

    /* invalid UTF-8: the reader reports an offset, turned into a line */
    t = "a: 1\nb: 2\nc: \xff\n";
    assert_true(yaml_parser_initialize(&p));
    yaml_parser_set_input_string(&p, (const unsigned char *)t, strlen(t));
    assert_false(sl_yaml_next(&p, &doc, &end, "f.yaml", &err));
    assert_int_equal(err.line, 3);
    yaml_parser_delete(&p);
}

static void test_yaml_helpers(void **state)
{
    (void)state;
    const char *t = "a: x\nb: {c: 'd'}\n---\nsecond: 1\n";
    yaml_parser_t p;
    yaml_document_t doc;
    bool end;
    sl_lockerr err = { .msg = "" };
    assert_true(yaml_parser_initialize(&p));
    yaml_parser_set_input_string(&p, (const unsigned char *)t, strlen(t));
    assert_true(sl_yaml_next(&p, &doc, &end, "f.yaml", &err));
    assert_false(end);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    size_t n;
    assert_string_equal(sl_yaml_str(sl_yaml_get(&doc, root, "a"), &n), "x");
    yaml_node_t *b = sl_yaml_get(&doc, root, "b");
    assert_int_equal(sl_yaml_line(b), 2);
    assert_null(sl_yaml_str(b, &n));
    assert_string_equal(sl_yaml_str(sl_yaml_get(&doc, b, "c"), &n), "d");
    assert_null(sl_yaml_get(&doc, root, "missing"));
    assert_null(sl_yaml_get(&doc, sl_yaml_get(&doc, root, "a"), "a"));   /* not a mapping */
    yaml_document_delete(&doc);
    assert_true(sl_yaml_next(&p, &doc, &end, "f.yaml", &err));
    assert_false(end);
    yaml_document_delete(&doc);
    assert_true(sl_yaml_next(&p, &doc, &end, "f.yaml", &err));
    assert_true(end);
    yaml_parser_delete(&p);
}


/* ---- --pins: the URLs the clients derive, and the fallbacks ---------- */

static void assert_url(char *got, const char *want)
{
    if (!want) {
        assert_null(got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_tarball_url_is_the_registry_layout(void **state)
{
    (void)state;
    assert_url(sl_npm_tarball_url("https://registry.npmjs.org/", "@babel/core", 11, "7.24.0", 6),
               "https://registry.npmjs.org:443/@babel/core/-/core-7.24.0.tgz");
    /* a registry path without its trailing '/' gets one (getNpmTarballUrl) */
    assert_url(sl_npm_tarball_url("https://art.corp.example/api/npm/npm-remote", "ms", 2, "2.1.3", 5),
               "https://art.corp.example:443/api/npm/npm-remote/ms/-/ms-2.1.3.tgz");
    /* build metadata is not in the file name */
    assert_url(sl_npm_tarball_url("http://[::1]:4873/", "x", 1, "1.0.0+build.7", 13),
               "http://[::1]:4873/x/-/x-1.0.0.tgz");
    /* what a rule's path would read otherwise: '*' is a wildcard */
    assert_url(sl_npm_tarball_url("https://r.example/", "*", 1, "1.0.0", 5), NULL);
    assert_url(sl_npm_tarball_url("https://r.example/", "a/b", 3, "1.0.0", 5), NULL);
    assert_url(sl_npm_tarball_url("https://r.example/", "@s/", 3, "1.0.0", 5), NULL);
    assert_url(sl_npm_tarball_url("https://r.example/", "@s/../x", 7, "1.0.0", 5), NULL);
    assert_url(sl_npm_tarball_url("https://r.example/", "x", 1, "1.0.0/../../y", 13), NULL);
    assert_url(sl_npm_tarball_url("https://r.example/", "x", 1, "", 0), NULL);
    assert_url(sl_npm_tarball_url("not a url", "x", 1, "1.0.0", 5), NULL);
}

static void test_packument_url_escapes_the_scope_slash(void **state)
{
    (void)state;
    assert_url(sl_npm_packument_url("https://registry.npmjs.org/", "@corp/auth", 10),
               "https://registry.npmjs.org:443/@corp%2fauth");
    /* removeTrailingSlashes: every trailing '/' goes */
    assert_url(sl_npm_packument_url("https://r.example/npm///", "left-pad", 8), "https://r.example:443/npm/left-pad");
    assert_url(sl_npm_packument_url("https://r.example", "left-pad", 8), "https://r.example:443/left-pad");
    assert_url(sl_npm_packument_url("https://r.example/", "a?b", 3), NULL);
}

static void rewrite(const char *registry, const char *resolved, const char *prefix, const char *want)
{
    sl_url u;
    assert_true(sl_url_parse(resolved, strlen(resolved), &u));
    assert_url(sl_npm_registry_rewrite(registry, &u, prefix), want);
}

static void test_registry_rewrite_is_arborists(void **state)
{
    (void)state;
    /* scheme, host and port from the registry, its path in front; the query goes */
    rewrite("http://art.corp.example:8081/api/npm/npm-remote/",
            "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz?cache=1",
            NULL, "http://art.corp.example:8081/api/npm/npm-remote/is-number/-/is-number-7.0.0.tgz");
    /* a path already under the registry's is not prefixed twice */
    rewrite("https://art.corp.example/api/npm/", "https://registry.npmjs.org/api/npm/x/-/x-1.0.0.tgz", NULL,
            "https://art.corp.example:443/api/npm/x/-/x-1.0.0.tgz");
    /* "/npm" is not a prefix of "/npm-run-path" */
    rewrite("https://m.example/npm/", "https://registry.npmjs.org/npm-run-path/-/npm-run-path-4.0.1.tgz", NULL,
            "https://m.example:443/npm/npm-run-path/-/npm-run-path-4.0.1.tgz");
    /* a registry without a path: the host alone changes */
    rewrite("https://m.example", "https://registry.npmjs.org/@s/x/-/x-1.0.0.tgz", NULL,
            "https://m.example:443/@s/x/-/x-1.0.0.tgz");
    /* replace-registry-host as a URL: its path is what the registry's replaces */
    rewrite("https://npm.corp.example/repository/npm-group/",
            "https://nexus-old.corp.example/repository/npm-proxy/big.js/-/big.js-6.2.1.tgz", "/repository/npm-proxy",
            "https://npm.corp.example:443/repository/npm-group/big.js/-/big.js-6.2.1.tgz");
}

static void test_registry_join_is_url_resolution(void **state)
{
    (void)state;
    const char *reg = "https://reg.example/npm/";
    assert_url(sl_npm_registry_join(reg, "foo/-/foo-1.0.0.tgz", 19), "https://reg.example:443/npm/foo/-/foo-1.0.0.tgz");
    assert_url(sl_npm_registry_join("https://reg.example/npm", "foo.tgz", 7), "https://reg.example:443/npm/foo.tgz");
    assert_url(sl_npm_registry_join(reg, "/abs/x.tgz", 10), "https://reg.example:443/abs/x.tgz");
    assert_url(sl_npm_registry_join(reg, "//cdn.example/x.tgz", 19), "https://cdn.example/x.tgz");
    /* what URL resolution would change, or reads as a scheme: not joined */
    assert_url(sl_npm_registry_join(reg, "../x.tgz", 8), NULL);
    assert_url(sl_npm_registry_join(reg, "a/./b.tgz", 9), NULL);
    assert_url(sl_npm_registry_join(reg, "a/..", 4), NULL);
    assert_url(sl_npm_registry_join(reg, "x:y/z.tgz", 9), NULL);
    assert_url(sl_npm_registry_join(reg, "a\\b.tgz", 7), NULL);
    assert_url(sl_npm_registry_join(reg, "a.tgz?x", 7), NULL);
    assert_url(sl_npm_registry_join(reg, "", 0), NULL);
    /* a ':' after the first segment is only a path */
    assert_url(sl_npm_registry_join(reg, "a/b:c.tgz", 9), "https://reg.example:443/npm/a/b:c.tgz");
}

static char *printed(sl_derived *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    sl_derived_print(d, f);
    fclose(f);
    return buf;
}

#define SRI512 "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="

static void test_pins_rules_and_fallbacks(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    sl_derived_set_pins(d, true);
    sl_lockerr err = { 0 };
    sl_npm_pins p;
    sl_npm_pins_init(&p, d, "l.json", &err);
    /* a scoped packument on corp: that registry is a host entry, whatever it serves */
    sl_npm_pins_block_scoped(&p, "https://npm.corp.example:8443/", "@corp/ui", 8, "npm");
    sl_npm_pins_block_scoped(&p, "https://registry.npmjs.org/", "left-pad", 8, "npm");   /* unscoped: nothing */
    const char *u1 = "https://npm.corp.example:8443/@corp/ui/-/ui-1.0.0.tgz";
    assert_int_equal(sl_npm_pin_tarball(&p, u1, strlen(u1), SRI512, strlen(SRI512), ".npmrc", 3), 1);
    /* sha1 and sha512 together: the sha512 pins */
    const char *u2 = "https://registry.npmjs.org/a/-/a-1.0.0.tgz";
    const char *both = "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk= " SRI512;
    assert_int_equal(sl_npm_pin_tarball(&p, u2, strlen(u2), both, strlen(both), NULL, 4), 1);
    /* sha1 alone: an unpinned rule for its path, the host having rules */
    const char *u3 = "https://registry.npmjs.org/b/-/b-1.0.0.tgz";
    assert_int_equal(sl_npm_pin_tarball(&p, u3, strlen(u3), "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=", 33, NULL, 5), 1);
    /* a GitHub archive: pinned where it is asked for, its redirect target a fallback */
    const char *u4 = "https://github.com/o/r/archive/v1.tar.gz";
    assert_int_equal(sl_npm_pin_tarball(&p, u4, strlen(u4), SRI512, strlen(SRI512), NULL, 6), 1);
    const char *u5 = "https://registry.npmjs.org/a";
    assert_int_equal(sl_npm_pin_metadata(&p, u5, strlen(u5), NULL, "packument", 7), 1);
    assert_int_equal(sl_npm_pin_metadata(&p, "./x", 3, NULL, "local", 7), 0);
    assert_int_equal(sl_npm_pin_tarball(&p, "https://h.example:0/x", 21, SRI512, strlen(SRI512), NULL, 8), -1);
    assert_int_equal(err.line, 8);
    char *out = printed(d);
    assert_string_equal(out,
        "GET github.com:443/o/r/archive/v1.tar.gz " SRI512 "  # l.json\n"
        "GET registry.npmjs.org:443/a  # l.json: packument\n"
        "GET registry.npmjs.org:443/a/-/a-1.0.0.tgz " SRI512 "  # l.json\n"
        "GET registry.npmjs.org:443/b/-/b-1.0.0.tgz  # l.json: not pinned: only a sha1 integrity, too weak to pin\n"
        "codeload.github.com:443  # l.json: GitHub redirects a download here, to a path not known offline\n"
        "npm.corp.example:8443  # l.json, .npmrc: npm asks for the packument of @corp/ui as @corp%2fui, which the "
        "gate refuses (an encoded '/'): this registry cannot be inspected\n");
    free(out);
    sl_npm_pins_free(&p);
    sl_derived_free(d);
}

/* A URL whose path no rule can hold as it is: the host falls back, saying
 * why, and the run goes on (a crafted lockfile cannot widen a rule with a
 * '*', nor stop the run with a path the rule syntax refuses). */
static void test_pins_paths_no_rule_can_hold(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    sl_derived_set_pins(d, true);
    sl_lockerr err = { 0 };
    sl_npm_pins p;
    sl_npm_pins_init(&p, d, "l.json", &err);
    const char *star = "https://a.example/x/-/*.tgz";
    const char *twice = "https://b.example//x.tgz";
    const char *space = "https://c.example/x y.tgz";
    assert_int_equal(sl_npm_pin_tarball(&p, star, strlen(star), SRI512, strlen(SRI512), NULL, 1), 1);
    assert_int_equal(sl_npm_pin_tarball(&p, twice, strlen(twice), SRI512, strlen(SRI512), NULL, 2), 1);
    assert_int_equal(sl_npm_pin_metadata(&p, space, strlen(space), NULL, "packument", 3), 1);
    char *out = printed(d);
    assert_string_equal(out,
        "a.example:443  # l.json: not pinned: its URL's path cannot be a rule (a '*' in it would be a wildcard)\n"
        "b.example:443  # l.json: not pinned: its URL's path cannot be a rule (empty segment ('//') in path)\n"
        "c.example:443  # l.json: not pinned: its URL's path cannot be a rule (space or control byte in path)\n");
    free(out);
    sl_npm_pins_free(&p);
    sl_derived_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npmrc_absent_means_defaults),
        cmocka_unit_test(test_npmrc_registry_and_scopes),
        cmocka_unit_test(test_npmrc_refuses_unusable_registries),
        cmocka_unit_test(test_npmrc_auth_keys_are_ignored),
        cmocka_unit_test(test_replace_registry_host_modes),
        cmocka_unit_test(test_yarnrc_is_asked_after_npmrc),
        cmocka_unit_test(test_yarnrc_errors),
        cmocka_unit_test(test_yarnrc_yml),
        cmocka_unit_test(test_yarnrc_yml_errors),
        cmocka_unit_test(test_add_url_adds_github_redirect_hosts),
        cmocka_unit_test(test_add_registry_names_the_config_file),
        cmocka_unit_test(test_conflict_line),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_y1_events),
        cmocka_unit_test(test_y1_errors),
        cmocka_unit_test(test_y1_callback_stops_the_parse),
        cmocka_unit_test(test_y1_text_decodes_escapes),
        cmocka_unit_test(test_yaml_error_line_stays_in_the_file),
        cmocka_unit_test(test_yaml_helpers),
        cmocka_unit_test(test_tarball_url_is_the_registry_layout),
        cmocka_unit_test(test_packument_url_escapes_the_scope_slash),
        cmocka_unit_test(test_registry_rewrite_is_arborists),
        cmocka_unit_test(test_registry_join_is_url_resolution),
        cmocka_unit_test(test_pins_rules_and_fallbacks),
        cmocka_unit_test(test_pins_paths_no_rule_can_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
