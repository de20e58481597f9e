/* workers/roles/learning_early.c: the start without libtorch (learning.h): the trainer's PPO
 * learner in C (ppo_mlp.h) trains while a thread loads the bridge module and makes the bridge's
 * learner, which then takes the C learner's state over at the start of a step. */
#include "workers/roles/learning_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <string.h>
#include <unistd.h>

static void *load_bridge(void *arg)
{
    gb_learning *L = arg;
    double t0 = gb_now_s();
    int rc = gb_torch_load(&L->load_err);
    if (rc == 0)
        rc = gb_torch_set_threads((int)L->cfg->trainer.threads, &L->load_err);
    if (rc == 0)
        rc = gb_torch_learner_create(L->cfg, &L->space, L->learner_seed, &L->loaded,
                                     &L->load_err);
    L->load_rc = rc;
    L->load_s = gb_now_s() - t0;
    atomic_store(&L->loader_done, 1);
    return NULL;
}

int gb_learning_early_open(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    const gb_config *cfg = o->cfg;
    if (o->inline_mode || o->group || cfg->trainer.count != 1 ||
        (o->model_checkpoint && access(o->model_checkpoint, F_OK) == 0))
        return 0; /* inline mode acts on the bridge's model; groups and restores start there */
    gb_error why = {0};
    int rc = gb_ppo_mlp_open(cfg, o->space, o->learner_seed, &L->early, &why);
    if (rc == GB_EUNSUPPORTED) {
        GB_DEBUG("learning: the bridge's learner from the start: %s", why.msg);
        return 0;
    }
    if (rc) {
        *err = why;
        return rc;
    }
    L->space = *o->space;
    L->learner_seed = o->learner_seed;
    atomic_store(&L->loader_done, 0);
    if ((rc = pthread_create(&L->loader, NULL, load_bridge, L)) != 0) {
        gb_ppo_mlp_close(L->early);
        L->early = NULL;
        return gb_error_set(err, GB_ENOMEM, "learning: starting the bridge's loader: %s",
                            strerror(rc));
    }
    L->loader_live = 1;
    L->early_live = 1;
    return 1;
}

/* 0 when the bridge's model is laid out as early's (names, dtypes, shapes, offsets), else
 * GB_ECORRUPT naming the first difference: the flat state would land in the wrong tensors. */
static int same_layout(gb_learning *L, gb_error *err)
{
    const gb_param_entry *a, *b;
    int na, nb;
    uint64_t ta, tb;
    gb_ppo_mlp_layout(L->early, &a, &na, &ta);
    gb_torch_model_layout(gb_torch_learner_model(L->loaded), &b, &nb, &tb);
    if (gb_param_layout_fits(a, na, (size_t)ta, b, nb, tb, err) == 0)
        return 0;
    err->code = GB_ECORRUPT; /* not an input's fault: the two learners disagree */
    return gb_error_prefix(err, "learning: the learner without libtorch cannot hand over");
}

int gb_learning_early_take_over(gb_learning *L, int wait, gb_error *err)
{
    if (!L->early_live)
        return 0;
    if (L->loader_live) {
        if (!wait && !atomic_load(&L->loader_done))
            return 0;
        pthread_join(L->loader, NULL);
        L->loader_live = 0;
        if (L->load_rc)
            gb_error_prefix(&L->load_err, "learning: loading the bridge");
        else if ((L->load_rc = same_layout(L, &L->load_err)) == 0) {
            const float *p, *m, *v;
            int64_t n, adam_steps;
            gb_ppo_mlp_flat(L->early, &p, &m, &v, &n, &adam_steps);
            L->load_rc = gb_torch_learner_set_flat(L->loaded, p, m, v, n, adam_steps,
                                                   gb_ppo_mlp_train_steps(L->early),
                                                   &L->load_err);
        }
    }
    if (L->load_rc) { /* the learner without libtorch stays; every later call says why */
        *err = L->load_err;
        return L->load_rc;
    }
    gb_torch_model_set_version(gb_torch_learner_model(L->loaded), gb_ppo_mlp_version(L->early));
    gb_torch_learner_set_progress(L->loaded, L->progress);
    L->learner = L->loaded;
    L->loaded = NULL;
    L->early_live = 0;
    GB_INFO("learning: libtorch loaded in %.2f s; its learner takes over after %lld training "
            "steps without it", L->load_s, (long long)gb_ppo_mlp_train_steps(L->early));
    return 0;
}

void gb_learning_early_close(gb_learning *L)
{
    if (L->loader_live)
        pthread_join(L->loader, NULL);
    L->loader_live = 0;
    gb_torch_learner_destroy(L->loaded);
    L->loaded = NULL;
    gb_ppo_mlp_close(L->early);
    L->early = NULL;
}
