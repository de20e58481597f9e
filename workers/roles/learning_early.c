/* workers/roles/learning_early.c: the learning without libtorch (learning.h): the trainer's PPO,
 * DQN or SAC learner in C (ppo_mlp.h, dqn_mlp.h, sac_mlp.h) trains from the first step while a
 * thread loads the bridge module and makes the bridge's learner, which then only writes the C
 * learner's checkpoints from its state; a restored trainer goes on in C from the checkpoint's
 * state. */
#include "workers/roles/learning_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "workers/torch/mlp_train.h"

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

static void close_early(gb_learning *L)
{
    gb_ppo_mlp_close(L->early_ppo);
    gb_dqn_mlp_close(L->early_dqn);
    gb_sac_mlp_close(L->early_sac);
    L->early_ppo = NULL;
    L->early_dqn = NULL;
    L->early_sac = NULL;
    L->early = NULL;
}

/* The C learner of o's config into L->early: 1, 0 when it cannot train it (the reason at debug
 * level), or an error. */
static int open_early(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    const gb_config *cfg = o->cfg;
    gb_error why = {0};
    int rc;
    if (cfg->trainer.algorithm.name == GB_ALGO_DQN) {
        rc = gb_dqn_mlp_open(cfg, o->space, o->learner_seed, &L->early_dqn, &why);
        L->early = rc == 0 ? gb_dqn_mlp_net(L->early_dqn) : NULL;
    } else if (cfg->trainer.algorithm.name == GB_ALGO_SAC) {
        rc = gb_sac_mlp_open(cfg, o->space, o->learner_seed, &L->early_sac, &why);
        L->early = rc == 0 ? gb_sac_mlp_net(L->early_sac) : NULL;
    } else {
        rc = gb_ppo_mlp_open(cfg, o->space, o->learner_seed, &L->early_ppo, &why);
        L->early = rc == 0 ? gb_ppo_mlp_net(L->early_ppo) : NULL;
    }
    if (rc == GB_EUNSUPPORTED) {
        GB_DEBUG("learning: the bridge's learner: %s", why.msg);
        return 0;
    }
    if (rc) {
        *err = why;
        return rc;
    }
    return 1;
}

int gb_learning_early_open(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    if ((o->inline_mode && !o->acts_in_c) || o->group || o->cfg->trainer.count != 1 ||
        (o->model_checkpoint && access(o->model_checkpoint, F_OK) == 0))
        return 0; /* inline mode acting on the bridge's model needs it; groups and restores
                   * start there (a restored learner then goes on in C: early_resume) */
    int rc = open_early(L, o, err);
    if (rc <= 0)
        return rc;
    L->space = *o->space;
    L->learner_seed = o->learner_seed;
    L->early_live = 1;
    return 1;
}

/* The loader thread, started at the first step or checkpoint rather than in create: the
 * dynamic loader's lock, which dlopen holds for most of the load, is one pthread_create takes
 * too (for the new thread's TLS), and a trainer that made its ingest thread during the load
 * waited 0.3 s for it before receiving its first chunk. A thread that cannot start is the
 * load's failure. */
static void start_loader(gb_learning *L)
{
    L->loader_started = 1;
    atomic_store(&L->loader_done, 0);
    int e = pthread_create(&L->loader, NULL, load_bridge, L);
    if (e == 0)
        L->loader_live = 1;
    else
        L->load_rc = gb_error_set(&L->load_err, GB_ENOMEM,
                                  "learning: starting the bridge's loader: %s", strerror(e));
}

int gb_learning_early_train(gb_learning *L, const gb_torch_batch *b, float *prio, gb_error *err)
{
    if (L->early_sac)
        return gb_sac_mlp_train(L->early_sac, b, &L->last, prio, err);
    return L->early_dqn ? gb_dqn_mlp_train(L->early_dqn, b, &L->last, prio, err)
                        : gb_ppo_mlp_train(L->early_ppo, b, &L->last, prio, err);
}

/* The target network's parameters of early (DQN's, SAC's critics'), or NULL. */
static float *early_target(gb_learning *L)
{
    return L->early_dqn ? gb_dqn_mlp_target(L->early_dqn)
           : L->early_sac ? gb_sac_mlp_target(L->early_sac)
                          : NULL;
}

/* 0 when the bridge's model is laid out as early's (names, dtypes, shapes, offsets), else
 * GB_ECORRUPT naming the first difference: the flat state would land in the wrong tensors. */
