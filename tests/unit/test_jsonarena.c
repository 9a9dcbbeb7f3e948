/* The jansson arena (allowlist/lockfiles/jsonarena.c): alignment, blocks that do not
 * overlap, many threads allocating and freeing at once, blocks larger than
 * a region, regions reused once all their blocks are freed (memory stays
 * bounded over many documents), and jansson itself (sl_json_load on
 * several threads, dump, free) with the arena installed. Under
 * AddressSanitizer, also that blocks are poisoned outside their lifetime;
 * and sl_jsonarena_end itself aborts if a test leaks a block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonarena.h"
#include "jsonload.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#include <sanitizer/asan_interface.h>
#endif

#define MiB ((size_t)1 << 20)

static json_malloc_t amalloc;
static json_free_t afree;

static void install(void)
{
    assert_true(sl_jsonarena_begin());
    json_get_alloc_funcs(&amalloc, &afree);
    assert_ptr_not_equal(amalloc, malloc);
}

static void uninstall(void)
{
    assert_int_equal(sl_jsonarena_live(), 0);
    sl_jsonarena_end();
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    assert_ptr_equal(m, malloc);
    assert_ptr_equal(f, free);
    assert_int_equal(sl_jsonarena_mapped(), 0);
}

static void test_begin_twice(void **state)
{
    (void)state;
    install();
    assert_false(sl_jsonarena_begin());
    uninstall();
    sl_jsonarena_end();        /* not installed: nothing */
    install();
    uninstall();
}

static void test_alignment_and_overlap(void **state)
{
    (void)state;
    install();
    enum { N = 3000 };
    static unsigned char *p[N];
    static size_t len[N];
    for (size_t i = 0; i < N; i++) {
        len[i] = (i * 7919) % 1000;          /* 0 .. 999, zero included */
        if (i % 500 == 0)
            len[i] = 200000;                 /* below the big-block size */
        p[i] = amalloc(len[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], (int)(i & 0xff), len[i]);
    }
    assert_int_equal(sl_jsonarena_live(), N);
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < len[i]; k++)
            if (p[i][k] != (unsigned char)(i & 0xff))
                fail_msg("block %zu byte %zu overwritten", i, k);
    for (size_t i = 0; i < N; i++)
        afree(p[i]);
    afree(NULL);
    uninstall();
}

