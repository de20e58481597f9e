/* tests/workers/server/serve_util.h: helpers for the data-server tests: a D4RL-layout HDF5 file
 * written with the HDF5 C API (values encode their row, so any sampled step can be checked against
 * the source), and a server run on a thread of the test; for the C client tests (test_serve*.c) a
 * server config, the items the file should load as, a client opened with the server's info and
 * a checker of sampled values.
 * defines: make_d4rl, test_server_start, test_server_stop, server_config, plan, sbuf, verify,
 *          client_open_info, serve_test_setup */
#ifndef GB_TESTS_SERVE_UTIL_H
#define GB_TESTS_SERVE_UTIL_H

#include "replay/replay.h"
#include "runtime/config/config.h"
#include "workers/server/client/client.h"
#include "workers/server/server.h"

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
    gb_server_tables tables; /* the default table and server.tables */
    gb_replay *replay;       /* the default table's */
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
 * which a fresh (zeroed) thread stack hid (test_serve_robust.c, test_fresh_servers_answer). */
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
    if ((rc = gb_server_load_tables(&t->cfg, &t->tables, err)))
        return rc;
    t->replay = t->tables.t[0].r;
    t->loaded = t->tables.t[0].loaded;
    gb_server_opts o;
    gb_server_opts_from_config(&o, &t->cfg.server);
    t->zctx = zmq_ctx_new();
    if ((rc = gb_server_open_tables(&t->server, t->zctx, &t->tables, &o, err)))
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
    if (t->tables.n)
        gb_server_tables_free(&t->tables);
    else
        gb_replay_free(t->replay); /* a server started without test_server_start */
    t->server = NULL;
    t->zctx = NULL;
    t->replay = NULL;
}

/* ---- the C client tests -------------------------------------------------------------------- */

#define N_ROWS 1000
#define T_STEPS 8

static char tmpdir[512], h5path[600];

static inline char *server_config_wait(const char *extra, long max_bytes, double max_wait_s)
{
    static char text[4096];
    snprintf(text, sizeof text,
             "experiment: {name: serve_test}\n"
             "env: {name: CartPole-v1}\n"
             "trainer: {algorithm: {name: ppo}}\n"
             "server:\n"
             "  endpoint: tcp://127.0.0.1:*\n"
             "  threads: 3\n"
             "  dataset: %s\n"
             "  dataset_format: d4rl\n"
             "  steps: %d\n"
             "  max_batch_rows: 256\n"
             "  max_batch_bytes: %ld\n"
             "  max_request_bytes: 1000000\n"
             "  max_wait_s: %g\n"
             "%s",
             h5path, T_STEPS, max_bytes, max_wait_s, extra);
    return text;
}

static inline char *server_config_bytes(const char *extra, long max_bytes)
{
    return server_config_wait(extra, max_bytes, 2);
}

static inline char *server_config(const char *extra) { return server_config_bytes(extra, 50000); }

/* The planned items: first row and length, computed independently of replay/formats/d4rl.c. */
static int64_t plan_first[N_ROWS], nplan;
static int32_t plan_len[N_ROWS];

static inline void plan(void)
{
    int64_t start = 0;
    nplan = 0;
    for (int64_t r = 0; r < N_ROWS; r++) {
        if (!(d4rl_terminal(r) || d4rl_timeout(r) || r == N_ROWS - 1))
            continue;
        for (int64_t k = start; k <= r; k += T_STEPS) {
            plan_first[nplan] = k;
            plan_len[nplan++] = (int32_t)(r + 1 - k < T_STEPS ? r + 1 - k : T_STEPS);
        }
        start = r + 1;
    }
}

static inline int plan_find(int64_t first)
{
    for (int i = 0; i < nplan; i++)
        if (plan_first[i] == first)
            return i;
    return -1;
}

/* Buffers for one sample of every column. */
typedef struct sbuf {
    gb_client_info info;
    void *data[GB_CLIENT_MAX_COLUMNS];
    size_t cap[GB_CLIENT_MAX_COLUMNS];
    int64_t index[256];
    uint64_t key[256];
    double prob[256];
    float weight[256];
    int32_t length[256];
} sbuf;

