#!/usr/bin/env bash
# Bootstrap a machine for leasehold: pinned pnpm, dependencies (frozen lockfile), the tools the
# chosen use needs, and a build. Idempotent: quick when everything is already in place.
#
#   bash scripts/bootstrap.sh            everything: the test tools too (test.sh, bench, chaos, CI)
#   bash scripts/bootstrap.sh --demo     what `leasehold cluster up` needs: etcd (README command A)
#   bash scripts/bootstrap.sh --demo --postgres   and the PostgreSQL server (`--sink-store postgres`)
#
# Needs: Node.js >= 20.11 with npm. Installs the tools with apt-get when running as root on
# Debian/Ubuntu; elsewhere set ETCD_BIN or LEASEHOLD_ETCD_ENDPOINTS, or install etcd yourself.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
want_postgres=0
for arg in "$@"; do
  case "$arg" in
    --demo) mode=demo ;;
    --postgres) want_postgres=1 ;;
    --all) mode=all ;;
    *) printf '[bootstrap] unknown option %s (--demo, --postgres, --all)\n' "$arg" >&2; exit 2 ;;
  esac
done
[ "$mode" = all ] && want_postgres=1

PNPM_VERSION=12.4.2
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }
apt_updated=0
# apt-get update at most once per run (each costs seconds on a bare machine).
apt_update() { [ "$apt_updated" = 1 ] || { apt-get update -qq >/dev/null && apt_updated=1; }; }
die() { printf '\033[31m[bootstrap] %s\033[0m\n' "$*" >&2; exit 1; }

# --- Node ------------------------------------------------------------------------------------
command -v node >/dev/null || die "Node.js >= 20.11 is required (https://nodejs.org)."
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=11)?0:1)' \
  || die "Node.js >= 20.11 is required; found $(node --version)."

