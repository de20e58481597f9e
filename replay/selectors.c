/* replay/selectors.c: the built-in selectors behind gb_replay_selector_ops: uniform, weighted
 * (priority^alpha over an 8-ary sum tree), FIFO, LIFO and top-k (indexed max-heap). Every
 * callback runs under the replay's lock. */
#include "replay/internal.h"
#include "replay/sumtree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grows a scratch array to hold n entries; allocation happens only when a larger batch than any
 * before arrives, never per step. Returns 0 or -1. */
static int grow(int64_t **a, int64_t *cap, int64_t n)
{
    if (n <= *cap)
        return 0;
    int64_t *p = realloc(*a, (size_t)n * sizeof *p);
    if (!p)
        return -1;
    *a = p;
    *cap = n;
    return 0;
}

/* ---- uniform: the dense live set, one draw O(1) ---------------------------------------------- */

static int none_create(void **self, const gb_replay_options *o, const gb_replay_status *st,
                       gb_error *err)
{
    *self = NULL;
    return 0;
}
static void none_destroy(void *self) {}
static void none_insert(void *self, int64_t idx, double priority) {}
static void none_remove(void *self, int64_t idx) {}

static int64_t uniform_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                              int64_t *idx, double *prob)
{
    /* Two passes so that the random reads of the live set overlap instead of queueing. */
    double p = 1.0 / (double)st->size;
    for (int64_t k = 0; k < n; k++) {
        idx[k] = (int64_t)gb_rng_below(rng, (uint64_t)st->size);
        __builtin_prefetch(&st->live[idx[k]]);
    }
    for (int64_t k = 0; k < n; k++) {
        idx[k] = st->live[idx[k]];
        prob[k] = p;
    }
    return n;
}

const gb_replay_selector_ops gb_selector_uniform = {
    "uniform", 1, none_create, none_destroy, none_insert, none_remove, none_insert, uniform_select,
    NULL,
};

/* ---- weighted: P(i) = priority_i^alpha / sum_j priority_j^alpha ------------------------------ */

typedef struct weighted {
    gb_sumtree tree;
    double alpha;
    int64_t *scratch;
    int64_t scratch_cap;
} weighted;

static int weighted_create(void **self, const gb_replay_options *o, const gb_replay_status *st,
                           gb_error *err)
{
    weighted *w = calloc(1, sizeof *w);
    if (!w)
        return gb_error_set(err, GB_ENOMEM, "weighted selector: out of memory");
    int rc = gb_sumtree_init(&w->tree, o->capacity, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->alpha = o->alpha;
    *self = w;
    return 0;
}

static void weighted_destroy(void *self)
{
    weighted *w = self;
    if (!w)
        return;
    gb_sumtree_free(&w->tree);
    free(w->scratch);
    free(w);
}

static double weight_of(const weighted *w, double priority)
{
    if (w->alpha == 1.0)
        return priority;
    if (w->alpha == 0.0)
        return 1.0;
    return pow(priority, w->alpha);
}

static void weighted_set(void *self, int64_t idx, double priority)
{
    weighted *w = self;
    gb_sumtree_set(&w->tree, idx, weight_of(w, priority));
}

static void weighted_remove(void *self, int64_t idx)
{
    gb_sumtree_set(&((weighted *)self)->tree, idx, 0.0);
}

static int64_t weighted_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                               int64_t *idx, double *prob)
{
    weighted *w = self;
    double total = gb_sumtree_total(&w->tree);
    /* Every weight zero (all priorities 0): no item is preferred, so draw uniformly. */
    if (!(total > 0) || grow(&w->scratch, &w->scratch_cap, 2 * n) != 0)
        return uniform_select(NULL, st, n, rng, idx, prob);
    gb_sumtree_draw(&w->tree, n, rng, idx, w->scratch);
    for (int64_t k = 0; k < n; k++)
        prob[k] = gb_sumtree_get(&w->tree, idx[k]) / total;
    return n;
}

static double weighted_total(void *self, const gb_replay_status *st)
{
    (void)st;
    return gb_sumtree_total(&((weighted *)self)->tree);
}

const gb_replay_selector_ops gb_selector_weighted = {
    "weighted",      1, weighted_create, weighted_destroy, weighted_set, weighted_remove,
    weighted_set,    weighted_select, weighted_total,
};

/* ---- FIFO / LIFO: walk the commit-ordered list ---------------------------------------------- */

static int64_t fifo_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                           int64_t *idx, double *prob)
{
    int64_t k = 0;
    for (int64_t i = st->oldest; i >= 0 && k < n; i = st->next[i], k++) {
        idx[k] = i;
        prob[k] = 1.0;
    }
    return k;
}

static int64_t lifo_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                           int64_t *idx, double *prob)
{
    int64_t k = 0;
    for (int64_t i = st->newest; i >= 0 && k < n; i = st->prev[i], k++) {
        idx[k] = i;
        prob[k] = 1.0;
    }
    return k;
}

const gb_replay_selector_ops gb_selector_fifo = {
    "fifo", 0, none_create, none_destroy, none_insert, none_remove, none_insert, fifo_select, NULL,
};
const gb_replay_selector_ops gb_selector_lifo = {
    "lifo", 0, none_create, none_destroy, none_insert, none_remove, none_insert, lifo_select, NULL,
};

