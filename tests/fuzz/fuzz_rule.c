/* Request rules through the allowlist line parser (allowlist/allowlist.c,
 * allowlist/rules.c): sl_allowlist_add_line, sl_entry_format,
 * sl_allowlist_match, sl_allowlist_match_request, sl_allowlist_suggest_rule,
 * sl_allowlist_warnings.
 *
 * Input: allowlist lines (rules and plain entries, mixed), one a line.
 *
 * Properties:
 *   - a line adds at most one entry, and a refusal has a message;
 *   - an entry prints as a line (at most SL_ENTRY_LINE_MAX bytes) that
 *     parses back to the same entry: kind, host, port, methods, path and
 *     digests, and prints the same again;
 *   - every rule's fields are what its checks promise: a valid method list,
 *     a path pattern sl_path_check accepts, valid digests on GET rules only;
 *   - a rule allows what it names: for a request built from it (its first
 *     method, its path with each '*' as "x"), sl_allowlist_match says
 *     INSPECTED and sl_allowlist_match_request ALLOWED, each with a rule no
 *     later than this one, whose methods include the method and whose pattern
 *     matches the path;
 *   - the suggested rule for that request parses and allows it alone;
 *   - every warning is "fuzz.txt:LINE: warning: ..." for a plain entry. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "fuzz_util.h"
#include "host.h"
#include "rules.h"

static bool same_rule(const sl_entry *a, const sl_entry *b)
{
    if (a->kind != b->kind || a->port != b->port || a->host.kind != b->host.kind ||
        strcmp(a->host.name, b->host.name) != 0 || sl_entry_is_rule(a) != sl_entry_is_rule(b))
        return false;
    if (!sl_entry_is_rule(a))
        return true;
    if (strcmp(a->methods, b->methods) || strcmp(a->path, b->path) || a->ndigests != b->ndigests)
        return false;
    for (size_t i = 0; i < a->ndigests; i++)
        if (strcmp(a->digests[i], b->digests[i]))
            return false;
    return true;
}

static size_t g_nwarn;

static void on_warning(void *ctx, const char *msg)
{
    (void)ctx;
    g_nwarn++;
    FUZZ_CHECK(!strncmp(msg, "fuzz.txt:", 9) && strstr(msg, ": warning: '"), "warning '%s'", msg);
}

/* A request the rule allows: its host (a subdomain for a wildcard), its
 * port (443 when bare), its first method ("GET" for "*"), its path with
 * every '*' as "x". */
