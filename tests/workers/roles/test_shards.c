/* tests/workers/roles/test_shards.c: global selection over replay shards (workers/roles/shards.h)
 * against a reference replay that holds the union. Three processes, one shard each, in a real Gloo
 * group:
 *  - weighted: chi-square of many draws against P(g) = w_g / sum w over the union, exact
 *    probabilities (the reference replay reports the same P(g)) and importance weights over the
 *    union's size; zero-priority items never drawn;
 *  - remote collection: every row a trainer receives holds its item's data, in the order the
 *    weights come in; new priorities reach the owning shard;
 *  - weighted with max_times_sampled 1 over fewer items than the batch: short shards;
 *  - fifo, lifo, topk (decentralised): the global batch is the reference's selection, also when
 *    the union holds fewer items than the batch and with max_times_sampled 1 over many steps. */
#include "workers/roles/shards.h"

#include "workers/ranks_util.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

#define RANKS 3
#define T 2
#define CAP 64
#define B 48 /* global batch: 16 per trainer */
#define BL (B / RANKS)

static char store_dir[256];

/* Item g lives on shard shard_of(g); priorities with ties and zeros. */
static int shard_of(int64_t g) { return (int)((g * 7 + g / 5) % RANKS); }
static double prio_of(int64_t g) { return g % 11 == 0 ? 0.0 : 1.0 + (double)(g % 7); }

static gb_replay *make_replay(gb_selector_kind sel, int64_t mts, int64_t cap, gb_error *err)
{
    gb_replay_options o;
    gb_replay_options_default(&o);
    o.capacity = cap;
    o.steps = T;
    o.selector = sel;
    o.alpha = 0.6;
    o.beta = 0.4;
    o.max_times_sampled = mts;
    o.timeout_s = 5;
    o.seed = 1234;
    if (gb_replay_add_column(&o, "g", GB_DTYPE_INT64, 0, NULL, 0, err) ||
        gb_replay_add_column(&o, "h", GB_DTYPE_INT32, 0, NULL, 1, err)) /* one per item */
        return NULL;
    gb_replay *r = NULL;
    return gb_replay_create(&o, &r, err) == 0 ? r : NULL;
}

/* Inserts items [0, m) in global order: this rank's into its shard (stamped with g), every one
 * into the reference. map[local] = g for this shard; ref_g[ref index] = g. */
static void fill(gb_replay *shard, gb_shards *S, gb_replay *ref, int rank, int64_t m,
                 int64_t *map, int64_t *ref_g)
{
    gb_error err = {0};
    for (int64_t g = 0; g < m; g++) {
        int64_t data[T] = {g * 10, g * 10 + 1}, idx;
        int32_t h = (int32_t)(1000 + g);
        double p = prio_of(g);
        CHECK_OK(gb_replay_allocate(ref, 1, &idx, 0, &err));
        memcpy(gb_replay_block(ref, 0, idx), data, sizeof data);
        memcpy(gb_replay_block(ref, 1, idx), &h, sizeof h);
        CHECK_OK(gb_replay_commit(ref, 1, &idx, &p, NULL, NULL, &err));
        ref_g[idx] = g;
        if (shard_of(g) != rank)
            continue;
        CHECK_OK(gb_replay_allocate(shard, 1, &idx, 0, &err));
        memcpy(gb_replay_block(shard, 0, idx), data, sizeof data);
        memcpy(gb_replay_block(shard, 1, idx), &h, sizeof h);
        gb_shards_stamp(S, 1, &idx, &g);
        CHECK_OK(gb_replay_commit(shard, 1, &idx, &p, NULL, NULL, &err));
        map[idx] = g;
    }
}

/* The global item at a global index, from every shard's map (gathered once per phase). */
static int64_t item_at(const int64_t *maps, int64_t global_index)
{
    return maps[(global_index / CAP) * CAP + global_index % CAP];
}

/* The whole global batch, gathered from every trainer's part (gb_shards_last gives a rank only
 * its own rows), in position order; mine: this rank's part as gb_shards_last gave it. */
typedef struct whole_batch {
    int64_t n, union_size;
    int64_t global_index[B], position[B];
    double prob[B];
    float weight[B];
    gb_shards_batch mine;
} whole_batch;

