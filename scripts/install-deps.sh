#!/usr/bin/env bash
# Installs, on Debian/Ubuntu, only the packages aorta needs that are missing,
# saying which. Runs apt-get as root, or through sudo. The CUDA toolkit and
# NCCL are not installed here: the CUDA backend builds when nvcc is found.
#
# --test (make test) adds the packages only tests use: prometheus, the server
# e2e/prometheus scrapes aorta's live export with. Without them those tests
# skip and say why, so failing to install them (an older release, no
# network) is a warning here, not an error. Where systemd runs, Debian's
# package also enables its own service (port 9090); the test starts a server
# of its own on a free loopback port and never uses that one.
set -euo pipefail

packages=(cmake make gcc pkg-config libyaml-dev libyajl-dev zlib1g-dev libsqlite3-dev libcairo2-dev libcmocka-dev
          libopenmpi-dev openmpi-bin libopenblas-dev clang-format shellcheck)
test_packages=()
case ${1:-} in
"") ;;
--test) test_packages=(prometheus) ;;
*)
    echo "usage: install-deps.sh [--test]" >&2
    exit 2
    ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: not a Debian/Ubuntu system; install these yourself: ${packages[*]} ${test_packages[*]}" >&2
    exit 0
fi

# missing NAME...: the names of packages not installed
missing() {
    local p status
    for p in "$@"; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        [[ "$status" == "install ok installed" ]] || echo "$p"
    done
}
mapfile -t need < <(missing "${packages[@]}")
mapfile -t need_test < <(missing "${test_packages[@]}")
if [[ ${#need[@]} -eq 0 && ${#need_test[@]} -eq 0 ]]; then
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    elif [[ ${#need[@]} -gt 0 ]]; then
        echo "install-deps: need root or sudo to install: ${need[*]} ${need_test[*]}" >&2
        exit 1
    else
        echo "install-deps: warning: need root or sudo to install ${need_test[*]}; the tests that use it skip" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
if [[ ${#need[@]} -gt 0 ]]; then
    echo "install-deps: installing ${need[*]}"
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if [[ ${#need_test[@]} -gt 0 ]]; then
    echo "install-deps: installing, for tests only, ${need_test[*]}"
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need_test[@]}" ||
        echo "install-deps: warning: could not install ${need_test[*]}; the tests that use it skip" >&2
fi
