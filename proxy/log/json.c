/* JSON line building. Written here rather than with jansson because the hot
 * path needs no allocation, and jansson refuses invalid UTF-8 where a log
 * must record it (as U+FFFD). */
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RESERVE 4   /* room always kept for the closing "}\n" */

size_t sl_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t need;
    uint32_t v;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        v = c & 0x07;
    } else
        return 0;
    if (n < need)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((need == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
        (need == 4 && (v < 0x10000 || v > 0x10ffff)))
        return 0;
    if (cp)
        *cp = v;
    return need;
}

size_t sl_json_escape(char *out, size_t cap, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len;) {
        /* Fast path: a run of printable ASCII that needs no escape. */
        size_t run = i;
        while (run < len && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i) {
            size_t n = run - i;
            if (o + n >= cap)
                n = cap - 1 - o;
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
            if (i < run)
                break;   /* out of room */
            continue;
        }
        char tmp[8];
        const char *piece = tmp;
        size_t plen, adv = 1;
        unsigned c = s[i];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            plen = 2;
        } else if (c == '\n') {
            piece = "\\n";
            plen = 2;
        } else if (c == '\r') {
            piece = "\\r";
            plen = 2;
        } else if (c == '\t') {
            piece = "\\t";
            plen = 2;
        } else if (c < 0x20 || c == 0x7f) {
            plen = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", c);
        } else if (c < 0x80) {
            tmp[0] = (char)c;
            plen = 1;
        } else {
            adv = sl_utf8_decode(s + i, len - i, NULL);
            if (adv == 0) {
                piece = "\\ufffd";
                plen = 6;
                adv = 1;
            } else {
                piece = (const char *)s + i;
                plen = adv;
            }
        }
        if (o + plen >= cap)
            break;
        memcpy(out + o, piece, plen);
        o += plen;
        i += adv;
    }
    out[o] = '\0';
    return o;
}

/* Fields are written whole or not at all: once one does not fit, the line
 * is marked full and later fields are dropped, so it stays valid JSON. */
static bool fits(const sl_json *j, size_t n)
{
    return !j->full && j->len + n + RESERVE <= j->cap;
}

static void put(sl_json *j, const char *s, size_t n)
{
    memcpy(j->buf + j->len, s, n);
    j->len += n;
}

/* Writes `"key":` (with the comma) if it and `need` more bytes fit. */
static bool key(sl_json *j, const char *k, size_t need)
{
    size_t klen = strlen(k);
    if (!fits(j, klen + 4 + need)) {
        j->full = true;
        return false;
    }
    if (!j->first)
        put(j, ",", 1);
    j->first = false;
    put(j, "\"", 1);
    put(j, k, klen);
    put(j, "\":", 2);
    return true;
}

void sl_json_begin(sl_json *j, char *buf, size_t cap)
{
    j->buf = buf;
    j->cap = cap;
    j->len = 0;
    j->first = true;
    j->full = cap < 16;
    if (!j->full)
        put(j, "{", 1);
}

void sl_json_str(sl_json *j, const char *k, const char *s, size_t len)
{
    if (!key(j, k, 2))
        return;
    put(j, "\"", 1);
    /* room left for the content, keeping the closing quote's byte */
    size_t room = j->cap - RESERVE - j->len - 1;
    j->len += sl_json_escape(j->buf + j->len, room + 1, s ? s : "", s ? len : 0);
    put(j, "\"", 1);
}

void sl_json_cstr(sl_json *j, const char *k, const char *s)
{
    sl_json_str(j, k, s, s ? strlen(s) : 0);
}

static void number(sl_json *j, const char *k, const char *text)
{
    size_t n = strlen(text);
    if (key(j, k, n))
        put(j, text, n);
}

char *sl_fmt_uint(char *out, unsigned long long v)
{
    char rev[20];
    int n = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *out++ = rev[--n];
    *out = '\0';
    return out;
}

void sl_json_int(sl_json *j, const char *k, long long v)
{
    char tmp[24], *p = tmp;
    if (v < 0)
        *p++ = '-';
    sl_fmt_uint(p, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
    number(j, k, tmp);
}

void sl_json_ms(sl_json *j, const char *k, double ms)
{
    char tmp[48];
    /* JSON has no NaN or infinity; a duration is never negative. */
    if (!(ms >= 0))
        ms = 0;
    if (ms > 1e15)
        ms = 1e15;
    /* Tenths, rounded half up, by hand (snprintf's %.1f was most of a
     * close line's cost). Below 1e15 a tenth is exact in a double. */
    unsigned long long tenths = (unsigned long long)(ms * 10.0 + 0.5);
    char *p = sl_fmt_uint(tmp, tenths / 10);
    *p++ = '.';
    *p++ = (char)('0' + tenths % 10);
    *p = '\0';
    number(j, k, tmp);
}

size_t sl_json_end(sl_json *j)
{
    if (j->len == 0)
        put(j, "{", 1);
    put(j, "}\n", 2);
    j->buf[j->len] = '\0';
    return j->len;
}

size_t sl_json_open_len(const sl_json *j)
{
    return j->len;
}
