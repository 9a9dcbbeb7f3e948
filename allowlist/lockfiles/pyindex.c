/* Python indexes, artifact URLs and VCS URLs → host:port entries. The URL
 * is taken apart here rather than handed to sl_derived_add_url whole,
 * because Python tools write things url.c rightly refuses: credentials made
 * of environment variables ("https://${USER}:${PASS}@host/simple"), which
 * the tool expands at run time but which name no host, and pip's "@ref"
 * after a VCS path. Only "scheme://host[:port]" is passed on. */
#include "pyindex.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "rules.h"
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

/* The distinct files of a provenance: file i, or NULL when it is absent
 * or repeats an earlier one. */
static const char *prov_file(const sl_pyprov *prov, size_t i)
{
    const char *f = prov->files[i];
    if (!f)
        return NULL;
    for (size_t k = 0; k < i; k++)
        if (prov->files[k] && !strcmp(prov->files[k], f))
            return NULL;
    return f;
}

#define PROV_N (sizeof ((sl_pyprov *)0)->files / sizeof ((sl_pyprov *)0)->files[0])

/* A host entry for a URL's host:port that cannot be pinned, noted `why`. */
static int add_unpinned_host(sl_derived *out, const char *url, size_t len, const char *file,
                             const char *why, char *err, size_t errcap)
{
    sl_url pu;
    if (!sl_url_parse(url, len, &pu) || pu.port < 0) {
        char t[128];
        snprintf(err, errcap, "no host and port to be had from '%s'",
                 sl_display_untrusted(url, len, t, sizeof t, SL_DISPLAY_QMARK));
        return -1;
    }
    return sl_derived_add_fallback(out, pu.host, pu.host_len, pu.port, NULL, 0, file, why, err,
                                   errcap) ? 1 : -1;
}

/* Add scheme://hostport for each provenance file: a host entry, or with
 * `why` an unpinned one (a fallback that names the reason). */
static int add_parts_as(sl_derived *out, const urlparts *u, const sl_pyprov *prov, const char *why,
                        char *err, size_t errcap)
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
    for (size_t i = 0; i < PROV_N; i++) {
        const char *f = prov_file(prov, i);
        if (!f)
            continue;
        int r = why ? add_unpinned_host(out, buf, (size_t)n, f, why, err, errcap)
                    : sl_derived_add_url(out, buf, (size_t)n, f, err, errcap);
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

static int add_parts(sl_derived *out, const urlparts *u, const sl_pyprov *prov, char *err,
                     size_t errcap)
{
    return add_parts_as(out, u, prov, NULL, err, errcap);
}

/* Add a fixed host:443 (PyPI's file host, GitHub's redirect targets). */
static int add_fixed_as(sl_derived *out, const char *host, const sl_pyprov *prov, const char *why,
                        char *err, size_t errcap)
{
    urlparts u = { .scheme = "https", .hostport = host, .hostport_len = strlen(host) };
    return add_parts_as(out, &u, prov, why, err, errcap);
}

static int add_fixed(sl_derived *out, const char *host, const sl_pyprov *prov, char *err,
                     size_t errcap)
{
    return add_fixed_as(out, host, prov, NULL, err, errcap);
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

/* LOCKFILES.md §3: the host GitHub answers this URL's GET with a 302 to,
 * or NULL. */
static const char *redirect_host(const urlparts *u)
{
    if (u->scp)
        return NULL;
    size_t n;
    if (host_is(u, "github.com", 443)) {
        if (segment(u, 0, &n) && segment(u, 1, &n) && segment_is(u, 2, "archive"))
            return "codeload.github.com";
        if (segment(u, 0, &n) && segment(u, 1, &n) && segment_is(u, 2, "releases") &&
            segment_is(u, 3, "download"))
            return "release-assets.githubusercontent.com";
    } else if (host_is(u, "api.github.com", 443) && segment_is(u, 0, "repos") &&
               (segment_is(u, 3, "zipball") || segment_is(u, 3, "tarball"))) {
        return "codeload.github.com";
    }
    return NULL;
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
    const char *also = redirect_host(&u);
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

/* ---- --pins ---------------------------------------------------------------- */

#define PYPI_FILES "files.pythonhosted.org"

bool sl_pyname_normalise(const char *name, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    bool sep = false, any = false;
    if (cap == 0)
        return false;
    out[0] = '\0';
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == '-' || c == '_' || c == '.') {
            sep = true;
            continue;
        }
        if (!is_alnum(c) || k + (sep ? 2 : 1) + 1 > cap) {
            out[0] = '\0';
            return false;
        }
        if (sep)
            out[k++] = '-';
        sep = false;
        out[k++] = lower(c);
        any = true;
    }
    if (sep) {
        if (k + 2 > cap) {
            out[0] = '\0';
            return false;
        }
        out[k++] = '-';
    }
    out[k] = '\0';
    return any;
}

bool sl_pyhash_sri(const char *s, size_t len, char *out)
{
    const char *colon = len ? memchr(s, ':', len) : NULL;
    if (!colon)
        return false;
    size_t al = (size_t)(colon - s);
    return sl_sri_from_hex(s, al, colon + 1, len - al - 1, out);
}

bool sl_pyversion_exact(const char *v, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(v[i]) && !strchr(".+!_-", v[i]))
            return false;
    return true;
}

