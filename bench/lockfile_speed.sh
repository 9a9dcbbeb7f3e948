#!/bin/bash
# bench/lockfile_speed.sh [-n PACKAGES] [-r RUNS] [SLUICE_BINARY]
#
# Times `sluice allow-from-lockfile` on a generated npm package-lock.json
# (bench/gen_package_lock.py, 100,000 packages by default): wall time, user
# and system CPU, and peak RSS of each run, then the best of the runs; the
# same for `allow-from-lockfile --pins` (a rule per tarball), and the ratio
# of the two best wall times (target: --pins at most 1.5x the host-entry
# run). The lockfile is generated once into build/bench/ and reused.
#
# Exits 0 with a note if the binary has no allow-from-lockfile command yet.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
n=100000
runs=3
while getopts "n:r:" opt; do
    case $opt in
        n) n=$OPTARG ;;
        r) runs=$OPTARG ;;
        *) echo "usage: $0 [-n PACKAGES] [-r RUNS] [SLUICE_BINARY]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
sluice=${1:-$root/build/sluice}

if [ ! -x "$sluice" ]; then
    echo "lockfile_speed: $sluice is missing (make build/sluice)" >&2
    exit 2
fi
if ! "$sluice" allow-from-lockfile --help >/dev/null 2>&1 &&
   "$sluice" allow-from-lockfile 2>&1 | grep -q "unknown command"; then
    echo "lockfile_speed: $sluice has no allow-from-lockfile command yet; nothing to time"
    exit 0
fi

dir=$root/build/bench/lockfile-$n
lock=$dir/package-lock.json
mkdir -p "$dir"
if [ ! -s "$lock" ]; then
    /usr/bin/python3 "$here/gen_package_lock.py" -n "$n" "$lock"
fi
size=$(stat -c %s "$lock")

# One run: wall seconds, user seconds, system seconds, peak RSS (KiB), exit code.
/usr/bin/python3 - "$sluice" "$lock" "$runs" "$size" "$dir" <<'EOF'
import os, subprocess, sys, time
sluice, lock, runs, size, d = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
modes = [("host entries", [], "allowlist.txt"), ("--pins", ["--pins"], "allowlist-pins.txt")]
best = {}
# The two modes take turns, so that a machine getting busier or quieter
# weighs on both alike.
for i in range(runs):
    for label, args, out_name in modes:
        out_path = os.path.join(d, out_name)
        with open(out_path, "wb") as out, open(os.path.join(d, "stderr.txt"), "wb") as err:
            t0 = time.monotonic()
            p = subprocess.Popen([sluice, "allow-from-lockfile", *args, lock], stdout=out, stderr=err)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(status)
        lines = sum(1 for l in open(out_path, "rb") if l.strip() and not l.lstrip().startswith(b"#"))
        print(f"{label} run {i + 1}: {wall:.3f} s wall, {ru.ru_utime:.3f} s user, {ru.ru_stime:.3f} s sys, "
              f"peak RSS {ru.ru_maxrss / 1024:.1f} MB, exit {rc}, {lines} allowlist lines")
        if rc != 0:
            sys.stderr.write(open(os.path.join(d, "stderr.txt"), errors="replace").read()[-2000:])
            sys.exit(1)
        if label not in best or wall < best[label][0]:
            best[label] = (wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, lines, out_path)
for label, _, _ in modes:
    wall, ut, st, rss, lines, out_path = best[label]
    print(f"{label}: best of {runs}: {wall:.3f} s wall ({ut:.3f} user + {st:.3f} sys), peak RSS {rss / 1024:.1f} MB, "
          f"{size / 1e6:.1f} MB lockfile, {size / 1e6 / wall:.0f} MB/s, {lines} lines in {out_path}")
h, p = best["host entries"], best["--pins"]
print(f"--pins / host entries: {p[0] / h[0]:.2f}x wall (target <= 1.5x), "
      f"{(p[1] + p[2]) / (h[1] + h[2]):.2f}x CPU")
EOF
