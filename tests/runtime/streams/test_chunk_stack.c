/* tests/runtime/streams/test_chunk_stack.c: frame stacks stored a frame a row (chunk.h "Frame
 * stacks"). A real wrapped environment (Breakout84-v0 with frame_stack 4; Atari Breakout with
 * frame skip, resize, no-ops and episodic life when the ALE is there) is stepped with random
 * actions for thousands of steps into the chunk builder, across episode ends (its own, the time
 * limit's, lost lives), burn-in overlap, chunk boundaries and failed block allocations; every
 * chunk's rows are rebuilt (gb_chunk_stack_expand) and compared byte for byte with the
 * observation the wrapper produced for that row, its next_obs with the observation after it.
 * The expected rows come from a model of the builder's rows written from chunk.h's contract,
 * not from its code. Also: the layout's sizes (each frame once), and that the builder refuses
 * a stack that is not the wrapper's. */
#include "envs/host.h"
#include "envs/ring.h"
#include "runtime/streams/chunk.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_T = 64, QUEUE = 8 };

/* A stream's rows as chunk.h says the builder lays them out: idx[r] is the stream's row
 * sequence number of row r of the chunk being filled (-1: padding), i the row being filled. */
typedef struct model {
    int64_t idx[MAX_T], i;
    int64_t want[QUEUE][MAX_T + 1]; /* finished chunks' rows, then next_obs, in order */
    int qh, qn;
} model;

typedef struct run {
    const gb_chunk_layout *l;
    int K;
    size_t ob;          /* bytes of one whole observation */
    int64_t cap;        /* observations kept per stream, by sequence number */
    uint8_t *seq;       /* [K, cap, ob] */
    int64_t *next;      /* [K] the next sequence number */
    model *m;           /* [K] */
    uint8_t *whole;     /* [T, ob]: a chunk's rows rebuilt */
    int64_t chunks, rows, padding, fails;
    int failing; /* a block allocation is set to fail */
} run;

static int64_t push(run *r, int s, const void *obs)
{
    int64_t q = r->next[s]++;
    memcpy(r->seq + ((size_t)s * (size_t)r->cap + (size_t)(q % r->cap)) * r->ob, obs, r->ob);
    return q;
}

static const uint8_t *seq_at(const run *r, int s, int64_t q)
{
    CHECK(q >= 0 && q > r->next[s] - r->cap);
    return r->seq + ((size_t)s * (size_t)r->cap + (size_t)(q % r->cap)) * r->ob;
}

/* The stream's chunk is full with next_obs q: record it (unless its block allocation failed),
 * then the next chunk begins with the last `overlap` rows (restart: padding instead). */
static void finish(run *r, int s, int64_t q, int dropped, int restart)
{
    model *m = &r->m[s];
    const int64_t T = r->l->T, ov = r->l->overlap;
    if (!dropped) {
        CHECK(m->qn < QUEUE);
        int64_t *w = m->want[(m->qh + m->qn++) % QUEUE];
        memcpy(w, m->idx, (size_t)T * sizeof *w);
        w[T] = q;
    }
    for (int64_t j = 0; j < ov; j++)
        m->idx[j] = restart ? -1 : m->idx[T - ov + j];
    m->i = ov;
}

/* Appends row q after the current one; next_obs_q completes a full chunk. Returns 1 when this
 * append finished a chunk. */
static int append(run *r, int s, int64_t q, int dropped)
{
    model *m = &r->m[s];
    int done = m->i + 1 == r->l->T;
    if (done)
        finish(r, s, q, dropped, 0);
    else
        m->i++;
    m->idx[m->i] = q;
    return done;
}

static void start(run *r, int s, int64_t q)
{
    model *m = &r->m[s];
    for (int64_t j = 0; j < r->l->overlap; j++)
        m->idx[j] = -1;
    m->i = r->l->overlap;
    m->idx[m->i] = q;
}

