/* kernels/select_cpu.c: CPU references of weighted, uniform and top-k selection and of the
 * priority scatter (semantics in kernels/kernels.h; the GPU versions are in kernels/select.cu). */
#include "kernels/kernels.h"

#include <math.h>

#include "kernels/draw.h"

uint64_t gb_kernels_seed(uint64_t seed, uint64_t call)
{
    return gb_kernels_mix64(gb_kernels_mix64(seed) ^
                            (call * GB_KERNELS_GOLDEN + 0x3c6ef372fe94f82bULL));
}

static void fill_none(int64_t *indices, float *probs, int64_t k)
{
    for (int64_t i = 0; i < k; i++) {
        indices[i] = GB_KERNELS_NONE;
        if (probs)
            probs[i] = 0.0f;
    }
}

/* First j in [0, n) with cum[j] > t (n when none). */
static int64_t upper_bound(const double *cum, int64_t n, double t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int gb_kernels_select_weighted_cpu(const float *priorities, int64_t n, double alpha, int64_t k,
                                   uint64_t seed, int stratified, double *cum, int64_t *indices,
                                   float *probs, double *total_out, gb_error *err)
{
    if (n < 0 || k < 0 || (n > 0 && (!priorities || !cum)) || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "weighted selection: bad arguments (n %lld, k %lld)",
                            (long long)n, (long long)k);
    if (!(alpha >= 0.0) || isinf(alpha))
        return gb_error_set(err, GB_EINVAL, "weighted selection: alpha %g must be finite and >= 0",
                            alpha);
    double total = 0.0;
    for (int64_t j = 0; j < n; j++) {
        total += gb_kernels_weight(priorities[j], alpha);
        cum[j] = total;
    }
    if (total_out)
        *total_out = total;
    if (k == 0)
        return 0;
    if (!(total > 0.0) || isinf(total)) {
        fill_none(indices, probs, k);
        if (isinf(total))
            return gb_error_set(err, GB_EINVAL, "weighted selection: total weight overflows");
        return gb_error_set(err, GB_EAGAIN, "weighted selection: no selectable item among %lld",
                            (long long)n);
    }
    double below_total = nextafter(total, 0.0);
    for (int64_t i = 0; i < k; i++) {
        double t = gb_kernels_draw_target(seed, (uint64_t)i, (uint64_t)k, stratified, total,
                                          below_total);
        int64_t j = upper_bound(cum, n, t);
        indices[i] = j;
        if (probs)
            probs[i] = (float)(gb_kernels_weight(priorities[j], alpha) / total);
    }
    return 0;
}

int gb_kernels_select_uniform_cpu(int64_t n, const int64_t *candidates, int64_t k, uint64_t seed,
                                  int64_t *indices, float *probs, gb_error *err)
{
    if (n < 0 || k < 0 || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "uniform selection: bad arguments (n %lld, k %lld)",
                            (long long)n, (long long)k);
    if (n == 0) {
        fill_none(indices, probs, k);
        return gb_error_set(err, GB_EAGAIN, "uniform selection: nothing to select from");
    }
    float p = (float)(1.0 / (double)n);
    for (int64_t i = 0; i < k; i++) {
        uint64_t pos = gb_kernels_below(seed, (uint64_t)i, (uint64_t)n);
        indices[i] = candidates ? candidates[pos] : (int64_t)pos;
        if (probs)
            probs[i] = p;
    }
    return 0;
}

/* a ranks before b: higher priority, then lower index. */
static int ranks_before(const float *p, int64_t a, int64_t b)
{
    return p[a] > p[b] || (p[a] == p[b] && a < b);
}

/* Restores the heap below position i (heap[0] is the item ranked last among those kept). */
static void sift_down(const float *p, int64_t *heap, int64_t count, int64_t i)
{
    for (;;) {
        int64_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < count && ranks_before(p, heap[worst], heap[l]))
            worst = l;
        if (r < count && ranks_before(p, heap[worst], heap[r]))
            worst = r;
        if (worst == i)
            return;
        int64_t t = heap[i];
        heap[i] = heap[worst];
        heap[worst] = t;
        i = worst;
    }
}

static void sift_up(const float *p, int64_t *heap, int64_t i)
{
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!ranks_before(p, heap[parent], heap[i]))
            return;
        int64_t t = heap[i];
        heap[i] = heap[parent];
        heap[parent] = t;
        i = parent;
    }
}

int gb_kernels_select_topk_cpu(const float *priorities, int64_t n, int64_t k, int64_t *indices,
                               float *values, int64_t *count_out, gb_error *err)
{
    if (n < 0 || k < 0 || (n > 0 && !priorities) || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "top-k: bad arguments (n %lld, k %lld)",
                            (long long)n, (long long)k);
    /* indices[0..count) is a heap whose root is the kept item ranked last. */
    int64_t count = 0;
    for (int64_t j = 0; j < n && k > 0; j++) {
        if (gb_kernels_weight(priorities[j], 1.0) == 0.0)
            continue;
        if (count < k) {
            indices[count] = j;
            sift_up(priorities, indices, count);
            count++;
        } else if (ranks_before(priorities, j, indices[0])) {
            indices[0] = j;
            sift_down(priorities, indices, count, 0);
        }
    }
    /* Heap sort: move the last-ranked to the end, repeatedly, leaving the best first. */
    for (int64_t end = count - 1; end > 0; end--) {
        int64_t t = indices[0];
        indices[0] = indices[end];
        indices[end] = t;
        sift_down(priorities, indices, end, 0);
    }
    for (int64_t i = 0; i < k; i++) {
        if (i >= count)
            indices[i] = GB_KERNELS_NONE;
        if (values)
            values[i] = i < count ? priorities[indices[i]] : 0.0f;
    }
    if (count_out)
        *count_out = count;
    return 0;
}

int gb_kernels_scatter_cpu(float *mirror, int64_t capacity, const int64_t *indices,
                           const float *values, int64_t m, gb_error *err)
{
    if (capacity < 0 || m < 0 || (m > 0 && (!mirror || !indices || !values)))
        return gb_error_set(err, GB_EINVAL, "scatter: bad arguments (capacity %lld, m %lld)",
                            (long long)capacity, (long long)m);
    for (int64_t i = 0; i < m; i++)
        if (indices[i] < 0 || indices[i] >= capacity)
            return gb_error_set(err, GB_EINVAL, "scatter: index %lld at %lld outside [0, %lld)",
                                (long long)indices[i], (long long)i, (long long)capacity);
    for (int64_t i = 0; i < m; i++)
        mirror[indices[i]] = values[i];
    return 0;
}
