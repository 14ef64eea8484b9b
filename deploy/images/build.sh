#!/usr/bin/env bash
# Builds the two container images kubelab's node agent and e2e tests run, as OCI image-layout
# tarballs that `ctr images import` (and the node agent's --image-dir importer) load into
# containerd. No registry is reachable from these machines, so images are made here from
# Debian packages instead of pulled:
#
#   OUT_DIR/pause.tar    registry.k8s.io/pause:3.9        /pause, compiled from pause.c
#   OUT_DIR/busybox.tar  docker.io/library/busybox:1.36   /bin/busybox (busybox-static) + applet links
#
# Usage: deploy/images/build.sh OUT_DIR
#
# Reproducible: the same pause.c, busybox binary and compiler give byte-identical tarballs
# (every tar is written with sorted entries, mtime 0, owner 0:0, explicit modes; the JSON is
# printed in a fixed key order; nothing records the time or the build host). An unchanged digest
# means containerd sees the same image and an import is a no-op.
#
# Layout of each tarball (what containerd 1.6's `ctr images import` takes):
#   oci-layout                 {"imageLayoutVersion":"1.0.0"}
#   index.json                 one manifest, annotated with the image's fully qualified name
#                              (io.containerd.image.name; without it ctr imports nothing and
#                              still exits 0) and its tag (org.opencontainers.image.ref.name)
#   blobs/sha256/<manifest>    OCI manifest: one config, one layer
#   blobs/sha256/<config>      architecture, os, Env/Entrypoint/Cmd, rootfs.diff_ids
#   blobs/sha256/<layer>       the root filesystem, an *uncompressed* tar, so its digest is
#                              also its diff_id
set -euo pipefail
export LC_ALL=C

out=${1:?usage: $0 OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
busybox=${BUSYBOX:-/bin/busybox}

die() { echo "build.sh: $*" >&2; exit 1; }
for tool in gcc tar sha256sum readelf; do
  command -v "$tool" >/dev/null || die "$tool not found (run \`make deps\`)"
done
[ -x "$busybox" ] || die "$busybox not found (run \`make deps\`: package busybox-static)"
# A dynamically linked busybox would need a libc inside the image, which it does not have.
if readelf -l "$busybox" | grep -q 'INTERP'; then
  die "$busybox is dynamically linked; install busybox-static (\`make deps\`)"
fi

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac

# One set of tar flags for layers and for the layout archive: these make the output depend on
# the file contents and modes only.
tar_det=(tar --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner)

work=$(mktemp -d "${TMPDIR:-/tmp}/kubelab-images.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# add_blob LAYOUT FILE: store FILE under LAYOUT/blobs/sha256/<hex>; prints "<hex> <size>".
add_blob() {
  local layout=$1 file=$2 hex size
  hex=$(sha256sum "$file" | cut -d' ' -f1)
  size=$(stat -c %s "$file")
  cp "$file" "$layout/blobs/sha256/$hex"
  echo "$hex $size"
}

# build_image NAME ROOTFS CONFIG DEST: one image NAME ("registry/repo:tag") whose only layer is
# the directory ROOTFS and whose runtime config (the "config" object of the image config) is
# the JSON text CONFIG, written as the OCI layout tarball DEST.
build_image() {
  local name=$1 rootfs=$2 config=$3 dest=$4
  local tag=${name##*:}
  local layout="$work/layout-$(basename "$dest" .tar)"
  rm -rf "$layout"
  mkdir -p "$layout/blobs/sha256"

  # The layer: the top-level entries of ROOTFS (not "./"), each tree sorted by tar.
  local entries
  mapfile -t entries < <(cd "$rootfs" && ls -A | sort)
  "${tar_det[@]}" -C "$rootfs" -cf "$work/layer.tar" -- "${entries[@]}"
  local layer_hex layer_size
  read -r layer_hex layer_size < <(add_blob "$layout" "$work/layer.tar")

  printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$config" "$layer_hex" >"$work/config.json"
  local config_hex config_size
  read -r config_hex config_size < <(add_blob "$layout" "$work/config.json")

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config_hex" "$config_size" "$layer_hex" "$layer_size" >"$work/manifest.json"
  local manifest_hex manifest_size
  read -r manifest_hex manifest_size < <(add_blob "$layout" "$work/manifest.json")

  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_hex" "$manifest_size" "$arch" "$name" "$tag" >"$layout/index.json"

  chmod -R u=rwX,go=rX "$layout"
  "${tar_det[@]}" -C "$layout" -cf "$dest.tmp" oci-layout index.json blobs
  mv -f "$dest.tmp" "$dest"
  echo "build.sh: $dest  $name  manifest sha256:$manifest_hex"
}

path_env='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'

# ---- pause ----
pause_root="$work/rootfs-pause"
mkdir -p "$pause_root"
gcc -static -Os -s -Wall -Wextra -o "$pause_root/pause" "$here/pause.c"
chmod 0755 "$pause_root/pause"
build_image registry.k8s.io/pause:3.9 "$pause_root" \
  "{\"Env\":[$path_env],\"Entrypoint\":[\"/pause\"],\"WorkingDir\":\"/\"}" "$out/pause.tar"

# ---- busybox ----
bb_root="$work/rootfs-busybox"
mkdir -p "$bb_root"/{bin,etc,home,root,tmp}
cp "$busybox" "$bb_root/bin/busybox"
# Relative links, so they resolve inside the container (`busybox --install -s` would write the
# host's absolute path).
"$busybox" --list | while read -r applet; do
  [ -n "$applet" ] && [ "$applet" != busybox ] && ln -s busybox "$bb_root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$bb_root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$bb_root/etc/group"
chmod 0755 "$bb_root/bin" "$bb_root/bin/busybox" "$bb_root/etc" "$bb_root/home"
chmod 0644 "$bb_root/etc/passwd" "$bb_root/etc/group"
chmod 0700 "$bb_root/root"
chmod 1777 "$bb_root/tmp"
build_image docker.io/library/busybox:1.36 "$bb_root" \
  "{\"Env\":[$path_env],\"Cmd\":[\"sh\"],\"WorkingDir\":\"/\"}" "$out/busybox.tar"
