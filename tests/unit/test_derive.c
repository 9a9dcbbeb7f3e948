/* The derived allowlist: normalisation, merging, provenance, sorting and
 * both printers. Table-driven where the input space is large. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            print_error("\n");                                                                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The text printer's output, as a string to compare. */
static char *printed(sl_derived *d, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    if (json)
        sl_derived_print_json(d, f);
    else
        sl_derived_print(d, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* ---- hosts and ports, one add each ------------------------------------ */

typedef struct add_case {
    const char *host;
    int port;
    const char *entry;             /* expected "host:port", NULL: refused */
    const char *why;               /* substring of the error when refused */
} add_case;

static const add_case add_cases[] = {
    { "registry.npmjs.org", 443, "registry.npmjs.org:443", NULL },
    { "Registry.NPMjs.ORG", 443, "registry.npmjs.org:443", NULL },
    { "registry.npmjs.org.", 443, "registry.npmjs.org:443", NULL },
    { "npm.example.com", 8443, "npm.example.com:8443", NULL },
    { "git.example", 22, "git.example:22", NULL },
    { "git.example", 9418, "git.example:9418", NULL },
    { "h.example", 1, "h.example:1", NULL },
    { "h.example", 65535, "h.example:65535", NULL },
    { "203.0.113.7", 443, "203.0.113.7:443", NULL },
    { "2001:db8::1", 443, "[2001:db8::1]:443", NULL },          /* as URLs give it */
    { "[2001:db8::1]", 8443, "[2001:db8::1]:8443", NULL },
    { "2001:DB8:0:0::1", 443, "[2001:db8::1]:443", NULL },
    { "b\xc3\xbc" "cher.example", 443, "xn--bcher-kva.example:443", NULL },
    { "localhost", 4873, "localhost:4873", NULL },
    { "h.example", 0, NULL, "invalid port" },
    { "h.example", -1, NULL, "invalid port" },
    { "h.example", 65536, NULL, "invalid port" },
    { "", 443, NULL, "invalid host" },
    { "h example", 443, NULL, "invalid host" },
    { "*.example.org", 443, NULL, "invalid host" },
    { ".example.org", 443, NULL, "invalid host" },
    { "127.1", 443, NULL, "invalid host" },
    { "a..b", 443, NULL, "invalid host" },
    { "h.example\n", 443, NULL, "\\x0a" },                       /* escaped in the message */
    { "fe80::1%eth0", 443, NULL, "invalid host" },
    { "\xff\xfe", 443, NULL, "\\xff\\xfe" },
};

static void test_add_normalises_and_validates(void **state)
{
    (void)state;
    failures = 0;
    for (size_t i = 0; i < sizeof add_cases / sizeof add_cases[0]; i++) {
        const add_case *c = &add_cases[i];
        sl_derived *d = sl_derived_new();
        char err[256] = "";
        bool ok = sl_derived_add(d, c->host, strlen(c->host), c->port, "lock", err, sizeof err);
        if (c->entry) {
            CHECK(ok, "'%s':%d refused: %s", c->host, c->port, err);
            if (ok) {
                char text[300];
                const sl_entry *e = sl_derived_entry(d, 0, NULL, NULL);
                CHECK(e && !strcmp(sl_entry_format(e, text, sizeof text), c->entry),
                      "'%s':%d gave '%s', expected '%s'", c->host, c->port, text, c->entry);
                CHECK(e && e->kind == SL_ENTRY_EXACT && e->port == c->port,
                      "'%s':%d: not an exact entry with its port", c->host, c->port);
            }
        } else {
            CHECK(!ok, "'%s':%d accepted", c->host, c->port);
            CHECK(strstr(err, c->why) != NULL, "'%s':%d: error '%s' lacks '%s'", c->host, c->port,
                  err, c->why);
            CHECK(sl_derived_count(d) == 0, "'%s':%d: refused but counted", c->host, c->port);
        }
        sl_derived_free(d);
    }
    assert_int_equal(failures, 0);
}

/* ---- URLs -------------------------------------------------------------- */

typedef struct url_case {
    const char *url;
    int rc;
    const char *entry;             /* when rc == 1; when -1, a substring of the error: */
    const char *why;
} url_case;

static const url_case url_cases[] = {
    { "https://registry.npmjs.org/a/-/a-1.0.0.tgz", 1, "registry.npmjs.org:443", NULL },
    { "https://user:secret@npm.example.com:8443/b.tgz", 1, "npm.example.com:8443", NULL },
    { "git+ssh://git@github.com/o/r.git#0123", 1, "github.com:22", NULL },
    { "git+ssh://git@github.com:o/r.git#0123", 1, "github.com:22", NULL },
    { "git@gitlab.example:group/r.git", 1, "gitlab.example:22", NULL },
    { "git://git.example/r.git", 1, "git.example:9418", NULL },
    { "http://PyPI.Mirror.Example/simple/", 1, "pypi.mirror.example:80", NULL },
    { "sparse+https://index.example:8443/index/", 1, "index.example:8443", NULL },
    { "https://[2001:db8::7]:8443/x", 1, "[2001:db8::7]:8443", NULL },
    { "file:../local", 0, NULL, NULL },
    { "file:///srv/pkg.tgz", 0, NULL, NULL },
    { "git+file:///srv/r.git", 0, NULL, NULL },
    { "link:../x", 0, NULL, NULL },
    { "workspace:*", 0, NULL, NULL },
    { "../x.tgz", 0, NULL, NULL },
    { "github:o/r", 0, NULL, NULL },
    { "", 0, NULL, NULL },
    { "https://h.example:0/", -1, NULL, "invalid port in URL 'https://h.example:0/'" },
    { "https://h.example:70000/", -1, NULL, "invalid port" },
    { "https://[2001:db8::7]:x/", -1, NULL, "invalid port" },
    { "ftp://ftp.example/pub/x.tgz", -1, NULL, "no known port for scheme 'ftp'" },
    { "https://", -1, NULL, "invalid URL 'https://'" },
    { "https://h example/", -1, NULL, "invalid URL" },
    { "https://h.example\n/", -1, NULL, "invalid URL 'https://h.example\\x0a/'" },
    { "https://127.1/", -1, NULL, "invalid host '127.1'" },
    { "https://bad_host!.example/", -1, NULL, "invalid host" },
};

static void test_add_url(void **state)
{
    (void)state;
    failures = 0;
    for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
        const url_case *c = &url_cases[i];
        sl_derived *d = sl_derived_new();
        char err[256] = "";
        int rc = sl_derived_add_url(d, c->url, strlen(c->url), "lock", err, sizeof err);
        CHECK(rc == c->rc, "'%s': %d, expected %d (%s)", c->url, rc, c->rc, err);
        CHECK(rc != -1 || (c->why && strstr(err, c->why)), "'%s': message '%s' lacks '%s'", c->url,
              err, c->why ? c->why : "(a reason)");
        CHECK(sl_derived_count(d) == (rc == 1 ? 1u : 0u), "'%s': %zu entries", c->url,
              sl_derived_count(d));
        if (rc == 1 && c->rc == 1) {
            char text[300];
            sl_entry_format(sl_derived_entry(d, 0, NULL, NULL), text, sizeof text);
            CHECK(!strcmp(text, c->entry), "'%s' gave '%s', expected '%s'", c->url, text, c->entry);
        }
        sl_derived_free(d);
    }
    assert_int_equal(failures, 0);
}

/* ---- merging, provenance, order ----------------------------------------- */

static void add(sl_derived *d, const char *host, int port, const char *file)
{
    char err[256];
    if (!sl_derived_add(d, host, strlen(host), port, file, err, sizeof err))
        fail_msg("%s:%d: %s", host, port, err);
}

static void test_sorted_bytewise_with_files_in_first_seen_order(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    add(d, "b.example", 22, "p/Gemfile.lock");
    add(d, "a.example", 8443, "p/package-lock.json");
    add(d, "A.example", 443, "p/yarn.lock");
    add(d, "a.example", 80, "p/package-lock.json");
    add(d, "a-b.example", 443, "p/package-lock.json");
    add(d, "2001:db8::1", 443, "p/Cargo.lock");
    add(d, "203.0.113.7", 443, "p/Cargo.lock");
    add(d, "a.example", 443, "p/package-lock.json");   /* second file, after yarn.lock */
    add(d, "a.example.", 443, "p/yarn.lock");           /* already there */
    add(d, "a.example", 443, "p/sub/package-lock.json");
    assert_int_equal(sl_derived_count(d), 7);
    char *text = printed(d, false);
    assert_string_equal(text,
                        "203.0.113.7:443  # p/Cargo.lock\n"
                        "[2001:db8::1]:443  # p/Cargo.lock\n"
                        "a-b.example:443  # p/package-lock.json\n"
                        "a.example:443  # p/yarn.lock, p/package-lock.json, p/sub/package-lock.json\n"
                        "a.example:80  # p/package-lock.json\n"
                        "a.example:8443  # p/package-lock.json\n"
                        "b.example:22  # p/Gemfile.lock\n");
    free(text);

    /* the accessor: same order, the entry's provenance is its first file */
    const char *const *files;
    size_t nfiles;
    const sl_entry *e = sl_derived_entry(d, 3, &files, &nfiles);
    assert_non_null(e);
    assert_string_equal(e->host.name, "a.example");
    assert_int_equal(e->port, 443);
    assert_string_equal(e->file, "p/yarn.lock");
    assert_int_equal(nfiles, 3);
    assert_string_equal(files[2], "p/sub/package-lock.json");
    assert_null(sl_derived_entry(d, 7, NULL, NULL));

    /* adding after reading re-sorts */
    add(d, "0.example", 443, "p/late");
    e = sl_derived_entry(d, 0, NULL, NULL);
    assert_string_equal(e->host.name, "0.example");
    sl_derived_free(d);
}

static void test_empty_set_prints_nothing_and_an_empty_json_list(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char *text = printed(d, false);
    assert_string_equal(text, "");
    free(text);
    char *js = printed(d, true);
    json_error_t je;
    json_t *root = json_loads(js, 0, &je);
    assert_non_null(root);
    json_t *entries = json_object_get(root, "entries");
    assert_true(json_is_array(entries));
    assert_int_equal(json_array_size(entries), 0);
    json_decref(root);
    free(js);
    sl_derived_free(d);
}

static void test_json_carries_the_same_as_text(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    add(d, "registry.npmjs.org", 443, "p/package-lock.json");
    add(d, "2001:db8::1", 8443, "p/Cargo.lock");
    add(d, "registry.npmjs.org", 443, "p/yarn.lock");
    add(d, "h.example", 443, "p/caf\xe9/package-lock.json");   /* not UTF-8 */
    char *js = printed(d, true);
    json_error_t je;
    json_t *root = json_loads(js, 0, &je);
    if (!root)
        fail_msg("not JSON (%s): %s", je.text, js);
    json_t *entries = json_object_get(root, "entries");
    assert_int_equal(json_array_size(entries), 3);

    json_t *e0 = json_array_get(entries, 0);
    assert_string_equal(json_string_value(json_object_get(e0, "entry")), "[2001:db8::1]:8443");
    assert_string_equal(json_string_value(json_object_get(e0, "host")), "2001:db8::1");
    assert_int_equal(json_integer_value(json_object_get(e0, "port")), 8443);

    json_t *e1 = json_array_get(entries, 1);
    assert_string_equal(json_string_value(json_object_get(e1, "entry")), "h.example:443");
    assert_string_equal(json_string_value(json_array_get(json_object_get(e1, "files"), 0)),
                        "p/caf?/package-lock.json");

    json_t *e2 = json_array_get(entries, 2);
    assert_string_equal(json_string_value(json_object_get(e2, "entry")), "registry.npmjs.org:443");
    json_t *files = json_object_get(e2, "files");
    assert_int_equal(json_array_size(files), 2);
    assert_string_equal(json_string_value(json_array_get(files, 0)), "p/package-lock.json");
    assert_string_equal(json_string_value(json_array_get(files, 1)), "p/yarn.lock");
    json_decref(root);
    free(js);
    sl_derived_free(d);
}

/* Many distinct hosts: the hash grows, nothing is lost or doubled. */
static void test_many_hosts(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char host[64];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 5000; i++) {
            snprintf(host, sizeof host, "h%04d.example", 4999 - i);
            add(d, host, 443, round ? "second" : "first");
        }
    assert_int_equal(sl_derived_count(d), 5000);
    for (size_t i = 0; i < 5000; i++) {
        const char *const *files;
        size_t nfiles;
        const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
        snprintf(host, sizeof host, "h%04zu.example", i);
        assert_string_equal(e->host.name, host);
        assert_int_equal(nfiles, 2);
        assert_string_equal(files[0], "first");
        assert_string_equal(files[1], "second");
    }
    sl_derived_free(d);
}

