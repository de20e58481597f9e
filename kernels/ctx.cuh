/* kernels/ctx.cuh: the GPU context's layout and the CUDA error helpers (private to the .cu files
 * of kernels/).
 * defines: gb_kernels_ctx, gb_kernels_status, GB_CUDA_CHECK, gb_kernels_cuda_fail,
 *          gb_kernels_arena, gb_kernels_align, gb_kernels_begin_call */
#ifndef GB_KERNELS_CTX_CUH
#define GB_KERNELS_CTX_CUH

#include <cuda_runtime.h>

#include "kernels/kernels.h"

/* Errors only the device sees; accumulated until gb_kernels_sync copies and clears them. */
typedef struct gb_kernels_status {
    unsigned long long invalid;  /* indices or starts out of range (scatter, gather) */
    unsigned long long empty;    /* selections that found nothing selectable */
    unsigned long long overflow; /* weighted selections whose total weight was infinite */
    double total;                /* total weight of the last weighted selection */
} gb_kernels_status;

struct gb_kernels_ctx {
    int device;
    int sm_count;
    cudaStream_t stream;
    int own_stream;
    void *arena; /* scratch reused by every call (stream-ordered, so calls never overlap) */
    size_t arena_bytes;
    gb_kernels_status *status;    /* device */
    gb_kernels_status *hstatus;   /* pinned host copy, read by gb_kernels_sync */
    unsigned long long *call_bad; /* device: set by a call's check kernel, read by its work
                                     kernel */
    cudaEvent_t timer[2];
    cudaEvent_t fence; /* gb_kernels_after_default_stream */
    double last_total;
};

/* Fills err with the CUDA error (clearing it when it is not sticky) and returns GB_ECUDA. */
int gb_kernels_cuda_fail(gb_error *err, cudaError_t e, const char *what, const char *file,
                         int line);

/* Returns GB_ECUDA from the enclosing function (which has a gb_error *err) when call fails. */
#define GB_CUDA_CHECK(call)                                                                       \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return gb_kernels_cuda_fail(err, e_, #call, __FILE__, __LINE__);                      \
    } while (0)

/* Rounds a scratch size up so carved pieces stay 256-byte aligned. */
static inline size_t gb_kernels_align(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* Returns in *out a scratch area of at least bytes, growing the arena (after waiting for the
 * stream) when it is too small. */
int gb_kernels_arena(gb_kernels_ctx *ctx, size_t bytes, void **out, gb_error *err);

/* Selects the context's device; every entry point calls it first. */
int gb_kernels_begin_call(gb_kernels_ctx *ctx, gb_error *err);

/* Scratch each operation needs (select.cu), for gb_kernels_ctx_reserve. */
int gb_kernels_select_scratch(int64_t n, int64_t m, size_t *bytes, gb_error *err);

#endif
