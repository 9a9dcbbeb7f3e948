/* pip: requirements files and pip.conf (LOCKFILES.md §2 "pip").
 *
 * A requirements file is read the way pip reads it (req_file.py): physical
 * lines joined on a trailing '\', comments cut, each logical line split
 * into a requirement and options, "-r"/"-c" files read in place, and the
 * index options folded in order into one search scope that applies to the
 * whole install. pip.conf in the project ([global], then [install]) is the
 * starting scope. A requirements file that another file of the run
 * includes is one install with it: the driver reads it only through that
 * file (pip_includes tells it which), with that file's options.
 *
 * What is emitted:
 * - every direct URL (name @ URL, bare archive URLs, VCS URLs), with
 *   GitHub's redirect hosts (R6);
 * - the index hosts and remote find-links pages, only when some requirement
 *   is resolved by name or must be built (a VCS or sdist URL: build
 *   isolation fetches the build backend from the index). A file of wheel
 *   URLs only, or of options only, needs no index.
 * Local paths, file: URLs and editable directories add nothing (R5).
 * URLs in constraint files are fetched only for packages that something
 * requires, so they count only when the install has requirements.
 *
 * With --pins (PINS.md "pip requirements"): for each index and each
 * requirement by name, the index page pip reads; the files of each `==`
 * version with --hash, by version on the index's file host, with the
 * digests; direct URLs pinned to their --hash or #sha256=; what cannot be
 * pinned as host entries that say why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "lockfile.h"
#include "pyindex.h"
#include "text.h"

/* pip recurses without a limit (and dies of RecursionError on a cycle);
 * real projects nest two or three deep. */
#define INCLUDE_DEPTH_MAX 32

typedef struct strv {
    char **v;
    size_t n, cap;
} strv;

/* An index URL or find-links location, and the file that named it. */
typedef struct src {
    char *url;
    const char *origin;            /* provenance; owned by the project or the caller */
    int line;
} src;

typedef struct srcv {
    src *v;
    size_t n, cap;
} srcv;

/* A constraint-file URL, emitted at the end if anything is installed. */
typedef struct deferred {
    char *url;
    const char *file;
    int line;
    bool vcs;
    strv digests;                  /* --pins: SRI of its --hash options */
    bool bad_hash;                 /* a --hash algorithm pip refuses */
} deferred;

/* --pins: a requirement by name, with what pins its files. */
typedef struct pinreq {
    char *name;                    /* as written */
    char *version;                 /* an exact == (or ===) version; NULL: none */
    strv digests;                  /* SRI of its --hash options */
    bool bad_hash;
    const char *file;              /* the requirements file naming it */
} pinreq;

/* The --hash options of a requirement line, as SRI. */
typedef struct hashopts {
    strv sri;
    bool bad;                      /* an algorithm pip refuses (md5, sha1...) */
} hashopts;

/* The search scope pip builds from pip.conf and the requirements files. */
typedef struct scope {
    srcv index;                    /* index_urls: the first is --index-url */
    srcv find_links;
    bool no_index;
} scope;

typedef struct pipctx {
    sl_project *proj;
    sl_derived *out;
    sl_lockerr *err;
    const char *top;               /* the file the driver handed over */
    scope sc;
    bool needs_index;              /* a requirement resolved by name, or built */
    bool has_requirements;         /* anything at all is installed */
    bool pins;                     /* --pins: rules, gathered in reqs and builds */
    bool builds;                   /* an sdist or VCS requirement is built */
    pinreq *reqs;
    size_t nreqs, capreqs;
    deferred *defer;
    size_t ndefer, capdefer;
    const char *stack[INCLUDE_DEPTH_MAX + 1];  /* rel paths being read */
    int depth;
    strv visited;                  /* "c:" or "r:" + rel, read already */
} pipctx;

static void strv_push(strv *a, char *s)
{
    if (a->n == a->cap)
        a->v = sl_xrealloc(a->v, (a->cap = a->cap ? a->cap * 2 : 8) * sizeof *a->v);
    a->v[a->n++] = s;
}

static void strv_free(strv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

static void srcv_push(srcv *a, const char *url, size_t len, const char *origin, int line)
{
    if (a->n == a->cap)
        a->v = sl_xrealloc(a->v, (a->cap = a->cap ? a->cap * 2 : 4) * sizeof *a->v);
    a->v[a->n++] = (src){ .url = sl_xstrndup(url, len), .origin = origin, .line = line };
}

static void srcv_clear(srcv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i].url);
    a->n = 0;
}

