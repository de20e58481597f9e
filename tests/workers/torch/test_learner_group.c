/* tests/workers/torch/test_learner_group.c: data-parallel learners (gb_torch_learner_set_group)
 * across two forked ranks on a FileStore group:
 * - replicas: each algorithm (DQN, PPO, PPO with an LSTM core, SAC) starts from different seeds
 *   per rank, takes rank 0's state at set_group, then trains on different batches per rank
 *   (uneven valid counts, and a step where one rank has no valid step at all): the checksums
 *   agree on both ranks after every step, and differ from a learner without a group trained on
 *   rank 0's batches alone;
 * - the union: DQN steps of 2 ranks x 4 fully valid chunks equal steps of a learner without a
 *   group on the 8 chunks (each rank's mean gradient over the same number of valid steps: their
 *   mean is the union's mean gradient), in gradient norm and in every parameter;
 * - a failure: a rank that exits makes the other's train call fail with the group's error.
 * The parent never calls libtorch: ranks are forked from a clean process. */
#include "workers/ranks_util.h"
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/bridge.h"
#include "workers/torch/group.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/gb_learner_group_XXXXXX";

/* ---- batches ------------------------------------------------------------------------------- */

enum { MAXB = 8, T = 8, MAXOBS = 4 };

/* A batch of B chunks whose values follow seed; n_invalid steps (spread over the chunks) are
 * reset steps. */
typedef struct {
    float obs[MAXB * T * MAXOBS], next[MAXB * MAXOBS], rew[MAXB * T], logp[MAXB * T];
    float cact[MAXB * T * 2];
    int64_t dact[MAXB * T];
    uint8_t term[MAXB * T], trunc[MAXB * T], valid[MAXB * T];
    gb_torch_batch b;
} batch;

static void make_batch(batch *x, const gb_torch_space *sp, int B, unsigned seed, int n_invalid)
{
    const int od = (int)sp->obs_shape[0];
    memset(x, 0, sizeof *x);
    fill(x->obs, B * T * od, seed);
    fill(x->next, B * od, seed + 1);
    fill(x->rew, B * T, seed + 2);
    fill(x->cact, B * T * 2, seed + 3);
    for (int i = 0; i < B * T; i++) {
        x->dact[i] = sp->discrete ? (int64_t)((i * 7 + seed) % (unsigned)sp->n_actions) : 0;
        x->cact[2 * i + 1] = 0.5f + 0.4f * x->cact[2 * i + 1]; /* inside [0, 1] */
        x->logp[i] = -1.0f - 0.01f * (float)(i % 5);
        x->valid[i] = 1;
        x->term[i] = (i % 11) == 10;
    }
    for (int k = 0; k < n_invalid && k < B * T; k++)
        x->valid[(k * 5) % (B * T)] = 0;
    gb_torch_batch b = {B, T, x->obs, x->next, sp->discrete ? (void *)x->dact : (void *)x->cact,
                        x->rew, x->term, x->trunc, x->valid, x->logp, NULL, 0, NULL, 0};
    x->b = b;
}

/* ---- ranks ---------------------------------------------------------------------------------- */

typedef int (*rank_fn)(int rank, const char *store);
typedef struct {
    rank_fn fn;
    const char *store;
} pair_job;

static int run_job(int rank, int size, void *arg)
{
    pair_job *job = arg;
    gb_error err = {0};
    if (gb_torch_set_threads(1, &err) != 0)
        fprintf(stderr, "set_threads: %s\n", err.msg);
    return job->fn(rank, job->store);
}

/* Two forked ranks running fn on a group at store; returns how many failed. */
static int run_pair(rank_fn fn, const char *store, int limit_s)
{
    pair_job job = {fn, store};
    return ranks_run(2, run_job, &job, limit_s);
}

static const char *store_path(const char *name)
{
    static char path[8][300];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 300, "%s/%s", dir, name);
    return p;
}

static gb_group *open_pair(int rank, const char *store, double timeout_s)
{
    gb_error err = {0};
    gb_group_opts o = {.rank = rank, .size = 2, .store_path = store, .prefix = "learner/",
                       .timeout_s = timeout_s};
    gb_group *g = NULL;
    CHECK_OK(gb_group_open(&o, &g, &err));
    return g;
}

/* Both ranks' checksums, through the group. */
static int checksums(gb_group *g, uint64_t mine, uint64_t both[2])
{
    gb_error err = {0};
    int rc = gb_group_allgather(g, &mine, sizeof mine, both, &err);
    CHECK_MSG(rc == 0, "allgather: %s", err.msg);
    return rc;
}

/* ---- replicas stay identical ---------------------------------------------------------------- */

static const char *replica_algo;

