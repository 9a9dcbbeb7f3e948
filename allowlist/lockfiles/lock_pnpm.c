/* pnpm-lock.yaml, lockfileVersion 5.x ("/name/1.0.0" keys), 6.x
 * ("/name@1.0.0") and 9.x ("name@1.0.0", with `snapshots` apart).
 *
 * Only `packages[*].resolution` says where a package comes from: pnpm
 * writes no URL for a registry package, so its host is the registry of its
 * scope in .npmrc, else `registry=`, else registry.npmjs.org; a relative
 * `tarball` is joined to that registry, an absolute one is used as written
 * (pkgSnapshotToResolution). LOCKFILES.md §2, "pnpm". */
#include <stdlib.h>
#include <string.h>

#include "growbuf.h"
#include "lockfile.h"
#include "npmrc.h"
#include "url.h"

typedef struct pnpm_ctx {
    const char *path;
    sl_npmcfg *cfg;
    sl_derived *out;
    sl_lockerr *err;
    yaml_document_t *doc;
    int major;
    sl_npm_pins *pins;             /* --pins, else NULL */
} pnpm_ctx;

static bool starts(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && !memcmp(s, prefix, n);
}

static bool is(const char *s, size_t len, const char *word)
{
    return s && len == strlen(word) && !memcmp(s, word, len);
}

/* The package name from a packages key, enough to find its scope:
 * "/@corp/lib/1.0.0", "/@corp/lib@1.0.0", "@corp/lib@1.0.0", and v5/v6
 * absolute paths that start with a registry host, "npm.corp/@corp/lib/1.0.0". */
static void key_name(const pnpm_ctx *x, const char *k, size_t kn, const char **name, size_t *nlen)
{
    if (x->major < 9) {
        if (kn && k[0] == '/') {
            k++;
            kn--;
        } else if (kn && k[0] != '@') {
            const char *slash = memchr(k, '/', kn);
            if (slash) {
                kn -= (size_t)(slash + 1 - k);
                k = slash + 1;
            }
        }
    }
    *name = k;
    *nlen = kn;
}

/* A package of the registry: the registry for its scope, or the tarball
 * path joined to it. */
static bool add_registry_tarball(pnpm_ctx *x, const char *name, size_t nlen, const char *tarball,
                                 size_t tlen, int line)
{
    if (!tarball || !starts(tarball, tlen, "//"))
        return sl_npm_add_registry(x->out, x->cfg, name, nlen, x->path, line, x->err);
    /* "//host/path" keeps the registry's scheme but names its own host */
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, nlen, &file);
    const char *colon = strchr(reg, ':');
    size_t slen = colon ? (size_t)(colon - reg) + 1 : 0;
    char *url = malloc(slen + tlen + 1);
    if (!url)
        abort();
    memcpy(url, reg, slen);
    memcpy(url + slen, tarball, tlen);
    url[slen + tlen] = '\0';
    int r = sl_npm_add_url(x->out, url, slen + tlen, x->path, file, line, x->err);
    free(url);
    if (r == 0)
        sl_lockerr_set(x->err, x->path, line, "tarball is not a URL");
    return r > 0;
}

