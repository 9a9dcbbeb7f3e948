/* sluice run: the gate in the foreground. */
#ifndef SLUICE_RUN_H
#define SLUICE_RUN_H

#include "config.h"

/* Runs until SIGTERM/SIGINT (or exit_idle_s); returns the exit code. */
int sl_cmd_run(const sl_options *opts);

#endif
