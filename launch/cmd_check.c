/* launch/cmd_check.c: `gearbox check CONFIG [--set key=value ...]`: validate and print the
 * resolved config as YAML that loads back to the same structs. */
#include "launch/cli.h"
#include "launch/commands.h"
#include "runtime/config.h"

#include <stdio.h>

static void check_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox check CONFIG.yaml [--set key.path=value ...]\n\n"
            "Loads CONFIG.yaml, applies the overrides in order, checks every key (type, range,\n"
            "choices, required keys, keys that must agree) and prints the resolved config, all\n"
            "defaults included, as YAML. Errors name file:line:column and the key path.\n\n"
            "  --set key.path=value   override one key; the value is YAML (3, true, \"x\",\n"
            "                         [64, 64]); env.args.NAME=value sets an env argument\n\n"
            "exit status: 0 valid, 2 usage or config error\n");
}

int gb_cmd_check(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        check_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_cli cli;
    static gb_config cfg; /* large: keep it off the stack */
    int urc = gb_cli_load(argc, argv, 0, &cli, &cfg);
    if (urc != GB_EXIT_OK)
        return urc;
    fprintf(stdout, "# resolved from %s by gearbox check\n", cli.config);
    if (gb_config_write(&cfg, stdout) != 0 || fflush(stdout) != 0) {
        perror("gearbox check: writing the config");
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}
