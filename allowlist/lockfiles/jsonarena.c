/* jansson's allocator on huge-page regions (see jsonarena.h).
 *
 * Memory comes in regions of 2 MiB, each mapped at a 2 MiB boundary and
 * advised MADV_HUGEPAGE, with a header at its start. A thread allocates by
 * bumping a pointer through the region it owns (thread-local, no lock);
 * when that is full it retires the region and takes another from the free
 * list or a new mapping (under a mutex, about once per 2 MiB). Blocks are
 * 16-byte aligned. A block's region is found from its address by rounding
 * down to 2 MiB.
 *
 * Counting live blocks without a shared counter on the fast path: a
 * region's `live` starts at BIAS when a thread takes it; the owner counts
 * its allocations in a thread-local; every free (from any thread)
 * decrements `live` atomically; retiring adds (allocations - BIAS). So
 * `live` reaches zero exactly once, when the region is retired and every
 * block in it freed, and whoever brings it there puts the region on the
 * free list. A worker thread retires its region when it exits (a pthread
 * key's destructor).
 *
 * A block over 256 KiB (jansson's hash tables of big objects, long
 * strings) is a mapping of its own with the same header, so the same
 * rounding finds it; freeing it unmaps it.
 *
 * Under AddressSanitizer, each block has a 16-byte red zone before it that
 * holds its size; region memory is poisoned except while a block is
 * allocated, so overflows and uses after free are still caught. */
#include "jsonarena.h"

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif

#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define REDZONE ((size_t)16)
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define REDZONE ((size_t)0)
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define REGION ((size_t)2 << 20)      /* one x86-64 huge page */
#define BIG ((size_t)256 << 10)       /* larger blocks get a mapping of their own */
#define ALIGN ((size_t)16)
#define HDR ((size_t)64)              /* the header, rounded up to a cache line */
#define PAGE ((size_t)4096)
#define BIAS (LONG_MAX / 2)

typedef struct region {
    atomic_long live;          /* see above; for a big block, unused */
    size_t len;                /* the mapping's length */
    bool big;
    struct region *next;       /* every region (or every big block) */
    struct region *prev;       /* big blocks only */
    struct region *next_free;  /* the free list */
} region;

_Static_assert(sizeof(region) <= HDR, "the region header fits in HDR");

typedef struct tstate {
    char *cur, *end;           /* the free part of r */
    region *r;                 /* the region this thread bumps through, or NULL */
    long n;                    /* blocks allocated in r */
    unsigned long gen;         /* the installation this state belongs to */
} tstate;

static _Thread_local tstate ts;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static region *regions;        /* all, through next */
static region *free_regions;   /* through next_free */
static region *bigs;           /* through next and prev */
static size_t mapped;
static bool installed;
/* Which installation is current: thread states of an earlier one point
 * into unmapped memory and are dropped. Written only by begin and end,
 * when no other thread uses jansson. */
static unsigned long gen = 1;
static pthread_key_t exit_key;
static json_malloc_t old_malloc;
static json_free_t old_free;

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) & ~(to - 1);
}

/* len bytes (a multiple of PAGE) at a REGION boundary, advised huge. */
static void *map_aligned(size_t len)
{
    if (len > SIZE_MAX - REGION)
        return NULL;
    size_t total = len + REGION;
    char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)round_up((uintptr_t)p, REGION);
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + total > a + len)
        munmap(a + len, (size_t)(p + total - (a + len)));
    /* Best effort: without it (THP off, an old kernel) it is only slower. */
    (void)madvise(a, len, MADV_HUGEPAGE);
    return a;
}

static void recycle(region *r)
{
    POISON((char *)r + HDR, REGION - HDR);
    pthread_mutex_lock(&mu);
    r->next_free = free_regions;
    free_regions = r;
    pthread_mutex_unlock(&mu);
}

static region *region_get(void)
{
    pthread_mutex_lock(&mu);
    region *r = free_regions;
    if (r) {
        free_regions = r->next_free;
    } else if ((r = map_aligned(REGION))) {
        r->len = REGION;
        r->big = false;
        r->next = regions;
        regions = r;
        mapped += REGION;
        POISON((char *)r + HDR, REGION - HDR);
    }
    if (r)
        atomic_store_explicit(&r->live, BIAS, memory_order_relaxed);
    pthread_mutex_unlock(&mu);
    return r;
}

/* The thread gives up its region; the last of its blocks to be freed (or
 * this, if they all are) puts it on the free list. */
static void retire(tstate *t)
{
    region *r = t->r;
    if (r) {
        long d = t->n - BIAS;
        if (atomic_fetch_add_explicit(&r->live, d, memory_order_acq_rel) + d == 0)
            recycle(r);
    }
    t->r = NULL;
    t->cur = t->end = NULL;
    t->n = 0;
}

static void thread_exit(void *arg)
{
    tstate *t = arg;
    if (t->gen == gen)
        retire(t);
}

#ifdef ARENA_ASAN
/* The red zone is poisoned: only these read and write it. */
__attribute__((no_sanitize_address)) static void rz_put(char *p, size_t size)
{
    memcpy(p, &size, sizeof size);
}

