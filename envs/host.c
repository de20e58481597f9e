/* envs/host.c: resolving, loading and validating environments (see host.h). */
#include "envs/host.h"
#include "envs/builtin.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(
    (int)GB_ENV_FLOAT32 == (int)GB_DTYPE_FLOAT32 && (int)GB_ENV_FLOAT64 == (int)GB_DTYPE_FLOAT64 &&
        (int)GB_ENV_INT8 == (int)GB_DTYPE_INT8 && (int)GB_ENV_INT16 == (int)GB_DTYPE_INT16 &&
        (int)GB_ENV_INT32 == (int)GB_DTYPE_INT32 && (int)GB_ENV_INT64 == (int)GB_DTYPE_INT64 &&
        (int)GB_ENV_UINT8 == (int)GB_DTYPE_UINT8 && (int)GB_ENV_UINT16 == (int)GB_DTYPE_UINT16,
    "env.h dtype codes must equal runtime/base/dtype.h's");

gb_dtype gb_env_dtype_to_gb(int32_t env_dtype)
{
    return (gb_dtype)env_dtype;
}

/* The length of name without a version suffix "-v<digits>". */
static size_t name_stem(const char *name)
{
    const char *v = strstr(name, "-v");
    for (const char *next; v && (next = strstr(v + 2, "-v"));)
        v = next;
    if (!v || !v[2] || strspn(v + 2, "0123456789") != strlen(v + 2))
        return strlen(name);
    return (size_t)(v - name);
}

/* A built-in name differs from name only in its version or letter case ("CartPole-v2",
 * "cartpole-v1"): the one meant, or NULL. */
static const char *close_builtin(const char *name, const gb_env_interface *const *all, int n)
{
    size_t stem = name_stem(name);
    for (int i = 0; i < n; i++)
        if (name_stem(all[i]->name) == stem && strncasecmp(all[i]->name, name, stem) == 0)
            return all[i]->name;
    return NULL;
}

int gb_env_source_open(gb_env_source *src, const char *name, const char *plugin_path,
                       gb_error *err)
{
    memset(src, 0, sizeof *src);
    if (name && strcmp(name, "plugin") == 0) {
        if (!plugin_path || !plugin_path[0])
            return gb_error_set(err, GB_EINVAL, "env.name is \"plugin\" but env.plugin is empty");
        return gb_env_plugin_open(src, plugin_path, err);
    }
    const gb_env_interface *iface = gb_env_builtin_find(name);
    if (!iface && name && name[0]) {
        char path[GB_CONFIG_PATH_MAX];
        int rc = gb_env_shipped_find(name, path, sizeof path);
        if (rc == 0)
            return gb_env_plugin_open(src, path, err);
    }
    if (!iface) {
        char names[512] = "";
        size_t used = 0;
        int n;
        const gb_env_interface *const *all = gb_env_builtins(&n);
        for (int i = 0; i < n && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                     all[i]->name);
        const char *meant = name ? close_builtin(name, all, n) : NULL;
        return gb_error_set(err, GB_ENOTFOUND,
                            "unknown environment '%s' (%s%s%sbuilt-ins: %s; shipped plugins "
                            "such as gymnasium, found as " GB_ENV_SHIPPED_PREFIX "<name>.so in "
                            "$GEARBOX_ENV_PLUGIN_PATH, <gearbox>/../lib/gearbox/envs, "
                            GB_ENV_PLUGIN_INSTALL_DIR "; or \"plugin\" with env.plugin set to "
                            "a shared library)",
                            name ? name : "(null)", meant ? "did you mean " : "",
                            meant ? meant : "", meant ? "? " : "", names);
    }
    src->iface = iface;
    return 0;
}

#ifndef GB_ENV_PLUGIN_BUILD_DIR
#define GB_ENV_PLUGIN_BUILD_DIR ""
#endif
#ifndef GB_ENV_PLUGIN_INSTALL_DIR
#define GB_ENV_PLUGIN_INSTALL_DIR "/usr/local/lib/gearbox/envs"
#endif

