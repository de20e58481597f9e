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
            "through each policy.kernels named (gearbox: gearbox's own forward of a plain MLP\n"
            "on cpus with AVX-512 VNNI, else libtorch's; libtorch: libtorch's modules).\n"
            "S: CPU seconds per case (default 2, --quick 0.2), in 20 ms slices alternating\n"
            "between the cases; medians of the rounds.\n"
            "GEARBOX_QENGINE=onednn|qnnpack picks int8's engine.\n");
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

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Acts (or runs the forward alone) on rows observations, in groups of 8 calls, for at least
 * budget_s seconds of this thread's CPU time: *rate = rows * calls / CPU seconds. With
 * policy.threads 1 libtorch computes on the calling thread, so CPU time is the model's cost
 * without the time other processes of a loaded machine hold the core. Returns 0 or the
 * model's error. */
static int time_calls(gb_torch_model *m, const void *obs, int64_t rows, int forward_only,
                      double budget_s, void *action, float *logp, double *rate, gb_error *err)
{
    gb_torch_act_out o = {.action = action, .logp = logp};
    int64_t calls = 0;
    double t0 = thread_cpu_s(), t = t0;
    do {
        for (int i = 0; i < 8; i++) {
            int rc = forward_only ? gb_torch_model_forward(m, obs, rows, err)
                                  : gb_torch_model_act(m, obs, rows, 0, 0.0, &o, err);
            if (rc)
                return rc;
        }
        calls += 8;
        t = thread_cpu_s();
    } while (t - t0 < budget_s);
    *rate = (double)(rows * calls) / (t - t0);
    return 0;
}