static void srcv_free(srcv *a)
{
    srcv_clear(a);
    free(a->v);
    memset(a, 0, sizeof *a);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n';
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* requirements.txt, requirements-dev.txt, requirements_test.txt,
 * dev-requirements.txt, test_requirements.txt: any ".txt" whose name holds
 * "requirements". Files in a requirements/ directory (base.txt) are not
 * recognisable by their base name; they are read through the -r lines of
 * the files that include them. */
static bool recognises(const char *base)
{
    size_t n = strlen(base);
    if (!strcmp(base, "pip.conf"))
        return true;
    return n >= 4 && !strcmp(base + n - 4, ".txt") && strstr(base, "requirements") != NULL;
}

static void trim(const char **s, size_t *len)
{
    while (*len && is_space(**s))
        (*s)++, (*len)--;
    while (*len && is_space((*s)[*len - 1]))
        (*len)--;
}

/* Refuse what is not text: a NUL byte (a binary file under a text name). */
static bool check_text(const char *path, const char *data, size_t len, sl_lockerr *err)
{
    const char *nul = len ? memchr(data, '\0', len) : NULL;
    if (!nul)
        return true;
    int line = 1;
    for (const char *p = data; p < nul; p++)
        line += *p == '\n';
    sl_lockerr_set(err, path, line, "NUL byte: not a text file");
    return false;
}

/* Physical lines: "\n", "\r\n" or "\r" end one. Returns false at the end. */
static bool next_line(const char *data, size_t len, size_t *pos, const char **line, size_t *llen)
{
    if (*pos >= len)
        return false;
    size_t i = *pos;
    while (i < len && data[i] != '\n' && data[i] != '\r')
        i++;
    *line = data + *pos;
    *llen = i - *pos;
    if (i < len && data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
        i++;
    *pos = i < len ? i + 1 : i;
    return true;
}

/* ---- pip.conf ----------------------------------------------------------- */

/* The options pip.conf can set for `pip install`: [global], overridden
 * key by key by [install] (pip's command section). */
typedef struct pipconf {
    const char *path;
    char *index_url;
    int index_line;
    char *extra;                   /* whitespace-separated, as pip splits it */
    int extra_line;
    char *find_links;
    int find_line;
    int no_index;                  /* -1 unset, 0, 1 */
    int sect_rank[4];              /* section rank that set each key: 0 none, 1 global, 2 install */
} pipconf;

static void pipconf_free(pipconf *c)
{
    free(c->index_url);
    free(c->extra);
    free(c->find_links);
}

/* pip's strtobool. */
static int bool_value(const char *s, size_t n)
{
    static const char *const yes[] = { "y", "yes", "t", "true", "on", "1" };
    static const char *const no[] = { "n", "no", "f", "false", "off", "0" };
    for (size_t i = 0; i < 6; i++) {
        if (strlen(yes[i]) == n && !strncasecmp(s, yes[i], n))
            return 1;
        if (strlen(no[i]) == n && !strncasecmp(s, no[i], n))
            return 0;
    }
    return -1;
}

/* A finished option of pip.conf: keep it if it is one of ours. */
static bool conf_option(pipconf *c, int rank, const char *key, const char *val, size_t vlen, int line,
                        sl_lockerr *err)
{
    /* pip's _normalize_name: case-folded, '_' as '-', a leading "--" dropped. */
    char k[64];
    size_t kl = strlen(key);
    if (kl >= sizeof k)
        return true;
    for (size_t i = 0; i <= kl; i++) {
        char ch = key[i];
        k[i] = ch == '_' ? '-' : (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
    }
    const char *name = strncmp(k, "--", 2) ? k : k + 2;
    const char *s = val;
    size_t n = vlen;
    trim(&s, &n);
    if (!strcmp(name, "index-url") || !strcmp(name, "pypi-url")) {
        if (rank >= c->sect_rank[0]) {
            free(c->index_url);
            c->index_url = sl_xstrndup(s, n);
            c->index_line = line;
            c->sect_rank[0] = rank;
        }
    } else if (!strcmp(name, "extra-index-url")) {
        if (rank >= c->sect_rank[1]) {
            free(c->extra);
            c->extra = sl_xstrndup(s, n);
            c->extra_line = line;
            c->sect_rank[1] = rank;
        }
    } else if (!strcmp(name, "find-links")) {
        if (rank >= c->sect_rank[2]) {
            free(c->find_links);
            c->find_links = sl_xstrndup(s, n);
            c->find_line = line;
            c->sect_rank[2] = rank;
        }
    } else if (!strcmp(name, "no-index")) {
        int b = bool_value(s, n);
        if (b < 0) {
            char t[48];
            sl_lockerr_set(err, c->path, line, "no-index: '%s' is not a boolean",
                           sl_display_untrusted(s, n, t, sizeof t, SL_DISPLAY_QMARK));
            return false;
        }
        if (rank >= c->sect_rank[3]) {
            c->no_index = b;
            c->sect_rank[3] = rank;
        }
    }
    /* trusted-host, timeout, cert, ...: no host to reach. */
    return true;
}

/* Parse pip.conf as Python's configparser.RawConfigParser does (pip
 * refuses the whole file when it raises): "[section]" headers, "key = value"
 * or "key: value", indented continuation lines, full-line '#'/';' comments,
 * no inline comments, duplicate sections and keys refused (strict). */
static bool pipconf_parse(pipconf *c, const char *path, const char *data, size_t len, sl_lockerr *err)
{
    memset(c, 0, sizeof *c);
    c->path = path;
    c->no_index = -1;
    if (!check_text(path, data, len, err))
        return false;
    if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
        data += 3, len -= 3;

    strv sections = { 0 }, keys = { 0 };
    char *key = NULL;              /* the option being read */
    char *val = NULL;
    size_t vlen = 0, vcap = 0;
    int key_line = 0, rank = 0;
    bool in_section = false;
    size_t indent_level = 0;
    bool ok = true;
    size_t pos = 0;
    int lineno = 0;
    const char *line;
    size_t llen;
    for (;;) {
        bool more = next_line(data, len, &pos, &line, &llen);
        if (more)
            lineno++;
        const char *s = line;
        size_t n = more ? llen : 0;
        trim(&s, &n);
        bool comment = more && n && (s[0] == '#' || s[0] == ';');
        size_t indent = 0;
        while (more && indent < llen && is_space(line[indent]))
            indent++;
        /* A continuation: indented deeper than its key line. Blank lines
         * inside a value are kept by configparser, so they continue too. */
        if (more && key && !comment && (n == 0 || indent > indent_level)) {
            if (vlen + n + 2 > vcap)
                val = sl_xrealloc(val, vcap = (vlen + n + 2) * 2);
            val[vlen++] = '\n';
            memcpy(val + vlen, s, n);
            vlen += n;
            continue;
        }
        if (more && (comment || n == 0))
            continue;
        if (key) {                 /* the previous option is complete */
            if (rank && !conf_option(c, rank, key, val, vlen, key_line, err))
                ok = false;
            free(key);
            key = NULL;
            if (!ok)
                break;
        }
        if (!more)
            break;
        indent_level = indent;
        if (s[0] == '[') {
            const char *rb = NULL;
            for (size_t i = n; i-- > 1;)
                if (s[i] == ']') {
                    rb = s + i;
                    break;
                }
            if (rb && rb > s + 1) {
                char *name = sl_xstrndup(s + 1, (size_t)(rb - s - 1));
                for (size_t i = 0; i < sections.n; i++)
                    if (!strcmp(sections.v[i], name)) {
                        char t[72];
                        sl_lockerr_set(err, path, lineno, "section [%s] appears twice",
                                       sl_display_untrusted(name, strlen(name), t, sizeof t,
                                                            SL_DISPLAY_QMARK));
                        free(name);
                        ok = false;
                        goto done;
                    }
                rank = !strcmp(name, "global") ? 1 : !strcmp(name, "install") ? 2 : 0;
                strv_push(&sections, name);
                strv_free(&keys);
                in_section = true;
                continue;
            }
        }
        if (!in_section) {
            sl_lockerr_set(err, path, lineno, "text before the first [section] header");
            ok = false;
            break;
        }
        const char *d = NULL;
        for (size_t i = 0; i < n; i++)
            if (s[i] == '=' || s[i] == ':') {
                d = s + i;
                break;
            }
        if (!d) {
            sl_lockerr_set(err, path, lineno, "expected 'key = value'");
            ok = false;
            break;
        }
        const char *k = s;
        size_t kl = (size_t)(d - s);
        trim(&k, &kl);
        if (kl == 0) {
            sl_lockerr_set(err, path, lineno, "empty key");
            ok = false;
            break;
        }
        key = sl_xstrndup(k, kl);
        for (char *p = key; *p; p++)   /* configparser folds case */
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        for (size_t i = 0; i < keys.n; i++)
            if (!strcmp(keys.v[i], key)) {
                char t[72];
                sl_lockerr_set(err, path, lineno, "key '%s' appears twice in its section",
                               sl_display_untrusted(key, strlen(key), t, sizeof t,
                                                    SL_DISPLAY_QMARK));
                ok = false;
                goto done;
            }
        strv_push(&keys, sl_xstrndup(key, kl));
        key_line = lineno;
        const char *v = d + 1;
        size_t vl = (size_t)(s + n - v);
        trim(&v, &vl);
        if (vl + 1 > vcap)
            val = sl_xrealloc(val, vcap = (vl + 1) * 2);
        memcpy(val, v, vl);
        vlen = vl;
    }
done:
    free(key);
    free(val);
    strv_free(&sections);
    strv_free(&keys);
    return ok;
}

/* ---- requirements files ------------------------------------------------- */

static void strv_copy(strv *to, const strv *from)
{
    for (size_t i = 0; from && i < from->n; i++)
        strv_push(to, sl_xstrdup(from->v[i]));
}

static void add_defer(pipctx *c, const char *url, size_t len, const char *file, int line, bool vcs,
                      const hashopts *h)
{
    if (c->ndefer == c->capdefer)
        c->defer = sl_xrealloc(c->defer, (c->capdefer = c->capdefer ? c->capdefer * 2 : 4) * sizeof *c->defer);
    deferred *d = &c->defer[c->ndefer++];
    *d = (deferred){ .url = sl_xstrndup(url, len), .file = file, .line = line, .vcs = vcs,
                     .bad_hash = h && h->bad };
    strv_copy(&d->digests, h ? &h->sri : NULL);
}

static bool fail(pipctx *c, const char *file, int line, const char *msg)
{
    sl_lockerr_set(c->err, file, line, "%s", msg);
    return false;
}

#define WHY_BAD_HASH "not pinned: a --hash algorithm pip refuses (it takes sha256, sha384, sha512)"

/* pip's Link hash: the first "[#&]ALG=VALUE" in the URL (models/link.py
 * _hash_re), as SRI when ALG is strong; false when there is none or it is
 * weak (md5, sha1, sha224: nothing to pin). */
static bool link_hash(const char *u, size_t n, char *sri)
{
    static const char *const algs[] = { "sha512", "sha384", "sha256", "sha224", "sha1", "md5" };
    for (size_t i = 0; i < n; i++) {
        if (u[i] != '#' && u[i] != '&')
            continue;
        for (size_t k = 0; k < sizeof algs / sizeof *algs; k++) {
            size_t al = strlen(algs[k]);
            if (i + 1 + al < n && !strncmp(u + i + 1, algs[k], al) && u[i + 1 + al] == '=') {
                const char *v = u + i + 2 + al, *e = v;
                while (e < u + n && *e != '&')
                    e++;
                return sl_sri_from_hex(algs[k], al, v, (size_t)(e - v), sri);
            }
        }
    }
    return false;
}

/* A URL requirement's download: its host (a pinned rule with --pins), and
 * whether it is built (a VCS URL or an sdist: its build backend comes from
 * the index). */
static bool fetch_url(pipctx *c, const char *u, size_t n, bool vcs, const hashopts *h,
                      const char *file, int line)
{
    char msg[512];
    sl_pyprov prov = { { file } };
    int r;
    if (!c->pins) {
        r = vcs ? sl_pyvcs_add(c->out, u, n, &prov, msg, sizeof msg)
                : sl_pyurl_add(c->out, u, n, &prov, msg, sizeof msg);
    } else if (vcs) {
        r = sl_pyvcs_unpinned(c->out, u, n, &prov, "not pinned: a VCS checkout has no digest to check",
                              msg, sizeof msg);
    } else {
        /* --hash options and the URL's own #sha256= are all good digests
         * (req_install.py hashes(): "We always OR all hashes together"). */
        strv dig = { 0 };
        strv_copy(&dig, &h->sri);
        char sri[SL_SRI_MAX];
        if (link_hash(u, n, sri))
            strv_push(&dig, sl_xstrdup(sri));
        size_t nd = h->bad ? 0 : dig.n;
        r = sl_pyurl_pin(c->out, u, n, (const char *const *)dig.v, nd, &prov,
                         h->bad ? WHY_BAD_HASH : "not pinned: a URL without --hash or #sha256=", msg,
                         sizeof msg);
        strv_free(&dig);
    }
    if (r < 0)
        return fail(c, file, line, msg);
    if (r > 0 && (vcs || !sl_pyurl_is_wheel(u, n)))
        c->needs_index = c->builds = true;
    return true;
}

/* A URL requirement: a VCS URL (built, so the index is needed for its
 * build backend), an archive (a wheel needs nothing more; an sdist is
 * built), or file: (local). */
static bool url_requirement(pipctx *c, const char *u, size_t n, bool constraint, const char *file,
                            int line, const hashopts *h)
{
    /* "name @ git@host:o/r.git" (scp-style, no scheme) is git too: pip's
     * git backend takes it after a git+ prefix, and so do we without. */
    bool vcs = sl_pyvcs_prefixed(u, n) || (n >= 6 && !strncasecmp(u, "svn://", 6)) ||
               !sl_pyurl_has_scheme(u, n);
    if (constraint) {
        add_defer(c, u, n, file, line, vcs, h);
        return true;
    }
    return fetch_url(c, u, n, vcs, h, file, line);
}

/* --pins: "==V" or "===V" (PEP 508 also allows it in parentheses), the
 * only specifier pip's hash-checking mode accepts (req_install.py
 * is_pinned); NULL for anything else ("==1.*", ">=1", "==1,!=2"). */
static char *exact_version(const char *s, size_t n)
{
    trim(&s, &n);
    if (n >= 2 && s[0] == '(' && s[n - 1] == ')') {
        s++, n -= 2;
        trim(&s, &n);
    }
    size_t i = 0;
    if (n >= 3 && !strncmp(s, "===", 3))
        i = 3;
    else if (n >= 2 && !strncmp(s, "==", 2))
        i = 2;
    else
        return NULL;
    const char *v = s + i;
    size_t vl = n - i;
    trim(&v, &vl);
    return sl_pyversion_exact(v, vl) ? sl_xstrndup(v, vl) : NULL;
}

static void add_pinreq(pipctx *c, const char *name, size_t name_len, const char *spec, size_t spec_len,
                       const hashopts *h, const char *file)
{
    if (c->nreqs == c->capreqs)
        c->reqs = sl_xrealloc(c->reqs, (c->capreqs = c->capreqs ? c->capreqs * 2 : 8) * sizeof *c->reqs);
    pinreq *p = &c->reqs[c->nreqs++];
    *p = (pinreq){ .name = sl_xstrndup(name, name_len), .version = exact_version(spec, spec_len),
                   .bad_hash = h->bad, .file = file };
    strv_copy(&p->digests, &h->sri);
}

/* pip's is_url: a scheme pip downloads or a VCS scheme. */
static bool is_url(const char *s, size_t n)
{
    if (sl_pyvcs_prefixed(s, n))
        return true;
    static const char *const schemes[] = { "http:", "https:", "file:", "ftp:", "svn:" };
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++)
        if (n >= strlen(schemes[i]) && !strncasecmp(s, schemes[i], strlen(schemes[i])))
            return true;
    return false;
}

static bool is_archive_name(const char *s, size_t n)
{
    static const char *const ext[] = { ".whl", ".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2",
                                       ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma" };
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        size_t el = strlen(ext[i]);
        if (n >= el && !strncasecmp(s + n - el, ext[i], el))
            return true;
    }
    return false;
}

/* One requirement (the text before the options of a line, or an -e
 * value), classified as pip's parse_req_from_line does. */
static bool requirement(pipctx *c, const char *r, size_t n, bool editable, bool constraint,
                        const char *file, int line, const hashopts *h)
{
    trim(&r, &n);
    if (!constraint)
        c->has_requirements = true;
    bool url = is_url(r, n);
    /* Environment markers: after "; " for a URL (which may hold ';'),
     * after ';' otherwise. */
    for (size_t i = 0; i < n; i++)
        if (r[i] == ';' && (!url || (i + 1 < n && is_space(r[i + 1])))) {
            n = i;
            break;
        }
    trim(&r, &n);
    if (n == 0)
        return fail(c, file, line, "empty requirement");
    if (url)
        return url_requirement(c, r, n, constraint, file, line, h);

    /* PEP 508 "name[extras] @ URL". */
    size_t i = 0;
    while (i < n && (is_alnum(r[i]) || r[i] == '.' || r[i] == '_' || r[i] == '-'))
        i++;
    size_t name_len = i;
    size_t j = i;
    while (j < n && is_space(r[j]))
        j++;
    if (j < n && r[j] == '[') {
        const char *rb = memchr(r + j, ']', n - j);
        if (rb)
            j = (size_t)(rb - r) + 1;
        while (j < n && is_space(r[j]))
            j++;
    }
    if (name_len > 0 && is_alnum(r[0]) && j < n && r[j] == '@') {
        const char *u = r + j + 1;
        size_t ul = n - j - 1;
        trim(&u, &ul);
        if (ul == 0)
            return fail(c, file, line, "'@' without a URL");
        return url_requirement(c, u, ul, constraint, file, line, h);
    }

    /* A local directory or archive (pip's _looks_like_path / archive
     * names): nothing to fetch (R5). */
    if (memchr(r, '/', n) || r[0] == '.' || r[0] == '~' || is_archive_name(r, n) || editable)
        return true;

    /* A name, resolved through the index. Anything else is not a
     * requirement pip would accept (a merge-conflict marker, a stray word
     * of prose). */
    bool ok = name_len > 0 && is_alnum(r[0]) && is_alnum(r[name_len - 1]) &&
              (j == n || strchr("<>=!~(;", r[j]) != NULL);
    if (!ok) {
        char msg[200];
        char t[72];
        snprintf(msg, sizeof msg, "not a requirement: '%s'",
                 sl_display_untrusted(r, n, t, sizeof t, SL_DISPLAY_QMARK));
        return fail(c, file, line, msg);
    }
    if (!constraint)
        c->needs_index = true;
    /* A constraint pins nothing by itself: it narrows what is required. */
    if (c->pins && !constraint)
        add_pinreq(c, r, name_len, r + j, n - j, h, file);
    return true;
}

/* shlex.split (POSIX mode) of the options part of a line. Returns false on
 * an unclosed quote or a trailing escape, as shlex raises. */
static bool shlex_split(const char *s, size_t n, strv *out)
{
    size_t i = 0;
    char *tok = sl_xrealloc(NULL, n + 1);
    while (i < n) {
        while (i < n && is_space(s[i]))
            i++;
        if (i >= n)
            break;
        size_t tl = 0;
        while (i < n && !is_space(s[i])) {
            char ch = s[i++];
            if (ch == '\\') {
                if (i >= n)
                    goto bad;
                tok[tl++] = s[i++];
            } else if (ch == '\'') {
                while (i < n && s[i] != '\'')
                    tok[tl++] = s[i++];
                if (i >= n)
                    goto bad;
                i++;
            } else if (ch == '"') {
                while (i < n && s[i] != '"') {
                    if (s[i] == '\\' && i + 1 < n && strchr("\\\"$`\n", s[i + 1]))
                        i++;
                    tok[tl++] = s[i++];
                }
                if (i >= n)
                    goto bad;
                i++;
            } else {
                tok[tl++] = ch;
            }
        }
        strv_push(out, sl_xstrndup(tok, tl));
    }
    free(tok);
    return true;
bad:
    free(tok);
    return false;
}

enum opt_id {
    O_INDEX_URL, O_EXTRA_INDEX_URL, O_NO_INDEX, O_CONSTRAINT, O_REQUIREMENT, O_EDITABLE,
    O_FIND_LINKS, O_HASH, O_OTHER_VALUE, O_OTHER_FLAG,
};

typedef struct optdef {
    const char *lname;
    char sname;
    enum opt_id id;
} optdef;

/* pip's SUPPORTED_OPTIONS and SUPPORTED_OPTIONS_REQ (req_file.py). */
static const optdef opts[] = {
    { "index-url", 'i', O_INDEX_URL },
    { "pypi-url", 0, O_INDEX_URL },
    { "extra-index-url", 0, O_EXTRA_INDEX_URL },
    { "no-index", 0, O_NO_INDEX },
    { "constraint", 'c', O_CONSTRAINT },
    { "requirement", 'r', O_REQUIREMENT },
    { "editable", 'e', O_EDITABLE },
    { "find-links", 'f', O_FIND_LINKS },
    { "no-binary", 0, O_OTHER_VALUE },
    { "only-binary", 0, O_OTHER_VALUE },
    { "prefer-binary", 0, O_OTHER_FLAG },
    { "require-hashes", 0, O_OTHER_FLAG },
    { "pre", 0, O_OTHER_FLAG },
    { "trusted-host", 0, O_OTHER_VALUE },
    { "use-feature", 0, O_OTHER_VALUE },
    { "global-option", 0, O_OTHER_VALUE },
    { "hash", 0, O_HASH },
    { "config-settings", 'C', O_OTHER_VALUE },
};

/* A long option by its exact name or, as optparse allows, a unique
 * prefix. NULL: unknown (ignored: it names no host we could use). */
static const optdef *long_opt(const char *name, size_t n, bool *ambiguous)
{
    const optdef *hit = NULL;
    *ambiguous = false;
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        if (strlen(opts[i].lname) == n && !strncmp(opts[i].lname, name, n))
            return &opts[i];
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        if (strlen(opts[i].lname) > n && !strncmp(opts[i].lname, name, n)) {
            if (hit && hit->id != opts[i].id)
                *ambiguous = true;
            hit = &opts[i];
        }
    return *ambiguous ? NULL : hit;
}

/* The options of an option line, as optparse leaves them. */
typedef struct lineopts {
    const char *index_url;
    strv extra;                    /* borrowed pointers into the token list */
    const char *constraint, *requirement, *editable, *find_links;
    bool no_index;
} lineopts;

static bool parse_options(pipctx *c, strv *toks, lineopts *lo, const char *file, int line)
{
    for (size_t i = 0; i < toks->n; i++) {
        const char *t = toks->v[i];
        const optdef *d = NULL;
        const char *value = NULL;
        if (!strncmp(t, "--", 2) && t[2]) {
            const char *eq = strchr(t + 2, '=');
            size_t nl = eq ? (size_t)(eq - t - 2) : strlen(t + 2);
            bool amb;
            d = long_opt(t + 2, nl, &amb);
            if (amb) {
                char msg[160];
                char sh[72];
                snprintf(msg, sizeof msg, "ambiguous option '%s'",
                         sl_display_untrusted(t, strlen(t), sh, sizeof sh, SL_DISPLAY_QMARK));
                return fail(c, file, line, msg);
            }
            if (!d)
                continue;
            if (eq)
                value = eq + 1;
        } else if (t[0] == '-' && t[1] && t[1] != '-') {
            for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
                if (opts[k].sname == t[1])
                    d = &opts[k];
            if (!d)
                continue;
            if (t[2])
                value = t + 2;
        } else {
            continue;              /* a stray argument: optparse leaves it aside */
        }
        bool takes = d->id != O_NO_INDEX && d->id != O_OTHER_FLAG;
        if (!takes) {
            if (value && t[1] == '-') {
                char msg[160];
                char sh[72];
                snprintf(msg, sizeof msg, "option '%s' takes no value",
                         sl_display_untrusted(t, strlen(t), sh, sizeof sh, SL_DISPLAY_QMARK));
                return fail(c, file, line, msg);
            }
            if (d->id == O_NO_INDEX)
                lo->no_index = true;
            continue;
        }
        if (!value) {
            if (i + 1 >= toks->n) {
                char msg[160];
                char sh[72];
                snprintf(msg, sizeof msg, "option '%s' requires a value",
                         sl_display_untrusted(t, strlen(t), sh, sizeof sh, SL_DISPLAY_QMARK));
                return fail(c, file, line, msg);
            }
            value = toks->v[++i];
        }
        switch (d->id) {
        case O_INDEX_URL: lo->index_url = value; break;
        case O_EXTRA_INDEX_URL: strv_push(&lo->extra, (char *)value); break;
        case O_CONSTRAINT: if (!lo->constraint) lo->constraint = value; break;
        case O_REQUIREMENT: if (!lo->requirement) lo->requirement = value; break;
        case O_EDITABLE: if (!lo->editable) lo->editable = value; break;
        case O_FIND_LINKS: if (!lo->find_links) lo->find_links = value; break;
        default: break;
        }
    }
    return true;
}

static bool read_file(pipctx *c, const char *rel, const char *path, const char *data, size_t len,
                      bool constraint);

/* The path of `inc` (as written after -r/-c) relative to the project:
 * "a/b.txt" + "../c.txt" -> "c.txt". Leading ".." segments are kept (a
 * file above the project); an absolute path stays absolute. NULL if it
 * names no file. */
static char *join_rel(const char *base_rel, const char *inc)
{
    size_t bl = 0;
    if (inc[0] != '/') {
        const char *s = strrchr(base_rel, '/');
        bl = s ? (size_t)(s - base_rel) + 1 : 0;   /* the directory, with its '/' */
    }
    size_t il = strlen(inc);
    char *in = sl_xrealloc(NULL, bl + il + 1);
    memcpy(in, base_rel, bl);
    memcpy(in + bl, inc, il + 1);

    bool abs = in[0] == '/';
    size_t cap = bl + il + 1, nseg = 0;
    const char **seg = sl_xrealloc(NULL, cap * sizeof *seg);
    size_t *slen = sl_xrealloc(NULL, cap * sizeof *slen);
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - p);
        bool dotdot = n == 2 && p[0] == '.' && p[1] == '.';
        if (n == 0 || (n == 1 && p[0] == '.')) {
            /* nothing */
        } else if (dotdot && nseg && !(slen[nseg - 1] == 2 && !memcmp(seg[nseg - 1], "..", 2))) {
            nseg--;
        } else if (dotdot && abs) {
            /* "/.." is "/" */
        } else {
            seg[nseg] = p;
            slen[nseg++] = n;
        }
        p = e;
    }
    char *out = NULL;
    if (nseg && !(slen[nseg - 1] == 2 && !memcmp(seg[nseg - 1], "..", 2))) {
        out = sl_xrealloc(NULL, bl + il + 2);
        size_t o = 0;
        if (abs)
            out[o++] = '/';
        for (size_t i = 0; i < nseg; i++) {
            if (i)
                out[o++] = '/';
            memcpy(out + o, seg[i], slen[i]);
            o += slen[i];
        }
        out[o] = '\0';
    }
    free(seg);
    free(slen);
    free(in);
    return out;
}

