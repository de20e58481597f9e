/* tests/workers/server/test_serve.c: the offline-RL data server with the C client, over tcp
 * loopback: D4RL ingest checked value by value against the source; sampling with step ranges,
 * chosen columns, limits and errors; clients choosing their selector per request, sampling at once,
 * each checked for its own distribution. Hostile clients, start-up and restart from a
 * checkpoint: test_serve_robust.c. Usage: test_serve TMPDIR */
#include "serve_util.h"
#include "test.h"

#include "replay/formats/d4rl.h"
#include "workers/server/client/client.h"

static void test_d4rl_reader(void)
{
    gb_error err = {0};
    gb_d4rl *d = NULL;
    CHECK_OK(gb_d4rl_open(&d, h5path, T_STEPS, &err));
    if (!d)
        return;
    CHECK_EQ_INT(gb_d4rl_items(d), nplan);
    CHECK_EQ_INT(gb_d4rl_transitions(d), N_ROWS);
    const gb_dataset_schema *s = gb_d4rl_schema(d);
    CHECK_EQ_INT(s->ncolumns, 8);
    CHECK_EQ_INT(s->columns[1].dtype, GB_DTYPE_FLOAT64); /* actions keep their type */
    CHECK_EQ_INT(s->columns[2].dtype, GB_DTYPE_FLOAT32); /* rewards become float32 */
    for (int64_t i = 0; i < nplan; i++) {
        int64_t row;
        int32_t len;
        gb_d4rl_item_span(d, i, &row, &len);
        CHECK(row == plan_first[i] && len == plan_len[i]);
    }
    gb_d4rl_close(d);
    /* clear errors */
    CHECK(gb_d4rl_open(&d, "/nonexistent.h5", 4, &err) == GB_ENOTFOUND);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/not_hdf5.h5", tmpdir);
    FILE *f = fopen(bad, "w");
    fputs("hello", f);
    fclose(f);
    CHECK(gb_d4rl_open(&d, bad, 4, &err) == GB_ECORRUPT);
}

/* D4RL's v0 layout: no timeouts, rewards and terminals stored [N, 1]. Episodes end at
 * terminals only; rewards are one value a step. */
