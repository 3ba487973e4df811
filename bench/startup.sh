#!/usr/bin/env bash
# What a command pays to start: wall time and peak RSS of the commands that
# only read files or print (help, config, plan, sweep --dry-run, and the
# --help of analyze, report, diagnose), each run RUNS times: the median and
# least wall time (monotonic clock around fork..wait), and the median peak
# RSS of 10 runs under /usr/bin/time (which adds its own ~1 MB). Goals (issue 49): <= 10 ms and <= 20 MB each, with
# the CUDA build. Also the full light runs (diagnose, report --no-charts of
# the shared trace pair's analysis) and --version (which loads every
# plugin to print its versions), for reference.
#   bench/startup.sh BUILD_DIR [BASELINE_AORTA]
# BASELINE_AORTA: another aorta binary measured in the same call (e.g. one
# built before the plugins), its rows beside these.
# Env: RUNS (50), OUT (JSON; default BUILD_DIR/bench_startup.json).
set -euo pipefail
BUILD="$(realpath "${1:?usage: bench/startup.sh BUILD_DIR [BASELINE_AORTA]}")"
BASE="${2:+$(realpath "$2")}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${RUNS:-50}"
OUT="${OUT:-$BUILD/bench_startup.json}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# A run directory for diagnose and report: the analysis of the trace pair.
"$BUILD/aorta" analyze "$SRC/tests/data/fsdp2_default_h200x2" --output "$TMP" --run-name job \
    >/dev/null

python3 - "$BUILD/aorta" "$BASE" "$RUNS" "$OUT" "$SRC" "$TMP" <<'PY'
import json, os, statistics, subprocess, sys, time

aorta, base, runs, out, src, tmp = sys.argv[1:]
runs = int(runs)
commands = [
    ("help", ["help"], True),
    ("config show", ["config", "show", "--config", f"{src}/config/default.yaml"], True),
    ("config validate", ["config", "validate", "--config", f"{src}/config/large.yaml"], True),
    ("plan", ["plan", "--config", f"{src}/config/default.yaml"], True),
    ("sweep --dry-run", ["sweep", f"{src}/examples/sweeps/rccl_cta_sweep.yaml", "--dry-run"], True),
    ("analyze --help", ["analyze", "--help"], True),
    ("report --help", ["report", "--help"], True),
    ("diagnose --help", ["diagnose", "--help"], True),
    ("diagnose RUN", ["diagnose", f"{tmp}/job"], False),
    ("report --no-charts", ["report", "--log-dir", f"{tmp}/job", "--label", "job",
                            "--output", f"{tmp}/rep", "--no-charts", "--no-trace"], False),
    ("--version", ["--version"], False),
]

def measure(binary, args):
    """Median and min wall ms of direct runs; median peak RSS of runs under
    /usr/bin/time: a child's ru_maxrss starts from its parent's peak at
    fork, which is Python's ~14 MB here and time's ~1 MB."""
    walls, rss = [], []
    for i in range(runs):
        t0 = time.perf_counter()
        rc = subprocess.call([binary] + args, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=tmp)
        walls.append((time.perf_counter() - t0) * 1e3)
        if rc != 0:
            sys.exit(f"FAIL: {binary} {' '.join(args)} exited {rc}")
        if i < 10:
            r = subprocess.run(["/usr/bin/time", "-f", "%M", binary] + args, cwd=tmp,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            rss.append(int(r.stderr.strip().splitlines()[-1]) / 1024)
    return statistics.median(walls), statistics.median(rss), min(walls)

binaries = [("aorta", aorta)] + ([("baseline", base)] if base else [])
rows, ok = [], True
load = os.getloadavg()[0]
print(f"{runs} runs each; load average before: {load:.2f} on {os.cpu_count()} cores")
print(f"{'command':<22}" + "".join(f"{n + ' ms':>14}{'min':>8}{n + ' MB':>14}" for n, _ in binaries)
      + "   goal (median)")
for name, args, goal in commands:
    row = {"command": name, "argv": args, "goal": goal}
    line = f"{name:<22}"
    for label, binary in binaries:
        wall, rss, best = measure(binary, args)
        row[label] = {"median_ms": round(wall, 2), "min_ms": round(best, 2),
                      "median_rss_mb": round(rss, 1)}
        line += f"{wall:>14.1f}{best:>8.1f}{rss:>14.1f}"
    if goal:
        met = row["aorta"]["median_ms"] <= 10 and row["aorta"]["median_rss_mb"] <= 20
        row["met"] = met
        ok &= met
        line += "   <= 10 ms, 20 MB: " + ("met" if met else "NOT met")
    rows.append(row)
    print(line)
json.dump({"runs": runs, "load_average": load, "aorta": aorta, "baseline": base or None,
           "rows": rows, "all_goals_met": ok}, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
