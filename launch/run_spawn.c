/* launch/run_spawn.c: a distributed run's worker processes (see run_spawn.h). */
#include "launch/run_spawn.h"

#include "launch/joins.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <stdint.h>
#include <stdio.h>

/* Starts count workers of role (indexes 0..count-1). */
static int spawn_role(const gb_run_spawn_opts *o, const char *role, int count,
                      const char *record, gb_error *err)
{
    const gb_rundir *rd = o->rd;
    const gb_slurm_job *job = o->job;
    for (int i = 0; i < count; i++) {
        char index[16], seg[16], log_rel[64], log_path[2048];
        snprintf(index, sizeof index, "%d", i);
        snprintf(seg, sizeof seg, "%d", o->segment);
        snprintf(log_rel, sizeof log_rel, "logs/%s-%d.log", role, i);
        int rc = gb_rundir_file(rd, log_rel, log_path, sizeof log_path, err);
        if (rc)
            return rc;
        char *argv[] = {(char *)o->exe, "worker",         "--role",    (char *)role,
                        "--index",      index,            "--run-dir", (char *)rd->path,
                        "--registry",   (char *)o->reg_ep, "--metrics", (char *)o->met_ep,
                        NULL,           NULL,             NULL,        NULL,
                        NULL};
        int n = 12;
        if (record) { /* gearbox run --record DIR */
            argv[n++] = "--record";
            argv[n++] = (char *)record;
        }
        if (o->segment) { /* gearbox run --resume: its own random streams */
            argv[n++] = "--segment";
            argv[n++] = seg;
        }
        char *step[GB_CHILD_MAX_ARGS + 1], step_buf[GB_CHILD_ARGS_BYTES];
        if (job && (rc = gb_slurm_step_argv(job, role, i, argv, step, GB_CHILD_MAX_ARGS + 1,
                                            step_buf, sizeof step_buf, err)))
            return rc;
        if ((rc = gb_supervisor_spawn(o->sup, role, i, job ? step : argv, log_path, err)))
            return rc;
    }
    return 0;
}

int gb_run_spawn(const gb_run_spawn_opts *o, gb_error *err)
{
    const gb_config *cfg = o->cfg;
    static const int roles[] = {GB_ROLE_PARAMS, GB_ROLE_RELAY, GB_ROLE_TRAINER,
                                GB_ROLE_POLICY, GB_ROLE_ACTOR};
    static const char *const names[] = {"params", "relay", "trainer", "policy", "actor"};
    const int64_t count[] = {1, o->relays, gb_joins_local(cfg, GB_ROLE_TRAINER),
                             gb_joins_local(cfg, GB_ROLE_POLICY),
                             gb_joins_local(cfg, GB_ROLE_ACTOR)};
    for (int r = 0; r < (int)(sizeof roles / sizeof roles[0]); r++) {
        int rc = spawn_role(o, names[r], (int)count[r],
                            roles[r] == GB_ROLE_TRAINER ? o->record : NULL, err);
        if (rc)
            return rc;
    }
    GB_INFO("started %lld actors x %lld envs, %lld policy, %lld trainer workers and the "
            "parameter service%s", (long long)gb_joins_local(cfg, GB_ROLE_ACTOR),
            (long long)cfg->actors.envs_per_actor, (long long)gb_joins_local(cfg, GB_ROLE_POLICY),
            (long long)gb_joins_local(cfg, GB_ROLE_TRAINER),
            o->job ? " as steps of the slurm job" : "");
    return 0;
}
