#!/usr/bin/env bash
# The chaos runner's command line (meant to be exec'd by scripts/chaos.sh, i.e. `pnpm chaos ...`):
#
#   pnpm chaos --seed N --duration 10m [--scenario NAME] [--etcd-members 3]
#              [--sabotage skip-fence|grant-before-advance] [--tasks N] [--workers N] [--out DIR]
#   pnpm chaos --list                     # the named scenarios
#
# Flags become LEASEHOLD_CHAOS_* variables for test/chaos/cli.chaos.test.ts, run under vitest (the
# test package has no build step). Progress goes to stderr once a second. Exit code 0 iff the run
# completed and the checker found no violation. The last line printed is the JSON summary's path.
set -uo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

export LEASEHOLD_CHAOS_CLI=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) export LEASEHOLD_CHAOS_SEED="$2"; shift 2 ;;
    --duration) export LEASEHOLD_CHAOS_DURATION="$2"; shift 2 ;;
    --scenario) export LEASEHOLD_CHAOS_SCENARIO="$2"; shift 2 ;;
    --etcd-members) export LEASEHOLD_CHAOS_ETCD_MEMBERS="$2"; shift 2 ;;
    --sabotage) export LEASEHOLD_CHAOS_SABOTAGE="$2"; shift 2 ;;
    --tasks) export LEASEHOLD_CHAOS_TASKS="$2"; shift 2 ;;
    --workers) export LEASEHOLD_CHAOS_WORKERS="$2"; shift 2 ;;
    --out) export LEASEHOLD_CHAOS_OUT="$2"; shift 2 ;;
    --list)
      grep -o "name: '[a-z-]*'" test/chaos/scenarios.ts | sed "s/name: '\(.*\)'/\1/"
      exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "chaos: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

pathfile="$(mktemp)"
trap 'rm -f "$pathfile"' EXIT
export LEASEHOLD_CHAOS_SUMMARY_PATH_FILE="$pathfile"
# vitest's own report goes to stderr so that stdout ends with the summary path.
pnpm exec vitest run --project chaos test/chaos/cli.chaos.test.ts 1>&2
rc=$?
if [ -s "$pathfile" ]; then
  cat "$pathfile"
else
  echo "chaos: the run did not produce a summary" >&2
  [ "$rc" -eq 0 ] && rc=1
fi
exit "$rc"
