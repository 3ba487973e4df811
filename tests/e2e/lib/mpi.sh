# shellcheck shell=bash
# For the end-to-end scripts that run MPI ranks: the slow unwinder (MPI's
# libraries have no frame pointers: without it their leaks cannot be matched
# with tests/lsan.supp), and a skip (77) where there is no mpirun (ctest sets
# AORTA_MPIRUN empty when aorta was built without MPI).
# Source it: . "$(dirname "$0")/lib/mpi.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
if ! command -v "${AORTA_MPIRUN-mpirun}" >/dev/null 2>&1; then
    echo "SKIP: no mpirun"
    exit 77
fi
