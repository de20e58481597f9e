/* replay/gpu.c: the replay's GPU path: the device-mirror selectors (weighted, uniform,
 * top-k) and zero-copy collection (see replay/gpu.h). Built on the public replay API and
 * kernels/kernels.h only. */
#include "replay/gpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"

/* ---- selectors ------------------------------------------------------------------------------ */

/* What the GPU selectors share: a device mirror of one float per slot, kept in step by the
 * scatter kernel from changes queued on the host. */
typedef struct gpu_mirror {
    gb_kernels_ctx *ctx;
    gb_selector_kind kind; /* WEIGHTED, UNIFORM (the mirror holds 1 per item) or TOPK */
    double alpha;
    int64_t capacity;
    float *mirror; /* device (capacity): priority of committed items, 0 elsewhere */
    /* Changes queued since the last flush (pinned host) and their device copies. */
    int64_t *pend_idx, *d_pend_idx;
    float *pend_val, *d_pend_val;
    int64_t npend;
    /* Selection outputs: device and pinned host, out_cap entries. */
    int64_t *d_idx, *h_idx;
    float *d_prob, *h_prob;
    int64_t out_cap;
    int failed; /* a callback failed: selections return nothing until the selector is recreated */
} gpu_mirror;

static void gpu_mirror_destroy(void *self)
{
    gpu_mirror *w = self;
    if (!w)
        return;
    gb_kernels_ctx_destroy(w->ctx); /* waits for the stream before the buffers go */
    gb_kernels_device_free(w->mirror);
    gb_kernels_device_free(w->d_pend_idx);
    gb_kernels_device_free(w->d_pend_val);
    gb_kernels_device_free(w->d_idx);
    gb_kernels_device_free(w->d_prob);
    gb_kernels_host_free(w->pend_idx);
    gb_kernels_host_free(w->pend_val);
    gb_kernels_host_free(w->h_idx);
    gb_kernels_host_free(w->h_prob);
    free(w);
}

static int gpu_mirror_create(void **self, const gb_replay_options *o, const gb_replay_status *st,
                               gb_error *err)
{
    *self = NULL;
    gpu_mirror *w = calloc(1, sizeof *w);
    if (!w)
        return gb_error_set(err, GB_ENOMEM, "GPU selector: out of memory");
    w->kind = o->selector;
    w->alpha = w->kind == GB_SELECTOR_WEIGHTED ? o->alpha : 1.0;
    w->capacity = o->capacity;
    size_t cap = (size_t)o->capacity;
    int rc;
    if ((rc = gb_kernels_ctx_create(gb_kernels_current_device(), NULL, &w->ctx, err)) ||
        (rc = gb_kernels_device_alloc(cap * sizeof(float), (void **)&w->mirror, err)) ||
        (rc = gb_kernels_device_alloc(cap * sizeof(int64_t), (void **)&w->d_pend_idx, err)) ||
        (rc = gb_kernels_device_alloc(cap * sizeof(float), (void **)&w->d_pend_val, err)) ||
        (rc = gb_kernels_host_alloc(cap * sizeof(int64_t), (void **)&w->pend_idx, err)) ||
        (rc = gb_kernels_host_alloc(cap * sizeof(float), (void **)&w->pend_val, err)) ||
        (rc = gb_kernels_zero(w->ctx, w->mirror, cap * sizeof(float), err)) ||
        (rc = gb_kernels_ctx_reserve(w->ctx, o->capacity, 0, o->capacity, err)) ||
        (rc = gb_kernels_sync(w->ctx, err))) {
        gb_error_prefix(err, "GPU selector");
        gpu_mirror_destroy(w);
        return rc;
    }
    *self = w;
    return 0;
}

static void fail(gpu_mirror *w, const gb_error *err)
{
    if (!w->failed)
        GB_ERROR("GPU selector: %s (selections return nothing from now on)", err->msg);
    w->failed = 1;
}

/* Enqueues the queued changes: two uploads and one scatter. The pinned queue may be refilled only
 * after the next successful gb_kernels_sync (then npend goes back to 0). */
static int flush_enqueue(gpu_mirror *w, gb_error *err)
{
    if (w->npend == 0)
        return 0;
    int rc;
    if ((rc = gb_kernels_copy(w->ctx, w->d_pend_idx, w->pend_idx, (size_t)w->npend * 8, err)) ||
        (rc = gb_kernels_copy(w->ctx, w->d_pend_val, w->pend_val, (size_t)w->npend * 4, err)) ||
        (rc = gb_kernels_scatter(w->ctx, w->mirror, w->capacity, w->d_pend_idx, w->d_pend_val,
                                 w->npend, err)))
        return rc;
    return 0;
}

