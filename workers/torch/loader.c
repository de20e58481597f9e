/* workers/torch/loader.c: the `gearbox` command's side of the libtorch bridge. libtorch costs
 * every process that links it about 0.3 CPU-seconds before main (its shared libraries' relocations
 * and operator registration); the launcher, actors, the parameter service, `serve` and `check`
 * never call it. So the command does not link libtorch: the bridge is built as a module
 * (libgearbox-torch.so, the same objects as the gearbox_torch library the tests link), and the
 * functions of bridge.h and group.h below forward to it, loading it on the first call. Only the
 * trainer, the policy worker, inline runs and the benchmarks that run models pay for libtorch.
 *
 * Where the module is: $GEARBOX_TORCH_MODULE when set; else beside the executable (the build
 * tree); else ../lib/gearbox/ from the executable's folder (an install). A module that cannot be
 * loaded ends the process with exit status 1 and dlopen's reason: a worker without its model
 * cannot do anything useful, and the launcher reports the worker's failure with its log tail.
 * defines: every bridge.h / group.h function the command calls */
#include "workers/torch/bridge.h"
#include "workers/torch/group.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GB_TORCH_MODULE_NAME "libgearbox-torch.so"

/* X(return type, name, parameters, arguments): the functions that forward to the module; XV the
 * same without a result; XD a destructor, whose NULL argument is a no-op that loads nothing; XE an entry point
 * (int result, gb_error *err last), which returns a module that cannot be loaded as GB_EIO. */
#define GB_TORCH_FORWARDS(X, XV, XD, XE)                                                                   \
    XE(gb_torch_set_threads, (int n, gb_error *err), (n, err))                                 \
    X(int, gb_torch_cuda_available, (void), ())                                                    \
    XE(gb_torch_model_create,                                                                  \
      (const gb_config *cfg, const gb_torch_space *space, uint64_t seed, gb_torch_model **out,     \
       gb_error *err),                                                                             \
      (cfg, space, seed, out, err))                                                                \
    XD(gb_torch_model_destroy, (gb_torch_model * m), (m))                                          \
    X(int, gb_torch_model_act,                                                                     \
      (gb_torch_model * m, const void *obs, int64_t n, int deterministic, double epsilon,          \
       gb_torch_act_out *out, gb_error *err),                                                      \
      (m, obs, n, deterministic, epsilon, out, err))                                               \
    X(int, gb_torch_model_act_noise,                                                               \
      (gb_torch_model * m, const void *obs, int64_t n, int deterministic, double epsilon,          \
       const float *noise, gb_torch_act_out *out, gb_error *err),                                  \
      (m, obs, n, deterministic, epsilon, noise, out, err))                                        \
    XV(gb_torch_model_layout,                                                                      \
       (const gb_torch_model *m, const gb_param_entry **table, int *count, uint64_t *total),       \
       (m, table, count, total))                                                                   \
    X(int, gb_torch_model_export,                                                                  \
      (const gb_torch_model *m, void *buf, size_t cap, uint64_t *version, gb_error *err),          \
      (m, buf, cap, version, err))                                                                 \
    X(int, gb_torch_model_import,                                                                  \
      (gb_torch_model * m, const void *buf, size_t len, const gb_param_entry *table, int count,    \
       uint64_t version, gb_error *err),                                                           \
      (m, buf, len, table, count, version, err))                                                   \
    X(int, gb_torch_model_set_precision, (gb_torch_model * m, int precision, gb_error *err),       \
      (m, precision, err))                                                                         \
    X(int, gb_torch_model_int8_engine, (const char **name, gb_error *err), (name, err))            \
    X(const char *, gb_torch_model_kernels, (const gb_torch_model *m), (m))                        \
    X(int, gb_torch_model_forward,                                                                 \
      (gb_torch_model * m, const void *obs, int64_t n, gb_error *err), (m, obs, n, err))           \
    X(uint64_t, gb_torch_model_version, (const gb_torch_model *m), (m))                            \
    XV(gb_torch_model_set_version, (gb_torch_model * m, uint64_t version), (m, version))           \
    XE(gb_torch_learner_create,                                                                \
      (const gb_config *cfg, const gb_torch_space *space, uint64_t seed, gb_torch_learner **out,   \
       gb_error *err),                                                                             \
      (cfg, space, seed, out, err))                                                                \
    XD(gb_torch_learner_destroy, (gb_torch_learner * l), (l))                                      \
    X(gb_torch_model *, gb_torch_learner_model, (gb_torch_learner * l), (l))                       \
    X(int, gb_torch_learner_train,                                                                 \
      (gb_torch_learner * l, const gb_torch_batch *batch, gb_torch_stats *stats,                   \
       float *priorities, gb_error *err),                                                          \
      (l, batch, stats, priorities, err))                                                          \
    XV(gb_torch_learner_set_progress, (gb_torch_learner * l, double progress), (l, progress))      \
    X(int64_t, gb_torch_learner_train_steps, (const gb_torch_learner *l), (l))                     \
    X(int, gb_torch_learner_save, (const gb_torch_learner *l, const char *path, gb_error *err),    \
      (l, path, err))                                                                              \
    X(int, gb_torch_learner_load, (gb_torch_learner * l, const char *path, gb_error *err),         \
      (l, path, err))                                                                              \
    X(int, gb_torch_learner_set_group,                                                             \
      (gb_torch_learner * l, gb_group * g, size_t bucket_bytes, gb_error * err),                   \
      (l, g, bucket_bytes, err))                                                                   \
    X(uint64_t, gb_torch_learner_checksum, (const gb_torch_learner *l), (l))                       \
    XV(gb_torch_gae,                                                                               \
       (int64_t B, int64_t T, const float *reward, const float *value,                             \
        const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid, double gamma,   \
        double lambda, float *adv, float *ret),                                                    \
       (B, T, reward, value, terminated, truncated, valid, gamma, lambda, adv, ret))               \
    XV(gb_torch_nstep,                                                                             \
       (int64_t B, int64_t T, int64_t n, double gamma, const float *reward,                        \
        const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid, float *ret,     \
        float *disc, int64_t *boot),                                                               \
       (B, T, n, gamma, reward, terminated, truncated, valid, ret, disc, boot))                    \
    X(double, gb_torch_dqn_epsilon, (const gb_config_dqn *dqn, int64_t env_steps),                 \
      (dqn, env_steps))                                                                            \
    XE(gb_group_open, (const gb_group_opts *o, gb_group **out, gb_error *err), (o, out, err))  \
    XD(gb_group_close, (gb_group * g), (g))                                                        \
    X(int, gb_group_rank, (const gb_group *g), (g))                                                \
    X(int, gb_group_size, (const gb_group *g), (g))                                                \
    X(int, gb_group_allreduce,                                                                     \
      (gb_group * g, gb_dtype dtype, void *buf, int64_t count, gb_group_op op, gb_error *err),     \
      (g, dtype, buf, count, op, err))                                                             \
    X(int, gb_group_allgather,                                                                     \
      (gb_group * g, const void *in, size_t bytes, void *out, gb_error *err),                      \
      (g, in, bytes, out, err))                                                                    \
    X(int, gb_group_broadcast, (gb_group * g, void *buf, size_t bytes, int root, gb_error *err),   \
      (g, buf, bytes, root, err))                                                                  \
    X(int, gb_group_alltoall,                                                                      \
      (gb_group * g, const void *in, const size_t *send_bytes, void *out,                          \
       const size_t *recv_bytes, gb_error *err),                                                   \
      (g, in, send_bytes, out, recv_bytes, err))                                                   \
    X(int, gb_group_barrier, (gb_group * g, gb_error * err), (g, err))

