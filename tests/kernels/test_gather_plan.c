/* tests/kernels/test_gather_plan.c: the GPU gather's work split (kernels/gather_plan.h), executed
 * on the CPU: every unit of every launch plan is run through memcpy/memset exactly as a warp would
 * run it, and the batches must equal the CPU reference's; units must cover each batch byte once,
 * and every load must be aligned to the width the plan chose. Runs without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gather_plan.h"
#include "runtime/base/rng.h"
#include "test.h"

typedef struct colspec {
    uint64_t step_bytes, pad;
    uint32_t want_width; /* expected load width, 0 = don't check */
} colspec;

static gb_rng rng;

static void run_case(const colspec *spec, int ncols, uint64_t capacity, uint32_t T, int64_t k,
                     gb_kernels_steps steps_in, int use_starts, int use_lengths)
{
    gb_error err = {0};
    gb_kernels_column want[40], got[40];
    unsigned char *tables[40], *cover[40];
    uint32_t *starts = malloc((size_t)k * 4);
    int32_t *lengths = malloc((size_t)k * 4);
    int64_t *idx = malloc((size_t)k * 8);
    for (int64_t i = 0; i < k; i++) {
        idx[i] = (int64_t)gb_rng_below(&rng, capacity);
        starts[i] = (uint32_t)gb_rng_below(&rng, T - steps_in.count + 1);
        lengths[i] = (int32_t)gb_rng_below(&rng, T + 2) - 1; /* -1 .. T */
    }
    gb_kernels_steps steps = steps_in;
    steps.starts = use_starts ? starts : NULL;
    steps.lengths = use_lengths ? lengths : NULL;
    for (int c = 0; c < ncols; c++) {
        uint64_t stride = T * spec[c].step_bytes + spec[c].pad;
        size_t tbytes = (size_t)(capacity * stride + 64) / 64 * 64;
        size_t bbytes = (size_t)((uint64_t)k * steps.count * spec[c].step_bytes + 64) / 64 * 64;
        tables[c] = aligned_alloc(64, tbytes);
        for (size_t b = 0; b < tbytes; b++)
            tables[c][b] = (unsigned char)gb_rng_next(&rng);
        gb_kernels_column col = {tables[c], aligned_alloc(64, bbytes), capacity, stride,
                                 spec[c].step_bytes, T};
        want[c] = col;
        got[c] = col;
        got[c].dst = aligned_alloc(64, bbytes);
        memset(want[c].dst, 0xA5, bbytes);
        memset(got[c].dst, 0x5A, bbytes);
        cover[c] = calloc(bbytes, 1);
    }
    CHECK_OK(gb_kernels_gather_cpu(want, ncols, idx, k, &steps, &err));
    int launches = 0;
    for (int c0 = 0; c0 < ncols; launches++) {
        gb_kernels_gather_plan plan;
        int took = gb_kernels_gather_plan_build(&plan, got + c0, ncols - c0, idx, k, &steps);
        CHECK(took >= 1 && took <= GB_KERNELS_MAX_COLUMNS);
        for (int c = 0; c < took; c++)
            if (spec[c0 + c].want_width)
                CHECK_MSG(plan.col[c].width == spec[c0 + c].want_width,
                          "column %d width %u, want %u", c0 + c, plan.col[c].width,
                          spec[c0 + c].want_width);
        for (uint64_t u = 0; u < plan.units; u++) {
            gb_kernels_gather_unit w = gb_kernels_gather_unit_at(&plan, u);
            CHECK(w.bytes > 0 && w.bytes <= GB_KERNELS_GATHER_CHUNK && w.valid <= w.bytes);
            CHECK((uintptr_t)w.src % w.width == 0 && (uintptr_t)w.dst % w.width == 0);
            CHECK(w.bytes % w.width == 0 && w.valid % w.width == 0);
            memcpy(w.dst, w.src, w.valid);
            memset(w.dst + w.valid, 0, w.bytes - w.valid);
            for (int c = c0; c < c0 + took; c++) /* which batch does this unit write? */
                if (w.dst >= (char *)got[c].dst &&
                    w.dst < (char *)got[c].dst + (uint64_t)k * steps.count * spec[c].step_bytes)
                    for (uint64_t b = 0; b < w.bytes; b++)
                        cover[c][(uint64_t)(w.dst - (char *)got[c].dst) + b]++;
        }
        c0 += took;
    }
    CHECK_EQ_INT(launches, (ncols + GB_KERNELS_MAX_COLUMNS - 1) / GB_KERNELS_MAX_COLUMNS);
    for (int c = 0; c < ncols; c++) {
        uint64_t bytes = (uint64_t)k * steps.count * spec[c].step_bytes;
        int once = 1;
        for (uint64_t b = 0; b < bytes; b++)
            once &= cover[c][b] == 1;
        CHECK_MSG(once, "column %d: some batch byte written zero or several times", c);
        CHECK_MSG(memcmp(want[c].dst, got[c].dst, bytes) == 0,
                  "column %d (step %llu) starts %d lengths %d", c,
                  (unsigned long long)spec[c].step_bytes, use_starts, use_lengths);
        free(tables[c]);
        free((void *)want[c].dst);
        free((void *)got[c].dst);
        free(cover[c]);
    }
    free(starts);
    free(lengths);
    free(idx);
}

