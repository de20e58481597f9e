/* launch/cmd_check.c: `gearbox check CONFIG [--set key=value ...]`: validate the config exactly
 * as `gearbox run` does before anything starts (launch/validate.h: its keys, its environment
 * loaded and one copy created, its devices) and print the resolved config as YAML that loads
 * back to the same structs; `gearbox check --explain [KEY]`: the schema's documentation of a
 * key, a section or every key. */
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/validate.h"
#include "runtime/config/config.h"

#include <stdio.h>
#include <string.h>

static void check_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox check CONFIG.yaml [--set key.path=value ...]\n"
            "       gearbox check --explain [KEY]\n\n"
            "Loads CONFIG.yaml, applies the overrides in order, checks every key (type, range,\n"
            "choices, required keys, keys that must agree), loads the environment (a built-in\n"
            "or env.plugin) and creates one copy with env.args, checks that a cuda device is\n"
            "there, and prints the resolved config, all defaults included, as YAML: the same\n"
            "checks `gearbox run` makes before it starts anything, with the same message.\n"
            "A relative env.plugin is found beside CONFIG.yaml, else in the current folder\n"
            "(for a --set: the other way round), and printed as an absolute path.\n"
            "Errors name file:line:column (or --set[N]) and the key path.\n\n"
            "  --set key.path=value   override one key; the value is YAML (3, true, \"x\",\n"
            "                         [64, 64]); env.args.NAME=value sets an env argument\n"
            "  --explain [KEY]        print what KEY means (type, default, range or choices);\n"
            "                         KEY may be a section (trainer.replay); no KEY: every key\n\n"
            "exit status: 0 valid, 2 usage or config error (the environment and devices\n"
            "             included)\n");
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
    int urc = gb_validate_cli(argc, argv, 0, &cli, &cfg);
    if (urc != GB_EXIT_OK)
        return urc;
    fprintf(stdout, "# resolved from %s by gearbox check\n", cli.config);
    if (gb_config_write(&cfg, stdout) != 0 || fflush(stdout) != 0) {
        perror("gearbox check: writing the config");
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
