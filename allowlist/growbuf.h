/* Growing an array whose size a reader bounds: lockfile readers keep their
 * repositories, sources, stages and tokens in plain arrays that double as
 * needed, up to a limit that stops hostile input from taking all memory. */
#ifndef SLUICE_GROWBUF_H
#define SLUICE_GROWBUF_H

#include <stdbool.h>
#include <stddef.h>

/* Make room for element n (n + 1 elements) in the array *arrp, of `elem`
 * bytes each, now holding *cap. `arrp` is the address of the array
 * pointer (&p->repos). The capacity doubles (from 8) but never passes
 * `max`. Returns false, the array unchanged, when n reaches max or memory
 * runs out. */
bool sl_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t max);

/* realloc, strdup and strndup for the lockfile readers and the allowlist
 * builder, which have nothing sensible to do when memory runs out: they
 * abort. (The daemon's config loader has its own, which says so first.) */
void *sl_xrealloc(void *p, size_t n);
char *sl_xstrdup(const char *s);
char *sl_xstrndup(const char *s, size_t n);

#endif
