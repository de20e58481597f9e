/* envs/wrap.c: the preprocessing wrappers (see wrap.h): a wrapped copy, its reset and step. */
#include "envs/wrap.h"
#include "envs/builtin.h"
#include "envs/spec.h"
#include "envs/wrap_image.h"
#include "runtime/base/rng.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wrap {
    const gb_env_interface *inner;
    void *env;
    gb_env_wrap_params p;
    size_t in_bytes;    /* one inner observation */
    size_t frame_bytes; /* one frame after the image stage */
    int image;          /* the image stage (grey, resize) is on */
    int ih, iw, icn;    /* inner frame: rows, columns, interleaved channels */
    int oh, ow, ocn;    /* after the image stage: ocn planes of oh x ow */
    int stack;          /* frames in the observation */
    uint8_t *raw[2];    /* inner observations: the step's last frame, the one before */
    uint8_t *scratch;   /* inner observations of the frames skipped in between */
    uint8_t *grey;      /* grey frame before resizing */
    uint8_t *resized;   /* interleaved resize output */
    uint8_t *hist;      /* the last `stack` frames, circular; head is the newest */
    int head;
    gb_area_tab *xtab, *ytab;
    int nx, ny, per; /* per: terms of each output in a padded xtab (0: not padded) */
    gb_env_blind_step_fn blind; /* a step without the observation, where the inner has one */
    float *rowbuf, *rowsum;
    float reward; /* the inner step's outputs */
    uint8_t term, trunc, acting;
    gb_rng rng;
    int lives, pending; /* pending: a life was lost; the next reset continues the game */
    double game_return; /* the game so far: rewards before clipping, steps */
    int64_t game_length;
} wrap;

static void *direct_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                           size_t err_len)
{
    (void)args, (void)seed, (void)spec;
    return gb_env_fail(err, err_len, "a wrapped environment is created through gb_env_create");
}

gb_env_wrap_params gb_env_wrap_params_default(void)
{
    return (gb_env_wrap_params){.frame_skip = 1, .max_pool = 1, .frame_stack = 1};
}

int gb_env_wrap_params_set(gb_env_wrap_params *p, const char *key, const char *value, char *err,
                           size_t err_len)
{
    static const struct {
        const char *key;
        size_t at;
        int is_bool;
        long long lo, hi;
    } keys[] = {
        {"noop_max", offsetof(gb_env_wrap_params, noop_max), 0, 0, 1000},
        {"frame_skip", offsetof(gb_env_wrap_params, frame_skip), 0, 1, 1000},
        {"max_pool", offsetof(gb_env_wrap_params, max_pool), 1, 0, 1},
        {"screen_size", offsetof(gb_env_wrap_params, screen_size), 0, 0, 4096},
        {"grey", offsetof(gb_env_wrap_params, grey), 1, 0, 1},
        {"episodic_life", offsetof(gb_env_wrap_params, episodic_life), 1, 0, 1},
        {"clip_reward", offsetof(gb_env_wrap_params, clip_reward), 1, 0, 1},
        {"frame_stack", offsetof(gb_env_wrap_params, frame_stack), 0, 1, 64},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(key, keys[i].key) != 0)
            continue;
        char *end = NULL;
        long long v = strcmp(value, "true") == 0 ? 1 : strcmp(value, "false") == 0 ? 0
                                                       : strtoll(value, &end, 10);
        if ((end && (end == value || *end)) || v < keys[i].lo || v > keys[i].hi) {
            snprintf(err, err_len, "wrapper %s: '%s' is not %s in [%lld, %lld]", key, value,
                     keys[i].is_bool ? "a boolean" : "an integer", keys[i].lo, keys[i].hi);
            return -1;
        }
        if (keys[i].is_bool)
            *(int *)((char *)p + keys[i].at) = (int)v;
        else
            *(int64_t *)((char *)p + keys[i].at) = v;
        return 0;
    }
    snprintf(err, err_len, "unknown wrapper '%s' (noop_max, frame_skip, max_pool, screen_size, "
             "grey, episodic_life, clip_reward, frame_stack)", key);
    return -1;
}