static void test_mixed_columns(void)
{
    /* float32x4, bool, 3xfloat32, 3 bytes, 84x84 frame, 4 KiB, padded strides. */
    const colspec plain[] = {{16, 0, 16}, {1, 63, 1}, {12, 20, 4}, {3, 5, 1}, {84 * 84, 64, 16},
                             {4096, 0, 16}};
    const gb_kernels_steps whole = {0, 8, NULL, NULL}, mid = {2, 5, NULL, NULL};
    for (int64_t k = 1; k <= 300; k *= 7) {
        run_case(plain, 6, 100, 8, k, whole, 0, 0);
        run_case(plain, 6, 100, 8, k, mid, 0, 0);
        run_case(plain, 6, 100, 8, k, mid, 1, 0);
        run_case(plain, 6, 100, 8, k, whole, 0, 1);
        run_case(plain, 6, 100, 8, k, mid, 1, 1);
    }
}

static void test_offset_width(void)
{
    /* 12-byte steps from step 3: offset 36 is only 4-aligned; from step 4 with 48-byte rows,
     * everything is 16-aligned. */
    const colspec w4[] = {{12, 20, 4}};
    const colspec w16[] = {{12, 16, 16}};
    run_case(w4, 1, 50, 8, 33, (gb_kernels_steps){3, 4, NULL, NULL}, 0, 0);
    run_case(w16, 1, 50, 8, 33, (gb_kernels_steps){4, 4, NULL, NULL}, 0, 0);
}

static void test_big_rows(void)
{
    /* 1 MiB steps: 128 units per step, lengths cut rows at step boundaries inside a unit's
     * range. */
    const colspec big[] = {{1 << 20, 0, 16}, {(1 << 20) + 4, 0, 4}};
    run_case(big, 2, 6, 4, 5, (gb_kernels_steps){0, 3, NULL, NULL}, 1, 1);
    const colspec odd[] = {{10000, 3, 1}}; /* units end inside steps */
    run_case(odd, 1, 20, 6, 9, (gb_kernels_steps){1, 4, NULL, NULL}, 0, 1);
}

static void test_many_columns(void)
{
    colspec many[37];
    for (int c = 0; c < 37; c++) {
        many[c].step_bytes = (uint64_t)(c % 5 == 0 ? 3 : 4 * (c + 1));
        many[c].pad = (uint64_t)(c % 3) * 16;
        many[c].want_width = 0;
    }
    run_case(many, 37, 40, 4, 17, (gb_kernels_steps){1, 2, NULL, NULL}, 0, 0);
    run_case(many, 37, 40, 4, 17, (gb_kernels_steps){0, 3, NULL, NULL}, 1, 1);
}

int main(void)
{
    gb_rng_seed(&rng, 4242);
    TEST_RUN(test_mixed_columns);
    TEST_RUN(test_offset_width);
    TEST_RUN(test_big_rows);
    TEST_RUN(test_many_columns);
    return test_main_result();
}
