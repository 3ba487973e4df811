#!/usr/bin/env bash
# The host data generator (dataset.placement: host) against what the device
# consumes. data_bench measures ms per batch on one thread (the work of one
# loader worker) at config/default.yaml's shape (T 64, F 16, D 128, S 32,
# batch 8), random and teacher targets, plus the normal draws alone per SIMD
# variant. Each is run ROUNDS times; the table shows the medians of the
# thread's CPU time (the generator's cost; wall time on a loaded machine also
# counts waiting for a core).
#   bench/data.sh BUILD_DIR [DEVICE_STEP_MS [BATCHES_PER_STEP [WORKERS]]]
#     BUILD_DIR         a Release build with the data_bench target
#     DEVICE_STEP_MS    the device-data step (dataset.placement: device), e.g. from
#                       summary.json's step median; with it the table compares rates
#     BATCHES_PER_STEP  micro-batches a step consumes (gradient_accumulation, default 1)
#     WORKERS           loader workers (dataset.num_workers, default 4)
#   env: ROUNDS (default 5), JSON (default BUILD_DIR/data_bench.json)
set -euo pipefail
build=${1:?usage: bench/data.sh BUILD_DIR [DEVICE_STEP_MS [BATCHES_PER_STEP [WORKERS]]]}
step_ms=${2:-}
per_step=${3:-1}
workers=${4:-4}
rounds=${ROUNDS:-5}
json=${JSON:-$build/data_bench.json}
bin="$build/tests/data_bench"
[ -x "$bin" ] || { echo "bench/data.sh: no $bin (cmake --build $build --target data_bench)" >&2; exit 2; }
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for _ in $(seq "$rounds"); do
    for target in random teacher; do
        "$bin" 64 16 128 32 60000 8 "$target" 20 >>"$lines"
    done
    "$bin" normals 1048576 10 >>"$lines"
done
python3 - "$lines" "$json" "$step_ms" "$per_step" "$workers" <<'PY'
import json, statistics, sys
path, out, step_ms, per_step, workers = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
med = statistics.median
res = {"fills": {}, "normals": {}, "workers": int(workers)}
print(f"{'fill':10} {'cpu ms/batch':>12} {'wall ms/batch':>13} {'M dense/s':>10} {'batches/s/worker':>17}")
for t in ("random", "teacher"):
    r = [x for x in rows if x.get("target") == t]
    cpu, wall = med(x["cpu_ms_per_batch"] for x in r), med(x["ms_per_batch"] for x in r)
    dense = 8 * 64 * 16 * 128
    res["fills"][t] = {"cpu_ms_per_batch": cpu, "wall_ms_per_batch": wall, "simd": r[0]["simd"],
                       "dense_values_per_s": dense / (cpu * 1e-3), "batches_per_s_per_worker": 1e3 / cpu,
                       "rounds": len(r)}
    print(f"{t:10} {cpu:12.3f} {wall:13.3f} {dense / cpu / 1e3:10.1f} {1e3 / cpu:17.1f}")
print(f"\n{'normals':10} {'cpu ms/1M':>12} {'M normals/s':>13}")
for v in dict.fromkeys(x["simd"] for x in rows if "normals" in x):
    ms = med(x["cpu_ms"] for x in rows if x.get("simd") == v and "normals" in x)
    res["normals"][v] = {"cpu_ms_per_1m": ms, "normals_per_s": 1048576 / (ms * 1e-3)}
    print(f"{v:10} {ms:12.3f} {1048576 / ms / 1e3:13.1f}")
if step_ms:
    need = float(per_step) * 1e3 / float(step_ms)
    res["device"] = {"step_ms": float(step_ms), "batches_per_step": int(per_step),
                     "batches_per_s": need}
    print(f"\ndevice consumes {need:.1f} batches/s ({per_step} per {step_ms} ms step)")
    for t, f in res["fills"].items():
        have = f["batches_per_s_per_worker"] * int(workers)
        f["loader_batches_per_s"] = have
        print(f"  {t:8} {workers} workers supply {have:8.1f} batches/s = {have / need:5.2f}x "
              f"(if each has a core of this machine's speed)")
json.dump(res, open(out, "w"), indent=1)
print(f"\nwrote {out}")
PY