static bool env_host(const urlparts *u, char *err, size_t errcap)
{
    if (!mem_has(u->hostport, u->hostport_len, '$'))
        return false;
    char h[128];
    sl_display_untrusted(u->hostport, u->hostport_len, h, sizeof h, SL_DISPLAY_QMARK);
    snprintf(err, errcap, "host '%s' depends on an environment variable, which cannot be known "
             "offline", h);
    return true;
}

/* A URL whose requests the gate can see (http or https), rebuilt as
 * "scheme://hostport" followed by its path, without userinfo, query or
 * fragment, for derive.h's rule functions: a new string in *clean,
 * *origin_len long without the path. 1; 0 (names no network host); -1
 * (err: unusable, or another scheme, whose bytes no rule can check). */
static int web_url(const char *url, size_t len, urlparts *u, char **clean, size_t *clean_len,
                   size_t *origin_len, char *err, size_t errcap)
{
    *clean = NULL;
    int r = split(url, len, u, err, errcap);
    if (r <= 0)
        return r;
    const char *t = transport(u->scheme);
    if (u->scp || (strcmp(t, "https") && strcmp(t, "http"))) {
        char shown[128];
        snprintf(err, errcap, "'%s' is not an http(s) URL, so no rule can pin what it fetches",
                 sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_QMARK));
        return -1;
    }
    if (env_host(u, err, errcap))
        return -1;
    if (u->hostport_len > AUTH_MAX) {
        snprintf(err, errcap, "host too long");
        return -1;
    }
    size_t n = strlen(t) + 3 + u->hostport_len;
    char *b = sl_xrealloc(NULL, n + u->path_len + 1);
    snprintf(b, n + 1, "%s://%.*s", t, (int)u->hostport_len, u->hostport);
    memcpy(b + n, u->path, u->path_len);
    b[n + u->path_len] = '\0';
    *clean = b;
    *clean_len = n + u->path_len;
    *origin_len = n;
    return 1;
}

/* The host and port of a rebuilt URL's origin. */
static bool origin_of(const char *clean, size_t origin_len, sl_url *pu, char *err, size_t errcap)
{
    if (sl_url_parse(clean, origin_len, pu) && pu->port > 0)
        return true;
    char shown[128];
    snprintf(err, errcap, "no host and port to be had from '%s'",
             sl_display_untrusted(clean, origin_len, shown, sizeof shown, SL_DISPLAY_QMARK));
    return false;
}

/* sl_derived_add_rule_url for each file of prov. */
static int rule_url_each(sl_derived *out, const char *url, size_t len, const char *const *digests,
                         size_t ndigests, const sl_pyprov *prov, const char *note, char *err,
                         size_t errcap)
{
    int added = 0;
    for (size_t i = 0; i < PROV_N; i++) {
        const char *f = prov_file(prov, i);
        if (!f)
            continue;
        int r = sl_derived_add_rule_url(out, url, len, digests, ndigests, f, note, err, errcap);
        if (r < 0)
            return -1;
        added = added || r > 0;
    }
    return added;
}

