/* URLs as lockfiles write them: scheme, authority, path. Only what is needed
 * to name the host and port a client connects to; the host itself is
 * validated later, by the allowlist's own host parser (derive.c). */
#include "url.h"

#include <string.h>
#include <strings.h>

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static const char *find(const char *s, size_t len, char c)
{
    return len ? memchr(s, c, len) : NULL;
}

/* Characters that never occur in a host or userinfo as written in a URL;
 * seeing one means the text is not a URL at all (a shell-ish path, a
 * version range, ...). */
static bool bad_authority_char(char c)
{
    return (unsigned char)c <= ' ' || c == '\\' || c == '"' || c == '<' || c == '>' || c == '^' ||
           c == '`' || c == '{' || c == '|' || c == '}' || c == 0x7f;
}

int sl_url_default_port(const char *scheme)
{
    if (!scheme)
        return -1;
    /* Compound schemes (git+https, registry+https, sparse+https, git+ssh):
     * the transport is the part after the last '+'. */
    const char *plus = strrchr(scheme, '+');
    const char *t = plus ? plus + 1 : scheme;
    if (!strcasecmp(t, "https"))
        return 443;
    if (!strcasecmp(t, "http"))
        return 80;
    if (!strcasecmp(t, "ssh"))
        return 22;
    if (!strcasecmp(t, "git"))
        return 9418;
    return -1;
}

/* A decimal port 1..65535 without sign or leading zero; -1 otherwise. */
static int parse_port(const char *s, size_t len)
{
    if (len == 0 || len > 5 || s[0] == '0')
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535 ? v : -1;
}

static bool ssh_transport(const char *scheme)
{
    return sl_url_default_port(scheme) == 22;
}

/* scp-style "user@host:path" (git's own syntax, no scheme), also
 * "user@[v6]:path". A user is required, so that "github:o/r", "npm:pkg@1",
 * "file:../x" and "C:\\x" are not taken for hosts. */
static bool parse_scp(const char *s, size_t len, sl_url *out)
{
    const char *end = s + len;
    const char *at = find(s, len, '@');
    if (!at || at == s)
        return false;
    for (const char *p = s; p < at; p++)
        if (*p == '/' || *p == ':' || bad_authority_char(*p))
            return false;
    const char *h = at + 1;
    const char *colon;
    if (h < end && *h == '[') {
        const char *rb = find(h, (size_t)(end - h), ']');
        if (!rb || rb + 1 >= end || rb[1] != ':')
            return false;
        out->host = h + 1;
        out->host_len = (size_t)(rb - h - 1);
        colon = rb + 1;
    } else {
        colon = find(h, (size_t)(end - h), ':');
        if (!colon)
            return false;
        out->host = h;
        out->host_len = (size_t)(colon - h);
    }
    for (const char *p = out->host; p < out->host + out->host_len; p++)
        if (*p == '/' || *p == '@' || *p == '[' || *p == ']' || bad_authority_char(*p))
            return false;
    /* The path ends where a URL's would, at '?' or '#' ("…/r.git#sha"). */
    const char *path = colon + 1;
    const char *pend = path;
    while (pend < end && *pend != '?' && *pend != '#')
        pend++;
    if (out->host_len == 0 || pend == path)
        return false;
    strcpy(out->scheme, "ssh");
    out->port = 22;
    out->path = path;
    out->path_len = (size_t)(pend - path);
    out->scp_style = true;
    return true;
}

bool sl_url_parse(const char *s, size_t len, sl_url *out)
{
    memset(out, 0, sizeof *out);
    out->port = -1;
    if (!s || len == 0 || find(s, len, '\0'))
        return false;

    /* scheme "://" */
    size_t i = 0;
    if (!is_alpha(s[0]))
        return parse_scp(s, len, out);
    while (i < len && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    if (i + 3 > len || memcmp(s + i, "://", 3) != 0)
        return parse_scp(s, len, out);
    if (i >= sizeof out->scheme)
        return false;
    for (size_t k = 0; k < i; k++)
        out->scheme[k] = lower(s[k]);
    out->scheme[i] = '\0';
    /* file:// and git+file:// name no network host, whatever the authority says. */
    const char *plus = strrchr(out->scheme, '+');
    if (!strcmp(plus ? plus + 1 : out->scheme, "file"))
        return false;

    /* authority: up to the first '/', '?' or '#' */
    const char *auth = s + i + 3;
    const char *end = s + len;
    const char *aend = auth;
    while (aend < end && *aend != '/' && *aend != '?' && *aend != '#')
        aend++;
    for (const char *p = auth; p < aend; p++)
        if (bad_authority_char(*p))
            return false;
    /* userinfo: up to the last '@' (a password may hold a raw '@') */
    const char *h = auth;
    for (const char *p = auth; p < aend; p++)
        if (*p == '@')
            h = p + 1;

    const char *hend;              /* end of the host text */
    const char *rest;              /* after the host: ":port" or nothing */
    bool bracketed = h < aend && *h == '[';
    if (bracketed) {
        const char *rb = find(h, (size_t)(aend - h), ']');
        if (!rb)
            return false;
        out->host = h + 1;
        out->host_len = (size_t)(rb - h - 1);
        hend = rb + 1;
        rest = hend;
        if (rest < aend && *rest != ':')
            return false;
    } else {
        const char *c = find(h, (size_t)(aend - h), ':');
        hend = c ? c : aend;
        out->host = h;
        out->host_len = (size_t)(hend - h);
        rest = hend;
    }
    if (out->host_len == 0)
        return false;

    out->path = aend;
    out->path_len = 0;
    if (rest < aend) {             /* ":port" */
        const char *pp = rest + 1;
        size_t plen = (size_t)(aend - pp);
        if (plen == 0) {
            out->port = sl_url_default_port(out->scheme);   /* "host:" = no port */
        } else {
            int port = parse_port(pp, plen);
            bool digits = true;
            for (size_t k = 0; k < plen; k++)
                digits = digits && is_digit(pp[k]);
            if (port < 0 && !digits && ssh_transport(out->scheme) && !bracketed) {
                /* "git+ssh://git@github.com:owner/repo.git": an scp path
                 * after a scheme, which npm and Yarn 1 accept. The path
                 * starts after the ':'. */
                out->port = 22;
                out->scp_style = true;
                out->path = pp;
                const char *pend = pp;
                while (pend < end && *pend != '?' && *pend != '#')
                    pend++;
                out->path_len = (size_t)(pend - pp);
                return true;
            }
            out->port = port;      /* -1: an invalid port; the caller reports it */
        }
    } else {
        out->port = sl_url_default_port(out->scheme);
    }

    /* path: up to '?' or '#' */
    if (aend < end && *aend == '/') {
        const char *pend = aend;
        while (pend < end && *pend != '?' && *pend != '#')
            pend++;
        out->path_len = (size_t)(pend - aend);
    }
    return true;
}
