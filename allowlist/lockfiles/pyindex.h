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

#endif
