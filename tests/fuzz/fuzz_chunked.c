/* The chunked body decoder (proxy/proto/http_parse.c, sl_chunked_feed and
 * sl_chunked_feed_data), fed in random splits as bytes arrive from a socket.
 *
 * Input: [k] [k split sizes] BODY, k = first byte & 7; split size s means
 * s + 1 bytes per call, cycling (k = 0: the body in one call).
 *
 * Properties: the outcome (error or not; bytes that belong to the body;
 * done) is the same whether the body comes in one call, in the input's
 * splits, or one byte at a time, and with or without a data callback; a
 * call returns at most what it was given, fewer only once done; an empty
 * call changes nothing; once done, calls return 0; once failed, every call
 * fails.
 *
 * The data callback (a pinned body is hashed over what it reports): the
 * runs it reports lie inside the bytes the call took, in order, and their
 * concatenation is the same for every split and equal to a simple
 * reference de-chunker's over the bytes the decoder accepted (all of them
 * up to the end, or up to the byte it refused). sl_chunked_data_done turns
 * true once, after the last chunk's size line, at the byte the reference
 * says, whatever the split; it is true whenever done is, no data follows
 * it, and it turns false again only when the decoder fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "http_parse.h"

#define NO_POS ((size_t)-1)

typedef struct outcome {
    bool err;
    size_t consumed;   /* bytes that belong to the body (error: none counted) */
    size_t fail_at;    /* byte-wise feed: the offset of the refused byte */
    bool done;
    size_t data_done_at;   /* bytes fed when data_done turned true, or NO_POS */
    size_t data_done_from; /* bytes fed before the call in which it did */
    char *data;            /* what the data callback reported, concatenated */
    size_t ndata;
} outcome;

/* What the callback sees during one call: the call's bytes, and where the
 * last run it reported ended (runs come in order, inside the call). */
typedef struct sink {
    outcome *o;
    const char *call_start, *call_end, *last_end;
    bool data_done;   /* data_done before this call: no data may come */
} sink;

static void on_data(void *ctx, const char *p, size_t n)
{
    sink *s = ctx;
    FUZZ_CHECK(n > 0, "an empty data run");
    FUZZ_CHECK(p >= s->last_end && p + n <= s->call_end && n <= (size_t)(s->call_end - p),
               "a data run outside the call's bytes or out of order (at %td, %zu bytes; call %td bytes)",
               p - s->call_start, n, s->call_end - s->call_start);
    FUZZ_CHECK(!s->data_done, "data after the last chunk's size line");
    memcpy(s->o->data + s->o->ndata, p, n);
    s->o->ndata += n;
    s->last_end = p + n;
}

