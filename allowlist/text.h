/* Small text helpers that the allowlist, the lockfile readers and the audit
 * tool share: hex digits, UTF-8 encoding, and showing untrusted bytes in a
 * message or on a terminal. Pure; only libc. (proxy/proto/ may include no
 * header outside its own folder, so http_parse.c keeps its own hex digit.) */
#ifndef SLUICE_TEXT_H
#define SLUICE_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The value of one hex digit ('0'-'9', 'a'-'f', 'A'-'F'): 0 to 15; -1 for
 * anything else (EOF and the negative values of a signed char included). */
int sl_hexval(int c);

/* The value of the n hex digits at s (n <= 8), or -1 when one of them is
 * not a hex digit. */
int64_t sl_hex_value(const char *s, size_t n);

/* cp as UTF-8 at out: returns the length, 1 to 4. A surrogate
 * (U+D800..U+DFFF) is encoded like any other code point; a caller that must
 * not produce one replaces it first. Above U+10FFFF: 0, nothing written. */
size_t sl_utf8_encode(uint32_t cp, char out[4]);

/* How a byte that is not printable ASCII (0x20..0x7e) is shown. */
enum {
    SL_DISPLAY_QMARK = 0,             /* as '?' */
    SL_DISPLAY_HEX = 1 << 0,          /* as \xNN, and '\' as \x5c: exact, can be read back */
    SL_DISPLAY_KEEP_HIGH = 1 << 1,    /* 0x80..0xff kept (a UTF-8 name stays readable):
                                       * only C0 controls and DEL are replaced */
    SL_DISPLAY_APOS = 1 << 2,         /* '\'' replaced too, for text quoted in '...' */
};

/* The form byte c takes under flags, at out (1 or 4 bytes, no NUL); returns
 * its length. */
size_t sl_display_byte(unsigned char c, unsigned flags, char out[4]);

/* len bytes of untrusted text as a NUL-terminated string for a message:
 * printable ASCII as is, other bytes as flags say, so that no byte can
 * drive a terminal or end a line. A byte's form is written only while the
 * longest form, "..." and the NUL still fit after it; when one does not,
 * "..." ends the text. So the text is cut to fit cap (>= 4: a smaller cap
 * gets an empty string). Returns buf. */
const char *sl_display_untrusted(const char *s, size_t len, char *buf, size_t cap, unsigned flags);

/* The same, uncut, written to out; returns the bytes (columns) written. */
size_t sl_display_write(FILE *out, const char *s, size_t len, unsigned flags);

#endif
