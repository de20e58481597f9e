/* workers/roles/flat_mlp.c: a network of Linear layers over flat blocks for the learners
 * without libtorch (flat_mlp.h). */
#include "workers/roles/flat_mlp.h"

#include "workers/torch/flat_kernels.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/targets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *gb_flat_grow(gb_flat_buf *b, size_t bytes)
{
    if (bytes > b->cap) {
        void *q = realloc(b->p, bytes);
        if (!q)
            return NULL;
        b->p = q;
        b->cap = bytes;
    }
    return b->p;
}

const char *gb_flat_mlp_model_refusal(const gb_config_model *mc)
{
    if (mc->type != GB_MODEL_MLP)
        return "policy.model.type is not mlp";
    if (mc->core != GB_CORE_NONE && mc->core != GB_CORE_LSTM && mc->core != GB_CORE_GRU)
        return "policy.model.core is neither lstm nor gru";
    if (mc->core != GB_CORE_NONE && (mc->core_size < 1 || mc->core_size > 4096))
        return "policy.model.core_size";
    if (mc->layer_norm)
        return "policy.model.layer_norm";
    if (mc->activation != GB_ACT_TANH && mc->activation != GB_ACT_RELU)
        return "policy.model.activation is neither tanh nor relu";
    return NULL;
}

int64_t gb_flat_mlp_features(const gb_torch_space *sp)
{
    int64_t in = 1;
    for (int i = 0; i < sp->obs_ndim; i++)
        in *= sp->obs_shape[i];
    return in;
}

int gb_flat_mlp_supported(const gb_config *cfg, const gb_torch_space *sp, int core,
                          gb_error *err)
{
    const gb_config_model *mc = &cfg->policy.model;
    const char *why = NULL, *model = gb_flat_mlp_model_refusal(mc);
    const int64_t in = gb_flat_mlp_features(sp);
    if (cfg->trainer.kernels != GB_KERNELS_GEARBOX)
        why = "trainer.kernels is libtorch";
    else if (cfg->trainer.device != GB_DEVICE_CPU)
        why = "trainer.device is cuda";
    else if (model)
        why = model;
    else if (!core && mc->core != GB_CORE_NONE)
        why = "policy.model.core";
    else if (mc->normalize_obs)
        why = "policy.model.normalize_obs";
    else if (cfg->trainer.algorithm.reward_scale)
        why = "trainer.algorithm.reward_scale";
    else if (sp->obs_dtype != GB_DTYPE_FLOAT32 || sp->obs_ndim < 1)
        why = "observations that are not float32";
    else if (sp->discrete ? sp->n_actions < 1 || sp->n_actions > (1 << 24)
                          : sp->action_dim < 1 || sp->action_dim > GB_TORCH_MAX_ACTION_DIM)
        why = "its action space";
    else if (in < 1 || in > (1 << 24))
        why = "its observations' size";
    for (int i = 0; !why && i < mc->hidden.n; i++)
        if (mc->hidden.v[i] < 1 || mc->hidden.v[i] > (1 << 16))
            why = "policy.model.hidden";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why) : 0;
}

int gb_flat_mlp_check_batch(const gb_torch_batch *b, int need_logp, gb_error *err)
{
    if (b->B < 1 || b->T < 1)
        return gb_error_set(err, GB_EINVAL, "train: batch of %lld x %lld steps", (long long)b->B,
                            (long long)b->T);
    if (!b->obs || !b->next_obs || !b->action || !b->reward || !b->terminated ||
        !b->truncated || (need_logp && !b->logp))
        return gb_error_set(err, GB_EINVAL, "train: obs, next_obs, action, reward, terminated%s "
                            "and %s are required", need_logp ? ", truncated" : "",
                            need_logp ? "logp" : "truncated");
    if (b->obs_on_device)
        return gb_error_set(err, GB_EINVAL, "train: the batch's observations are in device "
                            "memory, the learner is on the cpu");
    return 0;
}

void gb_flat_mlp_obs_rows(const gb_torch_batch *b, size_t in, float *X)
{
    const int64_t B = b->B, T = b->T;
    for (int64_t bi = 0; bi < B; bi++) {
        memcpy(X + (size_t)(bi * (T + 1)) * in, (const float *)b->obs + (size_t)(bi * T) * in,
               sizeof(float) * (size_t)T * in);
        memcpy(X + (size_t)(bi * (T + 1) + T) * in, (const float *)b->next_obs + (size_t)bi * in,
               sizeof(float) * in);
    }
}

