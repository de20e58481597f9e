/* kernels/gather_plan.h: how a gather is cut into units of work, shared by the CUDA kernel (one
 * warp per unit) and the CPU (tests run every unit through memcpy and compare with the reference,
 * so the kernel's offset arithmetic is checked on machines without a GPU). Private to kernels/.
 * A unit is at most GB_KERNELS_GATHER_CHUNK bytes of one batch row of one column.
 * defines: gb_kernels_gather_plan, gb_kernels_gather_plan_build, gb_kernels_gather_unit,
 *          gb_kernels_gather_unit_at, GB_KERNELS_GATHER_CHUNK */
#ifndef GB_KERNELS_GATHER_PLAN_H
#define GB_KERNELS_GATHER_PLAN_H

#include "kernels/draw.h" /* GB_KERNELS_HD */
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_KERNELS_GATHER_CHUNK 8192 /* bytes per unit; a multiple of every load width */

typedef struct gb_kernels_gather_col {
    const char *src;       /* table base (device-accessible for the kernel) */
    char *dst;             /* batch (k, count, step_bytes) */
    uint64_t row_stride;
    uint64_t step_bytes;
    uint64_t len;          /* bytes per batch row: count * step_bytes */
    uint64_t chunks;       /* units per batch row */
    uint64_t units_before; /* units of the plan's earlier columns */
    uint32_t width;        /* load width: 16, 8, 4, 2 or 1 bytes */
} gb_kernels_gather_col;

/* One launch: up to GB_KERNELS_MAX_COLUMNS columns (passed to the kernel by value). */
typedef struct gb_kernels_gather_plan {
    gb_kernels_gather_col col[GB_KERNELS_MAX_COLUMNS];
    int ncols;
    const int64_t *indices; /* (k,) */
    const uint32_t *starts; /* (k,) or NULL */
    const int32_t *lengths; /* (k,) or NULL */
    uint64_t first;         /* first step when starts is NULL */
    uint64_t units;         /* total units */
    /* kernel: nonzero when the call's check found a bad index */
    const unsigned long long *call_bad;
} gb_kernels_gather_plan;

/* Fills plan with columns cols[0..min(ncols, GB_KERNELS_MAX_COLUMNS)) (already checked by
 * gb_kernels_gather_check) and returns how many it took. Picks each column's load width: the
 * widest of 16/8/4/2/1 dividing its table and batch addresses, stride, row length, and its step
 * offset (or step size, with per-item starts or lengths). */
int gb_kernels_gather_plan_build(gb_kernels_gather_plan *plan, const gb_kernels_column *cols,
                                 int ncols, const int64_t *indices, int64_t k,
                                 const gb_kernels_steps *steps);

typedef struct gb_kernels_gather_unit {
    const char *src;
    char *dst;
    uint64_t bytes; /* bytes of the unit */
    uint64_t valid; /* the first `valid` bytes are copied, the rest zero-filled */
    uint32_t width;
} gb_kernels_gather_unit;

/* Unit u of the plan (u < plan->units). */
GB_KERNELS_HD gb_kernels_gather_unit gb_kernels_gather_unit_at(const gb_kernels_gather_plan *p,
                                                               uint64_t u)
{
    int c = 0;
    while (c + 1 < p->ncols && u >= p->col[c + 1].units_before)
        c++;
    const gb_kernels_gather_col *col = &p->col[c];
    uint64_t local = u - col->units_before;
    uint64_t item = local / col->chunks;
    uint64_t begin = (local - item * col->chunks) * GB_KERNELS_GATHER_CHUNK;
    uint64_t end = begin + GB_KERNELS_GATHER_CHUNK < col->len ? begin + GB_KERNELS_GATHER_CHUNK
                                                              : col->len;
    uint64_t first = p->starts ? (uint64_t)p->starts[item] : p->first;
    gb_kernels_gather_unit w;
    w.src = col->src + (uint64_t)p->indices[item] * col->row_stride + first * col->step_bytes +
            begin;
    w.dst = col->dst + item * col->len + begin;
    w.bytes = end - begin;
    w.valid = w.bytes;
    if (p->lengths) {
        /* Bytes of the row inside the item's valid steps; this unit's share of them. */
        int64_t v = (int64_t)p->lengths[item] - (int64_t)first;
        uint64_t vb = v <= 0 ? 0 : (uint64_t)v * col->step_bytes;
        w.valid = vb <= begin ? 0 : vb >= end ? w.bytes : vb - begin;
    }
    w.width = col->width;
    return w;
}

#ifdef __cplusplus
}
#endif

#endif