static inline void sbuf_alloc(sbuf *b, int64_t batch)
{
    for (int c = 0; c < b->info.ncolumns; c++) {
        const gb_client_column *col = &b->info.columns[c];
        b->cap[c] = (size_t)batch * col->step_bytes * (col->per_item ? 1 : (size_t)b->info.steps);
        b->data[c] = calloc(1, b->cap[c]);
    }
}

static inline void sbuf_free(sbuf *b)
{
    for (int c = 0; c < b->info.ncolumns; c++)
        free(b->data[c]);
}

/* Opens a client on ep (timeout_ms for each request) and reads the server's info into *info.
 * Returns 0 or the first error (message in err); the caller closes *c either way. */
static inline int client_open_info(gb_client **c, const char *ep, int timeout_ms,
                                   gb_client_info *info, gb_error *err)
{
    int rc = gb_client_open(c, ep, timeout_ms, err);
    return rc ? rc : gb_client_get_info(*c, info, err);
}

/* Checks every value of n sampled items of steps [t0, t1) against the source. Returns the
 * number of wrong values; marks seen items. */
static inline int verify(const sbuf *b, int64_t n, int t0, int t1, int *seen)
{
    int bad = 0, S = t1 - t0;
    const gb_client_info *in = &b->info;
    int co = gb_client_column_index(in, "obs"), ca = gb_client_column_index(in, "action"),
        cr = gb_client_column_index(in, "reward"), ct = gb_client_column_index(in, "terminal"),
        cto = gb_client_column_index(in, "timeout"), cv = gb_client_column_index(in, "valid"),
        cn = gb_client_column_index(in, "next_obs"), cq = gb_client_column_index(in, "info_qpos");
    if (co < 0 || ca < 0 || cr < 0 || ct < 0 || cto < 0 || cv < 0 || cn < 0 || cq < 0)
        return 1000;
    for (int64_t i = 0; i < n; i++) {
        const float *obs = (const float *)b->data[co] + i * S * 3;
        /* the item's first row, from step t0's observation when it is valid */
        int64_t first = (int64_t)(obs[0] / 10) - t0;
        int p = plan_find(first);
        if (p < 0) {
            bad++;
            continue;
        }
        if (seen)
            seen[p] = 1;
        int len = plan_len[p];
        int in_range = len > t1 ? S : (len > t0 ? len - t0 : 0);
        if (b->length[i] != in_range)
            bad++;
        for (int s = 0; s < S; s++) {
            int step = t0 + s;
            int64_t r = first + step;
            int v = step < len;
            const float *o = obs + s * 3;
            const double *a = (const double *)b->data[ca] + (i * S + s) * 2;
            const float *nx = (const float *)b->data[cn] + (i * S + s) * 3;
            float rw = ((const float *)b->data[cr])[i * S + s];
            uint8_t te = ((const uint8_t *)b->data[ct])[i * S + s];
            uint8_t to = ((const uint8_t *)b->data[cto])[i * S + s];
            uint8_t va = ((const uint8_t *)b->data[cv])[i * S + s];
            int32_t q = ((const int32_t *)b->data[cq])[i * S + s];
            for (int k = 0; k < 3; k++) {
                bad += o[k] != (v ? (float)(10 * r + k) : 0.0f);
                bad += nx[k] != (v ? (float)(10 * (r + 1) + k) : 0.0f);
            }
            for (int k = 0; k < 2; k++)
                bad += a[k] != (v ? (double)r / 2 + k : 0.0);
            bad += rw != (v ? (float)((double)r / 4) : 0.0f);
            bad += te != (v ? d4rl_terminal(r) : 0);
            bad += to != (v ? d4rl_timeout(r) : 0);
            bad += va != v;
            bad += q != (v ? (int32_t)(3 * r) : 0);
        }
    }
    return bad;
}

/* Writes the test file (named h5name) into the directory argv[1] (default /tmp) and plans its
 * items. Returns 0, or 1 with a message. */
static inline int serve_test_setup(int argc, char **argv, const char *h5name)
{
    snprintf(tmpdir, sizeof tmpdir, "%s", argc > 1 ? argv[1] : "/tmp");
    snprintf(h5path, sizeof h5path, "%s/%s", tmpdir, h5name);
    if (make_d4rl(h5path, N_ROWS) != 0) {
        fprintf(stderr, "cannot write %s\n", h5path);
        return 1;
    }
    plan();
    return 0;
}

#endif
