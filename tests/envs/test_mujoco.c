/* tests/envs/test_mujoco.c: the MuJoCo environments (envs/mujoco) against transitions recorded
 * from Gymnasium 1.4.0's own v5 environments on the same MuJoCo build
 * (tests/envs/record_mujoco.py -> tests/data/envs/<env>.txt.gz). Per episode, made with the
 * episode's env.args:
 *   1. step by step: put the copy in the recorded state before the step (qpos, qvel, the
 *      solver's warm start, the torso's xpos as mj_step left it), apply the recorded action,
 *      compare observation, reward and terminated;
 *   2. whole episode through an environment ring of one copy from the recorded start state:
 *      every observation, reward and flag, and the episode ending exactly where Gymnasium's did.
 * Same library, same model file, same operations in the same order: the float64 values are
 * identical, so gearbox's float32 observation and reward must equal Gymnasium's float64 ones
 * rounded to float32, bit for bit (the test prints the largest difference seen, expected 0).
 * Also: reset noise (uniform or normal, of reset_noise_scale), argument errors, and render()
 * following the state.
 * argv[1]: the data folder. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 8

typedef struct episode {
    int steps, obs_dim, nargs;
    char keys[MAX_ARGS][128], values[MAX_ARGS][128];
    const char *kp[MAX_ARGS], *vp[MAX_ARGS];
    gb_env_args args;
    double *start; /* qpos, qvel, obs */
    double *rec;   /* per step: action, qpos, qvel, warm start, xpos, obs, reward, term, trunc */
} episode;

typedef struct data {
    char id[64];
    int nq, nv, nu, n;
    episode eps[8];
} data;

static const char *data_dir = "tests/data/envs";
static double max_diff; /* largest |gearbox - float32(Gymnasium)| of an environment */

static int stride(const data *D, const episode *e)
{
    return D->nu + D->nq + 2 * D->nv + 3 + e->obs_dim + 3;
}

static int read_nums(FILE *f, double *x, int n)
{
    char tok[64];
    for (int i = 0; i < n; i++) {
        char *end;
        if (fscanf(f, "%63s", tok) != 1)
            return -1;
        x[i] = strtod(tok, &end);
        if (*end)
            return -1;
    }
    return 0;
}

/* Reads <data_dir>/<file> through gzip; returns 0 or -1. */
static int load(const char *file, data *D)
{
    char cmd[1200], word[64], line[512];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s/%s'", data_dir, file);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    int c;
    while ((c = fgetc(f)) == '#')
        if (!fgets(line, sizeof line, f))
            break;
    ungetc(c, f);
    int rc = fscanf(f, " env %63s %d %d %d", D->id, &D->nq, &D->nv, &D->nu) == 4 ? 0 : -1;
    D->n = 0;
    while (rc == 0 && D->n < 8 && fscanf(f, "%63s", word) == 1 && strcmp(word, "episode") == 0) {
        episode *e = &D->eps[D->n++];
        if (fscanf(f, "%d %d %d", &e->steps, &e->obs_dim, &e->nargs) != 3 || e->nargs > MAX_ARGS)
            rc = -1;
        for (int i = 0; rc == 0 && i < e->nargs; i++) {
            char kv[128], *eq;
            if (fscanf(f, "%127s", kv) != 1 || !(eq = strchr(kv, '=')))
                rc = -1;
            else {
                *eq = '\0';
                snprintf(e->keys[i], sizeof e->keys[i], "%s", kv);
                snprintf(e->values[i], sizeof e->values[i], "%s", eq + 1);
                e->kp[i] = e->keys[i];
                e->vp[i] = e->values[i];
            }
        }
        e->args = (gb_env_args){e->nargs, e->kp, e->vp};
        e->start = calloc((size_t)(D->nq + D->nv + e->obs_dim), sizeof(double));
        e->rec = calloc((size_t)e->steps * (size_t)stride(D, e), sizeof(double));
        if (rc || fscanf(f, "%63s", word) != 1 || strcmp(word, "start") ||
            read_nums(f, e->start, D->nq + D->nv + e->obs_dim))
            rc = -1;
        for (int t = 0; rc == 0 && t < e->steps; t++)
            if (fscanf(f, "%63s", word) != 1 || strcmp(word, "step") ||
                read_nums(f, e->rec + (size_t)t * (size_t)stride(D, e), stride(D, e)))
                rc = -1;
    }
    return pclose(f) == 0 ? rc : -1;
}

/* Pointers into one recorded step. */
typedef struct step_view {
    const double *action, *state, *obs;
    double reward;
    int terminated, truncated;
} step_view;

