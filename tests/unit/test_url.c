/* URL parsing for lockfiles: schemes, ports (LOCKFILES.md R2), userinfo,
 * IPv6, scp-style, and what is not a URL. Table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "url.h"

typedef struct url_case {
    const char *in;
    size_t len;            /* explicit, so that embedded NULs count */
    bool ok;
    const char *scheme;
    const char *host;
    int port;
    const char *path;
    bool scp;
} url_case;

#define OK(in, scheme, host, port, path) { in, sizeof(in) - 1, true, scheme, host, port, path, false }
#define SCP(in, host, path) { in, sizeof(in) - 1, true, "ssh", host, 22, path, true }
#define NO(in) { in, sizeof(in) - 1, false, NULL, NULL, -1, NULL, false }

static const url_case url_cases[] = {
    /* default ports, R2 */
    OK("https://registry.npmjs.org/a/-/a-1.0.0.tgz", "https", "registry.npmjs.org", 443, "/a/-/a-1.0.0.tgz"),
    OK("http://mirror.example/simple/", "http", "mirror.example", 80, "/simple/"),
    OK("ssh://git@github.com/o/r.git", "ssh", "github.com", 22, "/o/r.git"),
    OK("git://git.example.org/r.git", "git", "git.example.org", 9418, "/r.git"),
    OK("HTTPS://Registry.Example/x", "https", "Registry.Example", 443, "/x"),
    /* compound schemes: the transport after the last '+' */
    OK("git+https://github.com/o/r.git#abc", "git+https", "github.com", 443, "/o/r.git"),
    OK("git+http://git.example/r", "git+http", "git.example", 80, "/r"),
    OK("git+ssh://git@github.com/o/r.git#abc", "git+ssh", "github.com", 22, "/o/r.git"),
    OK("git+git://git.example/r", "git+git", "git.example", 9418, "/r"),
    OK("registry+https://github.com/rust-lang/crates.io-index", "registry+https", "github.com", 443,
       "/rust-lang/crates.io-index"),
    OK("sparse+https://index.example:8443/index/", "sparse+https", "index.example", 8443, "/index/"),
    OK("svn+ssh://svn.example/repo", "svn+ssh", "svn.example", 22, "/repo"),
    /* explicit ports win */
    OK("https://npm.example.com:8443/b.tgz", "https", "npm.example.com", 8443, "/b.tgz"),
    OK("http://h.example:443/", "http", "h.example", 443, "/"),
    OK("ssh://git@git.example:2222/r.git", "ssh", "git.example", 2222, "/r.git"),
    OK("https://h.example:65535", "https", "h.example", 65535, ""),
    OK("https://h.example:1/", "https", "h.example", 1, "/"),
    OK("https://h.example:/x", "https", "h.example", 443, "/x"),          /* empty port: default */
    /* invalid or unknown ports: a host, port -1 */
    OK("https://h.example:0/", "https", "h.example", -1, "/"),
    OK("https://h.example:65536/", "https", "h.example", -1, "/"),
    OK("https://h.example:08443/", "https", "h.example", -1, "/"),
    OK("https://h.example:44x/", "https", "h.example", -1, "/"),
    OK("https://h.example:-1/", "https", "h.example", -1, "/"),
    OK("https://h.example:99999999999/", "https", "h.example", -1, "/"),
    OK("ftp://ftp.example/pub", "ftp", "ftp.example", -1, "/pub"),
    OK("ftp://ftp.example:21/pub", "ftp", "ftp.example", 21, "/pub"),
    /* userinfo skipped, up to the last '@' */
    OK("https://user:pass@npm.example.com/x", "https", "npm.example.com", 443, "/x"),
    OK("https://user@h.example:8080/x", "https", "h.example", 8080, "/x"),
    OK("https://us@er:p@ss@h.example/x", "https", "h.example", 443, "/x"),
    OK("https://:token@h.example/", "https", "h.example", 443, "/"),
    /* path, query and fragment */
    OK("https://h.example", "https", "h.example", 443, ""),
    OK("https://h.example?x=1", "https", "h.example", 443, ""),
    OK("https://h.example#frag", "https", "h.example", 443, ""),
    OK("https://h.example/p?q=1#f", "https", "h.example", 443, "/p"),
    OK("git+https://github.com/o/r?branch=main#0123abc", "git+https", "github.com", 443, "/o/r"),
    OK("https://h.example/a@b/c", "https", "h.example", 443, "/a@b/c"),   /* '@' in the path */
    OK("https://h.example/a:b", "https", "h.example", 443, "/a:b"),
    /* IPv6 in brackets: host without them */
    OK("https://[2001:db8::1]/x", "https", "2001:db8::1", 443, "/x"),
    OK("https://[2001:db8::1]:8443/x", "https", "2001:db8::1", 8443, "/x"),
    OK("http://u:p@[::1]:8080", "http", "::1", 8080, ""),
    OK("https://203.0.113.7:8443/", "https", "203.0.113.7", 8443, "/"),
    /* an scp path after an ssh scheme, as npm and Yarn 1 write it */
    { "git+ssh://git@github.com:o/r.git#abc", 36, true, "git+ssh", "github.com", 22, "o/r.git", true },
    { "ssh://git@gitlab.example:group/r.git", 36, true, "ssh", "gitlab.example", 22, "group/r.git", true },
    /* scp-style */
    SCP("git@github.com:o/r.git", "github.com", "o/r.git"),
    SCP("git@gitlab.example:group/sub/r.git", "gitlab.example", "group/sub/r.git"),
    SCP("deploy@git.example:/srv/r.git", "git.example", "/srv/r.git"),
    SCP("user@[2001:db8::1]:r.git", "2001:db8::1", "r.git"),
    SCP("git@github.com:o/r.git#sha", "github.com", "o/r.git"),
    /* not URLs: no network host */
    NO(""),
    NO("github:o/r"),
    NO("gitlab:o/r"),
    NO("o/r"),
    NO("npm:1.2.3"),
    NO("npm:@scope/pkg@1.2.3"),
    NO("file:../local"),
    NO("file:///home/u/pkg.tgz"),
    NO("file://host/share/pkg.tgz"),
    NO("git+file:///srv/r.git"),
    NO("FILE:///x"),
    NO("link:../x"),
    NO("workspace:*"),
    NO("portal:../x"),
    NO("../x"),
    NO("./x.tgz"),
    NO("/abs/path.tgz"),
    NO("C:\\pkgs\\x.nupkg"),
    NO("https://"),
    NO("https:///x"),
    NO("https://user@/x"),
    NO("https://:443/x"),
    NO("https://[::1/x"),
    NO("https://[::1]x/"),
    NO("https://h.example\\x"),
    NO("https://h example/"),
    NO("https://h.example\n/"),
    NO("://h.example/"),
    NO("1https://h.example/"),
    NO("http:/h.example/"),
    NO("git@github.com"),            /* scp without ':' */
    NO("git@github.com:"),           /* scp without a path */
    NO("@github.com:o/r"),           /* scp without a user */
    NO("git@:o/r"),                  /* scp without a host */
    NO("a/git@h.example:o/r"),       /* '/' before the ':' */
    NO("git@h.example/x:o/r"),       /* '/' in the host */
    NO("git@[::1]r.git"),            /* scp IPv6 without ':' after ']' */
    NO("git@[::1]:"),
    NO("git@h.example:#sha"),
    NO("g it@h.example:o/r"),
    NO("averyveryverylongscheme+https://h.example/"),   /* scheme over 23 bytes */
    { "https://h.exa\0mple/", 19, false, NULL, NULL, -1, NULL, false },
};

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            print_error("\n");                                                                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void test_url_cases(void **state)
{
    (void)state;
    failures = 0;
    for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
        const url_case *c = &url_cases[i];
        sl_url u;
        bool ok = sl_url_parse(c->in, c->len, &u);
        CHECK(ok == c->ok, "'%s': parse %s, expected %s", c->in, ok ? "ok" : "failed",
              c->ok ? "ok" : "failure");
        if (!ok || !c->ok)
            continue;
        CHECK(!strcmp(u.scheme, c->scheme), "'%s': scheme '%s', expected '%s'", c->in, u.scheme,
              c->scheme);
        CHECK(u.host_len == strlen(c->host) && !memcmp(u.host, c->host, u.host_len),
              "'%s': host '%.*s', expected '%s'", c->in, (int)u.host_len, u.host, c->host);
        CHECK(u.port == c->port, "'%s': port %d, expected %d", c->in, u.port, c->port);
        CHECK(u.path_len == strlen(c->path) && !memcmp(u.path, c->path, u.path_len),
              "'%s': path '%.*s', expected '%s'", c->in, (int)u.path_len, u.path, c->path);
        CHECK(u.scp_style == c->scp, "'%s': scp_style %d, expected %d", c->in, u.scp_style, c->scp);
        /* everything points into the input */
        CHECK(u.host >= c->in && u.host + u.host_len <= c->in + c->len && u.path >= c->in &&
                  u.path + u.path_len <= c->in + c->len,
              "'%s': host or path outside the input", c->in);
    }
    assert_int_equal(failures, 0);
}

