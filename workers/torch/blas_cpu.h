/* workers/torch/blas_cpu.h: libtorch's BLAS fitted to the cpu. Debian 12's OpenBLAS (0.3.21)
 * picks its kernels at load time from the cpu's model number, and a model newer than it takes
 * its SSE3 kernels ("Prescott"): on an Intel Xeon with AVX-512 (family 6, model 207) every
 * product libtorch hands it ran at half speed or less (cartpole_novel_lstm's learner call 145 ms
 * against 73 with its AVX-512 kernels). When OpenBLAS is the BLAS, the user has not chosen
 * (OPENBLAS_CORETYPE unset) and it took kernels without AVX2 for a cpu with AVX2 and FMA, this
 * makes it choose again: SkylakeX's kernels where the cpu has AVX-512, Haswell's where it has
 * AVX2. Called once, when the bridge is loaded (module.c), before any product.
 * defines: gbt_blas_fit_cpu, gbt_blas_widest_core */
#ifndef GB_WORKERS_TORCH_BLAS_CPU_H
#define GB_WORKERS_TORCH_BLAS_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* Mends OpenBLAS's choice where it took narrow kernels for a wide cpu, logging what it did;
 * returns that line (static), or NULL when there was nothing to mend. */
const char *gbt_blas_fit_cpu(void);

/* The widest of OpenBLAS's x86 kernels this cpu (and its OS) runs: "SkylakeX" with AVX-512 (F,
 * BW, DQ, VL, CD), "Haswell" with AVX2 and FMA, else NULL. */
const char *gbt_blas_widest_core(void);

#ifdef __cplusplus
}
#endif

#endif
