/* The Python readers' --pins helpers (allowlist/lockfiles/pyindex.c): name
 * normalisation, digests, index pages, the file-name and version patterns
 * and what they match, direct URLs with GitHub's redirects, pins grouped
 * by version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "pyindex.h"
#include "rules.h"

#define HEX_A "b84418eeb0b459aefe25596e565f2a3d6c08b511aa9671192bddcb8ff7320ac6"
#define SRI_A "sha256-uEQY7rC0Wa7+JVluVl8qPWwItRGqlnEZK93Lj/cyCsY="
#define HEX_B "240121a499e67b5a7921d2d68420054392de05d4050a26bce5530a0d1fdc583b"
#define SRI_B "sha256-JAEhpJnme1p5IdLWhCAFQ5LeBdQFCia85VMKDR/cWDs="

static char *printed(sl_derived *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    sl_derived_print(d, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_names_normalise_as_pep_503(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } ok[] = {
        { "Django", "django" },
        { "django_rest.Framework", "django-rest-framework" },
        { "zope.interface", "zope-interface" },
        { "a--_.b", "a-b" },
        { "ruamel.yaml.clib", "ruamel-yaml-clib" },
        { "A1", "a1" },
    };
    char out[64];
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        assert_true(sl_pyname_normalise(ok[i].in, strlen(ok[i].in), out, sizeof out));
        assert_string_equal(out, ok[i].out);
    }
    static const char *const bad[] = { "", "a b", "a/b", "a*", "name;x", "---" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(sl_pyname_normalise(bad[i], strlen(bad[i]), out, sizeof out));
    /* does not fit: refused, never cut */
    assert_false(sl_pyname_normalise("abcdef", 6, out, 6));
    assert_true(sl_pyname_normalise("abcdef", 6, out, 7));
}

