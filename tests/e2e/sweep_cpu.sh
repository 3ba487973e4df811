#!/usr/bin/env bash
# aorta sweep over coll on the cpu backend (2 ranks through mpirun):
# 2 env values x 2 env_zip entries x 2 --coll values = 4 launch groups. A
# wrapper given as AORTA_SWEEP_EXE logs every launch the sweep starts, and
# an AORTA_MPIRUN wrapper puts a logging script in front of every rank, so the
# launches and what each rank's environment held are counted, not assumed.
# Then a failing point (a dtype coll refuses) is recorded while the others
# finish, and --resume reruns only what failed. Bad sweep files are cases of
# the bad-input corpus (tests/data/bad, e2e/bad_inputs).
set -u
aorta=${AORTA:?set by ctest}
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
mpirun=$(command -v "${AORTA_MPIRUN:-mpirun}") || {
    echo "SKIP: no mpirun"
    exit 77
}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
real_aorta=$(realpath "$aorta")

cat >"$tmp/launch.sh" <<EOF
#!/usr/bin/env bash
echo "launch \$\$ A=\${SWEEP_A-} B=\${SWEEP_B-} C=\${SWEEP_C-}" >>"$tmp/launches"
exec "$aorta" "\$@"
EOF
cat >"$tmp/rank.sh" <<EOF
#!/usr/bin/env bash
echo "rank \${OMPI_COMM_WORLD_RANK-} A=\${SWEEP_A-} B=\${SWEEP_B-} C=\${SWEEP_C-}" >>"$tmp/ranks"
exec "$real_aorta" "\$@"
EOF
# mpirun with the aorta binary replaced by rank.sh.
cat >"$tmp/mpirun.sh" <<EOF
#!/usr/bin/env bash
args=()
for a in "\$@"; do
    if [ "\$a" = "$real_aorta" ]; then args+=("$tmp/rank.sh"); else args+=("\$a"); fi
done
exec "$mpirun" "\${args[@]}"
EOF
chmod +x "$tmp/launch.sh" "$tmp/rank.sh" "$tmp/mpirun.sh"
export AORTA_SWEEP_EXE="$tmp/launch.sh" AORTA_MPIRUN="$tmp/mpirun.sh"
export SWEEP_A=parent # the sweep overrides it in its children only

cat >"$tmp/s.yaml" <<'EOF'
name: e2e
command: coll
args: [-b, 1K, -e, 1K, -n, 2, -w, 1, --backend, cpu]
axes:
  nproc: [2]
  --coll: [all_reduce, all_gather]
env:
  SWEEP_A: [1, 2]
env_zip:
  - {SWEEP_B: x, SWEEP_C: x}
  - {SWEEP_B: y, SWEEP_C: y}
metric: busbw_gbps
EOF
cd "$tmp" || exit 1

# --- dry run: 4 groups, 4 launches, 8 points; nothing runs ------------------------
"$aorta" sweep s.yaml --dry-run >dry 2>err || fail "dry run exited $?"
grep -q '4 launch groups, 4 launches, 8 points' dry || { fail "dry-run plan"; cat dry err; }
[ -e launches ] && fail "--dry-run started a launch"

# --- the sweep -----------------------------------------------------------------
"$aorta" sweep s.yaml --format csv --out res/r.csv 2>err
rc=$?
[ $rc = 0 ] || { fail "sweep exited $rc"; cat err; }
[ "$(wc -l <launches)" = 4 ] || fail "$(wc -l <launches) launches, want 4 (one per group)"
for combo in "A=1 B=x C=x" "A=1 B=y C=y" "A=2 B=x C=x" "A=2 B=y C=y"; do
    [ "$(grep -c "$combo\$" launches)" = 1 ] || fail "launch with $combo not exactly once"
    for r in 0 1; do
        [ "$(grep -c "^rank $r $combo\$" ranks)" = 1 ] || fail "rank $r did not see $combo once"
    done
done
[ "$(wc -l <ranks)" = 8 ] || fail "$(wc -l <ranks) rank starts, want 8"
head -1 res/r.csv | grep -qx \
    'nproc,coll,SWEEP_A,SWEEP_B,SWEEP_C,size,time_us,algbw_gbps,busbw_gbps,wrong,run_dir,error' ||
    fail "columns: $(head -1 res/r.csv)"
