#!/usr/bin/env bash
# Model-check the protocol (model/leasehold.pml) with spin; docs/model.md explains what and why.
#
#   bash scripts/model-check.sh           every exhaustive safety run, the liveness claims, every
#                                          known-bad variant (each must yield a counterexample)
#   bash scripts/model-check.sh --quick   a reduced-bound safety run, a reduced liveness run and
#                                          every known-bad variant (well under 2 minutes)
#
# Prints a summary table (variant, expected, result, property, states, depth, trail length in
# transitions and in protocol steps, CPU seconds of the verifier) and
# writes, under .tmp/model/: one directory per run (pan's output, the trail, its replay) and, per
# counterexample, <variant>.md with the steps and a mermaid sequenceDiagram. Exit 0 iff every run
# gave what it should. Installs spin with apt-get when it is missing and this runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=model/leasehold.pml
OUT=.tmp/model
QUICK=0
case "${1:-}" in
  --quick) QUICK=1 ;;
  "") ;;
  *) echo "usage: bash scripts/model-check.sh [--quick]" >&2; exit 2 ;;
esac
say() { printf '\033[1m[model-check]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[31m[model-check] %s\033[0m\n' "$*" >&2; exit 1; }

# --- tools -------------------------------------------------------------------------------------
if ! command -v spin >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing spin with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq spin >/dev/null || die "apt-get install spin failed"
  fi
  command -v spin >/dev/null || die "spin not found: install it (Debian/Ubuntu: apt-get install spin)"
fi
command -v gcc >/dev/null || die "gcc not found (spin's verifiers are C programs)"
[ -x node_modules/.bin/tsc ] || die "dependencies missing: run bash scripts/bootstrap.sh first"

rm -rf "$OUT" && mkdir -p "$OUT"
# The trail converter is TypeScript (type-checked and linted with the repo); compile it alone.
node_modules/.bin/tsc --outDir "$OUT/trail" --rootDir scripts/model --module nodenext --moduleResolution nodenext \
  --target ES2022 --types node --strict --skipLibCheck scripts/model/spin-trail.ts || die "could not compile the trail converter"

# --- the runs ----------------------------------------------------------------------------------
# name | kind (safety, ltl:<claim>, bad) | spin -D flags | timeout seconds
# Bounds (docs/model.md): 2 coordinators, 2 resources, 3 tasks; NW workers, NINC sessions per
# worker, NQ acquires per session; FAULTS faults in all, at most the per-kind counts given.
NOFAULT="-DFAULTS=0"
ONE="-DFAULTS=1 -DCRASHES=0 -DDISCONNECTS=0 -DETCD_FAULTS=0 -DSINK_FAULTS=0 -DLAPSES=0"
# Known-bad variants: the smallest bounds that reach their counterexample (breadth-first, so the
# trail is a shortest one); the adoption race needs a lost connection.
BAD_BOUNDS="-DNW=2 -DNINC=1 -DNQ=1 $NOFAULT"
LIVE="-DLIVENESS -DNW=2 -DNINC=1 -DNQ=2 -DTICKS=1"
if [ "$QUICK" = 1 ]; then
  RUNS=(
    "safety-quick|safety|-DNW=2 -DNINC=1 -DNQ=1 $NOFAULT|120"
    "liveness-quick|ltl:granted_1|-DLIVENESS -DNW=2 -DNINC=1 -DNQ=1 -DTICKS=1 $NOFAULT|120"
  )
else
  RUNS=(
    "safety|safety|-DNW=2 -DNINC=1 -DNQ=2 $NOFAULT|900"
    "safety-crash|safety|-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DCRASHES=0/-DCRASHES=1}|900"
    "safety-disconnect|safety|-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DDISCONNECTS=0/-DDISCONNECTS=1}|900"
    "safety-etcd-fault|safety|-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DETCD_FAULTS=0/-DETCD_FAULTS=1}|900"
    "safety-sink-fault|safety|-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DSINK_FAULTS=0/-DSINK_FAULTS=1}|900"
    "safety-lease-lapse|safety|-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DLAPSES=0/-DLAPSES=1}|900"
    "liveness-0|ltl:granted_0|$LIVE $NOFAULT|600"
    "liveness-1|ltl:granted_1|$LIVE $NOFAULT|600"
    "liveness-2|ltl:granted_2|$LIVE $NOFAULT|600"
    # Finding F1 (docs/model.md): with one lost connection a grant can be stranded. Expected.
    "liveness-disconnect-F1|finding:granted_0|$LIVE ${ONE/-DDISCONNECTS=0/-DDISCONNECTS=1}|600"
  )
fi
for v in BAD_GRANT_BEFORE_ADVANCE BAD_ACCEPT_GE BAD_NO_OWNER_ABSENT BAD_RENEW_AT_DEADLINE BAD_ADOPT_NO_MODREV \
  BAD_ACCEPT_LE BAD_OVERWRITE_RESULT; do
  bounds=$BAD_BOUNDS
  [ "$v" = BAD_ADOPT_NO_MODREV ] && bounds="-DNW=2 -DNINC=1 -DNQ=1 ${ONE/-DDISCONNECTS=0/-DDISCONNECTS=1}"
  RUNS+=("$v|bad|-D$v $bounds|120")