/* sl_derived_add_rule for each file of prov. */
static int rule_each(sl_derived *out, const char *host, size_t host_len, int port, const char *path,
                     size_t path_len, const char *const *digests, size_t ndigests,
                     const sl_pyprov *prov, const char *note, char *err, size_t errcap)
{
    int added = 0;
    for (size_t i = 0; i < PROV_N; i++) {
        const char *f = prov_file(prov, i);
        if (!f)
            continue;
        if (!sl_derived_add_rule(out, host, host_len, port, path, path_len, digests, ndigests, f,
                                 note, err, errcap))
            return -1;
        added = 1;
    }
    return added;
}

int sl_pypage_rule(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov,
                   const char *note, char *err, size_t errcap)
{
    urlparts u;
    char *clean;
    size_t cl, ol;
    int r = web_url(url, len, &u, &clean, &cl, &ol, err, errcap);
    if (r <= 0)
        return r;
    r = rule_url_each(out, clean, cl, NULL, 0, prov, note, err, errcap);
    free(clean);
    return r;
}

int sl_pyindex_page_rule(sl_derived *out, const char *index, size_t len, const char *name,
                         const sl_pyprov *prov, char *err, size_t errcap)
{
    char norm[256];
    if (!sl_pyname_normalise(name, strlen(name), norm, sizeof norm)) {
        char shown[128];
        snprintf(err, errcap, "'%s' is not a project name",
                 sl_display_untrusted(name, strlen(name), shown, sizeof shown, SL_DISPLAY_QMARK));
        return -1;
    }
    urlparts u;
    char *clean;
    size_t cl, ol;
    int r = web_url(index, len, &u, &clean, &cl, &ol, err, errcap);
    if (r <= 0)
        return r;
    /* posixpath.join(index, name), then a '/' (pip search_scope.py,
     * unearth finder.py, Poetry's legacy repositories alike). */
    size_t nl = strlen(norm);
    char *page = sl_xrealloc(NULL, cl + nl + 3);
    memcpy(page, clean, cl);
    size_t k = cl;
    if (k == ol || page[k - 1] != '/')
        page[k++] = '/';
    memcpy(page + k, norm, nl);
    k += nl;
    page[k++] = '/';
    page[k] = '\0';
    r = rule_url_each(out, page, k, NULL, 0, prov, "index page", err, errcap);
    free(page);
    free(clean);
    return r;
}

/* Where an index's files are (R9, and pip models/index.py for PyPI). */
typedef struct fileshost {
    const char *host;              /* into `clean`, or PYPI_FILES */
    size_t host_len;
    int port;
    const char *prefix;            /* the pattern starts with it */
    char *clean;                   /* to free */
} fileshost;

static int files_host(const char *index, size_t len, fileshost *fh, char *err, size_t errcap)
{
    memset(fh, 0, sizeof *fh);
    urlparts u;
    size_t cl, ol;
    int r = web_url(index, len, &u, &fh->clean, &cl, &ol, err, errcap);
    if (r <= 0)
        return r;
    if (sl_pyindex_is_pypi(index, len)) {
        fh->host = PYPI_FILES;
        fh->host_len = strlen(PYPI_FILES);
        fh->port = 443;
        fh->prefix = "/packages/";
        return 1;
    }
    sl_url pu;
    if (!origin_of(fh->clean, ol, &pu, err, errcap)) {
        free(fh->clean);
        fh->clean = NULL;
        return -1;
    }
    fh->host = pu.host;
    fh->host_len = pu.host_len;
    fh->port = pu.port;
    fh->prefix = "/";
    return 1;
}

/* s as Python's urllib.parse.quote(s, safe="") writes it: every byte but
 * letters, digits and "_.-~" as %XX. out needs 3 * n + 1 bytes. */
static size_t quote(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_alnum((char)c) || c == '_' || c == '.' || c == '-' || c == '~') {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return k;
}

/* A byte a file name may hold in a pattern that spells it literally: not
 * '*' (a wildcard), '%' (the request would spell it some other way), '/'. */
static bool literal_name(const char *s, size_t n)
{
    if (n == 0 || (n <= 2 && strspn(s, ".") == n))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f || strchr("*%/\\?#\"<>`{}|^", c))
            return false;
    }
    return true;
}

