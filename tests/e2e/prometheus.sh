#!/usr/bin/env bash
# A real Prometheus server (Debian's `prometheus`, which `make test` installs
# through scripts/install-deps.sh --test) scrapes a 2-rank CPU `aorta train`
# (profiling.prometheus_port) and `aorta export` over the same run directory
# while it is written, every second, on loopback ports picked free; its HTTP
# API (/api/v1/query) then has every rank's exposed communication by kind,
# steps that grow while the run lasts, and after it export's latest values
# equal to the files'. Waits poll with a bounded number of tries. Skipped,
# saying why, where the package is missing or its server cannot start.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
if ! command -v prometheus >/dev/null 2>&1; then
    echo "SKIP: no prometheus server (Debian's package; scripts/install-deps.sh --test installs it)"
    exit 77
fi
lib=$(cd "$(dirname "$0")/lib" && pwd)
# shellcheck source=tests/e2e/lib/mpi.sh
. "$lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$lib/tally.sh"
# shellcheck source=tests/e2e/lib/export.sh
. "$lib/export.sh"

# The run and the export first: the scrape config names their ports.
prom_pid=
cleanup() {
    [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

start_train live
"$aorta" export --prometheus 0 "$tmp/art/live" 2>"$tmp/export.err" &
export_pid=$!
export_url=$(prom url "$tmp/export.err" "$export_pid") ||
    { cat "$tmp/export.err"; fail "aorta export printed no serving line"; finish prometheus; }
target() { local hp=${1#http://}; echo "${hp%/metrics}"; }
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: aorta_train
    static_configs:
      - targets: ['$(target "$train_url")']
  - job_name: aorta_export
    static_configs:
      - targets: ['$(target "$export_url")']
EOF

started=
for try in 1 2 3 4 5; do
    port=$(prom port)
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
        --web.listen-address="127.0.0.1:$port" >"$tmp/prometheus.log" 2>&1 &
    prom_pid=$!
    if prom prom-ready "http://127.0.0.1:$port" "$prom_pid"; then
        started=1
        break
    fi
    wait "$prom_pid"
    prom_pid=
    grep -q "address already in use" "$tmp/prometheus.log" || break
    echo "port $port was taken (try $try): another"
done
if [ -z "$started" ]; then
    kill -INT "$train_pid" "$export_pid"
    wait
    echo "SKIP: the prometheus server does not start here: $(tail -1 "$tmp/prometheus.log")"
    exit 77
fi
api="http://127.0.0.1:$port"

for job in aorta_train aorta_export; do
    prom prom-live "$api" "$job" live 2 ||
        fail "Prometheus: job $job lacks a rank's series, or its steps did not grow"
done
stop_train
prom prom-final "$api" aorta_export "$tmp/art/live" ||
    fail "Prometheus: export's latest values after the run are not the files'"

kill -TERM "$export_pid"
rc=0
wait "$export_pid" || rc=$?
[ "$rc" = 0 ] || fail "export stopped by SIGTERM exited $rc, want 0"
finish prometheus
