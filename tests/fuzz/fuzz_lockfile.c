/* Every lockfile reader (allowlist/lockfiles/lock_*.c) through its sl_lockreader, with
 * the project's config files fuzzed too.
 *
 * Input (fuzz_util.h): NAME "\0" DATA ( "\0\0" NAME "\0" DATA )*. The first
 * file is the lockfile: its NAME is a base name some reader recognises
 * ("package-lock.json", "go.sum", "build.gradle.kts", "requirements-dev.txt",
 * ...), and every reader that recognises it reads it, as the driver does.
 * The other files are project files by their relative path (".npmrc",
 * ".cargo/config.toml", "gradle/wrapper/gradle-wrapper.properties",
 * "app/build.gradle", "requirements/base.txt", ...), given to the project
 * with sl_project_put. make_corpus.sh turns each fixture directory into one
 * such input per lockfile in it.
 *
 * The harness never reads the disk: the link wraps sl_project_file
 * (-Wl,--wrap=sl_project_file) so that a file the input does not provide
 * is absent, whatever its path ("/etc/passwd", "../x", "/dev/zero").
 *
 * Every input is read twice, without and with --pins (sl_derived_set_pins),
 * so that each reader's pins path (GET rules with digests, unpinned
 * metadata rules, fallbacks that say why) is fuzzed on the same bytes.
 *
 * Properties checked besides memory safety, leaks and UB:
 *   - a reader that fails says why (err->msg non-empty);
 *   - every derived entry is a valid allowlist entry (or request rule)
 *     that the daemon's parser reads back to the same text, entries come
 *     sorted and unique; without --pins there are no rules; a rule is a
 *     GET rule whose digests each pass sl_digest_check, and its line fits
 *     an allowlist line (SL_ENTRY_LINE_MAX; derived-long-line);
 *   - the R1 text output has one line per entry, starting with the entry,
 *     with no control byte in its comment, and the daemon reads every line
 *     of it as an allowlist line;
 *   - the --format json output parses with jansson and lists every entry,
 *     a rule with its method, path and digests;
 *   - a reader's includes hook (pip's -r/-c) names project files only. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "derive.h"
#include "fuzz_util.h"
#include "lockfile.h"
#include "rules.h"

#define PROJECT_DIR "fuzz"

/* ---- the project's files: only those the input gives exist ---- */

static const char *g_put[FUZZ_MAX_FILES];
static size_t g_nput;
static char **g_arena;             /* paths handed out for absent files */
static size_t g_narena, g_caparena;

const char *__real_sl_project_file(sl_project *p, const char *rel, size_t *len,
                                   const char **path_out, sl_lockerr *err);
const char *__wrap_sl_project_file(sl_project *p, const char *rel, size_t *len,
                                   const char **path_out, sl_lockerr *err);

const char *__wrap_sl_project_file(sl_project *p, const char *rel, size_t *len,
                                   const char **path_out, sl_lockerr *err)
{
    for (size_t i = 0; i < g_nput; i++)
        if (!strcmp(g_put[i], rel))
            return __real_sl_project_file(p, rel, len, path_out, err);
    /* Absent, as sl_project_file reports a file that does not exist. */
    if (len)
        *len = 0;
    if (err) {
        err->file[0] = err->msg[0] = '\0';
        err->line = 0;
    }
    if (path_out) {
        size_t n = strlen(rel);
        char *s = malloc(sizeof PROJECT_DIR + 1 + n);
        if (!s)
            abort();
        memcpy(s, PROJECT_DIR "/", sizeof PROJECT_DIR);
        memcpy(s + sizeof PROJECT_DIR, rel, n + 1);
        if (rel[0] == '/')
            memmove(s, s + sizeof PROJECT_DIR, n + 1);
        if (g_narena == g_caparena) {
            g_caparena = g_caparena ? 2 * g_caparena : 16;
            g_arena = realloc(g_arena, g_caparena * sizeof *g_arena);
            if (!g_arena)
                abort();
        }
        g_arena[g_narena++] = s;
        *path_out = s;
    }
    return NULL;
}

