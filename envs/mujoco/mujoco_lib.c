/* envs/mujoco/mujoco_lib.c: opens MuJoCo's library with dlopen and fills the gb_mj_api table
 * (see mujoco_lib.h for why it is opened at run time). */
#include "envs/mujoco/mujoco_lib.h"

#include "envs/wheel_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GB_MUJOCO_LIB
#define GB_MUJOCO_LIB ""
#endif
#ifndef GB_MUJOCO_ASSETS
#define GB_MUJOCO_ASSETS ""
#endif

#define GB_MJ_INSTALL_HINT                                                                        \
    "install it with launch/install-deps.sh (PyPI's mujoco==%d.%d.%d into gearbox's Python "   \
    "environment, then configure gearbox again), or point GEARBOX_MUJOCO_LIB at that wheel's "  \
    "mujoco/libmujoco.so.%d.%d.%d"

#define GB_MJ_MAX_WARNINGS 5

static gb_mj_api api;
static int warnings; /* how many MuJoCo warnings this process printed */
static _Thread_local int quiet; /* gb_mj_quiet_warnings */
static char load_error[1024];
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Looks up one symbol into *slot; returns 0, or -1 with load_error set. */
static int resolve(void *lib, const char *path, const char *name, void **slot)
{
    *slot = dlsym(lib, name);
    if (*slot)
        return 0;
    snprintf(load_error, sizeof load_error, "MuJoCo library %s has no function %s", path, name);
    return -1;
}

/* MuJoCo's warnings (a deprecated attribute in a model, an unstable simulation) go to stderr,
 * the first few of a process only, instead of stdout and a MUJOCO_LOG.TXT in the working
 * directory, which is what the library does by default. */
static void on_warning(const char *msg)
{
    if (!quiet && __atomic_fetch_add(&warnings, 1, __ATOMIC_RELAXED) < GB_MJ_MAX_WARNINGS)
        fprintf(stderr, "gearbox: MuJoCo warning: %s\n", msg);
}

static void load_once(void)
{
    const int v = mjVERSION_HEADER, major = v / 1000000, minor = v / 1000 % 1000, patch = v % 1000;
    char hint[300];
    snprintf(hint, sizeof hint, GB_MJ_INSTALL_HINT, major, minor, patch, major, minor, patch);
    const char *path;
    void *lib = gb_wheel_lib_open("MuJoCo's library", "GEARBOX_MUJOCO_LIB", GB_MUJOCO_LIB, 0, hint,
                                  &path, load_error, sizeof load_error);
    if (!lib)
        return;
    struct {
        const char *name;
        void **slot;
    } fns[] = {
        {"mj_version", (void **)&api.version},
        {"mj_versionString", (void **)&api.version_string},
        {"mj_loadXML", (void **)&api.load_xml},
        {"mj_deleteModel", (void **)&api.delete_model},
        {"mj_makeData", (void **)&api.make_data},
        {"mj_deleteData", (void **)&api.delete_data},
        {"mj_resetData", (void **)&api.reset_data},
        {"mj_forward", (void **)&api.forward},
        {"mj_step", (void **)&api.step},
        {"mj_rnePostConstraint", (void **)&api.rne_post_constraint},
        {"mj_name2id", (void **)&api.name2id},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (resolve(lib, path, fns[i].name, fns[i].slot))
            return; /* the library stays open: harmless, and dlclose could run its destructors */
    void (**user_warning)(const char *) = (void (**)(const char *))dlsym(lib, "mju_user_warning");
    if (user_warning)
        *user_warning = on_warning;
    /* mjModel and mjData are read through the headers' struct layouts: only the same version
     * has them. */
    if (api.version() != v) {
        snprintf(load_error, sizeof load_error,
                 "MuJoCo library %s is version %s; gearbox was built with %d.%d.%d's headers: %s",
                 path, api.version_string(), major, minor, patch, hint);
        return;
    }
    loaded = 1;
}

const gb_mj_api *gb_mj_load(char *err, size_t err_len)
{
    pthread_once(&once, load_once);
    if (loaded)
        return &api;
    if (err && err_len)
        snprintf(err, err_len, "%s", load_error);
    return NULL;
}

/* The shared models: a short list (one entry per model file a process uses). */
typedef struct model_entry {
    struct model_entry *next;
    mjModel *m;
    long refs;
    char path[];
} model_entry;

static model_entry *models;
static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;

const mjModel *gb_mj_model_acquire(const gb_mj_api *mj, const char *path, char *err,
                                   size_t err_len)
{
    mjModel *m = NULL;
    pthread_mutex_lock(&models_lock);
    for (model_entry *x = models; x && !m; x = x->next)
        if (strcmp(x->path, path) == 0) {
            x->refs++;
            m = x->m;
        }
    model_entry *x = m ? NULL : malloc(sizeof *x + strlen(path) + 1);
    if (!m && !x)
        snprintf(err, err_len, "out of memory");
    if (x) {
        char why[1000] = "";
        x->m = m = mj->load_xml(path, NULL, why, (int)sizeof why);
        if (m) {
            x->refs = 1;
            strcpy(x->path, path);
            x->next = models;
            models = x;
        } else {
            snprintf(err, err_len, "%s", why);
            free(x);
        }
    }
    pthread_mutex_unlock(&models_lock);
    return m;
}

void gb_mj_model_release(const gb_mj_api *mj, const mjModel *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&models_lock);
    for (model_entry **p = &models; *p; p = &(*p)->next) {
        model_entry *x = *p;
        if (x->m != m)
            continue;
        if (--x->refs == 0) {
            *p = x->next;
            mj->delete_model(x->m);
            free(x);
        }
        break;
    }
    pthread_mutex_unlock(&models_lock);
}

void gb_mj_quiet_warnings(int on)
{
    quiet = on;
}

const char *gb_mj_assets_dir(void)
{
    const char *env = getenv("GEARBOX_MUJOCO_ASSETS");
    return env && *env ? env : GB_MUJOCO_ASSETS;
}
