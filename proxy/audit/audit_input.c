/* sluice audit: reading decision logs (see audit_input.h). */
#include "audit_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "json.h"
#include "text.h"

#define CHUNK (256u << 10)                       /* one gzread */
#define BUF_MIN (2u * CHUNK)
#define BUF_MAX (SL_AIN_LINE_MAX + CHUNK + 1u)   /* a longest line, plus one chunk */
#define POLL_MS 200                              /* follow: how often to look again */

struct sl_ain {
    gzFile gz;
    char *path;
    const char *name;
    bool is_stdin;
    dev_t dev;
    ino_t ino;

    char *buf;
    size_t cap, start, end, scan;   /* unread bytes are buf[start..end); no '\n' in [start..scan) */
    bool skipping;                  /* inside an over-long line: discard up to its newline */
    unsigned long long lineno;

    bool unread;
    sl_ain_status last_status;
    sl_aline last;

    bool follow;
    volatile sig_atomic_t *stop;
    bool idle_due;                  /* lines were delivered since the last IDLE */
    int rotate_polls;               /* polls since the path was seen naming another file */
    bool switch_pending;            /* switch to the new file on the next call */
    bool badgz_reported;

    char err[512];
};

/* ---- opening ---- */

static gzFile open_gz(const char *path, bool is_stdin, struct stat *st, char *err, size_t errcap)
{
    int fd = is_stdin ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "%s: cannot open: %s", is_stdin ? "<stdin>" : path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, st) != 0) {
        snprintf(err, errcap, "%s: cannot stat: %s", is_stdin ? "<stdin>" : path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st->st_mode)) {
        snprintf(err, errcap, "%s: is a directory", path);
        close(fd);
        return NULL;
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        snprintf(err, errcap, "%s: cannot open: out of memory", is_stdin ? "<stdin>" : path);
        close(fd);
        return NULL;
    }
    gzbuffer(gz, 128u << 10);
    return gz;
}

sl_ain *sl_ain_open(const char *path, char *err, size_t errcap)
{
    sl_ain *in = calloc(1, sizeof *in);
    if (!in)
        goto oom;
    in->is_stdin = strcmp(path, "-") == 0;
    in->path = strdup(path);
    in->buf = malloc(BUF_MIN);
    if (!in->path || !in->buf)
        goto oom;
    in->cap = BUF_MIN;
    in->name = in->is_stdin ? "<stdin>" : in->path;
    struct stat st;
    in->gz = open_gz(path, in->is_stdin, &st, err, errcap);
    if (!in->gz) {
        sl_ain_close(in);
        return NULL;
    }
    in->dev = st.st_dev;
    in->ino = st.st_ino;
    in->idle_due = true;
    return in;
oom:
    snprintf(err, errcap, "%s: out of memory", path);
    sl_ain_close(in);
    return NULL;
}

void sl_ain_follow(sl_ain *in, volatile sig_atomic_t *stop)
{
    if (in->is_stdin)
        return;
    in->follow = true;
    in->stop = stop;
}

const char *sl_ain_name(const sl_ain *in) { return in->name; }
const char *sl_ain_error(const sl_ain *in) { return in->err; }
bool sl_ain_is_stdin(const sl_ain *in) { return in->is_stdin; }
unsigned long long sl_ain_lineno(const sl_ain *in) { return in->lineno; }

void sl_ain_close(sl_ain *in)
{
    if (!in)
        return;
    if (in->gz)
        gzclose_r(in->gz);
    free(in->buf);
    free(in->path);
    free(in);
}

/* ---- reading ---- */

static void reset_buffer(sl_ain *in)
{
    in->start = in->end = in->scan = 0;
    in->skipping = false;
}

/* Read one chunk. Returns bytes read, 0 at end of file, -1 on a read
 * error (zlib knows which), -2 out of memory (in->err says so). */
static int fill(sl_ain *in)
{
    if (in->start == in->end)
        in->start = in->end = in->scan = 0;
    if (in->cap - in->end < CHUNK && in->start > 0) {
        memmove(in->buf, in->buf + in->start, in->end - in->start);
        in->end -= in->start;
        in->scan -= in->start;
        in->start = 0;
    }
    if (in->cap - in->end < CHUNK && in->cap < BUF_MAX) {
        size_t cap = in->cap * 2 > BUF_MAX ? BUF_MAX : in->cap * 2;
        char *b = realloc(in->buf, cap);
        if (!b) {
            snprintf(in->err, sizeof in->err, "%s: out of memory", in->name);
            return -2;
        }
        in->buf = b;
        in->cap = cap;
    }
    size_t room = in->cap - in->end;
    if (room > CHUNK)
        room = CHUNK;
    int n = gzread(in->gz, in->buf + in->end, (unsigned)room);
    if (n > 0)
        in->end += (size_t)n;
    return n;
}