# --- pnpm (pinned) ---------------------------------------------------------------------------
if [ "$(pnpm --version 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  say "installing pnpm@$PNPM_VERSION"
  npm install --global --no-fund --no-audit "pnpm@$PNPM_VERSION" >/dev/null 2>&1 \
    || die "could not install pnpm@$PNPM_VERSION with npm (try: npm install -g pnpm@$PNPM_VERSION)"
  hash -r
  [ "$(pnpm --version)" = "$PNPM_VERSION" ] || die "pnpm on PATH is $(pnpm --version), expected $PNPM_VERSION"
fi

# --- dependencies ------------------------------------------------------------------------------
# Native addons (better-sqlite3) build with node-gyp; offline it must use the local Node headers.
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then export npm_config_nodedir=/usr; fi
say "installing dependencies (frozen lockfile)"
pnpm install --frozen-lockfile --reporter=silent || die "pnpm install failed"

# --- etcd ------------------------------------------------------------------------------------
find_etcd() {
  if [ -n "${ETCD_BIN:-}" ]; then [ -x "$ETCD_BIN" ] && echo "$ETCD_BIN"; return; fi
  command -v etcd || true
}
if [ -n "${LEASEHOLD_ETCD_ENDPOINTS:-}" ]; then
  say "using external etcd at $LEASEHOLD_ETCD_ENDPOINTS"
elif [ -z "$(find_etcd)" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing etcd-server with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt_update
    apt-get install -y -qq etcd-server >/dev/null || die "apt-get install etcd-server failed"
    # Debian may start a system etcd on 2379; tests use their own on free ports, so stop it.
    if command -v service >/dev/null; then service etcd stop >/dev/null 2>&1 || true; fi
  fi
  [ -n "$(find_etcd)" ] || die "etcd not found. Install it (Debian/Ubuntu: apt-get install etcd-server; \
macOS: brew install etcd; or a release binary), then set ETCD_BIN=/path/to/etcd, or point \
LEASEHOLD_ETCD_ENDPOINTS at a running etcd."
  say "etcd: $(find_etcd)"
fi

# --- PostgreSQL server binaries (tests start their own throwaway clusters with initdb + pg_ctl) ---
find_pg() {
  if [ -n "${LEASEHOLD_PG_BIN_DIR:-}" ]; then [ -x "$LEASEHOLD_PG_BIN_DIR/pg_ctl" ] && echo "$LEASEHOLD_PG_BIN_DIR"; return; fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}
if [ "$want_postgres" = 0 ]; then
  : # the demo on SQLite needs no PostgreSQL (bash scripts/cluster.sh --sink-store postgres installs it)
elif [ -n "${LEASEHOLD_PG_URL:-}" ]; then
  say "using external PostgreSQL (LEASEHOLD_PG_URL)"
elif [ -z "$(find_pg)" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing postgresql with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt_update
    apt-get install -y -qq postgresql >/dev/null || die "apt-get install postgresql failed"
    # The package may create and start a system cluster on 5432; tests never use it: stop it.
    if command -v pg_ctlcluster >/dev/null; then
      for cluster in $(pg_lsclusters -h 2>/dev/null | awk '$4 == "online" { print $1 "/" $2 }'); do
        pg_ctlcluster "${cluster%/*}" "${cluster#*/}" stop >/dev/null 2>&1 || true
      done
    fi
    if command -v service >/dev/null; then service postgresql stop >/dev/null 2>&1 || true; fi
  fi
  [ -n "$(find_pg)" ] || die "PostgreSQL server binaries not found. Install them (Debian/Ubuntu: apt-get install \
postgresql), set LEASEHOLD_PG_BIN_DIR to the directory holding pg_ctl, or point LEASEHOLD_PG_URL at a running \
server (a superuser URL)."
  say "postgresql: $(find_pg)"
fi

# --- the test tools (test.sh, pnpm bench, pnpm chaos; not the demo) --------------------------------
if [ "$mode" = all ]; then
# --- bench tools (pnpm bench only: Redis for the BullMQ peer, etcdctl for `check perf`) ------------
# Optional: tests never need them. Installed when root with apt-get; otherwise the bench skips the
# rows that need a missing tool and says so.
missing_bench_tools=()
command -v redis-server >/dev/null || missing_bench_tools+=(redis-server)
command -v etcdctl >/dev/null || missing_bench_tools+=(etcd-client)
if [ "${#missing_bench_tools[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${missing_bench_tools[*]} with apt-get (bench peers)"
    export DEBIAN_FRONTEND=noninteractive
    if apt-get install -y -qq "${missing_bench_tools[@]}" >/dev/null 2>&1 \
      || { apt_update && apt-get install -y -qq "${missing_bench_tools[@]}" >/dev/null; }; then
      # The Debian package starts a system Redis on 6379; the bench starts its own on free ports.
      if command -v service >/dev/null; then service redis-server stop >/dev/null 2>&1 || true; fi
    else
      say "could not install ${missing_bench_tools[*]}; pnpm bench will skip the rows that need them"
    fi
  else
    say "not installed: ${missing_bench_tools[*]} (pnpm bench skips the BullMQ / etcdctl rows without them)"
  fi
fi

# --- systemd-analyze (test/deploy/systemd.int checks the units with it; skipped without it) --------
if ! command -v systemd-analyze >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing systemd (for systemd-analyze) with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  apt-get install -y -qq --no-install-recommends systemd >/dev/null || say "apt-get install systemd failed: the systemd unit checks will be skipped"
fi

# --- promtool (test/observability checks every /metrics output and deploy/observability rules) ---
# Optional: without it those tests skip with a message naming this step.
if ! command -v promtool >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing prometheus (for promtool) with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    || say "apt-get install prometheus failed: the promtool checks will be skipped"
  # The package may start a system Prometheus on 9090; tests never use it: stop it.
  if command -v service >/dev/null; then service prometheus stop >/dev/null 2>&1 || true; fi
fi

# --- spin (the model checker of docs/model.md) ---------------------------------------------------
if ! command -v spin >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing spin with apt-get"
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin >/dev/null || die "apt-get install spin failed"
fi

# --- chaos runner tools: nftables (network faults in namespaces) and libfaketime (clock faults) ---
# Optional: without them `pnpm chaos --network netns` and clock faults skip with a message.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  command -v nft >/dev/null || missing+=(nftables)
  ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(faketime)
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} with apt-get (chaos runner)"
    export DEBIAN_FRONTEND=noninteractive
    apt_update
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
      || say "apt-get install ${missing[*]} failed; netns and clock faults will be skipped"
  fi
fi

# --- Chromium (the web console's browser test drives Debian's chromium with playwright-core) ---
# Optional: without it the browser test project skips with a message. Never a downloaded browser.
if [ -z "${LEASEHOLD_CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing chromium with apt-get (web console browser test)"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || say "apt-get install chromium failed; the console browser test will be skipped"
fi
fi

# --- build -----------------------------------------------------------------------------------
say "building"
pnpm run --silent build || die "build failed"
say "ready"
