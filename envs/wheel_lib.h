/* envs/wheel_lib.h: opening a shared library that an environment takes from an installed Python
 * wheel (MuJoCo's libmujoco in PyPI's mujoco, the ALE in ale-py) at its first create(): from the
 * path an environment variable names, else the one CMake found when gearbox was configured
 * (envs/mujoco/CMakeLists.txt, envs/atari/CMakeLists.txt), with one wording for what went wrong
 * and the caller's hint on how to get it.
 * defines: gb_wheel_lib_open */
#ifndef GB_ENVS_WHEEL_LIB_H
#define GB_ENVS_WHEEL_LIB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dlopen(getenv(env_var) when set and not empty, else configured, RTLD_NOW | (global ?
 * RTLD_GLOBAL : RTLD_LOCAL)); *path: the path tried. Returns the handle (never closed: a library's
 * destructors could run mid-process), or NULL with a message in err naming `what`, the path,
 * whether it came from env_var, dlerror's reason, and hint. Not thread-safe (dlerror): call it
 * once, under the caller's once-only guard. */
void *gb_wheel_lib_open(const char *what, const char *env_var, const char *configured, int global,
                        const char *hint, const char **path, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