static FILE *g_devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_devnull = fopen("/dev/null", "w");
    if (!g_devnull)
        abort();
    return 0;
}

/* An entry's whole text (sl_entry_format cuts at its cap): a rule's line
 * may be longer than an allowlist line can be, which is a finding. */
static size_t entry_len(const sl_entry *e)
{
    char host[300];
    if (!sl_entry_is_rule(e))
        return strlen(sl_entry_format_host(e, host, sizeof host));
    size_t n = strlen(e->methods) + 1 + strlen(sl_entry_format_host(e, host, sizeof host)) + strlen(e->path);
    for (size_t i = 0; i < e->ndigests; i++)
        n += 1 + strlen(e->digests[i]);
    return n;
}

#define TEXT_CAP (SL_ENTRY_LINE_MAX + 1)

static void check_rule(const sl_entry *e, const char *text, bool pins)
{
    char shown[700];
    FUZZ_CHECK(pins, "a rule without --pins: '%s'", fuzz_show(text, strlen(text), shown, sizeof shown));
    FUZZ_CHECK(!strcmp(e->methods, "GET"), "a derived rule for methods '%s'", e->methods);
    FUZZ_CHECK(e->path && e->path[0] == '/', "a derived rule whose path does not start with '/'");
    FUZZ_CHECK(e->kind == SL_ENTRY_EXACT, "a derived rule for a wildcard host: '%s'",
               fuzz_show(text, strlen(text), shown, sizeof shown));
    for (size_t k = 0; k < e->ndigests; k++) {
        const char *bad = sl_digest_check(e->digests[k], strlen(e->digests[k]));
        FUZZ_CHECK(!bad, "digest %zu of '%s' is not one a rule may carry: %s", k,
                   fuzz_show(text, strlen(text), shown, sizeof shown), bad);
        for (size_t j = 0; j < k; j++)
            FUZZ_CHECK(strcmp(e->digests[j], e->digests[k]), "a digest twice in '%s'",
                       fuzz_show(text, strlen(text), shown, sizeof shown));
    }
}

