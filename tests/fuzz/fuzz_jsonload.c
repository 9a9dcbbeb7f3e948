/* allowlist/lockfiles/jsonload.c: sl_json_load against json_loadb, differentially.
 *
 * Input: a document. It is parsed by json_loadb(data, size, 0) and by
 * sl_json_load_ex with no threshold on 3 threads, so that any document whose
 * top level is an object with an object or array member takes the parallel
 * path: a structural scan picks cut points, the skeleton and the slices are
 * parsed on several threads and merged.
 *
 * Properties:
 *   - both refuse it, with the same error text, source, line, column and
 *     position; or
 *   - both accept it, with trees that are json_equal and dump (JSON_COMPACT,
 *     insertion order) to the same text, and the same error fields (on
 *     success json_loadb sets the position to the end of the input). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "jsonload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    json_error_t ea, eb;
    json_t *a = json_loadb(d, size, 0, &ea);
    json_t *b = sl_json_load_ex(d, size, &eb, 0, 3);
    FUZZ_CHECK(!a == !b, "json_loadb %s, sl_json_load %s (%s / %s)", a ? "accepts" : "refuses",
               b ? "accepts" : "refuses", ea.text, eb.text);
    FUZZ_CHECK(!strcmp(ea.text, eb.text), "error text '%s' vs '%s'", ea.text, eb.text);
    FUZZ_CHECK(!strcmp(ea.source, eb.source), "error source '%s' vs '%s'", ea.source, eb.source);
    FUZZ_CHECK(ea.line == eb.line && ea.column == eb.column && ea.position == eb.position,
               "error at %d:%d (%d) vs %d:%d (%d)", ea.line, ea.column, ea.position, eb.line,
               eb.column, eb.position);
    if (a) {
        FUZZ_CHECK(json_equal(a, b), "trees are not json_equal");
        char *da = json_dumps(a, JSON_COMPACT), *db = json_dumps(b, JSON_COMPACT);
        if (!da || !db)
            abort();
        FUZZ_CHECK(!strcmp(da, db), "dumps differ:\n  %s\n  %s", da, db);
        free(da);
        free(db);
    }
    json_decref(a);
    json_decref(b);
    return 0;
}
