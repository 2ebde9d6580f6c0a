#!/usr/bin/env bash
# Install what `make test` needs on this machine, where it is missing.
#
#     make setup                    # the same as: bash scripts/setup.sh
#     bash scripts/setup.sh --check # install nothing: exit 0 when step 1 finds
#                                   # all, else print what is missing, exit 1
#     bash scripts/setup.sh --help  # this text
#
# `make test` (and test-integration, test-chaos) runs this first, and so does
# .ci/run: CI takes the path a person takes. The steps, in order; each one
# looks before it acts (an executable on PATH, a file, a version), so a second
# run installs nothing and takes about half a second:
#
#  1. Programs from Debian packages: make, git, Python 3.11+ with venv, Redis,
#     MariaDB server and client, Prometheus (promtool), a JDK (java, javac),
#     Maven; and Go 1.24 or newer (Debian's is older; it builds the Docker
#     Compose CLI, Jaeger and the Dockerfile check, fetching the toolchain the modules
#     ask for); and a cache directory this user may write (created if absent,
#     also by --check). Missing packages are installed with apt-get as root, or
#     through sudo when this user may use it, and the programs are looked for
#     again after. Otherwise -- no root or sudo, no apt-get, Go missing or
#     broken, $PYTHON not a Python 3.11+, the cache not writable, or a program
#     still missing after apt-get -- nothing else is done: one message names
#     what is missing and how to get it, and the exit status is 1.
#  2. The Kafka jars, from Maven Central into $MEMSTREAM_CACHE
#     (scripts/services.py jars).
#  3. The Docker Compose CLI (scripts/install-compose.sh), and Jaeger for the
#     trace test (scripts/install-jaeger.sh), built in the background: its first
#     build takes minutes, and the test waits for it (log:
#     $MEMSTREAM_CACHE/bin/jaeger-build.log).
#  4. The project's virtual environment .venv (make venv: reinstalled only
#     when pyproject.toml is newer than its stamp).
#  5. The virtual environments of the MemOS server and Mem0
#     (scripts/services.py venvs).
#
# Environment:
#   PYTHON                    the interpreter the venvs are made with (python3)
#   MEMSTREAM_CACHE           cache root (default ~/.cache/memstream)
#   MEMSTREAM_SETUP_NO_ROOT=1 act as a user who is not root and may not use
#                             sudo (also true or yes): what such a user is
#                             told, on any machine
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
check_only=0
case "$#:${1:-}" in
    0:) ;;
    1:--check) check_only=1 ;;
    1:--help | 1:-h)
        sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0 ;;
    *) echo "usage: bash scripts/setup.sh [--check | --help]" >&2; exit 2 ;;
esac
no_root="${MEMSTREAM_SETUP_NO_ROOT:-0}"
case "${no_root,,}" in
    1 | true | yes) no_root=1 ;;
    *) no_root=0 ;;
esac
home=~
cache="${MEMSTREAM_CACHE:-$home/.cache/memstream}"

say() { echo "[setup] $*" >&2; }

# an executable file on PATH (`command -v` also names a file that is not
# executable); Debian installs daemons (mariadbd) in /usr/sbin, off an ordinary
# user's PATH, and scripts/services.py looks there too
have() {
    local found
    found="$(PATH="$PATH:/usr/sbin:/sbin" command -v "$1" 2>/dev/null)" &&
        [ -f "$found" ] && [ -x "$found" ]
}

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
add_package() {
    local p
    for p in "${packages[@]}"; do [ "$p" = "$1" ] && return 0; done
    packages+=("$1")
}

