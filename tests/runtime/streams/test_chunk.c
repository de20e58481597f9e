/* tests/runtime/streams/test_chunk.c: the chunk builder against a hand-worked trajectory: rows,
 * reset rows after episode ends (also across chunk boundaries), next_obs, versions, the zero-copy
 * hand-off's reference counting, and the ingest check for non-finite values; the recurrent state
 * column against the bridge's reset rule replayed over the rows, with episode ends at every
 * position relative to the chunk boundaries; chunks that repeat the previous chunk's last rows
 * (R2D2's burn-in overlap), padded at a stream's start, also across a failed allocation; the
 * discounted return a chunk carries for reward scaling. */
#include "runtime/streams/chunk.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static gb_chunk_layout layout;

/* obs are float32[2] = {step id, stream}; actions int64 = step id * 10. */
static void obs_of(float v, int s, float out[2])
{
    out[0] = v;
    out[1] = (float)s;
}

static void test_rows_and_resets(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    CHECK_OK(gb_chunk_layout_init(&layout, 4, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err));
    CHECK_EQ_INT(layout.bytes[GB_CHUNK_OBS], 4 * 2 * 4);
    CHECK_EQ_INT(layout.offset[GB_CHUNK_REWARD] % 64, 0);
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&layout, 2, &b, &err));
    if (!b)
        return;
    float o[2], f[2];
    obs_of(0, 1, o);
    gb_chunk_start(b, 1, o);
    /* Episode: obs 0 -> 1 -> 2 (terminated at the 3rd step, final obs 3, reset obs 100),
     * then 100 -> 101 -> ... */
    float next_id = 1;
    int steps = 0;
    gb_chunk c;
    int chunks = 0;
    for (int t = 0; t < 7; t++) {
        int64_t a = (int64_t)(t * 10);
        gb_chunk_act(b, 1, &a, -0.5f * (float)t, 7 + t);
        int ended = t == 2;
        obs_of(ended ? 3 : next_id, 1, f);
        obs_of(ended ? 100 : next_id, 1, o);
        CHECK_OK(gb_chunk_step(b, 1, 1.0f + (float)t, ended, 0, ended, f, o, &err));
        next_id = ended ? 101 : next_id + 1;
        steps++;
        while (gb_chunk_take(b, &c)) {
            chunks++;
            CHECK_EQ_INT(c.stream, 1);
            const float *obs = gb_chunk_column(&layout, c.block, GB_CHUNK_OBS);
            const float *next = gb_chunk_column(&layout, c.block, GB_CHUNK_NEXT_OBS);
            const int64_t *act = gb_chunk_column(&layout, c.block, GB_CHUNK_ACTION);
            const float *rew = gb_chunk_column(&layout, c.block, GB_CHUNK_REWARD);
            const uint8_t *term = gb_chunk_column(&layout, c.block, GB_CHUNK_TERMINATED);
            const uint8_t *valid = gb_chunk_column(&layout, c.block, GB_CHUNK_VALID);
            const int64_t *ver = gb_chunk_column(&layout, c.block, GB_CHUNK_VERSION);
            if (chunks == 1) {
                /* rows: obs 0,1,2 (t=0..2, terminated at 2), reset row obs 3; next_obs 100 */
                CHECK(obs[0] == 0 && obs[2] == 1 && obs[4] == 2 && obs[6] == 3);
                CHECK(obs[1] == 1 && next[0] == 100);
                CHECK(act[0] == 0 && act[2] == 20 && act[3] == 0);
                CHECK(rew[2] == 3.0f && rew[3] == 0.0f);
                CHECK(term[2] == 1 && term[3] == 0);
                CHECK(valid[0] && valid[1] && valid[2] && !valid[3]);
                CHECK_EQ_INT(c.steps, 3);
                CHECK_EQ_INT(c.policy_version, 9);
                CHECK_EQ_INT(ver[2], 9);
            } else {
                /* rows: obs 100,101,102,103; next 104 */
                CHECK(obs[0] == 100 && obs[6] == 103 && next[0] == 104);
                CHECK(valid[0] && valid[3]);
                CHECK_EQ_INT(c.steps, 4);
                CHECK_EQ_INT(c.policy_version, 13);
            }
            gb_chunk_release(c.block);
        }
    }
    CHECK_EQ_INT(chunks, 2);
    gb_chunk_builder_destroy(b);
}

