/* workers/roles/ppo_core.c: PPO's learner without libtorch with a recurrent core
 * (ppo_mlp_internal.h): network.cpp's ActorCritic with policy.model.core lstm or gru (torso ->
 * core -> pi and v, torso and core shared), its values over whole chunks from their state0 and
 * ppo_seq.cpp's epochs over minibatches of whole chunks, the gradient through each chunk
 * (truncated backpropagation through time at its boundaries); the core's arithmetic is
 * core_train.h's. With trainer.threads above 1 a minibatch's chunks are split over a team of
 * threads, each part taking its chunks through torso, core, heads and loss (the advantages'
 * normalisation taken over the whole minibatch first) and back: one fork-join a minibatch. */
#include "workers/roles/ppo_mlp_internal.h"

#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x's place in g, as it is in f.g (NULL stays NULL) */
static float *moved(float *x, const gb_flat_mlp *f, float *g) { return x ? g + (x - f->g) : NULL; }

/* The team (threads of them; none for one) and a part for each of its threads: each part's
 * layers the learner's weights (the core's transposes in q->wt) with gradients f.g's (part 0) or
 * its own (grad, laid out as f.g). */
static int open_parts(gb_ppo_mlp *q, int threads, gb_error *err)
{
    gb_flat_mlp *f = &q->f;
    const gb_core_train *c = &q->core;
    const int GH = (c->kind == GB_CORE_TRAIN_LSTM ? 4 : 3) * c->H;
    int rc = threads > 1 ? gb_team_open(threads, &q->team, err) : 0;
    if (rc)
        return rc;
    const int nparts = gb_team_threads(q->team);
    q->part = calloc((size_t)nparts, sizeof *q->part);
    float *wt = gb_flat_grow(&q->wt, sizeof(float) * (size_t)GH * (size_t)(c->F + c->H));
    if (!q->part || !wt)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    for (int p = 0; p < nparts; p++) {
        gb_ppo_core_part *cp = &q->part[p];
        float *g = p == 0 ? f->g : gb_flat_grow(&cp->grad, sizeof(float) * (size_t)f->n);
        cp->actor = calloc((size_t)q->na + 1, sizeof *cp->actor);
        if (!g || !cp->actor)
            return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
        cp->core = *c;
        cp->core.wt_ih = wt;
        cp->core.wt_hh = wt + (size_t)GH * (size_t)c->F;
        cp->core.dw_ih = moved(c->dw_ih, f, g);
        cp->core.db_ih = moved(c->db_ih, f, g);
        cp->core.dw_hh = moved(c->dw_hh, f, g);
        cp->core.db_hh = moved(c->db_hh, f, g);
        for (int i = 0; i < q->na + 2; i++) {
            gb_mlp_train_layer *l = i < q->na ? &cp->actor[i] : &cp->critic[i - q->na];
            *l = i < q->na ? q->actor[i] : q->critic[i - q->na];
            l->dw = moved(l->dw, f, g);
            l->db = moved(l->db, f, g);
        }
        cp->dlog_std = moved(q->dlog_std, f, g);
    }
    return 0;
}

