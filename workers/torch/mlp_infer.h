/* workers/torch/mlp_infer.h: the inference forward of a plain MLP policy (Linear layers, each
 * followed by tanh, relu or nothing) in C, for the policy worker's batches: every layer of a
 * block of rows runs while the block is in the L1 cache, with no per-op dispatch, in fp32 or in
 * int8 (policy.precision: int8).
 *
 * int8 is dynamic quantization, as libtorch's quantized::linear_dynamic: weights quantized
 * symmetrically per output channel (scale max|w| / 127) when loaded, each input row quantized
 * to uint8 with its own scale and zero point as it enters the layer, products summed in int32,
 * the sum scaled back to fp32 and the bias added. On CPUs with AVX-512 VNNI the sums are
 * vpdpbusd's (64 products an instruction); on AVX2 and FMA (most AMD cpus before Zen 4, Intel's
 * before Skylake-SP) vpmaddwd's over inputs and weights widened to int16 (16 products an
 * instruction, as many as fp32's FMAs: int8 is no faster than fp32 there, but gives the same
 * numbers as everywhere else); elsewhere a portable path gives the same sums. fp32 layers run
 * on AVX-512, on AVX2 and FMA, or on the portable path likewise.
 * Libtorch 1.13's own int8 Linear costs about 16 us a call at any batch on the development
 * machine, more than the fp32 one at 64 features, which is why the default [64, 64] MLP ran
 * slower in int8 than in fp32 through it.
 *
 * A program is a list of layers; each reads the input rows or an earlier layer's output, so
 * that an actor and a critic torso, or two heads on one torso, are one program. Not thread-safe:
 * one caller at a time (the policy worker's inference thread), scratch is the program's own.
 * defines: gb_mlp, gb_mlp_layer_spec, gb_mlp_create, gb_mlp_destroy, gb_mlp_load, gb_mlp_forward,
 *          gb_mlp_fast, gb_mlp_avx2, gb_mlp_avx512f, gb_mlp_int8_vnni, gb_mlp_kernels_name,
 *          gb_mlp_path */
#ifndef GB_WORKERS_TORCH_MLP_INFER_H
#define GB_WORKERS_TORCH_MLP_INFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GB_MLP_ACT_NONE = 0, GB_MLP_ACT_TANH = 1, GB_MLP_ACT_RELU = 2 };

typedef struct gb_mlp_layer_spec {
    int src;  /* -1: the input rows; else the index of an earlier layer, whose output it reads */
    int in;   /* features in: the input's width, or layer src's out */
    int out;  /* features out */
    int act;  /* GB_MLP_ACT_*, applied after the bias */
    int int8; /* 1: int8 weights and inputs (dynamic quantization); 0: fp32 */
} gb_mlp_layer_spec;

typedef struct gb_mlp gb_mlp;

/* A program of n layers (specs checked: sources earlier, widths agreeing). NULL with err set on
 * bad specs or no memory. Weights are zero until gb_mlp_load. */
gb_mlp *gb_mlp_create(const gb_mlp_layer_spec *specs, int n, char *err, size_t err_len);
void gb_mlp_destroy(gb_mlp *m);

/* Layer i's weights from w ([out][in], row-major, as torch's Linear.weight) and b ([out], or
 * NULL for none), quantized when the layer is int8. Returns 0, -1 for a bad i. */
int gb_mlp_load(gb_mlp *m, int i, const float *w, const float *b);

/* The program over rows input rows x ([rows][in of the first source], row-major). outs[i], where
 * not NULL, receives layer i's output ([rows][out_i], row-major). */
void gb_mlp_forward(gb_mlp *m, const float *x, int64_t rows, float *const *outs);

/* 1 when the cpu has AVX2 and FMA (asked once; also mlp_train.c's products' path). */
int gb_mlp_avx2(void);

/* 1 when the cpu has AVX-512 F besides AVX2 and FMA (asked once; mlp_train.c's wider tiles). */
int gb_mlp_avx512f(void);

/* 1 when fp32 and int8 layers run on vectors here (AVX-512 with VNNI, or AVX2 and FMA), 0 when
 * on the portable path (slower than libtorch's). */
int gb_mlp_fast(void);

/* 1 when int8 layers run on AVX-512 VNNI here (the fastest int8 path). */
int gb_mlp_int8_vnni(void);

/* What a program in fp32 (int8 0) or int8 runs on here, for logs and benchmarks: "gearbox fp32",
 * "gearbox int8 (avx512-vnni)" or "gearbox int8 (avx2)". */
const char *gb_mlp_kernels_name(int int8);

/* Tests: the paths m may take. BEST: the fastest this cpu has; AVX2: AVX2 at most (fp32 and
 * int8); PORTABLE: the reference the vector ones must agree with. */
enum { GB_MLP_PATH_BEST = 0, GB_MLP_PATH_PORTABLE = 1, GB_MLP_PATH_AVX2 = 2 };
void gb_mlp_path(gb_mlp *m, int path);

#ifdef __cplusplus
}
#endif

#endif
