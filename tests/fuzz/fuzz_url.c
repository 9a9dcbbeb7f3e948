/* URLs as lockfiles write them (allowlist/lockfiles/url.c), and the functions that
 * turn a URL into derived entries: sl_derived_add_url (derive.c),
 * sl_npm_add_url (npmrc.c), sl_pyindex_add / sl_pyurl_add / sl_pyvcs_add
 * (pyindex.c), and sl_display_untrusted (text.c) that quotes them in messages.
 *
 * Properties: host and path point into the input; the host is not empty;
 * the port is -1 or 1..65535; the scheme is lower-case; a URL rebuilt from
 * scheme, host, port and path parses back to the same parts; every entry
 * added to a derived set is a valid allowlist entry. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "derive.h"
#include "fuzz_util.h"
#include "npmrc.h"
#include "pyindex.h"
#include "text.h"
#include "url.h"

static void check_derived(sl_derived *d, const char *what)
{
    char text[300], err[512], shown[700];
    sl_allowlist *al = sl_allowlist_new();
    for (size_t i = 0; i < sl_derived_count(d); i++) {
        const sl_entry *e = sl_derived_entry(d, i, NULL, NULL);
        sl_entry_format(e, text, sizeof text);
        FUZZ_CHECK(e->port >= 1 && e->port <= 65535, "%s: port %d", what, e->port);
        FUZZ_CHECK(sl_allowlist_add_line(al, text, strlen(text), "f", 1, err, sizeof err),
                   "%s added '%s', not a valid allowlist entry: %s", what,
                   fuzz_show(text, strlen(text), shown, sizeof shown), err);
    }
    sl_allowlist_free(al);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char shown[600];
    sl_url u;
    bool ok = sl_url_parse(s, size, &u);
    if (ok) {
        FUZZ_CHECK(u.host >= s && u.host_len > 0 && u.host + u.host_len <= s + size,
                   "host outside the input");
        FUZZ_CHECK(u.path >= s && u.path + u.path_len <= s + size, "path outside the input");
        FUZZ_CHECK(u.port == -1 || (u.port >= 1 && u.port <= 65535), "port %d", u.port);
        FUZZ_CHECK(memchr(u.scheme, '\0', sizeof u.scheme) != NULL, "scheme not terminated");
        for (const char *c = u.scheme; *c; c++)
            FUZZ_CHECK(!(*c >= 'A' && *c <= 'Z'), "scheme '%s' not lower-case", u.scheme);
        (void)sl_url_default_port(u.scheme);

        /* Rebuild scheme://host:port/path and parse it again. */
        bool v6 = memchr(u.host, ':', u.host_len) != NULL;
        bool brackets = memchr(u.host, '[', u.host_len) || memchr(u.host, ']', u.host_len);
        if (!u.scp_style && !brackets && u.port > 0 && u.scheme[0] &&
            (u.path_len == 0 || u.path[0] == '/')) {
            char buf[8192];
            int n = snprintf(buf, sizeof buf, "%s://%s%.*s%s:%d%.*s", u.scheme, v6 ? "[" : "",
                             (int)u.host_len, u.host, v6 ? "]" : "", u.port, (int)u.path_len,
                             u.path);
            if (n > 0 && (size_t)n < sizeof buf) {
                sl_url v;
                FUZZ_CHECK(sl_url_parse(buf, (size_t)n, &v), "rebuilt URL '%s' does not parse",
                           fuzz_show(buf, (size_t)n, shown, sizeof shown));
                FUZZ_CHECK(v.host_len == u.host_len && !memcmp(v.host, u.host, u.host_len) &&
                               v.port == u.port && v.path_len == u.path_len &&
                               !memcmp(v.path, u.path, u.path_len) && !strcmp(v.scheme, u.scheme),
                           "rebuilt URL '%s' parses differently",
                           fuzz_show(buf, (size_t)n, shown, sizeof shown));
            }
        }
    }

    /* The consumers. */
    char err[512];
    sl_lockerr le;
    sl_pyprov prov = { { "fuzz/lockfile", "fuzz/config", NULL } };
    struct {
        const char *what;
        int r;
    } res[5];
    sl_derived *d[5];
    for (int i = 0; i < 5; i++)
        d[i] = sl_derived_new();
    memset(&le, 0, sizeof le);
    res[0].what = "sl_derived_add_url";
    res[0].r = sl_derived_add_url(d[0], s, size, "fuzz/lockfile", err, sizeof err);
    res[1].what = "sl_npm_add_url";
    res[1].r = sl_npm_add_url(d[1], s, size, "fuzz/lockfile", "fuzz/.npmrc", 3, &le);
    res[2].what = "sl_pyindex_add";
    res[2].r = sl_pyindex_add(d[2], s, size, &prov, err, sizeof err);
    res[3].what = "sl_pyurl_add";
    res[3].r = sl_pyurl_add(d[3], s, size, &prov, err, sizeof err);
    res[4].what = "sl_pyvcs_add";
    res[4].r = sl_pyvcs_add(d[4], s, size, &prov, err, sizeof err);
    for (int i = 0; i < 5; i++) {
        FUZZ_CHECK(res[i].r >= -1 && res[i].r <= 1, "%s returned %d", res[i].what, res[i].r);
        if (res[i].r == 1)
            FUZZ_CHECK(sl_derived_count(d[i]) > 0, "%s said added but added nothing", res[i].what);
        if (res[i].r == 0)
            FUZZ_CHECK(sl_derived_count(d[i]) == 0, "%s said nothing but added %zu", res[i].what,
                       sl_derived_count(d[i]));
        check_derived(d[i], res[i].what);
        sl_derived_free(d[i]);
    }
    (void)sl_pyindex_is_pypi(s, size);
    (void)sl_pyurl_is_wheel(s, size);
    (void)sl_pyurl_has_scheme(s, size);
    (void)sl_pyvcs_prefixed(s, size);
    /* Messages quote URLs with sl_display_untrusted: cut to fit, and no
     * control byte (nor, unless kept, a byte above 0x7f) gets through. */
    static const unsigned flags[] = { SL_DISPLAY_QMARK, SL_DISPLAY_HEX, SL_DISPLAY_KEEP_HIGH,
                                      SL_DISPLAY_APOS | SL_DISPLAY_HEX };
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        char show[16];
        sl_display_untrusted(s, size, show, sizeof show, flags[f]);
        size_t n = strlen(show);
        FUZZ_CHECK(n < sizeof show, "sl_display_untrusted overflow");
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)show[i];
            FUZZ_CHECK(c >= 0x20 && c != 0x7f && (c < 0x80 || (flags[f] & SL_DISPLAY_KEEP_HIGH)),
                       "sl_display_untrusted (flags %u) let byte 0x%02x through", flags[f], c);
        }
    }
    return 0;
}