static step_view at(const data *D, const episode *e, int t)
{
    const double *r = e->rec + (size_t)t * (size_t)stride(D, e);
    const double *obs = r + D->nu + D->nq + 2 * D->nv + 3;
    return (step_view){r, r + D->nu, obs, obs[e->obs_dim], (int)obs[e->obs_dim + 1],
                       (int)obs[e->obs_dim + 2]};
}

/* gearbox's float32 value against Gymnasium's float64 one rounded to float32. */
static int same(float got, double want)
{
    double diff = fabs((double)got - (double)(float)want);
    if (diff > max_diff || isnan(diff))
        max_diff = isnan(diff) ? INFINITY : diff;
    return got == (float)want;
}

static int same_obs(const float *got, const double *want, int n)
{
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= same(got[i], want[i]);
    return ok;
}

static void replay_steps(const gb_env_interface *iface, const data *D, const episode *e)
{
    gb_error err = {0};
    void *env = NULL;
    gb_env_spec spec;
    CHECK_OK(gb_env_create(iface, &e->args, 1, &env, &spec, &err));
    if (!env)
        return;
    CHECK_EQ_INT(spec.obs.shape[0], e->obs_dim);
    CHECK_EQ_INT(spec.action.n, D->nu);
    float *obs = calloc((size_t)e->obs_dim, sizeof(float)), action[16], reward;
    uint8_t term, trunc, acting;
    gb_env_buffers b = {action, obs, &reward, &term, &trunc, &acting};
    CHECK_EQ_INT(gb_env_builtin_set_state(iface, env, e->start, D->nq + D->nv, obs), 0);
    CHECK_MSG(same_obs(obs, e->start + D->nq + D->nv, e->obs_dim), "%s: start observation",
              D->id);
    int bad = 0;
    for (int t = 0; t < e->steps && bad < 3; t++) {
        if (t)
            gb_env_builtin_set_state(iface, env, at(D, e, t - 1).state, D->nq + 2 * D->nv + 3,
                                     NULL);
        step_view r = at(D, e, t);
        for (int i = 0; i < D->nu; i++)
            action[i] = (float)r.action[i];
        CHECK_EQ_INT(iface->step(env, &b), 0);
        int ok = same_obs(obs, r.obs, e->obs_dim) & same(reward, r.reward) &
                 (term == r.terminated);
        CHECK_MSG(ok, "%s step %d: obs (%.9g %.9g ...) vs (%.9g %.9g ...), reward %.9g vs %.9g, "
                      "terminated %d vs %d",
                  D->id, t, obs[0], obs[1], r.obs[0], r.obs[1], reward, r.reward, term,
                  r.terminated);
        bad += !ok;
    }
    free(obs);
    iface->destroy(env);
}