done

# --- run one -----------------------------------------------------------------------------------
# Sets: R_RESULT R_PROPERTY R_STATES R_DEPTH R_TRAIL R_STEPS R_SECONDS R_OK
run_one() {
  local name=$1 kind=$2 defs=$3 limit=$4 dir="$OUT/$1" cflags pan_args=() claim=""
  mkdir -p "$dir" && cp "$MODEL" "$dir/"
  case "$kind" in
    safety) cflags=(-O2 -DSAFETY -DCOLLAPSE) ; pan_args=(-m200000) ;;
    # spin -t replays without the C code: no symmetry reduction where a trail is wanted
    bad) defs="$defs -DNOHIDDEN -DNOSYM"; cflags=(-O0 -DSAFETY -DBFS) ; pan_args=() ;;
    ltl:* | finding:*) claim=${kind#*:}; cflags=(-O2 -DNFAIR=4 -DCOLLAPSE) ; pan_args=(-a -f -m200000 -N "$claim") ;;
  esac
  # shellcheck disable=SC2086
  (cd "$dir" && spin -a $defs leasehold.pml >spin.log 2>&1) || { R_RESULT="spin failed"; R_OK=0; return; }
  (cd "$dir" && gcc "${cflags[@]}" -w -o pan pan.c >gcc.log 2>&1) || { R_RESULT="gcc failed"; R_OK=0; return; }
  local status=0
  # CPU seconds of the verifier (user + system): steadier than wall-clock on a shared machine.
  (cd "$dir" && TIMEFORMAT='%U %S' && { time timeout "$limit" ./pan "${pan_args[@]}" >pan.out 2>&1; } 2>cpu.txt) || status=$?
  R_SECONDS=$(awk '{ printf "%.1f", $1 + $2 }' "$dir/cpu.txt" 2>/dev/null || echo "?")
  R_STATES=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.out")
  R_DEPTH=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$dir/pan.out" | head -n 1)
  local errors
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | head -n 1)
  R_TRAIL="-"; R_STEPS="-"; R_PROPERTY="-"; R_OK=0
  if [ "$status" = 124 ]; then R_RESULT="timeout (${limit}s)"; return; fi
  if [ -z "$errors" ]; then R_RESULT="pan failed ($status)"; return; fi
  if grep -q "max search depth too small" "$dir/pan.out"; then R_RESULT="depth bound hit"; return; fi
  if [ "$errors" = 0 ]; then
    R_RESULT="pass"
    case "$kind" in
      bad | finding:*) R_RESULT="NO counterexample" ;;
      *) R_OK=1 ;;
    esac
    return
  fi
  R_TRAIL=$(sed -n 's/.*(at depth \([0-9]*\)).*/\1/p' "$dir/pan.out" | head -n 1)
  # shellcheck disable=SC2086
  (cd "$dir" && spin -t -p $defs leasehold.pml >replay.txt 2>&1) || true
  node "$OUT/trail/spin-trail.js" --pml "$dir/leasehold.pml" --title "$name" <"$dir/replay.txt" >"$OUT/$name.md"
  R_PROPERTY=$(sed -n '1s/.*violates `\([^`]*\)`.*/\1/p' "$OUT/$name.md")
  R_STEPS=$(sed -n '1s/.*, \([0-9]*\) steps).*/\1/p' "$OUT/$name.md")
  if grep -q "acceptance cycle" "$dir/pan.out"; then R_PROPERTY="$claim (acceptance cycle)"; fi
  R_RESULT="counterexample"
  case "$kind" in bad | finding:*) R_OK=1 ;; esac
}

# --- all of them -------------------------------------------------------------------------------
summary="$OUT/summary.md"
{
  echo "| variant | expected | result | property | states | depth | trail | steps | cpu s |"
  echo "| ------- | -------- | ------ | -------- | -----: | ----: | ----: | ----: | ------: |"
} >"$summary"
failed=0
total_start=$SECONDS
for spec in "${RUNS[@]}"; do
  IFS='|' read -r name kind defs limit <<<"$spec"
  expected=pass
  case "$kind" in bad | finding:*) expected=counterexample ;; esac
  say "$name ($kind) ..."
  run_one "$name" "$kind" "$defs" "$limit"
  mark=ok
  [ "$R_OK" = 1 ] || { mark=FAILED; failed=1; }
  say "$name: $R_RESULT ${R_STATES:-?} states, ${R_SECONDS:-?} s [$mark]"
  echo "| $name | $expected | $R_RESULT | $R_PROPERTY | ${R_STATES:--} | ${R_DEPTH:--} | $R_TRAIL | ${R_STEPS:--} | ${R_SECONDS:--} |" >>"$summary"
done

echo
column -t -s '|' -o '|' "$summary" 2>/dev/null || cat "$summary"
echo
echo "bounds: docs/model.md; details and counterexamples (steps + mermaid): $OUT/"
echo "total $((SECONDS - total_start)) s wall-clock"
if [ "$failed" != 0 ]; then
  die "some runs did not give what they should (see the table; pan's output is in $OUT/<variant>/pan.out)"
fi
