#!/bin/bash
# Issue 27, twentieth step (docs/benchmarks.md): the coordinator's CPU by `perf`, with JIT names.
#
#   bash docs/experiments/issue27-perf-cpu.sh OUTDIR [bench args…]     (as root: perf reads all CPUs)
#   node docs/experiments/issue27-perf-cpu.mjs OUTDIR/perf.script $(cat OUTDIR/pid)
#
# Runs the bench (default: the leasehold side of the cycle, 3 rounds of 20 s) with the coordinator
# started with `--perf-prof` (LEASEHOLD_BENCH_NODE_ARGS_COORDINATOR: node writes a jitdump,
# jit-PID.dump, in the coordinator's working directory), waits until the coordinator has used more
# than 400 ms of CPU a second for 30 s in a row (past the warm-up), records 8 s of its threads with
# `perf record -k mono -e cpu-clock -g` (a software event: this VM has no hardware counters), names
# the JIT code with `perf inject --jit` while the dump still exists, and writes `perf script` of it.
# Unlike `--cpu-prof`, these are samples of CPU time, of every thread of the process (V8's compiler
# and GC threads included), kernel time included.
set -euo pipefail
out=${1:?usage: issue27-perf-cpu.sh OUTDIR [bench args]}
shift
[ $# -gt 0 ] || set -- --only cycle --rounds 3 --seconds 20
mkdir -p "$out"
cd "$(dirname "$0")/../.."
LEASEHOLD_BENCH_CYCLE_SIDES=${LEASEHOLD_BENCH_CYCLE_SIDES:-leasehold} \
  LEASEHOLD_BENCH_NODE_ARGS_COORDINATOR='--perf-prof --interpreted-frames-native-stack' \
  node bench/run.mjs "$@" >"$out/bench.log" 2>&1 &
bench=$!
busy=0
while kill -0 "$bench" 2>/dev/null && [ "$busy" -lt 30 ]; do
  pid=$(pgrep -f 'node .*coordinator/dis[t]/main' | head -1 || true)
  if [ -z "$pid" ]; then
    sleep 1
    continue
  fi
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep 1
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo "$a")
  if [ $(((b - a) * 10)) -gt 400 ]; then busy=$((busy + 1)); else busy=0; fi
done
if [ "$busy" -ge 30 ]; then
  echo "$pid" >"$out/pid"
  perf record -k mono -e cpu-clock -F 999 -g -p "$pid" -o "$out/perf.data" -- sleep 8
  perf inject --jit -i "$out/perf.data" -o "$out/perf.jit.data"
  perf script -i "$out/perf.jit.data" -F pid,tid,ip,sym,dso >"$out/perf.script" 2>/dev/null
fi
wait "$bench"
[ -f "$out/perf.script" ] || { echo "the coordinator never stayed busy: no profile" >&2; exit 1; }
echo "coordinator pid $(cat "$out/pid")"
