#!/usr/bin/env bash
# Fetches a real etcd 3.4 server (Debian's etcd-server) for the benchmark and the
# compatibility tests WITHOUT installing it: installing the package would start a
# system etcd on port 2379. We download the .deb and unpack it into a cache dir.
#
#   ETCD_CACHE (default /var/cache/kubelab/etcd) -> $ETCD_CACHE/usr/bin/etcd
set -euo pipefail

cache="${ETCD_CACHE:-/var/cache/kubelab/etcd}"
bin="$cache/usr/bin/etcd"

if [[ -x "$bin" ]]; then
    exit 0
fi

# /var/cache needs root; use sudo when we are not.
sudo=""
if [[ "$(id -u)" != 0 ]] && ! mkdir -p "$cache" 2>/dev/null; then
    sudo="sudo"
fi
$sudo mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download runs as the _apt user when possible; a world-writable dir avoids
# the "couldn't be accessed by user '_apt'" warning.
chmod 0777 "$work"
if ! apt-get download etcd-server >/dev/null 2>&1; then
    $sudo apt-get update -qq
    apt-get download etcd-server
fi
deb="$(ls etcd-server_*.deb)"
$sudo dpkg -x "$deb" "$cache"
"$bin" --version | head -1
echo "etcd unpacked into $cache (binary: $bin)"
