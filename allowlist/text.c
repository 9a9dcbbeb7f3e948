/* Hex digits, UTF-8 encoding and untrusted text for messages (text.h). */
#include "text.h"

#include <stdbool.h>
#include <string.h>

int sl_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int64_t sl_hex_value(const char *s, size_t n)
{
    int64_t v = 0;
    if (n > 8)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int d = sl_hexval((unsigned char)s[i]);
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

size_t sl_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp > 0x10ffff)
        return 0;
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t sl_display_byte(unsigned char c, unsigned flags, char out[4])
{
    bool hex = flags & SL_DISPLAY_HEX;
    bool shown = (c >= 0x20 && c < 0x7f) || (c >= 0x80 && (flags & SL_DISPLAY_KEEP_HIGH));
    if (hex && c == '\\')
        shown = false;               /* or "\x41" in the text would read as 'A' */
    if (c == '\'' && (flags & SL_DISPLAY_APOS))
        shown = false;
    if (shown) {
        out[0] = (char)c;
        return 1;
    }
    if (!hex) {
        out[0] = '?';
        return 1;
    }
    static const char digits[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = 'x';
    out[2] = digits[c >> 4];
    out[3] = digits[c & 15];
    return 4;
}

const char *sl_display_untrusted(const char *s, size_t len, char *buf, size_t cap, unsigned flags)
{
    if (cap < 4) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    size_t longest = (flags & SL_DISPLAY_HEX) ? 4 : 1, k = 0;
    for (size_t i = 0; i < len; i++) {
        if (k + longest + 4 > cap) {
            memcpy(buf + k, "...", 4);
            return buf;
        }
        k += sl_display_byte((unsigned char)s[i], flags, buf + k);
    }
    buf[k] = '\0';
    return buf;
}

size_t sl_display_write(FILE *out, const char *s, size_t len, unsigned flags)
{
    size_t cols = 0;
    for (size_t i = 0; i < len; i++) {
        char f[4];
        size_t n = sl_display_byte((unsigned char)s[i], flags, f);
        fwrite(f, 1, n, out);
        cols += n;
    }
    return cols;
}