static int replicas_rank(int rank, const char *store)
{
    const char *algo = replica_algo;
    gb_error err = {0};
    gb_config cfg;
    const int lstm = strcmp(algo, "ppo_lstm") == 0; /* minibatches of whole chunks */
    if (make_cfg(&cfg, lstm ? "ppo" : algo, lstm ? ", core: lstm, core_size: 8" : "") != 0)
        return 1;
    gb_torch_space sp = strcmp(algo, "sac") == 0 ? box_space() : discrete_space();
    gb_group *g = open_pair(rank, store, 30.0);
    gb_torch_learner *l = NULL, *solo = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 100 + rank, &l, &err));
    if (rank == 0) /* rank 0's start, trained without a group on rank 0's batches */
        CHECK_OK(gb_torch_learner_create(&cfg, &sp, 100, &solo, &err));
    if (!g || !l || (rank == 0 && !solo))
        goto done;
    uint64_t both[2];
    if (checksums(g, gb_torch_learner_checksum(l), both))
        goto done;
    CHECK(both[0] != both[1]); /* different seeds */
    CHECK_OK(gb_torch_learner_set_group(l, g, 1024, &err)); /* small buckets: several a step */
    if (checksums(g, gb_torch_learner_checksum(l), both))
        goto done;
    CHECK(both[0] == both[1]); /* rank 0's state everywhere */
    if (rank == 0)
        CHECK(gb_torch_learner_checksum(solo) == both[0]);
    uint64_t start = both[0];

    /* rank 1: fewer valid steps (PPO: fewer minibatches), and none at all in step 2 */
    static const int invalid[2][4] = {{0, 3, 0, 1}, {0, 23, 4 * T, 5}};
    batch *x = malloc(sizeof *x);
    for (int step = 0; step < 4; step++) {
        make_batch(x, &sp, 4, 1000u * (unsigned)rank + 17u * (unsigned)step,
                   invalid[rank][step]);
        gb_torch_stats st;
        float prio[4];
        CHECK_OK(gb_torch_learner_train(l, &x->b, &st, prio, &err));
        if (rank == 1 && step == 2)
            CHECK_EQ_INT(st.samples, 0);
        if (checksums(g, gb_torch_learner_checksum(l), both))
            break;
        CHECK_MSG(both[0] == both[1], "%s step %d: checksums %016llx %016llx", algo, step,
                  (unsigned long long)both[0], (unsigned long long)both[1]);
        CHECK(both[0] != start); /* it trains */
        if (rank == 0) {
            CHECK_OK(gb_torch_learner_train(solo, &x->b, &st, NULL, &err));
            CHECK(gb_torch_learner_checksum(solo) != both[0]); /* rank 1's data counts */
        }
    }
    CHECK_EQ_INT(gb_torch_learner_train_steps(l), 4);
    /* back to local training: no collective any more */
    CHECK_OK(gb_torch_learner_set_group(l, NULL, 0, &err));
    make_batch(x, &sp, 2, 5u + (unsigned)rank, 0);
    CHECK_OK(gb_torch_learner_train(l, &x->b, NULL, NULL, &err));
    free(x);
done:
    gb_torch_learner_destroy(l);
    gb_torch_learner_destroy(solo);
    gb_group_close(g);
    return test_failures_;
}

static void replicas(const char *algo)
{
    replica_algo = algo;
    char name[32];
    snprintf(name, sizeof name, "replicas_%s", algo);
    CHECK_EQ_INT(run_pair(replicas_rank, store_path(name), 120), 0);
}

static void test_replicas_dqn(void) { replicas("dqn"); }
static void test_replicas_ppo(void) { replicas("ppo"); }
static void test_replicas_ppo_lstm(void) { replicas("ppo_lstm"); }
static void test_replicas_sac(void) { replicas("sac"); }

/* ---- two ranks' step = one step on the union ------------------------------------------------ */

/* Every parameter of two learners' models, within tol; returns the largest difference. */
static double max_param_diff(gb_torch_learner *a, gb_torch_learner *b)
{
    gb_error err = {0};
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(gb_torch_learner_model(a), &table, &count, &total);
    char *pa = malloc(total), *pb = malloc(total);
    double worst = INFINITY;
    if (gb_torch_model_export(gb_torch_learner_model(a), pa, total, NULL, &err) == 0 &&
        gb_torch_model_export(gb_torch_learner_model(b), pb, total, NULL, &err) == 0) {
        worst = 0;
        for (int i = 0; i < count; i++) {
            CHECK(table[i].dtype == GB_DTYPE_FLOAT32);
            const float *x = (const float *)(pa + table[i].offset);
            const float *y = (const float *)(pb + table[i].offset);
            int64_t n = 1;
            for (int d = 0; d < table[i].rank; d++)
                n *= table[i].shape[d];
            for (int64_t k = 0; k < n; k++)
                worst = fmax(worst, fabs((double)x[k] - (double)y[k]));
        }
    }
    free(pa);
    free(pb);
    return worst;
}

