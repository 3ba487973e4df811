// A CUDA program with a known overlap, for aorta attach's GPU test
// (tests/gpu/attach.sh). Every step, inside an NVTX range "step":
//   stream 1: compute_a (6 ms) then compute_b (4 ms), spinning on the GPU's
//             global timer, so their lengths are what they are asked to be;
//   stream 2: fake_comm (8 ms), after compute_a (an event), so it runs
//             beside compute_b: 4 ms of it hidden, 4 ms exposed;
//   stream 3: a 64 MiB host-to-device copy from pinned memory.
// The step's work is queued behind a gate (a stream wait on a host word,
// which CUPTI records no activity for) and released at once, so the host's
// launch times (CUPTI's first launch after enabling activity costs ~0.3 ms)
// never fall between two kernels. Events around each piece measure what
// really ran; one JSON line a step
// (stdout) gives the expected §7 numbers. With --own-cupti K, the program is
// also a second CUPTI client for steps K and K+1 (gives CUPTI a clock of its
// own, registers its buffers, enables kernel activity, disables it after), as
// torch.profiler would be:
// it prints how many kernels it saw, which must be all of them.
// With --spawn N the program is a launcher, as torchrun's agent or aorta
// train's parent is: it initializes CUDA itself (--parent-work: and runs a
// kernel), then starts N copies of itself as ranks 0..N-1 with torchrun's
// variables; each rank uses device LOCAL_RANK modulo the devices, and says
// {"pid", "role", "rank", "device"} before its steps.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "attach_probe: %s: %s\n", #x, cudaGetErrorString(e_));                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__device__ static unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void compute_a(unsigned long long ns)
{
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}
__global__ void compute_b(unsigned long long ns)
{
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}
__global__ void fake_comm(unsigned long long ns)
{
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}

// ---- the second CUPTI client (through the process's symbol scope, as a
// program linked with libcupti would call it) ----------------------------------
static size_t own_kernels;
static void CUPTIAPI own_request(uint8_t **b, size_t *size, size_t *max)
{
    *size = 1 << 20;
    *b = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
static void CUPTIAPI own_complete(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
    CUpti_Activity *a = NULL;
    while (next_record(b, valid, &a) == CUPTI_SUCCESS)
        if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) own_kernels++;
    free(b);
}
// The second client's own clock, as Kineto gives CUPTI one: half-nanoseconds
// of CLOCK_MONOTONIC, so attach must measure its unit to keep its numbers.
static uint64_t CUPTIAPI half_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) / 2;
}

static void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        static void *lib;
        if (!lib) lib = dlopen("libcupti.so", RTLD_NOW | RTLD_GLOBAL);
        if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
        p = dlsym(RTLD_DEFAULT, name); // the global scope: aorta's stand-ins come first
    }
    if (!p) {
        fprintf(stderr, "attach_probe: no %s\n", name);
        exit(1);
    }
    return p;
}

static int no_device(cudaError_t e)
{
    if (e != cudaErrorNoDevice && e != cudaErrorInsufficientDriver) return 0;
    printf("SKIP: no CUDA device (%s)\n", cudaGetErrorString(e));
    return 1;
}

