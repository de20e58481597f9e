/* replay/sumtree.h: an 8-ary sum tree of doubles for weighted selection: O(log8 n) updates and
 * draws; a batch of draws descends level by level with prefetching so that its cache misses
 * overlap. Every node is the sum of its children recomputed in a fixed order (no drift: the tree
 * is a pure function of its leaves, so a rebuilt tree is bit-identical).
 * defines: gb_sumtree, gb_sumtree_init, gb_sumtree_free, gb_sumtree_set, gb_sumtree_get,
 *          gb_sumtree_total, gb_sumtree_draw */
#ifndef GB_REPLAY_SUMTREE_H
#define GB_REPLAY_SUMTREE_H

#include "runtime/base/error.h"
#include "runtime/base/rng.h"

#include <stdint.h>

#define GB_SUMTREE_FANOUT 8
#define GB_SUMTREE_MAX_LEVELS 24

typedef struct gb_sumtree {
    int64_t n;                              /* leaves */
    int levels;                             /* level 0 = leaves; levels-1 has <= 8 entries */
    int64_t len[GB_SUMTREE_MAX_LEVELS];     /* entries per level (multiple of 8) */
    double *lvl[GB_SUMTREE_MAX_LEVELS];     /* 64-byte aligned */
} gb_sumtree;

int gb_sumtree_init(gb_sumtree *t, int64_t n, gb_error *err);
void gb_sumtree_free(gb_sumtree *t);
void gb_sumtree_set(gb_sumtree *t, int64_t i, double w);
static inline double gb_sumtree_get(const gb_sumtree *t, int64_t i) { return t->lvl[0][i]; }
double gb_sumtree_total(const gb_sumtree *t);

/* Draws n leaves with probability w_i / total into idx (total must be > 0). scratch: 2 * n
 * entries of working space. */
void gb_sumtree_draw(const gb_sumtree *t, int64_t n, gb_rng *rng, int64_t *idx, int64_t *scratch);

#endif
