/* envs/ring.c: the environment ring (see ring.h). */
#include "envs/ring.h"
#include "envs/host.h"
#include "runtime/base/rng.h"

#include <stdlib.h>
#include <string.h>

typedef struct ring_copy {
    void *env;
    gb_env_buffers buf; /* this copy's slices; set once by attach */
    void *final_obs;    /* this copy's final_obs slice, or NULL */
} ring_copy;

struct gb_env_ring {
    const gb_env_interface *iface;
    gb_env_spec spec;
    int copies, splits, agents;
    int64_t limit;
    size_t obs_bytes; /* all agents of one copy */
    int attached;
    ring_copy *copy;
    gb_env_copy_stats *stats;
    gb_env_ring_buffers buf;
    int64_t done_count, done_length_sum;
    double done_return_sum;
};

int gb_env_ring_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                       int copies, int splits, int64_t max_episode_steps, gb_env_ring **out,
                       gb_error *err)
{
    *out = NULL;
    if (copies < 1 || splits < 1 || copies % splits != 0)
        return gb_error_set(err, GB_EINVAL,
                            "environment ring: %d copies in %d groups (groups must divide "
                            "copies, both >= 1)",
                            copies, splits);
    if (max_episode_steps < 0)
        return gb_error_set(err, GB_EINVAL, "environment ring: max_episode_steps %lld < 0",
                            (long long)max_episode_steps);
    gb_env_ring *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "environment ring: out of memory");
    r->iface = iface;
    r->copies = copies;
    r->splits = splits;
    r->copy = calloc((size_t)copies, sizeof *r->copy);
    r->stats = calloc((size_t)copies, sizeof *r->stats);
    if (!r->copy || !r->stats) {
        gb_env_ring_destroy(r);
        return gb_error_set(err, GB_ENOMEM, "environment ring: out of memory for %d copies",
                            copies);
    }
    for (int i = 0; i < copies; i++) {
        gb_rng seeder;
        gb_rng_seed_for(&seeder, seed, "env", (uint64_t)i);
        gb_env_spec spec;
        int rc = gb_env_create(iface, args, gb_rng_next(&seeder), &r->copy[i].env, &spec, err);
        if (rc) {
            gb_error_prefix(err, "environment ring copy %d", i);
            gb_env_ring_destroy(r);
            return rc;
        }
        if (i == 0) {
            r->spec = spec;
        } else if (spec.agents != r->spec.agents || spec.obs.dtype != r->spec.obs.dtype ||
                   gb_env_obs_bytes(&spec) != gb_env_obs_bytes(&r->spec) ||
                   spec.action.kind != r->spec.action.kind || spec.action.n != r->spec.action.n) {
            gb_env_ring_destroy(r);
            return gb_error_set(err, GB_EINVAL,
                                "%s: copy %d declared different spaces than copy 0 (spaces "
                                "must depend on the arguments only, not on the seed)",
                                iface->name, i);
        }
    }
    r->agents = r->spec.agents;
    r->limit = max_episode_steps > 0 ? max_episode_steps : r->spec.max_episode_steps;
    r->obs_bytes = gb_env_obs_bytes(&r->spec) * (size_t)r->agents;
    *out = r;
    return 0;
}

int gb_env_ring_from_config(const gb_config_env *env, uint64_t seed, int copies, int splits,
                            gb_env_source *src, gb_env_ring **out, gb_error *err)
{
    *out = NULL;
    gb_env_args_store args;
    int rc = gb_env_source_open_config(src, env, 0, &args, err);
    if (rc)
        return rc;
    rc = gb_env_ring_create(src->iface, &args.args, seed, copies, splits, env->max_episode_steps,
                            out, err);
    if (rc)
        gb_env_source_close(src);
    return rc;
}

const gb_env_spec *gb_env_ring_spec(const gb_env_ring *ring)
{
    return &ring->spec;
}

int gb_env_ring_copies(const gb_env_ring *ring)
{
    return ring->copies;
}

int gb_env_ring_splits(const gb_env_ring *ring)
{
    return ring->splits;
}

int64_t gb_env_ring_time_limit(const gb_env_ring *ring)
{
    return ring->limit;
}

