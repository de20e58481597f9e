/* tests/gpu/test_gpu_learning.c: the cuda trainer's learning step (workers/roles/learning.h)
 * against the cpu one, on real replays and learners. For each config given (DQN, PPO, SAC on
 * vectors; DQN with a CNN on uint8 frames; PPO with an LSTM core, whose chunks' random state
 * column is the batch's state0, kept on the host; R2D2, a GRU core with burn-in; PPO on frames
 * stored once under a frame stack, whose stacks the cuda trainer rebuilds on the device): the
 * same seeds, the same chunks, a FIFO
 * replay (selection on the CPU either way, so the batches are the same), STEPS steps on the cpu,
 * then with trainer.device cuda for trainer.collect gpu_zero_copy and cpu_staged, each with and
 * without prefetch. The cpu learner is the bridge's (the one in C draws its initial weights and
 * noise apart from libtorch's), as the cuda one is; the first cuda learner starts fresh, the
 * others from the cpu learner's checkpoint before its first step (a resumed run's path).
 * Checked: the initial parameters are equal; every step's loss is within 1e-3
 * (relative) of the cpu's; at the end the distance between the cuda and cpu parameters is under
 * 5 % of how far the cpu's moved (wrong rows would make it about 100 %; frames through the CNN:
 * 2e-2 and 25 %, for cuDNN's TF32 convolutions); the collection was timed. Then weighted,
 * uniform and top-k replays train on the GPU's selectors. Prints each run's collection and step
 * times. Without a CUDA device (CI) the harness alone runs: the cpu learner against itself
 * restored from that checkpoint, with the same bounds.
 * usage: test_gpu_learning CONFIG... */
#include "kernels/kernels.h"
#include "replay/replay.h"
#include "runtime/config/config.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "test.h"
#include "workers/roles/acting.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ITEMS = 48, STEPS = 5, MAX_SETS = 16 };

typedef struct run_out {
    double loss[STEPS];
    float *params;
    size_t nparams;
    float *initial;
    double collect_ms, train_ms;
} run_out;

static const char *config_path;
static char start_path[64]; /* the cpu learner's state before its first step */
enum { FRESH, SAVE_START, FROM_START }; /* run's start */
static int cuda;            /* a CUDA device and a libtorch with CUDA: the second learner's */
static gb_torch_space space;
static gb_chunk_layout layout;

static float *export_params(gb_learning *L, size_t *n)
{
    const gb_param_entry *table;
    int count;
    uint64_t total;
    /* the learning's, not its bridge model's: a cpu learner in C has none (learning.h) */
    gb_learning_param_layout(L, &table, &count, &total);
    float *buf = calloc(1, (size_t)total);
    gb_error err = {0};
    CHECK_OK(gb_learning_export(L, buf, (size_t)total, NULL, &err));
    *n = (size_t)total / sizeof(float); /* every built-in model is float32 */
    return buf;
}

static void fill(gb_learning *L)
{
    gb_error err = {0};
    void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < layout.ncols; c++)
        cols[c] = calloc(1, layout.bytes[c]);
    gb_rng rng;
    gb_rng_seed(&rng, 7);
    int u8 = space.obs_dtype == GB_DTYPE_UINT8;
    for (int i = 0; i < ITEMS; i++) {
        for (int c = GB_CHUNK_OBS; c < layout.ncols; c++) {
            if (c > GB_CHUNK_NEXT_OBS && c != layout.past_col)
                continue; /* the observations: obs, next_obs and a frame stack's obs_past */
            size_t bytes = layout.bytes[c];
            if (u8)
                for (size_t k = 0; k < bytes; k++)
                    ((uint8_t *)cols[c])[k] = (uint8_t)(gb_rng_next(&rng) >> 56);
            else
                for (size_t k = 0; k < bytes / 4; k++)
                    ((float *)cols[c])[k] = (float)gb_rng_uniform(&rng) - 0.5f;
        }
        for (int64_t t = 0; t < layout.T; t++) {
            if (space.discrete)
                ((int64_t *)cols[GB_CHUNK_ACTION])[t] =
                    (int64_t)gb_rng_below(&rng, (uint64_t)space.n_actions);
            else
                for (int64_t a = 0; a < space.action_dim; a++)
                    ((float *)cols[GB_CHUNK_ACTION])[t * space.action_dim + a] =
                        space.action_low[a] + (float)gb_rng_uniform(&rng) *
                                                  (space.action_high[a] - space.action_low[a]);
            ((float *)cols[GB_CHUNK_REWARD])[t] = (float)gb_rng_uniform(&rng);
            ((float *)cols[GB_CHUNK_LOGP])[t] = -0.7f;
            ((uint8_t *)cols[GB_CHUNK_VALID])[t] = !(i % 5 == 0 && t == 3);
            ((uint8_t *)cols[GB_CHUNK_TERMINATED])[t] = t == layout.T - 1 && i % 3 == 0;
        }
        for (int64_t k = 0; k < layout.state_size; k++) /* a core's state entering row 0 */
            ((float *)cols[GB_CHUNK_STATE])[k] = (float)gb_rng_uniform(&rng) - 0.5f;
        CHECK_OK(gb_learning_insert(L, (const void *const *)cols, 0, 0, &err));
    }
    for (int c = 0; c < layout.ncols; c++)
        free(cols[c]);
}

