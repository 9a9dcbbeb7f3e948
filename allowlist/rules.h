/* The pure pieces of request rules (SPEC part 2, "Request rules"): method
 * lists, path patterns and their matching, the path ambiguity check, SRI
 * digest syntax. No I/O, no allocation; allowlist.c puts them together. */
#ifndef SLUICE_RULES_H
#define SLUICE_RULES_H

#include <stdbool.h>
#include <stddef.h>

#define SL_METHOD_NAME_MAX 32   /* longest method name a rule may list */

/* One method name as a rule lists it: an upper-case letter, then upper-case
 * letters, digits, '-' or '_', at most SL_METHOD_NAME_MAX bytes. Requests
 * with other method tokens ("get", "M.X") can still be allowed by "*". */
bool sl_method_name_valid(const char *m, size_t len);

/* A rule's method list as written: "*" alone, or valid method names
 * separated by single commas, none twice. On error false, with a message
 * quoting the offending item in err. */
bool sl_methods_check(const char *s, size_t len, char *err, size_t errcap);

/* Whether a checked method list includes `method` (compared exactly: methods
 * are case-sensitive). */
bool sl_methods_include(const char *methods, const char *method, size_t len);

/* Whether a checked method list is exactly "GET": the only rules that may
 * carry digests. */
bool sl_methods_get_only(const char *methods);

/* Why a path (a request target's path, stopping before '?') or, with
 * pattern, a rule's path pattern is refused; NULL when it is fine. Refused,
 * for both: not starting with '/'; controls, space, DEL and bytes >= 0x80;
 * '\', '#', '?'; a bad escape ('%' not followed by two hex digits); the
 * escapes %00 to %1f, %7f, %2f ('/'), %5c ('\'); a dot segment ("." or
 * "..", each dot written '.' or %2e in any case, also before ";params" as
 * Tomcat reads "..;"); an empty segment ("//", not a trailing '/');
 * double-encoded '.', '/', '\' or controls (%252e, ...); overlong UTF-8
 * escapes (%c0, %c1, %e0 then %80..%9f, %f0 then %80..%8f). A pattern may
 * hold '*' (any run); in a request path '*' is a literal byte. The reason is
 * a static string. */
const char *sl_path_check(const char *path, size_t len, bool pattern);

/* Whether the pattern matches the whole of s: '*' matches any run of bytes
 * ('/' included), every other byte only itself. Greedy, with one
 * backtracking point (the last '*' seen), so never exponential: the steps
 * are at most about len(s) times the longest run of literal bytes in the
 * pattern. With steps non-NULL, adds the loop's iterations to *steps. */
bool sl_glob_match(const char *pat, size_t plen, const char *s, size_t slen, size_t *steps);

/* An SRI digest as a rule carries it: "sha256-", "sha384-" or "sha512-" and
 * the standard base64 (with its '=' padding) of exactly that hash's length,
 * canonical (the padding bits zero), no "?options". NULL when valid, else a
 * static reason. */
const char *sl_digest_check(const char *s, size_t len);

#endif
