/* Gradle: gradle.lockfile, settings.gradle(.kts), build.gradle(.kts) and the
 * wrapper's properties.
 *
 * gradle.lockfile records coordinates, not repositories; the repositories
 * come from the build scripts. Groovy and Kotlin DSL scripts are programs,
 * and we do not evaluate them: a small tokenizer (strings with their
 * templates, comments, parentheses and braces) finds the blocks by name and
 * reads the few statements that name repositories:
 *
 *   repositories { mavenCentral() google() gradlePluginPortal() jcenter()
 *                  maven { url = uri("…") }  maven { url '…' }  maven("…")
 *                  ivy { url … }  mavenLocal()  flatDir { … } }
 *
 * A repositories block is classified by the blocks around it:
 * pluginManagement (plugin resolution), buildscript (the script classpath),
 * dependencyResolutionManagement (every project's dependencies), publishing
 * (publish-only, LOCKFILES.md R3: nothing), anything else (the project's
 * dependencies; allprojects/subprojects: every project's).
 *
 * Config alone adds nothing (R4): plugin repositories count when a plugins
 * block requests a plugin that is not built into Gradle (the default is
 * gradlePluginPortal(), applied only in the root of a build, where the
 * settings or the wrapper is); buildscript repositories when a classpath
 * dependency is declared; dependency repositories when the project declares
 * a dependency that is not a project or file dependency, or its
 * gradle.lockfile locks one. A project that declares its own repositories
 * does not use the settings' ones unless repositoriesMode is PREFER_SETTINGS
 * or FAIL_ON_PROJECT_REPOS (then only the settings' ones count). Projects
 * named by `include` in the settings are read from their directories.
 * Whichever of a directory's Gradle files the driver meets first, the
 * analysis is the same, and it runs once per directory (per_project).
 *
 * A repository URL is a string literal, uri("…") of one, or a template
 * whose parts come from the project's gradle.properties; a URL under
 * rootDir/projectDir/layout/file(…) is local (R5). Anything else (getenv,
 * providers, properties set in code) is known only when Gradle runs: when
 * the host depends on it the script is refused with FILE:LINE.
 *
 * With --pins (PINS.md "Gradle"): gradle/verification-metadata.xml at the
 * build's root lists every artifact file with its checksums; each used
 * repository gets a GET rule for each file (the file does not say which
 * repository served it): <repository>/<group as a path>/<name>/<version>/
 * <file>, pinned to its sha256/sha512 (and also-trust) values. The plugin
 * portal redirects (303) to plugins-artifacts.gradle.org, under a path with
 * a hash in it, or to Maven Central: both get rules too. Unpinned rules
 * only for what Gradle reads beyond the listed files: POMs and Gradle module
 * files when verify-metadata is false, .asc signatures when
 * verify-signatures is true, maven-metadata.xml of a -SNAPSHOT version. The
 * wrapper's distribution is pinned by distributionSha256Sum. The rest
 * (no verification file, SHA-1/MD5 or signature only, ivy repositories,
 * applied scripts) falls back to host entries saying why.
 *
 * Not modelled: code the tokenizer cannot see through (repositories added in
 * loops, functions, buildSrc or convention plugins, init scripts,
 * ~/.gradle/gradle.properties), Groovy paren-less calls spread over lines
 * in unusual ways, custom projectDir of included projects, included builds
 * (includeBuild: their own settings), version catalogs' plugin ids (any
 * alias() counts as a non-core plugin), content filters (a filtered
 * repository is still contacted), the old gradle/dependency-locks/
 * directory, and toolchain downloads (foojay, LOCKFILES.md §4). */
#include "lockfile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "javaprops.h"
#include "text.h"
#include "xmlread.h"

#define MAX_TOKENS 2000000
#define MAX_NESTING 256          /* open ( and { at once */
#define MAX_LEX_DEPTH 32         /* strings inside templates inside strings */
#define MAX_PROJECTS 256
#define MAX_DECLS 1024
#define UNKNOWN '\x01'           /* text known only when Gradle runs */

/* ---- Tokens ---- */

typedef enum tkind { T_IDENT, T_STRING, T_NUM, T_PUNCT } tkind;

typedef enum squote {
    Q_SINGLE,        /* '…' or '''…''' (Groovy), a char literal (Kotlin): no templates */
    Q_DOUBLE,        /* "…" / """…""" (Groovy GString, Kotlin): $templates, escapes */
    Q_RAW,           /* """…""" in Kotlin: $templates, no escapes */
    Q_SLASHY,        /* /…/ and $/…/$ (Groovy): $templates, only \/ escaped */
} squote;

typedef struct tok {
    tkind kind;
    squote quote;
    const char *s;   /* ident text, string content, punctuation char */
    size_t n;
    int line;
    int frame;       /* innermost brace block containing the token */
    int pdepth;      /* parentheses open within that block */
    int match;       /* for ( ) { }: the matching token */
    int child;       /* for {: the block it opens */
} tok;

typedef struct frame {
    int name;        /* token naming the block (`repositories {`, `maven("x") {`), or -1 */
    int qual;        /* `buildscript.repositories {`: the token before the dot, or -1 */
    int parent;      /* -1 for the script's top level */
    int open;        /* token index of {, -1 for the top level */
} frame;

typedef struct script {
    const char *path;
    const char *data;
    size_t len;
    bool kts;
    bool settings;
    int proj;        /* index into the analysis' projects */
    tok *t;
    size_t nt, cap;
    frame *f;
    size_t nf, fcap;
} script;

typedef struct lexer {
    script *sc;
    const char *p, *e;
    int line;
    bool prev_value;  /* the last token ends a value (for Groovy's / ambiguity) */
    int depth;
    sl_lockerr *err;
} lexer;

static bool lex_fail(lexer *lx, int line, const char *msg)
{
    sl_lockerr_set(lx->err, lx->sc->path, line, "%s", msg);
    return false;
}

static bool ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
}

static bool ident_char(char c)
{
    return ident_start(c) || (c >= '0' && c <= '9');
}

static bool skip_space(lexer *lx)
{
    while (lx->p < lx->e) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            lx->p++;
        } else if (c == '/' && lx->p + 1 < lx->e && lx->p[1] == '/') {
            while (lx->p < lx->e && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->p + 1 < lx->e && lx->p[1] == '*') {
            /* Kotlin block comments nest; Groovy's do not. */
            int start = lx->line, level = 0;
            do {
                if (lx->p + 1 < lx->e && lx->p[0] == '/' && lx->p[1] == '*') {
                    level++;
                    lx->p += 2;
                } else if (lx->p + 1 < lx->e && lx->p[0] == '*' && lx->p[1] == '/') {
                    level--;
                    lx->p += 2;
                } else {
                    if (*lx->p == '\n')
                        lx->line++;
                    lx->p++;
                }
                if (!lx->sc->kts && level > 1)
                    level = 1;
            } while (level > 0 && lx->p < lx->e);
            if (level > 0)
                return lex_fail(lx, start, "unterminated comment");
        } else {
            break;
        }
    }
    return true;
}

static bool lex_token(lexer *lx, tok *t);

/* A ${…} template: code up to the matching brace, lexed only to find it. */
static bool skip_template(lexer *lx, int start)
{
    if (++lx->depth > MAX_LEX_DEPTH)
        return lex_fail(lx, start, "templates nested too deeply");
    int level = 1;
    bool saved = lx->prev_value;
    lx->prev_value = false;
    while (level > 0) {
        if (!skip_space(lx))
            return false;
        if (lx->p >= lx->e)
            return lex_fail(lx, start, "unterminated ${ template in a string");
        tok t;
        if (!lex_token(lx, &t))
            return false;
        if (t.kind == T_PUNCT && t.s[0] == '{')
            level++;
        else if (t.kind == T_PUNCT && t.s[0] == '}')
            level--;
    }
    lx->prev_value = saved;
    lx->depth--;
    return true;
}

/* A string; lx->p is at its first content byte. `close` is the closing
 * delimiter. Templates are skipped over (their text stays in the content
 * and is read again when the string is evaluated). */
static bool lex_string(lexer *lx, tok *t, squote q, const char *close, bool multiline)
{
    size_t cl = strlen(close);
    int start = lx->line;
    t->kind = T_STRING;
    t->quote = q;
    t->s = lx->p;
    while (lx->p < lx->e) {
        char c = *lx->p;
        if ((size_t)(lx->e - lx->p) >= cl && memcmp(lx->p, close, cl) == 0 &&
            !(q == Q_SLASHY && cl == 2 && lx->p > t->s && lx->p[-1] == '$')) {
            t->n = (size_t)(lx->p - t->s);
            lx->p += cl;
            return true;
        }
        if (c == '\n') {
            if (!multiline)
                return lex_fail(lx, start, "unterminated string");
            lx->line++;
            lx->p++;
        } else if (c == '\\' && q != Q_RAW && lx->p + 1 < lx->e) {
            if (lx->p[1] == '\n') {
                if (!multiline && q != Q_SLASHY)
                    return lex_fail(lx, start, "unterminated string");
                lx->line++;
            }
            lx->p += 2;
        } else if (c == '$' && q != Q_SINGLE && lx->p + 1 < lx->e && lx->p[1] == '{') {
            lx->p += 2;
            if (!skip_template(lx, lx->line))
                return false;
        } else {
            lx->p++;
        }
    }
    return lex_fail(lx, start, "unterminated string");
}

