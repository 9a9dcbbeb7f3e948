#!/bin/sh
# How fast `sluice audit` reads a large decision log, and in how much memory.
#
#   bench/audit_speed.sh [SIZE_MB]        (default 1024: a ~1 GiB log)
#
# Builds bench/gen_audit_log.c, writes a synthetic hash-chained log of
# SIZE_MB (SPEC's format: allowed tunnels with close lines, plain HTTP,
# refusals; 3,000 destinations, 100 clients), then times
# `sluice audit --summary` and `sluice audit --verify` on it and prints MB/s
# and peak RSS. The log is read just after it was written, so from the page
# cache: the figures are the tool's own speed, not the disk's.
#
# Environment: SLUICE_BIN (default build/sluice; use the optimised build, not
# build/san), AUDIT_BENCH_DIR (where the log goes; default a new directory
# under /tmp, removed at the end unless KEEP=1).
set -eu
cd "$(dirname "$0")/.."

SIZE_MB=${1:-1024}
SLUICE=${SLUICE_BIN:-build/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
[ -x "$SLUICE" ] || { echo "audit_speed: $SLUICE not found (make, or set SLUICE_BIN)" >&2; exit 2; }

if [ -n "${AUDIT_BENCH_DIR:-}" ]; then
    WORK=$AUDIT_BENCH_DIR
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d /tmp/sluice-audit-bench.XXXXXX)
    [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT INT TERM
fi
LOG=$WORK/decisions.log

gcc -std=c17 -O2 -D_GNU_SOURCE -Iproxy/crypto -o "$WORK/gen_audit_log" bench/gen_audit_log.c proxy/crypto/crypto.c proxy/crypto/sha256ni.c -lmbedcrypto
echo "generating a ${SIZE_MB} MiB chained log in $LOG ..."
"$WORK/gen_audit_log" "$LOG" "$SIZE_MB"
BYTES=$(stat -c %s "$LOG")

now() { date +%s.%N; }

# run MODE: prints "wall_seconds cpu_seconds peak_rss_kib" (cpu: user + system;
# 0 when unknown). On a busy machine wall time is the one that lies.
run() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -v -o "$WORK/time.txt" "$SLUICE" audit "$1" "$LOG" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
            { echo "audit $1 failed:" >&2; cat "$WORK/err.txt" >&2; exit 1; }
        awk -F': ' '
            /Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i] }
            /User time \(seconds\)/ { cpu += $2 }
            /System time \(seconds\)/ { cpu += $2 }
            /Maximum resident set size/ { rss = $2 }
            END { printf "%.3f %.3f %d\n", s, cpu, rss }' "$WORK/time.txt"
    else
        # No GNU time: sample VmHWM (the kernel's peak RSS) from /proc until exit.
        t0=$(now)
        "$SLUICE" audit "$1" "$LOG" >"$WORK/out.txt" 2>"$WORK/err.txt" &
        pid=$!
        hwm=0
        while kill -0 "$pid" 2>/dev/null; do
            v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
            [ -n "$v" ] && hwm=$v
            sleep 0.05
        done
        wait "$pid" || { echo "audit $1 failed:" >&2; cat "$WORK/err.txt" >&2; exit 1; }
        t1=$(now)
        echo "$t0 $t1 $hwm" | awk '{ printf "%.3f 0 %d\n", $2 - $1, $3 }'
    fi
}

printf '%-10s %8s %9s %8s %9s %12s\n' mode wall-s MB/s cpu-s "MB/cpu-s" "peak RSS"
for mode in --summary --verify; do
    set -- $(run $mode)
    echo "$1 $2 $3 $BYTES" | awk -v m="$mode" '{
        wall = $1 > 0 ? $1 : 1e-9
        cpu = "-"
        if ($2 > 0) cpu = sprintf("%.1f", $4 / 1e6 / $2)
        printf "%-10s %8.2f %9.1f %8.2f %9s %8.1f MiB\n", m, $1, $4 / 1e6 / wall, $2, cpu, $3 / 1024 }'
done
echo "(MB = 10^6 bytes; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "log: $BYTES bytes, $(wc -l <"$LOG") lines; $("$SLUICE" audit --verify "$LOG")"
