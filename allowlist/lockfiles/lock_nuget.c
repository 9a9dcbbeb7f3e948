/* NuGet: packages.lock.json and the project's NuGet config.
 *
 * The lock file records package ids and versions but no URLs, so the hosts
 * come from the package sources: nuget.org (the default the user-level
 * config provides) plus the project config's <packageSources>, where
 * <clear/> drops everything defined before it (the default included),
 * <remove key> one source, and <disabledPackageSources> switches sources
 * off. Without <packageSourceMapping> every enabled source is queried for
 * every package; with it, a package goes only to the sources whose pattern
 * for it is the most specific (LOCKFILES.md §2, NuGet docs "Package Source
 * Mapping"). Folder and UNC sources are local (R5).
 *
 * With --pins nothing can be pinned (PINS.md "the rest"): a contentHash is
 * over the package without its signature file, not over the .nupkg that is
 * downloaded (nuget.org signs every package). The host entries say so.
 *
 * Not modelled (LOCKFILES.md §4): configs above the project directory and
 * user/machine configs other than the nuget.org default, %VAR% values
 * (a URL whose host is one is refused), blob-storage redirects of Azure
 * Artifacts and similar feeds (R9: the feed's own host), and CRL/OCSP
 * checks for signed packages (auxiliary, R3). */
#include "lockfile.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "xmlread.h"

#define NUGET_ORG_URL "https://api.nuget.org/v3/index.json"
#define MAX_SOURCES 1024
#define MAX_PATTERNS 4096
#define MAX_DEPTH 64

typedef struct source {
    char *key;
    char *url;
    bool from_config;
    int line;            /* of its <add> in the config */
} source;

typedef struct pattern {
    char *source;        /* key of the source it maps to */
    char *pattern;       /* "*", "Prefix.*" or an exact id */
} pattern;

typedef struct nuconf {
    source *src;
    size_t nsrc, capsrc;
    char **disabled;
    size_t ndisabled, capdisabled;
    pattern *pat;
    size_t npat, cappat;

    /* Parse state. */
    sl_xml xml;
    int depth;
    char section[32];    /* the depth-2 element we are in, if one we read */
    char *mapsrc;        /* key of the <packageSource> we are in */
} nuconf;

static void conf_free(nuconf *c)
{
    for (size_t i = 0; i < c->nsrc; i++) {
        free(c->src[i].key);
        free(c->src[i].url);
    }
    for (size_t i = 0; i < c->ndisabled; i++)
        free(c->disabled[i]);
    for (size_t i = 0; i < c->npat; i++) {
        free(c->pat[i].source);
        free(c->pat[i].pattern);
    }
    free(c->mapsrc);
    free(c->src);
    free(c->disabled);
    free(c->pat);
}

static const char *attr(const char **atts, const char *name)
{
    for (size_t i = 0; atts[i] && atts[i + 1]; i += 2)
        if (strcmp(atts[i], name) == 0)
            return atts[i + 1];
    return NULL;
}

static void sources_clear(nuconf *c)
{
    for (size_t i = 0; i < c->nsrc; i++) {
        free(c->src[i].key);
        free(c->src[i].url);
    }
    c->nsrc = 0;
}

static void source_remove(nuconf *c, const char *key)
{
    for (size_t i = 0; i < c->nsrc; i++) {
        if (strcasecmp(c->src[i].key, key) != 0)
            continue;
        free(c->src[i].key);
        free(c->src[i].url);
        memmove(&c->src[i], &c->src[i + 1], (c->nsrc - i - 1) * sizeof c->src[0]);
        c->nsrc--;
        return;
    }
}

/* A later <add> with the same key replaces the earlier one in place. */
static bool source_add(nuconf *c, const char *key, const char *url, bool from_config, int line)
{
    char *u = strdup(url);
    if (!u)
        return false;
    for (size_t i = 0; i < c->nsrc; i++) {
        if (strcasecmp(c->src[i].key, key) == 0) {
            free(c->src[i].url);
            c->src[i].url = u;
            c->src[i].from_config = from_config;
            c->src[i].line = line;
            return true;
        }
    }
    char *k = strdup(key);
    if (!k || !sl_grow(&c->src, &c->capsrc, c->nsrc, sizeof c->src[0], MAX_SOURCES)) {
        free(k);
        free(u);
        return false;
    }
    c->src[c->nsrc++] = (source){.key = k, .url = u, .from_config = from_config, .line = line};
    return true;
}

