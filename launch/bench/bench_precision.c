/* launch/bench/bench_precision.c: `gearbox bench inference`: the policy worker's model at each
 * inference precision (policy.precision fp32, bf16, int8) in the same run: samples per CPU
 * second of the thread that runs them (policy.threads 1) of a whole act (forward, sampling,
 * log-probabilities: what a policy worker runs per batch) and of the network's forward alone,
 * at several batch sizes, with the ratio to fp32, through each of policy.kernels' kernels
 * (gearbox's C forward of a plain MLP, libtorch's modules). The models share one set of fp32
 * parameters; 20 ms slices alternate between the cases so that each sees the same machine
 * state, and the medians over rounds (rates, and ratios within a round) are reported.
 * defines: gb_bench_inference */
#include "launch/bench/bench.h"
#include "launch/commands.h"

#include "envs/env.h"
#include "runtime/base/clock.h"
#include "runtime/config/config.h"
#include "runtime/base/rng.h"
#include "workers/torch/bridge.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CASES 16

/* configs/cartpole_ppo.yaml's model; --config FILE takes another config's */
static const char default_config[] = "experiment:\n  name: bench_inference\n"
                                     "env:\n  name: CartPole-v1\n"
                                     "policy:\n  model:\n    type: mlp\n"
                                     "    hidden: [64, 64]\n    activation: tanh\n"
                                     "trainer:\n  algorithm:\n    name: ppo\n";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox bench inference [--json] [--config FILE] [--set k=v ...]\n"
            "                               [--precision fp32,bf16,int8] [--batch 1,64,256,1024]\n"
            "                               [--kernels gearbox,libtorch] [--seconds S]\n"
            "                               [--quick]\n\n"
            "The policy worker's model (default: configs/cartpole_ppo.yaml's MLP [64, 64] tanh\n"
            "on CartPole-v1) at each precision, in the same run: samples per CPU second\n"
            "(policy.threads 1) of act (forward and sampling) and of the forward alone, and the\n"
            "ratio to the first case (fp32 through the first kernels). Each precision runs\n"
            "through each policy.kernels named (gearbox: gearbox's own forward of a plain MLP,\n"
            "fp32 and int8 on cpus with AVX2 and FMA or AVX-512, else libtorch's;\n"
            "libtorch: libtorch's modules).\n"
            "S: CPU seconds per case (default 2, --quick 0.2), in 20 ms slices alternating\n"
            "between the cases; medians of the rounds.\n"
            "GEARBOX_QENGINE=onednn|qnnpack picks int8's engine.\n"
            "A model with a core (--set policy.model.core=lstm|gru|transformer) takes each\n"
            "row's state in and gives it back on every act, as at a policy worker, and runs in\n"
            "fp32 only: --precision fp32.\n");
}

/* Comma-separated list into out (at most max); returns the count, or -1. */
static int parse_list(const char *s, char out[][16], int max)
{
    int n = 0;
    while (*s && n < max) {
        size_t len = strcspn(s, ",");
        if (len == 0 || len >= 16)
            return -1;
        memcpy(out[n], s, len);
        out[n++][len] = '\0';
        s += len + (s[len] == ',');
    }
    return *s ? -1 : n;
}

static int precision_of(const char *name)
{
    static const char *const names[] = {"fp32", "bf16", "int8"};
    static const int values[] = {GB_PRECISION_FP32, GB_PRECISION_BF16, GB_PRECISION_INT8};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, names[i]) == 0)
            return values[i];
    return -1;
}

/* Acts (or runs the forward alone) on rows observations, in groups of 8 calls, for at least
 * budget_s seconds of this thread's CPU time: *rate = rows * calls / CPU seconds. With
 * policy.threads 1 libtorch computes on the calling thread, so CPU time is the model's cost
 * without the time other processes of a loaded machine hold the core. Returns 0 or the
 * model's error. */
static int time_calls(gb_torch_model *m, const void *obs, int64_t rows, int forward_only,
                      double budget_s, void *action, float *logp, float *state, double *rate,
                      gb_error *err)
{
    gb_torch_act_out o = {.action = action, .logp = logp};
    int64_t calls = 0;
    double t0 = gb_thread_cpu_s(), t = t0;
    do {
        for (int i = 0; i < 8; i++) {
            /* with a core each row's state goes in and comes back, as at a policy worker (the
             * forward alone steps from zero state) */
            int rc = forward_only ? gb_torch_model_forward(m, obs, rows, err)
                                  : gb_torch_model_act_state(m, obs, rows, 0, 0.0, NULL, state,
                                                             state, &o, err);
            if (rc)
                return rc;
        }
        calls += 8;
        t = gb_thread_cpu_s();
    } while (t - t0 < budget_s);
    *rate = (double)(rows * calls) / (t - t0);
    return 0;
}

