/* The one portability header of the GPU backends (device_cuda.c, the .cu
 * kernel files, coll_nccl.c): they are written against CUDA names, and
 * this header maps exactly the names they use to HIP/RCCL/hipBLAS(Lt)/roctx
 * when AORTA_HIP or __HIP_PLATFORM_AMD__ is defined (the names follow hipify's
 * tables). Only backend files include it; the engine never does.
 *
 * What CUDA names cannot say lives in *_hip.c files beside the CUDA ones
 * (DESIGN §4): hipBLAS's GEMMs (gemm_hipblas_hip.c; hipBLASLt's names are
 * mapped here, for AORTA_HIPBLASLT), roctx through dlopen (roctx_hip.c).
 * The whole HIP build is compiled and linked by `make rocm-check` against
 * Debian 13's ROCm 5.7 packages for gfx942 and gfx90a, and has never run on an
 * AMD GPU (docs/rocm.md). Features the AMD libraries lack are switched off by
 * the AO_GPU_HAS_* flags below rather than emulated. NCCL and RCCL share
 * their API names, so rccl.h needs no mapping. */
#ifndef AORTA_RUNTIME_GPU_COMPAT_H
#define AORTA_RUNTIME_GPU_COMPAT_H

#if defined(AORTA_HIP) || defined(__HIP_PLATFORM_AMD__)

#define AO_GPU_HIP     1
#define AO_GPU_BACKEND "hip"
#define AO_GPU_RUNTIME "HIP"
#define AO_GPU_COMM    "rccl"
/* hipBLAS and hipBLASLt have no SM-count target; hipBLASLt no
 * minimum-alignment preferences. */
#define AO_GPU_HAS_SM_COUNT_TARGET 0
#define AO_GPU_HAS_ALIGNMENT_PREFS 0
/* nor pointer-array batches in hipBLASLt: two-level batches run per group */
#define AO_GPU_HAS_LT_POINTER_ARRAYS 0

#include <hip/hip_runtime.h>
/* Kernel-only translation units (the .cu files) define AO_GPU_KERNELS_ONLY
 * and need the runtime alone. */
#ifndef AO_GPU_KERNELS_ONLY
#ifdef AORTA_HIPBLASLT
#include <hipblaslt/hipblaslt.h>
#else
#include <hipblas/hipblas.h>
#endif
#include <rccl/rccl.h>
#endif

/* runtime */
#define cudaError_t                       hipError_t
#define cudaSuccess                       hipSuccess
#define cudaErrorNotReady                 hipErrorNotReady
#define cudaErrorInvalidValue             hipErrorInvalidValue
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaGetErrorString                hipGetErrorString
#define cudaGetLastError                  hipGetLastError
#define cudaGetDeviceCount                hipGetDeviceCount
#define cudaGetDevice                     hipGetDevice
#define cudaSetDevice                     hipSetDevice
#define cudaFree                          hipFree
#define cudaMalloc                        hipMalloc
#define cudaMallocHost(p, n)              hipHostMalloc((p), (n), hipHostMallocDefault)
#define cudaFreeHost                      hipHostFree
#define cudaDeviceSynchronize             hipDeviceSynchronize
#define cudaDeviceGetAttribute            hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount    hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define cudaDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define cudaDeviceGetStreamPriorityRange  hipDeviceGetStreamPriorityRange
#define cudaDeviceGetPCIBusId             hipDeviceGetPCIBusId
#define cudaDeviceProp                    hipDeviceProp_t
#define cudaGetDeviceProperties           hipGetDeviceProperties
#define cudaDeviceCanAccessPeer           hipDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess        hipDeviceEnablePeerAccess
#define cudaRuntimeGetVersion             hipRuntimeGetVersion
#define cudaDriverGetVersion              hipDriverGetVersion
#define cudaStream_t                      hipStream_t
#define cudaStreamNonBlocking             hipStreamNonBlocking
#define cudaStreamCreateWithPriority      hipStreamCreateWithPriority
#define cudaStreamGetPriority             hipStreamGetPriority
#define cudaStreamSynchronize             hipStreamSynchronize
#define cudaStreamDestroy                 hipStreamDestroy
#define cudaStreamWaitEvent               hipStreamWaitEvent
#define cudaEvent_t                       hipEvent_t
#define cudaEventDefault                  hipEventDefault
#define cudaEventCreateWithFlags          hipEventCreateWithFlags
#define cudaEventDestroy                  hipEventDestroy
#define cudaEventRecord                   hipEventRecord
#define cudaEventSynchronize              hipEventSynchronize
#define cudaEventQuery                    hipEventQuery
#define cudaEventElapsedTime              hipEventElapsedTime
#define cudaLaunchHostFunc                hipLaunchHostFunc
#define cudaMemsetAsync                   hipMemsetAsync
#define cudaMemcpyAsync                   hipMemcpyAsync
#define cudaMemcpyPeerAsync               hipMemcpyPeerAsync
#define cudaMemcpyKind                    hipMemcpyKind
#define cudaMemcpyHostToDevice            hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost            hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice          hipMemcpyDeviceToDevice
#define cudaMemcpyHostToHost              hipMemcpyHostToHost
#define cudaMemcpy                        hipMemcpy
#define cudaMemcpy2DAsync                 hipMemcpy2DAsync
#define cudaStreamQuery                   hipStreamQuery
#define cudaPeekAtLastError               hipPeekAtLastError

