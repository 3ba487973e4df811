/* One rank's bring-up (launch/rank.h). */
#include "launch/rank.h"

#include <string.h>

#include "comm/wait.h"
#include "core/error.h"
#include "launch/launch.h"

int ao_launch_ranks(int argc, char **argv, const ao_launch_req *req, ao_rank_info *ri,
                    ao_launch_role *role)
{
    *role = AO_ROLE_DONE;
    int launched = ao_launch_detect(ri, NULL);
    if (launched < 0) return AO_EXIT_USAGE;
    int nproc = req->nproc;
    if (launched && nproc && nproc != ri->world_size)
        ao_warn("--nproc %d ignored: the launcher started %d ranks", nproc, ri->world_size);
    if (!launched && req->spawn) {
        if (nproc == 0)
            nproc =
                strcmp(req->backend, "cpu") == 0 ? req->cpu_nproc : ao_device_count(req->backend);
        if (nproc < 0) return AO_EXIT_FAIL; /* its plugin did not load: said */
        if (nproc < 1) {
            ao_error("--backend", "the %s backend sees no device", req->backend);
            return AO_EXIT_USAGE;
        }
    }
    int world = launched ? ri->world_size : nproc > 1 ? nproc : 1;
    if (ao_launch_check_emulation(world) != 0) return AO_EXIT_USAGE;
    /* the ranks' comm plugin (MPI's on the cpu backend), before anything is
     * made for them: one line when its library is missing */
    if (!launched && req->spawn && nproc > 1 && ao_comm_backend_load(req->backend))
        return AO_EXIT_FAIL;
    int rc = req->check ? req->check(req->ctx, world, launched) : 0;
    if (rc) return rc;
    if (!launched && req->spawn && nproc > 1) {
        ao_launch_outcome out = {.rank = -1};
        ao_launch_opts lo = {.nproc = nproc,
                             .backend = req->backend,
                             .comm_backend = ao_comm_backend_for(req->backend),
                             .all_ranks_output = req->all_ranks_output,
                             .grace_s = 5.0,
                             .outcome = &out};
        rc = ao_launch_spawn(argc, argv, &lo);
        if (req->ended) req->ended(req->ctx, &out, rc);
        return rc;
    }
    if (!launched)
        *ri = (ao_rank_info){.rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1};
    else if (ao_launch_emulate_nodes(ri) != 0)
        return AO_EXIT_USAGE;
    if (req->stop_handler) ao_launch_install_stop_handler();
    *role = launched ? AO_ROLE_RANK : AO_ROLE_SOLO;
    return 0;
}

int ao_rank_open(ao_rank *r, const ao_rank_info *ri, const ao_rank_opts *o)
{
    memset(r, 0, sizeof *r);
    r->ri = *ri;
    /* From here on every host wait of the rank is watched. */
    ao_wait_configure(ri->rank, o->comm.timeout_s);
    r->ndevices = ao_device_count(o->backend);
    if (r->ndevices < 0) return AO_EXIT_FAIL; /* its plugin did not load: said */
    if (r->ndevices == 0) {
        ao_error("--backend", "the %s backend sees no device", o->backend);
        return AO_EXIT_USAGE;
    }
    int ordinal = o->ordinal;
    if (ordinal >= r->ndevices) {
        ao_error("--device", "device %d does not exist; the %s backend sees %d", ordinal,
                 o->backend, r->ndevices);
        return AO_EXIT_USAGE;
    }
    /* The cpu backend's one device is shared by every rank by design: no
     * wrap-around warning. */
    /* Emulated nodes share one host: a rank's device is its slot there. */
    if (ordinal < 0)
        ordinal = strcmp(o->backend, "cpu") == 0 ? 0
                  : ao_launch_emulated_nodes()
                      ? ao_launch_device_ordinal(ri->rank, r->ndevices)
                      : ao_launch_device_ordinal(ri->local_rank, r->ndevices);
    r->dev = ao_device_open(o->backend, ordinal);
    if (!r->dev) return AO_EXIT_USAGE;
    ao_device_get_info(r->dev, &r->info);
    return 0;
}

int ao_rank_connect(ao_rank *r, ao_stream *s, const ao_rank_opts *o)
{
    const char *cb = ao_comm_backend_for(r->info.backend);
    if (!cb) {
        ao_error(o->cmd, "no collective backend for the %s device backend in this build",
                 r->info.backend);
        return AO_EXIT_USAGE;
    }
    ao_comm_id id;
    memset(&id, 0, sizeof id);
    int w = ao_wait_begin("bootstrap: the comm id from rank 0", NULL,
                          "rank 0 shares the id (MPI broadcast or --rdzv-file): look for a rank 0 "
                          "that failed or has not started");
    int rc = r->ri.world_size == 1
                 ? ao_comm_make_id(cb, &id)
                 : ao_launch_bootstrap_id(&r->ri, cb, o->rdzv_file, o->bootstrap_timeout_s, &id);
    ao_wait_end(w);
    if (rc != 0) return AO_EXIT_FAIL;
    r->comm = ao_comm_create(r->dev, s, &r->ri, &id, &o->comm);
    return r->comm ? 0 : AO_EXIT_FAIL;
}

void ao_rank_disconnect(ao_rank *r)
{
    if (r->comm) ao_comm_destroy(r->comm);
    r->comm = NULL;
}

void ao_rank_close(ao_rank *r)
{
    ao_rank_disconnect(r);
    int w = ao_wait_begin_device("device synchronisation at close", NULL, NULL, AO_WAIT_STEP_NOW);
    if (r->dev) ao_device_close(r->dev);
    ao_wait_end(w);
    r->dev = NULL;
    ao_wait_shutdown();
}