/* The cache of the last raw host must not merge different ports or files. */
static void test_repeated_adds(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    for (int i = 0; i < 100000; i++)
        add(d, "registry.npmjs.org", 443, "a/package-lock.json");
    add(d, "registry.npmjs.org", 8443, "a/package-lock.json");
    add(d, "registry.npmjs.org", 443, "b/package-lock.json");
    add(d, "REGISTRY.npmjs.org", 443, "a/package-lock.json");
    char *text = printed(d, false);
    assert_string_equal(text, "registry.npmjs.org:443  # a/package-lock.json, b/package-lock.json\n"
                              "registry.npmjs.org:8443  # a/package-lock.json\n");
    free(text);
    sl_derived_free(d);
}

/* A crafted directory name must not end the comment and add an entry. */
static void test_control_characters_in_file_names_stay_in_the_comment(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    add(d, "registry.npmjs.org", 443, "x\nevil.example:443 #\r\t\x7f/package-lock.json");
    char *text = printed(d, false);
    assert_string_equal(text, "registry.npmjs.org:443  # x?evil.example:443 #??" "?/package-lock.json\n");
    free(text);
    sl_derived_free(d);
}

/* ---- --pins: rules, merging, fallbacks, digests ---- */

#define D256A "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="   /* sha256 of "" */
#define D512A "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="