static void test_d4rl_v0(void)
{
    enum { N = 300 };
    static float obs[N * 3];
    static double act[N * 2], rew[N];
    static uint8_t term[N];
    for (int r = 0; r < N; r++) {
        for (int k = 0; k < 3; k++)
            obs[r * 3 + k] = (float)(10 * r + k);
        act[r * 2] = act[r * 2 + 1] = r;
        rew[r] = r / 4.0;
        term[r] = d4rl_terminal(r);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/d4rl_v0.h5", tmpdir);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d3[2] = {N, 3}, d2[2] = {N, 2}, d11[2] = {N, 1};
    CHECK(f >= 0 && (write_dset(f, "observations", H5T_NATIVE_FLOAT, 2, d3, obs) |
                     write_dset(f, "actions", H5T_NATIVE_DOUBLE, 2, d2, act) |
                     write_dset(f, "rewards", H5T_NATIVE_DOUBLE, 2, d11, rew) |
                     write_dset(f, "terminals", H5T_NATIVE_UINT8, 2, d11, term)) == 0);
    if (f >= 0)
        H5Fclose(f);
    gb_error err = {0};
    gb_d4rl *d = NULL;
    CHECK_OK(gb_d4rl_open(&d, path, T_STEPS, &err));
    if (!d)
        return;
    const gb_dataset_schema *s = gb_d4rl_schema(d);
    CHECK_EQ_INT(s->columns[2].ndim, 0); /* reward: one value a step */
    CHECK_EQ_INT(s->columns[3].ndim, 0);
    /* items: episodes end after rows 96, 193, 290 and at the last row */
    int64_t want = 0, start = 0;
    for (int r = 0; r < N; r++)
        if (d4rl_terminal(r) || r == N - 1) {
            want += (r + 1 - start + T_STEPS - 1) / T_STEPS;
            start = r + 1;
        }
    CHECK_EQ_INT(gb_d4rl_items(d), want);
    int bad = 0;
    float rw[T_STEPS];
    uint8_t tm[T_STEPS], to[T_STEPS], va[T_STEPS];
    static unsigned char scratch[8][T_STEPS * 64];
    for (int64_t i = 0; i < gb_d4rl_items(d); i++) {
        void *dst[8] = {scratch[0], scratch[1], rw, tm, to, va, scratch[6], scratch[7]};
        int64_t row;
        int32_t len;
        gb_d4rl_item_span(d, i, &row, &len);
        gb_d4rl_fill(d, i, dst);
        for (int t = 0; t < len; t++)
            bad += rw[t] != (float)((row + t) / 4.0) || tm[t] != d4rl_terminal(row + t) ||
                   to[t] != 0 || va[t] != 1;
    }
    CHECK_EQ_INT(bad, 0);
    gb_d4rl_close(d);
}

static void test_sample_every_value(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(""), &err));
    if (!ts.server) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    gb_client *c = NULL;
    sbuf b = {0};
    CHECK_OK(client_open_info(&c, gb_server_endpoint(ts.server), 5000, &b.info, &err));
    CHECK_EQ_INT(b.info.size, nplan);
    CHECK_EQ_INT(b.info.steps, T_STEPS);
    CHECK(strcmp(b.info.selector, "uniform") == 0);
    sbuf_alloc(&b, 64);
    int seen[N_ROWS] = {0};
    int bad = 0;
    for (int rep = 0; rep < 40; rep++) {
        gb_client_sample_req req = {.batch = 64, .timeout_ms = -1};
        gb_client_batch out = {.data = b.data, .cap = b.cap, .index = b.index, .key = b.key,
                               .prob = b.prob, .weight = b.weight, .length = b.length};
        CHECK_OK(gb_client_sample(c, &req, &out, &err));
        CHECK_EQ_INT(out.n, 64);
        for (int64_t i = 0; i < out.n; i++)
            CHECK_NEAR(b.prob[i], 1.0 / (double)nplan, 1e-12);
        bad += verify(&b, out.n, 0, T_STEPS, seen);
    }
    CHECK_EQ_INT(bad, 0);
    int covered = 0;
    for (int i = 0; i < nplan; i++)
        covered += seen[i];
    CHECK_EQ_INT(covered, nplan);
    /* a step range, and a subset of columns in a chosen order */
    gb_client_sample_req req = {.batch = 32, .t0 = 2, .t1 = 6, .timeout_ms = -1};
    gb_client_batch out = {.data = b.data, .cap = b.cap, .length = b.length};
    CHECK_OK(gb_client_sample(c, &req, &out, &err));
    CHECK_EQ_INT(verify(&b, out.n, 2, 6, NULL), 0);
    const char *names[] = {"reward", "obs"};
    void *two[2] = {b.data[2], b.data[0]};
    size_t caps[2] = {b.cap[2], b.cap[0]};
    gb_client_sample_req r2 = {.batch = 16, .timeout_ms = -1, .ncolumns = 2, .columns = names};
    gb_client_batch o2 = {.data = two, .cap = caps};
    CHECK_OK(gb_client_sample(c, &r2, &o2, &err));
    for (int64_t i = 0; i < o2.n; i++) {
        int64_t first = (int64_t)(((float *)b.data[0])[i * T_STEPS * 3] / 10);
        CHECK(((float *)b.data[2])[i * T_STEPS] == (float)((double)first / 4));
    }
    /* limits and bad values give clear errors, and the connection keeps working */
    gb_client_sample_req big = {.batch = 257, .timeout_ms = -1};
    CHECK(gb_client_sample(c, &big, &out, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "max_batch_rows") != NULL);
    gb_client_sample_req bytes = {.batch = 256, .timeout_ms = -1};
    CHECK(gb_client_sample(c, &bytes, &out, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "max_batch_bytes") != NULL);
    const char *nope[] = {"nope"};
    gb_client_sample_req bad_col = {.batch = 4, .ncolumns = 1, .columns = nope};
    CHECK(gb_client_sample(c, &bad_col, &out, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "nope") != NULL);
    gb_client_sample_req bad_range = {.batch = 4, .t0 = 5, .t1 = 3};
    CHECK(gb_client_sample(c, &bad_range, &out, &err) == GB_EINVAL);
    CHECK(gb_client_checkpoint(c, NULL, 0, &err) == GB_EUNSUPPORTED);
    /* no extra selectors: uniform (the default), fifo and lifo; weighted is refused, named */
    CHECK(strcmp(b.info.selectors, "uniform,fifo,lifo") == 0);
    gb_client_sample_req weighted = {.batch = 4, .timeout_ms = -1, .selector = "weighted"};
    CHECK(gb_client_sample(c, &weighted, &out, &err) == GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "'weighted'") && strstr(err.msg, "uniform, fifo, lifo"), "%s",
              err.msg);
    CHECK_OK(gb_client_sample(c, &req, &out, &err));
    sbuf_free(&b);
    gb_client_close(c);
    test_server_stop(&ts);
}

