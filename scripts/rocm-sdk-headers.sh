#!/usr/bin/env bash
# Assemble the include tree that libaorta_attach_rocm.so compiles against
# (cmake -DAORTA_ROCPROF_SDK_INCLUDE=OUT) from source checkouts of the ROCm
# projects, for a machine without a ROCm install (/opt/rocm/include is such a
# tree already). Debian's libhsa-runtime-dev and libamdhip64-dev are too old
# (5.2: no hsa_amd_tool.h, no hip_api_trace.hpp), and rocprofiler-sdk is not
# packaged. The checkouts this was written against (README, "ROCm"):
#   ROCm/rocprofiler-sdk 8ab1ed78d8c2 (0.5.0)   ROCm/ROCR-Runtime c7785a6d
#   ROCm/HIP c5e11fcac                           ROCm/clr f9f995c6d
# Usage: scripts/rocm-sdk-headers.sh OUT SDK ROCR HIP CLR
# (each a work tree, or a bare repository read at its HEAD).
set -euo pipefail

if [ $# -ne 5 ]; then
    echo "usage: $0 OUT ROCPROFILER_SDK ROCR_RUNTIME HIP CLR" >&2
    exit 2
fi
out=$1
sdk=$2 rocr=$3 hip=$4 clr=$5

# copy SRC_DIR (inside repository REPO) to DEST, from a work tree or a bare repository
copy_dir() {
    local repo=$1 src=$2 dest=$3
    mkdir -p "$dest"
    if [ -d "$repo/$src" ]; then
        cp -r "$repo/$src/." "$dest/"
    else
        git --git-dir "$repo" archive HEAD "$src" | tar -x -C "$dest" --strip-components="$(($(tr -cd / <<<"$src" | wc -c) + 1))"
    fi
}

read_file() {
    local repo=$1 path=$2
    if [ -f "$repo/$path" ]; then cat "$repo/$path"; else git --git-dir "$repo" show "HEAD:$path"; fi
}

rm -rf "$out"
mkdir -p "$out"
copy_dir "$sdk" source/include/rocprofiler-sdk "$out/rocprofiler-sdk"
copy_dir "$sdk" source/include/rocprofiler-sdk-roctx "$out/rocprofiler-sdk-roctx"
copy_dir "$rocr" runtime/hsa-runtime/inc "$out/hsa"
copy_dir "$rocr" libhsakmt/include/hsakmt "$out/hsakmt"
copy_dir "$hip" include/hip "$out/hip"
copy_dir "$clr" hipamd/include/hip "$out/hip"

# The generated headers, as the projects' CMake writes them.
version=$(read_file "$sdk" VERSION | tr -d '[:space:]')
IFS=. read -r major minor patch <<<"$version"
for h in rocprofiler-sdk rocprofiler-sdk-roctx; do
    sed -e "s/@PROJECT_VERSION_MAJOR@/$major/g" -e "s/@PROJECT_VERSION_MINOR@/$minor/g" \
        -e "s/@PROJECT_VERSION_PATCH@/$patch/g" -e "s/@FULL_VERSION_STRING@/$version/g" \
        -e "s/@HSA_RUNTIME_VERSION_MAJOR@/1/g" -e "s/@HSA_RUNTIME_VERSION_MINOR@/14/g" \
        -e 's|^#cmakedefine \([A-Z_]*\).*|/* #undef \1 */|' -e 's/@[A-Za-z_]*@//g' \
        "$out/$h/version.h.in" >"$out/$h/version.h"
done
cat >"$out/hip/hip_version.h" <<'VERSION'
// the HIP these headers come from (scripts/rocm-sdk-headers.sh)
#pragma once
#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 3
#define HIP_VERSION_PATCH 0
#define HIP_VERSION_GITHASH ""
#define HIP_VERSION_BUILD_ID 0
#define HIP_VERSION_BUILD_NAME ""
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)
#define __HIP_HAS_GET_PCH 0
VERSION
echo "rocprofiler-sdk $version headers in $out"
