/* tests/workers/roles/test_learning_attach.c: the trainer's learning survives the trainer being
 * killed. A child process builds the learning as the trainer does (replay in the run-owned segment
 * of a run directory, CONFIG's algorithm on its env's space: DQN on CartPole's, SAC on Pendulum's),
 * inserts chunks, trains, writes its model checkpoint, inserts more, starts writing a few chunks
 * and is SIGKILLed. The parent, as a restarted trainer, builds the learning with the same options:
 * the replay holds every committed chunk (checked by the id written into each), the in-flight ones
 * are dropped and counted, the learner comes back from the checkpoint (same step count and
 * parameter checksum) and goes on in gearbox's C, and training goes on over the recovered
 * items.
 * usage: test_learning_attach CONFIG SCRATCH */
#include "replay/replay.h"
#include "runtime/config/config.h"
#include "runtime/base/log.h"
#include "runtime/base/shm.h"
#include "test.h"
#include "tests/workers/roles/learning_test_util.h"
#include "workers/roles/acting.h"
#include "workers/roles/learner_file.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { COMMITTED_BEFORE = 20, COMMITTED_AFTER = 7, IN_FLIGHT = 3 };

static gb_config cfg;
static gb_torch_space space;
static gb_chunk_layout layout;
static char run_dir[1024], shm_name[GB_SHM_NAME_MAX], model_path[1200];

static int make_learning(gb_learning **L, gb_error *err)
{
    gb_learning_opts lo = {.cfg = &cfg, .space = &space, .layout = &layout, .learner_seed = 1,
                           .replay_seed = 2, .replay_shm_name = shm_name,
                           .model_checkpoint = model_path};
    return gb_learning_create(&lo, L, err);
}

/* A chunk whose observations carry its id (obs[0] of every row). */
static void chunk(uint64_t id, void *cols[GB_CHUNK_NCOLS])
{
    for (int c = 0; c < layout.ncols; c++)
        memset(cols[c], 0, layout.bytes[c]);
    float *obs = cols[GB_CHUNK_OBS];
    int64_t row = (int64_t)(layout.bytes[GB_CHUNK_OBS] / sizeof(float)) / layout.T;
    for (int64_t t = 0; t < layout.T; t++) {
        obs[t * row] = (float)id;
        obs[t * row + 1] = 0.01f * (float)t;
        ((uint8_t *)cols[GB_CHUNK_VALID])[t] = 1;
        ((float *)cols[GB_CHUNK_REWARD])[t] = 1.0f;
    }
}

typedef struct child_report {
    int64_t train_steps;
    uint64_t checksum;
} child_report;

