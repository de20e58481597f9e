/* tests/kernels/test_gather_cpu.c: the CPU reference gather against a byte-by-byte oracle, with
 * padded rows, odd step sizes (bool, 3 x float32, 3 bytes), step ranges, per-item starts, bad
 * arguments (nothing written), and offsets beyond 4 GiB in a sparse mapping. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"
#include "runtime/base/rng.h"
#include "test.h"

#define POISON 0xA5

typedef struct table {
    unsigned char *base;
    uint64_t capacity, stride, step_bytes;
    uint32_t steps;
} table;

static int table_make(table *t, uint64_t capacity, uint32_t steps, uint64_t step_bytes,
                      uint64_t pad, gb_rng *rng)
{
    t->capacity = capacity;
    t->steps = steps;
    t->step_bytes = step_bytes;
    t->stride = steps * step_bytes + pad;
    t->base = malloc(capacity * t->stride);
    if (!t->base)
        return -1;
    for (uint64_t b = 0; b < capacity * t->stride; b++)
        t->base[b] = (unsigned char)gb_rng_next(rng);
    return 0;
}

static gb_kernels_column column_of(const table *t, void *dst)
{
    gb_kernels_column c = {t->base, dst, t->capacity, t->stride, t->step_bytes, t->steps};
    return c;
}

/* The oracle: byte by byte, straight from the definition. */
static int batch_matches(const table *t, const unsigned char *dst, const int64_t *idx, int64_t k,
                         const gb_kernels_steps *s)
{
    for (int64_t i = 0; i < k; i++)
        for (uint32_t st = 0; st < s->count; st++) {
            uint32_t step = (s->starts ? s->starts[i] : s->first) + st;
            for (uint64_t b = 0; b < t->step_bytes; b++) {
                unsigned char want =
                    s->lengths && (int64_t)step >= s->lengths[i]
                        ? 0
                        : t->base[(uint64_t)idx[i] * t->stride + step * t->step_bytes + b];
                unsigned char got = dst[((uint64_t)i * s->count + st) * t->step_bytes + b];
                if (want != got) {
                    fprintf(stderr, "  item %lld step %u byte %llu: %u != %u\n", (long long)i,
                            step, (unsigned long long)b, got, want);
                    return 0;
                }
            }
        }
    return 1;
}

static void test_gather_columns(void)
{
    enum { NC = 5, K = 97 };
    const uint64_t step_bytes[NC] = {16, 1, 12, 3, 4 * 84}; /* float4, bool, 3xf32, 3 bytes, row */
    const uint64_t pad[NC] = {0, 63, 20, 5, 64};
    const uint32_t T = 16;
    gb_rng rng;
    gb_rng_seed(&rng, 21);
    table t[NC];
    unsigned char *dst[NC];
    gb_kernels_column cols[NC];
    int64_t idx[K];
    uint32_t starts[K];
    int32_t lengths[K];
    gb_error err = {0};
    for (int c = 0; c < NC; c++) {
        CHECK(table_make(&t[c], 300, T, step_bytes[c], pad[c], &rng) == 0);
        dst[c] = malloc(K * T * step_bytes[c]);
        cols[c] = column_of(&t[c], dst[c]);
    }
    for (int i = 0; i < K; i++) {
        idx[i] = (int64_t)gb_rng_below(&rng, 300);
        starts[i] = (uint32_t)gb_rng_below(&rng, T - 5 + 1);
        lengths[i] = (int32_t)gb_rng_below(&rng, T + 1); /* 0 (nothing valid) to T (all) */
    }
    idx[3] = idx[4]; /* a repeated index */
    idx[5] = 299;    /* the last row */
    const gb_kernels_steps ranges[] = {{0, T, NULL, NULL},
                                       {3, 7, NULL, NULL},
                                       {T - 1, 1, NULL, NULL},
                                       {0, 5, starts, NULL},
                                       {0, T, NULL, lengths},
                                       {2, 9, NULL, lengths},
                                       {0, 5, starts, lengths}};
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        for (int c = 0; c < NC; c++)
            memset(dst[c], POISON, K * T * step_bytes[c]);
        CHECK_OK(gb_kernels_gather_cpu(cols, NC, idx, K, &ranges[r], &err));
        for (int c = 0; c < NC; c++)
            CHECK_MSG(batch_matches(&t[c], dst[c], idx, K, &ranges[r]), "range %zu column %d", r,
                      c);
    }
    for (int c = 0; c < NC; c++) {
        free(t[c].base);
        free(dst[c]);
    }
}