// The launcher (--spawn N): CUDA in this process first, then the ranks, each
// this program again without --spawn and --parent-work.
static int spawn(int n, int parent_work, int argc, char **argv)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev); // cuInit: the injection loads here too
    if (no_device(e)) return 77;
    CHECK(e);
    if (parent_work) {
        compute_a<<<1, 1>>>(1000000);
        CHECK(cudaDeviceSynchronize());
    }
    printf("{\"pid\": %d, \"role\": \"launcher\"}\n", (int)getpid());
    fflush(stdout);
    char **cargv = (char **)calloc((size_t)argc + 1, sizeof *cargv);
    int c = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--spawn")) {
            i++;
            continue;
        }
        if (strcmp(argv[i], "--parent-work") != 0) cargv[c++] = argv[i];
    }
    pid_t pids[64];
    if (n < 1 || n > 64) return 2;
    for (int k = 0; k < n; k++) {
        pids[k] = fork();
        if (pids[k] < 0) return 1;
        if (pids[k] == 0) {
            char r[16], w[16];
            snprintf(r, sizeof r, "%d", k);
            snprintf(w, sizeof w, "%d", n);
            setenv("RANK", r, 1);
            setenv("LOCAL_RANK", r, 1);
            setenv("WORLD_SIZE", w, 1);
            setenv("LOCAL_WORLD_SIZE", w, 1);
            setenv("TORCHELASTIC_RUN_ID", "attach_probe", 1);
            execv("/proc/self/exe", cargv);
            _exit(127);
        }
    }
    int rc = 0;
    for (int k = 0; k < n; k++) {
        int st = 0;
        waitpid(pids[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    free(cargv);
    return rc;
}

int main(int argc, char **argv)
{
    int steps = 6, own = -1, nspawn = 0, parent_work = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        if (!strcmp(argv[i], "--own-cupti") && i + 1 < argc) own = atoi(argv[++i]);
        if (!strcmp(argv[i], "--spawn") && i + 1 < argc) nspawn = atoi(argv[++i]);
        if (!strcmp(argv[i], "--parent-work")) parent_work = 1;
    }
    if (nspawn) return spawn(nspawn, parent_work, argc, argv);
    const char *local = getenv("LOCAL_RANK");
    int rank = getenv("RANK") ? atoi(getenv("RANK")) : 0, device = 0;
    if (local) { // a rank: its device before any context
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) {
            device = atoi(local) % ndev;
            CHECK(cudaSetDevice(device));
        }
        printf("{\"pid\": %d, \"role\": \"rank\", \"rank\": %d, \"device\": %d}\n", (int)getpid(),
               rank, device);
        fflush(stdout);
    }
    cudaError_t first = cudaFree(0); // CUDA first: the injection sets NVTX up when CUDA starts
    if (no_device(first)) return 77;
    CHECK(first);
    cudaStream_t s1, s2, s3;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    const size_t bytes = 64u << 20;
    void *host, *dev;
    CHECK(cudaMallocHost(&host, bytes));
    CHECK(cudaMalloc(&dev, bytes));
    memset(host, 1, bytes);
    cudaEvent_t e[8];
    for (int i = 0; i < 8; i++) CHECK(cudaEventCreate(&e[i]));
    // every kernel once before the steps: the first launch loads the module
    compute_a<<<1, 1, 0, s1>>>(0);
    compute_b<<<1, 1, 0, s1>>>(0);
    fake_comm<<<1, 1, 0, s2>>>(0);
    CHECK(cudaDeviceSynchronize());
    const unsigned long long ms = 1000000ull;
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = NULL;
    CUptiResult (*enable)(CUpti_ActivityKind) = NULL, (*disable)(CUpti_ActivityKind) = NULL;
    CUptiResult (*flush)(uint32_t) = NULL;
    CUptiResult (*clock)(CUpti_TimestampCallbackFunc) = NULL;
    if (own >= 0) {
        *(void **)&reg = sym("cuptiActivityRegisterCallbacks");
        *(void **)&enable = sym("cuptiActivityEnable");
        *(void **)&disable = sym("cuptiActivityDisable");
        *(void **)&flush = sym("cuptiActivityFlushAll");
        *(void **)&next_record = sym("cuptiActivityGetNextRecord");
        *(void **)&clock = sym("cuptiActivityRegisterTimestampCallback");
    }
    // the driver's stream wait through the libcuda CUDA loaded: the probe
    // links only the runtime, so it starts (and skips) where there is no driver
    typedef CUresult (*wait_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    wait_fn wait_value = cuda ? (wait_fn)dlsym(cuda, "cuStreamWaitValue32_v2") : NULL;
    if (!wait_value) {
        fprintf(stderr, "attach_probe: no cuStreamWaitValue32 in libcuda\n");
        return 1;
    }
    unsigned *gate, *gate_dev;
    CHECK(cudaHostAlloc((void **)&gate, sizeof *gate, cudaHostAllocMapped));
    *gate = 0;
    CHECK(cudaHostGetDevicePointer((void **)&gate_dev, gate, 0));
    size_t launched_own = 0;
    for (int step = 0; step < steps; step++) {
        if (step == own) {
            if (clock(half_ns) != CUPTI_SUCCESS ||
                reg(own_request, own_complete) != CUPTI_SUCCESS ||
                enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
                fprintf(stderr, "attach_probe: CUPTI refused the second client\n");
                return 1;
            }
        }
        nvtxRangePushA("step");
        if (wait_value((CUstream)s1, (CUdeviceptr)gate_dev, (unsigned)step + 1,
                       CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
            fprintf(stderr, "attach_probe: cuStreamWaitValue32 failed\n");
            return 1;
        }
        CHECK(cudaEventRecord(e[0], s1));
        compute_a<<<1, 1, 0, s1>>>(6 * ms);
        CHECK(cudaEventRecord(e[1], s1));
        CHECK(cudaStreamWaitEvent(s2, e[1], 0));
        CHECK(cudaStreamWaitEvent(s3, e[0], 0));
        CHECK(cudaEventRecord(e[6], s3));
        CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s3));
        CHECK(cudaEventRecord(e[7], s3));
        CHECK(cudaEventRecord(e[3], s2));
        fake_comm<<<1, 1, 0, s2>>>(8 * ms);
        CHECK(cudaEventRecord(e[4], s2));
        CHECK(cudaEventRecord(e[5], s1));
        compute_b<<<1, 1, 0, s1>>>(4 * ms);
        CHECK(cudaEventRecord(e[2], s1));
        nvtxRangePop();
        __atomic_store_n(gate, (unsigned)step + 1, __ATOMIC_SEQ_CST); // go
        CHECK(cudaDeviceSynchronize());
        if (own >= 0 && (step == own || step == own + 1)) launched_own += 3;
        if (own >= 0 && step == own + 1) {
            flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            printf("{\"own_cupti_kernels\": %zu, \"own_cupti_launched\": %zu}\n", own_kernels,
                   launched_own);
        }
        // expected, in ms from e0: compute [0, a1] and [b0, b1] on one
        // stream, comm [m0, m1], copy [x0, x1]
        float a1, b0, b1, m0, m1, x0, x1;
        CHECK(cudaEventElapsedTime(&a1, e[0], e[1]));
        CHECK(cudaEventElapsedTime(&b0, e[0], e[5]));
        CHECK(cudaEventElapsedTime(&b1, e[0], e[2]));
        CHECK(cudaEventElapsedTime(&m0, e[0], e[3]));
        CHECK(cudaEventElapsedTime(&m1, e[0], e[4]));
        CHECK(cudaEventElapsedTime(&x0, e[0], e[6]));
        CHECK(cudaEventElapsedTime(&x1, e[0], e[7]));
        float lo = x0 < 0 ? x0 : 0, hi = b1;
        if (m1 > hi) hi = m1;
        if (x1 > hi) hi = x1;
        float ov = (b1 < m1 ? b1 : m1) - (b0 > m0 ? b0 : m0); // comm waits for a
        if (ov < 0) ov = 0;
        printf("{\"rank\": %d, \"step\": %d, \"step_ms\": %.4f, \"compute_ms\": %.4f, "
               "\"comm_ms\": %.4f, \"copy_ms\": %.4f, \"overlap_ms\": %.4f, "
               "\"exposed_comm_ms\": %.4f}\n",
               rank, step, hi - lo, a1 + (b1 - b0), m1 - m0, x1 - x0, ov, (m1 - m0) - ov);
        fflush(stdout);
    }
    return 0;
}
