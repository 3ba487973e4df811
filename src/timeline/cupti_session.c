/* The CUPTI session of timeline/cupti.h: the functions forward to
 * libaorta_cuda.so's (cupti_cuda.c), so only a process on the cuda backend
 * loads it; without it, the answers of a CUPTI that is not there. */
#include <math.h>

#include "core/error.h"
#include "core/plugin.h"
#include "timeline/cupti.h"

/* Only after a session started, so the plugin is loaded already. */
static const struct ao_cupti_ops *ops(void)
{
    return ao_plugin_sym("cuda", "ao_cupti_cuda_ops", 0);
}

ao_cupti *ao_cupti_start(void)
{
#if defined(AORTA_HAVE_CUDA) && !defined(AORTA_HIP) /* AMD has no CUPTI */
    const struct ao_cupti_ops *o = ao_plugin_sym("cuda", "ao_cupti_cuda_ops", 1);
    if (o) return o->start();
    ao_warn("profiling.kernel_trace needs the cuda backend (%s); kernel trace disabled",
            ao_plugin_why("cuda"));
#else
    ao_warn("profiling.kernel_trace needs a build with CUDA (CUPTI); kernel trace disabled");
#endif
    return NULL;
}

uint64_t ao_cupti_now_ns(ao_cupti *c)
{
    return c ? ops()->now_ns(c) : 0;
}

void ao_cupti_set_anchor(ao_cupti *c, uint64_t anchor_ns)
{
    if (c) ops()->set_anchor(c, anchor_ns);
}

int ao_cupti_marker(ao_cupti *c, const char *name_part, uint64_t *start_ns, uint64_t *end_ns,
                    uint32_t *stream_id)
{
    return c ? ops()->marker(c, name_part, start_ns, end_ns, stream_id) : 0;
}

void ao_cupti_set_compute_stream(ao_cupti *c, uint32_t stream_id)
{
    if (c) ops()->set_compute_stream(c, stream_id);
}

size_t ao_cupti_take(ao_cupti *c, uint64_t t0_ns, uint64_t t1_ns, ao_op **out)
{
    *out = NULL;
    return c ? ops()->take(c, t0_ns, t1_ns, out) : 0;
}

size_t ao_cupti_dropped(ao_cupti *c)
{
    return c ? ops()->dropped(c) : 0;
}

void ao_cupti_stop(ao_cupti *c)
{
    if (c) ops()->stop(c);
}

uint64_t ao_cupti_anchor_from_marker(ao_cupti *c, const char *name_part, double a_us, double b_us,
                                     uint64_t fallback)
{
    uint64_t k0 = 0, k1 = 0, at = fallback;
    uint32_t stream_id = 0;
    if (ao_cupti_marker(c, name_part, &k0, &k1, &stream_id)) {
        ao_cupti_set_compute_stream(c, stream_id);
        double slack_ns = ((b_us - a_us) * 1e3 - (double)(k1 - k0)) / 2;
        double marker_at_ns = a_us * 1e3 + (slack_ns > 0 ? slack_ns : 0);
        if ((double)k0 > marker_at_ns) at = k0 - (uint64_t)llround(marker_at_ns);
    }
    return at;
}
