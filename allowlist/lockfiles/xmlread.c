/* The expat set-up shared by the XML config readers (see xmlread.h). */
#include "xmlread.h"

#include <expat.h>
#include <limits.h>

int sl_xml_line(const sl_xml *x)
{
    return (int)XML_GetCurrentLineNumber(x->parser);
}

void sl_xml_fail(sl_xml *x, const char *fmt, const char *arg)
{
    if (x->failed)
        return;
    x->failed = true;
    sl_lockerr_set(x->err, x->path, sl_xml_line(x), fmt, arg);
    XML_StopParser(x->parser, XML_FALSE);
}

/* expat calls these (XMLCALL, XML_Char); they pass on to the reader's
 * plain-C callbacks so that readers need not include expat.h. */
static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    sl_xml *x = ud;
    x->h->start(x->ud, name, atts);
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    sl_xml *x = ud;
    x->h->end(x->ud, name);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    sl_xml *x = ud;
    x->h->text(x->ud, s, len);
}

/* A config has no business declaring entities; refusing them also keeps
 * entity expansion out of reach of hostile input. */
static void XMLCALL on_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value,
                              int value_len, const XML_Char *base, const XML_Char *system_id,
                              const XML_Char *public_id, const XML_Char *notation)
{
    (void)is_param, (void)value, (void)value_len, (void)base, (void)system_id, (void)public_id;
    (void)notation;
    sl_xml_fail(ud, "entity declaration '%s' is not allowed", name);
}

bool sl_xml_parse(sl_xml *x, const char *path, const char *data, size_t len,
                  const sl_xml_handlers *h, void *ud, sl_lockerr *err)
{
    *x = (sl_xml){.path = path, .err = err, .h = h, .ud = ud};
    XML_Parser xp = XML_ParserCreate(NULL);
    if (!xp) {
        sl_lockerr_set(err, path, 0, "out of memory");
        return false;
    }
    x->parser = xp;
    XML_SetUserData(xp, x);
    XML_SetElementHandler(xp, on_start, on_end);
    if (h->text)
        XML_SetCharacterDataHandler(xp, on_text);
    XML_SetEntityDeclHandler(xp, on_entity);
    bool ok = true;
    if (len > INT_MAX) {
        sl_lockerr_set(err, path, 0, "file too large");
        ok = false;
    } else if (XML_Parse(xp, data, (int)len, XML_TRUE) == XML_STATUS_ERROR) {
        if (!x->failed)
            sl_lockerr_set(err, path, sl_xml_line(x), "malformed XML: %s",
                           XML_ErrorString(XML_GetErrorCode(xp)));
        ok = false;
    } else if (x->failed) {
        ok = false;
    }
    XML_ParserFree(xp);
    x->parser = NULL;
    return ok;
}