int64_t gb_flat_steps_make(gb_flat_steps *t, const gb_torch_batch *b, size_t in, int64_t n_step,
                           double gamma)
{
    const int64_t B = b->B, T = b->T, R = B * (T + 1), BT = B * T;
    float *X = gb_flat_grow(&t->x, sizeof(float) * (size_t)R * in);
    float *G = gb_flat_grow(&t->G, sizeof(float) * (size_t)BT);
    float *disc = gb_flat_grow(&t->disc, sizeof(float) * (size_t)BT);
    int64_t *boot = gb_flat_grow(&t->boot, sizeof(int64_t) * (size_t)BT);
    int64_t *step = gb_flat_grow(&t->step, sizeof(int64_t) * (size_t)BT);
    int64_t *row = gb_flat_grow(&t->row, sizeof(int64_t) * (size_t)BT);
    int64_t *brow = gb_flat_grow(&t->brow, sizeof(int64_t) * (size_t)BT);
    if (!X || !G || !disc || !boot || !step || !row || !brow)
        return -1;
    gb_flat_mlp_obs_rows(b, in, X);
    gb_torch_nstep(B, T, n_step, gamma, b->reward, b->terminated, b->truncated, b->valid, G,
                   disc, boot);
    return gb_torch_valid_rows(B, T, b->valid, boot, step, row, brow);
}

void gb_flat_steps_free(gb_flat_steps *t)
{
    gb_flat_buf *bufs[] = {&t->x, &t->G, &t->disc, &t->boot, &t->step, &t->row, &t->brow};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]->p);
    memset(t, 0, sizeof *t);
}

int gb_flat_mlp_reserve(gb_flat_mlp *f, int entries, gb_error *err)
{
    f->layout = calloc((size_t)entries, sizeof *f->layout);
    f->flat_at = calloc((size_t)entries, sizeof *f->flat_at);
    if (!f->layout || !f->flat_at)
        return gb_error_set(err, GB_ENOMEM, "learner: out of memory");
    return 0;
}

int gb_flat_mlp_entry(gb_flat_mlp *f, const char *name, int64_t d0, int64_t d1)
{
    gb_param_entry_append(&f->layout[f->nlayout], &f->total, GB_TORCH_PARAM_ALIGN, name,
                          GB_DTYPE_FLOAT32, d0, d1);
    f->flat_at[f->nlayout] = f->n;
    f->n += d0 * (d1 > 0 ? d1 : 1);
    return f->nlayout++;
}

void gb_flat_mlp_linear(gb_flat_mlp *f, const char *prefix, gb_mlp_train_layer *chain, int *nl,
                        int in, int out, int act)
{
    char name[GB_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.weight", prefix);
    gb_flat_mlp_entry(f, name, out, in);
    snprintf(name, sizeof name, "%s.bias", prefix);
    gb_flat_mlp_entry(f, name, out, 0);
    chain[(*nl)++] = (gb_mlp_train_layer){.in = in, .out = out, .act = act};
}

int gb_flat_mlp_torso(gb_flat_mlp *f, const gb_config_model *mc, int in, const char *name,
                      gb_mlp_train_layer *chain, int *nl)
{
    int w = in;
    const int act = mc->activation == GB_ACT_RELU ? GB_MLP_ACT_RELU : GB_MLP_ACT_TANH;
    for (int i = 0; i < mc->hidden.n; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.%d", name, 2 * i);
        gb_flat_mlp_linear(f, prefix, chain, nl, w, (int)mc->hidden.v[i], act);
        w = (int)mc->hidden.v[i];
    }
    return w;
}

int64_t gb_flat_mlp_extra(gb_flat_mlp *f, int64_t count)
{
    const int64_t at = f->n;
    f->n += count;
    return at;
}

int gb_flat_mlp_alloc(gb_flat_mlp *f, gb_error *err)
{
    if (!(f->p = calloc((size_t)f->n * 4, sizeof(float))))
        return gb_error_set(err, GB_ENOMEM, "learner: out of memory for %lld parameters",
                            (long long)f->n);
    f->g = f->p + f->n;
    f->m = f->g + f->n;
    f->v = f->m + f->n;
    return 0;
}

/* torch::nn::init::orthogonal_ of a [rows, cols] weight times gain: the Q of a Gaussian
 * matrix's QR with r's diagonal positive (Gram-Schmidt's, twice over for accuracy), transposed
 * when rows < cols. a: [rows * cols] doubles of scratch. */
static void orthogonal(gb_rng *r, float *w, int rows, int cols, double gain, double *a)
{
    const int big = rows > cols ? rows : cols, small = rows < cols ? rows : cols;
    for (int i = 0; i < big * small; i++)
        a[i] = gb_rng_normal(r);
    for (int j = 0; j < small; j++) {
        double *aj = a + (size_t)j * big;
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < j; k++) {
                const double *ak = a + (size_t)k * big;
                double d = 0.0;
                for (int i = 0; i < big; i++)
                    d += aj[i] * ak[i];
                for (int i = 0; i < big; i++)
                    aj[i] -= d * ak[i];
            }
        double nn = 0.0;
        for (int i = 0; i < big; i++)
            nn += aj[i] * aj[i];
        nn = nn > 0.0 ? 1.0 / sqrt(nn) : 0.0;
        for (int i = 0; i < big; i++)
            aj[i] *= nn;
    }
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++)
            w[(size_t)i * cols + c] =
                (float)(gain * (rows >= cols ? a[(size_t)c * big + i] : a[(size_t)i * big + c]));
}

