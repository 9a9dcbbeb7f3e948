/* What the readers of the Python lockers' TOML lockfiles (poetry.lock,
 * pdm.lock, uv.lock) share: opening the lockfile and its [[package]]
 * array, the project's TOML config files (pyproject.toml, uv.toml), and
 * adding a URL through pyindex.h with its provenance, an unusable one
 * becoming the reader's FILE:LINE error. */
#ifndef SLUICE_PYLOCK_H
#define SLUICE_PYLOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "derive.h"
#include "lockfile.h"
#include "pyindex.h"
#include "toml.h"

/* A lockfile being read, and where its entries and its error go. */
typedef struct sl_pylock {
    const char *path;              /* the lockfile, in messages and provenance */
    sl_toml *doc;                  /* the lockfile, parsed */
    const sl_toml *packages;       /* its [[package]] array; NULL when it has none */
    sl_toml *pyproject;            /* the project's pyproject.toml, once read */
    const char *pyproject_path;    /* NULL when there is none */
    sl_derived *out;
    sl_lockerr *err;
} sl_pylock;

/* Parse the lockfile and find its [[package]] array. `table` (NULL:
 * none) is a table every lockfile of its kind has ("metadata"). False with
 * err set (R7) when it is not TOML, lacks `table`, or "package" is not an
 * array of tables. Close it either way. */
bool sl_pylock_open(sl_pylock *l, const char *path, const char *data, size_t len,
                    const char *table, sl_derived *out, sl_lockerr *err);
void sl_pylock_close(sl_pylock *l);

/* Read the project's pyproject.toml into l and find the array of tables at
 * `dotted` in it ("tool.poetry.source"): *tables is NULL when either is
 * absent. False with err set when pyproject.toml cannot be read or parsed,
 * or the value is not an array of tables. */
bool sl_pylock_sources(sl_pylock *l, sl_project *proj, const char *dotted,
                       const sl_toml **tables);

/* sl_pyindex_add, sl_pyurl_add or sl_pyvcs_add. */
typedef int sl_pyadd_fn(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov,
                        char *err, size_t errcap);

/* fn(url), the entries attributed to the lockfile and to `config`, the
 * config file that named the URL (NULL: the lockfile did). An unusable URL
 * is an error at that file's `line`. *res, if given, receives fn's result
 * (1 added, 0 local). */
bool sl_pylock_add(sl_pylock *l, sl_pyadd_fn *fn, const char *url, const char *config, int line,
                   int *res);

/* The provenance sl_pylock_add gives: the lockfile and `config` (NULL:
 * the lockfile alone). */
sl_pyprov sl_pylock_prov(const sl_pylock *l, const char *config);

/* The result r of a pyindex.h call that wrote msg: false with the error at
 * `line` of config (NULL: of the lockfile) when r < 0. */
bool sl_pylock_result(sl_pylock *l, int r, const char *msg, const char *config, int line);

/* TOML: the document, or NULL with "FILE:LINE: message" in err (R7). */
sl_toml *sl_pytoml_parse(const char *path, const char *data, size_t len, sl_lockerr *err);

/* A TOML config file of the project ("pyproject.toml", "uv.toml"),
 * parsed. NULL when it does not exist (*path_out NULL, err->msg left
 * empty) or cannot be read or parsed (err set). *path_out names it for
 * messages and provenance. */
sl_toml *sl_pytoml_project(sl_project *proj, const char *rel, const char **path_out,
                           sl_lockerr *err);

/* The array of tables at `dotted` in `doc` (a config file named `path`,
 * NULL for none): *tables is NULL when there is none. False with err set
 * when the value is something else. */
bool sl_pytoml_tables(const sl_toml *doc, const char *dotted, const char *path,
                      const sl_toml **tables, sl_lockerr *err);

/* The string at table.key, or NULL if absent, not a string, or holding a
 * NUL (which no URL or name may hold). */
const char *sl_pytoml_str(const sl_toml *table, const char *key);

/* The value at a dotted path of plain keys ("tool.poetry.source"), or NULL. */
const sl_toml *sl_pytoml_path(const sl_toml *t, const char *dotted);

#endif
