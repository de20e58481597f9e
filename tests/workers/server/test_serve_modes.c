/* tests/workers/server/test_serve_modes.c: the data server's offline sampling modes and several
 * tables, with the C client over tcp loopback, every served value checked against the source rows
 * of serve_util.h's D4RL file: windows of L steps crossing item boundaries (with their episode and
 * timestep columns), transitions (each alike: tail items not over-weighted), whole episodes
 * padded to the longest, epochs (each transition exactly once, cursors independent, a new
 * shuffle per epoch), and two tables (default and expert) with their own schema and selector;
 * each table's own rate limiter; an item replaced by an insert is never served as the
 * episode's; a restored table has no episode index.
 * Usage: test_serve_modes TMPDIR */
#include "serve_util.h"
#include "test.h"

#include "workers/server/client/client.h"

/* The source episodes, computed independently of the server: first row and length. */
static int64_t ep_first[N_ROWS], ep_len[N_ROWS], neps;

static void plan_episodes(void)
{
    int64_t start = 0;
    neps = 0;
    for (int64_t r = 0; r < N_ROWS; r++)
        if (d4rl_terminal(r) || d4rl_timeout(r) || r == N_ROWS - 1) {
            ep_first[neps] = start;
            ep_len[neps++] = r + 1 - start;
            start = r + 1;
        }
}

static char cfg_text[8192];

/* The config: T_STEPS-step items in the default table (uniform), and table expert: the same file
 * in 5-step items with a fifo selector. */
static const char *modes_config(void)
{
    char extra[2048];
    snprintf(extra, sizeof extra,
             "  tables: {expert: \"dataset=%s dataset_format=d4rl steps=5 "
             "replay.selector=fifo replay.capacity=400\"}\n", h5path);
    snprintf(cfg_text, sizeof cfg_text, "%s", server_config_bytes(extra, 4000000));
    return cfg_text;
}

typedef struct got {
    gb_client_info info;
    const void *v[GB_CLIENT_MAX_COLUMNS];
    size_t bytes[GB_CLIENT_MAX_COLUMNS];
    int64_t index[256], episode[256];
    uint64_t key[256];
    double prob[256];
    float weight[256];
    int32_t length[256];
    int32_t timestep[256 * 256];
    gb_client_batch b;
} got;

static int sample_mode(gb_client *c, got *g, const char *mode, int64_t batch, int64_t len,
                       const char *cursor, gb_error *err)
{
    gb_client_sample_req req = {.batch = batch, .timeout_ms = -1, .mode = mode, .len = len,
                                .cursor = cursor};
    memset(&g->b, 0, sizeof g->b);
    g->b.index = g->index;
    g->b.key = g->key;
    g->b.prob = g->prob;
    g->b.weight = g->weight;
    g->b.length = g->length;
    g->b.episode = g->episode;
    g->b.timestep = g->timestep;
    return gb_client_sample_views(c, &req, &g->b, g->v, g->bytes, err);
}

/* Checks row i (S steps from source row r0, valid steps valid) of every column against the
 * source: steps past valid are zero. Returns the wrong values. */
