/* sluice audit --verify: checking the hash chain (see audit_verify.h). */
#include "audit_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_input.h"
#include "crypto.h"

/* ,"chain":"<64 hex>"} */
#define SUFFIX_HEAD ",\"chain\":\""
#define SUFFIX_HEAD_LEN 10
#define SUFFIX_LEN (SUFFIX_HEAD_LEN + 64 + 2)

struct sl_verify {
    sl_verify_stream *streams;
    size_t n, cap;
    long cur;                  /* stream of the last good line, or -1 */
    unsigned long long total;
};

sl_verify *sl_verify_new(void)
{
    sl_verify *v = calloc(1, sizeof *v);
    if (v)
        v->cur = -1;
    return v;
}

void sl_verify_free(sl_verify *v)
{
    if (!v)
        return;
    free(v->streams);
    free(v);
}

static long find_stream(const sl_verify *v, const char *id)
{
    for (size_t i = 0; i < v->n; i++)
        if (memcmp(v->streams[i].id, id, 32) == 0)
            return (long)i;
    return -1;
}

static long add_stream(sl_verify *v, const char *id, unsigned long long seq, bool from_start)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        sl_verify_stream *s = realloc(v->streams, cap * sizeof *s);
        if (!s)
            return -1;
        v->streams = s;
        v->cap = cap;
    }
    sl_verify_stream *s = &v->streams[v->n];
    memset(s, 0, sizeof *s);
    memcpy(s->id, id, 32);
    s->first_seq = seq;
    s->from_start = from_start;
    return (long)v->n++;
}

#define WHY(...) (snprintf(why, whycap, __VA_ARGS__), false)

static bool seq_follows(unsigned long long seq, unsigned long long last, char *why, size_t whycap)
{
    if (seq == last + 1)
        return true;
    if (seq == last)
        return WHY("seq %llu repeats (duplicated line)", seq);
    if (seq < last)
        return WHY("seq %llu follows seq %llu (line out of order or duplicated)", seq, last);
    if (seq == last + 2)
        return WHY("seq %llu follows seq %llu (line deleted or moved)", seq, last);
    return WHY("seq %llu follows seq %llu (%llu lines deleted or moved)", seq, last, seq - last - 1);
}

bool sl_verify_line(sl_verify *v, char *text, size_t len, bool complete, char *why, size_t whycap)
{
    if (!complete)
        return WHY("last line is incomplete (truncated)");
    sl_afields f;
    const char *bad;
    size_t at;
    if (!sl_aline_scan(text, len, &f, &bad, &at))
        return WHY("not valid JSON (%s at byte %zu)", bad, at + 1);
    if (!f.chain.set)
        return WHY("no chain field");
    /* The scanner found a top-level chain; it must be the last field. */
    if (f.chain.p + f.chain.len + 2 != text + len ||
        f.chain.p - text < SUFFIX_HEAD_LEN ||
        memcmp(f.chain.p - SUFFIX_HEAD_LEN, SUFFIX_HEAD, SUFFIX_HEAD_LEN) != 0)
        return WHY("chain is not the line's last field");
    if (!sl_astr_is_hex(&f.chain, 64))
        return WHY("chain is not 64 lowercase hex digits");
    if (!f.seq.set)
        return WHY("no seq field (a non-negative integer)");
    unsigned long long seq = f.seq.v;

    long si;
    const char *prev;
    size_t prev_len;
    if (f.stream.set) {
        if (!sl_astr_is_hex(&f.stream, 32))
            return WHY("stream is not 32 lowercase hex digits");
        si = find_stream(v, f.stream.p);
        if (f.continues_seq.set || f.continues_chain.set) {
            if (!f.continues_seq.set || !sl_astr_is_hex(&f.continues_chain, 64))
                return WHY("a continuation needs continues_seq and continues_chain (64 lowercase hex digits)");
            unsigned long long cseq = f.continues_seq.v;
            if (seq != cseq + 1)
                return WHY("seq %llu does not follow continues_seq %llu", seq, cseq);
            if (si >= 0) {
                sl_verify_stream *s = &v->streams[si];
                if (s->last_seq < cseq)
                    return WHY("continues stream %.32s from seq %llu, but its last line was seq %llu "
                               "(%llu lines deleted or moved)", s->id, cseq, s->last_seq, cseq - s->last_seq);
                if (s->last_seq > cseq)
                    return WHY("continues stream %.32s from seq %llu, but it already reached seq %llu "
                               "(line out of order or duplicated)", s->id, cseq, s->last_seq);
                if (memcmp(s->last_chain, f.continues_chain.p, 64) != 0)
                    return WHY("continues_chain is not the chain of seq %llu (edited line)", cseq);
                prev = s->last_chain;
            } else {
                prev = f.continues_chain.p;
            }
            prev_len = 64;
        } else {
            if (si >= 0)
                return WHY("stream %.32s starts again (duplicated first line)", f.stream.p);
            if (seq != 1)
                return WHY("first line of stream %.32s has seq %llu, not 1", f.stream.p, seq);
            prev = f.stream.p;
            prev_len = 32;
        }
    } else {
        if (v->cur < 0)
            return WHY("seq %llu has no stream to follow: the stream's first line is missing (deleted?)", seq);
        si = v->cur;
        if (!seq_follows(seq, v->streams[si].last_seq, why, whycap))
            return false;
        prev = v->streams[si].last_chain;
        prev_len = 64;
    }

    /* The chained text is the line without ,"chain":"<hex>" : its closing
     * brace goes where the chain field began, for the hash only. */
    char computed[65];
    char *brace = text + len - SUFFIX_LEN;
    char saved = *brace;
    *brace = '}';
    sl_chain_next(prev, prev_len, text, len - SUFFIX_LEN + 1, computed);
    *brace = saved;
    if (memcmp(computed, text + len - 66, 64) != 0)
        return WHY("chain mismatch (edited, inserted, deleted or reordered line)");

    if (si < 0) {
        si = add_stream(v, f.stream.p, seq, !f.continues_seq.set);
        if (si < 0)
            return WHY("out of memory");
    }
    sl_verify_stream *s = &v->streams[si];
    s->lines++;
    s->last_seq = seq;
    memcpy(s->last_chain, computed, 65);
    v->cur = si;
    v->total++;
    return true;
}

bool sl_verify_position(const sl_verify *v, const char **stream, unsigned long long *seq)
{
    if (v->cur < 0)
        return false;
    *stream = v->streams[v->cur].id;
    *seq = v->streams[v->cur].last_seq;
    return true;
}

size_t sl_verify_streams(const sl_verify *v, const sl_verify_stream **streams)
{
    *streams = v->streams;
    return v->n;
}

unsigned long long sl_verify_total(const sl_verify *v)
{
    return v->total;
}
