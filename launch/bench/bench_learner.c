/* launch/bench/bench_learner.c: `gearbox bench learner`: the trainer's cost per training call of
 * each config's algorithm, on batches shaped as its trainer gets them (trainer.batch_size chunks of
 * actors.chunk_len steps, random observations and actions in the env's spaces), so that the
 * learner's part of time to solve is measured apart from the run: CPU time of the calling thread
 * per call and per gradient step, and samples per CPU second. The reference in the same run is a
 * forward of the acting model over the same rows (what the learner's steps are made of). A PPO,
 * DQN or SAC config whose trainer learns without libtorch's tensors (workers/roles/ppo_mlp.h,
 * dqn_mlp.h, sac_mlp.h) gets a second row for that learner on the same batch, its large products on
 * libtorch's BLAS as in a run once libtorch has loaded.
 * defines: gb_bench_learner */
#include "launch/bench/bench.h"
#include "runtime/base/clock.h"
#include "launch/commands.h"

#include "envs/env.h"
#include "runtime/config/config.h"
#include "runtime/base/rng.h"
#include "workers/torch/bridge.h"
#include "workers/torch/mlp_train.h"
#include "workers/roles/dqn_mlp.h"
#include "workers/roles/ppo_mlp.h"
#include "workers/roles/sac_mlp.h"
#include "workers/roles/worker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONFIGS 16

/* the suite's learners (launch/bench/bench_suite.c) when no config is named */
static const char *const default_configs[] = {"cartpole_ppo.yaml", "cartpole_dqn.yaml",
                                              "pendulum_sac.yaml"};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox bench learner [--json] [CONFIG ...] [--set k=v ...] [--seconds S]\n"
            "                             [--quick]\n\n"
            "The trainer's learner alone, per config (default: configs/cartpole_ppo.yaml,\n"
            "cartpole_dqn.yaml, pendulum_sac.yaml): training calls on batches shaped as the\n"
            "trainer gets them (trainer.batch_size chunks of actors.chunk_len steps, random\n"
            "observations and actions), timed in CPU seconds of the process (trainer.threads as\n"
            "configured; every thread's CPU summed): per call, per gradient step, samples per\n"
            "CPU second, wall-clock time per call, against a forward of the acting model over\n"
            "the same rows in the same run, and what computes the network's forward and\n"
            "backward (\"gearbox C\" or \"libtorch autograd\": trainer.kernels) and the BLAS\n"
            "libtorch's products run on (\"OpenBLAS SkylakeX\": its kernels). A PPO or DQN\n"
            "config whose trainer learns without libtorch's tensors gets a second row for that\n"
            "learner (\"gearbox C learner\"; its large products on libtorch's BLAS, as in a\n"
            "run once libtorch has loaded).\n"
            "S: CPU seconds per config (default 2, --quick 0.2).\n");
}

/* A batch of random data in the space's shapes: every step valid, terminations now and then. */
typedef struct bench_batch {
    gb_torch_batch b;
    void *obs, *next_obs, *action;
    float *reward, *logp, *weights, *priorities;
    uint8_t *terminated, *truncated;
} bench_batch;

static void batch_free(bench_batch *x)
{
    free(x->obs);
    free(x->next_obs);
    free(x->action);
    free(x->reward);
    free(x->logp);
    free(x->weights);
    free(x->priorities);
    free(x->terminated);
    free(x->truncated);
}

