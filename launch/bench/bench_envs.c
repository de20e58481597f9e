/* launch/bench/bench_envs.c: `gearbox bench envs [--json] [--env NAME [--args KEY=VALUE ...]]
 * [--wrap KEY=VALUE ...] [--ring K] [--seconds S]`: steps per second of every built-in
 * environment (or of the one named: a built-in or a shipped plugin such as gymnasium, with its
 * arguments, under the preprocessing wrappers --wrap sets as env.wrappers would) on one core,
 * alone (mode "single": one copy stepped directly, resets included) and in an environment ring
 * of K copies (mode "ring":
 * gb_env_ring_step with auto-reset, time limits and statistics, actions copied in each step as
 * an actor would). The single-copy rate measured in the same run is the reference: vs_single
 * is ring / single, the ring's overhead (or gain, from batching cache-friendly copies). The
 * JSON rows also give steps per CPU second of the stepping thread (steps_per_cpu_s), the figure
 * that holds on a machine other processes load. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "launch/bench/bench.h"
#include "launch/commands.h"
#include "runtime/base/clock.h"
#include "runtime/base/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ACTION_BLOCKS 64

/* Fills n sets of random actions of `per` bytes for the spec (per = agents × action bytes). */
static void random_actions(const gb_env_spec *s, gb_rng *rng, uint8_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (s->action.kind == GB_ENV_SPACE_DISCRETE) {
            int32_t v = (int32_t)gb_rng_below(rng, (uint64_t)s->action.n);
            memcpy(dst + 4 * i, &v, 4);
        } else {
            int d = (int)(i % (size_t)s->action.n);
            float v = s->action.low[d] + (s->action.high[d] - s->action.low[d]) *
                                             gb_rng_uniform_f(rng);
            memcpy(dst + 4 * i, &v, 4);
        }
    }
}

/* rate[0]: steps per wall-clock second; rate[1]: per CPU second of this thread. */
static int bench_single(const gb_env_interface *iface, const gb_env_args *args, double seconds,
                        double *rate, gb_error *err)
{
    void *env = NULL;
    gb_env_spec s;
    int rc = gb_env_create(iface, args, 1, &env, &s, err);
    if (rc)
        return rc;
    size_t a = (size_t)s.agents, act = gb_env_action_bytes(&s) * a;
    size_t per_action = act / 4;
    uint8_t *acts = malloc(ACTION_BLOCKS * act);
    void *obs = malloc(gb_env_obs_bytes(&s) * a);
    float *rew = malloc(a * sizeof(float));
    uint8_t *flags = malloc(3 * a);
    if (!acts || !obs || !rew || !flags) {
        rc = gb_error_set(err, GB_ENOMEM, "bench envs: out of memory");
        goto out;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 42);
    random_actions(&s, &rng, acts, ACTION_BLOCKS * per_action);
    gb_env_buffers b = {acts, obs, rew, flags, flags + a, flags + 2 * a};
    memset(flags + 2 * a, 1, a);
    if (iface->reset(env, &b)) {
        rc = gb_error_set(err, GB_EINVAL, "%s: reset failed", iface->name);
        goto out;
    }
    int64_t steps = 0, len = 0, limit = s.max_episode_steps;
    double t0 = gb_now_s(), t1 = t0, c0 = gb_thread_cpu_s();
    while (t1 - t0 < seconds) {
        for (int i = 0; i < 4096; i++, steps++) {
            b.actions = acts + (size_t)(steps & (ACTION_BLOCKS - 1)) * act;
            if (iface->step(env, &b)) {
                rc = gb_error_set(err, GB_EINVAL, "%s: step failed", iface->name);
                goto out;
            }
            int done = 1;
            for (size_t k = 0; k < a; k++)
                done &= (flags[k] | flags[a + k]) != 0;
            if (done || (limit && ++len >= limit)) {
                len = 0;
                if (iface->reset(env, &b)) {
                    rc = gb_error_set(err, GB_EINVAL, "%s: reset failed", iface->name);
                    goto out;
                }
            }
        }
        t1 = gb_now_s();
    }
    rate[0] = (double)steps / (t1 - t0);
    rate[1] = (double)steps / (gb_thread_cpu_s() - c0);
out:
    free(acts);
    free(obs);
    free(rew);
    free(flags);
    iface->destroy(env);
    return rc;
}

