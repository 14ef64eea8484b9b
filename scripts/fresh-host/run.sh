#!/usr/bin/env bash
# Boots the fresh Debian 12 machine (guest-image.sh) and runs guest.sh in it: the check that the
# README's "make up, make test on a fresh machine" holds on the hosts users have, with only
# cgroup v2 and systemd as PID 1. `make test-fresh-host` builds the artifacts and calls this.
#
#   scripts/fresh-host/run.sh ARTIFACTS_DIR
#
# The guest gets two 9p shares: /src, a clean copy of this repository's HEAD (`git archive`, not
# the working tree), and /artifacts, what the host built (the kubelab binary, the image tarballs,
# the node agent's end-to-end test binaries). A oneshot unit in the guest runs guest.sh from /src,
# keeps its output and status in the run directory, and powers off; its output streams here as
# it is written, and this script exits with guest.sh's status (124 when the guest ran out of time).
#
# Env: FRESH_HOST_STAGES (space- or comma-separated, default all: facts deps up checks e2e lab),
#      FRESH_HOST_TIMEOUT (seconds, default 5400), FRESH_HOST_CPUS (2), FRESH_HOST_MEM (MiB, 4096),
#      FRESH_HOST_DIR (/var/cache/kubelab/fresh-host), FRESH_HOST_SLOWDOWN (how many times the
#      e2e harness stretches its deadlines; default 10 when the guest is emulated, else 1). Each
#      run's guest log, console log and status stay in $FRESH_HOST_DIR/runs/<UTC time>/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
dir=${FRESH_HOST_DIR:-/var/cache/kubelab/fresh-host}
timeout=${FRESH_HOST_TIMEOUT:-5400}

say() { echo "fresh-host: $*" >&2; }
die() { echo "fresh-host: error: $*" >&2; exit 2; }

[ $# = 1 ] || die "usage: $0 ARTIFACTS_DIR"
artifacts=$(realpath "$1")
[ -x "$artifacts/kubelab" ] || die "no kubelab binary in $artifacts (make test-fresh-host builds it)"
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, and qemu's 9p shares keep the guest's file owners)"

FRESH_HOST_DIR=$dir "$here/guest-image.sh"
img=$dir/image

run=$dir/runs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$run/src"
git -C "$repo" archive --format=tar HEAD | tar -x -C "$run/src"
commit=$(git -C "$repo" rev-parse --short HEAD)
# What the guest's runner executes, from /src, with /artifacts mounted.
cat >"$run/cmd.sh" <<CMD
export FRESH_HOST_STAGES='${FRESH_HOST_STAGES:-}' FRESH_HOST_SLOWDOWN='${FRESH_HOST_SLOWDOWN:-}'
exec scripts/fresh-host/guest.sh /artifacts /ctl/logs
CMD
: >"$run/guest.log"
say "run $run: commit $commit, stages ${FRESH_HOST_STAGES:-all}, timeout ${timeout} s"

# /dev/kvm on the machines this was written on is a paravirtual nested KVM (kvm_pvm) that cannot
# boot a stock Debian kernel, so qemu emulates the CPU (TCG): correct, 10-50x slower than the host
# for CPU work. Where a real KVM is available it is used. nice 10: the host keeps building.
accel=(-accel tcg,thread=multi -cpu max)
if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then accel=(-accel kvm -cpu host); fi
share() { echo "local,path=$1,mount_tag=$2,security_model=passthrough"; }
# -snapshot: every run starts from the pristine image; the overlay lives in $TMPDIR, the run dir.
TMPDIR=$run timeout -k 10 "$timeout" nice -n 10 qemu-system-x86_64 -machine q35 "${accel[@]}" \
  -smp "${FRESH_HOST_CPUS:-2}" -m "${FRESH_HOST_MEM:-4096}" \
  -nodefaults -no-user-config -display none -no-reboot -snapshot \
  -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
  -append "root=/dev/vda rw console=ttyS0 quiet systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all" \
  -drive "file=$img/rootfs.ext4,if=virtio,format=raw,cache=unsafe" \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0 -device virtio-rng-pci \
  -serial "file:$run/console.log" \
  -virtfs "$(share "$run" ctl)" -virtfs "$(share "$run/src" src)" \
  -virtfs "$(share "$artifacts" artifacts)" &
qemu=$!
echo "$qemu" >"$run/qemu.pid"
tail -n +1 -s 0.5 -F --pid="$qemu" "$run/guest.log" 2>/dev/null &
tailer=$!
# Ctrl-C or a kill of this script takes the guest down with it (by its PID: timeout passes the
# signal on to qemu).
trap 'kill "$qemu" 2>/dev/null || true; wait "$qemu" 2>/dev/null || true' INT TERM
trap 'kill "$qemu" "$tailer" 2>/dev/null || true; rm -rf "$run/src"' EXIT
qemu_rc=0
wait "$qemu" || qemu_rc=$?
wait "$tailer" 2>/dev/null || true

if [ -s "$run/rc" ]; then
  rc=$(cat "$run/rc")
  say "guest finished with status $rc; its log: $run/guest.log"
  exit "$rc"
fi
if [ "$qemu_rc" = 124 ]; then
  say "the guest did not finish within $timeout s (FRESH_HOST_TIMEOUT): qemu was stopped"
else
  say "the guest stopped without a result (qemu status $qemu_rc)"
fi
say "the console's last lines ($run/console.log):"
tail -n 40 "$run/console.log" >&2 || true
[ "$qemu_rc" = 124 ] && exit 124
exit 125