/* Compares a taken chunk with the model's oldest finished one. */
static void check_chunk(run *r, const gb_chunk *c)
{
    const gb_chunk_layout *l = r->l;
    model *m = &r->m[c->stream];
    CHECK(m->qn > 0);
    if (m->qn == 0)
        return;
    const int64_t *w = m->want[m->qh];
    m->qh = (m->qh + 1) % QUEUE;
    m->qn--;
    gb_chunk_stack_expand(l, 1, gb_chunk_column(l, c->block, GB_CHUNK_OBS),
                          gb_chunk_column(l, c->block, l->past_col),
                          gb_chunk_column(l, c->block, GB_CHUNK_VALID), r->whole);
    int bad = 0;
    for (int64_t t = 0; t < l->T; t++) {
        const uint8_t *got = r->whole + (size_t)t * r->ob;
        if (w[t] < 0) {
            for (size_t b = 0; b < r->ob; b++)
                bad += got[b] != 0;
            r->padding++;
        } else {
            bad += memcmp(got, seq_at(r, c->stream, w[t]), r->ob) != 0;
            r->rows++;
        }
    }
    bad += memcmp(gb_chunk_column(l, c->block, GB_CHUNK_NEXT_OBS),
                  seq_at(r, c->stream, w[l->T]), r->ob) != 0;
    CHECK_MSG(bad == 0, "chunk %lld of stream %d: %d rows differ", (long long)r->chunks,
              c->stream, bad);
    r->chunks++;
}

/* One step of every copy: random actions, the builder fed as the actor feeds it, the model
 * beside it, finished chunks checked. fail: the next block allocation fails. */
static void step(run *r, gb_chunk_builder *b, gb_env_ring *ring, gb_env_ring_buffers *buf,
                 int64_t *prev, uint64_t *x, int n_actions, int fail, int64_t *ends)
{
    if (fail && !r->failing) { /* the next chunk to finish, on whichever stream, is dropped */
        gb_chunk_fail_next_allocs(1);
        r->failing = 1;
    }
    gb_error err = {0};
    for (int s = 0; s < r->K; s++) {
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t a = (int64_t)((*x >> 33) % (uint64_t)n_actions);
        ((int32_t *)buf->actions)[s] = (int32_t)a;
        gb_chunk_act(b, s, &a, 0.0f, 0);
    }
    CHECK_OK(gb_env_ring_step(ring, 0, &err));
    const gb_env_copy_stats *st = gb_env_ring_stats(ring);
    for (int s = 0; s < r->K; s++) {
        int ended = st[s].episodes != prev[s] || buf->terminated[s] || buf->truncated[s];
        prev[s] = st[s].episodes;
        const uint8_t *o = (const uint8_t *)buf->obs + (size_t)s * r->ob;
        const uint8_t *f = (const uint8_t *)buf->final_obs + (size_t)s * r->ob;
        int rc = gb_chunk_step(b, s, buf->rewards[s], buf->terminated[s], buf->truncated[s],
                               ended, f, o, &err);
        CHECK_MSG(rc == 0 || (r->failing && rc == GB_ENOMEM), "%d: %s", rc, err.msg);
        int dropped = rc == GB_ENOMEM;
        r->failing &= !dropped;
        r->fails += dropped;
        *ends += ended;
        if (!ended) {
            append(r, s, push(r, s, o), dropped);
            continue;
        }
        model *m = &r->m[s];
        int64_t qf = push(r, s, f);
        if (dropped && m->i + 1 == r->l->T) { /* the ended episode's chunk: a restart at obs */
            finish(r, s, qf, 1, 1);
            m->idx[m->i] = push(r, s, o);
            continue;
        }
        append(r, s, qf, 0);              /* the reset row: the final observation */
        append(r, s, push(r, s, o), dropped); /* then the new episode's first */
    }
    gb_chunk c;
    while (gb_chunk_take(b, &c)) {
        check_chunk(r, &c);
        gb_chunk_release(c.block);
    }
}

/* Runs `steps` steps of `copies` copies of env (wrapped with p) into chunks of T rows with
 * `overlap` rows of burn-in; limit: the ring's time limit (0: the environment's). Returns 0, or
 * -1 when the environment cannot be opened (msg says why). */
