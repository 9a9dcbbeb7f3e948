/* A synthetic decision log for bench/audit_speed.sh: SPEC's line format and
 * hash chain, a realistic mix (allowed tunnels with their close lines, some
 * plain HTTP, refusals of every common kind), a few thousand destinations
 * and a hundred clients, until the file reaches the size asked for.
 *
 *   gen_audit_log OUT SIZE_MB [ROTATE_MB]
 *
 * With ROTATE_MB, the log is rotated every ROTATE_MB into OUT.1, OUT.2, ...
 * as the gate does on SIGUSR1 (the first line of each file continues the
 * chain). Deterministic: the same arguments give the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static FILE *out;
static char stream[33] = "5eed5eed5eed5eed5eed5eed5eed5eed";
static unsigned long long seq;
static char chain[65];
static int reopened;
static unsigned long long written;

static void put(const char *body)
{
    char text[4096], next[65];
    int n;
    if (seq == 0)
        n = snprintf(text, sizeof text, "%s,\"stream\":\"%s\",\"seq\":1}", body, stream);
    else if (reopened)
        n = snprintf(text, sizeof text,
                     "%s,\"stream\":\"%s\",\"continues_seq\":%llu,\"continues_chain\":\"%s\",\"seq\":%llu}",
                     body, stream, seq, chain, seq + 1);
    else
        n = snprintf(text, sizeof text, "%s,\"seq\":%llu}", body, seq + 1);
    if (seq == 0)
        sl_chain_next(stream, 32, text, (size_t)n, next);
    else
        sl_chain_next(chain, 64, text, (size_t)n, next);
    written += (unsigned long long)fprintf(out, "%.*s,\"chain\":\"%s\"}\n", n - 1, text, next);
    memcpy(chain, next, 65);
    seq++;
    reopened = 0;
}

static void timestamp(char *buf, size_t cap, unsigned long long us)
{
    unsigned long long s = us / 1000000;
    snprintf(buf, cap, "2026-%02llu-%02lluT%02llu:%02llu:%02llu.%06lluZ", 1 + s / (86400 * 28) % 12,
             1 + s / 86400 % 28, s / 3600 % 24, s / 60 % 60, s % 60, us % 1000000);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gen_audit_log OUT SIZE_MB [ROTATE_MB]\n");
        return 2;
    }
    const char *path = argv[1];
    unsigned long long limit = strtoull(argv[2], NULL, 10) << 20;
    unsigned long long rotate = argc > 3 ? strtoull(argv[3], NULL, 10) << 20 : 0;
    static const char *const tlds[] = { "org", "com", "net", "io", "dev" };
    static const char *const refusals[] = { "not_allowlisted", "not_allowlisted", "not_allowlisted",
                                            "port_not_allowed", "non_public_address", "dns_error",
                                            "bad_request", "sni_mismatch" };
    char name[512];
    int file_no = 0;
    unsigned long long file_start = 0, us = 0;
    snprintf(name, sizeof name, "%s", path);
    out = fopen(name, "w");
    if (!out) {
        perror(name);
        return 1;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    char body[2048], ts[40], ts2[40], id[17];
    while (written < limit) {
        if (rotate && written - file_start >= rotate) {
            fclose(out);
            snprintf(name, sizeof name, "%s.%d", path, ++file_no);
            out = fopen(name, "w");
            if (!out) {
                perror(name);
                return 1;
            }
            setvbuf(out, NULL, _IOFBF, 1 << 20);
            file_start = written;
            reopened = 1;
        }
        uint64_t r = next_rand();
        us += 1000 + r % 50000;
        timestamp(ts, sizeof ts, us);
        snprintf(id, sizeof id, "%016llx", (unsigned long long)next_rand());
        unsigned host = (unsigned)(r >> 8) % 3000;
        unsigned client = (unsigned)(r >> 24) % 100;
        const char *tld = tlds[host % 5];
        int connect = (r >> 32) % 4 != 0;
        int port = connect ? ((r >> 36) % 10 ? 443 : 8443) : 80;
        if ((r >> 40) % 10 == 0) {
            const char *why = refusals[(r >> 44) % 8];
            snprintf(body, sizeof body,
                     "{\"ts\":\"%s\",\"event\":\"decision\",\"id\":\"%s\",\"client\":\"10.%u.0.%u:%u\","
                     "\"method\":\"%s\",\"host\":\"blocked%u.example.%s\",\"port\":%d,\"decision\":\"deny\","
                     "\"reason\":\"%s\"%s",
                     ts, id, client / 10, client, 30000 + (unsigned)(r % 30000), connect ? "CONNECT" : "GET",
                     host % 300, tld, port, why,
                     strcmp(why, "non_public_address") == 0 ? ",\"detail\":\"10.0.0.7: 10.0.0.0/8 Private-Use\"" : "");
            put(body);
            continue;
        }
        snprintf(body, sizeof body,
                 "{\"ts\":\"%s\",\"event\":\"decision\",\"id\":\"%s\",\"client\":\"10.%u.0.%u:%u\","
                 "\"method\":\"%s\",\"host\":\"pkg%u.mirror.%s\",\"port\":%d,\"decision\":\"allow\","
                 "\"reason\":\"allowlisted\",\"rule\":\"/etc/sluice/allowlist.txt:%u\",\"addr\":\"203.0.%u.%u\","
                 "\"dns_ms\":%u.%u%s",
                 ts, id, client / 10, client, 30000 + (unsigned)(r % 30000), connect ? "CONNECT" : "GET",
                 host, tld, port, 1 + host % 200, host % 256, (host * 7) % 256, (unsigned)(r % 40),
                 (unsigned)(r >> 50) % 10, connect && port == 443 ? ",\"sni\":\"pkg.mirror.org\"" : "");
        put(body);
        timestamp(ts2, sizeof ts2, us + 500 + r % 900000);
        snprintf(body, sizeof body,
                 "{\"ts\":\"%s\",\"event\":\"close\",\"id\":\"%s\",\"bytes_up\":%llu,\"bytes_down\":%llu,"
                 "\"duration_ms\":%u.%u,\"end\":\"%s\"",
                 ts2, id, (unsigned long long)(200 + r % 5000), (unsigned long long)(r >> 20) % 50000000,
                 (unsigned)(r % 900000) / 1000, (unsigned)(r >> 10) % 10, (r >> 12) % 2 ? "client_eof" : "origin_eof");
        put(body);
    }
    fclose(out);
    fprintf(stderr, "gen_audit_log: %llu lines, %llu bytes, %d file%s, stream %s\n", seq, written,
            file_no + 1, file_no ? "s" : "", stream);
    return 0;
}
