/* What the Python readers (pip, Pipenv, Poetry, uv, PDM) share: the hosts a
 * package index needs (PyPI is two hosts; any other index is its own
 * host:port, LOCKFILES.md R9), direct artifact URLs with GitHub's redirects
 * (R6), and VCS URLs in the spellings these tools write. Every function
 * adds each entry once per provenance file and returns 1 when something was
 * added, 0 when the URL names no network host (a local path, file:), -1 on
 * an unusable URL (message in err). Pure. */
#ifndef SLUICE_PYINDEX_H
#define SLUICE_PYINDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "derive.h"
#include "lockfile.h"
#include "toml.h"

/* The files an entry is attributed to: the lockfile, and the config file
 * when one changed the answer. NULL and duplicate names are skipped. */
typedef struct sl_pyprov {
    const char *files[3];
} sl_pyprov;

/* PyPI as pip and the lockers spell it by default. */
#define SL_PYPI_SIMPLE "https://pypi.org/simple"

/* Whether `url` is PyPI itself (host pypi.org on 443). */
bool sl_pyindex_is_pypi(const char *url, size_t len);

/* An index (simple API or flat find-links page): pypi.org and
 * files.pythonhosted.org for PyPI; the index's own host:port otherwise,
 * where its files are assumed to be (R9). */
int sl_pyindex_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                   size_t errcap);

/* A direct artifact URL (wheel, sdist, archive): its host, plus
 * codeload.github.com for GitHub /archive/ and API tarball/zipball URLs and
 * release-assets.githubusercontent.com for GitHub release assets (R6). */
int sl_pyurl_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                 size_t errcap);

/* A VCS URL: "git+https://host/o/r@ref#egg=x", "git+ssh://…", "ssh://…",
 * "https://host/o/r.git", "git@host:o/r.git", "git+git@host:o/r.git",
 * hg+/svn+/bzr+ alike: the host the clone contacts (R2 ports). */
int sl_pyvcs_add(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov, char *err,
                 size_t errcap);

/* "git+", "hg+", "svn+" or "bzr+" (any case) starts `s`. */
bool sl_pyvcs_prefixed(const char *s, size_t len);

/* The URL's path (before '?' and '#') ends in ".whl": a built wheel, which
 * needs no build backend from an index. */
bool sl_pyurl_is_wheel(const char *url, size_t len);

/* The URL has a scheme ("https:", "git+ssh:", "file:"), as opposed to a
 * path or a requirement. */
bool sl_pyurl_has_scheme(const char *s, size_t len);

/* Untrusted text for a message: printable ASCII kept, anything else as
 * '?', cut with "..." to fit `cap` (>= 8). Returns buf. */
const char *sl_pyshow(const char *s, size_t len, char *buf, size_t cap);

/* TOML for the lockers (poetry.lock, uv.lock, pdm.lock, pyproject.toml):
 * the document, or NULL with "FILE:LINE: message" in err (R7). */
sl_toml *sl_pytoml_parse(const char *path, const char *data, size_t len, sl_lockerr *err);

/* A TOML config file of the project ("pyproject.toml", "uv.toml"),
 * parsed. NULL when it does not exist (err->msg left empty) or cannot be
 * read or parsed (err set). *path_out names it for messages and
 * provenance. */
sl_toml *sl_pytoml_project(sl_project *proj, const char *rel, const char **path_out,
                           sl_lockerr *err);

/* The string at table.key, or NULL if absent, not a string, or holding a
 * NUL (which no URL or name may hold). */
const char *sl_pytoml_str(const sl_toml *table, const char *key);

/* The value at a dotted path of plain keys ("tool.poetry.source"), or NULL. */
const sl_toml *sl_pytoml_path(const sl_toml *t, const char *dotted);

#endif
