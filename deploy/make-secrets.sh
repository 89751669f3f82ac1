#!/usr/bin/env bash
# deploy/make-secrets.sh OUT_DIR [WORKER_ID...]: every key, password and certificate the compose
# file (OUT_DIR=deploy/secrets) or the Kubernetes kustomization (OUT_DIR=deploy/k8s/secrets) reads,
# as one file each. Needs openssl (3.x). Existing files are kept (run it again to add a worker);
# delete a file to make it anew. Worker ids default to worker-1 worker-2 worker-3 (compose); the
# Kubernetes workers are pods worker-0 worker-1 worker-2.
#
# Files: ca.crt ca.key | coordinator.crt coordinator.key | sink.crt sink.key (EC P-256, 1 year)
#        sink-key (the coordinators' key at the sink) | capability-keys (k1:secret) | admin-keys
#        worker-credentials (keyId:workerId:secret per line, for the coordinators)
#        <worker id>.secret (each worker's own secret) | pg-password | database-url
# worker-credentials always lists every <id>.secret of OUT_DIR.
# Files are mode 0444 in a 0700 directory: readable by the containers' user (10001) through a
# bind mount, by nobody else on the host.
#
# Hosts of your own (docs/operations.md, "Two hosts, step by step"): names or IP addresses added
# to the server certificates, space-separated, read when a certificate is first made:
#   COORDINATOR_HOSTS="10.0.0.30 coord.internal" SINK_HOSTS="10.0.0.20" ETCD_HOSTS="10.0.0.10"
# ETCD_HOSTS also makes etcd.crt etcd.key (etcd's server certificate) and coordinator-etcd.crt
# coordinator-etcd.key (the coordinators' client certificate for etcd's --client-cert-auth).
set -euo pipefail
out="${1:?usage: deploy/make-secrets.sh OUT_DIR [WORKER_ID...]}"
shift
workers=("$@")
[ ${#workers[@]} -gt 0 ] || workers=(worker-1 worker-2 worker-3)
command -v openssl >/dev/null || { echo "make-secrets: openssl is needed" >&2; exit 1; }
mkdir -p "$out" && chmod 0700 "$out"
cd "$out"
umask 0222

random() { openssl rand -base64 24 | tr -d '\n/+=' ; }
put() { # put FILE CONTENT: write once, never overwrite
  [ -e "$1" ] || printf '%s\n' "$2" > "$1"
}

if [ ! -e ca.crt ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt \
    -days 3650 -subj '/CN=leasehold deployment CA' -addext 'basicConstraints=critical,CA:TRUE' \
    -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
fi
server() { # server NAME HOST...
  local name="$1"; shift
  [ -e "$name.crt" ] && return
  local san="" h
  for h in "$@"; do
    if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
  done
  san+="IP:127.0.0.1"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" \
    -subj "/CN=$1" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out "$name.crt" \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san") 2>/dev/null
  rm -f "$name.csr" ca.srl
}
# Compose service names, the Kubernetes Service names (short and qualified), localhost, and yours.
# shellcheck disable=SC2086 # the *_HOSTS lists split on spaces on purpose
server coordinator coordinator coordinator-a coordinator-b \
  coordinator.leasehold.svc coordinator.leasehold.svc.cluster.local localhost ${COORDINATOR_HOSTS:-}
# shellcheck disable=SC2086
server sink sink sink.leasehold.svc sink.leasehold.svc.cluster.local localhost ${SINK_HOSTS:-}
if [ -n "${ETCD_HOSTS:-}" ]; then
  # shellcheck disable=SC2086
  server etcd etcd localhost $ETCD_HOSTS
  if [ ! -e coordinator-etcd.crt ]; then
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout coordinator-etcd.key \
      -out coordinator-etcd.csr -subj '/CN=leasehold-coordinator' 2>/dev/null
    openssl x509 -req -in coordinator-etcd.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
      -out coordinator-etcd.crt \
      -extfile <(printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n') 2>/dev/null
    rm -f coordinator-etcd.csr ca.srl
  fi
fi

put sink-key "$(random)"
put capability-keys "k1:$(random)"
put admin-keys "$(random)"
for id in "${workers[@]}"; do put "$id.secret" "$(random)"; done
# The coordinators' list: one keyId:workerId:secret line per <id>.secret here (key id = worker id).
chmod u+w worker-credentials 2>/dev/null || true
for f in *.secret; do printf '%s:%s:%s\n' "${f%.secret}" "${f%.secret}" "$(cat "$f")"; done > worker-credentials.new
mv -f worker-credentials.new worker-credentials
put pg-password "$(openssl rand -hex 24)"
put database-url "postgres://leasehold:$(cat pg-password)@postgres:5432/leasehold"
chmod 0444 ./*
echo "make-secrets: $(pwd): $(ls | tr '\n' ' ')"
