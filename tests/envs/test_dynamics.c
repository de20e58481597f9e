/* tests/envs/test_dynamics.c: the built-in classic-control environments against transitions
 * recorded from Gymnasium itself (tests/envs/record_gymnasium.py -> tests/data/envs/<env>.txt).
 * Two replays per episode:
 *   1. step by step: put the copy in the recorded previous state, apply the recorded action,
 *      compare observation and reward (1e-5 relative) and terminated (exact);
 *   2. whole episode through an environment ring of one copy, from the recorded start state:
 *      observations, rewards, terminated and truncated at every step, and the episode ending
 *      (auto-reset, final observation) exactly on the step where Gymnasium's ended.
 * Prints the largest relative difference seen per environment. argv[1]: the data folder. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTOL 1e-5
#define ATOL 1e-9 /* values that are exactly zero in one and denormal-small in the other */

typedef struct step_rec {
    double action[1];
    double state[4];
    double obs[6];
    double reward;
    int terminated, truncated;
} step_rec;

typedef struct episode {
    int steps, is_f32;
    double start_state[4];
    double start_obs[6];
    step_rec *rec;
} episode;

static double max_rel;

static int close_enough(double got, double want)
{
    double diff = fabs(got - want);
    double rel = diff / fmax(fabs(want), 1e-30);
    if (diff > ATOL && rel > max_rel)
        max_rel = rel;
    return diff <= RTOL * fabs(want) || diff <= ATOL;
}

static int read_num(FILE *f, double *x)
{
    char tok[64];
    if (fscanf(f, "%63s", tok) != 1)
        return -1;
    char *end;
    *x = strtod(tok, &end);
    return *end ? -1 : 0;
}

/* Reads one environment's file; returns the episode count (episodes malloc'd) or -1. */
static int load(const char *path, char *id, int *sd, int *od, int *ad, char *kind,
                episode **out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char line[256];
    int c;
    while ((c = fgetc(f)) == '#')
        if (!fgets(line, sizeof line, f))
            break;
    ungetc(c, f);
    if (fscanf(f, " env %63s %d %d %d %15s", id, sd, od, ad, kind) != 5) {
        fclose(f);
        return -1;
    }
    int n = 0, cap = 16;
    episode *eps = calloc((size_t)cap, sizeof *eps);
    char word[32];
    while (fscanf(f, "%31s", word) == 1) {
        if (strcmp(word, "episode") != 0)
            break;
        episode *e = &eps[n++];
        if (fscanf(f, "%d %d", &e->steps, &e->is_f32) != 2)
            break;
        for (int i = 0; i < *sd; i++)
            read_num(f, &e->start_state[i]);
        for (int i = 0; i < *od; i++)
            read_num(f, &e->start_obs[i]);
        e->rec = calloc((size_t)e->steps, sizeof *e->rec);
        for (int t = 0; t < e->steps; t++) {
            step_rec *r = &e->rec[t];
            double term = -1, trunc = -1;
            for (int i = 0; i < *ad; i++)
                read_num(f, &r->action[i]);
            for (int i = 0; i < *sd; i++)
                read_num(f, &r->state[i]);
            for (int i = 0; i < *od; i++)
                read_num(f, &r->obs[i]);
            read_num(f, &r->reward);
            read_num(f, &term);
            read_num(f, &trunc);
            r->terminated = (int)term;
            r->truncated = (int)trunc;
        }
        if (n == cap)
            break;
    }
    fclose(f);
    *out = eps;
    return n;
}

static void write_action(void *dst, const char *kind, const double *a)
{
    if (strcmp(kind, "discrete") == 0)
        *(int32_t *)dst = (int32_t)a[0];
    else
        *(float *)dst = (float)a[0];
}

static void replay_steps(const gb_env_interface *iface, const episode *e, int sd, int od,
                         const char *kind)
{
    gb_error err = {0};
    void *env = NULL;
    gb_env_spec spec;
    CHECK_OK(gb_env_create(iface, NULL, 1, &env, &spec, &err));
    if (!env)
        return;
    CHECK_EQ_INT(spec.obs.shape[0], od);
    float obs[8];
    float reward;
    uint8_t term, trunc, acting;
    union {
        int32_t i;
        float f;
    } action;
    gb_env_buffers b = {&action, obs, &reward, &term, &trunc, &acting};
    CHECK_EQ_INT(gb_env_builtin_set_state(iface, env, e->start_state, sd, obs), 0);
    for (int i = 0; i < od; i++)
        CHECK_MSG(close_enough(obs[i], e->start_obs[i]), "start obs[%d] %.9g vs %.9g", i,
                  obs[i], e->start_obs[i]);
    int bad = 0;
    for (int t = 0; t < e->steps && bad < 5; t++) {
        const double *prev = t ? e->rec[t - 1].state : e->start_state;
        gb_env_builtin_set_state(iface, env, prev, sd, NULL);
        write_action(&action, kind, e->rec[t].action);
        CHECK_EQ_INT(iface->step(env, &b), 0);
        int ok = 1;
        for (int i = 0; i < od; i++)
            ok &= close_enough(obs[i], e->rec[t].obs[i]);
        ok &= close_enough(reward, e->rec[t].reward);
        ok &= term == e->rec[t].terminated;
        CHECK_MSG(ok, "%s step %d: obs (%.9g %.9g ...) vs (%.9g %.9g ...), reward %.9g vs %.9g, "
                      "terminated %d vs %d",
                  iface->name, t, obs[0], obs[1], e->rec[t].obs[0], e->rec[t].obs[1], reward,
                  e->rec[t].reward, term, e->rec[t].terminated);
        bad += !ok;
    }
    iface->destroy(env);
}

