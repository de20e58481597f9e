/* kernels/device_none.c: the GPU entry points of a build without CUDA. Each says so and returns
 * GB_EUNSUPPORTED; the CPU references (select_cpu.c, gather_cpu.c) are built either way. */
#include "kernels/kernels.h"

int gb_kernels_cuda_built(void) { return 0; }
int gb_kernels_device_count(void) { return 0; }

static int no_cuda(gb_error *err, const char *what)
{
    return gb_error_set(err, GB_EUNSUPPORTED, "%s: this gearbox was built without CUDA", what);
}

int gb_kernels_ctx_create(int device, void *stream, gb_kernels_ctx **out, gb_error *err)
{
    if (out)
        *out = NULL;
    return no_cuda(err, "kernels context");
}

void gb_kernels_ctx_destroy(gb_kernels_ctx *ctx) {}

int gb_kernels_ctx_reserve(gb_kernels_ctx *ctx, int64_t n, int64_t k, int64_t m, gb_error *err)
{
    return no_cuda(err, "kernels reserve");
}

void *gb_kernels_ctx_stream(gb_kernels_ctx *ctx) { return NULL; }

int gb_kernels_sync(gb_kernels_ctx *ctx, gb_error *err) { return no_cuda(err, "kernels sync"); }

double gb_kernels_last_total(const gb_kernels_ctx *ctx) { return 0.0; }

int gb_kernels_select_weighted(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                               double alpha, int64_t k, uint64_t seed, int stratified,
                               int64_t *indices, float *probs, gb_error *err)
{
    return no_cuda(err, "weighted selection");
}

int gb_kernels_select_weighted_tiles(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                                     double alpha, int64_t k, uint64_t seed, int stratified,
                                     int64_t *indices, float *probs, gb_error *err)
{
    return no_cuda(err, "weighted selection");
}

int gb_kernels_select_uniform(gb_kernels_ctx *ctx, int64_t n, const int64_t *candidates,
                              int64_t k, uint64_t seed, int64_t *indices, float *probs,
                              gb_error *err)
{
    return no_cuda(err, "uniform selection");
}

int gb_kernels_select_topk(gb_kernels_ctx *ctx, const float *priorities, int64_t n, int64_t k,
                           int64_t *indices, float *values, gb_error *err)
{
    return no_cuda(err, "top-k");
}

int gb_kernels_scatter(gb_kernels_ctx *ctx, float *mirror, int64_t capacity,
                       const int64_t *indices, const float *values, int64_t m, gb_error *err)
{
    return no_cuda(err, "scatter");
}

int gb_kernels_gather(gb_kernels_ctx *ctx, const gb_kernels_column *cols, int ncols,
                      const int64_t *indices, int64_t k, const gb_kernels_steps *steps,
                      gb_error *err)
{
    return no_cuda(err, "gather");
}

int gb_kernels_gather_staged(gb_kernels_ctx *ctx, const gb_kernels_column *cols, int ncols,
                             const int64_t *indices, int64_t k, const gb_kernels_steps *steps,
                             void *staging, size_t staging_bytes, gb_error *err)
{
    return no_cuda(err, "staged gather");
}

int gb_kernels_host_register(void *ptr, size_t bytes, int read_only, void **dev_ptr,
                             gb_error *err)
{
    return no_cuda(err, "host register");
}

int gb_kernels_host_unregister(void *ptr, gb_error *err) { return no_cuda(err, "host unregister"); }

int gb_kernels_host_alloc(size_t bytes, void **out, gb_error *err)
{
    if (out)
        *out = NULL;
    return no_cuda(err, "pinned allocation");
}

void gb_kernels_host_free(void *ptr) {}

int gb_kernels_device_alloc(size_t bytes, void **out, gb_error *err)
{
    if (out)
        *out = NULL;
    return no_cuda(err, "device allocation");
}

void gb_kernels_device_free(void *ptr) {}

int gb_kernels_current_device(void) { return 0; }

int gb_kernels_device_describe(int device, char *buf, size_t size, gb_error *err)
{
    return no_cuda(err, "device description");
}

int gb_kernels_zero(gb_kernels_ctx *ctx, void *dst, size_t bytes, gb_error *err)
{
    return no_cuda(err, "device zero-fill");
}

int gb_kernels_copy(gb_kernels_ctx *ctx, void *dst, const void *src, size_t bytes, gb_error *err)
{
    return no_cuda(err, "device copy");
}

int gb_kernels_stack_expand(gb_kernels_ctx *ctx, int64_t n, int64_t T, int64_t k,
                            uint64_t frame_bytes, const void *frames, const void *past,
                            const uint8_t *valid, void *out, gb_error *err)
{
    return no_cuda(err, "frame stack rebuild");
}

int gb_kernels_timer_start(gb_kernels_ctx *ctx, gb_error *err) { return no_cuda(err, "timer"); }

int gb_kernels_timer_stop(gb_kernels_ctx *ctx, double *us, gb_error *err)
{
    return no_cuda(err, "timer");
}

int gb_kernels_timer_mark(gb_kernels_ctx *ctx, gb_error *err) { return no_cuda(err, "timer"); }

int gb_kernels_timer_read(gb_kernels_ctx *ctx, double *us, gb_error *err)
{
    return no_cuda(err, "timer");
}

int gb_kernels_after_default_stream(gb_kernels_ctx *ctx, gb_error *err)
{
    return no_cuda(err, "stream ordering");
}
