#!/usr/bin/env bash
# `pnpm chaos`: the fault-injection runner against real processes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >/dev/null
runner=test/chaos/run.ts
if [ ! -f "$runner" ]; then
  echo "leasehold: the chaos runner is not in this version yet." >&2
  exit 2
fi
exec pnpm exec vitest run --project chaos "$@"
