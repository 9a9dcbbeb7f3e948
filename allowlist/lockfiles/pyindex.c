/* Python indexes, artifact URLs and VCS URLs → host:port entries. The URL
 * is taken apart here rather than handed to sl_derived_add_url whole,
 * because Python tools write things url.c rightly refuses: credentials made
 * of environment variables ("https://${USER}:${PASS}@host/simple"), which
 * the tool expands at run time but which name no host, and pip's "@ref"
 * after a VCS path. Only "scheme://host[:port]" is passed on. */
#include "pyindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

/* Longer than any host:port (253 + ":65535", IPv6 in brackets) plus a
 * scheme; anything longer is not a host. */
#define AUTH_MAX 300

typedef struct urlparts {
    char scheme[24];               /* lower-case; "ssh" for scp-style */
    const char *hostport;          /* after any userinfo */
    size_t hostport_len;
    const char *path;              /* from the first '/' (or after ':' for scp), to '?' or '#' */
    size_t path_len;
    bool scp;                      /* user@host:path, or an scp path after ssh:// */
} urlparts;

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_alnum(char c)
{
    return is_alpha(c) || (c >= '0' && c <= '9');
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool has_prefix_ci(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && strncasecmp(s, p, n) == 0;
}

static bool mem_has(const char *s, size_t len, char c)
{
    return len && memchr(s, c, len) != NULL;
}

/* Length of a "scheme:" prefix (letters, digits, '+', '-', '.', starting
 * with a letter), 0 if none. A one-letter scheme is a Windows drive. */
static size_t scheme_len(const char *s, size_t len)
{
    if (len == 0 || !is_alpha(s[0]))
        return 0;
    size_t i = 1;
    while (i < len && (is_alnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    return (i >= 2 && i < len && s[i] == ':') ? i : 0;
}

bool sl_pyurl_has_scheme(const char *s, size_t len)
{
    return scheme_len(s, len) > 0;
}

bool sl_pyvcs_prefixed(const char *s, size_t len)
{
    return has_prefix_ci(s, len, "git+") || has_prefix_ci(s, len, "hg+") ||
           has_prefix_ci(s, len, "svn+") || has_prefix_ci(s, len, "bzr+");
}

/* The transport of a (possibly compound) scheme: what follows the last '+'. */
static const char *transport(const char *scheme)
{
    const char *plus = strrchr(scheme, '+');
    return plus ? plus + 1 : scheme;
}

/* Split a URL. Returns 1 (network URL), 0 (names no network host: a path,
 * file:), -1 (looks like a URL but is unusable; message in err). */
static int split(const char *s, size_t len, urlparts *u, char *err, size_t errcap)
{
    memset(u, 0, sizeof *u);
    size_t sl = scheme_len(s, len);
    if (sl && sl + 3 <= len && memcmp(s + sl, "://", 3) == 0) {
        if (sl >= sizeof u->scheme) {
            snprintf(err, errcap, "URL scheme too long");
            return -1;
        }
        for (size_t i = 0; i < sl; i++)
            u->scheme[i] = lower(s[i]);
        if (!strcmp(transport(u->scheme), "file"))
            return 0;
        const char *auth = s + sl + 3, *end = s + len, *aend = auth;
        while (aend < end && *aend != '/' && *aend != '?' && *aend != '#')
            aend++;
        const char *h = auth;
        for (const char *p = auth; p < aend; p++)
            if (*p == '@')
                h = p + 1;
        u->hostport = h;
        u->hostport_len = (size_t)(aend - h);
        const char *pend = aend;
        while (pend < end && *pend != '?' && *pend != '#')
            pend++;
        u->path = aend;
        u->path_len = (size_t)(pend - aend);
        /* "ssh://git@github.com:o/r.git": an scp path after the scheme,
         * which Poetry and npm accept; the port is then the default. */
        const char *colon = u->hostport_len && u->hostport[0] != '[' ?
            memchr(u->hostport, ':', u->hostport_len) : NULL;
        if (colon && !strcmp(transport(u->scheme), "ssh")) {
            bool digits = colon + 1 < aend;
            for (const char *p = colon + 1; p < aend; p++)
                digits = digits && *p >= '0' && *p <= '9';
            if (!digits) {
                u->hostport_len = (size_t)(colon - u->hostport);
                u->path = colon + 1;
                u->path_len = (size_t)(pend - u->path);
                u->scp = true;
            }
        }
        if (u->hostport_len == 0) {
            snprintf(err, errcap, "URL has no host");
            return -1;
        }
        return 1;
    }
    if (sl) {
        /* "file:relative/path" and "git+file:..." are local. */
        char sch[24] = "";
        for (size_t i = 0; i < sl && i + 1 < sizeof sch; i++)
            sch[i] = lower(s[i]);
        if (!strcmp(transport(sch), "file"))
            return 0;
    }
    /* scp-style "user@host:path": a user is required, as git and url.c
     * require it, so that paths and "C:\x" are not taken for hosts. */
    const char *colon = memchr(s, ':', len);
    const char *at = memchr(s, '@', len);
    const char *slash = memchr(s, '/', len);
    if (colon && at && at < colon && at > s && (!slash || slash > colon) && colon + 1 < s + len) {
        for (const char *p = s; p < colon; p++)
            if ((unsigned char)*p <= ' ' || *p == '\\')
                return 0;
        strcpy(u->scheme, "ssh");
        u->hostport = at + 1;
        u->hostport_len = (size_t)(colon - at - 1);
        u->path = colon + 1;
        const char *pend = u->path;
        while (pend < s + len && *pend != '?' && *pend != '#')
            pend++;
        u->path_len = (size_t)(pend - u->path);
        u->scp = true;
        if (u->hostport_len == 0 || mem_has(u->hostport, u->hostport_len, '@')) {
            snprintf(err, errcap, "URL has no host");
            return -1;
        }
        return 1;
    }
    if (sl) {
        /* Any other scheme without "//" ("bzr+lp:project") names a host
         * only its tool knows. */
        char t[128];
        sl_display_untrusted(s, len, t, sizeof t, SL_DISPLAY_QMARK);
        snprintf(err, errcap, "cannot tell the host of '%s'", t);
        return -1;
    }
    return 0;
}

/* Add scheme://hostport for each provenance file. */
static int add_parts(sl_derived *out, const urlparts *u, const sl_pyprov *prov, char *err,
                     size_t errcap)
{
    /* Pipenv and PDM expand $VAR and ${VAR}, pip ${VAR}, at install time:
     * in credentials that does not matter, in the host it cannot be known. */
    if (mem_has(u->hostport, u->hostport_len, '$')) {
        char h[128];
        sl_display_untrusted(u->hostport, u->hostport_len, h, sizeof h, SL_DISPLAY_QMARK);
        snprintf(err, errcap, "host '%s' depends on an environment variable, which cannot be known "
                 "offline", h);
        return -1;
    }
    char buf[AUTH_MAX + 40];
    const char *scheme = u->scheme;
    /* Mercurial's static-http is plain HTTP; svn:// is svnserve's 3690,
     * which R2 does not list but is the only port it uses. */
    const char *t = transport(scheme);
    const char *extra_port = "";
    if (!strcmp(t, "static-http"))
        scheme = "http";
    else if (!strcmp(t, "svn") && (!mem_has(u->hostport, u->hostport_len, ':') ||
                                   (u->hostport[0] == '[' && u->hostport[u->hostport_len - 1] == ']')))
        extra_port = ":3690", scheme = "https";
    else if (!strcmp(t, "svn"))
        scheme = "https";          /* an explicit port is kept; only the scheme's default is unknown */
    if (u->hostport_len > AUTH_MAX) {
        snprintf(err, errcap, "host too long");
        return -1;
    }
    int n = snprintf(buf, sizeof buf, "%s://%.*s%s", scheme, (int)u->hostport_len, u->hostport,
                     extra_port);
    if (n < 0 || (size_t)n >= sizeof buf) {
        snprintf(err, errcap, "URL too long");
        return -1;
    }
    int added = 0;
    for (size_t i = 0; i < sizeof prov->files / sizeof prov->files[0]; i++) {
        const char *f = prov->files[i];
        if (!f)
            continue;
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            dup = dup || (prov->files[k] && !strcmp(prov->files[k], f));
        if (dup)
            continue;
        int r = sl_derived_add_url(out, buf, (size_t)n, f, err, errcap);
        if (r < 0)
            return -1;
        if (r == 0) {
            char h[128];
            sl_display_untrusted(u->hostport, u->hostport_len, h, sizeof h, SL_DISPLAY_QMARK);
            snprintf(err, errcap, "not a valid host: '%s'", h);
            return -1;
        }
        added = 1;
    }
    return added;
}

/* Add a fixed host:443 (PyPI's file host, GitHub's redirect targets). */
static int add_fixed(sl_derived *out, const char *host, const sl_pyprov *prov, char *err,
                     size_t errcap)
{
    urlparts u = { .scheme = "https", .hostport = host, .hostport_len = strlen(host) };
    return add_parts(out, &u, prov, err, errcap);
}

/* Host (without port) and effective port of split parts. */
static bool host_is(const urlparts *u, const char *host, int port)
{
    size_t hl = strlen(host);
    if (u->hostport_len < hl || strncasecmp(u->hostport, host, hl) != 0)
        return false;
    const char *rest = u->hostport + hl;
    size_t rl = u->hostport_len - hl;
    int scheme_port = !strcmp(transport(u->scheme), "https") ? 443 :
                      !strcmp(transport(u->scheme), "http") ? 80 : -1;
    if (rl == 0)
        return scheme_port == port;
    /* ":443", and a trailing dot is the same host */
    if (rest[0] == '.')
        rest++, rl--;
    if (rl == 0)
        return scheme_port == port;
    if (rest[0] != ':')
        return false;
    char pb[8];
    if (rl - 1 == 0 || rl - 1 >= sizeof pb)
        return rl == 1 && scheme_port == port;
    memcpy(pb, rest + 1, rl - 1);
    pb[rl - 1] = '\0';
    char *e;
    long p = strtol(pb, &e, 10);
    return *e == '\0' && p == port;
}

bool sl_pyindex_is_pypi(const char *url, size_t len)
{
    urlparts u;
    char err[8];
    return split(url, len, &u, err, sizeof err) == 1 && !u.scp && host_is(&u, "pypi.org", 443);
}

int sl_pyindex_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                   size_t errcap)
{
    urlparts u;
    int r = split(url, len, &u, err, errcap);
    if (r <= 0)
        return r;
    if (!u.scp && host_is(&u, "pypi.org", 443)) {
        /* PyPI serves its simple and JSON APIs from pypi.org and every
         * file from files.pythonhosted.org (pip models/index.py). */
        if (add_fixed(out, "pypi.org", prov, err, errcap) < 0)
            return -1;
        return add_fixed(out, "files.pythonhosted.org", prov, err, errcap);
    }
    return add_parts(out, &u, prov, err, errcap);
}

/* Path segment `i` (0-based) of "/a/b/c", or NULL. */
static const char *segment(const urlparts *u, int i, size_t *slen)
{
    const char *p = u->path, *end = u->path + u->path_len;
    for (int k = 0; p < end; k++) {
        if (*p == '/')
            p++;
        const char *q = p;
        while (q < end && *q != '/')
            q++;
        if (k == i) {
            *slen = (size_t)(q - p);
            return *slen ? p : NULL;
        }
        p = q;
    }
    return NULL;
}

static bool segment_is(const urlparts *u, int i, const char *text)
{
    size_t n;
    const char *s = segment(u, i, &n);
    return s && n == strlen(text) && !memcmp(s, text, n);
}

int sl_pyurl_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                 size_t errcap)
{
    urlparts u;
    int r = split(url, len, &u, err, errcap);
    if (r <= 0)
        return r;
    if (add_parts(out, &u, prov, err, errcap) < 0)
        return -1;
    if (u.scp)
        return 1;
    /* LOCKFILES.md §3: GitHub answers these with a 302 to another host. */
    const char *also = NULL;
    if (host_is(&u, "github.com", 443)) {
        size_t n;
        if (segment(&u, 0, &n) && segment(&u, 1, &n) && segment_is(&u, 2, "archive"))
            also = "codeload.github.com";
        else if (segment(&u, 0, &n) && segment(&u, 1, &n) && segment_is(&u, 2, "releases") &&
                 segment_is(&u, 3, "download"))
            also = "release-assets.githubusercontent.com";
    } else if (host_is(&u, "api.github.com", 443) && segment_is(&u, 0, "repos") &&
               (segment_is(&u, 3, "zipball") || segment_is(&u, 3, "tarball"))) {
        also = "codeload.github.com";
    }
    if (also && add_fixed(out, also, prov, err, errcap) < 0)
        return -1;
    return 1;
}

int sl_pyvcs_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                 size_t errcap)
{
    const char *s = url;
    size_t n = len;
    if (sl_pyvcs_prefixed(s, n)) {
        const char *plus = memchr(s, '+', n);
        n -= (size_t)(plus + 1 - s);
        s = plus + 1;
    }
    urlparts u;
    int r = split(s, n, &u, err, errcap);
    if (r <= 0)
        return r;
    return add_parts(out, &u, prov, err, errcap);
}

bool sl_pyurl_is_wheel(const char *url, size_t len)
{
    size_t end = 0;
    while (end < len && url[end] != '?' && url[end] != '#')
        end++;
    return end >= 4 && strncasecmp(url + end - 4, ".whl", 4) == 0;
}