/* BLAS-Lt (AORTA_HIPBLASLT; gemm_hipblas_hip.c speaks hipBLAS itself) */
#ifdef AORTA_HIPBLASLT
#define cublasStatus_t                              hipblasStatus_t
#define CUBLAS_STATUS_SUCCESS                       HIPBLAS_STATUS_SUCCESS
#define cublasOperation_t                           hipblasOperation_t
#define CUBLAS_OP_N                                 HIPBLAS_OP_N
#define CUBLAS_OP_T                                 HIPBLAS_OP_T
#define cublasComputeType_t                         hipblasComputeType_t
#define CUBLAS_COMPUTE_32F                          HIPBLAS_COMPUTE_32F
#define CUBLAS_COMPUTE_32F_FAST_TF32                HIPBLAS_COMPUTE_32F_FAST_TF32
#define CUBLAS_COMPUTE_32F_FAST_16BF                HIPBLAS_COMPUTE_32F_FAST_16BF
#define CUBLAS_COMPUTE_32F_FAST_16F                 HIPBLAS_COMPUTE_32F_FAST_16F
#define cudaDataType_t                              hipDataType
#define CUDA_R_32F                                  HIP_R_32F
#define CUDA_R_16F                                  HIP_R_16F
#define CUDA_R_16BF                                 HIP_R_16BF
#define cublasLtHandle_t                            hipblasLtHandle_t
#define cublasLtCreate                              hipblasLtCreate
#define cublasLtDestroy                             hipblasLtDestroy
#define cublasLtMatmulDesc_t                        hipblasLtMatmulDesc_t
#define cublasLtMatmulDescCreate                    hipblasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy                   hipblasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute              hipblasLtMatmulDescSetAttribute
#define CUBLASLT_MATMUL_DESC_TRANSA                 HIPBLASLT_MATMUL_DESC_TRANSA
#define CUBLASLT_MATMUL_DESC_TRANSB                 HIPBLASLT_MATMUL_DESC_TRANSB
#define CUBLASLT_MATMUL_DESC_EPILOGUE               HIPBLASLT_MATMUL_DESC_EPILOGUE
#define CUBLASLT_MATMUL_DESC_BIAS_POINTER           HIPBLASLT_MATMUL_DESC_BIAS_POINTER
#define CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE         HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define cublasLtEpilogue_t                          hipblasLtEpilogue_t
#define CUBLASLT_EPILOGUE_BIAS                      HIPBLASLT_EPILOGUE_BIAS
#define cublasLtMatrixLayout_t                      hipblasLtMatrixLayout_t
#define cublasLtMatrixLayoutCreate                  hipblasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy                 hipblasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute            hipblasLtMatrixLayoutSetAttribute
#define CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT          HIPBLASLT_MATRIX_LAYOUT_BATCH_COUNT
#define CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET HIPBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
#define cublasLtMatmulPreference_t                  hipblasLtMatmulPreference_t
#define cublasLtMatmulPreferenceCreate              hipblasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy             hipblasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute        hipblasLtMatmulPreferenceSetAttribute
#define CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES    HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define cublasLtMatmulAlgo_t                        hipblasLtMatmulAlgo_t
#define cublasLtMatmulHeuristicResult_t             hipblasLtMatmulHeuristicResult_t
#define cublasLtMatmulAlgoGetHeuristic              hipblasLtMatmulAlgoGetHeuristic
#define cublasLtMatmul                              hipblasLtMatmul
#define ao_blas_status_string                       hipblasStatusToString
#endif

/* profiler ranges and the capture range (roctxProfilerResume/Pause, which
 * rocprofv3 honours; hipProfilerStart/Stop are deprecated): roctx, found at
 * run time (roctx_hip.c) */
void ao_roctx_range_push(const char *name);
void ao_roctx_range_pop(void);
hipError_t ao_roctx_profiler(int on);
#define nvtxRangePushA      ao_roctx_range_push
#define nvtxRangePop        ao_roctx_range_pop
#define cudaProfilerStart() ao_roctx_profiler(1)
#define cudaProfilerStop()  ao_roctx_profiler(0)

#else /* CUDA */

#define AO_GPU_BACKEND               "cuda"
#define AO_GPU_RUNTIME               "CUDA"
#define AO_GPU_COMM                  "nccl"
#define AO_GPU_HAS_SM_COUNT_TARGET   1
#define AO_GPU_HAS_ALIGNMENT_PREFS   1
#define AO_GPU_HAS_LT_POINTER_ARRAYS 1

#include <cuda_runtime.h>
#ifndef AO_GPU_KERNELS_ONLY
#include <cublasLt.h>
#include <cuda_profiler_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#endif

#define ao_blas_status_string cublasLtGetStatusString

#endif

#endif
