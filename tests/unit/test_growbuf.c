/* sl_grow: bounded doubling of the readers' arrays (allowlist/growbuf.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "growbuf.h"

typedef struct item {
    int a;
    char pad[20];
} item;

static void test_grows_by_doubling_and_keeps_contents(void **state)
{
    (void)state;
    item *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 100; i++) {
        assert_true(sl_grow(&v, &cap, n, sizeof *v, 1000));
        assert_true(n < cap);
        v[n++].a = i;
    }
    assert_int_equal(cap, 128);    /* 8, 16, 32, 64, 128 */
    for (int i = 0; i < 100; i++)
        assert_int_equal(v[i].a, i);
    free(v);
}

static void test_room_left_changes_nothing(void **state)
{
    (void)state;
    item *v = NULL;
    size_t cap = 0;
    assert_true(sl_grow(&v, &cap, 0, sizeof *v, 10));
    item *before = v;
    assert_true(sl_grow(&v, &cap, 7, sizeof *v, 10));
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 8);
    free(v);
}

static void test_stops_at_the_limit(void **state)
{
    (void)state;
    item *v = NULL;
    size_t n = 0, cap = 0;
    while (sl_grow(&v, &cap, n, sizeof *v, 10)) {
        v[n].a = (int)n;
        n++;
    }
    assert_int_equal(n, 10);       /* capacity 8, then 10 (not 16), then no more */
    assert_int_equal(cap, 10);
    assert_false(sl_grow(&v, &cap, 10, sizeof *v, 10));
    assert_int_equal(cap, 10);
    assert_int_equal(v[9].a, 9);   /* the array is untouched by the refusal */
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_by_doubling_and_keeps_contents),
        cmocka_unit_test(test_room_left_changes_nothing),
        cmocka_unit_test(test_stops_at_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
