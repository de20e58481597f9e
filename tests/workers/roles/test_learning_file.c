/* tests/workers/roles/test_learning_file.c: the checkpoints of the learning without libtorch
 * (workers/roles/learning.h, workers/roles/learner_file.h), for CONFIG's algorithm (PPO and DQN
 * on CartPole's space, SAC on Pendulum's). A lone trainer's learning trains in C and writes a
 * learner file; a restored one goes on in C from it with the same parameters, version and step
 * count; a learning on libtorch's learner (inline mode acting on the bridge's model) restores
 * from it too and writes libtorch's checkpoint, from which a C learning goes on again: the
 * learner file it then writes holds every array (parameters, Adam's moments, the target) and
 * counter bit for bit as the first one. A flipped byte, a cut file and another configuration's
 * file are refused (GB_ECORRUPT) on both sides, naming why; a policy wider than 127 still
 * trains and checkpoints (libtorch then loads for its BLAS).
 * usage: test_learning_file CONFIG SCRATCH */
#include "runtime/base/log.h"
#include "runtime/config/config.h"
#include "test.h"
#include "tests/workers/roles/learning_test_util.h"
#include "workers/roles/acting.h"
#include "workers/roles/learner_file.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CHUNKS = 40, STEPS = 3 };

static const char *config_path;
static char dir[1024];

typedef struct setup {
    gb_config cfg;
    gb_torch_space space;
    gb_chunk_layout layout;
} setup;

/* CONFIG with the test's replay and batch, and extra (a --set; NULL: none). */
static int make_setup(setup *s, const char *extra, gb_error *err)
{
    /* (a ratio inline mode takes: the libtorch learnings below are inline mode's) */
    const char *sets[] = {"trainer.replay.capacity=64", "trainer.replay.min_size=8",
                          "trainer.replay.samples_per_insert=1",
                          "trainer.replay.error_buffer=64", "trainer.batch_size=8", extra};
    int rc = gb_config_read(&s->cfg, config_path, sets, extra ? 6 : 5, err);
    gb_env_spec spec;
    if (rc == 0)
        rc = gb_worker_env_space(&s->cfg, &spec, &s->space, err);
    if (rc == 0)
        rc = gb_acting_layout_for(&spec, &s->cfg, &s->layout, err);
    return rc;
}

/* A learning of s restoring from model (NULL: fresh); on_bridge: inline mode acting on the
 * bridge's model, so the learner is libtorch's. */
static int make_learning(setup *s, const char *model, int on_bridge, gb_learning **L,
                         gb_error *err)
{
    gb_learning_opts lo = {.cfg = &s->cfg, .space = &s->space, .layout = &s->layout,
                           .learner_seed = 1, .replay_seed = 2, .model_checkpoint = model,
                           .inline_mode = on_bridge};
    return gb_learning_create(&lo, L, err);
}

/* CHUNKS chunks of varied observations and rewards, then STEPS training steps. */
static int train(setup *s, gb_learning *L, gb_error *err)
{
    void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < s->layout.ncols; c++)
        cols[c] = calloc(1, s->layout.bytes[c]);
    const int64_t T = s->layout.T;
    const int64_t row = (int64_t)(s->layout.bytes[GB_CHUNK_OBS] / sizeof(float)) / T;
    int rc = 0;
    for (int k = 0; k < CHUNKS && rc == 0; k++) {
        float *obs = cols[GB_CHUNK_OBS];
        for (int64_t i = 0; i < T * row; i++)
            obs[i] = 0.1f * (float)((i * 7 + k * 3) % 11) - 0.5f;
        for (int64_t t = 0; t < T; t++) {
            ((uint8_t *)cols[GB_CHUNK_VALID])[t] = 1;
            ((float *)cols[GB_CHUNK_REWARD])[t] = (float)((t + k) % 3) - 1.0f;
        }
        rc = gb_learning_insert(L, (const void *const *)cols, 0, 0, err);
    }
    for (int k = 0; k < STEPS && rc == 0; k++)
        rc = gb_learning_step(L, 0, 0, err) == 1 ? 0 : GB_EINVAL;
    for (int c = 0; c < s->layout.ncols; c++)
        free(cols[c]);
    return rc;
}

