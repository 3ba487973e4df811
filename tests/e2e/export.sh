#!/usr/bin/env bash
# The live export without Prometheus (e2e/prometheus.sh scrapes with the real
# server): a 2-rank CPU `aorta train` serving its run (profiling.prometheus_port)
# and `aorta export` over the same directory while it is written; both answer
# /metrics in the text format with every rank's steps, which grow; after the
# run, export's values equal the files' to the bit; a partial last line is no
# record until its newline lands; refusals (404, 405, 400); SIGTERM ends
# export with 0; `aorta attach --prometheus` serves the rank files its job
# writes (where this build has an attach library). Everything waits on what
# the processes print and serve, polling with a bounded number of tries.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
lib=$(cd "$(dirname "$0")/lib" && pwd)
# shellcheck source=tests/e2e/lib/mpi.sh
. "$lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$lib/tally.sh"
# shellcheck source=tests/e2e/lib/export.sh
. "$lib/export.sh"

start_train live
"$aorta" export --prometheus 0 "$tmp/art/live" 2>"$tmp/export.err" &
export_pid=$!
export_url=$(prom url "$tmp/export.err" "$export_pid") ||
    { cat "$tmp/export.err"; fail "aorta export printed no serving line"; }
grep -q '^aorta: export: serving run live .* on http://127\.0\.0\.1:[0-9]*/metrics$' \
    "$tmp/export.err" || fail "export does not serve on 127.0.0.1 by default"

prom live "$train_url" live 2 || fail "train's /metrics: not every rank's steps, or they did not grow"
prom live "$export_url" live 2 || fail "export's /metrics: not every rank's steps, or they did not grow"
prom http "$export_url" || fail "export's refusals"
stop_train

prom final "$export_url" "$tmp/art/live" || fail "after the run, export's values are not the files'"
# A partial last line is not yet a record; its newline makes it one.
python3 - "$tmp/art/live/rank_00_metrics.jsonl" <<'PY'
import sys
path = sys.argv[1]
last = open(path).read().splitlines()[-1]
open(path, "a").write(last[:len(last) // 2])
PY
prom final "$export_url" "$tmp/art/live" || fail "a partial line was taken for a record"
python3 - "$tmp/art/live/rank_00_metrics.jsonl" <<'PY'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
open(path, "a").write(lines[-2][len(lines[-1]):] + "\n")
PY
prom final "$export_url" "$tmp/art/live" || fail "a completed line was not taken"

kill -TERM "$export_pid"
rc=0
wait "$export_pid" || rc=$?
[ "$rc" = 0 ] || fail "export stopped by SIGTERM exited $rc, want 0"
grep -q "error\|Sanitizer" "$tmp/export.err" && fail "export printed: $(cat "$tmp/export.err")"

# attach: the parent serves its run directory while the job runs; the job
# here plays a rank (it writes a record) and scrapes its own attach.
cat >"$tmp/job.py" <<'PY'
import os, shutil, sys
sys.path.insert(0, sys.argv[3])
import prom
with open(sys.argv[2]) as f:
    line = f.readline()
with open(os.path.join(os.environ["AORTA_ATTACH_DIR"], "rank_00_metrics.jsonl"), "w") as f:
    f.write(line)
s = prom.scrape(sys.argv[1])
if prom.get(s, "aorta_steps_total", run="a", rank="0") != 1:
    sys.exit("job: attach's /metrics lacks the record: %r" % sorted(s)[:5])
PY
if [ -e "$(dirname "$aorta")/libaorta_attach.so" ] || [ -e "$(dirname "$aorta")/libaorta_attach_rocm.so" ]; then
    port=$(prom port)
    rc=0
    "$aorta" attach --prometheus "$port" --output "$tmp/att" --run-name a -- \
        python3 "$tmp/job.py" "http://127.0.0.1:$port/metrics" "$tmp/art/live/rank_01_metrics.jsonl" \
        "$lib" >"$tmp/attach.out" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { cat "$tmp/attach.out"; fail "attach --prometheus: the job's scrape failed ($rc)"; }
    grep -q "^aorta: export: serving run a " "$tmp/attach.out" || fail "attach printed no serving line"
else
    "$aorta" attach --prometheus 0 --output "$tmp/att" -- true >"$tmp/attach.out" 2>&1 ||
        fail "attach --prometheus without a library failed"
    grep -q "attach: --prometheus serves nothing" "$tmp/attach.out" ||
        fail "attach --prometheus without a library: no warning"
    echo "note: no attach library in this build: attach --prometheus checked for its warning only"
fi
finish export