int sl_pyindex_file_rule(sl_derived *out, const char *index, size_t len, const char *file,
                         const char *const *digests, size_t ndigests, const sl_pyprov *prov,
                         const char *note, char *err, size_t errcap)
{
    fileshost fh;
    int r = files_host(index, len, &fh, err, errcap);
    if (r <= 0)
        return r;
    size_t fl = strlen(file), pl = strlen(fh.prefix);
    if (!literal_name(file, fl)) {
        char shown[96], why[200];
        snprintf(why, sizeof why, "not pinned: no rule can spell the file name '%s'",
                 sl_display_untrusted(file, fl, shown, sizeof shown, SL_DISPLAY_QMARK));
        r = 0;
        for (size_t i = 0; i < PROV_N && r >= 0; i++) {
            const char *f = prov_file(prov, i);
            if (f && !sl_derived_add_fallback(out, fh.host, fh.host_len, fh.port, NULL, 0, f, why,
                                              err, errcap))
                r = -1;
            else if (f)
                r = 1;
        }
        free(fh.clean);
        return r;
    }
    /* The index links the file as it likes: "torch-2.2.1+cpu-...whl" or
     * "torch-2.2.1%2Bcpu-...whl" (download.pytorch.org), and the client
     * sends the link as written. Both spellings, when they differ. */
    char *pat = sl_xrealloc(NULL, pl + 3 * fl + 3);
    snprintf(pat, pl + fl + 3, "%s*/%s", fh.prefix, file);
    r = rule_each(out, fh.host, fh.host_len, fh.port, pat, strlen(pat), digests, ndigests, prov,
                  note, err, errcap);
    memcpy(pat, fh.prefix, pl);
    memcpy(pat + pl, "*/", 2);
    if (r > 0 && quote(file, fl, pat + pl + 2) != fl)
        r = rule_each(out, fh.host, fh.host_len, fh.port, pat, strlen(pat), digests, ndigests, prov,
                      note, err, errcap);
    free(pat);
    free(fh.clean);
    return r;
}

/* The rules for the files of one version on a file host. A wheel is
 * NAME-VERSION(-BUILD)?-PY-ABI-PLATFORM.whl and an sdist NAME-VERSION.tar.gz
 * or .zip (PyPI takes no other sdist since PEP 527): "-V-" and "-V." are
 * bounded by the '-' before and the '-' or ".tar.gz" after, so 1.0
 * matches neither 1.0.5 nor 11.0. */
static int version_patterns(sl_derived *out, const char *host, size_t host_len, int port,
                            const char *prefix, const char *version, const char *const *digests,
                            size_t ndigests, const sl_pyprov *prov, const char *note, char *err,
                            size_t errcap)
{
    static const char *const pat[] = { "%s*-%s-*.whl", "%s*-%s.tar.gz", "%s*-%s.zip" };
    /* pip quotes every link it takes from an index (models/link.py
     * _ensure_quoted_url: quote(unquote(part))), so a local version's '+'
     * and an epoch's '!' go out as %2B and %21. */
    size_t vl = strlen(version);
    char *qv = sl_xrealloc(NULL, 3 * vl + 1);
    quote(version, vl, qv);
    size_t bl = strlen(prefix) + strlen(qv) + 16;
    char *buf = sl_xrealloc(NULL, bl);
    int r = 1;
    for (size_t k = 0; k < sizeof pat / sizeof *pat && r > 0; k++) {
        int n = snprintf(buf, bl, pat[k], prefix, qv);
        r = rule_each(out, host, host_len, port, buf, (size_t)n, digests, ndigests, prov, note, err,
                      errcap);
    }
    free(buf);
    free(qv);
    return r;
}

int sl_pyindex_version_rules(sl_derived *out, const char *index, size_t len, const char *version,
                             const char *const *digests, size_t ndigests, const sl_pyprov *prov,
                             const char *note, char *err, size_t errcap)
{
    if (!sl_pyversion_exact(version, strlen(version))) {
        snprintf(err, errcap, "a version no file name pattern can spell");
        return -1;
    }
    fileshost fh;
    int r = files_host(index, len, &fh, err, errcap);
    if (r <= 0)
        return r;
    r = version_patterns(out, fh.host, fh.host_len, fh.port, fh.prefix, version, digests, ndigests,
                         prov, note, err, errcap);
    free(fh.clean);
    return r;
}

