/* A strict TOML 1.0 reader: enough for Cargo.lock, poetry.lock, uv.lock,
 * pdm.lock, pyproject.toml and .cargo/config.toml. Debian 12 ships TOML
 * libraries for C++ only. Anything truncated or malformed is refused with
 * the line where it went wrong. Pure: bytes in, a tree out. */
#ifndef SLUICE_TOML_H
#define SLUICE_TOML_H

#include <stdbool.h>
#include <stddef.h>

typedef enum sl_toml_kind {
    SL_TOML_TABLE, SL_TOML_ARRAY, SL_TOML_STRING, SL_TOML_INTEGER, SL_TOML_FLOAT,
    SL_TOML_BOOL, SL_TOML_DATETIME,
} sl_toml_kind;

typedef struct sl_toml sl_toml;

/* Parse a whole document. On error returns NULL, sets *errline (1-based)
 * and writes a message into err (on success *errline is 0 and err empty).
 * The tree does not point into data, which may be freed as soon as this
 * returns. */
sl_toml *sl_toml_parse(const char *data, size_t len, char *err, size_t errcap, int *errline);
void sl_toml_free(sl_toml *root);

/* Every accessor takes NULL (an absent value) and answers as for an empty
 * table: no kind of its own (SL_TOML_TABLE), line 0, no entries. Keys that
 * contain a NUL ("\u0000") are kept but cannot be found by sl_toml_get. */
sl_toml_kind sl_toml_kind_of(const sl_toml *v);
int sl_toml_line(const sl_toml *v);              /* line where the value starts */

/* Tables: lookup by key (NULL if absent or v is not a table), and iteration
 * in document order. */
const sl_toml *sl_toml_get(const sl_toml *table, const char *key);
size_t sl_toml_count(const sl_toml *v);          /* entries of a table or array */
const sl_toml *sl_toml_entry(const sl_toml *table, size_t i, const char **key);
const sl_toml *sl_toml_at(const sl_toml *array, size_t i);

/* Scalars: NULL / false if v is not of that kind. Strings are UTF-8,
 * escapes decoded, NUL-terminated (len excludes the NUL). Datetimes are
 * returned as their text through sl_toml_str too. */
const char *sl_toml_str(const sl_toml *v, size_t *len);
bool sl_toml_int(const sl_toml *v, long long *out);
bool sl_toml_bool(const sl_toml *v, bool *out);

/* Convenience: the string at table.key, or NULL. */
const char *sl_toml_get_str(const sl_toml *table, const char *key);

#endif