int gb_ppo_core_build(gb_ppo_mlp *q, const gb_config_model *mc, int threads, gb_error *err)
{
    gb_flat_mlp *f = &q->f;
    const int hidden = mc->hidden.n, H = (int)mc->core_size;
    const int lstm = mc->core == GB_CORE_LSTM, G = lstm ? 4 : 3;
    int rc = gb_flat_mlp_reserve(f, 2 * hidden + 9, err);
    q->actor = calloc((size_t)hidden + 1, sizeof *q->actor);
    q->critic = calloc(2, sizeof *q->critic);
    if (rc || !q->actor || !q->critic)
        return rc ? rc : gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    /* libtorch's order: the module's own log_std, then torso, core (ih, hh), pi, v */
    const int ls = q->discrete ? -1 : gb_flat_mlp_entry(f, "log_std", q->A, 0);
    const int F = gb_flat_mlp_torso(f, mc, q->in, "torso", q->actor, &q->na);
    const int ih = gb_flat_mlp_entry(f, "core.ih.weight", G * H, F);
    gb_flat_mlp_entry(f, "core.ih.bias", G * H, 0);
    const int hh = gb_flat_mlp_entry(f, "core.hh.weight", G * H, H);
    gb_flat_mlp_entry(f, "core.hh.bias", G * H, 0);
    const int first_pi = f->nlayout;
    int nh = 0;
    gb_flat_mlp_linear(f, "pi", q->critic, &nh, H, q->A, GB_MLP_ACT_NONE);
    gb_flat_mlp_linear(f, "v", q->critic, &nh, H, 1, GB_MLP_ACT_NONE);
    q->nc = nh;
    if ((rc = gb_flat_mlp_alloc(f, err)))
        return rc;
    const int first_torso = ls < 0 ? 0 : 1;
    for (int i = 0; i < hidden && rc == 0; i++)
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->actor[i], first_torso + 2 * i, sqrt(2.0),
                                    err);
    /* core.cpp: ih orthogonal, each gate's block of hh orthogonal on its own, zero biases, an
     * LSTM's forget gate's input bias 1 */
    gb_mlp_train_layer block = {.in = F, .out = G * H};
    if (rc == 0)
        rc = gb_flat_mlp_init_at(f, &q->rng, &block, f->flat_at[ih], f->flat_at[ih + 1], 1.0,
                                 err);
    for (int g = 0; g < G && rc == 0; g++) {
        block = (gb_mlp_train_layer){.in = H, .out = H};
        rc = gb_flat_mlp_init_at(f, &q->rng, &block, f->flat_at[hh] + (int64_t)g * H * H,
                                 f->flat_at[hh + 1] + (int64_t)g * H, 1.0, err);
    }
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->critic[0], first_pi, 0.01, err);
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->critic[1], first_pi + 2, 1.0, err);
    if (rc)
        return rc;
    for (int j = 0; lstm && j < H; j++)
        f->p[f->flat_at[ih + 1] + H + j] = 1.0f;
    q->core = (gb_core_train){.kind = lstm ? GB_CORE_TRAIN_LSTM : GB_CORE_TRAIN_GRU,
                              .F = F,
                              .H = H,
                              .w_ih = f->p + f->flat_at[ih],
                              .b_ih = f->p + f->flat_at[ih + 1],
                              .w_hh = f->p + f->flat_at[hh],
                              .b_hh = f->p + f->flat_at[hh + 1],
                              .dw_ih = f->g + f->flat_at[ih],
                              .db_ih = f->g + f->flat_at[ih + 1],
                              .dw_hh = f->g + f->flat_at[hh],
                              .db_hh = f->g + f->flat_at[hh + 1]};
    gb_ppo_mlp_log_std(q, ls, mc);
    return open_parts(q, threads, err);
}

void gb_ppo_core_free(gb_ppo_mlp *q)
{
    for (int p = 0; q->part && p < gb_team_threads(q->team); p++) {
        gb_ppo_core_part *cp = &q->part[p];
        gb_flat_buf *bufs[] = {&cp->ws, &cp->grad, &cp->ws_a, &cp->ws_pi, &cp->ws_v};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            free(bufs[i]->p);
        gb_ppo_mlp_loss_free(&cp->loss);
        free(cp->actor);
    }
    free(q->part);
    q->part = NULL;
    gb_team_close(q->team);
    q->team = NULL;
    gb_flat_buf *bufs[] = {&q->keep, &q->first, &q->kmb,  &q->s0mb,  &q->sel,  &q->rows,
                           &q->y,    &q->yv,    &q->dy,   &q->dyv,   &q->dyv2, &q->dfeat,
                           &q->ws_v, &q->wt,    &q->vfirst};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        free(bufs[i]->p);
        bufs[i]->p = NULL;
    }
}

/* The weights' transposes, for every part's core (the weights change every step). */
static void transpose_core(gb_ppo_mlp *q)
{
    float *wt = q->wt.p;
    gb_core_train_transpose(&q->core, wt, wt + (q->part[0].core.wt_hh - q->part[0].core.wt_ih));
}