int gb_env_wrap_params_pair(gb_env_wrap_params *p, const char *pair, char *err, size_t err_len)
{
    char key[64];
    const char *eq = strchr(pair, '=');
    if (!eq || eq == pair || (size_t)(eq - pair) >= sizeof key) {
        snprintf(err, err_len, "expects KEY=VALUE, got '%s'", pair);
        return -1;
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - pair), pair);
    return gb_env_wrap_params_set(p, key, eq + 1, err, err_len);
}

int gb_env_wrap_active(const gb_env_wrap_params *p)
{
    return p->noop_max > 0 || p->frame_skip > 1 || p->screen_size > 0 || p->grey ||
           p->episodic_life || p->clip_reward || p->frame_stack > 1;
}

int gb_env_wrap_is(const gb_env_interface *iface)
{
    return iface && iface->create == direct_create;
}

/* One inner step (or reset when actions is NULL) writing its observation to obs (NULL: a skipped
 * frame, whose observation nobody reads: to scratch, or not at all where the inner can). */
static int inner_call(wrap *w, const void *actions, void *obs)
{
    gb_env_buffers ib = {actions, obs ? obs : w->scratch, &w->reward, &w->term, &w->trunc,
                         &w->acting};
    w->reward = 0;
    w->term = w->trunc = 0;
    if (!actions)
        return w->inner->reset(w->env, &ib);
    return !obs && w->blind ? w->blind(w->env, &ib) : w->inner->step(w->env, &ib);
}

/* The action frame_skip times (fewer when the episode ends): the summed reward in *r, the last
 * frame (pooled with the one before when max_pool) in raw[0]. Frames go where AtariPreprocessing
 * reads them: the last one to raw[0], the one before to raw[1]. */
static int skip_step(wrap *w, const void *actions, float *r)
{
    const int64_t k = w->p.frame_skip;
    float sum = 0;
    for (int64_t t = 0; t < k; t++) {
        uint8_t *to = t == k - 1                  ? w->raw[0]
                      : t == k - 2 && w->p.max_pool ? w->raw[1]
                                                    : NULL;
        if (inner_call(w, actions, to))
            return -1;
        sum += w->reward;
        if (w->term | w->trunc) { /* the episode's last frame, not pooled */
            if (to != w->raw[0])
                memcpy(w->raw[0], to ? to : w->scratch, w->in_bytes);
            *r = sum;
            return 0;
        }
    }
    if (w->p.max_pool && k > 1)
        gb_frame_max(w->raw[0], w->raw[1], w->raw[0], w->in_bytes);
    *r = sum;
    return 0;
}

/* The image stage of raw[0] into dst (one frame, ocn planes of oh x ow). */
static void image(wrap *w, const uint8_t *src, uint8_t *dst)
{
    if (!w->image) {
        memcpy(dst, src, w->frame_bytes);
        return;
    }
    int cn = w->icn;
    if (w->p.grey && cn == 3) {
        gb_rgb_to_grey(src, w->grey, (size_t)w->ih * (size_t)w->iw);
        src = w->grey;
        cn = 1;
    }
    const uint8_t *hwc = src;
    if (w->p.screen_size) {
        uint8_t *out = cn == 1 ? dst : w->resized;
        gb_area_resize(src, w->iw, cn, out, w->ow, w->xtab, w->nx, w->per, w->ytab, w->ny,
                       w->rowbuf, w->rowsum);
        hwc = out;
    }
    if (cn == 1) {
        if (hwc != dst)
            memcpy(dst, hwc, w->frame_bytes);
        return;
    }
    const size_t plane = (size_t)w->oh * (size_t)w->ow; /* interleaved to planes (C, H, W) */
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < cn; c++)
            dst[(size_t)c * plane + i] = hwc[i * (size_t)cn + (size_t)c];
}

/* Adds the frame of raw[0] to the stack (fill: to every slot, at an episode's start) and writes
 * the observation, oldest frame first. */
static void emit(wrap *w, void *obs, int fill)
{
    w->head = (w->head + 1) % w->stack;
    uint8_t *slot = w->hist + (size_t)w->head * w->frame_bytes;
    image(w, w->raw[0], slot);
    for (int i = 0; fill && i < w->stack; i++)
        if (i != w->head)
            memcpy(w->hist + (size_t)i * w->frame_bytes, slot, w->frame_bytes);
    uint8_t *out = obs;
    for (int i = 1; i <= w->stack; i++) {
        int at = (w->head + i) % w->stack;
        memcpy(out, w->hist + (size_t)at * w->frame_bytes, w->frame_bytes);
        out += w->frame_bytes;
    }
}