static void test_end_on_last_row(void)
{
    /* An episode ending on the chunk's last row: next_obs is the final observation, and the
     * reset row opens the next chunk. */
    gb_error err = {0};
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&layout, 1, &b, &err));
    if (!b)
        return;
    float o[2], f[2];
    obs_of(0, 0, o);
    gb_chunk_start(b, 0, o);
    gb_chunk c;
    for (int t = 0; t < 4; t++) {
        int64_t a = 1;
        gb_chunk_act(b, 0, &a, 0, 0);
        int ended = t == 3;
        obs_of(ended ? 50 : (float)t + 1, 0, f);
        obs_of(ended ? 60 : (float)t + 1, 0, o);
        CHECK_OK(gb_chunk_step(b, 0, 1, 0, ended, ended, f, o, &err));
    }
    CHECK(gb_chunk_take(b, &c));
    const float *next = gb_chunk_column(&layout, c.block, GB_CHUNK_NEXT_OBS);
    const uint8_t *trunc = gb_chunk_column(&layout, c.block, GB_CHUNK_TRUNCATED);
    CHECK(next[0] == 50 && trunc[3] == 1);
    gb_chunk_release(c.block);
    CHECK(!gb_chunk_take(b, &c));
    /* Three more steps fill the second chunk: reset row (obs 50), then 60, 61, 62. */
    for (int t = 0; t < 3; t++) {
        int64_t a = 1;
        gb_chunk_act(b, 0, &a, 0, 0);
        obs_of(61 + (float)t, 0, o);
        CHECK_OK(gb_chunk_step(b, 0, 1, 0, 0, 0, NULL, o, &err));
    }
    CHECK(gb_chunk_take(b, &c));
    const float *obs = gb_chunk_column(&layout, c.block, GB_CHUNK_OBS);
    const uint8_t *valid = gb_chunk_column(&layout, c.block, GB_CHUNK_VALID);
    next = gb_chunk_column(&layout, c.block, GB_CHUNK_NEXT_OBS);
    CHECK(obs[0] == 50 && !valid[0] && obs[2] == 60 && obs[6] == 62 && next[0] == 63);
    /* Zero-copy hand-off: the block lives until every frame's free function ran. */
    gb_wire_payload p[GB_CHUNK_NCOLS];
    gb_chunk_payloads(&layout, &c, p);
    for (int i = 0; i < layout.ncols; i++) {
        CHECK(p[i].data == (char *)c.block + layout.offset[i]);
        p[i].free_fn((void *)p[i].data, p[i].hint); /* ASan catches a premature free */
    }
    gb_chunk_builder_destroy(b);
}

/* Out of memory for a new block: the finished chunk is dropped (GB_ENOMEM), the stream keeps a
 * block and restarts at the observation it was given, and the next chunk is complete and right.
 * (Before the fix the stream held a NULL block and the next write crashed.) */
static void test_out_of_memory_restarts(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    CHECK_OK(gb_chunk_layout_init(&layout, 2, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err));
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&layout, 1, &b, &err));
    if (!b)
        return;
    float o[2];
    obs_of(0, 0, o);
    gb_chunk_start(b, 0, o);
    int64_t a = 5;
    gb_chunk_act(b, 0, &a, 0.0f, 1);
    obs_of(1, 0, o);
    CHECK_OK(gb_chunk_step(b, 0, 1.0f, 0, 0, 0, o, o, &err));
    gb_chunk_act(b, 0, &a, 0.0f, 1);
    obs_of(2, 0, o);
    gb_chunk_fail_next_allocs(1);
    CHECK_EQ_INT(gb_chunk_step(b, 0, 1.0f, 0, 0, 0, o, o, &err), GB_ENOMEM);
    gb_chunk c;
    CHECK(!gb_chunk_take(b, &c)); /* dropped */
    for (int t = 3; t <= 4; t++) {
        gb_chunk_act(b, 0, &a, 0.0f, 2);
        obs_of((float)t, 0, o);
        CHECK_OK(gb_chunk_step(b, 0, 1.0f, 0, 0, 0, o, o, &err));
    }
    CHECK(gb_chunk_take(b, &c));
    const float *obs = gb_chunk_column(&layout, c.block, GB_CHUNK_OBS);
    const float *next = gb_chunk_column(&layout, c.block, GB_CHUNK_NEXT_OBS);
    CHECK(obs[0] == 2 && obs[2] == 3 && next[0] == 4);
    CHECK_EQ_INT(c.policy_version, 2);
    gb_chunk_release(c.block);
    gb_chunk_builder_destroy(b);
}

