/* `sluice allow-from-lockfile`: the allowlist a locked install needs,
 * derived offline from lockfiles and package-manager config. */
#ifndef SLUICE_CMD_LOCKFILE_H
#define SLUICE_CMD_LOCKFILE_H

/* argv[0] is "allow-from-lockfile". Returns the process exit code: 0, 1 when
 * the output cannot be written, 2 on a usage error or any refused input. */
int sl_cmd_allow_from_lockfile(int argc, char **argv);

#endif