/* Is dir/GB_ENV_SHIPPED_PREFIX<name>.so a regular file? Writes the path either way. */
static int shipped_at(const char *dir, size_t dir_len, const char *name, char *out, size_t cap)
{
    struct stat st;
    int n = snprintf(out, cap, "%.*s/" GB_ENV_SHIPPED_PREFIX "%s.so", (int)dir_len, dir, name);
    return n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

int gb_env_shipped_find(const char *name, char *out, size_t cap)
{
    /* A name is a plain word: no path tricks through env.name. */
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
            return GB_ENOTFOUND;
    const char *list = getenv("GEARBOX_ENV_PLUGIN_PATH");
    while (list && *list) {
        size_t len = strcspn(list, ":");
        if (len && shipped_at(list, len, name, out, cap))
            return 0;
        list += len + (list[len] == ':');
    }
    char exe[GB_CONFIG_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            char dir[GB_CONFIG_PATH_MAX + 32];
            snprintf(dir, sizeof dir, "%.*s/../lib/gearbox/envs", (int)(slash - exe), exe);
            if (shipped_at(dir, strlen(dir), name, out, cap))
                return 0;
        }
    }
    static const char *const dirs[] = {GB_ENV_PLUGIN_BUILD_DIR, GB_ENV_PLUGIN_INSTALL_DIR};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (dirs[i][0] && shipped_at(dirs[i], strlen(dirs[i]), name, out, cap))
            return 0;
    return GB_ENOTFOUND;
}

int gb_env_plugin_open(gb_env_source *src, const char *path, gb_error *err)
{
    memset(src, 0, sizeof *src);
    struct stat st;
    if (stat(path, &st) != 0)
        return gb_error_set(err, GB_ENOTFOUND, "environment plugin %s: %s", path,
                            strerror(errno));
    if (!S_ISREG(st.st_mode))
        return gb_error_set(err, GB_EINVAL, "environment plugin %s: not a regular file", path);
    /* dlopen searches the library path for a bare name; a path with a slash is taken as is. */
    char resolved[GB_CONFIG_PATH_MAX];
    if (strchr(path, '/'))
        snprintf(resolved, sizeof resolved, "%s", path);
    else
        snprintf(resolved, sizeof resolved, "./%s", path);
    dlerror();
    void *dl = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *msg = dlerror();
        return gb_error_set(err, GB_EINVAL, "environment plugin %s: cannot load: %s", path,
                            msg ? msg : "unknown dlopen error");
    }
    dlerror();
    void *sym = dlsym(dl, GB_ENV_ENTRY_SYMBOL);
    const char *dlmsg = dlerror();
    if (!sym || dlmsg) {
        gb_error_set(err, GB_ENOTFOUND,
                     "environment plugin %s: no symbol %s (export `const gb_env_interface *"
                     "%s(void)` with GB_ENV_EXPORT)",
                     path, GB_ENV_ENTRY_SYMBOL, GB_ENV_ENTRY_SYMBOL);
        dlclose(dl);
        return GB_ENOTFOUND;
    }
    gb_env_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    const gb_env_interface *iface = entry();
    int rc = gb_env_interface_validate(iface, path, err);
    if (rc) {
        dlclose(dl);
        return rc;
    }
    src->iface = iface;
    src->dl = dl;
    snprintf(src->path, sizeof src->path, "%s", path);
    return 0;
}

void gb_env_source_wrap(gb_env_source *src, const gb_env_wrap_params *p, int for_eval)
{
    if (!src->iface || gb_env_wrap_is(src->iface) || !gb_env_wrap_active(p))
        return;
    gb_env_wrap_init(&src->wrapped, src->iface, p, for_eval);
    src->iface = &src->wrapped.iface;
}

void gb_env_source_wrap_config(gb_env_source *src, const gb_config_env *env, int for_eval)
{
    const gb_config_wrappers *c = &env->wrappers;
    gb_env_wrap_params p = {c->noop_max,     c->frame_skip,  c->max_pool,    c->screen_size,
                            c->grey,         c->episodic_life, c->clip_reward, c->frame_stack};
    gb_env_source_wrap(src, &p, for_eval);
}

