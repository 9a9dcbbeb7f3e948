/* `sluice health ADDR:PORT`: asks a gate's admin endpoint for /healthz, for
 * container health checks in an image that has no shell and no curl. */
#ifndef SLUICE_HEALTH_H
#define SLUICE_HEALTH_H

/* argv[0] is "health". Exit 0 if /healthz answered 200 within 3 s, 1 if it
 * did not, 2 on a usage error. */
int sl_cmd_health(int argc, char **argv);

#endif