static int check_row(const got *g, int64_t i, int64_t S, int64_t r0, int64_t valid)
{
    const gb_client_info *in = &g->info;
    int co = gb_client_column_index(in, "obs"), ca = gb_client_column_index(in, "action"),
        cr = gb_client_column_index(in, "reward"), ct = gb_client_column_index(in, "terminal"),
        cto = gb_client_column_index(in, "timeout"), cv = gb_client_column_index(in, "valid"),
        cn = gb_client_column_index(in, "next_obs"), cq = gb_client_column_index(in, "info_qpos");
    if (co < 0 || ca < 0 || cr < 0 || ct < 0 || cto < 0 || cv < 0 || cn < 0 || cq < 0)
        return 1000;
    int bad = 0;
    for (int64_t s = 0; s < S; s++) {
        int64_t r = r0 + s, at = i * S + s;
        int v = s < valid;
        const float *o = (const float *)g->v[co] + at * 3, *nx = (const float *)g->v[cn] + at * 3;
        const double *a = (const double *)g->v[ca] + at * 2;
        for (int k = 0; k < 3; k++) {
            bad += o[k] != (v ? (float)(10 * r + k) : 0.0f);
            bad += nx[k] != (v ? (float)(10 * (r + 1) + k) : 0.0f);
        }
        for (int k = 0; k < 2; k++)
            bad += a[k] != (v ? (double)r / 2 + k : 0.0);
        bad += ((const float *)g->v[cr])[at] != (v ? (float)((double)r / 4) : 0.0f);
        bad += ((const uint8_t *)g->v[ct])[at] != (v ? d4rl_terminal(r) : 0);
        bad += ((const uint8_t *)g->v[cto])[at] != (v ? d4rl_timeout(r) : 0);
        bad += ((const uint8_t *)g->v[cv])[at] != v;
        bad += ((const int32_t *)g->v[cq])[at] != (v ? (int32_t)(3 * r) : 0);
    }
    return bad;
}

/* Checks an offline reply of n rows: each row's episode, timesteps, length and every value.
 * strict: a window must lie inside its episode. Counts rows crossing an item boundary (items of
 * T steps) in *crossing. Returns the wrong values. */
static int check_offline(const got *g, int64_t T, int strict, int64_t *crossing)
{
    int bad = 0;
    int64_t n = g->b.n, S = g->b.steps;
    for (int64_t i = 0; i < n; i++) {
        int64_t e = g->episode[i];
        if (e < 0 || e >= neps) {
            bad++;
            continue;
        }
        int64_t t0 = g->timestep[i * S];
        int64_t valid = ep_len[e] - t0 < S ? ep_len[e] - t0 : S;
        bad += t0 < 0 || t0 >= ep_len[e];
        bad += g->length[i] != valid;
        bad += strict && valid != S;
        for (int64_t s = 0; s < S; s++)
            bad += g->timestep[i * S + s] != (s < valid ? t0 + s : 0);
        bad += check_row(g, i, S, ep_first[e] + t0, valid);
        if (crossing && t0 / T != (t0 + valid - 1) / T)
            (*crossing)++;
    }
    return bad;
}

