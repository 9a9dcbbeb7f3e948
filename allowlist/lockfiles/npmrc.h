/* Registry configuration of the npm family (npm, Yarn 1, Yarn 2+, pnpm) as
 * a project's config files state it, and the pieces their lockfile readers
 * share: where a package name is fetched from, URLs with the CDN hosts they
 * redirect to (LOCKFILES.md R6), the Yarn 1 text syntax (.yarnrc and
 * yarn.lock v1) and libyaml documents (.yarnrc.yml, Yarn 2+ yarn.lock,
 * pnpm-lock.yaml). Pure: bytes in, entries out. */
#ifndef SLUICE_NPMRC_H
#define SLUICE_NPMRC_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "derive.h"
#include "lockfile.h"

/* ---- registry configuration ---------------------------------------- */

typedef struct sl_npmcfg sl_npmcfg;

/* An empty configuration whose registry, when nothing sets one, is
 * default_registry (npm and pnpm: https://registry.npmjs.org/, Yarn:
 * https://registry.yarnpkg.com). */
sl_npmcfg *sl_npmcfg_new(const char *default_registry);
void sl_npmcfg_free(sl_npmcfg *c);

/* Read the project's .npmrc, if any: `registry=`, `@scope:registry=`,
 * `replace-registry-host=`. Auth-only keys and every other key are
 * ignored. Returns false with err set on a value that cannot be used. */
bool sl_npmcfg_load_npmrc(sl_npmcfg *c, sl_project *p, sl_lockerr *err);

/* Yarn 1's .yarnrc (`registry "…"`, `"@scope:registry" "…"`), in effect
 * after .npmrc: Yarn 1 asks .npmrc first for a scope and for the default. */
bool sl_npmcfg_load_yarnrc(sl_npmcfg *c, sl_project *p, sl_lockerr *err);

/* Yarn 2+'s .yarnrc.yml: `npmRegistryServer`,
 * `npmScopes.<scope>.npmRegistryServer`. */
bool sl_npmcfg_load_yarnrc_yml(sl_npmcfg *c, sl_project *p, sl_lockerr *err);

/* The registry URL a package name ("@scope/name" or "name") is fetched
 * from: its scope's registry, else the configured one, else the default.
 * *file is the config file that said so, or NULL for the default. */
const char *sl_npmcfg_registry(const sl_npmcfg *c, const char *name, size_t len, const char **file);

/* npm's `replace-registry-host`: is a `resolved` URL fetched from the
 * configured registry instead? The default ("npmjs") rewrites URLs on
 * registry.npmjs.org, "never" none, "always" all; a host name rewrites that
 * host's URLs, a URL those under its path. u is NULL for a resolved value
 * that is not a URL (only "always" rewrites it). *file is the config file
 * that set the mode, or NULL for the default. */
bool sl_npmcfg_replaces(const sl_npmcfg *c, const sl_url *u, const char **file);

/* The path a replace-registry-host URL selects ("/repository/npm-proxy"),
 * or NULL when the setting is not a URL with a path. */
const char *sl_npmcfg_replace_prefix(const sl_npmcfg *c);

/* ---- adding entries ------------------------------------------------- */

/* Add the registry host:port for a package name, required by lockfile
 * (and by the config file that named the registry, if one did). */
bool sl_npm_add_registry(sl_derived *d, const sl_npmcfg *c, const char *name, size_t len,
                         const char *lockfile, int line, sl_lockerr *err);

/* Add the host:port of a URL as the lockfile (and config file cfgfile, if
 * not NULL) recorded it, plus the hosts a GitHub archive, release or API
 * tarball URL redirects to (R6). Returns 1 if added, 0 if the URL names no
 * network host, -1 with err set on an invalid host or port. */
int sl_npm_add_url(sl_derived *d, const char *url, size_t len, const char *lockfile,
                   const char *cfgfile, int line, sl_lockerr *err);

/* Add host:port, required by lockfile and (if not NULL) cfgfile. */
bool sl_npm_add_host(sl_derived *d, const char *host, size_t host_len, int port,
                     const char *lockfile, const char *cfgfile, int line, sl_lockerr *err);

/* ---- --pins (SPEC part 2, "Pinned artifacts") ----------------------
 *
 * A tarball the lockfile gives a sha256/384/512 digest for becomes a pinned
 * GET rule; metadata the locked install reads, an unpinned one; a tarball
 * without such a digest, a git dependency, or a host that must serve what
 * no rule can allow, a fallback whose comment says why (derive.h). */

/* The most digests one tarball's rule takes from an SRI list. */
#define SL_NPM_DIGESTS 8

typedef struct sl_npm_blocked sl_npm_blocked;

/* One lockfile's output with pins: the set, the lockfile's name, the error
 * to fill, and the hosts that cannot be inspected for this lockfile. */
typedef struct sl_npm_pins {
    sl_derived *d;
    const char *lockfile;
    sl_lockerr *err;
    sl_npm_blocked *blocked;
    size_t nblocked, capblocked;
} sl_npm_pins;

void sl_npm_pins_init(sl_npm_pins *p, sl_derived *d, const char *lockfile, sl_lockerr *err);
void sl_npm_pins_free(sl_npm_pins *p);

/* The install fetches name's packument from registry. For a scoped name
 * that is "/@scope%2fname", a path the gate refuses before any rule is
 * tried (an encoded '/'), so the registry's host cannot be inspected:
 * everything this lockfile has on it then falls back to a host entry that
 * says why. `tool` ("npm", "Yarn") is named in the reason. An unscoped
 * name, or a registry that is not a URL, blocks nothing. */
void sl_npm_pins_block_scoped(sl_npm_pins *p, const char *registry, const char *name, size_t len,
                              const char *tool);

