#!/usr/bin/env bash
# The chart per metric across configs: nine synthetic runs (a sweep's output
# directory, the reference and eight candidates: the "8 configurations" case)
# give, for each metric of the matrix, configs_{metric}.svg/.png and the data
# behind it (configs_{metric}.csv), linked from index.html; one bar per
# config, and every value the matrix's (summary.json's comparisons).
set -euo pipefail
# shellcheck source=/dev/null
. "$(dirname "$0")/lib/synth.sh"

mkdir "$TMP/sweep"
i=0
for cfg in "4 0.75" "4 0.5" "6 0.75" "8 0.4" "4 0.9" "3 0.75" "5 0.6" "2 0.75" "10 0.2"; do
    read -r comm hidden <<<"$cfg"
    "$AORTA_SYNTH_RUN" "$TMP/sweep/config-$i" ranks=2 steps=40 comm_ms="$comm" hidden="$hidden" \
        seed=$((i + 1))
    i=$((i + 1))
done
run_expect 0 "$TMP/out" report --sweep "$TMP/sweep" --reference config-0 --output "$TMP/rep" \
    --no-trace

python3 - "$TMP/rep" <<'PY' || fail "charts across configs"
import csv, json, math, os, re, sys
rep = sys.argv[1]
d = json.load(open(os.path.join(rep, "summary.json")))
cmps = d["comparisons"]
assert [c["candidate"] for c in cmps] == ["config-%d" % i for i in range(1, 9)], cmps
page = open(os.path.join(rep, "index.html")).read()
assert 'id="matrix"' in page
metrics = list(cmps[0]["metrics"])  # the matrix's columns
assert "step_ms" in metrics and "overlap_ratio" in metrics, metrics
shown = re.findall(r'<figure id="chart-configs_([a-z_]+)"', page)
assert shown == metrics, ("one chart per matrix column, in order", shown, metrics)
for m in metrics:
    name = "configs_" + m
    for ext in ("svg", "png", "csv"):
        assert os.path.getsize(os.path.join(rep, name + "." + ext)) > 0, (name, ext)
        assert 'href="%s.%s"' % (name, ext) in page, ("linked", name, ext)
    rows = list(csv.DictReader(open(os.path.join(rep, name + ".csv"))))
    assert [r["config"] for r in rows] == ["config-%d" % i for i in range(9)], rows
    assert rows[0]["role"] == "reference" and all(r["role"] == "candidate" for r in rows[1:])
    for r, c in zip(rows[1:], cmps):
        mc = c["metrics"][m]
        med = float(r["median"])
        assert math.isclose(med, mc["candidate_median"], rel_tol=1e-12, abs_tol=1e-12), (m, r, mc)
        assert math.isclose(float(rows[0]["median"]), mc["reference_median"], rel_tol=1e-12,
                            abs_tol=1e-12), (m, rows[0], mc)
        if mc["ratio"] is not None:
            assert math.isclose(float(r["ratio"]), mc["ratio"], rel_tol=1e-12), (m, r, mc)
        assert r["verdict"] == mc["verdict"], (m, r, mc)
    for r in rows:
        lo, hi, med = float(r["ci_low"]), float(r["ci_high"]), float(r["median"])
        assert lo <= med + 1e-12 and med <= hi + 1e-12, ("the CI holds the median", m, r)
    # the bars: filled at 0.85 opacity, one per config with a value (legend
    # boxes and marks are opaque)
    svg = open(os.path.join(rep, name + ".svg")).read()
    bars = len(re.findall(r'fill-opacity:0\.85;', svg))
    with_value = sum(1 for r in rows if not math.isnan(float(r["median"])))
    assert bars == with_value == 9, ("bars", m, bars, with_value)
# the verdicts are not all alike: the chart has something to show
verdicts = {c["metrics"]["step_ms"]["verdict"] for c in cmps}
assert {"better", "worse"} <= verdicts, verdicts
print("ok")
PY

# one candidate: no matrix, so no chart across configs
run_expect 0 "$TMP/out" report --log-dir "$TMP/sweep/config-0" --label a \
    --log-dir "$TMP/sweep/config-1" --label b --output "$TMP/rep2" --reference a --no-trace
if grep -q 'chart-configs_' "$TMP/rep2/index.html" || ls "$TMP/rep2"/configs_* >/dev/null 2>&1; then
    fail "a chart across configs without a matrix"
fi
echo "report configs e2e: ok"
