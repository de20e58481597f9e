/* workers/roles/shards.c: global selection and remote collection over replay shards (see shards.h).
 * */
#include "workers/roles/shards.h"

#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A candidate of a decentralised selection, as every shard tells the others. */
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

/* The all-to-all's block from an owner to a trainer: this header (every pair has one, so every
 * rank learns every owner's count and smallest probability), one meta per slot, then the slots'
 * rows, column after column. A slot is a position of the trainer's part that the shared labels
 * give the owner; the owner fills its slots in position order with its draws, so when a shard
 * comes back short (max_times_sampled emptied it) its last slots are empty, and every rank can
 * tell which from the header's count. Sizes follow from the labels alone: no size exchange. */
typedef struct block_header {
    int64_t filled; /* the owner's draws for the whole global batch */
    double pmin;    /* their smallest positive probability over the union (INFINITY: none) */
} block_header;

typedef struct slot_meta {
    int64_t idx; /* local index on the owner; -1: an empty slot */
    uint64_t key;
    double prob; /* over the union */
} slot_meta;

struct gb_shards {
    gb_group *g;
    gb_replay *r;
    int rank, size;
    int64_t B, Bl, capacity;
    gb_rng rng; /* the shared draw: the same sequence on every rank */
    int64_t *stamp; /* [capacity] commit times (ns) */
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    int ncolumns;
    size_t rowsum;     /* every column's whole block: the most a row can carry */
    int global;        /* global selection (else each trainer samples its own shard) */
    int have_mass;     /* the last agreement carried every shard's weight sum and size */
    double *agreed;    /* [3 + 2 * size]: the agreement's all-reduce */
    /* exchange scratch, sized once */
    double *mass;     /* [2 * size]: weight sum and size of every shard */
    cand *cands;      /* [size * (B + 1)] */
    merged *merge;    /* [size * B] */
    cand *mine;       /* [B + 1] this shard's candidates */
    int64_t *peek_idx; /* [B] */
    double *peek_prio; /* [B] */
    int32_t *label;   /* [B] the shard each position draws from; -1 unfilled */
    int64_t *slots;   /* [size * size] slots[s * size + t]: positions of trainer t labelled s */
    int64_t *filled;  /* [size] every owner's draws (from the headers) */
    int64_t union_size;
    /* this rank as owner: its draws in label order */
    int64_t own_n;
    int64_t *own_idx;  /* [B] */
    uint64_t *own_key; /* [B] */
    double *own_prob;  /* [B] over the union */
    int64_t *send_rows; /* [size] filled rows it sent each trainer */
    /* this rank as trainer: its rows, grouped by owner (owner 0's first) */
    int64_t my_n;
    int64_t *my_pos, *my_index, *my_local;
    uint64_t *my_key;
    double *my_prob;
    float *my_weight;
    int64_t *recv_rows; /* [size] filled rows from each owner */
    size_t *send_bytes, *recv_bytes; /* [size] the last all-to-all's splits */
    size_t *prio_send, *prio_recv;   /* [size] the priorities' splits */
    uint8_t *sendbuf; /* size headers + B slots (meta and rows) */
    uint8_t *recvbuf; /* size headers + B/N slots */
    double *prio_in;  /* [B] priorities for this shard's draws, from their trainers */
    double *upd_prio; /* [B] */
    int64_t *upd_idx; /* [B] */
    uint64_t *upd_key;
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
    for (int c = 0; c < S->ncolumns; c++)
        S->rowsum += S->tables[c].block_bytes;
    size_t B = (size_t)S->B, N = (size_t)size, slot = sizeof(slot_meta) + S->rowsum;
    S->stamp = calloc((size_t)S->capacity, sizeof *S->stamp);
    S->mass = calloc(2 * N, sizeof *S->mass);
    S->agreed = calloc(3 + 2 * N, sizeof *S->agreed);
    S->cands = calloc(N * (B + 1), sizeof *S->cands);
    S->merge = calloc(N * B, sizeof *S->merge);
    S->mine = calloc(B + 1, sizeof *S->mine);
    S->peek_idx = calloc(B, sizeof *S->peek_idx);
    S->peek_prio = calloc(B, sizeof *S->peek_prio);
    S->label = calloc(B, sizeof *S->label);
    S->slots = calloc(N * N, sizeof *S->slots);
    S->filled = calloc(N, sizeof *S->filled);
    S->own_idx = calloc(B, sizeof *S->own_idx);
    S->own_key = calloc(B, sizeof *S->own_key);
    S->own_prob = calloc(B, sizeof *S->own_prob);
    S->send_rows = calloc(N, sizeof *S->send_rows);
    S->my_pos = calloc(B, sizeof *S->my_pos);
    S->my_index = calloc(B, sizeof *S->my_index);
    S->my_local = calloc(B, sizeof *S->my_local);
    S->my_key = calloc(B, sizeof *S->my_key);
    S->my_prob = calloc(B, sizeof *S->my_prob);
    S->my_weight = calloc(B, sizeof *S->my_weight);
    S->recv_rows = calloc(N, sizeof *S->recv_rows);
    S->send_bytes = calloc(N, sizeof *S->send_bytes);
    S->recv_bytes = calloc(N, sizeof *S->recv_bytes);
    S->prio_send = calloc(N, sizeof *S->prio_send);
    S->prio_recv = calloc(N, sizeof *S->prio_recv);
    S->sendbuf = malloc(N * sizeof(block_header) + B * slot);
    S->recvbuf = malloc(N * sizeof(block_header) + (size_t)S->Bl * slot);
    S->prio_in = calloc(B, sizeof *S->prio_in);
    S->upd_prio = calloc(B, sizeof *S->upd_prio);
    S->upd_idx = calloc(B, sizeof *S->upd_idx);
    S->upd_key = calloc(B, sizeof *S->upd_key);
    if (!S->stamp || !S->mass || !S->agreed || !S->cands || !S->merge || !S->mine ||
        !S->peek_idx || !S->peek_prio || !S->label || !S->slots || !S->filled || !S->own_idx ||
        !S->own_key || !S->own_prob || !S->send_rows || !S->my_pos || !S->my_index ||
        !S->my_local || !S->my_key || !S->my_prob || !S->my_weight || !S->recv_rows ||
        !S->send_bytes || !S->recv_bytes || !S->prio_send || !S->prio_recv || !S->sendbuf ||
        !S->recvbuf || !S->prio_in || !S->upd_prio || !S->upd_idx || !S->upd_key) {
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
    void *bufs[] = {S->stamp, S->mass, S->agreed, S->cands, S->merge, S->mine, S->peek_idx,
                    S->peek_prio, S->label, S->slots, S->filled, S->own_idx, S->own_key,
                    S->own_prob, S->send_rows, S->my_pos, S->my_index, S->my_local, S->my_key,
                    S->my_prob, S->my_weight, S->recv_rows, S->send_bytes, S->recv_bytes,
                    S->prio_send, S->prio_recv, S->sendbuf, S->recvbuf, S->prio_in, S->upd_prio,
                    S->upd_idx, S->upd_key};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(S);
}

void gb_shards_regroup(gb_shards *S, gb_group *g, uint64_t seed)
{
    S->g = g;
    gb_rng_seed(&S->rng, seed);
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

int gb_shards_agree(gb_shards *S, const gb_replay_request *share, int stop, int hold,
                    double progress, double *progress_sum, gb_error *err)
{
    int rc = stop || hold ? 0 : gb_replay_ready(S->r, share, err);
    if (rc && rc != GB_ETIMEOUT)
        return rc;
    int ready = !stop && !hold && rc == 0;
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

/* Draws this shard's k items with its own selector, the limiter's yes already agreed, and keeps
 * them as this owner's draws in label order (own_prob: filled by the caller). */
static int draw_local(gb_shards *S, const gb_replay_request *req, int64_t k,
                      gb_replay_selection *sel, gb_error *err)
{
    sel->n = 0;
    S->own_n = 0;
    if (k == 0)
        return 0;
    gb_replay_request q = *req;
    q.batch = k;
    q.admitted = 1;
    int rc = gb_replay_sample(S->r, &q, sel, err);
    if (rc)
        return rc;
    S->own_n = sel->n;
    memcpy(S->own_idx, sel->index, (size_t)sel->n * sizeof *S->own_idx);
    memcpy(S->own_key, sel->key, (size_t)sel->n * sizeof *S->own_key);
    return 0;
}

/* Centralised (uniform, weighted): the two-level draw. Fills label[] and this shard's draws. */
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
    int64_t mine = 0;
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
        mine += s == S->rank;
    }
    if ((rc = draw_local(S, req, mine, sel, err)))
        return rc;
    double share = sum > 0 ? S->mass[2 * S->rank + by_size] / sum : 0;
    for (int64_t k = 0; k < sel->n; k++)
        S->own_prob[k] = share * sel->prob[k];
    return 0;
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
    int64_t count, size;
    double unused;
    int rc = gb_replay_peek(S->r, req->selector, S->B, S->peek_idx, S->peek_prio, &count, err);
    if (rc || (rc = gb_replay_weight_total(S->r, GB_SELECTOR_UNIFORM, &unused, &size, err)))
        return rc;
    S->mine[0] = (cand){0, size, count};
    for (int64_t k = 0; k < count; k++)
        S->mine[1 + k] = (cand){S->peek_prio[k], S->stamp[S->peek_idx[k]], S->peek_idx[k]};
    if ((rc = gb_group_allgather(S->g, S->mine, blk * sizeof *S->mine, S->cands, err)))
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
    int64_t mine = 0;
    for (int64_t j = 0; j < S->B; j++) {
        S->label[j] = j < nm ? S->merge[j].shard : -1;
        mine += j < nm && S->merge[j].shard == S->rank;
    }
    if ((rc = draw_local(S, req, mine, sel, err)))
        return rc;
    for (int64_t k = 0; k < sel->n; k++)
        S->own_prob[k] = 1.0;
    return 0;
}

/* slots[s * size + t]: the positions of trainer t's part that the labels give owner s. */
static void count_slots(gb_shards *S)
{
    memset(S->slots, 0, (size_t)S->size * (size_t)S->size * sizeof *S->slots);
    for (int64_t j = 0; j < S->B; j++)
        if (S->label[j] >= 0)
            S->slots[S->label[j] * S->size + j / S->Bl]++;
}

/* Owner s's slots before trainer t's: the index of the first of its draws that t gets. */
static int64_t slot_offset(const gb_shards *S, int s, int t)
{
    int64_t off = 0;
    for (int u = 0; u < t; u++)
        off += S->slots[s * S->size + u];
    return off;
}

/* Of owner s's slots for trainer t, those its draws fill (a prefix). */
static int64_t filled_slots(const gb_shards *S, int s, int t)
{
    int64_t left = S->filled[s] - slot_offset(S, s, t), cnt = S->slots[s * S->size + t];
    return left < 0 ? 0 : left < cnt ? left : cnt;
}

/* The bytes a row of each destination takes (row[d]) and their sum (*rowsum), checked: known
 * columns, room for this trainer's slots, no more than every column once. */
static int dst_rows(const gb_shards *S, const gb_replay_dst *dst, int ndst, int32_t t0,
                    int32_t t1, size_t *row, size_t *rowsum, gb_error *err)
{
    if (ndst < 1 || ndst > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "shards: %d destinations", ndst);
    int64_t my_slots = 0;
    for (int s = 0; s < S->size; s++)
        my_slots += S->slots[s * S->size + S->rank];
    *rowsum = 0;
    for (int d = 0; d < ndst; d++) {
        int c = dst[d].column;
        if (c < 0 || c >= S->ncolumns)
            return gb_error_set(err, GB_EINVAL, "shards: no column %d", c);
        const gb_replay_table *tb = &S->tables[c];
        row[d] = tb->per_item ? tb->block_bytes : (size_t)(t1 - t0) * tb->step_bytes;
        *rowsum += row[d];
        if (dst[d].bytes < (size_t)my_slots * row[d])
            return gb_error_set(err, GB_EINVAL, "shards: column %d: %zu bytes of room for %lld "
                                "rows of %zu", c, dst[d].bytes, (long long)my_slots, row[d]);
    }
    if (*rowsum > S->rowsum)
        return gb_error_set(err, GB_EINVAL, "shards: %d destinations carry %zu bytes a row, more "
                            "than the %zu of every column once", ndst, *rowsum, S->rowsum);
    return 0;
}

/* As owner: a block per trainer into the send buffer (header, metas, rows gathered straight
 * from the column tables, steps t0..t1; length: the status table's per-item lengths), and every
 * block's size each way. */
static void pack_blocks(gb_shards *S, const gb_replay_dst *dst, int ndst, const size_t *row,
                        size_t rowsum, int32_t t0, int32_t t1, const int32_t *length)
{
    block_header mine = {S->own_n, INFINITY};
    for (int64_t k = 0; k < S->own_n; k++)
        if (S->own_prob[k] > 0 && S->own_prob[k] < mine.pmin)
            mine.pmin = S->own_prob[k];
    uint8_t *out = S->sendbuf;
    int64_t first = 0; /* this owner's first draw for trainer t */
    for (int t = 0; t < S->size; t++) {
        int64_t cnt = S->slots[S->rank * S->size + t];
        int64_t f = S->own_n - first < 0 ? 0 : S->own_n - first < cnt ? S->own_n - first : cnt;
        uint8_t *start = out;
        memcpy(out, &mine, sizeof mine);
        out += sizeof mine;
        for (int64_t k = 0; k < cnt; k++, out += sizeof(slot_meta)) {
            int64_t m = first + k;
            slot_meta x = k < f ? (slot_meta){S->own_idx[m], S->own_key[m], S->own_prob[m]}
                                : (slot_meta){-1, 0, 0};
            memcpy(out, &x, sizeof x);
        }
        for (int d = 0; d < ndst; d++) {
            gb_replay_gather(&S->tables[dst[d].column], S->own_idx + first, length, f, t0, t1,
                             out);
            memset(out + (size_t)f * row[d], 0, (size_t)(cnt - f) * row[d]);
            out += (size_t)cnt * row[d];
        }
        S->send_rows[t] = f;
        S->send_bytes[t] = (size_t)(out - start);
        S->recv_bytes[t] = sizeof(block_header) +
                           (size_t)S->slots[t * S->size + S->rank] * (sizeof(slot_meta) + rowsum);
        first += cnt;
    }
}

/* As trainer, after the all-to-all: every owner's count into S->filled and the smallest
 * probability of all (*pmin: the same on every rank); this rank's rows spread into dst, owner
 * after owner, with their global indices, positions, keys and probabilities. */
static void unpack_blocks(gb_shards *S, const gb_replay_dst *dst, int ndst, const size_t *row,
                          double *pmin)
{
    *pmin = INFINITY;
    const uint8_t *in = S->recvbuf;
    for (int s = 0; s < S->size; s++) {
        block_header h;
        memcpy(&h, in, sizeof h);
        S->filled[s] = h.filled;
        *pmin = h.pmin < *pmin ? h.pmin : *pmin;
        in += S->recv_bytes[s];
    }
    int64_t at = 0;
    in = S->recvbuf;
    for (int s = 0; s < S->size; s++) {
        int64_t cnt = S->slots[s * S->size + S->rank], f = filled_slots(S, s, S->rank);
        const uint8_t *meta = in + sizeof(block_header), *rows = meta + cnt * sizeof(slot_meta);
        int64_t j = S->rank * S->Bl;
        for (int64_t k = 0; k < f; k++, j++) {
            slot_meta x;
            memcpy(&x, meta + k * sizeof x, sizeof x);
            while (S->label[j] != s) /* the k-th of this owner's positions in this part */
                j++;
            S->my_pos[at + k] = j;
            S->my_local[at + k] = x.idx;
            S->my_index[at + k] = (int64_t)s * S->capacity + x.idx;
            S->my_key[at + k] = x.key;
            S->my_prob[at + k] = x.prob;
        }
        for (int d = 0; d < ndst; d++) {
            memcpy((uint8_t *)dst[d].data + (size_t)at * row[d], rows, (size_t)f * row[d]);
            rows += (size_t)cnt * row[d];
        }
        S->recv_rows[s] = f;
        at += f;
        in += S->recv_bytes[s];
    }
    S->my_n = at;
}

/* The one all-to-all: as owner, a block per trainer (pack_blocks); as trainer, this rank's rows
 * spread into dst, grouped by owner (unpack_blocks), with importance weights over the whole
 * global batch. Returns the rows every trainer got (the fewest) through *fewest. */
static int exchange(gb_shards *S, const gb_replay_request *req, const gb_replay_dst *dst,
                    int ndst, int weighted, int64_t *fewest, gb_error *err)
{
    gb_replay_status st;
    gb_replay_status_view(S->r, &st);
    int32_t t0 = req->t0, t1 = req->t1 ? req->t1 : (int32_t)gb_replay_options_of(S->r)->steps;
    size_t row[GB_REPLAY_MAX_COLUMNS], rowsum = 0;
    int rc = dst_rows(S, dst, ndst, t0, t1, row, &rowsum, err);
    if (rc)
        return rc;
    pack_blocks(S, dst, ndst, row, rowsum, t0, t1, st.length);
    if ((rc = gb_group_alltoall(S->g, S->sendbuf, S->send_bytes, S->recvbuf, S->recv_bytes,
                                err)))
        return rc;
    double pmin;
    unpack_blocks(S, dst, ndst, row, &pmin);
    *fewest = S->Bl;
    for (int t = 0; t < S->size; t++) {
        int64_t rows = 0;
        for (int s = 0; s < S->size; s++)
            rows += filled_slots(S, s, t);
        *fewest = rows < *fewest ? rows : *fewest;
    }
    if (weighted)
        gb_replay_importance_weights_from(S->my_prob, S->my_n, pmin,
                                          gb_replay_options_of(S->r)->beta, S->my_weight);
    else
        for (int64_t i = 0; i < S->my_n; i++)
            S->my_weight[i] = 1.0f;
    return 0;
}

int gb_shards_select(gb_shards *S, const gb_replay_request *req, gb_replay_selection *sel,
                     const gb_replay_dst *dst, int ndst, float *weight, int64_t *n,
                     gb_error *err)
{
    *n = 0;
    S->my_n = 0;
    int kind = selector_kind(S, req);
    int weighted = kind == GB_SELECTOR_UNIFORM || kind == GB_SELECTOR_WEIGHTED;
    if (sel->capacity < S->B)
        return gb_error_set(err, GB_EINVAL, "shards: a selection of %lld items cannot hold a "
                            "shard's share of up to %lld", (long long)sel->capacity,
                            (long long)S->B);
    int rc = weighted ? select_weighted(S, req, sel, err) : select_ordered(S, kind, req, sel, err);
    if (rc)
        return rc;
    count_slots(S);
    int64_t fewest = 0;
    if ((rc = exchange(S, req, dst, ndst, weighted, &fewest, err)))
        return rc;
    /* Every rank knows every trainer's count: if some trainer got no row, nobody trains. */
    if (fewest == 0)
        return 0;
    memcpy(weight, S->my_weight, (size_t)S->my_n * sizeof *weight);
    *n = S->my_n;
    return 0;
}

int gb_shards_update_priorities(gb_shards *S, const double *priority, gb_error *err)
{
    /* A trainer's rows are grouped by owner: recv_rows[s] of them go back to owner s; as owner,
     * this rank gets send_rows[t] from trainer t, for its draws in the order it sent them. */
    for (int s = 0; s < S->size; s++) {
        S->prio_send[s] = (size_t)S->recv_rows[s] * sizeof *priority;
        S->prio_recv[s] = (size_t)S->send_rows[s] * sizeof *priority;
    }
    int rc = gb_group_alltoall(S->g, priority, S->prio_send, S->prio_in, S->prio_recv, err);
    if (rc)
        return rc;
    int64_t k = 0, i = 0;
    for (int t = 0; t < S->size; t++) {
        int64_t first = slot_offset(S, S->rank, t);
        for (int64_t m = 0; m < S->send_rows[t]; m++, i++) {
            if (isnan(S->prio_in[i]))
                continue;
            S->upd_idx[k] = S->own_idx[first + m];
            S->upd_key[k] = S->own_key[first + m];
            S->upd_prio[k++] = S->prio_in[i];
        }
    }
    return k ? gb_replay_update_priorities(S->r, k, S->upd_idx, S->upd_key, S->upd_prio, NULL,
                                           err)
             : 0;
}

void gb_shards_last(const gb_shards *S, gb_shards_batch *b)
{
    *b = (gb_shards_batch){S->my_n,   S->my_index,   S->my_pos,     S->my_prob,
                           S->my_weight, S->union_size, S->send_bytes, S->recv_bytes};
}
