/* The /metrics text: every series the counters feed, in the exposition
 * format (0.0.4), with the values the calls gave. The counters are process
 * globals, so each test reads the value before and after what it does. The
 * e2e test (test_admin.py) checks the same text with a strict parser on a
 * running gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* The text of /metrics now (free it). */
static char *render(void)
{
    struct evbuffer *b = evbuffer_new();
    assert_non_null(b);
    sl_metrics_render(b, 3, false);
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    assert_non_null(s);
    evbuffer_remove(b, s, n);
    s[n] = '\0';
    evbuffer_free(b);
    return s;
}

/* The value of the sample written exactly as `series` (name and labels),
 * or -1 when there is none; fails when there are two. */
static long long sample(const char *text, const char *series)
{
    long long v = -1;
    size_t n = strlen(series);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);   /* every line ends with a newline */
        if ((size_t)(nl - p) > n && strncmp(p, series, n) == 0 && p[n] == ' ') {
            if (v >= 0)
                fail_msg("sample %s twice", series);
            char *end;
            v = strtoll(p + n + 1, &end, 10);
            assert_ptr_equal(end, nl);
        }
        p = nl + 1;
    }
    return v;
}

/* Each sample line is NAME or NAME{k="v",...} then one value, and comes
 * after a HELP and a TYPE for its family. */
static void check_format(const char *text)
{
    char family[128] = "";
    bool helped = false, typed = false;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        char line[512];
        assert_true((size_t)(nl - p) < sizeof line);
        snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
        p = nl + 1;
        char name[128];
        if (sscanf(line, "# HELP %127s ", name) == 1) {
            snprintf(family, sizeof family, "%s", name);
            helped = true;
            typed = false;
            continue;
        }
        if (sscanf(line, "# TYPE %127s ", name) == 1) {
            assert_string_equal(name, family);
            const char *type = line + strlen("# TYPE ") + strlen(name) + 1;
            assert_true(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
                        strcmp(type, "histogram") == 0);
            typed = true;
            continue;
        }
        assert_true(line[0] != '#');
        size_t k = strspn(line, "abcdefghijklmnopqrstuvwxyz_");
        if (!helped || !typed || strncmp(line, family, strlen(family)) != 0)
            fail_msg("sample without its HELP and TYPE: %s", line);
        const char *rest = line + k;
        if (*rest == '{') {
            const char *close = strchr(rest, '}');
            assert_non_null(close);
            for (const char *q = rest + 1; q < close;) {
                size_t kl = strspn(q, "abcdefghijklmnopqrstuvwxyz_");
                assert_true(kl > 0 && q[kl] == '=' && q[kl + 1] == '"');
                const char *endq = strchr(q + kl + 2, '"');
                assert_non_null(endq);
                q = endq + 1;
                if (*q == ',')
                    q++;
            }
            rest = close + 1;
        }
        assert_true(rest[0] == ' ' && rest[1] != '\0');
    }
}

static void test_render_is_well_formed_and_has_every_new_series(void **state)
{
    (void)state;
    char *t = render();
    check_format(t);
    static const char *const present[] = {
        "sluice_requests_total{decision=\"allow\",reason=\"allowlisted\"}",
        "sluice_requests_total{decision=\"allow\",reason=\"inspected\"}",
        "sluice_requests_total{decision=\"allow\",reason=\"rule\"}",
        "sluice_requests_total{decision=\"deny\",reason=\"rule_not_matched\"}",
        "sluice_requests_total{decision=\"deny\",reason=\"upstream_tls_failed\"}",
        "sluice_requests_total{decision=\"deny\",reason=\"shutdown\"}",
        "sluice_inspected_requests_total{decision=\"allow\",reason=\"rule\"}",
        "sluice_inspected_requests_total{decision=\"deny\",reason=\"rule_not_matched\"}",
        "sluice_inspected_requests_total{decision=\"deny\",reason=\"bad_request\"}",
        "sluice_inspected_requests_total{decision=\"deny\",reason=\"upstream_tls_failed\"}",
        "sluice_inspected_requests_total{decision=\"deny\",reason=\"other\"}",
        "sluice_tls_handshake_failures_total{side=\"client\"}",
        "sluice_tls_handshake_failures_total{side=\"upstream\"}",
        "sluice_tls_certs_cached",
        "sluice_clients",
    };
    for (size_t i = 0; i < sizeof present / sizeof *present; i++)
        if (sample(t, present[i]) < 0)
            fail_msg("no sample %s in:\n%s", present[i], t);
    assert_int_equal(sample(t, "sluice_clients"), 3);
    /* an allow is never rendered with a deny's reason */
    assert_int_equal(sample(t, "sluice_inspected_requests_total{decision=\"allow\",reason=\"rule_not_matched\"}"), -1);
    assert_int_equal(sample(t, "sluice_requests_total{decision=\"allow\",reason=\"not_allowlisted\"}"), -1);
    free(t);
}

