/* Bundler: Gemfile.lock (or gems.locked) and the project's .bundle/config.
 *
 * Source sections of the lockfile:
 *   GEM   remote: <url> (one per section; older Bundler wrote several)
 *         gems come from the remote: the rubygems.org remote serves its
 *         compact index from index.rubygems.org (Bundler's fetch_uri) and
 *         the .gem files itself; any other remote serves both (R9)
 *   GIT   remote: <url> (https, ssh://, git://, scp-style git@host:path)
 *         cloned from that host
 *   PATH  a local directory: nothing
 *   PLUGIN SOURCE  remote: <url>, fetched by the plugin: its host (R9)
 * A source section with no specs needs nothing (a lockfile with no
 * dependencies contacts nothing).
 *
 * .bundle/config mirrors (BUNDLE_MIRROR__HTTPS://RUBYGEMS__ORG/: "<url>",
 * and BUNDLE_MIRROR__ALL) replace a GEM remote for index and gems alike;
 * mirrors are keyed by the normalised remote URL or by its host, as
 * Bundler's Settings::Mirrors does. A mirror's fallback_timeout only adds a
 * fallback to the original remote after the mirror fails (R3): not emitted.
 *
 * With --pins (PINS.md "Bundler"): a gem of a GEM section whose CHECKSUMS
 * line (Bundler >= 2.5) gives its sha256 is a GET rule for
 * <remote>gems/<name>-<version>[-<platform>].gem (RubyGems' download path,
 * the mirror's when one is set) with that digest; the compact index Bundler
 * reads (<index>versions and <index>info/<every name it meets>, the index
 * being index.rubygems.org for the rubygems.org remote) are unpinned rules,
 * and on other remotes also the dependency API (api/v1/dependencies) Bundler
 * turns to when a server has no compact index. A gem without a checksum, a
 * lockfile without CHECKSUMS, GIT and plugin sources fall back to host
 * entries saying why.
 *
 * A lockfile with merge-conflict markers is refused, as Bundler refuses it
 * (R7). Not modelled: BUNDLE_* environment variables, the user's
 * ~/.bundle/config, and gems installed from vendor/cache with --local. */
#include "lockfile.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "growbuf.h"
#include "text.h"

#define MIRRORS_MAX 256

typedef struct span {
    const char *s;
    size_t n;
} span;

typedef struct mirror {
    char *key;                     /* normalised remote URL with '/', or a host, or "all" */
    char *uri;                     /* the mirror, normalised with a trailing '/' */
    int line;
} mirror;

/* With pins: a spec of a source section ("    name (version[-platform])"),
 * and a CHECKSUMS line ("  name (version[-platform]) sha256=<hex>,..."). */
typedef struct gemspec {
    span name, ver;                /* ver: the text in parentheses */
    size_t sec;
    int line;
} gemspec;

typedef struct gemsum {
    span name, ver, sums;          /* sums: empty when the line has none */
    int line;
} gemsum;

typedef struct bundler {
    const char *lock;
    const char *cfg_path;          /* NULL without .bundle/config */
    mirror mirrors[MIRRORS_MAX];
    size_t nmirrors;
    sl_derived *out;
    sl_lockerr *err;
    bool pins;
    bool has_checksums;            /* a CHECKSUMS section */
    gemspec *specs;
    size_t nspecs, capspecs;
    gemsum *sums;
    size_t nsums, capsums;
} bundler;

typedef enum { SEC_NONE, SEC_GEM, SEC_GIT, SEC_PATH, SEC_PLUGIN, SEC_CHECKSUMS, SEC_OTHER } section;


#define REMOTES_MAX 64

typedef struct srcsec {
    section kind;
    int line;                      /* of the header */
    span remotes[REMOTES_MAX];
    int remote_lines[REMOTES_MAX];
    size_t nremotes;
    size_t nspecs;
    bool in_specs;
} srcsec;

/* Untrusted text for a message: printable ASCII, the rest as '?', cut. */
static const char *shown(span t, char *buf, size_t cap)
{
    return sl_display_untrusted(t.s, t.n, buf, cap, SL_DISPLAY_QMARK);
}

