#!/usr/bin/env bash
# Top kernels from `aorta train`'s own kernel trace (profiling.kernel_trace):
# a synthetic run whose records carry the kernel trace written by the writer
# `aorta train` uses (ao_trace_gen_kernel_extra, through tests/helpers/synth_run)
# gets the same top-kernels table as an analyzed run, per rank, and the same
# numbers in summary.json: checked against an aggregation of the records done
# here. A malformed kernel list exits 2 with one line naming the file and step.
set -euo pipefail
# shellcheck source=/dev/null
. "$(dirname "$0")/lib/synth.sh"

# 30 steps, the first 5 warm-up (run.json), every 4th step profiled
"$AORTA_SYNTH_RUN" "$TMP/k" ranks=2 steps=30 profile_every=4 kernels=1
"$AORTA_SYNTH_RUN" "$TMP/plain" ranks=2 steps=30 profile_every=4
run_expect 0 "$TMP/out" report --log-dir "$TMP/k" --label k --log-dir "$TMP/plain" \
    --label plain --output "$TMP/rep" --no-trace

python3 - "$TMP/k" "$TMP/rep" <<'PY' || fail "top kernels"
import glob, html.parser, json, os, sys
run, rep = sys.argv[1], sys.argv[2]
skip = 5

# what the table must say, from the records themselves
expect = {}
for path in sorted(glob.glob(os.path.join(run, "rank_*_metrics.jsonl"))):
    recs = [json.loads(l) for l in open(path)]
    recs = [r for r in recs if r["phase"] == "train"][skip:]
    rank = recs[0]["rank"]
    agg, window, steps = {}, 0.0, 0
    for r in recs:
        ks = r.get("extra", {}).get("kernels")
        if ks is None:
            continue
        assert "overlap_kernels" in r["extra"], "the writer's overlap_kernels"
        steps += 1
        window += r["step_ms"]
        for k in ks:
            a = agg.setdefault(k["name"], {"count": 0, "total_us": 0.0, "class": k["class"]})
            a["count"] += 1
            a["total_us"] += k["end_us"] - k["start_us"]
    assert steps == 6, ("profiled kept steps", steps)  # 8, 12, ..., 28
    expect[rank] = (agg, window, steps)
assert sorted(expect) == [0, 1]

d = json.load(open(os.path.join(rep, "summary.json")))
labels = {l["label"]: l for l in d["labels"]}
assert labels["plain"]["top_kernels"] is None, "no kernel trace, no table"
tk = labels["k"]["top_kernels"]
assert [t["rank"] for t in tk] == [0, 1], tk
for t in tk:
    agg, window, steps = expect[t["rank"]]
    assert t["steps"] == steps and abs(t["window_ms"] - window) < 1e-6 * window, t
    assert len(t["kernels"]) == len(agg) == 6, (len(t["kernels"]), len(agg))
    totals = [k["total_ms"] for k in t["kernels"]]
    assert totals == sorted(totals, reverse=True), "longest first"
    for k in t["kernels"]:
        a = agg[k["name"]]
        assert k["count"] == a["count"] and k["class"] == a["class"], (k, a)
        assert abs(k["total_ms"] - a["total_us"] / 1000) < 1e-6, (k, a)
        assert abs(k["mean_us"] - a["total_us"] / a["count"]) < 1e-6, (k, a)
        assert abs(k["share"] - a["total_us"] / 1000 / window) < 1e-9, (k, a)
    # forward/backward GEMMs run 4 times a step; 6 profiled steps
    assert agg["sm90_xmma_gemm_bf16bf16_bwd"]["count"] == 24

# the page: one table per rank of k, none for plain, rows as summary.json says
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.cur, self.row, self.cell = {}, None, None, None
        self.titles = []  # each row's first cell's: the kernel's full name
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.cur = a.get("id")
            self.tables[self.cur] = []
        elif tag == "tr" and self.cur:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""
            if len(self.row) == 0:
                self.titles.append(a.get("title"))
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append(self.cell.strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables[self.cur].append(self.row)
            self.row = None
        elif tag == "table":
            self.cur = None
    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

page = open(os.path.join(rep, "index.html")).read()
p = P()
p.feed(page)
assert "Top kernels (kernel trace)" in page
ktables = sorted(t for t in p.tables if t.startswith("kernels-"))
assert ktables == ["kernels-0-0", "kernels-0-1"], ktables
for i, t in enumerate(tk):
    rows = p.tables["kernels-0-%d" % i]
    head, body = rows[0], rows[1:]
    assert head[1:] == ["class", "calls", "total (ms)", "share of step time", "mean (\u00b5s)",
                        "max (\u00b5s)"], head
    assert len(body) == len(t["kernels"]), (len(body), len(t["kernels"]))
    for r, k in zip(body, t["kernels"]):
        # the short name shown (these names are plain: the name itself), the full on hover
        assert r[0] == k["name"] and r[1] == k["class"] and int(r[2]) == k["count"], (r, k)
        assert k["name"] in p.titles, (k["name"], p.titles)
        assert abs(float(r[3]) - k["total_ms"]) <= 0.0005 + 1e-3 * k["total_ms"], (r, k)
        assert r[4] == "%.1f%%" % (100 * k["share"]), (r, k)
print("ok")
PY

# a kernel list the writer would never write: exit 2, one line, file and step
cp -r "$TMP/k" "$TMP/bad"
python3 - "$TMP"/bad/rank_*0_metrics.jsonl <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
out = []
for l in lines:
    r = json.loads(l)
    if r["step"] == 12:
        r["extra"]["kernels"][0]["lane"] = "zero"
    out.append(json.dumps(r))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
run_expect 2 "$TMP/bad.out" report --log-dir "$TMP/bad" --label bad --output "$TMP/rep-bad"
[[ $(grep -c '^aorta: error: ' "$TMP/bad.out") -eq 1 ]] || { cat "$TMP/bad.out" >&2; fail "not one error line"; }
contains "$TMP/bad.out" "0_metrics.jsonl: step 12"
contains "$TMP/bad.out" "extra.kernels[0]"
[[ ! -e "$TMP/rep-bad/index.html" ]] || fail "a page from a malformed run"
echo "report kernels e2e: ok"