#define SLOT_ENUM(ret, name, params, args) SLOT_##name,
#define SLOT_ENUM_V(name, params, args) SLOT_##name,
enum { GB_TORCH_FORWARDS(SLOT_ENUM, SLOT_ENUM_V, SLOT_ENUM_V, SLOT_ENUM_V) SLOT_COUNT };

#define SLOT_NAME(ret, name, params, args) #name,
#define SLOT_NAME_V(name, params, args) #name,
static const char *const slot_names[SLOT_COUNT] = {
    GB_TORCH_FORWARDS(SLOT_NAME, SLOT_NAME_V, SLOT_NAME_V, SLOT_NAME_V)};

static void *slots[SLOT_COUNT];
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

static void load_module(void)
{
    char path[PATH_MAX], first[PATH_MAX] = "";
    void *h = NULL;
    const char *why = "no path for it";
    for (int attempt = 0; !h && module_path(attempt, path, sizeof path) == 0; attempt++) {
        if (attempt == 0)
            snprintf(first, sizeof first, "%s", path);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h && attempt == 0)
            why = dlerror(); /* the first place's reason: where the build puts it */
    }
    if (!h) {
        snprintf(load_error, sizeof load_error,
                 "cannot load the libtorch module %s (%s); set GEARBOX_TORCH_MODULE to its path",
                 first[0] ? first : GB_TORCH_MODULE_NAME, why ? why : "unknown reason");
        return;
    }
    for (int i = 0; i < SLOT_COUNT; i++) {
        slots[i] = dlsym(h, slot_names[i]);
        if (!slots[i]) {
            snprintf(load_error, sizeof load_error,
                     "the libtorch module %s lacks %s: it is from another gearbox build", path,
                     slot_names[i]);
            return;
        }
    }
}

static int gb_torch_module_load(gb_error *err)
{
    pthread_once(&load_once, load_module);
    if (load_error[0])
        return gb_error_set(err, GB_EIO, "%s", load_error);
    return 0;
}

/* The module's function in slot i; a module that cannot be loaded ends the process. */
static void *slot(int i)
{
    gb_error err = {0};
    if (gb_torch_module_load(&err) != 0) {
        fprintf(stderr, "gearbox: %s\n", err.msg);
        fflush(NULL);
        _exit(1);
    }
    return slots[i];
}

#define FORWARD(ret, name, params, args)                                                           \
    ret name params                                                                                \
    {                                                                                              \
        return ((ret(*) params)slot(SLOT_##name)) args;                                            \
    }
#define FORWARD_V(name, params, args)                                                              \
    void name params                                                                               \
    {                                                                                              \
        ((void(*) params)slot(SLOT_##name)) args;                                                  \
    }
#define FORWARD_D(name, params, args)                                                              \
    void name params                                                                               \
    {                                                                                              \
        if (NOT_NULL args)                                                                         \
            ((void(*) params)slot(SLOT_##name)) args;                                              \
    }
#define NOT_NULL(p) ((p) != NULL)
#define FORWARD_E(name, params, args)                                                              \
    int name params                                                                                \
    {                                                                                              \
        int rc = gb_torch_module_load(err);                                                        \
        return rc ? rc : ((int(*) params)slots[SLOT_##name]) args;                                 \
    }
GB_TORCH_FORWARDS(FORWARD, FORWARD_V, FORWARD_D, FORWARD_E)
