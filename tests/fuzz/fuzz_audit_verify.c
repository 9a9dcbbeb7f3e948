/* The decision log's hash-chain verifier (proxy/audit/audit_verify.c,
 * sl_verify_line), as `sluice audit --verify` feeds it.
 *
 * Input: [mode] LINES ('\n'-separated; a last line without '\n' is
 * incomplete). mode bit 0 set: before each line is verified, the harness
 * rewrites its chain field to the hash the verifier expects (same rules as
 * audit_verify.h: prev = the stream's last chain, the stream id for its
 * first line, continues_chain for a continuation of an unseen stream), so
 * that mutated lines get past the hash check and the stream, seq and
 * continuation logic is explored. Feeding stops at the first bad line.
 *
 * Properties: a refused line says why; the text is restored after hashing;
 * an accepted line advances the total by one and becomes the position
 * (its stream and seq); streams are listed once each. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_input.h"
#include "audit_verify.h"
#include "crypto.h"
#include "fuzz_util.h"

#define SUFFIX_LEN 76   /* ,"chain":"<64 hex>"} */
#define MAX_KNOWN 256

typedef struct known {
    char id[33];
    char last_chain[65];
} known;

static known g_known[MAX_KNOWN];
static size_t g_nknown;
static long g_cur;

static bool lower_hex(const sl_astr *s, size_t n)
{
    if (!s->set || s->esc || s->len != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s->p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static long find_known(const char *id)
{
    for (size_t i = 0; i < g_nknown; i++)
        if (!memcmp(g_known[i].id, id, 32))
            return (long)i;
    return -1;
}

/* Rewrite the chain of `text` to what the verifier will compute. */
static void fix_chain(char *text, size_t len)
{
    sl_afields f;
    if (len < SUFFIX_LEN + 1 || !sl_aline_scan(text, len, &f, NULL, NULL))
        return;
    if (!f.chain.set || f.chain.p + 66 != text + len ||
        memcmp(text + len - SUFFIX_LEN, ",\"chain\":\"", 10) != 0)
        return;
    const char *prev;
    size_t prev_len = 64;
    if (f.stream.set) {
        if (!lower_hex(&f.stream, 32))
            return;
        long i = find_known(f.stream.p);
        if (f.continues_seq.set || f.continues_chain.set) {
            if (i >= 0)
                prev = g_known[i].last_chain;
            else if (lower_hex(&f.continues_chain, 64))
                prev = f.continues_chain.p;
            else
                return;
        } else {
            prev = f.stream.p;
            prev_len = 32;
        }
    } else {
        if (g_cur < 0)
            return;
        prev = g_known[g_cur].last_chain;
    }
    char hex[65], saved = text[len - SUFFIX_LEN];
    char prevbuf[65];
    memcpy(prevbuf, prev, prev_len);     /* prev may point into the text */
    text[len - SUFFIX_LEN] = '}';
    sl_chain_next(prevbuf, prev_len, text, len - SUFFIX_LEN + 1, hex);
    text[len - SUFFIX_LEN] = saved;
    memcpy(text + len - 66, hex, 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return -1;
    bool fix = data[0] & 1;
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    sl_verify *v = sl_verify_new();
    if (!v)
        abort();
    g_nknown = 0;
    g_cur = -1;
    unsigned long long total = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t len = (size_t)(le - p);
        char *text = fuzz_strndup((const uint8_t *)p, len);
        if (fix)
            fix_chain(text, len);
        char *copy = fuzz_strndup((const uint8_t *)text, len);
        char why[512];
        why[0] = '\0';
        bool ok = sl_verify_line(v, text, len, nl != NULL, why, sizeof why);
        FUZZ_CHECK(!memcmp(text, copy, len), "line text not restored");
        if (!ok) {
            FUZZ_CHECK(why[0] != '\0', "line refused without a reason");
            free(text);
            free(copy);
            break;
        }
        total++;
        FUZZ_CHECK(sl_verify_total(v) == total, "total %llu, %llu lines accepted", sl_verify_total(v),
                   total);
        sl_afields f;
        FUZZ_CHECK(sl_aline_scan(text, len, &f, NULL, NULL) && f.seq.set && f.chain.set,
                   "accepted line without seq/chain");
        const char *stream;
        unsigned long long seq;
        FUZZ_CHECK(sl_verify_position(v, &stream, &seq) && seq == f.seq.v, "position after a good line");
        if (f.stream.set)
            FUZZ_CHECK(!memcmp(stream, f.stream.p, 32), "position's stream is not the line's");
        long i = find_known(stream);
        if (i < 0) {
            if (g_nknown == MAX_KNOWN) {
                free(text);
                free(copy);
                break;
            }
            i = (long)g_nknown++;
            memcpy(g_known[i].id, stream, 32);
            g_known[i].id[32] = '\0';
        }
        memcpy(g_known[i].last_chain, f.chain.p, 64);
        g_known[i].last_chain[64] = '\0';
        g_cur = i;
        free(text);
        free(copy);
        if (!nl)
            break;
        p = nl + 1;
    }
    const sl_verify_stream *st;
    size_t ns = sl_verify_streams(v, &st);
    FUZZ_CHECK(ns == g_nknown || g_nknown == MAX_KNOWN, "%zu streams listed, %zu seen", ns, g_nknown);
    for (size_t a = 0; a < ns; a++) {
        FUZZ_CHECK(st[a].lines >= 1 && st[a].first_seq <= st[a].last_seq, "stream %zu counters", a);
        for (size_t b = 0; b < a; b++)
            FUZZ_CHECK(memcmp(st[a].id, st[b].id, 32) != 0, "stream listed twice");
    }
    sl_verify_free(v);
    return 0;
}
