/* workers/torch/core_train.c: a recurrent core's forward and backward through time over plain
 * arrays (core_train.h), as core_seq.cpp's autograd node: the same loops, mlp_train.h's products
 * for libtorch's. */
#include "workers/torch/core_train.h"

#include "workers/torch/core_gates.h"
#include "workers/torch/mlp_train.h"

#include <string.h>

/* The workspace's arrays for B sequences of T rows (every one, whichever the core). */
typedef struct ws_map {
    float *wiT, *whT;        /* [F][G*H], [H][G*H]: the weights transposed, for row products */
    float *xp, *gates, *gh;  /* [BT][G*H]: input projections, gates (GRU: r z n), h W_hh^T + b */
    float *h_in, *c_in, *tc; /* [BT][H]: state entering (after the reset), LSTM's c and tanh c' */
    float *dg, *dgh;         /* [BT][G*H]: LSTM's gates' gradient / GRU's dx and dgh */
    float *s, *ds, *dhin;    /* [B][S], [B][S], [B][H] */
    float *tw;               /* [max(F, H)][G*H]: a weight's gradient transposed */
} ws_map;

static int gates_of(const gb_core_train *c) { return c->kind == GB_CORE_TRAIN_LSTM ? 4 : 3; }

int gb_core_train_state(const gb_core_train *c)
{
    return c->kind == GB_CORE_TRAIN_LSTM ? 2 * c->H : c->H;
}

static size_t map_ws(const gb_core_train *c, int B, int T, float *ws, ws_map *m)
{
    const size_t GH = (size_t)gates_of(c) * (size_t)c->H, H = (size_t)c->H, F = (size_t)c->F;
    const size_t BT = (size_t)B * (size_t)T, S = (size_t)gb_core_train_state(c);
    const size_t wide = F > H ? F : H;
    size_t at = 0;
    float **arrays[] = {&m->wiT, &m->whT, &m->xp,  &m->gates, &m->gh, &m->h_in, &m->c_in,
                        &m->tc,  &m->dg,  &m->dgh, &m->s,     &m->ds, &m->dhin, &m->tw};
    const size_t sizes[] = {F * GH, H * GH, BT * GH, BT * GH, BT * GH, BT * H, BT * H,
                            BT * H, BT * GH, BT * GH, (size_t)B * S, (size_t)B * S,
                            (size_t)B * H, wide * GH};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (ws)
            *arrays[i] = ws + at;
        at += (sizes[i] + 15) & ~(size_t)15; /* each array 64-byte aligned within ws */
    }
    return at;
}

size_t gb_core_train_floats(const gb_core_train *c, int B, int T)
{
    ws_map m;
    return map_ws(c, B, T, NULL, &m) + 16;
}

/* ws aligned to 64 bytes (gb_core_train_floats counts the 16 floats this may skip) */
static float *aligned(float *ws)
{
    const size_t mis = ((size_t)ws & 63) / sizeof(float);
    return mis ? ws + (16 - mis) : ws;
}

/* t[j][i] = w[i][j] for w [rows][cols] */
static void transpose(const float *w, int rows, int cols, float *t)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            t[(size_t)j * (size_t)rows + (size_t)i] = w[(size_t)i * (size_t)cols + (size_t)j];
}

void gb_core_train_transpose(const gb_core_train *c, float *wt_ih, float *wt_hh)
{
    const int GH = gates_of(c) * c->H;
    transpose(c->w_ih, GH, c->F, wt_ih);
    transpose(c->w_hh, GH, c->H, wt_hh);
}

static float keep_of(const float *keep, size_t r) { return keep ? keep[r] : 1.0f; }

void gb_core_train_forward(const gb_core_train *c, int B, int T, const float *x, const float *s0,
                           int ld, const float *keep, float *ws, float *y)
{
    ws_map m;
    map_ws(c, B, T, aligned(ws), &m);
    const int H = c->H, GH = gates_of(c) * H, S = gb_core_train_state(c), BT = B * T;
    const int lstm = c->kind == GB_CORE_TRAIN_LSTM;
    const float *wiT = c->wt_ih, *whT = c->wt_hh;
    if (!wiT || !whT) {
        gb_core_train_transpose(c, m.wiT, m.whT);
        wiT = m.wiT;
        whT = m.whT;
    }
    gb_mlp_train_gemm(BT, GH, c->F, x, c->F, wiT, GH, m.xp, GH, 0);
    for (int r = 0; r < BT; r++)
        for (int k = 0; k < GH; k++)
            m.xp[(size_t)r * (size_t)GH + (size_t)k] += c->b_ih[k];
    for (int i = 0; i < B; i++) {
        if (s0)
            memcpy(m.s + (size_t)i * (size_t)S, s0 + (size_t)i * (size_t)ld,
                   sizeof(float) * (size_t)S);
        else
            memset(m.s + (size_t)i * (size_t)S, 0, sizeof(float) * (size_t)S);
    }
    float *out = lstm ? m.gates : m.gh; /* the step's recurrent product lands here */
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < B; i++) {
            const size_t r = (size_t)i * (size_t)T + (size_t)t;
            const float k = keep_of(keep, r), *s = m.s + (size_t)i * (size_t)S;
            float *hi = m.h_in + r * (size_t)H, *ci = m.c_in + r * (size_t)H;
            for (int j = 0; j < H; j++)
                hi[j] = s[j] * k;
            for (int j = 0; lstm && j < H; j++)
                ci[j] = s[H + j] * k;
        }
        gb_mlp_train_gemm(B, GH, H, m.h_in + (size_t)t * (size_t)H, T * H, whT, GH,
                          out + (size_t)t * (size_t)GH, T * GH, 0);
        for (int i = 0; i < B; i++) {
            const size_t r = (size_t)i * (size_t)T + (size_t)t;
            float *s = m.s + (size_t)i * (size_t)S, *h2 = y + r * (size_t)H;
            if (lstm)
                gb_lstm_forward_row(H, m.xp + r * (size_t)GH, c->b_hh, m.gates + r * (size_t)GH,
                                    m.c_in + r * (size_t)H, s + H, m.tc + r * (size_t)H, h2);
            else
                gb_gru_forward_row(H, m.xp + r * (size_t)GH, c->b_hh, m.gh + r * (size_t)GH,
                                   m.h_in + r * (size_t)H, m.gates + r * (size_t)GH, h2);
            memcpy(s, h2, sizeof(float) * (size_t)H);
        }
    }
}