static void test_rules_print_sorted_before_hosts_with_digests_merged(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *a[] = { D512A }, *b[] = { D256A, D512A };
    assert_true(sl_derived_add(d, "pypi.org", 8, 443, "r.txt", err, sizeof err));
    assert_true(sl_derived_add_rule(d, "Registry.Example", 16, 443, "/x/-/x-1.tgz", 12, a, 1, "p/package-lock.json",
                                    NULL, err, sizeof err));
    /* the same pattern again, from another file: one rule, digests joined, no repeat;
     * the first note given stays */
    assert_true(sl_derived_add_rule(d, "registry.example", 16, 443, "/x/-/x-1.tgz", 12, b, 2, "q/package-lock.json",
                                    "tarball", err, sizeof err));
    assert_true(sl_derived_add_rule(d, "registry.example", 16, 443, "/x/-/x-1.tgz", 12, a, 1, "p/package-lock.json",
                                    "a later note is not added", err, sizeof err));
    assert_true(sl_derived_add_rule(d, "pypi.org", 8, 443, "/simple/x/", 10, NULL, 0, "r.txt", "index page", err,
                                    sizeof err));
    char *out = printed(d, false);
    assert_string_equal(out,
        "GET pypi.org:443/simple/x/  # r.txt: index page\n"
        "GET registry.example:443/x/-/x-1.tgz " D512A " " D256A "  # p/package-lock.json, q/package-lock.json: tarball\n"
        "pypi.org:443  # r.txt: shadowed: this host has request rules, which alone decide for it\n");
    free(out);
    /* what it prints, an allowlist reads back as the same rules */
    out = printed(d, true);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_t *e1 = json_array_get(json_object_get(j, "entries"), 1);
    assert_string_equal(json_string_value(json_object_get(e1, "path")), "/x/-/x-1.tgz");
    assert_int_equal(json_array_size(json_object_get(e1, "digests")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(j, "entries"), 0), "note")),
                        "index page");
    json_decref(j);
    free(out);
    sl_derived_free(d);
}