static void check_output(sl_derived *d, bool pins)
{
    /* The count as a caller sees it first (config.c's add_derived asks
     * before any entry): looking at the entries must not change it. */
    size_t n = sl_derived_count(d);
    if (getenv("FUZZ_LOCKFILE_SHOW")) {
        fprintf(stderr, "--- %s (%zu entries counted first):\n", pins ? "--pins" : "without --pins", n);
        sl_derived_print(d, stderr);
    }
    sl_derived_entry(d, 0, NULL, NULL);
    FUZZ_CHECK_ID("derived-count-stale", sl_derived_count(d) == n,
                  "sl_derived_count said %zu before the first entry was looked at, %zu after", n,
                  sl_derived_count(d));
    n = sl_derived_count(d);
    char err[512], shown[700];
    char *prev = malloc(TEXT_CAP), *text = malloc(TEXT_CAP), *again = malloc(TEXT_CAP);
    if (!prev || !text || !again)
        abort();
    prev[0] = '\0';

    /* Entries: valid allowlist entries, sorted, unique. */
    sl_allowlist *al = sl_allowlist_new();
    for (size_t i = 0; i < n; i++) {
        const char *const *files;
        size_t nfiles;
        const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
        FUZZ_CHECK(e != NULL, "entry %zu of %zu missing", i, n);
        FUZZ_CHECK(nfiles > 0, "entry %zu has no provenance", i);
        FUZZ_CHECK(e->port >= 1 && e->port <= 65535, "entry port %d", e->port);
        sl_entry_format(e, text, TEXT_CAP);
        size_t len = entry_len(e);
        if (sl_entry_is_rule(e))
            check_rule(e, text, pins);
        FUZZ_CHECK(i == 0 || strcmp(prev, text) < 0, "entries not sorted/unique: '%s' then '%s'",
                   fuzz_show(prev, strlen(prev), shown, sizeof shown), text);
        memcpy(prev, text, strlen(text) + 1);
        if (len > SL_ENTRY_LINE_MAX) {
            /* Its line cannot be read back (the text output's check names it). */
            FUZZ_CHECK_ID("derived-long-line", false, "entry %zu is %zu bytes, over an allowlist line's %d: '%.200s...'",
                          i, len, SL_ENTRY_LINE_MAX, text);
            continue;
        }
        if (sl_entry_is_rule(e) && e->ndigests + 2 > SL_ENTRY_FIELDS_MAX) {
            FUZZ_CHECK_ID("derived-long-line", false, "entry %zu has %zu digests, over an allowlist line's %d fields",
                          i, e->ndigests, SL_ENTRY_FIELDS_MAX);
            continue;
        }
        bool ok = sl_allowlist_add_line(al, text, strlen(text), "derived", (int)i + 1, err, sizeof err);
        FUZZ_CHECK(ok, "derived entry '%s' is not a valid allowlist line: %s",
                   fuzz_show(text, strlen(text), shown, sizeof shown), err);
        const sl_entry *back = sl_allowlist_entry(al, sl_allowlist_count(al) - 1);
        sl_entry_format(back, again, TEXT_CAP);
        FUZZ_CHECK(!strcmp(again, text) && sl_entry_is_rule(back) == sl_entry_is_rule(e),
                   "derived entry '%s' reads back as '%s'", fuzz_show(text, strlen(text), shown, sizeof shown),
                   again);
    }
    sl_allowlist_free(al);

    /* R1 text. */
    char *buf = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&buf, &blen);
    if (!m)
        abort();
    sl_derived_print(d, m);
    fclose(m);
    size_t lines = 0;
    for (char *p = buf, *nl; p < buf + blen; p = nl + 1, lines++) {
        nl = memchr(p, '\n', (size_t)(buf + blen - p));
        FUZZ_CHECK(nl != NULL, "text output does not end in a newline");
        FUZZ_CHECK(lines < n, "text output has more lines than %zu entries", n);
        sl_entry_format(sl_derived_entry(d, lines, NULL, NULL), text, TEXT_CAP);
        size_t tl = strlen(text);
        FUZZ_CHECK((size_t)(nl - p) >= tl && !memcmp(p, text, tl) &&
                       (p + tl == nl || !memcmp(p + tl, "  # ", 4)),
                   "text line %zu does not start with entry '%s' and a comment: '%s'", lines, text,
                   fuzz_show(p, (size_t)(nl - p), shown, sizeof shown));
        for (char *c = p; c < nl; c++)
            FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in text line %zu",
                       (unsigned char)*c, lines);
        /* The output is an allowlist file: the daemon must read every line. */
        sl_allowlist *one = sl_allowlist_new();
        bool ok = sl_allowlist_add_line(one, p, (size_t)(nl - p), "derived", 1, err, sizeof err);
        sl_allowlist_free(one);
        FUZZ_CHECK_ID("derived-long-line", ok,
                      "text line %zu ('%s', %zu bytes) is not a valid allowlist line: %s", lines,
                      text, (size_t)(nl - p), err);
    }
    FUZZ_CHECK(lines == n, "text output has %zu lines for %zu entries", lines, n);
    free(buf);

    /* JSON. */
    buf = NULL;
    blen = 0;
    m = open_memstream(&buf, &blen);
    if (!m)
        abort();
    sl_derived_print_json(d, m);
    fclose(m);
    json_error_t jerr;
    json_t *root = json_loadb(buf, blen, 0, &jerr);
    FUZZ_CHECK(root != NULL, "JSON output does not parse: %s (line %d)", jerr.text, jerr.line);
    json_t *arr = json_object_get(root, "entries");
    FUZZ_CHECK(json_is_array(arr) && json_array_size(arr) == n, "JSON output has no %zu entries", n);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *entry = json_string_value(json_object_get(o, "entry"));
        const sl_entry *e = sl_derived_entry(d, i, NULL, NULL);
        sl_entry_format(e, text, TEXT_CAP);
        /* The JSON text is never cut: compare what the cap kept. */
        FUZZ_CHECK(entry && !strncmp(entry, text, strlen(text)) && (strlen(entry) == entry_len(e)),
                   "JSON entry %zu is not '%.300s'", i, text);
        FUZZ_CHECK(json_is_array(json_object_get(o, "files")), "JSON entry %zu has no files", i);
        if (!sl_entry_is_rule(e)) {
            FUZZ_CHECK(!json_object_get(o, "digests"), "JSON host entry %zu has digests", i);
            continue;
        }
        const char *method = json_string_value(json_object_get(o, "method"));
        const char *path = json_string_value(json_object_get(o, "path"));
        json_t *digests = json_object_get(o, "digests");
        FUZZ_CHECK(method && !strcmp(method, e->methods), "JSON rule %zu has method '%s'", i, method);
        /* json_text turns a non-UTF-8 byte into '?': a path is ASCII. */
        FUZZ_CHECK(path && !strcmp(path, e->path), "JSON rule %zu has path '%.300s'", i, path);
        FUZZ_CHECK(json_is_array(digests) && json_array_size(digests) == e->ndigests,
                   "JSON rule %zu does not list its %zu digests", i, e->ndigests);
        for (size_t k = 0; k < e->ndigests; k++) {
            const char *dg = json_string_value(json_array_get(digests, k));
            FUZZ_CHECK(dg && !strcmp(dg, e->digests[k]), "JSON rule %zu: digest %zu differs", i, k);
        }
    }
    json_decref(root);
    free(buf);
    free(prev);
    free(text);
    free(again);
}