static void test_big_blocks(void **state)
{
    (void)state;
    install();
    size_t sizes[] = { 256 * 1024 + 1, 2 * MiB, 2 * MiB + 1, 9 * MiB + 123 };
    void *p[4];
    for (size_t i = 0; i < 4; i++) {
        size_t before = sl_jsonarena_mapped();
        p[i] = amalloc(sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        assert_true(sl_jsonarena_mapped() - before >= sizes[i]);
        memset(p[i], 0x5a, sizes[i]);        /* all of it is writable */
    }
    /* Small blocks in between and after still work. */
    void *s = amalloc(10);
    assert_non_null(s);
    assert_int_equal(sl_jsonarena_live(), 5);
    size_t before = sl_jsonarena_mapped();
    afree(p[3]);                              /* unmapped at once */
    assert_true(before - sl_jsonarena_mapped() >= sizes[3]);
    for (size_t i = 0; i < 3; i++)
        afree(p[i]);
    afree(s);
    /* Too large to exist: NULL, not a wrapped-around size. */
    assert_null(amalloc(SIZE_MAX));
    assert_null(amalloc(SIZE_MAX - 8));
    uninstall();
}

/* ---- threads ---- */

typedef struct worker_arg {
    unsigned seed;
    size_t n;
    void **keep;               /* blocks left for the main thread to free */
    size_t nkeep;
} worker_arg;

static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Allocates n blocks, each filled with its own tag; frees about half of
 * them as it goes (after checking them), leaves the rest to the caller. */
static void *worker(void *arg)
{
    worker_arg *w = arg;
    enum { WINDOW = 64 };
    unsigned char *live[WINDOW] = { 0 };
    size_t lens[WINDOW] = { 0 };
    w->keep = malloc(w->n * sizeof *w->keep);
    if (!w->keep)
        return "malloc";
    for (size_t i = 0; i < w->n; i++) {
        size_t slot = next_rand(&w->seed) % WINDOW;
        if (live[slot]) {
            for (size_t k = 0; k < lens[slot]; k++)
                if (live[slot][k] != (unsigned char)(lens[slot] + slot))
                    return "overwritten";
            if (next_rand(&w->seed) % 2)
                afree(live[slot]);
            else
                w->keep[w->nkeep++] = live[slot];
        }
        lens[slot] = next_rand(&w->seed) % 300;
        live[slot] = amalloc(lens[slot]);
        if (!live[slot] || (uintptr_t)live[slot] % 16)
            return "bad block";
        memset(live[slot], (int)(unsigned char)(lens[slot] + slot), lens[slot]);
    }
    for (size_t s = 0; s < WINDOW; s++)
        if (live[s])
            w->keep[w->nkeep++] = live[s];
    return NULL;
}

static void run_threads(unsigned nthreads, size_t per)
{
    pthread_t th[16];
    worker_arg w[16];
    for (unsigned i = 0; i < nthreads; i++) {
        w[i] = (worker_arg){ .seed = 1000u + i, .n = per };
        assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
    }
    for (unsigned i = 0; i < nthreads; i++) {
        void *res;
        assert_int_equal(pthread_join(th[i], &res), 0);
        if (res)
            fail_msg("thread %u: %s", i, (const char *)res);
    }
    /* The threads have exited: their regions are retired, and what is
     * left is exactly the blocks they did not free. */
    size_t kept = 0;
    for (unsigned i = 0; i < nthreads; i++)
        kept += w[i].nkeep;
    assert_int_equal(sl_jsonarena_live(), kept);
    for (unsigned i = 0; i < nthreads; i++) {
        for (size_t k = 0; k < w[i].nkeep; k++)
            afree(w[i].keep[k]);
        free(w[i].keep);
    }
    assert_int_equal(sl_jsonarena_live(), 0);
}

static void test_threads(void **state)
{
    (void)state;
    install();
    run_threads(8, 100000);
    /* Every region is free again: the same work maps nothing more. */
    size_t mapped = sl_jsonarena_mapped();
    assert_true(mapped > 0);
    for (int round = 0; round < 3; round++) {
        run_threads(8, 100000);
        assert_int_equal(sl_jsonarena_mapped(), mapped);
    }
    uninstall();
}

/* ---- jansson ---- */

/* A package-lock.json-like document of about `packages` entries. */
static char *make_doc(size_t packages, size_t *len)
{
    size_t cap = packages * 300 + 256, n = 0;
    char *d = malloc(cap);
    assert_non_null(d);
    n += (size_t)sprintf(d + n, "{\"name\":\"x\",\"lockfileVersion\":3,\"packages\":{\"\":{\"name\":\"x\"}");
    for (size_t i = 0; i < packages; i++)
        n += (size_t)sprintf(d + n,
                             ",\"node_modules/p%zu\":{\"version\":\"1.%zu.0\",\"resolved\":"
                             "\"https://registry.npmjs.org/p%zu/-/p%zu-1.%zu.0.tgz\",\"integrity\":"
                             "\"sha512-%0*zu\",\"dev\":%s,\"n\":[%zu,%zu.5,null]}",
                             i, i % 97, i, i, i % 97, 40, i * 2654435761u % 1000000007u,
                             i % 3 ? "true" : "false", i, i);
    n += (size_t)sprintf(d + n, "}}");
    assert_true(n < cap);
    *len = n;
    return d;
}

static void test_jansson_round_trip(void **state)
{
    (void)state;
    size_t len;
    char *doc = make_doc(20000, &len);
    /* The expected text, made with malloc before the arena is installed. */
    json_t *ref = json_loadb(doc, len, 0, NULL);
    assert_non_null(ref);
    char *want = json_dumps(ref, JSON_COMPACT);
    assert_non_null(want);
    json_decref(ref);

    install();
    size_t mapped = 0;
    for (int round = 0; round < 4; round++) {
        json_error_t err;
        unsigned long par = sl_json_load_parallel_count();
        json_t *v = sl_json_load_ex(doc, len, &err, 1024, 3);
        assert_non_null(v);
        assert_int_equal(sl_json_load_parallel_count(), par + 1);   /* threads did allocate */
        char *got = json_dumps(v, JSON_COMPACT);
        assert_non_null(got);
        assert_string_equal(got, want);
        afree(got);                           /* json_dumps's text is the arena's too */
        /* Values made and changed after the parse. */
        json_t *o = json_object();
        for (int i = 0; i < 1000; i++) {
            char key[32];
            snprintf(key, sizeof key, "k%d", i);
            json_object_set_new(o, key, json_stringn("abcdefghijklmnopqrstuvwxyz", (size_t)(i % 27)));
        }
        json_object_set_new(v, "extra", o);
        assert_int_equal(json_object_size(json_object_get(v, "extra")), 1000);
        /* An error message still works. */
        assert_null(json_loads("{\"a\":", 0, &err));
        assert_true(err.text[0] != '\0');
        json_decref(v);
        assert_int_equal(sl_jsonarena_live(), 0);
        /* Later documents reuse the first one's regions (give or take the
         * partly used last region of each of the 3 threads). */
        if (round == 0)
            mapped = sl_jsonarena_mapped();
        else if (sl_jsonarena_mapped() > mapped + 3 * 2 * MiB)
            fail_msg("round %d: %zu bytes mapped, %zu after the first", round,
                     sl_jsonarena_mapped(), mapped);
    }
    uninstall();

    /* After the arena, jansson uses malloc again. */
    json_t *after = json_loadb(doc, len, 0, NULL);
    assert_non_null(after);
    json_decref(after);
    free(want);
    free(doc);
}

#ifdef TEST_ASAN
static void test_poisoned(void **state)
{
    (void)state;
    install();
    char *p = amalloc(20);
    assert_non_null(p);
    assert_false(__asan_region_is_poisoned(p, 20));
    assert_true(__asan_address_is_poisoned(p + 20));      /* the rest of its 16-byte slot */
    assert_true(__asan_address_is_poisoned(p - 1));       /* the red zone before it */
    char *q = amalloc(16);
    assert_true(__asan_address_is_poisoned(q - 1));
    afree(p);
    assert_true(__asan_address_is_poisoned(p));           /* use after free is caught */
    afree(q);
    char *b = amalloc(3 * MiB);
    assert_false(__asan_region_is_poisoned(b, 3 * MiB));
    assert_true(__asan_address_is_poisoned(b + 3 * MiB));
    afree(b);
    uninstall();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_twice),
        cmocka_unit_test(test_alignment_and_overlap),
        cmocka_unit_test(test_big_blocks),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_jansson_round_trip),
#ifdef TEST_ASAN
        cmocka_unit_test(test_poisoned),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
