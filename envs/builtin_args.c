/* envs/builtin_args.c: the small helpers every built-in's create() shares (envs/builtin.h): its
 * arguments checked against the names it accepts, and its failure message. Apart from the
 * table (builtin.c), which names every environment, so that no environment depends on it. */
#include "envs/builtin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gb_env_check_args(const gb_env_args *args, const char *const *allowed, const char *env_name,
                      char *err, size_t err_len)
{
    for (int32_t i = 0; args && i < args->count; i++) {
        int ok = 0;
        for (const char *const *k = allowed; *k; k++)
            if (strcmp(*k, args->keys[i]) == 0)
                ok = 1;
        if (ok)
            continue;
        char list[256] = "";
        size_t used = 0;
        for (const char *const *k = allowed; *k && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                     k == allowed ? "" : ", ", *k);
        snprintf(err, err_len, "%s: unknown argument '%s' (accepted: %s)", env_name,
                 args->keys[i], allowed[0] ? list : "none");
        return -1;
    }
    return 0;
}

void *gb_env_fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && err_len)
        vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return NULL;
}