/* ---- per-request selectors ------------------------------------------------------------------- */

typedef struct sel_client {
    const char *endpoint;
    const char *selector; /* what this client asks for */
    const double *want;   /* (N_ROWS) expected probability by item index; NULL: 1/size */
    int rounds;
    int64_t count[N_ROWS];
    int bad_prob, bad_values, bad_kind, errors;
} sel_client;

/* Samples `rounds` batches of 64 with one selector, checking every probability and every value. */
static void *sel_main(void *arg)
{
    sel_client *g = arg;
    gb_error err = {0};
    gb_client *c = NULL;
    sbuf *b = calloc(1, sizeof *b);
    if (!b || client_open_info(&c, g->endpoint, 5000, &b->info, &err)) {
        g->errors++;
        free(b);
        gb_client_close(c);
        return NULL;
    }
    sbuf_alloc(b, 64);
    int kind = -1;
    for (int k = 0; k < 5; k++)
        if (g->selector && strcmp(g->selector, gb_client_selector_name(k)) == 0)
            kind = k;
    for (int r = 0; r < g->rounds; r++) {
        gb_client_sample_req req = {.batch = 64, .timeout_ms = -1, .selector = g->selector};
        gb_client_batch out = {.data = b->data, .cap = b->cap, .index = b->index,
                               .prob = b->prob, .weight = b->weight, .length = b->length};
        if (gb_client_sample(c, &req, &out, &err)) {
            g->errors++;
            continue;
        }
        g->bad_kind += out.selector != (kind < 0 ? GB_SELECTOR_UNIFORM : kind) || out.n != 64;
        g->bad_values += verify(b, out.n, 0, T_STEPS, NULL);
        for (int64_t i = 0; i < out.n; i++) {
            int64_t ix = b->index[i];
            if (ix < 0 || ix >= N_ROWS) {
                g->bad_prob++;
                continue;
            }
            g->count[ix]++;
            double want = g->want ? g->want[ix] : 1.0 / (double)out.size;
            g->bad_prob += !(fabs(b->prob[i] - want) <= 1e-12 * (1 + want));
        }
    }
    sbuf_free(b);
    free(b);
    gb_client_close(c);
    return NULL;
}

/* One server with uniform as its default and weighted as an extra selector: two clients sample
 * at the same time, one uniformly (behaviour cloning), one by priority (a TD learner), each
 * checked for its own distribution (exact probabilities, chi-square) and for every value; FIFO
 * by name; a selector the server lacks is refused with the list. */