/* ---- top-k: indexed max-heap; the k best come out of a best-first walk in O(k log k) --------- */

typedef struct topk {
    gb_rheap heap;
    int64_t *cand; /* best-first frontier: positions in heap.heap, itself a binary heap */
    int64_t cand_cap;
} topk;

static int topk_create(void **self, const gb_replay_options *o, const gb_replay_status *st,
                       gb_error *err)
{
    topk *t = calloc(1, sizeof *t);
    if (!t)
        return gb_error_set(err, GB_ENOMEM, "top-k selector: out of memory");
    int rc = gb_rheap_init(&t->heap, o->capacity, st, gb_rheap_higher_priority, err);
    if (rc) {
        free(t);
        return rc;
    }
    *self = t;
    return 0;
}

static void topk_destroy(void *self)
{
    topk *t = self;
    if (!t)
        return;
    gb_rheap_free(&t->heap);
    free(t->cand);
    free(t);
}

static void topk_insert(void *self, int64_t idx, double priority)
{
    gb_rheap_push(&((topk *)self)->heap, idx);
}
static void topk_remove(void *self, int64_t idx) { gb_rheap_remove(&((topk *)self)->heap, idx); }
static void topk_update(void *self, int64_t idx, double priority)
{
    gb_rheap_fix(&((topk *)self)->heap, idx);
}

static int cand_before(const topk *t, int64_t pa, int64_t pb)
{
    return gb_rheap_higher_priority(t->heap.st, t->heap.heap[pa], t->heap.heap[pb]);
}

static void cand_push(topk *t, int64_t *n, int64_t pos)
{
    int64_t at = (*n)++;
    while (at > 0) {
        int64_t parent = (at - 1) / 2;
        if (!cand_before(t, pos, t->cand[parent]))
            break;
        t->cand[at] = t->cand[parent];
        at = parent;
    }
    t->cand[at] = pos;
}

static int64_t cand_pop(topk *t, int64_t *n)
{
    int64_t best = t->cand[0], last = t->cand[--*n], at = 0;
    for (;;) {
        int64_t c = 2 * at + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && cand_before(t, t->cand[c + 1], t->cand[c]))
            c++;
        if (!cand_before(t, t->cand[c], last))
            break;
        t->cand[at] = t->cand[c];
        at = c;
    }
    t->cand[at] = last;
    return best;
}

static int64_t topk_select(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                           int64_t *idx, double *prob)
{
    topk *t = self;
    if (t->heap.n == 0 || grow(&t->cand, &t->cand_cap, n + 2) != 0)
        return 0;
    int64_t nc = 0, k = 0;
    cand_push(t, &nc, 0);
    while (k < n && nc > 0) {
        int64_t pos = cand_pop(t, &nc);
        idx[k] = t->heap.heap[pos];
        prob[k++] = 1.0;
        for (int64_t c = 2 * pos + 1; c <= 2 * pos + 2; c++)
            if (c < t->heap.n)
                cand_push(t, &nc, c);
    }
    return k;
}

const gb_replay_selector_ops gb_selector_topk = {
    "topk", 0, topk_create, topk_destroy, topk_insert, topk_remove, topk_update, topk_select,
    NULL,
};

const gb_replay_selector_ops *gb_replay_selector_builtin(gb_selector_kind kind)
{
    switch (kind) {
    case GB_SELECTOR_WEIGHTED:
        return &gb_selector_weighted;
    case GB_SELECTOR_FIFO:
        return &gb_selector_fifo;
    case GB_SELECTOR_LIFO:
        return &gb_selector_lifo;
    case GB_SELECTOR_TOPK:
        return &gb_selector_topk;
    case GB_SELECTOR_UNIFORM:
    default:
        return &gb_selector_uniform;
    }
}

int gb_selector_stateless(const gb_replay_selector_ops *ops)
{
    return ops == &gb_selector_uniform || ops == &gb_selector_fifo || ops == &gb_selector_lifo;
}

/* The built-in selector's name (replay/kinds.h, as the config spells it), or "?". */
const char *gb_replay_selector_name(int kind)
{
    return kind >= 0 && kind < GB_REPLAY_SELECTORS ? gb_selector_kind_names[kind] : "?";
}

int gb_replay_selector_parse(const char *name, int *kind, gb_error *err)
{
    if (!name || !name[0] || strcmp(name, "default") == 0) {
        *kind = GB_REPLAY_SELECTOR_PRIMARY;
        return 0;
    }
    for (int k = 0; k < GB_REPLAY_SELECTORS; k++)
        if (strcmp(name, gb_replay_selector_name(k)) == 0) {
            *kind = k;
            return 0;
        }
    return gb_error_set(err, GB_EINVAL, "unknown selector '%.64s' (expected default, uniform, "
                        "weighted, fifo, lifo or topk)", name);
}

size_t gb_replay_selector_names(unsigned mask, const char *sep, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap)
        buf[0] = '\0';
    for (int k = 0; k < GB_REPLAY_SELECTORS; k++) {
        if (!(mask & (1u << k)))
            continue;
        int w = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s%s",
                         n ? sep : "", gb_replay_selector_name(k));
        n += w > 0 ? (size_t)w : 0;
    }
    return n;
}