static bool lex_token(lexer *lx, tok *t)
{
    memset(t, 0, sizeof *t);
    t->line = lx->line;
    t->match = t->child = -1;
    const char *p = lx->p;
    size_t left = (size_t)(lx->e - p);
    char c = *p;
    bool groovy = !lx->sc->kts;
    if (left >= 3 && memcmp(p, "\"\"\"", 3) == 0) {
        lx->p += 3;
        if (!lex_string(lx, t, groovy ? Q_DOUBLE : Q_RAW, "\"\"\"", true))
            return false;
    } else if (groovy && left >= 3 && memcmp(p, "'''", 3) == 0) {
        lx->p += 3;
        if (!lex_string(lx, t, Q_SINGLE, "'''", true))
            return false;
    } else if (c == '"') {
        lx->p++;
        if (!lex_string(lx, t, Q_DOUBLE, "\"", false))
            return false;
    } else if (c == '\'') {
        lx->p++;
        if (!lex_string(lx, t, Q_SINGLE, "'", false))
            return false;
    } else if (groovy && left >= 2 && p[0] == '$' && p[1] == '/') {
        lx->p += 2;
        if (!lex_string(lx, t, Q_SLASHY, "/$", true))
            return false;
    } else if (groovy && c == '/' && !lx->prev_value) {
        lx->p++;
        if (!lex_string(lx, t, Q_SLASHY, "/", true))
            return false;
    } else if (c == '`' && lx->sc->kts) {
        /* Kotlin: `kotlin-dsl` is an identifier. */
        const char *q = memchr(p + 1, '`', left - 1);
        const char *nl = memchr(p + 1, '\n', left - 1);
        if (!q || (nl && nl < q))
            return lex_fail(lx, lx->line, "unterminated `identifier`");
        t->kind = T_IDENT;
        t->s = p + 1;
        t->n = (size_t)(q - p - 1);
        lx->p = q + 1;
    } else if (ident_start(c)) {
        const char *q = p;
        while (q < lx->e && ident_char(*q))
            q++;
        t->kind = T_IDENT;
        t->s = p;
        t->n = (size_t)(q - p);
        lx->p = q;
    } else if (c >= '0' && c <= '9') {
        const char *q = p;
        while (q < lx->e && (ident_char(*q) || (*q == '.' && q + 1 < lx->e && q[1] >= '0' &&
                                                 q[1] <= '9')))
            q++;
        t->kind = T_NUM;
        t->s = p;
        t->n = (size_t)(q - p);
        lx->p = q;
    } else {
        t->kind = T_PUNCT;
        t->s = p;
        t->n = 1;
        lx->p++;
    }
    lx->prev_value = t->kind != T_PUNCT || c == ')' || c == ']';
    return true;
}

static bool lex_script(script *sc, sl_lockerr *err)
{
    lexer lx = {.sc = sc, .p = sc->data, .e = sc->data + sc->len, .line = 1, .err = err};
    /* A #! line is allowed at the top of a Groovy script. */
    if (sc->len >= 2 && sc->data[0] == '#' && sc->data[1] == '!')
        while (lx.p < lx.e && *lx.p != '\n')
            lx.p++;
    for (;;) {
        if (!skip_space(&lx))
            return false;
        if (lx.p >= lx.e)
            return true;
        if (!sl_grow(&sc->t, &sc->cap, sc->nt, sizeof *sc->t, MAX_TOKENS))
            return lex_fail(&lx, lx.line,
                            sc->nt >= MAX_TOKENS ? "script too large" : "out of memory");
        if (!lex_token(&lx, &sc->t[sc->nt]))
            return false;
        sc->nt++;
    }
}

static bool is_punct(const tok *t, char c)
{
    return t->kind == T_PUNCT && t->s[0] == c;
}

