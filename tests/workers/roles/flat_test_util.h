/* tests/workers/roles/flat_test_util.h: what the tests of the trainer's learners without
 * libtorch (test_ppo_mlp.c, test_dqn_mlp.c) share: their parameters against a bridge learner's,
 * and a bridge learner made from their state as a trainer's handover makes it.
 * defines: flat_max_diff, flat_take_over */
#ifndef GB_TESTS_WORKERS_ROLES_FLAT_TEST_UTIL_H
#define GB_TESTS_WORKERS_ROLES_FLAT_TEST_UTIL_H

#include "workers/roles/flat_mlp.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
