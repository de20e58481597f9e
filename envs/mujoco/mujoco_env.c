/* envs/mujoco/mujoco_env.c: Gymnasium's MujocoEnv and the v5 locomotion step in C: loading a
 * task's model, reset noise, stepping with frame skip, the reward terms and termination, the
 * float32 observation, and the state hook of the Gymnasium agreement test. Each step does what
 * Gymnasium 1.4.0's *_v5.py does, in the same order and floating-point types, so that the same
 * MuJoCo build gives the same numbers. */
#include "envs/builtin.h"
#include "envs/mujoco/mujoco_env.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gymnasium's expand_model_path: "/..." and "./..." as written, "~/..." under $HOME, any other
 * name inside the assets folder. Returns 0, or -1 with a message. */
static int model_path(const gb_mj_task *task, const char *xml, char *out, size_t n, char *err,
                      size_t err_len)
{
    int len;
    if (xml[0] == '/' || xml[0] == '.') {
        len = snprintf(out, n, "%s", xml);
    } else if (xml[0] == '~' && xml[1] == '/') {
        const char *home = getenv("HOME");
        len = snprintf(out, n, "%s%s", home ? home : "", xml + 1);
    } else {
        const char *dir = gb_mj_assets_dir();
        if (!*dir) {
            snprintf(err, err_len,
                     "%s: no model folder for xml_file '%s': Gymnasium's envs/mujoco/assets was "
                     "not found when gearbox was configured; set GEARBOX_MUJOCO_ASSETS to it, or "
                     "give xml_file as a path",
                     task->name, xml);
            return -1;
        }
        len = snprintf(out, n, "%s/%s", dir, xml);
    }
    if (len < 0 || (size_t)len >= n) {
        snprintf(err, err_len, "%s: xml_file path too long", task->name);
        return -1;
    }
    return 0;
}

/* Resolves main_body (an index or a body name) into e->main_body; 0 or -1 with a message. */
static int resolve_main_body(gb_mj_env *e, char *err, size_t err_len)
{
    char *end;
    long id = strtol(e->p.main_body, &end, 10);
    if (end == e->p.main_body || *end)
        id = e->mj->name2id(e->m, mjOBJ_BODY, e->p.main_body);
    if (id < 0 || id >= e->nbody) {
        snprintf(err, err_len, "%s: main_body '%s' is not a body of the model (%d bodies)",
                 e->task->name, e->p.main_body, e->nbody);
        return -1;
    }
    e->main_body = (int)id;
    return 0;
}

/* Loads the model and data and checks the model has what the task reads. */
static int load_model(gb_mj_env *e, char *err, size_t err_len)
{
    const gb_mj_task *t = e->task;
    char path[PATH_MAX + 600], why[1000] = "";
    if (model_path(t, e->p.xml_file, path, sizeof path, err, err_len))
        return -1;
    /* Gymnasium's own model files warn of nothing a user can act on */
    gb_mj_quiet_warnings(strcmp(e->p.xml_file, t->defaults.xml_file) == 0);
    e->m = gb_mj_model_acquire(e->mj, path, why, sizeof why);
    gb_mj_quiet_warnings(0);
    if (!e->m) {
        snprintf(err, err_len, "%s: cannot load the model %s: %s", t->name, path, why);
        return -1;
    }
    e->d = e->mj->make_data(e->m);
    if (!e->d) {
        snprintf(err, err_len, "%s: out of memory for the model's data", t->name);
        return -1;
    }
    e->nq = (int)e->m->nq;
    e->nv = (int)e->m->nv;
    e->nu = (int)e->m->nu;
    e->nbody = (int)e->m->nbody;
    e->skip = e->p.exclude_current_positions_from_observation ? t->skipped_qpos : 0;
    if (e->nq < 3 || e->nq <= e->skip || e->nu < 1 || e->nbody < 2) {
        snprintf(err, err_len,
                 "%s: model %s has nq %d, nu %d, %d bodies: the task reads qpos[0..2], at "
                 "least one actuator and one body besides the world",
                 t->name, path, e->nq, e->nu, e->nbody);
        return -1;
    }
    return resolve_main_body(e, err, err_len);
}