static bool is_ident(const tok *t, const char *name)
{
    return t->kind == T_IDENT && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

/* Blocks: match ( ) and { }, give every token its block. */
static bool structure(script *sc, sl_lockerr *err)
{
    int stack[MAX_NESTING];
    int pdepth[MAX_NESTING + 1];
    int sp = 0;
    if (!sl_grow(&sc->f, &sc->fcap, 0, sizeof *sc->f, MAX_TOKENS)) {
        sl_lockerr_set(err, sc->path, 0, "out of memory");
        return false;
    }
    sc->f[0] = (frame){.name = -1, .qual = -1, .parent = -1, .open = -1};
    sc->nf = 1;
    int cur = 0;
    pdepth[0] = 0;
    for (size_t i = 0; i < sc->nt; i++) {
        tok *t = &sc->t[i];
        t->frame = cur;
        t->pdepth = pdepth[sp];
        if (t->kind != T_PUNCT)
            continue;
        char c = t->s[0];
        if (c == '(' || c == '{') {
            if (sp == MAX_NESTING) {
                sl_lockerr_set(err, sc->path, t->line, "nested too deeply");
                return false;
            }
            stack[sp++] = (int)i;
            if (c == '(') {
                pdepth[sp] = pdepth[sp - 1] + 1;
                continue;
            }
            /* A block per '{', so never more than the tokens. */
            if (!sl_grow(&sc->f, &sc->fcap, sc->nf, sizeof *sc->f, MAX_TOKENS)) {
                sl_lockerr_set(err, sc->path, t->line, "out of memory");
                return false;
            }
            frame *f = &sc->f[sc->nf];
            *f = (frame){.name = -1, .qual = -1, .parent = cur, .open = (int)i};
            int at = (int)i - 1;
            if (at >= 0 && is_punct(&sc->t[at], ')') && sc->t[at].match >= 0)
                at = sc->t[at].match - 1;    /* maven("…") { */
            if (at >= 0 && sc->t[at].kind == T_IDENT) {
                f->name = at;
                if (at >= 2 && is_punct(&sc->t[at - 1], '.') && sc->t[at - 2].kind == T_IDENT)
                    f->qual = at - 2;
            }
            t->child = (int)sc->nf;
            cur = (int)sc->nf++;
            pdepth[sp] = 0;
        } else if (c == ')' || c == '}') {
            char want = c == ')' ? '(' : '{';
            if (sp == 0 || sc->t[stack[sp - 1]].s[0] != want) {
                sl_lockerr_set(err, sc->path, t->line, "unbalanced '%c'", c);
                return false;
            }
            int o = stack[--sp];
            t->match = o;
            sc->t[o].match = (int)i;
            if (c == '}') {
                cur = sc->f[cur].parent;
                t->frame = cur;
            }
            t->pdepth = pdepth[sp];
        }
    }
    if (sp > 0) {
        const tok *o = &sc->t[stack[sp - 1]];
        sl_lockerr_set(err, sc->path, o->line, "'%c' is never closed", o->s[0]);
        return false;
    }
    return true;
}

static bool tok_is_name(const script *sc, int ti, const char *name)
{
    return ti >= 0 && is_ident(&sc->t[ti], name);
}

/* Whether block f or one around it is named `name` (as `name {` or as the
 * qualifier of `name.x {`). */
static bool within(const script *sc, int f, const char *name)
{
    for (; f > 0; f = sc->f[f].parent)
        if (tok_is_name(sc, sc->f[f].name, name) || tok_is_name(sc, sc->f[f].qual, name))
            return true;
    return false;
}

static bool named(const script *sc, int f, const char *name)
{
    return f > 0 && tok_is_name(sc, sc->f[f].name, name);
}

/* ---- Statements of a block ---- */

/* The next statement among the tokens directly in block f, starting at *i:
 * sets [*s, *e) and advances *i. A statement ends at ';' or at a line break
 * outside parentheses, unless the line ends or the next begins with an
 * operator that continues it. Nested blocks are skipped whole. */
static bool next_stmt(const script *sc, int f, size_t *i, size_t *s, size_t *e)
{
    size_t end = sc->f[f].open >= 0 ? (size_t)sc->t[sc->f[f].open].match : sc->nt;
    size_t k = *i;
    while (k < end && (sc->t[k].frame != f || is_punct(&sc->t[k], ';')))
        k++;
    if (k >= end)
        return false;
    *s = k;
    size_t last = k;
    for (;;) {
        const tok *t = &sc->t[last];
        size_t nx = last + 1;
        if (is_punct(t, '{') && t->match > 0)
            nx = (size_t)t->match + 1;            /* a trailing block */
        if (nx >= end || is_punct(&sc->t[nx], ';'))
            break;
        const tok *n = &sc->t[nx];
        int line_end = is_punct(t, '{') && t->match > 0 ? sc->t[t->match].line : t->line;
        bool cont = n->pdepth > 0 || n->line == line_end;
        if (!cont && t->kind == T_PUNCT && strchr("(,.=+:-*?&|[", t->s[0]))
            cont = true;
        if (!cont && n->kind == T_PUNCT && strchr(".?:+=)]", n->s[0]))
            cont = true;
        if (!cont)
            break;
        last = nx;
    }
    *e = last + 1;
    if (is_punct(&sc->t[last], '{') && sc->t[last].match > 0)
        *e = (size_t)sc->t[last].match + 1;
    *i = *e;
    return true;
}

/* ---- The analysis of one build ---- */

typedef enum rclass {
    RC_PLUGIN,         /* pluginManagement { repositories } */
    RC_BUILDSCRIPT,    /* buildscript { repositories } */
    RC_SETTINGS,       /* dependencyResolutionManagement { repositories } */
    RC_PROJECT,        /* a project's repositories */
} rclass;

typedef enum rkind { RK_CENTRAL, RK_GOOGLE, RK_PORTAL, RK_JCENTER, RK_URL } rkind;

typedef struct decl {
    rclass cls;
    rkind kind;
    bool all;          /* allprojects/subprojects: applies to every project */
    int proj;
    char *url;         /* RK_URL: the URL, or its part before the unknown */
    bool partial;      /* RK_URL: the URL goes on with a part known only when Gradle runs */
    bool ivy;          /* RK_URL: an ivy { } repository */
    const char *file;
    int line;
} decl;

typedef struct project {
    char dir[256];     /* "" for the root, "app", "libs/core" */
    bool deps;         /* resolves dependencies through its repositories */
    bool classpath;    /* buildscript dependencies */
    bool own_repos;    /* declares project repositories (itself or via allprojects) */
    const char *plugin_file;   /* a script requesting a non-core plugin */
} project;

typedef struct analysis {
    const char *trigger_path;
    const char *trigger_base;
    const char *trigger_data;
    size_t trigger_len;
    sl_project *proj;
    sl_derived *out;
    sl_lockerr *err;

    /* gradle.properties: the project's own, then (in a subproject) the build
     * root's, found by looking up for its settings file. */
    const char *props[2];
    size_t props_len[2];

    project *p;
    int np;
    size_t capp;
    decl *d;
    int nd;
    size_t capd;
    bool settings_wins;        /* repositoriesMode PREFER_SETTINGS / FAIL_ON_PROJECT_REPOS */
    bool deps_all;             /* allprojects/subprojects { dependencies } */
    bool is_root;              /* settings or wrapper here: the root of a build */
    char root_rel[64];         /* the build root relative to here ("", "../", ...) */
    bool in_ivy;               /* reading an ivy { } repository */
    bool pins;                 /* --pins */
    const char *why;           /* pins: why a host entry is not pinned */
    struct verif *verif;       /* pins: gradle/verification-metadata.xml, if there is one */
    char **plain;              /* pins: "host:port" of the host entries made here */
    size_t nplain, capplain;
} analysis;

/* A project file: the trigger's own bytes when it is the one asked for. */
static const char *get_file(analysis *an, const char *rel, size_t *len, const char **path,
                            bool *failed)
{
    *failed = false;
    if (strcmp(rel, an->trigger_base) == 0) {
        *len = an->trigger_len;
        *path = an->trigger_path;
        return an->trigger_data;
    }
    an->err->msg[0] = '\0';
    const char *p = NULL;
    const char *data = sl_project_file(an->proj, rel, len, &p, an->err);
    if (!data && an->err->msg[0])
        *failed = true;
    *path = p ? p : rel;
    return data;
}

static bool an_fail(analysis *an, const char *file, int line, const char *fmt, const char *a)
{
    sl_lockerr_set(an->err, file, line, fmt, a);
    return false;
}

/* Core plugins ship with Gradle and are never resolved. */
static bool core_plugin(const char *id, size_t n)
{
    static const char *const core[] = {
        "java", "java-library", "java-platform", "java-gradle-plugin", "java-test-fixtures",
        "application", "groovy", "groovy-base", "scala", "antlr", "war", "ear", "base",
        "distribution", "maven-publish", "ivy-publish", "signing", "eclipse", "idea",
        "jacoco", "jacoco-report-aggregation", "test-report-aggregation", "checkstyle", "pmd",
        "codenarc", "jvm-test-suite", "version-catalog", "project-report", "build-dashboard",
        "help-tasks", "reporting-base", "c", "cpp", "cpp-application", "cpp-library",
        "cpp-unit-test", "swift-application", "swift-library", "xctest", "visual-studio",
        "xcode", "wrapper", "build-init", "lifecycle-base", "java-base", "publishing",
    };
    if (n > 11 && memcmp(id, "org.gradle.", 11) == 0) {
        id += 11;
        n -= 11;
    } else if (memchr(id, '.', n)) {
        return false;
    }
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
        if (strlen(core[i]) == n && memcmp(core[i], id, n) == 0)
            return true;
    /* A short id that is not core (kotlin-dsl is published on the portal). */
    return !memchr(id, '.', n) && !(n == 10 && memcmp(id, "kotlin-dsl", 10) == 0);
}

/* Does this plugins-block statement request a plugin that must be resolved? */
static bool plugin_request(const script *sc, size_t s, size_t e)
{
    const tok *h = &sc->t[s];
    if (h->kind != T_IDENT)
        return false;
    if (is_ident(h, "id")) {
        for (size_t i = s + 1; i < e; i++)
            if (sc->t[i].kind == T_STRING)
                return !core_plugin(sc->t[i].s, sc->t[i].n);
        return true;          /* id(someVal): cannot tell, assume resolved */
    }
    if (is_ident(h, "kotlin") || is_ident(h, "alias"))
        return true;          /* org.jetbrains.kotlin.*, version-catalog plugins */
    /* `java`, `kotlin-dsl`, `java-library` accessors. */
    return !core_plugin(h->s, h->n);
}

static bool local_call(const tok *t)
{
    static const char *const names[] = {
        "project", "files", "fileTree", "file", "gradleApi", "localGroovy", "gradleTestKit",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is_ident(t, names[i]))
            return true;
    return false;
}

/* Does this dependencies-block statement declare something fetched from a
 * repository? Project and file dependencies are local (R5). */
static bool remote_dependency(const script *sc, size_t s, size_t e)
{
    const tok *h = &sc->t[s];
    static const char *const blocks[] = {
        "constraints", "components", "modules", "attributesSchema", "artifactTypes",
        "registerTransform", "def", "val", "var", "if", "for", "else",
    };
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (is_ident(h, blocks[i]))
            return false;
    if (h->kind != T_IDENT && h->kind != T_STRING)
        return false;
    size_t skip_to = 0;       /* inside a local call's parentheses until this token */
    for (size_t i = s + 1; i < e; i++) {
        const tok *t = &sc->t[i];
        if (i < skip_to)
            continue;
        if (is_punct(t, '{') && t->match > 0) {
            i = (size_t)t->match;             /* a closure configuring it */
            continue;
        }
        if (t->kind == T_STRING)
            return true;
        if (t->kind != T_IDENT)
            continue;
        if (local_call(t) && i + 1 < e && is_punct(&sc->t[i + 1], '(') &&
            sc->t[i + 1].match > 0) {
            skip_to = (size_t)sc->t[i + 1].match + 1;
            continue;
        }
        if (local_call(t) || is_ident(t, "platform") || is_ident(t, "enforcedPlatform") ||
            is_ident(t, "testFixtures") || is_ident(t, "because") || is_ident(t, "true") ||
            is_ident(t, "false"))
            continue;
        if (i > s && is_punct(&sc->t[i - 1], '.'))
            continue;                         /* a member of something seen before */
        if (is_ident(t, "projects")) {
            /* projects.core: a type-safe project accessor. */
            while (i + 2 < e && is_punct(&sc->t[i + 1], '.') && sc->t[i + 2].kind == T_IDENT)
                i += 2;
            continue;
        }
        /* libs.x, deps.x, "${…}" variables: coordinates from elsewhere. */
        return true;
    }
    return false;
}

/* ---- Repository URLs ---- */

static bool local_root(const char *s, size_t n)
{
    static const char *const names[] = {
        "rootDir", "projectDir", "buildDir", "rootProject", "project", "layout", "file",
        "files", "settingsDir", "gradle",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
            return true;
    return false;
}

typedef struct strval {
    char buf[4096];
    size_t n;
    bool local;              /* begins with a local directory */
    char why[128];           /* the first template we could not resolve */
} strval;

static void sv_put(strval *v, char c)
{
    if (v->n + 1 < sizeof v->buf) {
        v->buf[v->n++] = c;
        v->buf[v->n] = '\0';
    }
}

static void sv_unknown(strval *v, const char *what, size_t n)
{
    if (!v->why[0])
        snprintf(v->why, sizeof v->why, "%.*s", (int)(n > 100 ? 100 : n), what);
    sv_put(v, UNKNOWN);
}

/* Evaluate a string token: escapes, and $name / ${name} templates from
 * gradle.properties. */
static void eval_string(const analysis *an, const tok *t, bool kts, strval *v)
{
    const char *s = t->s, *e = t->s + t->n;
    while (s < e) {
        char c = *s;
        if (c == '\\' && t->quote != Q_RAW && s + 1 < e) {
            char nx = s[1];
            if (t->quote == Q_SLASHY && nx != '/') {
                sv_put(v, c);
                s++;
                continue;
            }
            s += 2;
            if (nx == 'n')
                sv_put(v, '\n');
            else if (nx == 't')
                sv_put(v, '\t');
            else if (nx == 'u' && e - s >= 4 && sl_hex_value(s, 4) >= 0) {
                /* Groovy and Kotlin strings: \uXXXX, exactly four digits.
                 * Anything else does not compile; here it reads like any
                 * other unknown escape (the 'u' kept). */
                char oc[4];
                size_t on = sl_utf8_encode((uint32_t)sl_hex_value(s, 4), oc);
                for (size_t k = 0; k < on; k++)
                    sv_put(v, oc[k]);
                s += 4;
            } else
                sv_put(v, nx);
            continue;
        }
        if (c != '$' || t->quote == Q_SINGLE || s + 1 >= e) {
            sv_put(v, c);
            s++;
            continue;
        }
        const char *name, *ne;
        if (s[1] == '{') {
            /* Find the end of the template; a bare name is looked up. */
            int level = 1;
            const char *q = s + 2;
            for (; q < e && level > 0; q++) {
                if (*q == '{')
                    level++;
                else if (*q == '}')
                    level--;
            }
            name = s + 2;
            ne = q - 1;
            while (name < ne && (*name == ' ' || *name == '\t'))
                name++;
            while (ne > name && (ne[-1] == ' ' || ne[-1] == '\t'))
                ne--;
            s = q;
        } else if (ident_start(s[1]) && s[1] != '$') {
            name = s + 1;
            ne = name;
            while (ne < e && ident_char(*ne) && *ne != '$')
                ne++;
            /* Groovy: "$a.b" reads property b of a; the whole chain is the name. */
            while (!kts && ne + 1 < e && *ne == '.' && ident_start(ne[1]))
                for (ne++; ne < e && ident_char(*ne) && *ne != '$'; ne++)
                    ;
            s = ne;
        } else {
            sv_put(v, c);
            s++;
            continue;
        }
        size_t nl = (size_t)(ne - name);
        size_t root = 0;
        while (root < nl && ident_char(name[root]) && name[root] != '$')
            root++;
        /* "$rootDir/repo", "${System.getProperty("user.home")}/.m2": a directory. */
        if (v->n == 0 && (local_root(name, root) ||
                          (root == 6 && memcmp(name, "System", 6) == 0 &&
                           memmem(name, nl, "user.home", 9)))) {
            v->local = true;
            return;
        }
        char val[2048];
        bool simple = root == nl && nl > 0 && nl < 200;
        char key[256];
        if (simple) {
            memcpy(key, name, nl);
            key[nl] = '\0';
        }
        bool found = false;
        for (int k = 0; simple && !found && k < 2; k++)
            found = an->props[k] &&
                    sl_javaprops_get(an->props[k], an->props_len[k], key, val, sizeof val);
        if (found) {
            for (const char *q = val; *q; q++)
                sv_put(v, *q);
        } else {
            sv_unknown(v, name, nl);
        }
    }
}

/* The value after `url`, `url =`, `url:`, `setUrl(`, `maven(`: a string,
 * uri("…"), or something we cannot evaluate. Tokens [i, e). */
static void eval_url(const analysis *an, const script *sc, size_t i, size_t e, strval *v)
{
    while (i < e && sc->t[i].kind == T_PUNCT &&
           (is_punct(&sc->t[i], '=') || is_punct(&sc->t[i], ':') || is_punct(&sc->t[i], '(')))
        i++;
    if (i < e && is_ident(&sc->t[i], "new"))
        i++;
    /* uri("…"), URI("…"), java.net.URI("…"), URI.create("…") */
    size_t k = i;
    while (k + 2 < e && sc->t[k].kind == T_IDENT && is_punct(&sc->t[k + 1], '.') &&
           sc->t[k + 2].kind == T_IDENT)
        k += 2;
    if (k + 1 < e && (is_ident(&sc->t[k], "uri") || is_ident(&sc->t[k], "URI") ||
                      is_ident(&sc->t[k], "create")) &&
        is_punct(&sc->t[k + 1], '('))
        i = k + 2;
    if (i >= e) {
        sv_unknown(v, "(no value)", 10);
        return;
    }
    const tok *t = &sc->t[i];
    if (t->kind == T_STRING) {
        eval_string(an, t, sc->kts, v);
        if (!v->local && i + 1 < e && is_punct(&sc->t[i + 1], '+'))
            sv_unknown(v, "(concatenation)", 15);
        return;
    }
    if (t->kind == T_IDENT) {
        if (local_root(t->s, t->n)) {
            v->local = true;
            return;
        }
        /* Name the expression in the message: System.getenv(…), findProperty(…) */
        char what[128];
        size_t n = 0;
        for (size_t k2 = i; k2 < e && n + 8 < sizeof what; k2++) {
            const tok *x = &sc->t[k2];
            if (x->kind == T_IDENT && x->n < sizeof what - n - 8) {
                memcpy(what + n, x->s, x->n);
                n += x->n;
            } else if (is_punct(x, '.')) {
                what[n++] = '.';
            } else {
                if (is_punct(x, '('))
                    n += (size_t)snprintf(what + n, sizeof what - n, "(...)");
                break;
            }
        }
        sv_unknown(v, what, n);
        return;
    }
    sv_unknown(v, "(expression)", 12);
}

static bool add_decl(analysis *an, const script *sc, int fr, rkind kind, const strval *url,
                     int line)
{
    if (url && url->local)
        return true;
    rclass cls = within(sc, fr, "pluginManagement")                 ? RC_PLUGIN
                 : within(sc, fr, "buildscript")                    ? RC_BUILDSCRIPT
                 : within(sc, fr, "dependencyResolutionManagement") ? RC_SETTINGS
                                                                       : RC_PROJECT;
    if (url) {
        const char *unk = memchr(url->buf, UNKNOWN, url->n);
        if (unk) {
            /* The host may still be known: "https://repo.corp/${path}". */
            const char *a = strstr(url->buf, "://");
            const char *ae = a ? a + 3 + strcspn(a + 3, "/?#\x01") : NULL;
            if (!a || a > unk || !ae || ae >= unk || *ae == UNKNOWN)
                return an_fail(an, sc->path, line,
                               "cannot determine the repository URL: '%s' is known only when "
                               "Gradle runs",
                               url->why);
        }
    }
    if (!sl_grow(&an->d, &an->capd, (size_t)an->nd, sizeof an->d[0], MAX_DECLS))
        return an_fail(an, sc->path, line, "%s", "too many repositories");
    decl *d = &an->d[an->nd];
    *d = (decl){.cls = cls, .kind = kind, .proj = sc->proj, .file = sc->path, .line = line,
                .all = within(sc, fr, "allprojects") || within(sc, fr, "subprojects"),
                .ivy = an->in_ivy};
    if (url) {
        const char *unk = memchr(url->buf, UNKNOWN, url->n);
        d->partial = unk != NULL;
        d->url = strndup(url->buf, unk ? (size_t)(unk - url->buf) : url->n);
        if (!d->url)
            return an_fail(an, sc->path, line, "%s", "out of memory");
    }
    an->nd++;
    if (cls == RC_PROJECT) {
        if (d->all)
            for (int k = 0; k < an->np; k++)
                an->p[k].own_repos = true;
        else
            an->p[sc->proj].own_repos = true;
    }
    return true;
}

/* url / setUrl / artifactUrls statements inside a maven { } or ivy { } block. */
static bool repo_block(analysis *an, const script *sc, int f, bool *found)
{
    size_t i = (size_t)sc->f[f].open + 1, s, e;
    while (next_stmt(sc, f, &i, &s, &e)) {
        const tok *h = &sc->t[s];
        if (!(is_ident(h, "url") || is_ident(h, "setUrl") || is_ident(h, "artifactUrls") ||
              is_ident(h, "setArtifactUrls")))
            continue;
        if (is_ident(h, "url") || is_ident(h, "setUrl"))
            *found = true;
        strval v = {.n = 0};
        eval_url(an, sc, s + 1, e, &v);
        if (!add_decl(an, sc, f, RK_URL, &v, h->line))
            return false;
    }
    return true;
}

/* A statement directly in a repositories { } (or forRepository { }) block. */
static bool repo_stmt(analysis *an, const script *sc, int f, size_t s, size_t e)
{
    const tok *h = &sc->t[s];
    if (h->kind != T_IDENT || (s > 0 && is_punct(&sc->t[s - 1], '.')))
        return true;
    if (is_ident(h, "mavenCentral"))
        return add_decl(an, sc, f, RK_CENTRAL, NULL, h->line);
    if (is_ident(h, "google"))
        return add_decl(an, sc, f, RK_GOOGLE, NULL, h->line);
    if (is_ident(h, "gradlePluginPortal"))
        return add_decl(an, sc, f, RK_PORTAL, NULL, h->line);
    if (is_ident(h, "jcenter"))
        return add_decl(an, sc, f, RK_JCENTER, NULL, h->line);
    if (!is_ident(h, "maven") && !is_ident(h, "ivy"))
        return true;                   /* mavenLocal, flatDir, content, ...: nothing to reach */
    an->in_ivy = is_ident(h, "ivy");
    bool found = false;
    size_t i = s + 1;
    if (i < e && is_punct(&sc->t[i], '(') && sc->t[i].match > 0) {
        size_t close = (size_t)sc->t[i].match;
        /* maven("…"), maven(url = "…"), maven(url: '…') */
        size_t at = SIZE_MAX;
        if (i + 1 < close && sc->t[i + 1].kind == T_STRING)
            at = i + 1;
        for (size_t k = i + 1; at == SIZE_MAX && k + 1 < close; k++)
            if (is_ident(&sc->t[k], "url") && sc->t[k].pdepth == sc->t[i + 1].pdepth &&
                (is_punct(&sc->t[k + 1], '=') || is_punct(&sc->t[k + 1], ':')))
                at = k + 1;
        if (at != SIZE_MAX) {
            found = true;
            strval v = {.n = 0};
            eval_url(an, sc, at, close, &v);
            if (!add_decl(an, sc, f, RK_URL, &v, h->line))
                return false;
        }
        i = close + 1;
    }
    if (i < e && is_punct(&sc->t[i], '{') && sc->t[i].child > 0 &&
        !repo_block(an, sc, sc->t[i].child, &found))
        return false;
    if (!found)
        return an_fail(an, sc->path, h->line, "%s", "a maven/ivy repository without a url");
    return true;
}

static bool include_stmt(analysis *an, const script *sc, size_t s, size_t e)
{
    for (size_t i = s + 1; i < e; i++) {
        const tok *t = &sc->t[i];
        if (t->kind != T_STRING)
            continue;
        /* ":libs:core" -> "libs/core" */
        char dir[256];
        size_t k = 0;
        const char *p = t->s, *pe = t->s + t->n;
        if (p < pe && *p == ':')
            p++;
        bool ok = p < pe && t->quote != Q_SLASHY;
        for (; ok && p < pe; p++) {
            char c = *p;
            if (c == ':')
                c = '/';
            if (c == '\\' || c == '$' || c == '\0' || (unsigned char)c < 0x20 || k + 1 >= 200)
                ok = false;
            dir[k++] = c;
        }
        dir[k] = '\0';
        /* No "..", ".", empty components: stay inside the project. */
        for (char *q = dir; ok && *q;) {
            size_t cl = strcspn(q, "/");
            if (cl == 0 || (cl == 1 && q[0] == '.') || (cl == 2 && q[0] == '.' && q[1] == '.'))
                ok = false;
            q += cl;
            if (*q == '/')
                q++;
            if (*q == '\0' && q[-1] == '/')
                ok = false;
        }
        if (!ok)
            continue;          /* not a plain project path: nothing we can read */
        bool dup = false;
        for (int j = 0; j < an->np; j++)
            dup = dup || strcmp(an->p[j].dir, dir) == 0;
        if (dup)
            continue;
        if (!sl_grow(&an->p, &an->capp, (size_t)an->np, sizeof an->p[0], MAX_PROJECTS))
            return an_fail(an, sc->path, t->line, "%s", "too many projects");
        memset(&an->p[an->np], 0, sizeof an->p[0]);
        memcpy(an->p[an->np].dir, dir, k + 1);
        an->np++;
    }
    return true;
}

/* apply from: 'https://…' (Groovy), apply(from = "https://…") (Kotlin): the
 * script is downloaded when the build is configured. */
static bool apply_from(analysis *an, const script *sc, size_t s, size_t e)
{
    for (size_t i = s + 1; i + 1 < e; i++) {
        if (!is_ident(&sc->t[i], "from") ||
            !(is_punct(&sc->t[i + 1], ':') || is_punct(&sc->t[i + 1], '=')))
            continue;
        strval v = {.n = 0};
        eval_url(an, sc, i + 1, e, &v);
        if (v.local)
            return true;
        const char *unk = memchr(v.buf, UNKNOWN, v.n);
        size_t n = unk ? (size_t)(unk - v.buf) : v.n;
        if (strncasecmp(v.buf, "http://", 7) != 0 && strncasecmp(v.buf, "https://", 8) != 0)
            return true;                       /* a script in the project */
        const char *a = v.buf + (v.buf[4] == ':' ? 7 : 8);
        if (unk && (size_t)(unk - a) <= strcspn(a, "/?#"))
            return an_fail(an, sc->path, sc->t[i].line,
                           "cannot determine the host of an applied script: '%s' is known only "
                           "when Gradle runs",
                           v.why);
        char msg[256];
        if ((an->pins ? sl_derived_add_fallback_url(an->out, v.buf, n, sc->path,
                                                    "an applied script is downloaded with no digest", msg,
                                                    sizeof msg)
                      : sl_derived_add_url(an->out, v.buf, n, sc->path, msg, sizeof msg)) < 0)
            return an_fail(an, sc->path, sc->t[i].line, "%s", msg);
        return true;
    }
    return true;
}

static bool walk_script(analysis *an, script *sc)
{
    for (int f = 0; f < (int)sc->nf; f++) {
        size_t i = f == 0 ? 0 : (size_t)sc->f[f].open + 1, s, e;
        bool repos = named(sc, f, "repositories") ||
                     (named(sc, f, "forRepository") && within(sc, f, "repositories"));
        bool publishing = within(sc, f, "publishing");
        bool deps = named(sc, f, "dependencies") && !publishing;
        bool plugins = named(sc, f, "plugins") && !within(sc, f, "pluginManagement");
        bool drm = within(sc, f, "dependencyResolutionManagement");
        bool all = within(sc, f, "allprojects") || within(sc, f, "subprojects");
        if (drm) {
            /* repositoriesMode.set(RepositoriesMode.PREFER_SETTINGS) and the like */
            size_t end = sc->f[f].open >= 0 ? (size_t)sc->t[sc->f[f].open].match : sc->nt;
            for (size_t k = i; k < end; k++)
                if (sc->t[k].frame == f && (is_ident(&sc->t[k], "PREFER_SETTINGS") ||
                                            is_ident(&sc->t[k], "FAIL_ON_PROJECT_REPOS")))
                    an->settings_wins = true;
        }
        if (!(repos && !publishing) && !deps && !plugins && f != 0)
            continue;
        while (next_stmt(sc, f, &i, &s, &e)) {
            if (repos && !publishing) {
                if (!repo_stmt(an, sc, f, s, e))
                    return false;
            } else if (deps) {
                if (!remote_dependency(sc, s, e))
                    continue;
                if (within(sc, f, "buildscript"))
                    an->p[sc->proj].classpath = true;
                else if (all)
                    an->deps_all = true;
                else
                    an->p[sc->proj].deps = true;
            } else if (plugins) {
                if (plugin_request(sc, s, e) && !an->p[sc->proj].plugin_file)
                    an->p[sc->proj].plugin_file = sc->path;
            } else if (f == 0 && is_ident(&sc->t[s], "apply")) {
                if (!apply_from(an, sc, s, e))
                    return false;
            } else if (sc->settings && is_ident(&sc->t[s], "include")) {
                if (!include_stmt(an, sc, s, e))
                    return false;
            }
        }
    }
    return true;
}

static void script_free(script *sc)
{
    free(sc->t);
    free(sc->f);
}

/* Read one script of the build (settings or build file) if it exists. */
static bool read_script(analysis *an, const char *dir, const char *const names[2],
                        bool settings, int proj, bool *exists)
{
    *exists = false;
    for (int k = 0; k < 2; k++) {
        char rel[300];
        snprintf(rel, sizeof rel, "%s%s%s", dir, dir[0] ? "/" : "", names[k]);
        size_t len;
        const char *path;
        bool failed;
        const char *data = get_file(an, rel, &len, &path, &failed);
        if (failed)
            return false;
        if (!data)
            continue;
        *exists = true;
        if (memchr(data, '\0', len))
            return an_fail(an, path, 0, "%s", "not a Gradle script: contains NUL bytes");
        script sc = {.path = path, .data = data, .len = len, .kts = k == 1,
                     .settings = settings, .proj = proj};
        bool ok = lex_script(&sc, an->err) && structure(&sc, an->err) && walk_script(an, &sc);
        script_free(&sc);
        return ok;          /* Gradle uses the first of build.gradle, build.gradle.kts */
    }
    return true;
}

/* gradle.lockfile: "group:artifact:version=conf,…" lines, "empty=…", and
 * comments. Returns false on a line that is none of these. */
static bool read_lockfile(analysis *an, const char *rel, bool *has_entries)
{
    size_t len;
    const char *path;
    bool failed;
    const char *data = get_file(an, rel, &len, &path, &failed);
    *has_entries = false;
    if (failed)
        return false;
    if (!data)
        return true;
    int line = 1;
    for (size_t i = 0; i < len; line++) {
        const char *s = data + i;
        const char *nl = memchr(s, '\n', len - i);
        size_t n = nl ? (size_t)(nl - s) : len - i;
        i += n + (nl ? 1 : 0);
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n == 0 || s[0] == '#')
            continue;
        const char *eq = memchr(s, '=', n);
        if (eq && (size_t)(eq - s) == 5 && memcmp(s, "empty", 5) == 0)
            continue;
        int colons = 0;
        bool ok = eq != NULL && eq > s;
        for (const char *q = s; ok && q < eq; q++) {
            if (*q == ':')
                colons++;
            else if (*q == ' ' || *q == '\t' || (unsigned char)*q < 0x20)
                ok = false;
        }
        if (!ok || colons < 2 || colons > 3 || s[0] == ':' || eq[-1] == ':')
            return an_fail(an, path, line, "%s",
                           "not a Gradle lockfile line (group:artifact:version=configurations)");
        *has_entries = true;
    }
    return true;
}

/* With pins, the host entries made here: a rule on one of their hosts would
 * shadow them (rules narrow). */
static void note_plain(analysis *an, const char *host, size_t hlen, int port)
{
    char key[300];
    snprintf(key, sizeof key, "%.*s:%d", (int)(hlen > 255 ? 255 : hlen), host, port);
    for (size_t i = 0; i < an->nplain; i++)
        if (!strcasecmp(an->plain[i], key))
            return;
    if (sl_grow(&an->plain, &an->capplain, an->nplain, sizeof *an->plain, 4 * MAX_DECLS))
        an->plain[an->nplain++] = sl_xstrdup(key);
}

static bool is_plain(const analysis *an, const char *host, size_t hlen, int port)
{
    char key[300];
    snprintf(key, sizeof key, "%.*s:%d", (int)(hlen > 255 ? 255 : hlen), host, port);
    for (size_t i = 0; i < an->nplain; i++)
        if (!strcasecmp(an->plain[i], key))
            return true;
    return false;
}

/* A host entry (with pins: a fallback saying why, an->why). */
static bool add_host(analysis *an, const char *host, int port, const char *file, int line)
{
    if (an->pins)
        note_plain(an, host, strlen(host), port);
    char msg[256];
    if (!(an->pins ? sl_derived_add_fallback(an->out, host, strlen(host), port, NULL, 0, file, an->why, msg,
                                             sizeof msg)
                   : sl_derived_add(an->out, host, strlen(host), port, file, msg, sizeof msg)))
        return an_fail(an, file, line, "%s", msg);
    return true;
}

/* The host entry of a URL: 1, 0 (no network host), -1 (msg). With pins a
 * fallback for the host alone: a repository's URL is a prefix, not a path
 * a rule could name. */
static int add_url_entry(analysis *an, const char *url, size_t n, const char *file, char *msg, size_t cap)
{
    if (!an->pins)
        return sl_derived_add_url(an->out, url, n, file, msg, cap);
    sl_derived *probe = sl_derived_new();     /* the same checks, the same messages */
    int r = sl_derived_add_url(probe, url, n, file, msg, cap);
    sl_derived_free(probe);
    sl_url u;
    if (r <= 0 || !sl_url_parse(url, n, &u))
        return r;
    note_plain(an, u.host, u.host_len, u.port);
    return sl_derived_add_fallback(an->out, u.host, u.host_len, u.port, NULL, 0, file, an->why, msg, cap) ? 1 : -1;
}

static bool add_portal(analysis *an, const char *file, int line)
{
    return add_host(an, "plugins.gradle.org", 443, file, line) &&
           add_host(an, "plugins-artifacts.gradle.org", 443, file, line) &&
           add_host(an, "repo.maven.apache.org", 443, file, line);
}

static bool emit(analysis *an, const decl *d)
{
    switch (d->kind) {
    case RK_CENTRAL:
        return add_host(an, "repo.maven.apache.org", 443, d->file, d->line);
    case RK_GOOGLE:
        return add_host(an, "dl.google.com", 443, d->file, d->line);
    case RK_PORTAL:
        return add_portal(an, d->file, d->line);
    case RK_JCENTER:
        return add_host(an, "jcenter.bintray.com", 443, d->file, d->line);
    case RK_URL:
        break;
    }
    char msg[256];
    int r = add_url_entry(an, d->url, strlen(d->url), d->file, msg, sizeof msg);
    if (r < 0)
        return an_fail(an, d->file, d->line, "%s", msg);
    sl_url u;
    if (r > 0 && sl_url_parse(d->url, strlen(d->url), &u) && u.host_len == 18 &&
        strncasecmp(u.host, "plugins.gradle.org", 18) == 0)
        return add_portal(an, d->file, d->line);   /* maven { url ".../m2/" } is the portal */
    return true;
}

/* ---- --pins: gradle/verification-metadata.xml ---- */

#define VMAX_DIGESTS 8             /* per artifact: sha256, sha512 and their also-trust values */
#define VMAX_ENTRIES 4000000       /* components and artifacts */
#define VPATH_MAX 4096

typedef struct vcomp {
    char *group, *name, *version;
} vcomp;

typedef struct vart {
    size_t comp;
    char *file;
    char *sri[VMAX_DIGESTS];
    size_t nd;
    bool weak;                     /* sha1 or md5 listed */
} vart;

typedef struct verif {
    sl_xml xml;
    const char *path;
    vcomp *c;
    size_t nc, capc;
    vart *a;
    size_t na, capa;
    bool verify_metadata;          /* Gradle's default: true */
    bool verify_signatures;        /* default: false */
    bool in_comp, in_art;
    const char *alg;               /* inside <sha256> and the like */
    int flag;                      /* 1: in <verify-metadata>, 2: in <verify-signatures> */
    char text[8];
    size_t textn;
} verif;

static void verif_free(verif *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->nc; i++) {
        free(v->c[i].group);
        free(v->c[i].name);
        free(v->c[i].version);
    }
    for (size_t i = 0; i < v->na; i++) {
        free(v->a[i].file);
        for (size_t k = 0; k < v->a[i].nd; k++)
            free(v->a[i].sri[k]);
    }
    free(v->c);
    free(v->a);
    free(v);
}