/* After gzread failed or ended: the status for what zlib says. */
static sl_ain_status read_problem(sl_ain *in, bool at_eof)
{
    int errnum = Z_OK;
    const char *msg = gzerror(in->gz, &errnum);
    if (strncmp(msg, "<fd:", 4) == 0 && strstr(msg, ": "))
        msg = strstr(msg, ": ") + 2;    /* zlib names the descriptor; we name the file */
    if (errnum == Z_ERRNO) {
        snprintf(in->err, sizeof in->err, "%s: read error: %s", in->name, strerror(errno));
        return SL_AIN_ERROR;
    }
    if (errnum == Z_BUF_ERROR && at_eof) {
        snprintf(in->err, sizeof in->err, "%s: compressed data ends early (file cut short)", in->name);
        return SL_AIN_BADGZ;
    }
    if (errnum == Z_DATA_ERROR || errnum == Z_BUF_ERROR) {
        snprintf(in->err, sizeof in->err, "%s: compressed data is corrupt: %s", in->name, msg);
        return SL_AIN_BADGZ;
    }
    if (errnum != Z_OK) {
        snprintf(in->err, sizeof in->err, "%s: read error: %s", in->name, msg);
        return SL_AIN_ERROR;
    }
    return SL_AIN_EOF;
}

static bool stopped(const sl_ain *in)
{
    return !in->follow || (in->stop && *in->stop);
}

static void nap(void)
{
    struct timespec ts = { 0, POLL_MS * 1000000L };
    nanosleep(&ts, NULL);   /* a signal cuts it short: the caller looks at *stop */
}

/* Open the path again (it was rotated: it names a new file now). */
static bool switch_file(sl_ain *in)
{
    struct stat st;
    char err[512];
    gzFile gz = open_gz(in->path, false, &st, err, sizeof err);
    if (!gz)
        return false;     /* not there yet: rotated away, not created again */
    gzclose_r(in->gz);
    in->gz = gz;
    in->dev = st.st_dev;
    in->ino = st.st_ino;
    in->lineno = 0;
    in->rotate_polls = 0;
    in->badgz_reported = false;
    reset_buffer(in);
    return true;
}

static sl_ain_status emit(sl_ain *in, sl_aline *out, size_t len, bool complete, size_t next)
{
    in->lineno++;
    out->text = in->buf + in->start;
    out->len = len;
    out->lineno = in->lineno;
    out->complete = complete;
    in->start = in->scan = next;
    in->last = *out;        /* for sl_ain_unread */
    in->last_status = SL_AIN_LINE;
    in->idle_due = true;
    return SL_AIN_LINE;
}

/* follow, at end of file: rotation, truncation, or wait. Returns IDLE to
 * hand back to the caller, LINE for a pending partial line, or EOF to
 * mean "try reading again". */
static sl_ain_status follow_wait(sl_ain *in, sl_aline *out)
{
    if (in->idle_due) {
        in->idle_due = false;
        return SL_AIN_IDLE;
    }
    struct stat st;
    if (stat(in->path, &st) == 0) {
        if (st.st_ino != in->ino || st.st_dev != in->dev) {
            /* Rotated. Give the writer one more poll to finish with the
             * old file (it flushes there before it reopens), then move. */
            if (++in->rotate_polls > 1) {
                if (in->end > in->start && !in->skipping) {
                    in->switch_pending = true;
                    return emit(in, out, in->end - in->start, false, in->end);
                }
                if (switch_file(in))
                    return SL_AIN_EOF;
            }
        } else if (!in->skipping && gzoffset(in->gz) > st.st_size) {
            /* Truncated in place (copytruncate): start again from its top. */
            gzrewind(in->gz);
            in->lineno = 0;
            reset_buffer(in);
            return SL_AIN_EOF;
        }
    }
    nap();
    gzclearerr(in->gz);
    return SL_AIN_EOF;
}