/* Part p of parts: the first of the n items (sequences, chunks) it takes */
static int share_at(int n, int p, int parts) { return n * p / parts; }

/* The parts a job of n items splits into: the team's threads, or fewer for fewer items */
static int parts_for(const gb_ppo_mlp *q, int n)
{
    const int t = gb_team_threads(q->team);
    return n < t ? n : t;
}

/* 0, or -1 when a part of the job just run ran out of memory */
static int parts_rc(const gb_ppo_mlp *q, int parts)
{
    for (int p = 0; p < parts; p++)
        if (q->part[p].rc)
            return -1;
    return 0;
}

/* The core's forward over B sequences of T rows, split over the parts (the values') */
typedef struct core_job {
    gb_ppo_mlp *q;
    int B, T, ld;
    const float *x, *s0, *keep;
    float *y;
} core_job;

static void core_part(void *arg, int p, int parts)
{
    const core_job *j = arg;
    gb_ppo_core_part *cp = &j->q->part[p];
    const gb_core_train *c = &cp->core;
    const int i0 = share_at(j->B, p, parts), n = share_at(j->B, p + 1, parts) - i0;
    const size_t r0 = (size_t)i0 * (size_t)j->T, F = (size_t)c->F, H = (size_t)c->H;
    float *ws = gb_flat_grow(&cp->ws, sizeof(float) * gb_core_train_floats(c, n, j->T));
    cp->rc = ws ? 0 : -1;
    if (!ws)
        return;
    /* part 0 alone may use libtorch's BLAS (one thread in it at a time), whichever thread runs it:
     * each part's floats are the same run after run */
    const int was = gb_mlp_train_tiles_only(p > 0);
    gb_core_train_forward(c, n, j->T, j->x + r0 * F, j->s0 ? j->s0 + (size_t)i0 * j->ld : NULL,
                          j->ld, j->keep + r0, ws, j->y + r0 * H);
    gb_mlp_train_tiles_only(was);
}

static int core_forward(gb_ppo_mlp *q, core_job *j)
{
    const int parts = parts_for(q, j->B);
    transpose_core(q);
    gb_team_run(q->team, parts, core_part, j);
    return parts_rc(q, parts);
}

/* The torso's features of n rows x (x itself without hidden layers), its workspace ws_a. */
static const float *torso(gb_ppo_mlp *q, const float *x, int n, int *ok)
{
    if (q->na == 0)
        return x;
    float *ws = gb_flat_grow(&q->ws_a, sizeof(float) * gb_mlp_train_floats(q->actor, q->na, n));
    *ok = ws != NULL;
    return ws ? gb_mlp_train_forward(q->actor, q->na, x, n, ws) : NULL;
}

/* The core's state floats a batch's state0 row holds, and their stride. */
static int state_ld(const gb_ppo_mlp *q, const gb_torch_batch *b)
{
    const int S = gb_core_train_state(&q->core);
    return b->state_stride > 0 ? (int)b->state_stride : S;
}

int gb_ppo_core_values(gb_ppo_mlp *q, const gb_torch_batch *b)
{
    const int B = (int)b->B, T = (int)b->T, T1 = T + 1, R = B * T1, H = q->core.H;
    const size_t in = (size_t)q->in;
    float *X = gb_flat_grow(&q->x, sizeof(float) * (size_t)R * in);
    float *values = gb_flat_grow(&q->values, sizeof(float) * (size_t)R);
    float *keep = gb_flat_grow(&q->keep, sizeof(float) * (size_t)R);
    float *y = gb_flat_grow(&q->y, sizeof(float) * (size_t)R * (size_t)H);
    float *wsv = gb_flat_grow(&q->ws_v, sizeof(float) * gb_mlp_train_floats(&q->critic[1], 1, R));
    if (!X || !values || !keep || !y || !wsv)
        return -1;
    gb_flat_mlp_obs_rows(b, in, X);
    /* row t > 0 follows a reset row (valid 0: the new episode starts at row t) with zeros */
    for (int c = 0; c < B; c++) {
        keep[c * T1] = 1.0f;
        for (int t = 1; t <= T; t++)
            keep[c * T1 + t] = !b->valid || b->valid[c * T + t - 1] ? 1.0f : 0.0f;
    }
    int ok = 1;
    const float *feat = torso(q, X, R, &ok);
    if (!ok)
        return -1;
    core_job j = {.q = q, .B = B, .T = T1, .ld = state_ld(q, b), .x = feat, .s0 = b->state0,
                  .keep = keep, .y = y};
    if (core_forward(q, &j))
        return -1;
    memcpy(values, gb_mlp_train_forward(&q->critic[1], 1, y, R, wsv), sizeof(float) * (size_t)R);
    return 0;
}