static int same_layout(gb_learning *L, gb_error *err)
{
    const gb_param_entry *b;
    int nb;
    uint64_t tb;
    gb_torch_model_layout(gb_torch_learner_model(L->loaded), &b, &nb, &tb);
    const gb_flat_mlp *f = L->early;
    if (gb_param_layout_fits(f->layout, f->nlayout, (size_t)f->total, b, nb, tb, err) == 0)
        return 0;
    err->code = GB_ECORRUPT; /* not an input's fault: the two learners disagree */
    return gb_error_prefix(err, "learning: the learner without libtorch and libtorch's differ");
}

/* From now on (the learning thread's, between steps) the C learner's large products run on
 * libtorch's BLAS, as the bridge's learners' do: from 128 wide it is the faster (a [256, 256]
 * PPO learner's call 0.68x). The command's mlp_train.c is its own copy, not the module's. */
static void use_blas(void) { gb_mlp_train_set_large(gb_torch()->large_product); }

/* Starts the loader the first time; joins it once it is done (wait: waits for it) and checks its
 * learner against early: 1 when L->loaded is ready, 0 not yet, or the error (kept: every later
 * call returns it, early training on). */
static int loaded(gb_learning *L, int wait, gb_error *err)
{
    if (!L->loader_started)
        start_loader(L);
    if (L->loader_live) {
        if (!wait && !atomic_load(&L->loader_done))
            return 0;
        pthread_join(L->loader, NULL);
        L->loader_live = 0;
        if (L->load_rc)
            gb_error_prefix(&L->load_err, "learning: loading the bridge");
        else
            L->load_rc = same_layout(L, &L->load_err);
        if (L->load_rc == 0) {
            use_blas();
            GB_INFO("learning: libtorch loaded in %.2f s, after %lld training steps; it writes "
                    "the checkpoints, the learning goes on in gearbox's C", L->load_s,
                    (long long)L->early->train_steps);
        }
    }
    if (L->load_rc) {
        *err = L->load_err;
        return L->load_rc;
    }
    return 1;
}

/* early's state into the bridge's learner (an error is kept, as loaded's). */
static int sync_loaded(gb_learning *L, gb_error *err)
{
    const gb_flat_mlp *f = L->early;
    L->load_rc = gb_torch_learner_set_flat(L->loaded, f->p, f->m, f->v, early_target(L), f->n,
                                           f->adam_steps, f->train_steps, &L->load_err);
    if (L->load_rc) {
        *err = L->load_err;
        return L->load_rc;
    }
    gb_torch_model_set_version(gb_torch_learner_model(L->loaded), f->version);
    gb_torch_learner_set_progress(L->loaded, L->progress);
    return 0;
}

int gb_learning_early_poll(gb_learning *L, gb_error *err)
{
    if (!L->early_live)
        return 0;
    int rc = loaded(L, 0, err);
    return rc < 0 ? rc : 0;
}

int gb_learning_early_sync(gb_learning *L, gb_torch_learner **saver, gb_error *err)
{
    *saver = L->learner;
    if (!L->early_live)
        return 0;
    int rc = loaded(L, 1, err);
    if (rc < 0 || (rc = sync_loaded(L, err)))
        return rc;
    *saver = L->loaded;
    return 0;
}

int gb_learning_early_resume(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    if ((o->inline_mode && !o->acts_in_c) || o->group || o->cfg->trainer.count != 1)
        return 0;
    int rc = open_early(L, o, err);
    if (rc <= 0)
        return rc;
    L->loaded = L->learner; /* loaded from the checkpoint: it writes the next ones */
    L->learner = NULL;
    gb_flat_mlp *f = L->early;
    if ((rc = same_layout(L, err)) == 0)
        rc = gb_torch_learner_get_flat(L->loaded, f->p, f->m, f->v, early_target(L), f->n,
                                       &f->adam_steps, &f->train_steps, err);
    if (rc) { /* the bridge's learner trains on, as it would have */
        GB_WARN("learning: the restored run goes on in libtorch's learner: %s", err->msg);
        *err = (gb_error){0};
        L->learner = L->loaded;
        L->loaded = NULL;
        close_early(L);
        return 0;
    }
    f->version = gb_torch_model_version(gb_torch_learner_model(L->loaded));
    use_blas();
    L->loader_started = 1; /* nothing to load: the checkpoint's learner is here */
    L->early_live = 1;
    GB_INFO("learning: restored from the checkpoint at training step %lld; the learning goes "
            "on in gearbox's C, libtorch writes the checkpoints", (long long)f->train_steps);
    return 1;
}

void gb_learning_early_close(gb_learning *L)
{
    if (L->loader_live)
        pthread_join(L->loader, NULL);
    L->loader_live = 0;
    gb_torch_learner_destroy(L->loaded);
    L->loaded = NULL;
    close_early(L);
}
