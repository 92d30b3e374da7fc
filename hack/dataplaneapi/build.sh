#!/usr/bin/env bash
# Prints the path of a HAProxy Data Plane API binary (v3.2.5) for the fleet tests, building it
# once into a cache outside the repository when needed.
#
#   $DATAPLANEAPI set      that binary is used as is (checked to run); nothing is built.
#   otherwise              ../shared/dataplaneapi/build (or $HTC_DATAPLANEAPI_SRC/build) builds
#                          it from the pinned source archive into
#                          ${HTC_CACHE_DIR:-~/.cache/htc}/dataplaneapi-v3.2.5/dataplaneapi.
#
# The build script and its archive live outside this repository because the Go module proxy
# these machines reach does not serve the dataplaneapi module (see its README). Elsewhere, set
# DATAPLANEAPI to a binary from https://github.com/haproxytech/dataplaneapi/releases.
set -euo pipefail
version=v3.2.5
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${DATAPLANEAPI:-}" ]; then
  if [ ! -x "$DATAPLANEAPI" ] || ! "$DATAPLANEAPI" --version >/dev/null 2>&1; then
    echo "build.sh: DATAPLANEAPI=$DATAPLANEAPI is not a runnable dataplaneapi binary" >&2
    exit 3
  fi
  echo "$DATAPLANEAPI"
  exit 0
fi
src=${HTC_DATAPLANEAPI_SRC:-$here/../../../shared/dataplaneapi}
cache=${HTC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/htc}
out="$cache/dataplaneapi-$version/dataplaneapi"
if [ -x "$out" ] && "$out" --version 2>/dev/null | grep -q "$version"; then
  echo "$out"
  exit 0
fi
if [ ! -x "$src/build" ]; then
  cat >&2 <<MSG
build.sh: no dataplaneapi binary. Either
  - set DATAPLANEAPI=/path/to/dataplaneapi (a $version release binary from
    https://github.com/haproxytech/dataplaneapi/releases), or
  - set HTC_DATAPLANEAPI_SRC to a directory holding its 'build' script and source archive
    (looked for in $src).
MSG
  exit 3
fi
echo "building dataplaneapi $version into $out ..." >&2
start=$(date +%s)
"$src/build" "$out"
echo "built in $(( $(date +%s) - start )) s: $(du -h "$out" | cut -f1)" >&2
echo "$out"
