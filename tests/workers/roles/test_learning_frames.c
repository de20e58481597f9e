/* tests/workers/roles/test_learning_frames.c: a learner trained on chunks that store frame
 * stacks a frame a row (runtime/streams/chunk.h "Frame stacks") sees exactly what a learner
 * trained on whole observations sees. CartPole-v1 behind env.wrappers.frame_stack 4 is stepped
 * with random actions into two chunk builders, one with the frame-stack layout (as actors build
 * it: gb_acting_layout_for) and one storing whole observations; two learnings with the same
 * seeds take the same chunks, train the same steps (the batch's observations rebuilt where they
 * are collected; normalize_obs's statistics from the rebuilt rows) and must end with
 * bit-identical parameters. Also reported: the replay's bytes per stored step, both ways.
 * usage: test_learning_frames CONFIG... (tests/workers/dqn_cartpole.yaml, ppo_cartpole.yaml,
 * configs/breakout_dqn.yaml: CartPole's 4 floats, Breakout84's 84x84 frames) */
#include "envs/host.h"
#include "envs/ring.h"
#include "replay/replay.h"
#include "runtime/base/log.h"
#include "runtime/config/config.h"
#include "test.h"
#include "workers/roles/acting.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* STEPS batches of 8 train on each item once; way 0: whole observations, 1: frames */
enum { ITEMS = 40, STEPS = 5, WAYS = 2 };

/* Steps one copy of cfg's environment with random actions into a builder per layout until each
 * has ITEMS chunks (blocks[way][i]). */
static void make_chunks(const gb_config *cfg, gb_chunk_layout *l, void *blocks[WAYS][ITEMS])
{
    gb_error err = {0};
    gb_env_source src;
    gb_env_ring *ring = NULL;
    gb_env_ring_buffers buf;
    CHECK_OK(gb_env_ring_from_config(&cfg->env, 11, 1, 1, &src, &ring, &err));
    if (!ring)
        return;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &buf, &err));
    CHECK_OK(gb_env_ring_attach(ring, &buf, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    gb_chunk_builder *b[WAYS] = {NULL, NULL};
    for (int w = 0; w < WAYS; w++) {
        CHECK_OK(gb_chunk_builder_create(&l[w], 1, &b[w], &err));
        gb_chunk_start(b[w], 0, buf.obs);
    }
    int n[WAYS] = {0, 0}, ends = 0;
    uint64_t x = 5;
    while (b[0] && b[1] && (n[0] < ITEMS || n[1] < ITEMS)) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t a = (int64_t)((x >> 33) % 2);
        ((int32_t *)buf.actions)[0] = (int32_t)a;
        for (int w = 0; w < WAYS; w++)
            gb_chunk_act(b[w], 0, &a, -0.69f, 0);
        CHECK_OK(gb_env_ring_step(ring, 0, &err));
        int ended = buf.terminated[0] | buf.truncated[0];
        ends += ended;
        for (int w = 0; w < WAYS; w++) {
            CHECK_OK(gb_chunk_step(b[w], 0, buf.rewards[0], buf.terminated[0], buf.truncated[0],
                                   ended, buf.final_obs, buf.obs, &err));
            gb_chunk c;
            while (gb_chunk_take(b[w], &c)) {
                if (n[w] < ITEMS)
                    blocks[w][n[w]++] = c.block;
                else
                    gb_chunk_release(c.block);
            }
        }
    }
    CHECK(ends > 5);
    for (int w = 0; w < WAYS; w++)
        gb_chunk_builder_destroy(b[w]);
    gb_env_ring_destroy(ring);
    gb_env_ring_buffers_free(&buf);
    gb_env_source_close(&src);
}

/* Trains a learning of layout l on the chunks; returns its parameters' checksum, and the
 * replay's bytes per stored step in *step_bytes. */
static uint64_t train(const gb_config *cfg, const gb_torch_space *space,
                      const gb_chunk_layout *l, void *const *blocks, double *step_bytes)
{
    gb_error err = {0};
    gb_learning_opts lo = {.cfg = cfg, .space = space, .layout = l, .learner_seed = 1,
                           .replay_seed = 2};
    gb_learning *L = NULL;
    CHECK_OK(gb_learning_create(&lo, &L, &err));
    if (!L)
        return 0;
    for (int i = 0; i < ITEMS; i++) {
        const void *cols[GB_CHUNK_NCOLS];
        for (int c = 0; c < l->ncols; c++)
            cols[c] = gb_chunk_column(l, blocks[i], c);
        CHECK_OK(gb_learning_insert(L, cols, 0, 0, &err));
    }
    for (int k = 0; k < STEPS; k++)
        CHECK_EQ_INT(gb_learning_step(L, 0, 0, &err), 1);
    gb_replay_table t[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(gb_learning_replay(L), t);
    double bytes = 0;
    for (int c = 0; c < l->ncols; c++)
        bytes += (double)t[c].stride;
    *step_bytes = bytes / (double)l->T;
    uint64_t sum = gb_torch_learner_checksum(gb_learning_learner(L));
    CHECK_EQ_INT(gb_learning_step(L, 0, 1, &err), 2);
    gb_learning_destroy(L);
    return sum;
}

static void check_config(const char *path)
{
    const char *sets[] = {"trainer.replay.capacity=64", "trainer.replay.min_size=8",
                          "trainer.replay.samples_per_insert=0", "trainer.batch_size=8",
                          "trainer.replay.remover=fifo", "trainer.replay.selector=uniform",
                          "env.wrappers.frame_stack=4", "actors.chunk_len=8",
                          "env.max_episode_steps=29"}; /* episode ends at every row */
    gb_config cfg;
    gb_error err = {0};
    CHECK_OK(gb_config_read(&cfg, path, sets, (int)(sizeof sets / sizeof sets[0]), &err));
    if (err.code)
        return;
    /* normalize_obs's statistics (an mlp's) from the rebuilt rows too */
    cfg.policy.model.normalize_obs = cfg.policy.model.type == GB_MODEL_MLP;
    gb_env_spec spec;
    gb_torch_space space;
    gb_chunk_layout l[WAYS];
    CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
    CHECK_OK(gb_acting_layout_for(&spec, &cfg, &l[1], &err));
    CHECK_EQ_INT(l[1].frame_stack, 4);
    CHECK_OK(gb_chunk_layout_init(&l[0], l[1].T, l[1].obs_dtype, l[1].obs_rank, l[1].obs_shape,
                                  1, 1, 0, &err));
    void *blocks[WAYS][ITEMS] = {{0}};
    make_chunks(&cfg, l, blocks);
    double bytes[WAYS];
    uint64_t sum[WAYS];
    for (int w = 0; w < WAYS; w++)
        sum[w] = blocks[w][ITEMS - 1] ? train(&cfg, &space, &l[w], blocks[w], &bytes[w]) : 0;
    printf("%s: after %d steps, parameters %016llx (whole observations) and %016llx (frames); "
           "replay bytes per stored step %.0f and %.0f (%.2fx)\n", path, STEPS,
           (unsigned long long)sum[0], (unsigned long long)sum[1], bytes[0], bytes[1],
           bytes[0] / bytes[1]);
    CHECK(sum[0] != 0 && sum[0] == sum[1]);
    CHECK(bytes[1] < bytes[0]);
    for (int w = 0; w < WAYS; w++)
        for (int i = 0; i < ITEMS; i++)
            gb_chunk_release(blocks[w][i]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG...\n", argv[0]);
        return 2;
    }
    gb_log_init("test", 0, GB_LOG_WARN);
    for (int i = 1; i < argc; i++)
        check_config(argv[i]);
    return test_main_result();
}