int gb_flat_mlp_init_layer(gb_flat_mlp *f, gb_rng *r, gb_mlp_train_layer *l, int e, double gain,
                           gb_error *err)
{
    return gb_flat_mlp_init_at(f, r, l, f->flat_at[e], f->flat_at[e + 1], gain, err);
}

int gb_flat_mlp_init_at(gb_flat_mlp *f, gb_rng *r, gb_mlp_train_layer *l, int64_t w, int64_t bb,
                        double gain, gb_error *err)
{
    l->w = f->p + w;
    l->b = f->p + bb;
    l->dw = f->g + w;
    l->db = f->g + bb;
    double *a = malloc(sizeof *a * (size_t)l->out * (size_t)l->in);
    if (!a)
        return gb_error_set(err, GB_ENOMEM, "learner: out of memory");
    orthogonal(r, f->p + w, l->out, l->in, gain, a);
    free(a);
    memset(f->p + bb, 0, sizeof(float) * (size_t)l->out);
    return 0;
}

double gb_flat_mlp_step(gb_flat_mlp *f, double lr, double max_norm, double eps)
{
    f->adam_steps++;
    return gb_flat_mlp_step_part(f, 0, f->n, f->adam_steps, lr, max_norm, eps);
}

double gb_flat_mlp_step_part(gb_flat_mlp *f, int64_t at, int64_t count, int64_t step, double lr,
                             double max_norm, double eps)
{
    const size_t n = (size_t)count;
    float *p = f->p + at, *g = f->g + at;
    const double norm = sqrt(gb_flat_sumsq(g, n));
    const double coef = max_norm / (norm + 1e-6);
    if (max_norm > 0 && coef < 1.0)
        gb_flat_scale(g, n, (float)coef);
    const double bc1 = 1.0 - pow(0.9, (double)step);
    const double bc2 = 1.0 - pow(0.999, (double)step);
    gb_flat_adam(p, g, f->m + at, f->v + at, n, 0.9f, 0.999f, (float)(lr / bc1),
                 (float)sqrt(bc2), (float)eps);
    return norm;
}

int gb_flat_mlp_export(const gb_flat_mlp *f, void *out, size_t cap, uint64_t *version,
                       gb_error *err)
{
    if (cap < f->total)
        return gb_error_set(err, GB_EINVAL, "export: buffer of %zu bytes, the parameters take "
                            "%llu", cap, (unsigned long long)f->total);
    memset(out, 0, f->total);
    for (int i = 0; i < f->nlayout; i++) { /* (floats past the layout's are not exported) */
        size_t count = 1;
        for (int d = 0; d < f->layout[i].rank; d++)
            count *= (size_t)f->layout[i].shape[d];
        memcpy((char *)out + f->layout[i].offset, f->p + f->flat_at[i], sizeof(float) * count);
    }
    if (version)
        *version = f->version;
    return 0;
}

void gb_flat_mlp_set_progress(gb_flat_mlp *f, double progress)
{
    f->progress = progress < 0 ? 0 : progress > 1 ? 1 : progress;
}

void gb_flat_mlp_free(gb_flat_mlp *f)
{
    free(f->p);
    free(f->layout);
    free(f->flat_at);
    memset(f, 0, sizeof *f);
}
