/* A byte stream to one peer, as the connection engine sees it: bytes that
 * came in (`in`), bytes to send (`out`), whether it wants to read, and its
 * events. A socket is one transport (stream.c); TLS over a socket is the
 * next, behind the same operations, so plain HTTP and HTTP inside an
 * inspected tunnel run through one exchange engine.
 *
 * Two rules make the engine's life simple:
 * - A stream calls its owner back only from the event loop, never from
 *   inside a call the owner made to it (an error found while flushing is
 *   delivered on the next loop pass). So no step is re-entered through its
 *   own stream.
 * - Calling back is the last thing a stream's event handler does: the owner
 *   may free the stream from inside the callback.
 *
 * Bounds by construction: a stream never reads while `in` holds `in_max`
 * bytes or more, so what a peer can make sluice hold unread is bounded
 * whatever the owner does. */
#ifndef SLUICE_STREAM_H
#define SLUICE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "tls.h"

struct event_base;

typedef enum sl_stream_event {
    SL_STREAM_READ,     /* new bytes in `in` */
    SL_STREAM_DRAINED,  /* `out` was written whole (after it had to wait) */
    SL_STREAM_EOF,      /* the peer ended its side (all bytes before it are in `in`) */
    SL_STREAM_ERROR,    /* a socket error; `error` says which; nothing more comes */
    SL_STREAM_READY,    /* a TLS stream's handshake is done (a socket stream never sends it) */
} sl_stream_event;

typedef struct sl_stream sl_stream;
typedef void (*sl_stream_cb)(sl_stream *s, sl_stream_event ev, void *arg);

typedef struct sl_stream_ops {
    /* Write what `out` holds now, as much as the peer takes; the rest goes
     * when it can (then SL_STREAM_DRAINED). */
    void (*flush)(sl_stream *s);
    /* Arm or disarm reading from want_read, the in_max bound, EOF and
     * errors. Cheap when nothing changes. */
    void (*update)(sl_stream *s);
    /* Shut our write side once `out` has been written. */
    void (*shutdown)(sl_stream *s);
    /* Whether the peer has sent a byte or its EOF that is not read yet. */
    bool (*pending)(sl_stream *s);
    /* The socket underneath (the relay adds its events on it before the
     * stream lets go, so the socket's epoll entry does not change). */
    int (*fd)(const sl_stream *s);
    /* Stop all events and hand the socket over (the relay takes tunnels'
     * sockets); the stream no longer closes it. `in` and `out` stay. */
    int (*release_fd)(sl_stream *s);
    void (*free)(sl_stream *s);
    /* Whether all that was queued has been handed to the kernel; NULL: when
     * `out` is empty (a socket). A TLS stream's `out` empties into records
     * that may still wait below it. */
    bool (*flushed)(sl_stream *s);
} sl_stream_ops;

struct sl_stream {
    const sl_stream_ops *ops;
    struct evbuffer *in, *out;
    size_t in_max;          /* reading stops while `in` holds this much */
    bool want_read;         /* the owner's wish; update() applies it */
    bool eof;               /* the peer's side has ended */
    int error;              /* errno of a failure; 0 while there is none */
    uint64_t written;       /* bytes written to the peer so far (bytes that left `out` for good) */
    sl_stream_cb cb;
    void *arg;
    struct event_base *base; /* the loop it runs on */
    /* Why a TLS stream failed, for the log ("upstream TLS: certificate
     * expired (...)"), with error = EPROTO for a TLS failure or the socket's
     * errno; also set, with no error, when the peer ended without a TLS
     * close_notify (HTTP framing tells whether that truncated anything). */
    char failure[160];
};

/* A stream over a connected (or connecting) non-blocking socket; takes the
 * descriptor (closed on free). NULL when out of memory (fd closed). */
sl_stream *sl_stream_socket(struct event_base *base, int fd, size_t in_max, sl_stream_cb cb, void *arg);

/* TLS over a socket stream (stream_tls.c): `in` and `out` are plaintext,
 * raw's are ciphertext. Both take raw (a socket stream, possibly already
 * holding bytes: the ClientHello, which the handshake then reads first)
 * whatever happens, and free it with themselves; NULL only when out of
 * memory (raw freed). The handshake starts at once, from the event loop,
 * whatever want_read says; READY or ERROR follows (a session that cannot
 * even be made, say a host the CA may not sign for, is an ERROR with its
 * failure too). After READY, want_read governs plaintext as for a socket.
 * `written` counts plaintext bytes encrypted and handed to the raw stream,
 * which writes them as fast as the socket takes them: `out` holds only
 * bytes not yet encrypted, so `written` + `out`'s length is always all
 * bytes queued, and a byte gone from `out` is on its way for good.
 * Plaintext waits in `out` while raw's `out` holds 16 KiB or more, so the
 * owner's watermarks on `out` still work. release_fd is not supported
 * (-1). shutdown() sends close_notify once `out` is encrypted, then shuts
 * the raw side. host: the CONNECT's (a name or an IP literal). */
sl_stream *sl_stream_tls_server(sl_stream *raw, sl_tls_server *srv, const char *host, size_t in_max,
                                sl_stream_cb cb, void *arg);
sl_stream *sl_stream_tls_client(sl_stream *raw, sl_tls_client *cli, const char *host, size_t in_max,
                                sl_stream_cb cb, void *arg);

static inline void sl_stream_flush(sl_stream *s) { s->ops->flush(s); }
static inline void sl_stream_update(sl_stream *s) { s->ops->update(s); }
static inline void sl_stream_shutdown(sl_stream *s) { s->ops->shutdown(s); }
static inline bool sl_stream_pending(sl_stream *s) { return s->ops->pending(s); }
static inline int sl_stream_fd(const sl_stream *s) { return s->ops->fd(s); }
static inline int sl_stream_release_fd(sl_stream *s) { return s->ops->release_fd(s); }
static inline void sl_stream_free(sl_stream *s) { if (s) s->ops->free(s); }
/* Before freeing a stream right after its last bytes (a close after a
 * reply), this, not an empty `out`, says they have all gone; DRAINED comes
 * when they have, if they had to wait. */
static inline bool sl_stream_flushed(sl_stream *s)
{
    return s->ops->flushed ? s->ops->flushed(s) : evbuffer_get_length(s->out) == 0;
}

#endif
