/* attach/info.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/info.h"
#include "core/error.h"
#include "core/json.h"

void ao_attach_info_init(ao_attach_info *in, const char *dir, const ao_attach_who *who)
{
    memset(in, 0, sizeof *in);
    snprintf(in->dir, sizeof in->dir, "%s", dir);
    in->who = *who;
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

void ao_attach_info_used_device(ao_attach_info *in, int device)
{
    if (device >= 0 && device < 64) in->used |= 1ull << device;
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

/* The process's identity and its files (attach/claim.h). */
static void gen_claim(yajl_gen g, const ao_attach_info *in, const ao_attach_claim *c)
{
    S("pid");
    yajl_gen_integer(g, c->pid);
    S("rank"); /* a duplicate keeps its launcher rank; no launcher, no claim on rank 0: null */
    if (strncmp(c->stem, "rank_", 5) == 0 || in->who.ranked == 1)
        yajl_gen_integer(g, strncmp(c->stem, "rank_", 5) == 0 ? c->rank : in->who.rank);
    else
        yajl_gen_null(g);
    S("world_size");
    yajl_gen_integer(g, c->world_size);
    S("launcher");
    S(in->who.launcher);
    S("provisional");
    yajl_gen_bool(g, c->provisional);
    S("files");
    S(c->stem);
    S("note");
    S(c->note[0] ? c->note : NULL);
    S("finished");
    yajl_gen_bool(g, in->stats != NULL);
}

static void gen_devices(yajl_gen g, const ao_attach_info *in)
{
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
    /* the device its work ran on: the lowest, with every one in devices_used */
    int first = -1;
    S("devices_used");
    yajl_gen_array_open(g);
    for (int d = 0; d < 64; d++)
        if (in->used >> d & 1) {
            if (first < 0) first = d;
            yajl_gen_integer(g, d);
        }
    yajl_gen_array_close(g);
    S("device");
    if (first >= 0)
        yajl_gen_integer(g, first);
    else
        yajl_gen_null(g);
    S("device_name");
    S(first >= 0 && first < in->ndevices ? in->devices[first] : NULL);
}

int ao_attach_info_write(void *ctx, const ao_attach_claim *c)
{
    const ao_attach_info *in = ctx;
    ao_steps_stats none = {0};
    const ao_steps_stats *st = in->stats ? in->stats : &none;
    yajl_gen g = ao_json_gen_new(1);
    char host[256] = "unknown";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    yajl_gen_map_open(g);
    gen_claim(g, in, c);
    S("host");
    S(host);
    S("argv");
    gen_cmdline(g);
    gen_devices(g, in);
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

    char *path = ao_asprintf("%s/%s%s", in->dir, c->stem, AO_ATTACH_RANK_INFO);
    int rc = ao_json_write_atomic(path, g);
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