/* -r / -c: read the file in place, relative to the including file. */
static bool include(pipctx *c, const char *rel, const char *file, int line, const char *inc,
                    bool constraint)
{
    char msg[700], shown[160];
    size_t il = strlen(inc);
    if (il >= 7 && !strncasecmp(inc, "file://", 7))
        inc += 7;
    else if (il >= 5 && !strncasecmp(inc, "file:", 5))
        inc += 5;
    else if (is_url(inc, il) || sl_pyurl_has_scheme(inc, il)) {
        snprintf(msg, sizeof msg, "'%s' is included by URL, which cannot be read offline",
                 sl_display_untrusted(inc, il, shown, sizeof shown, SL_DISPLAY_QMARK));
        return fail(c, file, line, msg);
    }
    if (!*inc)
        return fail(c, file, line, "empty file name to include");
    char *target = join_rel(rel, inc);
    if (!target) {
        snprintf(msg, sizeof msg, "'%s' is not a file",
                 sl_display_untrusted(inc, strlen(inc), shown, sizeof shown, SL_DISPLAY_QMARK));
        return fail(c, file, line, msg);
    }
    for (int i = 0; i < c->depth; i++)
        if (!strcmp(c->stack[i], target)) {
            /* Name the loop: "a.txt -> b.txt -> a.txt". */
            size_t k = (size_t)snprintf(msg, sizeof msg, "include cycle: ");
            for (int j = i; j <= c->depth && k < sizeof msg; j++) {
                const char *name = j < c->depth ? c->stack[j] : target;
                k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s", j > i ? " -> " : "",
                                      sl_display_untrusted(name, strlen(name), shown, sizeof shown,
                                                           SL_DISPLAY_QMARK));
            }
            free(target);
            return fail(c, file, line, msg);
        }
    if (c->depth >= INCLUDE_DEPTH_MAX) {
        free(target);
        return fail(c, file, line, "includes nested too deep (over 32 levels)");
    }
    size_t tl = strlen(target);
    char *key = sl_xrealloc(NULL, tl + 3);
    key[0] = constraint ? 'c' : 'r';
    key[1] = ':';
    memcpy(key + 2, target, tl + 1);
    for (size_t i = 0; i < c->visited.n; i++)
        if (!strcmp(c->visited.v[i], key)) {
            /* Read already, to the same effect: once is enough, and it
             * keeps a diamond of includes from growing exponentially. */
            free(key);
            free(target);
            return true;
        }
    strv_push(&c->visited, key);

    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path = NULL;
    const char *data = sl_project_file(c->proj, target, &len, &path, &e);
    if (!data) {
        const char *name = path ? path : target;
        sl_display_untrusted(name, strlen(name), shown, sizeof shown, SL_DISPLAY_QMARK);
        if (e.msg[0])
            snprintf(msg, sizeof msg, "cannot read included file '%s': %.300s", shown, e.msg);
        else
            snprintf(msg, sizeof msg, "included file '%s' does not exist", shown);
        free(target);
        return fail(c, file, line, msg);
    }
    bool ok = read_file(c, target, path, data, len, constraint);
    free(target);
    return ok;
}