static const char *xml_att(const char **atts, const char *name)
{
    for (; atts && atts[0]; atts += 2)
        if (!strcmp(atts[0], name))
            return atts[1];
    return NULL;
}

/* A coordinate (or file name) that can stand literally in a rule's path:
 * printable ASCII without '/', '\', '*', '%', '?', '#', not "." or "..";
 * a group also has no empty part between its dots. */
static bool coord_ok(const char *s, bool group)
{
    size_t n = strlen(s);
    if (n == 0 || n > 256 || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || strchr("/\\*%?#", c))
            return false;
        if (group && c == '.' && (i == 0 || i + 1 == n || s[i + 1] == '.'))
            return false;
    }
    return true;
}

static void v_digest(verif *v, const char *value)
{
    vart *a = &v->a[v->na - 1];
    char sri[SL_SRI_MAX];
    if (!value || !sl_sri_from_hex(v->alg, strlen(v->alg), value, strlen(value), sri)) {
        sl_xml_fail(&v->xml, "%s: value is not a digest in hex", v->alg);
        return;
    }
    for (size_t k = 0; k < a->nd; k++)
        if (!strcmp(a->sri[k], sri))
            return;
    if (a->nd < VMAX_DIGESTS)
        a->sri[a->nd++] = sl_xstrdup(sri);
}

