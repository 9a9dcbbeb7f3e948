/* Maven: pom.xml and the Maven wrapper's properties.
 *
 * Maven has no lockfile; the POM names the repositories. Every build runs
 * plugins, so the plugin repositories are always needed: Maven Central from
 * the super POM (repo.maven.apache.org) unless a <pluginRepository> with id
 * "central" replaces it, plus each <pluginRepository>. The dependency
 * repositories (central unless a <repository> with id "central" replaces it,
 * plus each <repository>) are needed when the POM resolves something through
 * them: a <dependency>, an imported BOM, a <parent> (it may not be on disk),
 * or <modules> whose POMs inherit the repositories. <distributionManagement>
 * is publish-only (LOCKFILES.md R3) and adds nothing; file: URLs are local
 * (R5). A repository with both releases and snapshots disabled is unused.
 *
 * Profiles: repositories and dependencies of a profile count when it turns
 * itself on (activeByDefault, or a jdk/os/file/"!property" activation);
 * profiles that need -P or -Dproperty do not.
 *
 * ${property} in a URL is taken from <properties> of this POM (and its
 * active profiles); anything else (env., settings., a parent's property) is
 * known only where Maven runs, and the POM is refused with its line rather
 * than guessed.
 *
 * With --pins nothing can be pinned (PINS.md "the rest"): Maven has no
 * lockfile, so nothing names an artifact's digest; the host entries say so.
 * (Not even the wrapper's distributionSha256Sum: a rule for it on Maven
 * Central would shadow the host entry the build itself needs there.)
 *
 * Not modelled (LOCKFILES.md §4): ~/.m2/settings.xml and .mvn/maven.config
 * (mirrors, extra repositories), properties inherited from a parent POM,
 * MVNW_REPOURL, and repositories declared by the parent POM when it is read
 * from a repository rather than from this tree. */
#include "lockfile.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "javaprops.h"
#include "xmlread.h"

#define CENTRAL_HOST "repo.maven.apache.org"
#define MAX_DEPTH 64
#define MAX_TEXT 8192
#define MAX_REPOS 1024
#define MAX_PROPS 4096
#define MAX_PROFILES 1024
#define MAX_EXPAND_DEPTH 8

typedef struct repo {
    bool plugin;
    char *id;
    char *url;
    int line;
    bool releases, snapshots;     /* enabled */
    int profile;                  /* -1: not in a profile */
} repo;

typedef struct prop {
    char *name;
    char *value;
    int profile;
} prop;

typedef struct pom {
    sl_xml xml;

    char *stack[MAX_DEPTH];
    int depth;
    char text[MAX_TEXT];
    size_t tlen;
    bool text_overflow;

    repo *repos;
    size_t nrepos, caprepos;
    repo *cur;                    /* the <repository> being read */
    prop *props;
    size_t nprops, capprops;

    /* Profiles: whether each turns itself on, and whether it uses the
     * dependency repositories. */
    bool *prof_active;
    bool *prof_deps;
    size_t capprof;
    int nprof;
    int in_profile;               /* index, or -1 */

    bool deps;                    /* outside profiles */
} pom;

/* The element path below <project>, or below <project><profiles><profile>
 * when inside a profile: "repositories/repository/url". */
static bool rel_path(const pom *p, char *buf, size_t cap)
{
    int from = 1;
    if (p->depth >= 3 && strcmp(p->stack[1], "profiles") == 0 &&
        strcmp(p->stack[2], "profile") == 0)
        from = 3;
    size_t k = 0;
    buf[0] = '\0';
    for (int i = from; i < p->depth; i++) {
        size_t l = strlen(p->stack[i]);
        if (k + l + 2 > cap)
            return false;
        if (k)
            buf[k++] = '/';
        memcpy(buf + k, p->stack[i], l);
        k += l;
        buf[k] = '\0';
    }
    return true;
}

