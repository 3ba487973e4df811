#!/usr/bin/env bash
# Runs an aorta command as if its ranks were spread over several nodes, on one
# host (DESIGN §5, "Emulated nodes"):
#
#   scripts/emulate-nodes.sh [--nodes N] [--all-network] [--socket] [--] COMMAND...
#   e.g. scripts/emulate-nodes.sh build-device/aorta train --nproc 4 --config config/large.yaml
#
# --nodes N (default 2): AORTA_EMULATE_NODES=N. The ranks are split into N
#   nodes of consecutive ranks; each rank gets the local rank and size of an
#   N-node job and an NCCL_HOSTID of its node, so NCCL puts the ranks of
#   different nodes on its network transport and keeps NVLink inside a node:
#   hybrid_shard's replica all-reduce crosses the "network", its shard
#   groups do not.
# --all-network: every communicator on the network transport, inside a node
#   too (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): what issue 52 ran.
# --socket: NCCL_NET=Socket (TCP), even where InfiniBand adapters exist.
# NCCL_NVLS_ENABLE=0 always. Prints the variables it set, then execs COMMAND.
set -euo pipefail
usage() {
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
nodes=2
all=0
socket=0
while [ $# -gt 0 ]; do
    case $1 in
    --nodes)
        [ $# -ge 2 ] || usage
        nodes=$2
        shift 2
        ;;
    --all-network)
        all=1
        shift
        ;;
    --socket)
        socket=1
        shift
        ;;
    --)
        shift
        break
        ;;
    -h | --help) usage ;;
    -*)
        echo "emulate-nodes.sh: unknown option $1" >&2
        usage
        ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || usage
if ! [[ $nodes =~ ^[1-9][0-9]*$ ]]; then
    echo "emulate-nodes.sh: --nodes '$nodes' is not a positive integer" >&2
    exit 2
fi
export AORTA_EMULATE_NODES=$nodes NCCL_NVLS_ENABLE=0
set_vars="AORTA_EMULATE_NODES=$nodes NCCL_NVLS_ENABLE=0"
if [ "$all" = 1 ]; then
    export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
    set_vars+=" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
fi
if [ "$socket" = 1 ]; then
    export NCCL_NET=Socket
    set_vars+=" NCCL_NET=Socket"
fi
echo "emulate-nodes: $set_vars" >&2
exec "$@"
