/* attach/info.h */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/info.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"

void ao_attach_info_init(ao_attach_info *in, const char *dir, int rank, int world_size,
                         uint32_t cupti_version)
{
    memset(in, 0, sizeof *in);
    snprintf(in->dir, sizeof in->dir, "%s", dir);
    in->rank = rank;
    in->world_size = world_size;
    in->cupti_version = cupti_version;
}

void ao_attach_info_step(ao_attach_info *in, const ao_step_out *s)
{
    (void)s;
    in->steps++;
}

#define S(x) ao_json_gen_str(g, x)

static void gen_cmdline(yajl_gen g)
{
    yajl_gen_array_open(g);
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f) {
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1) S(buf + i);
    }
    yajl_gen_array_close(g);
}

/* The devices through the process's own libcuda (already loaded: CUDA
 * called us), without touching a context. */
static void gen_devices(yajl_gen g, int *driver)
{
    typedef int (*count_fn)(int *);
    typedef int (*get_fn)(int *, int);
    typedef int (*name_fn)(char *, int, int);
    typedef int (*ver_fn)(int *);
    yajl_gen_array_open(g);
    *driver = 0;
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cu) {
        count_fn count = (count_fn)dlsym(cu, "cuDeviceGetCount");
        get_fn get = (get_fn)dlsym(cu, "cuDeviceGet");
        name_fn name = (name_fn)dlsym(cu, "cuDeviceGetName");
        ver_fn ver = (ver_fn)dlsym(cu, "cuDriverGetVersion");
        int n = 0;
        if (ver) ver(driver);
        if (count && get && name && count(&n) == 0)
            for (int i = 0; i < n; i++) {
                int dev;
                char buf[256] = "";
                if (get(&dev, i) != 0 || name(buf, sizeof buf, dev) != 0) continue;
                yajl_gen_map_open(g);
                S("index");
                yajl_gen_integer(g, i);
                S("name");
                S(buf);
                yajl_gen_map_close(g);
            }
        dlclose(cu);
    }
    yajl_gen_array_close(g);
}

int ao_attach_info_write(const ao_attach_info *in, const ao_steps_stats *st)
{
    yajl_gen g = ao_json_gen_new(1);
    char host[256] = "unknown";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    yajl_gen_map_open(g);
    S("rank");
    yajl_gen_integer(g, in->rank);
    S("world_size");
    yajl_gen_integer(g, in->world_size);
    S("pid");
    yajl_gen_integer(g, getpid());
    S("host");
    S(host);
    S("argv");
    gen_cmdline(g);
    int driver = 0;
    S("devices");
    gen_devices(g, &driver);
    S("versions");
    yajl_gen_map_open(g);
    char v[32];
    S("aorta");
    S(AORTA_VERSION);
    S("cupti_api");
    snprintf(v, sizeof v, "%u", in->cupti_version);
    S(v);
    S("cuda_driver");
    snprintf(v, sizeof v, "%d.%d", driver / 1000, driver % 1000 / 10);
    S(v);
    yajl_gen_map_close(g);
    S("step_source");
    S(ao_step_source_name(st->source));
    S("step_source_changes");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < st->nchanges; i++) {
        yajl_gen_map_open(g);
        S("step");
        yajl_gen_integer(g, st->changes[i].step);
        S("source");
        S(ao_step_source_name(st->changes[i].source));
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    S("steps");
    yajl_gen_integer(g, in->steps);
    S("unseen_steps");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < st->nunseen; i++) yajl_gen_integer(g, st->unseen[i]);
    yajl_gen_array_close(g);
    S("late_records");
    yajl_gen_integer(g, (long long)st->late);
    S("outside_records");
    yajl_gen_integer(g, (long long)st->outside);
    S("dropped_records");
    yajl_gen_integer(g, (long long)in->dropped);
    S("other_cupti_client");
    S(in->foreign[0] ? in->foreign : NULL);
    yajl_gen_map_close(g);

    char *name = ao_rank_file_name(in->rank, in->world_size, AO_ATTACH_RANK_INFO);
    char *path = ao_asprintf("%s/%s", in->dir, name);
    int rc = ao_json_write_atomic(path, g);
    free(name);
    free(path);
    yajl_gen_free(g);
    return rc;
}

int ao_attach_extra_gen(void *ctx, yajl_gen g)
{
    const ao_step_out *o = ((const ao_attach_extra *)ctx)->s;
    yajl_gen_status s = ao_step_result_gen_extra(g, o->analysis);
    if (s == yajl_gen_status_ok) s = ao_json_gen_str(g, "step_source");
    if (s == yajl_gen_status_ok) s = ao_json_gen_str(g, ao_step_source_name(o->source));
    if (s == yajl_gen_status_ok) s = ao_json_gen_str(g, "step_name");
    if (s == yajl_gen_status_ok) s = ao_json_gen_str(g, o->name);
    if (s == yajl_gen_status_ok) s = ao_json_gen_str(g, "activities");
    if (s == yajl_gen_status_ok) s = yajl_gen_integer(g, (long long)o->nops);
    return s != yajl_gen_status_ok;
}
