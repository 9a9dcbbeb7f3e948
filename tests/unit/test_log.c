/* The decision log's writer (proxy/log/log.c): tickets, sl_log_written,
 * the stall and backlog checks and a bounded close, on a FIFO this test
 * reads itself (or does not); and the streams of their own (sessions):
 * several at once with the gate's log, each file verifying on its own
 * (the audit's verifier), failing alone, closing once written, reopened.
 * The tests share one log and run in order: the last one leaves its
 * writer stuck in a write, as a pipe nobody reads would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit_verify.h"
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
    /* A session stream's line never reaches the gate's log. */
    assert_null(memmem(line, len, "\"to\":\"S", 7));
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
    const char *names[] = { "s1.log", "s2.log", "same.log", "put.log", "other.log", "rot1.log", "rot2.log",
                            "rot1.log.1", "rot2.log.1" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
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


/* ---- streams of their own ---- */

static void path_in_dir(char *dst, size_t cap, const char *name)
{
    snprintf(dst, cap, "%s/%s", dir, name);
}

static sl_log_stream *get_stream(const char *path)
{
    char err[400];
    sl_log_stream *s = sl_log_stream_get(path, err, sizeof err);
    if (!s)
        fprintf(stderr, "%s\n", err);
    assert_non_null(s);
    return s;
}

/* A body for stream `tag` ("M": the gate's log; "S1", "S2"...: streams). */
static uint64_t append_in(sl_log_stream *s, const char *tag, int t, int i)
{
    char body[200];
    int n = snprintf(body, sizeof body, "{\"to\":\"%s\",\"t\":%d,\"i\":%d,\"pad\":\"%0*d\"", tag, t, i, 40 + i % 50, 0);
    return sl_log_line_in(s, body, (size_t)n);
}

static void wait_written_in(sl_log_stream *s, uint64_t ticket)
{
    double until = now_s() + 10;
    while (!sl_log_written_in(s, ticket)) {
        assert_true(now_s() < until);
        read_and_check();   /* the gate's log is the FIFO: keep it flowing */
        sleep_ms(1);
    }
}

/* Feeds a file to v, line by line, as `sluice audit --verify` does; every
 * line must carry "to":"tag" and a seq one more than the line before
 * (across files fed to the same *last). Returns the lines. */
static unsigned long long verify_file(sl_verify *v, const char *path, const char *tag, unsigned long long *last)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char want[32];
    snprintf(want, sizeof want, "\"to\":\"%s\"", tag);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long long lines = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        assert_int_equal(line[n - 1], '\n');
        line[--n] = '\0';
        assert_non_null(strstr(line, want));
        const char *sq = strstr(line, ",\"seq\":");
        assert_non_null(sq);
        unsigned long long seq = strtoull(sq + 7, NULL, 10);
        if (*last != 0 || lines > 0)
            assert_int_equal(seq, *last + 1);
        *last = seq;
        char why[300];
        if (!sl_verify_line(v, line, (size_t)n, true, why, sizeof why)) {
            fprintf(stderr, "%s: %s\n", path, why);
            fail();
        }
        lines++;
    }
    free(line);
    fclose(f);
    return lines;
}

/* The whole file, from its stream's first line. */
static void verify_whole_file(const char *path, const char *tag, unsigned long long expect)
{
    sl_verify *v = sl_verify_new();
    unsigned long long last = 0;
    assert_int_equal(verify_file(v, path, tag, &last), expect);
    const sl_verify_stream *st;
    assert_int_equal(sl_verify_streams(v, &st), 1);   /* one stream, its own */
    assert_true(st[0].from_start);
    assert_int_equal(st[0].first_seq, 1);
    assert_int_equal(st[0].last_seq, expect);
    sl_verify_free(v);
}

/* Whether this process still has a descriptor open on path. */
static bool fd_open_on(const char *path)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    struct dirent *e;
    bool found = false;
    while ((e = readdir(d)) != NULL) {
        char link[300], target[300];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, path) == 0)
            found = true;
    }
    closedir(d);
    return found;
}

enum { THREADS = 4, PER_THREAD = 600 };

static sl_log_stream *mix_s1, *mix_s2;
static uint64_t mix_last[THREADS][3];   /* each thread's last ticket: gate's log, S1, S2 */
static atomic_int mix_running;

