/* kernels/gather_cpu.c: CPU reference of the gather (one memcpy per row and column), and the
 * argument checks and launch plan it shares with the GPU gather (kernels/gather.cu). */
#include "kernels/gather_check.h"
#include "kernels/gather_plan.h"

#include <string.h>

int gb_kernels_gather_check(const gb_kernels_column *cols, int ncols, int64_t k,
                            const gb_kernels_steps *steps, gb_kernels_gather_limits *limits,
                            gb_error *err)
{
    if (ncols < 0 || (ncols > 0 && !cols) || k < 0 || !steps)
        return gb_error_set(err, GB_EINVAL, "gather: bad arguments (%d columns, k %lld)", ncols,
                            (long long)k);
    if (steps->count == 0)
        return gb_error_set(err, GB_EINVAL, "gather: empty step range");
    uint64_t capacity = UINT64_MAX;
    uint32_t max_start = UINT32_MAX;
    for (int c = 0; c < ncols; c++) {
        const gb_kernels_column *col = &cols[c];
        if (col->step_bytes == 0 || col->steps == 0)
            return gb_error_set(err, GB_EINVAL, "gather: column %d has no steps or no bytes", c);
        if (k > 0 && (!col->src || !col->dst))
            return gb_error_set(err, GB_EINVAL, "gather: column %d has a NULL table or batch", c);
        if (col->step_bytes > UINT64_MAX / col->steps ||
            col->row_stride < col->step_bytes * col->steps)
            return gb_error_set(err, GB_EINVAL,
                                "gather: column %d: row stride %llu below %u steps x %llu bytes",
                                c, (unsigned long long)col->row_stride, col->steps,
                                (unsigned long long)col->step_bytes);
        if (col->capacity > (uint64_t)INT64_MAX ||
            (col->row_stride > 0 && col->capacity > UINT64_MAX / col->row_stride))
            return gb_error_set(err, GB_EINVAL, "gather: column %d: capacity %llu too large", c,
                                (unsigned long long)col->capacity);
        if ((uint64_t)k > 0 && (uint64_t)steps->count * col->step_bytes > UINT64_MAX / (uint64_t)k)
            return gb_error_set(err, GB_EINVAL, "gather: column %d: batch size overflows", c);
        if (steps->count > col->steps)
            return gb_error_set(err, GB_EINVAL, "gather: column %d: %u steps asked, items hold %u",
                                c, steps->count, col->steps);
        if (!steps->starts && (uint64_t)steps->first + steps->count > col->steps)
            return gb_error_set(err, GB_EINVAL,
                                "gather: column %d: steps [%u, %llu) outside items of %u steps", c,
                                steps->first, (unsigned long long)steps->first + steps->count,
                                col->steps);
        if (col->capacity < capacity)
            capacity = col->capacity;
        if (col->steps - steps->count < max_start)
            max_start = col->steps - steps->count;
    }
    limits->capacity = ncols > 0 ? capacity : 0;
    limits->max_start = max_start;
    return 0;
}

int gb_kernels_gather_cpu(const gb_kernels_column *cols, int ncols, const int64_t *indices,
                          int64_t k, const gb_kernels_steps *steps, gb_error *err)
{
    gb_kernels_gather_limits lim;
    int rc = gb_kernels_gather_check(cols, ncols, k, steps, &lim, err);
    if (rc)
        return rc;
    if (ncols == 0 || k == 0)
        return 0;
    if (!indices)
        return gb_error_set(err, GB_EINVAL, "gather: NULL indices");
    for (int64_t i = 0; i < k; i++) {
        if (indices[i] < 0 || (uint64_t)indices[i] >= lim.capacity)
            return gb_error_set(err, GB_EINVAL, "gather: index %lld at %lld outside [0, %llu)",
                                (long long)indices[i], (long long)i,
                                (unsigned long long)lim.capacity);
        if (steps->starts && steps->starts[i] > lim.max_start)
            return gb_error_set(err, GB_EINVAL,
                                "gather: start %u at %lld leaves fewer than %u steps",
                                steps->starts[i], (long long)i, steps->count);
    }
    for (int c = 0; c < ncols; c++) {
        const gb_kernels_column *col = &cols[c];
        const char *src = (const char *)col->src;
        char *dst = (char *)col->dst;
        uint64_t len = (uint64_t)steps->count * col->step_bytes;
        for (int64_t i = 0; i < k; i++) {
            uint64_t first = steps->starts ? steps->starts[i] : steps->first;
            uint64_t off = (uint64_t)indices[i] * col->row_stride + first * col->step_bytes;
            uint64_t valid = len;
            if (steps->lengths) {
                int64_t v = (int64_t)steps->lengths[i] - (int64_t)first;
                valid = v <= 0                        ? 0
                        : (uint64_t)v >= steps->count ? len
                                                      : (uint64_t)v * col->step_bytes;
            }
            memcpy(dst + (uint64_t)i * len, src + off, valid);
            memset(dst + (uint64_t)i * len + valid, 0, len - valid);
        }
    }
    return 0;
}

/* The widest load every address and size of this column allows. */
static uint32_t column_width(const gb_kernels_column *col, const gb_kernels_steps *steps)
{
    /* With per-item starts or lengths, offsets are any multiple of step_bytes. */
    uint64_t first = steps->starts || steps->lengths ? col->step_bytes
                                                     : (uint64_t)steps->first * col->step_bytes;
    uint64_t bits = (uint64_t)(uintptr_t)col->src | (uint64_t)(uintptr_t)col->dst |
                    col->row_stride | first | (uint64_t)steps->count * col->step_bytes;
    uint32_t w = 16;
    while (w > 1 && (bits & (w - 1)))
        w >>= 1;
    return w;
}

int gb_kernels_gather_plan_build(gb_kernels_gather_plan *plan, const gb_kernels_column *cols,
                                 int ncols, const int64_t *indices, int64_t k,
                                 const gb_kernels_steps *steps)
{
    memset(plan, 0, sizeof(*plan));
    plan->ncols = ncols < GB_KERNELS_MAX_COLUMNS ? ncols : GB_KERNELS_MAX_COLUMNS;
    plan->indices = indices;
    plan->starts = steps->starts;
    plan->lengths = steps->lengths;
    plan->first = steps->first;
    for (int c = 0; c < plan->ncols; c++) {
        gb_kernels_gather_col *g = &plan->col[c];
        g->src = (const char *)cols[c].src;
        g->dst = (char *)cols[c].dst;
        g->row_stride = cols[c].row_stride;
        g->step_bytes = cols[c].step_bytes;
        g->len = (uint64_t)steps->count * cols[c].step_bytes;
        g->chunks = (g->len + GB_KERNELS_GATHER_CHUNK - 1) / GB_KERNELS_GATHER_CHUNK;
        g->units_before = plan->units;
        g->width = column_width(&cols[c], steps);
        plan->units += g->chunks * (uint64_t)k;
    }
    return plan->ncols;
}
