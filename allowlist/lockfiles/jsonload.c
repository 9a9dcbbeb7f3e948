/* json_loadb on several threads, for large documents (see jsonload.h).
 *
 * How: a structural scan (not a parser) walks the text once, tracking only
 * strings and backslash escapes, the nesting of {} and [], and the members
 * of the top-level object. It finds the members whose value is an object or
 * array of at least an eighth of the document ("big" values) and the commas
 * that separate a big value's own members or elements. Then:
 *
 *   - the skeleton, a copy of the text with every big value replaced by {}
 *     or [], is parsed by json_loadb on the calling thread;
 *   - each big value is cut at some of its commas into slices of about equal
 *     size, and each slice is parsed by jansson on a worker thread as a
 *     document of its own, "{" SLICE "}" (or "[" SLICE "]"), through
 *     json_load_callback (the same parser as json_loadb; no copy is made);
 *   - the slices of a value are merged in document order, and the result
 *     replaces the placeholder in the skeleton.
 *
 * Why that gives json_loadb's tree: the scan only chooses where to cut;
 * jansson reads every byte, and nothing the scan believes is trusted until
 * jansson has agreed. The original is BEFORE "{" S1 "," S2 ... "," Sn "}"
 * AFTER (S1 starts after the value's own "{", Sn ends before its "}"). The
 * skeleton parse proves BEFORE "{}" AFTER valid: the text around the value
 * is right for an object there. Each slice parse proves "{" Si "}" is a
 * valid object: Si is a run of members that starts where jansson's lexer
 * starts after "{" and ends on a token boundary (the byte after it, "}" in
 * the slice, "," or "}" in the original, ends a number or literal alike).
 * A slice with at least one member means a member follows each cut ",",
 * which is what jansson wants after a comma; so the whole text is valid
 * JSON with the same tokens, and the scan, which tracks valid JSON exactly,
 * was right about where the values and members are. Merging with
 * json_object_update (json_array_extend) in order is what json_loadb does
 * member by member: a later duplicate key replaces the value and keeps the
 * first one's place (the unit test checks jansson does that). Two things
 * are not local and are checked: jansson's nesting limit
 * (JSON_PARSER_MAX_DEPTH, 2048, counting every value; a slice is one level
 * shallower than in the document), so a document nested deeper than
 * MAX_DEPTH anywhere is parsed serially; and a duplicate key at the top
 * level (a later one would replace a big value), found because the
 * skeleton then has fewer members than the scan counted. On success the
 * error structure is what json_loadb leaves: initialised, with the
 * position at the end of the input.
 *
 * Any doubt, serial: a scan that sees anything unexpected (a top level that
 * is not one object, unbalanced brackets, an unterminated string, a NUL
 * byte, a document too deep), any failed parse, merge or allocation, and
 * sl_json_load_ex throws everything away and returns json_loadb(data, len,
 * 0, err). So every error, with its text, line, column and position, is
 * json_loadb's own; an invalid large document is parsed up to twice. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "growbuf.h"
#include "jsonload.h"

#define SERIAL_BELOW ((size_t)4 << 20)   /* below this, threads are not worth it */
#define MAX_THREADS 8
/* jansson counts every value, scalars too, against its limit of 2048; stay
 * far enough below it that a slice and the whole document agree. */
#define MAX_DEPTH 1024

static atomic_ulong parallel_count;

unsigned long sl_json_load_parallel_count(void)
{
    return atomic_load(&parallel_count);
}

/* ---- the structural scan --------------------------------------------- */

typedef struct big {
    size_t open, close;        /* offsets of its '{' and '}' (or '[' and ']') */
    size_t member;             /* its member's index in the top-level object */
    size_t comma0, ncommas;    /* its member/element separators, in scan.commas */
    size_t task0, ntasks;      /* its slices, in the task list */
} big;

typedef struct scan {
    big *bigs;
    size_t nbigs, capbigs;
    size_t *commas;
    size_t ncommas, capcommas;
    size_t members;            /* members of the top-level object */
} scan;

