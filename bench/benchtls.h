/* TLS for the load generator and the origin (mbedtls 2.28, as the daemon
 * uses; bench/ is not the daemon, so it includes mbedtls itself).
 *
 * Both ends use the same settings: TLS 1.2 (mbedtls 2.28 has no TLS 1.3),
 * ECDHE-ECDSA with AEAD ciphers, the P-256 group first (mbedtls' default
 * list starts at P-521, which would make every handshake several times
 * dearer than what real clients and servers pick), no session tickets and
 * no session cache: every handshake of the bench is a full one. */
#ifndef SLUICE_BENCH_TLS_H
#define SLUICE_BENCH_TLS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

static const int bench_tls_suites[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    0,
};
static const mbedtls_ecp_group_id bench_tls_groups[] = {
    MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_NONE,
};
static const char *bench_tls_alpn[] = { "http/1.1", NULL };

static mbedtls_entropy_context bench_entropy;
static mbedtls_ctr_drbg_context bench_drbg;

/* The socket I/O of one session: ctx points at the connection's fd. */
static int bench_tls_send(void *ctx, const unsigned char *p, size_t n)
{
    ssize_t w = send(*(int *)ctx, p, n, MSG_NOSIGNAL);
    if (w >= 0)
        return (int)w;
    if (errno == EAGAIN || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bench_tls_recv(void *ctx, unsigned char *p, size_t n)
{
    ssize_t r = recv(*(int *)ctx, p, n, 0);
    if (r >= 0)
        return (int)r;
    if (errno == EAGAIN || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

static void bench_tls_strerror(int ret, char *buf, size_t cap)
{
    char e[160];
    mbedtls_strerror(ret, e, sizeof e);
    snprintf(buf, cap, "%s (-0x%04x)", e, (unsigned)-ret);
}

/* The settings both ends share; endpoint is MBEDTLS_SSL_IS_CLIENT or
 * _SERVER. 0 or an mbedtls error. Seeds the process's DRBG on first use. */
static int bench_tls_conf(mbedtls_ssl_config *conf, int endpoint)
{
    static int seeded;
    int ret;
    if (!seeded) {
        mbedtls_entropy_init(&bench_entropy);
        mbedtls_ctr_drbg_init(&bench_drbg);
        ret = mbedtls_ctr_drbg_seed(&bench_drbg, mbedtls_entropy_func, &bench_entropy,
                                    (const unsigned char *)"sluice-bench", 12);
        if (ret != 0)
            return ret;
        seeded = 1;
    }
    mbedtls_ssl_config_init(conf);
    ret = mbedtls_ssl_config_defaults(conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (ret != 0)
        return ret;
    mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &bench_drbg);
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_ciphersuites(conf, bench_tls_suites);
    mbedtls_ssl_conf_curves(conf, bench_tls_groups);
    mbedtls_ssl_conf_session_tickets(conf, MBEDTLS_SSL_SESSION_TICKETS_DISABLED);
    return mbedtls_ssl_conf_alpn_protocols(conf, bench_tls_alpn);
}

#endif