static void on_start(void *ud, const char *name, const char **atts)
{
    nuconf *c = ud;
    c->depth++;
    if (c->xml.failed)
        return;
    if (c->depth > MAX_DEPTH) {
        sl_xml_fail(&c->xml, "%s", "elements nested too deeply");
        return;
    }
    if (c->depth == 1) {
        if (strcmp(name, "configuration") != 0)
            sl_xml_fail(&c->xml, "root element is <%s>, not <configuration>: not a NuGet config",
                        name);
        return;
    }
    if (c->depth == 2) {
        c->section[0] = '\0';
        if (strcmp(name, "packageSources") == 0 || strcmp(name, "disabledPackageSources") == 0 ||
            strcmp(name, "packageSourceMapping") == 0)
            snprintf(c->section, sizeof c->section, "%s", name);
        return;
    }
    if (c->depth == 3 && strcmp(c->section, "packageSources") == 0) {
        const char *key = attr(atts, "key");
        if (strcmp(name, "clear") == 0) {
            sources_clear(c);
        } else if (strcmp(name, "remove") == 0 && key) {
            source_remove(c, key);
        } else if (strcmp(name, "add") == 0) {
            const char *value = attr(atts, "value");
            if (!key || !value)
                sl_xml_fail(&c->xml, "%s", "<add> in <packageSources> needs key and value");
            else if (!source_add(c, key, value, true, sl_xml_line(&c->xml)))
                sl_xml_fail(&c->xml, "%s", "too many package sources");
        }
    } else if (c->depth == 3 && strcmp(c->section, "disabledPackageSources") == 0) {
        const char *key = attr(atts, "key"), *value = attr(atts, "value");
        if (strcmp(name, "clear") == 0) {
            for (size_t i = 0; i < c->ndisabled; i++)
                free(c->disabled[i]);
            c->ndisabled = 0;
        } else if (strcmp(name, "add") == 0 && key && value && strcasecmp(value, "true") == 0) {
            if (!sl_grow(&c->disabled, &c->capdisabled, c->ndisabled,
                      sizeof c->disabled[0], MAX_SOURCES) ||
                !(c->disabled[c->ndisabled] = strdup(key)))
                sl_xml_fail(&c->xml, "%s", "too many disabled package sources");
            else
                c->ndisabled++;
        }
    } else if (c->depth == 3 && strcmp(c->section, "packageSourceMapping") == 0) {
        if (strcmp(name, "clear") == 0) {
            for (size_t i = 0; i < c->npat; i++) {
                free(c->pat[i].source);
                free(c->pat[i].pattern);
            }
            c->npat = 0;
        } else if (strcmp(name, "packageSource") == 0) {
            const char *key = attr(atts, "key");
            if (!key)
                sl_xml_fail(&c->xml, "%s", "<packageSource> needs a key");
            else if (!(c->mapsrc = strdup(key)))
                sl_xml_fail(&c->xml, "%s", "out of memory");
        }
    } else if (c->depth == 4 && c->mapsrc && strcmp(name, "package") == 0) {
        const char *p = attr(atts, "pattern");
        if (!p || !p[0]) {
            sl_xml_fail(&c->xml, "%s", "<package> needs a pattern");
        } else if (!sl_grow(&c->pat, &c->cappat, c->npat, sizeof c->pat[0],
                         MAX_PATTERNS)) {
            sl_xml_fail(&c->xml, "%s", "too many package patterns");
        } else {
            pattern *pt = &c->pat[c->npat];
            pt->source = strdup(c->mapsrc);
            pt->pattern = strdup(p);
            if (!pt->source || !pt->pattern) {
                free(pt->source);
                free(pt->pattern);
                sl_xml_fail(&c->xml, "%s", "out of memory");
            } else {
                c->npat++;
            }
        }
    }
}