/* A minibatch's arrays, each part's rows of them its own: its chunks' sequences [i0, i1) are
 * rows [i0 T, i1 T), its valid steps [vfirst[i0], vfirst[i1]) */
typedef struct mb_job {
    gb_ppo_mlp *q;
    const gb_torch_batch *b;
    const gb_torch_ppo_coefs *c;
    const gb_ppo_loss_norm *norm;
    int len, T, S;
    const int *vfirst;
    const float *xb, *kmb, *s0;
    const int64_t *sel, *rows; /* a valid step's row in the minibatch, its index in the batch's */
    float *y, *yv, *dy, *dya, *dyc, *dfeat;
} mb_job;

/* Part p's heads on its nv valid steps from v0: their outputs from y, the loss, the gradients
 * for y into dy (its rows zeroed first). 0, or -1 (memory). */
static int part_heads(const mb_job *j, gb_ppo_core_part *cp, int v0, int nv, size_t r0, int LT)
{
    gb_ppo_mlp *q = j->q;
    const size_t H = (size_t)q->core.H;
    float *yv = j->yv + (size_t)v0 * H, *dya = j->dya + (size_t)v0 * H;
    float *dyc = j->dyc + (size_t)v0 * H;
    memset(j->dy + r0 * H, 0, sizeof(float) * (size_t)LT * H);
    if (nv == 0)
        return 0;
    for (int i = 0; i < nv; i++)
        memcpy(yv + (size_t)i * H, j->y + (size_t)j->sel[v0 + i] * H, sizeof(float) * H);
    const size_t fp = gb_mlp_train_floats(&cp->critic[0], 1, nv);
    const size_t fv = gb_mlp_train_floats(&cp->critic[1], 1, nv);
    float *wsp = gb_flat_grow(&cp->ws_pi, sizeof(float) * fp);
    float *wsv = gb_flat_grow(&cp->ws_v, sizeof(float) * fv);
    if (!wsp || !wsv)
        return -1;
    const float *pi = gb_mlp_train_forward(&cp->critic[0], 1, yv, nv, wsp);
    const float *v = gb_mlp_train_forward(&cp->critic[1], 1, yv, nv, wsv);
    float *dpi, *g_value;
    if (gb_ppo_mlp_rows_loss(q, &cp->loss, j->b, j->rows + v0, nv, pi, v, j->c, j->norm,
                             cp->dlog_std, &cp->sums, &dpi, &g_value))
        return -1;
    gb_mlp_train_backward(&cp->critic[0], 1, yv, nv, wsp, dpi, dya);
    gb_mlp_train_backward(&cp->critic[1], 1, yv, nv, wsv, g_value, dyc);
    for (int i = 0; i < nv; i++) {
        float *d = j->dy + (size_t)j->sel[v0 + i] * H;
        for (size_t k = 0; k < H; k++)
            d[k] = dya[(size_t)i * H + k] + dyc[(size_t)i * H + k];
    }
    return 0;
}

/* Part p of a minibatch: its chunks' torso, core, heads and loss, and the backward through them
 * into the part's gradients; cp->rc 0, or -1 (memory). */