static int read_lives(wrap *w)
{
    return w->p.episodic_life ? gb_env_builtin_lives(w->inner, w->env) : 0;
}

static int wrap_reset(void *env, const gb_env_buffers *buf)
{
    wrap *w = env;
    static const int32_t noop = 0;
    /* After a lost life the game goes on: one no-op step (SB3's EpisodicLifeEnv). Should the
     * game end within it (the frame limit), a new one starts and that game's return, which the
     * host has not been told, is not reported. */
    if (w->pending) {
        w->pending = 0;
        float r;
        if (skip_step(w, &noop, &r))
            return -1;
        w->game_return += r;
        if (!(w->term | w->trunc)) {
            w->lives = read_lives(w);
            emit(w, buf->obs, 1);
            return 0;
        }
    }
    if (inner_call(w, NULL, w->raw[0]))
        return -1;
    w->game_return = 0;
    w->game_length = 0;
    int64_t noops = w->p.noop_max > 0 ? 1 + (int64_t)gb_rng_below(&w->rng, (uint64_t)w->p.noop_max)
                                      : 0;
    for (int64_t i = 0; i < noops; i++) { /* only the last one's frame is looked at */
        if (inner_call(w, &noop, i == noops - 1 ? w->raw[0] : NULL))
            return -1;
        if ((w->term | w->trunc) && inner_call(w, NULL, w->raw[0]))
            return -1;
    }
    w->lives = read_lives(w);
    emit(w, buf->obs, 1);
    return 0;
}

static int wrap_step(void *env, const gb_env_buffers *buf)
{
    wrap *w = env;
    float r;
    if (skip_step(w, buf->actions, &r))
        return -1;
    w->game_return += r;
    w->game_length++;
    uint8_t term = w->term, trunc = w->trunc;
    if (w->p.episodic_life && !(term | trunc)) {
        int lives = read_lives(w);
        if (lives > 0 && lives < w->lives) { /* the last life's loss is the game's end anyway */
            term = 1;
            w->pending = 1;
        }
        w->lives = lives;
    }
    if (w->p.clip_reward)
        r = (float)((r > 0) - (r < 0));
    emit(w, buf->obs, 0);
    buf->rewards[0] = r;
    buf->terminated[0] = term;
    buf->truncated[0] = trunc;
    return 0;
}

static void wrap_destroy(void *env)
{
    wrap *w = env;
    if (!w)
        return;
    if (w->env)
        w->inner->destroy(w->env);
    free(w->raw[0]); /* the one block of every buffer */
    free(w);
}

static int wrap_render(void *env, uint8_t *rgb)
{
    wrap *w = env;
    return w->inner->render(w->env, rgb);
}

void gb_env_wrap_init(gb_env_wrapped *w, const gb_env_interface *inner,
                      const gb_env_wrap_params *p, int for_eval)
{
    memset(w, 0, sizeof *w);
    w->inner = inner;
    w->p = *p;
    if (for_eval)
        w->p.episodic_life = w->p.clip_reward = 0;
    snprintf(w->name, sizeof w->name, "%s", inner->name);
    w->iface = (gb_env_interface){GB_ENV_ABI_VERSION, sizeof(gb_env_interface), w->name,
                                  inner->description, direct_create, wrap_reset, wrap_step,
                                  wrap_destroy, inner->render ? wrap_render : NULL};
}

int gb_env_wrap_episode_end(const gb_env_interface *iface, void *env, int cut, double *ret,
                            int64_t *len)
{
    if (!gb_env_wrap_is(iface))
        return -1;
    const gb_env_wrapped *ww = (const gb_env_wrapped *)iface;
    if (!ww->p.episodic_life && !ww->p.clip_reward)
        return -1;
    wrap *w = env;
    if (w->pending && !cut)
        return 0;
    w->pending = 0;
    *ret = w->game_return;
    *len = w->game_length;
    return 1;
}

