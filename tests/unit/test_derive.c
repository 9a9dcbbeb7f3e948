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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
