# shellcheck shell=bash
# For e2e/export.sh and e2e/prometheus.sh: prom.py's checks, and a 2-rank CPU
# train that serves its run directory live on a free port. Needs $aorta,
# $src, $tmp, $lib and `fail`/`finish` (lib/tally.sh).
# shellcheck disable=SC2154,SC2034 # the sourcing script's variables, both ways

prom() { python3 "$lib/prom.py" "$@"; }

# start_train NAME: `aorta train` in the background ($train_pid) until
# stopped, serving on $train_url. A port taken between the pick and the
# bind is refused before the run starts (nothing made): another is picked.
start_train() {
    local try port
    for try in 1 2 3 4 5; do
        port=$(prom port)
        "$aorta" train --backend cpu --nproc 2 --config "$src/config/tiny.yaml" --run-name "$1" \
            --override training.output_dir="$tmp/art" training.max_steps=100000 \
            training.epochs=1000 training.log_interval=1 profiling.prometheus_port="$port" \
            >"$tmp/$1.out" 2>&1 &
        train_pid=$!
        train_name=$1
        train_url=$(prom url "$tmp/$1.out" "$train_pid") && return 0
        wait "$train_pid"
        grep -q "cannot listen on" "$tmp/$1.out" || break
        echo "port $port was taken (try $try): another"
    done
    cat "$tmp/$1.out"
    fail "aorta train with profiling.prometheus_port did not serve"
    finish "$(basename "$0" .sh)"
}

# stop_train: Ctrl-C, which ends a train run with 130 and complete files.
stop_train() {
    local rc=0
    kill -INT "$train_pid"
    wait "$train_pid" || rc=$?
    [ "$rc" = 130 ] || { cat "$tmp/$train_name.out"; fail "the stopped train exited $rc, want 130"; }
}
