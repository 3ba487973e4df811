#!/usr/bin/env bash
# The layering DESIGN §3 describes, as a test: it fails when a file under src/
# includes across a forbidden boundary or grows past 1,200 lines.
#   - core/ includes only core/ headers;
#   - only cli/ includes report/ (the HTML, the charts: the `aorta report`
#     command), and report/ includes nothing of runtime/, model/, engine/,
#     data/, train/ or ingest/ (it reads run directories, never a device);
#   - runs/ (the run directory's model: records, summary, comparison, the
#     Chrome trace) includes only core/, timeline/ and runs/;
#   - diagnose/ includes only core/, runs/ and diagnose/;
#   - ingest/ (trace readers, analyze's run writer) includes only core/,
#     timeline/, ingest/ and runs/ (for summary.json);
#   - data/ includes nothing of model/, engine/ or train/ (the batch is the
#     data's own layout; the model's kernels fill it on the device);
#   - export/ (the live export) includes only core/, runs/ and export/: it
#     reads run directories, beside no rank;
#   - CUDA headers (cuda_runtime.h, cuda.h, nccl.h, cublasLt.h, cupti*.h) only
#     in backend files: *_cuda.c, *_cuda.h, *.cu, *.cuh, *_nccl.c and runtime/gpu_compat.h;
#   - no source file over 1,200 lines.
# Before the real tree it checks a small tree with one breach of each rule,
# so a checker that stopped seeing them fails too.
set -euo pipefail
src=${AORTA_SOURCE_DIR:?}/src
MAX_LINES=1200

# check ROOT: one line per breach under ROOT (a src/ tree); status 1 if any.
check() {
    local root=$1 bad=0 f rel dir n line inc quoted
    while IFS= read -r f; do
        rel=${f#"$root"/}
        dir=${rel%%/*}
        n=$(wc -l <"$f")
        if ((n > MAX_LINES)); then
            echo "layers: $rel has $n lines (at most $MAX_LINES: split it)"
            bad=1
        fi
        while IFS= read -r line; do
            inc=${line#*:}
            inc=${inc#*include}
            quoted=0
            [[ $inc == *\"* ]] && quoted=1
            inc=${inc//[[:space:]\"<>]/}
            line=${line%%:*}
            # the layer rules are about aorta's own ("...") headers
            case "$quoted:$dir/$inc" in
            0:*) ;;
            1:core/*/*) [[ $inc == core/* ]] || {
                echo "layers: $rel:$line includes $inc (core/ includes only core/)"
                bad=1
            } ;;
            1:cli/report/* | 1:report/report/*) ;;
            1:*/report/*)
                echo "layers: $rel:$line includes $inc (only cli/ includes report/)"
                bad=1
                ;;
            1:runs/*/*) [[ $inc == core/* || $inc == timeline/* || $inc == runs/* ]] || {
                echo "layers: $rel:$line includes $inc (runs/ includes only core/, timeline/ and runs/)"
                bad=1
            } ;;
            1:diagnose/*/*) [[ $inc == core/* || $inc == runs/* || $inc == diagnose/* ]] || {
                echo "layers: $rel:$line includes $inc (diagnose/ includes only core/, runs/ and diagnose/)"
                bad=1
            } ;;
            1:data/model/* | 1:data/engine/* | 1:data/train/*)
                echo "layers: $rel:$line includes $inc (data/ never includes the model, engine or train)"
                bad=1
                ;;
            1:report/runtime/* | 1:report/model/* | 1:report/engine/* | 1:report/data/* | 1:report/train/* | 1:report/ingest/*)
                echo "layers: $rel:$line includes $inc (report/ reads files; no device, model or engine)"
                bad=1
                ;;
            1:ingest/*/*) [[ $inc == core/* || $inc == timeline/* || $inc == ingest/* || $inc == runs/* ]] || {
                echo "layers: $rel:$line includes $inc (ingest/ includes only core/, timeline/ and runs/)"
                bad=1
            } ;;
            1:export/*/*) [[ $inc == core/* || $inc == runs/* || $inc == export/* ]] || {
                echo "layers: $rel:$line includes $inc (export/ includes only core/, runs/ and export/)"
                bad=1
            } ;;
            esac
            case "$inc" in
            cuda_runtime.h | cuda.h | nccl.h | cublasLt.h | cupti*.h)
                case "$rel" in
                *_cuda.c | *_cuda.h | *.cu | *.cuh | *_nccl.c | runtime/gpu_compat.h) ;;
                *)
                    echo "layers: $rel:$line includes $inc (CUDA headers only in backend files)"
                    bad=1
                    ;;
                esac
                ;;
            esac
        done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f" || true)
    done < <(find "$root" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
    return "$bad"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{core,report,ingest,timeline,runtime,runs,diagnose,data,train,export}
printf '#include <yaml.h>\n#include "runtime/device.h"\n' >"$tmp/core/a.c"
printf '#include "runs/summary.h"\n#include "engine/engine.h"\n' >"$tmp/report/b.c"
printf '#include "timeline/timeline.h"\n#include "engine/engine.h"\n' >"$tmp/ingest/c.c"
printf '#include <cupti.h>\n' >"$tmp/timeline/d.c"
printf '#include "runs/rundata.h"\n#include "launch/launch.h"\n' >"$tmp/export/g.c"
printf '#include <cuda_runtime.h>\n' >"$tmp/runtime/e_cuda.c"
printf '#include "engine/engine.h"\n' >"$tmp/runs/g.c"
printf '#include "runs/summary.h"\n#include "report/html.h"\n' >"$tmp/diagnose/h.c"
printf '#include "data/data.h"\n#include "model/model.h"\n' >"$tmp/data/i.c"
printf '#include "report/report.h"\n' >"$tmp/train/j.c"
seq 1 $((MAX_LINES + 1)) | sed 's|.*|/* */|' >"$tmp/runtime/f.c"
if got=$(check "$tmp"); then
    echo "layers: the checker missed every breach of its self-test"
    exit 1
fi
want=("core/a.c:2 includes runtime/device.h" "report/b.c:2 includes engine/engine.h"
    "ingest/c.c:2 includes engine/engine.h" "timeline/d.c:1 includes cupti.h"
    "runtime/f.c has $((MAX_LINES + 1)) lines" "runs/g.c:1 includes engine/engine.h"
    "diagnose/h.c:2 includes report/html.h" "data/i.c:2 includes model/model.h"
    "train/j.c:1 includes report/report.h" "export/g.c:2 includes launch/launch.h")
for w in "${want[@]}"; do
    grep -qF "layers: $w" <<<"$got" || {
        echo "layers: self-test: expected a breach '$w'; got:"
        echo "$got"
        exit 1
    }
done
if (($(wc -l <<<"$got") != ${#want[@]})); then
    echo "layers: self-test: expected ${#want[@]} breaches, got:"
    echo "$got"
    exit 1
fi

check "$src"
echo "layers: src/ keeps DESIGN §3's layering"
