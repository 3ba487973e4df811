#!/usr/bin/env bash
# aorta analyze on bad input: each case exits 2 with one error line naming the
# file and the byte offset or field, and leaves no run directory (not even a
# staging one) behind.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/e2e/lib/assert.sh
. "$(dirname "$0")/lib/assert.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
DATA="$SRC/tests/data/fsdp2_default_h200x2"

# truncated JSON (plain): the offset where it ends
mkdir "$TMP/trunc"
gzip -dc "$DATA/rank0.json.gz" >"$TMP/full.json"
head -c 3000000 "$TMP/full.json" >"$TMP/trunc/rank0.json"
analyze_fails truncated "rank0.json: byte 3000000: truncated" "$TMP/trunc/rank0.json"

# truncated gzip stream
head -c 300000 "$DATA/rank1.json.gz" >"$TMP/trunc/rank1.json.gz"
analyze_fails truncated_gz "rank1.json.gz: byte" "$TMP/trunc/rank1.json.gz"

# a trace without GPU events (a CPU-only profile)
printf '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}' >"$TMP/cpu_only.json"
analyze_fails no_gpu "cpu_only.json: no GPU events" "$TMP/cpu_only.json"

# mixed formats in one directory: a Kineto trace beside an aorta trace.json
mkdir "$TMP/mixed"
cp "$DATA/rank0.json.gz" "$TMP/mixed/"
printf '{"displayTimeUnit":"ms","traceEvents":[{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}}]}' >"$TMP/mixed/trace.json"
analyze_fails mixed "format" "$TMP/mixed"

# a field of the wrong type: "dur" a string
printf '{"traceEvents": [\n{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": "3"}]}' >"$TMP/typed.json"
analyze_fails wrong_type "typed.json: byte 99: traceEvents[0].dur is a string, not a number" "$TMP/typed.json"

# a missing field: a kernel without "ts"
printf '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 3}]}' >"$TMP/missing.json"
analyze_fails missing_field "missing.json: byte" "$TMP/missing.json"
contains "$TMP/missing_field.log" 'has no "ts"'

# not a trace at all, and a directory without traces
printf 'hello\n' >"$TMP/notes.txt"
analyze_fails not_a_trace "notes.txt: not a trace" "$TMP/notes.txt"
mkdir "$TMP/empty"
analyze_fails empty_dir "no trace files" "$TMP/empty"

# two traces claiming one rank
mkdir "$TMP/dup"
cp "$DATA/rank0.json.gz" "$TMP/dup/a.json.gz"
cp "$DATA/rank0.json.gz" "$TMP/dup/b.json.gz"
analyze_fails duplicate_rank "is rank 0, and so is" "$TMP/dup"

# bad flags
analyze_fails bad_regex "--step" "$DATA" --step "(unclosed"
