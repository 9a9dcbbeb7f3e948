/* The decision log's writer (proxy/log/log.c): tickets, sl_log_written,
 * the stall and backlog checks and a bounded close, on a FIFO this test
 * reads itself (or does not). The tests share one log and run in order:
 * the last one leaves its writer stuck in a write, as a pipe nobody reads
 * would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "log.h"

static char dir[] = "/tmp/sluice-test-log-XXXXXX";
static char fifo[64];
static int rfd = -1;
static atomic_int progress_calls;

/* What was read from the FIFO, and the chain check so far. */
static char *got;
static size_t got_len, got_cap, checked;
static unsigned long long last_seq;
static char prev_chain[65];
static int continued;   /* first lines of a new file seen */

static void on_progress(void)
{
    atomic_fetch_add(&progress_calls, 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* One line of the log: seq one more than the last; a first line after a
 * reopen names the last seq and chain; its chain is SHA-256(previous chain
 * + the line without its chain field). */
static void check_line(const char *line, size_t len)
{
    const char *end = line + len;
    const char *c = memmem(line, len, ",\"chain\":\"", 10);
    assert_non_null(c);
    assert_true(c + 10 + 64 + 2 == end);
    const char *s = memmem(line, len, ",\"seq\":", 7);
    assert_non_null(s);
    unsigned long long seq = strtoull(s + 7, NULL, 10);
    assert_int_equal(seq, last_seq + 1);
    const char *cs = memmem(line, len, "\"continues_seq\":", 16);
    if (seq == 1) {
        const char *st = memmem(line, len, "\"stream\":\"", 10);
        assert_non_null(st);
        memcpy(prev_chain, st + 10, 32);
        prev_chain[32] = '\0';
    } else if (cs) {
        assert_int_equal(strtoull(cs + 16, NULL, 10), last_seq);
        const char *cc = memmem(line, len, "\"continues_chain\":\"", 19);
        assert_non_null(cc);
        assert_memory_equal(cc + 19, prev_chain, 64);
        continued++;
    }
    /* the text chained: up to the chain field, and its closing brace */
    size_t text_len = (size_t)(c - line) + 1;
    char *text = malloc(text_len);
    assert_non_null(text);
    memcpy(text, line, text_len - 1);
    text[text_len - 1] = '}';
    char next[65];
    sl_chain_next(prev_chain, strlen(prev_chain), text, text_len, next);
    free(text);
    assert_memory_equal(next, c + 10, 64);
    memcpy(prev_chain, next, sizeof prev_chain);
    last_seq = seq;
}

/* Read what the FIFO has and check its complete lines. Returns the seq of
 * the last line checked. */
static unsigned long long read_and_check(void)
{
    for (;;) {
        if (got_cap - got_len < 65536) {
            got_cap = got_cap ? got_cap * 2 : 1 << 20;
            got = realloc(got, got_cap);
            assert_non_null(got);
        }
        ssize_t n = read(rfd, got + got_len, got_cap - got_len);
        if (n <= 0) {
            assert_true(n == 0 || errno == EAGAIN);
            break;
        }
        got_len += (size_t)n;
    }
    char *nl;
    while ((nl = memchr(got + checked, '\n', got_len - checked)) != NULL) {
        check_line(got + checked, (size_t)(nl - (got + checked)));
        checked = (size_t)(nl - got) + 1;
    }
    return last_seq;
}

/* Check a whole log file: every line, and that it ends on a whole line. */
static void check_file(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        assert_int_equal(line[n - 1], '\n');
        check_line(line, (size_t)n - 1);
    }
    free(line);
    fclose(f);
}

/* A body of about `size` bytes (JSON without its closing brace). */
static uint64_t append(int n, size_t size)
{
    char body[4096];
    assert_true(size < sizeof body);
    int k = snprintf(body, sizeof body, "{\"n\":%d,\"pad\":\"", n);
    memset(body + k, 'x', size - (size_t)k - 1);
    body[size - 1] = '"';
    return sl_log_line(body, size);
}

static void wait_written(uint64_t ticket, bool reading)
{
    double until = now_s() + 10;
    while (!sl_log_written(ticket)) {
        assert_true(now_s() < until);
        if (reading)
            read_and_check();
        sleep_ms(1);
    }
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(fifo, sizeof fifo, "%s/log", dir);
    if (mkfifo(fifo, 0600) != 0)
        return -1;
    rfd = open(fifo, O_RDONLY | O_NONBLOCK);
    if (rfd < 0)
        return -1;
    fcntl(rfd, F_SETPIPE_SZ, 4096);   /* fills sooner than the default 64 KiB */
    char err[300];
    if (!sl_log_open(fifo, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    sl_log_set_progress_cb(on_progress);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char p[96];
    free(got);
    unlink(fifo);
    snprintf(p, sizeof p, "%s/a.log", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/b.log", dir);
    unlink(p);
    rmdir(dir);
    return 0;
}

static void test_tickets_count_lines_and_are_written_in_order(void **state)
{
    (void)state;
    assert_true(sl_log_written(0));
    uint64_t a = append(1, 100), b = append(2, 100), c = append(3, 100);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(c, 3);
    wait_written(c, false);
    assert_true(sl_log_written(a) && sl_log_written(b));
    assert_false(sl_log_written(c + 1));
    assert_true(atomic_load(&progress_calls) > 0);
    assert_int_equal(read_and_check(), 3);
    assert_false(sl_log_failing(NULL, 0));
}

static void test_a_blocked_write_fails_the_log_and_loses_nothing(void **state)
{
    (void)state;
    /* Nobody reads: the writer blocks in write(2), appending does not. */
    uint64_t last = 0;
    double t0 = now_s();
    for (int i = 0; i < 200; i++)
        last = append(i, 1000);
    assert_true(now_s() - t0 < 0.5);
    sleep_ms(50);
    assert_false(sl_log_written(last));
    sl_log_tick();
    assert_false(sl_log_failing(NULL, 0));   /* blocked, but not for a second yet */

    sleep_ms(1100);
    int calls = atomic_load(&progress_calls);
    sl_log_tick();
    char why[300];
    assert_true(sl_log_failing(why, sizeof why));
    assert_non_null(strstr(why, "a write has been blocked for 1000 ms"));
    assert_non_null(strstr(why, fifo));
    assert_true(atomic_load(&progress_calls) > calls);   /* workers are told */

    /* More than LOG_SOFT_MAX waits: the gate would stop accepting. */
    assert_false(sl_log_backlogged());
    size_t appended = 0;
    while (appended <= LOG_SOFT_MAX) {
        last = append(1000, 2000);
        assert_int_not_equal(last, 0);
        appended += 2000;
    }
    assert_true(sl_log_backlogged());

    /* Read: every line comes, in order, chained; then the log recovers. */
    wait_written(last, true);
    while (read_and_check() < last)
        sleep_ms(1);
    assert_int_equal(last_seq, last);
    assert_false(sl_log_backlogged());
    double until = now_s() + 5;
    while (sl_log_failing(NULL, 0)) {
        assert_true(now_s() < until);
        sleep_ms(5);
    }
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void wait_failing(void)
{
    double until = now_s() + 5;
    while (!sl_log_failing(NULL, 0)) {
        assert_true(now_s() < until);
        sleep_ms(1);
    }
}

/* A file that stops taking bytes in the middle of a line (here its size
 * limit; a full disk alike), then a reopen to another file: the lines
 * written stay, the half line is cut off again, and what was not written
 * is chained anew into the new file, which continues the chain. */
static void test_lines_not_written_move_whole_to_the_next_file(void **state)
{
    (void)state;
    char a[96], b[96];
    snprintf(a, sizeof a, "%s/a.log", dir);
    snprintf(b, sizeof b, "%s/b.log", dir);
    char err[300];
    assert_true(sl_log_reopen(a, err, sizeof err));
    uint64_t t = append(1, 1000);
    wait_written(t, true);
    off_t one = file_size(a);   /* the first line, with its continuation fields */
    t = append(2, 1000);
    wait_written(t, true);
    off_t line = file_size(a) - one;
    for (int i = 0; i < 10; i++)   /* so that b, under the same limit, takes the 7 lines moved */
        t = append(3, 1000);
    wait_written(t, true);

    /* Room for three more lines and half of a fourth. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)(file_size(a) + 3 * line + line / 2);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint64_t first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        last = append(10 + i, 1000);
        if (i == 0)
            first = last;
    }
    assert_false(sl_log_written(last));   /* and has them written now */
    wait_failing();
    char why[300];
    assert_true(sl_log_failing(why, sizeof why));
    assert_non_null(strstr(why, "File too large"));
    assert_true(sl_log_written(first + 2));
    assert_false(sl_log_written(first + 3));

    assert_true(sl_log_reopen(b, err, sizeof err));
    wait_written(last, false);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    double until = now_s() + 5;
    while (sl_log_failing(NULL, 0)) {
        assert_true(now_s() < until);
        sleep_ms(5);
    }
    int before = continued;
    check_file(a);   /* ends on a whole line: the half one was cut */
    check_file(b);
    assert_int_equal(continued, before + 2);   /* a and b each begin by continuing */
    assert_int_equal(last_seq, last);

    /* Back to the FIFO for the last test. */
    assert_true(sl_log_reopen(fifo, err, sizeof err));
    t = append(3, 100);
    wait_written(t, true);
    assert_int_equal(read_and_check(), t);
}

static void test_close_waits_at_most_three_seconds_for_a_stuck_write(void **state)
{
    (void)state;
    uint64_t last = 0;
    for (int i = 0; i < 100; i++)
        last = append(i, 1000);
    sleep_ms(50);
    assert_false(sl_log_written(last));

    char errpath[96];
    snprintf(errpath, sizeof errpath, "%s/stderr", dir);
    int saved = dup(STDERR_FILENO);
    int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && efd >= 0);
    dup2(efd, STDERR_FILENO);
    double t0 = now_s();
    sl_log_close();
    double took = now_s() - t0;
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(efd);
    assert_true(took >= 2.9 && took < 4.0);

    char text[512] = "";
    FILE *f = fopen(errpath, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(errpath);
    unsigned long bytes = 0;
    const char *m = strstr(text, "sluice: ");
    assert_non_null(m);
    assert_int_equal(sscanf(m, "sluice: %lu bytes of decision log could not be written at exit", &bytes), 1);
    assert_true(bytes > 50 * 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tickets_count_lines_and_are_written_in_order),
        cmocka_unit_test(test_a_blocked_write_fails_the_log_and_loses_nothing),
        cmocka_unit_test(test_lines_not_written_move_whole_to_the_next_file),
        cmocka_unit_test(test_close_waits_at_most_three_seconds_for_a_stuck_write),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
