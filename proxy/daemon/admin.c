/* The admin endpoint, on libevent's own HTTP server (evhttp): a handful of
 * fixed GET routes on a loopback port do not need a parser of ours. */
#include "admin.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns.h"
#include "log.h"
#include "metrics.h"
#include "worker.h"

static struct evhttp *http;
static bool draining;

void sl_admin_set_draining(void)
{
    draining = true;
}

static void reply(struct evhttp_request *req, int code, const char *reason, const char *type,
                  struct evbuffer *body)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, code, reason, body);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    (void)arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct evbuffer *body = evbuffer_new();
    if (!body) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    bool get = evhttp_request_get_command(req) == EVHTTP_REQ_GET;
    char why[256];
    if (get && path && strcmp(path, "/healthz") == 0) {
        if (sl_log_failing(why, sizeof why)) {
            evbuffer_add_printf(body, "failing: decision log unwritable: %s\n", why);
            reply(req, 503, "Service Unavailable", "text/plain; charset=utf-8", body);
        } else if (draining) {
            evbuffer_add_printf(body, "draining\n");
            reply(req, 503, "Service Unavailable", "text/plain; charset=utf-8", body);
        } else {
            evbuffer_add_printf(body, "ok\n");
            reply(req, 200, "OK", "text/plain; charset=utf-8", body);
        }
    } else if (get && path && strcmp(path, "/metrics") == 0) {
        sl_metrics_render(body, atomic_load(&g_shared.clients), sl_log_failing(NULL, 0));
        reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
    } else if (get && path && strcmp(path, "/pins") == 0) {
        sl_policy *p = sl_shared_policy();
        sl_dns_render_pins(body, p);
        sl_policy_unref(p);
        reply(req, 200, "OK", "application/json", body);
    } else {
        evbuffer_add_printf(body, "not found\n");
        reply(req, 404, "Not Found", "text/plain; charset=utf-8", body);
    }
    evbuffer_free(body);
}

bool sl_admin_start(struct event_base *base, const char *listen, char *err, size_t errcap)
{
    char host[64];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host) {
        snprintf(err, errcap, "admin listen '%s': expected IP:PORT", listen);
        return false;
    }
    const char *h = listen;
    size_t hlen = (size_t)(colon - listen);
    if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    int port = atoi(colon + 1);

    http = evhttp_new(base);
    if (!http) {
        snprintf(err, errcap, "admin: out of memory");
        return false;
    }
    /* Every method reaches on_request, which answers 404 to all but GET. */
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                         EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                         EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(http, 8192);
    evhttp_set_max_body_size(http, 0);
    evhttp_set_timeout(http, 10);
    evhttp_set_gencb(http, on_request, NULL);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
    if (!bs) {
        snprintf(err, errcap, "admin: cannot listen on %s", listen);
        evhttp_free(http);
        http = NULL;
        return false;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &len) == 0) {
        sl_addr a;
        int p;
        char as[SL_ADDR_STRLEN];
        sl_addr_from_sockaddr((struct sockaddr *)&ss, &a, &p);
        sl_addr_format(&a, as, sizeof as);
        fprintf(stderr, a.family == AF_INET6 ? "sluice: admin on [%s]:%d\n" : "sluice: admin on %s:%d\n",
                as, p);
    }
    return true;
}

void sl_admin_stop(void)
{
    if (http)
        evhttp_free(http);
    http = NULL;
}