static bool option_line(pipctx *c, const char *rel, const char *file, int line, const char *s, size_t n,
                        bool constraint)
{
    strv toks = { 0 };
    lineopts lo = { 0 };
    bool ok = true;
    if (!shlex_split(s, n, &toks)) {
        ok = fail(c, file, line, "unbalanced quotes or a trailing escape in the options");
        goto out;
    }
    if (!parse_options(c, &toks, &lo, file, line)) {
        ok = false;
        goto out;
    }
    /* As req_file.py: an -e line is a requirement; an -r/-c line only
     * recurses (its other options are dropped); any other line sets the
     * search scope. */
    if (lo.editable) {
        hashopts none = { .bad = false };
        ok = requirement(c, lo.editable, strlen(lo.editable), true, constraint, file, line, &none);
    } else if (lo.requirement) {
        ok = include(c, rel, file, line, lo.requirement, false);
    } else if (lo.constraint) {
        ok = include(c, rel, file, line, lo.constraint, true);
    } else {
        if (lo.no_index) {
            c->sc.no_index = true;
            srcv_clear(&c->sc.index);
        }
        if (lo.index_url && !c->sc.no_index) {
            srcv_clear(&c->sc.index);
            srcv_push(&c->sc.index, lo.index_url, strlen(lo.index_url), file, line);
        }
        for (size_t i = 0; i < lo.extra.n && !c->sc.no_index; i++)
            srcv_push(&c->sc.index, lo.extra.v[i], strlen(lo.extra.v[i]), file, line);
        if (lo.find_links)
            srcv_push(&c->sc.find_links, lo.find_links, strlen(lo.find_links), file, line);
    }
out:
    free(lo.extra.v);
    strv_free(&toks);
    return ok;
}

