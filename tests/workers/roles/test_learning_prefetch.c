/* tests/workers/roles/test_learning_prefetch.c: the learning step's prefetch (trainer.prefetch:
 * batch k+1 selected and collected into a second slot while batch k trains; the cuda trainer's
 * pipeline) on the cpu path, and what a cuda trainer is refused with where there is no CUDA.
 * - Uniform replay, nothing inserted between steps: prefetching selects the same batches in the
 *   same order, so after the same steps the learner's parameters are bit-identical with and
 *   without it (the right slot trains with the right rows).
 * - Weighted replay, items sampled at most once: it trains, updates priorities, and a stop
 *   leaves no item pinned (the prefetched batch is released).
 * - Staleness: with max_staleness 2 and every item at version 0, exactly 3 steps train in both
 *   modes (the prefetch's floor is the one the learner has when that batch trains).
 * - trainer.device cuda without a device (this machine, CI): GB_EUNSUPPORTED naming what is
 *   missing; several cuda trainers: a config error naming trainer.device.
 * usage: test_learning_prefetch CONFIG (tests/workers/dqn_cartpole.yaml) */
#include "kernels/kernels.h"
#include "replay/replay.h"
#include "runtime/config/config.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "test.h"
#include "tests/workers/roles/chunk_test_util.h"
#include "tests/workers/roles/learning_test_util.h"
#include "workers/roles/acting.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITEMS = 40, STEPS = 10 };

static const char *config_path;
static gb_torch_space space;
static gb_chunk_layout layout;

static int read_config(gb_config *cfg, const char *const *sets, int nsets, gb_error *err)
{
    const char *base[16] = {"trainer.replay.capacity=64", "trainer.replay.min_size=8",
                            "trainer.replay.samples_per_insert=0", "trainer.batch_size=8",
                            "trainer.replay.remover=fifo"};
    int n = 5;
    for (int i = 0; i < nsets && n < 16; i++)
        base[n++] = sets[i];
    return gb_config_read(cfg, config_path, base, n, err);
}

/* A learning with these settings and ITEMS chunks of seeded random observations at version 0. */
static gb_learning *filled(gb_config *cfg, const char *const *sets, int nsets)
{
    gb_error err = {0};
    CHECK_OK(read_config(cfg, sets, nsets, &err));
    gb_learning_opts lo = {.cfg = cfg, .space = &space, .layout = &layout, .learner_seed = 1,
                           .replay_seed = 2};
    gb_learning *L = NULL;
    CHECK_OK(gb_learning_create(&lo, &L, &err));
    if (!L)
        return NULL;
    void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < layout.ncols; c++)
        cols[c] = calloc(1, layout.bytes[c]);
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    for (int i = 0; i < ITEMS; i++) {
        random_chunk_rows(&layout, cols, &rng);
        for (int64_t t = 0; t < layout.T; t++) {
            ((uint8_t *)cols[GB_CHUNK_VALID])[t] = 1;
            ((uint8_t *)cols[GB_CHUNK_TERMINATED])[t] = t == layout.T - 1 && i % 3 == 0;
        }
        CHECK_OK(gb_learning_insert(L, (const void *const *)cols, 0, 0, &err));
    }
    for (int c = 0; c < layout.ncols; c++)
        free(cols[c]);
    return L;
}

static uint64_t train_uniform(const char *prefetch, int64_t *steps)
{
    gb_config cfg;
    const char *sets[] = {"trainer.replay.selector=uniform", prefetch};
    gb_learning *L = filled(&cfg, sets, 2);
    if (!L)
        return 0;
    gb_error err = {0};
    for (int k = 0; k < STEPS; k++)
        CHECK_EQ_INT(gb_learning_step(L, 0, 0, &err), 1);
    *steps = gb_learning_train_steps(L);
    uint64_t sum = learning_params_hash(L);
    CHECK_EQ_INT(gb_learning_step(L, 0, 1, &err), 2);
    gb_learning_destroy(L);
    return sum;
}

static void test_same_parameters(void)
{
    int64_t s_off = 0, s_on = 0;
    uint64_t off = train_uniform("trainer.prefetch=off", &s_off);
    uint64_t on = train_uniform("trainer.prefetch=on", &s_on);
    CHECK_EQ_INT(s_off, STEPS);
    CHECK_EQ_INT(s_on, STEPS);
    CHECK_MSG(off == on && off != 0, "parameters after %d steps: %016llx without prefetch, "
              "%016llx with", STEPS, (unsigned long long)off, (unsigned long long)on);
}

