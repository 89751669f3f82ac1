#!/bin/bash
# Issue 27, nineteenth step (docs/benchmarks.md): where etcd's CPU per task goes, under the cycle load.
#
#   bash docs/experiments/issue27-etcd-pprof.sh OUTDIR [bench args…]
#   node docs/experiments/issue27-etcd-pprof.mjs $(ls -S OUTDIR/*.pb.gz | head -5 | paste -sd,)
#
# Runs the bench (default: the leasehold side of the cycle, one round of 20 s) with the bench's etcd
# started with `--enable-pprof` (LEASEHOLD_BENCH_ETCD_ARGS), and takes etcd's Go CPU profile
# (`/debug/pprof/profile?seconds=4`) back to back until the bench ends. The profiles of the load
# window are the largest files. etcd's binary is stripped, but a Go profile names its functions.
set -euo pipefail
out=${1:?usage: issue27-etcd-pprof.sh OUTDIR [bench args]}
shift
[ $# -gt 0 ] || set -- --only cycle --rounds 1 --seconds 20
mkdir -p "$out"
cd "$(dirname "$0")/../.."
LEASEHOLD_BENCH_CYCLE_SIDES=${LEASEHOLD_BENCH_CYCLE_SIDES:-leasehold} LEASEHOLD_BENCH_ETCD_ARGS=--enable-pprof \
  node bench/run.mjs "$@" >"$out/bench.log" 2>&1 &
bench=$!
url=""
while kill -0 "$bench" 2>/dev/null; do
  if [ -z "$url" ]; then
    url=$(ps -eo args | grep '[e]tcd --name bench' | grep -o 'listen-client-urls [^ ]*' | head -1 | cut -d' ' -f2 || true)
    sleep 0.5
    continue
  fi
  curl -s -m 10 -o "$out/p$(date +%H%M%S).pb.gz" "$url/debug/pprof/profile?seconds=4" || url=""
done
wait "$bench"
ls -S "$out"/*.pb.gz | head -5
