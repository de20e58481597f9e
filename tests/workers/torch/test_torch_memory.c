/* tests/workers/torch/test_torch_memory.c: recurrent PPO learns a task that needs memory, in
 * process. Each episode shows a cue (one of two) in its first observation, then DELAY blank
 * observations, then a query; the action at the query earns +1 when it names the cue, and the
 * episode ends (next-step reset: a reset row follows). Streams act with model_act_state as an
 * actor does (state carried across chunks, zeroed after a reset row; each chunk's state0), the
 * learner trains on the chunks. argv[1]: lstm, gru or transformer: the greedy accuracy at the
 * query must pass 0.9 within the budget; none: without a core the query looks the same whatever the
 * cue, so the accuracy stays near chance (0.5) over the same budget. */
#include "test.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 32, T = 16, OBS = 4, DELAY = 6, QUERY = DELAY + 1, ITERS = 150, MAXS = 320 };

/* One stream: its phase in the episode (0: cue .. QUERY: query; -1: the reset row after the
 * query), its cue and its state. */
typedef struct stream {
    int phase, cue;
    float state[MAXS];
} stream;

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static int coin(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int)(rng_state >> 63);
}

static void observe(const stream *s, float *obs)
{
    memset(obs, 0, sizeof(float) * OBS);
    if (s->phase < 0)
        obs[3] = 1.0f; /* the final observation, on the reset row */
    else if (s->phase == 0)
        obs[s->cue] = 1.0f;
    else if (s->phase == QUERY)
        obs[2] = 1.0f;
}

/* Steps every stream one row with model m (deterministic: greedy). Fills the row's columns
 * when the pointers are not NULL; counts query answers and right ones. */
static int act_row(gb_torch_model *m, stream *st, int64_t S, int deterministic, float *obs_row,
                   int64_t *act, float *logp, float *rew, uint8_t *term, uint8_t *valid,
                   int *answers, int *right)
{
    gb_error err = {0};
    float obs[N * OBS], state[N * MAXS], lp[N], v[N];
    int64_t a[N];
    for (int i = 0; i < N; i++) {
        observe(&st[i], &obs[i * OBS]);
        memcpy(&state[i * S], st[i].state, sizeof(float) * (size_t)S);
    }
    gb_torch_act_out out = {a, lp, v, NULL};
    int rc = gb_torch_model_act_state(m, obs, N, deterministic, 0.0, NULL, state, state, &out,
                                      &err);
    if (rc) {
        fprintf(stderr, "act_state: %s\n", err.msg);
        return rc;
    }
    for (int i = 0; i < N; i++) {
        stream *s = &st[i];
        int query = s->phase == QUERY, reset = s->phase < 0;
        memcpy(s->state, &state[i * S], sizeof(float) * (size_t)S);
        if (obs_row) {
            memcpy(&obs_row[i * T * OBS], &obs[i * OBS], sizeof obs[0] * OBS);
            act[i * T] = a[i];
            logp[i * T] = lp[i];
            rew[i * T] = query && a[i] == s->cue ? 1.0f : 0.0f;
            term[i * T] = (uint8_t)query;
            valid[i * T] = (uint8_t)!reset;
        }
        if (query) {
            (*answers)++;
            *right += a[i] == s->cue;
        }
        if (reset) { /* a new episode: zero state, a new cue */
            memset(s->state, 0, sizeof s->state);
            s->phase = 0;
            s->cue = coin();
        } else {
            s->phase = query ? -1 : s->phase + 1;
        }
    }
    return 0;
}

/* Greedy accuracy at the query over fresh streams (200 answers and more). */
static double accuracy(gb_torch_model *m, int64_t S)
{
    static stream st[N];
    memset(st, 0, sizeof st);
    for (int i = 0; i < N; i++)
        st[i].cue = coin();
    int answers = 0, right = 0;
    while (answers < 200)
        if (act_row(m, st, S, 1, NULL, NULL, NULL, NULL, NULL, NULL, &answers, &right))
            return -1;
    return (double)right / answers;
}