sl_ain_status sl_ain_next(sl_ain *in, sl_aline *out)
{
    if (in->unread) {
        in->unread = false;
        *out = in->last;
        return in->last_status;
    }
    if (in->switch_pending) {
        in->switch_pending = false;
        while (!switch_file(in) && !stopped(in))
            nap();
    }
    for (;;) {
        char *nl = in->scan < in->end ? memchr(in->buf + in->scan, '\n', in->end - in->scan) : NULL;
        if (nl) {
            size_t pos = (size_t)(nl - in->buf);
            if (in->skipping) {
                in->skipping = false;
                in->start = in->scan = pos + 1;
                continue;
            }
            size_t len = pos - in->start;
            if (len > SL_AIN_LINE_MAX) {
                in->lineno++;
                in->start = in->scan = pos + 1;
                memset(out, 0, sizeof *out);
                out->lineno = in->lineno;
                in->last = *out;
                in->last_status = SL_AIN_LONG;
                return SL_AIN_LONG;
            }
            return emit(in, out, len, true, pos + 1);
        }
        in->scan = in->end;
        if (in->skipping) {
            in->start = in->scan = in->end = 0;
        } else if (in->end - in->start > SL_AIN_LINE_MAX) {
            in->lineno++;
            in->skipping = true;
            in->start = in->scan = in->end = 0;
            memset(out, 0, sizeof *out);
            out->lineno = in->lineno;
            in->last = *out;
            in->last_status = SL_AIN_LONG;
            return SL_AIN_LONG;
        }
        int n = fill(in);
        if (n > 0)
            continue;
        if (n == -2)
            return SL_AIN_ERROR;
        if (n < 0) {
            sl_ain_status st = read_problem(in, false);
            if (st == SL_AIN_EOF) {
                snprintf(in->err, sizeof in->err, "%s: read error", in->name);
                return SL_AIN_ERROR;
            }
            if (st != SL_AIN_BADGZ)
                return st;
            if (!in->badgz_reported) {
                in->badgz_reported = true;
                return st;
            }
            /* Said once: what is left is the end of this file. */
            if (!in->skipping && in->end > in->start)
                return emit(in, out, in->end - in->start, false, in->end);
            return SL_AIN_EOF;
        }
        if (!stopped(in)) {
            sl_ain_status st = follow_wait(in, out);
            if (st != SL_AIN_EOF)
                return st;
            continue;
        }
        /* The end. A last line without its newline first, then what zlib
         * has to say about the compressed stream. */
        if (!in->skipping && in->end > in->start)
            return emit(in, out, in->end - in->start, false, in->end);
        sl_ain_status st = read_problem(in, true);
        if (st == SL_AIN_EOF || in->badgz_reported)
            return SL_AIN_EOF;
        in->badgz_reported = true;
        return st;
    }
}

void sl_ain_unread(sl_ain *in)
{
    in->unread = true;
}

/* ---- the JSON scanner ---- */

enum { F_STR, F_NUM };

typedef struct field_desc {
    const char *name;
    unsigned char len, type;
    size_t off;
} field_desc;

#define FS(n, m) { n, sizeof n - 1, F_STR, offsetof(sl_afields, m) }
#define FN(n, m) { n, sizeof n - 1, F_NUM, offsetof(sl_afields, m) }
static const field_desc fields[] = {
    FS("ts", ts), FS("event", event), FS("id", id), FS("client", client), FS("method", method),
    FS("host", host), FN("port", port), FS("decision", decision), FS("reason", reason),
    FS("end", end), FN("bytes_up", bytes_up), FN("bytes_down", bytes_down), FN("seq", seq),
    FS("chain", chain), FS("stream", stream), FN("continues_seq", continues_seq),
    FS("continues_chain", continues_chain), FS("path", path), FS("credential", credential),
    FS("session", session),
};
/* `seen` in sl_aline_scan has a bit for each. */
_Static_assert(sizeof fields / sizeof fields[0] <= 32, "too many fields for the seen mask");
#undef FS
#undef FN

typedef struct scanner {
    const unsigned char *s, *p, *e;
    const char *why;
} scanner;

static bool fail(scanner *sc, const char *why)
{
    if (!sc->why)
        sc->why = why;
    return false;
}

