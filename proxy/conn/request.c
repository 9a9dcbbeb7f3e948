/* Reading a request head from the client and turning it into an exchange:
 * the target host and port, and for plain HTTP the head to send upstream. */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "credentials.h"

static void copy_method(conn *c, const sl_http_head *h)
{
    size_t n = h->method_text.len < sizeof c->x.method_text - 1 ? h->method_text.len
                                                                  : sizeof c->x.method_text - 1;
    memcpy(c->x.method_text, h->method_text.p, n);
    c->x.method_text[n] = '\0';
}

/* For a refused head, log what the client asked for, however garbled: the
 * JSON writer escapes it. */
static void record_raw_target(conn *c, sl_span t)
{
    if (c->in) {
        /* Inside a tunnel the host is the tunnel's: the target goes in path. */
        const char *q = memchr(t.p, '?', t.len);
        size_t n = q ? (size_t)(q - t.p) : t.len;   /* request lines carry no query */
        free(c->x.path);
        c->x.path = strndup(t.p, n < 1024 ? n : 1024);
        return;
    }
    size_t n = t.len < SL_HOST_MAX ? t.len : SL_HOST_MAX;
    memcpy(c->x.host.name, t.p, n);
    c->x.host.name[n] = '\0';
    c->x.host.len = n;
}

static bool same_authority(const sl_host *a, int aport, const sl_host *b, int bport)
{
    return aport == bport && a->kind == b->kind && strcmp(a->name, b->name) == 0;
}

/* The head sent upstream: origin-form request line, Host from the URL, the
 * end-to-end headers as the client sent them. Hop-by-hop headers (and any
 * the client's Connection names), Proxy-Authorization and Host are dropped;
 * no Via or X-Forwarded-For is added, so nothing about the sandbox leaks.
 * A header that a credential sets for this host is the gate's: the
 * client's value is dropped (request_seal_head adds the gate's). The head
 * is left open: request_seal_head ends it once the request is allowed. */
static bool build_upstream_head(conn *c, const sl_http_head *h, sl_span path, int default_port)
{
    char auth[SL_HOST_MAX + 3];
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return false;
    const sl_policy *p = c->pol;
    const sl_credential *cred = p->ncredentials ? sl_policy_credential(p, &c->x.host, c->x.port, c->in != NULL)
                                                : NULL;
    sl_host_authority(&c->x.host, auth, sizeof auth);
    evbuffer_add(b, h->method_text.p, h->method_text.len);
    evbuffer_add(b, " ", 1);
    if (path.len == 0 || path.p[0] != '/')
        evbuffer_add(b, "/", 1);
    evbuffer_add(b, path.p, path.len);
    evbuffer_add_printf(b, " HTTP/1.%d\r\n", h->version_minor);
    if (c->x.port == default_port)
        evbuffer_add_printf(b, "Host: %s\r\n", auth);
    else
        evbuffer_add_printf(b, "Host: %s:%d\r\n", auth, c->x.port);
    for (size_t i = 0; i < h->nheaders; i++) {
        const sl_http_header *hd = &h->headers[i];
        if (hd->hop_by_hop || sl_http_header_is(hd, "host") || (cred && sl_http_header_is(hd, cred->header)))
            continue;
        evbuffer_add(b, hd->name.p, hd->name.len);
        evbuffer_add(b, ": ", 2);
        evbuffer_add(b, hd->value.p, hd->value.len);
        evbuffer_add(b, "\r\n", 2);
    }
    /* An HTTP/1.0 client that asked for keep-alive gets it upstream too. */
    if (h->version_minor == 0 && !h->conn_close)
        evbuffer_add_printf(b, "Connection: keep-alive\r\n");
    c->x.up_head = b;
    return true;
}

/* Whether a line of the open upstream head (sluice's own: "Name: value"
 * lines it wrote from checked headers) names this field; with drop, such
 * lines are taken out. */
static bool head_field(struct evbuffer *head, const char *name, bool drop)
{
    size_t len = evbuffer_get_length(head), nlen = strlen(name);
    const char *p = (const char *)evbuffer_pullup(head, (ev_ssize_t)len);
    if (!p)
        return false;
    bool found = false;
    const char *first_eol = memchr(p, '\n', len);
    size_t off = first_eol ? (size_t)(first_eol - p) + 1 : len;   /* past the request line */
    struct evbuffer *kept = drop ? evbuffer_new() : NULL;
    if (kept)
        evbuffer_add(kept, p, off);
    while (off < len) {
        const char *eol = memchr(p + off, '\n', len - off);
        size_t n = eol ? (size_t)(eol - (p + off)) + 1 : len - off;
        bool hit = n > nlen && p[off + nlen] == ':' && strncasecmp(p + off, name, nlen) == 0;
        found |= hit;
        if (kept && !hit)
            evbuffer_add(kept, p + off, n);
        off += n;
    }
    if (kept && found) {
        evbuffer_drain(head, len);
        evbuffer_add_buffer(head, kept);
    }
    if (kept)
        evbuffer_free(kept);
    return found;
}

static bool pinned(const conn *c)
{
    return c->x.rule && sl_entry_is_rule(c->x.rule) && c->x.rule->ndigests > 0;
}

