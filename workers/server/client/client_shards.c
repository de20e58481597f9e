/* workers/server/client/client_shards.c: sampling across several data servers (client_shards.h). */
#include "workers/server/client/client_shards.h"

#include "runtime/base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gb_client_shards {
    int n;
    gb_client *c[GB_CLIENT_SHARDS_MAX];
    gb_client_info info[GB_CLIENT_SHARDS_MAX];
    gb_rng rng;
};

int gb_client_shards_open(gb_client_shards **out, const char *const *endpoints, int n,
                          int timeout_ms, uint64_t seed, gb_error *err)
{
    *out = NULL;
    if (n < 1 || n > GB_CLIENT_SHARDS_MAX)
        return gb_error_set(err, GB_EINVAL, "client shards: %d servers (1..%d)", n,
                            GB_CLIENT_SHARDS_MAX);
    gb_client_shards *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    gb_rng_seed(&s->rng, seed);
    for (int i = 0; i < n; i++) {
        int rc = gb_client_open(&s->c[i], endpoints[i], timeout_ms, err);
        if (rc) {
            gb_client_shards_close(s);
            return gb_error_prefix(err, "client shards: server %d", i);
        }
        s->n++;
    }
    *out = s;
    return 0;
}

void gb_client_shards_close(gb_client_shards *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        gb_client_close(s->c[i]);
    free(s);
}

gb_client *gb_client_shards_client(gb_client_shards *s, int i)
{
    return i >= 0 && i < s->n ? s->c[i] : NULL;
}

static int same_schema(const gb_client_info *a, const gb_client_info *b)
{
    if (a->steps != b->steps || a->ncolumns != b->ncolumns)
        return 0;
    for (int k = 0; k < a->ncolumns; k++)
        if (memcmp(&a->columns[k], &b->columns[k], sizeof a->columns[k]) != 0)
            return 0;
    return 1;
}

/* Bytes of one item of each asked column (schema order when req->ncolumns is 0). */
static int row_bytes(const gb_client_info *info, const gb_client_sample_req *req, size_t *rb,
                     int *ncols, gb_error *err)
{
    int64_t steps = (req->t1 ? req->t1 : info->steps) - req->t0;
    *ncols = req->ncolumns > 0 ? req->ncolumns : info->ncolumns;
    for (int k = 0; k < *ncols; k++) {
        int c = req->ncolumns > 0 ? gb_client_column_index(info, req->columns[k]) : k;
        if (c < 0)
            return gb_error_set(err, GB_EINVAL, "client shards: no column '%.32s'",
                                req->columns[k]);
        const gb_client_column *col = &info->columns[c];
        rb[k] = col->per_item ? col->step_bytes
                              : col->step_bytes * (size_t)(steps > 0 ? steps : 0);
    }
    return 0;
}

/* Every server's INFO (one schema for all), the selector to draw with (*sel: uniform or
 * weighted) and each server's weight W[i] (its size, or its weight_total); *total their sum,
 * *size the items of all. Returns 0 or an error. */
static int shards_weigh(gb_client_shards *s, const gb_client_sample_req *req, const char **sel,
                        int *weighted, double *W, double *total, int64_t *size, gb_error *err)
{
    for (int i = 0; i < s->n; i++) {
        int rc = gb_client_get_info(s->c[i], &s->info[i], err);
        if (rc)
            return gb_error_prefix(err, "client shards: server %d", i);
        if (!same_schema(&s->info[0], &s->info[i]))
            return gb_error_set(err, GB_EINVAL, "client shards: server %d serves another schema "
                                "than server 0", i);
    }
    *sel = req->selector && req->selector[0] && strcmp(req->selector, "default")
               ? req->selector : s->info[0].selector;
    *weighted = strcmp(*sel, "weighted") == 0;
    if (!*weighted && strcmp(*sel, "uniform") != 0)
        return gb_error_set(err, GB_EINVAL, "client shards: selector '%.32s': only uniform and "
                            "weighted draw across servers", *sel);
    *total = 0;
    *size = 0;
    for (int i = 0; i < s->n; i++) {
        if (*weighted && !s->info[i].has_weight_total)
            return gb_error_set(err, GB_EINVAL, "client shards: server %d does not offer the "
                                "weighted selector (or reports no weight_total)", i);
        W[i] = *weighted ? s->info[i].weight_total : (double)s->info[i].size;
        *total += W[i];
        *size += s->info[i].size;
    }
    if (!(*total > 0))
        return gb_error_set(err, GB_ETIMEOUT, "client shards: nothing to sample (total weight "
                            "0 on %d servers)", s->n);
    return 0;
}

