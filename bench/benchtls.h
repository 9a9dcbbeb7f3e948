/* TLS for the load generator and the origin, on OpenSSL (bench/ is not the
 * daemon: the rule that one file includes the TLS library is the daemon's).
 *
 * Why not mbedtls, which the daemon uses: on this machine mbedtls 2.28 (as
 * Debian builds it) takes 1.7 ms for one P-256 ECDH, 2.5 ms for one ECDSA
 * verify and moves 146 MB/s through AES-128-GCM; OpenSSL 3.0 takes 80 µs,
 * 92 µs and 3.3 GB/s. A load generator paying 10 ms per handshake on one
 * thread tops out near 100 handshakes per second, far below what an
 * OpenSSL proxy sustains: it would measure itself. The bench's two ends
 * must cost little next to the proxies they measure.
 *
 * Both ends use the same settings: TLS 1.2 only, as sluice speaks it
 * (mbedtls 2.28 has no TLS 1.3), so that every proxy does the same protocol
 * work on both of its sides; ECDHE-ECDSA with AEAD ciphers, AES-128-GCM
 * first; the P-256 group first; no session tickets and no session cache:
 * every handshake of the bench is a full one. */
#ifndef SLUICE_BENCH_TLS_H
#define SLUICE_BENCH_TLS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define BENCH_TLS_CIPHERS "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305"
#define BENCH_TLS_GROUPS  "P-256:X25519"

static const unsigned char bench_tls_alpn[] = "\x08http/1.1";

static void bench_tls_queue_error(const char *what, char *err, size_t cap)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    snprintf(err, cap, "%s: %s", what, e ? buf : "failed");
}

static int bench_tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                 const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    unsigned char *o;
    if (SSL_select_next_proto(&o, outlen, bench_tls_alpn, sizeof bench_tls_alpn - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = o;
    return SSL_TLSEXT_ERR_OK;
}

/* A server context presenting cert (the leaf, then its chain) with key, or
 * a client context verifying against the PEM bundle ca. NULL on error, err
 * says why (naming the file). */
static SSL_CTX *bench_tls_ctx(bool server, const char *cert, const char *key, const char *ca, char *err, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        bench_tls_queue_error("SSL_CTX_new", err, cap);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* a write returns what one record took, like write(2) on a full socket */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (SSL_CTX_set_cipher_list(ctx, BENCH_TLS_CIPHERS) != 1 || SSL_CTX_set1_groups_list(ctx, BENCH_TLS_GROUPS) != 1) {
        bench_tls_queue_error("cipher or group list", err, cap);
        goto fail;
    }
    if (server) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
            bench_tls_queue_error(cert, err, cap);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
            bench_tls_queue_error(key, err, cap);
            goto fail;
        }
        SSL_CTX_set_alpn_select_cb(ctx, bench_tls_alpn_select, NULL);
        /* the origin picks the cipher, whatever order a proxy offers */
        SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    } else {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            bench_tls_queue_error(ca, err, cap);
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (SSL_CTX_set_alpn_protos(ctx, bench_tls_alpn, sizeof bench_tls_alpn - 1) != 0) {
            bench_tls_queue_error("ALPN", err, cap);
            goto fail;
        }
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* A session on fd; a client one sends SNI host and checks the
 * certificate's name against it. NULL on error. */
static SSL *bench_tls_new(SSL_CTX *ctx, int fd, const char *host)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return NULL;
    if (SSL_set_fd(ssl, fd) != 1 ||
        (host && (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1))) {
        SSL_free(ssl);
        return NULL;
    }
    if (host)
        SSL_set_connect_state(ssl);
    else
        SSL_set_accept_state(ssl);
    return ssl;
}

/* Why the last call on ssl returned ret; 0 with errno EAGAIN when it only
 * waits for the socket. */
static int bench_tls_failed(SSL *ssl, int ret, const char *what, char *err, size_t cap)
{
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        errno = 0;   /* the end: close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        return 0;
    }
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        snprintf(err, cap, "%s: certificate verification failed: %s", what, X509_verify_cert_error_string(v));
        ERR_clear_error();
    } else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        snprintf(err, cap, "%s: %s", what, errno ? strerror(errno) : "EOF");
    } else {
        bench_tls_queue_error(what, err, cap);
    }
    errno = EPROTO;
    return -1;
}

/* 1 when the handshake is done, 0 while it waits for the socket, -1 on
 * failure (err says why). */
static int bench_tls_handshake(SSL *ssl, char *err, size_t cap)
{
    int r = SSL_do_handshake(ssl);
    if (r == 1)
        return 1;
    if (bench_tls_failed(ssl, r, "handshake", err, cap) == 0) {
        if (errno == EAGAIN)
            return 0;
        snprintf(err, cap, "handshake: the peer closed the connection");
        errno = EPROTO;
    }
    return -1;
}

/* read(2) and write(2) through TLS: bytes moved, 0 at the end (close_notify
 * or EOF), -1 with errno EAGAIN while waiting for the socket or EPROTO on
 * a TLS error (err says which). */
static ssize_t bench_tls_read(SSL *ssl, void *p, size_t n, char *err, size_t cap)
{
    int r = SSL_read(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    if (bench_tls_failed(ssl, r, "read", err, cap) == 0)
        return errno == EAGAIN ? -1 : 0;
    return -1;
}

/* OpenSSL wants a write that returned WANT_WRITE repeated with the same
 * arguments: callers compute them from state that only a successful write
 * changes. */
static ssize_t bench_tls_write(SSL *ssl, const void *p, size_t n, char *err, size_t cap)
{
    int r = SSL_write(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    if (bench_tls_failed(ssl, r, "write", err, cap) == 0 && errno == EAGAIN)
        return -1;
    errno = EPROTO;
    return -1;
}

#endif