/* --pins: the --hash options of a requirement line (pip's
 * _handle_merge_hash: "ALG:HEX", ALG one of sha256, sha384, sha512, or the
 * whole file is refused), as SRI. */
static bool line_hashes(pipctx *c, const char *s, size_t n, hashopts *h, const char *file, int line)
{
    strv toks = { 0 };
    if (!shlex_split(s, n, &toks)) {
        strv_free(&toks);
        return fail(c, file, line, "unbalanced quotes or a trailing escape in the options");
    }
    for (size_t i = 0; i < toks.n; i++) {
        const char *t = toks.v[i];
        if (strncmp(t, "--", 2) || !t[2])
            continue;
        const char *eq = strchr(t + 2, '=');
        bool amb;
        const optdef *d = long_opt(t + 2, eq ? (size_t)(eq - t - 2) : strlen(t + 2), &amb);
        if (!d || d->id != O_HASH)
            continue;
        const char *v = eq ? eq + 1 : i + 1 < toks.n ? toks.v[++i] : NULL;
        if (!v)
            break;
        const char *colon = strchr(v, ':');
        size_t al = colon ? (size_t)(colon - v) : 0;
        bool strong = colon && ((al == 6 && (!strncmp(v, "sha256", 6) || !strncmp(v, "sha384", 6) ||
                                             !strncmp(v, "sha512", 6))));
        char sri[SL_SRI_MAX];
        if (!strong)
            h->bad = true;
        else if (sl_pyhash_sri(v, strlen(v), sri))
            strv_push(&h->sri, sl_xstrdup(sri));
        /* a strong algorithm with bad hex matches no file: left out */
    }
    strv_free(&toks);
    return true;
}

