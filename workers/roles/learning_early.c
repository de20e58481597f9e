/* workers/roles/learning_early.c: the learning without libtorch (learning.h): the trainer's PPO,
 * DQN or SAC learner in C (ppo_mlp.h, dqn_mlp.h, sac_mlp.h) trains from the first step to the
 * last and writes and restores its checkpoints itself (learner_file.h); libtorch loads on a
 * thread only for its BLAS, where a layer is wide enough for it to be the faster; a trainer
 * restored from libtorch's checkpoint goes on in C from its state. */
#include "workers/roles/learning_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "workers/roles/learner_file.h"
#include "workers/torch/mlp_train.h"

#include <string.h>
#include <unistd.h>

/* The loader thread: libtorch for its BLAS (use_blas). */
static void *load_blas(void *arg)
{
    gb_learning *L = arg;
    double t0 = gb_now_s();
    int rc = gb_torch_load(&L->load_err);
    if (rc == 0)
        rc = gb_torch_set_threads((int)L->cfg->trainer.threads, &L->load_err);
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

/* The target network's parameters of early (DQN's, SAC's critics'; *count floats), or NULL. */
static float *early_target(gb_learning *L, int64_t *count)
{
    *count = L->early_dqn ? L->early->n : L->early_sac ? gb_sac_mlp_target_floats(L->early_sac)
                                                       : 0;
    return L->early_dqn ? gb_dqn_mlp_target(L->early_dqn)
           : L->early_sac ? gb_sac_mlp_target(L->early_sac)
                          : NULL;
}

/* 1 when one of early's layers is 128 or more wide: libtorch's BLAS computes its large
 * products faster than the C tiles (workers/torch/mlp_train.c, large). */
static int wants_blas(const gb_learning *L)
{
    const gb_flat_mlp *f = L->early;
    for (int i = 0; i < f->nlayout; i++)
        if (f->layout[i].rank == 2 &&
            (f->layout[i].shape[0] >= 128 || f->layout[i].shape[1] >= 128))
            return 1;
    return 0;
}

/* The checkpoint at path (a learner file) into early: 0, or GB_ECORRUPT (another
 * configuration's, a corrupt file) or the reader's error. */
static int restore_file(gb_learning *L, const char *path, gb_error *err)
{
    gb_learner_file lf;
    int rc = gb_learner_file_read(path, &lf, err);
    if (rc)
        return gb_error_prefix(err, "learning: restoring");
    gb_flat_mlp *f = L->early;
    int64_t tn;
    float *target = early_target(L, &tn);
    rc = gb_learner_file_fits(&lf, L->cfg, f->layout, f->nlayout, f->total, f->n, tn,
                              err);
    if (rc == 0) {
        const size_t b = (size_t)f->n * sizeof(float);
        memcpy(f->p, lf.p, b);
        memcpy(f->m, lf.m, b);
        memcpy(f->v, lf.v, b);
        if (tn)
            memcpy(target, lf.target, (size_t)tn * sizeof(float));
        f->adam_steps = lf.adam_steps;
        f->train_steps = lf.train_steps;
        f->version = lf.version;
    } else {
        gb_error_prefix(err, "learning: restoring %s: another configuration's checkpoint", path);
    }
    gb_learner_file_free(&lf);
    return rc;
}

/* Whether o lets the C learner train (the config aside): inline mode acting on the bridge's
 * model needs the bridge's learner, several trainers its data-parallel group. */
static int allowed(const gb_learning_opts *o)
{
    return !(o->inline_mode && !o->acts_in_c) && !o->group && o->cfg->trainer.count == 1;
}

static void went_on(gb_learning *L, const char *from)
{
    L->restored = 1;
    L->train_steps = L->early->train_steps;
    GB_INFO("learning: restored from the checkpoint at training step %lld; the learning goes "
            "on in gearbox's C (%s)", (long long)L->early->train_steps, from);
}

int gb_learning_early_open(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    const char *ck = o->model_checkpoint;
    int restore = ck && access(ck, F_OK) == 0;
    if (!allowed(o) || (restore && !gb_learner_file_is(ck)))
        return 0; /* libtorch's checkpoint: its learner loads it (early_resume goes on in C) */
    int rc = open_early(L, o, err);
    if (rc <= 0)
        return rc; /* the bridge's learner then restores a learner file (learning.c) */
    L->early_live = 1;
    if (restore && (rc = restore_file(L, ck, err)))
        return rc;
    if (restore)
        went_on(L, "its learner file");
    return 1;
}

/* From now on (the learning thread's, between steps) the C learner's large products run on
 * libtorch's BLAS, as the bridge's learners' do: from 128 wide it is the faster (a [256, 256]
 * PPO learner's call 0.68x). The command's mlp_train.c is its own copy, not the module's. */
static void use_blas(void) { gb_mlp_train_set_large(gb_torch()->large_product); }

/* The loader thread, started at the first step rather than in create: the dynamic loader's
 * lock, which dlopen holds for most of the load, is one pthread_create takes too (for the new
 * thread's TLS), and a trainer that made its ingest thread during the load waited 0.3 s for it
 * before receiving its first chunk. */
static void start_loader(gb_learning *L)
{
    atomic_store(&L->loader_done, 0);
    int e = pthread_create(&L->loader, NULL, load_blas, L);
    if (e == 0)
        L->loader_live = 1;
    else
        GB_WARN("learning: starting libtorch's loader: %s; the C learner computes every product "
                "itself", strerror(e));
}

int gb_learning_early_train(gb_learning *L, const gb_torch_batch *b, float *prio, gb_error *err)
{
    if (L->early_sac)
        return gb_sac_mlp_train(L->early_sac, b, &L->last, prio, err);
    return L->early_dqn ? gb_dqn_mlp_train(L->early_dqn, b, &L->last, prio, err)
                        : gb_ppo_mlp_train(L->early_ppo, b, &L->last, prio, err);
}

int gb_learning_early_poll(gb_learning *L, gb_error *err)
{
    (void)err;
    if (!L->early_live)
        return 0;
    if (!L->loader_started) { /* asked once */
        L->loader_started = 1;
        if (wants_blas(L))
            start_loader(L);
    }
    if (!L->loader_live || !atomic_load(&L->loader_done))
        return 0;
    pthread_join(L->loader, NULL);
    L->loader_live = 0;
    if (L->load_rc) { /* the C learner's own products are slower there, not wrong */
        GB_WARN("learning: libtorch's BLAS: %s; the C learner computes every product itself",
                L->load_err.msg);
        return 0;
    }
    use_blas();
    GB_INFO("learning: libtorch loaded in %.2f s, after %lld training steps: its BLAS computes "
            "the products 128 wide or more", L->load_s, (long long)L->early->train_steps);
    return 0;
}

int gb_learning_early_save(gb_learning *L, const char *path, gb_error *err)
{
    const gb_flat_mlp *f = L->early;
    gb_learner_file lf = {.layout = f->layout, .count = f->nlayout, .layout_bytes = f->total,
                          .n = f->n, .p = f->p, .m = f->m, .v = f->v,
                          .adam_steps = f->adam_steps, .train_steps = f->train_steps,
                          .version = f->version};
    lf.target = early_target(L, &lf.target_n);
    snprintf(lf.algorithm, sizeof lf.algorithm, "%s", gb_learner_file_algorithm(L->cfg));
    return gb_learner_file_write(path, &lf, err);
}

int gb_learning_early_resume(gb_learning *L, const gb_learning_opts *o, gb_error *err)
{
    if (!allowed(o))
        return 0;
    int rc = open_early(L, o, err);
    if (rc <= 0)
        return rc;
    gb_flat_mlp *f = L->early;
    const gb_param_entry *b;
    int nb;
    uint64_t tb;
    gb_torch_model *model = gb_torch_learner_model(L->learner);
    gb_torch_model_layout(model, &b, &nb, &tb);
    int64_t tn;
    float *target = early_target(L, &tn);
    if ((rc = gb_param_layout_fits(f->layout, f->nlayout, (size_t)f->total, b, nb, tb, err)) == 0)
        rc = gb_torch_learner_get_flat(L->learner, f->p, f->m, f->v, target, f->n,
                                       &f->adam_steps, &f->train_steps, err);
    if (rc) { /* the bridge's learner trains on, as it would have */
        GB_WARN("learning: the restored run goes on in libtorch's learner: %s", err->msg);
        *err = (gb_error){0};
        close_early(L);
        return 0;
    }
    f->version = gb_torch_model_version(model);
    gb_torch_learner_destroy(L->learner); /* the C learner writes the next checkpoints */
    L->learner = NULL;
    use_blas(); /* libtorch is loaded: its BLAS, wide or not, as before */
    L->loader_started = 1;
    L->early_live = 1;
    went_on(L, "libtorch's checkpoint");
    return 1;
}

void gb_learning_early_close(gb_learning *L)
{
    if (L->loader_live)
        pthread_join(L->loader, NULL);
    L->loader_live = 0;
    if (L->early_live && L->early->train_steps > 0) /* (not a restore that failed) */
        GB_INFO("learning: trained in gearbox's C to training step %lld; libtorch %s",
                (long long)L->early->train_steps,
                gb_torch_loaded() ? "was loaded in this process" : "was never loaded");
    close_early(L);
}