static void replay_episode(const gb_env_interface *iface, const episode *e, int sd, int od,
                           const char *kind)
{
    gb_error err = {0};
    gb_env_ring *ring = NULL;
    CHECK_OK(gb_env_ring_create(iface, NULL, 7, 1, 1, 0, &ring, &err));
    if (!ring)
        return;
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &b, &err));
    CHECK_OK(gb_env_ring_attach(ring, &b, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    CHECK_EQ_INT(gb_env_builtin_set_state(iface, gb_env_ring_copy(ring, 0), e->start_state, sd,
                                          b.obs),
                 0);
    const float *obs = b.obs, *final_obs = b.final_obs;
    int bad = 0;
    for (int t = 0; t < e->steps && bad < 5; t++) {
        write_action(b.actions, kind, e->rec[t].action);
        CHECK_OK(gb_env_ring_step(ring, 0, &err));
        const step_rec *r = &e->rec[t];
        int last = t == e->steps - 1;
        const float *o = last ? final_obs : obs;
        int ok = 1;
        for (int i = 0; i < od; i++)
            ok &= close_enough(o[i], r->obs[i]);
        ok &= close_enough(b.rewards[0], r->reward);
        ok &= b.terminated[0] == r->terminated && b.truncated[0] == r->truncated;
        ok &= gb_env_ring_stats(ring)[0].episodes == (last ? 1 : 0);
        CHECK_MSG(ok, "%s whole episode, step %d of %d: obs (%.9g %.9g) vs (%.9g %.9g), reward "
                      "%.9g vs %.9g, terminated %d vs %d, truncated %d vs %d, episodes %lld",
                  iface->name, t, e->steps, o[0], o[1], r->obs[0], r->obs[1], b.rewards[0],
                  r->reward, b.terminated[0], r->terminated, b.truncated[0], r->truncated,
                  (long long)gb_env_ring_stats(ring)[0].episodes);
        bad += !ok;
    }
    CHECK_EQ_INT(gb_env_ring_stats(ring)[0].last_length, e->steps);
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(ring);
}

static const char *data_dir = "tests/data/envs";

static void check_env(const char *file)
{
    char path[1024], id[64], kind[16];
    int sd, od, ad;
    episode *eps = NULL;
    snprintf(path, sizeof path, "%s/%s", data_dir, file);
    int n = load(path, id, &sd, &od, &ad, kind, &eps);
    CHECK_MSG(n > 0, "no episodes in %s", path);
    if (n <= 0)
        return;
    const gb_env_interface *iface = gb_env_builtin_find(id);
    CHECK_MSG(iface != NULL, "no built-in %s", id);
    max_rel = 0;
    int steps = 0;
    for (int i = 0; iface && i < n; i++) {
        int representable = 1;
        for (int k = 0; k < sd; k++)
            representable &= (double)(float)eps[i].start_state[k] == eps[i].start_state[k];
        if (strcmp(id, "MountainCarContinuous-v0") == 0) /* set_state infers the state type */
            CHECK_EQ_INT(representable, eps[i].is_f32);
        replay_steps(iface, &eps[i], sd, od, kind);
        replay_episode(iface, &eps[i], sd, od, kind);
        steps += eps[i].steps;
    }
    fprintf(stderr, "%-26s %d episodes, %5d steps, largest relative difference %.3g\n", id, n,
            steps, max_rel);
    for (int i = 0; i < n; i++)
        free(eps[i].rec);
    free(eps);
}

static void test_cartpole(void) { check_env("CartPole-v1.txt"); }
static void test_acrobot(void) { check_env("Acrobot-v1.txt"); }
static void test_mountain_car(void) { check_env("MountainCar-v0.txt"); }
static void test_mountain_car_continuous(void) { check_env("MountainCarContinuous-v0.txt"); }
static void test_pendulum(void) { check_env("Pendulum-v1.txt"); }

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    TEST_RUN(test_cartpole);
    TEST_RUN(test_acrobot);
    TEST_RUN(test_mountain_car);
    TEST_RUN(test_mountain_car_continuous);
    TEST_RUN(test_pendulum);
    return test_main_result();
}