static bool read_resolution(pnpm_ctx *x, yaml_node_t *res, const char *name, size_t nlen, int depth)
{
    int line = sl_yaml_line(res);
    if (!res || res->type != YAML_MAPPING_NODE) {
        sl_lockerr_set(x->err, x->path, line, "resolution is not a mapping");
        return false;
    }
    size_t tn, un, n;
    const char *type = sl_yaml_str(sl_yaml_get(x->doc, res, "type"), &tn);
    if (type) {
        if (is(type, tn, "directory"))
            return true;                           /* local (R5) */
        if (is(type, tn, "git") || is(type, tn, "binary")) {
            /* git: cloned from the repository's host; binary: a runtime
             * archive (pnpm 10 `node@runtime:`) */
            const char *key = is(type, tn, "git") ? "repo" : "url";
            const char *url = sl_yaml_str(sl_yaml_get(x->doc, res, key), &un);
            if (!url) {
                sl_lockerr_set(x->err, x->path, line, "%.*s resolution has no %s", (int)tn, type, key);
                return false;
            }
            return sl_npm_add_url(x->out, url, un, x->path, NULL, line, x->err) >= 0;
        }
        if (is(type, tn, "variations") && depth == 0) {
            /* one variant per platform: allow them all */
            yaml_node_t *v = sl_yaml_get(x->doc, res, "variants");
            if (!v || v->type != YAML_SEQUENCE_NODE) {
                sl_lockerr_set(x->err, x->path, line, "variations resolution has no variants");
                return false;
            }
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *item = yaml_document_get_node(x->doc, *it);
                if (!read_resolution(x, sl_yaml_get(x->doc, item, "resolution"), name, nlen, depth + 1))
                    return false;
            }
            return true;
        }
        sl_lockerr_set(x->err, x->path, line, "unsupported resolution type '%.*s'",
                       (int)(tn > 40 ? 40 : tn), type);
        return false;
    }
    const char *tarball = sl_yaml_str(sl_yaml_get(x->doc, res, "tarball"), &n);
    if (tarball) {
        if (starts(tarball, n, "file:"))
            return true;                           /* local (R5) */
        if (memmem(tarball, n, "://", 3)) {
            int r = sl_npm_add_url(x->out, tarball, n, x->path, NULL, line, x->err);
            if (r == 0)
                sl_lockerr_set(x->err, x->path, line, "tarball is not a URL");
            return r > 0;
        }
        return add_registry_tarball(x, name, nlen, tarball, n, line);
    }
    if (!sl_yaml_str(sl_yaml_get(x->doc, res, "integrity"), &n)) {
        sl_lockerr_set(x->err, x->path, line, "resolution has no integrity, tarball or type");
        return false;
    }
    return add_registry_tarball(x, name, nlen, NULL, 0, line);
}

/* ---- --pins ---- */

static const char WHY_GIT[] = "a git dependency, cloned: nothing to pin";

/* The name and version a packages key names, as pnpm's dependency-path
 * parse reads them: "name@1.0.0" (v9), "/name@1.0.0(peer@2.0.0)" (v6),
 * "/name/1.0.0_peer@2.0.0" (v5), scoped names alike; a v5/v6 key may start
 * with a registry host ("npm.corp/name/1.0.0"), which is skipped. */
static bool key_name_version(const pnpm_ctx *x, const char *k, size_t kn, const char **name, size_t *nlen,
                             const char **ver, size_t *vlen)
{
    if (x->major < 9 && kn && k[0] == '/') {
        k++;
        kn--;
    } else if (x->major < 9 && kn && k[0] != '@') {
        const char *slash = memchr(k, '/', kn);
        if (slash) {
            kn -= (size_t)(slash + 1 - k);
            k = slash + 1;
        }
    }
    const char *sep;
    if (x->major >= 6) {
        sep = kn > 1 ? memchr(k + 1, '@', kn - 1) : NULL;
    } else {
        const char *first = memchr(k, '/', kn);
        sep = first && k[0] == '@' ? memchr(first + 1, '/', kn - (size_t)(first + 1 - k)) : first;
    }
    if (!sep || sep + 1 >= k + kn)
        return false;
    *name = k;
    *nlen = (size_t)(sep - k);
    *ver = sep + 1;
    *vlen = kn - *nlen - 1;
    /* the peers (and patch) suffix */
    const char *cut = memchr(*ver, '(', *vlen);
    if (x->major < 6 && !cut)
        cut = memchr(*ver, '_', *vlen);
    if (cut)
        *vlen = (size_t)(cut - *ver);
    return *vlen > 0;
}

static bool pin_registry_host(pnpm_ctx *x, const char *reg, const char *file, const char *why, int line)
{
    sl_url u;
    if (!sl_url_parse(reg, strlen(reg), &u) || u.port < 0) {
        sl_lockerr_set(x->err, file ? file : x->path, line, "registry '%s' is not a URL", reg);
        return false;
    }
    return sl_npm_pin_fallback_host(x->pins, u.host, u.host_len, u.port, file, why, line);
}

/* A registry package: its tarball at the registry for its scope
 * (pkgSnapshotToResolution): the tarball reference joined to the registry,
 * or, with none, the URL getNpmTarballUrl derives from the key's name and
 * version. pnpm 7 lockfiles may name the registry in the resolution. */