static void *mix_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int k = (i + t) % 3;
        uint64_t ticket = append_in(k == 0 ? NULL : k == 1 ? mix_s1 : mix_s2, k == 0 ? "M" : k == 1 ? "S1" : "S2", t, i);
        assert_int_not_equal(ticket, 0);
        mix_last[t][k] = ticket;
    }
    atomic_fetch_sub(&mix_running, 1);
    return NULL;
}

/* Lines for two streams and the gate's log, from several threads at once:
 * each file holds its own lines only, seq contiguous from 1, and verifies
 * on its own; the gate's log goes on as before. */
static void test_streams_interleaved_from_threads_each_verify_on_their_own(void **state)
{
    (void)state;
    char p1[96], p2[96];
    path_in_dir(p1, sizeof p1, "s1.log");
    path_in_dir(p2, sizeof p2, "s2.log");
    mix_s1 = get_stream(p1);
    mix_s2 = get_stream(p2);
    assert_ptr_not_equal(mix_s1, mix_s2);
    unsigned long long gate_before = last_seq;
    pthread_t th[THREADS];
    atomic_store(&mix_running, THREADS);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, mix_thread, (void *)(intptr_t)t), 0);
    while (atomic_load(&mix_running) > 0) {
        read_and_check();
        sleep_ms(1);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t max[3] = { 0, 0, 0 };
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < 3; k++)
            if (mix_last[t][k] > max[k])
                max[k] = mix_last[t][k];
    unsigned long long per_stream = (unsigned long long)THREADS * PER_THREAD / 3;
    assert_int_equal(max[1], per_stream);   /* tickets count a stream's own lines */
    assert_int_equal(max[2], per_stream);
    wait_written_in(NULL, max[0]);
    wait_written_in(mix_s1, max[1]);
    wait_written_in(mix_s2, max[2]);
    while (read_and_check() < max[0])
        sleep_ms(1);
    assert_int_equal(last_seq - gate_before, per_stream);   /* the gate's log got its own, chained on */
    verify_whole_file(p1, "S1", per_stream);
    verify_whole_file(p2, "S2", per_stream);
    assert_false(sl_log_failing(NULL, 0));
    assert_false(sl_log_failing_in(mix_s1, NULL, 0));
    sl_log_stream_put(mix_s1);
    sl_log_stream_put(mix_s2);
}

static void test_the_same_path_is_one_stream(void **state)
{
    (void)state;
    char p[96];
    path_in_dir(p, sizeof p, "same.log");
    sl_log_stream *a = get_stream(p);
    sl_log_stream *b = get_stream(p);
    assert_ptr_equal(a, b);
    uint64_t t1 = append_in(a, "S3", 0, 1);
    uint64_t t2 = append_in(b, "S3", 0, 2);
    assert_int_equal(t2, t1 + 1);   /* one seq between them */
    wait_written_in(a, t2);
    sl_log_stream_put(a);
    /* One reference left: still open, still the same stream. */
    uint64_t t3 = append_in(b, "S3", 0, 3);
    wait_written_in(b, t3);
    sleep_ms(250);   /* a writer that closed it at the first put would have by now */
    assert_true(fd_open_on(p));
    verify_whole_file(p, "S3", 3);
    sl_log_stream_put(b);
}

/* A FIFO nobody reads is refused at once: the one writer must never
 * block on a session's file. */
static void test_a_stream_on_a_fifo_without_reader_is_refused(void **state)
{
    (void)state;
    char p[96], err[400];
    path_in_dir(p, sizeof p, "nobody.fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_null(sl_log_stream_get(p, err, sizeof err));
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "cannot open log"));
    unlink(p);
    /* The gate's own file is not a stream of a session's. */
    assert_null(sl_log_stream_get(fifo, err, sizeof err));
    assert_non_null(strstr(err, "gate's own log"));
}

/* The last put: its lines are written first, then the file is closed. */
static void test_the_last_put_writes_its_lines_then_closes(void **state)
{
    (void)state;
    char p[96];
    path_in_dir(p, sizeof p, "put.log");
    sl_log_stream *s = get_stream(p);
    for (int i = 0; i < 300; i++)
        assert_int_not_equal(append_in(s, "S4", 0, i), 0);
    sl_log_stream_put(s);   /* at once: nothing was written yet (it gathers) */
    double until = now_s() + 5;
    while (fd_open_on(p)) {
        assert_true(now_s() < until);
        read_and_check();
        sleep_ms(5);
    }
    verify_whole_file(p, "S4", 300);
}

