#!/usr/bin/env bash
# A multi-node launch, checked as far as one host allows (DESIGN §5): 4 cpu
# ranks started by mpirun, each given the environment a job of two nodes of
# two ranks would give it (tests/e2e/lib/two_nodes.sh: Slurm's, OpenMPI's or
# torchrun's variables, and a host of its own through NCCL_HOSTID, which is
# what tells nodes apart), train hybrid_shard with fsdp.shard_group_size 0
# (the ranks of one node). Its shard groups must be the nodes and its
# replica groups the ranks at the same place in each node, also when the
# launcher numbers ranks round-robin over the nodes; torchrun's variables get
# the comm id through --rdzv-file; and AORTA_EMULATE_NODES=2 makes the same
# layout out of aorta's own --nproc 4.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
two_nodes="$(dirname "$0")/lib/two_nodes.sh"
mpirun=${AORTA_MPIRUN:-mpirun}
mpi_args=(-np 4 --oversubscribe --bind-to none --mca btl "self,vader"
    --mca btl_vader_single_copy_mechanism none)
[ "$(id -u)" = 0 ] && mpi_args+=(--allow-run-as-root)
train=(train --backend cpu --config "$src/config/tiny.yaml" --override
    training.output_dir="$tmp/art" training.max_steps=3 training.summary_skip_steps=1
    fsdp.sharding_strategy=hybrid_shard fsdp.shard_group_size=0)

# groups RUN RANK SHARD REPLICA NODE: rank RANK's line in RUN's rank log.
groups() {
    local log
    log=$(printf '%s/art/%s/rank_%02d.log' "$tmp" "$1" "$2")
    grep -qF "shard group ranks $3 (node $5 of 2), replica group ranks $4" "$log" 2>/dev/null || {
        fail "$1: rank $2's groups are not shard $3 (node $5), replica $4"
        grep -h 'shard group' "$log" 2>/dev/null
    }
}

# launched LAYOUT LAUNCHER RUN [aorta args...]: under mpirun, as a 2x2 job.
launched() {
    local layout=$1 kind=$2 run=$3
    shift 3
    "$mpirun" "${mpi_args[@]}" bash "$two_nodes" "$layout" "$kind" \
        "$aorta" "${train[@]}" --run-name "$run" "$@" >"$tmp/$run.out" 2>&1 ||
        { fail "$run: exit $?"; cat "$tmp/$run.out"; }
}

# srun's variables, ranks in blocks (Slurm's default): nodes {0,1} and {2,3}.
launched block slurm slurm_block
groups slurm_block 0 0,1 0,2 0
groups slurm_block 3 2,3 1,3 1
grep -q "rank 0 of 4" "$tmp/art/slurm_block/rank_00.log" || fail "slurm_block: no rank line"

# mpirun's variables, ranks round-robin over the nodes (--map-by node): the
# groups follow the nodes {0,2} and {1,3}, not the rank numbers.
launched cyclic openmpi openmpi_cyclic
groups openmpi_cyclic 0 0,2 0,1 0
groups openmpi_cyclic 1 1,3 0,1 1
groups openmpi_cyclic 2 0,2 2,3 0

# torchrun's variables: no MPI launcher to broadcast the id, so rank 0 writes
# it to the rendezvous file and the others read it there.
launched block torchrun torchrun_rdzv --rdzv-file "$tmp/rdzv"
groups torchrun_rdzv 1 0,1 1,3 0
[ "$(wc -c <"$tmp/rdzv" 2>/dev/null)" = 257 ] || fail "torchrun_rdzv: no rendezvous file"

# aorta's own launch with emulated nodes (scripts/emulate-nodes.sh).
"$src/scripts/emulate-nodes.sh" "$aorta" "${train[@]}" --nproc 4 --run-name emulated \
    >"$tmp/emulated.out" 2>&1 || { fail "emulated: exit $?"; cat "$tmp/emulated.out"; }
groups emulated 2 2,3 0,2 1
grep -q "AORTA_EMULATE_NODES=2: 2 nodes of 2 ranks" "$tmp/emulated.out" || fail "emulated: no notice"
grep -q "^emulate-nodes: AORTA_EMULATE_NODES=2 NCCL_NVLS_ENABLE=0$" "$tmp/emulated.out" ||
    fail "emulated: the script did not say what it set"
# --all-network and --socket add NCCL's variables; a bad count is refused.
"$src/scripts/emulate-nodes.sh" --nodes 4 --all-network --socket env >"$tmp/env.out" 2>&1
for v in AORTA_EMULATE_NODES=4 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket; do
    grep -qx "$v" "$tmp/env.out" || fail "emulate-nodes.sh --all-network --socket: no $v"
done
"$src/scripts/emulate-nodes.sh" --nodes 0 true 2>"$tmp/err.out"
rc=$?
[ "$rc" = 2 ] || fail "emulate-nodes.sh --nodes 0: exit $rc, want 2"
grep -q "not a positive integer" "$tmp/err.out" || fail "emulate-nodes.sh --nodes 0: no error"

# A count that does not divide the ranks is refused before any rank starts.
AORTA_EMULATE_NODES=3 "$aorta" "${train[@]}" --nproc 4 --run-name bad >"$tmp/bad.out" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "AORTA_EMULATE_NODES=3 on 4 ranks: exit $rc, want 2"
grep -q "aorta: error: AORTA_EMULATE_NODES: '3' is not a number of nodes that divides the 4 ranks" \
    "$tmp/bad.out" || { fail "bad: no error"; cat "$tmp/bad.out"; }

finish multinode_cpu