# fills packages (to install, each once), lacking ("program (Debian package)"
# lines for the message) and manual (what apt-get cannot install, with how)
check() {
    packages=() lacking=() manual=()
    local entry prog pkg go_out go_minor err
    for entry in "${programs[@]}"; do
        prog="${entry%%:*}" pkg="${entry#*:}"
        if ! have "$prog"; then
            add_package "$pkg"
            lacking+=("$prog (Debian package $pkg)")
        fi
    done

    # Python: the venvs need 3.11+ and its venv module (Debian's python3-venv)
    if ! have "$PYTHON" && [ "$PYTHON" = python3 ]; then
        add_package python3
        add_package python3-venv
        lacking+=("python3 (Debian packages python3, python3-venv)")
    elif ! have "$PYTHON"; then
        manual+=("PYTHON=$PYTHON is not an executable Python: set PYTHON to a Python 3.11 or newer (a name on PATH or a path), or unset it for python3")
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

    # Go: 1.24 for `go get -tool` (Jaeger); any release fetches the newer toolchain a module asks for
    if ! have go; then
        manual+=("Go 1.24 or newer on PATH (Debian's golang-go is older): https://go.dev/doc/install")
    elif ! go_out="$(go env GOVERSION 2>&1)"; then
        manual+=("go is on PATH but \`go env GOVERSION\` fails: ${go_out//$'\n'/ }")
    else
        go_minor="$(sed -n 's/^go1\.\([0-9]*\).*/\1/p' <<<"$go_out")"
        if [ -z "$go_minor" ] || [ "$go_minor" -lt 24 ]; then
            manual+=("Go 1.24 or newer on PATH (now: ${go_out//$'\n'/ }; Debian's golang-go is older): https://go.dev/doc/install")
        fi
    fi

    # the cache of steps 2-5
    if ! err="$(mkdir -p -- "$cache" 2>&1)" || [ ! -w "$cache" ] || [ ! -x "$cache" ]; then
        manual+=("the cache directory $cache cannot be created or written${err:+ (${err//$'\n'/ })}: set MEMSTREAM_CACHE to a directory this user may write")
    fi
}

# the one message for what is missing, then exit 1
report() {
    local line sudo="sudo "
    {
        echo "[setup] $1"
        for line in "${lacking[@]}" "${manual[@]}"; do echo "[setup]   $line"; done
        if ((${#packages[@]})) && ! have apt-get; then
            echo "[setup] apt-get is not available on this machine: install the programs above (Debian's package names are given) with its own package manager."
        elif ((${#packages[@]})); then
            [ "$(id -u)" -eq 0 ] && ((!no_root)) && sudo=""
            echo "[setup] The packages are installed, as root or with sudo, by:"
            echo "    ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends ${packages[*]}"
        fi
        echo "[setup] then run make test again (or make setup, or bash scripts/setup.sh)."
    } >&2
    exit 1
}

check

# who may install the packages
as_root=()
can_install=0
if ((${#packages[@]})) && ((!no_root)) && ((!check_only)) && have apt-get; then
    if [ "$(id -u)" -eq 0 ]; then
        can_install=1
    elif have sudo && { sudo -n true 2>/dev/null || { [ -t 0 ] && sudo -v; }; }; then
        as_root=(sudo)
        can_install=1
    fi
fi

if ((${#manual[@]})) || { ((${#packages[@]})) && ((!can_install)); }; then
    report "make test needs what this machine lacks; nothing was installed."
fi
if ((check_only)); then
    exit 0
fi

if ((${#packages[@]})); then
    say "installing Debian packages: ${packages[*]}"
    "${as_root[@]}" apt-get update -qq ||
        { say "apt-get update failed (its errors are above); nothing else was done."; exit 1; }
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${packages[@]}" ||
        { say "apt-get install ${packages[*]} failed (its errors are above); nothing else was done."; exit 1; }
    # Debian starts packaged daemons on install where it can; ours run on
    # their own ports (scripts/services.py), so those do not stand in the way
    check
    if ((${#packages[@]} + ${#manual[@]})); then
        report "apt-get install finished, but this machine still lacks what make test needs:"
    fi
fi

# ------------------------------------------------------ 2-5. the rest, once
# each failure is said once on stderr: services.py's own message, or the
# failing program's errors and the line below
"$PYTHON" scripts/services.py jars >/dev/null    # Kafka jars, cached
bash scripts/install-compose.sh >/dev/null ||    # Docker Compose CLI, cached
    { say "building the Docker Compose CLI failed (scripts/install-compose.sh; its errors are above)."; exit 1; }
bash scripts/install-jaeger.sh --background >/dev/null  # Jaeger, cached; the trace test waits for it
make --no-print-directory -s venv PYTHON="$PYTHON" ||
    { say "building the project's .venv failed (make venv; its errors are above)."; exit 1; }
"$PYTHON" scripts/services.py venvs >/dev/null   # MemOS and Mem0, cached
say "ready"