static void test_rule_inputs_are_validated(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *bad[] = { "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=" };
    assert_false(sl_derived_add_rule(d, "h.example", 9, 443, "/a", 2, bad, 1, "f", NULL, err, sizeof err));
    assert_non_null(strstr(err, "digest"));
    assert_false(sl_derived_add_rule(d, "h.example", 9, 443, "/a/../b", 7, NULL, 0, "f", NULL, err, sizeof err));
    assert_non_null(strstr(err, "cannot be a rule"));
    assert_false(sl_derived_add_rule(d, "h.example", 9, 0, "/a", 2, NULL, 0, "f", NULL, err, sizeof err));
    assert_false(sl_derived_add_rule(d, "*.example", 9, 443, "/a", 2, NULL, 0, "f", NULL, err, sizeof err));
    assert_int_equal(sl_derived_count(d), 0);
    sl_derived_free(d);
}

static void test_rule_urls_drop_query_and_fall_back_when_no_rule_can_name_them(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *a[] = { D256A };
    const char *u1 = "https://files.example/p/a-1.whl?x=1#sha256=00";
    assert_int_equal(sl_derived_add_rule_url(d, u1, strlen(u1), a, 1, "uv.lock", NULL, err, sizeof err), 1);
    const char *u2 = "https://odd.example/a*b.tgz";
    assert_int_equal(sl_derived_add_rule_url(d, u2, strlen(u2), a, 1, "uv.lock", NULL, err, sizeof err), 1);
    const char *u3 = "./local/pkg.tgz";
    assert_int_equal(sl_derived_add_rule_url(d, u3, strlen(u3), a, 1, "uv.lock", NULL, err, sizeof err), 0);
    const char *u4 = "https://bad host/x";
    assert_int_equal(sl_derived_add_rule_url(d, u4, strlen(u4), a, 1, "uv.lock", NULL, err, sizeof err), -1);
    char *out = printed(d, false);
    assert_string_equal(out,
        "GET files.example:443/p/a-1.whl " D256A "  # uv.lock\n"
        "odd.example:443  # uv.lock: not pinned: its URL's path cannot be a rule (a '*' in it would be a wildcard)\n");
    free(out);
    sl_derived_free(d);
}