/* Samples r->batch rows from server i into out from row `rows` on (rb: each asked column's
 * bytes per row); *n the rows it gave. Returns 0 or its error. */
static int shards_take(gb_client_shards *s, int i, const gb_client_sample_req *r,
                       const size_t *rb, int ncols, int64_t rows, gb_client_batch *out,
                       int64_t *n, gb_error *err)
{
    void *data[GB_CLIENT_MAX_COLUMNS];
    size_t cap[GB_CLIENT_MAX_COLUMNS];
    for (int k = 0; k < ncols && out->data; k++) {
        size_t off = (size_t)rows * rb[k];
        data[k] = out->data[k] ? (char *)out->data[k] + off : NULL;
        cap[k] = out->cap[k] > off ? out->cap[k] - off : 0;
    }
    gb_client_batch b = {
        .data = out->data ? data : NULL, .cap = cap,
        .index = out->index ? out->index + rows : NULL,
        .key = out->key ? out->key + rows : NULL,
        .prob = out->prob ? out->prob + rows : NULL,
        .weight = NULL,
        .length = out->length ? out->length + rows : NULL};
    int rc = gb_client_sample(s->c[i], r, &b, err);
    *n = b.n;
    return rc ? gb_error_prefix(err, "client shards: server %d", i) : 0;
}

/* Importance weights of the rows (global probabilities in out->prob), normalised by the
 * largest; 1 for uniform. Returns 0 or GB_EINVAL. */
static int shards_importance(gb_client_batch *out, int weighted, double beta, int64_t size,
                             gb_error *err)
{
    if (weighted && !out->prob)
        return gb_error_set(err, GB_EINVAL, "client shards: weights need out->prob");
    double wmax = 0;
    for (int64_t j = 0; j < out->n; j++) {
        double w = weighted ? pow((double)size * out->prob[j], -beta) : 1.0;
        out->weight[j] = (float)w;
        wmax = w > wmax ? w : wmax;
    }
    for (int64_t j = 0; j < out->n && wmax > 0; j++)
        out->weight[j] = (float)(out->weight[j] / wmax);
    return 0;
}

/* See client_shards.h: blocks for one INFO and one sample per server, in turn. */
int gb_client_shards_sample(gb_client_shards *s, const gb_client_sample_req *req,
                            gb_client_batch *out, int32_t *server, gb_error *err)
{
    double W[GB_CLIENT_SHARDS_MAX], total = 0;
    int64_t count[GB_CLIENT_SHARDS_MAX] = {0}, size = 0;
    const char *sel = NULL;
    int weighted = 0;
    int rc = shards_weigh(s, req, &sel, &weighted, W, &total, &size, err);
    if (rc)
        return rc;
    /* the multinomial split: each draw picks a server with probability W_s / W */
    for (int64_t d = 0; d < req->batch; d++) {
        double u = gb_rng_uniform(&s->rng) * total, acc = 0;
        int i = 0;
        while (i < s->n - 1 && u >= (acc += W[i]))
            i++;
        count[i]++;
    }
    size_t rb[GB_CLIENT_MAX_COLUMNS];
    int ncols;
    if ((rc = row_bytes(&s->info[0], req, rb, &ncols, err)))
        return rc;
    int64_t rows = 0;
    for (int i = 0; i < s->n; i++) {
        if (count[i] == 0)
            continue;
        gb_client_sample_req r = *req;
        r.batch = count[i];
        r.selector = sel;
        int64_t n = 0;
        if ((rc = shards_take(s, i, &r, rb, ncols, rows, out, &n, err)))
            return rc;
        for (int64_t j = 0; j < n; j++) {
            if (out->prob)
                out->prob[rows + j] *= W[i] / total;
            if (server)
                server[rows + j] = i;
        }
        rows += n;
    }
    out->n = rows;
    out->size = size;
    out->selector = weighted ? 1 : 0;
    return out->weight ? shards_importance(out, weighted, s->info[0].beta, size, err) : 0;
}