/* One logical line, comments already cut: a requirement (with per-line
 * options such as --hash) or an option line. */
static bool logical_line(pipctx *c, const char *rel, const char *file, int line, const char *s, size_t n,
                         bool constraint)
{
    /* break_args_options: tokens split on ' ' up to the first that starts
     * with '-' are the requirement. */
    size_t i = 0, args_end = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != ' ')
            e++;
        if (e > i && s[i] == '-')
            break;
        args_end = e;
        i = e + 1;
    }
    const char *a = s;
    size_t al = args_end;
    trim(&a, &al);
    if (!al)
        return option_line(c, rel, file, line, s, n, constraint);
    hashopts h = { .bad = false };
    bool ok = !c->pins || line_hashes(c, s + args_end, n - args_end, &h, file, line);
    ok = ok && requirement(c, a, al, false, constraint, file, line, &h);
    strv_free(&h.sri);
    return ok;
}

/* COMMENT_RE "(^|\s+)#.*$": cut at a '#' that starts the line or follows
 * whitespace (so "https://host/x#egg=y" keeps its fragment). */
static size_t comment_cut(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '#' && (i == 0 || is_space(s[i - 1]))) {
            while (i > 0 && is_space(s[i - 1]))
                i--;
            return i;
        }
    return n;
}

