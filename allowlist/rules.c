/* Request rules' pure pieces: methods, path patterns, ambiguity, digests. */
#include "rules.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

/* ---- Methods ---- */

bool sl_method_name_valid(const char *m, size_t len)
{
    if (len == 0 || len > SL_METHOD_NAME_MAX || m[0] < 'A' || m[0] > 'Z')
        return false;
    for (size_t i = 1; i < len; i++) {
        char c = m[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

static void quote(char *err, size_t errcap, const char *msg, const char *s, size_t len)
{
    char q[64 + 4];
    sl_display_untrusted(s, len, q, sizeof q, SL_DISPLAY_QMARK);
    snprintf(err, errcap, "%s: '%s'", msg, q);
}

static bool has_lower(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 'a' && s[i] <= 'z')
            return true;
    return false;
}

bool sl_methods_check(const char *s, size_t len, char *err, size_t errcap)
{
    if (len == 1 && s[0] == '*')
        return true;
    if (len == 0) {
        snprintf(err, errcap, "empty method list");
        return false;
    }
    if (memchr(s, '*', len)) {
        quote(err, errcap, "'*' stands alone: it already means every method", s, len);
        return false;
    }
    for (size_t i = 0; i <= len;) {
        const char *item = s + i;
        const char *comma = memchr(item, ',', len - i);
        size_t ilen = comma ? (size_t)(comma - item) : len - i;
        if (ilen == 0) {
            quote(err, errcap, "empty method in the list (methods are separated by single commas, no spaces)",
                  s, len);
            return false;
        }
        if (!sl_method_name_valid(item, ilen)) {
            quote(err, errcap,
                  has_lower(item, ilen) ? "lower-case method (methods are upper-case: GET, HEAD, ...)"
                                        : "bad method (upper-case letters, digits, '-', '_'; at most 32)",
                  item, ilen);
            return false;
        }
        for (size_t j = 0; j < i;) {
            const char *other = s + j;
            const char *oc = memchr(other, ',', len - j);
            size_t olen = oc ? (size_t)(oc - other) : len - j;
            if (olen == ilen && memcmp(other, item, ilen) == 0) {
                quote(err, errcap, "method listed twice", item, ilen);
                return false;
            }
            j += olen + 1;
        }
        if (!comma)
            break;
        i += ilen + 1;
        if (i == len) {
            quote(err, errcap, "empty method at the end of the list", s, len);
            return false;
        }
    }
    return true;
}

bool sl_methods_include(const char *methods, const char *method, size_t len)
{
    if (methods[0] == '*' && methods[1] == '\0')
        return true;
    for (const char *p = methods;;) {
        const char *comma = strchr(p, ',');
        size_t ilen = comma ? (size_t)(comma - p) : strlen(p);
        if (ilen == len && memcmp(p, method, len) == 0)
            return true;
        if (!comma)
            return false;
        p = comma + 1;
    }
}

bool sl_methods_get_only(const char *methods)
{
    return strcmp(methods, "GET") == 0;
}

/* ---- Paths ---- */

/* The byte that the escape at s[i] ('%') stands for, or -1 when s[i] is not
 * '%' followed by two hex digits within len. */
static int escape_at(const char *s, size_t len, size_t i)
{
    if (i >= len || len - i < 3 || s[i] != '%')
        return -1;
    int hi = sl_hexval((unsigned char)s[i + 1]), lo = sl_hexval((unsigned char)s[i + 2]);
    return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

/* Whether a segment (between slashes) is "." or "..", dots written as '.'
 * or %2e, ignoring ";params" after them (Tomcat reads "/..;/" as "/../"). */
static bool dot_segment(const char *s, size_t len)
{
    int dots = 0;
    for (size_t j = 0; j < len;) {
        if (s[j] == '.') {
            dots++;
            j++;
        } else if (escape_at(s, len, j) == '.') {
            dots++;
            j += 3;
        } else if (s[j] == ';' || escape_at(s, len, j) == ';') {
            break;
        } else {
            return false;
        }
        if (dots > 2)
            return false;
    }
    return dots == 1 || dots == 2;
}

/* The escape at s[i] is known good: why its byte is refused, or NULL. */
static const char *escape_refused(const char *s, size_t len, size_t i, int v)
{
    if (v == 0)
        return "%00 in path";
    if (v == '/')
        return "encoded '/' (%2f) in path";
    if (v == '\\')
        return "encoded '\\' (%5c) in path";
    if (v < 0x20 || v == 0x7f)
        return "encoded control byte in path";
    if (v == '%') {
        /* %25 then two hex digits: an origin that decodes twice sees an
         * escape; refuse it where that escape would be refused. */
        int hi = len - i >= 5 ? sl_hexval((unsigned char)s[i + 3]) : -1;
        int lo = len - i >= 5 ? sl_hexval((unsigned char)s[i + 4]) : -1;
        if (hi >= 0 && lo >= 0) {
            int w = hi << 4 | lo;
            if (w == '.' || w == '/' || w == '\\' || w == '%' || w < 0x20 || w == 0x7f)
                return "double-encoded byte (%25 then an escape) in path";
        }
    }
    /* Overlong UTF-8: a decoder that accepts them reads '.' or '/' here. */
    if (v == 0xc0 || v == 0xc1)
        return "overlong UTF-8 escape in path";
    int next = escape_at(s, len, i + 3);
    if ((v == 0xe0 && next >= 0x80 && next <= 0x9f) || (v == 0xf0 && next >= 0x80 && next <= 0x8f))
        return "overlong UTF-8 escape in path";
    return NULL;
}

const char *sl_path_check(const char *s, size_t len, bool pattern)
{
    (void)pattern;   /* '*' is valid in both: a wildcard in one, a literal in the other */
    if (len == 0 || s[0] != '/')
        return "path does not start with '/'";
    size_t seg = 1;
    for (size_t i = 1; i <= len; i++) {
        if (i == len || s[i] == '/') {
            if (i == seg && i < len)
                return "empty segment ('//') in path";
            if (dot_segment(s + seg, i - seg))
                return "dot segment ('.' or '..', also encoded) in path";
            seg = i + 1;
            continue;
        }
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f)
            return "space or control byte in path";
        if (c >= 0x80)
            return "non-ASCII byte in path (it must be percent-encoded)";
        if (c == '\\')
            return "backslash in path";
        if (c == '#')
            return "'#' in path";
        if (c == '?')
            return "'?' in path (the query string is not part of the path)";
        if (c == '%') {
            int v = escape_at(s, len, i);
            if (v < 0)
                return "bad percent escape in path";
            const char *why = escape_refused(s, len, i, v);
            if (why)
                return why;
            i += 2;
        }
    }
    return NULL;
}

bool sl_glob_match(const char *p, size_t pn, const char *s, size_t sn, size_t *steps)
{
    size_t pi = 0, si = 0, star = SIZE_MAX, mark = 0, n = 0;
    while (si < sn) {
        n++;
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != SIZE_MAX) {
            /* Let the last '*' take one more byte and retry what follows
             * it: earlier stars never need to change (greedy is enough
             * when '*' is the only operator). */
            pi = star + 1;
            si = ++mark;
        } else {
            break;
        }
    }
    while (si == sn && pi < pn && p[pi] == '*') {
        pi++;
        n++;
    }
    if (steps)
        *steps += n;
    return si == sn && pi == pn;
}

/* ---- Digests ---- */

/* A table, not a chain of comparisons: a lockfile of 100,000 packages
 * has each digest checked twice, and base64's bytes are random enough to
 * defeat the branch predictor. Value + 1; 0 is not base64. */
static const unsigned char b64[256] = {
        ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
        ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15,
        ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22,
        ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29,
        ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36,
        ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43,
        ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50,
        ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57,
        ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

static int b64val(unsigned char c)
{
    return (int)b64[c] - 1;
}

const char *sl_digest_check(const char *s, size_t len)
{
    static const struct {
        const char *prefix;
        size_t chars, pad;          /* base64 length with padding; '=' at its end */
        const char *wrong_len;
    } algs[] = {
        { "sha256-", 44, 1, "a sha256 digest is 44 base64 characters (32 bytes, one '=')" },
        { "sha384-", 64, 0, "a sha384 digest is 64 base64 characters (48 bytes, no '=')" },
        { "sha512-", 88, 2, "a sha512 digest is 88 base64 characters (64 bytes, '==')" },
    };
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
        size_t pl = strlen(algs[a].prefix);
        if (len < pl || memcmp(s, algs[a].prefix, pl) != 0)
            continue;
        const char *b = s + pl;
        size_t bl = len - pl;
        if (memchr(b, '?', bl))
            return "digest options ('?...') are not supported";
        if (bl != algs[a].chars)
            return algs[a].wrong_len;
        size_t data = bl - algs[a].pad;
        for (size_t i = 0; i < data; i++)
            if (b64val((unsigned char)b[i]) < 0)
                return "digest is not base64 (A-Z a-z 0-9 + /, then '=' padding)";
        for (size_t i = data; i < bl; i++)
            if (b[i] != '=')
                return "digest's base64 padding is wrong";
        /* The bits the padding leaves unused must be zero, so that one hash
         * has one spelling. */
        int last = b64val((unsigned char)b[data - 1]);
        int unused = algs[a].pad == 1 ? 0x3 : algs[a].pad == 2 ? 0xf : 0;
        if (last & unused)
            return "digest's base64 is not canonical (padding bits set)";
        return NULL;
    }
    return "a digest is sha256-, sha384- or sha512- followed by base64";
}
