/* One JSON object a line, built in a caller's fixed buffer. Every string is
 * escaped so that hostile input (quotes, backslashes, control bytes, invalid
 * UTF-8) still yields one valid line; a value that does not fit is cut. */
#ifndef SLUICE_JSON_H
#define SLUICE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_json {
    char *buf;
    size_t cap, len;
    bool first;
    bool full;      /* a field did not fit: later ones are dropped */
} sl_json;

void sl_json_begin(sl_json *j, char *buf, size_t cap);   /* cap >= 16 */
void sl_json_str(sl_json *j, const char *key, const char *s, size_t len);
void sl_json_cstr(sl_json *j, const char *key, const char *s);
void sl_json_int(sl_json *j, const char *key, long long v);
void sl_json_ms(sl_json *j, const char *key, double ms);   /* one decimal */
/* Ends the object with "}\n"; returns the line's length. */
size_t sl_json_end(sl_json *j);
/* The object so far, without its closing brace (for the log, which adds
 * its own last fields); returns its length. */
size_t sl_json_open_len(const sl_json *j);

/* The decimal digits of v at out (at most 20 and a NUL); returns the end
 * (the NUL). By hand: on the hot path printf cost more than what it
 * formatted. */
char *sl_fmt_uint(char *out, unsigned long long v);

/* Append s escaped as JSON string content (no quotes) into out; returns the
 * bytes written, never more than cap - 1, NUL-terminated. */
size_t sl_json_escape(char *out, size_t cap, const char *s, size_t len);

/* The well-formed UTF-8 sequence at s (n >= 1 bytes there): its length
 * (1 to 4) and, if cp is not NULL, its code point; 0 when it is not
 * well-formed (overlong, a surrogate, above U+10FFFF, cut short). The one
 * check the log writer, the audit reader and the audit reports share. */
size_t sl_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