static bool comment_line(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_space(s[i]))
        i++;
    return i < n && s[i] == '#';
}

static bool read_file(pipctx *c, const char *rel, const char *path, const char *data, size_t len,
                      bool constraint)
{
    if (!check_text(path, data, len, c->err))
        return false;
    if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
        data += 3, len -= 3;
    c->stack[c->depth++] = rel;

    bool ok = true;
    char *buf = NULL;              /* a logical line being joined */
    size_t blen = 0, bcap = 0;
    int primary = 0, lineno = 0;
    size_t pos = 0;
    const char *line;
    size_t llen;
    for (;;) {
        bool more = next_line(data, len, &pos, &line, &llen);
        const char *s = NULL;
        size_t n = 0;
        int at = 0;
        if (more) {
            lineno++;
            bool cont = llen && line[llen - 1] == '\\' && !comment_line(line, llen);
            if (cont) {
                /* join_lines: the fragment loses its '\'s at both ends. */
                const char *f = line;
                size_t fl = llen;
                while (fl && f[0] == '\\')
                    f++, fl--;
                while (fl && f[fl - 1] == '\\')
                    fl--;
                if (blen == 0 && !primary)
                    primary = lineno;
                if (blen + fl + 2 > bcap)
                    buf = sl_xrealloc(buf, bcap = (blen + fl + 2) * 2);
                memcpy(buf + blen, f, fl);
                blen += fl;
                continue;
            }
            if (primary) {
                /* A comment line ends a continuation; pip prefixes it with
                 * a space so that it is cut as a comment. */
                bool cl = comment_line(line, llen);
                if (blen + llen + 3 > bcap)
                    buf = sl_xrealloc(buf, bcap = (blen + llen + 3) * 2);
                if (cl)
                    buf[blen++] = ' ';
                memcpy(buf + blen, line, llen);
                blen += llen;
                s = buf, n = blen, at = primary;
            } else {
                s = line, n = llen, at = lineno;
            }
        } else if (primary) {
            s = buf, n = blen, at = primary;   /* the last line ended in '\' */
        } else {
            break;
        }
        n = comment_cut(s, n);
        trim(&s, &n);
        if (n)
            ok = logical_line(c, rel, path, at, s, n, constraint);
        blen = 0;
        primary = 0;
        if (!ok || !more)
            break;
    }
    free(buf);
    c->depth--;
    return ok;
}

/* The scope pip starts with: PyPI, or pip.conf's index, extras and links. */
static bool initial_scope(pipctx *c, const pipconf *pc)
{
    if (pc && pc->no_index == 1)
        c->sc.no_index = true;
    if (c->sc.no_index) {
        /* no index at all */
    } else if (pc && pc->index_url && pc->index_url[0]) {
        srcv_push(&c->sc.index, pc->index_url, strlen(pc->index_url), pc->path, pc->index_line);
    } else {
        srcv_push(&c->sc.index, SL_PYPI_SIMPLE, strlen(SL_PYPI_SIMPLE), NULL, 0);
    }
    /* Multi-valued options are split on whitespace (ConfigOptionParser). */
    const char *lists[2] = { pc ? pc->extra : NULL, pc ? pc->find_links : NULL };
    for (int k = 0; k < 2; k++) {
        const char *p = lists[k];
        if (!p || (k == 0 && c->sc.no_index))
            continue;
        while (*p) {
            while (*p && is_space(*p))
                p++;
            const char *e = p;
            while (*e && !is_space(*e))
                e++;
            if (e > p)
                srcv_push(k == 0 ? &c->sc.index : &c->sc.find_links, p, (size_t)(e - p), pc->path,
                          k == 0 ? pc->extra_line : pc->find_line);
            p = e;
        }
    }
    return true;
}

static bool emit_sources(pipctx *c, const srcv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        char msg[512];
        sl_pyprov prov = { { c->top, v->v[i].origin } };
        if (sl_pyindex_add(c->out, v->v[i].url, strlen(v->v[i].url), &prov, msg, sizeof msg) < 0) {
            sl_lockerr_set(c->err, v->v[i].origin ? v->v[i].origin : c->top, v->v[i].line, "%s", msg);
            return false;
        }
    }
    return true;
}

#define WHY_NO_PIN "not pinned: a requirement without an == version and --hash (pip's hash-checking " \
                   "mode refuses those)"
#define WHY_BUILD "not pinned: the build dependencies of an sdist or VCS requirement are not in the " \
                  "requirements file"

