/* Shared by the fuzz targets: splitting an input into named files, a tiny
 * deterministic PRNG, and property checks that abort (so libFuzzer keeps the
 * input as a crash artifact) with a message saying which property broke. */
#ifndef SLUICE_FUZZ_UTIL_H
#define SLUICE_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A broken property is a finding like a crash: print it and abort. */
#define FUZZ_CHECK(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "\nFUZZ PROPERTY VIOLATED at %s:%d: %s\n  ", __FILE__,  \
                    __LINE__, #cond);                                                \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* A property broken by a bug already reported can be switched off while
 * looking for others: FUZZ_IGNORE=id[,id...] in the environment (the ids are
 * the first argument of FUZZ_CHECK_ID, listed in README.md). Never set in
 * make test. */
static inline bool fuzz_ignored(const char *id)
{
    static const char *env;
    static bool read;
    if (!read) {
        env = getenv("FUZZ_IGNORE");
        read = true;
    }
    return env && strstr(env, id) != NULL;
}

#define FUZZ_CHECK_ID(id, cond, ...)                                                 \
    do {                                                                             \
        if (!fuzz_ignored(id))                                                       \
            FUZZ_CHECK(cond, __VA_ARGS__);                                           \
    } while (0)

/* ---- named files in one input -------------------------------------------
 *
 *   input   := NAME "\0" DATA ( "\0\0" NAME "\0" DATA )*
 *
 * The first file is the main one (a lockfile, a config). NAME is at most 255
 * bytes and may not be empty; a part that breaks these rules is skipped.
 * DATA starts after NAME's NUL and runs up to the next "\0\0" (or the end),
 * so it may hold single NULs (but cannot end in one).
 * make_corpus.sh writes fixture directories in this form. */

#define FUZZ_MAX_FILES 16

typedef struct fuzz_file {
    char name[256];
    const uint8_t *data;
    size_t len;
} fuzz_file;

static inline const uint8_t *fuzz_find_sep(const uint8_t *p, const uint8_t *end)
{
    for (; p + 1 < end; p++)
        if (p[0] == 0 && p[1] == 0)
            return p;
    return end;
}

/* Splits `in` into files; returns how many (files[0] is the main one only
 * when the first part was well formed: check its name). */
static inline size_t fuzz_split_files(const uint8_t *in, size_t len, fuzz_file *files, size_t max)
{
    size_t n = 0;
    const uint8_t *p = in, *end = in + len;
    bool first = true;
    while (n < max && p < end) {
        const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
        if (!nul)
            return first ? 0 : n;  /* a name without its NUL */
        const uint8_t *stop = fuzz_find_sep(nul + 1, end);
        if (nul > p && (size_t)(nul - p) < sizeof files[n].name) {
            memcpy(files[n].name, p, (size_t)(nul - p));
            files[n].name[nul - p] = '\0';
            files[n].data = nul + 1;
            files[n].len = (size_t)(stop - nul - 1);
            n++;
        } else if (first) {
            return 0;              /* no well-formed main file */
        }
        first = false;
        if (stop == end)
            break;
        p = stop + 2;
    }
    return n;
}

/* ---- a small PRNG for split points ---- */

static inline uint64_t fuzz_rand(uint64_t *s)
{
    uint64_t x = *s += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline uint64_t fuzz_hash(const uint8_t *d, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ULL;
    return h;
}

/* A NUL-terminated heap copy (the caller frees). */
static inline char *fuzz_strndup(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    if (n)
        memcpy(s, d, n);
    s[n] = '\0';
    return s;
}

/* Printable form of bytes for property messages. */
static inline const char *fuzz_show(const void *d, size_t n, char *buf, size_t cap)
{
    const unsigned char *s = d;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\')
            buf[o++] = (char)s[i];
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", s[i]);
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

#endif