static bool pin_registry_tarball(pnpm_ctx *x, yaml_node_t *res, const char *key, size_t kn, const char *name,
                                 size_t nlen, const char *tarball, size_t tlen, int line)
{
    size_t sn = 0, rn;
    const char *sri = sl_yaml_str(sl_yaml_get(x->doc, res, "integrity"), &sn);
    const char *file;
    const char *reg = sl_npmcfg_registry(x->cfg, name, nlen, &file);
    const char *own = sl_yaml_str(sl_yaml_get(x->doc, res, "registry"), &rn);
    char *own_reg = own ? sl_xstrndup(own, rn) : NULL;
    if (own_reg) {
        reg = own_reg;
        file = NULL;
    }
    char *url;
    const char *kname = NULL, *kver = NULL;
    size_t knlen = 0, kvlen = 0;
    if (tarball)
        url = sl_npm_registry_join(reg, tarball, tlen);
    else
        url = key_name_version(x, key, kn, &kname, &knlen, &kver, &kvlen)
                  ? sl_npm_tarball_url(reg, kname, knlen, kver, kvlen)
                  : NULL;
    bool ok;
    if (url)
        ok = sl_npm_pin_tarball(x->pins, url, strlen(url), sri, sri ? sn : 0, file, line) >= 0;
    else
        ok = pin_registry_host(x, reg, file,
                               tarball ? "a tarball reference that cannot be written in a rule's path"
                                       : "a tarball whose URL cannot be written from its key", line);
    free(url);
    free(own_reg);
    return ok;
}

static bool pin_resolution(pnpm_ctx *x, yaml_node_t *res, const char *key, size_t kn, const char *name,
                           size_t nlen, int depth)
{
    int line = sl_yaml_line(res);
    if (!res || res->type != YAML_MAPPING_NODE) {
        sl_lockerr_set(x->err, x->path, line, "resolution is not a mapping");
        return false;
    }
    size_t tn, un, n, sn = 0;
    const char *sri = sl_yaml_str(sl_yaml_get(x->doc, res, "integrity"), &sn);
    const char *type = sl_yaml_str(sl_yaml_get(x->doc, res, "type"), &tn);
    if (type) {
        if (is(type, tn, "directory"))
            return true;                           /* local (R5) */
        if (is(type, tn, "git") || is(type, tn, "binary")) {
            const char *k = is(type, tn, "git") ? "repo" : "url";
            const char *url = sl_yaml_str(sl_yaml_get(x->doc, res, k), &un);
            if (!url) {
                sl_lockerr_set(x->err, x->path, line, "%.*s resolution has no %s", (int)tn, type, k);
                return false;
            }
            /* git: cloned; binary: a runtime archive with its integrity */
            if (is(type, tn, "git"))
                return sl_npm_pin_fallback(x->pins, url, un, false, NULL, WHY_GIT, line) >= 0;
            return sl_npm_pin_tarball(x->pins, url, un, sri, sri ? sn : 0, NULL, line) >= 0;
        }
        if (is(type, tn, "variations") && depth == 0) {
            yaml_node_t *v = sl_yaml_get(x->doc, res, "variants");
            if (!v || v->type != YAML_SEQUENCE_NODE) {
                sl_lockerr_set(x->err, x->path, line, "variations resolution has no variants");
                return false;
            }
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *item = yaml_document_get_node(x->doc, *it);
                if (!pin_resolution(x, sl_yaml_get(x->doc, item, "resolution"), key, kn, name, nlen, depth + 1))
                    return false;
            }
            return true;
        }
        sl_lockerr_set(x->err, x->path, line, "unsupported resolution type '%.*s'", (int)(tn > 40 ? 40 : tn), type);
        return false;
    }
    const char *tarball = sl_yaml_str(sl_yaml_get(x->doc, res, "tarball"), &n);
    if (tarball) {
        if (starts(tarball, n, "file:"))
            return true;                           /* local (R5) */
        if (memmem(tarball, n, "://", 3)) {
            int r = sl_npm_pin_tarball(x->pins, tarball, n, sri, sri ? sn : 0, NULL, line);
            if (r == 0)
                sl_lockerr_set(x->err, x->path, line, "tarball is not a URL");
            return r > 0;
        }
        return pin_registry_tarball(x, res, key, kn, name, nlen, tarball, n, line);
    }
    if (!sri) {
        sl_lockerr_set(x->err, x->path, line, "resolution has no integrity, tarball or type");
        return false;
    }
    return pin_registry_tarball(x, res, key, kn, name, nlen, NULL, 0, line);
}

static bool is_null(const yaml_node_t *n)
{
    size_t len;
    const char *s = sl_yaml_str(n, &len);
    return s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (len == 0 || is(s, len, "~") || is(s, len, "null"));
}