static void replay_episode(const gb_env_interface *iface, const data *D, const episode *e)
{
    gb_error err = {0};
    gb_env_ring *ring = NULL;
    CHECK_OK(gb_env_ring_create(iface, &e->args, 7, 1, 1, 0, &ring, &err));
    if (!ring)
        return;
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &b, &err));
    CHECK_OK(gb_env_ring_attach(ring, &b, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    CHECK_EQ_INT(gb_env_builtin_set_state(iface, gb_env_ring_copy(ring, 0), e->start,
                                          D->nq + D->nv, b.obs),
                 0);
    int bad = 0;
    for (int t = 0; t < e->steps && bad < 3; t++) {
        step_view r = at(D, e, t);
        for (int i = 0; i < D->nu; i++)
            ((float *)b.actions)[i] = (float)r.action[i];
        CHECK_OK(gb_env_ring_step(ring, 0, &err));
        /* the last step of a terminated episode: the ring has reset, the step's own
         * observation is the final one */
        int ended = r.terminated || r.truncated;
        const float *o = ended ? b.final_obs : b.obs;
        int ok = same_obs(o, r.obs, e->obs_dim) & same(b.rewards[0], r.reward) &
                 (b.terminated[0] == r.terminated) & (b.truncated[0] == r.truncated) &
                 (gb_env_ring_stats(ring)[0].episodes == ended);
        CHECK_MSG(ok, "%s whole episode, step %d of %d: obs (%.9g %.9g) vs (%.9g %.9g), reward "
                      "%.9g vs %.9g, terminated %d vs %d, episodes %lld",
                  D->id, t, e->steps, o[0], o[1], r.obs[0], r.obs[1], b.rewards[0], r.reward,
                  b.terminated[0], r.terminated, (long long)gb_env_ring_stats(ring)[0].episodes);
        bad += !ok;
    }
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(ring);
}

static void check_env(const char *name)
{
    char file[128];
    snprintf(file, sizeof file, "%s.txt.gz", name);
    data *D = calloc(1, sizeof *D);
    CHECK_MSG(load(file, D) == 0 && D->n > 0, "cannot read %s/%s", data_dir, file);
    const gb_env_interface *iface = gb_env_builtin_find(D->id);
    CHECK_MSG(iface != NULL && strcmp(D->id, name) == 0, "no built-in %s", D->id);
    max_diff = 0;
    int steps = 0, ended = 0;
    for (int i = 0; iface && i < D->n; i++) {
        replay_steps(iface, D, &D->eps[i]);
        replay_episode(iface, D, &D->eps[i]);
        steps += D->eps[i].steps;
        ended += D->eps[i].steps > 0 && at(D, &D->eps[i], D->eps[i].steps - 1).terminated;
    }
    fprintf(stderr, "%-15s %d episodes (%d terminated), %4d steps, largest difference %.3g\n",
            name, D->n, ended, steps, max_diff);
    for (int i = 0; i < D->n; i++) {
        free(D->eps[i].start);
        free(D->eps[i].rec);
    }
    free(D);
}

static void test_hopper(void) { check_env("Hopper-v5"); }
static void test_half_cheetah(void) { check_env("HalfCheetah-v5"); }
static void test_walker2d(void) { check_env("Walker2d-v5"); }
static void test_ant(void) { check_env("Ant-v5"); }

/* Reset noise of scale s over many resets: qpos - qpos0 and qvel uniform in [-s, s] (mean 0,
 * deviation s / sqrt(3)), or qvel normal (deviation s) for HalfCheetah and Ant. Read from the
 * observation with the x coordinate kept (qpos then qvel). */
static void check_noise(const gb_env_interface *iface, int nq, int nv, int normal)
{
    gb_error err = {0};
    const char *k[] = {"exclude_current_positions_from_observation", "reset_noise_scale",
                       "include_cfrc_ext_in_observation"};
    const char *v[] = {"false", "0.25", "false"};
    gb_env_args args = {iface == &gb_env_ant ? 3 : 2, k, v};
    void *env = NULL, *ref = NULL;
    gb_env_spec spec;
    CHECK_OK(gb_env_create(iface, &args, 3, &env, &spec, &err));
    const char *k0[] = {"exclude_current_positions_from_observation", "reset_noise_scale",
                        "include_cfrc_ext_in_observation"};
    const char *v0[] = {"false", "0", "false"};
    gb_env_args args0 = {args.count, k0, v0};
    CHECK_OK(gb_env_create(iface, &args0, 3, &ref, &spec, &err));
    if (!env || !ref)
        return;
    CHECK_EQ_INT(spec.obs.shape[0], nq + nv);
    float obs[64], init[64];
    gb_env_buffers b = {NULL, init, NULL, NULL, NULL, NULL};
    iface->reset(ref, &b); /* scale 0: qpos0 and zero velocities */
    b.obs = obs;
    const int n = 4000;
    double sum[2] = {0}, sq[2] = {0}, most[2] = {0};
    for (int r = 0; r < n; r++) {
        iface->reset(env, &b);
        for (int i = 0; i < nq + nv; i++) {
            double x = (double)obs[i] - (double)init[i];
            int g = i >= nq;
            sum[g] += x;
            sq[g] += x * x;
            most[g] = fmax(most[g], fabs(x));
        }
    }
    for (int g = 0; g < 2; g++) {
        double cnt = (double)n * (g ? nv : nq), mean = sum[g] / cnt;
        double sd = sqrt(sq[g] / cnt - mean * mean);
        double want = g && normal ? 0.25 : 0.25 / sqrt(3.0);
        CHECK_MSG(fabs(mean) < 0.01 && fabs(sd - want) < 0.01 * 0.25 * 4,
                  "%s %s noise: mean %.4f, deviation %.4f (want 0, %.4f)", iface->name,
                  g ? "qvel" : "qpos", mean, sd, want);
        if (!(g && normal))
            CHECK_MSG(most[g] <= 0.25 + 1e-6, "%s: noise %.4f beyond the scale", iface->name,
                      most[g]);
        else
            CHECK_MSG(most[g] > 0.25 * 2.5, "%s: normal noise never beyond 2.5 deviations",
                      iface->name);
    }
    iface->destroy(env);
    iface->destroy(ref);
}

static void test_reset_noise(void)
{
    check_noise(&gb_env_hopper, 6, 6, 0);
    check_noise(&gb_env_walker2d, 9, 9, 0);
    check_noise(&gb_env_half_cheetah, 9, 9, 1);
    check_noise(&gb_env_ant, 15, 14, 1);
}

/* create() refuses bad arguments with a message naming the environment and the key. */
static void refused(const gb_env_interface *iface, const char *key, const char *value,
                    const char *want)
{
    char msg[1024] = "";
    gb_env_spec spec;
    const char *k[] = {key}, *v[] = {value};
    gb_env_args args = {1, k, v};
    void *env = iface->create(&args, 1, &spec, msg, sizeof msg);
    CHECK_MSG(!env && strstr(msg, iface->name) && strstr(msg, want),
              "%s %s=%s: got '%s', want a message with '%s'", iface->name, key, value, msg, want);
    iface->destroy(env);
}

static void test_bad_args(void)
{
    refused(&gb_env_ant, "use_contact_forces", "true", "unknown argument 'use_contact_forces'");
    refused(&gb_env_half_cheetah, "healthy_reward", "1", "unknown argument 'healthy_reward'");
    refused(&gb_env_hopper, "healthy_z_range", "1.0", "healthy_z_range must be a range");
    refused(&gb_env_hopper, "healthy_z_range", "2, 1", "low <= high");
    refused(&gb_env_walker2d, "terminate_when_unhealthy", "maybe", "true or false");
    refused(&gb_env_walker2d, "frame_skip", "0", "frame_skip must be an integer");
    refused(&gb_env_ant, "main_body", "tail", "main_body 'tail' is not a body");
    refused(&gb_env_hopper, "xml_file", "no_such_model.xml", "cannot load the model");
    refused(&gb_env_hopper, "ctrl_cost_weight", "nan", "finite number");
}

/* The mean row of the body's pixels (neither sky nor ground: above the ground line) in a
 * render of Hopper set to qpos; -1 when none. */
static double body_row(const gb_env_interface *iface, void *env, const double *qpos, uint8_t *rgb,
                       int h, int w)
{
    double state[12] = {0};
    memcpy(state, qpos, 6 * sizeof(double));
    CHECK_EQ_INT(gb_env_builtin_set_state(iface, env, state, 12, NULL), 0);
    CHECK_EQ_INT(iface->render(env, rgb), 0);
    const uint8_t *sky = rgb; /* the top-left pixel */
    double sum = 0, n = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *p = rgb + 3 * ((size_t)y * (size_t)w + (size_t)x);
            if (memcmp(p, sky, 3) != 0 && y < h - 60) {
                sum += y;
                n++;
            }
        }
    return n ? sum / n : -1;
}

