/* replay/sumtree.c: the 8-ary sum tree behind weighted selection (see sumtree.h). */
#include "replay/sumtree.h"

#include <stdlib.h>
#include <string.h>

void gb_sumtree_free(gb_sumtree *t)
{
    for (int l = 0; l < t->levels; l++)
        free(t->lvl[l]);
    memset(t, 0, sizeof *t);
}

int gb_sumtree_init(gb_sumtree *t, int64_t n, gb_error *err)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    int64_t entries = n;
    for (;;) {
        if (t->levels == GB_SUMTREE_MAX_LEVELS) {
            gb_sumtree_free(t);
            return gb_error_set(err, GB_EINVAL, "sum tree: %lld leaves is too many", (long long)n);
        }
        int64_t len = (entries + GB_SUMTREE_FANOUT - 1) / GB_SUMTREE_FANOUT * GB_SUMTREE_FANOUT;
        double *a = aligned_alloc(64, (size_t)len * sizeof *a);
        if (!a) {
            gb_sumtree_free(t);
            return gb_error_set(err, GB_ENOMEM, "sum tree: %lld entries", (long long)len);
        }
        memset(a, 0, (size_t)len * sizeof *a);
        t->len[t->levels] = len;
        t->lvl[t->levels++] = a;
        if (len <= GB_SUMTREE_FANOUT)
            break;
        entries = len / GB_SUMTREE_FANOUT;
    }
    return 0;
}

static inline double sum8(const double *c)
{
    /* Fixed order, so the sum is a pure function of the children. */
    return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
}

void gb_sumtree_set(gb_sumtree *t, int64_t i, double w)
{
    t->lvl[0][i] = w;
    for (int l = 1; l < t->levels; l++) {
        int64_t group = i / GB_SUMTREE_FANOUT;
        t->lvl[l][group] = sum8(t->lvl[l - 1] + group * GB_SUMTREE_FANOUT);
        i = group;
    }
}

double gb_sumtree_total(const gb_sumtree *t) { return sum8(t->lvl[t->levels - 1]); }

/* Finds the child of an 8-entry group that holds *u and subtracts what lies before it:
 * the count of running sums <= u is the child (branch-free: the draws' paths are random, so a
 * branchy scan mispredicts at every level). Zero-weight children are never chosen: their running
 * sum equals the previous one. Rounding can leave *u at or past the group's sum: then the last
 * non-empty child is taken. */
static inline int pick8(const double *c, double *u)
{
    double x = *u, run[GB_SUMTREE_FANOUT], acc = 0;
    int j = 0;
    for (int i = 0; i < GB_SUMTREE_FANOUT; i++) {
        acc += c[i];
        run[i] = acc;
        j += run[i] <= x;
    }
    if (__builtin_expect(j == GB_SUMTREE_FANOUT, 0)) {
        j = GB_SUMTREE_FANOUT - 1;
        while (j > 0 && !(c[j] > 0))
            j--;
        *u = c[j] * 0.5;
        return j;
    }
    *u = j ? x - run[j - 1] : x;
    return j;
}

void gb_sumtree_draw(const gb_sumtree *t, int64_t n, gb_rng *rng, int64_t *idx, int64_t *scratch)
{
    double total = gb_sumtree_total(t);
    double *u = (double *)scratch; /* n doubles */
    int64_t *node = scratch + n;   /* n group indices into the current level */
    int top = t->levels - 1;
    for (int64_t k = 0; k < n; k++) {
        u[k] = gb_rng_uniform(rng) * total;
        node[k] = pick8(t->lvl[top], &u[k]);
    }
    for (int l = top - 1; l >= 0; l--) {
        /* The groups this level will read are known from the level above: prefetch a fixed
         * distance ahead so that about that many misses are in flight at once. */
        const double *a = t->lvl[l];
        enum { AHEAD = 16 };
        for (int64_t k = 0; k < n && k < AHEAD; k++)
            __builtin_prefetch(a + node[k] * GB_SUMTREE_FANOUT);
        for (int64_t k = 0; k < n; k++) {
            if (k + AHEAD < n)
                __builtin_prefetch(a + node[k + AHEAD] * GB_SUMTREE_FANOUT);
            int64_t g = node[k] * GB_SUMTREE_FANOUT;
            node[k] = g + pick8(a + g, &u[k]);
        }
    }
    memcpy(idx, node, (size_t)n * sizeof *idx);
}