void gb_env_source_close(gb_env_source *src)
{
    if (src->dl)
        dlclose(src->dl);
    memset(src, 0, sizeof *src);
}

int gb_env_interface_validate(const gb_env_interface *iface, const char *what, gb_error *err)
{
    if (!iface)
        return gb_error_set(err, GB_EINVAL, "environment %s: %s() returned NULL", what,
                            GB_ENV_ENTRY_SYMBOL);
    if (iface->abi_version != GB_ENV_ABI_VERSION)
        return gb_error_set(err, GB_EINVAL,
                            "environment %s: built for environment ABI version %u, this gearbox "
                            "speaks version %u: rebuild it against this gearbox's envs/env.h",
                            what, iface->abi_version, GB_ENV_ABI_VERSION);
    if (iface->struct_size != sizeof(gb_env_interface))
        return gb_error_set(err, GB_EINVAL,
                            "environment %s: interface struct is %u bytes, expected %zu (built "
                            "against a different env.h?)",
                            what, iface->struct_size, sizeof(gb_env_interface));
    if (!iface->name || !iface->name[0])
        return gb_error_set(err, GB_EINVAL, "environment %s: interface has no name", what);
    const char *missing = !iface->create    ? "create"
                          : !iface->reset   ? "reset"
                          : !iface->step    ? "step"
                          : !iface->destroy ? "destroy"
                                            : NULL;
    if (missing)
        return gb_error_set(err, GB_EINVAL, "environment %s (%s): interface has no %s function",
                            what, iface->name, missing);
    return 0;
}

void gb_env_args_from_config(gb_env_args_store *st, const gb_config_args *cfg)
{
    memset(st, 0, sizeof *st);
    int n = cfg ? cfg->n : 0;
    for (int i = 0; i < n && i < GB_CONFIG_ARGS_MAX; i++) {
        st->keys[i] = cfg->kv[i].key;
        st->values[i] = cfg->kv[i].value;
    }
    st->args = (gb_env_args){.count = n, .keys = st->keys, .values = st->values};
}

int gb_env_source_open_config(gb_env_source *src, const gb_config_env *env, int for_eval,
                              gb_env_args_store *args, gb_error *err)
{
    int rc = gb_env_source_open(src, env->name, env->plugin, err);
    if (rc)
        return rc;
    gb_env_source_wrap_config(src, env, for_eval);
    if (args)
        gb_env_args_from_config(args, &env->args);
    return 0;
}

int gb_env_args_add(gb_env_args_store *st, const char *key, const char *value, gb_error *err)
{
    st->args.keys = st->keys;
    st->args.values = st->values;
    for (int i = 0; i < st->args.count; i++)
        if (strcmp(st->keys[i], key) == 0) {
            st->values[i] = value;
            return 0;
        }
    if (st->args.count >= GB_CONFIG_ARGS_MAX)
        return gb_error_set(err, GB_EFULL, "more than %d environment arguments",
                            GB_CONFIG_ARGS_MAX);
    st->keys[st->args.count] = key;
    st->values[st->args.count] = value;
    st->args.count++;
    return 0;
}

int gb_env_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                  void **env, gb_env_spec *spec, gb_error *err)
{
    char msg[512] = "";
    memset(spec, 0, sizeof *spec);
    static const gb_env_args none = {0, NULL, NULL};
    void *e = gb_env_wrap_is(iface)
                  ? gb_env_wrap_create(iface, args ? args : &none, seed, spec, msg, sizeof msg)
                  : iface->create(args ? args : &none, seed, spec, msg, sizeof msg);
    if (!e)
        return gb_error_set(err, GB_EINVAL, "%s: create failed: %s", iface->name,
                            msg[0] ? msg : "(no message)");
    int rc = gb_env_spec_validate(spec, iface, err);
    if (rc) {
        iface->destroy(e);
        return rc;
    }
    *env = e;
    return 0;
}
