#!/usr/bin/env bash
# Gathers what the fresh machine runs but must not compile (emulated, it is 10-50x slower than
# the host): the kubelab binary, the image tarballs, and the node agent's end-to-end test
# binaries, built here with the workspace's cargo and target directory.
#
#   scripts/fresh-host/artifacts.sh ARTIFACTS_DIR IMAGES_DIR
#
# ARTIFACTS_DIR gets kubelab, images/{pause,busybox}.tar and e2e/<test name> (replacing the old
# ones). Hard links where the target directory is on the same file system.
set -euo pipefail

out=${1:?usage: $0 ARTIFACTS_DIR IMAGES_DIR}
images=${2:?usage: $0 ARTIFACTS_DIR IMAGES_DIR}
cargo=${CARGO:-cargo}
# The node agent's end-to-end suites: they start a real containerd and the node agent, which is
# what differs on a cgroup v2, systemd machine.
tests=(nodeagent nodeagent_lifecycle nodeagent_probes nodeagent_gc exec)

die() { echo "fresh-host artifacts: error: $*" >&2; exit 1; }
put() { ln -f "$1" "$2" 2>/dev/null || cp "$1" "$2"; }

# cargo prints where each binary is as JSON; the compiler's own messages go to stderr as usual.
bins=$("$cargo" build -p kubelab --bin kubelab --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])')
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
bins+=$'\n'$("$cargo" test -p e2e --no-run "${args[@]}" --message-format=json-render-diagnostics \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print("e2e/" + m["target"]["name"], m["executable"])')

# Only what this script puts there is replaced: prepare-lab.sh keeps the lab's images beside it.
mkdir -p "$out"
rm -rf "$out/kubelab" "$out/e2e" "$out/images"
mkdir -p "$out/e2e" "$out/images"
while read -r name exe; do
  [ -n "$name" ] || continue
  put "$exe" "$out/$name"
done <<<"$bins"
[ -x "$out/kubelab" ] || die "cargo built no kubelab binary"
for t in "${tests[@]}"; do [ -x "$out/e2e/$t" ] || die "cargo built no test binary for $t"; done
for i in pause busybox; do
  [ -f "$images/$i.tar" ] || die "no $images/$i.tar (make images)"
  put "$images/$i.tar" "$out/images/$i.tar"
done
echo "fresh-host artifacts in $out: kubelab, images/{pause,busybox}.tar, e2e/{$(IFS=,; echo "${tests[*]}")}"
