#!/usr/bin/env bash
# `pnpm release:pack [OUT_DIR]`: build and pack every published package into OUT_DIR (default
# ./release): workspace:* dependencies become exact versions and `publishConfig.exports` replaces
# the repository-only `leasehold-source` export condition. Prints one line per tarball.
# LEASEHOLD_RELEASE_PACK_BUILT=1 packs the packages as built now (no clean rebuild): what the test
# suite's packed-tarball check uses, since other tests run the built daemons meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-release}")"
rm -rf "$out" && mkdir -p "$out"
if [ "${LEASEHOLD_RELEASE_PACK_BUILT:-}" != 1 ]; then
  rm -rf packages/*/dist bench/dist
  pnpm run --silent build >&2
fi
for pkg in protocol telemetry daemon-kit sink-client client worker fence-pg sink coordinator testing cli; do
  (cd "packages/$pkg" && pnpm pack --pack-destination "$out" >/dev/null)
done
for f in "$out"/*.tgz; do
  printf '%s\t%s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