/* --pins: for each index, the page of each requirement by name; for each
 * index and find-links location, the files of each pinned version (or, for
 * a requirement that pins nothing, the file host as a host entry that says
 * why) and the build backends' hosts when something is built; each
 * find-links page itself. */
static bool emit_pins(pipctx *c)
{
    sl_pyvpins *vp = sl_pyvpins_new();
    char msg[512];
    bool ok = true;
    const srcv *lists[2] = { &c->sc.index, &c->sc.find_links };
    for (int k = 0; k < 2 && ok; k++) {
        if (k == 0 && c->sc.no_index)
            continue;
        for (size_t i = 0; i < lists[k]->n && ok; i++) {
            const src *s = &lists[k]->v[i];
            size_t ul = strlen(s->url);
            sl_pyprov top = { { c->top, s->origin } };
            int r = 0;
            if (k == 1)
                r = sl_pypage_rule(c->out, s->url, ul, &top, "find-links page", msg, sizeof msg);
            for (size_t q = 0; q < c->nreqs && r >= 0; q++) {
                const pinreq *p = &c->reqs[q];
                sl_pyprov prov = { { p->file, s->origin } };
                if (k == 0)
                    r = sl_pyindex_page_rule(c->out, s->url, ul, p->name, &prov, msg, sizeof msg);
                if (r < 0)
                    break;
                if (p->version && p->digests.n && !p->bad_hash)
                    r = sl_pyvpins_add(vp, s->url, ul, p->name, p->version,
                                       (const char *const *)p->digests.v, p->digests.n, &prov, msg,
                                       sizeof msg);
                else
                    r = sl_pyindex_files_unpinned(c->out, s->url, ul, &prov,
                                                  p->bad_hash ? WHY_BAD_HASH : WHY_NO_PIN, msg,
                                                  sizeof msg);
            }
            if (r >= 0 && c->builds)
                r = sl_pyindex_unpinned(c->out, s->url, ul, &top, WHY_BUILD, msg, sizeof msg);
            if (r < 0) {
                sl_lockerr_set(c->err, s->origin ? s->origin : c->top, s->line, "%s", msg);
                ok = false;
            }
        }
    }
    if (ok && !sl_pyvpins_emit(vp, c->out, msg, sizeof msg)) {
        sl_lockerr_set(c->err, c->top, 0, "%s", msg);
        ok = false;
    }
    sl_pyvpins_free(vp);
    return ok;
}

static void pipctx_free(pipctx *c)
{
    for (size_t i = 0; i < c->ndefer; i++) {
        free(c->defer[i].url);
        strv_free(&c->defer[i].digests);
    }
    free(c->defer);
    for (size_t i = 0; i < c->nreqs; i++) {
        free(c->reqs[i].name);
        free(c->reqs[i].version);
        strv_free(&c->reqs[i].digests);
    }
    free(c->reqs);
    srcv_free(&c->sc.index);
    srcv_free(&c->sc.find_links);
    strv_free(&c->visited);
}

static bool read_requirements(const char *path, const char *data, size_t len, sl_project *proj,
                              sl_derived *out, sl_lockerr *err)
{
    pipctx c = { .proj = proj, .out = out, .err = err, .top = path, .pins = sl_derived_pins(out) };
    pipconf pc;
    bool have_conf = false;
    bool ok = true;

    /* pip.conf in the project is PIP_CONFIG_FILE (R4). */
    sl_lockerr ce = { .msg = "" };
    size_t clen;
    const char *cpath = NULL;
    const char *cdata = sl_project_file(proj, "pip.conf", &clen, &cpath, &ce);
    if (!cdata && ce.msg[0]) {
        *err = ce;
        return false;
    }
    if (cdata) {
        if (!pipconf_parse(&pc, cpath, cdata, clen, err)) {
            pipconf_free(&pc);
            return false;
        }
        have_conf = true;
    }
    initial_scope(&c, have_conf ? &pc : NULL);

    ok = read_file(&c, base_name(path), path, data, len, false);

    /* Constraint URLs are fetched only if something is installed. */
    for (size_t i = 0; ok && i < c.ndefer; i++) {
        if (!c.has_requirements)
            break;
        deferred *d = &c.defer[i];
        hashopts h = { .sri = d->digests, .bad = d->bad_hash };
        ok = fetch_url(&c, d->url, strlen(d->url), d->vcs, &h, d->file, d->line);
    }
    if (ok && c.needs_index && c.pins) {
        ok = emit_pins(&c);
    } else if (ok && c.needs_index) {
        if (!c.sc.no_index)
            ok = emit_sources(&c, &c.sc.index);
        if (ok)
            ok = emit_sources(&c, &c.sc.find_links);
    }

    pipctx_free(&c);
    if (have_conf)
        pipconf_free(&pc);
    return ok;
}

/* The files a requirements file reads through -r and -c, all the way
 * down: read it as for real (without pip.conf, which changes no include),
 * into a set that is thrown away, and report what it visited. */
static void pip_includes(const char *path, const char *data, size_t len, sl_project *proj,
                         void (*found)(void *ctx, const char *path), void *ctx)
{
    if (!strcmp(base_name(path), "pip.conf"))
        return;
    sl_lockerr err = { .msg = "" };
    pipctx c = { .proj = proj, .out = sl_derived_new(), .err = &err, .top = path };
    (void)read_file(&c, base_name(path), path, data, len, false);
    for (size_t i = 0; i < c.visited.n; i++) {
        const char *p = NULL;
        sl_lockerr e = { .msg = "" };
        if (sl_project_file(proj, c.visited.v[i] + 2, NULL, &p, &e) && p)
            found(ctx, p);
    }
    pipctx_free(&c);
    sl_derived_free(c.out);
}

static bool read_pip(const char *path, const char *data, size_t len, sl_project *proj,
                     sl_derived *out, sl_lockerr *err)
{
    if (!strcmp(base_name(path), "pip.conf")) {
        /* Config alone adds nothing (R4); it is checked, and applied to the
         * requirements files of its project. */
        pipconf pc;
        bool ok = pipconf_parse(&pc, path, data, len, err);
        pipconf_free(&pc);
        return ok;
    }
    return read_requirements(path, data, len, proj, out, err);
}

const sl_lockreader sl_reader_pip = {
    .name = "pip",
    .recognises = recognises,
    .read = read_pip,
    .includes = pip_includes,
};
