/* tests/workers/roles/test_acting_state.c: the acting step's recurrent state rows
 * (workers/roles/acting.h, policy.model.core). The acting owns one row per environment copy,
 * zeros at creation; the test plays the policy, writing into each group's rows a state_out
 * unique to the copy and the step, and checks that after every step a row is exactly what was
 * written or, where that copy's episode ended, zeros (as many zeroed rows as episodes ended, no
 * other row touched: copies never share a row), that rows of the other groups are untouched,
 * and that every chunk's state column is the state its row 0 entered with, replayed from what
 * was written per copy (so each stream carries its own copy's state into its chunks). Without a
 * core there are no rows and the chunk layout has no state column. */
#include "test.h"

#include "runtime/base/rng.h"
#include "tests/workers/config_text.h"
#include "workers/roles/acting.h"

#include <stdlib.h>
#include <string.h>

enum { K = 8, G = 2, S = 4, T = 4, STEPS = 300, ROWS_MAX = 2 * STEPS + 2 };

static gb_config cfg;
static int64_t episodes_seen;

static int load(const char *text)
{
    return config_text(&cfg, text);
}

static void on_episode(void *ctx, double ret, int64_t len)
{
    (void)ctx;
    (void)ret;
    (void)len;
    episodes_seen++;
}

/* Per copy: the state each of its stream's rows entered with, replayed by the bridge's rule. */
typedef struct stream_ref {
    float enter[ROWS_MAX][S];
    int kind[ROWS_MAX]; /* 0 mid-episode, 1 reset row, 2 a new episode's first row */
    int rows;           /* rows so far; the current row is rows */
    int chunks;         /* chunks taken */
} stream_ref;

static stream_ref ref[K];
static float written[K][S]; /* what each row holds: the last state_out, or zeros */

/* The state_out of copy c at step t: never zero, unique to (c, t). */
static void state_out(int c, int t, float out[S])
{
    for (int k = 0; k < S; k++)
        out[k] = 1000.0f * (float)(c + 1) + (float)t + 0.25f * (float)k;
}

/* Takes finished chunks and checks their state column against the replay; counts the kinds. */
static void take_chunks(gb_acting *a, int seen[3])
{
    const gb_chunk_layout *l = gb_acting_layout(a);
    gb_chunk ch;
    while (gb_acting_take(a, &ch)) {
        stream_ref *r = &ref[ch.stream];
        int r0 = r->chunks * T;
        const float *st = gb_chunk_column(l, ch.block, GB_CHUNK_STATE);
        CHECK_MSG(r0 < r->rows && memcmp(st, r->enter[r0], sizeof r->enter[0]) == 0,
                  "stream %d chunk %d (row %d, kind %d): state %g ..., expected %g ...",
                  ch.stream, r->chunks, r0, r->kind[r0], st[0], r->enter[r0][0]);
        seen[r->kind[r0]]++;
        r->chunks++;
        gb_chunk_release(ch.block);
    }
}

