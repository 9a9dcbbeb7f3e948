/* Edge counters for the daemon fuzzer (tests/fuzz/daemon/).
 *
 * The daemon is compiled with -fsanitize-coverage=trace-pc-guard; this file
 * (compiled without it) numbers the guards and counts hits into a file the
 * harness maps too, named by SLUICE_COVERAGE_MAP. The harness zeroes the
 * counters before a case and reads them after. Layout:
 *
 *   bytes 0..7    "SLCOV1\0\0"
 *   bytes 8..11   number of guards (little-endian uint32), set at start-up
 *   bytes 64..    one saturating 8-bit counter per guard (guard n at 64 + n)
 *
 * Without the variable, or if the file cannot be mapped, the counters go to
 * a private buffer and the binary behaves like any other sluice build. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define COV_HEADER 64
#define COV_PRIVATE (1u << 18)

void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop);
void __sanitizer_cov_trace_pc_guard(uint32_t *guard);

static uint8_t private_map[COV_PRIVATE];
static uint8_t *map;
static size_t map_size;
static uint32_t nguards;

static void map_open(void)
{
    map = private_map;
    map_size = sizeof private_map;
    const char *path = getenv("SLUICE_COVERAGE_MAP");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > COV_HEADER) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            map = p;
            map_size = (size_t)st.st_size;
        }
    }
    close(fd);
}

void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop)
{
    if (start == stop || *start)
        return;   /* this module is numbered already */
    if (!map)
        map_open();
    /* Guards past the map's end share slot 0, which the harness ignores. */
    for (uint32_t *g = start; g < stop; g++) {
        ++nguards;
        *g = COV_HEADER + (size_t)nguards < map_size ? nguards : 0;
    }
    memcpy(map, "SLCOV1\0\0", 8);
    memcpy(map + 8, &nguards, sizeof nguards);
}

/* Counts race between threads; an edge is still seen, which is all that
 * matters here. */
void __sanitizer_cov_trace_pc_guard(uint32_t *guard)
{
    uint8_t *p = map + COV_HEADER + *guard;
    if (*p != 255)
        (*p)++;
}
