#!/usr/bin/env bash
# aorta analyze's cross-rank matching at scale (issue 45): N synthetic ranks
# of Kineto traces (bench/make_rank_traces.py, from one real rank: every
# collective has N members) analysed on one machine; wall time and peak RSS
# (/usr/bin/time -v), and the peak per rank x collective. The traces are read
# twice (--keep-mb 0: nothing kept between the passes), so memory is the
# matched collectives plus a trace per reading thread; a padded trace (more
# compute kernels, the same collectives) shows that it does not grow with
# the traces' size.
#   bench/xrank_scale.sh BUILD_DIR [SRC_TRACE]
# Env: RANKS ("128 256 512 1024"), PAD (3: the padded run, at the largest
# rank count), STEPS (1), THREADS (the online cores), KEEP_MB (0), OUT
# (JSON; default BUILD_DIR/bench_xrank_scale.json).
set -euo pipefail
BUILD="${1:?usage: bench/xrank_scale.sh BUILD_DIR [SRC_TRACE]}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
TRACE="${2:-$SRC/tests/data/fsdp2_default_h200x2/rank0.json.gz}"
AORTA="$BUILD/aorta"
read -r -a ranks <<<"${RANKS:-128 256 512 1024}"
PAD="${PAD:-3}"
STEPS="${STEPS:-1}"
THREADS="${THREADS:-$(nproc)}"
KEEP="${KEEP_MB:-0}"
OUT="${OUT:-$BUILD/bench_xrank_scale.json}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# measure DIR NAME: "wall_s rss_kb" of one analyze of DIR.
measure() {
    /usr/bin/time -v "$AORTA" analyze "$1" --output "$TMP/runs" --run-name "$2" \
        --keep-mb "$KEEP" --threads "$THREADS" >"$TMP/$2.out" 2>"$TMP/$2.time" ||
        { tail -20 "$TMP/$2.out" "$TMP/$2.time" >&2; echo "FAIL: analyze $1" >&2; exit 1; }
    awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
                                          for (i = 1; i <= n; i++) s = s * 60 + t[i]; w = s }
                /Maximum resident set size/ { r = $2 }
                END { printf "%.3f %d\n", w, r }' "$TMP/$2.time"
}

cases=()
for n in "${ranks[@]}"; do cases+=("$n:0"); done
last=${ranks[${#ranks[@]}-1]}
[[ "$PAD" -gt 0 ]] && cases+=("$last:$PAD")
load=$(cut -d' ' -f1 /proc/loadavg)
printf '%-7s %5s %12s %12s %10s %12s %14s\n' ranks pad trace_MB collectives wall_s peak_rss_MB \
    rss_B_per_rxc
json=""
for c in "${cases[@]}"; do
    n=${c%:*}
    pad=${c#*:}
    dir="$TMP/t$n-$pad"
    python3 "$SRC/bench/make_rank_traces.py" "$TRACE" "$dir" --ranks "$n" --pad "$pad" \
        --steps "$STEPS" 2>"$TMP/gen.log"
    mb=$(sed -n 's/.*(\([0-9.]*\) MB of JSON each).*/\1/p' "$TMP/gen.log")
    read -r w r < <(measure "$dir" "r$n-$pad")
    inst=$(wc -l <"$TMP/runs/r$n-$pad/collectives.jsonl")
    members=$(python3 -c "import json,sys; print(sum(len(json.loads(l)['ranks']) for l in open(sys.argv[1])))" \
        "$TMP/runs/r$n-$pad/collectives.jsonl")
    per=$(awk -v r="$r" -v m="$members" 'BEGIN { printf "%.0f", r * 1024 / m }')
    printf '%-7s %5s %12s %12s %10.2f %12.1f %14s\n' "$n" "$pad" "$mb" "$inst" "$w" \
        "$(echo "$r / 1024" | bc -l)" "$per"
    json="$json${json:+,}
  {\"ranks\": $n, \"pad\": $pad, \"trace_mb_each\": $mb, \"collectives\": $inst, \"members\": $members, \"wall_s\": $w, \"peak_rss_kb\": $r}"
    rm -rf "$dir" "$TMP/runs/r$n-$pad"
done
cat >"$OUT" <<JSON
{"source": "$TRACE", "steps": $STEPS, "threads": $THREADS, "keep_mb": $KEEP, "cores": $(nproc),
 "load_average": $load, "runs": [$json
]}
JSON
echo "load average before: $load on $(nproc) cores; wrote $OUT"