static void skip_ws(scanner *sc)
{
    while (sc->p < sc->e && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\r' || *sc->p == '\n'))
        sc->p++;
}

/* Bytes a string can hold without a closer look: not '"', '\\', a
 * control byte or the start of a multi-byte sequence. */
static const unsigned char plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static bool scan_string(scanner *sc, sl_astr *out)
{
    const unsigned char *p = sc->p + 1, *e = sc->e;
    bool esc = false;
    for (;;) {
        /* Eight bytes at a time while none needs a look: no '"', '\\',
         * control byte or byte >= 0x80. */
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
            uint64_t special = ((q - ones) & ~q) | ((b - ones) & ~b) | (w - ones * 0x20) | w;
            if (special & highs)
                break;
            p += 8;
        }
        while (p < e && plain_byte[*p])
            p++;
        if (p >= e) {
            sc->p = p;
            return fail(sc, "unterminated string");
        }
        unsigned c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            esc = true;
            if (p + 1 >= e) {
                sc->p = p;
                return fail(sc, "unterminated string");
            }
            unsigned d = p[1];
            if (d == 'u') {
                if (e - p < 6 || sl_hex_value((const char *)p + 2, 4) < 0) {
                    sc->p = p;
                    return fail(sc, "bad \\u escape");
                }
                p += 6;
            } else if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' ||
                       d == 'r' || d == 't') {
                p += 2;
            } else {
                sc->p = p;
                return fail(sc, "bad escape in string");
            }
        } else if (c < 0x20) {
            sc->p = p;
            return fail(sc, "control byte in string");
        } else {
            size_t n = sl_utf8_decode(p, (size_t)(e - p), NULL);
            if (!n) {
                sc->p = p;
                return fail(sc, "invalid UTF-8");
            }
            p += n;
        }
    }
    if (out) {
        out->p = (const char *)sc->p + 1;
        out->len = (size_t)(p - sc->p - 1);
        out->esc = esc;
        out->set = true;
    }
    sc->p = p + 1;
    return true;
}

static bool scan_number(scanner *sc, sl_anum *out)
{
    const unsigned char *p = sc->p, *e = sc->e;
    bool neg = false, integer = true, overflow = false;
    unsigned long long v = 0;
    if (*p == '-') {
        neg = true;
        p++;
    }
    if (p >= e || *p < '0' || *p > '9') {
        sc->p = p;
        return fail(sc, "bad number");
    }
    if (*p == '0') {
        p++;
    } else {
        while (p < e && *p >= '0' && *p <= '9') {
            unsigned d = *p++ - '0';
            if (v > (~0ULL - d) / 10)
                overflow = true;
            v = v * 10 + d;
        }
    }
    if (p < e && *p == '.') {
        integer = false;
        p++;
        if (p >= e || *p < '0' || *p > '9') {
            sc->p = p;
            return fail(sc, "bad number");
        }
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        integer = false;
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9') {
            sc->p = p;
            return fail(sc, "bad number");
        }
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    sc->p = p;
    if (out && integer && !overflow && (!neg || v == 0)) {
        out->v = v;
        out->set = true;
    }
    return true;
}

static bool scan_literal(scanner *sc, const char *lit, size_t n)
{
    if ((size_t)(sc->e - sc->p) < n || memcmp(sc->p, lit, n) != 0)
        return fail(sc, "unexpected character");
    sc->p += n;
    return true;
}

static bool scan_value(scanner *sc, int depth);