static int union_rank(int rank, const char *store)
{
    gb_error err = {0};
    gb_config cfg;
    if (make_cfg(&cfg, "dqn", "") != 0)
        return 1;
    gb_torch_space sp = discrete_space();
    gb_group *g = open_pair(rank, store, 30.0);
    gb_torch_learner *l = NULL, *whole = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    batch *all = malloc(sizeof *all), *part = malloc(sizeof *part);
    if (!g || !l)
        goto done;
    /* the union: 8 fully valid chunks; rank r trains on chunks 4r .. 4r+3 */
    make_batch(all, &sp, 8, 77, 0);
    for (int i = 0; i < 8 * T; i++)
        all->term[i] = 0; /* every step valid and every n-step window inside its chunk */
    const int od = (int)sp.obs_shape[0], half = 4 * T;
    make_batch(part, &sp, 4, 0, 0);
    memcpy(part->obs, all->obs + rank * half * od, sizeof(float) * half * od);
    memcpy(part->next, all->next + rank * 4 * od, sizeof(float) * 4 * od);
    memcpy(part->rew, all->rew + rank * half, sizeof(float) * half);
    memcpy(part->dact, all->dact + rank * half, sizeof(int64_t) * half);
    memcpy(part->term, all->term + rank * half, half);
    CHECK_OK(gb_torch_learner_set_group(l, g, 0, &err));
    if (rank == 0)
        CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &whole, &err));
    /* Adam's steps hardly see the gradient's scale (the first moves every weight by about
     * -lr sign(g)), so the gradient norm (before clipping) is compared too; the second step
     * (same batches) depends on each element's ratio of the two steps' gradients */
    for (int step = 0; step < 2; step++) {
        gb_torch_stats st, wst;
        CHECK_OK(gb_torch_learner_train(l, &part->b, &st, NULL, &err));
        CHECK_EQ_INT(st.samples, 4 * T);
        if (rank != 0 || !whole)
            continue;
        CHECK_OK(gb_torch_learner_train(whole, &all->b, &wst, NULL, &err));
        CHECK_EQ_INT(wst.samples, 8 * T);
        double d = max_param_diff(l, whole);
        fprintf(stderr, "step %d: 2 ranks x 4 chunks vs 8 chunks: gradient norm %.9g vs %.9g, "
                "max |parameter difference| %.3g (checksums %s)\n", step, st.grad_norm,
                wst.grad_norm, d,
                gb_torch_learner_checksum(l) == gb_torch_learner_checksum(whole) ? "equal"
                                                                                 : "differ");
        CHECK_NEAR(st.grad_norm, wst.grad_norm, 1e-5 * wst.grad_norm);
        CHECK_MSG(d <= 1e-5, "max difference %g", d);
    }
done:
    free(all);
    free(part);
    gb_torch_learner_destroy(l);
    gb_torch_learner_destroy(whole);
    gb_group_close(g);
    return test_failures_;
}

static void test_union(void) { CHECK_EQ_INT(run_pair(union_rank, store_path("union"), 120), 0); }

/* ---- a rank that leaves ---------------------------------------------------------------------- */

static int leaving_rank(int rank, const char *store)
{
    gb_error err = {0};
    gb_config cfg;
    if (make_cfg(&cfg, "dqn", "") != 0)
        return 1;
    gb_torch_space sp = discrete_space();
    gb_group *g = open_pair(rank, store, 3.0);
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 9, &l, &err));
    if (g && l) {
        CHECK_OK(gb_torch_learner_set_group(l, g, 0, &err));
        if (rank == 1)
            _exit(test_failures_);
        batch *x = malloc(sizeof *x);
        make_batch(x, &sp, 2, 3, 0);
        int rc = gb_torch_learner_train(l, &x->b, NULL, NULL, &err);
        CHECK_MSG(rc == GB_ECLOSED || rc == GB_ETIMEOUT, "train returned %d: %s", rc, err.msg);
        fprintf(stderr, "peer left: %s: %s\n", gb_strerror(rc), err.msg);
        free(x);
    }
    gb_torch_learner_destroy(l);
    gb_group_close(g);
    return test_failures_;
}

static void test_peer_leaves(void)
{
    CHECK_EQ_INT(run_pair(leaving_rank, store_path("leaving"), 60), 0);
}

int main(void)
{
    /* as in `gearbox worker`: a write to a peer that left is an error return, not a SIGPIPE
     * death (rank 0 once died so in test_peer_leaves) */
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_replicas_dqn);
    TEST_RUN(test_replicas_ppo);
    TEST_RUN(test_replicas_ppo_lstm);
    TEST_RUN(test_replicas_sac);
    TEST_RUN(test_union);
    TEST_RUN(test_peer_leaves);
    ranks_remove_dir(dir);
    return test_main_result();
}