static bool read_document(pnpm_ctx *x, yaml_node_t *root)
{
    size_t vn;
    const char *ver = sl_yaml_str(sl_yaml_get(x->doc, root, "lockfileVersion"), &vn);
    if (root->type != YAML_MAPPING_NODE || !ver) {
        sl_lockerr_set(x->err, x->path, sl_yaml_line(root), "not a pnpm lockfile: no lockfileVersion");
        return false;
    }
    int major = 0;
    size_t i = 0;
    while (i < vn && i < 3 && ver[i] >= '0' && ver[i] <= '9')
        major = major * 10 + (ver[i++] - '0');
    if (i == 0 || (i < vn && ver[i] != '.') || major < 5 || major > 9) {
        sl_lockerr_set(x->err, x->path, sl_yaml_line(sl_yaml_get(x->doc, root, "lockfileVersion")),
                       "unsupported pnpm lockfileVersion '%.*s'", (int)(vn > 20 ? 20 : vn), ver);
        return false;
    }
    x->major = major;

    yaml_node_t *pkgs = sl_yaml_get(x->doc, root, "packages");
    if (!pkgs || is_null(pkgs))
        return true;                               /* nothing to fetch */
    if (pkgs->type != YAML_MAPPING_NODE) {
        sl_lockerr_set(x->err, x->path, sl_yaml_line(pkgs), "packages is not a mapping");
        return false;
    }
    for (yaml_node_pair_t *p = pkgs->data.mapping.pairs.start; p < pkgs->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
        size_t kn, nn;
        const char *key = sl_yaml_str(k, &kn);
        if (!key || !v || v->type != YAML_MAPPING_NODE) {
            sl_lockerr_set(x->err, x->path, sl_yaml_line(k), "package entry is not a mapping");
            return false;
        }
        yaml_node_t *res = sl_yaml_get(x->doc, v, "resolution");
        if (!res) {
            sl_lockerr_set(x->err, x->path, sl_yaml_line(k), "package entry has no resolution");
            return false;
        }
        const char *name = sl_yaml_str(sl_yaml_get(x->doc, v, "name"), &nn);
        if (!name)
            key_name(x, key, kn, &name, &nn);
        if (x->pins ? !pin_resolution(x, res, key, kn, name, nn, 0) : !read_resolution(x, res, name, nn, 0))
            return false;
    }
    return true;
}

static bool recognises(const char *basename)
{
    return !strcmp(basename, "pnpm-lock.yaml");
}

static bool read_pnpm(const char *path, const char *data, size_t len, sl_project *proj,
                      sl_derived *out, sl_lockerr *err)
{
    /* pnpm merges conflicted lockfiles on install; one side of a conflict
     * is not the lock that will be installed, so refuse. */
    int conflict = sl_npm_conflict_line(data, len);
    if (conflict) {
        sl_lockerr_set(err, path, conflict, "merge-conflict marker: resolve the conflict first");
        return false;
    }
    sl_npmcfg *cfg = sl_npmcfg_new("https://registry.npmjs.org/");
    if (!sl_npmcfg_load_npmrc(cfg, proj, err)) {
        sl_npmcfg_free(cfg);
        return false;
    }
    sl_npm_pins pins;
    sl_npm_pins_init(&pins, out, path, err);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    bool ok = true;
    int docs = 0;
    /* pnpm 10 may put an environment document (packageManager
     * dependencies) before the project's: read every document. */
    for (;;) {
        yaml_document_t doc;
        bool end;
        if (!sl_yaml_next(&parser, &doc, &end, path, err)) {
            ok = false;
            break;
        }
        if (end)
            break;
        docs++;
        pnpm_ctx x = { path, cfg, out, err, &doc, 0, sl_derived_pins(out) ? &pins : NULL };
        ok = read_document(&x, yaml_document_get_root_node(&doc));
        yaml_document_delete(&doc);
        if (!ok)
            break;
    }
    if (ok && docs == 0) {
        sl_lockerr_set(err, path, 1, "not a pnpm lockfile: empty");
        ok = false;
    }
    yaml_parser_delete(&parser);
    sl_npm_pins_free(&pins);
    sl_npmcfg_free(cfg);
    return ok;
}

const sl_lockreader sl_reader_pnpm = {
    .name = "pnpm",
    .recognises = recognises,
    .read = read_pnpm,
};
