/* Java .properties files, read as java.util.Properties reads them: the
 * Gradle and Maven wrappers' configuration and gradle.properties. Pure:
 * bytes in, one value out. */
#ifndef SLUICE_JAVAPROPS_H
#define SLUICE_JAVAPROPS_H

#include <stddef.h>

/* The value of `key`, the last occurrence winning, unescaped ("\:" is ":",
 * "\t", "\uXXXX", a backslash at the end of a line continues it) into out,
 * cut to cap - 1 bytes and NUL-terminated. A line ends at \n, \r or \r\n.
 * Returns the line the key is on, 0 when it is absent (out untouched). */
int sl_javaprops_get(const char *data, size_t len, const char *key, char *out, size_t cap);

#endif
