/* jansson's memory on transparent huge pages, for one short-lived command.
 *
 * Why: `sluice allow-from-lockfile` on a 38 MB package-lock.json builds a
 * jansson tree of about 140 MB out of millions of small mallocs. On the
 * virtual machines sluice is benchmarked on, the first touch of each 4 KiB
 * page costs about 17 us, and those page faults were most of the command's
 * time. glibc malloc can put its heap on huge pages, but only through an
 * environment tunable (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), which a
 * program cannot set for itself once it runs. So this module gives jansson
 * an allocator of its own (json_set_alloc_funcs): bump allocation in
 * 2 MiB regions, each aligned and advised MADV_HUGEPAGE, so one fault maps
 * a whole region.
 *
 * Freeing still means something: every region counts its live blocks, and
 * a region whose blocks are all freed goes back on a free list to be
 * reused (its pages already faulted in). So a walk over many lockfiles
 * needs about as much as its largest document, as with malloc, not the sum
 * of them all. Blocks over 256 KiB get a mapping of their own, unmapped
 * when freed. Allocation is thread-safe (each thread bumps in a region of
 * its own; regions come from a mutex-protected list), as sl_json_load
 * parses on several threads.
 *
 * For commands only, never the daemon: it is installed for the whole
 * process, so nothing else may use jansson while it is. No jansson value
 * may cross sl_jsonarena_begin or sl_jsonarena_end: one made before would
 * be freed into the arena, one alive after would point into unmapped
 * memory. Under AddressSanitizer every block is poisoned until allocated
 * and again once freed, and sl_jsonarena_end aborts if any block was never
 * freed (LeakSanitizer cannot see into the arena). */
#ifndef SLUICE_JSONARENA_H
#define SLUICE_JSONARENA_H

#include <stdbool.h>
#include <stddef.h>

/* Make the arena jansson's allocator. false (nothing changed) if it is
 * already installed. Call before any jansson call of the command. */
bool sl_jsonarena_begin(void);

/* Give jansson back the allocator it had, unmap every region. All jansson
 * values must have been freed, and no other thread may still use jansson.
 * Under AddressSanitizer, a block never freed is reported and aborts. */
void sl_jsonarena_end(void);

/* For tests: how many blocks are allocated now (other threads having
 * exited or retired their regions), and how many bytes of regions and
 * large blocks are mapped. */
size_t sl_jsonarena_live(void);
size_t sl_jsonarena_mapped(void);

#endif
