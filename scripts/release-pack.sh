#!/usr/bin/env bash
# `pnpm release:pack [OUT_DIR]`: build and pack every published package into OUT_DIR (default
# ./release): workspace:* dependencies become exact versions and `publishConfig.exports` replaces
# the repository-only `leasehold-source` export condition. Prints one line per tarball.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-release}")"
rm -rf "$out" && mkdir -p "$out"
rm -rf packages/*/dist bench/dist
pnpm run --silent build >&2
for pkg in protocol telemetry daemon-kit sink-client client worker fence-pg sink coordinator cli; do
  (cd "packages/$pkg" && pnpm pack --pack-destination "$out" >/dev/null)
done
for f in "$out"/*.tgz; do
  printf '%s\t%s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
