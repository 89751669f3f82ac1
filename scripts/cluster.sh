#!/usr/bin/env bash
# README command (A): bring up the local cluster (etcd, sink, coordinator, workers) and run the
# demo workload. Bootstraps first (idempotent) with only what the demo needs: etcd, and the
# PostgreSQL server only for `--sink-store postgres` without `--database-url`. (The test tools come
# with README command (B), scripts/test.sh.) Arguments go to `leasehold cluster up`.
set -euo pipefail
cd "$(dirname "$0")/.."
store="${LEASEHOLD_SINK_STORE:-sqlite}"
external_pg="${LEASEHOLD_DATABASE_URL:-${LEASEHOLD_DATABASE_URL_FILE:-}}"
prev=''
for arg in "$@"; do
  case "$arg" in
    --sink-store=*) store="${arg#--sink-store=}" ;;
    --database-url=*) external_pg=1 ;;
  esac
  case "$prev" in
    --sink-store) store="$arg" ;;
    --database-url) external_pg=1 ;;
  esac
  prev="$arg"
done
if [ "$store" = postgres ] && [ -z "$external_pg" ]; then
  bash scripts/bootstrap.sh --demo --postgres
else
  bash scripts/bootstrap.sh --demo
fi
cli=packages/cli/dist/leasehold-main.js
if [ ! -f "$cli" ]; then
  echo "leasehold: $cli is missing after the build; run 'pnpm run build' and look at its errors." >&2
  exit 2
fi
exec node "$cli" cluster up "$@"
