/* kernels/device.cu: CUDA device discovery. */
#include "kernels/kernels.h"

#include <cuda_runtime.h>

extern "C" int gb_kernels_cuda_built(void) { return 1; }

extern "C" int gb_kernels_device_count(void)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device is not an error here: clear it */
        return 0;
    }
    return n;
}