static int run_env(const char *env, const char *game, const gb_env_wrap_params *p, int copies,
                   int64_t limit, int64_t T, int64_t overlap, int steps, uint64_t seed,
                   gb_error *open_err)
{
    gb_env_source src;
    gb_error err = {0};
    if (gb_env_source_open(&src, env, NULL, open_err))
        return -1;
    gb_env_source_wrap(&src, p, 0);
    const char *k[] = {"game"}, *v[] = {game};
    gb_env_args args = {game ? 1 : 0, k, v};
    gb_env_ring *ring = NULL;
    if (gb_env_ring_create(src.iface, &args, seed, copies, 1, limit, &ring, open_err)) {
        gb_env_source_close(&src);
        return -1;
    }
    gb_env_ring_buffers buf;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &buf, &err));
    CHECK_OK(gb_env_ring_attach(ring, &buf, &err));
    const gb_env_spec *sp = gb_env_ring_spec(ring);
    gb_chunk_layout l;
    CHECK_OK(gb_chunk_layout_init(&l, T, gb_env_dtype_to_gb(sp->obs.dtype), sp->obs.ndim,
                                  sp->obs.shape, 1, 1, 0, &err));
    CHECK_OK(gb_chunk_layout_set_frame_stack(&l, p->frame_stack, &err));
    CHECK_OK(gb_chunk_layout_set_overlap(&l, overlap, &err));
    run r = {.l = &l, .K = copies, .ob = gb_env_obs_bytes(sp), .cap = 4 * T + 8};
    /* each frame once: the obs column is a k-th of the whole observations' bytes */
    CHECK_EQ_INT(l.bytes[GB_CHUNK_OBS] * (uint64_t)p->frame_stack, (uint64_t)T * r.ob);
    CHECK_EQ_INT(l.bytes[l.past_col], r.ob / (size_t)p->frame_stack * (size_t)(p->frame_stack - 1));
    r.seq = malloc((size_t)copies * (size_t)r.cap * r.ob);
    r.next = calloc((size_t)copies, sizeof *r.next);
    r.m = calloc((size_t)copies, sizeof *r.m);
    r.whole = malloc((size_t)T * r.ob);
    int64_t *prev = calloc((size_t)copies, sizeof *prev), ends = 0;
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&l, copies, &b, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    for (int s = 0; s < copies; s++) {
        const uint8_t *o = (const uint8_t *)buf.obs + (size_t)s * r.ob;
        gb_chunk_start(b, s, o);
        start(&r, s, push(&r, s, o));
    }
    uint64_t x = seed;
    for (int t = 0; b && r.seq && r.m && t < steps; t++)
        step(&r, b, ring, &buf, prev, &x, sp->action.n, t % 401 == 400, &ends);
    gb_chunk_fail_next_allocs(0);
    printf("%s%s%s: k %lld, T %lld, overlap %lld: %lld steps, %lld episode ends, %lld chunks "
           "(%lld rows, %lld padding rows) equal, %lld dropped by failed allocations; "
           "%llu block bytes (whole observations: %llu)\n",
           env, game ? ":" : "", game ? game : "", (long long)p->frame_stack, (long long)T,
           (long long)overlap, (long long)steps * copies, (long long)ends, (long long)r.chunks,
           (long long)r.rows, (long long)r.padding, (long long)r.fails,
           (unsigned long long)l.block_bytes,
           (unsigned long long)(l.block_bytes - l.bytes[GB_CHUNK_OBS] - l.bytes[l.past_col] +
                                (uint64_t)T * r.ob));
    CHECK(r.chunks >= steps * copies / T);
    CHECK(ends > 5);
    CHECK(r.fails > 0);
    gb_chunk_builder_destroy(b);
    free(prev);
    free(r.seq);
    free(r.next);
    free(r.m);
    free(r.whole);
    gb_env_ring_destroy(ring);
    gb_env_ring_buffers_free(&buf);
    gb_env_source_close(&src);
    return 0;
}

static void test_breakout84(void)
{
    gb_env_wrap_params p = gb_env_wrap_params_default();
    p.frame_stack = 4;
    gb_error err = {0};
    /* its own episode ends, chunk boundaries at every phase */
    CHECK_OK(run_env("Breakout84-v0", NULL, &p, 2, 0, 16, 0, 4000, 1, &err));
    /* a time limit that ends episodes at every position, with burn-in overlap */
    CHECK_OK(run_env("Breakout84-v0", NULL, &p, 3, 23, 20, 7, 3000, 2, &err));
    /* a stack deeper than the overlap and the chunk's new rows */
    p.frame_stack = 8;
    CHECK_OK(run_env("Breakout84-v0", NULL, &p, 2, 11, 9, 4, 3000, 3, &err));
    p.frame_stack = 2;
    p.frame_skip = 2;
    CHECK_OK(run_env("Breakout84-v0", NULL, &p, 2, 0, 5, 3, 3000, 4, &err));
}

