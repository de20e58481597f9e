/* kernels/gather_check.h: argument checks shared by the CPU and GPU gathers (private to kernels/).
 * defines: gb_kernels_gather_limits, gb_kernels_gather_check */
#ifndef GB_KERNELS_GATHER_CHECK_H
#define GB_KERNELS_GATHER_CHECK_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What every index and start of a call must respect, across all its columns. */
typedef struct gb_kernels_gather_limits {
    uint64_t capacity;  /* indices in [0, capacity) */
    uint32_t max_start; /* starts[i] <= max_start (so starts[i] + count <= T of every column) */
} gb_kernels_gather_limits;

/* Checks the columns and the step range (not the indices, which may live on the device) and
 * fills *limits. Returns 0 or GB_EINVAL with a message naming the column. */
int gb_kernels_gather_check(const gb_kernels_column *cols, int ncols, int64_t k,
                            const gb_kernels_steps *steps, gb_kernels_gather_limits *limits,
                            gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
