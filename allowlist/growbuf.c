/* Bounded growing arrays and allocation that cannot fail (growbuf.h). */
#include "growbuf.h"

#include <stdlib.h>
#include <string.h>

bool sl_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t max)
{
    if (n < *cap)
        return true;
    if (n >= max)
        return false;
    size_t nc = *cap ? *cap * 2 : 8;
    if (nc > max)
        nc = max;
    /* The array pointer is read and written as bytes: it may point to any
     * object type, and only void * may be used to reach it directly. */
    void *p;
    memcpy(&p, arrp, sizeof p);
    void *q = realloc(p, nc * elem);
    if (!q)
        return false;
    memcpy(arrp, &q, sizeof q);
    *cap = nc;
    return true;
}

void *sl_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

char *sl_xstrndup(const char *s, size_t n)
{
    char *d = sl_xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *sl_xstrdup(const char *s)
{
    return sl_xstrndup(s, strlen(s));
}
