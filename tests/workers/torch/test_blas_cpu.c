/* tests/workers/torch/test_blas_cpu.c: libtorch's OpenBLAS fitted to the cpu (blas_cpu.h). The
 * library's constructor (module.c's, linked with gb_torch) ran before main: on a cpu with AVX2
 * and FMA, OpenBLAS now runs kernels that use them, whatever it took the cpu for. Then the bad
 * choice made on purpose (OpenBLAS's Prescott, as Debian 12's takes for a cpu model it does not
 * know): with OPENBLAS_CORETYPE set it is the user's and stays; unset, it is mended to the
 * widest kernels the cpu runs. Skipped (77) where libtorch's BLAS is not a build of OpenBLAS
 * that picks its kernels at run time. */
#include "test.h"
#include "workers/torch/blas_cpu.h"
#include "workers/torch/bridge.h"

#include <dlfcn.h>
#include <stdint.h>

typedef char *(*corename_fn)(void);
typedef void (*dynamic_fn)(void);

static corename_fn corename;
static dynamic_fn quit, init;

/* OpenBLAS chooses again as if loaded with OPENBLAS_CORETYPE=name. */
static void force(const char *name)
{
    setenv("OPENBLAS_CORETYPE", name, 1);
    quit();
    init();
}

static void test_after_load(void)
{
    const char *want = gbt_blas_widest_core(), *core = corename();
    fprintf(stderr, "OpenBLAS runs %s kernels (this cpu's widest: %s)\n", core,
            want ? want : "none with AVX2");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init(); /* the cpu's features, asked here too */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK(want != NULL);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        CHECK(want && strcmp(want, "SkylakeX") == 0);
#endif
    /* OpenBLAS's own choice where it knows the cpu (Zen, Haswell, SapphireRapids...), the
     * mend's where it did not: never one without AVX2 on a cpu that has it */
    if (want)
        CHECK_MSG(strcmp(core, "Prescott") != 0 && strcmp(core, "Sandybridge") != 0 &&
                      strcmp(core, "Nehalem") != 0 && strcmp(core, "Core2") != 0,
                  "%s", core);
    CHECK(gbt_blas_fit_cpu() == NULL); /* nothing left to mend */
}

static void test_user_choice_kept(void)
{
    force("Prescott");
    CHECK(strcmp(corename(), "Prescott") == 0);
    CHECK(gbt_blas_fit_cpu() == NULL); /* OPENBLAS_CORETYPE set: the user's */
    CHECK(strcmp(corename(), "Prescott") == 0);
}

static void test_mended(void)
{
    force("Prescott");
    unsetenv("OPENBLAS_CORETYPE");
    const char *want = gbt_blas_widest_core(), *note = gbt_blas_fit_cpu();
    if (!want) { /* a cpu without AVX2: Prescott's kernels may be what it runs best */
        CHECK(note == NULL);
        CHECK(strcmp(corename(), "Prescott") == 0);
        return;
    }
    CHECK(note != NULL && strstr(note, "Prescott") && strstr(note, want));
    CHECK_MSG(strcmp(corename(), want) == 0, "%s, not %s", corename(), want);
    const char *env = getenv("OPENBLAS_CORETYPE"); /* for processes started from this one */
    CHECK(env && strcmp(env, want) == 0);
    /* and products are right on the kernels chosen again */
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *,
                             const float *, const float *, const int *, const float *,
                             const int *, const float *, float *, const int *);
    sgemm_fn sgemm = h ? (sgemm_fn)(uintptr_t)dlsym(h, "sgemm_") : NULL;
    CHECK(sgemm != NULL);
    enum { N = 96 };
    static float a[N * N], b[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)((i * 7) % 13) - 6.0f;
        b[i] = (float)((i * 5) % 11) - 5.0f;
    }
    const int n = N;
    const float one = 1.0f, zero = 0.0f;
    if (sgemm)
        sgemm("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    double worst = 0.0;
    for (int i = 0; i < N; i++) /* column-major: c(i, j) = sum_p a(i, p) b(p, j) */
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int p = 0; p < N; p++)
                s += (double)a[p * N + i] * b[j * N + p];
            worst = fmax(worst, fabs(s - c[j * N + i]));
        }
    CHECK_MSG(worst == 0.0, "%g", worst); /* small integers: exact in float */
    if (h)
        dlclose(h);
}

int main(void)
{
    CHECK(gb_torch() != NULL); /* the table: module.c, whose constructor fits the BLAS */
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        corename = (corename_fn)(uintptr_t)dlsym(h, "openblas_get_corename");
        quit = (dynamic_fn)(uintptr_t)dlsym(h, "gotoblas_dynamic_quit");
        init = (dynamic_fn)(uintptr_t)dlsym(h, "gotoblas_dynamic_init");
    }
    if (!corename || !quit || !init) {
        fprintf(stderr, "libtorch's BLAS is not an OpenBLAS that picks its kernels at run "
                        "time: nothing to fit\n");
        return 77;
    }
    TEST_RUN(test_after_load);
    TEST_RUN(test_user_choice_kept);
    TEST_RUN(test_mended);
    dlclose(h);
    return test_main_result();
}
