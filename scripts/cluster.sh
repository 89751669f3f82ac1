#!/usr/bin/env bash
# README command (A): bring up the local cluster (etcd, sink, coordinator, workers) and run the
# demo workload. Bootstraps first (idempotent). Arguments go to `leasehold cluster up`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cli=packages/cli/dist/leasehold-main.js
if [ ! -f "$cli" ]; then
  echo "leasehold: $cli is missing after the build; run 'pnpm run build' and look at its errors." >&2
  exit 2
fi
exec node "$cli" cluster up "$@"