enum { C_OTHER, C_WS, C_QUOTE, C_OPEN, C_CLOSE, C_COMMA, C_COLON, C_NUL };

static const unsigned char CLASS[256] = {
    [' '] = C_WS, ['\t'] = C_WS, ['\n'] = C_WS, ['\r'] = C_WS,
    ['"'] = C_QUOTE, ['{'] = C_OPEN, ['['] = C_OPEN, ['}'] = C_CLOSE, [']'] = C_CLOSE,
    [','] = C_COMMA, [':'] = C_COLON, [0] = C_NUL,
};

/* Finds the big values (at least bigmin bytes) of the top-level object and
 * their separating commas. false: not a shape to split; parse serially. */
static bool scan_doc(const char *d, size_t len, size_t bigmin, scan *s)
{
    size_t i = 0, depth = 0;
    bool seen_top = false;
    size_t vopen = 0, mark = 0;   /* the current depth-2 value: where it opened, first comma */

    while (i < len) {
        unsigned char c = (unsigned char)d[i];
        switch (CLASS[c]) {
        case C_WS:
            break;
        case C_OTHER:                          /* numbers, literals */
            if (depth == 0)
                return false;
            break;
        case C_NUL:
            return false;
        case C_QUOTE: {
            if (depth == 0)
                return false;
            /* The closing quote is the next one after an even number of
             * backslashes. A NUL or raw control byte inside is jansson's to
             * refuse; it cannot move where the string ends. */
            const char *q = d + i;
            for (;;) {
                q = memchr(q + 1, '"', len - (size_t)(q + 1 - d));
                if (!q)
                    return false;
                const char *b = q;
                while (b[-1] == '\\')
                    b--;
                if ((q - b) % 2 == 0)
                    break;
            }
            i = (size_t)(q - d);
            break;
        }
        case C_OPEN:
            if (depth == 0) {
                if (seen_top || c != '{')
                    return false;
                seen_top = true;
            }
            if (++depth > MAX_DEPTH)
                return false;
            if (depth == 2) {                  /* a top-level member's value */
                if (s->members == 0)
                    return false;
                vopen = i;
                mark = s->ncommas;
            }
            break;
        case C_CLOSE:
            if (depth == 0)
                return false;
            if (depth == 2) {
                if ((d[vopen] == '{') != (c == '}'))
                    return false;              /* mismatched: jansson will say so */
                if (i - vopen + 1 >= bigmin) {
                    if (!sl_grow(&s->bigs, &s->capbigs, s->nbigs, sizeof *s->bigs, SIZE_MAX / sizeof(big)))
                        return false;
                    s->bigs[s->nbigs++] = (big){ .open = vopen, .close = i, .member = s->members - 1,
                                                 .comma0 = mark, .ncommas = s->ncommas - mark };
                } else {
                    s->ncommas = mark;         /* small: its commas are not needed */
                }
            }
            depth--;
            break;
        case C_COMMA:
            if (depth == 2) {
                if (!sl_grow(&s->commas, &s->capcommas, s->ncommas, sizeof(size_t), SIZE_MAX / sizeof(size_t)))
                    return false;
                s->commas[s->ncommas++] = i;
            }
            break;
        case C_COLON:
            if (depth == 1)
                s->members++;
            break;
        }
        i++;
    }
    return seen_top && depth == 0;
}

/* ---- slices and threads ---------------------------------------------- */

typedef struct task {
    const char *p;
    size_t n;
    char open;                 /* wrap p[0..n) in this and its partner; 0: p is a whole value */
    json_t *value;             /* the parse, or NULL */
} task;

typedef struct job {
    task *tasks;
    size_t ntasks;
    atomic_size_t next;        /* the next task to take */
    atomic_bool failed;        /* stop: the result will be thrown away */
} job;

/* Feeds jansson open, the slice, close: no copy of the slice is made. */
typedef struct feed {
    const task *t;
    size_t pos;                /* in open + slice + close */
} feed;

