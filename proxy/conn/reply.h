/* The replies sluice itself writes to clients. */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

struct evbuffer;

/* A refusal: status line, `Sluice-Decision: deny; reason=REASON`,
 * Content-Type text/plain, Connection: close, and a one-paragraph body. */
void sl_reply_refusal(struct evbuffer *out, int status, const char *reason, const char *detail);

/* After an allow decision, when the exchange fails before any of the final
 * response reached the client (400 for a malformed request body, 408 for a
 * stalled one, 502 and 504 for the origin's failures): a reply that is not
 * a policy decision (no Sluice-Decision header), with Connection: close. */
void sl_reply_error(struct evbuffer *out, int status, const char *detail);

/* The reply to a CONNECT once the tunnel is open. */
void sl_reply_connect_ok(struct evbuffer *out);

const char *sl_status_text(int status);

#endif