static void on_end(void *ud, const char *name)
{
    nuconf *c = ud;
    (void)name;
    if (c->depth == 3 && c->mapsrc) {
        free(c->mapsrc);
        c->mapsrc = NULL;
    }
    if (c->depth == 2)
        c->section[0] = '\0';
    c->depth--;
}

static bool parse_config(nuconf *c, const char *path, const char *data, size_t len,
                         sl_lockerr *err)
{
    static const sl_xml_handlers handlers = {.start = on_start, .end = on_end};
    return sl_xml_parse(&c->xml, path, data, len, &handlers, c, err);
}

static bool is_disabled(const nuconf *c, const char *key)
{
    for (size_t i = 0; i < c->ndisabled; i++)
        if (strcasecmp(c->disabled[i], key) == 0)
            return true;
    return false;
}

/* How specifically `pat` matches `id`: -1 no match, 0 "*", prefix length
 * for "Prefix*", INT_MAX for an exact id. Case-insensitive, as NuGet ids. */
static int pattern_score(const char *pat, const char *id)
{
    size_t pl = strlen(pat);
    if (pl > 0 && pat[pl - 1] == '*') {
        size_t pre = pl - 1;
        if (pre > INT_MAX - 1)
            return -1;
        return strncasecmp(pat, id, pre) == 0 ? (int)pre : -1;
    }
    return strcasecmp(pat, id) == 0 ? INT_MAX : -1;
}

/* Sources used for `id` under source mapping: marks used[i]. */
static void mapped_sources(const nuconf *c, const char *id, bool *used)
{
    int best = -1;
    for (size_t i = 0; i < c->npat; i++) {
        int s = pattern_score(c->pat[i].pattern, id);
        if (s > best)
            best = s;
    }
    if (best < 0)
        return;       /* restore fails for this id (NU1100): nothing to reach */
    for (size_t i = 0; i < c->npat; i++) {
        if (pattern_score(c->pat[i].pattern, id) != best)
            continue;
        for (size_t k = 0; k < c->nsrc; k++)
            if (strcasecmp(c->src[k].key, c->pat[i].source) == 0)
                used[k] = true;
    }
}

/* A source value that is a URL, not a folder: http(s) only. */
static bool is_remote(const char *v)
{
    return strncasecmp(v, "https://", 8) == 0 || strncasecmp(v, "http://", 7) == 0;
}

/* The package ids a restore must download: every entry of every target
 * framework that is not a project reference. */
static bool lock_ids(const char *path, const char *data, size_t len, json_t **root_out,
                     sl_lockerr *err)
{
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    if (!root) {
        sl_lockerr_set(err, path, je.line > 0 ? je.line : 0, "invalid JSON: %s", je.text);
        return false;
    }
    json_t *ver = json_object_get(root, "version");
    json_t *deps = json_object_get(root, "dependencies");
    if (!json_is_object(root) || !json_is_integer(ver) || !json_is_object(deps)) {
        sl_lockerr_set(err, path, 0, "not a NuGet lock file (needs \"version\" and "
                                     "\"dependencies\")");
        json_decref(root);
        return false;
    }
    json_int_t v = json_integer_value(ver);
    if (v < 1 || v > 2) {
        sl_lockerr_set(err, path, 0, "unsupported packages.lock.json version %lld", (long long)v);
        json_decref(root);
        return false;
    }
    const char *tfm;
    json_t *pkgs;
    json_object_foreach(deps, tfm, pkgs) {
        const char *id;
        json_t *pkg;
        if (!json_is_object(pkgs)) {
            sl_lockerr_set(err, path, 0, "dependencies of \"%.100s\" is not an object", tfm);
            json_decref(root);
            return false;
        }
        json_object_foreach(pkgs, id, pkg) {
            json_t *type = json_object_get(pkg, "type");
            if (!json_is_object(pkg) || !json_is_string(type)) {
                sl_lockerr_set(err, path, 0, "package \"%.100s\" has no \"type\"", id);
                json_decref(root);
                return false;
            }
        }
    }
    *root_out = root;
    return true;
}


/* A source's host entry; with pins a fallback saying why (for the host
 * alone: a feed URL is not a path a rule could name). */
