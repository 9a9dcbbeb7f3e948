/* systemd's readiness protocol (sd_notify): a datagram to $NOTIFY_SOCKET.
 * systemd documents the protocol as stable for reimplementation, so this
 * needs no libsystemd. Does nothing when the variable is unset. */
#ifndef SLUICE_NOTIFY_H
#define SLUICE_NOTIFY_H

/* Sends e.g. "READY=1\nSTATUS=listening on 127.0.0.1:3128". */
void sl_notify(const char *state);

#endif
