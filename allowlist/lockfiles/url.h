/* URLs as lockfiles and package-manager configs write them: just enough to
 * find the host and port a client would connect to. Pure. */
#ifndef SLUICE_URL_H
#define SLUICE_URL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sl_url {
    char scheme[24];        /* lower-case, without "://"; "ssh" for scp-style */
    const char *host;       /* into the input; IPv6 without brackets */
    size_t host_len;
    int port;               /* explicit port, or the scheme's default (LOCKFILES.md R2); -1 unknown */
    const char *path;       /* into the input, from the first '/' after the authority */
    size_t path_len;
    bool scp_style;         /* git@host:owner/repo.git */
} sl_url;

/* Parse scheme://[userinfo@]host[:port][/path][?query][#fragment], with
 * compound schemes (git+https, git+ssh, registry+https, sparse+https), and
 * scp-style user@host:path. Credentials are skipped. Returns false for
 * anything without a network host: relative paths, file:, link:, etc. */
bool sl_url_parse(const char *s, size_t len, sl_url *out);

/* LOCKFILES.md R2: https 443, http 80, ssh/git+ssh 22, git 9418, the inner
 * scheme of a compound one ("git+https" -> 443); -1 if unknown. */
int sl_url_default_port(const char *scheme);

#endif
