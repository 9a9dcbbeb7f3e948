/* Decision log lines as `sluice audit` reads them (proxy/audit/audit_input.c,
 * sl_aline_scan / sl_astr_decode / sl_astr_eq) and the reports built from
 * them (proxy/audit/audit_report.c: summary, denied, suggest; text and JSON).
 *
 * Input: log lines separated by '\n'.
 *
 * Properties:
 *   - every line the scanner accepts is a JSON object for jansson too
 *     (except what jansson refuses beyond RFC 8259: lone surrogates,
 *     integers over 2^63, reals that overflow a double);
 *   - every field audit reads agrees with jansson: a string field is set
 *     iff jansson has a string there, and decodes to the same bytes (with
 *     U+0000 as U+FFFD, as documented); a number field is set iff jansson
 *     has a non-negative integer there, with the same value;
 *   - a refused line names a reason and an offset inside the line;
 *   - the JSON reports parse with jansson, and every suggested line is a
 *     valid allowlist line (a request rule's host part, method and path
 *     while the allowlist does not read request rules yet; then the line);
 *   - the text reports hold only printable ASCII and newlines: nothing in a
 *     log can drive the terminal they are printed on. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "audit_input.h"
#include "audit_report.h"
#include "fuzz_util.h"

static FILE *g_devnull;
static bool g_rules;   /* the allowlist reads request rules ("GET host/path") */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_devnull = fopen("/dev/null", "w");
    sl_allowlist *al = sl_allowlist_new();
    char err[512];
    static const char rule[] = "GET example.org/x";
    g_rules = sl_allowlist_add_line(al, rule, sizeof rule - 1, "s", 1, err, sizeof err);
    sl_allowlist_free(al);
    return g_devnull ? 0 : 1;
}

static void check_str(const char *name, const sl_astr *s, json_t *o)
{
    json_t *v = json_object_get(o, name);
    bool js = v && json_is_string(v);
    FUZZ_CHECK(s->set == js, "field %s: scanner set=%d, jansson string=%d", name, s->set, js);
    if (!js)
        return;
    /* jansson's value with NUL as U+FFFD */
    const char *jv = json_string_value(v);
    size_t jl = json_string_length(v);
    char *want = malloc(3 * jl + 1);
    size_t wl = 0;
    for (size_t i = 0; i < jl; i++) {
        if (jv[i] == '\0') {
            memcpy(want + wl, "\xef\xbf\xbd", 3);
            wl += 3;
        } else {
            want[wl++] = jv[i];
        }
    }
    size_t cap = s->len + 8;
    char *got = malloc(cap);
    size_t gl = sl_astr_decode(s, got, cap);
    FUZZ_CHECK(gl == wl && !memcmp(got, want, wl), "field %s decodes to %zu bytes, jansson %zu", name,
               gl, wl);
    FUZZ_CHECK(got[gl] == '\0', "decode not terminated");
    /* A small buffer: cut, terminated. */
    char small[4];
    size_t sl = sl_astr_decode(s, small, sizeof small);
    FUZZ_CHECK(sl < sizeof small && small[sl] == '\0', "field %s: decode into 4 bytes", name);
    FUZZ_CHECK_ID("astr-cut", !memcmp(small, want, sl),
                  "field %s: decoded into 4 bytes, '%s' is not a prefix of its value", name, small);
    want[wl] = '\0';
    bool ascii = true;
    for (size_t i = 0; i < wl; i++)
        ascii = ascii && (unsigned char)want[i] < 0x80 && want[i] != 0;
    if (ascii)
        FUZZ_CHECK(sl_astr_eq(s, want), "sl_astr_eq('%s') on its own value", want);
    free(got);
    free(want);
}

static void check_num(const char *name, const sl_anum *n, json_t *o)
{
    json_t *v = json_object_get(o, name);
    bool ji = v && json_is_integer(v) && json_integer_value(v) >= 0;
    FUZZ_CHECK(n->set == ji, "field %s: scanner set=%d, jansson non-negative integer=%d", name, n->set,
               ji);
    if (ji)
        FUZZ_CHECK(n->v == (unsigned long long)json_integer_value(v), "field %s: %llu vs %lld", name,
                   n->v, (long long)json_integer_value(v));
}

static void check_line(const char *line, size_t len, sl_report *r)
{
    sl_afields f;
    const char *why = NULL;
    size_t at = (size_t)-1;
    bool ok = sl_aline_scan(line, len, &f, &why, &at);
    char shown[300];
    if (!ok) {
        FUZZ_CHECK(why && why[0] && at <= len, "refusal without reason/offset (at %zu of %zu)", at, len);
        sl_report_malformed(r);
        return;
    }
    json_error_t e;
    json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, &e);
    if (!o) {
        bool beyond = strstr(e.text, "Unicode") || strstr(e.text, "too big") ||
                      strstr(e.text, "overflow") || strstr(e.text, "maximum parsing depth");
        FUZZ_CHECK(beyond, "scanner accepts '%s', jansson refuses: %s",
                   fuzz_show(line, len, shown, sizeof shown), e.text);
        sl_report_line(r, &f);
        return;
    }
    FUZZ_CHECK(json_is_object(o), "scanner accepts a non-object");
