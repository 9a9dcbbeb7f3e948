#!/bin/bash
# bench/run.sh [--smoke] [--only NAME]... [--duration S] [--json FILE] [--keep] [-q]
#
# Runs the benchmark (bench/run.py) in a network namespace of its own, so
# that every packet stays on this machine's loopback and nothing collides
# with another process's ports. Needs root (unshare --net). Installs
# nothing: `make bench` installs the packages and builds the binaries first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mine=$(readlink /proc/self/ns/net)
if [ "${SLUICE_BENCH_PARENT_NETNS:-}" = "" ] || [ "$SLUICE_BENCH_PARENT_NETNS" = "$mine" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bench: run as root: it needs a network namespace of its own (unshare --net)" >&2
        exit 2
    fi
    export SLUICE_BENCH_PARENT_NETNS="$mine"
    exec unshare --net -- "$here/run.sh" "$@"
fi
exec /usr/bin/python3 "$here/run.py" "$@"