void request_seal_head(conn *c)
{
    if (pinned(c)) {
        /* The digest is over the bytes as stored: no content coding. */
        head_field(c->x.up_head, "accept-encoding", true);
        evbuffer_add(c->x.up_head, "Accept-Encoding: identity\r\n", 27);
    }
    if (c->x.cred)
        evbuffer_add_printf(c->x.up_head, "%s: %s\r\n", c->x.cred->header, c->x.cred->value);
    evbuffer_add(c->x.up_head, "\r\n", 2);
}

/* The path the rules see: the request line's target as sent upstream (the
 * head's first line), up to its query. */
static bool upstream_path(conn *c, const char **path, size_t *len)
{
    struct evbuffer_ptr eol = evbuffer_search_eol(c->x.up_head, NULL, NULL, EVBUFFER_EOL_CRLF);
    if (eol.pos < 0)
        return false;
    const char *line = (const char *)evbuffer_pullup(c->x.up_head, eol.pos);
    const char *sp = line ? memchr(line, ' ', (size_t)eol.pos) : NULL;
    if (!sp)
        return false;
    const char *t = sp + 1, *end = line + eol.pos;
    const char *tend = memchr(t, ' ', (size_t)(end - t));
    if (!tend)
        return false;
    const char *q = memchr(t, '?', (size_t)(tend - t));
    *path = t;
    *len = (size_t)((q ? q : tend) - t);
    return true;
}

bool request_rules(conn *c)
{
    const sl_policy *p = c->pol;
    const char *path;
    size_t len;
    if (!upstream_path(c, &path, &len)) {
        conn_close(c, "out_of_memory");
        return false;
    }
    c->x.path = strndup(path, len);
    if (!c->x.path) {
        conn_close(c, "out_of_memory");
        return false;
    }
    c->x.rule = NULL;   /* a refusal here names no rule: none allowed it */
    const char *why = sl_path_ambiguous(path, len);
    if (why) {
        conn_refuse(c, 400, "bad_request",
                    "The request path is ambiguous (%s): origins read such paths in different ways, so "
                    "sluice matches no rule against it.", why);
        return false;
    }
    const sl_entry *rule = NULL;
    bool tls = c->in != NULL;
    sl_match_result m = conn_match_request(c, tls, path, len, &rule);
    if (m != SL_MATCH_ALLOWED) {
        char line[1400];
        if (!sl_allowlist_suggest_rule(&c->x.host, c->x.port, tls, &p->connect_ports, &p->http_ports,
                                       c->x.method_text, path, len, line, sizeof line))
            line[0] = '\0';
        c->x.suggest = line;
        conn_refuse(c, 403, "rule_not_matched",
                    "%s %s on %s is not allowed: %s is inspected, and no request rule matches. To allow it, "
                    "add this line to an allowlist file:\n\n    %s\n",
                    c->x.method_text, c->x.path, c->x.host.name, c->x.host.name, line);
        c->x.suggest = NULL;
        return false;
    }
    c->x.rule = rule;
    if (pinned(c) && head_field(c->x.up_head, "range", false)) {
        /* Part of a pinned artifact cannot be checked against its digest. */
        conn_refuse(c, 403, "integrity_unverifiable",
                    "%s is pinned by %s:%d: only the whole artifact can be checked against its digest, "
                    "so a Range request for it is refused.", c->x.path, rule->file, rule->line);
        return false;
    }
    /* A secret goes only into TLS the gate verified, never in the clear,
     * and never in a TRACE, whose response is the request itself (RFC 9110
     * 9.3.8): the client's own value of the header is dropped all the same. */
    if (tls && p->ncredentials && c->x.method != SL_METHOD_TRACE)
        c->x.cred = sl_policy_credential(p, &c->x.host, c->x.port, true);
    return true;
}

/* The request's body framing, from its head. */
static void set_request_body(conn *c, const sl_http_head *h)
{
    c->x.client_http10 = h->version_minor == 0;
    c->x.client_close = h->conn_close;
    if (h->chunked) {
        c->x.req.kind = BODY_CHUNKED;
        sl_chunked_init(&c->x.req.chunked);
    } else if (h->content_length > 0) {
        c->x.req.kind = BODY_LENGTH;
        c->x.req.remaining = (uint64_t)h->content_length;
    } else {
        c->x.req.kind = BODY_NONE;
        c->x.req.done = true;
    }
}

/* A request inside an inspected tunnel: origin-form, for the tunnel's host. */
static void start_tunnel_request(conn *c, const sl_http_head *h)
{
    const char *err;
    if (h->method == SL_METHOD_CONNECT) {
        conn_refuse(c, 400, "bad_request", "CONNECT inside a tunnel is not allowed.");
        return;
    }
    if (h->target.len == 0 || h->target.p[0] != '/') {
        conn_refuse(c, 400, "bad_request", "Inside a tunnel a request names a path (origin-form).");
        return;
    }
    if (!h->host.p) {
        conn_refuse(c, 400, "bad_request", "The request has no Host header.");
        return;
    }
    sl_host hh;
    int hport;
    if (!sl_authority_parse(h->host.p, h->host.len, false, &hh, &hport, &err) ||
        !same_authority(&hh, hport < 0 ? c->in->port : hport, &c->x.host, c->x.port) ||
        (hport < 0 && c->x.port != 443)) {
        conn_refuse(c, 400, "bad_request", "The Host header does not name the tunnel's host.");
        return;
    }
    set_request_body(c, h);
    if (!build_upstream_head(c, h, h->target, 443)) {
        conn_close(c, "out_of_memory");
        return;
    }
    evbuffer_drain(c->cli->in, h->head_len);
    conn_decide(c);
}

