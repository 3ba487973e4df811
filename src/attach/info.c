/* attach/info.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/info.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"

void ao_attach_info_init(ao_attach_info *in, const char *dir, int rank, int world_size)
{
    memset(in, 0, sizeof *in);
    snprintf(in->dir, sizeof in->dir, "%s", dir);
    in->rank = rank;
    in->world_size = world_size;
    in->foreign_key = "other_client";
}

void ao_attach_info_version(ao_attach_info *in, const char *key, const char *value)
{
    if (in->nversions >= AO_ATTACH_MAX_VERSIONS) return;
    in->versions[in->nversions].key = key;
    snprintf(in->versions[in->nversions].value, sizeof in->versions[0].value, "%s", value);
    in->nversions++;
}

void ao_attach_info_device(ao_attach_info *in, const char *name)
{
    if (in->ndevices >= AO_ATTACH_MAX_DEVICES) return;
    snprintf(in->devices[in->ndevices], sizeof in->devices[0], "%s", name);
    in->ndevices++;
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
    S("devices");
    yajl_gen_array_open(g);
    for (int i = 0; i < in->ndevices; i++) {
        yajl_gen_map_open(g);
        S("index");
        yajl_gen_integer(g, i);
        S("name");
        S(in->devices[i]);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    S("versions");
    yajl_gen_map_open(g);
    S("aorta");
    S(AORTA_VERSION);
    for (int i = 0; i < in->nversions; i++) {
        S(in->versions[i].key);
        S(in->versions[i].value);
    }
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
    S(in->foreign_key);
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