void *gb_mj_create(const gb_mj_task *task, const gb_env_args *args, uint64_t seed,
                   gb_env_spec *spec, char *err, size_t err_len)
{
    gb_mj_params p;
    if (gb_mj_parse_args(task, args, &p, err, err_len))
        return NULL;
    char why[1024];
    const gb_mj_api *mj = gb_mj_load(why, sizeof why);
    if (!mj)
        return gb_env_fail(err, err_len, "%s: %s", task->name, why);
    gb_mj_env *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "%s: out of memory", task->name);
    e->task = task;
    e->mj = mj;
    e->p = p;
    if (load_model(e, err, err_len))
        goto err;
    e->need_rne = task->contact_cost; /* the contact cost reads cfrc_ext whether observed or not */
    e->obs_dim = e->nq - e->skip + e->nv +
                 (task->contact_cost && p.include_cfrc_ext_in_observation ? 6 * (e->nbody - 1)
                                                                           : 0);
    e->dt = e->m->opt.timestep * (double)p.frame_skip;
    /* one block: the contact cost's scratch (6 * nbody doubles), the action bounds and the
     * control cost's scratch (nu floats each) */
    e->scratch = malloc(sizeof(double) * 6 * (size_t)e->nbody + sizeof(float) * 3 * (size_t)e->nu);
    if (!e->scratch) {
        gb_env_fail(err, err_len, "%s: out of memory", task->name);
        goto err;
    }
    e->act_low = (float *)(e->scratch + 6 * e->nbody);
    e->act_high = e->act_low + e->nu;
    for (int i = 0; i < e->nu; i++) {
        e->act_low[i] = (float)e->m->actuator_ctrlrange[2 * i];
        e->act_high[i] = (float)e->m->actuator_ctrlrange[2 * i + 1];
    }
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {e->obs_dim}},
                          .action = {.kind = GB_ENV_SPACE_BOX, .n = e->nu, .low = e->act_low,
                                     .high = e->act_high},
                          .max_episode_steps = 1000,
                          .render_height = GB_MJ_RENDER_HEIGHT,
                          .render_width = GB_MJ_RENDER_WIDTH};
    return e;
err:
    gb_mj_destroy(e);
    return NULL;
}

void gb_mj_destroy(void *env)
{
    gb_mj_env *e = env;
    if (!e)
        return;
    if (e->d)
        e->mj->delete_data(e->d);
    if (e->m)
        gb_mj_model_release(e->mj, e->m);
    free(e->scratch);
    free(e);
}

void gb_mj_observe(const gb_mj_env *e, float *obs)
{
    const mjData *d = e->d;
    int k = 0;
    for (int i = e->skip; i < e->nq; i++)
        obs[k++] = (float)d->qpos[i];
    const double c = e->task->qvel_clip;
    for (int i = 0; i < e->nv; i++) {
        double v = d->qvel[i];
        if (c > 0)
            v = v < -c ? -c : (v > c ? c : v);
        obs[k++] = (float)v;
    }
    if (k == e->obs_dim)
        return;
    /* clip(cfrc_ext, contact_force_range)[1:] (the world body's row left out) */
    const double lo = e->p.contact_force_range[0], hi = e->p.contact_force_range[1];
    for (int i = 6; i < 6 * e->nbody; i++) {
        double f = d->cfrc_ext[i];
        obs[k++] = (float)(f < lo ? lo : (f > hi ? hi : f));
    }
}

int gb_mj_reset(void *env, const gb_env_buffers *b)
{
    gb_mj_env *e = env;
    const double s = e->p.reset_noise_scale;
    e->mj->reset_data(e->m, e->d);
    /* init_qpos + uniform(-s, s, nq); init_qvel (zero) + uniform(-s, s, nv) or s * normal(nv):
     * NumPy's uniform(low, high) is low + (high - low) * random() */
    for (int i = 0; i < e->nq; i++)
        e->d->qpos[i] = e->m->qpos0[i] + (-s + (s - -s) * gb_rng_uniform(&e->rng));
    for (int i = 0; i < e->nv; i++)
        e->d->qvel[i] = 0.0 + (e->task->qvel_noise_normal
                                   ? s * gb_rng_normal(&e->rng)
                                   : -s + (s - -s) * gb_rng_uniform(&e->rng));
    e->mj->forward(e->m, e->d);
    gb_mj_observe(e, b->obs);
    return 0;
}

/* The x coordinate whose change is rewarded: qpos[0], or main_body's x (Ant). */
static double x_position(const gb_mj_env *e)
{
    return e->task->x_from_body ? e->d->xpos[3 * e->main_body] : e->d->qpos[0];
}

/* ctrl_cost_weight * np.sum(np.square(action)): squares and sum in float32 as NumPy does on
 * the float32 action, the product in float64. */
static double ctrl_cost(const gb_mj_env *e, const float *a)
{
    float *sq = e->act_low + 2 * e->nu;
    for (int i = 0; i < e->nu; i++)
        sq[i] = a[i] * a[i];
    return e->p.ctrl_cost_weight * (double)gb_mj_pairwise_sum_f(sq, (size_t)e->nu);
}