int gb_env_ring_attach(gb_env_ring *r, const gb_env_ring_buffers *b, gb_error *err)
{
    if (!b->obs || !b->actions || !b->rewards || !b->terminated || !b->truncated || !b->acting)
        return gb_error_set(err, GB_EINVAL, "environment ring: attach needs obs, actions, "
                                            "rewards, terminated, truncated and acting");
    size_t act_bytes = gb_env_action_bytes(&r->spec) * (size_t)r->agents;
    for (int i = 0; i < r->copies; i++) {
        size_t a0 = (size_t)i * (size_t)r->agents;
        ring_copy *c = &r->copy[i];
        c->buf = (gb_env_buffers){
            .actions = (const char *)b->actions + (size_t)i * act_bytes,
            .obs = (char *)b->obs + (size_t)i * r->obs_bytes,
            .rewards = b->rewards + a0,
            .terminated = b->terminated + a0,
            .truncated = b->truncated + a0,
            .acting = b->acting + a0,
        };
        c->final_obs = b->final_obs ? (char *)b->final_obs + (size_t)i * r->obs_bytes : NULL;
    }
    r->buf = *b;
    r->attached = 1;
    return 0;
}

int gb_env_ring_buffers_alloc(const gb_env_ring *r, gb_env_ring_buffers *b, gb_error *err)
{
    memset(b, 0, sizeof *b);
    size_t n = (size_t)r->copies * (size_t)r->agents;
    size_t sizes[7] = {
        (size_t)r->copies * r->obs_bytes,
        (size_t)r->copies * r->obs_bytes,
        n * gb_env_action_bytes(&r->spec),
        n * sizeof(float),
        n,
        n,
        n,
    };
    size_t total = 0;
    for (int i = 0; i < 7; i++)
        total += (sizes[i] + 63) & ~(size_t)63;
    char *p = aligned_alloc(64, total);
    if (!p)
        return gb_error_set(err, GB_ENOMEM, "environment ring: cannot allocate %zu bytes of "
                                            "buffers", total);
    memset(p, 0, total);
    void **slots[7] = {&b->obs,           &b->final_obs,          &b->actions,
                       (void **)&b->rewards, (void **)&b->terminated, (void **)&b->truncated,
                       (void **)&b->acting};
    for (int i = 0; i < 7; i++) {
        *slots[i] = p;
        p += (sizes[i] + 63) & ~(size_t)63;
    }
    return 0;
}

void gb_env_ring_buffers_free(gb_env_ring_buffers *b)
{
    free(b->obs); /* the start of the one allocation */
    memset(b, 0, sizeof *b);
}

static int reset_copy(gb_env_ring *r, int i, gb_error *err)
{
    ring_copy *c = &r->copy[i];
    if (r->iface->reset(c->env, &c->buf))
        return gb_error_set(err, GB_EINVAL, "%s: copy %d: reset failed", r->iface->name, i);
    return 0;
}

int gb_env_ring_reset(gb_env_ring *r, gb_error *err)
{
    if (!r->attached)
        return gb_error_set(err, GB_EINVAL, "environment ring: reset before attach");
    size_t n = (size_t)r->copies * (size_t)r->agents;
    memset(r->buf.rewards, 0, n * sizeof(float));
    memset(r->buf.terminated, 0, n);
    memset(r->buf.truncated, 0, n);
    memset(r->buf.acting, 1, n); /* a turn-based environment overwrites it in reset */
    for (int i = 0; i < r->copies; i++) {
        int rc = reset_copy(r, i, err);
        if (rc)
            return rc;
        r->stats[i].episode_return = 0;
        r->stats[i].episode_length = 0;
    }
    return 0;
}

void gb_env_ring_group(const gb_env_ring *r, int group, int *first, int *count)
{
    int per = r->copies / r->splits;
    *first = group * per;
    *count = per;
}

/* The episode of copy i ended on this step (cut: by the ring's time limit): statistics, final
 * observation, auto-reset. Behind the episodic-life or reward-clipping wrappers, the statistics
 * are the game's (envs/wrap.h): a lost life is not an episode, a return is in the game's points,
 * and the time limit counts the game's steps. */
