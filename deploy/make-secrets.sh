#!/usr/bin/env bash
# deploy/make-secrets.sh OUT_DIR [WORKER_ID...]: every key, password and certificate the compose
# file (OUT_DIR=deploy/secrets), the Kubernetes kustomization (OUT_DIR=deploy/k8s/secrets) or the
# two-host walkthrough (docs/operations.md) reads, as one file each. Needs openssl (3.x). Existing
# files are kept (run it again to add a worker or a coordinator); delete a file to make it anew.
# Worker ids default to worker-1 worker-2 worker-3 (compose); the Kubernetes workers are pods
# worker-0 worker-1 worker-2.
#
# One identity per service, each with its own key (EC P-256, 1 year), from two CAs:
#   ca.crt ca.key               the services' CA: HTTPS of the sink and the coordinators
#   sink.crt sink.key           the sink's server certificate (serverAuth only)
#   <C>.crt <C>.key             each coordinator's server certificate (serverAuth only), for each
#                               name C in COORDINATORS (default "coordinator": coordinator.crt
#                               coordinator.key)
#   etcd-ca.crt etcd-ca.key     etcd's own CA: it signs etcd's server and etcd's clients, nothing
#                               else (etcd takes a client's user from its certificate's CN, so it
#                               must not trust a CA that signs anyone else's certificates)
#   etcd.crt etcd.key           etcd's server certificate (serverAuth only)
#   <C>-etcd.crt <C>-etcd.key   each coordinator's etcd client certificate (clientAuth only), CN C:
#                               etcd user C (coordinator-etcd.crt coordinator-etcd.key for the
#                               default name)
#   etcd-root.crt etcd-root.key etcd's root (CN root): only for `leasehold etcd-rbac`, kept with
#                               the operator like ca.key and etcd-ca.key
#   etcd-health.crt etcd-health.key  CN etcd-health, no etcd user: the Compose etcd healthcheck
# The sink has no etcd identity at all.
# Capabilities: capability-signing-key (k1:<Ed25519 seed>: the coordinators' only, it signs each
#   grant's write capability) | capability-public-keys (k1:<public key>: the sink's, and any
#   service that checks capabilities with fence-pg; it verifies and cannot sign)
# Bearer secrets: sink-key (the coordinators' key at the sink) |
#   admin-keys | worker-credentials (keyId:workerId:secret per line, for the coordinators, always
#   every <id>.secret of OUT_DIR) | <worker id>.secret (each worker's own) | pg-password | database-url
# Files are mode 0444 in a 0700 directory: readable by the containers' user (10001) through a
# bind mount, by nobody else on the host.
#
# Hosts of your own (docs/operations.md, "Two hosts, step by step"): names or IP addresses added
# to the server certificates, space-separated, read when a certificate is first made:
#   COORDINATOR_HOSTS="10.0.0.30 coord.internal" SINK_HOSTS="10.0.0.20" ETCD_HOSTS="10.0.0.10"
# COORDINATOR_HOSTS go into every coordinator's certificate. Compose runs two coordinators:
#   COORDINATORS="coordinator-a coordinator-b" bash deploy/make-secrets.sh deploy/secrets
set -euo pipefail
out="${1:?usage: deploy/make-secrets.sh OUT_DIR [WORKER_ID...]}"
shift
workers=("$@")
[ ${#workers[@]} -gt 0 ] || workers=(worker-1 worker-2 worker-3)
read -r -a coordinators <<< "${COORDINATORS:-coordinator}"
command -v openssl >/dev/null || { echo "make-secrets: openssl is needed" >&2; exit 1; }
mkdir -p "$out" && chmod 0700 "$out"
cd "$out"
umask 0222

random() { openssl rand -base64 24 | tr -d '\n/+=' ; }
put() { # put FILE CONTENT: write once, never overwrite
  [ -e "$1" ] || printf '%s\n' "$2" > "$1"
}
ca() { # ca NAME SUBJECT
  [ -e "$1.crt" ] && return
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.crt" \
    -days 3650 -subj "/CN=$2" -addext 'basicConstraints=critical,CA:TRUE' \
    -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
}
# A certificate of another CA or without the wanted usage (made by an older version of this
# script: one CA, etcd on it) is made anew.
current() { # current CA NAME USAGE
  [ -e "$2.crt" ] && openssl verify -CAfile "$1.crt" "$2.crt" >/dev/null 2>&1 \
    && [ "$(openssl x509 -in "$2.crt" -noout -ext extendedKeyUsage 2>/dev/null | tail -n 1 | tr -d ' ')" = "$3" ]
}
issue() { # issue CA NAME CN EXTENSIONS
  rm -f "$2.crt" "$2.key"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$2.key" -out "$2.csr" \
    -subj "/CN=$3" 2>/dev/null
  openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -days 365 -out "$2.crt" \
    -extfile <(printf '%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n' "$4") 2>/dev/null
  rm -f "$2.csr" "$1.srl"
}
server() { # server CA NAME HOST...: serverAuth only
  local ca="$1" name="$2"; shift 2
  current "$ca" "$name" 'TLSWebServerAuthentication' && return
  local san="" h
  for h in "$@"; do
    if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
  done
  san+="IP:127.0.0.1"
  issue "$ca" "$name" "$1" "$(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth' "$san")"
}
client() { # client CA NAME CN: clientAuth only
  current "$1" "$2" 'TLSWebClientAuthentication' && return
  issue "$1" "$2" "$3" 'extendedKeyUsage=clientAuth'
}

ca ca 'leasehold deployment CA'
ca etcd-ca 'leasehold deployment etcd CA'
# Compose service names, the Kubernetes Service names (short and qualified), localhost, and yours.
for c in "${coordinators[@]}"; do
  # shellcheck disable=SC2086 # the *_HOSTS lists split on spaces on purpose
  server ca "$c" "$c" coordinator coordinator.leasehold.svc coordinator.leasehold.svc.cluster.local localhost \
    ${COORDINATOR_HOSTS:-}
  client etcd-ca "$c-etcd" "$c"
done
# shellcheck disable=SC2086
server ca sink sink sink.leasehold.svc sink.leasehold.svc.cluster.local localhost ${SINK_HOSTS:-}
# etcd's members in Compose (etcd-N) and Kubernetes (etcd-N.etcd, the headless Service), localhost.
# shellcheck disable=SC2086
server etcd-ca etcd etcd etcd-1 etcd-2 etcd-3 etcd-0.etcd etcd-1.etcd etcd-2.etcd \
  etcd.leasehold.svc '*.etcd.leasehold.svc' localhost ${ETCD_HOSTS:-}
client etcd-ca etcd-root root
client etcd-ca etcd-health etcd-health

put sink-key "$(random)"
# The capability key pair: the 32-byte Ed25519 seed (what PKCS#8 DER ends with) and the raw public
# key (what SPKI DER ends with), both base64url without padding.
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '=' ; }
if [ ! -e capability-signing-key ]; then
  rm -f capability-public-keys
  openssl genpkey -algorithm ed25519 -outform DER -out capability.der 2>/dev/null
  put capability-signing-key "k1:$(tail -c 32 capability.der | b64url)"
  openssl pkey -inform DER -in capability.der -pubout -outform DER 2>/dev/null | tail -c 32 > capability.pub
  rm -f capability.der
fi
[ -e capability.pub ] && { put capability-public-keys "k1:$(b64url < capability.pub)"; rm -f capability.pub; }
[ -e capability-public-keys ] || { echo "make-secrets: capability-public-keys is missing: delete capability-signing-key to make the pair anew" >&2; exit 1; }
# A shared HMAC key of an older version of this script is not used any more.
rm -f capability-keys
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