/* render() draws the state: raising the hopper (off the ground) by 0.3 m raises its pixels by
 * 0.3 m at 120 pixels a metre; moving it along x (the view follows it) leaves them in place. */
static void test_render_follows_state(void)
{
    gb_error err = {0};
    const gb_env_interface *iface = &gb_env_hopper;
    void *env = NULL;
    gb_env_spec spec;
    CHECK_OK(gb_env_create(iface, NULL, 1, &env, &spec, &err));
    if (!env)
        return;
    const int h = spec.render_height, w = spec.render_width;
    uint8_t *rgb = malloc((size_t)h * (size_t)w * 3);
    const double stand[6] = {0, 1.45, 0, 0, 0, 0}, high[6] = {0, 1.75, 0, 0, 0, 0},
                 ahead[6] = {3, 1.45, 0, 0, 0, 0};
    double r0 = body_row(iface, env, stand, rgb, h, w), r1 = body_row(iface, env, high, rgb, h, w);
    double r2 = body_row(iface, env, ahead, rgb, h, w);
    CHECK_MSG(r0 > 0 && fabs((r0 - r1) - 0.3 * 120) < 2, "raised by 0.3 m: rows %.1f -> %.1f", r0,
              r1);
    CHECK_MSG(fabs(r2 - r0) < 0.5, "moved along x: rows %.1f -> %.1f", r0, r2);
    free(rgb);
    iface->destroy(env);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    TEST_RUN(test_hopper);
    TEST_RUN(test_half_cheetah);
    TEST_RUN(test_walker2d);
    TEST_RUN(test_ant);
    TEST_RUN(test_reset_noise);
    TEST_RUN(test_bad_args);
    TEST_RUN(test_render_follows_state);
    return test_main_result();
}
