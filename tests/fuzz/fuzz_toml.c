/* The strict TOML reader (allowlist/lockfiles/toml.c): sl_toml_parse on the raw input
 * (not NUL-terminated, so over-reads show), then a walk of the whole tree
 * through every accessor.
 *
 * Properties: success iff errline 0 and no message; an error names a line
 * of the document and says something; every value's line is in the
 * document; strings are NUL-terminated at their length and valid UTF-8;
 * sl_toml_get finds every key the iteration yields (for keys without NUL);
 * accessors answer NULL/false for the wrong kind. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "toml.h"

static int g_lines;            /* lines in the document */
static bool g_nul_keys;        /* the input may spell a NUL in a key */

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t need;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            need = 2, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 3, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < need)
            return false;
        for (size_t k = 1; k < need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += need;
    }
    return true;
}

static void walk(const sl_toml *v, int depth)
{
    FUZZ_CHECK(depth <= 200, "tree deeper than 200");
    sl_toml_kind k = sl_toml_kind_of(v);
    int line = sl_toml_line(v);
    FUZZ_CHECK(line >= 1 && line <= g_lines, "value line %d outside 1..%d", line, g_lines);

    size_t slen = 12345;
    const char *s = sl_toml_str(v, &slen);
    long long iv;
    bool bv;
    bool is_int = sl_toml_int(v, &iv), is_bool = sl_toml_bool(v, &bv);
    FUZZ_CHECK((s != NULL) == (k == SL_TOML_STRING || k == SL_TOML_DATETIME),
               "sl_toml_str on kind %d", (int)k);
    FUZZ_CHECK(is_int == (k == SL_TOML_INTEGER), "sl_toml_int on kind %d", (int)k);
    FUZZ_CHECK(is_bool == (k == SL_TOML_BOOL), "sl_toml_bool on kind %d", (int)k);
    if (s) {
        FUZZ_CHECK(s[slen] == '\0', "string not NUL-terminated at its length %zu", slen);
        FUZZ_CHECK(strlen(s) <= slen, "strlen beyond length");
        FUZZ_CHECK(valid_utf8((const unsigned char *)s, slen), "string value is not UTF-8");
    }
    if (k == SL_TOML_BOOL)
        FUZZ_CHECK(bv == true || bv == false, "bool value");

    size_t n = sl_toml_count(v);
    if (k == SL_TOML_TABLE) {
        for (size_t i = 0; i < n; i++) {
            const char *key = NULL;
            const sl_toml *e = sl_toml_entry(v, i, &key);
            FUZZ_CHECK(e != NULL && key != NULL, "table entry %zu of %zu missing", i, n);
            FUZZ_CHECK(valid_utf8((const unsigned char *)key, strlen(key)), "key is not UTF-8");
            if (!g_nul_keys) {
                const sl_toml *g = sl_toml_get(v, key);
                FUZZ_CHECK(g == e, "sl_toml_get('%s') does not find entry %zu", key, i);
            }
            FUZZ_CHECK(sl_toml_at(v, i) == NULL, "sl_toml_at on a table");
            walk(e, depth + 1);
        }
        FUZZ_CHECK(sl_toml_entry(v, n, NULL) == NULL, "entry past the end");
    } else if (k == SL_TOML_ARRAY) {
        for (size_t i = 0; i < n; i++) {
            const sl_toml *e = sl_toml_at(v, i);
            FUZZ_CHECK(e != NULL, "array element %zu of %zu missing", i, n);
            walk(e, depth + 1);
        }
        FUZZ_CHECK(sl_toml_at(v, n) == NULL, "element past the end");
        FUZZ_CHECK(sl_toml_get(v, "a") == NULL, "sl_toml_get on an array");
    } else {
        FUZZ_CHECK(n == 0, "scalar with %zu entries", n);
        FUZZ_CHECK(sl_toml_get(v, "a") == NULL, "sl_toml_get on a scalar");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_lines = 1;
    for (size_t i = 0; i < size; i++)
        g_lines += data[i] == '\n';
    g_nul_keys = memmem(data, size, "\\u0000", 6) || memmem(data, size, "\\U00000000", 10);

    char err[256];
    memset(err, 'X', sizeof err);
    int errline = -7;
    sl_toml *t = sl_toml_parse((const char *)data, size, err, sizeof err, &errline);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "error message not NUL-terminated");
    if (!t) {
        FUZZ_CHECK(errline >= 1 && errline <= g_lines, "error line %d outside 1..%d", errline,
                   g_lines);
        FUZZ_CHECK(err[0] != '\0', "error without a message");
        return 0;
    }
    FUZZ_CHECK(errline == 0 && err[0] == '\0', "success with errline %d / message '%s'", errline,
               err);
    FUZZ_CHECK(sl_toml_kind_of(t) == SL_TOML_TABLE, "root is not a table");
    size_t n = sl_toml_count(t);
    for (size_t i = 0; i < n; i++) {
        const char *key;
        const sl_toml *e = sl_toml_entry(t, i, &key);
        if (!g_nul_keys)
            FUZZ_CHECK(sl_toml_get(t, key) == e, "root key '%s' not found", key);
        walk(e, 1);
    }
    (void)sl_toml_get_str(t, "version");
    (void)sl_toml_get_str(t, "package");
    /* Absent values answer like an empty table. */
    FUZZ_CHECK(sl_toml_count(NULL) == 0 && sl_toml_get(NULL, "x") == NULL &&
                   sl_toml_line(NULL) == 0 && sl_toml_str(NULL, NULL) == NULL,
               "NULL accessors");
    sl_toml_free(t);
    return 0;
}