static void v_start(void *ud, const char *name, const char **atts)
{
    verif *v = ud;
    static const char *const algs[] = { "sha256", "sha384", "sha512" };
    if (!strcmp(name, "component")) {
        const char *g = xml_att(atts, "group"), *n = xml_att(atts, "name"), *ver = xml_att(atts, "version");
        if (!g || !n || !ver) {
            sl_xml_fail(&v->xml, "%s: a component needs group, name and version", "component");
            return;
        }
        if (!coord_ok(g, true) || !coord_ok(n, false) || !coord_ok(ver, false)) {
            char shown[128];
            sl_display_untrusted(n, strlen(n), shown, sizeof shown, SL_DISPLAY_QMARK);
            sl_xml_fail(&v->xml, "component '%s' cannot be part of a URL path", shown);
            return;
        }
        if (!sl_grow(&v->c, &v->capc, v->nc, sizeof *v->c, VMAX_ENTRIES)) {
            sl_xml_fail(&v->xml, "%s", "too many components");
            return;
        }
        v->c[v->nc++] = (vcomp){ sl_xstrdup(g), sl_xstrdup(n), sl_xstrdup(ver) };
        v->in_comp = true;
    } else if (!strcmp(name, "artifact") && v->in_comp) {
        const char *f = xml_att(atts, "name");
        if (!f || !coord_ok(f, false)) {
            char shown[128];
            sl_display_untrusted(f ? f : "", f ? strlen(f) : 0, shown, sizeof shown, SL_DISPLAY_QMARK);
            sl_xml_fail(&v->xml, "artifact '%s' cannot be part of a URL path", shown);
            return;
        }
        if (!sl_grow(&v->a, &v->capa, v->na, sizeof *v->a, VMAX_ENTRIES)) {
            sl_xml_fail(&v->xml, "%s", "too many artifacts");
            return;
        }
        v->a[v->na++] = (vart){ .comp = v->nc - 1, .file = sl_xstrdup(f) };
        v->in_art = true;
    } else if (v->in_art && !strcmp(name, "also-trust") && v->alg) {
        v_digest(v, xml_att(atts, "value"));
    } else if (v->in_art && (!strcmp(name, "sha1") || !strcmp(name, "md5"))) {
        v->a[v->na - 1].weak = true;
    } else if (!strcmp(name, "verify-metadata") || !strcmp(name, "verify-signatures")) {
        v->flag = name[7] == 'm' ? 1 : 2;
        v->textn = 0;
    } else if (v->in_art) {
        for (int k = 0; k < 3; k++)
            if (!strcmp(name, algs[k])) {
                v->alg = algs[k];
                v_digest(v, xml_att(atts, "value"));
            }
    }
}

