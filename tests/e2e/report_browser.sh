#!/usr/bin/env bash
# index.html in a headless browser (Chromium; bench/install-chromium.sh
# installs it, it is no dependency of aorta): for the default command — two
# `aorta train` runs with profiling on and `aorta report` of them — the page
# loads, every chart is an inline SVG with content, every <img> or link to a
# chart names a file that exists, and no chart is the degraded view; the same
# for nine synthetic configs against one reference (the matrix's charts
# across configs). Skipped
# (77) without chromium or python3, or where `train` is not built in.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
: "${AORTA_SYNTH_RUN:?AORTA_SYNTH_RUN must name the synth_run helper}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
[[ -n "$CHROMIUM" ]] || { echo "SKIP: no chromium (bench/install-chromium.sh)"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
"$AORTA" train --help >/dev/null 2>&1 || { echo "SKIP: no train command"; exit 77; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=/dev/null
. "$(dirname "$0")/lib/assert.sh"

for cfg in "a fsdp.sharding_strategy=full_shard" "b fsdp.sharding_strategy=shard_grad_op"; do
    read -r name knob <<<"$cfg"
    run_expect 0 "$TMP/$name.out" train --backend cpu --nproc 2 --config "$SRC/config/tiny.yaml" \
        --run-name "$name" --override training.output_dir="$TMP/runs" profiling.enabled=true "$knob"
done
run_expect 0 "$TMP/rep.out" report --log-dir "$TMP/runs/a" --label a --log-dir "$TMP/runs/b" \
    --label b --output "$TMP/rep"

# The DOM after load, and a screenshot (a page that does not render gives none).
browse() {
    local page=$1
    shift
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$TMP/profile" "$@" "file://$page" 2>>"$TMP/chromium.err"
}

# check_page REPORT_DIR MIN_FIGURES CONFIG_CHARTS: the page loads and renders,
# has at least MIN_FIGURES charts, CONFIG_CHARTS of them across configs.
check_page() {
    local rep=$1
    browse "$rep/index.html" --dump-dom >"$rep.dom.html" ||
        { cat "$TMP/chromium.err" >&2; fail "chromium could not load $rep/index.html"; }
    browse "$rep/index.html" --screenshot="$rep.shot.png" --window-size=1200,4000 >/dev/null ||
        { cat "$TMP/chromium.err" >&2; fail "chromium could not screenshot $rep/index.html"; }
    [[ -s "$rep.shot.png" ]] || fail "no screenshot of $rep/index.html"
    python3 - "$rep.dom.html" "$rep" "$2" "$3" <<'PY' || fail "the rendered page $rep/index.html"
import html.parser, os, sys
dom, rep, min_figures, configs = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs, self.figures, self.imgs, self.hrefs, self.ids = 0, 0, [], [], set()
        self.depth, self.shapes = 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "svg":
            self.svgs += 1
        if tag in ("path", "rect", "use"):
            self.shapes += 1
        if tag == "figure":
            self.figures += 1
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "a" and a.get("href") and not a["href"].startswith(("file:", "#", "http")):
            self.hrefs.append(a["href"])

p = P()
p.feed(dom)
assert p.figures >= min_figures, ("figures", p.figures)
assert p.svgs >= p.figures, ("every figure has its svg", p.svgs, p.figures)
assert p.shapes > 100, ("svgs without drawing", p.shapes)
for src in p.imgs:  # none today; a broken one would be a missing file
    assert os.path.isfile(os.path.join(rep, src)), ("broken image", src)
for h in p.hrefs:
    assert os.path.isfile(os.path.join(rep, h)), ("broken link", h)
assert "chart not available" not in dom, "a chart is missing"
assert not any(i.startswith("degraded-") for i in p.ids), "a degraded timeline"
for sec in ("glance", "findings", "verdicts", "timeline", "tables", "settings", "glossary"):
    assert sec in p.ids, ("section", sec)
got = sum(1 for i in p.ids if i.startswith("chart-configs_"))
assert got == configs, ("charts across configs", got, configs)
print("ok")
PY
}

check_page "$TMP/rep" 6 0

# Many configs against one reference (a sweep's directory): the matrix's
# charts across configs render too.
mkdir "$TMP/sweep"
for i in 0 1 2 3 4 5 6 7 8; do
    "$AORTA_SYNTH_RUN" "$TMP/sweep/config-$i" ranks=2 steps=30 profile_every=5 \
        comm_ms=$((2 + i)) seed=$((i + 1))
done
run_expect 0 "$TMP/rep9.out" report --sweep "$TMP/sweep" --reference config-0 --output "$TMP/rep9"
n="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["comparisons"][0]["metrics"]))' "$TMP/rep9/summary.json")"
[[ "$n" -ge 8 ]] || fail "the matrix has $n metrics"
check_page "$TMP/rep9" $((2 * 9 + 8 + 1 + n)) "$n"
echo "report browser e2e: ok"