/* contact_cost_weight * np.sum(np.square(np.clip(cfrc_ext, low, high))) over every body. */
static double contact_cost(const gb_mj_env *e)
{
    double *sq = e->scratch;
    const double lo = e->p.contact_force_range[0], hi = e->p.contact_force_range[1];
    const size_t n = 6 * (size_t)e->nbody;
    for (size_t i = 0; i < n; i++) {
        double f = e->d->cfrc_ext[i];
        f = f < lo ? lo : (f > hi ? hi : f);
        sq[i] = f * f;
    }
    return e->p.contact_cost_weight * gb_mj_pairwise_sum_d(sq, n);
}

int gb_mj_step(void *env, const gb_env_buffers *b)
{
    gb_mj_env *e = env;
    const float *a = b->actions;
    const double x_before = x_position(e);
    for (int i = 0; i < e->nu; i++)
        e->d->ctrl[i] = (double)a[i];
    for (long long k = 0; k < e->p.frame_skip; k++)
        e->mj->step(e->m, e->d);
    if (e->need_rne)
        e->mj->rne_post_constraint(e->m, e->d);
    const double x_velocity = (x_position(e) - x_before) / e->dt;
    gb_mj_observe(e, b->obs);
    /* reward = (forward + healthy) - (ctrl + contact), Gymnasium's grouping */
    const double forward = e->p.forward_reward_weight * x_velocity;
    const int healthy = e->task->healthy ? e->task->healthy(e) : 1;
    const double survive = e->task->healthy ? (double)healthy * e->p.healthy_reward : 0.0;
    double costs = ctrl_cost(e, a);
    if (e->task->contact_cost)
        costs = costs + contact_cost(e);
    b->rewards[0] = (float)((forward + survive) - costs);
    b->terminated[0] = (uint8_t)(!healthy && e->p.terminate_when_unhealthy);
    b->truncated[0] = 0;
    return 0;
}

/* state: qpos (nq) then qvel (nv), as after Gymnasium's reset() and set_state(qpos, qvel); or
 * the state a step leaves: qpos, qvel, qacc_warmstart (nv: the constraint solver's starting
 * point, carried from step to step) and main_body's xpos (3: computed by mj_step before its last
 * integration, so not the position of qpos; Ant's next forward reward starts from it). */
int gb_env_mujoco_set_state(void *env, const double *state, int n, void *obs)
{
    gb_mj_env *e = env;
    const int mid = n == e->nq + 2 * e->nv + 3;
    if (n != e->nq + e->nv && !mid)
        return -1;
    e->mj->reset_data(e->m, e->d);
    memcpy(e->d->qpos, state, sizeof(double) * (size_t)e->nq);
    memcpy(e->d->qvel, state + e->nq, sizeof(double) * (size_t)e->nv);
    if (mid)
        memcpy(e->d->qacc_warmstart, state + e->nq + e->nv, sizeof(double) * (size_t)e->nv);
    e->mj->forward(e->m, e->d);
    if (mid) /* the next mj_step recomputes every xpos before reading any */
        memcpy(e->d->xpos + 3 * e->main_body, state + e->nq + 2 * e->nv, sizeof(double) * 3);
    if (obs)
        gb_mj_observe(e, obs);
    return 0;
}

/* NumPy's pairwise_sum (numpy/_core/src/umath/loops_utils.h.src), added to the reduction's
 * identity 0 as np.add.reduce does. */
#define PAIRWISE_SUM(NAME, T)                                                                     \
    static T NAME##_rec(const T *a, size_t n)                                                     \
    {                                                                                             \
        if (n < 8) {                                                                              \
            T res = 0;                                                                            \
            for (size_t i = 0; i < n; i++)                                                        \
                res += a[i];                                                                      \
            return res;                                                                           \
        }                                                                                         \
        if (n <= 128) {                                                                           \
            T r[8];                                                                               \
            size_t i;                                                                             \
            for (int j = 0; j < 8; j++)                                                           \
                r[j] = a[j];                                                                      \
            for (i = 8; i < n - (n % 8); i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                                       \
                    r[j] += a[i + j];                                                             \
            T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));           \
            for (; i < n; i++)                                                                    \
                res += a[i];                                                                      \
            return res;                                                                           \
        }                                                                                         \
        size_t n2 = n / 2;                                                                        \
        n2 -= n2 % 8;                                                                             \
        return NAME##_rec(a, n2) + NAME##_rec(a + n2, n - n2);                                    \
    }                                                                                             \
    T NAME(const T *a, size_t n) { return (T)0 + NAME##_rec(a, n); }

PAIRWISE_SUM(gb_mj_pairwise_sum_f, float)
PAIRWISE_SUM(gb_mj_pairwise_sum_d, double)