/* A file a reader's includes hook reports: a project file's path. */
static void check_include(void *ctx, const char *path)
{
    (void)ctx;
    FUZZ_CHECK(path && path[0], "an include with no path");
    FUZZ_CHECK(!strncmp(path, PROJECT_DIR "/", strlen(PROJECT_DIR) + 1) || path[0] == '/',
               "include '%s' is not named as a project file", path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file files[FUZZ_MAX_FILES];
    size_t nfiles = fuzz_split_files(data, size, files, FUZZ_MAX_FILES);
    if (nfiles == 0)
        return -1;
    const char *base = files[0].name;
    if (strchr(base, '/'))
        return -1;
    bool known = false;
    for (size_t i = 0; sl_lockreaders[i]; i++)
        known |= sl_lockreaders[i]->recognises(base);
    if (!known)
        return -1;                 /* not a lockfile name: keep it out of the corpus */

    sl_project *proj = sl_project_new(PROJECT_DIR);
    g_nput = 0;
    for (size_t i = 0; i < nfiles; i++) {
        sl_project_put(proj, files[i].name, (const char *)files[i].data, files[i].len);
        g_put[g_nput++] = files[i].name;
    }

    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path;
    const char *text = sl_project_file(proj, base, &len, &path, &e);
    FUZZ_CHECK(text != NULL, "the lockfile just put is missing");

    for (int pins = 0; pins <= 1; pins++) {
        sl_derived *out = sl_derived_new();
        sl_derived_set_pins(out, pins);
        for (size_t i = 0; sl_lockreaders[i]; i++) {
            const sl_lockreader *r = sl_lockreaders[i];
            if (!r->recognises(base))
                continue;
            sl_lockerr re = { .msg = "" };
            bool ok = r->read(path, text, len, proj, out, &re);
            FUZZ_CHECK(ok || re.msg[0], "reader %s failed without a message%s", r->name,
                       pins ? " (--pins)" : "");
            FUZZ_CHECK(re.line >= 0, "reader %s: negative line %d", r->name, re.line);
            if (r->includes && !pins)
                r->includes(path, text, len, proj, check_include, NULL);
        }
        check_output(out, pins);
        sl_derived_print(out, g_devnull);
        sl_derived_free(out);
    }

    sl_project_free(proj);
    for (size_t i = 0; i < g_narena; i++)
        free(g_arena[i]);
    g_narena = 0;
    g_nput = 0;
    return 0;
}
