#!/usr/bin/env bash
# The chaos runner's command line (meant to be exec'd by scripts/chaos.sh, i.e. `pnpm chaos ...`):
#
#   pnpm chaos --seed N --duration 10m [--scenario NAME] [--profile NAME] [--etcd-members 3]
#              [--network proxy|netns|mixed] [--clock] [--sink-store sqlite|postgres] [--sinks N]
#              [--sabotage skip-fence|grant-before-advance|fake-monotonic|ignore-retry-policy] [--tasks N] [--workers N]
#              [--sample-resources 5s] [--target cluster.json] [--out DIR]
#              [--backlog N]            # N extra pending tasks kept for the whole run (test/chaos/backlog.ts)
#              [--coordinator-env NAME=VALUE]...  # extra coordinator environment (e.g. a short retention age)
#              [--plaintext]            # no TLS (debugging only; TLS + per-worker credentials by default)
#   --sabotage KIND starts the sabotaged daemon from test/chaos/sabotage/ (the real daemon with a
#   lying collaborator; shipped code has no switch): the checker is expected to report violations.
#   pnpm chaos --list                     # the named scenarios and profiles
#   pnpm chaos --cleanup                  # remove namespaces left by runs that died (root)
#
# Flags become LEASEHOLD_CHAOS_* variables for test/chaos/cli.chaos.test.ts, run under vitest (the
# test package has no build step). Progress goes to stderr once a second. Exit code 0 iff the run
# completed and the checker found no violation, or it could not run here and was skipped (e.g.
# --network netns without root: "SKIPPED: why"). The last line printed is the JSON summary's path.
set -uo pipefail
cd "$(dirname "$0")/../.."

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; }

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
    --profile) export LEASEHOLD_CHAOS_PROFILE="$2"; shift 2 ;;
    --network) export LEASEHOLD_CHAOS_NETWORK="$2"; shift 2 ;;
    --clock) export LEASEHOLD_CHAOS_CLOCK=1; shift ;;
    --plaintext)
      echo "chaos: WARNING: --plaintext: no TLS on any link; keys, worker secrets and capabilities cross the wire in clear. For local debugging only." >&2
      export LEASEHOLD_CHAOS_PLAINTEXT=1; shift ;;
    --sink-store) export LEASEHOLD_CHAOS_SINK_STORE="$2"; shift 2 ;;
    --sinks) export LEASEHOLD_CHAOS_SINKS="$2"; shift 2 ;;
    --sample-resources) export LEASEHOLD_CHAOS_SAMPLE="$2"; shift 2 ;;
    --backlog) export LEASEHOLD_CHAOS_BACKLOG="$2"; shift 2 ;;
    --coordinator-env)
      LEASEHOLD_CHAOS_COORDINATOR_ENV="${LEASEHOLD_CHAOS_COORDINATOR_ENV:+$LEASEHOLD_CHAOS_COORDINATOR_ENV
}$2"; export LEASEHOLD_CHAOS_COORDINATOR_ENV; shift 2 ;;
    --target) export LEASEHOLD_CHAOS_TARGET="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --list)
      echo "scenarios:"
      grep -ho "name: '[a-z-]*'" test/chaos/scenarios.ts test/chaos/scenarios-faults.ts | sed "s/name: '\(.*\)'/  \1/"
      echo "profiles:"
      grep -o "name: '[a-z-]*'" test/chaos/profiles.ts | sed "s/name: '\(.*\)'/  \1/"
      exit 0 ;;
    --cleanup)
      node -e 'import("./packages/devkit/dist/netns.js").then((m) => { const gone = m.sweepStaleNetns(); console.log(gone.length === 0 ? "nothing to clean up" : `deleted ${gone.join(" ")}`); })'
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
