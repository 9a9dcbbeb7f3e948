/* TLS for inspected tunnels, behind sluice's own types. crypto.c implements
 * it and stays the only file that includes mbedtls headers, so that a move
 * to mbedtls 3 (TLS 1.3) changes one file.
 *
 * No I/O here: a session reads ciphertext from, and writes ciphertext to,
 * the two callbacks its owner gives it (conn/stream_tls.c gives a socket
 * stream's evbuffers), so it runs on the event loop like everything else.
 *
 * TLS 1.2 only (mbedtls 2.28), ECDHE with AEAD ciphers on both sides, ALPN
 * "http/1.1" only. */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The inspection CA, the one key pair every leaf uses, and the cache of
 * leaves by host (bounded; least recently used goes first). Shared by all
 * workers (the cache has its own lock); lives as long as the policy. */
typedef struct sl_tls_server sl_tls_server;
/* upstream_ca and the client settings; shared, immutable. */
typedef struct sl_tls_client sl_tls_client;
/* One TLS session, either side. Owned by one connection. */
typedef struct sl_tls sl_tls;

/* ca_key must be a regular file not readable by group or others (checked
 * on the opened descriptor). leaf_days: validity of the leaves made.
 * cache_max: leaves kept. NULL on error, err says why (naming the file). */
sl_tls_server *sl_tls_server_new(const char *ca_cert, const char *ca_key, int leaf_days,
                                 size_t cache_max, char *err, size_t errcap);
void sl_tls_server_free(sl_tls_server *srv);
size_t sl_tls_server_cached(sl_tls_server *srv);   /* leaves in the cache now */

/* upstream_ca: a PEM bundle (the system one by default). */
sl_tls_client *sl_tls_client_new(const char *upstream_ca, char *err, size_t errcap);
void sl_tls_client_free(sl_tls_client *cli);

/* The owner's I/O. send: take up to n ciphertext bytes, return how many
 * (all of them: the owner queues; never 0 for n > 0). recv: give up to n
 * ciphertext bytes already received, return how many, 0 when none are
 * there yet (the session then waits for more), or -1 when the peer's side
 * has ended and nothing is left. */
typedef size_t (*sl_tls_send_fn)(void *ctx, const unsigned char *p, size_t n);
typedef ssize_t (*sl_tls_recv_fn)(void *ctx, unsigned char *p, size_t n);

/* A server session presenting a leaf for host (a DNS name or an IP
 * literal, as the CONNECT named it): made now, or taken from the cache.
 * NULL on failure (err says why). */
sl_tls *sl_tls_accept(sl_tls_server *srv, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                      void *ctx, char *err, size_t errcap);
/* A client session to host: SNI host (not for IP literals), ALPN
 * http/1.1, the chain verified against upstream_ca and the name against
 * host. */
sl_tls *sl_tls_connect(sl_tls_client *cli, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                       void *ctx, char *err, size_t errcap);
void sl_tls_free(sl_tls *t);

typedef enum sl_tls_status {
    SL_TLS_DONE,     /* the step is complete (handshake done; bytes read or written) */
    SL_TLS_WANT,     /* needs more ciphertext from the peer; call again after recv has more */
    SL_TLS_CLOSED,   /* the peer sent close_notify, or its side ended (read only) */
    SL_TLS_FAIL,     /* a fatal error; the message says which (a certificate's failure by name:
                        "certificate expired", "not trusted", "name mismatch (...)", ...) */
} sl_tls_status;

/* Drive the handshake. On SL_TLS_FAIL, err gets the reason. */
sl_tls_status sl_tls_handshake(sl_tls *t, char *err, size_t errcap);
/* Plaintext in: up to n bytes into p, *got says how many (DONE with
 * *got > 0, WANT with none yet, CLOSED at the end, FAIL). */
sl_tls_status sl_tls_read(sl_tls *t, void *p, size_t n, size_t *got, char *err, size_t errcap);
/* Plaintext out: all n bytes are encrypted and given to send (DONE), or
 * FAIL. */
sl_tls_status sl_tls_write(sl_tls *t, const void *p, size_t n, char *err, size_t errcap);
/* Plaintext bytes decrypted and waiting inside the session: a reader must
 * call sl_tls_read again while this is > 0, even with no new ciphertext. */
size_t sl_tls_pending(const sl_tls *t);
/* Queue a close_notify alert (through send). */
void sl_tls_close_notify(sl_tls *t);
/* The ALPN protocol agreed, or NULL. */
const char *sl_tls_alpn(const sl_tls *t);

#endif
