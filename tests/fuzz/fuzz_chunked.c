/* The chunked body decoder (proxy/proto/http_parse.c, sl_chunked_feed), fed in
 * random splits as bytes arrive from a socket.
 *
 * Input: [k] [k split sizes] BODY, k = first byte & 7; split size s means
 * s + 1 bytes per call, cycling (k = 0: the body in one call).
 *
 * Properties: the outcome (error or not; bytes that belong to the body;
 * done) is the same whether the body comes in one call, in the input's
 * splits, or one byte at a time; a call returns at most what it was given,
 * fewer only once done; an empty call changes nothing; once done, calls
 * return 0; once failed, every call fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "http_parse.h"

typedef struct outcome {
    bool err;
    size_t consumed;
    bool done;
} outcome;

static outcome feed(const char *b, size_t n, const uint8_t *sizes, size_t nsizes, bool one_byte)
{
    sl_chunked c;
    sl_chunked_init(&c);
    outcome o = { false, 0, false };
    size_t pos = 0, call = 0;
    while (pos < n) {
        size_t step = one_byte ? 1 : nsizes ? (size_t)sizes[call % nsizes] + 1 : n - pos;
        call++;
        if (step > n - pos)
            step = n - pos;
        const char *err = NULL;
        FUZZ_CHECK(sl_chunked_feed(&c, b + pos, 0, &err) == 0, "an empty call did not return 0");
        long r = sl_chunked_feed(&c, b + pos, step, &err);
        if (r < 0) {
            FUZZ_CHECK(r == -1 && err != NULL && err[0], "failure %ld without a message", r);
            FUZZ_CHECK(sl_chunked_feed(&c, "0\r\n\r\n", 5, NULL) == -1, "a failed decoder recovered");
            FUZZ_CHECK(sl_chunked_feed(&c, b, 0, NULL) == -1, "a failed decoder recovered (empty call)");
            o.err = true;
            return o;
        }
        FUZZ_CHECK((size_t)r <= step, "returned %ld of %zu bytes", r, step);
        FUZZ_CHECK((size_t)r == step || c.done, "returned %ld of %zu bytes but not done", r, step);
        o.consumed += (size_t)r;
        pos += (size_t)r;
        if (c.done) {
            FUZZ_CHECK(sl_chunked_feed(&c, "0\r\n\r\n", 5, &err) == 0, "a call after the end took bytes");
            FUZZ_CHECK(sl_chunked_feed(&c, b, 0, &err) == 0, "an empty call after the end");
            break;
        }
    }
    o.done = c.done;
    return o;
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

    outcome whole = feed(body, n, NULL, 0, false);
    outcome split = feed(body, n, sizes, k, false);
    outcome bytes = feed(body, n, NULL, 0, true);
    FUZZ_CHECK(whole.err == split.err && whole.err == bytes.err,
               "error depends on the split: whole %d, split %d, byte-wise %d", whole.err, split.err,
               bytes.err);
    if (!whole.err) {
        FUZZ_CHECK(whole.consumed == split.consumed && whole.consumed == bytes.consumed,
                   "body length depends on the split: whole %zu, split %zu, byte-wise %zu",
                   whole.consumed, split.consumed, bytes.consumed);
        FUZZ_CHECK(whole.done == split.done && whole.done == bytes.done,
                   "end depends on the split: whole %d, split %d, byte-wise %d", whole.done,
                   split.done, bytes.done);
    }
    return 0;
}