static void test_info_tables(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, modes_config(), &err));
    gb_client *c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (!c) {
        test_server_stop(&ts);
        return;
    }
    gb_client_info in;
    CHECK_OK(gb_client_get_info(c, &in, &err));
    CHECK_EQ_INT(in.ntables, 2);
    CHECK(strcmp(in.tables[0], "default") == 0 && strcmp(in.tables[1], "expert") == 0);
    CHECK_EQ_INT(in.episodes, neps);
    CHECK_EQ_INT(in.transitions, N_ROWS);
    int64_t longest = 0;
    for (int64_t e = 0; e < neps; e++)
        longest = ep_len[e] > longest ? ep_len[e] : longest;
    CHECK_EQ_INT(in.max_episode_len, longest);
    CHECK_EQ_INT(in.steps, T_STEPS);
    CHECK(strcmp(in.selector, "uniform") == 0);
    CHECK_EQ_INT(in.size, nplan);
    /* the expert table: its own schema (5 steps), selector and capacity */
    CHECK_OK(gb_client_use_table(c, "expert", &err));
    gb_client_info ex;
    CHECK_OK(gb_client_get_info(c, &ex, &err));
    CHECK_EQ_INT(ex.steps, 5);
    CHECK(strcmp(ex.selector, "fifo") == 0);
    CHECK_EQ_INT(ex.capacity, 400);
    CHECK_EQ_INT(ex.episodes, neps);
    /* fifo draws the oldest items first: the file's first rows, 5 steps each, every value */
    got g = {.info = ex};
    gb_client_sample_req req = {.batch = 4, .timeout_ms = -1};
    memset(&g.b, 0, sizeof g.b);
    g.b.length = g.length;
    CHECK_OK(gb_client_sample_views(c, &req, &g.b, g.v, g.bytes, &err));
    CHECK_EQ_INT(g.b.n, 4);
    CHECK_EQ_INT(g.b.selector, 2);
    for (int64_t i = 0; i < g.b.n; i++) {
        CHECK_EQ_INT(g.length[i], 5);
        CHECK_EQ_INT(check_row(&g, i, 5, 5 * i, g.length[i]), 0);
    }
    /* an insert into expert changes its size only */
    int64_t nbytes[GB_CLIENT_MAX_COLUMNS];
    void *cols[GB_CLIENT_MAX_COLUMNS];
    for (int k = 0; k < ex.ncolumns; k++) {
        nbytes[k] = (int64_t)ex.columns[k].step_bytes * (ex.columns[k].per_item ? 1 : 5);
        cols[k] = calloc(1, (size_t)nbytes[k]);
    }
    memset(cols[gb_client_column_index(&ex, "valid")], 1, 5);
    int64_t size = 0;
    CHECK_OK(gb_client_insert(c, &ex, 1, (const void *const *)cols, NULL, NULL, 3, &size, &err));
    for (int k = 0; k < ex.ncolumns; k++)
        free(cols[k]);
    CHECK_EQ_INT(size, ex.size + 1);
    CHECK_OK(gb_client_use_table(c, NULL, &err));
    gb_client_info again;
    CHECK_OK(gb_client_get_info(c, &again, &err));
    CHECK_EQ_INT(again.size, nplan);
    CHECK_EQ_INT(again.inserts, in.inserts);
    /* an unknown table is refused, naming the tables */
    req.table = "expret";
    int rc = gb_client_sample_views(c, &req, &g.b, g.v, g.bytes, &err);
    CHECK_EQ_INT(rc, GB_EINVAL);
    CHECK(strstr(err.msg, "no table 'expret'") && strstr(err.msg, "default, expert"));
    /* the checkpoint belongs to the default table */
    CHECK_OK(gb_client_use_table(c, "expert", &err));
    CHECK_EQ_INT(gb_client_checkpoint(c, NULL, 0, &err), GB_EUNSUPPORTED);
    gb_client_close(c);
    test_server_stop(&ts);
}

static void test_windows(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, modes_config(), &err));
    gb_client *c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (!c) {
        test_server_stop(&ts);
        return;
    }
    static got g;
    CHECK_OK(gb_client_get_info(c, &g.info, &err));
    /* windows of 12 steps over 8-step items: most cross one item boundary */
    int64_t starts = 0;
    for (int64_t e = 0; e < neps; e++)
        starts += ep_len[e] >= 12 ? ep_len[e] - 11 : 0;
    int64_t crossing = 0, rows = 0;
    for (int round = 0; round < 20; round++) {
        CHECK_OK(sample_mode(c, &g, "window", 64, 12, NULL, &err));
        CHECK_EQ_INT(g.b.n, 64);
        CHECK_EQ_INT(g.b.steps, 12);
        CHECK_EQ_INT(g.b.size, starts);
        CHECK_NEAR(g.prob[0], 1.0 / (double)starts, 1e-15);
        CHECK_EQ_INT(check_offline(&g, T_STEPS, 1, &crossing), 0);
        rows += g.b.n;
    }
    CHECK(crossing > rows / 2);
    /* the expert table (5-step items) serves windows across its own items */
    gb_client_sample_req req = {.batch = 32, .timeout_ms = -1, .mode = "window", .len = 7,
                                .table = "expert"};
    memset(&g.b, 0, sizeof g.b);
    g.b.length = g.length;
    g.b.episode = g.episode;
    g.b.timestep = g.timestep;
    CHECK_OK(gb_client_sample_views(c, &req, &g.b, g.v, g.bytes, &err));
    crossing = 0;
    CHECK_EQ_INT(check_offline(&g, 5, 1, &crossing), 0);
    CHECK(crossing > 0);
    /* a window longer than every episode, an epoch without a cursor, an unknown mode */
    CHECK_EQ_INT(sample_mode(c, &g, "window", 4, 1000, NULL, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "no episode has 1000 steps") != NULL);
    CHECK_EQ_INT(sample_mode(c, &g, "epoch", 4, 1, NULL, &err), GB_EINVAL);
    CHECK_EQ_INT(sample_mode(c, &g, "windows", 4, 1, NULL, &err), GB_EINVAL);
    gb_client_close(c);
    test_server_stop(&ts);
}