/* gb_chunk_nonfinite finds a NaN or an infinity at every position of every floating column of
 * a continuous-action chunk (obs [T, 3], next_obs, action [T, 2], reward, logp), in an unaligned
 * copy too, and ignores the integer columns and uint8 observations. */
static void test_nonfinite(void)
{
    gb_error err = {0};
    int64_t shape[1] = {3};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, 5, GB_DTYPE_FLOAT32, 1, shape, 0, 2, 0, &err));
    unsigned char *block = calloc(1, l.block_bytes + 1), *shifted = malloc(l.block_bytes + 1);
    const void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < l.ncols; c++)
        cols[c] = block + l.offset[c];
    CHECK_EQ_INT(gb_chunk_nonfinite(&l, cols), -1);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    int floating[] = {GB_CHUNK_OBS, GB_CHUNK_NEXT_OBS, GB_CHUNK_ACTION, GB_CHUNK_REWARD,
                      GB_CHUNK_LOGP};
    int found = 0, tried = 0;
    for (size_t k = 0; k < sizeof floating / sizeof floating[0]; k++) {
        int c = floating[k];
        float *col = (float *)(block + l.offset[c]);
        for (uint64_t i = 0; i < l.bytes[c] / 4; i++)
            for (int b = 0; b < 3; b++) {
                col[i] = bad[b];
                tried++;
                found += gb_chunk_nonfinite(&l, cols) == c;
                /* the same bytes one past a 4-byte boundary, as a wire frame may be */
                memcpy(shifted + 1, block, l.block_bytes);
                const void *sc[GB_CHUNK_NCOLS];
                for (int d = 0; d < l.ncols; d++)
                    sc[d] = shifted + 1 + l.offset[d];
                found += gb_chunk_nonfinite(&l, sc) == c;
                col[i] = 1e30f; /* large but finite */
            }
        CHECK_EQ_INT(gb_chunk_nonfinite(&l, cols), -1);
    }
    CHECK_EQ_INT(found, 2 * tried);
    /* integer columns may hold any bits */
    memset(block + l.offset[GB_CHUNK_VERSION], 0xff, l.bytes[GB_CHUNK_VERSION]);
    memset(block + l.offset[GB_CHUNK_VALID], 0xff, l.bytes[GB_CHUNK_VALID]);
    CHECK_EQ_INT(gb_chunk_nonfinite(&l, cols), -1);
    free(block);
    free(shifted);
    /* uint8 observations are never non-finite */
    CHECK_OK(gb_chunk_layout_init(&l, 5, GB_DTYPE_UINT8, 1, shape, 1, 1, 0, &err));
    block = malloc(l.block_bytes);
    memset(block, 0xff, l.block_bytes);
    for (int c = 0; c < l.ncols; c++)
        cols[c] = block + l.offset[c];
    memset(block + l.offset[GB_CHUNK_REWARD], 0, l.bytes[GB_CHUNK_REWARD]);
    memset(block + l.offset[GB_CHUNK_LOGP], 0, l.bytes[GB_CHUNK_LOGP]);
    CHECK_EQ_INT(gb_chunk_nonfinite(&l, cols), -1);
    free(block);
}

/* The state column's layout: present only with S > 0, per item [S] float32 after version; a
 * layout without it is the one before cores, and neither matches the other. */
