#!/usr/bin/env bash
# aorta sdma on the cpu backend: all four modes reported, the savings and
# achieved lines, valid JSON with every number, the data check, the other
# directions and engines, and bad flags exiting 2.
set -u
aorta=${AORTA:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

"$aorta" sdma --backend cpu --matrix-size 256 --copy-mb 4 --iterations 3 --direction d2d \
    --json "$tmp/sdma.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || { fail "sdma exited $rc"; cat "$tmp/out" "$tmp/err"; }
for m in gemm copy serial overlap; do
    grep -Eq "^ +$m +[0-9]+\.[0-9]{3} " "$tmp/out" || fail "no $m row"
done
for l in '# savings' '# achieved' '# concurrent : [0-3]/3' '# data check : OK'; do
    grep -Eq "^$l" "$tmp/out" || fail "no '$l' line"
done
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/sdma.json" <<'PY' || fail "JSON content"
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["backend"] == "cpu" and d["direction"] == "d2d" and d["engine"] == "dma", d
assert d["copy_bytes"] == 4 << 20 and d["matrix_size"] == 256 and d["iterations"] == 3, d
assert d["data_ok"] is True, d
modes = {m["mode"]: m for m in d["modes"]}
assert sorted(modes) == ["copy", "gemm", "overlap", "serial"], modes
for m in modes.values():
    assert 0 < m["min_ms"] <= m["mean_ms"] <= m["max_ms"], m
g, c, s, o = (modes[k]["mean_ms"] for k in ("gemm", "copy", "serial", "overlap"))
assert modes["gemm"]["copy_ms"] is None and modes["copy"]["gemm_ms"] is None
tf = 2 * 256**3 / (modes["gemm"]["gemm_ms"] * 1e-3) / 1e12
assert abs(modes["gemm"]["gemm_tflops"] - tf) <= 1e-9 * tf
gbps = (4 << 20) / (modes["copy"]["copy_ms"] * 1e-3) / 1e9
assert abs(modes["copy"]["copy_gbps"] - gbps) <= 1e-9 * gbps
assert abs(d["savings_pct"] - (s - o) / s * 100) < 1e-9
den = s - max(g, c)
if den > 0:
    assert abs(d["achieved"] - (s - o) / den) < 1e-9
else:
    assert d["achieved"] is None
assert 0 <= d["concurrent_iterations"] <= 3
PY
else
    grep -q '"savings_pct"' "$tmp/sdma.json" || fail "JSON lacks savings_pct"
fi

# Other directions and the kernel engine, tiny.
for args in "--direction h2d" "--direction d2h --engine kernel" "--direction d2d --engine kernel"; do
    # shellcheck disable=SC2086
    "$aorta" sdma --backend cpu --matrix-size 64 --copy-mb 1 --iterations 2 --warmup 1 $args \
        >"$tmp/o2" 2>&1 || { fail "sdma $args exited $?"; cat "$tmp/o2"; }
    grep -q '# data check : OK' "$tmp/o2" || fail "sdma $args: data check"
done

bad() {
    "$aorta" sdma --backend cpu "$@" >"$tmp/bo" 2>"$tmp/be"
    local rc=$?
    [ $rc = 2 ] || fail "sdma $* exited $rc, want 2"
    grep -q '^aorta: error: ' "$tmp/be" || fail "sdma $*: no error line"
}
bad --direction p2p # the cpu backend has one device
bad --direction sideways
bad --engine sdma
bad --copy-mb 0
bad --matrix-size -4
bad --dtype int32
bad --iterations 0
bad --device 3
bad --bogus
bad --json

"$aorta" sdma --help >"$tmp/help" || fail "--help exited $?"
for f in --device --matrix-size --dtype --copy-mb --iterations --warmup --direction --engine \
    --json --backend --help; do
    grep -q -- "$f" "$tmp/help" || fail "--help does not document $f"
done

finish sdma_cpu
