/* workers/roles/ppo_core.c: PPO's learner without libtorch with a recurrent core
 * (ppo_mlp_internal.h): network.cpp's ActorCritic with policy.model.core lstm or gru (torso ->
 * core -> pi and v, torso and core shared), its values over whole chunks from their state0 and
 * ppo_seq.cpp's epochs over minibatches of whole chunks, the gradient through each chunk
 * (truncated backpropagation through time at its boundaries); the core's arithmetic is
 * core_train.h's. */
#include "workers/roles/ppo_mlp_internal.h"

#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The parts (threads of them) and their team: each part's core the learner's weights, their
 * transposes in q->wt, its gradients f.g's (part 0) or its own, laid out as f.g's from core.ih's
 * weight to core.hh's bias. */
static int open_parts(gb_ppo_mlp *q, int ih, int threads, gb_error *err)
{
    gb_flat_mlp *f = &q->f;
    const gb_core_train *c = &q->core;
    const int GH = (c->kind == GB_CORE_TRAIN_LSTM ? 4 : 3) * c->H;
    const size_t at = (size_t)f->flat_at[ih], span = (size_t)f->flat_at[ih + 3] + GH - at;
    q->nparts = threads > 1 ? threads : 1;
    q->part = calloc((size_t)q->nparts, sizeof *q->part);
    float *wt = gb_flat_grow(&q->wt, sizeof(float) * (size_t)GH * (size_t)(c->F + c->H));
    if (!q->part || !wt)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    for (int p = 0; p < q->nparts; p++) {
        gb_ppo_core_part *cp = &q->part[p];
        cp->core = *c;
        cp->core.wt_ih = wt;
        cp->core.wt_hh = wt + (size_t)GH * (size_t)c->F;
        float *g = p == 0 ? f->g + at : gb_flat_grow(&cp->grad, sizeof(float) * span);
        if (!g)
            return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
        cp->core.dw_ih = g + (c->dw_ih - (f->g + at));
        cp->core.db_ih = g + (c->db_ih - (f->g + at));
        cp->core.dw_hh = g + (c->dw_hh - (f->g + at));
        cp->core.db_hh = g + (c->db_hh - (f->g + at));
    }
    return q->nparts > 1 ? gb_team_open(q->nparts, &q->team, err) : 0;
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
    return open_parts(q, ih, threads, err);
}

void gb_ppo_core_free(gb_ppo_mlp *q)
{
    gb_team_close(q->team);
    q->team = NULL;
    for (int p = 0; q->part && p < q->nparts; p++) {
        free(q->part[p].ws.p);
        free(q->part[p].grad.p);
    }
    free(q->part);
    q->part = NULL;
    gb_flat_buf *bufs[] = {&q->keep, &q->first, &q->kmb, &q->s0mb, &q->sel, &q->rows, &q->y,
                           &q->yv,   &q->dy,    &q->dyv, &q->dyv2, &q->dfeat, &q->ws_pi,
                           &q->ws_v, &q->wt};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        free(bufs[i]->p);
        bufs[i]->p = NULL;
    }
}

/* The core's forward (dy NULL) or backward over B sequences of T rows, split over the parts */
typedef struct core_job {
    gb_ppo_mlp *q;
    int B, T, ld;
    const float *x, *s0, *keep, *dy;
    float *y, *dx;
} core_job;

static void core_part(void *arg, int p, int parts)
{
    const core_job *j = arg;
    gb_ppo_core_part *cp = &j->q->part[p];
    const gb_core_train *c = &cp->core;
    const int i0 = j->B * p / parts, n = j->B * (p + 1) / parts - i0;
    const size_t r0 = (size_t)i0 * (size_t)j->T, F = (size_t)c->F, H = (size_t)c->H;
    /* part 0 alone may use libtorch's BLAS (one thread in it at a time), whichever thread runs it:
     * each part's floats are the same run after run */
    const int was = gb_mlp_train_tiles_only(p > 0);
    if (!j->dy) {
        gb_core_train_forward(c, n, j->T, j->x + r0 * F, j->s0 ? j->s0 + (size_t)i0 * j->ld : NULL,
                              j->ld, j->keep + r0, cp->ws.p, j->y + r0 * H);
    } else {
        if (p > 0)
            memset(cp->grad.p, 0, cp->grad.cap);
        gb_core_train_backward(c, n, j->T, j->x + r0 * F, j->keep + r0, cp->ws.p, j->dy + r0 * H,
                               j->dx ? j->dx + r0 * F : NULL);
    }
    gb_mlp_train_tiles_only(was);
}

/* Runs j over the parts (no more than its sequences): a forward first takes the weights'
 * transposes and sizes the workspaces; a backward sums the parts' gradients into f.g. */
