/* workers/roles/acting.c: the acting step shared by the actor worker and inline mode (see
 * acting.h). */
#include "workers/roles/acting.h"

#include "envs/host.h"
#include "envs/ring.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gb_acting {
    gb_env_source src;
    int src_open;
    gb_env_ring *ring;
    gb_env_ring_buffers buf;
    const gb_env_spec *spec;
    int K, S, A;
    size_t obs_bytes, env_action_bytes, action_row_bytes;
    gb_chunk_layout layout;
    gb_chunk_builder *chunks;
    int64_t *prev_episodes; /* [K]: the ring's episode count per copy at the last step */
    void (*on_episode)(void *ctx, double episode_return, int64_t length);
    void *ctx;
    int64_t env_steps, episodes;
    double return_sum;
    double window[GB_RUN_WINDOW]; /* the last episodes' returns, a ring */
    /* actors.noise_correlation > 0 with continuous actions: each row's exploration noise,
     * [K*A, action dim], an AR(1) with N(0, 1) marginals, advanced as the row is stepped */
    float *noise;
    double rho;
    gb_rng noise_rng;
    int64_t state_size; /* S: floats of the policy's recurrent state per row; 0: no core */
    float *state;       /* [K*A, S]: each row's state entering its next step (S > 0) */
};

int gb_acting_layout_for(const gb_env_spec *spec, const gb_config *cfg, gb_chunk_layout *l,
                         gb_error *err)
{
    int discrete = spec->action.kind == GB_ENV_SPACE_DISCRETE;
    int64_t shape[GB_WIRE_MAX_RANK];
    if (spec->obs.ndim >= GB_WIRE_MAX_RANK)
        return gb_error_set(err, GB_EINVAL, "observations of %d dimensions (at most %d)",
                            spec->obs.ndim, GB_WIRE_MAX_RANK - 1);
    for (int i = 0; i < spec->obs.ndim; i++)
        shape[i] = spec->obs.shape[i];
    int64_t burn_in = gb_config_burn_in(cfg);
    int carry = cfg->trainer.algorithm.reward_scale != 0; /* the return, after a core's state */
    int rc = gb_chunk_layout_init(l, cfg->actors.chunk_len + burn_in,
                                  gb_env_dtype_to_gb(spec->obs.dtype), spec->obs.ndim, shape,
                                  discrete, discrete ? 1 : spec->action.n,
                                  gb_config_state_size(cfg) + carry, err);
    if (rc == 0) /* the wrapper's stacks, stored a frame a row (chunk.h "Frame stacks") */
        rc = gb_chunk_layout_set_frame_stack(l, cfg->env.wrappers.frame_stack, err);
    if (rc == 0 && carry)
        rc = gb_chunk_layout_set_return_carry(l, cfg->trainer.algorithm.gamma, err);
    return rc ? rc : gb_chunk_layout_set_overlap(l, burn_in, err);
}

