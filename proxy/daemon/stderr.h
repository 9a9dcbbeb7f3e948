/* Standard error that never blocks the gate (see stderr.c). */
#ifndef SLUICE_STDERR_H
#define SLUICE_STDERR_H

/* When standard error is a pipe or a socket: put a non-blocking pipe of our
 * own in front of it, drained by a forwarder process. Call before any
 * thread starts. */
void sl_stderr_start(void);

/* Give fd 2 back, let the forwarder copy what is left (at most 3 s), and
 * reap it. */
void sl_stderr_stop(void);

#endif