static void test_state_layout(void)
{
    gb_error err = {0};
    int64_t shape[1] = {3};
    gb_chunk_layout none, with;
    CHECK_OK(gb_chunk_layout_init(&none, 5, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err));
    CHECK_OK(gb_chunk_layout_init(&with, 5, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 6, &err));
    CHECK_EQ_INT(none.ncols, GB_CHUNK_STATE);
    CHECK_EQ_INT(none.state_size, 0);
    CHECK_EQ_INT(none.bytes[GB_CHUNK_STATE], 0);
    CHECK_EQ_INT(with.ncols, GB_CHUNK_STATE + 1);
    CHECK(strcmp(with.desc[GB_CHUNK_STATE].name, "state") == 0);
    CHECK_EQ_INT(with.desc[GB_CHUNK_STATE].dtype, GB_DTYPE_FLOAT32);
    CHECK_EQ_INT(with.desc[GB_CHUNK_STATE].rank, 1);
    CHECK_EQ_INT(with.desc[GB_CHUNK_STATE].shape[0], 6);
    CHECK_EQ_INT(with.bytes[GB_CHUNK_STATE], 6 * 4);
    CHECK_EQ_INT(with.offset[GB_CHUNK_STATE] % 64, 0);
    /* the columns before it are laid out as without a core */
    for (int c = 0; c < none.ncols; c++)
        CHECK(with.offset[c] == none.offset[c] && with.bytes[c] == none.bytes[c]);
    CHECK(with.block_bytes > none.block_bytes);
    int ndim, per_item;
    const int64_t *ish;
    gb_chunk_column_item(&with, GB_CHUNK_STATE, &ndim, &ish, &per_item);
    CHECK(per_item == 1 && ndim == 1 && ish[0] == 6);
    CHECK_EQ_INT(gb_chunk_matches(&with, with.desc, with.ncols), 1);
    CHECK_EQ_INT(gb_chunk_matches(&none, none.desc, none.ncols), 1);
    CHECK_EQ_INT(gb_chunk_matches(&with, none.desc, none.ncols), 0);
    CHECK_EQ_INT(gb_chunk_matches(&none, with.desc, with.ncols), 0);
    gb_chunk_layout wider;
    CHECK_OK(gb_chunk_layout_init(&wider, 5, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 8, &err));
    CHECK_EQ_INT(gb_chunk_matches(&with, wider.desc, wider.ncols), 0);
    CHECK(gb_chunk_layout_init(&wider, 5, GB_DTYPE_FLOAT32, 1, shape, 1, 1, -1, &err) ==
          GB_EINVAL);
    /* a NaN in the state is found like one in any floating column */
    unsigned char *block = calloc(1, with.block_bytes);
    const void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < with.ncols; c++)
        cols[c] = block + with.offset[c];
    CHECK_EQ_INT(gb_chunk_nonfinite(&with, cols), -1);
    ((float *)(block + with.offset[GB_CHUNK_STATE]))[5] = NAN;
    CHECK_EQ_INT(gb_chunk_nonfinite(&with, cols), GB_CHUNK_STATE);
    free(block);
}

enum { ST_S = 3, ST_T = 4, ST_STEPS = 160 };

/* Episode lengths 1, 2, ..., 7, again and again: with reset rows, ends fall at every position
 * of a 4-row chunk. */
static int ends_at(int step)
{
    int end = -1;
    for (int len = 1;; len = len % 7 + 1) {
        end += len;
        if (end >= step)
            return end == step;
    }
}

/* The state column over many episodes against the bridge's rule replayed over the rows: row 0
 * of the stream enters with zeros; the row after a valid row enters with the state that row
 * produced (staged by gb_chunk_set_state); the row after a reset row with zeros. Each chunk's
 * state column is what its row 0 entered with: a chunk beginning with a reset row carries the
 * ended episode's last state, one beginning with a new episode's first row zeros, one
 * mid-episode the state before it. obs[0] of every row is its index in the stream. */
static void test_state_column(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, ST_T, GB_DTYPE_FLOAT32, 1, shape, 1, 1, ST_S, &err));
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&l, 2, &b, &err));
    if (!b)
        return;
    static float enter[2 * ST_STEPS + 2][ST_S]; /* the state each row enters with */
    static int kind[2 * ST_STEPS + 2];           /* 0 mid-episode, 1 reset row, 2 new episode */
    memset(enter, 0, sizeof enter);
    kind[0] = 2;
    int row = 0, chunks = 0, seen[3] = {0}, nonzero_reset = 0;
    float o[2] = {0, 1}, f[2] = {0, 1};
    gb_chunk_start(b, 1, o);
    for (int t = 0; t < ST_STEPS; t++) {
        int64_t a = t;
        gb_chunk_act(b, 1, &a, 0, 1);
        float out[ST_S] = {(float)t + 1, 0.5f * (float)t, -(float)t - 2}; /* never all zero */
        gb_chunk_set_state(b, 1, out);
        int ended = ends_at(t);
        memcpy(enter[row + 1], out, sizeof out); /* the next row: the reset row, or the next */
        kind[row + 1] = ended ? 1 : 0;
        if (ended) {
            memset(enter[row + 2], 0, sizeof enter[0]);
            kind[row + 2] = 2;
        }
        f[0] = (float)(row + 1);
        o[0] = (float)(row + (ended ? 2 : 1));
        CHECK_OK(gb_chunk_step(b, 1, 1, ended, 0, ended, f, o, &err));
        row += ended ? 2 : 1;
        gb_chunk c;
        while (gb_chunk_take(b, &c)) {
            const float *obs = gb_chunk_column(&l, c.block, GB_CHUNK_OBS);
            const float *st = gb_chunk_column(&l, c.block, GB_CHUNK_STATE);
            int r0 = chunks * ST_T;
            CHECK_MSG(obs[0] == (float)r0, "chunk %d starts at row %g, not %d", chunks, obs[0],
                      r0);
            CHECK_MSG(memcmp(st, enter[r0], sizeof enter[0]) == 0,
                      "chunk %d (row %d, kind %d): state %g %g %g, expected %g %g %g", chunks,
                      r0, kind[r0], st[0], st[1], st[2], enter[r0][0], enter[r0][1],
                      enter[r0][2]);
            seen[kind[r0]]++;
            nonzero_reset += kind[r0] == 1 && st[0] != 0;
            chunks++;
            gb_chunk_release(c.block);
        }
    }
    CHECK(chunks > 30);
    /* every case met, more than once */
    CHECK_MSG(seen[0] > 1 && seen[1] > 1 && seen[2] > 1, "mid %d, reset %d, new episode %d",
              seen[0], seen[1], seen[2]);
    CHECK_EQ_INT(nonzero_reset, seen[1]);
    gb_chunk_builder_destroy(b);
}

