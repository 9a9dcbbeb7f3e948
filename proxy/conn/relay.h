/* The tunnel relay. Once a CONNECT tunnel is open (and its SNI checked) its
 * bytes no longer pass through streams: each direction reads the source
 * socket into a per-thread buffer and writes it straight to the other
 * socket, so a small exchange costs one read and one write, with no FIONREAD
 * probe and no epoll change unless the destination is full. A direction that
 * has carried a bulk's worth of bytes switches to splice(2) through a pipe,
 * so its bytes are no longer copied through user space at all.
 *
 * The relay owns both sockets from then on; the streams are freed (which
 * is most of an idle tunnel's memory). */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include <stdbool.h>

struct conn;

/* Bytes one direction copies before it switches to splice(2): short
 * tunnels never pay for a pipe. */
#define RELAY_SPLICE_AFTER (256 * 1024)

/* Take over the tunnel's sockets and whatever its streams still hold
 * (the 200 reply, bytes the client sent ahead, an origin's banner), and
 * start relaying; c->cli and c->up are NULL from now on. False: the
 * connection was closed (out of memory, or relaying failed at once). */
bool relay_start(struct conn *c);

/* Stop the relay's events (conn_close). */
void relay_stop(struct conn *c);

/* Close the sockets, free the pipes, events and held bytes (when the
 * connection is freed). */
void relay_free(struct conn *c);

#endif
