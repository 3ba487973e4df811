#!/usr/bin/env bash
# The launch and capture scripts: shellcheck-clean, and they start aorta with
# the right rank count, config, arguments and environment. nvidia-smi,
# rocm-smi, nsys, rocprofv3 and aorta itself are stubs that print what they
# were given, so this runs anywhere.
set -euo pipefail
src=${AORTA_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

cat >"$tmp/bin/nvidia-smi" <<'STUB'
#!/usr/bin/env bash
[[ ${1:-} == -L ]] || exit 1
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
echo "GPU 1: NVIDIA H200 (UUID: GPU-11111111-1111-1111-1111-111111111111)"
STUB
cat >"$tmp/bin/rocm-smi" <<'STUB'
#!/usr/bin/env bash
[[ ${1:-} == --showid ]] || exit 1
for i in 0 1 2; do
    echo "GPU[$i]		: Device Name: 		AMD Instinct MI300X"
    echo "GPU[$i]		: Device ID: 		0x74a1"
done
STUB
cat >"$tmp/aorta" <<'STUB'
#!/usr/bin/env bash
for a in "$@"; do echo "ARG $a"; done
echo "ENV CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS-unset}"
echo "ENV NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"
STUB
# profilers: print their arguments, then run the command after them as a real
# profiler would (nsys: after the options; rocprofv3: after "--")
cat >"$tmp/bin/nsys" <<'STUB'
#!/usr/bin/env bash
for a in "$@"; do echo "NSYS $a"; done
shift
while [[ $1 == -* ]]; do shift; done
exec "$@"
STUB
cat >"$tmp/bin/rocprofv3" <<'STUB'
#!/usr/bin/env bash
for a in "$@"; do echo "ROCPROF $a"; done
while [[ $1 != -- ]]; do shift; done
shift
exec "$@"
STUB
chmod +x "$tmp/bin/"* "$tmp/aorta"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# run NAME ENV... -- SCRIPT ARGS...: the stub's output in $tmp/NAME.out
run() {
    local name=$1
    shift
    local -a envs=()
    while [[ $1 != -- ]]; do
        envs+=("$1")
        shift
    done
    shift
    env -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES -u NPROC \
        -u CUDA_DEVICE_MAX_CONNECTIONS -u NCCL_NVLS_ENABLE \
        PATH="$tmp/bin:$PATH" AORTA="$tmp/aorta" "${envs[@]}" bash "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
# expect NAME LINE...: each line appears in the output, in this order
expect() {
    local name=$1 line
    shift
    local rest
    rest=$(cat "$tmp/$name.out")
    for line in "$@"; do
        grep -qxF -- "$line" <<<"$rest" || fail "$name: expected \"$line\" in order, got:
$(cat "$tmp/$name.out")"
        rest=$(sed -n "/^$(printf '%s' "$line" | sed 's/[][\.*^$/]/\\&/g')\$/,\$p" <<<"$rest" | tail -n +2)
    done
}

cuda=$src/scripts/launch_cuda.sh
run gpus2 -- "$cuda" cfg.yaml --override training.max_steps=3
expect gpus2 "ARG train" "ARG --config" "ARG cfg.yaml" "ARG --backend" "ARG cuda" "ARG --nproc" \
    "ARG 2" "ARG --override" "ARG training.max_steps=3" "ENV CUDA_DEVICE_MAX_CONNECTIONS=32" \
    "ENV NCCL_NVLS_ENABLE=0"

run nproc3 NPROC=3 CUDA_DEVICE_MAX_CONNECTIONS=8 NCCL_NVLS_ENABLE=1 -- "$cuda" cfg.yaml
expect nproc3 "ARG --nproc" "ARG 3" "ENV CUDA_DEVICE_MAX_CONNECTIONS=8" "ENV NCCL_NVLS_ENABLE=1"

run visible CUDA_VISIBLE_DEVICES=0,1,2,3 -- "$cuda"
expect visible "ARG --config" "ARG $src/config/default.yaml" "ARG --nproc" "ARG 4"

run noconfig -- "$cuda" --override a.b=1
expect noconfig "ARG $src/config/default.yaml" "ARG --nproc" "ARG 2" "ARG --override" "ARG a.b=1"

if run badnproc NPROC=abc -- "$cuda"; then fail "NPROC=abc was accepted"; fi
grep -q "NPROC=abc is not a positive integer" "$tmp/badnproc.err" || fail "no NPROC message"
if run nobinary AORTA="$tmp/missing" -- "$cuda"; then fail "a missing binary was accepted"; fi
grep -q "not found" "$tmp/nobinary.err" || fail "no missing-binary message"

run rocm -- "$src/scripts/launch_rocm.sh" cfg.yaml
expect rocm "ARG cfg.yaml" "ARG --backend" "ARG hip" "ARG --nproc" "ARG 3" \
    "ENV CUDA_DEVICE_MAX_CONNECTIONS=unset"
run rocmvis HIP_VISIBLE_DEVICES=1 -- "$src/scripts/launch_rocm.sh"
expect rocmvis "ARG --nproc" "ARG 1"

run nsys NSYS_OUTPUT_DIR="$tmp/nsys_out" NSYS_ARGS="--sample=none --stats=false" -- \
    "$src/scripts/nsys_capture.sh" cfg.yaml --override training.max_steps=9
expect nsys "NSYS profile" "NSYS --capture-range=cudaProfilerApi" "NSYS --capture-range-end=stop" \
    "NSYS --output=$tmp/nsys_out/aorta_%h_%p" "NSYS --sample=none" "NSYS --stats=false" \
    "ARG cfg.yaml" "ARG --nproc" "ARG 2" "ARG --override" "ARG profiling.enabled=true" \
    "ARG --override" "ARG training.max_steps=9" "ENV CUDA_DEVICE_MAX_CONNECTIONS=32"
[[ -d $tmp/nsys_out ]] || fail "NSYS_OUTPUT_DIR not created"

run rocprof ROCPROF_OUTPUT_DIR="$tmp/rp" -- "$src/scripts/rocprof_capture.sh" cfg.yaml
expect rocprof "ROCPROF --kernel-trace" "ROCPROF --memory-copy-trace" "ROCPROF --output-directory" \
    "ROCPROF $tmp/rp" "ARG cfg.yaml" "ARG hip" "ARG 3"
run rocprof2 ROCPROF_OUTPUT_DIR="$tmp/rp" ROCPROF_ARGS="--att --kernel-trace --kernel-symbols" -- \
    "$src/scripts/rocprof_capture.sh"
expect rocprof2 "ROCPROF --att" "ROCPROF --kernel-trace" "ROCPROF --kernel-symbols" "ARG hip"

# make run (scripts/make-run.sh): a plan line first, one line per stage with
# the build's noise in the log, only the aorta target, and the CUDA backend
# only where nvidia-smi lists a GPU. cmake and the package step are stubs.
mkdir -p "$tmp/nogpu" "$tmp/cm"
printf '#!/usr/bin/env bash\nexit 9\n' >"$tmp/nogpu/nvidia-smi"
cat >"$tmp/cm/cmake" <<'STUB'
#!/usr/bin/env bash
echo "CMAKE $*" >>"$CMAKE_LOG"
for i in $(seq 50); do echo "noise $i"; done
while [[ $# -gt 0 ]]; do
    case $1 in
    -B) touch "$2/CMakeCache.txt" ;;
    --build) cp "$AORTA" "$2/aorta" ;;
    esac
    shift
done
STUB
chmod +x "$tmp/nogpu/nvidia-smi" "$tmp/cm/cmake"
for gpu in no yes; do
    bindir=$tmp/nogpu
    [[ $gpu == yes ]] && bindir=$tmp/bin
    rm -rf "$tmp/mr_$gpu"
    env -u NCCL_NVLS_ENABLE PATH="$tmp/cm:$bindir:$PATH" AORTA="$tmp/aorta" CMAKE_LOG="$tmp/cmake_$gpu" \
        AORTA_INSTALL_DEPS=true "$src/scripts/make-run.sh" "$tmp/mr_$gpu" 2 >"$tmp/mr_$gpu.out" 2>&1 ||
        fail "make-run.sh ($gpu GPU) failed: $(cat "$tmp/mr_$gpu.out")"
    head -1 "$tmp/mr_$gpu.out" | grep -q "^make run: install missing packages, build the aorta binary" ||
        fail "make run does not say first what it will do"
    [[ $(grep -c '^\[[1-4]/4\]' "$tmp/mr_$gpu.out") -eq 4 ]] || fail "make run: not one line per stage"
    ! grep -q noise "$tmp/mr_$gpu.out" || fail "make run printed the build's output"
    grep -q noise "$tmp/mr_$gpu/make-run.log" || fail "make run lost the build's output"
    grep -qx "CMAKE --build $tmp/mr_$gpu --target aorta -j 2" "$tmp/cmake_$gpu" ||
        fail "make run built more than the aorta target: $(cat "$tmp/cmake_$gpu")"
    tail -3 "$tmp/mr_$gpu.out" | grep -q "aorta report --log-dir artifacts/latest" ||
        fail "make run does not end with the next command: $(tail -3 "$tmp/mr_$gpu.out")"
done
grep -q -- "-DAORTA_CUDA=OFF" "$tmp/cmake_no" || fail "make run built CUDA without a GPU"
grep -q -- "-DAORTA_CUDA=ON" "$tmp/cmake_yes" || fail "make run left CUDA out with a GPU"
grep -qx "ARG tiny.yaml" <(sed 's|.*/config/|ARG |' "$tmp/mr_no.out") || fail "make run (cpu) ran no tiny.yaml"

if ! command -v shellcheck >/dev/null; then
    echo "SKIP: the scripts ran as expected, but shellcheck is not installed"
    exit 77
fi
# from the repository root, where the scripts' "shellcheck source=" paths resolve
cd "$src"
shellcheck scripts/launch_common.sh scripts/launch_cuda.sh scripts/launch_rocm.sh \
    scripts/nsys_capture.sh scripts/rocprof_capture.sh scripts/make-run.sh tests/e2e/scripts.sh
echo "scripts: ok"
