/* launch/cmd_pending.c: subcommands whose issues have not landed yet. Each says so plainly and
 * fails (exit 1); none pretends. Each moves to its own cmd_<name>.c when it is implemented. */
#include "launch/commands.h"

#include <stdio.h>

static int pending(const char *name, const char *what, int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        printf("usage: gearbox %s ...\n\n%s\n\nNot implemented yet in this build.\n", name, what);
        return GB_EXIT_OK;
    }
    fprintf(stderr, "gearbox %s: not implemented yet (%s)\n", name, what);
    return GB_EXIT_FAILURE;
}

int gb_cmd_serve(int argc, char **argv)
{
    return pending("serve", "serve a replay as an offline-RL data server", argc, argv);
}

