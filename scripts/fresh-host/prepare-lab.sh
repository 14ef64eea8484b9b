#!/usr/bin/env bash
# Host side of the lab check on a fresh machine: everything the guest cannot make itself.
# The guest gets a clean checkout and `make deps` but no Rust toolchain, and an emulated one
# would take far too long to build images anyway, so the node image is built here and handed
# over as a tarball.
#
# Usage: scripts/fresh-host/prepare-lab.sh ARTIFACTS_DIR
#
# Writes into ARTIFACTS_DIR:
#   lab-node-image.tar, lab-node-image   the lab's node image (`deploy/lab/lab save`: base,
#                                        kubelab binary, entrypoint, image tarballs) and its tag
#   kubectl                              kubectl 1.32 (a single static binary), so the guest
#                                        needs none
# Then stage-lab.sh, in the guest, loads and runs them.
#
# Environment: as deploy/lab/lab (CARGO_TARGET_DIR, KUBELAB_BIN, KUBELAB_LAB_DIR, KUBECTL_BIN).
# Without KUBELAB_BIN and with no debug binary yet, builds it (cargo build --bin kubelab).
set -euo pipefail

out=${1:?usage: $0 ARTIFACTS_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
say() { echo "prepare-lab: $*" >&2; }
die() { echo "prepare-lab: error: $*" >&2; exit 1; }

if [ -z "${KUBELAB_BIN:-}" ]; then
  export KUBELAB_BIN=$target/debug/kubelab
  if [ ! -x "$KUBELAB_BIN" ]; then
    say "no $KUBELAB_BIN: building it"
    (cd "$repo" && cargo build -p kubelab --bin kubelab)
  fi
fi
[ -x "$KUBELAB_BIN" ] || die "KUBELAB_BIN=$KUBELAB_BIN is not an executable"

mkdir -p "$out"
"$repo/deploy/lab/lab" save "$out"

# A pinned kubectl, not a `kubectl` in PATH: the Cloud SDK's is a dispatcher that runs its
# kubectl.1.<minor> siblings, which the guest would not have.
kubectl=${KUBECTL_BIN:-}
for k in "${KUBECTL_DIR:-/var/cache/kubelab/kubectl}/kubectl.1.32" /usr/lib/google-cloud-sdk/bin/kubectl.1.32; do
  [ -n "$kubectl" ] && break
  [ -n "$k" ] && [ -x "$k" ] && kubectl=$k
done
[ -n "$kubectl" ] || die "no kubectl found (set KUBECTL_BIN)"
cp -L "$kubectl" "$out/kubectl.tmp"
mv -f "$out/kubectl.tmp" "$out/kubectl"
say "ready in $out: $(cat "$out/lab-node-image"), kubectl $("$out/kubectl" version --client -o json 2>/dev/null | grep -m1 gitVersion | tr -d ' ",' | cut -d: -f2)"