static void v_end(void *ud, const char *name)
{
    verif *v = ud;
    if (!strcmp(name, "component")) {
        v->in_comp = false;
    } else if (!strcmp(name, "artifact")) {
        v->in_art = false;
    } else if (!strncmp(name, "sha", 3)) {
        v->alg = NULL;
    } else if (v->flag) {
        size_t s = 0, e = v->textn;
        while (s < e && strchr(" \t\r\n", v->text[s]))
            s++;
        while (e > s && strchr(" \t\r\n", v->text[e - 1]))
            e--;
        bool on = e - s == 4 && !memcmp(v->text + s, "true", 4);
        if (!on && !(e - s == 5 && !memcmp(v->text + s, "false", 5)))
            sl_xml_fail(&v->xml, "%s: expected true or false", name);
        if (v->flag == 1)
            v->verify_metadata = on;
        else
            v->verify_signatures = on;
        v->flag = 0;
    }
}

static void v_text(void *ud, const char *t, int len)
{
    verif *v = ud;
    if (!v->flag)
        return;
    for (int i = 0; i < len; i++) {
        if (v->textn + 1 >= sizeof v->text) {
            v->textn = sizeof v->text - 1;      /* too long for "false": refused at the end */
            v->text[0] = 'x';
            return;
        }
        v->text[v->textn++] = t[i];
    }
}

