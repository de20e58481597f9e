/* workers/shards.c: global selection and remote collection over replay shards (see shards.h). */
#include "workers/shards.h"

#include "runtime/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What a shard tells the others about one of its draws (centralised) ... */
typedef struct pick {
    int64_t idx;
    uint64_t key;
    double prob; /* over the union */
} pick;

/* ... or about one of its candidates (decentralised). */
typedef struct cand {
    double priority;
    int64_t stamp;
    int64_t idx;
} cand;

/* A candidate in the merge: ordered by (k1, k2), then shard, then the shard's own order. */
typedef struct merged {
    double k1;
    int64_t k2;
    int32_t shard;
    int32_t order;
} merged;

struct gb_shards {
    gb_group *g;
    gb_replay *r;
    int rank, size;
    int64_t B, Bl, capacity;
    gb_rng rng; /* the shared draw: the same sequence on every rank */
    int64_t *stamp; /* [capacity] commit times (ns) */
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    int ncolumns;
    int global;        /* global selection (else each trainer samples its own shard) */
    int have_mass;     /* the last agreement carried every shard's weight sum and size */
    double *agreed;    /* [3 + 2 * size]: the agreement's all-reduce */
    /* exchange scratch, sized once */
    double *mass;     /* [2 * size]: weight sum and size of every shard */
    pick *picks;      /* [size * (B + 1)]: entry 0 of each shard's block holds its count */
    cand *cands;      /* [size * (B + 1)] */
    merged *merge;    /* [size * B] */
    int32_t *label;   /* [B] the shard each position draws from; -1 unfilled */
    int64_t *cursor;  /* [size] */
    /* the global batch, in position order (filled positions only) */
    int64_t n_glob, union_size;
    int64_t *g_pos, *g_index, *g_local;
    int32_t *g_owner;
    uint64_t *g_key;
    double *g_prob;
    float *g_weight;
    int64_t *at;      /* [B] position -> entry in the g_* arrays, -1 unfilled */
    /* this rank as owner (send) and as trainer (receive) */
    int64_t *send_idx, *send_cnt, *recv_cnt;
    size_t *send_bytes, *recv_bytes;
    int64_t my_n;
    int64_t *my_entry; /* [Bl] entries this rank trains on, grouped by owner */
    uint8_t *sendbuf; /* [B rows of every column]: rows for trainer 0, 1, ... */
    uint8_t *recvbuf; /* [B/N rows of every column]: rows from owner 0, 1, ... */
    size_t sendbuf_cap;
    void *xbuf; /* [B + 1] picks or candidates: this rank's block for the allgather */
    /* priority routing */
    double *prio_all;  /* [size * Bl] */
    int64_t *upd_idx;
    uint64_t *upd_key;
    double *upd_prio;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int gb_shards_create(const gb_shards_opts *o, gb_shards **out, gb_error *err)
{
    *out = NULL;
    int size = gb_group_size(o->group);
    if (o->batch < size || o->batch % size != 0)
        return gb_error_set(err, GB_EINVAL, "shards: a global batch of %lld does not split "
                            "evenly over %d trainers", (long long)o->batch, size);
    gb_shards *S = calloc(1, sizeof *S);
    if (!S)
        return gb_error_set(err, GB_ENOMEM, "shards: out of memory");
    S->g = o->group;
    S->r = o->replay;
    S->rank = gb_group_rank(o->group);
    S->size = size;
    S->B = o->batch;
    S->global = o->global;
    S->Bl = o->batch / size;
    const gb_replay_options *ro = gb_replay_options_of(o->replay);
    S->capacity = ro->capacity;
    S->ncolumns = ro->ncolumns;
    gb_replay_tables(o->replay, S->tables);
    gb_rng_seed(&S->rng, o->seed);
    size_t rowsum = 0; /* every column's whole block: the most a row can carry */
    for (int c = 0; c < S->ncolumns; c++)
        rowsum += S->tables[c].block_bytes;
    size_t B = (size_t)S->B, N = (size_t)size;
    S->sendbuf_cap = B * rowsum;
    S->stamp = calloc((size_t)S->capacity, sizeof *S->stamp);
    S->mass = calloc(2 * N, sizeof *S->mass);
    S->agreed = calloc(3 + 2 * N, sizeof *S->agreed);
    S->picks = calloc(N * (B + 1), sizeof *S->picks);
    S->cands = calloc(N * (B + 1), sizeof *S->cands);
    S->merge = calloc(N * B, sizeof *S->merge);
    S->label = calloc(B, sizeof *S->label);
    S->cursor = calloc(N, sizeof *S->cursor);
    S->g_pos = calloc(B, sizeof *S->g_pos);
    S->g_index = calloc(B, sizeof *S->g_index);
    S->g_local = calloc(B, sizeof *S->g_local);
    S->g_owner = calloc(B, sizeof *S->g_owner);
    S->g_key = calloc(B, sizeof *S->g_key);
    S->g_prob = calloc(B, sizeof *S->g_prob);
    S->g_weight = calloc(B, sizeof *S->g_weight);
    S->at = calloc(B, sizeof *S->at);
    S->send_idx = calloc(B, sizeof *S->send_idx);
    S->send_cnt = calloc(N, sizeof *S->send_cnt);
    S->recv_cnt = calloc(N, sizeof *S->recv_cnt);
    S->send_bytes = calloc(N, sizeof *S->send_bytes);
    S->recv_bytes = calloc(N, sizeof *S->recv_bytes);
    S->my_entry = calloc((size_t)S->Bl, sizeof *S->my_entry);
    S->sendbuf = malloc(S->sendbuf_cap ? S->sendbuf_cap : 1);
    S->recvbuf = malloc((size_t)S->Bl * rowsum + 1);
    S->xbuf = calloc(B + 1, sizeof(pick) > sizeof(cand) ? sizeof(pick) : sizeof(cand));
    S->prio_all = calloc(B, sizeof *S->prio_all);
    S->upd_idx = calloc(B, sizeof *S->upd_idx);
    S->upd_key = calloc(B, sizeof *S->upd_key);
    S->upd_prio = calloc(B, sizeof *S->upd_prio);
    if (!S->stamp || !S->mass || !S->agreed || !S->picks || !S->cands || !S->merge || !S->label ||
        !S->cursor || !S->g_pos || !S->g_index || !S->g_local || !S->g_owner || !S->g_key ||
        !S->g_prob || !S->g_weight || !S->at || !S->send_idx || !S->send_cnt || !S->recv_cnt ||
        !S->send_bytes || !S->recv_bytes || !S->my_entry || !S->sendbuf || !S->recvbuf || !S->xbuf || !S->prio_all ||
        !S->upd_idx || !S->upd_key || !S->upd_prio) {
        gb_shards_destroy(S);
        return gb_error_set(err, GB_ENOMEM, "shards: out of memory for a global batch of %lld",
                            (long long)o->batch);
    }
    *out = S;
    return 0;
}

void gb_shards_destroy(gb_shards *S)
{
    if (!S)
        return;
    void *bufs[] = {S->stamp,    S->mass,     S->picks,      S->cands,      S->merge,
                    S->label,    S->cursor,   S->g_pos,      S->g_index,    S->g_local,
                    S->g_owner,  S->g_key,    S->g_prob,     S->g_weight,   S->at,
                    S->send_idx, S->send_cnt, S->recv_cnt,   S->send_bytes, S->recv_bytes,
                    S->my_entry, S->sendbuf,  S->prio_all,   S->upd_idx,    S->upd_key,
                    S->upd_prio,    S->xbuf,       S->recvbuf,    S->agreed};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(S);
}

void gb_shards_stamp(gb_shards *S, int64_t n, const int64_t *idx, const int64_t *stamp)
{
    int64_t now = stamp ? 0 : now_ns();
    for (int64_t i = 0; i < n; i++)
        S->stamp[idx[i]] = stamp ? stamp[i] : now;
}

static int selector_kind(const gb_shards *S, const gb_replay_request *req)
{
    return req->selector == GB_REPLAY_SELECTOR_PRIMARY
               ? (int)gb_replay_options_of(S->r)->selector
               : req->selector;
}

int gb_shards_agree(gb_shards *S, const gb_replay_request *share, int stop, double progress,
                    double *progress_sum, gb_error *err)
{
    int rc = stop ? 0 : gb_replay_ready(S->r, share, err);
    if (rc && rc != GB_ETIMEOUT)
        return rc;
    int ready = !stop && rc == 0;
    double *v = S->agreed;
    memset(v, 0, (3 + 2 * (size_t)S->size) * sizeof *v);
    v[0] = !stop && !ready;
    v[1] = stop;
    v[2] = progress;
    /* A weighted or uniform global draw needs every shard's weight sum and size: they travel in
     * the same all-reduce (each rank fills its own slots), which saves a collective per step. */
    int kind = selector_kind(S, share);
    S->have_mass = S->global && (kind == GB_SELECTOR_UNIFORM || kind == GB_SELECTOR_WEIGHTED);
    if (S->have_mass) {
        int64_t size;
        if ((rc = gb_replay_weight_total(S->r, share->selector, &v[3 + 2 * S->rank], &size,
                                         err)))
            return rc;
        v[3 + 2 * S->rank + 1] = (double)size;
    }
    if ((rc = gb_group_allreduce(S->g, GB_DTYPE_FLOAT64, v, 3 + 2 * S->size, GB_GROUP_SUM,
                                 err)))
        return rc;
    if (progress_sum)
        *progress_sum = v[2];
    if (v[1] > 0)
        return 2;
    if (v[0] > 0) {
        S->have_mass = 0;
        return 0;
    }
    if (S->have_mass)
        memcpy(S->mass, v + 3, 2 * (size_t)S->size * sizeof *v);
    return 1;
}

/* Draws this shard's k items with its own selector, the limiter's yes already agreed. */
static int draw_local(gb_shards *S, const gb_replay_request *req, int64_t k,
                      gb_replay_selection *sel, gb_error *err)
{
    sel->n = 0;
    if (k == 0)
        return 0;
    gb_replay_request q = *req;
    q.batch = k;
    q.admitted = 1;
    return gb_replay_sample(S->r, &q, sel, err);
}

/* Centralised (uniform, weighted): the two-level draw. Fills label[] and this shard's picks. */
static int select_weighted(gb_shards *S, const gb_replay_request *req, gb_replay_selection *sel,
                           gb_error *err)
{
    int rc;
    if (!S->have_mass) { /* not agreed through gb_shards_agree: gather the sums now */
        double mine[2];
        int64_t size;
        if ((rc = gb_replay_weight_total(S->r, req->selector, &mine[0], &size, err)))
            return rc;
        mine[1] = (double)size;
        if ((rc = gb_group_allgather(S->g, mine, sizeof mine, S->mass, err)))
            return rc;
    }
    S->have_mass = 0; /* one selection per agreement */
    double total = 0, sizes = 0;
    for (int s = 0; s < S->size; s++) {
        total += S->mass[2 * s];
        sizes += S->mass[2 * s + 1];
    }
    /* Every weight zero everywhere: one replay would draw uniformly, so weigh shards by size. */
    int by_size = !(total > 0);
    double sum = by_size ? sizes : total;
    S->union_size = (int64_t)sizes;
    for (int s = 0; s < S->size; s++)
        S->cursor[s] = 0;
    int last = -1;
    for (int s = 0; s < S->size; s++)
        if (S->mass[2 * s + by_size] > 0)
            last = s;
    for (int64_t j = 0; j < S->B; j++) {
        int s = last;
        if (last >= 0) {
            double u = gb_rng_uniform(&S->rng) * sum, acc = 0;
            for (int t = 0; t < S->size; t++) {
                double m = S->mass[2 * t + by_size];
                acc += m;
                if (m > 0 && u < acc) {
                    s = t;
                    break;
                }
            }
        }
        S->label[j] = s;
        if (s >= 0)
            S->cursor[s]++;
    }
    if ((rc = draw_local(S, req, S->cursor[S->rank], sel, err)))
        return rc;
    double share = sum > 0 ? S->mass[2 * S->rank + by_size] / sum : 0;
    pick *p = S->xbuf;
    p[0].idx = sel->n;
    for (int64_t k = 0; k < sel->n; k++)
        p[1 + k] = (pick){sel->index[k], sel->key[k], share * sel->prob[k]};
    return gb_group_allgather(S->g, p, (size_t)(S->B + 1) * sizeof *p, S->picks, err);
}

static int merged_cmp(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Decentralised (fifo, lifo, topk): every shard's best B candidates, merged in the selector's
 * order; label[] gets the merged order's shards and each shard draws the count it won. */
static int select_ordered(gb_shards *S, int kind, const gb_replay_request *req,
                          gb_replay_selection *sel, gb_error *err)
{
    size_t blk = (size_t)(S->B + 1);
    int64_t *idx = S->send_idx; /* scratch until collection */
    double *prio = S->g_prob;   /* scratch until the batch is filled */
    int64_t count, size;
    double unused;
    int rc = gb_replay_peek(S->r, req->selector, S->B, idx, prio, &count, err);
    if (rc || (rc = gb_replay_weight_total(S->r, GB_SELECTOR_UNIFORM, &unused, &size, err)))
        return rc;
    cand *mine = S->xbuf;
    mine[0] = (cand){0, size, count};
    for (int64_t k = 0; k < count; k++)
        mine[1 + k] = (cand){prio[k], S->stamp[idx[k]], idx[k]};
    if ((rc = gb_group_allgather(S->g, mine, blk * sizeof *mine, S->cands, err)))
        return rc;
    int64_t nm = 0;
    S->union_size = 0;
    for (int s = 0; s < S->size; s++) {
        const cand *c = &S->cands[(size_t)s * blk];
        S->union_size += c[0].stamp;
        for (int64_t k = 0; k < c[0].idx; k++) {
            const cand *x = &c[1 + k];
            merged m = {0, x->stamp, s, (int32_t)k};
            if (kind == GB_SELECTOR_LIFO)
                m.k2 = -x->stamp;
            else if (kind == GB_SELECTOR_TOPK)
                m.k1 = -x->priority; /* highest first, then the older */
            S->merge[nm++] = m;
        }
    }
    qsort(S->merge, (size_t)nm, sizeof *S->merge, merged_cmp);
    for (int s = 0; s < S->size; s++)
        S->cursor[s] = 0;
    for (int64_t j = 0; j < S->B; j++) {
        S->label[j] = j < nm ? S->merge[j].shard : -1;
        if (j < nm)
            S->cursor[S->merge[j].shard]++;
    }
    if ((rc = draw_local(S, req, S->cursor[S->rank], sel, err)))
        return rc;
    pick *p = S->xbuf;
    p[0].idx = sel->n;
    for (int64_t k = 0; k < sel->n; k++)
        p[1 + k] = (pick){sel->index[k], sel->key[k], 1.0};
    return gb_group_allgather(S->g, p, blk * sizeof *p, S->picks, err);
}

/* From label[] and every shard's picks: the global batch in position order, its importance
 * weights, and who sends what to whom. */
static void fill_batch(gb_shards *S, int weighted, double beta)
{
    size_t blk = (size_t)(S->B + 1);
    for (int s = 0; s < S->size; s++)
        S->cursor[s] = 0;
    S->n_glob = 0;
    for (int64_t j = 0; j < S->B; j++) {
        int s = S->label[j];
        S->at[j] = -1;
        if (s < 0)
            continue;
        const pick *p = &S->picks[(size_t)s * blk];
        if (S->cursor[s] >= p[0].idx)
            continue; /* the shard came back short (max_times_sampled emptied it) */
        const pick *x = &p[1 + S->cursor[s]++];
        int64_t e = S->n_glob++;
        S->at[j] = e;
        S->g_pos[e] = j;
        S->g_owner[e] = s;
        S->g_local[e] = x->idx;
        S->g_index[e] = (int64_t)s * S->capacity + x->idx;
        S->g_key[e] = x->key;
        S->g_prob[e] = x->prob;
    }
    if (weighted)
        gb_replay_importance_weights(S->g_prob, S->n_glob, S->union_size, beta, S->g_weight);
    else
        for (int64_t e = 0; e < S->n_glob; e++)
            S->g_weight[e] = 1.0f;
    /* as owner: rows for trainer 0, 1, ...; as trainer: rows from owner 0, 1, ... */
    int64_t ns = 0;
    for (int t = 0; t < S->size; t++) {
        S->send_cnt[t] = 0;
        for (int64_t j = t * S->Bl; j < (t + 1) * S->Bl; j++)
            if (S->at[j] >= 0 && S->g_owner[S->at[j]] == S->rank) {
                S->send_idx[ns++] = S->g_local[S->at[j]];
                S->send_cnt[t]++;
            }
    }
    S->my_n = 0;
    for (int s = 0; s < S->size; s++) {
        S->recv_cnt[s] = 0;
        for (int64_t j = S->rank * S->Bl; j < (S->rank + 1) * S->Bl; j++)
            if (S->at[j] >= 0 && S->g_owner[S->at[j]] == s) {
                S->my_entry[S->my_n++] = S->at[j];
                S->recv_cnt[s]++;
            }
    }
}

/* One all-to-all for every column: each owner gathers its rows for trainer 0, 1, ... straight
 * from its tables into the send buffer (for each trainer: column after column); each trainer
 * receives from owner 0, 1, ... and spreads the columns into its staging (with one column the
 * rows land in the staging directly). */
static int exchange_rows(gb_shards *S, const gb_replay_request *req, const gb_replay_dst *dst,
                         int ndst, gb_error *err)
{
    gb_replay_status st;
    gb_replay_status_view(S->r, &st);
    int32_t t0 = req->t0, t1 = req->t1 ? req->t1 : (int32_t)gb_replay_options_of(S->r)->steps;
    size_t row[GB_REPLAY_MAX_COLUMNS], rowsum = 0;
    if (ndst < 1 || ndst > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "shards: %d destinations", ndst);
    for (int d = 0; d < ndst; d++) {
        int c = dst[d].column;
        if (c < 0 || c >= S->ncolumns)
            return gb_error_set(err, GB_EINVAL, "shards: no column %d", c);
        const gb_replay_table *tb = &S->tables[c];
        row[d] = tb->per_item ? tb->block_bytes : (size_t)(t1 - t0) * tb->step_bytes;
        rowsum += row[d];
        if (dst[d].bytes < (size_t)S->my_n * row[d])
            return gb_error_set(err, GB_EINVAL, "shards: column %d: %zu bytes of room for %lld "
                                "rows of %zu", c, dst[d].bytes, (long long)S->my_n, row[d]);
    }
    uint8_t *out = S->sendbuf;
    int64_t first = 0;
    for (int t = 0; t < S->size; t++) {
        for (int d = 0; d < ndst; d++) {
            gb_replay_gather(&S->tables[dst[d].column], S->send_idx + first, st.length,
                             S->send_cnt[t], t0, t1, out);
            out += (size_t)S->send_cnt[t] * row[d];
        }
        first += S->send_cnt[t];
        S->send_bytes[t] = (size_t)S->send_cnt[t] * rowsum;
        S->recv_bytes[t] = (size_t)S->recv_cnt[t] * rowsum;
    }
    void *in = ndst == 1 ? dst[0].data : S->recvbuf;
    int rc = gb_group_alltoall(S->g, S->sendbuf, S->send_bytes, in, S->recv_bytes, err);
    if (rc || ndst == 1)
        return rc;
    const uint8_t *from = S->recvbuf;
    int64_t at = 0; /* rows placed so far */
    for (int s = 0; s < S->size; s++) {
        for (int d = 0; d < ndst; d++) {
            size_t bytes = (size_t)S->recv_cnt[s] * row[d];
            memcpy((uint8_t *)dst[d].data + (size_t)at * row[d], from, bytes);
            from += bytes;
        }
        at += S->recv_cnt[s];
    }
    return 0;
}

int gb_shards_select(gb_shards *S, const gb_replay_request *req, gb_replay_selection *sel,
                     const gb_replay_dst *dst, int ndst, float *weight, int64_t *n,
                     gb_error *err)
{
    *n = 0;
    int kind = selector_kind(S, req);
    int weighted = kind == GB_SELECTOR_UNIFORM || kind == GB_SELECTOR_WEIGHTED;
    if (sel->capacity < S->B)
        return gb_error_set(err, GB_EINVAL, "shards: a selection of %lld items cannot hold a "
                            "shard's share of up to %lld", (long long)sel->capacity,
                            (long long)S->B);
    int rc = weighted ? select_weighted(S, req, sel, err) : select_ordered(S, kind, req, sel, err);
    if (rc)
        return rc;
    fill_batch(S, weighted, gb_replay_options_of(S->r)->beta);
    /* Every rank knows the whole batch: if some trainer got no row, nobody trains. */
    for (int t = 0; t < S->size; t++) {
        int64_t rows = 0;
        for (int64_t j = t * S->Bl; j < (t + 1) * S->Bl; j++)
            rows += S->at[j] >= 0;
        if (rows == 0)
            return 0;
    }
    if ((rc = exchange_rows(S, req, dst, ndst, err)))
        return rc;
    for (int64_t i = 0; i < S->my_n; i++)
        weight[i] = S->g_weight[S->my_entry[i]];
    *n = S->my_n;
    return 0;
}

int gb_shards_update_priorities(gb_shards *S, const double *priority, gb_error *err)
{
    double *mine = S->xbuf;
    for (int64_t i = 0; i < S->Bl; i++)
        mine[i] = i < S->my_n ? priority[i] : NAN;
    int rc = gb_group_allgather(S->g, mine, (size_t)S->Bl * sizeof *mine, S->prio_all, err);
    if (rc)
        return rc;
    /* Trainer t's rows are its positions grouped by owner: walk them the same way. */
    int64_t k = 0;
    for (int t = 0; t < S->size; t++) {
        int64_t i = 0;
        for (int s = 0; s < S->size; s++)
            for (int64_t j = t * S->Bl; j < (t + 1) * S->Bl; j++) {
                int64_t e = S->at[j];
                if (e < 0 || S->g_owner[e] != s)
                    continue;
                double p = S->prio_all[t * S->Bl + i++];
                if (s != S->rank || isnan(p))
                    continue;
                S->upd_idx[k] = S->g_local[e];
                S->upd_key[k] = S->g_key[e];
                S->upd_prio[k++] = p;
            }
    }
    return k ? gb_replay_update_priorities(S->r, k, S->upd_idx, S->upd_key, S->upd_prio, NULL,
                                           err)
             : 0;
}

void gb_shards_last(const gb_shards *S, gb_shards_batch *b)
{
    *b = (gb_shards_batch){S->n_glob, S->g_index, S->g_pos, S->g_prob, S->g_weight,
                           S->union_size};
}