int sl_pyurl_pin(sl_derived *out, const char *url, size_t len, const char *const *digests,
                 size_t ndigests, const sl_pyprov *prov, const char *why, char *err,
                 size_t errcap)
{
    urlparts u;
    char *clean;
    size_t cl, ol;
    int r = web_url(url, len, &u, &clean, &cl, &ol, err, errcap);
    if (r <= 0)
        return r;
    const char *also = redirect_host(&u);
    if (ndigests) {
        r = rule_url_each(out, clean, cl, digests, ndigests, prov, NULL, err, errcap);
    } else {
        r = 0;
        for (size_t i = 0; i < PROV_N && r >= 0; i++) {
            const char *f = prov_file(prov, i);
            if (f)
                r = sl_derived_add_fallback_url(out, clean, cl, f, why, err, errcap) < 0 ? -1 : 1;
        }
    }
    if (r > 0 && also && ndigests) {
        /* codeload's paths start with the repository ("/o/r/tar.gz/REF"),
         * release assets' are opaque: every path there may be only these
         * bytes. */
        char path[AUTH_MAX + 8] = "/*";
        size_t on, rn;
        bool api = host_is(&u, "api.github.com", 443);
        const char *o = segment(&u, api ? 1 : 0, &on), *rp = segment(&u, api ? 2 : 1, &rn);
        if (!strcmp(also, "codeload.github.com") && o && rp && on + rn + 4 < sizeof path)
            snprintf(path, sizeof path, "/%.*s/%.*s/*", (int)on, o, (int)rn, rp);
        if (sl_path_check(path, strlen(path), true))
            strcpy(path, "/*");
        r = rule_each(out, also, strlen(also), 443, path, strlen(path), digests, ndigests, prov,
                      "GitHub redirects a pinned URL here", err, errcap);
    } else if (r > 0 && also) {
        r = add_fixed_as(out, also, prov, why, err, errcap);
    }
    free(clean);
    return r;
}

int sl_pyindex_unpinned(sl_derived *out, const char *index, size_t len, const sl_pyprov *prov,
                        const char *why, char *err, size_t errcap)
{
    urlparts u;
    int r = split(index, len, &u, err, errcap);
    if (r <= 0)
        return r;
    if (!u.scp && host_is(&u, "pypi.org", 443)) {
        if (add_fixed_as(out, "pypi.org", prov, why, err, errcap) < 0)
            return -1;
        return add_fixed_as(out, PYPI_FILES, prov, why, err, errcap);
    }
    return add_parts_as(out, &u, prov, why, err, errcap);
}

int sl_pyindex_files_unpinned(sl_derived *out, const char *index, size_t len,
                              const sl_pyprov *prov, const char *why, char *err, size_t errcap)
{
    urlparts u;
    int r = split(index, len, &u, err, errcap);
    if (r <= 0)
        return r;
    if (!u.scp && host_is(&u, "pypi.org", 443))
        return add_fixed_as(out, PYPI_FILES, prov, why, err, errcap);
    return add_parts_as(out, &u, prov, why, err, errcap);
}

int sl_pyvcs_unpinned(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov,
                      const char *why, char *err, size_t errcap)
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
    return add_parts_as(out, &u, prov, why, err, errcap);
}

/* ---- pins by version ---- */

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist;

/* Add a copy of s unless it is there already (lists stay short: the
 * digests of one version's files, the projects sharing a version). */
static void strlist_add(strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return;
    if (l->n == l->cap)
        l->v = sl_xrealloc(l->v, (l->cap = l->cap ? l->cap * 2 : 4) * sizeof *l->v);
    l->v[l->n++] = sl_xstrdup(s);
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* The files of one version on one file host. */
typedef struct vgroup {
    char *key;                     /* "host\n port\n prefix\n version" */
    char *host;
    int port;
    const char *prefix;            /* static */
    char *version;
    strlist digests, names, files;
} vgroup;

struct sl_pyvpins {
    vgroup *v;
    size_t n, cap;
    size_t *slots;                 /* open addressing on key: index + 1, 0 empty */
    size_t nslots;
};

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static size_t vslot(const sl_pyvpins *s, const char *key)
{
    size_t i = (size_t)fnv(key) & (s->nslots - 1);
    while (s->slots[i] && strcmp(s->v[s->slots[i] - 1].key, key))
        i = (i + 1) & (s->nslots - 1);
    return i;
}

sl_pyvpins *sl_pyvpins_new(void)
{
    sl_pyvpins *s = sl_xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    return s;
}

void sl_pyvpins_free(sl_pyvpins *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        vgroup *g = &s->v[i];
        free(g->key);
        free(g->host);
        free(g->version);
        strlist_free(&g->digests);
        strlist_free(&g->names);
        strlist_free(&g->files);
    }
    free(s->v);
    free(s->slots);
    free(s);
}