void gb_core_train_last_state(const gb_core_train *c, int B, int T, const float *ws, float *s,
                              int ld)
{
    ws_map m;
    map_ws(c, B, T, aligned((float *)ws), &m);
    const int S = gb_core_train_state(c);
    for (int i = 0; i < B; i++)
        memcpy(s + (size_t)i * (size_t)ld, m.s + (size_t)i * (size_t)S, sizeof(float) * (size_t)S);
}

/* w's gradient [G*H][cols] += tw^T (tw [cols][G*H]); its bias's += the rows' sum of d */
static void add_grads(const float *tw, int GH, int cols, float *dw, const float *d, int rows,
                      float *db)
{
    for (int g = 0; g < GH; g++)
        for (int j = 0; j < cols; j++)
            dw[(size_t)g * (size_t)cols + (size_t)j] += tw[(size_t)j * (size_t)GH + (size_t)g];
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < GH; g++)
            db[g] += d[(size_t)r * (size_t)GH + (size_t)g];
}

void gb_core_train_backward(const gb_core_train *c, int B, int T, const float *x,
                            const float *keep, float *ws, const float *dy, float *dx)
{
    ws_map m;
    map_ws(c, B, T, aligned(ws), &m);
    const int H = c->H, GH = gates_of(c) * H, S = gb_core_train_state(c), BT = B * T;
    const int lstm = c->kind == GB_CORE_TRAIN_LSTM;
    /* LSTM: dg the gates' pre-activations' gradient, which is also the input projection's and
     * the recurrent product's; GRU: dg the input projection's, dgh the recurrent product's */
    float *dxp = m.dg, *drec = lstm ? m.dg : m.dgh;
    memset(m.ds, 0, sizeof(float) * (size_t)B * (size_t)S);
    for (int t = T - 1; t >= 0; t--) {
        for (int i = 0; i < B; i++) {
            const size_t r = (size_t)i * (size_t)T + (size_t)t;
            float *ds = m.ds + (size_t)i * (size_t)S;
            if (lstm)
                gb_lstm_backward_row(H, m.gates + r * (size_t)GH, m.tc + r * (size_t)H,
                                     m.c_in + r * (size_t)H, dy + r * (size_t)H, ds, ds + H,
                                     keep_of(keep, r), m.dg + r * (size_t)GH);
            else
                gb_gru_backward_row(H, m.gates + r * (size_t)GH, m.gh + r * (size_t)GH,
                                    m.h_in + r * (size_t)H, dy + r * (size_t)H, ds,
                                    m.dg + r * (size_t)GH, m.dgh + r * (size_t)GH);
        }
        gb_mlp_train_gemm(B, H, GH, drec + (size_t)t * (size_t)GH, T * GH, c->w_hh, H, m.dhin, H,
                          0);
        for (int i = 0; i < B; i++) {
            const float k = keep_of(keep, (size_t)i * (size_t)T + (size_t)t);
            float *ds = m.ds + (size_t)i * (size_t)S;
            const float *dh = m.dhin + (size_t)i * (size_t)H;
            for (int j = 0; j < H; j++) /* LSTM: the row's function set c's part already */
                ds[j] = lstm ? dh[j] * k : (ds[j] + dh[j]) * k;
        }
    }
    gb_mlp_train_gemm_tn(H, GH, BT, m.h_in, H, drec, GH, m.tw, GH, 0);
    add_grads(m.tw, GH, H, c->dw_hh, drec, BT, c->db_hh);
    gb_mlp_train_gemm_tn(c->F, GH, BT, x, c->F, dxp, GH, m.tw, GH, 0);
    add_grads(m.tw, GH, c->F, c->dw_ih, dxp, BT, c->db_ih);
    if (dx)
        gb_mlp_train_gemm(BT, c->F, GH, dxp, GH, c->w_ih, c->F, dx, c->F, 0);
}