/* A fallback with a path is a host entry where the host has no rules, and an
 * unpinned rule where it has (a host entry there would allow nothing). */
static void test_fallbacks_follow_the_host(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *a[] = { D512A };
    const char *g = "git+https://codeload.example/o/r/tar.gz/abc";
    assert_int_equal(sl_derived_add_fallback_url(d, g, strlen(g), "package-lock.json", "a git dependency has no digest",
                                                 err, sizeof err), 1);
    const char *s1 = "https://registry.example/old/-/old-1.tgz";
    assert_int_equal(sl_derived_add_fallback_url(d, s1, strlen(s1), "package-lock.json", "only a sha1 digest",
                                                 err, sizeof err), 1);
    const char *p = "https://registry.example/new/-/new-1.tgz";
    assert_int_equal(sl_derived_add_rule_url(d, p, strlen(p), a, 1, "package-lock.json", NULL, err, sizeof err), 1);
    assert_true(sl_derived_add_fallback(d, "proxy.example", 13, 443, NULL, 0, "go.sum", "h1: hashes a file tree",
                                        err, sizeof err));
    char *out = printed(d, false);
    assert_string_equal(out,
        "GET registry.example:443/new/-/new-1.tgz " D512A "  # package-lock.json\n"
        "GET registry.example:443/old/-/old-1.tgz  # package-lock.json: not pinned: only a sha1 digest\n"
        "codeload.example:443  # package-lock.json: a git dependency has no digest\n"
        "proxy.example:443  # go.sum: h1: hashes a file tree\n");
    free(out);
    /* a pinned rule for the pattern of an unpinned one: the bytes must match */
    assert_int_equal(sl_derived_add_rule_url(d, s1, strlen(s1), a, 1, "other.json", NULL, err, sizeof err), 1);
    out = printed(d, false);
    assert_non_null(strstr(out, "GET registry.example:443/old/-/old-1.tgz " D512A "  # package-lock.json, other.json"));
    free(out);
    sl_derived_free(d);
}

/* A set that holds only fallbacks with a path still counts and prints them
 * (they are resolved when first looked at, count and print included). */
static void test_fallbacks_alone_are_counted_and_printed(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *w = "https://services.example/dist/tool-1.zip";
    assert_int_equal(sl_derived_add_fallback_url(d, w, strlen(w), "wrapper.properties", "no checksum", err,
                                                 sizeof err), 1);
    assert_int_equal(sl_derived_count(d), 1);
    char *out = printed(d, false);
    assert_string_equal(out, "services.example:443  # wrapper.properties: no checksum\n");
    free(out);
    sl_derived_free(d);
    d = sl_derived_new();
    assert_int_equal(sl_derived_add_fallback_url(d, w, strlen(w), "wrapper.properties", "no checksum", err,
                                                 sizeof err), 1);
    out = printed(d, true);
    assert_non_null(strstr(out, "\"entry\": \"services.example:443\""));
    free(out);
    sl_derived_free(d);
}