/* 1 when a and b's learner files hold the same state, bit for bit. */
static int same_file(const char *a, const char *b)
{
    gb_learner_file fa, fb;
    gb_error err = {0};
    if (gb_learner_file_read(a, &fa, &err) || gb_learner_file_read(b, &fb, &err)) {
        fprintf(stderr, "same_file: %s\n", err.msg);
        return 0;
    }
    const size_t n = (size_t)fa.n * sizeof(float);
    int same = fa.n == fb.n && fa.target_n == fb.target_n && fa.count == fb.count &&
               fa.adam_steps == fb.adam_steps && fa.train_steps == fb.train_steps &&
               fa.version == fb.version && strcmp(fa.algorithm, fb.algorithm) == 0 &&
               memcmp(fa.p, fb.p, n) == 0 && memcmp(fa.m, fb.m, n) == 0 &&
               memcmp(fa.v, fb.v, n) == 0 &&
               (fa.target_n == 0 ||
                memcmp(fa.target, fb.target, (size_t)fa.target_n * sizeof(float)) == 0);
    gb_learner_file_free(&fa);
    gb_learner_file_free(&fb);
    return same;
}

/* A copy of src at dst with byte at flipped (-1: none), cut to keep bytes (-1: whole). */
static void damaged_copy(const char *src, const char *dst, long at, long keep)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    if (!in || !out)
        return;
    int c;
    for (long i = 0; (c = fgetc(in)) != EOF && (keep < 0 || i < keep); i++)
        fputc(i == at ? c ^ 0x40 : c, out);
    fclose(in);
    fclose(out);
}

/* A learning of s restoring from path is refused with GB_ECORRUPT naming why, on the C side and
 * on libtorch's. */
