/* kernels/device.cu: CUDA device discovery. */
#include "kernels/kernels.h"

#include <cuda_runtime.h>

#include <stdio.h>

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

extern "C" int gb_kernels_device_describe(int device, char *buf, size_t size, gb_error *err)
{
    int n = gb_kernels_device_count();
    if (device < 0 || device >= n)
        return gb_error_set(err, GB_EUNSUPPORTED, "no CUDA device %d (%d present)", device, n);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return gb_error_set(err, GB_EUNSUPPORTED, "cudaGetDeviceProperties: %s",
                            cudaGetErrorString(e));
    }
    snprintf(buf, size, "%s, sm_%d%d, %d SMs, %.0f GiB", p.name, p.major, p.minor,
             p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return 0;
}
