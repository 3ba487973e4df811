#!/usr/bin/env bash
# Pay only for what a command uses (DESIGN §3, "Plugins"): the binary links
# no vendor library; the commands that read files load none; a command that
# needs a plugin whose library is missing says so in one line naming the
# library and the command; GPU commands never fall back to the CPU unasked;
# a typo of a command or a flag gets one line with the nearest name.
set -u
aorta=${AORTA:?set by ctest}
fakes=${AORTA_FAKE_PLUGINS:?set by ctest}
src=${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# MPI's leaks resolve to its own frames (tests/lsan.supp) only with slow unwinding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
# aorta finds its plugins relative to itself here, as it does for a user
unset AORTA_PLUGIN_DIR
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
cd "$tmp" || exit 1

vendor='libcudart|libcublas|libnccl|libcupti|libnvidia-ml|libmpi|libopen-pal|libcairo|libaorta_(cuda|mpi|cairo)'

# The executable itself needs none of them.
if ldd "$aorta" | grep -E "$vendor" >"$tmp/ldd"; then
    fail "the aorta binary links vendor libraries: $(tr '\n' ' ' <"$tmp/ldd")"
fi

# loaded CMD...: the vendor libraries the command maps (the dynamic loader's
# own account of every object it opens), one per line.
loaded() {
    LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$aorta" "$@" >"$tmp/out" 2>&1
    local rc=$?
    cat "$tmp"/ld.* 2>/dev/null | grep -oE "file=[^ ]*($vendor)[^ ]*" | sort -u
    rm -f "$tmp"/ld.*
    return $rc
}

"$aorta" analyze "$src/tests/data/fsdp2_default_h200x2" --output "$tmp/runs" --run-name job \
    >/dev/null 2>&1 || fail "analyze of the trace pair failed"
light=(
    "--help"
    "help train"
    "config show --config $src/config/default.yaml"
    "config validate --config $src/config/tiny.yaml"
    "plan --config $src/config/tiny.yaml"
    "sweep $src/examples/sweeps/rccl_cta_sweep.yaml --dry-run"
    "analyze $src/tests/data/fsdp2_default_h200x2 --output $tmp/runs2 --run-name job"
    "diagnose $tmp/runs/job"
    "report --log-dir $tmp/runs/job --label job --output $tmp/rep-nocharts --no-charts"
)
for cmd in "${light[@]}"; do
    read -ra args <<<"$cmd"
    libs=$(loaded "${args[@]}") || fail "aorta $cmd: exit $? ($(head -c 300 "$tmp/out"))"
    [ -z "$libs" ] || fail "aorta $cmd loaded: $(echo "$libs" | tr '\n' ' ')"
done

# report with charts loads the cairo plugin, and nothing of CUDA or MPI.
libs=$(loaded report --log-dir "$tmp/runs/job" --label job --output "$tmp/rep") ||
    fail "report: exit $?"
if [ -f "$tmp/rep/job_timeline.svg" ]; then
    echo "$libs" | grep -q libaorta_cairo || fail "report drew charts without libaorta_cairo.so?"
fi
echo "$libs" | grep -qE 'libcudart|libnccl|libmpi|libaorta_(cuda|mpi)' &&
    fail "report loaded a GPU or MPI library: $(echo "$libs" | tr '\n' ' ')"

# one_line RC FILE FRAGMENT...: exit code RC, and FILE holds exactly one
# "aorta: error:" line, holding every fragment.
one_line() {
    local want=$1 got=$2 file=$3
    shift 3
    [ "$got" = "$want" ] || fail "exit $got, not $want: $(head -c 400 "$file")"
    [ "$(grep -c 'aorta: error:' "$file")" = 1 ] ||
        fail "not one error line: $(head -c 600 "$file")"
    for f in "$@"; do
        grep -q -- "aorta: error: .*$f" "$file" || fail "the error line lacks '$f': $(cat "$file")"
    done
}

# A missing vendor library: one line naming it and the command.
if "$aorta" --version | grep -q '^comm backends:.*mpi'; then
    AORTA_PLUGIN_DIR=$fakes "$aorta" train --backend cpu --nproc 2 --config "$src/config/tiny.yaml" \
        --override training.output_dir="$tmp/t" >"$tmp/mpi.out" 2>&1
    one_line 1 $? "$tmp/mpi.out" "train:" "libaorta_mpi.so" "libaorta_fake_vendor.so"
fi
AORTA_PLUGIN_DIR=$fakes "$aorta" report --log-dir "$tmp/runs/job" --label job \
    --output "$tmp/rep-fake" >"$tmp/cairo.out" 2>&1 || fail "report without its charts' library failed"
if [ -f "$tmp/rep/job_timeline.svg" ]; then # a build with charts
    [ "$(grep -c 'aorta: warning: report: no charts: .*libaorta_fake_vendor.so' "$tmp/cairo.out")" = 1 ] ||
        fail "report without cairo: not one warning naming the library: $(cat "$tmp/cairo.out")"
    grep -q 'chart not available' "$tmp/rep-fake/index.html" || fail "the page does not say so"
fi
if "$aorta" --version | grep -q '^device backends:.*cuda'; then
    AORTA_PLUGIN_DIR=$fakes "$aorta" sdma --backend cuda >"$tmp/cuda.out" 2>&1
    one_line 1 $? "$tmp/cuda.out" "sdma:" "libaorta_cuda.so" "libaorta_fake_vendor.so"
fi

# GPU work without a GPU: an error that says how to run on the CPU, never
# a silent CPU run (CUDA_VISIBLE_DEVICES hides a GPU where there is one).
for cmd in "sdma" "coll -b 1K -e 1K" "train --config $src/config/tiny.yaml" "queues tiny"; do
    read -ra args <<<"$cmd"
    CUDA_VISIBLE_DEVICES='' "$aorta" "${args[@]}" >"$tmp/nogpu.out" 2>&1
    one_line 2 $? "$tmp/nogpu.out" "${args[0]}: no GPU" "pass --backend cpu"
done

# Typos: one line with the nearest name.
"$aorta" trian >"$tmp/typo.out" 2>&1
one_line 2 $? "$tmp/typo.out"
[ "$(cat "$tmp/typo.out")" = "aorta: error: 'trian' is not an aorta command; did you mean 'train'?" ] ||
    fail "aorta trian: $(cat "$tmp/typo.out")"
"$aorta" train --backend cpu --nprocs 2 >"$tmp/typo.out" 2>&1
one_line 2 $? "$tmp/typo.out" "train: unknown option '--nprocs'; did you mean '--nproc'?"
[ "$(wc -l <"$tmp/typo.out")" = 1 ] || fail "--nprocs: more than one line: $(cat "$tmp/typo.out")"
"$aorta" config show --overide training.max_steps=3 >"$tmp/typo.out" 2>&1
one_line 2 $? "$tmp/typo.out" "did you mean '--override'?"
"$aorta" help trian >"$tmp/typo.out" 2>&1
one_line 2 $? "$tmp/typo.out" "did you mean 'train'?"
"$aorta" xyzzy >"$tmp/typo.out" 2>&1
one_line 2 $? "$tmp/typo.out" "'xyzzy' is not an aorta command; 'aorta help' lists them"

finish plugins