typedef struct part_row {
    int64_t position, global_index;
    double prob;
    double weight;
} part_row;

static void gather_batch(gb_group *g, const gb_shards *S, whole_batch *w)
{
    gb_error err = {0};
    gb_shards_last(S, &w->mine);
    part_row mine[BL + 1], all[RANKS * (BL + 1)];
    memset(mine, 0, sizeof mine);
    mine[0].position = w->mine.n;
    for (int64_t i = 0; i < w->mine.n && i < BL; i++)
        mine[1 + i] = (part_row){w->mine.position[i], w->mine.global_index[i], w->mine.prob[i],
                                 w->mine.weight[i]};
    CHECK_OK(gb_group_allgather(g, mine, sizeof mine, all, &err));
    int64_t at[B];
    for (int64_t j = 0; j < B; j++)
        at[j] = -1;
    for (int r = 0; r < RANKS; r++) {
        const part_row *p = &all[r * (BL + 1)];
        for (int64_t i = 0; i < p[0].position; i++) {
            int64_t j = p[1 + i].position;
            CHECK_MSG(j / BL == r && at[j] < 0, "rank %d reports position %lld", r, (long long)j);
            if (j / BL == r && at[j] < 0)
                at[j] = r * (BL + 1) + 1 + i;
        }
    }
    w->n = 0;
    for (int64_t j = 0; j < B; j++) {
        if (at[j] < 0)
            continue;
        const part_row *x = &all[at[j]];
        w->global_index[w->n] = x->global_index;
        w->position[w->n] = x->position;
        w->prob[w->n] = x->prob;
        w->weight[w->n++] = (float)x->weight;
    }
    w->union_size = w->mine.union_size;
}

static gb_group *join(int rank, const char *prefix, gb_error *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/store-%s", store_dir, prefix);
    gb_group_opts go = {.rank = rank, .size = RANKS, .store_path = path, .timeout_s = 30};
    gb_group *g = NULL;
    return gb_group_open(&go, &g, err) == 0 ? g : NULL;
}