/* Settings.normalize_uri: the URL with a trailing '/', as a key
 * (AbsoluteURI: lower-cased, the way mirror keys are stored). */
static char *normalize_uri(span u, bool lower)
{
    bool slash = u.n && u.s[u.n - 1] == '/';
    char *d = malloc(u.n + 2);
    if (!d)
        abort();
    memcpy(d, u.s, u.n);
    if (!slash)
        d[u.n++] = '/';
    d[u.n] = '\0';
    if (lower)
        for (char *p = d; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    return d;
}

/* ---- .bundle/config ---- */

/* Bundler's key decoding: BUNDLE_ dropped, "___" -> "-", "__" -> ".",
 * lower-cased. */
static char *decode_key(const char *k, size_t n)
{
    if (n >= 7 && !memcmp(k, "BUNDLE_", 7))
        k += 7, n -= 7;
    char *d = malloc(n + 1);
    if (!d)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(k + i, "___", 3)) {
            d[o++] = '-';
            i += 3;
        } else if (i + 2 <= n && !memcmp(k + i, "__", 2)) {
            d[o++] = '.';
            i += 2;
        } else {
            char c = k[i++];
            d[o++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
    }
    d[o] = '\0';
    return d;
}

/* One "mirror.<uri>[.fallback_timeout]" setting (MirrorConfig). */
static bool add_mirror_setting(bundler *b, const char *key, const char *val, size_t vlen, int line)
{
    if (strncmp(key, "mirror.", 7))
        return true;
    span uri = { key + 7, strlen(key + 7) };
    if (uri.n && uri.s[uri.n - 1] == '/')
        uri.n--;
    static const char fb[] = ".fallback_timeout";
    if (uri.n >= sizeof fb - 1 && !memcmp(uri.s + uri.n - (sizeof fb - 1), fb, sizeof fb - 1))
        return true;               /* only makes the original a fallback */
    if (uri.n == 0)
        return true;
    if (b->nmirrors == MIRRORS_MAX) {
        sl_lockerr_set(b->err, b->cfg_path, line, "too many mirror settings");
        return false;
    }
    mirror *m = &b->mirrors[b->nmirrors++];
    bool absolute = memmem(uri.s, uri.n, "://", 3) != NULL;
    m->key = absolute ? normalize_uri(uri, true) : sl_xstrndup(uri.s, uri.n);
    m->uri = normalize_uri((span){ val, vlen }, false);
    m->line = line;
    return true;
}

/* The config is YAML, a flat mapping of BUNDLE_* keys to strings. */
static bool load_config(bundler *b, sl_project *proj)
{
    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path;
    const char *data = sl_project_file(proj, ".bundle/config", &len, &path, &e);
    if (!data) {
        if (e.msg[0]) {
            *b->err = e;
            return false;
        }
        return true;
    }
    b->cfg_path = path;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        sl_lockerr_set(b->err, path, 0, "cannot initialise the YAML parser");
        return false;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    bool ok = false;
    int depth = 0;                 /* nesting of collections */
    char *key = NULL;
    int key_line = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            sl_lockerr_set(b->err, path, (int)p.problem_mark.line + 1, "invalid YAML: %s",
                           p.problem ? p.problem : "parse error");
            break;
        }
        yaml_event_type_t t = ev.type;
        int line = (int)ev.start_mark.line + 1;
        bool fail = false;
        switch (t) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth > 0 || t != YAML_MAPPING_START_EVENT) {
                sl_lockerr_set(b->err, path, line, "expected a mapping of settings to strings");
                fail = true;
            }
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            break;
        case YAML_SCALAR_EVENT:
            if (depth == 0) {
                /* An empty document is a null scalar; anything else is not a config. */
                if (ev.data.scalar.length) {
                    sl_lockerr_set(b->err, path, line, "expected a mapping of settings to strings");
                    fail = true;
                }
            } else if (depth == 1) {
                const char *s = (const char *)ev.data.scalar.value;
                size_t n = ev.data.scalar.length;
                if (!key) {
                    key = decode_key(s, n);
                    key_line = line;
                } else {
                    if (memchr(s, '\0', n) == NULL)
                        fail = !add_mirror_setting(b, key, s, n, key_line);
                    free(key);
                    key = NULL;
                }
            }
            break;
        case YAML_ALIAS_EVENT:
            sl_lockerr_set(b->err, path, line, "YAML aliases are not used in a Bundler config");
            fail = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (fail)
            break;
        if (t == YAML_STREAM_END_EVENT) {
            ok = true;
            break;
        }
    }
    free(key);
    yaml_parser_delete(&p);
    return ok;
}

