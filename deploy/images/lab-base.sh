#!/usr/bin/env bash
# Builds the Docker image the lab's node containers start from: a Debian bookworm (the host's
# release, so binaries built on the host run unchanged) made with debootstrap and `docker
# import`ed, because no registry is reachable to pull a base image from.
#
# Usage: deploy/images/lab-base.sh        prints the image's tag (kubelab-lab-base:<hash>) last
#
# The tag is a hash of the package list, the suite and this script: an existing tag means the
# image is already there, and the ~1–2 min debootstrap is skipped (docs/architecture/lab.md).
# Environment: LAB_MIRROR overrides the Debian mirror (default:
# the first bookworm URI in /etc/apt/sources.list.d/*.sources, else deb.debian.org).
set -euo pipefail
export LC_ALL=C

suite=bookworm
# What a node runs: containerd (+ ctr) and runc, the CNI plugins, iproute2 and iptables for the
# pod network and host-gw routes, busybox for tests' shells, procps for sysctl and ps, and
# etcd-client so `docker exec <node> etcdctl` talks to the store members without a published port,
# curl to call a node agent's or an API server's HTTPS port from a node as anyone (or no one),
# and docker-registry, which the lab's registry container runs.
packages=containerd,runc,containernetworking-plugins,iproute2,iptables,ca-certificates,busybox-static,procps,etcd-client,curl,docker-registry
die() { echo "lab-base.sh: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker not found"

hash=$( (echo "$suite $packages"; cat "${BASH_SOURCE[0]}") | sha256sum | cut -c1-12)
tag="kubelab-lab-base:$hash"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "lab-base.sh: $tag exists" >&2
  echo "$tag"
  exit 0
fi
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"

mirror=${LAB_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

work=$(mktemp -d "${TMPDIR:-/var/tmp}/kubelab-lab-base.XXXXXX")
cleanup() {
  # debootstrap may leave /proc and /sys mounted inside the target on failure.
  for m in proc sys dev/pts dev; do umount -l "$work/root/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
echo "lab-base.sh: debootstrap $suite from $mirror (1–2 min)" >&2
start=$(date +%s)
debootstrap --variant=minbase --include="$packages" "$suite" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  die "debootstrap failed"
}
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"* \
  "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/locale" "$work/root/usr/share/info"
tar -C "$work/root" --numeric-owner -c . | docker import \
  -c 'CMD ["/bin/bash"]' \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$tag" >/dev/null
echo "lab-base.sh: built $tag in $(( $(date +%s) - start )) s" >&2
echo "$tag"