static int bench_ring(const gb_env_interface *iface, const gb_env_args *args, int copies,
                      double seconds, double *rate, gb_error *err)
{
    gb_env_ring *ring = NULL;
    gb_env_ring_buffers b = {0};
    uint8_t *acts = NULL;
    int rc = gb_env_ring_create(iface, args, 1, copies, 1, 0, &ring, err);
    if (rc)
        return rc;
    const gb_env_spec *s = gb_env_ring_spec(ring);
    size_t block = gb_env_action_bytes(s) * (size_t)s->agents * (size_t)copies;
    if ((rc = gb_env_ring_buffers_alloc(ring, &b, err)) || (rc = gb_env_ring_attach(ring, &b, err)))
        goto out;
    acts = malloc(ACTION_BLOCKS * block);
    if (!acts) {
        rc = gb_error_set(err, GB_ENOMEM, "bench envs: out of memory");
        goto out;
    }
    gb_rng rng;
    gb_rng_seed(&rng, 43);
    random_actions(s, &rng, acts, ACTION_BLOCKS * block / 4);
    if ((rc = gb_env_ring_reset(ring, err)))
        goto out;
    int64_t rounds = 0;
    double t0 = gb_now_s(), t1 = t0, c0 = gb_thread_cpu_s();
    while (t1 - t0 < seconds) {
        for (int i = 0; i < 64; i++, rounds++) {
            memcpy(b.actions, acts + (size_t)(rounds & (ACTION_BLOCKS - 1)) * block, block);
            if ((rc = gb_env_ring_step(ring, 0, err)))
                goto out;
        }
        t1 = gb_now_s();
    }
    rate[0] = (double)rounds * copies / (t1 - t0);
    rate[1] = (double)rounds * copies / (gb_thread_cpu_s() - c0);
out:
    free(acts);
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(ring);
    return rc;
}

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench envs [--json] [--env NAME [--args KEY=VALUE ...]] "
                 "[--wrap KEY=VALUE ...] [--ring K] [--seconds S per measurement, default 0.3]\n"
                 "  NAME: a built-in, or a shipped plugin with its env.args, e.g.\n"
                 "  --env gymnasium --args id=CartPole-v1\n"
                 "  --wrap: the preprocessing wrappers (env.wrappers), e.g. --env atari --args "
                 "game=pong --wrap frame_skip=4 screen_size=84 frame_stack=4; steps are then "
                 "the wrapped environment's\n");
}

typedef struct envs_opts {
    const char *only;
    int copies;
    double seconds;
    int in_args; /* the last option was --args (1) or --wrap (2): KEY=VALUE pairs may follow */
    gb_env_args_store args;
    gb_env_wrap_params wrap;
} envs_opts;

/* --wrap KEY=VALUE ...: one wrapper setting. Returns 0 or -1. */
static int add_wrap(envs_opts *o, const char *pair)
{
    char msg[256];
    if (gb_env_wrap_params_pair(&o->wrap, pair, msg, sizeof msg)) {
        fprintf(stderr, "gearbox bench envs: --wrap: %s\n", msg);
        return -1;
    }
    return 0;
}

/* --args KEY=VALUE ...: one pair, split in place (argv is ours). Returns 0 or -1. */
static int add_arg(envs_opts *o, const char *pair)
{
    char *kv = (char *)pair, *eq = strchr(kv, '=');
    if (!eq) {
        fprintf(stderr, "gearbox bench envs: --args takes KEY=VALUE, not '%s'\n", pair);
        bench_usage(stderr);
        return -1;
    }
    *eq = '\0'; /* key and value stay in place */
    gb_error aerr = {0};
    if (gb_env_args_add(&o->args, kv, eq + 1, &aerr)) {
        fprintf(stderr, "gearbox bench envs: %s\n", aerr.msg);
        return -1;
    }
    return 0;
}

static int on_option(void *ctx, int val, const char *arg)
{
    envs_opts *o = ctx;
    int after_args = o->in_args;
    o->in_args = val == 'a' ? 1 : val == 'w' ? 2 : val == 1 ? after_args : 0;
    switch (val) {
    case 'e':
        o->only = arg;
        return 0;
    case 'r':
        o->copies = atoi(arg);
        return 0;
    case 's':
        o->seconds = atof(arg);
        return 0;
    case 'a':
        return add_arg(o, arg);
    case 'w':
        return add_wrap(o, arg);
    default: /* 1: a KEY=VALUE after --args or --wrap, else not an option */
        if (after_args && arg[0] != '-' && strchr(arg, '='))
            return after_args == 2 ? add_wrap(o, arg) : add_arg(o, arg);
        fprintf(stderr, "gearbox bench envs: unknown option '%s'\n", arg);
        bench_usage(stderr);
        return -1;
    }
}