/* Out of memory where a chunk finishes: the stream restarts at the observation it was given,
 * from the carry mid-episode and from zeros when that observation starts a new episode. */
static void test_state_out_of_memory(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, 2, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 2, &err));
    for (int ended = 0; ended <= 1; ended++) {
        gb_chunk_builder *b = NULL;
        CHECK_OK(gb_chunk_builder_create(&l, 1, &b, &err));
        if (!b)
            return;
        float o[2] = {0, 0};
        int64_t a = 0;
        gb_chunk_start(b, 0, o);
        const float s1[2] = {1, 1}, s2[2] = {2, 2}, s3[2] = {3, 3};
        gb_chunk_act(b, 0, &a, 0, 1);
        gb_chunk_set_state(b, 0, s1);
        CHECK_OK(gb_chunk_step(b, 0, 1, 0, 0, 0, o, o, &err));
        gb_chunk_act(b, 0, &a, 0, 1);
        gb_chunk_set_state(b, 0, s2);
        gb_chunk_fail_next_allocs(1);
        CHECK_EQ_INT(gb_chunk_step(b, 0, 1, ended, 0, ended, o, o, &err), GB_ENOMEM);
        for (int t = 0; t < 2; t++) {
            gb_chunk_act(b, 0, &a, 0, 1);
            gb_chunk_set_state(b, 0, s3);
            CHECK_OK(gb_chunk_step(b, 0, 1, 0, 0, 0, o, o, &err));
        }
        gb_chunk c;
        CHECK(gb_chunk_take(b, &c));
        const float *st = gb_chunk_column(&l, c.block, GB_CHUNK_STATE);
        CHECK_MSG(ended ? st[0] == 0 && st[1] == 0 : st[0] == 2 && st[1] == 2,
                  "ended %d: state %g %g", ended, st[0], st[1]);
        gb_chunk_release(c.block);
        gb_chunk_builder_destroy(b);
    }
}

/* Overlap: chunks of OV_T rows whose first OV_K repeat the previous chunk's last ones. Every row
 * of every chunk is checked against the stream's record (obs[0] = the row's index in the
 * stream, its valid flag, the state it entered with); a stream's first chunk begins with OV_K
 * padding rows (zeros, not valid) and zero state; steps counts only the new rows; next_obs is
 * the row after the last. One allocation fails mid-episode where a chunk finishes: that chunk
 * is lost, and the next one still repeats its last rows with their state. */
enum { OV_T = 7, OV_K = 3, OV_STEPS = 200 };

