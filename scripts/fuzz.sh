#!/usr/bin/env bash
# `pnpm fuzz [--duration 10m]`: the property-based fuzzers of the HTTP and WebSocket entry points
# (test/fuzz), each target for the given time (default 15 s; `s`, `m` or `h` suffix).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=15
while [ $# -gt 0 ]; do
  case "$1" in
    --duration)
      d="${2:?--duration needs a value like 90s, 10m or 1h}"; shift 2
      case "$d" in
        *h) seconds=$(( ${d%h} * 3600 )) ;;
        *m) seconds=$(( ${d%m} * 60 )) ;;
        *s) seconds=${d%s} ;;
        *) seconds=$d ;;
      esac ;;
    *) echo "usage: pnpm fuzz [--duration 10m]" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh >&2
LEASEHOLD_FUZZ_SECONDS=$seconds exec pnpm exec vitest run --project fuzz
