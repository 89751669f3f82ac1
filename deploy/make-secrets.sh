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
  local san; san="$(printf 'DNS:%s,' "$@")IP:127.0.0.1"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" \
    -subj "/CN=$1" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out "$name.crt" \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san") 2>/dev/null
  rm -f "$name.csr" ca.srl
}
# Compose service names, the Kubernetes Service names (short and qualified), localhost.
server coordinator coordinator coordinator-a coordinator-b \
  coordinator.leasehold.svc coordinator.leasehold.svc.cluster.local localhost
server sink sink sink.leasehold.svc sink.leasehold.svc.cluster.local localhost

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