typedef struct prec_opts {
    const char *config; /* NULL: default_config */
    const char *sets[64];
    int nsets, quick;
    double seconds;
    char precs[MAX_CASES][16], batches[MAX_CASES][16], kernel_names[2][16];
    int nprec, nbatch, nkern; /* -1: a list that did not parse */
} prec_opts;

static int on_option(void *ctx, int val, const char *arg)
{
    prec_opts *o = ctx;
    switch (val) {
    case 'c':
        o->config = arg;
        break;
    case 's':
        if (o->nsets >= 64) {
            usage(stderr);
            return -1;
        }
        o->sets[o->nsets++] = arg;
        break;
    case 'p':
        o->nprec = parse_list(arg, o->precs, MAX_CASES);
        break;
    case 'k':
        o->nkern = parse_list(arg, o->kernel_names, 2);
        break;
    case 'b':
        o->nbatch = parse_list(arg, o->batches, MAX_CASES);
        break;
    case 't':
        o->seconds = atof(arg);
        break;
    case 'q':
        o->quick = 1;
        break;
    }
    return 0;
}

/* What one run measures: every precision through every kernels (the first, fp32, the
 * reference), at every batch size. */
typedef struct prec_cases {
    int n, prec[MAX_CASES], kern[MAX_CASES];
    const char *name[MAX_CASES];
    int nbatch;
    int64_t rows[MAX_CASES], max_rows;
} prec_cases;

/* The cases of the options; returns 0, or -1 after saying which list is wrong. */
static int plan_cases(const prec_opts *o, prec_cases *c)
{
    int nprec = o->nprec;
    c->n = 0;
    for (int k = 0; k < o->nkern && nprec > 0; k++) {
        const char *kn = o->kernel_names[k];
        int kv = strcmp(kn, "gearbox") == 0    ? GB_KERNELS_GEARBOX
                 : strcmp(kn, "libtorch") == 0 ? GB_KERNELS_LIBTORCH
                                               : -1;
        for (int i = 0; i < nprec && c->n < MAX_CASES; i++, c->n++) {
            c->name[c->n] = o->precs[i];
            c->kern[c->n] = kv;
            if ((c->prec[c->n] = precision_of(o->precs[i])) < 0 || kv < 0)
                nprec = -1;
        }
    }
    if (nprec < 1 || o->nkern < 1 || o->nbatch < 1 || c->prec[0] != GB_PRECISION_FP32) {
        fprintf(stderr, "gearbox bench inference: --precision is a list of fp32, bf16, int8 "
                        "starting with fp32 (the reference), --kernels a list of gearbox, "
                        "libtorch, --batch a list of row counts\n");
        return -1;
    }
    c->nbatch = o->nbatch;
    c->max_rows = 1;
    for (int b = 0; b < o->nbatch; b++) {
        c->rows[b] = atoll(o->batches[b]);
        if (c->rows[b] < 1) {
            fprintf(stderr, "gearbox bench inference: batch '%s' is not a row count\n",
                    o->batches[b]);
            return -1;
        }
        c->max_rows = c->rows[b] > c->max_rows ? c->rows[b] : c->max_rows;
    }
    return 0;
}

/* The config (--config, else default_config) with the --set lines applied. */
static int load_config(const prec_opts *o, gb_config *cfg, gb_error *err)
{
    gb_config_marks *marks = NULL;
    int rc = o->config ? gb_config_load(cfg, &marks, o->config, err)
                       : gb_config_load_string(cfg, &marks, "bench_inference", default_config,
                                               sizeof default_config - 1, err);
    for (int i = 0; !rc && i < o->nsets; i++)
        rc = gb_config_apply_set(cfg, marks, o->sets[i], i + 1, err);
    if (!rc)
        rc = gb_config_finish(cfg, marks, err);
    gb_config_marks_free(marks);
    cfg->policy.device = GB_DEVICE_CPU;
    return rc;
}

/* The models and the inputs they run on (random observations of max_rows rows). */
typedef struct prec_bench {
    gb_torch_model *models[MAX_CASES];
    const char *engine; /* int8's quantized engine */
    void *obs, *action;
    float *logp;
    float *state; /* [max_rows, S] with a core (policy.model.core), else NULL */
} prec_bench;

static void prec_bench_free(prec_bench *pb)
{
    for (int i = 0; i < MAX_CASES; i++)
        gb_torch_model_destroy(pb->models[i]);
    free(pb->obs);
    free(pb->action);
    free(pb->logp);
    free(pb->state);
}

