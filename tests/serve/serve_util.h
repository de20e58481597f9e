/* tests/serve/serve_util.h: helpers for the data-server tests: a D4RL-layout HDF5 file written
 * with the HDF5 C API (values encode their row, so any sampled step can be checked against the
 * source), and a server run on a thread of the test. */
#ifndef GB_TESTS_SERVE_UTIL_H
#define GB_TESTS_SERVE_UTIL_H

#include "replay/replay.h"
#include "runtime/config.h"
#include "workers/server.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* Source values: obs[r][k] = 10 r + k (float32, 3), actions[r][k] = r / 2 + k (float64, 2),
 * rewards[r] = r / 4 (stored float64, served float32), next_observations[r][k] = 10 (r+1) + k,
 * infos/qpos[r] = 3 r (int32). Episodes end at rows with r % 97 == 96 (terminal) or
 * r % 151 == 150 (timeout). */
static inline int d4rl_terminal(int64_t r) { return r % 97 == 96; }
static inline int d4rl_timeout(int64_t r) { return r % 151 == 150; }

static inline int write_dset(hid_t f, const char *name, hid_t type, int rank, const hsize_t *dims,
                      const void *data)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = ds >= 0 ? H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
    return e < 0 ? -1 : 0;
}

static inline int make_d4rl(const char *path, int64_t N)
{
    float *obs = malloc((size_t)N * 3 * 4), *next = malloc((size_t)N * 3 * 4);
    double *act = malloc((size_t)N * 2 * 8), *rew = malloc((size_t)N * 8);
    uint8_t *term = malloc((size_t)N), *tout = malloc((size_t)N);
    int32_t *qpos = malloc((size_t)N * 4);
    for (int64_t r = 0; r < N; r++) {
        for (int k = 0; k < 3; k++) {
            obs[r * 3 + k] = (float)(10 * r + k);
            next[r * 3 + k] = (float)(10 * (r + 1) + k);
        }
        for (int k = 0; k < 2; k++)
            act[r * 2 + k] = (double)r / 2 + k;
        rew[r] = (double)r / 4;
        term[r] = (uint8_t)d4rl_terminal(r);
        tout[r] = (uint8_t)d4rl_timeout(r);
        qpos[r] = (int32_t)(3 * r);
    }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int rc = f < 0 ? -1 : 0;
    hsize_t d3[2] = {(hsize_t)N, 3}, d2[2] = {(hsize_t)N, 2}, d1[1] = {(hsize_t)N};
    if (!rc)
        rc = write_dset(f, "observations", H5T_NATIVE_FLOAT, 2, d3, obs) |
             write_dset(f, "next_observations", H5T_NATIVE_FLOAT, 2, d3, next) |
             write_dset(f, "actions", H5T_NATIVE_DOUBLE, 2, d2, act) |
             write_dset(f, "rewards", H5T_NATIVE_DOUBLE, 1, d1, rew) |
             write_dset(f, "terminals", H5T_NATIVE_UINT8, 1, d1, term) |
             write_dset(f, "timeouts", H5T_NATIVE_UINT8, 1, d1, tout);
    if (!rc) {
        hid_t g = H5Gcreate2(f, "infos", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        rc = g < 0 ? -1 : write_dset(g, "qpos", H5T_NATIVE_INT32, 1, d1, qpos);
        if (g >= 0)
            H5Gclose(g);
    }
    if (f >= 0)
        H5Fclose(f);
    free(obs);
    free(next);
    free(act);
    free(rew);
    free(term);
    free(tout);
    free(qpos);
    return rc;
}

/* Loads a config from text (defaults + text + required-key checks). */
static inline int gb_config_read_string_for_test(gb_config *cfg, const char *text, gb_error *err)
{
    gb_config_marks *marks = NULL;
    int rc = gb_config_load_string(cfg, &marks, "test.yaml", text, strlen(text), err);
    if (rc == 0)
        rc = gb_config_finish(cfg, marks, err);
    gb_config_marks_free(marks);
    return rc;
}

/* A server on a thread of this process. */
typedef struct test_server {
    gb_config cfg;
    gb_replay *replay;
    gb_server *server;
    void *zctx;
    atomic_int stop;
    pthread_t thread;
    int64_t loaded;
    int rc;
    gb_error err;
} test_server;

/* Fills this thread's stack below the caller with digits, as a used stack holds garbage in a
 * real process: the broker once read its request threads' routing ids past their end with atoi,
 * which a fresh (zeroed) thread stack hid (test_serve.c, test_fresh_servers_answer). */
static __attribute__((noinline)) void test_scribble_stack(void)
{
    volatile char junk[32768];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = '7';
}

static inline void *test_server_main(void *arg)
{
    test_server *t = arg;
    test_scribble_stack();
    t->rc = gb_server_run(t->server, &t->stop, &t->err);
    return NULL;
}

/* Loads cfg_text (YAML) and starts serving. Returns 0 or the error (message in err). */
static inline int test_server_start(test_server *t, const char *cfg_text, gb_error *err)
{
    memset(t, 0, sizeof *t);
    int rc = gb_config_read_string_for_test(&t->cfg, cfg_text, err);
    if (rc)
        return rc;
    if ((rc = gb_server_load_dataset(&t->cfg, &t->replay, &t->loaded, err)))
        return rc;
    gb_server_opts o;
    gb_server_opts_from_config(&o, &t->cfg.server);
    t->zctx = zmq_ctx_new();
    if ((rc = gb_server_open(&t->server, t->zctx, t->replay, &o, err)))
        return rc;
    pthread_create(&t->thread, NULL, test_server_main, t);
    return 0;
}

static inline void test_server_stop(test_server *t)
{
    if (t->server) {
        atomic_store(&t->stop, 1);
        pthread_join(t->thread, NULL);
    }
    gb_server_close(t->server);
    if (t->zctx)
        zmq_ctx_term(t->zctx);
    gb_replay_free(t->replay);
    t->server = NULL;
    t->zctx = NULL;
    t->replay = NULL;
}

#endif
