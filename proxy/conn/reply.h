/* The replies sluice itself writes to clients. */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

struct evbuffer;

/* A refusal: status line, `Sluice-Decision: deny; reason=REASON`,
 * Content-Type text/plain, Connection: close, and a one-paragraph body. */
void sl_reply_refusal(struct evbuffer *out, int status, const char *reason, const char *detail);

/* After an allow decision, when the origin fails before its response
 * began: a 502 that is not a policy decision (no Sluice-Decision header). */
void sl_reply_origin_error(struct evbuffer *out, const char *detail);

/* The reply to a CONNECT once the tunnel is open. */
void sl_reply_connect_ok(struct evbuffer *out);

const char *sl_status_text(int status);

#endif
