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

/* ---- --pins (PINS.md, the Python sections) ----
 * The same URLs as rules: what a locked install fetches, pinned where the
 * lockfile gives the digest. Each function adds its rules once per file of
 * `prov` and returns 1, 0 (the URL names no network host) or -1 (err). */

/* PEP 503 normalisation ("Django_REST.framework" -> "django-rest-framework"):
 * runs of '-', '_', '.' as one '-', lower case. False when the name is
 * empty, does not fit in cap, or holds a byte no project name may hold. */
bool sl_pyname_normalise(const char *name, size_t len, char *out, size_t cap);

/* A digest as pip's --hash and the Python lockfiles write it,
 * "sha256:<hex>" (sha384, sha512 too), as SRI text (out: SL_SRI_MAX
 * bytes). False for md5, sha1 and the rest (too weak to pin) or bad hex. */
bool sl_pyhash_sri(const char *s, size_t len, char *out);

/* Whether a version can be spelled in a file-name pattern: not empty,
 * letters, digits and ".+!_-" only (so no '*': "==1.*" pins nothing). */
bool sl_pyversion_exact(const char *v, size_t len);

/* The page an installer reads on an index for one project (pip and
 * unearth: posixpath.join(index, normalised name) + "/"; Poetry's legacy
 * sources likewise): an unpinned GET rule noted "index page". */
int sl_pyindex_page_rule(sl_derived *out, const char *index, size_t len, const char *name,
                         const sl_pyprov *prov, char *err, size_t errcap);

/* A URL read as it is (a find-links page, PyPI's JSON API): an unpinned
 * GET rule for its path, noted `note`. */
int sl_pypage_rule(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov,
                   const char *note, char *err, size_t errcap);

/* A file an index links by its file name (Poetry, PDM): on the index's
 * file host, "/packages/<any>/FILE" on files.pythonhosted.org for PyPI,
 * "/<any>/FILE" on the index's own host otherwise (R9), with the digests
 * (ndigests 0: an unpinned rule, noted `note`). A name no rule can spell
 * literally ('%', '*', '/', a byte the rule syntax refuses) falls back to
 * a host entry noted so. */
int sl_pyindex_file_rule(sl_derived *out, const char *index, size_t len, const char *file,
                         const char *const *digests, size_t ndigests, const sl_pyprov *prov,
                         const char *note, char *err, size_t errcap);

/* The files of one version, when only the version is known (pip --hash,
 * Pipfile.lock): "*-V-*.whl" (name-version-tags), "*-V.tar.gz" and
 * "*-V.zip" (sdists), under /packages/ on files.pythonhosted.org for PyPI
 * and under / on the index's host otherwise. `version` must pass
 * sl_pyversion_exact. */
int sl_pyindex_version_rules(sl_derived *out, const char *index, size_t len, const char *version,
                             const char *const *digests, size_t ndigests, const sl_pyprov *prov,
                             const char *note, char *err, size_t errcap);

/* A direct artifact URL pinned to digests: its exact path; for a GitHub
 * URL that redirects (R6), also every path of the redirect's host, pinned
 * to the same digests (GitHub chooses that path; the bytes are the same).
 * ndigests 0: not pinned, and the URL falls back (sl_derived_add_fallback_url)
 * with `why`, the redirect hosts as host entries. */
int sl_pyurl_pin(sl_derived *out, const char *url, size_t len, const char *const *digests,
                 size_t ndigests, const sl_pyprov *prov, const char *why, char *err,
                 size_t errcap);

/* What cannot be pinned, as host entries with `why`: an index's hosts
 * (both of PyPI's), or the host a VCS URL is cloned from. */
int sl_pyindex_unpinned(sl_derived *out, const char *index, size_t len, const sl_pyprov *prov,
                        const char *why, char *err, size_t errcap);
int sl_pyvcs_unpinned(sl_derived *out, const char *url, size_t len, const sl_pyprov *prov,
                      const char *why, char *err, size_t errcap);
/* Only the host an index's files are on (PyPI's files.pythonhosted.org). */
int sl_pyindex_files_unpinned(sl_derived *out, const char *index, size_t len,
                              const sl_pyprov *prov, const char *why, char *err, size_t errcap);

/* Pins by version, gathered before they are added, so that the rules of a
 * version that several projects share carry all their digests and a note
 * naming them ("files of a==1.0, b==1.0"): derive.c keeps a rule's first
 * note. */
typedef struct sl_pyvpins sl_pyvpins;

sl_pyvpins *sl_pyvpins_new(void);
void sl_pyvpins_free(sl_pyvpins *s);

/* name==version, on index `index`, is any file hashing to one of the
 * digests. The index is checked now (-1 with err if unusable, 0 if
 * local: nothing to pin). */
int sl_pyvpins_add(sl_pyvpins *s, const char *index, size_t len, const char *name,
                   const char *version, const char *const *digests, size_t ndigests,
                   const sl_pyprov *prov, char *err, size_t errcap);

/* The rules of every (file host, version), in the order first added. */
bool sl_pyvpins_emit(sl_pyvpins *s, sl_derived *out, char *err, size_t errcap);

#endif
