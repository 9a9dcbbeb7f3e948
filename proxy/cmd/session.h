/* `sluice session new NAME [--dir DIR] [--allowlist FILE]... [--ttl DURATION]
 * [-c FILE]`: makes a session file with a fresh token and prints the proxy
 * URL, the only place the token ever appears. */
#ifndef SLUICE_SESSION_CMD_H
#define SLUICE_SESSION_CMD_H

/* argv[0] is "session". Exit 0 when DIR/NAME.ini was written, 1 on a
 * failure (nothing left behind), 2 on a usage error, a bad allowlist, or
 * when the session exists already. */
int sl_cmd_session(int argc, char **argv);

#endif