/* A tarball at url, with the lockfile's SRI `integrity` list (NULL or
 * empty: none): a GET rule pinned to its sha256/384/512 digests, or, with
 * none of those, a fallback for its path saying so. Its files are the
 * lockfile and cfgfile (if not NULL). The host a GitHub download
 * redirects to (R6) is added as a fallback. Returns 1, 0 if the URL names
 * no network host, -1 with the error set. */
int sl_npm_pin_tarball(sl_npm_pins *p, const char *url, size_t len, const char *sri, size_t sri_len,
                       const char *cfgfile, int line);

/* Metadata the install reads at url: an unpinned GET rule with `note`. */
int sl_npm_pin_metadata(sl_npm_pins *p, const char *url, size_t len, const char *cfgfile, const char *note,
                        int line);

/* What cannot be pinned, with why: url's host:port, and its path when
 * with_path (a download at a known path; a git clone has none). */
int sl_npm_pin_fallback(sl_npm_pins *p, const char *url, size_t len, bool with_path, const char *cfgfile,
                        const char *why, int line);
bool sl_npm_pin_fallback_host(sl_npm_pins *p, const char *host, size_t host_len, int port,
                              const char *cfgfile, const char *why, int line);

/* URLs a registry (as configured) serves, as the clients derive them;
 * malloc'd. NULL when the registry is not a URL, or a name, version or
 * reference holds a character a rule's path would not take literally
 * (npm names and versions never do). Every URL has its port written. */

/* <registry>/<name>/-/<name without its scope>-<version without +build>.tgz
 * (pnpm's getNpmTarballUrl, the layout of the npm registry). */
char *sl_npm_tarball_url(const char *registry, const char *name, size_t nlen, const char *version,
                         size_t vlen);

/* <registry without trailing '/'>/<name with its '/' as %2f> (pacote's
 * packumentUrl, Yarn 1's escapeName). */
char *sl_npm_packument_url(const char *registry, const char *name, size_t nlen);

/* A `resolved` URL that replace-registry-host sends to the registry
 * (arborist's #registryResolved): the registry's scheme, host and port,
 * and the registry's path put before the URL's unless it already starts
 * with it. With `prefix` (sl_npmcfg_replace_prefix), that prefix of the
 * URL's path is what the registry's path replaces. The query is dropped
 * (a rule does not match it). */
char *sl_npm_registry_rewrite(const char *registry, const sl_url *u, const char *prefix);

/* A relative tarball reference joined to the registry as
 * new URL(ref, registry + '/') does: "//host/x" keeps the scheme, "/x" the
 * origin, "x" the registry's path. NULL for dot segments, a first segment
 * that would read as a scheme, or a query or fragment. */
char *sl_npm_registry_join(const char *registry, const char *ref, size_t rlen);

/* The line (1-based) of the first merge-conflict marker (a line starting
 * with "<<<<<<<", "=======" or ">>>>>>>"), or 0 if there is none. */
int sl_npm_conflict_line(const char *data, size_t len);

/* "@scope/name" -> "@scope" (length in *scope_len); false for an unscoped
 * name. */
bool sl_npm_scope(const char *name, size_t len, size_t *scope_len);

/* ---- the Yarn 1 text syntax ----------------------------------------- */

typedef enum sl_y1_kind { SL_Y1_STRING, SL_Y1_NUMBER, SL_Y1_BOOL } sl_y1_kind;

typedef struct sl_y1_tok {
    sl_y1_kind kind;
    const char *s;         /* raw text; for a quoted string, without the quotes */
    size_t len;
    bool quoted;           /* a JSON-style string: escapes to decode */
} sl_y1_tok;

typedef enum sl_y1_event {
    SL_Y1_OPEN,            /* "keys:" a block at depth+1 follows */
    SL_Y1_PAIR,            /* "keys value" */
    SL_Y1_CLOSE,           /* the block opened at `depth` ended */
} sl_y1_event;

/* Called for every line that says something, and at each block's end.
 * `keys` holds the first key only (nkeys says how many the line had);
 * `value` is NULL for OPEN and CLOSE. Return false to stop (the callback
 * reports its own error). */
typedef bool (*sl_y1_fn)(void *ctx, sl_y1_event ev, int depth, const sl_y1_tok *key, size_t nkeys,
                         const sl_y1_tok *value, int line);

/* Parse the Yarn 1 syntax strictly: two-space indentation, a block only
 * after "keys:", JSON-style quoted strings, comments from '#' at a token's
 * start. On a syntax error returns false with *line and *why set; when the
 * callback stopped it, returns false with *why NULL. */
bool sl_y1_parse(const char *data, size_t len, sl_y1_fn fn, void *ctx, int *line, const char **why);

/* Decode a token's text into out (NUL-terminated, cut at cap); returns the
 * full decoded length. The parser has already checked the escapes. */
size_t sl_y1_text(const sl_y1_tok *t, char *out, size_t cap);

/* ---- libyaml documents ---------------------------------------------- */

/* Load the next YAML document of `parser` into doc. Returns false with
 * err set (path, line) on a syntax error. *end is set when the stream has
 * no more documents (doc is then empty and need not be deleted). */
bool sl_yaml_next(yaml_parser_t *parser, yaml_document_t *doc, bool *end, const char *path,
                  sl_lockerr *err);

/* The value of `key` in a mapping node, or NULL. */
yaml_node_t *sl_yaml_get(yaml_document_t *doc, yaml_node_t *map, const char *key);

/* A scalar's text and length, or NULL if the node is not a scalar. */
const char *sl_yaml_str(const yaml_node_t *n, size_t *len);

/* A node's line, 1-based. */
int sl_yaml_line(const yaml_node_t *n);

#endif