static void test_hashes_convert_only_when_strong(void **state)
{
    (void)state;
    char sri[SL_SRI_MAX];
    assert_true(sl_pyhash_sri("sha256:" HEX_A, strlen("sha256:" HEX_A), sri));
    assert_string_equal(sri, SRI_A);
    static const char *const bad[] = {
        "md5:5d41402abc4b2a76b9719d911017c592", "sha1:aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d",
        "sha256:" HEX_A "00", "sha256=" HEX_A, HEX_A, "sha256:", "sha224:" HEX_A,
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(sl_pyhash_sri(bad[i], strlen(bad[i]), sri));
}

/* How many of the derived rules' patterns match a path. */
static int matching(sl_derived *d, const char *host, const char *path)
{
    int n = 0;
    for (size_t i = 0; i < sl_derived_count(d); i++) {
        const sl_entry *e = sl_derived_entry(d, i, NULL, NULL);
        if (e->path && !strcmp(e->host.name, host) &&
            sl_glob_match(e->path, strlen(e->path), path, strlen(path), NULL))
            n++;
    }
    return n;
}

/* The brief's own question: *-1.0-* must not take 1.0.5 or 11.0. Each file
 * of the pinned version matches exactly one rule; no other version's file
 * matches any. */
static void test_version_patterns_match_that_version_only(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *dig[] = { SRI_A };
    sl_pyprov prov = { { "requirements.txt" } };
    const char *pypi = "https://pypi.org/simple";
    assert_int_equal(sl_pyindex_version_rules(d, pypi, strlen(pypi), "1.0", dig, 1, &prov, NULL, err,
                                              sizeof err), 1);
    static const char *const yes[] = {
        "/packages/3a/bc/0123abcd/Django-1.0-py3-none-any.whl",
        "/packages/3a/bc/0123abcd/django-1.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        "/packages/3a/bc/0123abcd/Django-1.0.tar.gz",
        "/packages/3a/bc/0123abcd/zope.interface-1.0.zip",
        "/packages/3a/bc/0123abcd/my-legacy-name-1.0.tar.gz",
        "/packages/3a/bc/0123abcd/pkg-1.0-1-py3-none-any.whl",     /* a build tag */
    };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        assert_int_equal(matching(d, "files.pythonhosted.org", yes[i]), 1);
    static const char *const no[] = {
        "/packages/3a/bc/0123abcd/Django-1.0.5-py3-none-any.whl",
        "/packages/3a/bc/0123abcd/Django-11.0-py3-none-any.whl",
        "/packages/3a/bc/0123abcd/Django-1.0.5.tar.gz",
        "/packages/3a/bc/0123abcd/Django-11.0.tar.gz",
        "/packages/3a/bc/0123abcd/Django-21.0.zip",
        "/packages/3a/bc/0123abcd/Django-1.0rc1.tar.gz",
        "/packages/3a/bc/0123abcd/Django-1.0.post1-py3-none-any.whl",
        "/packages/3a/bc/0123abcd/Django-1.0-py3-none-any.whl.metadata",
        "/packages/3a/bc/0123abcd/Django-1.0.tar.gz.asc",
        "/simple/django/",
        "/Django-1.0.tar.gz",      /* not under /packages/ */
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        assert_int_equal(matching(d, "files.pythonhosted.org", no[i]), 0);
    char *out = printed(d);
    assert_string_equal(out,
        "GET files.pythonhosted.org:443/packages/*-1.0-*.whl " SRI_A "  # requirements.txt\n"
        "GET files.pythonhosted.org:443/packages/*-1.0.tar.gz " SRI_A "  # requirements.txt\n"
        "GET files.pythonhosted.org:443/packages/*-1.0.zip " SRI_A "  # requirements.txt\n");
    free(out);
    /* A local version as pip sends it: it quotes every link it takes
     * from an index, '+' as %2B. */
    sl_derived *t = sl_derived_new();
    const char *torch = "https://download.pytorch.org/whl/cpu";
    assert_int_equal(sl_pyindex_version_rules(t, torch, strlen(torch), "2.2.1+cpu", dig, 1, &prov, NULL,
                                              err, sizeof err), 1);
    assert_int_equal(matching(t, "download.pytorch.org", "/whl/torch-2.2.1%2Bcpu-cp311-cp311-linux_x86_64.whl"),
                     1);
    assert_int_equal(matching(t, "download.pytorch.org", "/whl/torch-2.2.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
                                                         ".metadata"), 0);
    sl_derived_free(t);
    /* "==1.*" is no version: nothing to spell */
    assert_int_equal(sl_pyindex_version_rules(d, pypi, strlen(pypi), "1.*", dig, 1, &prov, NULL, err,
                                              sizeof err), -1);
    sl_derived_free(d);
}

/* Any other index: its own host and port, from / (R9). */
static void test_private_index_keeps_its_files_on_its_host(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *dig[] = { SRI_A };
    sl_pyprov prov = { { "requirements.txt", "pip.conf" } };
    const char *idx = "https://${NEXUS_USER}:${NEXUS_PASS}@Nexus.Corp.Example:8443/repository/pypi/simple/";
    assert_int_equal(sl_pyindex_version_rules(d, idx, strlen(idx), "2.0", dig, 1, &prov, NULL, err,
                                              sizeof err), 1);
    assert_int_equal(sl_pyindex_page_rule(d, idx, strlen(idx), "Zope.Interface", &prov, err, sizeof err), 1);
    assert_int_equal(matching(d, "nexus.corp.example",
                              "/repository/pypi/packages/zope-interface/2.0/zope.interface-2.0.tar.gz"), 1);
    char *out = printed(d);
    assert_string_equal(out,
        "GET nexus.corp.example:8443/*-2.0-*.whl " SRI_A "  # requirements.txt, pip.conf\n"
        "GET nexus.corp.example:8443/*-2.0.tar.gz " SRI_A "  # requirements.txt, pip.conf\n"
        "GET nexus.corp.example:8443/*-2.0.zip " SRI_A "  # requirements.txt, pip.conf\n"
        "GET nexus.corp.example:8443/repository/pypi/simple/zope-interface/  # requirements.txt, pip.conf: "
        "index page\n");
    free(out);
    /* the same page from an index written without its trailing slash */
    sl_derived *d2 = sl_derived_new();
    const char *idx2 = "http://10.1.2.3:8080/simple";
    assert_int_equal(sl_pyindex_page_rule(d2, idx2, strlen(idx2), "six", &prov, err, sizeof err), 1);
    const char *idx3 = "http://10.1.2.3:8080";
    assert_int_equal(sl_pyindex_page_rule(d2, idx3, strlen(idx3), "six", &prov, err, sizeof err), 1);
    out = printed(d2);
    assert_string_equal(out,
        "GET 10.1.2.3:8080/simple/six/  # requirements.txt, pip.conf: index page\n"
        "GET 10.1.2.3:8080/six/  # requirements.txt, pip.conf: index page\n");
    free(out);
    /* a host that is an environment variable is not known offline */
    const char *idx4 = "https://${INDEX_HOST}/simple";
    assert_int_equal(sl_pyindex_page_rule(d2, idx4, strlen(idx4), "six", &prov, err, sizeof err), -1);
    assert_non_null(strstr(err, "environment variable"));
    /* nor is a scheme whose bytes the gate cannot see */
    const char *idx5 = "ssh://git@host.example/simple";
    assert_int_equal(sl_pyindex_page_rule(d2, idx5, strlen(idx5), "six", &prov, err, sizeof err), -1);
    sl_derived_free(d);
    sl_derived_free(d2);
}

static void test_file_rules_spell_the_name_or_fall_back(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *dig[] = { SRI_A };
    sl_pyprov prov = { { "poetry.lock" } };
    const char *pypi = "https://pypi.org/simple";
    const char *f = "certifi-2024.2.2-py3-none-any.whl";
    assert_int_equal(sl_pyindex_file_rule(d, pypi, strlen(pypi), f, dig, 1, &prov, NULL, err, sizeof err), 1);
    assert_int_equal(matching(d, "files.pythonhosted.org",
                              "/packages/ba/06/a07f096c664aeb9f01624f858c3add0a4e913d6c96257acb4fce61e7de14/"
                              "certifi-2024.2.2-py3-none-any.whl"), 1);
    assert_int_equal(matching(d, "files.pythonhosted.org", "/packages/ba/06/xcertifi-2024.2.2-py3-none-any.whl"), 0);
    const char *legacy = "https://pkgs.corp.example/simple/";
    assert_int_equal(sl_pyindex_file_rule(d, legacy, strlen(legacy), "a b.tar.gz", dig, 1, &prov, NULL, err,
                                          sizeof err), 1);
    assert_int_equal(sl_pyindex_file_rule(d, legacy, strlen(legacy), "corp-1.0.tar.gz", NULL, 0, &prov,
                                          "not pinned: only an MD5 digest", err, sizeof err), 1);
    /* a link may spell '+' either way: both rules */
    assert_int_equal(sl_pyindex_file_rule(d, legacy, strlen(legacy), "torch-2.2.1+cpu-cp311-none-any.whl", dig, 1,
                                          &prov, NULL, err, sizeof err), 1);
    assert_int_equal(matching(d, "pkgs.corp.example", "/whl/torch-2.2.1+cpu-cp311-none-any.whl"), 1);
    assert_int_equal(matching(d, "pkgs.corp.example", "/whl/torch-2.2.1%2Bcpu-cp311-none-any.whl"), 1);
    char *out = printed(d);
    assert_string_equal(out,
        "GET files.pythonhosted.org:443/packages/*/certifi-2024.2.2-py3-none-any.whl " SRI_A "  # poetry.lock\n"
        "GET pkgs.corp.example:443/*/corp-1.0.tar.gz  # poetry.lock: not pinned: only an MD5 digest\n"
        "GET pkgs.corp.example:443/*/torch-2.2.1%2Bcpu-cp311-none-any.whl " SRI_A "  # poetry.lock\n"
        "GET pkgs.corp.example:443/*/torch-2.2.1+cpu-cp311-none-any.whl " SRI_A "  # poetry.lock\n"
        "pkgs.corp.example:443  # poetry.lock: not pinned: no rule can spell the file name 'a b.tar.gz'; shadowed: this host has request rules, which alone decide for it\n");
    free(out);
    sl_derived_free(d);
}

static void test_github_redirects_are_pinned_to_the_same_bytes(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    char err[300];
    const char *dig[] = { SRI_A, SRI_B };
    sl_pyprov prov = { { "requirements.txt" } };
    const char *u1 = "https://github.com/Acme/Tool/archive/refs/tags/v1.2.tar.gz#egg=tool";
    const char *u2 = "https://github.com/acme/cli/releases/download/v3/cli-3-py3-none-any.whl";
    assert_int_equal(sl_pyurl_pin(d, u1, strlen(u1), dig, 2, &prov, NULL, err, sizeof err), 1);
    assert_int_equal(sl_pyurl_pin(d, u2, strlen(u2), dig, 1, &prov, NULL, err, sizeof err), 1);
    /* without digests: the fallback */
    const char *u3 = "https://downloads.example/x-1.0.tar.gz?sig=1";
    assert_int_equal(sl_pyurl_pin(d, u3, strlen(u3), NULL, 0, &prov, "no hash", err, sizeof err), 1);
    char *out = printed(d);
    assert_string_equal(out,
        "GET codeload.github.com:443/Acme/Tool/* " SRI_A " " SRI_B
        "  # requirements.txt: GitHub redirects a pinned URL here\n"
        "GET github.com:443/Acme/Tool/archive/refs/tags/v1.2.tar.gz " SRI_A " " SRI_B "  # requirements.txt\n"
        "GET github.com:443/acme/cli/releases/download/v3/cli-3-py3-none-any.whl " SRI_A "  # requirements.txt\n"
        "GET release-assets.githubusercontent.com:443/* " SRI_A
        "  # requirements.txt: GitHub redirects a pinned URL here\n"
        "downloads.example:443  # requirements.txt: no hash\n");
    free(out);
    sl_derived_free(d);
}

/* Projects that share a version share its rules: every digest, one note
 * naming them all, whichever file pinned which. */
static void test_pins_by_version_merge_with_one_note(void **state)
{
    (void)state;
    sl_derived *d = sl_derived_new();
    sl_pyvpins *v = sl_pyvpins_new();
    char err[300];
    const char *a[] = { SRI_A }, *b[] = { SRI_B, SRI_A };
    sl_pyprov p1 = { { "requirements.txt" } }, p2 = { { "requirements/base.txt" } };
    const char *pypi = "https://pypi.org/simple";
    assert_int_equal(sl_pyvpins_add(v, pypi, strlen(pypi), "idna", "3.6", a, 1, &p1, err, sizeof err), 1);
    assert_int_equal(sl_pyvpins_add(v, pypi, strlen(pypi), "six", "1.16.0", b, 1, &p1, err, sizeof err), 1);
    assert_int_equal(sl_pyvpins_add(v, pypi, strlen(pypi), "other", "3.6", b, 2, &p2, err, sizeof err), 1);
    assert_true(sl_pyvpins_emit(v, d, err, sizeof err));
    char *out = printed(d);
    assert_string_equal(out,
        "GET files.pythonhosted.org:443/packages/*-1.16.0-*.whl " SRI_B "  # requirements.txt: files of six==1.16.0\n"
        "GET files.pythonhosted.org:443/packages/*-1.16.0.tar.gz " SRI_B "  # requirements.txt: files of six==1.16.0\n"
        "GET files.pythonhosted.org:443/packages/*-1.16.0.zip " SRI_B "  # requirements.txt: files of six==1.16.0\n"
        "GET files.pythonhosted.org:443/packages/*-3.6-*.whl " SRI_A " " SRI_B
        "  # requirements.txt, requirements/base.txt: files of idna==3.6, other==3.6\n"
        "GET files.pythonhosted.org:443/packages/*-3.6.tar.gz " SRI_A " " SRI_B
        "  # requirements.txt, requirements/base.txt: files of idna==3.6, other==3.6\n"
        "GET files.pythonhosted.org:443/packages/*-3.6.zip " SRI_A " " SRI_B
        "  # requirements.txt, requirements/base.txt: files of idna==3.6, other==3.6\n");
    free(out);
    sl_pyvpins_free(v);
    sl_derived_free(d);

    /* many projects on one version: the note stays one bounded line */
    d = sl_derived_new();
    v = sl_pyvpins_new();
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "project-number-%d", i);
        assert_int_equal(sl_pyvpins_add(v, pypi, strlen(pypi), name, "1.0.0", a, 1, &p1, err, sizeof err), 1);
    }
    assert_true(sl_pyvpins_emit(v, d, err, sizeof err));
    out = printed(d);
    assert_non_null(strstr(out, " more ==1.0.0\n"));
    assert_true(strchr(out, '\n') - out < 600);
    free(out);
    sl_pyvpins_free(v);
    sl_derived_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_normalise_as_pep_503),
        cmocka_unit_test(test_hashes_convert_only_when_strong),
        cmocka_unit_test(test_version_patterns_match_that_version_only),
        cmocka_unit_test(test_private_index_keeps_its_files_on_its_host),
        cmocka_unit_test(test_file_rules_spell_the_name_or_fall_back),
        cmocka_unit_test(test_github_redirects_are_pinned_to_the_same_bytes),
        cmocka_unit_test(test_pins_by_version_merge_with_one_note),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
