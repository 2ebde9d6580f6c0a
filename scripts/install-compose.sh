#!/usr/bin/env bash
# Install the Docker Compose v2 CLI into memstream's cache folder, from source.
#
#     bash scripts/install-compose.sh        # prints the path of the binary
#
# The compose file is validated with the real Compose implementation's
# `config` command, which needs no Docker engine. Compose is a Go program; it
# is built here from its module on the Go module proxy, so only `go` is needed.
# `go install …@version` refuses the module (its go.mod has exclude
# directives), so the module is downloaded and built as the main module.
#
# Idempotent: a binary of the wanted version already in the cache is kept.
# Environment:
#   MEMSTREAM_COMPOSE_VERSION  version to build (default v2.40.3)
#   MEMSTREAM_CACHE            cache root (default ~/.cache/memstream); the
#                              binary goes to $MEMSTREAM_CACHE/bin/docker-compose
set -euo pipefail

version="${MEMSTREAM_COMPOSE_VERSION:-v2.40.3}"
cache="${MEMSTREAM_CACHE:-$HOME/.cache/memstream}"
bin_dir="$cache/bin"
target="$bin_dir/docker-compose"
module="github.com/docker/compose/v2"

log() { echo "[install-compose] $*" >&2; }

installed_version() {
    [ -x "$target" ] && "$target" version --short 2>/dev/null || true
}

if [ "$(installed_version)" = "${version#v}" ]; then
    echo "$target"
    exit 0
fi

command -v go >/dev/null || { log "Go is needed to build Docker Compose"; exit 1; }
mkdir -p "$bin_dir"

# one build at a time, even when two test runs start together
exec 9>"$bin_dir/.docker-compose.lock"
flock 9
if [ "$(installed_version)" = "${version#v}" ]; then
    echo "$target"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log "downloading $module@$version"
src="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$src" ] && [ -d "$src" ] || { log "could not download $module@$version"; exit 1; }

# the module cache is read-only: build from a writable copy
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"

log "building docker-compose $version (takes a few minutes the first time)"
(
    cd "$work/src"
    CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X $module/internal.Version=$version" \
        -o "$work/docker-compose" ./cmd
)
"$work/docker-compose" version --short >/dev/null
mv -f "$work/docker-compose" "$target"
log "installed $("$target" version)"
echo "$target"
