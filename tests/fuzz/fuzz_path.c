/* The path ambiguity check and the '*' matcher (allowlist/rules.c):
 * sl_path_check (sl_path_ambiguous), sl_glob_match.
 *
 * Input: PATTERN "\0" PATH (without a NUL: the input is both).
 *
 * Properties:
 *   - a path the request check accepts starts with '/', has only bytes
 *     0x21..0x7e and neither '\', '#' nor '?', every '%' starts an escape of
 *     two hex digits, none of them %00-%1f, %7f, %2f or %5c; and, with %2e
 *     decoded and ";params" cut, no segment is "." or "..", and no segment
 *     is empty but a trailing one;
 *   - a pattern the pattern check accepts, with each '*' replaced by a
 *     byte, is a path the request check accepts, and the pattern matches it;
 *   - sl_glob_match agrees with a dynamic-programming reference on inputs up
 *     to 256 bytes, and its steps stay within (len(path) + 1) * (len(pattern)
 *     + 1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "rules.h"

static int hexv(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The property, written out plainly: what an accepted request path is. */
static void check_accepted_path(const char *p, size_t n, char *shown, size_t cap)
{
    fuzz_show(p, n, shown, cap);
    FUZZ_CHECK(n >= 1 && p[0] == '/', "accepted '%s' without a leading '/'", shown);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        FUZZ_CHECK(c > 0x20 && c < 0x7f && c != '\\' && c != '#' && c != '?', "accepted '%s': byte %zu",
                   shown, i);
        if (c == '%') {
            FUZZ_CHECK(i + 2 < n && hexv(p[i + 1]) >= 0 && hexv(p[i + 2]) >= 0,
                       "accepted '%s': bad escape at %zu", shown, i);
            int v = hexv(p[i + 1]) << 4 | hexv(p[i + 2]);
            FUZZ_CHECK(v >= 0x20 && v != 0x7f && v != '/' && v != '\\', "accepted '%s': escape %%%02x",
                       shown, v);
        }
    }
    /* Segments, %2e decoded, cut at ';' (or %3b). */
    size_t seg = 1;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        FUZZ_CHECK(i > seg || i == n, "accepted '%s': empty segment at %zu", shown, seg);
        char d[8];
        size_t k = 0;
        bool other = false;
        for (size_t j = seg; j < i && k < sizeof d; j++) {
            if (p[j] == '%' && j + 2 < i && p[j + 1] == '2' && (p[j + 2] | 0x20) == 'e') {
                d[k++] = '.';
                j += 2;
            } else if (p[j] == ';' || (p[j] == '%' && j + 2 < i && p[j + 1] == '3' &&
                                       (p[j + 2] | 0x20) == 'b')) {
                break;
            } else if (p[j] == '.') {
                d[k++] = '.';
            } else {
                other = true;
                break;
            }
        }
        FUZZ_CHECK(other || !(k == 1 || k == 2), "accepted '%s': dot segment at %zu", shown, seg);
        seg = i + 1;
    }
}

/* Whether pat matches s: the textbook table, dp[i][j] = pat[i..] matches s[j..]. */
#define REF_MAX 256
static bool ref_match(const char *p, size_t pn, const char *s, size_t sn)
{
    static unsigned char dp[REF_MAX + 1][REF_MAX + 1];
    for (size_t i = pn + 1; i-- > 0;)
        for (size_t j = sn + 1; j-- > 0;) {
            if (i == pn)
                dp[i][j] = j == sn;
            else if (p[i] == '*')
                dp[i][j] = dp[i + 1][j] || (j < sn && dp[i][j + 1]);
            else
                dp[i][j] = j < sn && p[i] == s[j] && dp[i + 1][j + 1];
        }
    return dp[0][0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    const char *nul = memchr(d, 0, size);
    const char *pat = d, *path = nul ? nul + 1 : d;
    size_t pn = nul ? (size_t)(nul - d) : size, sn = nul ? size - pn - 1 : size;
    char shown[2200];

    if (sl_path_check(path, sn, false) == NULL)
        check_accepted_path(path, sn, shown, sizeof shown);
    if (sl_path_check(pat, pn, false) == NULL)
        check_accepted_path(pat, pn, shown, sizeof shown);

    if (sl_path_check(pat, pn, true) == NULL && pn <= 4096) {
        static char inst[4096 * 3];
        static const char fills[] = { 'x', '.', '-' };
        for (size_t f = 0; f < sizeof fills; f++) {
            /* '*' as one byte, or (f = 2) as nothing: both are matches */
            size_t k = 0;
            for (size_t i = 0; i < pn; i++) {
                if (pat[i] != '*')
                    inst[k++] = pat[i];
                else if (f < 2)
                    inst[k++] = fills[f];
            }
            if (f == 1 || f == 2) {
                /* '.' or nothing may make a dot or an empty segment (a '*'
                 * alone between slashes): only the request check decides. */
                if (sl_path_check(inst, k, false) != NULL)
                    continue;
            }
            FUZZ_CHECK(sl_path_check(inst, k, false) == NULL, "pattern '%s' accepted, its instance '%.*s' not: %s",
                       fuzz_show(pat, pn, shown, sizeof shown), (int)k, inst, sl_path_check(inst, k, false));
            FUZZ_CHECK(sl_glob_match(pat, pn, inst, k, NULL), "pattern '%s' does not match '%.*s'",
                       fuzz_show(pat, pn, shown, sizeof shown), (int)k, inst);
        }
    }

    size_t steps = 0;
    bool m = sl_glob_match(pat, pn, path, sn, &steps);
    FUZZ_CHECK(steps <= (sn + 1) * (pn + 1), "%zu steps for %zu x %zu", steps, pn, sn);
    if (pn <= REF_MAX && sn <= REF_MAX)
        FUZZ_CHECK(m == ref_match(pat, pn, path, sn), "'%s' against '%.*s': %d, reference %d",
                   fuzz_show(pat, pn, shown, sizeof shown), (int)sn, path, m, !m);
    return 0;
}