static bool request_for(const sl_entry *e, sl_host *h, int *port, char *method, char *path, size_t cap)
{
    *h = e->host;
    if (e->kind == SL_ENTRY_WILDCARD) {
        char sub[SL_HOST_MAX + 8];
        int n = snprintf(sub, sizeof sub, "x.%s", e->host.name);
        const char *why;
        if (n <= 0 || (size_t)n >= sizeof sub || !sl_host_parse(sub, (size_t)n, h, &why))
            return false;
    }
    *port = e->port ? e->port : 443;
    if (!strcmp(e->methods, "*"))
        snprintf(method, SL_METHOD_NAME_MAX + 1, "GET");
    else
        snprintf(method, SL_METHOD_NAME_MAX + 1, "%.*s", (int)strcspn(e->methods, ","), e->methods);
    size_t k = 0;
    for (const char *p = e->path; *p && k + 2 < cap; p++)
        path[k++] = *p == '*' ? 'x' : *p;
    path[k] = '\0';
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_allowlist *al = sl_allowlist_new();
    char err[512], text[SL_ENTRY_LINE_MAX + 1], again[SL_ENTRY_LINE_MAX + 1], shown[2200];
    int lineno = 0;
    const uint8_t *end = data + size;
    for (const uint8_t *p = data; p < end && lineno < 64;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *le = nl ? nl : end;
        size_t before = sl_allowlist_count(al);
        err[0] = '\0';
        bool ok = sl_allowlist_add_line(al, (const char *)p, (size_t)(le - p), "fuzz.txt", ++lineno, err,
                                        sizeof err);
        size_t after = sl_allowlist_count(al);
        FUZZ_CHECK(after == before || (ok && after == before + 1), "line %d: count %zu -> %zu", lineno,
                   before, after);
        FUZZ_CHECK(ok || err[0], "line %d refused without a message", lineno);
        if (after > before) {
            const sl_entry *e = sl_allowlist_entry(al, after - 1);
            FUZZ_CHECK(e->line == lineno, "provenance");
            if (sl_entry_is_rule(e)) {
                FUZZ_CHECK(sl_methods_check(e->methods, strlen(e->methods), err, sizeof err),
                           "rule with methods '%s': %s", e->methods, err);
                FUZZ_CHECK(sl_path_check(e->path, strlen(e->path), true) == NULL, "rule with path '%s'",
                           e->path);
                FUZZ_CHECK(e->ndigests == 0 || sl_methods_get_only(e->methods), "digests on '%s'",
                           e->methods);
                for (size_t i = 0; i < e->ndigests; i++)
                    FUZZ_CHECK(sl_digest_check(e->digests[i], strlen(e->digests[i])) == NULL,
                               "digest '%s'", e->digests[i]);
            }
            sl_entry_format(e, text, sizeof text);
            FUZZ_CHECK(strlen(text) <= SL_ENTRY_LINE_MAX, "formatted line of %zu bytes", strlen(text));
            sl_allowlist *al2 = sl_allowlist_new();
            FUZZ_CHECK(sl_allowlist_add_line(al2, text, strlen(text), "again", 1, err, sizeof err),
                       "entry from '%s' prints as '%s', which does not parse: %s",
                       fuzz_show(p, (size_t)(le - p), shown, sizeof shown), text, err);
            FUZZ_CHECK(sl_allowlist_count(al2) == 1, "printed entry adds no entry");
            const sl_entry *e2 = sl_allowlist_entry(al2, 0);
            sl_entry_format(e2, again, sizeof again);
            FUZZ_CHECK(!strcmp(text, again) && same_rule(e, e2), "'%s' reads back as '%s'", text, again);
            sl_allowlist_free(al2);
        }
        if (!nl)
            break;
        p = nl + 1;
    }

    sl_ports cp = { .v = { 443 }, .n = 1 }, hp = { .v = { 80 }, .n = 1 };
    for (size_t i = 0; i < sl_allowlist_count(al); i++) {
        const sl_entry *e = sl_allowlist_entry(al, i);
        if (!sl_entry_is_rule(e))
            continue;
        sl_host h;
        int port;
        char method[SL_METHOD_NAME_MAX + 1], path[SL_ENTRY_LINE_MAX + 1];
        if (!request_for(e, &h, &port, method, path, sizeof path))
            continue;
        size_t plen = strlen(path);
        sl_entry_format(e, text, sizeof text);
        const sl_entry *rule = NULL;
        sl_match_result r = sl_allowlist_match(al, &h, port, true, &cp, &hp, &rule);
        FUZZ_CHECK(r == SL_MATCH_INSPECTED && rule && sl_allowlist_index(al, rule) <= i,
                   "rule '%s': CONNECT %s:%d gives %d", text, h.name, port, (int)r);
        /* '*' as "x" cannot make a dot segment, an empty one or an escape:
         * what the pattern check accepted, the request check accepts. */
        FUZZ_CHECK(sl_path_ambiguous(path, plen) == NULL, "rule '%s': its path '%s' is refused: %s", text,
                   path, sl_path_ambiguous(path, plen));
        r = sl_allowlist_match_request(al, &h, port, true, &cp, &hp, method, path, plen, &rule);
        FUZZ_CHECK(r == SL_MATCH_ALLOWED && rule && sl_allowlist_index(al, rule) <= i,
                   "rule '%s' does not allow %s %s:%d%s (result %d)", text, method, h.name, port, path,
                   (int)r);
        FUZZ_CHECK(sl_methods_include(rule->methods, method, strlen(method)) &&
                       sl_glob_match(rule->path, strlen(rule->path), path, plen, NULL),
                   "rule chosen for %s %s does not match it", method, path);

        char line[SL_ENTRY_LINE_MAX + 1];
        if (sl_allowlist_suggest_rule(&h, port, true, &cp, &hp, method, path, plen, line, sizeof line)) {
            sl_allowlist *one = sl_allowlist_new();
            FUZZ_CHECK(sl_allowlist_add_line(one, line, strlen(line), "suggest", 1, err, sizeof err),
                       "suggested '%s' does not parse: %s", line, err);
            FUZZ_CHECK(sl_allowlist_match_request(one, &h, port, true, &cp, &hp, method, path, plen,
                                                  NULL) == SL_MATCH_ALLOWED,
                       "suggested '%s' does not allow %s %s", line, method, path);
            sl_allowlist_free(one);
        }
    }

    g_nwarn = 0;
    sl_allowlist_warnings(al, on_warning, NULL);
    FUZZ_CHECK(g_nwarn <= sl_allowlist_count(al), "%zu warnings", g_nwarn);
    sl_allowlist_free(al);
    return 0;
}
