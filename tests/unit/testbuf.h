/* A growing text buffer for unit tests that build documents (TOML, JSON)
 * piece by piece. Include after <cmocka.h>: a failed allocation fails the
 * test. */
#ifndef SLUICE_TESTBUF_H
#define SLUICE_TESTBUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dbuf {
    char *d;
    size_t n, cap;
} dbuf;

static inline void put(dbuf *b, const char *s, size_t n)
{
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n + 1)
            cap *= 2;
        b->d = realloc(b->d, cap);
        assert_non_null(b->d);
        b->cap = cap;
    }
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
}

static inline void puts_(dbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static inline void putf(dbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void putf(dbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    put(b, tmp, (size_t)n);
}

#endif
