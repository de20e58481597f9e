/* tests/workers/roles/test_learning_state.c: a recurrent core's state column through the
 * trainer's learning (workers/roles/learning.h) with PPO and an LSTM core.
 * - The replay has the chunk's state column, per item [S] float32: what is inserted is what a
 *   selection collects, and a replay checkpoint restores it exactly.
 * - The training batch's state0 is the collected column: two learnings made alike, fed the same
 *   chunks but for their state column, train to different parameters, while two fed the same
 *   state train to identical ones (so the difference is the state's, not noise).
 * usage: test_learning_state CONFIG SCRATCH (tests/workers/ppo_cartpole.yaml) */
#include "replay/replay.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "runtime/config/config.h"
#include "test.h"
#include "tests/workers/roles/chunk_test_util.h"
#include "workers/roles/acting.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ITEMS = 4, CORE = 4, S = 2 * CORE };

static gb_config cfg;
static gb_torch_space space;
static gb_chunk_layout layout;

static gb_learning *make(void)
{
    gb_error err = {0};
    gb_learning_opts lo = {.cfg = &cfg, .space = &space, .layout = &layout, .learner_seed = 1,
                           .replay_seed = 2};
    gb_learning *L = NULL;
    CHECK_OK(gb_learning_create(&lo, &L, &err));
    return L;
}

/* The state of item i (never zero), or zeros. */
static void state_of(int i, int zero, float *st)
{
    for (int k = 0; k < S; k++)
        st[k] = zero ? 0.0f : 0.5f * (float)(i + 1) - 0.1f * (float)k;
}

/* Inserts ITEMS chunks of seeded random rows; their state column is state_of(i, zero_state). */
static void fill(gb_learning *L, int zero_state)
{
    gb_error err = {0};
    void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < layout.ncols; c++)
        cols[c] = calloc(1, layout.bytes[c]);
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (int i = 0; i < ITEMS; i++) {
        random_chunk_rows(&layout, cols, &rng);
        for (int64_t t = 0; t < layout.T; t++) {
            ((float *)cols[GB_CHUNK_LOGP])[t] = -0.69f;
            ((uint8_t *)cols[GB_CHUNK_VALID])[t] = 1;
        }
        state_of(i, zero_state, cols[GB_CHUNK_STATE]);
        CHECK_OK(gb_learning_insert(L, (const void *const *)cols, 0, 0, &err));
    }
    for (int c = 0; c < layout.ncols; c++)
        free(cols[c]);
}

/* Every item's state column: in the blocks, collected by a fifo selection (oldest first), and
 * after a replay checkpoint and restore into a fresh learning. */
static void test_replay_column(const char *scratch)
{
    gb_error err = {0};
    gb_learning *L = make();
    if (!L)
        return;
    fill(L, 0);
    gb_replay *r = gb_learning_replay(L);
    float want[ITEMS][S];
    for (int i = 0; i < ITEMS; i++)
        state_of(i, 0, want[i]);
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    CHECK_EQ_INT(st.size, ITEMS);
    char path[1024], model[1100];
    snprintf(path, sizeof path, "%s/learning-state-%d.replay", scratch, (int)getpid());
    snprintf(model, sizeof model, "%s.model", path);
    CHECK_OK(gb_learning_checkpoint(L, model, path, NULL, &err));
    gb_replay_selection sel;
    CHECK_OK(gb_replay_selection_init(&sel, ITEMS, &err));
    gb_replay_request req = gb_replay_request_default(ITEMS);
    req.timeout_s = 0;
    CHECK_OK(gb_replay_sample(r, &req, &sel, &err));
    float got[ITEMS][S];
    gb_replay_dst dst = {.column = GB_CHUNK_STATE, .data = got, .bytes = sizeof got};
    CHECK_OK(gb_replay_collect(r, &sel, &dst, 1, NULL, &err));
    CHECK_EQ_INT(sel.n, ITEMS);
    CHECK(memcmp(got, want, sizeof got) == 0);
    gb_replay_release(r, &sel);
    gb_replay_selection_free(&sel);
    gb_learning_destroy(L);

    gb_learning *R = make();
    if (!R)
        return;
    r = gb_learning_replay(R);
    CHECK_OK(gb_replay_restore(r, path, &err));
    gb_replay_status_view(r, &st);
    CHECK_EQ_INT(st.size, ITEMS);
    int same = 0;
    for (int64_t k = 0; k < st.size; k++) {
        const float *b = gb_replay_block(r, GB_CHUNK_STATE, st.live[k]);
        for (int i = 0; i < ITEMS; i++)
            same += memcmp(b, want[i], sizeof want[i]) == 0;
    }
    CHECK_EQ_INT(same, ITEMS);
    gb_learning_destroy(R);
    unlink(path);
    unlink(model);
}

/* Parameters after one training step on ITEMS chunks with zero or non-zero states. */
static uint64_t trained(int zero_state)
{
    gb_error err = {0};
    gb_learning *L = make();
    if (!L)
        return 0;
    fill(L, zero_state);
    CHECK_EQ_INT(gb_learning_step(L, 0, 0, &err), 1);
    /* the parameters the policy workers would get (whichever learner trained them: gearbox's
     * C one for this LSTM), as an FNV-1a hash of their bytes */
    const gb_param_entry *table;
    int count;
    uint64_t bytes, version, sum = 14695981039346656037ull;
    gb_learning_param_layout(L, &table, &count, &bytes);
    unsigned char *buf = malloc(bytes);
    CHECK(buf != NULL);
    if (buf) {
        CHECK_OK(gb_learning_export(L, buf, bytes, &version, &err));
        for (uint64_t i = 0; i < bytes; i++)
            sum = (sum ^ buf[i]) * 1099511628211ull;
    }
    free(buf);
    gb_learning_destroy(L);
    return sum;
}

static void test_state0_trains(void)
{
    uint64_t zeros = trained(1), zeros_again = trained(1), state = trained(0);
    CHECK_MSG(zeros == zeros_again, "the same chunks trained to different parameters");
    CHECK_MSG(state != zeros, "the state column did not reach the learner (state0)");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG SCRATCH\n", argv[0]);
        return 2;
    }
    gb_log_init("test", 0, GB_LOG_WARN);
    const char *sets[] = {"policy.model.core=lstm", "policy.model.core_size=4",
                          "actors.chunk_len=4", "trainer.batch_size=4",
                          "trainer.replay.capacity=8", "trainer.replay.min_size=4",
                          "trainer.replay.samples_per_insert=0", "trainer.threads=1",
                          "trainer.algorithm.ppo.minibatches=2"};
    gb_error err = {0};
    if (gb_config_read(&cfg, argv[1], sets, (int)(sizeof sets / sizeof sets[0]), &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    gb_env_spec spec;
    CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
    CHECK_OK(gb_acting_layout_for(&spec, &cfg, &layout, &err));
    CHECK_EQ_INT(layout.state_size, S);
    CHECK_EQ_INT(gb_torch_set_threads(1, &err), 0);
    test_replay_column(argv[2]);
    test_state0_trains();
    return test_main_result();
}