/* A stream whose file is deleted fails alone (the gate's log and other
 * streams go on), its lines wait, and once the file can be created again
 * they are written there, continuing the chain. */
static void test_a_deleted_stream_fails_alone_and_recovers(void **state)
{
    (void)state;
    char sub[96], p[128], q[96];
    path_in_dir(sub, sizeof sub, "sub");
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(p, sizeof p, "%s/del.log", sub);
    path_in_dir(q, sizeof q, "other.log");
    sl_log_stream *s = get_stream(p);
    sl_log_stream *other = get_stream(q);
    uint64_t t = append_in(s, "S5", 0, 1);
    wait_written_in(s, t);
    sleep_ms(250);   /* checked since its write: idle now, found by the turn over idle streams */

    /* Deleted, and it cannot be created again (its directory is gone). */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(rmdir(sub), 0);
    double until = now_s() + 5;
    while (!sl_log_failing_in(s, NULL, 0)) {
        assert_true(now_s() < until);
        read_and_check();
        sleep_ms(5);
    }
    char why[300];
    assert_true(sl_log_failing_in(s, why, sizeof why));
    assert_non_null(strstr(why, "was deleted"));
    assert_false(sl_log_failing(NULL, 0));
    assert_false(sl_log_failing_in(other, NULL, 0));
    t = append_in(s, "S5", 0, 2);
    uint64_t g = append(7, 100);
    uint64_t o = append_in(other, "S6", 0, 1);
    wait_written(g, true);        /* the gate's log is written */
    wait_written_in(other, o);    /* and the other stream */
    sleep_ms(300);
    assert_false(sl_log_written_in(s, t));   /* its line waits */
    assert_true(sl_log_failing_in(s, NULL, 0));
    assert_false(sl_log_failing(NULL, 0));

    /* The directory is back: the file is created again, the line written. */
    assert_int_equal(mkdir(sub, 0700), 0);
    wait_written_in(s, t);
    until = now_s() + 5;
    while (sl_log_failing_in(s, NULL, 0)) {
        assert_true(now_s() < until);
        sleep_ms(5);
    }
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[1000];
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_non_null(strstr(line, "\"continues_seq\":1,"));
    assert_non_null(strstr(line, "\"seq\":2,"));
    sl_verify *v = sl_verify_new();
    unsigned long long last = 1;
    assert_int_equal(verify_file(v, p, "S5", &last), 1);
    sl_verify_free(v);
    sl_log_stream_put(s);
    sl_log_stream_put(other);
    double until2 = now_s() + 5;
    while (fd_open_on(p)) {
        assert_true(now_s() < until2);
        sleep_ms(5);
    }
    unlink(p);
    rmdir(sub);
}

/* A session's FIFO whose reader stops reading: that stream fails (a write
 * blocked for a second), the gate's log is still written meanwhile (the
 * writer never blocks in a session's write), and once read, it recovers. */