static void mb_part(void *arg, int p, int parts)
{
    const mb_job *j = arg;
    gb_ppo_mlp *q = j->q;
    gb_ppo_core_part *cp = &q->part[p];
    const int i0 = share_at(j->len, p, parts), i1 = share_at(j->len, p + 1, parts), nc = i1 - i0;
    const int T = j->T, LT = nc * T, v0 = j->vfirst[i0], nv = j->vfirst[i1] - v0;
    const size_t r0 = (size_t)i0 * (size_t)T, F = (size_t)q->core.F, H = (size_t)q->core.H;
    const int was = gb_mlp_train_tiles_only(p > 0); /* as core_part */
    cp->rc = -1;
    memset(&cp->sums, 0, sizeof cp->sums);
    if (p > 0)
        memset(cp->grad.p, 0, sizeof(float) * (size_t)q->f.n);
    const float *x = j->xb + r0 * (size_t)q->in, *feat = x;
    float *wsa = q->na ? gb_flat_grow(&cp->ws_a, sizeof(float) *
                                                    gb_mlp_train_floats(cp->actor, q->na, LT))
                       : NULL;
    float *wsc = gb_flat_grow(&cp->ws, sizeof(float) * gb_core_train_floats(&cp->core, nc, T));
    if ((q->na && !wsa) || !wsc)
        goto out;
    if (q->na)
        feat = gb_mlp_train_forward(cp->actor, q->na, x, LT, wsa);
    gb_core_train_forward(&cp->core, nc, T, feat, j->s0 + (size_t)i0 * (size_t)j->S, j->S,
                          j->kmb + r0, wsc, j->y + r0 * H);
    if (part_heads(j, cp, v0, nv, r0, LT))
        goto out;
    float *dfeat = q->na ? j->dfeat + r0 * F : NULL;
    gb_core_train_backward(&cp->core, nc, T, feat, j->kmb + r0, wsc, j->dy + r0 * H, dfeat);
    if (q->na)
        gb_mlp_train_backward(cp->actor, q->na, x, LT, wsa, dfeat, NULL);
    cp->rc = 0;
out:
    gb_mlp_train_tiles_only(was);
}

/* One minibatch of the len chunks chunks[0..len): its steps' forward from their state0, the
 * loss at its valid steps and the gradients of every parameter in g (zeroed first), its chunks
 * split over the parts (each part's gradients summed into g after, in part order). Returns 1
 * with terms, 0 when the chunks have no valid step (no gradient step), -1 (memory). */
static int chunk_minibatch(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *chunks, int len,
                           const gb_torch_ppo_coefs *c, gb_torch_ppo_terms *terms)
{
    const int T = (int)b->T, T1 = T + 1, H = q->core.H, S = gb_core_train_state(&q->core);
    const int LT = len * T, ld = state_ld(q, b);
    const size_t in = (size_t)q->in, rows_n = (size_t)LT;
    const int64_t *first = q->first.p;
    float *xb = gb_flat_grow(&q->xb, sizeof(float) * rows_n * in);
    float *kmb = gb_flat_grow(&q->kmb, sizeof(float) * rows_n);
    float *s0 = gb_flat_grow(&q->s0mb, sizeof(float) * (size_t)len * (size_t)S);
    int64_t *sel = gb_flat_grow(&q->sel, sizeof(int64_t) * rows_n);
    int64_t *rows = gb_flat_grow(&q->rows, sizeof(int64_t) * rows_n);
    int *vfirst = gb_flat_grow(&q->vfirst, sizeof(int) * (size_t)(len + 1));
    if (!xb || !kmb || !s0 || !sel || !rows || !vfirst)
        return -1;
    int n = 0;
    for (int j = 0; j < len; j++) {
        const int64_t ch = chunks[j];
        memcpy(xb + (size_t)j * (size_t)T * in, (const float *)q->x.p + (size_t)(ch * T1) * in,
               sizeof(float) * (size_t)T * in);
        memcpy(kmb + (size_t)j * (size_t)T, (const float *)q->keep.p + ch * T1,
               sizeof(float) * (size_t)T);
        if (b->state0)
            memcpy(s0 + (size_t)j * (size_t)S, b->state0 + ch * ld, sizeof(float) * (size_t)S);
        else
            memset(s0 + (size_t)j * (size_t)S, 0, sizeof(float) * (size_t)S);
        vfirst[j] = n;
        int64_t row = first[ch];
        for (int t = 0; t < T; t++)
            if (!b->valid || b->valid[ch * T + t]) {
                sel[n] = (int64_t)j * T + t;
                rows[n++] = row++;
            }
    }
    vfirst[len] = n;
    if (n == 0)
        return 0;
    const size_t nv = (size_t)n;
    gb_ppo_loss_norm norm;
    mb_job job = {.q = q, .b = b, .c = c, .norm = &norm, .len = len, .T = T, .S = S,
                  .vfirst = vfirst, .xb = xb, .kmb = kmb, .s0 = s0, .sel = sel, .rows = rows,
                  .y = gb_flat_grow(&q->y, sizeof(float) * rows_n * (size_t)H),
                  .yv = gb_flat_grow(&q->yv, sizeof(float) * nv * (size_t)H),
                  .dy = gb_flat_grow(&q->dy, sizeof(float) * rows_n * (size_t)H),
                  .dya = gb_flat_grow(&q->dyv, sizeof(float) * nv * (size_t)H),
                  .dyc = gb_flat_grow(&q->dyv2, sizeof(float) * nv * (size_t)H),
                  .dfeat = gb_flat_grow(&q->dfeat, sizeof(float) * rows_n * (size_t)q->core.F)};
    if (!job.y || !job.yv || !job.dy || !job.dya || !job.dyc || !job.dfeat ||
        gb_ppo_mlp_loss_norm(q, rows, n, c, &norm))
        return -1;
    memset(q->f.g, 0, sizeof(float) * (size_t)q->f.n);
    transpose_core(q);
    const int parts = parts_for(q, len);
    gb_team_run(q->team, parts, mb_part, &job);
    if (parts_rc(q, parts))
        return -1;
    gb_torch_ppo_terms sums = q->part[0].sums;
    for (int p = 1; p < parts; p++) {
        const float *g = q->part[p].grad.p;
        gb_torch_ppo_terms_add(&sums, &q->part[p].sums);
        for (int64_t i = 0; i < q->f.n; i++)
            q->f.g[i] += g[i];
    }
    gb_ppo_mlp_loss_terms(&sums, &norm, c, terms);
    return 1;
}

