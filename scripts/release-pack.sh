#!/usr/bin/env bash
# `pnpm release:pack [--no-build] [OUT_DIR]`: build and pack every published package into OUT_DIR
# (default ./release): workspace:* dependencies become exact versions and `publishConfig.exports`
# replaces the repository-only `leasehold-source` export condition. Prints one line per tarball.
# --no-build packs the build as it is (the docs-compile and packed-fakes tests do: other tests run
# the built daemons meanwhile).
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
out="$(realpath -m "${1:-release}")"
rm -rf "$out" && mkdir -p "$out"
if [ "$build" = 1 ]; then
  rm -rf packages/*/dist bench/dist
  pnpm run --silent build >&2
fi
for pkg in protocol telemetry daemon-kit sink-client client worker fence-pg sink coordinator testing cli; do
  [ -d "packages/$pkg/dist" ] || { echo "packages/$pkg/dist is missing: build first (pnpm build)" >&2; exit 2; }
  (cd "packages/$pkg" && pnpm pack --pack-destination "$out" >/dev/null)
done
for f in "$out"/*.tgz; do
  printf '%s\t%s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