static void test_transitions_and_episodes(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, modes_config(), &err));
    gb_client *c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (!c) {
        test_server_stop(&ts);
        return;
    }
    static got g;
    CHECK_OK(gb_client_get_info(c, &g.info, &err));
    /* transitions: 3 steps from each drawn transition, padded past the episode's end; a
     * transition in a short tail item is drawn as often as any (by item it would be drawn once
     * per item, so its T - length steps' worth more often) */
    int64_t tail_steps = 0, tail_draws = 0, draws = 0;
    for (int64_t e = 0; e < neps; e++)
        tail_steps += ep_len[e] % T_STEPS;
    for (int round = 0; round < 100; round++) {
        CHECK_OK(sample_mode(c, &g, "transition", 200, 3, NULL, &err));
        CHECK_EQ_INT(g.b.n, 200);
        CHECK_EQ_INT(g.b.size, N_ROWS);
        CHECK_NEAR(g.prob[0], 1.0 / N_ROWS, 1e-15);
        CHECK_EQ_INT(check_offline(&g, T_STEPS, 0, NULL), 0);
        for (int64_t i = 0; i < g.b.n; i++) {
            int64_t e = g.episode[i], t = g.timestep[i * 3];
            tail_draws += t >= ep_len[e] / T_STEPS * T_STEPS;
        }
        draws += g.b.n;
    }
    /* expected share tail_steps / N_ROWS; 20000 draws: a binomial's sd is under 0.004 */
    double share = (double)tail_draws / (double)draws, want = (double)tail_steps / N_ROWS;
    CHECK_MSG(fabs(share - want) < 0.025, "tail share %.4f, expected %.4f", share, want);
    /* whole episodes, padded to the longest in the batch */
    for (int round = 0; round < 10; round++) {
        CHECK_OK(sample_mode(c, &g, "episode", 16, 0, NULL, &err));
        CHECK_EQ_INT(g.b.n, 16);
        CHECK_EQ_INT(g.b.size, neps);
        int64_t longest = 0;
        for (int64_t i = 0; i < g.b.n; i++) {
            CHECK_EQ_INT(g.timestep[i * g.b.steps], 0);
            CHECK_EQ_INT(g.length[i], ep_len[g.episode[i]]);
            longest = ep_len[g.episode[i]] > longest ? ep_len[g.episode[i]] : longest;
        }
        CHECK_EQ_INT(g.b.steps, longest);
        CHECK_EQ_INT(check_offline(&g, T_STEPS, 0, NULL), 0);
    }
    gb_client_close(c);
    test_server_stop(&ts);
}

/* Reads the rest of an epoch of cursor name, from position `from`, in batches of B; marks each
 * transition in seen. Returns the rows read; *epoch the epoch they came from (all the same,
 * else -1). */
static int64_t read_epoch(gb_client *c, got *g, const char *name, int64_t from, int64_t B,
                          int *seen, int64_t *epoch, int *bad)
{
    gb_error err = {0};
    int64_t rows = from;
    *epoch = -2;
    for (int guard = 0; guard < 100; guard++) {
        int rc = sample_mode(c, g, "epoch", B, 1, name, &err);
        CHECK_OK(rc);
        if (rc)
            break;
        *bad += check_offline(g, T_STEPS, 0, NULL);
        *bad += g->b.epoch_pos != rows;
        *epoch = *epoch == -2 || *epoch == g->b.epoch ? g->b.epoch : -1;
        for (int64_t i = 0; i < g->b.n; i++)
            seen[ep_first[g->episode[i]] + g->timestep[i]]++;
        rows += g->b.n;
        if (g->b.epoch_end)
            break;
        *bad += g->b.n != B;
    }
    return rows - from;
}

