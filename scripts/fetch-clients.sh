#!/usr/bin/env bash
# The official Kubernetes clients the client suites (e2e/clients/) drive, pinned, in one cache
# directory (default /var/cache/kubelab/clients, or $CLIENTS_DIR):
#
#   python/  the Python client kubernetes==32.0.1 and every dependency, each pinned by version and
#            sha256 (e2e/clients/python/requirements.txt), installed with pip --require-hashes --target
#   js/      the JavaScript client @kubernetes/client-node@1.1.2 and every dependency, pinned by the
#            committed package-lock.json (npm's sha512 integrity), installed with npm ci
#   schemathesis/  the API fuzzer schemathesis==4.32.5 (e2e/tests/apiserver_fuzz.rs) and every
#            dependency, pinned by version and sha256 (scripts/schemathesis-requirements.txt),
#            installed with pip --require-hashes --target like python/
#
# Idempotent: each half records the sha256 of the pins it installed (and, for Python, the
# interpreter's version, since PyYAML's wheel is built for one) and does nothing while they match.
# Where python3's pip or node/npm is missing, Debian's python3-pip / nodejs + npm are installed; a
# python3 or node that is there already is used as it is.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir=${CLIENTS_DIR:-/var/cache/kubelab/clients}
requirements="$root/e2e/clients/python/requirements.txt"
fuzzer_requirements="$root/scripts/schemathesis-requirements.txt"
js_src="$root/e2e/clients/js"

say() { echo "fetch-clients: $*" >&2; }
die() { echo "fetch-clients: error: $*" >&2; exit 1; }

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

# apt-get install of the named packages, updating the lists first (once) when a package is unknown.
apt_updated=""
apt_install() {
  say "installing Debian's $*"
  if [ -z "$apt_updated" ]; then
    $sudo apt-get update -qq
    apt_updated=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The stamp file's content: what an install in that directory was made from.
stamp_of() { sha256sum "$@" | cut -d' ' -f1 | tr '\n' ' '; }

# /var/cache needs root: make the directory with sudo when we are not, and own it.
if ! mkdir -p "$dir" 2>/dev/null; then
  $sudo mkdir -p "$dir"
  $sudo chown "$(id -u):$(id -g)" "$dir"
fi

# --- Python -------------------------------------------------------------------------------------
python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
py_version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
py_dir="$dir/python"
py_stamp="$(stamp_of "$requirements") python$py_version"
if [ "$(cat "$py_dir/.installed-from" 2>/dev/null)" != "$py_stamp" ]; then
  say "kubernetes (Python) for python$py_version into $py_dir"
  rm -rf "$py_dir.new"
  # --no-deps: the requirements name every package (and pip refuses one without a hash anyway);
  # --only-binary: wheels only, so no build step runs code that is not hash-pinned.
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-input --no-deps --only-binary :all: \
    --require-hashes -r "$requirements" --target "$py_dir.new" \
    || die "pip install -r $requirements failed (python$py_version: is there a wheel for it in the requirements?)"
  PYTHONPATH="$py_dir.new" python3 -c 'import kubernetes; assert kubernetes.__version__ == "32.0.1", kubernetes.__version__' \
    || die "the installed Python client does not import"
  echo "$py_stamp" >"$py_dir.new/.installed-from"
  rm -rf "$py_dir"
  mv "$py_dir.new" "$py_dir"
fi

# --- schemathesis (the API fuzzer) ----------------------------------------------------------------
st_dir="$dir/schemathesis"
st_stamp="$(stamp_of "$fuzzer_requirements") python$py_version"
if [ "$(cat "$st_dir/.installed-from" 2>/dev/null)" != "$st_stamp" ]; then
  say "schemathesis for python$py_version into $st_dir"
  rm -rf "$st_dir.new"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-input --no-deps --only-binary :all: \
    --require-hashes -r "$fuzzer_requirements" --target "$st_dir.new" \
    || die "pip install -r $fuzzer_requirements failed (python$py_version: schemathesis needs 3.11 or newer, with a wheel in the requirements)"
  version=$(PYTHONPATH="$st_dir.new" python3 -m schemathesis.cli --version 2>&1 | awk '{print $NF}')
  [ "$version" = 4.32.5 ] || die "pip installed schemathesis ${version:-that does not run}, expected 4.32.5"
  echo "$st_stamp" >"$st_dir.new/.installed-from"
  rm -rf "$st_dir"
  mv "$st_dir.new" "$st_dir"
fi

# --- JavaScript ---------------------------------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing=()
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  apt_install "${missing[@]}"
fi
js_dir="$dir/js"
js_stamp="$(stamp_of "$js_src/package.json" "$js_src/package-lock.json")"
if [ "$(cat "$js_dir/.installed-from" 2>/dev/null)" != "$js_stamp" ]; then
  say "@kubernetes/client-node into $js_dir"
  rm -rf "$js_dir.new"
  mkdir -p "$js_dir.new"
  cp "$js_src/package.json" "$js_src/package-lock.json" "$js_dir.new/"
  # npm ci installs exactly the lock file (failing if package.json disagrees with it) and checks
  # every tarball against its integrity; no package's install script runs.
  npm ci --prefix "$js_dir.new" --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null \
    || die "npm ci of $js_src/package-lock.json failed"
  version=$(node -p 'require(process.argv[1]).version' "$js_dir.new/node_modules/@kubernetes/client-node/package.json")
  [ "$version" = 1.1.2 ] || die "npm installed @kubernetes/client-node $version, expected 1.1.2"
  echo "$js_stamp" >"$js_dir.new/.installed-from"
  rm -rf "$js_dir"
  mv "$js_dir.new" "$js_dir"
fi
say "kubernetes 32.0.1 (Python), schemathesis 4.32.5 and @kubernetes/client-node 1.1.2 in $dir"