static int add_url_entry(sl_derived *out, const char *url, const char *file, char *msg, size_t cap)
{
    if (!sl_derived_pins(out))
        return sl_derived_add_url(out, url, strlen(url), file, msg, cap);
    sl_derived *probe = sl_derived_new();     /* the same checks, the same messages */
    int r = sl_derived_add_url(probe, url, strlen(url), file, msg, cap);
    sl_derived_free(probe);
    sl_url u;
    if (r <= 0 || !sl_url_parse(url, strlen(url), &u))
        return r;
    return sl_derived_add_fallback(out, u.host, u.host_len, u.port, NULL, 0, file,
                                   "contentHash leaves out the package signature: not a digest of the .nupkg",
                                   msg, cap)
               ? 1
               : -1;
}

static bool nuget_read(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    json_t *root = NULL;
    if (!lock_ids(path, data, len, &root, err))
        return false;

    nuconf *c = calloc(1, sizeof *c);
    bool *used = NULL;
    /* nuget.org: the source the user-level config has by default. */
    bool ok = c != NULL && source_add(c, "nuget.org", NUGET_ORG_URL, false, 0);
    if (!ok)
        sl_lockerr_set(err, path, 0, "out of memory");

    /* NuGet reads the first of these names present in a directory. */
    static const char *const names[] = {"nuget.config", "NuGet.config", "NuGet.Config"};
    const char *cpath = NULL;
    for (size_t i = 0; ok && i < sizeof names / sizeof names[0] && !cpath; i++) {
        size_t clen;
        const char *cp = NULL;
        err->msg[0] = '\0';
        const char *cdata = sl_project_file(proj, names[i], &clen, &cp, err);
        if (!cdata && err->msg[0])
            ok = false;
        else if (cdata) {
            cpath = cp ? cp : names[i];
            ok = parse_config(c, cpath, cdata, clen, err);
        }
    }

    if (ok) {
        used = calloc(c->nsrc + 1, sizeof *used);
        ok = used != NULL;
        if (!ok)
            sl_lockerr_set(err, path, 0, "out of memory");
    }
    bool any = false;
    if (ok) {
        const char *tfm, *id;
        json_t *pkgs, *pkg;
        json_object_foreach(json_object_get(root, "dependencies"), tfm, pkgs) {
            json_object_foreach(pkgs, id, pkg) {
                if (strcmp(json_string_value(json_object_get(pkg, "type")), "Project") == 0)
                    continue;
                any = true;
                if (c->npat > 0)
                    mapped_sources(c, id, used);
                else
                    for (size_t k = 0; k < c->nsrc; k++)
                        used[k] = true;
            }
        }
    }
    for (size_t k = 0; ok && any && k < c->nsrc; k++) {
        if (!used[k] || is_disabled(c, c->src[k].key) || !is_remote(c->src[k].url))
            continue;
        const char *url = c->src[k].url;
        /* %VAR% in the authority: only known where the restore runs. */
        const char *auth = strstr(url, "://") + 3;
        size_t alen = strcspn(auth, "/?#");
        if (memchr(auth, '%', alen)) {
            sl_lockerr_set(err, cpath ? cpath : path, c->src[k].line,
                           "cannot determine the host of package source '%.100s' (%.200s)",
                           c->src[k].key, url);
            ok = false;
            break;
        }
        char msg[256];
        bool config_matters = cpath && (c->src[k].from_config || c->npat > 0);
        int r = add_url_entry(out, url, path, msg, sizeof msg);
        if (r > 0 && config_matters)
            r = add_url_entry(out, url, cpath, msg, sizeof msg);
        if (r < 0) {
            sl_lockerr_set(err, cpath && c->src[k].from_config ? cpath : path, c->src[k].line,
                           "package source '%.100s': %s", c->src[k].key, msg);
            ok = false;
        }
    }
    free(used);
    if (c)
        conf_free(c);
    free(c);
    json_decref(root);
    return ok;
}

static bool nuget_recognises(const char *base)
{
    return strcmp(base, "packages.lock.json") == 0;
}

const sl_lockreader sl_reader_nuget = {
    .name = "nuget",
    .recognises = nuget_recognises,
    .read = nuget_read,
};