static void test_epochs(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, modes_config(), &err));
    gb_client *a = NULL, *b = NULL;
    CHECK_OK(gb_client_open(&a, gb_server_endpoint(ts.server), 10000, &err));
    CHECK_OK(gb_client_open(&b, gb_server_endpoint(ts.server), 10000, &err));
    if (!a || !b) {
        gb_client_close(a);
        gb_client_close(b);
        test_server_stop(&ts);
        return;
    }
    static got g;
    CHECK_OK(gb_client_get_info(a, &g.info, &err));
    /* cursor b reads its first three batches before a starts: a is not disturbed */
    static int seen_b[N_ROWS];
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        CHECK_OK(sample_mode(b, &g, "epoch", 50, 1, "reader-b", &err));
        CHECK_EQ_INT(g.b.epoch, 0);
        CHECK_EQ_INT(g.b.epoch_pos, 50 * k);
        for (int64_t i = 0; i < g.b.n; i++)
            seen_b[ep_first[g.episode[i]] + g.timestep[i]]++;
    }
    static int seen[N_ROWS];
    int64_t epoch;
    int64_t rows = read_epoch(a, &g, "reader-a", 0, 64, seen, &epoch, &bad);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(rows, N_ROWS);
    CHECK_EQ_INT(epoch, 0);
    CHECK_EQ_INT(g.b.n, N_ROWS % 64); /* the last batch of an epoch is short */
    int once = 1;
    for (int r = 0; r < N_ROWS; r++)
        once &= seen[r] == 1;
    CHECK_MSG(once, "epoch 0 of reader-a does not hold each transition exactly once");
    /* b goes on where it was, through its own whole epoch */
    int64_t rows_b = 150 + read_epoch(b, &g, "reader-b", 150, 50, seen_b, &epoch, &bad);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(epoch, 0);
    CHECK_EQ_INT(rows_b, N_ROWS);
    once = 1;
    for (int r = 0; r < N_ROWS; r++)
        once &= seen_b[r] == 1;
    CHECK_MSG(once, "reader-b's epoch does not hold each transition exactly once");
    /* a's next epoch: each transition once more, in another order */
    CHECK_OK(sample_mode(a, &g, "epoch", 64, 1, "reader-a", &err));
    CHECK_EQ_INT(g.b.epoch, 1);
    CHECK_EQ_INT(g.b.epoch_pos, 0);
    int64_t first1[64];
    for (int64_t i = 0; i < 64; i++)
        first1[i] = ep_first[g.episode[i]] + g.timestep[i];
    memset(seen, 0, sizeof seen);
    for (int64_t i = 0; i < 64; i++)
        seen[first1[i]]++;
    bad = 0;
    rows = 64 + read_epoch(a, &g, "reader-a", 64, 64, seen, &epoch, &bad);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(rows, N_ROWS);
    CHECK_EQ_INT(epoch, 1);
    once = 1;
    for (int r = 0; r < N_ROWS; r++)
        once &= seen[r] == 1;
    CHECK_MSG(once, "epoch 1 of reader-a does not hold each transition exactly once");
    /* reset: back to epoch 0, which replays the first order */
    gb_client_sample_req req = {.batch = 64, .timeout_ms = -1, .mode = "epoch", .len = 1,
                                .cursor = "reader-a", .reset = 1};
    memset(&g.b, 0, sizeof g.b);
    g.b.episode = g.episode;
    g.b.timestep = g.timestep;
    CHECK_OK(gb_client_sample_views(a, &req, &g.b, g.v, g.bytes, &err));
    CHECK_EQ_INT(g.b.epoch, 0);
    int same = 1;
    for (int64_t i = 0; i < 64; i++)
        same &= ep_first[g.episode[i]] + g.timestep[i] == first1[i];
    CHECK_MSG(!same, "epoch 1 repeated epoch 0's order");
    gb_client_close(a);
    gb_client_close(b);
    test_server_stop(&ts);
}