/* The mirror for a remote, as Settings::Mirrors#for finds it: "all" first,
 * then the normalised URL, then its host. Later settings of one key win. */
static const mirror *mirror_for(const bundler *b, span remote)
{
    const mirror *found = NULL;
    for (size_t i = 0; i < b->nmirrors; i++)
        if (!strcmp(b->mirrors[i].key, "all"))
            found = &b->mirrors[i];
    if (found)
        return found;
    char *norm = normalize_uri(remote, true);
    for (size_t i = 0; i < b->nmirrors; i++)
        if (!strcmp(b->mirrors[i].key, norm))
            found = &b->mirrors[i];
    if (!found) {
        sl_url u;
        if (sl_url_parse(remote.s, remote.n, &u))
            for (size_t i = 0; i < b->nmirrors; i++)
                if (strlen(b->mirrors[i].key) == u.host_len &&
                    !strncasecmp(b->mirrors[i].key, u.host, u.host_len))
                    found = &b->mirrors[i];
    }
    free(norm);
    return found;
}

/* ---- emitting ---- */

static bool add2(bundler *b, const char *host, size_t hlen, int port, bool with_cfg,
                 const char *errfile, int errline)
{
    char msg[400];
    if (!sl_derived_add(b->out, host, hlen, port, b->lock, msg, sizeof msg) ||
        (with_cfg && !sl_derived_add(b->out, host, hlen, port, b->cfg_path, msg, sizeof msg))) {
        sl_lockerr_set(b->err, errfile, errline, "%s", msg);
        return false;
    }
    return true;
}

/* host:port of a URL; local paths and file: URLs add nothing. With
 * `rubygems`, the rubygems.org index host too. */
static bool add_url(bundler *b, span url, bool with_cfg, bool rubygems, const char *errfile,
                    int errline)
{
    char tmp[200];
    sl_url u;
    if (!sl_url_parse(url.s, url.n, &u))
        return true;
    if (u.port < 0) {
        sl_lockerr_set(b->err, errfile, errline, "no usable port in '%s'",
                       shown(url, tmp, sizeof tmp));
        return false;
    }
    if (!add2(b, u.host, u.host_len, u.port, with_cfg, errfile, errline))
        return false;
    /* Bundler's fetch_uri: the rubygems.org index is index.rubygems.org,
     * same scheme and port. */
    if (rubygems && u.host_len == 12 && !strncasecmp(u.host, "rubygems.org", 12))
        return add2(b, "index.rubygems.org", 18, u.port, with_cfg, errfile, errline);
    return true;
}

/* ---- --pins ---- */

#define GEM_PATH_MAX 2048

/* RubyGems allows letters, digits, '.', '-' and '_' in a name, and so in a
 * version and platform: nothing else may go into a rule literally. */
