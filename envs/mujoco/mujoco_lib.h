/* envs/mujoco/mujoco_lib.h: MuJoCo's C library, opened with dlopen at the first create() of a
 * MuJoCo environment, through a table of the mj_* functions gearbox calls. gearbox is compiled
 * against the headers of PyPI's `mujoco` wheel (the build Gymnasium uses) and opens that wheel's
 * libmujoco.so.<version>, so that the `gearbox` binary runs on machines without MuJoCo and
 * only these environments need it.
 * defines: gb_mj_api, gb_mj_load, gb_mj_model_acquire, gb_mj_model_release,
 *          gb_mj_quiet_warnings, gb_mj_assets_dir */
#ifndef GB_ENVS_MUJOCO_LIB_H
#define GB_ENVS_MUJOCO_LIB_H

#include <mujoco/mujoco.h>

#include <stddef.h>

/* The functions gearbox uses, as the library exports them (same names without the prefix). */
typedef struct gb_mj_api {
    int (*version)(void);
    const char *(*version_string)(void);
    mjModel *(*load_xml)(const char *filename, const mjVFS *vfs, char *error, int error_sz);
    void (*delete_model)(mjModel *m);
    mjData *(*make_data)(const mjModel *m);
    void (*delete_data)(mjData *d);
    void (*reset_data)(const mjModel *m, mjData *d);
    void (*forward)(const mjModel *m, mjData *d);
    void (*step)(const mjModel *m, mjData *d);
    void (*rne_post_constraint)(const mjModel *m, mjData *d);
    int (*name2id)(const mjModel *m, int type, const char *name);
} gb_mj_api;

/* The library's table, opened once per process (thread-safe): from $GEARBOX_MUJOCO_LIB when
 * set, else the path found when gearbox was configured. Returns NULL with a message in err
 * (what was tried and how to install the library) when it cannot be opened, lacks a function,
 * or is another version than the headers gearbox was built with. The table lives until exit. */
const gb_mj_api *gb_mj_load(char *err, size_t err_len);

/* The compiled model of the file at path, shared by every copy of this process that loads the
 * same path (mj_step reads a model and never writes it, so copies on other threads may share
 * it): compiled at the first call, counted, freed by gb_mj_model_release at the last. Sharing
 * keeps many copies' working set small and create() cheap. Returns NULL with MuJoCo's message
 * in err (err_len bytes) when the file does not compile, or on no memory. Thread-safe. */
const mjModel *gb_mj_model_acquire(const gb_mj_api *mj, const char *path, char *err,
                                   size_t err_len);

/* Drops one reference taken by gb_mj_model_acquire (NULL is a no-op). Thread-safe. */
void gb_mj_model_release(const gb_mj_api *mj, const mjModel *m);

/* on = 1: MuJoCo's warnings raised by this thread are dropped until on = 0 (the shipped models'
 * compile-time notices, e.g. HalfCheetah's deprecated settotalmass, printed in every process
 * otherwise); on = 0: printed to stderr, the first 5 of a process. */
void gb_mj_quiet_warnings(int on);

/* The folder of the model files (Gymnasium's envs/mujoco/assets): $GEARBOX_MUJOCO_ASSETS when
 * set, else the one found when gearbox was configured ("" when none was). Static storage. */
const char *gb_mj_assets_dir(void);

#endif