/* An item an insert has replaced is not served as the episode's (the request fails naming it);
 * a table restored from its checkpoint has no episode index and refuses the offline modes. */
static void test_replaced_and_restored(void)
{
    gb_error err = {0};
    char ckpt[700], extra[900];
    snprintf(ckpt, sizeof ckpt, "%s/modes.ckpt", tmpdir);
    remove(ckpt);
    snprintf(extra, sizeof extra, "  checkpoint: %s\n", ckpt);
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(extra), &err));
    gb_client *c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (!c) {
        test_server_stop(&ts);
        return;
    }
    static got g;
    CHECK_OK(gb_client_get_info(c, &g.info, &err));
    CHECK_EQ_INT(g.info.capacity, nplan); /* full: an insert replaces the oldest item */
    void *cols[GB_CLIENT_MAX_COLUMNS];
    for (int k = 0; k < g.info.ncolumns; k++)
        cols[k] = calloc(T_STEPS, g.info.columns[k].step_bytes);
    memset(cols[gb_client_column_index(&g.info, "valid")], 1, T_STEPS);
    CHECK_OK(gb_client_insert(c, &g.info, 1, (const void *const *)cols, NULL, NULL, 0, NULL,
                              &err));
    for (int k = 0; k < g.info.ncolumns; k++)
        free(cols[k]);
    /* an epoch reads every transition: the batches holding episode 0's first steps fail, the
     * others are right to the last value */
    int failed = 0, rc;
    for (int k = 0; k < 4; k++) {
        rc = sample_mode(c, &g, "epoch", 250, 1, "all", &err);
        if (rc == GB_ENOTFOUND && strstr(err.msg, "replaced by an insert"))
            failed++;
        else if (rc == 0)
            CHECK_EQ_INT(check_offline(&g, T_STEPS, 0, NULL), 0);
        else
            CHECK_OK(rc);
    }
    CHECK(failed >= 1);
    CHECK_OK(gb_client_checkpoint(c, NULL, 0, &err));
    gb_client_close(c);
    test_server_stop(&ts);
    snprintf(extra, sizeof extra, "  checkpoint: %s\n  restore: true\n", ckpt);
    CHECK_OK(test_server_start(&ts, server_config(extra), &err));
    c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (c) {
        CHECK_OK(gb_client_get_info(c, &g.info, &err));
        CHECK_EQ_INT(g.info.episodes, 0);
        CHECK_EQ_INT(sample_mode(c, &g, "window", 4, 4, NULL, &err), GB_EUNSUPPORTED);
        CHECK(strstr(err.msg, "has no episodes") != NULL);
        gb_client_close(c);
    }
    test_server_stop(&ts);
}

typedef struct waiter {
    const char *endpoint;
    int rc;
    int64_t n;
    int bad;
    gb_client_info info;
} waiter;

/* One sample from table online, which waits for its min_size; checks the values it gets. */
static void *wait_sample(void *arg)
{
    waiter *wt = arg;
    gb_error err = {0};
    gb_client *c = NULL;
    wt->rc = gb_client_open(&c, wt->endpoint, 20000, &err);
    if (wt->rc)
        return NULL;
    static got g;
    g.info = wt->info;
    gb_client_sample_req req = {.batch = 16, .timeout_ms = 15000, .table = "online"};
    memset(&g.b, 0, sizeof g.b);
    g.b.length = g.length;
    g.b.key = g.key;
    wt->rc = gb_client_sample_views(c, &req, &g.b, g.v, g.bytes, &err);
    wt->n = g.b.n;
    for (int64_t i = 0; wt->rc == 0 && i < g.b.n; i++) {
        float o = ((const float *)g.v[gb_client_column_index(&g.info, "obs")])[i * T_STEPS * 3];
        if (g.key[i] <= (uint64_t)nplan) /* an item of the file (keys count commits from 1) */
            wt->bad += check_row(&g, i, T_STEPS, (int64_t)(o / 10), g.length[i]);
        else
            wt->bad += o != 0.0f; /* one of the two inserted, all zero */
    }
    gb_client_close(c);
    return NULL;
}