static void check_overlap_chunk(const gb_chunk_layout *l, const gb_chunk *c,
                                float (*enter)[ST_S], const uint8_t *valid, int64_t *n0)
{
    const float *obs = gb_chunk_column(l, c->block, GB_CHUNK_OBS);
    const float *next = gb_chunk_column(l, c->block, GB_CHUNK_NEXT_OBS);
    const uint8_t *v = gb_chunk_column(l, c->block, GB_CHUNK_VALID);
    const float *st = gb_chunk_column(l, c->block, GB_CHUNK_STATE);
    *n0 = (int64_t)obs[2 * OV_K]; /* the first new row */
    int bad = 0, new_valid = 0;
    for (int j = 0; j < OV_T; j++) {
        int64_t r = *n0 - OV_K + j;
        if (r < 0) /* padding */
            bad += obs[2 * j] != 0 || v[j] != 0;
        else
            bad += obs[2 * j] != (float)r || v[j] != valid[r];
        if (j >= OV_K)
            new_valid += v[j];
    }
    CHECK_MSG(bad == 0, "chunk at row %lld: %d rows differ from the stream's", (long long)*n0,
              bad);
    CHECK_EQ_INT(c->steps, new_valid);
    CHECK(next[0] == (float)(*n0 + OV_T - OV_K));
    float zero[ST_S] = {0};
    const float *want = *n0 - OV_K < 0 ? zero : enter[*n0 - OV_K];
    CHECK_MSG(memcmp(st, want, sizeof zero) == 0, "chunk at row %lld: state %g, expected %g",
              (long long)*n0, st[0], want[0]);
}

static void test_overlap(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, OV_T, GB_DTYPE_FLOAT32, 1, shape, 1, 1, ST_S, &err));
    CHECK(gb_chunk_layout_set_overlap(&l, OV_T, &err) == GB_EINVAL); /* no new row */
    CHECK_OK(gb_chunk_layout_set_overlap(&l, OV_K, &err));
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&l, 1, &b, &err));
    if (!b)
        return;
    static float enter[2 * OV_STEPS + 2][ST_S];
    static uint8_t valid[2 * OV_STEPS + 2];
    memset(enter, 0, sizeof enter);
    int row = 0, chunks = 0, failed = 0, gaps = 0;
    int64_t last = -(OV_T - OV_K); /* as if a chunk had ended before the stream's first row */
    float o[2] = {0, 0}, f[2] = {0, 0};
    gb_chunk_start(b, 0, o);
    for (int t = 0; t < OV_STEPS; t++) {
        int64_t a = t;
        gb_chunk_act(b, 0, &a, 0, 1);
        float out[ST_S] = {(float)t + 1, 0.5f * (float)t, -(float)t - 2};
        gb_chunk_set_state(b, 0, out);
        int ended = ends_at(t);
        valid[row] = 1;
        memcpy(enter[row + 1], out, sizeof out);
        if (ended) {
            valid[row + 1] = 0;
            memset(enter[row + 2], 0, sizeof enter[0]);
        }
        f[0] = (float)(row + 1);
        o[0] = (float)(row + (ended ? 2 : 1));
        int fail = !failed && t >= 40 && !ended && (row + 1) % (OV_T - OV_K) == 0;
        if (fail)
            gb_chunk_fail_next_allocs(1);
        CHECK_EQ_INT(gb_chunk_step(b, 0, 1, ended, 0, ended, f, o, &err),
                     fail ? GB_ENOMEM : 0);
        failed |= fail;
        row += ended ? 2 : 1;
        gb_chunk c;
        while (gb_chunk_take(b, &c)) {
            int64_t n0 = -1;
            check_overlap_chunk(&l, &c, enter, valid, &n0);
            CHECK(n0 % (OV_T - OV_K) == 0);
            gaps += n0 != last + (OV_T - OV_K);
            last = n0;
            chunks++;
            gb_chunk_release(c.block);
        }
    }
    CHECK(failed && chunks > 40);
    CHECK_EQ_INT(gaps, 1); /* the chunk lost to the failed allocation, and no other */
    gb_chunk_builder_destroy(b);
}

/* The return carry: with gamma 0.5, rewards 1, 2, 3, ... and episodes of 1..7 steps, each
 * chunk's state column holds R entering its row 0, replayed here: R = 0.5 R + r after a valid
 * row, zero after the reset row; a chunk beginning with the reset row carries the ended
 * episode's R. Without a state column the carry is refused. */