int gb_acting_create(const gb_acting_opts *o, gb_acting **out, gb_error *err)
{
    *out = NULL;
    gb_acting *a = calloc(1, sizeof *a);
    if (!a)
        return gb_error_set(err, GB_ENOMEM, "acting: out of memory");
    a->on_episode = o->on_episode;
    a->ctx = o->ctx;
    int rc = gb_env_ring_from_config(&o->cfg->env, o->seed, o->copies, o->splits, &a->src,
                                     &a->ring, err);
    if (rc)
        goto fail;
    a->src_open = 1;
    a->spec = gb_env_ring_spec(a->ring);
    a->K = gb_env_ring_copies(a->ring);
    a->S = gb_env_ring_splits(a->ring);
    a->A = a->spec->agents;
    a->obs_bytes = gb_env_obs_bytes(a->spec);
    a->env_action_bytes = gb_env_action_bytes(a->spec);
    a->action_row_bytes = a->spec->action.kind == GB_ENV_SPACE_DISCRETE
                              ? sizeof(int64_t)
                              : (size_t)a->spec->action.n * sizeof(float);
    a->state_size = gb_config_state_size(o->cfg);
    if ((rc = gb_env_ring_buffers_alloc(a->ring, &a->buf, err)) ||
        (rc = gb_env_ring_attach(a->ring, &a->buf, err)) ||
        (rc = gb_acting_layout_for(a->spec, o->cfg, &a->layout, err)) ||
        (rc = gb_chunk_builder_create(&a->layout, a->K * a->A, &a->chunks, err)))
        goto fail;
    a->prev_episodes = calloc((size_t)a->K, sizeof *a->prev_episodes);
    if (a->state_size > 0)
        a->state = calloc((size_t)a->K * a->A * (size_t)a->state_size, sizeof *a->state);
    if (!a->prev_episodes || (a->state_size > 0 && !a->state)) {
        rc = gb_error_set(err, GB_ENOMEM, "acting: out of memory");
        goto fail;
    }
    a->rho = o->cfg->actors.noise_correlation;
    if (a->rho > 0.0 && a->spec->action.kind != GB_ENV_SPACE_DISCRETE) {
        const size_t n = (size_t)a->K * a->A * (size_t)a->spec->action.n;
        a->noise = malloc(n * sizeof *a->noise);
        if (!a->noise) {
            rc = gb_error_set(err, GB_ENOMEM, "acting: out of memory");
            goto fail;
        }
        gb_rng_seed(&a->noise_rng, o->seed ^ 0x6e6f697365ULL); /* "noise": apart from the envs' */
        for (size_t i = 0; i < n; i++)
            a->noise[i] = (float)gb_rng_normal(&a->noise_rng);
    }
    if ((rc = gb_env_ring_reset(a->ring, err)))
        goto fail;
    for (int s = 0; s < a->K * a->A; s++)
        gb_chunk_start(a->chunks, s, (const char *)a->buf.obs + (size_t)s * a->obs_bytes);
    *out = a;
    return 0;
fail:
    gb_acting_destroy(a);
    return rc;
}

void gb_acting_destroy(gb_acting *a)
{
    if (!a)
        return;
    gb_chunk_builder_destroy(a->chunks);
    gb_env_ring_destroy(a->ring);
    gb_env_ring_buffers_free(&a->buf);
    if (a->src_open)
        gb_env_source_close(&a->src);
    free(a->prev_episodes);
    free(a->noise);
    free(a->state);
    free(a);
}

const gb_env_spec *gb_acting_spec(const gb_acting *a) { return a->spec; }
const gb_chunk_layout *gb_acting_layout(const gb_acting *a) { return &a->layout; }
int gb_acting_groups(const gb_acting *a) { return a->S; }
int gb_acting_copies(const gb_acting *a) { return a->K; }
size_t gb_acting_action_row_bytes(const gb_acting *a) { return a->action_row_bytes; }
int64_t gb_acting_state_size(const gb_acting *a) { return a->state_size; }

float *gb_acting_state(gb_acting *a, int g)
{
    if (!a->state)
        return NULL;
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    return a->state + (size_t)first * a->A * (size_t)a->state_size;
}

const void *gb_acting_obs(const gb_acting *a, int g, int64_t *rows)
{
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    *rows = (int64_t)count * a->A;
    return (const char *)a->buf.obs + (size_t)first * a->A * a->obs_bytes;
}

const float *gb_acting_noise(const gb_acting *a, int g)
{
    if (!a->noise)
        return NULL;
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    return a->noise + (size_t)first * a->A * (size_t)a->spec->action.n;
}

/* Copy c's rows' noise after a step: a fresh draw where its episode ended, else one AR(1) step
 * e' = rho e + sqrt(1 - rho^2) z, which keeps every step's noise N(0, 1). */
static void advance_noise(gb_acting *a, int c, int ended)
{
    const int n = a->spec->action.n;
    const double keep = a->rho, fresh = sqrt(1.0 - a->rho * a->rho);
    float *e = a->noise + (size_t)c * a->A * (size_t)n;
    for (int i = 0; i < a->A * n; i++) {
        const double z = gb_rng_normal(&a->noise_rng);
        e[i] = ended ? (float)z : (float)(keep * e[i] + fresh * z);
    }
}