/* Each table has its own rate limiter: a sample from table online waits (parked) for its
 * min_size while the default table serves, and is answered once inserts into online fill it. */
static void test_table_limiters(void)
{
    gb_error err = {0};
    char extra[1024];
    snprintf(extra, sizeof extra,
             "  tables: {online: \"dataset=%s dataset_format=d4rl replay.capacity=400 "
             "replay.min_size=%lld\"}\n", h5path, (long long)nplan + 2);
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config_wait(extra, 4000000, 20), &err));
    gb_client *c = NULL;
    CHECK_OK(gb_client_open(&c, gb_server_endpoint(ts.server), 10000, &err));
    if (!c) {
        test_server_stop(&ts);
        return;
    }
    waiter wt = {.endpoint = gb_server_endpoint(ts.server)};
    CHECK_OK(gb_client_use_table(c, "online", &err));
    CHECK_OK(gb_client_get_info(c, &wt.info, &err));
    CHECK_EQ_INT(wt.info.size, nplan);
    pthread_t th;
    pthread_create(&th, NULL, wait_sample, &wt);
    TEST_WAIT_UNTIL(gb_server_get_stats(ts.server).parked_now == 1, 10000);
    CHECK_EQ_INT(gb_server_get_stats(ts.server).parked_now, 1);
    /* the default table serves meanwhile */
    static got g;
    CHECK_OK(gb_client_use_table(c, NULL, &err));
    CHECK_OK(gb_client_get_info(c, &g.info, &err));
    gb_client_sample_req req = {.batch = 8, .timeout_ms = 1000};
    memset(&g.b, 0, sizeof g.b);
    CHECK_OK(gb_client_sample_views(c, &req, &g.b, g.v, g.bytes, &err));
    CHECK_EQ_INT(g.b.n, 8);
    CHECK_EQ_INT(gb_server_get_stats(ts.server).parked_now, 1);
    /* two items into online reach its min_size: the parked sample is answered */
    void *cols[GB_CLIENT_MAX_COLUMNS];
    for (int k = 0; k < wt.info.ncolumns; k++)
        cols[k] = calloc(2 * T_STEPS, wt.info.columns[k].step_bytes);
    memset(cols[gb_client_column_index(&wt.info, "valid")], 1, 2 * T_STEPS);
    CHECK_OK(gb_client_use_table(c, "online", &err));
    int64_t size = 0;
    CHECK_OK(gb_client_insert(c, &wt.info, 2, (const void *const *)cols, NULL, NULL, 0, &size,
                              &err));
    for (int k = 0; k < wt.info.ncolumns; k++)
        free(cols[k]);
    CHECK_EQ_INT(size, nplan + 2);
    pthread_join(th, NULL);
    CHECK_EQ_INT(wt.rc, 0);
    CHECK_EQ_INT(wt.n, 16);
    CHECK_EQ_INT(wt.bad, 0);
    gb_client_close(c);
    test_server_stop(&ts);
}

int main(int argc, char **argv)
{
    if (serve_test_setup(argc, argv, "d4rl_modes.h5") != 0)
        return 1;
    plan_episodes();
    TEST_RUN(test_info_tables);
    TEST_RUN(test_windows);
    TEST_RUN(test_transitions_and_episodes);
    TEST_RUN(test_epochs);
    TEST_RUN(test_replaced_and_restored);
    TEST_RUN(test_table_limiters);
    return test_main_result();
}