static void test_return_carry(void)
{
    gb_error err = {0};
    int64_t shape[1] = {2};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, 3, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err));
    CHECK(gb_chunk_layout_set_return_carry(&l, 0.5, &err) == GB_EINVAL);
    CHECK_OK(gb_chunk_layout_init(&l, 3, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 1, &err));
    CHECK_OK(gb_chunk_layout_set_return_carry(&l, 0.5, &err));
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&l, 1, &b, &err));
    if (!b)
        return;
    static float enter[400];
    float R = 0, o[2] = {0, 0};
    int row = 0, chunks = 0, bad = 0, nonzero_reset = 0;
    gb_chunk_start(b, 0, o);
    for (int t = 0; t < 150; t++) {
        int64_t a = 0;
        gb_chunk_act(b, 0, &a, 0, 1);
        int ended = ends_at(t);
        float r = (float)(t % 4 + 1);
        enter[row] = R;
        R = 0.5f * R + r;
        if (ended) {
            enter[row + 1] = R; /* the reset row */
            R = 0;
        }
        o[0] = (float)(row + (ended ? 2 : 1));
        float f[2] = {(float)(row + 1), 0};
        CHECK_OK(gb_chunk_step(b, 0, r, ended, 0, ended, f, o, &err));
        row += ended ? 2 : 1;
        gb_chunk c;
        while (gb_chunk_take(b, &c)) {
            const float *st = gb_chunk_column(&l, c.block, GB_CHUNK_STATE);
            const uint8_t *v = gb_chunk_column(&l, c.block, GB_CHUNK_VALID);
            int r0 = chunks * 3;
            bad += st[0] != enter[r0];
            nonzero_reset += !v[0] && st[0] != 0;
            chunks++;
            gb_chunk_release(c.block);
        }
    }
    CHECK(chunks > 40);
    CHECK_EQ_INT(bad, 0);
    CHECK(nonzero_reset > 1); /* chunks beginning with a reset row carry the ended return */
    gb_chunk_builder_destroy(b);
}

/* gb_chunk_scan_floats gives each float32 column's largest magnitude as a naive pass over the
 * values would (a NaN left out, an infinity counted, negatives by their magnitude, subnormals
 * too), and the first non-finite column as gb_chunk_nonfinite does. */
static void test_scan_max_abs(void)
{
    gb_error err = {0};
    int64_t shape[1] = {7};
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, 9, GB_DTYPE_FLOAT32, 1, shape, 0, 3, 0, &err));
    unsigned char *block = calloc(1, l.block_bytes);
    const void *cols[GB_CHUNK_NCOLS];
    for (int c = 0; c < l.ncols; c++)
        cols[c] = block + l.offset[c];
    const float special[] = {NAN, -0.0f, 1e-42f, -3.3e38f, 2.5f, -7.25f};
    unsigned seed = 7;
    for (int round = 0; round < 200; round++) {
        for (int c = 0; c < l.ncols; c++) {
            if (l.desc[c].dtype != GB_DTYPE_FLOAT32)
                continue;
            float *col = (float *)(block + l.offset[c]);
            for (uint64_t i = 0; i < l.bytes[c] / 4; i++) {
                seed = seed * 1103515245u + 12345u;
                col[i] = (seed >> 28) < 3 ? special[(seed >> 8) % 6]
                                          : ((float)((seed >> 8) % 20001) - 10000.0f) / 7.0f;
            }
        }
        if (round == 100) /* one infinity in the reward: counted, and the column is the first */
            ((float *)(block + l.offset[GB_CHUNK_REWARD]))[2] = -INFINITY;
        gb_chunk_scan sc;
        gb_chunk_scan_floats(&l, cols, &sc);
        CHECK_EQ_INT(sc.nonfinite, gb_chunk_nonfinite(&l, cols));
        for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
            float want = 0;
            if (c < l.ncols && l.desc[c].dtype == GB_DTYPE_FLOAT32) {
                const float *col = (const float *)(block + l.offset[c]);
                for (uint64_t i = 0; i < l.bytes[c] / 4; i++)
                    if (!isnan(col[i]) && fabsf(col[i]) > want)
                        want = fabsf(col[i]);
            }
            CHECK(sc.max_abs[c] == want);
        }
        if (round == 100)
            CHECK(isinf(sc.max_abs[GB_CHUNK_REWARD]));
    }
    free(block);
}

int main(void)
{
    TEST_RUN(test_rows_and_resets);
    TEST_RUN(test_end_on_last_row);
    TEST_RUN(test_out_of_memory_restarts);
    TEST_RUN(test_nonfinite);
    TEST_RUN(test_scan_max_abs);
    TEST_RUN(test_state_layout);
    TEST_RUN(test_state_column);
    TEST_RUN(test_state_out_of_memory);
    TEST_RUN(test_overlap);
    TEST_RUN(test_return_carry);
    return test_main_result();
}