static void test_weighted_no_pins(void)
{
    gb_config cfg;
    const char *sets[] = {"trainer.replay.selector=weighted", "trainer.prefetch=on",
                          "trainer.replay.max_times_sampled=1"};
    gb_learning *L = filled(&cfg, sets, 3);
    if (!L)
        return;
    CHECK_EQ_INT(gb_learning_prefetching(L), 1);
    CHECK(strcmp(gb_learning_collect_path(L), "host") == 0);
    gb_error err = {0};
    for (int k = 0; k < 3; k++)
        CHECK_EQ_INT(gb_learning_step(L, 0, 0, &err), 1);
    gb_replay_stats st;
    gb_replay_stats_get(gb_learning_replay(L), &st);
    /* every trained item's new priority reached the replay (stale: sampled out meanwhile) */
    CHECK_MSG(st.updates + st.stale_updates == 3 * 8, "priority updates %llu + %llu stale",
              (unsigned long long)st.updates, (unsigned long long)st.stale_updates);
    /* the batch prefetched during step 3 is still pinned, sampled out of selection */
    CHECK_MSG(st.retired_pinned == 8, "retired but pinned %lld", (long long)st.retired_pinned);
    CHECK_EQ_INT(gb_learning_step(L, 0, 1, &err), 2);
    gb_replay_stats_get(gb_learning_replay(L), &st);
    CHECK_MSG(st.retired_pinned == 0, "after stop, retired but pinned %lld",
              (long long)st.retired_pinned);
    double collect_ms, train_ms;
    gb_learning_timings(L, &collect_ms, &train_ms);
    CHECK(collect_ms > 0.0 && train_ms > 0.0 && collect_ms < train_ms);
    gb_learning_destroy(L);
}

static int stale_steps(const char *prefetch)
{
    gb_config cfg;
    const char *sets[] = {"trainer.replay.selector=uniform", "trainer.max_staleness=2",
                          prefetch};
    gb_learning *L = filled(&cfg, sets, 3);
    if (!L)
        return -1;
    gb_error err = {0};
    int trained = 0, rc;
    while (trained < 10 && (rc = gb_learning_step(L, 0, 0, &err)) == 1)
        trained++;
    CHECK_MSG(rc == 0, "after %d steps: %d (%s)", trained, rc, err.msg);
    gb_replay_stats st;
    gb_replay_stats_get(gb_learning_replay(L), &st);
    CHECK_MSG(st.expired == ITEMS, "expired %llu", (unsigned long long)st.expired);
    gb_learning_destroy(L);
    return trained;
}

static void test_staleness(void)
{
    CHECK_EQ_INT(stale_steps("trainer.prefetch=off"), 3);
    CHECK_EQ_INT(stale_steps("trainer.prefetch=on"), 3);
}

static void test_cuda_refused(void)
{
    gb_config cfg;
    gb_error err = {0};
    /* several trainers on GPUs: global selection (rows gathered in host memory) is refused */
    const char *two[] = {"trainer.device=cuda", "trainer.count=2", "launch.mode=local",
                         "trainer.replay.selection=global"};
    int rc = read_config(&cfg, two, 4, &err);
    CHECK_MSG(rc == GB_ECONFIG, "two cuda trainers, global selection: %d %s", rc, err.msg);
    CHECK_MSG(strstr(err.msg, "trainer.replay.selection") != NULL, "%s", err.msg);
    if (gb_kernels_device_count() > 0) {
        printf("a CUDA device is present: the refusal without one is not checked here\n");
        return;
    }
    const char *one[] = {"trainer.device=cuda"};
    memset(&err, 0, sizeof err);
    CHECK_OK(read_config(&cfg, one, 1, &err));
    gb_learning_opts lo = {.cfg = &cfg, .space = &space, .layout = &layout};
    gb_learning *L = NULL;
    CHECK(gb_learning_create(&lo, &L, &err) == GB_EUNSUPPORTED && L == NULL);
    CHECK_MSG(strstr(err.msg, "cuda") != NULL, "%s", err.msg);
    printf("cuda refused here: %s\n", err.msg);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG\n", argv[0]);
        return 2;
    }
    config_path = argv[1];
    gb_log_init("test", 0, GB_LOG_WARN);
    gb_config cfg;
    gb_error err = {0};
    CHECK_OK(gb_config_read(&cfg, config_path, NULL, 0, &err));
    gb_env_spec spec;
    CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
    CHECK_OK(gb_acting_layout_for(&spec, &cfg, &layout, &err));
    test_same_parameters();
    test_weighted_no_pins();
    test_staleness();
    test_cuda_refused();
    return test_main_result();
}