[ "$(tail -n +2 res/r.csv | wc -l)" = 8 ] || fail "not 8 rows"
# Group order: env product (SWEEP_A) outer, zip entries inner; --coll inside.
awk -F, 'NR > 1 { printf "%s %s %s %s|", $2, $3, $4, $12 }' res/r.csv >order
[ "$(cat order)" = "all_reduce 1 x |all_gather 1 x |all_reduce 1 y |all_gather 1 y |all_reduce 2 x |all_gather 2 x |all_reduce 2 y |all_gather 2 y |" ] ||
    fail "row order/errors: $(cat order)"
awk -F, 'NR > 1 && !($9 > 0 && $10 == 0 && $6 == 1024) { bad = 1 } END { exit bad }' res/r.csv ||
    fail "a row without busbw > 0, #wrong 0, size 1024"
{ [ -s res/r.png ] && [ -s res/r.svg ]; } || fail "no chart next to --out"

# --- a failing point is recorded; the others finish ---------------------------------
# (one rank, no mpirun: these checks are about the sweep, and keep CI short)
rm -f launches ranks
"$aorta" sweep s.yaml --axis --dtype=float,bogus --axis=--coll=all_reduce --axis nproc=1 --env SWEEP_A=1 \
    --skip SWEEP_B=y --format json --out f.json 2>err
rc=$?
[ $rc = 1 ] || fail "a sweep with a failing point exited $rc, want 1"
[ "$(wc -l <launches)" = 2 ] || fail "$(wc -l <launches) launches for 2 points"
grep -q '"dtype": "float"' f.json || fail "no float row"
grep -A12 '"dtype": "bogus"' f.json | grep -q '"error": "exit 2: --dtype:' ||
    { fail "the bogus point's error is not recorded"; cat f.json; }
grep -A12 '"dtype": "float"' f.json | grep -q '"error": null' || fail "the float point has an error"

# --- --resume: only the failed point runs again --------------------------------------
rm -f launches
"$aorta" sweep s.yaml --axis --dtype=float,bogus --axis=--coll=all_reduce --axis nproc=1 --env SWEEP_A=1 \
    --skip SWEEP_B=y --format json --out f.json --resume 2>err
[ "$(wc -l <launches)" = 1 ] || fail "--resume ran $(wc -l <launches) launches, want 1"
[ "$(grep -c '"dtype": "float"' f.json)" = 1 ] || fail "--resume duplicated the float row"
rm -f launches
"$aorta" sweep s.yaml --axis --dtype=float --axis=--coll=all_reduce --axis nproc=1 --env SWEEP_A=1 \
    --skip SWEEP_B=y --format json --out f.json --resume 2>err || fail "resume of done points"
[ -e launches ] && fail "--resume of finished points started a launch"

# --- train: the run is read where the args' overridden output_dir put it ---------------
# (every row once read artifacts/<run>/summary.json and showed N/A)
src=${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cat >"$tmp/t.yaml" <<EOF
name: outdir
command: train
config: $src/config/tiny.yaml
args: [--backend, cpu, --nproc, 1, --override, training.output_dir=$tmp/elsewhere, training.max_steps=8,
       scheduler.total_steps=8]
axes:
  training.batch_size: [4]
EOF
"$aorta" sweep t.yaml --format csv --out t.csv 2>err || { fail "train sweep exited $?"; cat err; }
# (artifacts/sweeps/ holds the sweep's own launch directories)
for d in artifacts/*; do
    [ -e "$d" ] && [ "$d" != artifacts/sweeps ] &&
        fail "the train sweep wrote $d, not into the overridden output_dir"
done
awk -F, -v want="$tmp/elsewhere/" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i }
    NR == 2 { ok = $c["step_ms"] > 0 && index($c["run_dir"], want) == 1 && $c["error"] == "" }
    END { exit !ok }' t.csv || { fail "the train row has no step_ms from $tmp/elsewhere"; cat t.csv err; }
rm -f launches

# (bad sweep files: the corpus, e2e/bad_inputs)
finish sweep_cpu