static void test_default_ports(void **state)
{
    (void)state;
    static const struct { const char *scheme; int port; } t[] = {
        { "https", 443 }, { "http", 80 }, { "ssh", 22 }, { "git", 9418 },
        { "git+https", 443 }, { "git+http", 80 }, { "git+ssh", 22 }, { "git+git", 9418 },
        { "registry+https", 443 }, { "sparse+https", 443 }, { "HTTPS", 443 }, { "Git+SSH", 22 },
        { "ftp", -1 }, { "file", -1 }, { "", -1 }, { "git+", -1 }, { "https+", -1 },
        { "npm", -1 },
    };
    failures = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK(sl_url_default_port(t[i].scheme) == t[i].port, "'%s': %d, expected %d", t[i].scheme,
              sl_url_default_port(t[i].scheme), t[i].port);
    assert_int_equal(failures, 0);
    assert_int_equal(sl_url_default_port(NULL), -1);
}

/* A URL cut at every length parses or not, but never reads past its end
 * (ASan checks: each prefix is copied into a buffer of exactly its size). */
static void test_every_prefix_is_safe(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
        const url_case *c = &url_cases[i];
        for (size_t n = 0; n <= c->len; n++) {
            char *copy = test_malloc(n ? n : 1);
            memcpy(copy, c->in, n);
            sl_url u;
            if (sl_url_parse(copy, n, &u)) {
                assert_true(u.host >= copy && u.host + u.host_len <= copy + n);
                assert_true(u.path >= copy && u.path + u.path_len <= copy + n);
            }
            test_free(copy);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_cases),
        cmocka_unit_test(test_default_ports),
        cmocka_unit_test(test_every_prefix_is_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