static void test_selectors_per_request(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config("  replay: {selector: uniform, "
                                                  "extra_selectors: [weighted], alpha: 0.5}\n"),
                               &err));
    if (!ts.server) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    const char *ep = gb_server_endpoint(ts.server);
    gb_client *c = NULL;
    gb_client_info info;
    CHECK_OK(client_open_info(&c, ep, 5000, &info, &err));
    CHECK(strcmp(info.selector, "uniform") == 0);
    CHECK_MSG(strcmp(info.selectors, "uniform,weighted,fifo,lifo") == 0, "%s", info.selectors);
    CHECK(gb_client_has_selector(&info, "weighted") && !gb_client_has_selector(&info, "topk"));
    CHECK(gb_client_has_selector(&info, "fifo") && !gb_client_has_selector(&info, "weigh"));

    /* Every item in commit order (FIFO, one small column), then new priorities for all. */
    static int64_t idx[256];
    static uint64_t key[256];
    static double prio[256], want[N_ROWS];
    static float reward[256 * T_STEPS];
    const char *one[] = {"reward"};
    void *dst[1] = {reward};
    size_t cap[1] = {sizeof reward};
    gb_client_sample_req fifo = {.batch = info.size, .timeout_ms = -1, .ncolumns = 1,
                                 .columns = one, .selector = "fifo"};
    gb_client_batch out = {.data = dst, .cap = cap, .index = idx, .key = key, .prob = prio};
    CHECK_OK(gb_client_sample(c, &fifo, &out, &err));
    CHECK_EQ_INT(out.n, nplan);
    CHECK_EQ_INT(out.selector, GB_SELECTOR_FIFO);
    int bad = 0;
    for (int64_t i = 0; i < out.n; i++) /* loaded in row order: item i starts at plan_first[i] */
        bad += reward[i * T_STEPS] != (float)((double)plan_first[i] / 4) || prio[i] != 1.0;
    CHECK_EQ_INT(bad, 0);
    double total = 0;
    for (int64_t i = 0; i < out.n; i++) {
        prio[i] = i % 10 == 3 ? 0.0 : 0.5 + (double)(i % 7); /* some never drawn */
        total += prio[i] > 0 ? sqrt(prio[i]) : 0;
    }
    int64_t skipped = -1;
    CHECK_OK(gb_client_update_priorities(c, out.n, idx, key, prio, &skipped, &err));
    CHECK_EQ_INT(skipped, 0);
    for (int64_t i = 0; i < out.n; i++)
        if (idx[i] >= 0 && idx[i] < N_ROWS)
            want[idx[i]] = prio[i] > 0 ? sqrt(prio[i]) / total : 0;

    /* A selector the server does not keep, and a name no server knows. */
    gb_client_sample_req topk = {.batch = 4, .timeout_ms = -1, .selector = "topk"};
    CHECK_EQ_INT(gb_client_sample(c, &topk, &out, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "'topk'") && strstr(err.msg, "uniform, weighted, fifo, lifo") &&
                  strstr(err.msg, "extra_selectors"), "%s", err.msg);
    gb_client_sample_req best = {.batch = 4, .timeout_ms = -1, .selector = "best"};
    CHECK_EQ_INT(gb_client_sample(c, &best, &out, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "best") != NULL);
    gb_client_close(c);

    /* Two clients at once: uniform (by name) and weighted; a third asks for the default. */
    enum { ROUNDS = 400 };
    static sel_client g[3];
    memset(g, 0, sizeof g);
    g[0] = (sel_client){.endpoint = ep, .selector = "uniform", .rounds = ROUNDS};
    g[1] = (sel_client){.endpoint = ep, .selector = "weighted", .want = want, .rounds = ROUNDS};
    g[2] = (sel_client){.endpoint = ep, .selector = NULL, .rounds = 20};
    pthread_t th[3];
    for (int k = 0; k < 3; k++)
        pthread_create(&th[k], NULL, sel_main, &g[k]);
    for (int k = 0; k < 3; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_INT(g[k].errors, 0);
        CHECK_EQ_INT(g[k].bad_kind, 0);
        CHECK_EQ_INT(g[k].bad_prob, 0);
        CHECK_EQ_INT(g[k].bad_values, 0);
    }
    /* chi-square of each client's draws against its own distribution */
    for (int k = 0; k < 2; k++) {
        double chi2 = 0;
        int dof = -1, drawn_zero = 0;
        for (int64_t i = 0; i < nplan; i++) {
            int64_t ix = idx[i];
            double p = k == 0 ? 1.0 / (double)nplan : want[ix];
            if (p == 0) {
                drawn_zero += g[k].count[ix] > 0;
                continue;
            }
            double e = (double)ROUNDS * 64 * p;
            chi2 += (g[k].count[ix] - e) * (g[k].count[ix] - e) / e;
            dof++;
        }
        double limit = dof + 5.0 * sqrt(2.0 * dof) + 10.0;
        fprintf(stderr, "  %s: chi2 %.1f, %d dof (limit %.1f)\n", g[k].selector, chi2, dof,
                limit);
        CHECK(chi2 < limit);
        CHECK_EQ_INT(drawn_zero, 0);
    }
    test_server_stop(&ts);
}

int main(int argc, char **argv)
{
    if (serve_test_setup(argc, argv, "d4rl_test.h5") != 0)
        return 1;
    TEST_RUN(test_d4rl_reader);
    TEST_RUN(test_d4rl_v0);
    TEST_RUN(test_sample_every_value);
    TEST_RUN(test_selectors_per_request);
    return test_main_result();
}