static void start_plain_http(conn *c, const sl_http_head *h)
{
    sl_span authority, path;
    const char *err;
    if (h->target.len > 0 && h->target.p[0] == '/') {
        record_raw_target(c, h->target);
        conn_refuse(c, 400, "bad_request",
                    "This is a proxy: send the full URL (absolute-form), or use CONNECT for TLS.");
        return;
    }
    if (!sl_http_parse_absolute(h->target, &authority, &path, &err)) {
        record_raw_target(c, h->target);
        conn_refuse(c, 400, "bad_request", "Bad request target: %s.", err);
        return;
    }
    int port;
    if (!sl_authority_parse(authority.p, authority.len, false, &c->x.host, &port, &err)) {
        record_raw_target(c, authority);
        conn_refuse(c, 400, "bad_request", "Bad host in the URL: %s.", err);
        return;
    }
    c->x.port = port < 0 ? 80 : port;

    /* Host must agree with the URL (RFC 9112 3.2.2 lets a proxy ignore it,
     * but an origin that routes on Host would then see another name). */
    if (h->host.p) {
        sl_host hh;
        int hport;
        if (!sl_authority_parse(h->host.p, h->host.len, false, &hh, &hport, &err) ||
            !same_authority(&hh, hport < 0 ? 80 : hport, &c->x.host, c->x.port)) {
            conn_refuse(c, 400, "bad_request", "The Host header does not match the URL.");
            return;
        }
    } else if (h->version_minor == 1) {
        conn_refuse(c, 400, "bad_request", "HTTP/1.1 requests need a Host header.");
        return;
    }

    set_request_body(c, h);
    if (!build_upstream_head(c, h, path, 80)) {
        conn_close(c, "out_of_memory");
        return;
    }
    evbuffer_drain(c->cli->in, h->head_len);
    conn_decide(c);
}

void conn_on_head(conn *c)
{
    struct evbuffer *in = c->cli->in;
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return;
    if (c->nexchanges > 0 && c->timer_ms != c->pol->header_ms && c->scanned == 0) {
        /* First byte of a keep-alive client's next request: the head clock starts. */
        conn_timer(c, c->pol->header_ms);
    }
    size_t n = len < SL_HTTP_MAX_HEAD + 1 ? len : SL_HTTP_MAX_HEAD + 1;
    const char *p = (const char *)evbuffer_pullup(in, (ssize_t)n);
    if (!p) {
        conn_close(c, "out_of_memory");
        return;
    }
    /* Parse only when a line has ended or a limit is reached, so that a
     * client sending a byte at a time costs a scan, not a parse. */
    bool newline = c->scanned < n && memchr(p + c->scanned, '\n', n - c->scanned) != NULL;
    c->scanned = n;
    if (!newline && n <= SL_HTTP_MAX_LINE && !c->cli->eof)
        return;

    static _Thread_local sl_http_head h;   /* 4 KiB: not on a callback's stack */
    sl_http_status st = sl_http_parse_request(p, n, &h);
    if (st == SL_HTTP_INCOMPLETE) {
        if (c->cli->eof)
            conn_close(c, "client_eof");   /* a head cut short by the client's end is no request */
        return;
    }
    c->scanned = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->x.t_start);
    c->nexchanges++;
    if (c->in)
        c->in->n++;
    c->x.head_parsed = true;
    if (st != SL_HTTP_OK) {
        if (h.method_text.p)
            copy_method(c, &h);
        if (h.target.p)
            record_raw_target(c, h.target);
        conn_refuse(c, st == SL_HTTP_TOO_LARGE ? 431 : 400, "bad_request", "%s.",
                    h.error ? h.error : "Malformed request head");
        return;
    }
    copy_method(c, &h);
    c->x.method = h.method;
    if (!c->in) {   /* inside an inspected tunnel, requests are the CONNECT's session's, by its policy */
        session_refresh_policy(c);
        session_read_head(c, &h);
    }
    if (c->in) {
        start_tunnel_request(c, &h);
        return;
    }
    if (h.method == SL_METHOD_CONNECT) {
        const char *err;
        c->x.is_connect = true;
        if (!sl_authority_parse(h.target.p, h.target.len, true, &c->x.host, &c->x.port, &err)) {
            record_raw_target(c, h.target);
            conn_refuse(c, 400, "bad_request", "Bad CONNECT target: %s.", err);
            return;
        }
        evbuffer_drain(in, h.head_len);
        conn_decide(c);
        return;
    }
    start_plain_http(c, &h);
}