/* One model per case, all from one seed (the same fp32 parameters), and the inputs. */
static int prec_bench_init(prec_bench *pb, gb_config *cfg, const prec_cases *c, gb_error *err)
{
    gb_env_spec spec;
    gb_torch_space space;
    int rc;
    *pb = (prec_bench){.engine = ""};
    if ((rc = gb_worker_env_space(cfg, &spec, &space, err)) ||
        (rc = gb_torch_set_threads((int)cfg->policy.threads, err)))
        return rc;
    for (int i = 0; i < c->n; i++) {
        cfg->policy.kernels = c->kern[i];
        if ((rc = gb_torch_model_create(cfg, &space, 1, &pb->models[i], err)) ||
            (rc = gb_torch_model_set_precision(pb->models[i], c->prec[i], err)) ||
            (c->prec[i] == GB_PRECISION_INT8 &&
             (rc = gb_torch_model_int8_engine(&pb->engine, err))))
            return rc;
    }
    size_t elems = (size_t)c->max_rows;
    for (int d = 0; d < space.obs_ndim; d++)
        elems *= (size_t)space.obs_shape[d];
    pb->obs = malloc(elems * gb_dtype_size(space.obs_dtype));
    size_t action_row = space.discrete ? sizeof(int64_t) : sizeof(float) * (size_t)space.action_dim;
    pb->action = malloc((size_t)c->max_rows * action_row);
    pb->logp = malloc((size_t)c->max_rows * sizeof(float));
    int64_t S = gb_config_state_size(cfg);
    if (S > 0)
        pb->state = calloc((size_t)(c->max_rows * S), sizeof(float));
    if (!pb->obs || !pb->action || !pb->logp || (S > 0 && !pb->state))
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (size_t i = 0; i < elems; i++) {
        if (space.obs_dtype == GB_DTYPE_UINT8)
            ((uint8_t *)pb->obs)[i] = (uint8_t)gb_rng_next(&rng);
        else
            ((float *)pb->obs)[i] = (float)(gb_rng_uniform(&rng) * 2.0 - 1.0);
    }
    return 0;
}

/* "mlp [64, 64] tanh" */
static void describe_model(const gb_config *cfg, char *model, size_t cap)
{
    int off = snprintf(model, cap, "%s [",
                       gb_config_enum_name("policy.model.type", cfg->policy.model.type));
    for (int i = 0; i < cfg->policy.model.hidden.n && off < (int)cap - 16; i++)
        off += snprintf(model + off, cap - (size_t)off, "%s%lld", i ? ", " : "",
                        (long long)cfg->policy.model.hidden.v[i]);
    off += snprintf(model + off, cap - (size_t)off, "] %s",
                    gb_config_enum_name("policy.model.activation", cfg->policy.model.activation));
    if (cfg->policy.model.core != GB_CORE_NONE && off < (int)cap)
        snprintf(model + off, cap - (size_t)off, " + %s %lld",
                 gb_config_enum_name("policy.model.core", cfg->policy.model.core),
                 (long long)cfg->policy.model.core_size);
}

/* The medians over rounds of each case's act and forward rates and their ratios to case 0. */
typedef struct prec_figures {
    double act[MAX_CASES], fwd[MAX_CASES], act_ratio[MAX_CASES], fwd_ratio[MAX_CASES];
} prec_figures;

/* Short slices, cases in turn, many rounds at rows rows: each round's ratio to fp32 is taken
 * on the same load; the medians of the rates and of the ratios go into f. samples: room for
 * rounds * 4 * ncases. */
static int measure_rows(prec_bench *pb, int ncases, int64_t rows, double slice, int rounds,
                        double *samples, prec_figures *f, gb_error *err)
{
    /* samples[((i * 4) + k) * rounds + r]: k = act rate, forward rate, act ratio, fwd ratio */
#define SAMPLE(i, k, r) samples[((i) * 4 + (k)) * rounds + (r)]
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < ncases; i++) {
            int rc;
            if ((rc = time_calls(pb->models[i], pb->obs, rows, 0, slice, pb->action, pb->logp,
                                 pb->state, &SAMPLE(i, 0, r), err)) ||
                (rc = time_calls(pb->models[i], pb->obs, rows, 1, slice, pb->action, pb->logp,
                                 pb->state, &SAMPLE(i, 1, r), err)))
                return rc;
        }
        for (int i = 0; i < ncases; i++) {
            SAMPLE(i, 2, r) = SAMPLE(i, 0, r) / SAMPLE(0, 0, r);
            SAMPLE(i, 3, r) = SAMPLE(i, 1, r) / SAMPLE(0, 1, r);
        }
    }
    for (int i = 0; i < ncases; i++) {
        f->act[i] = gb_bench_quantile(&SAMPLE(i, 0, 0), rounds, 0.5);
        f->fwd[i] = gb_bench_quantile(&SAMPLE(i, 1, 0), rounds, 0.5);
        f->act_ratio[i] = gb_bench_quantile(&SAMPLE(i, 2, 0), rounds, 0.5);
        f->fwd_ratio[i] = gb_bench_quantile(&SAMPLE(i, 3, 0), rounds, 0.5);
    }