/* The build root's gradle/verification-metadata.xml into an->verif (NULL
 * if there is none). */
static bool load_verif(analysis *an)
{
    char rel[128];
    snprintf(rel, sizeof rel, "%sgradle/verification-metadata.xml", an->root_rel);
    size_t len;
    const char *path;
    bool failed;
    const char *data = get_file(an, rel, &len, &path, &failed);
    if (failed)
        return false;
    if (!data)
        return true;
    verif *v = calloc(1, sizeof *v);
    if (!v)
        return an_fail(an, path, 0, "%s", "out of memory");
    v->path = path;
    v->verify_metadata = true;
    static const sl_xml_handlers h = { .start = v_start, .end = v_end, .text = v_text };
    if (!sl_xml_parse(&v->xml, path, data, len, &h, v, an->err)) {
        verif_free(v);
        return false;
    }
    an->verif = v;
    return true;
}

/* A rule (digests, or none with a note) or, with `why`, a fallback, for
 * the verification file and the script that declared the repository. */
static bool pin2(analysis *an, const char *host, size_t hlen, int port, const char *path,
                 const char *const *digests, size_t nd, const char *note, const char *why, const char *file,
                 int line)
{
    char msg[400];
    const char *files[2] = { an->verif->path, file };
    for (int k = 0; k < 2; k++) {
        bool ok = why ? sl_derived_add_fallback(an->out, host, hlen, port, path, strlen(path), files[k], why, msg,
                                                sizeof msg)
                      : sl_derived_add_rule(an->out, host, hlen, port, path, strlen(path), digests, nd, files[k],
                                            note, msg, sizeof msg);
        if (!ok)
            return an_fail(an, file, line, "%s", msg);
    }
    return true;
}

/* Every listed file on one repository: `base` is its path with a trailing
 * '/' (Maven layout, group dots as slashes), or NULL for the portal's
 * redirect target (/<group>/<name>/<version>/<hash>/<file>). */
static bool pin_repo(analysis *an, const char *host, size_t hlen, int port, const char *base, const char *file,
                     int line)
{
    const verif *v = an->verif;
    char dir[VPATH_MAX], path[VPATH_MAX + 1024];
    for (size_t ci = 0, ai = 0; ci < v->nc; ci++) {
        const vcomp *c = &v->c[ci];
        if (base) {
            size_t k = (size_t)snprintf(dir, sizeof dir, "%s", base);
            for (const char *g = c->group; *g && k + 1 < sizeof dir; g++)
                dir[k++] = *g == '.' ? '/' : *g;
            dir[k < sizeof dir ? k : sizeof dir - 1] = '\0';
            if ((size_t)snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s/%s/", c->name, c->version) >=
                sizeof dir - strlen(dir))
                return an_fail(an, an->verif->path, 0, "%s", "an artifact's URL is too long");
        } else {
            snprintf(dir, sizeof dir, "/%s/%s/%s/*/", c->group, c->name, c->version);
        }
        /* What Gradle reads that the file does not list. */
        if (!v->verify_metadata) {
            static const char *const ext[] = { "pom", "module" };
            for (int k = 0; k < 2; k++) {
                snprintf(path, sizeof path, "%s%s-%s.%s", dir, c->name, c->version, ext[k]);
                if (!pin2(an, host, hlen, port, path, NULL, 0, "metadata: verify-metadata is false", NULL, file,
                          line))
                    return false;
            }
        }
        size_t vl = strlen(c->version);
        if (base && vl > 9 && !strcmp(c->version + vl - 9, "-SNAPSHOT")) {
            snprintf(path, sizeof path, "%smaven-metadata.xml", dir);
            if (!pin2(an, host, hlen, port, path, NULL, 0, "snapshot metadata", NULL, file, line))
                return false;
        }
        for (; ai < v->na && v->a[ai].comp == ci; ai++) {
            const vart *a = &v->a[ai];
            snprintf(path, sizeof path, "%s%s", dir, a->file);
            const char *why = a->nd ? NULL : a->weak ? "only SHA-1/MD5 in verification-metadata.xml"
                                                     : "no checksum in verification-metadata.xml";
            if (!pin2(an, host, hlen, port, path, (const char *const *)a->sri, a->nd, NULL, why, file, line))
                return false;
            if (v->verify_signatures) {
                snprintf(path, sizeof path, "%s%s.asc", dir, a->file);
                if (!pin2(an, host, hlen, port, path, NULL, 0, "signature: verify-signatures is true", NULL, file,
                          line))
                    return false;
            }
        }
    }
    return true;
}

/* The plugin portal answers with a redirect to plugins-artifacts.gradle.org
 * (plugins) or to Maven Central (everything else). */
static bool pin_portal(analysis *an, const char *file, int line)
{
    return pin_repo(an, "plugins.gradle.org", 18, 443, "/m2/", file, line) &&
           pin_repo(an, "plugins-artifacts.gradle.org", 28, 443, NULL, file, line) &&
           pin_repo(an, "repo.maven.apache.org", 21, 443, "/maven2/", file, line);
}

static bool emit_pins(analysis *an, const decl *d)
{
    switch (d->kind) {
    case RK_CENTRAL:
        return pin_repo(an, "repo.maven.apache.org", 21, 443, "/maven2/", d->file, d->line);
    case RK_GOOGLE:
        return pin_repo(an, "dl.google.com", 13, 443, "/dl/android/maven2/", d->file, d->line);
    case RK_PORTAL:
        return pin_portal(an, d->file, d->line);
    case RK_JCENTER:
        return pin_repo(an, "jcenter.bintray.com", 19, 443, "/", d->file, d->line);
    case RK_URL:
        break;
    }
    if (d->ivy || d->partial) {
        an->why = d->ivy ? "an ivy repository: its layout is its own" : "its URL is known only when Gradle runs";
        bool ok = emit(an, d);
        an->why = NULL;
        return ok;
    }
    char msg[256];
    sl_derived *probe = sl_derived_new();     /* the URL checked as emit() checks it */
    int r = sl_derived_add_url(probe, d->url, strlen(d->url), d->file, msg, sizeof msg);
    sl_derived_free(probe);
    if (r < 0)
        return an_fail(an, d->file, d->line, "%s", msg);
    sl_url u;
    if (r == 0 || !sl_url_parse(d->url, strlen(d->url), &u))
        return true;
    if (u.host_len == 18 && !strncasecmp(u.host, "plugins.gradle.org", 18))
        return pin_portal(an, d->file, d->line);
    char base[VPATH_MAX];
    const char *p = u.path ? u.path : "/";
    size_t n = u.path ? strcspn(u.path, "?#") : 1;
    if (n > u.path_len && u.path)
        n = u.path_len;
    if (n == 0)
        p = "/", n = 1;
    if (n + 2 > sizeof base)
        return an_fail(an, d->file, d->line, "%s", "repository URL too long");
    memcpy(base, p, n);
    if (base[n - 1] != '/')
        base[n++] = '/';
    base[n] = '\0';
    if (sl_path_ambiguous(base, n) || memchr(base, '*', n)) {
        an->why = "its URL's path cannot be part of a rule";
        bool ok = emit(an, d);
        an->why = NULL;
        return ok;
    }
    return pin_repo(an, u.host, u.host_len, u.port, base, d->file, d->line);
}

/* The wrapper's distribution, pinned by distributionSha256Sum (the SHA-256
 * of the zip, which the wrapper checks too), on services.gradle.org also at
 * the same path on downloads.gradle.org, where it redirects. */
