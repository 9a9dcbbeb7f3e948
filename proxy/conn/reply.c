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
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default:  return "Error";
    }
}

void sl_reply_refusal(struct evbuffer *out, int status, const char *reason, const char *detail)
{
    char body[1400];
    int n = snprintf(body, sizeof body, "sluice refused this request (%s).\n%s\n", reason, detail);
    if (n < 0 || (size_t)n >= sizeof body)
        n = (int)sizeof body - 1;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\n"
                        "Sluice-Decision: deny; reason=%s\r\n"
                        "Content-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %d\r\n"
                        "Connection: close\r\n"
                        "\r\n",
                        status, sl_status_text(status), reason, n);
    evbuffer_add(out, body, (size_t)n);
}

void sl_reply_connect_ok(struct evbuffer *out)
{
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    evbuffer_add(out, ok, sizeof ok - 1);
}

void sl_reply_error(struct evbuffer *out, int status, const char *detail)
{
    char body[700];
    int n = snprintf(body, sizeof body, "sluice: %s\n", detail);
    if (n < 0 || (size_t)n >= sizeof body)
        n = (int)sizeof body - 1;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\n"
                        "Content-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %d\r\n"
                        "Connection: close\r\n"
                        "\r\n",
                        status, sl_status_text(status), n);
    evbuffer_add(out, body, (size_t)n);
}
