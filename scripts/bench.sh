#!/usr/bin/env bash
# `pnpm bench`: the benchmark suite (ratios against baselines measured in the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >/dev/null
exec node bench/run.mjs "$@"
