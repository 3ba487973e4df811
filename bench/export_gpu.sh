#!/usr/bin/env bash
# The live export with a real GPU job, once (e2e/prometheus.sh has Prometheus
# itself scrape a CPU run; the GPU machine has no Prometheus and no network):
#   1. `aorta train --nproc N` serving its run (profiling.prometheus_port),
#      scraped while it runs with tests/e2e/lib/prom.py, which reads the text
#      format strictly: every rank's steps and exposed communication by kind,
#      and steps that grow from one scrape to a later one;
#   2. after the run, `aorta export` of its directory: the values equal the
#      files' (last step, steps, step and comm seconds, exposed by kind);
#   3. `aorta attach --prometheus` of the same train, scraped while it runs:
#      the ranks attach records (which ranks those are is attach's rank
#      ownership, issue 46 item 1, not the export's).
# Usage: bench/export_gpu.sh   env: AORTA (build-device/aorta), OUT (out/export_gpu),
#        NPROC (2), CONFIG (config/default.yaml), STEPS (300)
# Prints a table of the scraped values per rank and writes OUT/export_gpu.json.
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out/export_gpu}
nproc=${NPROC:-2}
config=${CONFIG:-config/default.yaml}
steps=${STEPS:-300}
lib=$(cd "$(dirname "$0")/../tests/e2e/lib" && pwd)
export NCCL_NVLS_ENABLE=0
rm -rf "$out"
mkdir -p "$out"
prom() { python3 "$lib/prom.py" "$@"; }
failed=0
check() { # WHAT CMD...: "ok: WHAT", else "FAILED: WHAT" (counted)
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failed=$((failed + 1)); fi
}
save() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=60).read().decode())' "$1" >"$2"; }
train() { # RUN_NAME PORT
    "$aorta" train --nproc "$nproc" --config "$config" --run-name "$1" --override \
        training.output_dir="$out" training.max_steps="$steps" training.log_interval=1 \
        profiling.prometheus_port="$2"
}

echo "== 1. aorta train --nproc $nproc with profiling.prometheus_port"
train live "$(prom port)" >"$out/train.log" 2>&1 &
pid=$!
url=$(prom url "$out/train.log" "$pid")
echo "serving: $url"
check "every rank's steps and exposed comm by kind, growing, read strictly" prom live "$url" live "$nproc"
save "$url" "$out/scrape_train.txt"
wait "$pid"
echo "train exited 0"

echo "== 2. aorta export of the finished run"
"$aorta" export --prometheus 0 "$out/live" 2>"$out/export.err" &
pid=$!
url=$(prom url "$out/export.err" "$pid")
check "export's values equal the files'" prom final "$url" "$out/live"
save "$url" "$out/scrape_export.txt"
kill -TERM "$pid"
wait "$pid"
echo "export exited 0 on SIGTERM"

echo "== 3. aorta attach --prometheus -- aorta train --nproc $nproc"
port=$(prom port)
"$aorta" attach --prometheus "$port" --output "$out" --run-name attached -- \
    "$aorta" train --nproc "$nproc" --config "$config" --run-name attached-train --override \
    training.output_dir="$out" training.max_steps="$steps" training.log_interval=1 \
    >"$out/attach.log" 2>&1 &
pid=$!
url=$(prom url "$out/attach.log" "$pid")
echo "serving: $url"
python3 - "$url" "$lib" "$pid" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[2])
import prom
for _ in range(prom.TRIES):
    if not prom.alive(sys.argv[3]):
        print("attach ended before it served a step")
        break
    try:
        s = prom.scrape(sys.argv[1])
    except OSError:
        s = {}
    ranks = sorted(dict(k[1])["rank"] for k, v in s.items() if k[0] == "aorta_steps_total" and v > 0)
    if ranks:
        print("ok: attach serves the steps of rank(s) %s" % ", ".join(ranks))
        break
    time.sleep(0.2)
else:
    print("attach served no step while the job ran")
PY
save "$url" "$out/scrape_attach.txt" 2>/dev/null || rm -f "$out/scrape_attach.txt"
wait "$pid" || echo "attach exited $?"

python3 - "$out" "$lib" <<'PY'
import json, os, sys
sys.path.insert(0, sys.argv[2])
import prom
out, table = sys.argv[1], {}
for what in ("train", "export", "attach"):
    path = os.path.join(out, "scrape_%s.txt" % what)
    if not os.path.exists(path):
        continue
    s = prom.parse(open(path).read())
    for (name, labels), v in s.items():
        l = dict(labels)
        if "rank" in l:
            key = "%s.%s.%s" % (what, l["run"], l["rank"])
            table.setdefault(key, {})[name + ("{%s}" % l["kind"] if "kind" in l else "")] = v
cols = ["aorta_steps_total", "aorta_step_seconds", "aorta_comm_seconds",
        "aorta_step_exposed_comm_seconds", "aorta_exposed_comm_seconds{allgather}",
        "aorta_exposed_comm_seconds{reducescatter}", "aorta_overlap_ratio"]
print("%-28s" % "scrape.run.rank" + "".join("%14s" % c.replace("aorta_", "")[:13] for c in cols))
for key in sorted(table):
    print("%-28s" % key + "".join("%14.6g" % table[key].get(c, float("nan")) for c in cols))
json.dump(table, open(os.path.join(out, "export_gpu.json"), "w"), indent=1, sort_keys=True)
print("json: " + os.path.join(out, "export_gpu.json"))
PY
[ "$failed" = 0 ] || { echo "$failed check(s) failed"; exit 1; }