static int batch_make(bench_batch *x, const gb_torch_space *sp, int64_t B, int64_t T)
{
    memset(x, 0, sizeof *x);
    int64_t obs_n = 1;
    for (int i = 0; i < sp->obs_ndim; i++)
        obs_n *= sp->obs_shape[i];
    const size_t obs_elt = sp->obs_dtype == GB_DTYPE_UINT8 ? 1 : 4;
    const int64_t adim = sp->discrete ? 1 : sp->action_dim;
    x->obs = malloc((size_t)(B * T * obs_n) * obs_elt);
    x->next_obs = malloc((size_t)(B * obs_n) * obs_elt);
    x->action = malloc((size_t)(B * T * adim) * (sp->discrete ? 8 : 4));
    x->reward = malloc((size_t)(B * T) * sizeof(float));
    x->logp = malloc((size_t)(B * T) * sizeof(float));
    x->weights = malloc((size_t)B * sizeof(float));
    x->priorities = malloc((size_t)B * sizeof(float));
    x->terminated = calloc((size_t)(B * T), 1);
    x->truncated = calloc((size_t)(B * T), 1);
    if (!x->obs || !x->next_obs || !x->action || !x->reward || !x->logp || !x->weights ||
        !x->priorities || !x->terminated || !x->truncated) {
        batch_free(x);
        return -1;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (int64_t i = 0; i < B * T * obs_n; i++) {
        if (obs_elt == 1)
            ((uint8_t *)x->obs)[i] = (uint8_t)(gb_rng_next(&rng) >> 56);
        else
            ((float *)x->obs)[i] = (float)(gb_rng_uniform(&rng) * 2.0 - 1.0);
    }
    memcpy(x->next_obs, x->obs, (size_t)(B * obs_n) * obs_elt);
    for (int64_t i = 0; i < B * T; i++) {
        if (sp->discrete)
            ((int64_t *)x->action)[i] = (int64_t)(gb_rng_next(&rng) % (uint64_t)sp->n_actions);
        else
            for (int64_t a = 0; a < adim; a++)
                ((float *)x->action)[i * adim + a] = (float)(gb_rng_uniform(&rng) * 2.0 - 1.0);
        x->reward[i] = 1.0f;
        x->logp[i] = sp->discrete ? -0.69f : -1.0f;
        x->terminated[i] = gb_rng_uniform(&rng) < 0.01;
    }
    for (int64_t i = 0; i < B; i++)
        x->weights[i] = 1.0f;
    x->b = (gb_torch_batch){.B = B, .T = T, .obs = x->obs, .next_obs = x->next_obs,
                            .action = x->action, .reward = x->reward,
                            .terminated = x->terminated, .truncated = x->truncated,
                            .logp = x->logp, .weights = x->weights};
    return 0;
}

typedef struct learner_figures {
    double call_us, step_us, samples_per_s, forward_us, wall_us;
    int64_t calls, steps, rows;
    const char *kernels; /* what computes the forward and backward (learner_kernels) */
} learner_figures;

/* One training call of a learner: the bridge's, or the one a trainer starts with. */
typedef struct bench_learner {
    gb_torch_learner *torch;
    gb_ppo_mlp *early_ppo;
    gb_dqn_mlp *early_dqn;
    gb_sac_mlp *early_sac;
} bench_learner;

static int train_once(bench_learner *l, bench_batch *x, gb_torch_stats *st, gb_error *err)
{
    memset(st, 0, sizeof *st);
    if (l->early_ppo)
        return gb_ppo_mlp_train(l->early_ppo, &x->b, st, x->priorities, err);
    if (l->early_dqn)
        return gb_dqn_mlp_train(l->early_dqn, &x->b, st, x->priorities, err);
    if (l->early_sac)
        return gb_sac_mlp_train(l->early_sac, &x->b, st, x->priorities, err);
    return gb_torch_learner_train(l->torch, &x->b, st, x->priorities, err);
}

/* Trains l on the batch for at least budget_s CPU seconds of the process (after two warm-up
 * calls) into f. */
static int time_calls(bench_learner *l, bench_batch *x, double budget_s, learner_figures *f,
                      gb_error *err)
{
    gb_torch_stats st;
    int rc = 0;
    for (int i = 0; !rc && i < 2; i++)
        rc = train_once(l, x, &st, err);
    double t0 = gb_process_cpu_s(), t = t0, w0 = gb_now_s();
    while (!rc && t - t0 < budget_s) {
        rc = train_once(l, x, &st, err);
        f->calls++;
        f->steps += st.gradient_steps;
        t = gb_process_cpu_s();
    }
    if (!rc) {
        double s = t - t0;
        f->wall_us = (gb_now_s() - w0) / (double)f->calls * 1e6;
        f->call_us = s / (double)f->calls * 1e6;
        f->step_us = f->steps ? s / (double)f->steps * 1e6 : 0.0;
        f->samples_per_s = (double)(f->calls * f->rows) / s;
    }
    return rc;
}

/* The bridge's learner on the batch, then a forward of the acting model over the same rows on
 * the same clock, into f; into *early (early->calls 0 when the trainer would not learn on it)
 * the learner a lone trainer of cfg learns on without libtorch's tensors. */
static int time_learner(const gb_config *cfg, const gb_torch_space *sp, double budget_s,
                        learner_figures *f, learner_figures *early, gb_error *err)
{
    bench_batch x;
    const int64_t B = cfg->trainer.batch_size, T = cfg->actors.chunk_len;
    if (batch_make(&x, sp, B, T))
        return gb_error_set(err, GB_ENOMEM, "bench learner: no memory for a batch of %lld x "
                            "%lld steps", (long long)B, (long long)T);
    bench_learner l = {0};
    int rc = gb_torch_learner_create(cfg, sp, 1, &l.torch, err);
    memset(f, 0, sizeof *f);
    memset(early, 0, sizeof *early);
    f->rows = early->rows = B * T;
    f->kernels = l.torch ? gb_torch_learner_kernels(l.torch) : "";
    early->kernels = "gearbox C learner";
    if (!rc)
        rc = time_calls(&l, &x, budget_s, f, err);
    if (!rc) {
        gb_torch_model *m = gb_torch_learner_model(l.torch);
        int64_t n = 0;
        double t0 = gb_process_cpu_s(), t = t0;
        while (!rc && t - t0 < budget_s / 4) {
            rc = gb_torch_model_forward(m, x.obs, f->rows, err);
            n++;
            t = gb_process_cpu_s();
        }
        f->forward_us = early->forward_us = (t - t0) / (double)n * 1e6;
    }
    gb_error why = {0};
    gb_mlp_train_set_large(gb_torch()->large_product); /* as learning_early.c's use_blas */
    const int algo = cfg->trainer.algorithm.name;
    if (!rc && (algo == GB_ALGO_DQN   ? gb_dqn_mlp_open(cfg, sp, 1, &l.early_dqn, &why)
                : algo == GB_ALGO_SAC ? gb_sac_mlp_open(cfg, sp, 1, &l.early_sac, &why)
                                      : gb_ppo_mlp_open(cfg, sp, 1, &l.early_ppo, &why)) == 0)
        rc = time_calls(&l, &x, budget_s, early, err);
    gb_ppo_mlp_close(l.early_ppo);
    gb_dqn_mlp_close(l.early_dqn);
    gb_sac_mlp_close(l.early_sac);
    gb_torch_learner_destroy(l.torch);
    batch_free(&x);
    return rc;
}

/* One row (or JSON line) of figures f for the config at path config. */
static void print_row(const gb_config *cfg, const char *config, const learner_figures *f,
                      int json)
{
    const char *algo = gb_config_enum_name("trainer.algorithm.name",
                                           (int)cfg->trainer.algorithm.name);
    if (json)
        printf("{\"bench\": \"learner\", \"config\": \"%s\", \"algorithm\": \"%s\", "
               "\"env\": \"%s\", \"rows\": %lld, \"calls\": %lld, \"gradient_steps\": %lld, "
               "\"call_us\": %.1f, \"step_us\": %.1f, \"samples_per_cpu_s\": %.0f, "
               "\"forward_us\": %.1f, \"step_over_forward\": %.2f, \"wall_us\": %.1f, "
               "\"kernels\": \"%s\", \"blas\": \"%s\"}\n",
               config, algo, cfg->env.name, (long long)f->rows, (long long)f->calls,
               (long long)f->steps, f->call_us, f->step_us, f->samples_per_s, f->forward_us,
               f->forward_us > 0 ? f->step_us / f->forward_us : 0.0, f->wall_us, f->kernels,
               gb_bench_blas());
    else
        printf("learner  %-4s %-16s %5lld rows  %8.1f us/call  %4.1f steps/call  "
               "%7.1f us/step (x%.1f a forward of %.1f us)  %9.0f samples/cpu-s  "
               "%8.1f us/call wall  (%s; %s)\n",
               algo, cfg->env.name, (long long)f->rows, f->call_us,
               f->calls ? (double)f->steps / (double)f->calls : 0.0, f->step_us,
               f->forward_us > 0 ? f->step_us / f->forward_us : 0.0, f->forward_us,
               f->samples_per_s, f->wall_us, f->kernels, gb_bench_blas());
    fflush(stdout);
}

typedef struct learner_opts {
    const char *configs[MAX_CONFIGS], *sets[64];
    int nconfigs, nsets, quick;
    double seconds;
} learner_opts;

static int on_option(void *ctx, int val, const char *arg)
{
    learner_opts *o = ctx;
    if (val == 's' && o->nsets < 64)
        o->sets[o->nsets++] = arg;
    else if (val == 't')
        o->seconds = atof(arg);
    else if (val == 'q')
        o->quick = 1;
    else if (val == 1 && arg[0] != '-' && o->nconfigs < MAX_CONFIGS)
        o->configs[o->nconfigs++] = arg;
    else {
        fprintf(stderr, "gearbox bench learner: unknown option '%s'\n", val == 's' ? "--set" : arg);
        usage(stderr);
        return -1;
    }
    return 0;
}

int gb_bench_learner(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"set", required_argument, NULL, 's'}, {"seconds", required_argument, NULL, 't'},
        {"quick", no_argument, NULL, 'q'}, GB_BENCH_OPTION_JSON, {0}};
    learner_opts o = {.seconds = -1};
    if (gb_bench_options(argc, argv, longs, 1, on_option, &o, usage))
        return GB_EXIT_USAGE;
    const char **configs = o.configs, **sets = o.sets;
    int nconfigs = o.nconfigs, nsets = o.nsets, quick = o.quick;
    double seconds = o.seconds;
    if (seconds <= 0)
        seconds = quick ? 0.2 : 2.0;
    static char paths[3][1100];
    if (nconfigs == 0) {
        char dir[1024];
        gb_bench_configs_dir(default_configs[0], dir, sizeof dir);
        for (int i = 0; i < 3; i++) {
            snprintf(paths[i], sizeof paths[i], "%.1000s/%s", dir, default_configs[i]);
            configs[nconfigs++] = paths[i];
        }
    }
    static gb_config cfg; /* large: off the stack */
    gb_error err = {0};
    for (int c = 0; c < nconfigs; c++) {
        gb_env_spec spec;
        gb_torch_space space;
        learner_figures f, early;
        int rc = gb_config_read(&cfg, configs[c], sets, nsets, &err);
        if (!rc)
            rc = gb_worker_env_space(&cfg, &spec, &space, &err);
        if (!rc)
            rc = gb_torch_set_threads((int)cfg.trainer.threads, &err);
        if (!rc)
            rc = time_learner(&cfg, &space, seconds, &f, &early, &err);
        if (rc) {
            fprintf(stderr, "gearbox bench learner: %s: %s\n", configs[c], err.msg);
            return GB_EXIT_FAILURE;
        }
        print_row(&cfg, configs[c], &f, json);
        if (early.calls)
            print_row(&cfg, configs[c], &early, json);
    }
    return GB_EXIT_OK;
}