static int child(int fd)
{
    gb_error err = {0};
    gb_learning *L;
    if (make_learning(&L, &err) != 0) {
        fprintf(stderr, "child: %s\n", err.msg);
        return 2;
    }
    void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < layout.ncols; c++)
        cols[c] = calloc(1, layout.bytes[c]);
    uint64_t id = 1;
    for (; id <= COMMITTED_BEFORE; id++) {
        chunk(id, cols);
        if (gb_learning_insert(L, (const void *const *)cols, 0, 0, &err) != 0)
            return 3;
    }
    for (int k = 0; k < 3; k++)
        if (gb_learning_step(L, 0, 0, &err) != 1) {
            fprintf(stderr, "child step: %s\n", err.msg);
            return 4;
        }
    if (gb_learning_checkpoint(L, model_path, NULL, NULL, &err) != 0)
        return 5;
    child_report rep = {gb_learning_train_steps(L), learning_params_hash(L)};
    for (; id <= COMMITTED_BEFORE + COMMITTED_AFTER; id++) {
        chunk(id, cols);
        if (gb_learning_insert(L, (const void *const *)cols, 0, 0, &err) != 0)
            return 6;
    }
    if (gb_learning_step(L, 0, 0, &err) != 1) /* trained past the checkpoint */
        return 7;
    int64_t idx[IN_FLIGHT];
    if (gb_replay_allocate(gb_learning_replay(L), IN_FLIGHT, idx, 0, &err) != 0)
        return 8;
    chunk(999, cols);
    gb_learning_write(L, idx[0], (const void *const *)cols);
    if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        return 9;
    raise(SIGKILL);
    return 10;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG SCRATCH\n", argv[0]);
        return 2;
    }
    const char *sets[] = {"trainer.replay.capacity=64", "trainer.replay.min_size=8",
                          "trainer.replay.samples_per_insert=0", "trainer.batch_size=8"};
    gb_error err = {0};
    if (gb_config_read(&cfg, argv[1], sets, 4, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    gb_log_init("test", 0, GB_LOG_WARN);
    gb_env_spec spec;
    CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
    CHECK_OK(gb_acting_layout_for(&spec, &cfg, &layout, &err));
    snprintf(run_dir, sizeof run_dir, "%s/learning-attach-%d", argv[2], (int)getpid());
    mkdir(run_dir, 0755);
    snprintf(model_path, sizeof model_path, "%s/trainer-0.model", run_dir);
    CHECK_OK(gb_replay_shm_name(run_dir, 0, shm_name, sizeof shm_name, &err));

    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stderr);
    pid_t pid = fork(); /* before this process touches libtorch */
    if (pid == 0) {
        close(p[0]);
        _exit(child(p[1]));
    }
    close(p[1]);
    child_report rep = {-1, 0};
    CHECK(read(p[0], &rep, sizeof rep) == (ssize_t)sizeof rep);
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);

    gb_learning *L = NULL;
    CHECK_OK(make_learning(&L, &err));
    if (!L)
        return test_main_result();
    gb_replay *r = gb_learning_replay(L);
    gb_replay_recovery rec;
    gb_replay_recovery_get(r, &rec);
    CHECK_EQ_INT(rec.attached, 1);
    CHECK_EQ_INT(rec.kept, COMMITTED_BEFORE + COMMITTED_AFTER);
    CHECK_EQ_INT(rec.dropped_in_flight, IN_FLIGHT);
    /* Every committed chunk, by the id in its observations. */
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    uint8_t seen[COMMITTED_BEFORE + COMMITTED_AFTER + 1] = {0};
    int ids_ok = 1;
    for (int64_t k = 0; k < st.size; k++) {
        float id = *(const float *)gb_replay_block(r, GB_CHUNK_OBS, st.live[k]);
        int i = (int)id;
        ids_ok &= i >= 1 && i <= COMMITTED_BEFORE + COMMITTED_AFTER && !seen[i];
        if (ids_ok)
            seen[i] = 1;
    }
    CHECK(ids_ok);
    CHECK_EQ_INT(st.size, COMMITTED_BEFORE + COMMITTED_AFTER);
    /* The learner as the checkpoint left it, not as it was at the kill. */
    CHECK_EQ_INT(gb_learning_restored(L), 1);
    CHECK_EQ_INT(gb_learning_train_steps(L), rep.train_steps);
    CHECK(learning_params_hash(L) == rep.checksum && rep.checksum != 0);
    /* a lone trainer of a plain MLP (DQN's, SAC's) goes on in gearbox's C from the restored
     * state, a learner file (workers/roles/learning.h, "The learning without libtorch") */
    CHECK(gb_learner_file_is(model_path));
    CHECK(gb_learning_learner(L) == NULL);
    /* Training goes on over the recovered items. */
    CHECK_EQ_INT(gb_learning_step(L, 0, 0, &err), 1);
    CHECK_EQ_INT(gb_learning_train_steps(L), rep.train_steps + 1);
    CHECK_OK(gb_replay_unlink(r, &err));
    gb_learning_destroy(L);
    gb_shm probe;
    CHECK_EQ_INT(gb_shm_open(&probe, shm_name, 0, 1, &err), GB_ENOTFOUND);
    unlink(model_path);
    rmdir(run_dir);
    return test_main_result();
}