static int all_poison(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != POISON)
            return 0;
    return 1;
}

static void test_gather_rejects(void)
{
    gb_rng rng;
    gb_rng_seed(&rng, 5);
    table t;
    CHECK(table_make(&t, 10, 4, 8, 0, &rng) == 0);
    unsigned char dst[4 * 4 * 8];
    gb_kernels_column col = column_of(&t, dst);
    int64_t idx[4] = {0, 1, 10, 2};
    uint32_t starts[4] = {0, 1, 2, 3};
    gb_kernels_steps all = {0, 4, NULL, NULL};
    gb_error err = {0};
    memset(dst, POISON, sizeof(dst));
    CHECK_EQ_INT(gb_kernels_gather_cpu(&col, 1, idx, 4, &all, &err), GB_EINVAL);
    idx[2] = -1;
    CHECK_EQ_INT(gb_kernels_gather_cpu(&col, 1, idx, 4, &all, &err), GB_EINVAL);
    idx[2] = 3;
    gb_kernels_steps past = {2, 3, NULL, NULL};
    CHECK_EQ_INT(gb_kernels_gather_cpu(&col, 1, idx, 4, &past, &err), GB_EINVAL);
    gb_kernels_steps empty = {0, 0, NULL, NULL};
    CHECK_EQ_INT(gb_kernels_gather_cpu(&col, 1, idx, 4, &empty, &err), GB_EINVAL);
    gb_kernels_steps per_item = {0, 2, starts, NULL}; /* starts[3] = 3: 3 + 2 > 4 */
    CHECK_EQ_INT(gb_kernels_gather_cpu(&col, 1, idx, 4, &per_item, &err), GB_EINVAL);
    gb_kernels_column narrow = col;
    narrow.row_stride = 31; /* below 4 x 8 */
    CHECK_EQ_INT(gb_kernels_gather_cpu(&narrow, 1, idx, 4, &all, &err), GB_EINVAL);
    CHECK(all_poison(dst, sizeof(dst)));
    starts[3] = 2;
    CHECK_OK(gb_kernels_gather_cpu(&col, 1, idx, 4, &per_item, &err));
    CHECK(batch_matches(&t, dst, idx, 4, &per_item));
    CHECK_OK(gb_kernels_gather_cpu(&col, 1, idx, 0, &all, &err)); /* nothing to do */
    free(t.base);
}

/* Rows beyond 4 GiB: a sparse, never-touched mapping except the rows read. */
static void test_gather_64bit_offsets(void)
{
    const uint64_t stride = 1ULL << 23, capacity = 1024; /* 8 GiB of address space */
    unsigned char *base = mmap(NULL, stride * capacity, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        fprintf(stderr, "  skipped: no 8 GiB of address space\n");
        return;
    }
    table t = {base, capacity, stride, 1000, 3};
    int64_t idx[3] = {1023, 600, 1};
    for (int i = 0; i < 3; i++)
        for (uint64_t b = 0; b < 3000; b++)
            base[(uint64_t)idx[i] * stride + b] = (unsigned char)(b * 7 + (uint64_t)i);
    unsigned char dst[3 * 2 * 1000];
    memset(dst, POISON, sizeof(dst));
    gb_kernels_column col = column_of(&t, dst);
    gb_kernels_steps s = {1, 2, NULL, NULL};
    gb_error err = {0};
    CHECK_OK(gb_kernels_gather_cpu(&col, 1, idx, 3, &s, &err));
    CHECK(batch_matches(&t, dst, idx, 3, &s));
    munmap(base, stride * capacity);
}

int main(void)
{
    TEST_RUN(test_gather_columns);
    TEST_RUN(test_gather_rejects);
    TEST_RUN(test_gather_64bit_offsets);
    return test_main_result();
}