static bool gem_text_ok(span t)
{
    if (t.n == 0 || t.n > 200)
        return false;
    for (size_t i = 0; i < t.n; i++) {
        char c = t.s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* "name (ver)" at the start of t: the two spans and what follows. */
static bool name_version(span t, span *name, span *ver, span *rest)
{
    const char *sp = memchr(t.s, ' ', t.n);
    if (!sp || (size_t)(sp - t.s) + 2 >= t.n || sp[1] != '(')
        return false;
    const char *close = memchr(sp + 2, ')', (size_t)(t.s + t.n - sp - 2));
    if (!close)
        return false;
    *name = (span){ t.s, (size_t)(sp - t.s) };
    *ver = (span){ sp + 2, (size_t)(close - sp - 2) };
    *rest = (span){ close + 1, (size_t)(t.s + t.n - close - 1) };
    return true;
}

static int span_cmp(span a, span b)
{
    int c = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

/* CHECKSUMS entries sorted by name and version, for bsearch. */
static int sum_cmp(const void *x, const void *y)
{
    const gemsum *a = x, *b = y;
    int c = span_cmp(a->name, b->name);
    return c ? c : span_cmp(a->ver, b->ver);
}

/* The digests of a CHECKSUMS entry ("sha256=<hex>[,...]") as SRI; returns
 * how many (0: none usable). */
static size_t gem_digests(span sums, char (*out)[SL_SRI_MAX], size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sums.n && n < max;) {
        size_t j = i;
        while (j < sums.n && sums.s[j] != ',')
            j++;
        const char *eq = memchr(sums.s + i, '=', j - i);
        if (eq && sl_sri_from_hex(sums.s + i, (size_t)(eq - sums.s - i), eq + 1, (size_t)(sums.s + j - eq - 1),
                                  out[n]))
            n++;
        i = j + 1;
    }
    return n;
}

/* One rule (or, with `why`, fallback) on host:port for the lockfile (and
 * the config). */
static bool pin(bundler *b, const sl_url *u, const char *path, const char *const *digests, size_t nd,
                bool with_cfg, const char *note, const char *why, const char *errfile, int errline)
{
    char msg[400];
    size_t plen = path ? strlen(path) : 0;
    for (int k = 0; k < (with_cfg ? 2 : 1); k++) {
        const char *file = k ? b->cfg_path : b->lock;
        bool ok = why ? sl_derived_add_fallback(b->out, u->host, u->host_len, u->port, path, plen, file, why, msg,
                                                sizeof msg)
                      : sl_derived_add_rule(b->out, u->host, u->host_len, u->port, path, plen, digests, nd, file,
                                            note, msg, sizeof msg);
        if (!ok) {
            sl_lockerr_set(b->err, errfile, errline, "%s", msg);
            return false;
        }
    }
    return true;
}

/* The path of a remote URL with a trailing '/' (query and fragment
 * dropped), as RubyGems joins "gems/..." onto it. */
static bool base_path(const sl_url *u, char *out, size_t cap)
{
    const char *p = u->path ? u->path : "/";
    size_t n = u->path ? u->path_len : 1;
    for (size_t i = 0; i < n; i++)
        if (p[i] == '?' || p[i] == '#') {
            n = i;
            break;
        }
    if (n == 0)
        p = "/", n = 1;
    bool slash = p[n - 1] == '/';
    if (n + 2 > cap)
        return false;
    memcpy(out, p, n);
    if (!slash)
        out[n++] = '/';
    out[n] = '\0';
    return true;
}

/* A GEM remote (or its mirror) with pins: the gems of section `sec`, and the
 * index Bundler reads for them. */
static bool pin_remote(bundler *b, span url, size_t sec, bool with_cfg, const char *errfile, int errline)
{
    char tmp[200], base[GEM_PATH_MAX], path[GEM_PATH_MAX + 512];
    sl_url u;
    if (!sl_url_parse(url.s, url.n, &u))
        return true;
    if (u.port < 0) {
        sl_lockerr_set(b->err, errfile, errline, "no usable port in '%s'", shown(url, tmp, sizeof tmp));
        return false;
    }
    if (!base_path(&u, base, sizeof base)) {
        sl_lockerr_set(b->err, errfile, errline, "remote URL too long");
        return false;
    }
    bool rubygems = u.host_len == 12 && !strncasecmp(u.host, "rubygems.org", 12);
    /* Bundler's fetch_uri: the rubygems.org index is index.rubygems.org,
     * same scheme, port and path. */
    sl_url index = u;
    if (rubygems)
        index.host = "index.rubygems.org", index.host_len = 18;
    const char *nocheck = "no CHECKSUMS section in Gemfile.lock (Bundler >= 2.5 writes one)";
    static const char *const meta[][2] = {
        { "versions", "compact index" },
        { "info/*", "compact index: every name Bundler meets in it" },
        { "api/v1/dependencies", "dependency API, for a server without the compact index" },
    };
    for (size_t k = 0; k < (rubygems ? 2 : 3); k++) {
        snprintf(path, sizeof path, "%s%s", base, meta[k][0]);
        /* Without checksums nothing is pinned: a plain host entry. */
        if (!pin(b, &index, b->has_checksums ? path : NULL, NULL, 0, with_cfg, meta[k][1],
                 b->has_checksums ? NULL : nocheck, errfile, errline))
            return false;
    }
    for (size_t i = 0; i < b->nspecs; i++) {
        const gemspec *g = &b->specs[i];
        if (g->sec != sec)
            continue;
        if (!gem_text_ok(g->name) || !gem_text_ok(g->ver)) {
            sl_lockerr_set(b->err, b->lock, g->line, "'%s' is not a gem name and version: no URL can be derived "
                           "for it", shown((span){ g->name.s, (size_t)(g->ver.s + g->ver.n - g->name.s) }, tmp,
                                           sizeof tmp));
            return false;
        }
        snprintf(path, sizeof path, "%sgems/%.*s-%.*s.gem", base, (int)g->name.n, g->name.s, (int)g->ver.n,
                 g->ver.s);
        gemsum key = { .name = g->name, .ver = g->ver };
        const gemsum *sum = b->nsums ? bsearch(&key, b->sums, b->nsums, sizeof *b->sums, sum_cmp) : NULL;
        char sri[4][SL_SRI_MAX];
        const char *d[4];
        size_t nd = sum ? gem_digests(sum->sums, sri, 4) : 0;
        for (size_t k = 0; k < nd; k++)
            d[k] = sri[k];
        const char *why = nd ? NULL : !b->has_checksums ? nocheck : "no sha256 for it in CHECKSUMS";
        if (!pin(b, &u, path, d, nd, with_cfg, NULL, why, errfile, errline))
            return false;
    }
    return true;
}

static bool fallback_url(bundler *b, span url, const char *why, int errline)
{
    char tmp[200], msg[400];
    sl_url u;
    if (!sl_url_parse(url.s, url.n, &u))
        return true;
    if (u.port < 0) {
        sl_lockerr_set(b->err, b->lock, errline, "no usable port in '%s'", shown(url, tmp, sizeof tmp));
        return false;
    }
    if (!sl_derived_add_fallback(b->out, u.host, u.host_len, u.port, NULL, 0, b->lock, why, msg, sizeof msg)) {
        sl_lockerr_set(b->err, b->lock, errline, "%s", msg);
        return false;
    }
    return true;
}

static bool finish_section(bundler *b, srcsec *s, size_t sec)
{
    if (s->nspecs == 0)
        return true;               /* nothing locked from it */
    for (size_t i = 0; i < s->nremotes; i++) {
        span r = s->remotes[i];
        switch (s->kind) {
        case SEC_GEM: {
            /* Bundler wants absolute URIs for gem sources and mirrors. */
            char tmp[128];
            if (!memmem(r.s, r.n, "://", 3)) {
                sl_lockerr_set(b->err, b->lock, s->remote_lines[i],
                               "gem source '%s' is not an absolute URL", shown(r, tmp, sizeof tmp));
                return false;
            }
            const mirror *m = mirror_for(b, r);
            if (m && !strstr(m->uri, "://")) {
                sl_lockerr_set(b->err, b->cfg_path, m->line, "mirror '%s' is not an absolute URL",
                               shown((span){ m->uri, strlen(m->uri) }, tmp, sizeof tmp));
                return false;
            }
            if (m) {
                span mu = { m->uri, strlen(m->uri) };
                if (b->pins ? !pin_remote(b, mu, sec, true, b->cfg_path, m->line)
                            : !add_url(b, mu, true, true, b->cfg_path, m->line))
                    return false;
            } else if (b->pins ? !pin_remote(b, r, sec, false, b->lock, s->remote_lines[i])
                               : !add_url(b, r, false, true, b->lock, s->remote_lines[i])) {
                return false;
            }
            break;
        }
        case SEC_GIT:
        case SEC_PLUGIN:
            if (b->pins) {
                if (!fallback_url(b, r, s->kind == SEC_GIT ? "a GIT source is cloned, with no digest of the download"
                                                           : "a plugin source is fetched by its plugin",
                                  s->remote_lines[i]))
                    return false;
            } else if (!add_url(b, r, false, false, b->lock, s->remote_lines[i])) {
                return false;
            }
            break;
        default:
            break;
        }
    }
    return true;
}

/* ---- the lockfile ---- */

static section section_of(span h)
{
    static const struct { const char *name; section s; } known[] = {
        { "GEM", SEC_GEM }, { "GIT", SEC_GIT }, { "PATH", SEC_PATH },
        { "PLUGIN SOURCE", SEC_PLUGIN }, { "CHECKSUMS", SEC_CHECKSUMS },
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (h.n == strlen(known[i].name) && !memcmp(h.s, known[i].name, h.n))
            return known[i].s;
    return SEC_OTHER;              /* PLATFORMS, DEPENDENCIES, ... */
}

/* Bundler refuses a lockfile with any of git's conflict markers in it. */
static int conflict_line(const char *data, size_t len)
{
    static const char *const marks[] = { "<<<<<<<", "=======", ">>>>>>>", "|||||||" };
    int line = 1;
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        for (int i = 0; i < 4; i++)
            if (memmem(p, (size_t)(le - p), marks[i], 7))
                return line;
        p = nl ? nl + 1 : end;
        line++;
    }
    return 0;
}

static bool bundler_recognises(const char *base)
{
    return !strcmp(base, "Gemfile.lock") || !strcmp(base, "gems.locked");
}

static bool bundler_read(const char *path, const char *data, size_t len, sl_project *proj,
                         sl_derived *out, sl_lockerr *err)
{
    bundler b = { .lock = path, .out = out, .err = err, .pins = sl_derived_pins(out) };
    bool ok = false;
    char tmp[96];
    int cl = conflict_line(data, len);
    if (cl) {
        sl_lockerr_set(err, path, cl, "merge-conflict markers: resolve the conflict first "
                                      "(Bundler refuses this lockfile too)");
        return false;
    }
    if (memchr(data, '\0', len)) {
        sl_lockerr_set(err, path, 0, "NUL byte: not a Gemfile.lock");
        return false;
    }

    /* First pass: parse and check the whole file, so that a malformed
     * lockfile is refused before any config is read. */
    srcsec *secs = NULL;
    size_t nsecs = 0, cap = 0;
    srcsec *cur = NULL;
    bool any_section = false;
    const char *p = data, *end = data + len;
    int line = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        span l = { p, (size_t)(le - p) };
        p = nl ? nl + 1 : end;
        if (l.n && l.s[l.n - 1] == '\r')
            l.n--;
        size_t indent = 0;
        while (indent < l.n && l.s[indent] == ' ')
            indent++;
        if (indent == l.n)
            continue;              /* blank */
        if (indent == 0) {
            /* A section header: upper-case words. */
            for (size_t i = 0; i < l.n; i++)
                if (!((l.s[i] >= 'A' && l.s[i] <= 'Z') || l.s[i] == ' ')) {
                    sl_lockerr_set(err, path, line, "not a Gemfile.lock: unexpected '%s'",
                                   shown(l, tmp, sizeof tmp));
                    goto out;
                }
            any_section = true;
            if (nsecs == cap) {
                cap = cap ? cap * 2 : 8;
                srcsec *ns = realloc(secs, cap * sizeof *secs);
                if (!ns)
                    abort();
                secs = ns;
            }
            cur = &secs[nsecs++];
            memset(cur, 0, sizeof *cur);
            cur->kind = section_of(l);
            cur->line = line;
            b.has_checksums = b.has_checksums || cur->kind == SEC_CHECKSUMS;
            continue;
        }
        if (!cur) {
            sl_lockerr_set(err, path, line, "not a Gemfile.lock: indented line before any section");
            goto out;
        }
        if (cur->kind == SEC_OTHER || cur->kind == SEC_NONE)
            continue;
        span body = { l.s + indent, l.n - indent };
        if (cur->kind == SEC_CHECKSUMS) {
            /* Read only for pins: without them the section adds nothing. */
            span name, ver, rest;
            if (!b.pins)
                continue;
            if (indent != 2 || !name_version(body, &name, &ver, &rest) ||
                (rest.n && rest.s[0] != ' ')) {
                sl_lockerr_set(err, path, line, "not a CHECKSUMS line: expected 'name (version) sha256=<hex>'");
                goto out;
            }
            if (!sl_grow(&b.sums, &b.capsums, b.nsums, sizeof *b.sums, (size_t)-1 / sizeof *b.sums))
                abort();
            while (rest.n && rest.s[0] == ' ')
                rest.s++, rest.n--;
            b.sums[b.nsums++] = (gemsum){ name, ver, rest, line };
            continue;
        }
        if (indent == 2) {
            cur->in_specs = false;
            if (body.n == 6 && !memcmp(body.s, "specs:", 6)) {
                cur->in_specs = true;
            } else if (body.n >= 7 && !memcmp(body.s, "remote:", 7)) {
                span r = { body.s + 7, body.n - 7 };
                while (r.n && r.s[0] == ' ')
                    r.s++, r.n--;
                while (r.n && (r.s[r.n - 1] == ' ' || r.s[r.n - 1] == '\t'))
                    r.n--;
                if (r.n == 0) {
                    sl_lockerr_set(err, path, line, "empty remote");
                    goto out;
                }
                if (cur->nremotes == REMOTES_MAX) {
                    sl_lockerr_set(err, path, line, "too many remotes in one section");
                    goto out;
                }
                if (cur->nremotes && cur->kind != SEC_GEM) {
                    sl_lockerr_set(err, path, line, "a second remote in a %s section",
                                   cur->kind == SEC_GIT ? "GIT" : cur->kind == SEC_PATH ? "PATH"
                                                                                        : "PLUGIN SOURCE");
                    goto out;
                }
                cur->remote_lines[cur->nremotes] = line;
                cur->remotes[cur->nremotes++] = r;
            } else if (!memchr(body.s, ':', body.n)) {
                sl_lockerr_set(err, path, line, "not a Gemfile.lock: expected 'key: value' in a "
                                                "source section");
                goto out;
            }
        } else if (indent == 4 && cur->in_specs) {
            cur->nspecs++;         /* "name (version)" */
            span name, ver, rest;
            if (b.pins && cur->kind == SEC_GEM) {
                if (!name_version(body, &name, &ver, &rest) || rest.n) {
                    sl_lockerr_set(err, path, line, "not a gem spec: expected 'name (version)'");
                    goto out;
                }
                if (!sl_grow(&b.specs, &b.capspecs, b.nspecs, sizeof *b.specs, (size_t)-1 / sizeof *b.specs))
                    abort();
                b.specs[b.nspecs++] = (gemspec){ name, ver, nsecs - 1, line };
            }
        } else if (indent >= 6 && cur->in_specs) {
            /* a spec's dependencies */
        } else {
            sl_lockerr_set(err, path, line, "not a Gemfile.lock: unexpected indentation");
            goto out;
        }
    }
    if (!any_section && len > 0) {
        sl_lockerr_set(err, path, 0, "not a Gemfile.lock: no sections");
        goto out;
    }

    /* Config alone adds nothing (R4), but Bundler refuses a broken config
     * whenever it has something to fetch. */
    bool needs = false;
    for (size_t i = 0; i < nsecs; i++)
        needs = needs || (secs[i].kind != SEC_PATH && secs[i].nspecs && secs[i].nremotes);
    if (needs && !load_config(&b, proj))
        goto out;
    if (b.nsums)
        qsort(b.sums, b.nsums, sizeof *b.sums, sum_cmp);
    for (size_t i = 0; i < nsecs; i++)
        if (!finish_section(&b, &secs[i], i))
            goto out;
    ok = true;
out:
    for (size_t i = 0; i < b.nmirrors; i++) {
        free(b.mirrors[i].key);
        free(b.mirrors[i].uri);
    }
    free(secs);
    free(b.specs);
    free(b.sums);
    return ok;
}

const sl_lockreader sl_reader_bundler = {
    .name = "bundler",
    .recognises = bundler_recognises,
    .read = bundler_read,
};
