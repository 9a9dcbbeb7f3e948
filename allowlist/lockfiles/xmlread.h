/* XML config files (pom.xml, NuGet.Config) read with expat behind one
 * set-up: the same refusal of entity declarations (no entity expansion for
 * hostile input), the same "FILE:LINE: malformed XML" errors, and a way for
 * a reader's callbacks to stop the parse with FILE:LINE. The readers see no
 * expat type: xmlread.c alone includes expat.h. */
#ifndef SLUICE_XMLREAD_H
#define SLUICE_XMLREAD_H

#include <stdbool.h>
#include <stddef.h>

#include "lockfile.h"

/* Element callbacks; ud is the pointer given to sl_xml_parse. atts is
 * NULL-terminated name, value pairs. text may be NULL (text is dropped). */
typedef struct sl_xml_handlers {
    void (*start)(void *ud, const char *name, const char **atts);
    void (*end)(void *ud, const char *name);
    void (*text)(void *ud, const char *s, int len);
} sl_xml_handlers;

/* One parse in progress; readers embed it in their state to reach it from
 * the callbacks. */
typedef struct sl_xml {
    void *parser;             /* the XML_Parser while parsing, else NULL */
    const char *path;
    sl_lockerr *err;
    bool failed;              /* sl_xml_fail was called */
    const sl_xml_handlers *h;
    void *ud;
} sl_xml;

/* Parse all of data. Returns false with err set ("path:line: malformed
 * XML: …", the first sl_xml_fail, out of memory, file too large). */
bool sl_xml_parse(sl_xml *x, const char *path, const char *data, size_t len,
                  const sl_xml_handlers *h, void *ud, sl_lockerr *err);

/* From a callback: the line being read. */
int sl_xml_line(const sl_xml *x);

/* From a callback: refuse the file at the current line and stop parsing.
 * fmt has one %s, for arg. Only the first failure is kept. */
void sl_xml_fail(sl_xml *x, const char *fmt, const char *arg);

#endif
