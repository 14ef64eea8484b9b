#!/usr/bin/env bash
# Builds the fresh Debian 12 machine `make test-fresh-host` boots: a bookworm guest made from
# Debian packages only, as a stock server plus what the README tells a user to have, and nothing
# kubelab itself needs (containerd, runc, the CNI plugins, iptables, Docker): `make deps` must
# install those on the fresh machine, which is what the check is about.
#
#   scripts/fresh-host/guest-image.sh      (FRESH_HOST_DIR, default /var/cache/kubelab/fresh-host)
#
# Writes $FRESH_HOST_DIR/image/{rootfs.ext4,vmlinuz,initrd.img}. Cached: debootstrap runs again
# only when the package list changes, the image only when the package list, the guest's
# configuration (configure_guest below) or the host's added CA certificates change.
# FRESH_HOST_REBUILD=1 forces both. Needs root; installs debootstrap and qemu when missing.
set -euo pipefail

dir=${FRESH_HOST_DIR:-/var/cache/kubelab/fresh-host}
img_dir=$dir/image

# A minbase bookworm with what a stock Debian 12 server boots with, plus what the README asks a
# user to have (make, git, sudo). Deliberately not containerd, runc, containernetworking-plugins,
# iptables or docker.io: those are `make deps`' job.
packages=systemd-sysv,udev,dbus,linux-image-amd64,initramfs-tools,kmod,e2fsprogs,procps
packages+=,iproute2,ca-certificates,apt,make,git,sudo