static void check_weighted(int rank)
{
    gb_error err = {0};
    gb_group *g = join(rank, "weighted", &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    gb_replay *shard = make_replay(GB_SELECTOR_WEIGHTED, 0, CAP, &err);
    gb_replay *ref = make_replay(GB_SELECTOR_WEIGHTED, 0, CAP * RANKS, &err);
    gb_shards *S = NULL;
    gb_shards_opts so = {.group = g, .replay = shard, .batch = B, .seed = 99};
    if (!g || !shard || !ref || gb_shards_create(&so, &S, &err) != 0) {
        CHECK_MSG(0, "set-up: %s", err.msg);
        return;
    }
    enum { M = 60 };
    int64_t map[CAP], maps[CAP * RANKS], ref_g[CAP * RANKS];
    for (int i = 0; i < CAP; i++)
        map[i] = -1;
    fill(shard, S, ref, rank, M, map, ref_g);
    CHECK_OK(gb_group_allgather(g, map, sizeof map, maps, &err));

    double wsum = 0, w[M];
    for (int i = 0; i < M; i++)
        wsum += (w[i] = prio_of(i) > 0 ? pow(prio_of(i), 0.6) : 0);
    /* the reference's probability of each item, as the union replay reports it */
    double ref_p[M];
    for (int i = 0; i < M; i++)
        ref_p[i] = -1;
    gb_replay_selection rs, sel;
    CHECK_OK(gb_replay_selection_init(&rs, 4096, &err));
    CHECK_OK(gb_replay_selection_init(&sel, B, &err));
    gb_replay_request rq = gb_replay_request_default(4096);
    CHECK_OK(gb_replay_sample(ref, &rq, &rs, &err));
    for (int64_t k = 0; k < rs.n; k++)
        ref_p[ref_g[rs.index[k]]] = rs.prob[k];
    gb_replay_release(ref, &rs);

    int64_t data[BL * T];
    int32_t h[BL];
    float weight[BL];
    gb_replay_dst dsts[2] = {{.column = 0, .data = data, .bytes = sizeof data},
                             {.column = 1, .data = h, .bytes = sizeof h}};
    int64_t count[M] = {0}, draws = 0;
    int bad_rows = 0, bad_prob = 0, bad_weight = 0;
    enum { STEPS = 2500 };
    for (int step = 0; step < STEPS; step++) {
        gb_replay_request req = gb_replay_request_default(BL);
        int64_t n = -1;
        int rc = gb_shards_select(S, &req, &sel, dsts, 2, weight, &n, &err);
        if (rc) {
            CHECK_MSG(0, "select: %s", err.msg);
            break;
        }
        whole_batch b;
        gather_batch(g, S, &b);
        CHECK_EQ_INT(b.n, B);
        CHECK_EQ_INT(b.union_size, M);
        CHECK_EQ_INT(n, BL);
        CHECK_EQ_INT(b.mine.n, n);
        float wmax = 0;
        double pmin = 1;
        for (int64_t e = 0; e < b.n; e++)
            pmin = fmin(pmin, b.prob[e]);
        for (int64_t e = 0; e < b.n; e++) {
            int64_t item = item_at(maps, b.global_index[e]);
            count[item]++;
            draws++;
            if (fabs(b.prob[e] - w[item] / wsum) > 1e-12 ||
                (ref_p[item] >= 0 && fabs(ref_p[item] - b.prob[e]) > 1e-12))
                bad_prob++;
            /* importance weight over the union: (M P)^-beta normalised by the batch's largest */
            double expect = pow(pmin / b.prob[e], 0.4);
            if (fabs(b.weight[e] - expect) > 1e-5)
                bad_weight++;
            wmax = fmaxf(wmax, b.weight[e]);
        }
        CHECK_NEAR(wmax, 1.0, 1e-6);
        /* this trainer's rows: grouped by owner, each holding its item's data */
        for (int64_t i = 0; i < n && i < b.mine.n; i++) {
            int64_t item = item_at(maps, b.mine.global_index[i]);
            if (data[i * T] != item * 10 || data[i * T + 1] != item * 10 + 1 ||
                h[i] != 1000 + item || weight[i] != b.mine.weight[i] ||
                b.mine.position[i] / BL != rank ||
                (i > 0 && b.mine.global_index[i] / CAP < b.mine.global_index[i - 1] / CAP))
                bad_rows++;
        }
        gb_replay_release(shard, &sel);
        if (step == 0 && test_failures_)
            break;
    }
    CHECK_EQ_INT(bad_rows, 0);
    CHECK_EQ_INT(bad_prob, 0);
    CHECK_EQ_INT(bad_weight, 0);
    /* Chi-square over the items with weight; the zero-weight ones are never drawn. Every rank
     * sees the same global batches, so every rank checks the same counts. */
    double chi2 = 0;
    int df = -1;
    for (int i = 0; i < M; i++) {
        if (w[i] == 0) {
            CHECK_EQ_INT(count[i], 0);
            continue;
        }
        double e = (double)draws * w[i] / wsum;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    /* p < 1e-6 bound for the chi-square with df degrees of freedom (Wilson-Hilferty, z = 4.9) */
    double z = 4.9, wh = 2.0 / (9.0 * df);
    double bound = df * pow(1 - wh + z * sqrt(wh), 3);
    CHECK_MSG(chi2 < bound, "chi-square %.1f >= %.1f (df %d, %lld draws)", chi2, bound, df,
              (long long)draws);
    if (rank == 0)
        fprintf(stderr, "weighted over %d shards: %lld draws, chi-square %.1f (df %d, bound "
                "%.1f)\n", RANKS, (long long)draws, chi2, df, bound);

    /* Priorities go back to the owner: the trainer sets 100 + item for each of its rows. */
    gb_replay_request req = gb_replay_request_default(BL);
    int64_t n = 0;
    CHECK_OK(gb_shards_select(S, &req, &sel, dsts, 2, weight, &n, &err));
    whole_batch b;
    gather_batch(g, S, &b);
    double newp[BL];
    for (int64_t i = 0; i < b.mine.n; i++)
        newp[i] = 100.0 + (double)item_at(maps, b.mine.global_index[i]);
    CHECK_OK(gb_shards_update_priorities(S, newp, &err));
    gb_replay_release(shard, &sel);
    gb_replay_status st;
    gb_replay_status_view(shard, &st);
    int owned = 0, wrong = 0;
    for (int64_t e = 0; e < b.n; e++) {
        if (b.global_index[e] / CAP != rank)
            continue;
        owned++;
        int64_t local = b.global_index[e] % CAP;
        if (st.priority[local] != 100.0 + (double)map[local])
            wrong++;
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(owned > 0);

    gb_replay_selection_free(&rs);
    gb_replay_selection_free(&sel);
    gb_shards_destroy(S);
    gb_replay_free(shard);
    gb_replay_free(ref);
    gb_group_close(g);
}

/* Weighted with max_times_sampled 1 over a union smaller than the batch: shards come back short
 * of the positions the labels gave them, so their last positions stay empty. Every row still
 * holds its item, no item is drawn twice, and a second draw finds nothing left anywhere. */
static void check_weighted_short(int rank)
{
    gb_error err = {0};
    gb_group *g = join(rank, "weighted-short", &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    gb_replay *shard = make_replay(GB_SELECTOR_WEIGHTED, 1, CAP, &err);
    gb_replay *ref = make_replay(GB_SELECTOR_WEIGHTED, 1, CAP * RANKS, &err);
    gb_shards *S = NULL;
    gb_shards_opts so = {.group = g, .replay = shard, .batch = B, .seed = 5};
    if (!g || !shard || !ref || gb_shards_create(&so, &S, &err) != 0) {
        CHECK_MSG(0, "set-up: %s", err.msg);
        return;
    }
    enum { M = 34 }; /* items 0, 11, 22, 33 have priority 0 */
    int64_t map[CAP], maps[CAP * RANKS], ref_g[CAP * RANKS];
    for (int i = 0; i < CAP; i++)
        map[i] = -1;
    fill(shard, S, ref, rank, M, map, ref_g);
    CHECK_OK(gb_group_allgather(g, map, sizeof map, maps, &err));
    gb_replay_selection sel;
    CHECK_OK(gb_replay_selection_init(&sel, B, &err));
    int64_t data[BL * T];
    int32_t h[BL];
    float weight[BL];
    gb_replay_dst dsts[2] = {{.column = 0, .data = data, .bytes = sizeof data},
                             {.column = 1, .data = h, .bytes = sizeof h}};
    for (int round = 0; round < 2; round++) {
        gb_replay_request req = gb_replay_request_default(BL);
        int64_t n = -1;
        CHECK_OK(gb_shards_select(S, &req, &sel, dsts, 2, weight, &n, &err));
        whole_batch b;
        gather_batch(g, S, &b);
        int seen[M] = {0}, twice = 0;
        for (int64_t e = 0; e < b.n; e++) {
            int64_t item = item_at(maps, b.global_index[e]);
            twice += item < 0 || item >= M || seen[item]++;
        }
        CHECK_EQ_INT(twice, 0);
        if (round == 0) {
            CHECK_MSG(b.n > 0 && b.n < B, "%lld rows of a batch of %d", (long long)b.n, B);
            CHECK(n == 0 || n == b.mine.n);
            for (int64_t i = 0; i < n; i++) {
                int64_t item = item_at(maps, b.mine.global_index[i]);
                CHECK_EQ_INT(data[i * T + 1], item * 10 + 1);
                CHECK_EQ_INT(h[i], 1000 + item);
            }
        } else {
            CHECK_EQ_INT(b.n, 0);
            CHECK_EQ_INT(n, 0);
        }
        gb_replay_release(shard, &sel);
    }
    gb_replay_selection_free(&sel);
    gb_shards_destroy(S);
    gb_replay_free(shard);
    gb_replay_free(ref);
    gb_group_close(g);
}

/* fifo / lifo / topk: the global batch equals the reference's selection, step after step. */
static void check_ordered(int rank, gb_selector_kind kind, int64_t m, int64_t mts, int steps)
{
    gb_error err = {0};
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s-%lld-%lld", gb_replay_selector_name(kind),
             (long long)m, (long long)mts);
    gb_group *g = join(rank, prefix, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    gb_replay *shard = make_replay(kind, mts, CAP, &err);
    gb_replay *ref = make_replay(kind, mts, CAP * RANKS, &err);
    gb_shards *S = NULL;
    gb_shards_opts so = {.group = g, .replay = shard, .batch = B, .seed = 7};
    if (!g || !shard || !ref || gb_shards_create(&so, &S, &err) != 0) {
        CHECK_MSG(0, "set-up: %s", err.msg);
        return;
    }
    int64_t map[CAP], maps[CAP * RANKS], ref_g[CAP * RANKS];
    for (int i = 0; i < CAP; i++)
        map[i] = -1;
    fill(shard, S, ref, rank, m, map, ref_g);
    CHECK_OK(gb_group_allgather(g, map, sizeof map, maps, &err));
    gb_replay_selection rs, sel;
    CHECK_OK(gb_replay_selection_init(&rs, B, &err));
    CHECK_OK(gb_replay_selection_init(&sel, B, &err));
    int64_t data[BL * T];
    float weight[BL];
    gb_replay_dst dst = {.column = 0, .data = data, .bytes = sizeof data};
    for (int step = 0; step < steps; step++) {
        gb_replay_request rq = gb_replay_request_default(B);
        rq.timeout_s = 0;
        int rrc = gb_replay_sample(ref, &rq, &rs, &err);
        int64_t expect_n = rrc == 0 ? rs.n : 0;
        gb_replay_request req = gb_replay_request_default(BL);
        int64_t n = -1;
        CHECK_OK(gb_shards_select(S, &req, &sel, &dst, 1, weight, &n, &err));
        whole_batch b;
        gather_batch(g, S, &b);
        int differ = 0;
        if (b.n != expect_n)
            differ = 1;
        for (int64_t e = 0; !differ && e < b.n; e++)
            if (b.position[e] != e || item_at(maps, b.global_index[e]) != ref_g[rs.index[e]] ||
                b.weight[e] != 1.0f || b.prob[e] != 1.0)
                differ = 1;
        CHECK_MSG(!differ, "%s, %lld items, step %d: the global batch (%lld) is not the "
                  "reference's (%lld)", gb_replay_selector_name(kind), (long long)m, step,
                  (long long)b.n, (long long)expect_n);
        /* a trainer with no row anywhere means nobody trains: n is 0 on every rank */
        int empty_trainer = b.n < (RANKS - 1) * BL + 1;
        CHECK_EQ_INT(n, empty_trainer ? 0 : b.mine.n);
        for (int64_t i = 0; i < n; i++) {
            int64_t item = item_at(maps, b.mine.global_index[i]);
            CHECK_EQ_INT(data[i * T + 1], item * 10 + 1);
        }
        if (rrc == 0)
            gb_replay_release(ref, &rs);
        gb_replay_release(shard, &sel);
        if (differ)
            break;
    }
    gb_replay_selection_free(&rs);
    gb_replay_selection_free(&sel);
    gb_shards_destroy(S);
    gb_replay_free(shard);
    gb_replay_free(ref);
    gb_group_close(g);
}

static int rank_main(int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    check_weighted(rank);
    check_weighted_short(rank);
    check_ordered(rank, GB_SELECTOR_FIFO, 60, 0, 2);
    check_ordered(rank, GB_SELECTOR_LIFO, 60, 0, 2);
    check_ordered(rank, GB_SELECTOR_TOPK, 60, 0, 2);
    check_ordered(rank, GB_SELECTOR_TOPK, 40, 0, 1); /* union smaller than the batch */
    check_ordered(rank, GB_SELECTOR_FIFO, 20, 0, 1); /* a trainer would get no row */
    check_ordered(rank, GB_SELECTOR_FIFO, 150, 1, 3); /* each item sampled once, in order */
    fprintf(stderr, "rank %d: %d checks, %d failed\n", rank, test_checks_, test_failures_);
    return test_failures_;
}

int main(void)
{
    snprintf(store_dir, sizeof store_dir, "/tmp/gb-test-shards-XXXXXX");
    if (!mkdtemp(store_dir)) {
        perror("mkdtemp");
        return 1;
    }
    int failed = ranks_run(RANKS, rank_main, NULL, 600);
    ranks_remove_dir(store_dir);
    fprintf(stderr, "%s\n", failed ? "FAIL" : "ok");
    return failed != 0;
}
