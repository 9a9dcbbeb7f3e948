/* Replies written by sluice itself. */
#include "reply.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

const char *sl_status_text(int status)
{
    switch (status) {
    case 200: return "Connection established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default:  return "Error";
    }
}

/* A reply of sluice's own: the status, a Sluice-Decision header for a
 * refusal (reason set), a plain-text body, and Connection: close. */
static void reply(struct evbuffer *out, int status, const char *reason, const char *body)
{
    size_t n = strlen(body);   /* what snprintf kept, cut or not */
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, sl_status_text(status));
    if (reason)
        evbuffer_add_printf(out, "Sluice-Decision: deny; reason=%s\r\n", reason);
    if (status == 407)   /* RFC 9110 15.5.8: a 407 names the scheme the client is to use */
        evbuffer_add_printf(out, "Proxy-Authenticate: Basic realm=\"sluice\"\r\n");
    evbuffer_add_printf(out,
                        "Content-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\n"
                        "Connection: close\r\n"
                        "\r\n",
                        n);
    evbuffer_add(out, body, n);
}

void sl_reply_refusal(struct evbuffer *out, int status, const char *reason, const char *detail)
{
    char body[1400];
    snprintf(body, sizeof body, "sluice refused this request (%s).\n%s\n", reason, detail);
    reply(out, status, reason, body);
}

void sl_reply_connect_ok(struct evbuffer *out)
{
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    evbuffer_add(out, ok, sizeof ok - 1);
}

void sl_reply_error(struct evbuffer *out, int status, const char *detail)
{
    char body[700];
    snprintf(body, sizeof body, "sluice: %s\n", detail);
    reply(out, status, NULL, body);
}