/* Writes row s's action into the environment's buffer and the chunk. */
static int apply_action(gb_acting *a, int64_t s, const char *arow, float logp, int64_t version,
                        gb_error *err)
{
    char *env_act = (char *)a->buf.actions + (size_t)s * a->env_action_bytes;
    if (a->spec->action.kind == GB_ENV_SPACE_DISCRETE) {
        int64_t v;
        memcpy(&v, arow, sizeof v);
        if (v < 0 || v >= a->spec->action.n)
            return gb_error_set(err, GB_EPROTO, "policy chose action %lld of %d", (long long)v,
                                a->spec->action.n);
        int32_t v32 = (int32_t)v;
        memcpy(env_act, &v32, sizeof v32);
    } else {
        for (int j = 0; j < a->spec->action.n; j++) {
            float x;
            memcpy(&x, arow + (size_t)j * sizeof(float), sizeof x);
            float lo = a->spec->action.low[j], hi = a->spec->action.high[j];
            x = isnan(x) ? 0.0f : x; /* then clipped: 0 may lie outside [lo, hi] */
            x = x < lo ? lo : (x > hi ? hi : x);
            memcpy(env_act + (size_t)j * sizeof(float), &x, sizeof x);
        }
    }
    gb_chunk_act(a->chunks, (int)s, arow, logp, version);
    return 0;
}

static void count_episode(gb_acting *a, const gb_env_copy_stats *st)
{
    a->window[a->episodes % GB_RUN_WINDOW] = st->last_return;
    a->episodes++;
    a->return_sum += st->last_return;
    if (a->on_episode)
        a->on_episode(a->ctx, st->last_return, st->last_length);
}

int gb_acting_step(gb_acting *a, int g, const void *action, size_t action_bytes,
                   const float *logp, size_t logp_bytes, int64_t version, gb_error *err)
{
    int first, count;
    gb_env_ring_group(a->ring, g, &first, &count);
    const int64_t rows = (int64_t)count * a->A, s0 = (int64_t)first * a->A;
    if (action_bytes != (size_t)rows * a->action_row_bytes ||
        logp_bytes != (size_t)rows * sizeof(float))
        return gb_error_set(err, GB_EPROTO, "policy answer: %zu action bytes and %zu logp bytes "
                            "for %lld rows", action_bytes, logp_bytes, (long long)rows);
    for (int64_t r = 0; r < rows; r++) {
        float lp;
        memcpy(&lp, (const char *)logp + (size_t)r * sizeof lp, sizeof lp);
        int rc = apply_action(a, s0 + r, (const char *)action + (size_t)r * a->action_row_bytes,
                              lp, version, err);
        if (rc)
            return rc;
    }
    int rc = gb_env_ring_step(a->ring, g, err);
    if (rc)
        return rc;
    a->env_steps += count;
    const gb_env_copy_stats *stats = gb_env_ring_stats(a->ring);
    int chunk_rc = 0;
    for (int c = first; c < first + count; c++) {
        /* The ring counts an episode when every agent of the copy is done; it resets the copy
         * then, and also at a lost life behind episodic_life (a training episode's end, which
         * the ring's statistics do not count: envs/wrap.h), where the single agent's
         * terminated says so. Either way the chunk gets its reset row (chunk.h). */
        int counted = stats[c].episodes != a->prev_episodes[c];
        int ended = counted || (a->A == 1 && (a->buf.terminated[c] | a->buf.truncated[c]));
        for (int ag = 0; ag < a->A; ag++) {
            size_t i = (size_t)c * a->A + ag;
            float *state = a->state ? a->state + i * (size_t)a->state_size : NULL;
            if (state) {
                gb_chunk_set_state(a->chunks, (int)i, state);
                if (ended) /* the new episode starts from zeros (the builder's rule too) */
                    memset(state, 0, (size_t)a->state_size * sizeof *state);
            }
            rc = gb_chunk_step(a->chunks, (int)i, a->buf.rewards[i], a->buf.terminated[i],
                               a->buf.truncated[i], ended,
                               (const char *)a->buf.final_obs + i * a->obs_bytes,
                               (const char *)a->buf.obs + i * a->obs_bytes, err);
            if (rc && !chunk_rc)
                chunk_rc = rc; /* the stream restarted; finish the group first */
        }
        if (counted) {
            a->prev_episodes[c] = stats[c].episodes;
            count_episode(a, &stats[c]);
        }
        if (a->noise)
            advance_noise(a, c, ended);
    }
    return chunk_rc;
}

int gb_acting_take(gb_acting *a, gb_chunk *out) { return gb_chunk_take(a->chunks, out); }

void gb_acting_stats_get(const gb_acting *a, gb_acting_stats *st)
{
    int64_t n = a->episodes < GB_RUN_WINDOW ? a->episodes : GB_RUN_WINDOW;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a->window[i];
    st->env_steps = a->env_steps;
    st->episodes = a->episodes;
    st->return_sum = a->return_sum;
    st->return_mean = n ? s / (double)n : NAN;
}