static size_t feed_next(void *buf, size_t cap, void *arg)
{
    feed *f = arg;
    const task *t = f->t;
    char *out = buf;
    size_t n = 0;
    if (f->pos == 0 && n < cap) {
        out[n++] = t->open;
        f->pos++;
    }
    if (f->pos >= 1 && f->pos <= t->n && n < cap) {
        size_t k = t->n - (f->pos - 1);
        if (k > cap - n)
            k = cap - n;
        memcpy(out + n, t->p + (f->pos - 1), k);
        n += k;
        f->pos += k;
    }
    if (f->pos == t->n + 1 && n < cap) {
        out[n++] = t->open == '{' ? '}' : ']';
        f->pos++;
    }
    return n;                                  /* 0: the end */
}

static bool parse_task(task *t)
{
    json_error_t e;
    if (!t->open) {
        t->value = json_loadb(t->p, t->n, 0, &e);
    } else {
        feed f = { .t = t };
        t->value = json_load_callback(feed_next, &f, 0, &e);
    }
    return t->value != NULL;
}

static void run_tasks(job *j)
{
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->ntasks)
            return;
        if (!atomic_load(&j->failed) && !parse_task(&j->tasks[i]))
            atomic_store(&j->failed, true);
    }
}

static void *worker(void *arg)
{
    run_tasks(arg);
    return NULL;
}

/* How many slices of about per bytes a big value is cut into. */
static size_t slices(const big *g, size_t per)
{
    size_t k = (g->close - g->open + 1 + per / 2) / per;
    return k < 1 ? 1 : k > g->ncommas + 1 ? g->ncommas + 1 : k;
}

/* Cuts every big value into slices of about total/nthreads bytes (a value
 * smaller than that is one slice, parsed whole, alongside the others). */
static task *plan(const char *d, scan *s, unsigned nthreads, size_t *ntasks)
{
    size_t total = 0, n = 0;
    for (size_t b = 0; b < s->nbigs; b++)
        total += s->bigs[b].close - s->bigs[b].open + 1;
    size_t per = total / nthreads ? total / nthreads : 1;
    for (size_t b = 0; b < s->nbigs; b++)
        n += slices(&s->bigs[b], per);         /* at most */
    task *t = calloc(n, sizeof *t);
    if (!t)
        return NULL;
    n = 0;
    for (size_t b = 0; b < s->nbigs; b++) {
        big *g = &s->bigs[b];
        size_t size = g->close - g->open + 1;
        size_t k = slices(g, per);
        char open = d[g->open];
        g->task0 = n;
        if (k < 2) {
            t[n++] = (task){ .p = d + g->open, .n = size };
            g->ntasks = 1;
            continue;
        }
        size_t start = g->open + 1, ci = g->comma0, cend = g->comma0 + g->ncommas;
        for (size_t j = 1; j < k; j++) {
            size_t want = g->open + size / k * j;
            while (ci < cend && s->commas[ci] < want)
                ci++;
            if (ci == cend)
                break;
            t[n++] = (task){ .p = d + start, .n = s->commas[ci] - start, .open = open };
            start = s->commas[ci++] + 1;
        }
        t[n++] = (task){ .p = d + start, .n = g->close - start, .open = open };
        g->ntasks = n - g->task0;
    }
    *ntasks = n;
    return t;
}

/* The text with every big value replaced by {} or []. */
static char *skeleton(const char *d, size_t len, const scan *s, size_t *slen)
{
    size_t size = len;
    for (size_t b = 0; b < s->nbigs; b++)
        size -= s->bigs[b].close - s->bigs[b].open - 1;
    char *k = malloc(size ? size : 1);
    if (!k)
        return NULL;
    size_t from = 0, n = 0;
    for (size_t b = 0; b < s->nbigs; b++) {
        const big *g = &s->bigs[b];
        memcpy(k + n, d + from, g->open - from);
        n += g->open - from;
        k[n++] = d[g->open];
        k[n++] = d[g->close];
        from = g->close + 1;
    }
    memcpy(k + n, d + from, len - from);
    *slen = n + len - from;                    /* == size */
    return k;
}

