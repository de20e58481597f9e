/* kernels/device_none.c: device discovery for builds without CUDA. */
#include "kernels/kernels.h"

int gb_kernels_cuda_built(void) { return 0; }
int gb_kernels_device_count(void) { return 0; }
