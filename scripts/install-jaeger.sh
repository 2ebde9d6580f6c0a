#!/usr/bin/env bash
# Install Jaeger (v2: an OpenTelemetry Collector distribution with an OTLP
# receiver, in-memory trace storage and a query API) into memstream's cache
# folder, from source.
#
#     bash scripts/install-jaeger.sh          # prints the path of the binary
#     bash scripts/install-jaeger.sh --background
#                                             # starts the build and returns at once
#
# The trace tests send memstream's spans to it over OTLP and read the traces
# back through its query API. Jaeger is a Go program; it is built here as a tool
# of a scratch module from the Go module proxy, so only `go` is needed.
#
# Idempotent: a binary of the wanted version already in the cache is kept. One
# build at a time: a second call waits for the first one's (--background leaves
# a build under way alone).
# Environment:
#   MEMSTREAM_JAEGER_VERSION  module version to build (default v1.75.0)
#   MEMSTREAM_CACHE           cache root (default ~/.cache/memstream); the binary
#                             goes to $MEMSTREAM_CACHE/bin/jaeger-<version>
set -euo pipefail

version="${MEMSTREAM_JAEGER_VERSION:-v1.75.0}"
cache="${MEMSTREAM_CACHE:-$HOME/.cache/memstream}"
bin_dir="$cache/bin"
target="$bin_dir/jaeger-$version"
module="github.com/jaegertracing/jaeger"

log() { echo "[install-jaeger] $*" >&2; }

if [ -x "$target" ]; then
    echo "$target"
    exit 0
fi
command -v go >/dev/null || { log "Go is needed to build Jaeger"; exit 1; }
mkdir -p "$bin_dir"

if [ "${1:-}" = "--background" ]; then
    # detached, its own log; a build already under way holds the lock and is left alone
    nohup flock -n "$bin_dir/.jaeger.lock" env MEMSTREAM_JAEGER_LOCKED=1 bash "$0" \
        >"$bin_dir/jaeger-build.log" 2>&1 </dev/null &
    exit 0
fi

if [ -z "${MEMSTREAM_JAEGER_LOCKED:-}" ]; then  # else the caller holds the lock
    exec 9>"$bin_dir/.jaeger.lock"
    flock 9
fi
if [ -x "$target" ]; then
    echo "$target"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "building jaeger $version (several minutes the first time)"
(
    cd "$work"
    go mod init memstream-jaeger >/dev/null 2>&1
    GOFLAGS=-mod=mod go get -tool "$module/cmd/jaeger@$version"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/jaeger" "$module/cmd/jaeger"
)
"$work/jaeger" --help >/dev/null
mv -f "$work/jaeger" "$target"
log "installed $target"
echo "$target"