int gb_bench_envs(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"env", required_argument, NULL, 'e'},  {"args", required_argument, NULL, 'a'},
        {"ring", required_argument, NULL, 'r'}, {"seconds", required_argument, NULL, 's'},
        {"wrap", required_argument, NULL, 'w'},  GB_BENCH_OPTION_JSON, {0}};
    envs_opts o = {.copies = 256, .seconds = 0.3, .wrap = gb_env_wrap_params_default()};
    gb_env_args_from_config(&o.args, NULL);
    if (gb_bench_options(argc, argv, longs, 1, on_option, &o, bench_usage))
        return GB_EXIT_USAGE;
    const char *only = o.only;
    int copies = o.copies;
    double seconds = o.seconds;
    gb_env_args_store *args = &o.args;
    if (copies < 1 || !(seconds > 0)) {
        fprintf(stderr, "gearbox bench envs: --ring must be >= 1 and --seconds > 0\n");
        return GB_EXIT_USAGE;
    }
    int n, ran = 0;
    const gb_env_interface *const *all = gb_env_builtins(&n);
    gb_env_source shipped = {0};
    int wrapped = gb_env_wrap_active(&o.wrap);
    if (wrapped && !only) {
        fprintf(stderr, "gearbox bench envs: --wrap needs --env\n");
        return GB_EXIT_USAGE;
    }
    if (only && (wrapped || !gb_env_builtin_find(only))) { /* a shipped plugin, or wrapped */
        gb_error err = {0};
        if (gb_env_source_open(&shipped, only, NULL, &err)) {
            fprintf(stderr, "gearbox bench envs: %s\n", err.msg);
            return GB_EXIT_USAGE;
        }
        gb_env_source_wrap(&shipped, &o.wrap, 0);
        all = &shipped.iface;
        n = 1;
    }
    if (!json)
        printf("%-26s %14s %14s %10s   (steps/s on one core; ring of %d)\n", "environment",
               "single", "ring", "ring/single", copies);
    for (int i = 0; i < n; i++) {
        const gb_env_interface *e = all[i];
        if (only && !shipped.iface && strcmp(only, e->name) != 0)
            continue;
        ran++;
        gb_error err = {0};
        double single[2] = {0}, ring[2] = {0};
        char label[160];
        const char *id = gb_env_arg(&args->args, "id");
        if (!id)
            id = gb_env_arg(&args->args, "game");
        snprintf(label, sizeof label, "%s%s%s", e->name, shipped.iface && id ? ":" : "",
                 shipped.iface && id ? id : "");
        if (bench_single(e, &args->args, seconds, single, &err) ||
            bench_ring(e, &args->args, copies, seconds, ring, &err)) {
            fprintf(stderr, "gearbox bench envs: %s\n", err.msg);
            gb_env_source_close(&shipped);
            return GB_EXIT_FAILURE;
        }
        if (json) {
            printf("{\"bench\": \"envs\", \"env\": \"%s\", \"mode\": \"single\", \"ring\": 1, "
                   "\"steps_per_s\": %.6g, \"steps_per_cpu_s\": %.6g}\n", label, single[0],
                   single[1]);
            printf("{\"bench\": \"envs\", \"env\": \"%s\", \"mode\": \"ring\", \"ring\": %d, "
                   "\"steps_per_s\": %.6g, \"steps_per_cpu_s\": %.6g, \"vs_single\": %.4g}\n",
                   label, copies, ring[0], ring[1], ring[0] / single[0]);
        } else {
            printf("%-26s %14.4g %14.4g %10.3f\n", label, single[0], ring[0],
                   ring[0] / single[0]);
        }
        fflush(stdout);
    }
    gb_env_source_close(&shipped);
    if (!ran) {
        fprintf(stderr, "gearbox bench envs: no built-in environment named '%s'\n", only);
        return GB_EXIT_USAGE;
    }
    return GB_EXIT_OK;
}
