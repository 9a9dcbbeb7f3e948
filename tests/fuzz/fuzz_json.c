/* JSON log lines (proxy/log/json.c): sl_json_escape and the line builder, on
 * hostile strings (quotes, backslashes, control bytes, invalid UTF-8), with
 * buffers from tiny to ample. Output checked with jansson.
 *
 * Input: [b] DATA. DATA is escaped whole; then DATA split at 0xFF bytes
 * gives the field values of one line built in a buffer of 16 + 4*b bytes.
 *
 * Properties:
 *   - escaped text, in quotes, is a JSON string that jansson decodes to the
 *     input with every byte that does not start a valid UTF-8 sequence
 *     replaced by U+FFFD; it contains no raw control byte;
 *   - with a small buffer the output is a prefix of the full one, cut
 *     between escapes, still a valid JSON string, and NUL-terminated;
 *   - a built line is exactly one JSON object followed by one "\n", fits its
 *     buffer, holds each field written with its exact value, and once a
 *     field did not fit no later field appears. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "json.h"

/* Reference: the text jansson should decode the escaped input to. */
static size_t expected_text(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t need = 0;
        unsigned cp = 0, min = 0;
        if (c < 0x80) {
            out[o++] = (uint8_t)c;
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) need = 2, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0) need = 3, cp = c & 0x0f, min = 0x800;
        else if ((c & 0xf8) == 0xf0) need = 4, cp = c & 0x07, min = 0x10000;
        bool ok = need && n - i >= need;
        for (size_t k = 1; ok && k < need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                ok = false;
            else
                cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (ok && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
            ok = false;
        if (ok) {
            memcpy(out + o, s + i, need);
            o += need;
            i += need;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    return o;
}

static json_t *load(const char *text, size_t len, json_error_t *e)
{
    return json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, e);
}

static void check_string(const char *esc, size_t elen, const uint8_t *want, size_t wlen, bool exact)
{
    char *q = malloc(elen + 3);
    if (!q)
        abort();
    q[0] = '"';
    memcpy(q + 1, esc, elen);
    q[elen + 1] = '"';
    for (size_t i = 0; i < elen; i++)
        FUZZ_CHECK((unsigned char)esc[i] >= 0x20 && esc[i] != 0x7f, "raw control byte 0x%02x escaped as itself",
                   (unsigned char)esc[i]);
    json_error_t e;
    json_t *j = load(q, elen + 2, &e);
    FUZZ_CHECK(j && json_is_string(j), "escaped text is not a JSON string: %s", e.text);
    size_t got = json_string_length(j);
    const char *v = json_string_value(j);
    if (exact)
        FUZZ_CHECK(got == wlen && !memcmp(v, want, wlen), "escaped text decodes to %zu bytes, want %zu", got,
                   wlen);
    else
        FUZZ_CHECK(got <= wlen && !memcmp(v, want, got), "cut text is not a prefix of the input");
    json_decref(j);
    free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return -1;
    unsigned b = data[0];
    const uint8_t *s = data + 1;
    size_t n = size - 1;

    /* Escape with room to spare: never cut. */
    size_t cap = 6 * n + 1;
    char *full = malloc(cap);
    uint8_t *want = malloc(3 * n + 1);
    if (!full || !want)
        abort();
    size_t flen = sl_json_escape(full, cap, (const char *)s, n);
    FUZZ_CHECK(flen < cap && full[flen] == '\0' && strlen(full) == flen, "escape length");
    size_t wlen = expected_text(s, n, want);
    check_string(full, flen, want, wlen, true);

    /* Small buffers cut between escapes. */
    for (size_t c = 1; c <= 16 + (b & 63); c += 1 + (b >> 6)) {
        char small[96];
        memset(small, 'X', sizeof small);
        size_t slen = sl_json_escape(small, c, (const char *)s, n);
        FUZZ_CHECK(slen <= c - 1 && small[slen] == '\0', "escape into %zu bytes wrote %zu", c, slen);
        FUZZ_CHECK(small[c] == 'X', "escape into %zu bytes wrote past it", c);
        FUZZ_CHECK(!memcmp(small, full, slen), "cut escape is not a prefix of the full one");
        check_string(small, slen, want, wlen, false);
    }
    FUZZ_CHECK(sl_json_escape(full, 0, (const char *)s, n) == 0, "cap 0");

    /* One line from the fields. */
    size_t lcap = 16 + 4 * (size_t)b;
    char *line = malloc(lcap + 1);
    if (!line)
        abort();
    line[lcap] = 'X';
    sl_json j;
    sl_json_begin(&j, line, lcap);
    const uint8_t *p = s, *end = s + n;
    size_t nf = 0, written = 0;
    bool was_full = false;
    char keys[32][8];
    int kinds[32];
    const uint8_t *vals[32];
    size_t vlens[32];
    long long ints[32];
    while (nf < 32) {
        const uint8_t *ff = memchr(p, 0xff, (size_t)(end - p));
        const uint8_t *fe = ff ? ff : end;
        snprintf(keys[nf], sizeof keys[nf], "k%zu", nf);
        vals[nf] = p;
        vlens[nf] = (size_t)(fe - p);
        kinds[nf] = (int)(fuzz_hash(p, vlens[nf]) % 4);
        size_t before = sl_json_open_len(&j);
        switch (kinds[nf]) {
        case 0:
            sl_json_str(&j, keys[nf], (const char *)p, vlens[nf]);
            break;
        case 1: {
            char *c = fuzz_strndup(p, vlens[nf]);
            sl_json_cstr(&j, keys[nf], c);
            vlens[nf] = strlen(c);
            free(c);
            break;
        }
        case 2: {
            long long v = 0;
            memcpy(&v, p, vlens[nf] < sizeof v ? vlens[nf] : sizeof v);
            ints[nf] = v;
            sl_json_int(&j, keys[nf], v);
            break;
        }
        default: {
            double d = 0;
            memcpy(&d, p, vlens[nf] < sizeof d ? vlens[nf] : sizeof d);
            sl_json_ms(&j, keys[nf], d);
            break;
        }
        }
        FUZZ_CHECK(sl_json_open_len(&j) <= lcap - 3, "line overran its reserve");
        if (sl_json_open_len(&j) > before) {
            FUZZ_CHECK(!was_full, "field %zu written after one was dropped", nf);
            written = nf + 1;
        } else {
            was_full = true;
        }
        nf++;
        if (!ff)
            break;
        p = ff + 1;
    }
    size_t llen = sl_json_end(&j);
    FUZZ_CHECK(llen < lcap && line[llen] == '\0' && line[lcap] == 'X', "line of %zu in %zu bytes", llen, lcap);
    FUZZ_CHECK(llen >= 3 && line[llen - 1] == '\n' && memchr(line, '\n', llen - 1) == NULL,
               "line does not end in exactly one newline");
    json_error_t e;
    json_t *o = load(line, llen - 1, &e);
    FUZZ_CHECK(o && json_is_object(o), "line is not a JSON object: %s in '%s'", e.text, line);
    FUZZ_CHECK(json_object_size(o) == written, "line has %zu fields, %zu written",
               json_object_size(o), written);
    for (size_t i = 0; i < written; i++) {
        json_t *v = json_object_get(o, keys[i]);
        FUZZ_CHECK(v != NULL, "field %s missing", keys[i]);
        if (kinds[i] <= 1) {
            /* A string may be cut to fit; what is there is the input's start. */
            uint8_t *w = malloc(3 * vlens[i] + 1);
            size_t wl = expected_text(vals[i], vlens[i], w);
            FUZZ_CHECK(json_is_string(v) && json_string_length(v) <= wl &&
                           !memcmp(json_string_value(v), w, json_string_length(v)),
                       "field %s is not (a prefix of) its value", keys[i]);
            free(w);
        } else if (kinds[i] == 2) {
            FUZZ_CHECK(json_is_integer(v) && json_integer_value(v) == ints[i], "int field %s", keys[i]);
        } else {
            FUZZ_CHECK(json_is_number(v) && json_number_value(v) >= 0 && isfinite(json_number_value(v)),
                       "ms field %s", keys[i]);
        }
    }
    json_decref(o);
    free(line);
    free(full);
    free(want);
    return 0;
}
