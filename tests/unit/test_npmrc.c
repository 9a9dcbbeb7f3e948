/* npm-family configuration (.npmrc, .yarnrc, .yarnrc.yml), the Yarn 1 text
 * syntax and the helpers the npm, Yarn and pnpm readers share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
