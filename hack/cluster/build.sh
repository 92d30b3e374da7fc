#!/usr/bin/env bash
# Builds the control-plane binary (main.go) into a cache outside the repository and prints its
# path. The cache entry is keyed by the pinned Kubernetes release and a hash of this module, so
# it is built once per version (and per change of main.go), reusing Go's module and build
# caches; a `kubectl` link beside it runs the same release's kubectl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go.mod")
minor=$(echo "$version" | cut -d. -f2)
key=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)
cache=${HTC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/htc}
out="$cache/cluster-$version-$key"
if [ ! -x "$out/cluster" ]; then
  command -v go >/dev/null || { echo "build.sh: no Go toolchain (go) on PATH" >&2; exit 3; }
  echo "building the control plane ($version) into $out ..." >&2
  start=$(date +%s)
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  # Without the version stamp the server reports v0.0.0-master, which Helm's kubeVersion
  # constraints refuse.
  (cd "$here" && go build -trimpath -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$version \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=$minor" -o "$out.tmp/cluster" .)
  ln -s cluster "$out.tmp/kubectl"
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "built in $(( $(date +%s) - start )) s: $(du -h "$out/cluster" | cut -f1)" >&2
fi
echo "$out/cluster"
