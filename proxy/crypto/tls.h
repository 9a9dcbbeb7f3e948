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
#include <stdint.h>
#include <sys/types.h>

/* The inspection CA, the one key pair every leaf uses, and the cache of
 * leaves by host (bounded; least recently used goes first; a leaf is
 * refcounted, so one evicted while a session uses it stays valid for it,
 * and one within an hour of its end is made again). Shared by all workers
 * (the cache has its own lock; two workers asking for the same new host at
 * once may both make a leaf, and the first to store it wins); lives as long
 * as the policy. */
typedef struct sl_tls_server sl_tls_server;
/* upstream_ca and the client settings; shared, immutable. */
typedef struct sl_tls_client sl_tls_client;
/* One TLS session, either side. Owned by one connection. */
typedef struct sl_tls sl_tls;

/* ca_key must be a regular file that group and others have no access to
 * (checked on the opened descriptor), unencrypted, ECDSA or RSA, and the key
 * of ca_cert, which must be a CA (basicConstraints CA:TRUE, keyUsage
 * keyCertSign if it has a keyUsage) and not expired. ca_cert may hold
 * further certificates after the CA (its issuers): they are sent after it.
 * The CA's name constraints (sluice ca init --permit) are read: no leaf is
 * made for a host they do not permit. leaf_days: validity of the leaves
 * made (never past the CA's own end). cache_max: leaves kept (0: none, each
 * session makes its own). Every leaf uses one ECDSA P-256 key made here.
 * NULL on error, err says why (naming the file). Free it only after every
 * session made from it. */
sl_tls_server *sl_tls_server_new(const char *ca_cert, const char *ca_key, int leaf_days,
                                 size_t cache_max, char *err, size_t errcap);
void sl_tls_server_free(sl_tls_server *srv);
size_t sl_tls_server_cached(sl_tls_server *srv);   /* leaves in the cache now */
uint64_t sl_tls_server_made(sl_tls_server *srv);   /* leaves made so far (cache misses) */
/* Whether the CA's name constraints let sluice make a leaf for host (for
 * `sluice check`: a rule for a host the CA cannot sign for fails every
 * tunnel). false with err saying why. */
bool sl_tls_server_permits(const sl_tls_server *srv, const char *host, char *err, size_t errcap);

/* upstream_ca: a PEM bundle (the system one by default), parsed once.
 * Certificates in it that mbedtls cannot read are skipped; none readable
 * is an error. */
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
 * literal, as the CONNECT named it; IPv6 with or without brackets): made
 * now, or taken from the cache. A ClientHello split across several records
 * is gathered into one first (mbedtls 2.28 cannot take it otherwise); one
 * larger than a record (16 KiB) fails the handshake. NULL on failure (err
 * says why). */
sl_tls *sl_tls_accept(sl_tls_server *srv, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                      void *ctx, char *err, size_t errcap);
/* A client session to host: SNI host (not for IP literals), ALPN
 * http/1.1, the chain verified against upstream_ca and the name against
 * host (an IP literal against the certificate's iPAddress names, which
 * mbedtls 2.28 does not check itself). */
sl_tls *sl_tls_connect(sl_tls_client *cli, const char *host, sl_tls_send_fn send, sl_tls_recv_fn recv,
                       void *ctx, char *err, size_t errcap);
void sl_tls_free(sl_tls *t);

typedef enum sl_tls_status {
    SL_TLS_DONE,     /* the step is complete (handshake done; bytes read or written) */
    SL_TLS_WANT,     /* needs more ciphertext from the peer; call again after recv has more */
    SL_TLS_CLOSED,   /* the peer sent close_notify, or its side ended (read only; err is empty
                        after a close_notify, and says so when the transport ended without one) */
    SL_TLS_FAIL,     /* a fatal error; the message says which (a certificate's failure by name:
                        "certificate expired (notAfter ...)", "self-signed certificate (...)",
                        "untrusted chain: ...", "name mismatch: certificate is for X, not Y",
                        an alert from the peer, ...) */
} sl_tls_status;

/* Drive the handshake. On SL_TLS_FAIL, err gets the reason. */
sl_tls_status sl_tls_handshake(sl_tls *t, char *err, size_t errcap);
/* Plaintext in: up to n bytes into p, *got says how many (DONE with
 * *got > 0, WANT with none yet, CLOSED at the end, FAIL). WANT can come
 * while ciphertext is still waiting (after a warning alert or empty
 * records): call again while recv has bytes to give. */
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

/* `sluice ca init`: a new ECDSA P-256 CA, self-signed, valid for `days`
 * days, basicConstraints CA:TRUE pathlen:0 and keyUsage keyCertSign,cRLSign
 * (both critical), a subjectKeyIdentifier; with npermit > 0, critical name
 * constraints permitting those DNS names (each with the names under it)
 * and no IP address. PEM text in *cert_pem and *key_pem (malloc'd; free the
 * key with sl_tls_free_secret). false on error (err says why). */
bool sl_tls_make_ca(int days, const char *const *permit, size_t npermit, char **cert_pem, char **key_pem,
                    char *err, size_t errcap);
/* Wipe and free a secret's text. */
void sl_tls_free_secret(char *p);

#endif