/* One big value from its slices, in order; NULL if they cannot be its parse. */
static json_t *merge(const big *g, task *t)
{
    json_t *v = t[g->task0].value;
    bool obj = json_is_object(v);
    for (size_t i = g->task0; i < g->task0 + g->ntasks; i++) {
        json_t *p = t[i].value;
        /* "{}" would parse, but ",," in the original would not */
        if (g->ntasks > 1 && (obj ? json_object_size(p) : json_array_size(p)) == 0)
            return NULL;
        if (i > g->task0 && (obj ? json_object_update(v, p) : json_array_extend(v, p)))
            return NULL;
    }
    t[g->task0].value = NULL;                  /* the caller owns it now */
    return v;
}

static json_t *load_parallel(const char *d, size_t len, json_error_t *err, scan *s,
                             unsigned nthreads)
{
    size_t ntasks = 0;
    task *tasks = plan(d, s, nthreads, &ntasks);
    if (!tasks)
        return NULL;

    /* jansson seeds its hash function when the first object is made.
     * Its seeding is atomic in 2.14 where the compiler has atomics, but
     * seeding here, before any worker starts, needs no such promise (and
     * is a no-op once seeded). */
    json_object_seed(0);

    job j = { .tasks = tasks, .ntasks = ntasks };
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, false);
    pthread_t th[MAX_THREADS];
    unsigned started = 0;
    /* The calling thread parses the skeleton, then takes slices too. */
    while (started + 1 < nthreads && started < ntasks &&
           pthread_create(&th[started], NULL, worker, &j) == 0)
        started++;

    size_t slen = 0;
    char *stext = skeleton(d, len, s, &slen);
    json_t *skel = stext ? json_loadb(stext, slen, 0, err) : NULL;
    free(stext);
    if (!skel)
        atomic_store(&j.failed, true);
    run_tasks(&j);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);

    bool ok = skel && !atomic_load(&j.failed) && json_object_size(skel) == s->members;
    void *it = ok ? json_object_iter(skel) : NULL;
    for (size_t idx = 0, b = 0; ok && b < s->nbigs; idx++, it = json_object_iter_next(skel, it)) {
        if (!it) {
            ok = false;
            break;
        }
        if (idx != s->bigs[b].member)
            continue;
        json_t *ph = json_object_iter_value(it);
        json_t *v = merge(&s->bigs[b], tasks);
        if (!v || json_typeof(ph) != json_typeof(v) || json_object_size(ph) || json_array_size(ph)) {
            json_decref(v);
            ok = false;
        } else if (json_object_iter_set_new(skel, it, v)) {
            ok = false;
        }
        b++;
    }

    for (size_t i = 0; i < ntasks; i++)
        json_decref(tasks[i].value);
    free(tasks);
    if (!ok) {
        json_decref(skel);
        return NULL;
    }
    if (err)
        err->position = (int)len;              /* json_loadb's: every byte read */
    return skel;
}

json_t *sl_json_load_ex(const char *data, size_t len, json_error_t *err, size_t threshold,
                        unsigned nthreads)
{
    if (!data || len < threshold || nthreads < 2)
        return json_loadb(data, len, 0, err);
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;

    scan s = { 0 };
    json_t *r = NULL;
    size_t bigmin = len / 8 > 2 ? len / 8 : 2;
    if (scan_doc(data, len, bigmin, &s) && s.nbigs)
        r = load_parallel(data, len, err, &s, nthreads);
    free(s.bigs);
    free(s.commas);
    if (r) {
        atomic_fetch_add(&parallel_count, 1);
        return r;
    }
    return json_loadb(data, len, 0, err);
}

json_t *sl_json_load(const char *data, size_t len, json_error_t *err)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (unsigned)cpus;
    return sl_json_load_ex(data, len, err, SERIAL_BELOW, n);
}
