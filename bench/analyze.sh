#!/usr/bin/env bash
# aorta analyze against Holistic Trace Analysis on the same traces: wall time
# and peak RSS (/usr/bin/time -v) of each, the best of REPS runs, and the
# ratios; then, with BIG_MB set, aorta alone on a generated Kineto trace of
# that size on one core (the issue's goal: 1 GB in <= 10 s).
#   bench/analyze.sh BUILD_DIR [TRACE_DIR]
# TRACE_DIR defaults to tests/data/fsdp2_default_h200x2 (the shared 2-rank
# FSDP2 pair). HTA (PyPI holistictraceanalysis, pinned below) is installed
# into a venv outside the repository ($AORTA_HTA_VENV, default
# ~/.cache/aorta/hta-venv); it is never a dependency of aorta.
# Env: REPS (3), BIG_MB (unset: no large run), OUT (JSON; default
# BUILD_DIR/bench_analyze.json).
set -euo pipefail
BUILD="${1:?usage: bench/analyze.sh BUILD_DIR [TRACE_DIR]}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
TRACES="${2:-$SRC/tests/data/fsdp2_default_h200x2}"
AORTA="$BUILD/aorta"
REPS="${REPS:-3}"
OUT="${OUT:-$BUILD/bench_analyze.json}"
VENV="${AORTA_HTA_VENV:-$HOME/.cache/aorta/hta-venv}"
HTA_VERSION=0.5.0
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import hta' 2>/dev/null; then
    echo "installing holistictraceanalysis==$HTA_VERSION into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "holistictraceanalysis==$HTA_VERSION"
fi

cat >"$TMP/run_hta.py" <<'PY'
import sys
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
print(ta.get_comm_comp_overlap(visualize=False).to_string())
print(ta.get_temporal_breakdown(visualize=False).to_string())
PY

# measure NAME CMD...: "wall_s rss_kb cpu_s" of one run of CMD (cpu: user + system).
measure() {
    local name=$1
    shift
    /usr/bin/time -v "$@" >"$TMP/$name.out" 2>"$TMP/$name.time" ||
        { head -n 30 "$TMP/$name.out" "$TMP/$name.time" >&2; echo "FAIL: $*" >&2; exit 1; }
    awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
                                          for (i = 1; i <= n; i++) s = s * 60 + t[i]; w = s }
                /Maximum resident set size/ { r = $2 }
                /User time \(seconds\)|System time \(seconds\)/ { c += $2 }
                END { printf "%.3f %d %.3f\n", w, r, c }' "$TMP/$name.time"
}

# best NAME CMD...: the lowest wall time of REPS runs, the peak RSS of any,
# and the lowest CPU time. On a shared machine the wall time includes waiting
# for a core; the CPU time does not.
best() {
    local name=$1 w r c bw="" br=0 bc=""
    shift
    for _ in $(seq "$REPS"); do
        read -r w r c < <(measure "$name" "$@")
        if [[ -z "$bw" ]] || awk -v a="$w" -v b="$bw" 'BEGIN { exit !(a < b) }'; then bw=$w; fi
        if [[ -z "$bc" ]] || awk -v a="$c" -v b="$bc" 'BEGIN { exit !(a < b) }'; then bc=$c; fi
        ((r > br)) && br=$r
    done
    echo "$bw $br $bc"
}

load=$(cut -d' ' -f1 /proc/loadavg)
read -r hta_w hta_r hta_c < <(best hta "$VENV/bin/python" "$TMP/run_hta.py" "$TRACES")
# a fresh run name each time: bash -c's pid
read -r ao_w ao_r ao_c < <(best aorta bash -c "exec \"$AORTA\" analyze \"$TRACES\" --output \"$TMP/runs\" --run-name r\$\$ >/dev/null")

speed=$(awk -v a="$hta_w" -v b="$ao_w" 'BEGIN { printf "%.1f", a / b }')
mem=$(awk -v a="$hta_r" -v b="$ao_r" 'BEGIN { printf "%.1f", a / b }')
cpu=$(awk -v a="$hta_c" -v b="$ao_c" 'BEGIN { printf "%.1f", a / b }')
echo "load average before: $load on $(nproc) cores"
printf '%-28s %10s %10s %12s\n' "tool ($(basename "$TRACES"))" "wall_s" "cpu_s" "peak_rss_MB"
printf '%-28s %10.3f %10.3f %12.1f\n' "HTA $HTA_VERSION" "$hta_w" "$hta_c" "$(echo "$hta_r / 1024" | bc -l)"
printf '%-28s %10.3f %10.3f %12.1f\n' "aorta analyze" "$ao_w" "$ao_c" "$(echo "$ao_r / 1024" | bc -l)"
met=$(awk -v s="$speed" -v m="$mem" 'BEGIN { print (s >= 30 && m >= 4) ? "true" : "false" }')
printf '%-28s %9sx %9sx %11sx   (goals: wall >= 30x, memory >= 4x: %s)\n' "HTA / aorta" "$speed" \
    "$cpu" "$mem" "$([[ $met == true ]] && echo met || echo NOT met)"

big_json=""
if [[ -n "${BIG_MB:-}" ]]; then
    first=$(find "$TRACES" -maxdepth 1 -name '*.json*' | sort | head -1)
    python3 "$SRC/bench/make_big_kineto.py" "$first" "$TMP/big.json" --mb "$BIG_MB"
    size=$(stat -c %s "$TMP/big.json")
    read -r big_w big_r big_c < <(best big taskset -c 0 bash -c "\"$AORTA\" analyze \"$TMP/big.json\" \
        --threads 1 --output \"$TMP/big\" --run-name b\$\$ >/dev/null")
    printf '%-28s %10.3f %10.3f %12.1f   (%.0f MB on one core; goal <= 10 s for 1 GB)\n' \
        "aorta analyze, large" "$big_w" "$big_c" "$(echo "$big_r / 1024" | bc -l)" \
        "$(awk -v s="$size" 'BEGIN { print s / 1e6 }')"
    big_json=", \"large\": {\"bytes\": $size, \"wall_s\": $big_w, \"cpu_s\": $big_c, \"peak_rss_kb\": $big_r, \"cores\": 1}"
fi

cat >"$OUT" <<JSON
{"traces": "$TRACES", "reps": $REPS, "hta_version": "$HTA_VERSION", "load_average": $load,
 "hta": {"wall_s": $hta_w, "cpu_s": $hta_c, "peak_rss_kb": $hta_r},
 "aorta": {"wall_s": $ao_w, "cpu_s": $ao_c, "peak_rss_kb": $ao_r},
 "speedup": $speed, "cpu_ratio": $cpu, "memory_ratio": $mem,
 "goals": {"speedup_min": 30, "memory_ratio_min": 4, "met": $met}$big_json}
JSON
echo "wrote $OUT"