__attribute__((no_sanitize_address)) static size_t rz_get(const char *p)
{
    size_t size;
    memcpy(&size, p, sizeof size);
    return size;
}
#endif

static void *bump(tstate *t, size_t size, size_t need)
{
    char *p = t->cur;
    t->cur += need;
    t->n++;
#ifdef ARENA_ASAN
    rz_put(p, size);
    p += REDZONE;
    UNPOISON(p, size);
#else
    (void)size;
#endif
    return p;
}

static void *big_alloc(size_t size)
{
    if (size > SIZE_MAX - 2 * REGION)
        return NULL;
    size_t len = round_up(HDR + size, PAGE);
    region *r = map_aligned(len);
    if (!r)
        return NULL;
    r->len = len;
    r->big = true;
    r->prev = NULL;
    pthread_mutex_lock(&mu);
    r->next = bigs;
    if (bigs)
        bigs->prev = r;
    bigs = r;
    mapped += len;
    pthread_mutex_unlock(&mu);
    POISON((char *)r + HDR + size, len - HDR - size);
    return (char *)r + HDR;
}

static void big_free(region *r)
{
    pthread_mutex_lock(&mu);
    if (r->prev)
        r->prev->next = r->next;
    else
        bigs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    mapped -= r->len;
    pthread_mutex_unlock(&mu);
    UNPOISON(r, r->len);
    munmap(r, r->len);
}

static void *arena_malloc_slow(size_t size)
{
    if (size > BIG)
        return big_alloc(size);
    tstate *t = &ts;
    if (t->gen != gen) {
        /* First allocation of this thread in this installation. */
        memset(t, 0, sizeof *t);
        t->gen = gen;
        pthread_setspecific(exit_key, t);
    }
    size_t need = round_up(REDZONE + (size ? size : 1), ALIGN);
    retire(t);
    region *r = region_get();
    if (!r)
        return NULL;
    t->r = r;
    t->cur = (char *)r + HDR;
    t->end = (char *)r + REGION;
    return bump(t, size, need);
}

static void *arena_malloc(size_t size)
{
    tstate *t = &ts;
    size_t need = round_up(REDZONE + (size ? size : 1), ALIGN);
    if (size <= BIG && t->gen == gen && need <= (size_t)(t->end - t->cur))
        return bump(t, size, need);
    return arena_malloc_slow(size);
}

static void arena_free(void *p)
{
    if (!p)
        return;
    region *r = (region *)((uintptr_t)p & ~(uintptr_t)(REGION - 1));
    if (r->big) {
        big_free(r);
        return;
    }
#ifdef ARENA_ASAN
    size_t size = rz_get((char *)p - REDZONE);
    POISON(p, round_up(size ? size : 1, ALIGN));
#endif
    if (atomic_fetch_sub_explicit(&r->live, 1, memory_order_acq_rel) == 1)
        recycle(r);
}

bool sl_jsonarena_begin(void)
{
    if (installed)
        return false;
    if (pthread_key_create(&exit_key, thread_exit) != 0)
        return false;
    json_get_alloc_funcs(&old_malloc, &old_free);
    json_set_alloc_funcs(arena_malloc, arena_free);
    installed = true;
    return true;
}

size_t sl_jsonarena_live(void)
{
    size_t live = 0;
    pthread_mutex_lock(&mu);
    for (region *r = regions; r; r = r->next) {
        long l = atomic_load_explicit(&r->live, memory_order_acquire);
        if (r == ts.r && ts.gen == gen)
            l += ts.n - BIAS;
        else if (l > BIAS / 2)
            l = 1;             /* another thread's, still running: counted as one */
        live += (size_t)l;
    }
    for (region *r = bigs; r; r = r->next)
        live++;
    pthread_mutex_unlock(&mu);
    return live;
}

void sl_jsonarena_end(void)
{
    if (!installed)
        return;
#ifdef ARENA_ASAN
    size_t live = sl_jsonarena_live();
#endif
    if (ts.gen == gen)
        retire(&ts);
    json_set_alloc_funcs(old_malloc, old_free);
    pthread_key_delete(exit_key);
    pthread_mutex_lock(&mu);
    while (regions) {
        region *r = regions;
        regions = r->next;
        UNPOISON(r, REGION);
        munmap(r, REGION);
    }
    while (bigs) {
        region *r = bigs;
        bigs = r->next;
        UNPOISON(r, r->len);
        munmap(r, r->len);
    }
    free_regions = NULL;
    mapped = 0;
    pthread_mutex_unlock(&mu);
    memset(&ts, 0, sizeof ts);
    gen++;
    installed = false;
#ifdef ARENA_ASAN
    /* LeakSanitizer does not look into the arena: say it here. */
    if (live) {
        fprintf(stderr, "jsonarena: %zu jansson block%s never freed\n", live, live == 1 ? "" : "s");
        abort();
    }
#endif
}

size_t sl_jsonarena_mapped(void)
{
    pthread_mutex_lock(&mu);
    size_t m = mapped;
    pthread_mutex_unlock(&mu);
    return m;
}