int main(int argc, char **argv)
{
    const char *core = argc > 1 ? argv[1] : "lstm";
    int with_core = strcmp(core, "none") != 0;
    gb_error err = {0};
    if (gb_torch_set_threads(1, &err) != 0)
        fprintf(stderr, "set_threads: %s\n", err.msg);
    char text[1024];
    snprintf(text, sizeof text,
             "experiment: {name: memory, seed: 1}\n"
             "env: {name: CartPole-v1}\n"
             "policy: {model: {type: mlp, hidden: [32], core: %s, core_size: 32%s}}\n"
             "trainer:\n  algorithm: {name: ppo, lr: 0.003, gamma: 0.9,\n"
             "    ppo: {epochs: 4, minibatches: 4, entropy_coef: 0.01}}\n",
             core, strcmp(core, "transformer") == 0
                       ? ", core_layers: 1, core_heads: 4, core_memory: 8" : "");
    gb_config cfg;
    gb_config_marks *marks = NULL;
    int rc = gb_config_load_string(&cfg, &marks, "<test>", text, strlen(text), &err);
    if (rc == 0)
        rc = gb_config_finish(&cfg, marks, &err);
    gb_config_marks_free(marks);
    if (rc) {
        fprintf(stderr, "config: %s\n", err.msg);
        return 1;
    }
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_FLOAT32;
    sp.obs_ndim = 1;
    sp.obs_shape[0] = OBS;
    sp.discrete = 1;
    sp.n_actions = 2;
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 17, &l, &err));
    if (!l)
        return test_main_result();
    gb_torch_model *m = gb_torch_learner_model(l);
    const int64_t S = gb_torch_model_state_size(m);
    CHECK(S <= MAXS && (S > 0) == with_core);

    static stream st[N];
    static float obs[N * T * OBS], next[N * OBS], rew[N * T], logp[N * T], state0[N * MAXS];
    static int64_t act[N * T];
    static uint8_t term[N * T], trunc[N * T], valid[N * T];
    for (int i = 0; i < N; i++)
        st[i].cue = coin();
    double acc = accuracy(m, S), best = acc;
    int iters = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fprintf(stderr, "%s: greedy accuracy at the query before training %.3f\n", core, acc);
    for (iters = 1; iters <= ITERS; iters++) {
        int answers = 0, right = 0;
        for (int i = 0; i < N; i++)
            memcpy(&state0[i * S], st[i].state, sizeof(float) * (size_t)S);
        for (int t = 0; t < T; t++)
            if (act_row(m, st, S, 0, obs + t * OBS, act + t, logp + t, rew + t, term + t,
                        valid + t, &answers, &right))
                return 1;
        for (int i = 0; i < N; i++)
            observe(&st[i], &next[i * OBS]);
        gb_torch_batch b = {N, T, obs, next, act, rew, term, trunc, valid, logp, NULL, 0,
                            with_core ? state0 : NULL, 0};
        gb_torch_stats stats;
        CHECK_OK(gb_torch_learner_train(l, &b, &stats, NULL, &err));
        if (iters % 5)
            continue;
        acc = accuracy(m, S);
        best = acc > best ? acc : best;
        fprintf(stderr, "%s: iteration %d: greedy accuracy %.3f (sampled %.3f), loss %.4f\n",
                core, iters, acc, answers ? (double)right / answers : 0.0, stats.loss);
        if (with_core && acc > 0.95)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "%s: %d training calls in %.1f s; final greedy accuracy %.3f, best %.3f\n",
            core, iters > ITERS ? ITERS : iters, secs, acc, best);
    if (with_core)
        CHECK_MSG(acc > 0.9, "%s: accuracy %.3f after %d training calls", core, acc, iters);
    else /* the query looks the same whatever the cue: one greedy answer for both */
        CHECK_MSG(best < 0.65, "no core: accuracy %.3f, chance is 0.5", best);
    gb_torch_learner_destroy(l);
    return test_main_result();
}
