#!/usr/bin/env bash
# Builds localhost/kubelab:dev, the image the lab's control-plane static pods run (store,
# apiserver, scheduler, controller-manager), as an OCI image-layout tarball that the node agent's
# --image-dir importer loads into containerd. Same layout and determinism as build.sh (see its
# header): one uncompressed layer, sorted entries, mtime 0, owner 0:0, fixed JSON.
#
#   OUT_DIR/kubelab.tar   localhost/kubelab:dev   /kubelab (stripped) + the glibc files it loads
#                                                 + the host's CA bundle
#
# Usage: deploy/images/kubelab.sh OUT_DIR KUBELAB_BINARY
#
# Why not FROM scratch with a static binary: the host's glibc (2.36) is what the binary was
# linked against, so copying the four shared objects `ldd` names (the loader, libc, libm,
# libgcc_s) is enough and needs no second, static build of the whole workspace.
# The tarball is rewritten only when the stripped binary or this script changed (a stamp file
# next to it records their hashes), so `lab up` with an unchanged binary costs one sha256sum.
set -euo pipefail
export LC_ALL=C

out=${1:?usage: $0 OUT_DIR KUBELAB_BINARY}
bin=${2:?usage: $0 OUT_DIR KUBELAB_BINARY}
name=localhost/kubelab:dev
die() { echo "kubelab.sh: $*" >&2; exit 1; }
for tool in strip ldd tar sha256sum; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
[ -x "$bin" ] || die "$bin not found (cargo build --bin kubelab)"
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac
mkdir -p "$out"

work=$(mktemp -d "${TMPDIR:-/tmp}/kubelab-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/tmp"
chmod 1777 "$root/tmp"
# The debug binary is ~450 MB, nearly all of it debug info: stripped it is a few tens of MB.
strip -o "$root/kubelab" "$bin"
chmod 0755 "$root/kubelab"

stamp="$out/kubelab.tar.inputs"
inputs="$(sha256sum "$root/kubelab" | cut -d' ' -f1) $(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [ -f "$out/kubelab.tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ]; then
  echo "kubelab.sh: $out/kubelab.tar is up to date"
  exit 0
fi

# Every shared object the loader will open, at the path ldd resolved it to (so the loader's
# default search path finds it inside the image too).
ldd "$bin" | awk '/=> \//{print $3} /^[ \t]*\/.*ld-linux/{print $1}' | sort -u | while read -r so; do
  mkdir -p "$root$(dirname "$so")"
  cp -L "$so" "$root$so"
  chmod 0755 "$root$so"
done
# The CA bundle: the HTTP clients (reqwest with rustls' platform verifier) refuse to build
# without any trusted root, even for plain-HTTP URLs ("builder error").
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "$ca not found (Debian package ca-certificates)"
mkdir -p "$root/etc/ssl/certs"
cp "$ca" "$root$ca"
chmod 0644 "$root$ca"
find "$root" -type d -exec chmod 0755 {} +
chmod 1777 "$root/tmp"

tar_det=(tar --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner)
layout="$work/layout"
mkdir -p "$layout/blobs/sha256"
add_blob() {
  local hex size
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  cp "$1" "$layout/blobs/sha256/$hex"
  echo "$hex $size"
}
mapfile -t entries < <(cd "$root" && ls -A | sort)
"${tar_det[@]}" -C "$root" -cf "$work/layer.tar" -- "${entries[@]}"
read -r layer_hex layer_size < <(add_blob "$work/layer.tar")
printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":["/kubelab"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$arch" "$layer_hex" >"$work/config.json"
read -r config_hex config_size < <(add_blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config_hex" "$config_size" "$layer_hex" "$layer_size" >"$work/manifest.json"
read -r manifest_hex manifest_size < <(add_blob "$work/manifest.json")
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_hex" "$manifest_size" "$arch" "$name" "${name##*:}" >"$layout/index.json"
chmod -R u=rwX,go=rX "$layout"
"${tar_det[@]}" -C "$layout" -cf "$out/kubelab.tar.tmp" oci-layout index.json blobs
mv -f "$out/kubelab.tar.tmp" "$out/kubelab.tar"
echo "$inputs" >"$stamp"
echo "kubelab.sh: $out/kubelab.tar  $name  manifest sha256:$manifest_hex"