static void queue(gpu_mirror *w, int64_t idx, float value)
{
    if (w->failed)
        return;
    gb_error err = {0};
    if (w->npend == w->capacity) {
        if (flush_enqueue(w, &err) || gb_kernels_sync(w->ctx, &err)) {
            fail(w, &err);
            return;
        }
        w->npend = 0;
    }
    w->pend_idx[w->npend] = idx;
    w->pend_val[w->npend] = value;
    w->npend++;
}

static float as_mirror(double priority)
{
    return priority > FLT_MAX ? FLT_MAX : (float)priority;
}

static void gpu_mirror_set(void *self, int64_t idx, double priority)
{
    gpu_mirror *w = self;
    queue(w, idx, w->kind == GB_SELECTOR_UNIFORM ? 1.0f : as_mirror(priority));
}

/* uniform: a priority update leaves the item's 1 as it is */
static void gpu_mirror_keep(void *self, int64_t idx, double priority) {}

static void gpu_mirror_remove(void *self, int64_t idx) { queue(self, idx, 0.0f); }

static int grow_outputs(gpu_mirror *w, int64_t n, gb_error *err)
{
    if (n <= w->out_cap)
        return 0;
    gb_kernels_device_free(w->d_idx);
    gb_kernels_device_free(w->d_prob);
    gb_kernels_host_free(w->h_idx);
    gb_kernels_host_free(w->h_prob);
    w->d_idx = w->h_idx = NULL;
    w->d_prob = w->h_prob = NULL;
    w->out_cap = 0;
    int rc;
    if ((rc = gb_kernels_device_alloc((size_t)n * 8, (void **)&w->d_idx, err)) ||
        (rc = gb_kernels_device_alloc((size_t)n * 4, (void **)&w->d_prob, err)) ||
        (rc = gb_kernels_host_alloc((size_t)n * 8, (void **)&w->h_idx, err)) ||
        (rc = gb_kernels_host_alloc((size_t)n * 4, (void **)&w->h_prob, err)))
        return rc;
    w->out_cap = n;
    return 0;
}

static int64_t gpu_weighted_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                                   int64_t *idx, double *prob)
{
    gpu_mirror *w = self;
    gb_error err = {0};
    if (w->failed || n <= 0)
        return 0;
    uint64_t seed = gb_rng_next(rng);
    int rc;
    /* One sync per selection: the queued changes, the selection and the copies back. */
    if ((rc = grow_outputs(w, n, &err)) || (rc = flush_enqueue(w, &err)) ||
        (rc = gb_kernels_select_weighted(w->ctx, w->mirror, w->capacity, w->alpha, n, seed, 0,
                                         w->d_idx, w->d_prob, &err)) ||
        (rc = gb_kernels_copy(w->ctx, w->h_idx, w->d_idx, (size_t)n * 8, &err)) ||
        (rc = gb_kernels_copy(w->ctx, w->h_prob, w->d_prob, (size_t)n * 4, &err)))
        goto failed;
    rc = gb_kernels_sync(w->ctx, &err);
    if (rc == 0 || rc == GB_EAGAIN)
        w->npend = 0; /* applied: a bad index would have made the sync say GB_EINVAL */
    if (rc == GB_EAGAIN && st->size > 0) {
        /* Every committed priority is 0: no item is preferred, draw uniformly (as the CPU one). */
        if (gb_kernels_select_uniform_cpu(st->size, st->live, n, seed, idx, NULL, &err))
            goto failed;
        for (int64_t k = 0; k < n; k++)
            prob[k] = 1.0 / (double)st->size;
        return n;
    }
    if (rc)
        goto failed;
    for (int64_t k = 0; k < n; k++) {
        idx[k] = w->h_idx[k];
        prob[k] = (double)w->h_prob[k];
    }
    return n;
failed:
    fail(w, &err);
    return 0;
}

/* Top-k on the GPU: the n highest priorities by a radix sort of the mirror, highest first. Items
 * of priority 0 (or not finite) are never chosen, as by the weighted selector. */