int gb_bench_inference(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        usage(stdout);
        return GB_EXIT_OK;
    }
    const char *config = NULL;
    const char *sets[64];
    int nsets = 0, quick = 0;
    double seconds = -1;
    char precs[MAX_CASES][16], batches[MAX_CASES][16];
    int nprec = parse_list("fp32,bf16,int8", precs, MAX_CASES);
    int nbatch = parse_list("1,64,256,1024", batches, MAX_CASES);
    char kernel_names[2][16];
    int nkern = parse_list("gearbox,libtorch", kernel_names, 2);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && nsets < 64)
            sets[nsets++] = argv[++i];
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc)
            nprec = parse_list(argv[++i], precs, MAX_CASES);
        else if (strcmp(argv[i], "--kernels") == 0 && i + 1 < argc)
            nkern = parse_list(argv[++i], kernel_names, 2);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            nbatch = parse_list(argv[++i], batches, MAX_CASES);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--json") != 0) {
            usage(stderr);
            return GB_EXIT_USAGE;
        }
    }
    /* the cases: every precision through every kernels, the first (fp32) the reference */
    int prec[MAX_CASES], kern[MAX_CASES], ncase = 0;
    const char *prec_name[MAX_CASES];
    for (int k = 0; k < nkern && nprec > 0; k++) {
        int kv = strcmp(kernel_names[k], "gearbox") == 0    ? GB_KERNELS_GEARBOX
                 : strcmp(kernel_names[k], "libtorch") == 0 ? GB_KERNELS_LIBTORCH
                                                            : -1;
        for (int i = 0; i < nprec && ncase < MAX_CASES; i++, ncase++) {
            prec_name[ncase] = precs[i];
            kern[ncase] = kv;
            if ((prec[ncase] = precision_of(precs[i])) < 0 || kv < 0)
                nprec = -1;
        }
    }
    if (nprec < 1 || nkern < 1 || nbatch < 1 || prec[0] != GB_PRECISION_FP32) {
        fprintf(stderr, "gearbox bench inference: --precision is a list of fp32, bf16, int8 "
                        "starting with fp32 (the reference), --kernels a list of gearbox, "
                        "libtorch, --batch a list of row counts\n");
        return GB_EXIT_USAGE;
    }
    nprec = ncase;
    if (seconds <= 0)
        seconds = quick ? 0.2 : 2.0;

    gb_config cfg;
    gb_config_marks *marks = NULL;
    gb_error err = {0};
    int rc = config ? gb_config_load(&cfg, &marks, config, &err)
                    : gb_config_load_string(&cfg, &marks, "bench_inference", default_config,
                                            sizeof default_config - 1, &err);
    for (int i = 0; !rc && i < nsets; i++)
        rc = gb_config_apply_set(&cfg, marks, sets[i], i + 1, &err);
    if (!rc)
        rc = gb_config_finish(&cfg, marks, &err);
    gb_config_marks_free(marks);
    if (rc) {
        fprintf(stderr, "gearbox bench inference: %s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    cfg.policy.device = GB_DEVICE_CPU;
    gb_env_spec spec;
    gb_torch_space space;
    gb_torch_model *models[MAX_CASES] = {0};
    const char *engine = "";
    int64_t max_rows = 1;
    int64_t rows[MAX_CASES];
    for (int b = 0; b < nbatch; b++) {
        rows[b] = atoll(batches[b]);
        if (rows[b] < 1) {
            fprintf(stderr, "gearbox bench inference: batch '%s' is not a row count\n",
                    batches[b]);
            return GB_EXIT_USAGE;
        }
        max_rows = rows[b] > max_rows ? rows[b] : max_rows;
    }
    void *obs = NULL, *action = NULL;
    float *logp = NULL;
    if ((rc = gb_worker_env_space(&cfg, &spec, &space, &err)) ||
        (rc = gb_torch_set_threads((int)cfg.policy.threads, &err)))
        goto done;
    /* one seed: every precision's model starts from the same fp32 parameters */
    for (int i = 0; i < nprec; i++) {
        cfg.policy.kernels = kern[i];
        if ((rc = gb_torch_model_create(&cfg, &space, 1, &models[i], &err)) ||
            (rc = gb_torch_model_set_precision(models[i], prec[i], &err)) ||
            (prec[i] == GB_PRECISION_INT8 && (rc = gb_torch_model_int8_engine(&engine, &err))))
            goto done;
    }
    size_t obs_row = gb_dtype_size(space.obs_dtype);
    for (int d = 0; d < space.obs_ndim; d++)
        obs_row *= (size_t)space.obs_shape[d];
    obs = malloc((size_t)max_rows * obs_row);
    size_t action_row = space.discrete ? sizeof(int64_t) : sizeof(float) * (size_t)space.action_dim;
    action = malloc((size_t)max_rows * action_row);
    logp = malloc((size_t)max_rows * sizeof(float));
    if (!obs || !action || !logp) {
        rc = gb_error_set(&err, GB_ENOMEM, "out of memory");
        goto done;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (size_t i = 0; i < (size_t)max_rows * obs_row / gb_dtype_size(space.obs_dtype); i++) {
        if (space.obs_dtype == GB_DTYPE_UINT8)
            ((uint8_t *)obs)[i] = (uint8_t)gb_rng_next(&rng);
        else
            ((float *)obs)[i] = (float)(gb_rng_uniform(&rng) * 2.0 - 1.0);
    }
    char model[128] = "";
    int off = snprintf(model, sizeof model, "%s [", gb_config_enum_name("policy.model.type",
                                                                        cfg.policy.model.type));
    for (int i = 0; i < cfg.policy.model.hidden.n && off < (int)sizeof model - 16; i++)
        off += snprintf(model + off, sizeof model - (size_t)off, "%s%lld", i ? ", " : "",
                        (long long)cfg.policy.model.hidden.v[i]);
    snprintf(model + off, sizeof model - (size_t)off, "] %s",
             gb_config_enum_name("policy.model.activation", cfg.policy.model.activation));
    /* short slices, precisions in turn, many rounds: each round's ratio to fp32 is taken on
     * the same load; the medians of the rates and of the ratios are reported */
    const double slice = 0.02;
    int rounds = (int)(seconds / (slice * 2 * nprec));
    if (rounds < 3)
        rounds = 3;
    if (rounds > 512)
        rounds = 512;
    double *samples = malloc(sizeof(double) * (size_t)rounds * 4 * (size_t)nprec);
    if (!samples) {
        rc = gb_error_set(&err, GB_ENOMEM, "out of memory");
        goto done;
    }
    for (int b = 0; b < nbatch; b++) {
        /* samples[((i * 4) + k) * rounds + r]: k = act rate, forward rate, act ratio, fwd ratio */
        double act[MAX_CASES], fwd[MAX_CASES], act_ratio[MAX_CASES], fwd_ratio[MAX_CASES];
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < nprec; i++) {
                double ra, rf;
                if ((rc = time_calls(models[i], obs, rows[b], 0, slice, action, logp, &ra,
                                     &err)) ||
                    (rc = time_calls(models[i], obs, rows[b], 1, slice, action, logp, &rf,
                                     &err))) {
                    free(samples);
                    goto done;
                }
                samples[(i * 4 + 0) * rounds + r] = ra;
                samples[(i * 4 + 1) * rounds + r] = rf;
            }
            for (int i = 0; i < nprec; i++) {
                samples[(i * 4 + 2) * rounds + r] = samples[(i * 4 + 0) * rounds + r] /
                                                    samples[(0 * 4 + 0) * rounds + r];
                samples[(i * 4 + 3) * rounds + r] = samples[(i * 4 + 1) * rounds + r] /
                                                    samples[(0 * 4 + 1) * rounds + r];
            }
        }
        for (int i = 0; i < nprec; i++) {
            act[i] = gb_bench_quantile(samples + (i * 4 + 0) * rounds, rounds, 0.5);
            fwd[i] = gb_bench_quantile(samples + (i * 4 + 1) * rounds, rounds, 0.5);
            act_ratio[i] = gb_bench_quantile(samples + (i * 4 + 2) * rounds, rounds, 0.5);
            fwd_ratio[i] = gb_bench_quantile(samples + (i * 4 + 3) * rounds, rounds, 0.5);
        }
        double load[1] = {0};
        getloadavg(load, 1);
        for (int i = 0; i < nprec; i++) {
            /* what ran it: gearbox's program, or libtorch (int8: and its quantized engine) */
            const char *kernels = gb_torch_model_kernels(models[i]);
            const char *qengine =
                prec[i] == GB_PRECISION_INT8 && strncmp(kernels, "libtorch", 8) == 0 ? engine
                                                                                       : "";
            if (json)
                printf("{\"bench\": \"inference\", \"case\": \"precision\", \"env\": \"%s\", "
                       "\"model\": \"%s\", \"precision\": \"%s\", \"kernels\": \"%s\", "
                       "\"engine\": \"%s\", \"rows\": %lld, \"threads\": %lld, "
                       "\"act_samples_per_cpu_s\": %.0f, \"forward_samples_per_cpu_s\": %.0f, "
                       "\"act_ratio\": %.3f, \"forward_ratio\": %.3f, \"load1\": %.2f}\n",
                       cfg.env.name, model, prec_name[i], kernels, qengine, (long long)rows[b],
                       (long long)cfg.policy.threads, act[i], fwd[i], act_ratio[i],
                       fwd_ratio[i], load[0]);
            else
                printf("inference  %s %s  rows %5lld  %-4s %-27s act %9.0f samples/cpu-s "
                       "(x%.2f)  forward %9.0f (x%.2f)  load %.2f\n",
                       cfg.env.name, model, (long long)rows[b], prec_name[i],
                       qengine[0] ? qengine : kernels, act[i], act_ratio[i], fwd[i],
                       fwd_ratio[i], load[0]);
        }
        fflush(stdout);
    }
    free(samples);
done:
    for (int i = 0; i < MAX_CASES; i++)
        gb_torch_model_destroy(models[i]);
    free(obs);
    free(action);
    free(logp);
    if (rc) {
        fprintf(stderr, "gearbox bench inference: %s\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
