#!/usr/bin/env bash
# Runs under mpirun (4 ranks on one host) and makes this rank look like a rank
# of a job of two nodes of two ranks, as LAUNCHER would start it, then execs
# the rest of the command line:
#   bash two_nodes.sh block|cyclic slurm|openmpi|torchrun COMMAND...
# block: ranks 0,1 on node 0 (srun's and mpirun's default); cyclic: ranks
# 0,2 on node 0 (srun --distribution=cyclic, mpirun --map-by node). Each node
# gets a host of its own (NCCL_HOSTID), as two machines have two host names.
set -eu
layout=$1 launcher=$2
shift 2
r=${OMPI_COMM_WORLD_RANK:?run under mpirun}
if [ "$layout" = block ]; then
    node=$((r / 2)) local=$((r % 2))
else
    node=$((r % 2)) local=$((r / 2))
fi
export NCCL_HOSTID="two-nodes-test-$node"
case $launcher in
slurm)
    # --ntasks-per-node unset: the local size comes from SLURM_TASKS_PER_NODE.
    export SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_LOCALID=$local SLURM_NODEID=$node
    export SLURM_TASKS_PER_NODE='2(x2)'
    unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK
    unset OMPI_COMM_WORLD_LOCAL_SIZE
    ;;
openmpi)
    export OMPI_COMM_WORLD_LOCAL_RANK=$local OMPI_COMM_WORLD_LOCAL_SIZE=2
    ;;
torchrun)
    export RANK=$r WORLD_SIZE=4 LOCAL_RANK=$local LOCAL_WORLD_SIZE=2
    unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK
    unset OMPI_COMM_WORLD_LOCAL_SIZE
    ;;
*)
    echo "two_nodes.sh: unknown launcher $launcher" >&2
    exit 2
    ;;
esac
exec "$@"