static int core_run(gb_ppo_mlp *q, core_job *j)
{
    const int parts = j->B < q->nparts ? j->B : q->nparts;
    if (!j->dy) {
        gb_core_train_transpose(&q->core, (float *)q->part[0].core.wt_ih,
                                (float *)q->part[0].core.wt_hh);
        for (int p = 0; p < parts; p++) {
            const int n = j->B * (p + 1) / parts - j->B * p / parts;
            gb_ppo_core_part *cp = &q->part[p];
            if (!gb_flat_grow(&cp->ws, sizeof(float) * gb_core_train_floats(&cp->core, n, j->T)))
                return -1;
        }
    }
    gb_team_run(q->team, parts, core_part, j);
    if (j->dy) {
        float *g = q->part[0].core.dw_ih; /* f.g from core.ih's weight, as each grad */
        for (int p = 1; p < parts; p++) {
            const float *gp = q->part[p].grad.p;
            for (size_t i = 0; i < q->part[p].grad.cap / sizeof(float); i++)
                g[i] += gp[i];
        }
    }
    return 0;
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
    if (core_run(q, &j))
        return -1;
    memcpy(values, gb_mlp_train_forward(&q->critic[1], 1, y, R, wsv), sizeof(float) * (size_t)R);
    return 0;
}

/* One minibatch of the len chunks chunks[0..len): its steps' forward from their state0, the
 * loss at its valid steps and the gradients of every parameter in g (zeroed first). Returns 1
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
    if (!xb || !kmb || !s0 || !sel || !rows)
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
        int64_t row = first[ch];
        for (int t = 0; t < T; t++)
            if (!b->valid || b->valid[ch * T + t]) {
                sel[n] = (int64_t)j * T + t;
                rows[n++] = row++;
            }
    }
    if (n == 0)
        return 0;
    const size_t nv = (size_t)n;
    float *y = gb_flat_grow(&q->y, sizeof(float) * rows_n * (size_t)H);
    float *yv = gb_flat_grow(&q->yv, sizeof(float) * nv * (size_t)H);
    float *dy = gb_flat_grow(&q->dy, sizeof(float) * rows_n * (size_t)H);
    float *dya = gb_flat_grow(&q->dyv, sizeof(float) * nv * (size_t)H);
    float *dyc = gb_flat_grow(&q->dyv2, sizeof(float) * nv * (size_t)H);
    float *dfeat = gb_flat_grow(&q->dfeat, sizeof(float) * rows_n * (size_t)q->core.F);
    float *wsp = gb_flat_grow(&q->ws_pi, sizeof(float) * gb_mlp_train_floats(&q->critic[0], 1, n));
    float *wsv = gb_flat_grow(&q->ws_v, sizeof(float) * gb_mlp_train_floats(&q->critic[1], 1, n));
    if (!y || !yv || !dy || !dya || !dyc || !dfeat || !wsp || !wsv)
        return -1;
    memset(q->f.g, 0, sizeof(float) * (size_t)q->f.n);
    int ok = 1;
    const float *feat = torso(q, xb, LT, &ok);
    if (!ok)
        return -1;
    core_job j = {.q = q, .B = len, .T = T, .ld = S, .x = feat, .s0 = s0, .keep = kmb, .y = y};
    if (core_run(q, &j))
        return -1;
    for (size_t i = 0; i < nv; i++)
        memcpy(yv + i * (size_t)H, y + (size_t)sel[i] * (size_t)H, sizeof(float) * (size_t)H);
    const float *pi = gb_mlp_train_forward(&q->critic[0], 1, yv, n, wsp);
    const float *v = gb_mlp_train_forward(&q->critic[1], 1, yv, n, wsv);
    float *dpi, *g_value;
    if (gb_ppo_mlp_heads_loss(q, b, rows, n, pi, v, c, terms, &dpi, &g_value))
        return -1;
    gb_mlp_train_backward(&q->critic[0], 1, yv, n, wsp, dpi, dya);
    gb_mlp_train_backward(&q->critic[1], 1, yv, n, wsv, g_value, dyc);
    memset(dy, 0, sizeof(float) * rows_n * (size_t)H);
    for (size_t i = 0; i < nv; i++) {
        float *d = dy + (size_t)sel[i] * (size_t)H;
        for (int j = 0; j < H; j++)
            d[j] = dya[i * (size_t)H + (size_t)j] + dyc[i * (size_t)H + (size_t)j];
    }
    j.dy = dy;
    j.dx = q->na ? dfeat : NULL;
    if (core_run(q, &j))
        return -1;
    if (q->na)
        gb_mlp_train_backward(q->actor, q->na, xb, LT, q->ws_a.p, dfeat, NULL);
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
