/* launch/cmd_check.c: `gearbox check CONFIG [--set key=value ...]`: validate the config and its
 * environment (loaded and one copy created, as a run would) and print the resolved config as
 * YAML that loads back to the same structs; `gearbox check --explain [KEY]`: the schema's
 * documentation of a key, a section or every key. */
#include "envs/host.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "runtime/config/config.h"
#include "workers/roles/learning.h" /* gb_torch_space */
#include "workers/roles/worker.h"

#include <stdio.h>
#include <string.h>

static void check_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox check CONFIG.yaml [--set key.path=value ...]\n"
            "       gearbox check --explain [KEY]\n\n"
            "Loads CONFIG.yaml, applies the overrides in order, checks every key (type, range,\n"
            "choices, required keys, keys that must agree), loads the environment (a built-in\n"
            "or env.plugin) and creates one copy with env.args, and prints the resolved config,\n"
            "all defaults included, as YAML. Errors name file:line:column and the key path.\n\n"
            "  --set key.path=value   override one key; the value is YAML (3, true, \"x\",\n"
            "                         [64, 64]); env.args.NAME=value sets an env argument\n"
            "  --explain [KEY]        print what KEY means (type, default, range or choices);\n"
            "                         KEY may be a section (trainer.replay); no KEY: every key\n\n"
            "exit status: 0 valid, 2 usage or config error (the environment included)\n");
}

/* What `run` would do first with the environment: resolve it (built-in or plugin), create one
 * copy with the config's arguments and seed, and convert its spaces for the learner. Returns 0,
 * or the error with its message in err. */
static int check_env(const gb_config *cfg, gb_error *err)
{
    gb_env_spec spec;
    gb_torch_space space;
    return gb_worker_env_space(cfg, &spec, &space, err);
}

int gb_cmd_check(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        check_usage(stdout);
        return GB_EXIT_OK;
    }
    /* `--explain [KEY]` anywhere: the schema's documentation, whatever else argv holds */
    static const struct option explain[] = {{"explain", optional_argument, NULL, 'e'},
                                            {NULL, 0, NULL, 0}};
    const char *key = NULL;
    if (gb_cli_find(argc, argv, "", explain, &key) == 'e') {
        if (gb_config_explain(stdout, key) != 0) {
            fprintf(stderr, "gearbox check: --explain: no key or section \"%s\" in the schema "
                    "(gearbox check --explain lists every key)\n", key);
            return GB_EXIT_USAGE;
        }
        return fflush(stdout) == 0 ? GB_EXIT_OK : GB_EXIT_FAILURE;
    }
    gb_cli cli;
    static gb_config cfg; /* large: keep it off the stack */
    int urc = gb_cli_load(argc, argv, 0, &cli, &cfg);
    if (urc != GB_EXIT_OK)
        return urc;
    gb_error err = {0};
    if (check_env(&cfg, &err) != 0) {
        fprintf(stderr, "%s: env: %s\n", cli.config, err.msg);
        return GB_EXIT_USAGE;
    }
    fprintf(stdout, "# resolved from %s by gearbox check\n", cli.config);
    if (gb_config_write(&cfg, stdout) != 0 || fflush(stdout) != 0) {
        perror("gearbox check: writing the config");
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