/* Atari with the standard preprocessing and episodic life: a lost life ends the training
 * episode (the wrapper's reset after it fills the stack from the frame after a no-op step). */
static void test_atari(void)
{
    gb_env_wrap_params p = gb_env_wrap_params_default();
    p.frame_skip = 4;
    p.screen_size = 84;
    p.frame_stack = 4;
    p.noop_max = 30;
    p.episodic_life = 1;
    gb_error err = {0};
    if (run_env("atari", "breakout", &p, 2, 0, 32, 8, 3000, 5, &err))
        printf("atari: skipped (%s)\n", err.msg);
}

/* A stack whose older frames are not the stream's previous frames is refused, not stored. */
static void test_refuses_foreign_stacks(void)
{
    gb_error err = {0};
    gb_chunk_layout l;
    int64_t shape[3] = {3, 2, 2}; /* three frames of 1x2x2 */
    CHECK_OK(gb_chunk_layout_init(&l, 4, GB_DTYPE_UINT8, 3, shape, 1, 1, 0, &err));
    CHECK(gb_chunk_layout_set_frame_stack(&l, 2, &err) == GB_EINVAL); /* 3 frames not by 2 */
    CHECK_OK(gb_chunk_layout_set_frame_stack(&l, 3, &err));
    CHECK_EQ_INT(l.ncols, GB_CHUNK_STATE + 1);
    CHECK_EQ_INT(l.past_col, GB_CHUNK_STATE);
    CHECK(strcmp(l.desc[l.past_col].name, "obs_past") == 0);
    gb_chunk_layout with_core;
    CHECK_OK(gb_chunk_layout_init(&with_core, 4, GB_DTYPE_UINT8, 3, shape, 1, 1, 5, &err));
    CHECK_OK(gb_chunk_layout_set_frame_stack(&with_core, 3, &err));
    CHECK_EQ_INT(with_core.past_col, GB_CHUNK_STATE + 1);
    CHECK(strcmp(with_core.desc[GB_CHUNK_STATE].name, "state") == 0);
    CHECK(strcmp(with_core.desc[with_core.past_col].name, "obs_past") == 0);
    CHECK_EQ_INT(with_core.ncols, GB_CHUNK_NCOLS);
    CHECK_EQ_INT(l.desc[GB_CHUNK_OBS].shape[1], 1);
    CHECK_EQ_INT(l.desc[l.past_col].shape[0], 2);
    gb_chunk_builder *b = NULL;
    CHECK_OK(gb_chunk_builder_create(&l, 1, &b, &err));
    if (!b)
        return;
    uint8_t o0[12], o1[12];
    memset(o0, 1, sizeof o0); /* a reset: every slot the first frame */
    gb_chunk_start(b, 0, o0);
    memcpy(o1, o0, 8);
    memset(o1 + 8, 2, 4); /* pushed: 1 1 2 */
    int64_t a = 0;
    gb_chunk_act(b, 0, &a, 0, 0);
    CHECK_OK(gb_chunk_step(b, 0, 0, 0, 0, 0, NULL, o1, &err));
    uint8_t o2[12];
    memset(o2, 7, 8); /* older frames from nowhere */
    memset(o2 + 8, 3, 4);
    gb_chunk_act(b, 0, &a, 0, 0);
    CHECK(gb_chunk_step(b, 0, 0, 0, 0, 0, NULL, o2, &err) == GB_ECORRUPT);
    CHECK(strstr(err.msg, "frame_stack") != NULL);
    gb_chunk_builder_destroy(b);
}

int main(void)
{
    TEST_RUN(test_refuses_foreign_stacks);
    TEST_RUN(test_breakout84);
    TEST_RUN(test_atari);
    return test_main_result();
}
