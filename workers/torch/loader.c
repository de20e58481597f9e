/* workers/torch/loader.c: the `gearbox` command's side of the libtorch bridge: gb_torch() loads
 * the module libgearbox-torch.so once and hands out its table. libtorch costs every process that
 * links it about 0.3 CPU-seconds before main (its shared libraries' relocations and operator
 * registration); the launcher, actors, the parameter service, `serve` and `check` never call
 * it. So the command does not link libtorch: the bridge is built as a module (the same objects
 * as the gearbox_torch library the tests link), whose one exported table (GB_TORCH_ENTRY_SYMBOL)
 * every call name of bridge.h and group.h goes through. Only the trainer, inline runs, the
 * benchmarks that run models and a policy worker whose model is not a plain MLP on gearbox's
 * kernels (workers/roles/policy_mlp.h) pay for libtorch.
 * defines: gb_torch, gb_torch_load, gb_torch_loaded (the command's; module.c has the linked
 *          library's) */
#include "workers/torch/bridge.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GB_TORCH_MODULE_NAME "libgearbox-torch.so"

static const gb_torch_api *loaded;
static atomic_int opened; /* 1 once dlopen mapped the module (and libtorch with it) */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[PATH_MAX + 512];

/* The module's path for this try (0: the override or beside the executable, 1: an install). */
static int module_path(int attempt, char *out, size_t cap)
{
    const char *env = getenv("GEARBOX_TORCH_MODULE");
    if (env && *env)
        return attempt == 0 ? snprintf(out, cap, "%s", env) >= (int)cap ? -1 : 0 : -1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int w = attempt == 0 ? snprintf(out, cap, "%s/%s", exe, GB_TORCH_MODULE_NAME)
          : attempt == 1 ? snprintf(out, cap, "%s/../lib/gearbox/%s", exe, GB_TORCH_MODULE_NAME)
                         : -1;
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

/* The table of the module at path (opened as h), or NULL with load_error filled. */
static const gb_torch_api *module_table(void *h, const char *path)
{
    dlerror();
    void *sym = dlsym(h, GB_TORCH_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(load_error, sizeof load_error,
                 "the libtorch module %s has no %s: it is from another gearbox build", path,
                 GB_TORCH_ENTRY_SYMBOL);
        return NULL;
    }
    gb_torch_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    const gb_torch_api *t = entry();
    if (!t || t->abi_version != GB_TORCH_ABI_VERSION || t->struct_size != sizeof(gb_torch_api)) {
        snprintf(load_error, sizeof load_error,
                 "the libtorch module %s speaks bridge ABI version %u (a %u-byte table), this "
                 "gearbox version %u (%zu bytes): it is from another gearbox build",
                 path, t ? t->abi_version : 0u, t ? t->struct_size : 0u, GB_TORCH_ABI_VERSION,
                 sizeof(gb_torch_api));
        return NULL;
    }
    return t;
}

static void load_module(void)
{
    char path[PATH_MAX], first[PATH_MAX] = "", why[512] = "no path for it";
    void *h = NULL;
    for (int attempt = 0; !h && module_path(attempt, path, sizeof path) == 0; attempt++) {
        if (attempt == 0)
            snprintf(first, sizeof first, "%s", path);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h && attempt == 0) { /* the first place's reason: where the build puts it. A copy:
                                   * the next dlopen reuses the buffer dlerror points into */
            const char *e = dlerror();
            snprintf(why, sizeof why, "%s", e ? e : "unknown reason");
        }
    }
    if (!h) {
        snprintf(load_error, sizeof load_error,
                 "cannot load the libtorch module %.3800s (%.400s); set GEARBOX_TORCH_MODULE to "
                 "its path", first[0] ? first : GB_TORCH_MODULE_NAME, why);
        return;
    }
    atomic_store(&opened, 1);
    loaded = module_table(h, path); /* the module stays loaded for the process's life */
}

int gb_torch_loaded(void)
{
    return atomic_load(&opened);
}

/* Loads the module on the first call (every thread waits for that one); later calls return its
 * outcome. 0, or GB_EIO with the reason. */
int gb_torch_load(gb_error *err)
{
    pthread_once(&load_once, load_module);
    if (!loaded)
        return gb_error_set(err, GB_EIO, "%s", load_error);
    return 0;
}

/* The module's table; a module that cannot be loaded ends the process (bridge.h says why). */
const gb_torch_api *gb_torch(void)
{
    gb_error err = {0};
    if (gb_torch_load(&err) != 0) {
        fprintf(stderr, "gearbox: %s\n", err.msg);
        fflush(NULL);
        _exit(1);
    }
    return loaded;
}