int gb_ppo_core_epochs(gb_ppo_mlp *q, const gb_torch_batch *b, int64_t N,
                       const gb_torch_ppo_coefs *c, gb_torch_stats *st, gb_torch_ppo_terms *sum,
                       int64_t *count)
{
    const int64_t B = b->B, T = b->T;
    const gb_config_ppo *pc = &q->ac.ppo;
    /* ppo_seq_epochs: min(minibatches, B) minibatches of cpm chunks (the last may have fewer) */
    int64_t nmb = pc->minibatches < B ? pc->minibatches : B;
    nmb = nmb > 1 ? nmb : 1;
    const int64_t cpm = (B + nmb - 1) / nmb, steps = N > 0 ? (B + cpm - 1) / cpm : 0;
    int64_t *perm = gb_flat_grow(&q->perm, sizeof(int64_t) * (size_t)B);
    int64_t *first = gb_flat_grow(&q->first, sizeof(int64_t) * (size_t)(B + 1));
    if (!perm || !first)
        return -1;
    first[0] = 0; /* chunk c's valid steps are the batch's valid steps first[c].. */
    for (int64_t ch = 0; ch < B; ch++) {
        int64_t nv = 0;
        for (int64_t t = 0; t < T; t++)
            nv += !b->valid || b->valid[ch * T + t];
        first[ch + 1] = first[ch] + nv;
    }
    for (int64_t e = 0; steps > 0 && e < pc->epochs; e++) {
        gb_ppo_mlp_shuffle(q, perm, B);
        for (int64_t k = 0; k < steps; k++) {
            const int64_t start = k * cpm, len = cpm < B - start ? cpm : B - start;
            gb_torch_ppo_terms terms;
            const int rc = chunk_minibatch(q, b, perm + start, (int)len, c, &terms);
            if (rc < 0)
                return -1;
            if (rc == 0)
                continue;
            gb_torch_ppo_terms_add(sum, &terms);
            st->loss = terms.total;
            (*count)++;
            st->grad_norm = gb_flat_mlp_step(&q->f, st->lr, q->ac.max_grad_norm, 1e-5);
        }
    }
    return 0;
}