static void test_a_stalled_stream_fails_alone(void **state)
{
    (void)state;
    char p[96];
    path_in_dir(p, sizeof p, "slow.fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    int r = open(p, O_RDONLY | O_NONBLOCK);
    assert_true(r >= 0);
    fcntl(r, F_SETPIPE_SZ, 4096);
    sl_log_stream *s = get_stream(p);
    uint64_t t = 0;
    for (int i = 0; i < 100; i++)
        t = append_in(s, "S7", 0, i);
    assert_false(sl_log_written_in(s, t));   /* and wanted now */
    double t0 = now_s();
    uint64_t g = 0;
    while (now_s() - t0 < 1.3) {
        g = append(8, 100);
        wait_written(g, true);   /* the gate's log keeps being written */
        sl_log_tick();
        sleep_ms(20);
    }
    char why[300];
    assert_true(sl_log_failing_in(s, why, sizeof why));
    assert_non_null(strstr(why, "a write has been blocked for 1000 ms"));
    assert_false(sl_log_failing(NULL, 0));
    assert_false(sl_log_written_in(s, t));

    /* Read it all: every line comes, chained, and the stream recovers. */
    sl_verify *v = sl_verify_new();
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    size_t len = 0;
    double until = now_s() + 10;
    while (!sl_log_written_in(s, t) || sl_log_failing_in(s, NULL, 0)) {
        assert_true(now_s() < until);
        ssize_t n = read(r, buf + len, (1 << 20) - len);
        if (n > 0)
            len += (size_t)n;
        sleep_ms(1);
    }
    ssize_t n;
    while ((n = read(r, buf + len, (1 << 20) - len)) > 0)
        len += (size_t)n;
    unsigned long long lines = 0;
    for (char *l = buf, *nl; (nl = memchr(l, '\n', (size_t)(buf + len - l))) != NULL; l = nl + 1) {
        char why2[300];
        assert_true(sl_verify_line(v, l, (size_t)(nl - l), true, why2, sizeof why2));
        lines++;
    }
    assert_int_equal(lines, 100);
    sl_verify_free(v);
    free(buf);
    close(r);   /* every line is read: the writer has nothing more for it */
    sl_log_stream_put(s);
    until = now_s() + 5;
    while (fd_open_on(p)) {
        assert_true(now_s() < until);
        sleep_ms(5);
    }
    unlink(p);
}

/* SIGUSR1 after logrotate renamed the files: every stream opens its path
 * again, and its new file's first line continues the old file's chain. */
static void test_reopen_continues_every_chain(void **state)
{
    (void)state;
    char p1[96], p2[96], o1[100], o2[100];
    path_in_dir(p1, sizeof p1, "rot1.log");
    path_in_dir(p2, sizeof p2, "rot2.log");
    snprintf(o1, sizeof o1, "%s.1", p1);
    snprintf(o2, sizeof o2, "%s.1", p2);
    sl_log_stream *a = get_stream(p1);
    sl_log_stream *b = get_stream(p2);
    uint64_t ta = 0, tb = 0;
    for (int i = 0; i < 5; i++) {
        ta = append_in(a, "S8", 0, i);
        tb = append_in(b, "S9", 0, i);
    }
    wait_written_in(a, ta);
    wait_written_in(b, tb);
    assert_int_equal(rename(p1, o1), 0);
    assert_int_equal(rename(p2, o2), 0);
    int before = continued;
    char err[300];
    assert_true(sl_log_reopen(fifo, err, sizeof err));
    for (int i = 5; i < 8; i++) {
        ta = append_in(a, "S8", 0, i);
        tb = append_in(b, "S9", 0, i);
    }
    uint64_t g = append(9, 100);
    wait_written_in(a, ta);
    wait_written_in(b, tb);
    wait_written(g, true);
    while (read_and_check() < g)
        sleep_ms(1);
    assert_int_equal(continued, before + 1);   /* the gate's log continued too */
    const char *paths[2][2] = { { o1, p1 }, { o2, p2 } };
    const char *tags[2] = { "S8", "S9" };
    for (int k = 0; k < 2; k++) {
        sl_verify *v = sl_verify_new();
        unsigned long long last = 0;
        assert_int_equal(verify_file(v, paths[k][0], tags[k], &last), 5);
        assert_int_equal(verify_file(v, paths[k][1], tags[k], &last), 3);   /* continues: seq 6.. */
        const sl_verify_stream *st;
        assert_int_equal(sl_verify_streams(v, &st), 1);
        assert_int_equal(st[0].last_seq, 8);
        sl_verify_free(v);
        FILE *f = fopen(paths[k][1], "r");
        char line[1000];
        assert_non_null(fgets(line, sizeof line, f));
        fclose(f);
        assert_non_null(strstr(line, "\"continues_seq\":5,"));
    }
    sl_log_stream_put(a);
    sl_log_stream_put(b);
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
        cmocka_unit_test(test_streams_interleaved_from_threads_each_verify_on_their_own),
        cmocka_unit_test(test_the_same_path_is_one_stream),
        cmocka_unit_test(test_a_stream_on_a_fifo_without_reader_is_refused),
        cmocka_unit_test(test_the_last_put_writes_its_lines_then_closes),
        cmocka_unit_test(test_a_deleted_stream_fails_alone_and_recovers),
        cmocka_unit_test(test_a_stalled_stream_fails_alone),
        cmocka_unit_test(test_reopen_continues_every_chain),
        cmocka_unit_test(test_close_waits_at_most_three_seconds_for_a_stuck_write),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