static outcome feed(const char *b, size_t n, const uint8_t *sizes, size_t nsizes, bool one_byte,
                    bool with_data)
{
    sl_chunked c;
    sl_chunked_init(&c);
    outcome o = { false, 0, NO_POS, false, NO_POS, NO_POS, NULL, 0 };
    o.data = malloc(n ? n : 1);   /* data never exceeds the input */
    FUZZ_CHECK(o.data != NULL, "out of memory");
    FUZZ_CHECK(!sl_chunked_data_done(&c), "a fresh decoder has all its data");
    size_t pos = 0, call = 0;
    while (pos < n) {
        size_t step = one_byte ? 1 : nsizes ? (size_t)sizes[call % nsizes] + 1 : n - pos;
        call++;
        if (step > n - pos)
            step = n - pos;
        const char *err = NULL;
        FUZZ_CHECK(sl_chunked_feed(&c, b + pos, 0, &err) == 0, "an empty call did not return 0");
        bool dd_before = sl_chunked_data_done(&c);
        sink s = { &o, b + pos, b + pos + step, b + pos, dd_before };
        long r = with_data ? sl_chunked_feed_data(&c, b + pos, step, &err, on_data, &s)
                           : sl_chunked_feed(&c, b + pos, step, &err);
        if (r < 0) {
            FUZZ_CHECK(r == -1 && err != NULL && err[0], "failure %ld without a message", r);
            FUZZ_CHECK(!c.done, "a failed decoder says done");
            FUZZ_CHECK(sl_chunked_feed(&c, "0\r\n\r\n", 5, NULL) == -1, "a failed decoder recovered");
            FUZZ_CHECK(sl_chunked_feed(&c, b, 0, NULL) == -1, "a failed decoder recovered (empty call)");
            FUZZ_CHECK(!sl_chunked_data_done(&c), "a failed decoder still says its data is in");
            o.err = true;
            if (one_byte)
                o.fail_at = pos;
            return o;
        }
        FUZZ_CHECK((size_t)r <= step, "returned %ld of %zu bytes", r, step);
        FUZZ_CHECK((size_t)r == step || c.done, "returned %ld of %zu bytes but not done", r, step);
        FUZZ_CHECK(s.last_end <= b + pos + r, "a data run past the bytes the call took");
        size_t before = pos;
        o.consumed += (size_t)r;
        pos += (size_t)r;
        bool dd = sl_chunked_data_done(&c);
        FUZZ_CHECK(dd || !dd_before, "data_done turned false without a failure");
        if (dd && !dd_before) {
            o.data_done_from = before;
            o.data_done_at = pos;   /* byte-wise: just past the byte that did it */
        }
        FUZZ_CHECK(dd || !c.done, "done before the last chunk's size line");
        if (c.done) {
            FUZZ_CHECK(sl_chunked_feed(&c, "0\r\n\r\n", 5, &err) == 0, "a call after the end took bytes");
            FUZZ_CHECK(sl_chunked_feed(&c, b, 0, &err) == 0, "an empty call after the end");
            FUZZ_CHECK(sl_chunked_data_done(&c), "data_done false after the end");
            break;
        }
    }
    o.done = c.done;
    return o;
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A de-chunker that trusts the syntax (the decoder accepted these bytes):
 * a size in hex, the rest of its line skipped to CRLF, the data, CRLF.
 * Writes the data to out (its length to *nout) and returns the offset just
 * past the last chunk's size line, or NO_POS if b does not get that far. */
static size_t reference(const char *b, size_t n, char *out, size_t *nout)
{
    size_t i = 0;
    *nout = 0;
    for (;;) {
        uint64_t size = 0;
        size_t digits = 0;
        while (i < n && hexval((unsigned char)b[i]) >= 0 && digits < 16) {
            size = size << 4 | (uint64_t)hexval((unsigned char)b[i]);
            digits++;
            i++;
        }
        while (i < n && b[i] != '\r')
            i++;
        if (i + 1 >= n)
            return NO_POS;   /* the size line is not whole */
        i += 2;
        if (size == 0)
            return i;
        size_t take = (uint64_t)(n - i) < size ? n - i : (size_t)size;
        memcpy(out + *nout, b + i, take);
        *nout += take;
        i += take;
        if (take < size || i + 2 > n)
            return NO_POS;
        i += 2;
    }
}

static void same_data(const char *what, const outcome *a, const outcome *b)
{
    FUZZ_CHECK(a->ndata == b->ndata && memcmp(a->data, b->data, a->ndata) == 0,
               "chunk data depends on the split: %s (%zu bytes against %zu)", what, a->ndata, b->ndata);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return -1;
    size_t k = data[0] & 7;
    if (size < 1 + k)
        return -1;
    const uint8_t *sizes = data + 1;
    const char *body = (const char *)data + 1 + k;
    size_t n = size - 1 - k;

    outcome whole = feed(body, n, NULL, 0, false, true);
    outcome split = feed(body, n, sizes, k, false, true);
    outcome bytes = feed(body, n, NULL, 0, true, true);
    outcome plain = feed(body, n, sizes, k, false, false);
    FUZZ_CHECK(whole.err == split.err && whole.err == bytes.err && whole.err == plain.err,
               "error depends on the split: whole %d, split %d, byte-wise %d, without data %d", whole.err,
               split.err, bytes.err, plain.err);
    if (!whole.err) {
        FUZZ_CHECK(whole.consumed == split.consumed && whole.consumed == bytes.consumed &&
                       whole.consumed == plain.consumed,
                   "body length depends on the split: whole %zu, split %zu, byte-wise %zu, without data %zu",
                   whole.consumed, split.consumed, bytes.consumed, plain.consumed);
        FUZZ_CHECK(whole.done == split.done && whole.done == bytes.done && whole.done == plain.done,
                   "end depends on the split: whole %d, split %d, byte-wise %d, without data %d", whole.done,
                   split.done, bytes.done, plain.done);
    }
    same_data("whole and split", &whole, &split);
    same_data("whole and byte-wise", &whole, &bytes);

    /* What the decoder accepted: up to its end, up to the refused byte, or all. */
    size_t accepted = bytes.err ? bytes.fail_at : bytes.consumed;
    char *ref = malloc(n ? n : 1);
    FUZZ_CHECK(ref != NULL, "out of memory");
    size_t nref = 0;
    size_t ref_dd = reference(body, accepted, ref, &nref);
    FUZZ_CHECK(nref == bytes.ndata && memcmp(ref, bytes.data, nref) == 0,
               "chunk data differs from the reference de-chunker's (%zu bytes against %zu)", bytes.ndata, nref);
    FUZZ_CHECK(bytes.data_done_at == ref_dd, "data_done at byte %zu, the reference says %zu",
               bytes.data_done_at, ref_dd);
    /* In the other feeds it turned true in the call that took that byte
     * (unless that call failed). */
    const outcome *others[] = { &whole, &split };
    for (size_t i = 0; i < 2; i++) {
        const outcome *o = others[i];
        if (o->data_done_at != NO_POS)
            FUZZ_CHECK(ref_dd != NO_POS && o->data_done_from < ref_dd && ref_dd <= o->data_done_at,
                       "data_done (%s) turned true in the call over bytes %zu..%zu; the reference says %zu",
                       i ? "split" : "whole", o->data_done_from, o->data_done_at, ref_dd);
        else if (!o->err)
            FUZZ_CHECK(ref_dd == NO_POS, "data_done (%s) never turned true; the reference says at %zu",
                       i ? "split" : "whole", ref_dd);
    }
    if (whole.done)
        FUZZ_CHECK(ref_dd != NO_POS && ref_dd <= whole.consumed, "done, but the reference saw no last chunk");
    free(ref);
    free(whole.data);
    free(split.data);
    free(bytes.data);
    free(plain.data);
    return 0;
}
