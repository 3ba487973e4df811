/* roctx ranges (what NVTX ranges are on CUDA: gpu_compat.h maps
 * nvtxRangePushA/Pop here) and the profiler's capture range
 * (roctxProfilerResume/Pause for cudaProfilerStart/Stop), found at run time: roctracer's libroctx64
 * or rocprofiler-sdk's roctx library, whichever the process can load, so that the binary needs
 * neither (Debian packages neither). Without one a range is nothing, as an NVTX range is without a
 * tool attached. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "runtime/gpu_compat.h"

typedef int (*push_fn)(const char *);
typedef int (*pop_fn)(void);
typedef void (*pause_fn)(uint64_t tid); /* 0: every thread */

static push_fn range_push;
static pop_fn range_pop;
static pause_fn profiler_pause, profiler_resume;

static void find_roctx(void)
{
    static const char *const libs[] = {"librocprofiler-sdk-roctx.so.1",
                                       "librocprofiler-sdk-roctx.so.0", "libroctx64.so.4",
                                       "libroctx64.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        push_fn push = (push_fn)dlsym(h, "roctxRangePushA");
        pop_fn pop = (pop_fn)dlsym(h, "roctxRangePop");
        if (push && pop) {
            range_push = push;
            range_pop = pop;
            profiler_pause = (pause_fn)dlsym(h, "roctxProfilerPause");
            profiler_resume = (pause_fn)dlsym(h, "roctxProfilerResume");
            ao_debug("roctx ranges through %s", libs[i]);
            return;
        }
        dlclose(h);
    }
    ao_debug("no roctx library found: profiler ranges are off");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void ao_roctx_range_push(const char *name)
{
    pthread_once(&once, find_roctx);
    if (range_push) range_push(name);
}

void ao_roctx_range_pop(void)
{
    pthread_once(&once, find_roctx);
    if (range_pop) range_pop();
}

hipError_t ao_roctx_profiler(int on)
{
    pthread_once(&once, find_roctx);
    pause_fn f = on ? profiler_resume : profiler_pause;
    if (f) f(0);
    return hipSuccess;
}
