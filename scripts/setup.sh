#!/usr/bin/env bash
# Install what `make test` needs on this machine, where it is missing.
#
#     make setup                    # the same as: bash scripts/setup.sh
#     bash scripts/setup.sh --check # install nothing: exit 0 when step 1 finds
#                                   # all, else print what is missing, exit 1
#
# `make test` (and test-integration, test-chaos) runs this first, and so does
# .ci/run: CI takes the path a person takes. The steps, in order; each one
# looks before it acts (`command -v`, a file, a version), so a second run
# installs nothing and takes a few seconds:
#
#  1. Programs from Debian packages: make, git, Python 3.11+ with venv, Redis,
#     MariaDB server and client, Prometheus (promtool), a JDK (java, javac),
#     Maven; and Go 1.21 or newer (Debian's is older; it builds the Docker
#     Compose CLI and the Dockerfile check, fetching the toolchain the modules
#     ask for). Missing packages are installed with apt-get as root, or through
#     sudo when this user may use it. Otherwise -- or when Go is missing --
#     nothing else is done: one message names what is missing and the command
#     that installs it, and the exit status is 1.
#  2. The Kafka jars, from Maven Central into $MEMSTREAM_CACHE
#     (scripts/services.py jars).
#  3. The Docker Compose CLI (scripts/install-compose.sh).
#  4. The project's virtual environment .venv (make venv: reinstalled only
#     when pyproject.toml is newer than its stamp).
#  5. The virtual environments of the MemOS server and Mem0
#     (scripts/services.py venvs).
#
# Environment:
#   PYTHON                    the interpreter the venvs are made with (python3)
#   MEMSTREAM_CACHE           cache root (default ~/.cache/memstream)
#   MEMSTREAM_SETUP_NO_ROOT=1 act as a user who is not root and may not use
#                             sudo: what such a user is told, on any machine
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
check_only=0
case "${1:-}" in
    "") ;;
    --check) check_only=1 ;;
    *) echo "usage: bash scripts/setup.sh [--check]" >&2; exit 2 ;;
esac

say() { echo "[setup] $*" >&2; }

# Debian installs daemons (mariadbd) in /usr/sbin, off an ordinary user's PATH;
# scripts/services.py looks there too
have() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1; }

# ------------------------------------------------------------ 1. programs
# program -> the Debian package it comes from
programs=(
    make:make git:git
    redis-server:redis-server
    mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb:mariadb-client
    prometheus:prometheus promtool:prometheus
    java:openjdk-17-jdk-headless javac:openjdk-17-jdk-headless
    mvn:maven
)
packages=()      # to install, each once
lacking=()       # "program  (Debian package)" lines for the message
manual=()        # what apt-get cannot install here, with how to get it

add_package() {
    local p
    for p in "${packages[@]}"; do [ "$p" = "$1" ] && return 0; done
    packages+=("$1")
}

for entry in "${programs[@]}"; do
    prog="${entry%%:*}" pkg="${entry#*:}"
    if ! have "$prog"; then
        add_package "$pkg"
        lacking+=("$prog (Debian package $pkg)")
    fi
done

# Python: the venvs need 3.11+ and its venv module (Debian's python3-venv)
if ! have "$PYTHON"; then
    add_package python3
    add_package python3-venv
    lacking+=("$PYTHON (Debian packages python3, python3-venv)")
else
    case "$("$PYTHON" -c 'import sys
if sys.version_info < (3, 11):
    print("old")
else:
    import importlib.util
    print("ok" if importlib.util.find_spec("ensurepip") else "no-venv")' 2>/dev/null || echo broken)" in
        ok) ;;
        no-venv)
            add_package python3-venv
            lacking+=("$PYTHON's venv module (Debian package python3-venv)") ;;
        *)
            manual+=("Python 3.11 or newer as \$PYTHON (now: $PYTHON, $("$PYTHON" --version 2>&1 || true))") ;;
    esac
fi

# Go: any release from 1.21 fetches the newer toolchain a module asks for
go_minor=""
if have go; then
    go_minor="$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
fi
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
    manual+=("Go 1.21 or newer on PATH (Debian's golang-go is older): https://go.dev/doc/install")
fi

# who may install the packages
as_root=()
can_install=0
if ((${#packages[@]})) && [ "${MEMSTREAM_SETUP_NO_ROOT:-0}" != 1 ] && ((!check_only)); then
    if [ "$(id -u)" -eq 0 ]; then
        can_install=1
    elif have sudo && { sudo -n true 2>/dev/null || { [ -t 0 ] && sudo -v; }; }; then
        as_root=(sudo)
        can_install=1
    fi
fi

if ((${#manual[@]})) || { ((${#packages[@]})) && ((!can_install)); }; then
    {
        echo "[setup] make test needs what this machine lacks; nothing was installed."
        for line in "${lacking[@]}" "${manual[@]}"; do echo "[setup]   $line"; done
        if ((${#packages[@]})); then
            sudo="sudo "
            [ "$(id -u)" -eq 0 ] && [ "${MEMSTREAM_SETUP_NO_ROOT:-0}" != 1 ] && sudo=""
            echo "[setup] The packages are installed, as root or with sudo, by:"
            echo "    ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends ${packages[*]}"
        fi
        echo "[setup] then run make test again (or make setup, or bash scripts/setup.sh)."
    } >&2
    exit 1
fi
if ((check_only)); then
    exit 0
fi

if ((${#packages[@]})); then
    say "installing Debian packages: ${packages[*]}"
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${packages[@]}"
    # Debian starts packaged daemons on install where it can; ours run on
    # their own ports (scripts/services.py), so those do not stand in the way
fi

# ------------------------------------------------------ 2-5. the rest, once
"$PYTHON" scripts/services.py jars >/dev/null    # Kafka jars, cached
bash scripts/install-compose.sh >/dev/null       # Docker Compose CLI, cached
make --no-print-directory -s venv PYTHON="$PYTHON"
"$PYTHON" scripts/services.py venvs >/dev/null   # MemOS and Mem0, cached
say "ready"
