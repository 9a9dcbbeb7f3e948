/* json_loadb for large documents, on several CPUs.
 *
 * jansson parses about 45 MB/s and has no streaming API, so a 38 MB
 * package-lock.json costs over a second on one core. sl_json_load cuts the
 * document's biggest top-level objects into slices at their own member
 * commas, has jansson parse each slice on its own thread, and puts the
 * pieces back together. jansson still reads every byte and gives every
 * error: on anything unexpected the whole document is parsed again with
 * json_loadb, so the result, and on failure the error (text, line, column,
 * position), are always json_loadb's own. */
#ifndef SLUICE_JSONLOAD_H
#define SLUICE_JSONLOAD_H

#include <jansson.h>
#include <stddef.h>

/* json_loadb(data, len, 0, err), with the same result, tree (values, key
 * order) and error; a document of 4 MiB or more is parsed on up to 8
 * threads. err may be NULL. */
json_t *sl_json_load(const char *data, size_t len, json_error_t *err);

/* The same, with the size below which parsing is serial and the number of
 * threads given (nthreads <= 1: serial). For tests. */
json_t *sl_json_load_ex(const char *data, size_t len, json_error_t *err, size_t threshold,
                        unsigned nthreads);

/* For tests: how many documents the parallel path has returned so far (it
 * fell back to json_loadb for none of them). */
unsigned long sl_json_load_parallel_count(void);

#endif
