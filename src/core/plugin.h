/* aorta's plugins: the parts that need a vendor library are shared objects
 * loaded by the commands that use them, so a command that only reads files
 * never maps a GPU stack (DESIGN §3, "Plugins"):
 *
 *   libaorta_cuda.so   the cuda device, model, engine and loader backends, the
 *                      nccl comm backend, the CUPTI session, the queues' spin
 *                      kernel (CUDA runtime, cuBLASLt, NCCL)
 *   libaorta_hip.so    the same sources compiled for AMD (runtime/gpu_compat.h;
 *                      HIP, RCCL, hipBLAS): the hip backend
 *   libaorta_mpi.so    the mpi comm backend and the MPI bootstrap (libmpi)
 *   libaorta_cairo.so  the report's and the sweep's charts (cairo)
 *
 * A plugin is looked for in $AORTA_PLUGIN_DIR when that is set, else beside
 * the running executable (a build tree), then in ../lib/aorta/ from it (an
 * install prefix): ao_lib_find; then by the dynamic loader's own search (a
 * build-tree test program, through its rpath). Its references to libaorta resolve
 * against the executable, which exports its symbols. A layer reaches the
 * plugin's tables by their names, the same names they would link by. */
#ifndef AORTA_CORE_PLUGIN_H
#define AORTA_CORE_PLUGIN_H

#include <stddef.h>

/* The GPU plugin of this build and its device backend's name: "cuda", or
 * "hip" for AMD. Either way its tables keep the CUDA names of the sources
 * (ao_cuda_device_ops, ao_X_cuda_backend, ao_nccl_comm_ops). */
#if defined(AORTA_HIP)
#define AO_GPU_PLUGIN "hip"
#elif defined(AORTA_HAVE_CUDA)
#define AO_GPU_PLUGIN "cuda"
#endif

/* The object named `symbol` in plugin `name` ("cuda", "mpi", "cairo"),
 * loading the plugin on first use (never unloaded). When the plugin, or a
 * library it needs, cannot be loaded, or it lacks the symbol: NULL, after
 * ONE error line naming the library and the command that needed it, unless
 * `quiet` (a probe: ao_plugin_why says why afterwards). Thread-safe. */
const void *ao_plugin_sym(const char *name, const char *symbol, int quiet);

/* Why plugin `name` could not be loaded ("libcudart.so.13: cannot open
 * shared object file: ..."), or NULL when it loaded or was never tried. */
const char *ao_plugin_why(const char *name);

/* Whether plugin `name` is loaded in this process now (no load attempted). */
int ao_plugin_loaded(const char *name);

/* The path of aorta's own library `file` (a plugin, an attach library): in
 * `dir` when that is set, else beside the running executable (a build tree),
 * else in ../lib/aorta/ from it (an install). A fresh string; NULL when it
 * is in none, with `why` (n bytes; n may be 0) saying where it looked. */
char *ao_lib_find(const char *file, const char *dir, char *why, size_t n);

/* The command the error lines name ("train"); main sets it once. */
void ao_plugin_set_command(const char *command);

#endif