/* One learning of config_path with extra settings. bridge forces the bridge's learner (inline
 * mode, which then needs a sampling ratio) where the cpu would otherwise train the learner in C
 * (workers/roles/learning.h), whose initial weights and noise are drawn apart from libtorch's;
 * the cuda learner is the bridge's, so the cpu one it is held to must be too. start: FRESH, or
 * SAVE_START (the learner's state before its first step into start_path), or FROM_START (the
 * learner restored from there, as a resumed run's). */
static int run(const char *const *extra, int nextra, run_out *out, int bridge, int start)
{
    const char *sets[MAX_SETS] = {"trainer.replay.capacity=64", "trainer.replay.min_size=8",
                                  "trainer.replay.samples_per_insert=0", "trainer.batch_size=8",
                                  "trainer.replay.remover=fifo",
                                  "trainer.replay.max_times_sampled=0", "trainer.max_staleness=-1",
                                  "launch.mode=local"};
    int n = 8;
    if (bridge) { /* inline mode's rate limiter must let 5 batches of 8 follow 48 inserts */
        sets[n++] = "trainer.replay.samples_per_insert=1";
        sets[n++] = "trainer.replay.error_buffer=1000";
    }
    for (int i = 0; i < nextra && n < MAX_SETS; i++)
        sets[n++] = extra[i];
    gb_config cfg;
    gb_error err = {0};
    CHECK_OK(gb_config_read(&cfg, config_path, sets, n, &err));
    gb_learning_opts lo = {.cfg = &cfg, .space = &space, .layout = &layout, .learner_seed = 1,
                           .replay_seed = 2, .inline_mode = bridge,
                           .model_checkpoint = start == FROM_START ? start_path : NULL};
    gb_learning *L = NULL;
    int rc = gb_learning_create(&lo, &L, &err);
    CHECK_MSG(rc == 0, "create: %s", err.msg);
    if (rc)
        return rc;
    CHECK_MSG(gb_learning_restored(L) == (start == FROM_START), "restored %d",
              gb_learning_restored(L));
    if (start == SAVE_START)
        CHECK_OK(gb_learning_checkpoint(L, start_path, NULL, NULL, &err));
    out->initial = export_params(L, &out->nparams);
    fill(L);
    for (int k = 0; k < STEPS; k++) {
        rc = gb_learning_step(L, 0, 0, &err);
        CHECK_MSG(rc == 1, "step %d: %d %s", k, rc, err.msg);
        out->loss[k] = gb_learning_last(L)->loss;
    }
    out->params = export_params(L, &out->nparams);
    gb_learning_timings(L, &out->collect_ms, &out->train_ms);
    printf("  %-28s %-14s collect %.3f ms/step, train %.3f ms/step\n", extra[0],
           gb_learning_collect_path(L), out->collect_ms / STEPS, out->train_ms / STEPS);
    gb_replay_stats st;
    gb_replay_stats_get(gb_learning_replay(L), &st);
    gb_learning_step(L, 0, 1, &err);
    gb_replay_stats_get(gb_learning_replay(L), &st);
    CHECK_MSG(st.retired_pinned == 0, "pinned after stop: %lld", (long long)st.retired_pinned);
    gb_learning_destroy(L);
    return 0;
}

static double distance(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s);
}

