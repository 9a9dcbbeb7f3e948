/* sluice audit: reading decision logs.
 *
 * A streaming line reader over a plain or gzip'd file (zlib reads both), or
 * standard input ("-"), holding at most one line (SL_AIN_LINE_MAX) plus one
 * read chunk in memory; with `follow` it keeps reading a growing file like
 * `tail -F`, and notices rotation (the path names another inode) and
 * truncation. Also: a one-pass, allocation-free scanner that checks a line is
 * one valid JSON object and picks out the top-level fields audit uses, and
 * the order in which to read several logs (rotated files in any order). */
#ifndef SLUICE_AUDIT_INPUT_H
#define SLUICE_AUDIT_INPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_AIN_LINE_MAX (1u << 20)   /* longest line accepted, without its newline */

typedef struct sl_ain sl_ain;

typedef enum sl_ain_status {
    SL_AIN_LINE,    /* a line in *out */
    SL_AIN_EOF,     /* end of input (with follow: only once stopped) */
    SL_AIN_LONG,    /* line out->lineno is over SL_AIN_LINE_MAX; skipped, reading goes on */
    SL_AIN_IDLE,    /* follow: everything written so far has been read; call again to wait */
    SL_AIN_BADGZ,   /* compressed data corrupt or cut short; sl_ain_error() says which */
    SL_AIN_ERROR,   /* a read error; sl_ain_error() says what */
} sl_ain_status;

typedef struct sl_aline {
    char *text;                 /* without its newline; writable; valid until the next call */
    size_t len;
    unsigned long long lineno;  /* 1-based, in the file being read */
    bool complete;              /* false: the input ended before this line's newline */
} sl_aline;

/* Open a log ("-": standard input). NULL with a message naming the file. */
sl_ain *sl_ain_open(const char *path, char *err, size_t errcap);
/* Keep reading at end of file until *stop becomes non-zero. Not for stdin,
 * which is read until it ends anyway. */
void sl_ain_follow(sl_ain *in, volatile sig_atomic_t *stop);
sl_ain_status sl_ain_next(sl_ain *in, sl_aline *out);
/* The next sl_ain_next returns the same line (or LONG, or BADGZ) again; a caller that
 * wrote into the text restores it first. */
void sl_ain_unread(sl_ain *in);
const char *sl_ain_name(const sl_ain *in);   /* the path; "<stdin>" for "-" */
const char *sl_ain_error(const sl_ain *in);
/* Lines read so far from the file being read. */
unsigned long long sl_ain_lineno(const sl_ain *in);
bool sl_ain_is_stdin(const sl_ain *in);
void sl_ain_close(sl_ain *in);

/* ---- one line as JSON ---- */

/* A string value as it appears in the line, between its quotes. */
typedef struct sl_astr {
    const char *p;
    size_t len;
    bool esc;        /* contains backslash escapes: decode before use */
    bool set;
} sl_astr;

typedef struct sl_anum {
    unsigned long long v;   /* valid when `set`: a non-negative integer that fits */
    bool set;
} sl_anum;

/* The top-level fields audit reads; others are checked and skipped. A field
 * of the wrong type is left unset. */
typedef struct sl_afields {
    sl_astr ts, event, id, client, method, host, decision, reason, end;
    sl_astr path, credential;    /* requests to inspected hosts */
    sl_astr session;             /* the session that caused the line (SPEC part 2) */
    sl_astr stream, chain, continues_chain;
    sl_anum port, seq, continues_seq, bytes_up, bytes_down;
} sl_afields;

/* Check that line[0..len) is exactly one JSON object (RFC 8259, UTF-8,
 * nesting at most 64 deep, a key of interest at most once) and fill *f.
 * On failure returns false with a short static reason in *why and its byte
 * offset in *at. Never allocates. */
bool sl_aline_scan(const char *line, size_t len, sl_afields *f, const char **why, size_t *at);

/* Decode a string value into buf (cap >= 1), NUL-terminated, cut to fit.
 * \u0000 and invalid escapes decode to U+FFFD. Returns the decoded length. */
size_t sl_astr_decode(const sl_astr *s, char *buf, size_t cap);
/* Whether a string value equals the ASCII text `lit` (after decoding). */
bool sl_astr_eq(const sl_astr *s, const char *lit);
/* Whether a string value is exactly n lowercase hex digits, unescaped (the
 * form of stream ids and chains). */
bool sl_astr_is_hex(const sl_astr *s, size_t n);

/* ---- reading several logs in order ---- */

/* What a log's first line says about where it belongs. */
typedef struct sl_ain_first {
    bool has_line;           /* the file is not empty and its first line scans */
    bool has_stream;         /* a stream start or a continuation */
    bool continues;          /* carries continues_seq */
    char stream[33];
    unsigned long long seq, continues_seq;
    char ts[40];
} sl_ain_first;

/* Read the first line (it is read again by the next sl_ain_next). */
sl_ain_status sl_ain_peek_first(sl_ain *in, sl_ain_first *first);

/* Which log to read next, of the `n` whose first lines are `firsts` and that
 * are not `done`: after a log that ended in stream `stream` at `seq` (have_cur),
 * the one that continues it (continues_seq == seq, or the same stream's seq+1);
 * otherwise the one whose first line is earliest (ts, then seq, then given
 * order). Returns n when all are done. */
size_t sl_ain_pick_next(const sl_ain_first *firsts, const bool *done, size_t n, bool have_cur,
                        const char *stream, unsigned long long seq);

#endif
