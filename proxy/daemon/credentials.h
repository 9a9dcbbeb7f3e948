/* Credentials the sandbox never holds (SPEC part 2): the [credentials]
 * file, the secrets it names, and which one a request gets. A secret's
 * value lives only in sl_credential.value: never log, print or reply it. */
#ifndef SLUICE_CREDENTIALS_H
#define SLUICE_CREDENTIALS_H

#include <stdbool.h>
#include <stdio.h>

#include "allowlist.h"
#include "config.h"

#define SL_SECRET_MAX 8192          /* bytes of one secret file */

typedef struct sl_credential {
    const char *name, *header;   /* header name as written */
    const char *value;           /* TEMPLATE with {secret} replaced: never log or print it */
    const char *where;           /* "FILE:LINE" */
    const char *tmpl;            /* TEMPLATE as written, "{secret}" unexpanded: what check prints */
} sl_credential;

/* The credential for a request to host:port (most specific host match, as
 * allowlist entries: p's connect_ports/http_ports for a bare host), or
 * NULL. Pure; cost does not grow with the number of credentials. */
const sl_credential *sl_policy_credential(const sl_policy *p, const sl_host *h, int port, bool connect);

/* Reads the credentials file at path ("NAME HOST HEADER TEMPLATE" lines)
 * and each secret (secret_dir/NAME) into p. Needs p->allow complete: a
 * credential whose host no request rule covers is an error. Every error is
 * reported as "FILE:LINE: message" and never quotes a secret; returns how
 * many there were. */
int sl_credentials_load(sl_policy *p, const char *path, const char *secret_dir, sl_report_fn report,
                        void *ctx);

/* Frees p's credentials, wiping the secrets first. */
void sl_credentials_free(sl_policy *p);

/* `sluice check`'s credentials section: name, host, header and TEMPLATE
 * with "{secret}" as written. */
void sl_credentials_print(const sl_policy *p, FILE *out);

#endif
