/* tests/workers/server/test_serve_shards_c.c: the C client over two data servers (client_shards.h).
 * Both serve the test D4RL file (serve_util.h: values encode their row) with different
 * priorities (server 0: 1 + first row mod 7, server 1: 1 + first row mod 5), so the servers'
 * totals differ and the batch split matters. Weighted draws: each item's reported probability
 * is exactly priority^alpha / (the sum over both servers), its weight (N prob)^-beta over the
 * batch's largest, the values are the source's, and the counts of 10000 draws per (server,
 * item) pass a chi-square against those probabilities. Uniform draws: probability 1/N. FIFO is
 * refused. */
#include "serve_util.h"
#include "test.h"
#include "workers/server/client/client_shards.h"

#include <math.h>

#define ALPHA 0.6
#define BETA 0.4
#define DRAW_BATCH 250
#define DRAW_ROUNDS 40

static test_server srv[2];
static double prio_w[2][N_ROWS]; /* priority^alpha by server and plan index */

static double priority_of(int s, int64_t first) { return 1.0 + (double)(first % (s ? 5 : 7)); }

/* Sets every item's priority on server s (fifo fetches each item once). */
static void set_priorities(gb_client *c, int s)
{
    gb_error err = {0};
    gb_client_info info;
    CHECK_OK(gb_client_get_info(c, &info, &err));
    CHECK(info.size == nplan && info.has_weight_total && fabs(info.beta - BETA) < 1e-12);
    static float obs[512 * T_STEPS * 3];
    void *data[1] = {obs};
    size_t cap[1] = {sizeof obs};
    static int64_t index[512];
    static uint64_t key[512];
    static double pr[512];
    const char *cols[1] = {"obs"};
    gb_client_sample_req req = {.batch = info.size, .timeout_ms = -1, .ncolumns = 1,
                                .columns = cols, .selector = "fifo"};
    gb_client_batch b = {.data = data, .cap = cap, .index = index, .key = key};
    CHECK_OK(gb_client_sample(c, &req, &b, &err));
    CHECK_EQ_INT(b.n, nplan);
    for (int64_t i = 0; i < b.n; i++) {
        int64_t first = (int64_t)(obs[i * T_STEPS * 3] / 10);
        int p = plan_find(first);
        CHECK(p >= 0);
        pr[i] = priority_of(s, first);
        if (p >= 0)
            prio_w[s][p] = pow(pr[i], ALPHA);
    }
    int64_t skipped = -1;
    CHECK_OK(gb_client_update_priorities(c, b.n, index, key, pr, &skipped, &err));
    CHECK_EQ_INT(skipped, 0);
}

static gb_client_shards *sh;

static void test_weighted(void)
{
    gb_error err = {0};
    double total = 0;
    for (int s = 0; s < 2; s++)
        for (int p = 0; p < nplan; p++)
            total += prio_w[s][p];
    static sbuf b;
    CHECK_OK(gb_client_get_info(gb_client_shards_client(sh, 0), &b.info, &err));
    sbuf_alloc(&b, DRAW_BATCH);
    static double counts[2][N_ROWS];
    int32_t server[DRAW_BATCH];
    int bad_p = 0, bad_w = 0, bad_v = 0;
    for (int round = 0; round < DRAW_ROUNDS; round++) {
        gb_client_sample_req req = {.batch = DRAW_BATCH, .timeout_ms = -1,
                                    .selector = "weighted"};
        gb_client_batch out = {.data = b.data, .cap = b.cap, .index = b.index, .key = b.key,
                               .prob = b.prob, .weight = b.weight, .length = b.length};
        CHECK_OK(gb_client_shards_sample(sh, &req, &out, server, &err));
        CHECK_EQ_INT(out.n, DRAW_BATCH);
        CHECK_EQ_INT(out.size, 2 * nplan);
        bad_v += verify(&b, out.n, 0, T_STEPS, NULL);
        double wmax = 0, w[DRAW_BATCH];
        for (int64_t i = 0; i < out.n; i++) {
            const float *obs = b.data[gb_client_column_index(&b.info, "obs")];
            int p = plan_find((int64_t)(obs[i * T_STEPS * 3] / 10));
            int s = server[i];
            if (p < 0 || s < 0 || s > 1) {
                bad_p++;
                continue;
            }
            double want = prio_w[s][p] / total;
            bad_p += fabs(b.prob[i] - want) > 1e-9 * want;
            w[i] = pow((double)out.size * want, -BETA);
            wmax = w[i] > wmax ? w[i] : wmax;
            counts[s][p]++;
        }
        for (int64_t i = 0; i < out.n; i++)
            bad_w += fabs(b.weight[i] - w[i] / wmax) > 1e-5;
    }
    CHECK_EQ_INT(bad_v, 0);
    CHECK_EQ_INT(bad_p, 0);
    CHECK_EQ_INT(bad_w, 0);
    double chi2 = 0, draws = DRAW_ROUNDS * DRAW_BATCH;
    for (int s = 0; s < 2; s++)
        for (int p = 0; p < nplan; p++) {
            double e = draws * prio_w[s][p] / total;
            chi2 += (counts[s][p] - e) * (counts[s][p] - e) / e;
        }
    double dof = 2.0 * (double)nplan - 1, limit = dof + 5 * sqrt(2 * dof) + 10;
    printf("  weighted across 2 servers: chi2 %.1f, %.0f dof (limit %.1f)\n", chi2, dof, limit);
    CHECK(chi2 < limit);
    sbuf_free(&b);
}

static void test_uniform_and_refusal(void)
{
    gb_error err = {0};
    double prob[64];
    int64_t index[64];
    int32_t server[64];
    gb_client_sample_req req = {.batch = 64, .timeout_ms = -1, .selector = "uniform"};
    gb_client_batch out = {.index = index, .prob = prob};
    CHECK_OK(gb_client_shards_sample(sh, &req, &out, server, &err));
    CHECK_EQ_INT(out.n, 64);
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += fabs(prob[i] - 1.0 / (2.0 * (double)nplan)) > 1e-12;
    CHECK_EQ_INT(bad, 0);
    req.selector = "fifo";
    CHECK_EQ_INT(gb_client_shards_sample(sh, &req, &out, server, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "only uniform and weighted") != NULL);
}

int main(int argc, char **argv)
{
    if (serve_test_setup(argc, argv, "d4rl_shards.h5") != 0)
        return 1;
    gb_error err = {0};
    char text[1024];
    const char *eps[2];
    for (int s = 0; s < 2; s++) {
        snprintf(text, sizeof text,
                 "experiment: {name: serve_shards}\nenv: {name: CartPole-v1}\n"
                 "trainer: {algorithm: {name: ppo}}\n"
                 "server: {endpoint: 'tcp://127.0.0.1:*', dataset: %s, dataset_format: d4rl, "
                 "steps: %d, max_batch_rows: 512, max_batch_bytes: 10000000, seed: %d, "
                 "replay: {selector: uniform, extra_selectors: [weighted]}}\n",
                 h5path, T_STEPS, 11 + s);
        CHECK_OK(test_server_start(&srv[s], text, &err));
        eps[s] = gb_server_endpoint(srv[s].server);
    }
    CHECK_OK(gb_client_shards_open(&sh, eps, 2, 10000, 7, &err));
    if (sh) {
        for (int s = 0; s < 2; s++)
            set_priorities(gb_client_shards_client(sh, s), s);
        TEST_RUN(test_weighted);
        TEST_RUN(test_uniform_and_refusal);
    }
    gb_client_shards_close(sh);
    for (int s = 0; s < 2; s++)
        test_server_stop(&srv[s]);
    return test_main_result();
}