static bool scan_container(scanner *sc, int depth)
{
    bool obj = *sc->p == '{';
    unsigned char close = obj ? '}' : ']';
    if (depth > 64)
        return fail(sc, "nested too deeply");
    sc->p++;
    skip_ws(sc);
    if (sc->p < sc->e && *sc->p == close) {
        sc->p++;
        return true;
    }
    for (;;) {
        if (obj) {
            if (sc->p >= sc->e || *sc->p != '"')
                return fail(sc, "expected a key");
            if (!scan_string(sc, NULL))
                return false;
            skip_ws(sc);
            if (sc->p >= sc->e || *sc->p != ':')
                return fail(sc, "expected ':'");
            sc->p++;
            skip_ws(sc);
        }
        if (!scan_value(sc, depth + 1))
            return false;
        skip_ws(sc);
        if (sc->p < sc->e && *sc->p == ',') {
            sc->p++;
            skip_ws(sc);
            continue;
        }
        if (sc->p < sc->e && *sc->p == close) {
            sc->p++;
            return true;
        }
        return fail(sc, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool scan_value(scanner *sc, int depth)
{
    if (sc->p >= sc->e)
        return fail(sc, "expected a value");
    switch (*sc->p) {
    case '{':
    case '[': return scan_container(sc, depth);
    case '"': return scan_string(sc, NULL);
    case 't': return scan_literal(sc, "true", 4);
    case 'f': return scan_literal(sc, "false", 5);
    case 'n': return scan_literal(sc, "null", 4);
    default:
        if (*sc->p == '-' || (*sc->p >= '0' && *sc->p <= '9'))
            return scan_number(sc, NULL);
        return fail(sc, "unexpected character");
    }
}

static const field_desc *find_field(const sl_astr *key)
{
    char tmp[32];
    const char *k = key->p;
    size_t len = key->len;
    if (key->esc) {
        if (len >= 6 * sizeof tmp)
            return NULL;
        len = sl_astr_decode(key, tmp, sizeof tmp);
        k = tmp;
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].len == len && memcmp(fields[i].name, k, len) == 0)
            return &fields[i];
    return NULL;
}

bool sl_aline_scan(const char *line, size_t len, sl_afields *f, const char **why, size_t *at)
{
    scanner sc = { (const unsigned char *)line, (const unsigned char *)line,
                   (const unsigned char *)line + len, NULL };
    uint32_t seen = 0;
    memset(f, 0, sizeof *f);
    skip_ws(&sc);
    if (sc.p >= sc.e || *sc.p != '{') {
        fail(&sc, sc.p >= sc.e ? "empty line" : "not a JSON object");
        goto bad;
    }
    sc.p++;
    skip_ws(&sc);
    if (sc.p < sc.e && *sc.p == '}') {
        sc.p++;
    } else {
        for (;;) {
            sl_astr key = { 0 };
            if (sc.p >= sc.e || *sc.p != '"') {
                fail(&sc, "expected a key");
                goto bad;
            }
            if (!scan_string(&sc, &key))
                goto bad;
            skip_ws(&sc);
            if (sc.p >= sc.e || *sc.p != ':') {
                fail(&sc, "expected ':'");
                goto bad;
            }
            sc.p++;
            skip_ws(&sc);
            const field_desc *fd = find_field(&key);
            if (fd) {
                uint32_t bit = 1u << (fd - fields);
                if (seen & bit) {
                    fail(&sc, "a field appears twice");
                    goto bad;
                }
                seen |= bit;
            }
            bool ok;
            if (fd && fd->type == F_STR && sc.p < sc.e && *sc.p == '"')
                ok = scan_string(&sc, (sl_astr *)((char *)f + fd->off));
            else if (fd && fd->type == F_NUM && sc.p < sc.e && (*sc.p == '-' || (*sc.p >= '0' && *sc.p <= '9')))
                ok = scan_number(&sc, (sl_anum *)((char *)f + fd->off));
            else
                ok = scan_value(&sc, 1);
            if (!ok)
                goto bad;
            skip_ws(&sc);
            if (sc.p < sc.e && *sc.p == ',') {
                sc.p++;
                skip_ws(&sc);
                continue;
            }
            if (sc.p < sc.e && *sc.p == '}') {
                sc.p++;
                break;
            }
            fail(&sc, "expected ',' or '}'");
            goto bad;
        }
    }
    skip_ws(&sc);
    if (sc.p != sc.e) {
        fail(&sc, "text after the object");
        goto bad;
    }
    return true;
bad:
    if (why)
        *why = sc.why;
    if (at)
        *at = (size_t)(sc.p - sc.s);
    return false;
}

static size_t put_utf8(char *buf, size_t o, size_t cap, uint32_t cp)
{
    char t[4];
    size_t n = sl_utf8_encode(cp, t);
    if (o + n >= cap)
        return o;   /* does not fit: the caller stops here */
    memcpy(buf + o, t, n);
    return o + n;
}

/* Four hex digits the scanner has checked already. */
static uint32_t hex4(const char *p)
{
    return (uint32_t)sl_hex_value(p, 4);
}

size_t sl_astr_decode(const sl_astr *s, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return 0;
    if (!s->set) {
        buf[0] = '\0';
        return 0;
    }
    if (!s->esc) {
        o = s->len < cap - 1 ? s->len : cap - 1;
        memcpy(buf, s->p, o);
        buf[o] = '\0';
        return o;
    }
    const char *p = s->p, *e = s->p + s->len;
    while (p < e && o < cap - 1) {
        if (*p != '\\') {
            buf[o++] = *p++;
            continue;
        }
        if (e - p < 2)
            break;
        char d = p[1];
        p += 2;
        switch (d) {
        case 'b': buf[o++] = '\b'; continue;
        case 'f': buf[o++] = '\f'; continue;
        case 'n': buf[o++] = '\n'; continue;
        case 'r': buf[o++] = '\r'; continue;
        case 't': buf[o++] = '\t'; continue;
        case 'u': break;
        default: buf[o++] = d; continue;
        }
        if (e - p < 4)
            break;
        uint32_t cp = hex4(p);
        p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            uint32_t lo = hex4(p + 2);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            }
        }
        if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
            cp = 0xfffd;
        size_t before = o;
        o = put_utf8(buf, o, cap, cp);
        if (o == before)
            break;   /* what fits is a prefix of the value, never a gap in it */
    }
    buf[o] = '\0';
    return o;
}

