#!/usr/bin/env bash
# Installs, on Debian/Ubuntu, only the packages aorta needs that are missing,
# saying which. Runs apt-get as root, or through sudo. The CUDA toolkit and
# NCCL are not installed here: the CUDA backend builds when nvcc is found.
set -euo pipefail

packages=(cmake make gcc pkg-config libyaml-dev libyajl-dev zlib1g-dev libsqlite3-dev libcairo2-dev libcmocka-dev
          libopenmpi-dev openmpi-bin libopenblas-dev clang-format shellcheck)

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: not a Debian/Ubuntu system; install these yourself: ${packages[*]}" >&2
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