static void refused(setup *s, const char *path, const char *why)
{
    for (int on_bridge = 0; on_bridge < 2; on_bridge++) {
        gb_learning *L = NULL;
        gb_error err = {0};
        int rc = make_learning(s, path, on_bridge, &L, &err);
        CHECK_MSG(rc == GB_ECORRUPT && strstr(err.msg, why), "%s (bridge %d): %d %s", path,
                  on_bridge, rc, err.msg);
        gb_learning_destroy(L);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG SCRATCH\n", argv[0]);
        return 2;
    }
    config_path = argv[1];
    gb_log_init("test", 0, GB_LOG_WARN);
    snprintf(dir, sizeof dir, "%s/learning-file-%d", argv[2], (int)getpid());
    mkdir(dir, 0755);
    char first[1200], torch_ck[1200], again[1200], bad[1200], other[1200], wide[1200];
    snprintf(first, sizeof first, "%s/first.model", dir);
    snprintf(torch_ck, sizeof torch_ck, "%s/torch.model", dir);
    snprintf(again, sizeof again, "%s/again.model", dir);
    snprintf(bad, sizeof bad, "%s/bad.model", dir);
    snprintf(other, sizeof other, "%s/other.model", dir);
    snprintf(wide, sizeof wide, "%s/wide.model", dir);
    gb_error err = {0};
    setup s;
    CHECK_OK(make_setup(&s, NULL, &err));

    /* A lone learning trains in C and writes a learner file. */
    gb_learning *A = NULL;
    CHECK_OK(make_learning(&s, first, 0, &A, &err));
    if (!A)
        return test_main_result();
    CHECK(gb_learning_learner(A) == NULL);
    CHECK_OK(train(&s, A, &err));
    gb_learning_set_version(A, 17);
    CHECK_OK(gb_learning_checkpoint(A, first, NULL, NULL, &err));
    CHECK(gb_learner_file_is(first));
    const uint64_t hash = learning_params_hash(A);
    CHECK(hash != 0);
    gb_learning_destroy(A);

    /* It goes on in C from there: the same parameters, version and step count. */
    gb_learning *B = NULL;
    CHECK_OK(make_learning(&s, first, 0, &B, &err));
    if (B) {
        CHECK(gb_learning_learner(B) == NULL);
        CHECK_EQ_INT(gb_learning_restored(B), 1);
        CHECK_EQ_INT(gb_learning_train_steps(B), STEPS);
        CHECK_EQ_INT((int64_t)gb_learning_version(B), 17);
        CHECK(learning_params_hash(B) == hash);
        CHECK_OK(train(&s, B, &err)); /* and trains on */
        CHECK_EQ_INT(gb_learning_train_steps(B), 2 * STEPS);
        gb_learning_destroy(B);
    }

    /* libtorch's learner restores from it and writes libtorch's checkpoint... */
    gb_learning *C = NULL;
    CHECK_OK(make_learning(&s, first, 1, &C, &err));
    if (C) {
        CHECK(gb_learning_learner(C) != NULL);
        CHECK_EQ_INT(gb_learning_train_steps(C), STEPS);
        CHECK_EQ_INT((int64_t)gb_learning_version(C), 17);
        CHECK(learning_params_hash(C) == hash);
        CHECK_OK(gb_learning_checkpoint(C, torch_ck, NULL, NULL, &err));
        CHECK(!gb_learner_file_is(torch_ck));
        gb_learning_destroy(C);
    }
    /* ... from which C goes on, and writes the same state as the first file. */
    gb_learning *D = NULL;
    CHECK_OK(make_learning(&s, torch_ck, 0, &D, &err));
    if (D) {
        CHECK(gb_learning_learner(D) == NULL);
        CHECK(learning_params_hash(D) == hash);
        CHECK_OK(gb_learning_checkpoint(D, again, NULL, NULL, &err));
        CHECK(same_file(first, again));
        gb_learning_destroy(D);
    }

    /* A flipped byte in the arrays, one in the layout, a cut file: corrupt. */
    struct stat st;
    CHECK(stat(first, &st) == 0);
    damaged_copy(first, bad, (long)st.st_size - 5, -1);
    refused(&s, bad, "a CRC does not match");
    damaged_copy(first, bad, 100, -1);
    refused(&s, bad, "a CRC does not match");
    damaged_copy(first, bad, -1, (long)st.st_size - 4);
    refused(&s, bad, "its size does not match its header");
    damaged_copy(first, bad, 9, -1);
    refused(&s, bad, "a format this gearbox does not read");

    /* Another configuration's (narrower layers): refused, not loaded into the wrong tensors. */
    setup narrow;
    CHECK_OK(make_setup(&narrow, "policy.model.hidden=[32, 32]", &err));
    gb_learning *N = NULL;
    CHECK_OK(make_learning(&narrow, NULL, 0, &N, &err));
    if (N) {
        CHECK_OK(train(&narrow, N, &err));
        CHECK_OK(gb_learning_checkpoint(N, other, NULL, NULL, &err));
        gb_learning_destroy(N);
        gb_learning *R = NULL;
        int rc = make_learning(&s, other, 0, &R, &err);
        CHECK_MSG(rc == GB_ECORRUPT && strstr(err.msg, "another configuration's checkpoint"),
                  "%d %s", rc, err.msg);
        gb_learning_destroy(R);
        refused(&s, other, "import:");
    }

    /* Layers 160 wide: the products go to libtorch's BLAS once loaded; the learning trains and
     * its checkpoint restores. */
    setup w;
    CHECK_OK(make_setup(&w, "policy.model.hidden=[160, 160]", &err));
    gb_learning *W = NULL;
    CHECK_OK(make_learning(&w, NULL, 0, &W, &err));
    if (W) {
        CHECK(gb_learning_learner(W) == NULL);
        CHECK_OK(train(&w, W, &err));
        CHECK_OK(gb_learning_checkpoint(W, wide, NULL, NULL, &err));
        const uint64_t wh = learning_params_hash(W);
        gb_learning_destroy(W);
        gb_learning *V = NULL;
        CHECK_OK(make_learning(&w, wide, 0, &V, &err));
        CHECK(V && learning_params_hash(V) == wh);
        gb_learning_destroy(V);
    }
    const char *files[] = {first, torch_ck, again, bad, other, wide};
    for (int i = 0; i < 6; i++)
        unlink(files[i]);
    rmdir(dir);
    return test_main_result();
}
