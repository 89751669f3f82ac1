#!/usr/bin/env bash
# `pnpm chaos`: the fault-injection runner against real processes (see docs/chaos.md).
#   pnpm chaos --seed N --duration 10m [--scenario NAME] [--etcd-members 3] [--sabotage ...]
# Exit code 0 iff the checker found no violation; the last line printed is the JSON summary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >&2
exec bash test/chaos/cli.sh "$@"
