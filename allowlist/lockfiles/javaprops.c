/* Java .properties: the one reader the Gradle and Maven lockfile readers
 * share (see javaprops.h). */
#include "javaprops.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "text.h"

int sl_javaprops_get(const char *data, size_t len, const char *key, char *out, size_t cap)
{
    int found = 0, lineno = 1;
    size_t i = 0;
    while (i < len) {
        int start_line = lineno;
        /* One logical line, unescaped into buf; keylen marks where the key ends. */
        char buf[4096];
        size_t k = 0, keylen = SIZE_MAX;
        bool leading = true, value_lead = false, comment = false;
        while (i < len) {
            char ch = data[i];
            if (ch == '\n' || ch == '\r') {
                i++;
                if (ch == '\r' && i < len && data[i] == '\n')
                    i++;
                lineno++;
                break;
            }
            if (leading && (ch == ' ' || ch == '\t' || ch == '\f')) {
                i++;
                continue;
            }
            if (leading && (ch == '#' || ch == '!'))
                comment = true;
            leading = false;
            if (comment) {
                i++;
                continue;
            }
            if (value_lead && (ch == ' ' || ch == '\t' || ch == '\f')) {
                i++;
                continue;
            }
            if (value_lead && (ch == '=' || ch == ':') && k == keylen) {
                value_lead = false;            /* one separator after the blanks */
                i++;
                while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\f'))
                    i++;
                continue;
            }
            value_lead = false;
            if (ch == '\\' && i + 1 < len) {
                char nx = data[i + 1];
                i += 2;
                if (nx == '\n' || nx == '\r') {
                    /* Continuation: skip the line break and the next line's blanks. */
                    lineno++;
                    if (nx == '\r' && i < len && data[i] == '\n')
                        i++;
                    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\f'))
                        i++;
                    continue;
                }
                char oc[4];
                size_t on = 1;
                if (nx == 't')
                    oc[0] = '\t';
                else if (nx == 'n')
                    oc[0] = '\n';
                else if (nx == 'r')
                    oc[0] = '\r';
                else if (nx == 'f')
                    oc[0] = '\f';
                else if (nx == 'u') {
                    unsigned cp = 0;
                    for (int d = 0; d < 4 && i < len; d++, i++) {
                        int v = sl_hexval((unsigned char)data[i]);
                        if (v < 0)
                            break;
                        cp = cp * 16 + (unsigned)v;
                    }
                    on = sl_utf8_encode(cp, oc);
                } else
                    oc[0] = nx;
                if (k + on < sizeof buf) {
                    memcpy(buf + k, oc, on);
                    k += on;
                }
                continue;
            }
            if (keylen == SIZE_MAX &&
                (ch == '=' || ch == ':' || ch == ' ' || ch == '\t' || ch == '\f')) {
                keylen = k;
                value_lead = ch == ' ' || ch == '\t' || ch == '\f';
                i++;
                if (!value_lead)
                    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\f'))
                        i++;
                continue;
            }
            if (k + 1 < sizeof buf)
                buf[k++] = ch;
            i++;
        }
        if (comment || k == 0)
            continue;
        if (keylen == SIZE_MAX)
            keylen = k;
        if (keylen == strlen(key) && memcmp(buf, key, keylen) == 0) {
            size_t vl = k - keylen < cap ? k - keylen : cap - 1;
            memcpy(out, buf + keylen, vl);
            out[vl] = '\0';
            found = start_line;
        }
    }
    return found;
}