static int64_t gpu_topk_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                               int64_t *idx, double *prob)
{
    gpu_mirror *w = self;
    gb_error err = {0};
    if (w->failed || n <= 0)
        return 0;
    int rc;
    if ((rc = grow_outputs(w, n, &err)) || (rc = flush_enqueue(w, &err)) ||
        (rc = gb_kernels_select_topk(w->ctx, w->mirror, w->capacity, n, w->d_idx, NULL, &err)) ||
        (rc = gb_kernels_copy(w->ctx, w->h_idx, w->d_idx, (size_t)n * 8, &err)) ||
        (rc = gb_kernels_sync(w->ctx, &err))) {
        fail(w, &err);
        return 0;
    }
    w->npend = 0;
    int64_t got = 0;
    for (int64_t k = 0; k < n && w->h_idx[k] != GB_KERNELS_NONE; k++) {
        idx[got] = w->h_idx[k];
        prob[got++] = 1.0;
    }
    return got;
}

/* The weights' sum, for the two-level draw over shards: the device holds the sums, so this
 * reads the host status instead, O(size) (once per global selection, not per draw). */
static double gpu_weighted_total(void *self, const gb_replay_status *st)
{
    const gpu_mirror *w = self;
    double total = 0;
    for (int64_t k = 0; k < st->size; k++) {
        double p = st->priority[st->live[k]];
        total += w->alpha == 1.0 ? p : w->alpha == 0.0 ? 1.0 : pow(p, w->alpha);
    }
    return total;
}

static const gb_replay_selector_ops gpu_weighted_ops = {
    "weighted-gpu",    1, gpu_mirror_create, gpu_mirror_destroy, gpu_mirror_set,
    gpu_mirror_remove, gpu_mirror_set,    gpu_weighted_select, gpu_weighted_total,
};

/* Uniform: the weighted draw over a mirror of ones (committed items 1, the rest 0). */
static const gb_replay_selector_ops gpu_uniform_ops = {
    "uniform-gpu",     1, gpu_mirror_create, gpu_mirror_destroy, gpu_mirror_set,
    gpu_mirror_remove, gpu_mirror_keep,   gpu_weighted_select, NULL,
};

static const gb_replay_selector_ops gpu_topk_ops = {
    "topk-gpu",        0, gpu_mirror_create, gpu_mirror_destroy, gpu_mirror_set,
    gpu_mirror_remove, gpu_mirror_set,    gpu_topk_select,     NULL,
};

const gb_replay_selector_ops *gb_replay_gpu_selector(gb_selector_kind kind)
{
    switch (kind) {
    case GB_SELECTOR_WEIGHTED:
        return &gpu_weighted_ops;
    case GB_SELECTOR_UNIFORM:
        return &gpu_uniform_ops;
    case GB_SELECTOR_TOPK:
        return &gpu_topk_ops;
    default:
        return NULL;
    }
}

/* ---- zero-copy collection -------------------------------------------------------------------- */

struct gb_replay_gpu {
    gb_replay *r;
    gb_kernels_ctx *ctx;
    int ncol;
    gb_replay_table tab[GB_REPLAY_MAX_COLUMNS];
    void *dev_base[GB_REPLAY_MAX_COLUMNS]; /* device address of each registered table */
    int64_t capacity, steps, max_batch;
    int64_t *h_idx, *d_idx; /* pinned host / device, max_batch */
    int32_t *h_len, *d_len;
    int uploading; /* the last collect's uploads from h_idx/h_len may still be in flight */
};

void gb_replay_gpu_close(gb_replay_gpu *g)
{
    if (!g)
        return;
    gb_error err = {0};
    if (g->uploading && gb_kernels_sync(g->ctx, &err))
        GB_WARN("replay GPU collection: at close: %s", err.msg);
    for (int c = 0; c < g->ncol; c++)
        if (g->dev_base[c] && gb_kernels_host_unregister(g->tab[c].base, &err))
            GB_WARN("replay GPU collection: %s", err.msg);
    gb_kernels_host_free(g->h_idx);
    gb_kernels_host_free(g->h_len);
    gb_kernels_device_free(g->d_idx);
    gb_kernels_device_free(g->d_len);
    free(g);
}

