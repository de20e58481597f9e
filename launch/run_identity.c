/* launch/run_identity.c: a run's per-worker identities (see run_identity.h). */
#include "launch/run_identity.h"

#include "launch/joins.h"
#include "launch/slurm.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int gb_run_identities_on(const gb_config *cfg)
{
    const gb_config_streams *s = &cfg->streams;
    if (gb_config_streams_curve(s))
        return 1;
    return s->transport == GB_TRANSPORT_IPC && s->curve != GB_CURVE_OFF && gb_curve_available();
}

/* Appends "<role>/<index>" for index in [0, count) to names (each GB_CURVE_ID_MAX bytes). */
static void add_role(char (*names)[GB_CURVE_ID_MAX], int *n, int role, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        snprintf(names[(*n)++], GB_CURVE_ID_MAX, "%s/%lld", gb_role_name(role), (long long)i);
}

int gb_run_identities_open(const gb_config *cfg, const char *run_dir, void *zctx, gb_curve **out,
                           gb_error *err)
{
    *out = NULL;
    if (!gb_run_identities_on(cfg))
        return 0;
    char kd[2048];
    snprintf(kd, sizeof kd, "%s/%s", run_dir, GB_CURVE_KEYS_DIR);
    int rc = access(kd, F_OK) == 0 ? 0 : gb_curve_run_keys_create(run_dir, err);
    /* every slot: the launcher's workers, the joiners' (actors.join_max, policy.count) and the
     * per_host relays of both */
    int64_t relays = cfg->parameters.relay == GB_RELAY_PER_HOST
                         ? gb_slurm_relays(cfg) + gb_joins_relays(cfg) : 0;
    int64_t total = 1 + relays + cfg->trainer.count + cfg->policy.count + cfg->actors.count +
                    cfg->actors.join_max;
    char (*names)[GB_CURVE_ID_MAX] = calloc((size_t)total, GB_CURVE_ID_MAX);
    const char **ptrs = calloc((size_t)total, sizeof *ptrs);
    if (rc == 0 && (!names || !ptrs))
        rc = gb_error_set(err, GB_ENOMEM, "identities: out of memory");
    if (rc == 0) {
        int n = 0;
        add_role(names, &n, GB_ROLE_PARAMS, 1);
        add_role(names, &n, GB_ROLE_RELAY, relays);
        add_role(names, &n, GB_ROLE_TRAINER, cfg->trainer.count);
        add_role(names, &n, GB_ROLE_POLICY, cfg->policy.count);
        add_role(names, &n, GB_ROLE_ACTOR, cfg->actors.count + cfg->actors.join_max);
        for (int i = 0; i < n; i++)
            ptrs[i] = names[i];
        rc = gb_curve_identities_create(run_dir, ptrs, n, err);
    }
    free(names);
    free(ptrs);
    if (rc == 0)
        rc = gb_curve_identity_attach(out, zctx, kd, NULL, err);
    return rc;
}

int gb_run_identity_attach(gb_curve **out, void *zctx, const char *keys_dir, int role, int index,
                           gb_error *err)
{
    char name[GB_CURVE_ID_MAX];
    snprintf(name, sizeof name, "%s/%d", gb_role_name(role), index);
    return gb_curve_identity_attach(out, zctx, keys_dir, name, err);
}