static void test_sri_helpers(void **state)
{
    (void)state;
    char out[SL_SRI_MAX];
    const char *hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_true(sl_sri_from_hex("sha256", 6, hex, 64, out));
    assert_string_equal(out, D256A);
    assert_true(sl_sri_from_hex("SHA256", 6, "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", 64, out));
    assert_string_equal(out, D256A);
    assert_false(sl_sri_from_hex("sha256", 6, hex, 63, out));
    assert_false(sl_sri_from_hex("sha1", 4, hex, 40, out));
    assert_false(sl_sri_from_hex("md5", 3, hex, 32, out));
    assert_false(sl_sri_from_hex("sha256", 6, "g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 64, out));
    char list[4][SL_SRI_MAX];
    const char *npm = "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk= " D512A " " D512A "  sha512-short== " D256A "?opt";
    assert_int_equal(sl_sri_strong(npm, strlen(npm), list, 4), 1);
    assert_string_equal(list[0], D512A);
    assert_int_equal(sl_sri_strong("sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=", 33, list, 4), 0);
}

/* A host entry gathers the reasons of every fallback on it, and keeps them
 * when it is shadowed; a rule that would outgrow an allowlist line is an
 * error, not a line the gate would refuse. */
static void test_fallback_reasons_gather_and_long_rules_are_refused(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    assert_true(sl_derived_add_fallback(d, "h.example", 9, 443, NULL, 0, "a", "reason one", err, sizeof err));
    assert_true(sl_derived_add_fallback(d, "h.example", 9, 443, NULL, 0, "a", "reason two", err, sizeof err));
    assert_true(sl_derived_add_fallback(d, "h.example", 9, 443, NULL, 0, "b", "reason one", err, sizeof err));
    const char *a[] = { D256A };
    assert_true(sl_derived_add_rule(d, "h.example", 9, 443, "/x", 2, a, 1, "c", NULL, err, sizeof err));
    char *out = printed(d, false);
    assert_non_null(strstr(out, "h.example:443  # a, b: reason one; reason two; shadowed: "));
    free(out);
    /* SL_ENTRY_FIELDS_MAX - 2 digests fit in one rule, one more does not */
    static char dg[SL_ENTRY_FIELDS_MAX][SL_SRI_MAX];
    const char *dp[SL_ENTRY_FIELDS_MAX];
    for (int i = 0; i < SL_ENTRY_FIELDS_MAX; i++) {
        char hex[65];
        snprintf(hex, sizeof hex, "%064x", i);
        assert_true(sl_sri_from_hex("sha256", 6, hex, 64, dg[i]));
        dp[i] = dg[i];
    }
    assert_true(sl_derived_add_rule(d, "h.example", 9, 443, "/big", 4, dp, SL_ENTRY_FIELDS_MAX - 2, "c", NULL, err,
                                    sizeof err));
    assert_false(sl_derived_add_rule(d, "h.example", 9, 443, "/big", 4, dp + SL_ENTRY_FIELDS_MAX - 2, 1, "c", NULL,
                                     err, sizeof err));
    assert_non_null(strstr(err, "more digests than an allowlist line holds"));
    sl_derived_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_normalises_and_validates),
        cmocka_unit_test(test_add_url),
        cmocka_unit_test(test_sorted_bytewise_with_files_in_first_seen_order),
        cmocka_unit_test(test_empty_set_prints_nothing_and_an_empty_json_list),
        cmocka_unit_test(test_json_carries_the_same_as_text),
        cmocka_unit_test(test_many_hosts),
        cmocka_unit_test(test_repeated_adds),
        cmocka_unit_test(test_control_characters_in_file_names_stay_in_the_comment),
        cmocka_unit_test(test_rules_print_sorted_before_hosts_with_digests_merged),
        cmocka_unit_test(test_rule_inputs_are_validated),
        cmocka_unit_test(test_rule_urls_drop_query_and_fall_back_when_no_rule_can_name_them),
        cmocka_unit_test(test_fallbacks_follow_the_host),
        cmocka_unit_test(test_fallbacks_alone_are_counted_and_printed),
        cmocka_unit_test(test_sri_helpers),
        cmocka_unit_test(test_fallback_reasons_gather_and_long_rules_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