#define S(x) check_str(#x, &f.x, o)
#define N(x) check_num(#x, &f.x, o)
    S(ts); S(event); S(id); S(client); S(method); S(host); S(decision); S(reason); S(end);
    S(stream); S(chain); S(continues_chain); S(path); S(credential);
    N(port); N(seq); N(continues_seq); N(bytes_up); N(bytes_down);
#undef S
#undef N
    json_decref(o);
    FUZZ_CHECK(sl_report_line(r, &f), "sl_report_line failed");
}

static char *capture(void (*fn)(const sl_report *, FILE *, bool), const sl_report *r, bool json, size_t *len)
{
    char *buf = NULL;
    FILE *m = open_memstream(&buf, len);
    if (!m)
        abort();
    fn(r, m, json);
    fclose(m);
    return buf;
}

static const sl_ports g_cp = { { 443 }, 1 }, g_hp = { { 80 }, 1 };

static bool valid_line(const char *line, size_t len, char *err, size_t errcap)
{
    sl_allowlist *al = sl_allowlist_new();
    bool ok = sl_allowlist_add_line(al, line, len, "s", 1, err, errcap);
    sl_allowlist_free(al);
    return ok;
}

/* "METHOD HOST[:PORT]PATH": upper-case method, the host part an allowlist
 * entry, the path '/' then RFC 3986 path bytes, '*' only at its end. */
static void check_rule_line(const char *line)
{
    char err[512];
    if (g_rules) {
        FUZZ_CHECK(valid_line(line, strlen(line), err, sizeof err), "suggested rule '%s' is not valid: %s", line,
                   err);
        return;
    }
    size_t m = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    FUZZ_CHECK(m > 0 && line[m] == ' ', "suggested rule '%s': no method", line);
    const char *host = line + m + 1, *slash = strchr(host[0] == '[' ? strchr(host, ']') : host, '/');
    FUZZ_CHECK(slash != NULL, "suggested rule '%s': no path", line);
    FUZZ_CHECK(valid_line(host, (size_t)(slash - host), err, sizeof err), "suggested rule '%s': host part: %s",
               line, err);
    size_t ok = strspn(slash, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()+,;=:@/%*");
    const char *star = strchr(slash, '*');
    FUZZ_CHECK(ok == strlen(slash) && (!star || star[1] == '\0'), "suggested rule '%s': path byte %zu", line, ok);
}

static void check_terminal_safe(const char *text, size_t len, int report)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        FUZZ_CHECK((c >= 0x20 && c < 0x7f) || c == '\n', "text report %d: byte 0x%02x at %zu", report, c, i);
    }
}

static void suggest(const sl_report *r, FILE *out, bool json)
{
    sl_report_suggest(r, out, json, &g_cp, &g_hp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_report *r = sl_report_new();
    sl_report_set_files(r, 1);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        check_line(p, (size_t)(le - p), r);
        sl_audit_json_str(g_devnull, p, (size_t)(le - p));
        sl_audit_text(g_devnull, p, (size_t)(le - p));
        p = le + 1;
    }

    static void (*const reports[3])(const sl_report *, FILE *, bool) = {
        sl_report_summary, sl_report_denied, suggest
    };
    for (int i = 0; i < 3; i++) {
        size_t len;
        char *text = capture(reports[i], r, false, &len);
        check_terminal_safe(text, len, i);
        free(text);
        text = capture(reports[i], r, true, &len);
        json_error_t e;
        json_t *o = json_loadb(text, len, 0, &e);
        FUZZ_CHECK(o != NULL, "JSON report %d does not parse: %s at %d:%d", i, e.text, e.line, e.column);
        if (i == 2) {
            json_t *arr = json_object_get(o, "suggestions");
            for (size_t k = 0; k < json_array_size(arr); k++) {
                json_t *sg = json_array_get(arr, k);
                const char *line = json_string_value(json_object_get(sg, "line"));
                FUZZ_CHECK(line != NULL, "suggestion without a line");
                if (json_is_true(json_object_get(sg, "rule"))) {
                    check_rule_line(line);
                    continue;
                }
                char err[512];
                FUZZ_CHECK(valid_line(line, strlen(line), err, sizeof err),
                           "suggested line '%s' is not a valid allowlist line: %s", line, err);
            }
        }
        json_decref(o);
        free(text);
    }
    /* sl_audit_json_str: a valid JSON string, for any bytes. */
    {
        size_t len;
        char *buf = NULL;
        FILE *m = open_memstream(&buf, &len);
        sl_audit_json_str(m, (const char *)data, size);
        fclose(m);
        json_error_t e;
        json_t *s = json_loadb(buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        FUZZ_CHECK(s && json_is_string(s), "sl_audit_json_str output is not a JSON string: %s", e.text);
        json_decref(s);
        free(buf);
    }
    sl_report_free(r);
    return 0;
}