bool sl_astr_eq(const sl_astr *s, const char *lit)
{
    size_t n = strlen(lit);
    if (!s->set)
        return false;
    if (!s->esc)
        return s->len == n && memcmp(s->p, lit, n) == 0;
    char tmp[256];
    if (n >= sizeof tmp)
        return false;
    size_t got = sl_astr_decode(s, tmp, sizeof tmp);
    return got == n && memcmp(tmp, lit, n) == 0;
}

/* ---- order of several logs ---- */

bool sl_astr_is_hex(const sl_astr *s, size_t n)
{
    if (!s->set || s->esc || s->len != n)
        return false;
    /* Branch-free, no early exit: --verify checks every line's chain. */
    unsigned ok = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)s->p[i];
        ok &= (c - '0' < 10u) | (c - 'a' < 6u);
    }
    return ok;
}

sl_ain_status sl_ain_peek_first(sl_ain *in, sl_ain_first *first)
{
    sl_aline line;
    memset(first, 0, sizeof *first);
    sl_ain_status st = sl_ain_next(in, &line);
    if (st == SL_AIN_LINE) {
        sl_afields f;
        if (sl_aline_scan(line.text, line.len, &f, NULL, NULL) && f.seq.set) {
            first->has_line = true;
            first->seq = f.seq.v;
            sl_astr_decode(&f.ts, first->ts, sizeof first->ts);
            if (sl_astr_is_hex(&f.stream, 32)) {
                first->has_stream = true;
                memcpy(first->stream, f.stream.p, 32);
                first->stream[32] = '\0';
                if (f.continues_seq.set) {
                    first->continues = true;
                    first->continues_seq = f.continues_seq.v;
                }
            }
        }
    }
    if (st == SL_AIN_BADGZ) {
        memset(&in->last, 0, sizeof in->last);
        in->last_status = st;
    }
    if (st == SL_AIN_LINE || st == SL_AIN_LONG || st == SL_AIN_BADGZ)
        sl_ain_unread(in);
    return st;
}

size_t sl_ain_pick_next(const sl_ain_first *firsts, const bool *done, size_t n, bool have_cur,
                        const char *stream, unsigned long long seq)
{
    if (have_cur) {
        for (size_t i = 0; i < n; i++) {
            const sl_ain_first *f = &firsts[i];
            if (done[i] || !f->has_line || strcmp(f->stream, stream) != 0)
                continue;
            if (f->continues && f->continues_seq == seq)
                return i;
        }
        /* A file split without a reopen: its first line has no stream. */
        for (size_t i = 0; i < n; i++) {
            const sl_ain_first *f = &firsts[i];
            if (!done[i] && f->has_line && !f->has_stream && f->seq == seq + 1)
                return i;
        }
    }
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        if (best == n) {
            best = i;
            continue;
        }
        const sl_ain_first *a = &firsts[i], *b = &firsts[best];
        /* Files whose first line says nothing come first: they are
         * reported rather than silently put last. */
        if (a->has_line != b->has_line) {
            if (!a->has_line)
                best = i;
            continue;
        }
        int c = strcmp(a->ts, b->ts);
        if (c < 0 || (c == 0 && a->seq < b->seq))
            best = i;
    }
    return best;
}
