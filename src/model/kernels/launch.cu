/* The process-wide switch of programmatic dependent launch (common.cuh's
 * launch()). */
#include "model/kernels/common.cuh"

namespace ao_kernels
{
int dependent_launch = 1;
}

extern "C" void ao_cuda_set_dependent_launch(int on)
{
    ao_kernels::dependent_launch = on != 0;
}
