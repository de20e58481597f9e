/* envs/wheel_lib.c: a shared library from an installed wheel, opened (see wheel_lib.h). */
#include "envs/wheel_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *gb_wheel_lib_open(const char *what, const char *env_var, const char *configured, int global,
                        const char *hint, const char **path, char *err, size_t err_len)
{
    const char *env = getenv(env_var);
    int from_env = env && *env;
    *path = from_env ? env : configured;
    if (!**path) {
        snprintf(err, err_len, "%s was not found when gearbox was configured and %s is not set: %s",
                 what, env_var, hint);
        return NULL;
    }
    void *lib = dlopen(*path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, err_len, "cannot open %s %s%s%s (%s): %s", what, *path,
                 from_env ? " from " : "", from_env ? env_var : "", why ? why : "?", hint);
    }
    return lib;
}