say() { echo "fresh-host image: $*" >&2; }
die() { echo "fresh-host image: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"

# The host's own Debian mirror: the first URIs: of a deb822 source, else the first `deb` line.
mirror() {
  local m
  m=$( { awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources
         awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' \
           /etc/apt/sources.list; } 2>/dev/null | head -n1 || true)
  [ -n "$m" ] || die "no Debian mirror in the host's apt sources"
  echo "$m"
}

# The host's locally added CA certificates: the proxy between this machine and the npm registry
# and PyPI inspects TLS with a CA only the host trusts, so the guest must trust it too.
host_cas() { find /usr/local/share/ca-certificates -maxdepth 1 -name '*.crt' 2>/dev/null | sort; }

# Everything the guest gets after debootstrap. Its text is part of the image's cache key, so a
# change here rebuilds the image (not the debootstrap).
configure_guest() {
  local r=$1
  echo freshhost >"$r/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 freshhost\n' >"$r/etc/hosts"
  echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$r/etc/fstab"
  # qemu's user-mode network: DHCP from it, and its DNS forwarder.
  printf '[Match]\nName=en*\n[Network]\nDHCP=ipv4\n' >"$r/etc/systemd/network/10-en.network"
  echo 'nameserver 10.0.2.3' >"$r/etc/resolv.conf"
  # The host's apt sources as they are (same mirror, same suites: updates and security too).
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    cp /etc/apt/sources.list.d/*.sources "$r/etc/apt/sources.list.d/"
    : >"$r/etc/apt/sources.list"
  elif [ -f /etc/apt/sources.list ]; then
    cp /etc/apt/sources.list "$r/etc/apt/sources.list"
  fi
  # The mirror may serve a frozen snapshot whose Release files have expired.
  printf 'Acquire::Check-Valid-Until "false";\nAcquire::Check-Date "false";\n' \
    >"$r/etc/apt/apt.conf.d/99fresh-host-snapshot"
  mkdir -p "$r/usr/local/share/ca-certificates"
  rm -f "$r"/usr/local/share/ca-certificates/*.crt
  local ca
  for ca in $(host_cas); do cp "$ca" "$r/usr/local/share/ca-certificates/"; done
  chroot "$r" update-ca-certificates >/dev/null

  # The runner: a oneshot unit that, when the host shares a run directory (9p tag "ctl"), mounts
  # it and the two other shares, runs ctl/cmd.sh, keeps its output and status there, and powers
  # off. Without the share the guest boots as a plain machine.
  cat >"$r/usr/local/sbin/fresh-host-run" <<'RUNNER'
#!/bin/bash
o=trans=virtio,version=9p2000.L,msize=262144,cache=none
mkdir -p /ctl
mount -t 9p -o "$o" ctl /ctl 2>/dev/null || exit 0
mkdir -p /src /artifacts
mount -t 9p -o "$o" src /src
mount -t 9p -o "$o" artifacts /artifacts
export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
cd /src && bash /ctl/cmd.sh </dev/null >/ctl/guest.log 2>&1
echo $? >/ctl/rc
sync
umount /src /artifacts /ctl 2>/dev/null
systemctl poweroff --force
RUNNER
  chmod 0755 "$r/usr/local/sbin/fresh-host-run"
  cat >"$r/etc/systemd/system/fresh-host-run.service" <<'UNIT'
[Unit]
Description=Run the host's command, keep its output and status, power off
Wants=network-online.target
After=network-online.target multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/fresh-host-run
TimeoutStartSec=infinity
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
UNIT
  # A small initrd that only mounts /dev/vda: unpacking a full one takes long under emulation.
  echo MODULES=list >"$r/etc/initramfs-tools/conf.d/fresh-host"
  printf '%s\n' virtio_pci virtio_blk ext4 >"$r/etc/initramfs-tools/modules"
  chroot "$r" update-initramfs -u -k all >/dev/null 2>&1
  chroot "$r" passwd -qd root
  chroot "$r" systemctl -q enable systemd-networkd systemd-networkd-wait-online fresh-host-run.service
  # Timers that would start apt or fsck work in the middle of a run.
  chroot "$r" systemctl -q mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    fstrim.timer e2scrub_reap.service
}

have() { command -v "$1" >/dev/null; }
if ! have debootstrap || ! have qemu-system-x86_64 || ! have mkfs.ext4; then
  say "installing debootstrap and qemu-system-x86"
  apt-get install -y -qq --no-install-recommends debootstrap qemu-system-x86 e2fsprogs >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends debootstrap qemu-system-x86 e2fsprogs >/dev/null
  }
fi

cas=$(host_cas)
rootfs_key=$(echo "$packages" | sha256sum | cut -c1-16)
image_key=$( { echo "$packages"; declare -f configure_guest; [ -z "$cas" ] || cat $cas; } | sha256sum | cut -c1-16)
rootfs=$dir/rootfs-$rootfs_key

if [ -z "${FRESH_HOST_REBUILD:-}" ] && [ "$(cat "$img_dir/key" 2>/dev/null)" = "$image_key" ] \
  && [ -f "$img_dir/rootfs.ext4" ]; then
  exit 0
fi
started=$SECONDS
mkdir -p "$img_dir"
if [ -n "${FRESH_HOST_REBUILD:-}" ] || [ ! -e "$rootfs/.bootstrapped" ]; then
  rm -rf "$dir"/rootfs-*
  m=$(mirror)
  say "debootstrap bookworm from $m into $rootfs (log: $dir/debootstrap.log)"
  nice -n 10 debootstrap --variant=minbase --include="$packages" \
    bookworm "$rootfs" "$m" >"$dir/debootstrap.log" 2>&1 \
    || { tail -n 30 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
  touch "$rootfs/.bootstrapped"
fi
say "configuring the guest"
configure_guest "$rootfs"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages
cp -L "$rootfs/vmlinuz" "$img_dir/vmlinuz.new"
cp -L "$rootfs/initrd.img" "$img_dir/initrd.img.new"
# Sparse: 16 GiB of room for what make deps installs; the file holds only what is written.
rm -f "$img_dir/rootfs.ext4.new"
truncate -s 16G "$img_dir/rootfs.ext4.new"
nice -n 10 mkfs.ext4 -q -F -L freshhost -d "$rootfs" "$img_dir/rootfs.ext4.new"
for f in vmlinuz initrd.img rootfs.ext4; do mv "$img_dir/$f.new" "$img_dir/$f"; done
echo "$image_key" >"$img_dir/key"
say "built $img_dir/rootfs.ext4 in $((SECONDS - started)) s"
