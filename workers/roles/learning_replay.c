/* workers/roles/learning_replay.c: the replay a learner samples from, made from the chunk
 * layout (see gb_learning_replay_create in learning.h). */
#include "workers/roles/learning.h"

#include "replay/from_config.h"
#include "replay/gpu.h"
#include "runtime/base/log.h"

int gb_learning_replay_create(const gb_learning_opts *o, const gb_chunk_layout *l,
                              int gpu_selector, gb_replay **out, gb_error *err)
{
    const gb_config_replay *rc_cfg = &o->cfg->trainer.replay;
    if (o->inline_mode && rc_cfg->samples_per_insert <= 0 && rc_cfg->max_times_sampled == 0)
        return gb_error_set(err, GB_EINVAL,
                            "trainer.replay.samples_per_insert: inline mode needs a ratio > 0 "
                            "when items can be sampled more than once (max_times_sampled 0): "
                            "in one thread nothing else would ever hold the learner back");
    gb_replay_options ro;
    gb_replay_options_default(&ro);
    gb_replay_options_from_config(&ro, rc_cfg);
    ro.steps = l->T;
    ro.seed = o->replay_seed;
    ro.shm_name = o->replay_shm_name;
    ro.shm_persistent = o->replay_shm_name != NULL;
    if (o->inline_mode)
        ro.timeout_s = 0; /* one thread inserts and samples: waiting would wait for itself */
    if (gpu_selector)
        ro.selector_ops = gb_replay_gpu_selector(ro.selector); /* weighted: on the GPU */
    for (int c = 0; c < l->ncols; c++) {
        int ndim, per_item;
        const int64_t *shape;
        gb_chunk_column_item(l, c, &ndim, &shape, &per_item);
        int rc = gb_replay_add_column(&ro, l->desc[c].name, l->desc[c].dtype, ndim, shape,
                                      per_item, err);
        if (rc)
            return rc;
    }
    int rc = gb_replay_create(&ro, out, err);
    if (rc == GB_EFULL && ro.shm_name) { /* no room in /dev/shm: run, but without the safety */
        GB_WARN("learning: the replay goes to anonymous memory and will not survive a crash of "
                "this trainer: %s", err ? err->msg : "");
        ro.shm_name = NULL;
        ro.shm_persistent = 0;
        rc = gb_replay_create(&ro, out, err);
    }
    return rc;
}
