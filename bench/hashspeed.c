/*
 * hashspeed: what hashing a pinned body costs per byte on this machine,
 * beside what sluice already spends on each byte of an inspected tunnel.
 *
 *   hashspeed [MIB]      each measurement over MIB MiB (default 256)
 *
 * Times, on one thread, over the same buffer fed in 16 KiB pieces (what a
 * TLS record gives sluice at a time):
 *   - the digests a pinned rule can name, as sluice computes them
 *     (proxy/crypto/crypto.c): sha256 on the x86 SHA extensions
 *     (proxy/crypto/sha256ni.c) where the CPU has them, else mbedtls;
 *     sha384 and sha512 with mbedtls 2.28; and mbedtls's sha256 for
 *     comparison;
 *   - the same digests with OpenSSL 3.0 (libcrypto), to show what a library
 *     with vector code for SHA-512 gets here;
 *   - AES-128-GCM with mbedtls 2.28, one direction: an inspected tunnel
 *     decrypts every byte from the origin and encrypts it again for the
 *     client, so it pays this twice.
 * Prints one JSON line: MB/s (10^6 bytes) and ns per byte for each, from
 * CPU time (CLOCK_PROCESS_CPUTIME_ID), so another process on the machine
 * slows the wall clock, not the figure.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mbedtls/gcm.h>
#include <mbedtls/sha256.h>
#include <mbedtls/sha512.h>
#include <openssl/evp.h>

#include "sha256ni.h"

#define PIECE 16384

static unsigned char buf[1 << 20];
static unsigned char out[PIECE + 16];
static size_t total;
static volatile unsigned char sink;   /* keeps the compiler from dropping a digest */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Feed total bytes to update(ctx, piece, PIECE); returns CPU seconds. */
static double run(void (*update)(void *, const unsigned char *, size_t), void *ctx)
{
    double t0 = cpu_s();
    for (size_t done = 0; done < total; done += PIECE)
        update(ctx, buf + done % sizeof buf, PIECE);
    return cpu_s() - t0;
}

static void up_ni(void *c, const unsigned char *p, size_t n) { sl_sha256ni_update(c, p, n); }
static void up_m256(void *c, const unsigned char *p, size_t n) { mbedtls_sha256_update_ret(c, p, n); }
static void up_m512(void *c, const unsigned char *p, size_t n) { mbedtls_sha512_update_ret(c, p, n); }
static void up_evp(void *c, const unsigned char *p, size_t n) { EVP_DigestUpdate(c, p, n); }
static void up_gcm(void *c, const unsigned char *p, size_t n)
{
    /* one record: its own IV, its tag, as TLS 1.2 does */
    static unsigned char iv[12];
    unsigned char tag[16];
    iv[11]++;
    mbedtls_gcm_crypt_and_tag(c, MBEDTLS_GCM_ENCRYPT, n, iv, sizeof iv, NULL, 0, p, out, sizeof tag, tag);
    sink ^= tag[0];
}

static int first = 1;

static void report(const char *name, double secs)
{
    double mbps = secs > 0 ? (double)total / secs / 1e6 : 0;
    printf("%s\"%s\":{\"mb_per_s\":%.0f,\"ns_per_byte\":%.2f}", first ? "" : ",", name, mbps,
           secs * 1e9 / (double)total);
    first = 0;
}

static double evp(const EVP_MD *md)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char d[EVP_MAX_MD_SIZE];
    EVP_DigestInit_ex(c, md, NULL);
    double s = run(up_evp, c);
    EVP_DigestFinal_ex(c, d, NULL);
    sink ^= d[0];
    EVP_MD_CTX_free(c);
    return s;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    if (mib < 1 || mib > 65536) {
        fprintf(stderr, "usage: hashspeed [MIB]   (1 to 65536)\n");
        return 2;
    }
    total = (size_t)mib << 20;
    memset(buf, 'b', sizeof buf);
    unsigned char d[64];

    printf("{\"mib\":%ld,\"sha_ni\":%s,", mib, sl_sha256ni_available() ? "true" : "false");
    printf("\"sluice\":{");
    if (sl_sha256ni_available()) {
        sl_sha256ni ni;
        sl_sha256ni_init(&ni);
        report("sha256_ni", run(up_ni, &ni));
        sl_sha256ni_final(&ni, d);
        sink ^= d[0];
    }
    mbedtls_sha256_context s256;
    mbedtls_sha256_init(&s256);
    mbedtls_sha256_starts_ret(&s256, 0);
    report("sha256_mbedtls", run(up_m256, &s256));
    mbedtls_sha256_finish_ret(&s256, d);
    mbedtls_sha256_free(&s256);
    for (int is384 = 1; is384 >= 0; is384--) {
        mbedtls_sha512_context s512;
        mbedtls_sha512_init(&s512);
        mbedtls_sha512_starts_ret(&s512, is384);
        report(is384 ? "sha384_mbedtls" : "sha512_mbedtls", run(up_m512, &s512));
        mbedtls_sha512_finish_ret(&s512, d);
        mbedtls_sha512_free(&s512);
    }
    mbedtls_gcm_context gcm;
    static const unsigned char key[16] = { 1 };
    mbedtls_gcm_init(&gcm);
    mbedtls_gcm_setkey(&gcm, MBEDTLS_CIPHER_ID_AES, key, 128);
    report("aes128gcm_mbedtls_one_way", run(up_gcm, &gcm));
    mbedtls_gcm_free(&gcm);
    printf("},\"openssl\":{");
    first = 1;
    report("sha256", evp(EVP_sha256()));
    report("sha512", evp(EVP_sha512()));
    printf("}}\n");
    return 0;
}