static int finish_episode(gb_env_ring *r, int i, int cut, gb_error *err)
{
    ring_copy *c = &r->copy[i];
    gb_env_copy_stats *s = &r->stats[i];
    double ret = s->episode_return;
    int64_t len = s->episode_length;
    if (gb_env_wrap_episode_end(r->iface, c->env, cut, &ret, &len) != 0) {
        s->last_return = ret;
        s->last_length = len;
        s->episodes++;
        r->done_count++;
        r->done_return_sum += ret;
        r->done_length_sum += len;
        s->episode_return = 0;
        s->episode_length = 0;
    }
    if (c->final_obs)
        memcpy(c->final_obs, c->buf.obs, r->obs_bytes);
    return reset_copy(r, i, err);
}

int gb_env_ring_step(gb_env_ring *r, int group, gb_error *err)
{
    if (!r->attached)
        return gb_error_set(err, GB_EINVAL, "environment ring: step before attach");
    if (group < 0 || group >= r->splits)
        return gb_error_set(err, GB_EINVAL, "environment ring: group %d of %d", group,
                            r->splits);
    int first, count;
    gb_env_ring_group(r, group, &first, &count);
    const gb_env_interface *iface = r->iface;
    int (*step)(void *, const gb_env_buffers *) = iface->step;
    const int64_t limit = r->limit;
    const int agents = r->agents;

    if (agents == 1) { /* the common case, kept free of the agent loops */
        for (int i = first; i < first + count; i++) {
            ring_copy *c = &r->copy[i];
            if (step(c->env, &c->buf))
                return gb_error_set(err, GB_EINVAL, "%s: copy %d: step failed", iface->name, i);
            gb_env_copy_stats *s = &r->stats[i];
            s->episode_return += c->buf.rewards[0];
            s->episode_length++;
            int cut = limit && s->episode_length >= limit;
            if (cut)
                c->buf.truncated[0] = 1;
            if (c->buf.terminated[0] | c->buf.truncated[0]) {
                int rc = finish_episode(r, i, cut, err);
                if (rc)
                    return rc;
            }
        }
        return 0;
    }
    const float inv_agents = 1.0f / (float)agents;
    const int turn_based = (r->spec.flags & GB_ENV_TURN_BASED) != 0;
    for (int i = first; i < first + count; i++) {
        ring_copy *c = &r->copy[i];
        if (step(c->env, &c->buf))
            return gb_error_set(err, GB_EINVAL, "%s: copy %d: step failed", iface->name, i);
        gb_env_copy_stats *s = &r->stats[i];
        float sum = 0.0f;
        int all_done = 1;
        for (int a = 0; a < agents; a++) {
            sum += c->buf.rewards[a];
            all_done &= (c->buf.terminated[a] | c->buf.truncated[a]) != 0;
        }
        s->episode_return += sum * inv_agents;
        s->episode_length++;
        int cut = limit && s->episode_length >= limit;
        if (cut) {
            memset(c->buf.truncated, 1, (size_t)agents);
            all_done = 1;
        }
        if (all_done) {
            int rc = finish_episode(r, i, cut, err);
            if (rc)
                return rc;
            if (!turn_based)
                memset(c->buf.acting, 1, (size_t)agents);
        } else if (!turn_based) { /* an agent whose episode ended waits for the others */
            for (int a = 0; a < agents; a++)
                c->buf.acting[a] = !(c->buf.terminated[a] | c->buf.truncated[a]);
        }
    }
    return 0;
}

const gb_env_copy_stats *gb_env_ring_stats(const gb_env_ring *r)
{
    return r->stats;
}

void gb_env_ring_take_episodes(gb_env_ring *r, int64_t *count, double *return_sum,
                               int64_t *length_sum)
{
    *count = r->done_count;
    *return_sum = r->done_return_sum;
    *length_sum = r->done_length_sum;
    r->done_count = 0;
    r->done_return_sum = 0;
    r->done_length_sum = 0;
}

void *gb_env_ring_copy(gb_env_ring *r, int i)
{
    return i >= 0 && i < r->copies ? r->copy[i].env : NULL;
}

void gb_env_ring_destroy(gb_env_ring *r)
{
    if (!r)
        return;
    if (r->copy)
        for (int i = 0; i < r->copies; i++)
            if (r->copy[i].env)
                r->iface->destroy(r->copy[i].env);
    free(r->copy);
    free(r->stats);
    free(r);
}