/* The inner frame's layout for the image stage: (H, W), (H, W, 1 or 3) or (1, H, W) uint8.
 * Returns 0, or -1 with a message. */
static int frame_layout(wrap *w, const gb_env_spec *in, const char *name, char *err,
                        size_t err_len)
{
    const int64_t *s = in->obs.shape;
    if (in->obs.dtype == GB_ENV_UINT8 && in->obs.ndim == 2) {
        w->ih = (int)s[0], w->iw = (int)s[1], w->icn = 1;
    } else if (in->obs.dtype == GB_ENV_UINT8 && in->obs.ndim == 3 && (s[2] == 1 || s[2] == 3)) {
        w->ih = (int)s[0], w->iw = (int)s[1], w->icn = (int)s[2];
    } else if (in->obs.dtype == GB_ENV_UINT8 && in->obs.ndim == 3 && s[0] == 1) {
        w->ih = (int)s[1], w->iw = (int)s[2], w->icn = 1;
    } else {
        snprintf(err, err_len,
                 "%s: env.wrappers.screen_size and grey need uint8 frames shaped (H, W), "
                 "(H, W, 1 or 3) or (1, H, W); this environment's observation is not",
                 name);
        return -1;
    }
    int64_t size = w->p.screen_size;
    if (size > w->ih || size > w->iw) {
        snprintf(err, err_len,
                 "%s: env.wrappers.screen_size %lld is larger than the frames (%d x %d): the "
                 "resize only shrinks",
                 name, (long long)size, w->ih, w->iw);
        return -1;
    }
    w->oh = size ? (int)size : w->ih;
    w->ow = size ? (int)size : w->iw;
    w->ocn = w->p.grey ? 1 : w->icn;
    return 0;
}

/* Checks the wrappers against the inner spec and sizes the copy's buffers. */
static int plan(wrap *w, const gb_env_spec *in, const char *name, char *err, size_t err_len)
{
    const gb_env_wrap_params *p = &w->p;
    const char *bad = in->agents != 1 || (in->flags & GB_ENV_TURN_BASED)
                          ? "the wrappers take single-agent environments"
                      : p->noop_max && in->action.kind != GB_ENV_SPACE_DISCRETE
                          ? "noop_max needs discrete actions (action 0 is the no-op)"
                      : p->frame_skip > 1 && p->max_pool && in->obs.dtype != GB_ENV_UINT8
                          ? "max_pool (on by default with frame_skip > 1) needs uint8 frames: "
                            "set env.wrappers.max_pool: false"
                      : p->episodic_life && gb_env_builtin_lives(w->inner, w->env) < 0
                          ? "episodic_life needs an environment that reports lives (atari)"
                          : NULL;
    if (bad) {
        snprintf(err, err_len, "%s: env.wrappers: %s", name, bad);
        return -1;
    }
    w->in_bytes = gb_env_obs_bytes(in);
    w->image = p->screen_size > 0 || p->grey;
    if (w->image && frame_layout(w, in, name, err, err_len))
        return -1;
    w->frame_bytes = w->image ? (size_t)w->oh * (size_t)w->ow * (size_t)w->ocn : w->in_bytes;
    w->stack = (int)p->frame_stack;
    return 0;
}

/* The wrapped spec: the frame's shape (C, H, W) after the image stage, times the stack along
 * the first axis; the inner time limit in wrapped steps. */
static void wrapped_spec(const wrap *w, const gb_env_spec *in, gb_env_spec *out)
{
    *out = *in;
    if (w->image) {
        out->obs.ndim = 3;
        out->obs.shape[0] = w->ocn;
        out->obs.shape[1] = w->oh;
        out->obs.shape[2] = w->ow;
    }
    out->obs.shape[0] *= w->stack;
    if (w->image || w->stack > 1 || w->p.max_pool)
        out->obs.low = out->obs.high = NULL;
    int64_t k = w->p.frame_skip;
    out->max_episode_steps = in->max_episode_steps ? (in->max_episode_steps + k - 1) / k : 0;
    /* a step's reward: the sum of 1..k inner ones (fewer once the episode ends), then the
     * sign when clipped, whatever the inner range */
    if (in->flags & GB_ENV_REWARD_RANGE) {
        out->reward_low = in->reward_low < 0 ? in->reward_low * (float)k : in->reward_low;
        out->reward_high = in->reward_high > 0 ? in->reward_high * (float)k : in->reward_high;
    }
    if (w->p.clip_reward) {
        out->flags |= GB_ENV_REWARD_RANGE;
        out->reward_low = (in->flags & GB_ENV_REWARD_RANGE) && in->reward_low >= 0 ? 0.0f : -1.0f;
        out->reward_high = (in->flags & GB_ENV_REWARD_RANGE) && in->reward_high <= 0 ? 0.0f : 1.0f;
    }
}

