/* envs/host.h: the host side of the environment ABI: finding an environment by name (built-in)
 * or path (plugin, through dlopen), checking what it declares, converting config arguments,
 * and creating validated copies. The environment ring (envs/ring.h) builds on this.
 * defines: gb_env_source, gb_env_source_open, gb_env_shipped_find, gb_env_plugin_open,
 *          gb_env_source_wrap, gb_env_source_close,
 *          gb_env_interface_validate (a spec's checks and sizes: spec.h),
 *          gb_env_args_store, gb_env_args_from_config, gb_env_source_open_config,
 *          gb_env_args_add,
 *          gb_env_create, gb_env_dtype_to_gb */
#ifndef GB_ENVS_HOST_H
#define GB_ENVS_HOST_H

#include "envs/env.h"
#include "envs/spec.h"
#include "envs/wrap.h"
#include "runtime/config/config.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"

#include <stddef.h>

/* Where an environment's interface came from. */
typedef struct gb_env_source {
    const gb_env_interface *iface;
    void *dl;                       /* dlopen handle for a plugin, NULL for a built-in */
    char path[GB_CONFIG_PATH_MAX]; /* plugin path, "" for a built-in */
    gb_env_wrapped wrapped;         /* iface points here once wrapped (gb_env_source_wrap) */
} gb_env_source;

/* Resolves an environment as the config names it: `name` is a built-in's name, a shipped
 * plugin's (gb_env_shipped_find), or "plugin" with `plugin_path` the shared library.
 * Fills *src. Returns 0, GB_ENOTFOUND (unknown name, missing file or symbol) or GB_EINVAL
 * (wrong ABI version, malformed interface), with a message.
 * Blocks on dlopen only. */
int gb_env_source_open(gb_env_source *src, const char *name, const char *plugin_path,
                       gb_error *err);

/* Shipped plugins: env.name NAME that is not a built-in loads GB_ENV_SHIPPED_PREFIX NAME ".so"
 * from the first directory that has it: each of $GEARBOX_ENV_PLUGIN_PATH (colon-separated),
 * <directory of the running executable>/../lib/gearbox/envs, the build tree's lib/gearbox/envs,
 * and the installed <libdir>/gearbox/envs. Writes the path to out (cap bytes).
 * Returns 0, or GB_ENOTFOUND (none, or name is not a plain word of [A-Za-z0-9_-]). */
#define GB_ENV_SHIPPED_PREFIX "gearbox_env_"
int gb_env_shipped_find(const char *name, char *out, size_t cap);

/* Loads the plugin at path (dlopen with RTLD_NOW | RTLD_LOCAL), finds GB_ENV_ENTRY_SYMBOL,
 * calls it and checks the interface (gb_env_interface_validate). Errors as above; on error
 * nothing stays loaded. */
int gb_env_plugin_open(gb_env_source *src, const char *path, gb_error *err);

/* Puts the preprocessing wrappers (envs/wrap.h) of the config's env.wrappers around an opened
 * source: its iface becomes the wrapper's (the source must then stay where it is). A no-op when
 * no wrapper is asked for. for_eval drops the training-only ones (episodic life, reward
 * clipping). Whether the wrappers fit the environment is checked when a copy is created. */
void gb_env_source_wrap(gb_env_source *src, const gb_env_wrap_params *p, int for_eval);

/* gb_env_source_wrap with the config's env.wrappers. */
void gb_env_source_wrap_config(gb_env_source *src, const gb_config_env *env, int for_eval);

/* Unloads a plugin (after every copy made from it is destroyed); a no-op for built-ins and a
 * zeroed source. */
void gb_env_source_close(gb_env_source *src);

/* Checks an interface: ABI version, struct size, name and the required functions.
 * Returns 0 or GB_EINVAL. `what` names it in messages (a path or a name). */
int gb_env_interface_validate(const gb_env_interface *iface, const char *what, gb_error *err);


/* The runtime dtype of an env dtype code (the two share numbering; checked at compile time). */
gb_dtype gb_env_dtype_to_gb(int32_t env_dtype);

/* gb_env_args backed by caller storage: keys and values point into the config (or into the
 * argv strings added with gb_env_args_add); valid as long as those are. */
typedef struct gb_env_args_store {
    const char *keys[GB_CONFIG_ARGS_MAX];
    const char *values[GB_CONFIG_ARGS_MAX];
    gb_env_args args; /* pass &store.args to create() */
} gb_env_args_store;

/* Fills st from the config's env.args mapping (pointers into cfg). */
void gb_env_args_from_config(gb_env_args_store *st, const gb_config_args *cfg);

/* What every user of a config's environment does first: gb_env_source_open of env.name and
 * env.plugin, gb_env_source_wrap_config (for_eval as there) and, when args is not NULL,
 * gb_env_args_from_config of env.args. Returns 0 or gb_env_source_open's error (nothing
 * open). */
int gb_env_source_open_config(gb_env_source *src, const gb_config_env *env, int for_eval,
                              gb_env_args_store *args, gb_error *err);

/* Adds one key and value (pointers kept, not copied); a key already present is replaced.
 * Returns 0 or GB_EFULL past GB_CONFIG_ARGS_MAX. */
int gb_env_args_add(gb_env_args_store *st, const char *key, const char *value, gb_error *err);

/* Creates one copy with create() (a wrapped interface's through gb_env_wrap_create), then
 * validates its spec; on an invalid spec the copy is
 * destroyed. Returns 0 with *env and *spec set, or GB_EINVAL with the environment's message. */
int gb_env_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                  void **env, gb_env_spec *spec, gb_error *err);

#endif