int gb_replay_gpu_open(gb_replay *r, gb_kernels_ctx *ctx, int64_t max_batch, gb_replay_gpu **out,
                       gb_error *err)
{
    *out = NULL;
    if (!r || !ctx || max_batch < 1)
        return gb_error_set(err, GB_EINVAL, "replay GPU collection: bad arguments");
    gb_replay_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return gb_error_set(err, GB_ENOMEM, "replay GPU collection: out of memory");
    const gb_replay_options *o = gb_replay_options_of(r);
    g->r = r;
    g->ctx = ctx;
    g->ncol = o->ncolumns;
    g->capacity = o->capacity;
    g->steps = o->steps;
    g->max_batch = max_batch;
    gb_replay_tables(r, g->tab);
    int rc;
    /* Each table starts on a 2 MiB boundary of the segment (replay/schema.c), so registering
     * them one by one never registers a page twice. */
    for (int c = 0; c < g->ncol; c++)
        if ((rc = gb_kernels_host_register(g->tab[c].base, (size_t)g->capacity * g->tab[c].stride,
                                           1, &g->dev_base[c], err))) {
            gb_error_prefix(err, "replay GPU collection: column '%s'", o->columns[c].name);
            goto fail;
        }
    if ((rc = gb_kernels_host_alloc((size_t)max_batch * 8, (void **)&g->h_idx, err)) ||
        (rc = gb_kernels_host_alloc((size_t)max_batch * 4, (void **)&g->h_len, err)) ||
        (rc = gb_kernels_device_alloc((size_t)max_batch * 8, (void **)&g->d_idx, err)) ||
        (rc = gb_kernels_device_alloc((size_t)max_batch * 4, (void **)&g->d_len, err)))
        goto fail;
    *out = g;
    return 0;
fail:
    gb_replay_gpu_close(g);
    return rc;
}

int gb_replay_gpu_collect(gb_replay_gpu *g, const gb_replay_selection *s,
                          const gb_replay_dst *dst, int ndst, int32_t *lengths, gb_error *err)
{
    if (!s->pinned)
        return gb_error_set(err, GB_EINVAL, "replay GPU collect needs a pinned sample");
    if (s->n > g->max_batch)
        return gb_error_set(err, GB_EINVAL, "replay GPU collect: %lld items, opened for %lld",
                            (long long)s->n, (long long)g->max_batch);
    if (ndst < 0 || ndst > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "replay GPU collect: %d columns", ndst);
    const gb_replay_options *o = gb_replay_options_of(g->r);
    int32_t span = s->t1 - s->t0;
    gb_kernels_column step_cols[GB_REPLAY_MAX_COLUMNS], item_cols[GB_REPLAY_MAX_COLUMNS];
    int nstep = 0, nitem = 0;
    for (int d = 0; d < ndst; d++) {
        int c = dst[d].column;
        if (c < 0 || c >= g->ncol)
            return gb_error_set(err, GB_EINVAL, "replay GPU collect: no column %d", c);
        const gb_replay_table *t = &g->tab[c];
        size_t row = t->per_item ? t->block_bytes : (size_t)span * t->step_bytes;
        if (!dst[d].data || dst[d].bytes < row * (size_t)s->n)
            return gb_error_set(err, GB_EINVAL, "replay GPU collect: column '%s' needs %zu bytes "
                                "for %lld items, the buffer has %zu", o->columns[c].name,
                                row * (size_t)s->n, (long long)s->n, dst[d].bytes);
        gb_kernels_column col = {g->dev_base[c], dst[d].data, (uint64_t)g->capacity, t->stride,
                                 t->per_item ? t->block_bytes : t->step_bytes,
                                 t->per_item ? 1u : (uint32_t)g->steps};
        if (t->per_item)
            item_cols[nitem++] = col;
        else
            step_cols[nstep++] = col;
    }
    if (s->n == 0 || ndst == 0)
        return 0;
    int rc;
    /* The previous call's uploads read h_idx and h_len: wait until they are done. */
    if (g->uploading && (rc = gb_kernels_sync(g->ctx, err)))
        return rc;
    gb_replay_status st;
    gb_replay_status_view(g->r, &st);
    for (int64_t k = 0; k < s->n; k++) {
        g->h_idx[k] = s->index[k];
        g->h_len[k] = st.length[s->index[k]]; /* set at commit, ordered by the sample's pin */
        if (lengths) {
            int32_t v = g->h_len[k] - s->t0;
            lengths[k] = v < 0 ? 0 : v > span ? span : v;
        }
    }
    if ((rc = gb_kernels_copy(g->ctx, g->d_idx, g->h_idx, (size_t)s->n * 8, err)) ||
        (rc = gb_kernels_copy(g->ctx, g->d_len, g->h_len, (size_t)s->n * 4, err)))
        return rc;
    g->uploading = 1;
    gb_kernels_steps steps = {(uint32_t)s->t0, (uint32_t)span, NULL, g->d_len};
    gb_kernels_steps whole = {0, 1, NULL, NULL};
    if (nstep && (rc = gb_kernels_gather(g->ctx, step_cols, nstep, g->d_idx, s->n, &steps, err)))
        return rc;
    if (nitem && (rc = gb_kernels_gather(g->ctx, item_cols, nitem, g->d_idx, s->n, &whole, err)))
        return rc;
    return 0;
}
