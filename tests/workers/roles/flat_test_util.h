/* tests/workers/roles/flat_test_util.h: what the tests of the trainer's learners without
 * libtorch (test_ppo_mlp.c, test_ppo_core.c, test_dqn_mlp.c, test_sac_mlp.c) share: their
 * parameters and layout against a bridge learner's, PPO's training call beside the bridge's, a
 * bridge learner made from their state as a checkpoint makes it, and the configurations they
 * must refuse.
 * defines: flat_max_diff, flat_layout_fits, ppo_train_both, flat_take_over, flat_refusal,
 *          flat_open_fn, flat_refusals */
#ifndef GB_TESTS_WORKERS_ROLES_FLAT_TEST_UTIL_H
#define GB_TESTS_WORKERS_ROLES_FLAT_TEST_UTIL_H

#include "test.h"
#include "workers/roles/flat_mlp.h"
#include "workers/roles/ppo_mlp.h"
#include "workers/torch/bridge.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest difference between f's parameters and l's (their exports), INFINITY when they
 * are laid out differently or their versions differ. */
static inline double flat_max_diff(const gb_flat_mlp *f, gb_torch_learner *l)
{
    const gb_param_entry *tb;
    int nb;
    uint64_t bytes_b, va, vb;
    gb_torch_model *m = gb_torch_learner_model(l);
    gb_torch_model_layout(m, &tb, &nb, &bytes_b);
    if (f->nlayout != nb || f->total != bytes_b)
        return INFINITY;
    float *a = calloc(1, f->total), *b = calloc(1, bytes_b);
    gb_error err = {0};
    double d = INFINITY;
    if (a && b && gb_flat_mlp_export(f, a, f->total, &va, &err) == 0 &&
        gb_torch_model_export(m, b, bytes_b, &vb, &err) == 0 && va == vb) {
        d = 0.0;
        for (size_t i = 0; i < f->total / sizeof(float); i++)
            d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    free(a);
    free(b);
    return d;
}

/* 0 when f's layout is l's model's entry by entry (gb_param_layout_fits), else its error. */
static inline int flat_layout_fits(const gb_flat_mlp *f, gb_torch_learner *l, gb_error *err)
{
    const gb_param_entry *tb;
    int nb;
    uint64_t bytes_b;
    gb_torch_model_layout(gb_torch_learner_model(l), &tb, &nb, &bytes_b);
    return gb_param_layout_fits(f->layout, f->nlayout, (size_t)f->total, tb, nb, bytes_b, err);
}

/* One PPO training call of both learners on b (test_ppo_mlp.c, test_ppo_core.c): their stats in
 * so and sr, the largest relative difference of the stats and the chunk priorities folded into
 * worst (returned); the same samples and steps, steps each. */
static inline double ppo_train_both(gb_ppo_mlp *q, gb_torch_learner *l, const gb_torch_batch *b,
                                    int64_t steps, double worst, gb_torch_stats *so,
                                    gb_torch_stats *sr)
{
    gb_error err = {0};
    float po[TB_B], pr[TB_B];
    CHECK_OK(gb_ppo_mlp_train(q, b, so, po, &err));
    CHECK_OK(gb_torch_learner_train(l, b, sr, pr, &err));
    worst = ppo_stats_worst(worst, so, sr);
    for (int i = 0; i < TB_B; i++) {
        const double p[1][2] = {{po[i], pr[i]}};
        worst = worst_rel(worst, p, 1);
    }
    CHECK(so->samples == sr->samples && so->samples > 0);
    CHECK(so->gradient_steps == sr->gradient_steps && so->gradient_steps == steps);
    return worst;
}

/* The bridge's learner of cfg with f's state (and target's: the target network's parameters,
 * or NULL): 0, or -1 (printed). */
static inline int flat_take_over(const gb_config *cfg, const gb_torch_space *sp,
                                 const gb_flat_mlp *f, const float *target,
                                 gb_torch_learner **out)
{
    gb_error err = {0};
    if (gb_torch_learner_create(cfg, sp, 99, out, &err) ||
        gb_torch_learner_set_flat(*out, f->p, f->m, f->v, target, f->n, f->adam_steps,
                                  f->train_steps, &err)) {
        fprintf(stderr, "take_over: %s\n", err.msg);
        return -1;
    }
    gb_torch_model_set_version(gb_torch_learner_model(*out), f->version);
    return 0;
}

/* A configuration (torch_test_util.h's make_cfg of algo with the model's extra keys,
 * trainer.kernels kernels, box_space or discrete_space) that a learner must refuse, naming key. */
typedef struct flat_refusal {
    const char *algo, *extra, *key;
    int kernels, box;
} flat_refusal;

/* A learner's open of cfg for sp (closing what it made): its return code, the reason in err. */
typedef int (*flat_open_fn)(const gb_config *cfg, const gb_torch_space *sp, gb_error *err);

/* Each of the n cases is refused (GB_EUNSUPPORTED) with its key in the reason. */
static inline void flat_refusals(const flat_refusal *cases, size_t n, flat_open_fn open)
{
    for (size_t i = 0; i < n; i++) {
        gb_config cfg;
        CHECK(make_cfg(&cfg, cases[i].algo, cases[i].extra) == 0);
        cfg.trainer.kernels = cases[i].kernels;
        gb_torch_space sp = cases[i].box ? box_space() : discrete_space();
        gb_error err = {0};
        CHECK(open(&cfg, &sp, &err) == GB_EUNSUPPORTED);
        CHECK_MSG(strstr(err.msg, cases[i].key) != NULL, "%s: %s", cases[i].key, err.msg);
    }
}

#endif