static void on_start(void *ud, const char *name, const char **atts)
{
    pom *p = ud;
    (void)atts;
    if (p->xml.failed)
        return;
    if (p->depth == MAX_DEPTH) {
        sl_xml_fail(&p->xml, "%s", "elements nested too deeply");
        return;
    }
    if (p->depth == 0 && strcmp(name, "project") != 0) {
        sl_xml_fail(&p->xml, "root element is <%s>, not <project>: not a Maven POM", name);
        return;
    }
    p->stack[p->depth] = strdup(name);
    if (!p->stack[p->depth]) {
        sl_xml_fail(&p->xml, "%s", "out of memory");
        return;
    }
    p->depth++;
    p->tlen = 0;
    p->text_overflow = false;

    if (p->depth == 3 && strcmp(p->stack[1], "profiles") == 0 && strcmp(name, "profile") == 0) {
        size_t cap = p->capprof;
        if (!sl_grow(&p->prof_active, &cap, (size_t)p->nprof, sizeof(bool),
                  MAX_PROFILES) ||
            !sl_grow(&p->prof_deps, &p->capprof, (size_t)p->nprof, sizeof(bool),
                  MAX_PROFILES)) {
            sl_xml_fail(&p->xml, "%s", "too many profiles");
            return;
        }
        p->prof_active[p->nprof] = p->prof_deps[p->nprof] = false;
        p->in_profile = p->nprof++;
        return;
    }
    char rel[512];
    if (!rel_path(p, rel, sizeof rel))
        return;
    bool dep_repo = strcmp(rel, "repositories/repository") == 0;
    bool plugin_repo = strcmp(rel, "pluginRepositories/pluginRepository") == 0;
    if (dep_repo || plugin_repo) {
        if (!sl_grow(&p->repos, &p->caprepos, p->nrepos, sizeof p->repos[0], MAX_REPOS)) {
            sl_xml_fail(&p->xml, "%s", "too many repositories");
            return;
        }
        p->cur = &p->repos[p->nrepos++];
        *p->cur = (repo){.plugin = plugin_repo, .line = sl_xml_line(&p->xml),
                         .releases = true, .snapshots = true, .profile = p->in_profile};
        return;
    }
    /* What resolves through the dependency repositories. */
    bool uses = strcmp(rel, "dependencies/dependency") == 0 ||
                (p->in_profile < 0 && (strcmp(rel, "parent") == 0 ||
                                       strcmp(rel, "modules/module") == 0));
    if (uses) {
        if (p->in_profile >= 0)
            p->prof_deps[p->in_profile] = true;
        else
            p->deps = true;
    }
}

static bool text_is(const pom *p, const char *lit)
{
    /* Maven trims element text. */
    const char *s = p->text, *e = p->text + p->tlen;
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        e--;
    return (size_t)(e - s) == strlen(lit) && strncasecmp(s, lit, (size_t)(e - s)) == 0;
}

static char *trimmed_text(pom *p)
{
    const char *s = p->text, *e = p->text + p->tlen;
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        e--;
    char *r = strndup(s, (size_t)(e - s));
    if (!r)
        sl_xml_fail(&p->xml, "%s", "out of memory");
    return r;
}

static void on_end(void *ud, const char *name)
{
    pom *p = ud;
    (void)name;
    if (p->xml.failed || p->depth == 0)
        return;
    char rel[512];
    bool have = rel_path(p, rel, sizeof rel);
    if (have && p->cur) {
        size_t base = p->cur->plugin ? 36 : 24;
        bool in_repo = strncmp(rel, p->cur->plugin ? "pluginRepositories/pluginRepository/"
                                                   : "repositories/repository/",
                               base) == 0;
        const char *sub = in_repo ? rel + base : "";
        if ((strcmp(sub, "id") == 0 || strcmp(sub, "url") == 0) && p->text_overflow) {
            sl_xml_fail(&p->xml, "<%s> is too long", sub);
        } else if (strcmp(sub, "id") == 0) {
            free(p->cur->id);
            p->cur->id = trimmed_text(p);
        } else if (strcmp(sub, "url") == 0) {
            free(p->cur->url);
            p->cur->url = trimmed_text(p);
            p->cur->line = sl_xml_line(&p->xml);
        } else if (strcmp(sub, "releases/enabled") == 0) {
            p->cur->releases = !text_is(p, "false");
        } else if (strcmp(sub, "snapshots/enabled") == 0) {
            p->cur->snapshots = !text_is(p, "false");
        } else if (!in_repo) {
            p->cur = NULL;              /* </repository> or </pluginRepository> */
        }
    } else if (have) {
        if (strcmp(rel, "dependencyManagement/dependencies/dependency/scope") == 0 &&
            text_is(p, "import")) {
            /* An imported BOM is fetched like a dependency. */
            if (p->in_profile >= 0)
                p->prof_deps[p->in_profile] = true;
            else
                p->deps = true;
        } else if (p->in_profile >= 0 && (strcmp(rel, "activation/activeByDefault") == 0)) {
            if (text_is(p, "true"))
                p->prof_active[p->in_profile] = true;
        } else if (p->in_profile >= 0 && (strcmp(rel, "activation/jdk") == 0 ||
                                          strcmp(rel, "activation/os") == 0 ||
                                          strcmp(rel, "activation/file") == 0)) {
            p->prof_active[p->in_profile] = true;
        } else if (p->in_profile >= 0 && strcmp(rel, "activation/property/name") == 0) {
            const char *s = p->text;
            while (s < p->text + p->tlen && (*s == ' ' || *s == '\n' || *s == '\t'))
                s++;
            if (s < p->text + p->tlen && *s == '!')
                p->prof_active[p->in_profile] = true;
        } else if (strncmp(rel, "properties/", 11) == 0 && !strchr(rel + 11, '/')) {
            if (p->text_overflow) {
                sl_xml_fail(&p->xml, "property <%s> is too long", rel + 11);
            } else if (!sl_grow(&p->props, &p->capprops, p->nprops, sizeof p->props[0],
                             MAX_PROPS)) {
                sl_xml_fail(&p->xml, "%s", "too many properties");
            } else {
                prop *pr = &p->props[p->nprops];
                pr->name = strdup(rel + 11);
                pr->value = trimmed_text(p);
                pr->profile = p->in_profile;
                if (pr->name && pr->value)
                    p->nprops++;
                else {
                    free(pr->name);
                    free(pr->value);
                    sl_xml_fail(&p->xml, "%s", "out of memory");
                }
            }
        }
    }
    if (p->depth == 3 && p->in_profile >= 0 && strcmp(p->stack[1], "profiles") == 0)
        p->in_profile = -1;
    p->depth--;
    free(p->stack[p->depth]);
    p->stack[p->depth] = NULL;
    p->tlen = 0;
}