static bool wrapper_pins(analysis *an, const char *data, size_t len, const char *url, const char *path, int line)
{
    char msg[256], sum[160], sri[SL_SRI_MAX];
    int sline = sl_javaprops_get(data, len, "distributionSha256Sum", sum, sizeof sum);
    if (sline && !sl_sri_from_hex("sha256", 6, sum, strlen(sum), sri))
        return an_fail(an, path, sline, "%s", "distributionSha256Sum is not a SHA-256 in hex");
    const char *d[1] = { sri };
    const char *why = "no distributionSha256Sum in gradle-wrapper.properties";
    sl_url w;
    if (sline && sl_url_parse(url, strlen(url), &w) && w.port > 0 && is_plain(an, w.host, w.host_len, w.port)) {
        sline = 0;        /* a rule there would leave the build's repositories on that host nothing */
        why = "its host also has repositories that are not pinned, which a rule would shadow";
    }
    int r = sline ? sl_derived_add_rule_url(an->out, url, strlen(url), d, 1, path, "Gradle distribution", msg,
                                            sizeof msg)
                  : sl_derived_add_fallback_url(an->out, url, strlen(url), path, why, msg, sizeof msg);
    if (r < 0)
        return an_fail(an, path, line, "%s", msg);
    sl_url u;
    if (r == 0 || !sl_url_parse(url, strlen(url), &u) || u.host_len != 19 ||
        strncasecmp(u.host, "services.gradle.org", 19) != 0)
        return true;
    size_t n = u.path ? strcspn(u.path, "?#") : 0;
    if (u.path && n > u.path_len)
        n = u.path_len;
    const char *p = n ? u.path : "/";
    n = n ? n : 1;
    bool ok = sline ? sl_derived_add_rule(an->out, "downloads.gradle.org", 20, 443, p, n, d, 1, path,
                                          "Gradle distribution", msg, sizeof msg)
                    : sl_derived_add_fallback(an->out, "downloads.gradle.org", 20, 443, p, n, path, why, msg,
                                              sizeof msg);
    return ok || an_fail(an, path, line, "%s", msg);
}

/* gradle/wrapper/gradle-wrapper.properties: ./gradlew downloads Gradle. */
static bool wrapper(analysis *an)
{
    size_t len;
    const char *path;
    bool failed;
    const char *data =
        get_file(an, "gradle/wrapper/gradle-wrapper.properties", &len, &path, &failed);
    if (failed)
        return false;
    if (!data)
        return true;
    if (memchr(data, '\0', len))
        return an_fail(an, path, 0, "%s", "not a properties file");
    char url[2048];
    int line = sl_javaprops_get(data, len, "distributionUrl", url, sizeof url);
    if (!line)
        return an_fail(an, path, 0, "%s", "no distributionUrl");
    char msg[256];
    if (an->pins)
        return wrapper_pins(an, data, len, url, path, line);
    int r = sl_derived_add_url(an->out, url, strlen(url), path, msg, sizeof msg);
    if (r < 0)
        return an_fail(an, path, line, "%s", msg);
    sl_url u;
    if (r > 0 && sl_url_parse(url, strlen(url), &u) && u.host_len == 19 &&
        strncasecmp(u.host, "services.gradle.org", 19) == 0)
        return add_host(an, "downloads.gradle.org", 443, path, line);   /* 301 since 2026-02 */
    return true;
}

/* In a subproject analysed on its own, the build root's gradle.properties
 * also applies: look for the settings file in the directories above. */
static bool root_props(analysis *an)
{
    char rel[64] = "";
    for (int up = 1; up <= 8; up++) {
        strcat(rel, "../");
        static const char *const names[] = {"settings.gradle", "settings.gradle.kts"};
        for (int k = 0; k < 2; k++) {
            char f[96];
            snprintf(f, sizeof f, "%s%s", rel, names[k]);
            size_t len;
            const char *path;
            bool failed;
            if (get_file(an, f, &len, &path, &failed)) {
                snprintf(an->root_rel, sizeof an->root_rel, "%s", rel);
                snprintf(f, sizeof f, "%sgradle.properties", rel);
                an->props[1] = get_file(an, f, &an->props_len[1], &path, &failed);
                return !failed;
            }
            if (failed)
                return false;
        }
    }
    return true;
}

static bool analyse(analysis *an)
{
    static const char *const settings_names[2] = {"settings.gradle", "settings.gradle.kts"};
    static const char *const build_names[2] = {"build.gradle", "build.gradle.kts"};
    size_t plen;
    const char *ppath;
    bool failed;
    an->props[0] = get_file(an, "gradle.properties", &plen, &ppath, &failed);
    an->props_len[0] = plen;
    if (failed)
        return false;

    if (!sl_grow(&an->p, &an->capp, 0, sizeof an->p[0], MAX_PROJECTS))
        return an_fail(an, an->trigger_path, 0, "%s", "out of memory");
    memset(&an->p[0], 0, sizeof an->p[0]);
    an->np = 1;
    bool has_settings, exists;
    if (!read_script(an, "", settings_names, true, 0, &has_settings))
        return false;
    size_t wlen;
    const char *wpath;
    bool has_wrapper =
        get_file(an, "gradle/wrapper/gradle-wrapper.properties", &wlen, &wpath, &failed) != NULL;
    if (failed)
        return false;
    an->is_root = has_settings || has_wrapper;
    if (!an->is_root && !root_props(an))
        return false;
    for (int k = 0; k < 2; k++)
        if (an->props[k] && memchr(an->props[k], '\0', an->props_len[k]))
            an->props[k] = NULL;
    for (int k = 0; k < an->np; k++) {
        if (!read_script(an, an->p[k].dir, build_names, false, k, &exists))
            return false;
        char rel[300];
        bool entries;
        snprintf(rel, sizeof rel, "%s%sgradle.lockfile", an->p[k].dir, k ? "/" : "");
        if (!read_lockfile(an, rel, &entries))
            return false;
        an->p[k].deps = an->p[k].deps || entries;
        snprintf(rel, sizeof rel, "%s%sbuildscript-gradle.lockfile", an->p[k].dir,
                 k ? "/" : "");
        if (!read_lockfile(an, rel, &entries))
            return false;
        an->p[k].classpath = an->p[k].classpath || entries;
    }
    if (an->deps_all)
        for (int k = 0; k < an->np; k++)
            an->p[k].deps = true;

    if (an->pins && !load_verif(an))
        return false;
    /* Without the verification file there is nothing to pin: host entries. */
    an->why = an->pins && !an->verif ? "no gradle/verification-metadata.xml: no digests to pin" : NULL;

    /* Which classes of repositories are used. */
    bool any_deps = false, settings_used = false;
    const char *plugin_file = NULL;
    for (int k = 0; k < an->np; k++) {
        any_deps = any_deps || an->p[k].deps;
        if (an->p[k].deps && (an->settings_wins || !an->p[k].own_repos))
            settings_used = true;
        if (!plugin_file)
            plugin_file = an->p[k].plugin_file;
    }
    bool plugin_repos = false;
    for (int i = 0; i < an->nd; i++)
        plugin_repos = plugin_repos || an->d[i].cls == RC_PLUGIN;
    for (int i = 0; i < an->nd; i++) {
        const decl *d = &an->d[i];
        bool used = false;
        switch (d->cls) {
        case RC_PLUGIN:
            used = plugin_file != NULL;
            break;
        case RC_BUILDSCRIPT:
            used = an->p[d->proj].classpath;
            break;
        case RC_SETTINGS:
            used = settings_used;
            break;
        case RC_PROJECT:
            used = !an->settings_wins && (d->all ? any_deps : an->p[d->proj].deps);
            break;
        }
        if (used && !(an->verif ? emit_pins(an, d) : emit(an, d)))
            return false;
    }
    /* Plugins resolve from gradlePluginPortal() unless pluginManagement says
     * otherwise; the default belongs to the root of a build. */
    if (plugin_file && !plugin_repos && an->is_root &&
        !(an->verif ? pin_portal(an, plugin_file, 0) : add_portal(an, plugin_file, 0)))
        return false;
    return wrapper(an);
}

static bool gradle_read(const char *path, const char *data, size_t len, sl_project *proj,
                        sl_derived *out, sl_lockerr *err)
{
    analysis *an = calloc(1, sizeof *an);
    if (!an) {
        sl_lockerr_set(err, path, 0, "out of memory");
        return false;
    }
    const char *base = strrchr(path, '/');
    an->trigger_path = path;
    an->trigger_base = base ? base + 1 : path;
    an->trigger_data = data;
    an->trigger_len = len;
    an->proj = proj;
    an->out = out;
    an->err = err;
    an->pins = sl_derived_pins(out);
    bool ok = analyse(an);
    verif_free(an->verif);
    for (size_t i = 0; i < an->nplain; i++)
        free(an->plain[i]);
    free(an->plain);
    for (int i = 0; i < an->nd; i++)
        free(an->d[i].url);
    free(an->d);
    free(an->p);
    free(an);
    return ok;
}

static bool gradle_recognises(const char *base)
{
    return strcmp(base, "gradle.lockfile") == 0 || strcmp(base, "settings.gradle") == 0 ||
           strcmp(base, "settings.gradle.kts") == 0 || strcmp(base, "build.gradle") == 0 ||
           strcmp(base, "build.gradle.kts") == 0;
}

const sl_lockreader sl_reader_gradle = {
    .name = "gradle",
    .recognises = gradle_recognises,
    .read = gradle_read,
    .per_project = true,           /* any of its files stands for the build */
};
