/* workers/torch/blas_cpu.c: libtorch's BLAS fitted to the cpu (blas_cpu.h). */
#include "workers/torch/blas_cpu.h"
#include "runtime/base/log.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's cores whose kernels use no AVX2 (openblas_get_corename's names): a cpu with AVX2
 * and FMA given one of these is a cpu OpenBLAS did not recognise. */
static const char *const narrow[] = {
    "Unknown",  "Katmai",  "Coppermine", "Northwood",    "Prescott",  "Banias", "Atom",
    "Core2",    "Penryn",  "Dunnington", "Nehalem",      "Athlon",    "Opteron", "Opteron_SSE3",
    "Barcelona", "Nano",   "Sandybridge", "Bobcat",      "Bulldozer", "Piledriver",
};

static int is_narrow(const char *core)
{
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++)
        if (strcmp(core, narrow[i]) == 0)
            return 1;
    return 0;
}

const char *gbt_blas_widest_core(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

typedef char *(*corename_fn)(void);
typedef void (*dynamic_fn)(void);

const char *gbt_blas_fit_cpu(void)
{
    static char note[256];
    /* OpenBLAS as loaded with libtorch (the soname of every Debian variant); another BLAS, or
     * none, leaves nothing to do */
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return NULL;
    corename_fn corename = (corename_fn)(uintptr_t)dlsym(h, "openblas_get_corename");
    dynamic_fn quit = (dynamic_fn)(uintptr_t)dlsym(h, "gotoblas_dynamic_quit");
    dynamic_fn init = (dynamic_fn)(uintptr_t)dlsym(h, "gotoblas_dynamic_init");
    const char *want = gbt_blas_widest_core(), *core = corename ? corename() : NULL;
    if (!core || !quit || !init || !want || !is_narrow(core) || getenv("OPENBLAS_CORETYPE")) {
        dlclose(h);
        return NULL; /* not a build that picks its kernels at run time, or nothing to mend */
    }
    char was[32];
    snprintf(was, sizeof was, "%s", core);
    /* the choice again, as OPENBLAS_CORETYPE would have made it at load (no product has run:
     * every one reads the kernel table this replaces); the variable stays set, so that a
     * process started from this one on this host loads OpenBLAS with it */
    setenv("OPENBLAS_CORETYPE", want, 0);
    quit();
    init();
    core = corename();
    if (strcmp(core, want) == 0) {
        snprintf(note, sizeof note,
                 "libtorch's BLAS: OpenBLAS took this cpu for %s (kernels without AVX2: it does "
                 "not know the model); running its %s kernels instead (OPENBLAS_CORETYPE)",
                 was, want);
        GB_INFO("%s", note);
    } else {
        snprintf(note, sizeof note,
                 "libtorch's BLAS: OpenBLAS took this cpu for %s and would not take %s (it "
                 "runs %s): its products run without AVX2", was, want, core);
        GB_WARN("%s", note);
    }
    dlclose(h); /* libtorch keeps it loaded */
    return note;
}
