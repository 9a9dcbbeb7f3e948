/* Tunnel bodies through splice(2): bytes move socket -> pipe -> socket in
 * the kernel, never copied through user space. A tunnel switches to it once
 * it has relayed enough to look like a bulk transfer and its bufferevents
 * are empty; short tunnels stay on bufferevents, where a pipe pair would
 * cost more than it saves. */
#ifndef SLUICE_SPLICE_H
#define SLUICE_SPLICE_H

#include <stdbool.h>

struct conn;

/* Bytes a tunnel relays through bufferevents before it may switch. */
#define SPLICE_AFTER_BYTES (256 * 1024)

/* Take over the tunnel's sockets. False if it cannot (then nothing changed). */
bool splice_start(struct conn *c);
/* Free the pipes and events (from conn_close). */
void splice_free(struct conn *c);

#endif