static vgroup *vgroup_get(sl_pyvpins *s, const fileshost *fh, const char *version)
{
    size_t kl = fh->host_len + strlen(fh->prefix) + strlen(version) + 16;
    char *key = sl_xrealloc(NULL, kl);
    snprintf(key, kl, "%.*s\n%d\n%s\n%s", (int)fh->host_len, fh->host, fh->port, fh->prefix, version);
    if ((s->n + 1) * 2 > s->nslots) {
        size_t ns = s->nslots ? s->nslots * 2 : 64;
        free(s->slots);
        s->slots = sl_xrealloc(NULL, ns * sizeof *s->slots);
        memset(s->slots, 0, ns * sizeof *s->slots);
        s->nslots = ns;
        for (size_t i = 0; i < s->n; i++)
            s->slots[vslot(s, s->v[i].key)] = i + 1;
    }
    size_t slot = vslot(s, key);
    if (s->slots[slot]) {
        free(key);
        return &s->v[s->slots[slot] - 1];
    }
    if (s->n == s->cap)
        s->v = sl_xrealloc(s->v, (s->cap = s->cap ? s->cap * 2 : 8) * sizeof *s->v);
    vgroup *g = &s->v[s->n];
    memset(g, 0, sizeof *g);
    g->key = key;
    g->host = sl_xstrndup(fh->host, fh->host_len);
    g->port = fh->port;
    g->prefix = fh->prefix;
    g->version = sl_xstrdup(version);
    s->slots[slot] = ++s->n;
    return g;
}

int sl_pyvpins_add(sl_pyvpins *s, const char *index, size_t len, const char *name,
                   const char *version, const char *const *digests, size_t ndigests,
                   const sl_pyprov *prov, char *err, size_t errcap)
{
    if (!sl_pyversion_exact(version, strlen(version))) {
        snprintf(err, errcap, "a version no file name pattern can spell");
        return -1;
    }
    fileshost fh;
    int r = files_host(index, len, &fh, err, errcap);
    if (r <= 0)
        return r;
    vgroup *g = vgroup_get(s, &fh, version);
    free(fh.clean);
    for (size_t i = 0; i < ndigests; i++)
        strlist_add(&g->digests, digests[i]);
    strlist_add(&g->names, name);
    for (size_t i = 0; i < PROV_N; i++)
        if (prov_file(prov, i))
            strlist_add(&g->files, prov->files[i]);
    return 1;
}

/* "files of a==1.0, b==1.0": the projects while they fit, then how many
 * more (a rule's comment is one line, and there may be hundreds). */
#define NOTE_MAX 400

static void vgroup_note(const vgroup *g, char *note, size_t cap)
{
    size_t k = (size_t)snprintf(note, cap, "files of ");
    for (size_t i = 0; i < g->names.n; i++) {
        size_t need = strlen(g->names.v[i]) + strlen(g->version) + 4;
        if (k + need + 24 > cap) {
            snprintf(note + k, cap - k, "and %zu more ==%s", g->names.n - i, g->version);
            return;
        }
        k += (size_t)snprintf(note + k, cap - k, "%s%s==%s", i ? ", " : "", g->names.v[i], g->version);
    }
}

bool sl_pyvpins_emit(sl_pyvpins *s, sl_derived *out, char *err, size_t errcap)
{
    for (size_t i = 0; i < s->n; i++) {
        const vgroup *g = &s->v[i];
        char note[NOTE_MAX];
        vgroup_note(g, note, sizeof note);
        for (size_t f = 0; f < g->files.n; f++) {
            sl_pyprov prov = { { g->files.v[f] } };
            if (version_patterns(out, g->host, strlen(g->host), g->port, g->prefix, g->version,
                                 (const char *const *)g->digests.v, g->digests.n, &prov, note, err,
                                 errcap) < 0)
                return false;
        }
    }
    return true;
}