#undef SAMPLE
    return 0;
}

static void print_rows(const gb_config *cfg, const char *model, const prec_cases *c,
                       const prec_bench *pb, int64_t rows, const prec_figures *f, int json)
{
    double load[1] = {0};
    getloadavg(load, 1);
    for (int i = 0; i < c->n; i++) {
        /* what ran it: gearbox's program, or libtorch (int8: and its quantized engine) */
        const char *kernels = gb_torch_model_kernels(pb->models[i]);
        const char *qengine =
            c->prec[i] == GB_PRECISION_INT8 && strncmp(kernels, "libtorch", 8) == 0 ? pb->engine
                                                                                    : "";
        if (json)
            printf("{\"bench\": \"inference\", \"case\": \"precision\", \"env\": \"%s\", "
                   "\"model\": \"%s\", \"precision\": \"%s\", \"kernels\": \"%s\", "
                   "\"engine\": \"%s\", \"rows\": %lld, \"threads\": %lld, "
                   "\"act_samples_per_cpu_s\": %.0f, \"forward_samples_per_cpu_s\": %.0f, "
                   "\"act_ratio\": %.3f, \"forward_ratio\": %.3f, \"load1\": %.2f}\n",
                   cfg->env.name, model, c->name[i], kernels, qengine, (long long)rows,
                   (long long)cfg->policy.threads, f->act[i], f->fwd[i], f->act_ratio[i],
                   f->fwd_ratio[i], load[0]);
        else
            printf("inference  %s %s  rows %5lld  %-4s %-27s act %9.0f samples/cpu-s "
                   "(x%.2f)  forward %9.0f (x%.2f)  load %.2f\n",
                   cfg->env.name, model, (long long)rows, c->name[i],
                   qengine[0] ? qengine : kernels, f->act[i], f->act_ratio[i], f->fwd[i],
                   f->fwd_ratio[i], load[0]);
    }
    fflush(stdout);
}

/* Every batch size in turn, all cases at each. */
static int run_cases(gb_config *cfg, const prec_cases *c, double seconds, int json,
                     gb_error *err)
{
    prec_bench pb;
    int rc = prec_bench_init(&pb, cfg, c, err);
    char model[128] = "";
    describe_model(cfg, model, sizeof model);
    const double slice = 0.02;
    int rounds = (int)(seconds / (slice * 2 * c->n));
    if (rounds < 3)
        rounds = 3;
    if (rounds > 512)
        rounds = 512;
    double *samples = rc ? NULL : malloc(sizeof(double) * (size_t)rounds * 4 * (size_t)c->n);
    if (!rc && !samples)
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
    for (int b = 0; !rc && b < c->nbatch; b++) {
        prec_figures f;
        if (!(rc = measure_rows(&pb, c->n, c->rows[b], slice, rounds, samples, &f, err)))
            print_rows(cfg, model, c, &pb, c->rows[b], &f, json);
    }
    free(samples);
    prec_bench_free(&pb);
    return rc;
}

int gb_bench_inference(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'},  {"set", required_argument, NULL, 's'},
        {"precision", required_argument, NULL, 'p'}, {"kernels", required_argument, NULL, 'k'},
        {"batch", required_argument, NULL, 'b'},   {"seconds", required_argument, NULL, 't'},
        {"quick", no_argument, NULL, 'q'},         GB_BENCH_OPTION_JSON, {0}};
    prec_opts o = {.seconds = -1};
    o.nprec = parse_list("fp32,bf16,int8", o.precs, MAX_CASES);
    o.nbatch = parse_list("1,64,256,1024", o.batches, MAX_CASES);
    o.nkern = parse_list("gearbox,libtorch", o.kernel_names, 2);
    prec_cases c;
    if (gb_bench_options(argc, argv, longs, 0, on_option, &o, usage) || plan_cases(&o, &c))
        return GB_EXIT_USAGE;
    double seconds = o.seconds > 0 ? o.seconds : o.quick ? 0.2 : 2.0;
    gb_config cfg;
    gb_error err = {0};
    if (load_config(&o, &cfg, &err)) {
        fprintf(stderr, "gearbox bench inference: %s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    if (run_cases(&cfg, &c, seconds, json, &err)) {
        fprintf(stderr, "gearbox bench inference: %s\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
