/* The gate's policy: built-in defaults, the INI config file and command-line
 * flags, merged into one immutable, refcounted snapshot. A reload builds a new
 * snapshot, validates it completely, then swaps it in; a connection keeps the
 * snapshot it started with. */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

#include "addr.h"
#include "allowlist.h"

#define SL_MAX_LISTEN 16
#define SL_MAX_DNS 8
/* Leaves kept per policy: one per inspected host in use (a host's leaf is
 * made again once it has been evicted). */
#define SL_LEAF_CACHE_MAX 1024

/* A string list for repeatable flags. */
typedef struct sl_strv {
    const char **v;
    size_t n;
} sl_strv;

/* What the command line said; NULL / empty / -1 means "not given". */
typedef struct sl_options {
    const char *config;
    sl_strv listen;
    sl_strv allowlist;
    sl_strv allowlist_dir;
    sl_strv allow;
    sl_strv dns_server;
    sl_strv allow_from_lockfile;   /* lockfiles/projects whose derived entries are added */
    const char *log;
    int workers;
} sl_options;

typedef struct sl_listen {
    sl_addr addr;
    int port;              /* 0: the kernel picks one */
    char where[300];       /* provenance, "FILE:LINE" or "--listen" */
} sl_listen;

typedef struct sl_dns_server {
    sl_addr addr;
    int port;
} sl_dns_server;

struct sl_credential;

/* One file or directory a policy was read from. [policy] watch watches
 * them (a directory for its entries, a file through its directory, since
 * editors and ConfigMaps replace files by rename) and [proxy] confine
 * keeps them readable. */
typedef struct sl_input {
    char *path;
    bool dir;              /* its entries were listed (allowlist_dir, sessions, secret_dir) */
} sl_input;

#define SL_DEFAULT_UPSTREAM_CA "/etc/ssl/certs/ca-certificates.crt"

typedef struct sl_policy {
    atomic_int refs;
    unsigned long generation;   /* bumps on every successful load */

    char *config_path;          /* NULL when run without -c */
    sl_listen listen[SL_MAX_LISTEN];
    size_t nlisten;
    int workers;                /* resolved: >= 1 */
    int max_clients;
    int shutdown_grace_ms;
    int exit_idle_s;

    sl_allowlist *allow;
    char **allowlist_files;     /* as loaded, for `check` */
    size_t nallowlist_files;
    sl_ports connect_ports;
    sl_ports http_ports;
    sl_cidr *allow_cidr;
    size_t nallow_cidr;
    sl_cidr *deny_cidr;
    size_t ndeny_cidr;
    bool sni_check;

    sl_dns_server dns[SL_MAX_DNS];
    size_t ndns;
    bool dns_from_resolv_conf;
    int dns_timeout_ms;
    int min_ttl_s;
    int max_ttl_s;

    int header_ms;
    int connect_ms;
    int idle_ms;

    char *log_path;             /* "-" is standard output */
    char *admin_listen;         /* NULL: off */

    /* [tls] (inspection): paths resolved like the others; NULL: not set */
    char *tls_ca_cert, *tls_ca_key;
    char *tls_upstream_ca;      /* default SL_DEFAULT_UPSTREAM_CA */
    int tls_leaf_days;          /* 1..825, default 7 */
    int pin_hold_kib;           /* a pinned body up to this is held whole until verified; 0..65536, default 8192 */
    bool inspects;              /* some request rule exists */
    struct sl_tls_server *tls_server;   /* the CA and its leaves (tls.h); NULL unless inspecting */
    struct sl_tls_client *tls_client;   /* upstream_ca, for the origins' certificates */

    /* [credentials] (credentials.h) */
    char *credentials_file, *secret_dir;   /* NULL: not set */
    struct sl_credential *credentials;     /* in file order */
    size_t ncredentials;
    sl_allowlist *credential_hosts;        /* entry i: credentials[i]'s HOST */

    /* [sessions] (sessions.h) */
    char *sessions_dir;                    /* NULL: no sessions; every client is anonymous */
    bool sessions_require;                 /* a client without credentials gets 407 */
    struct sl_session *sessions;           /* sorted by name */
    size_t nsessions;

    sl_input *inputs;                      /* every file and directory the load read, once each */
    size_t ninputs;
} sl_policy;

/* Load the policy: defaults, then the config file (if any), then flags.
 * Every error is reported through `report` as "FILE:LINE: message" (or
 * "--flag: message"); returns NULL if there was any. */
sl_policy *sl_policy_load(const sl_options *opt, sl_report_fn report, void *ctx);

/* A reporter that prints each message on standard error after the prefix
 * given as ctx (a string, or NULL). */
void sl_report_stderr(void *ctx, const char *msg);

/* Records that the policy was read from path (kept once). */
void sl_policy_note_input(sl_policy *p, const char *path, bool dir);

sl_policy *sl_policy_ref(sl_policy *p);
void sl_policy_unref(sl_policy *p);

/* The effective policy, as `sluice check` prints it. */
void sl_policy_print(const sl_policy *p, FILE *out);

/* What `sluice check` warns about (the exit status stays 0): plain entries
 * shadowed by request rules, as "FILE:LINE: warning: ...". */
void sl_policy_warnings(const sl_policy *p, sl_report_fn report, void *ctx);

#endif