static void on_text(void *ud, const char *s, int len)
{
    pom *p = ud;
    if (len <= 0)
        return;
    if (p->tlen + (size_t)len >= MAX_TEXT) {
        p->text_overflow = true;
        return;
    }
    memcpy(p->text + p->tlen, s, (size_t)len);
    p->tlen += (size_t)len;
}

static void pom_free(pom *p)
{
    for (int i = 0; i < p->depth; i++)
        free(p->stack[i]);
    for (size_t i = 0; i < p->nrepos; i++) {
        free(p->repos[i].id);
        free(p->repos[i].url);
    }
    for (size_t i = 0; i < p->nprops; i++) {
        free(p->props[i].name);
        free(p->props[i].value);
    }
    free(p->repos);
    free(p->props);
    free(p->prof_active);
    free(p->prof_deps);
}

static bool profile_on(const pom *p, int profile)
{
    return profile < 0 || p->prof_active[profile];
}

static const char *prop_get(const pom *p, const char *name, size_t len)
{
    const char *v = NULL;
    for (size_t i = 0; i < p->nprops; i++)
        if (profile_on(p, p->props[i].profile) && strlen(p->props[i].name) == len &&
            memcmp(p->props[i].name, name, len) == 0)
            v = p->props[i].value;       /* a profile's value overrides */
    return v;
}

/* Expand ${name} from the POM's properties. Returns false with the name of
 * the first unknown property in `missing`. */
static bool expand(const pom *p, const char *s, char *out, size_t cap, size_t *k, int depth,
                   char *missing, size_t mcap)
{
    if (depth > MAX_EXPAND_DEPTH) {
        snprintf(missing, mcap, "(recursive property)");
        return false;
    }
    for (const char *q = s; *q; q++) {
        if (q[0] == '$' && q[1] == '{') {
            const char *e = strchr(q + 2, '}');
            if (!e) {
                snprintf(missing, mcap, "(unterminated ${)");
                return false;
            }
            const char *v = prop_get(p, q + 2, (size_t)(e - q - 2));
            if (!v) {
                snprintf(missing, mcap, "%.*s", (int)(e - q - 2 > 100 ? 100 : e - q - 2), q + 2);
                return false;
            }
            if (!expand(p, v, out, cap, k, depth + 1, missing, mcap))
                return false;
            q = e;
            continue;
        }
        if (*k + 1 >= cap) {
            snprintf(missing, mcap, "(URL too long)");
            return false;
        }
        out[(*k)++] = *q;
        out[*k] = '\0';
    }
    return true;
}

#define PINS_WHY "Maven has no lockfile: no digests to pin"

/* A URL's host entry; with pins a fallback saying why (for the host alone:
 * a repository URL is a prefix, not a path a rule could name). */
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
    return sl_derived_add_fallback(out, u.host, u.host_len, u.port, NULL, 0, file, PINS_WHY, msg, cap) ? 1 : -1;
}

static bool add_url(const char *url, const char *file, int line, const char *what,
                    sl_derived *out, sl_lockerr *err)
{
    char msg[256];
    if (add_url_entry(out, url, file, msg, sizeof msg) < 0) {
        sl_lockerr_set(err, file, line, "%s: %s", what, msg);
        return false;
    }
    return true;
}