static void test_requests_count_by_decision_and_reason(void **state)
{
    (void)state;
    static const char *const rule = "sluice_inspected_requests_total{decision=\"allow\",reason=\"rule\"}",
                             *rnm = "sluice_inspected_requests_total{decision=\"deny\",reason=\"rule_not_matched\"}",
                             *bad = "sluice_inspected_requests_total{decision=\"deny\",reason=\"bad_request\"}",
                             *other = "sluice_inspected_requests_total{decision=\"deny\",reason=\"other\"}",
                             *dec = "sluice_requests_total{decision=\"deny\",reason=\"rule_not_matched\"}";
    char *t = render();
    long long r0 = sample(t, rule), n0 = sample(t, rnm), b0 = sample(t, bad), o0 = sample(t, other),
              d0 = sample(t, dec);
    free(t);
    for (int i = 0; i < 3; i++)
        sl_metrics_request(true, "rule");
    sl_metrics_request(false, "rule_not_matched");
    sl_metrics_request(false, "rule_not_matched");
    sl_metrics_request(false, "bad_request");
    sl_metrics_request(false, "a reason nobody listed");
    sl_metrics_request(false, NULL);
    t = render();
    check_format(t);
    assert_int_equal(sample(t, rule) - r0, 3);
    assert_int_equal(sample(t, rnm) - n0, 2);
    assert_int_equal(sample(t, bad) - b0, 1);
    assert_int_equal(sample(t, other) - o0, 2);
    /* requests in a tunnel are not decisions */
    assert_int_equal(sample(t, dec) - d0, 0);
    free(t);
}

static void test_new_decision_reasons_are_counted(void **state)
{
    (void)state;
    static const struct { bool allow; const char *reason, *series; } cases[] = {
        { true, "inspected", "sluice_requests_total{decision=\"allow\",reason=\"inspected\"}" },
        { true, "rule", "sluice_requests_total{decision=\"allow\",reason=\"rule\"}" },
        { false, "rule_not_matched", "sluice_requests_total{decision=\"deny\",reason=\"rule_not_matched\"}" },
        { false, "upstream_tls_failed", "sluice_requests_total{decision=\"deny\",reason=\"upstream_tls_failed\"}" },
        /* before, a reason missing from the table was dropped without a trace */
        { false, "shutdown", "sluice_requests_total{decision=\"deny\",reason=\"shutdown\"}" },
        { false, "no_such_reason", "sluice_requests_total{decision=\"deny\",reason=\"other\"}" },
        { true, "no_such_reason", "sluice_requests_total{decision=\"allow\",reason=\"other\"}" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = render();
        long long before = sample(t, cases[i].series);
        long long allowed = sample(t, "sluice_requests_total{decision=\"allow\",reason=\"allowlisted\"}");
        free(t);
        sl_metrics_decision(cases[i].allow, cases[i].reason);
        t = render();
        if (sample(t, cases[i].series) != before + 1)
            fail_msg("%s: %s not counted", cases[i].reason, cases[i].series);
        assert_int_equal(sample(t, "sluice_requests_total{decision=\"allow\",reason=\"allowlisted\"}"), allowed);
        free(t);
    }
}

static void test_handshake_failures_by_side_and_the_cache_gauge(void **state)
{
    (void)state;
    static const char *const client = "sluice_tls_handshake_failures_total{side=\"client\"}",
                             *upstream = "sluice_tls_handshake_failures_total{side=\"upstream\"}";
    char *t = render();
    long long c0 = sample(t, client), u0 = sample(t, upstream);
    free(t);
    sl_metrics_tls_failure(true);
    sl_metrics_tls_failure(false);
    sl_metrics_tls_failure(false);
    sl_metrics_certs_cached(12);
    t = render();
    assert_int_equal(sample(t, client) - c0, 1);
    assert_int_equal(sample(t, upstream) - u0, 2);
    assert_int_equal(sample(t, "sluice_tls_certs_cached"), 12);
    free(t);
    /* a gauge: the size now, not a sum */
    sl_metrics_certs_cached(5);
    t = render();
    assert_int_equal(sample(t, "sluice_tls_certs_cached"), 5);
    free(t);
    sl_metrics_certs_cached(0);
    t = render();
    assert_int_equal(sample(t, "sluice_tls_certs_cached"), 0);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_is_well_formed_and_has_every_new_series),
        cmocka_unit_test(test_requests_count_by_decision_and_reason),
        cmocka_unit_test(test_new_decision_reasons_are_counted),
        cmocka_unit_test(test_handshake_failures_by_side_and_the_cache_gauge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
