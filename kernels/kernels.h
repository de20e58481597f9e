/* kernels/kernels.h: GPU kernels (CUDA C) and the CPU reference of each, same semantics.
 * defines: gb_kernels_device_count, gb_kernels_cuda_built */
#ifndef GB_KERNELS_KERNELS_H
#define GB_KERNELS_KERNELS_H

#include "runtime/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the CUDA kernels, else 0. */
int gb_kernels_cuda_built(void);

/* Number of usable CUDA devices: 0 when the build has no CUDA, no driver or no device (never an
 * error: callers fall back to the CPU path). */
int gb_kernels_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