static void compare(const char *what, const run_out *cpu, const run_out *gpu)
{
    CHECK_MSG(cpu->nparams == gpu->nparams, "%s: %zu against %zu parameters", what,
              cpu->nparams, gpu->nparams);
    if (cpu->nparams != gpu->nparams)
        return;
    CHECK_MSG(memcmp(cpu->initial, gpu->initial, cpu->nparams * 4) == 0,
              "%s: the initial parameters differ", what);
    /* cuDNN's convolutions run in TF32 by default (10-bit mantissas): frames get looser bounds */
    int frames = space.obs_dtype == GB_DTYPE_UINT8;
    double loss_tol = frames ? 2e-2 : 1e-3, param_tol = frames ? 0.25 : 0.05;
    for (int k = 0; k < STEPS; k++)
        CHECK_MSG(fabs(gpu->loss[k] - cpu->loss[k]) <= loss_tol * (fabs(cpu->loss[k]) + 1e-3),
                  "%s: step %d loss %.8g on the GPU, %.8g on the cpu", what, k, gpu->loss[k],
                  cpu->loss[k]);
    double moved = distance(cpu->params, cpu->initial, cpu->nparams);
    double apart = distance(gpu->params, cpu->params, cpu->nparams);
    CHECK_MSG(moved > 0.0 && apart < param_tol * moved,
              "%s: after %d steps the parameters are %.3g apart, the cpu's moved %.3g", what,
              STEPS, apart, moved);
    CHECK_MSG(gpu->collect_ms > 0.0, "%s: collection not timed", what);
    printf("  %s: parameters %.2e apart against %.2e moved; losses within %g\n", what, apart,
           moved, loss_tol);
}

static void free_out(run_out *o)
{
    free(o->params);
    free(o->initial);
}

static void test_config(void)
{
    run_out cpu = {0};
    const char *cpu_sets[] = {"trainer.replay.selector=fifo", "trainer.device=cpu"};
    if (run(cpu_sets, 2, &cpu, 1, SAVE_START))
        return;
    if (!cuda) { /* the harness: the same learner again, restored from its start */
        run_out other = {0};
        if (run(cpu_sets, 2, &other, 1, FROM_START) == 0)
            compare("the cpu's again from its start", &cpu, &other);
        free_out(&other);
        free_out(&cpu);
        return;
    }
    const char *modes[][3] = {
        {"trainer.collect=gpu_zero_copy", "trainer.prefetch=off", "gpu_zero_copy"},
        {"trainer.collect=gpu_zero_copy", "trainer.prefetch=on", "gpu_zero_copy+prefetch"},
        {"trainer.collect=cpu_staged", "trainer.prefetch=off", "cpu_staged"},
        {"trainer.collect=cpu_staged", "trainer.prefetch=on", "cpu_staged+prefetch"},
    };
    for (int m = 0; m < 4; m++) {
        run_out gpu = {0};
        const char *sets[] = {modes[m][0], "trainer.replay.selector=fifo",
                              "trainer.device=cuda", modes[m][1]};
        if (run(sets, 4, &gpu, 0, m == 0 ? FRESH : FROM_START) == 0)
            compare(modes[m][2], &cpu, &gpu);
        free_out(&gpu);
    }
    free_out(&cpu);

    /* selection on the GPU's selectors: each trains (weighted: and updates priorities) */
    const char *kinds[] = {"trainer.replay.selector=weighted", "trainer.replay.selector=uniform",
                           "trainer.replay.selector=topk"};
    for (int k = 0; k < 3; k++) {
        run_out w = {0};
        const char *wsets[] = {kinds[k], "trainer.device=cuda", "trainer.collect=gpu_zero_copy"};
        run(wsets, 3, &w, 0, FROM_START);
        free_out(&w);
    }
}

int main(int argc, char **argv)
{
    cuda = gb_kernels_device_count() >= 1 && gb_torch_cuda_available();
    if (!cuda)
        printf("no CUDA device (or a libtorch without CUDA): the cpu learner against itself "
               "restored from its start (the harness alone)\n");
    snprintf(start_path, sizeof start_path, "/tmp/gb_gpu_learning.%d.start", (int)getpid());
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG...\n", argv[0]);
        return 2;
    }
    gb_log_init("test", 0, GB_LOG_WARN);
    for (int i = 1; i < argc; i++) {
        config_path = argv[i];
        printf("%s\n", config_path);
        gb_config cfg;
        gb_error err = {0};
        CHECK_OK(gb_config_read(&cfg, config_path, NULL, 0, &err));
        gb_env_spec spec;
        CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
        CHECK_OK(gb_acting_layout_for(&spec, &cfg, &layout, &err));
        test_config();
    }
    unlink(start_path);
    return test_main_result();
}