/* The resize's tables (wrap_image.h) in t: the x terms (padded for one channel), the y terms. */
static void build_tables(wrap *w, gb_area_tab *t, size_t xraw)
{
    int cn = w->p.grey ? 1 : w->icn;
    w->ytab = t;
    w->ny = gb_area_tab_build(w->ih, w->oh, 1, w->ytab);
    gb_area_tab *x = w->ytab + 2 * w->ih;
    w->nx = gb_area_tab_build(w->iw, w->ow, cn, x);
    w->xtab = x;
    if (cn == 1) {
        w->xtab = x + xraw;
        w->per = gb_area_tab_pad(x, w->nx, w->ow, w->xtab);
        w->nx = w->per * w->ow;
    }
}

/* One block for every buffer: raw[0], raw[1], scratch, grey, resized, hist, tables, rows. */
static int allocate(wrap *w)
{
    size_t in = (w->in_bytes + 63) & ~(size_t)63;
    size_t pix = (size_t)w->ih * (size_t)w->iw, out = (size_t)w->oh * (size_t)w->ow * 3;
    size_t hist = (size_t)w->stack * w->frame_bytes;
    size_t xraw = (size_t)2 * (size_t)w->iw * 3; /* OpenCV's bound: 2 ssize terms (x cn) */
    size_t xpad = w->ow ? (size_t)w->ow * (size_t)(2 * w->iw / w->ow + 3) : 0;
    size_t tabs = w->p.screen_size ? (size_t)2 * (size_t)w->ih + xraw + xpad : 0;
    size_t rows = w->p.screen_size ? (size_t)w->ow * 3 * 2 : 0;
    size_t total = 3 * in + pix + out + hist + 64 + tabs * sizeof(gb_area_tab) +
                   rows * sizeof(float);
    uint8_t *b = calloc(1, total);
    if (!b)
        return -1;
    w->raw[0] = b, w->raw[1] = b + in, w->scratch = b + 2 * in;
    w->grey = b + 3 * in;
    w->resized = w->grey + pix;
    w->hist = w->resized + out;
    uint8_t *t = w->hist + hist;
    t += (64 - (uintptr_t)t % 64) % 64;
    w->rowbuf = (float *)((gb_area_tab *)t + tabs);
    w->rowsum = w->rowbuf + w->ow * 3;
    if (w->p.screen_size)
        build_tables(w, (gb_area_tab *)t, xraw);
    return 0;
}

void *gb_env_wrap_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                         gb_env_spec *spec, char *err, size_t err_len)
{
    const gb_env_wrapped *ww = (const gb_env_wrapped *)iface;
    wrap *w = calloc(1, sizeof *w);
    if (!w)
        return gb_env_fail(err, err_len, "%s: out of memory", iface->name);
    w->inner = ww->inner;
    w->p = ww->p;
    w->blind = gb_env_builtin_blind_step(ww->inner);
    gb_rng_seed_for(&w->rng, seed, "noop", 0);
    gb_env_spec in = {0};
    gb_error e = {0};
    w->env = ww->inner->create(args, seed, &in, err, err_len); /* its own message, unprefixed */
    if (!w->env) {
        free(w);
        return NULL;
    }
    if (gb_env_spec_validate(&in, ww->inner, &e)) {
        snprintf(err, err_len, "%s", e.msg);
        goto err;
    }
    if (plan(w, &in, iface->name, err, err_len))
        goto err;
    if (allocate(w)) {
        snprintf(err, err_len, "%s: out of memory for the wrappers' frames", iface->name);
        goto err;
    }
    wrapped_spec(w, &in, spec);
    return w;
err:
    wrap_destroy(w);
    return NULL;
}