static bool add_central(const char *file, sl_derived *out, sl_lockerr *err)
{
    char msg[256];
    if (!(sl_derived_pins(out) ? sl_derived_add_fallback(out, CENTRAL_HOST, strlen(CENTRAL_HOST), 443, NULL, 0, file,
                                                         PINS_WHY, msg, sizeof msg)
                               : sl_derived_add(out, CENTRAL_HOST, strlen(CENTRAL_HOST), 443, file, msg, sizeof msg))) {
        sl_lockerr_set(err, file, 0, "%s", msg);
        return false;
    }
    return true;
}

/* .mvn/wrapper/maven-wrapper.properties: ./mvnw downloads Maven from
 * distributionUrl, and the wrapper jar from wrapperUrl unless the jar is
 * checked in or the script-only wrapper is used. */
static bool wrapper(sl_project *proj, sl_derived *out, sl_lockerr *err)
{
    size_t len;
    const char *wpath = NULL;
    err->msg[0] = '\0';
    const char *data =
        sl_project_file(proj, ".mvn/wrapper/maven-wrapper.properties", &len, &wpath, err);
    if (!data)
        return err->msg[0] == '\0';
    if (!wpath)
        wpath = ".mvn/wrapper/maven-wrapper.properties";
    if (memchr(data, '\0', len)) {
        sl_lockerr_set(err, wpath, 0, "not a properties file");
        return false;
    }
    char url[2048];
    int line = sl_javaprops_get(data, len, "distributionUrl", url, sizeof url);
    if (!line) {
        sl_lockerr_set(err, wpath, 0, "no distributionUrl");
        return false;
    }
    if (!add_url(url, wpath, line, "distributionUrl", out, err))
        return false;

    char type[64] = "";
    sl_javaprops_get(data, len, "distributionType", type, sizeof type);
    if (strcmp(type, "only-script") == 0)
        return true;
    size_t jlen;
    err->msg[0] = '\0';
    if (sl_project_file(proj, ".mvn/wrapper/maven-wrapper.jar", &jlen, NULL, err))
        return true;
    if (err->msg[0])
        return false;
    line = sl_javaprops_get(data, len, "wrapperUrl", url, sizeof url);
    if (line)
        return add_url(url, wpath, line, "wrapperUrl", out, err);
    return add_central(wpath, out, err);     /* the scripts' default wrapperUrl */
}

static bool maven_read(const char *path, const char *data, size_t len, sl_project *proj,
                       sl_derived *out, sl_lockerr *err)
{
    pom *p = calloc(1, sizeof *p);
    if (!p) {
        sl_lockerr_set(err, path, 0, "out of memory");
        return false;
    }
    p->in_profile = -1;
    static const sl_xml_handlers handlers = {.start = on_start, .end = on_end, .text = on_text};
    bool ok = sl_xml_parse(&p->xml, path, data, len, &handlers, p, err);

    bool deps = p->deps;
    for (int i = 0; i < p->nprof; i++)
        if (p->prof_active[i] && p->prof_deps[i])
            deps = true;
    bool central_deps = true, central_plugins = true;
    for (size_t i = 0; ok && i < p->nrepos; i++) {
        repo *r = &p->repos[i];
        if (!profile_on(p, r->profile) || !r->id || strcmp(r->id, "central") != 0)
            continue;
        if (r->plugin)
            central_plugins = false;
        else
            central_deps = false;
    }
    if (ok && (central_plugins || (deps && central_deps)))
        ok = add_central(path, out, err);
    for (size_t i = 0; ok && i < p->nrepos; i++) {
        repo *r = &p->repos[i];
        if (!profile_on(p, r->profile) || (!r->plugin && !deps) || (!r->releases && !r->snapshots))
            continue;
        if (!r->url || !r->url[0]) {
            sl_lockerr_set(err, path, r->line, "repository '%.100s' has no <url>",
                           r->id ? r->id : "?");
            ok = false;
            break;
        }
        if (strncasecmp(r->url, "file:", 5) == 0)
            continue;                              /* a local repository */
        char url[4096], missing[128] = "";
        size_t k = 0;
        url[0] = '\0';
        if (!expand(p, r->url, url, sizeof url, &k, 0, missing, sizeof missing)) {
            sl_lockerr_set(err, path, r->line,
                           "cannot determine the URL of repository '%.100s': ${%s} is not "
                           "defined in this POM",
                           r->id ? r->id : "?", missing);
            ok = false;
            break;
        }
        if (strncasecmp(url, "file:", 5) == 0)
            continue;
        ok = add_url(url, path, r->line, "repository URL", out, err);
    }
    if (ok)
        ok = wrapper(proj, out, err);
    pom_free(p);
    free(p);
    return ok;
}

static bool maven_recognises(const char *base)
{
    return strcmp(base, "pom.xml") == 0;
}

const sl_lockreader sl_reader_maven = {
    .name = "maven",
    .recognises = maven_recognises,
    .read = maven_read,
};
