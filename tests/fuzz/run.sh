#!/bin/bash
# Build every fuzz target (clang, libFuzzer, ASan, UBSan) into build/fuzz/ and
# run each for SECONDS on its seed corpus (default 2: libFuzzer stops once
# more than that many whole seconds have passed, so about 3 s each). Fails on
# any crash, leak, timeout, out-of-memory, sanitizer report or broken
# property.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]
#
# Targets run FUZZ_JOBS at a time (default: the number of CPUs). Crashing
# inputs go to build/fuzz/artifacts/, each target's log to build/fuzz/logs/.
# Runs of 30 s or more read and extend build/fuzz/corpus/<target>/ (kept
# between runs; `make clean` drops it); shorter ones (make test) start from
# the seeds only, so their time stays fixed (FUZZ_KEEP_CORPUS=1: use it too).
# FUZZ_ARGS adds libFuzzer options to every run. See tests/fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

SECS=${1:-2}
shift || true
O=build/fuzz
JOBS=${FUZZ_JOBS:-$(nproc)}

make -s -f tests/fuzz/fuzz.mk -j"$JOBS" >/dev/null
tests/fuzz/make_corpus.sh >/dev/null

if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in tests/fuzz/fuzz_*.c; do
        t=$(basename "$f" .c)
        targets+=("$t")
    done
fi

mkdir -p "$O/artifacts" "$O/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Runs under 30 s (make test) start from the seeds alone and keep what they
# find in a scratch directory, so that their time does not grow with the
# corpus; longer runs read and extend build/fuzz/corpus/<target>.
if [ "$SECS" -lt 30 ] && [ -z "${FUZZ_KEEP_CORPUS:-}" ]; then
    WORK=$O/scratch
    rm -rf "$WORK"
else
    WORK=$O/corpus
fi

run_one() {
    local t=$1 dict=() rc=0
    mkdir -p "$WORK/$t" "tests/fuzz/corpus/$t"
    [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
    # shellcheck disable=SC2086
    "$O/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$O/artifacts/$t-" "${dict[@]}" ${FUZZ_ARGS:-} \
        "$WORK/$t" "tests/fuzz/corpus/$t" </dev/null >"$O/logs/$t.log" 2>&1 || rc=$?
    # A sanitizer report that did not end the run is a failure too.
    if [ "$rc" -eq 0 ] && grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|FUZZ PROPERTY VIOLATED' \
        "$O/logs/$t.log"; then
        rc=99
    fi
    echo "$rc" >"$O/logs/$t.rc"
}

start=$(date +%s)
running=0
for t in "${targets[@]}"; do
    if [ ! -x "$O/$t" ]; then
        echo "fuzz: no such target: $t" >&2
        exit 2
    fi
    rm -f "$O/logs/$t.rc"
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

failed=0
printf '%-20s %10s %10s %8s %8s  %s\n' target runs exec/s cov ft result
for t in "${targets[@]}"; do
    log=$O/logs/$t.log
    rc=$(cat "$O/logs/$t.rc" 2>/dev/null || echo 98)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -1 || true)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" 2>/dev/null | tail -1 || true)
    cov=$( (grep -oE 'cov: [0-9]+' "$log" 2>/dev/null || true) | tail -1 | cut -d' ' -f2)
    ft=$( (grep -oE 'ft: [0-9]+' "$log" 2>/dev/null || true) | tail -1 | cut -d' ' -f2)
    if [ "$rc" -eq 0 ]; then
        res=ok
    else
        res="FAILED (exit $rc), log: $log"
        failed=$((failed + 1))
    fi
    printf '%-20s %10s %10s %8s %8s  %s\n' "$t" "${runs:--}" "${eps:--}" "${cov:--}" "${ft:--}" "$res"
done
echo "fuzz: ${#targets[@]} targets, ${SECS}s each, $(( $(date +%s) - start ))s in all"

if [ "$failed" -gt 0 ]; then
    for t in "${targets[@]}"; do
        rc=$(cat "$O/logs/$t.rc" 2>/dev/null || echo 98)
        [ "$rc" -eq 0 ] && continue
        echo
        echo "==== $t (exit $rc): end of $O/logs/$t.log"
        (grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED|RELOAD)' "$O/logs/$t.log" || true) | tail -60
    done
    echo
    echo "fuzz: $failed target(s) failed; crashing inputs are in $O/artifacts/" >&2
    exit 1
fi
