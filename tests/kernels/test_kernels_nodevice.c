/* tests/kernels/test_kernels_nodevice.c: without a device (or without CUDA in the build) the GPU
 * entry points fail cleanly with GB_EUNSUPPORTED and a message, never crash, so callers can fall
 * back to the CPU references. Exits 77 (skip) where a device is present: tests/gpu/ covers it. */
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"

static void test_context_refused(void)
{
    gb_error err = {0};
    gb_kernels_ctx *ctx = (gb_kernels_ctx *)&err; /* must be reset to NULL */
    CHECK_EQ_INT(gb_kernels_ctx_create(0, NULL, &ctx, &err), GB_EUNSUPPORTED);
    CHECK(ctx == NULL);
    CHECK(strlen(err.msg) > 0);
    gb_kernels_ctx_destroy(NULL);
}

static void test_entry_points_refused(void)
{
    if (gb_kernels_cuda_built())
        return; /* with CUDA built, these need a context, which cannot be made here */
    gb_error err = {0};
    int64_t idx[1];
    float f[1] = {1.0f};
    gb_kernels_steps steps = {0, 1, NULL, NULL};
    gb_kernels_column col = {f, f, 1, 4, 4, 1};
    void *p = &err;
    CHECK_EQ_INT(gb_kernels_select_weighted(NULL, f, 1, 0.6, 1, 1, 0, idx, NULL, &err),
                 GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_select_uniform(NULL, 1, NULL, 1, 1, idx, NULL, &err), GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_select_topk(NULL, f, 1, 1, idx, NULL, &err), GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_scatter(NULL, f, 1, idx, f, 1, &err), GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_gather(NULL, &col, 1, idx, 1, &steps, &err), GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_host_register(f, 4, 1, &p, &err), GB_EUNSUPPORTED);
    CHECK_EQ_INT(gb_kernels_device_alloc(16, &p, &err), GB_EUNSUPPORTED);
    CHECK(p == NULL);
    CHECK_EQ_INT(gb_kernels_sync(NULL, &err), GB_EUNSUPPORTED);
}

int main(void)
{
    if (gb_kernels_device_count() > 0) {
        fprintf(stderr, "skipped: a CUDA device is present (tests/gpu covers it)\n");
        return 77;
    }
    TEST_RUN(test_context_refused);
    TEST_RUN(test_entry_points_refused);
    return test_main_result();
}