static void test_state_rows(void)
{
    CHECK(load("experiment: {name: t}\nenv: {name: CartPole-v1}\n"
               "actors: {chunk_len: 4}\n"
               "policy: {model: {core: lstm, core_size: 2}}\n"
               "trainer: {algorithm: {name: ppo}}\n") == 0);
    gb_error err = {0};
    gb_acting *a = NULL;
    gb_acting_opts o = {.cfg = &cfg, .copies = K, .splits = G, .seed = 5,
                        .on_episode = on_episode};
    CHECK_OK(gb_acting_create(&o, &a, &err));
    if (!a)
        return;
    CHECK_EQ_INT(gb_acting_state_size(a), S);
    CHECK_EQ_INT(gb_acting_layout(a)->ncols, GB_CHUNK_STATE + 1);
    CHECK_EQ_INT(gb_acting_layout(a)->state_size, S);
    const int per = K / G;
    CHECK(gb_acting_state(a, 1) == gb_acting_state(a, 0) + (size_t)per * S);
    for (int c = 0; c < K; c++) {
        ref[c].kind[0] = 2; /* zeros entering row 0 */
        const float *row = gb_acting_state(a, c / per) + (size_t)(c % per) * S;
        for (int k = 0; k < S; k++)
            CHECK(row[k] == 0.0f); /* zeros at creation */
    }
    gb_rng rng;
    gb_rng_seed(&rng, 3);
    int64_t action[K / G];
    float logp[K / G] = {0};
    int partial = 0, seen[3] = {0};
    for (int t = 0; t < STEPS; t++) {
        int g = t % G;
        float *rows = gb_acting_state(a, g);
        for (int i = 0; i < per; i++) {
            int c = g * per + i;
            CHECK(memcmp(rows + (size_t)i * S, written[c], sizeof written[c]) == 0);
            state_out(c, t, written[c]);
            memcpy(rows + (size_t)i * S, written[c], sizeof written[c]); /* the policy's */
            action[i] = (int64_t)gb_rng_below(&rng, 2);
        }
        int64_t before = episodes_seen;
        CHECK_OK(gb_acting_step(a, g, action, sizeof action, logp, sizeof logp, 1, &err));
        int zeroed = 0;
        for (int i = 0; i < per; i++) {
            int c = g * per + i;
            stream_ref *r = &ref[c];
            const float *row = rows + (size_t)i * S;
            int ended = row[0] == 0.0f;
            int all_zero = 1;
            for (int k = 0; k < S; k++)
                all_zero &= row[k] == 0.0f;
            CHECK_MSG(ended ? all_zero : memcmp(row, written[c], sizeof written[c]) == 0,
                      "copy %d after step %d: a row neither kept nor zeroed", c, t);
            /* the bridge's rule over this copy's rows: the next row enters with state_out;
             * after a reset row, zeros */
            memcpy(r->enter[r->rows + 1], written[c], sizeof written[c]);
            r->kind[r->rows + 1] = ended ? 1 : 0;
            r->rows++;
            if (ended) {
                memset(r->enter[r->rows + 1], 0, sizeof r->enter[0]);
                r->kind[r->rows + 1] = 2;
                r->rows++;
                memset(written[c], 0, sizeof written[c]);
                zeroed++;
            }
        }
        CHECK_EQ_INT(zeroed, episodes_seen - before);
        partial += zeroed > 0 && zeroed < per;
        /* the other group's rows are untouched */
        const float *other = gb_acting_state(a, (g + 1) % G);
        for (int i = 0; i < per; i++)
            CHECK(memcmp(other + (size_t)i * S, written[((g + 1) % G) * per + i],
                         sizeof written[0]) == 0);
        take_chunks(a, seen);
    }
    CHECK_MSG(partial > 3, "only %d steps where some copies of a group ended and some not",
              partial);
    CHECK_MSG(seen[0] > 3 && seen[1] > 3 && seen[2] > 3,
              "chunks beginning mid-episode %d, with a reset row %d, with a new episode %d",
              seen[0], seen[1], seen[2]);
    gb_acting_destroy(a);
}

static void test_no_core(void)
{
    CHECK(load("experiment: {name: t}\nenv: {name: CartPole-v1}\n"
               "trainer: {algorithm: {name: ppo}}\n") == 0);
    gb_error err = {0};
    gb_acting *a = NULL;
    gb_acting_opts o = {.cfg = &cfg, .copies = 4, .splits = 2, .seed = 5};
    CHECK_OK(gb_acting_create(&o, &a, &err));
    if (!a)
        return;
    CHECK_EQ_INT(gb_acting_state_size(a), 0);
    CHECK(gb_acting_state(a, 0) == NULL);
    CHECK_EQ_INT(gb_acting_layout(a)->ncols, GB_CHUNK_STATE);
    gb_acting_destroy(a);
}

int main(void)
{
    TEST_RUN(test_state_rows);
    TEST_RUN(test_no_core);
    return test_main_result();
}
