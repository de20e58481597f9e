/* launch/cli.c: parsing CONFIG [--set key=value ...] and run's flags (see cli.h). */
#include "launch/cli.h"
#include "launch/commands.h"
#include "runtime/config/config.h"

#include <stdio.h>
#include <string.h>

/* Matches "--name value" and "--name=value"; advances *i past what it used. */
static int take(int argc, char **argv, int *i, const char *name, const char **out, int *bad)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *out = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "gearbox %s: %s needs a value\n", argv[0], name);
        *bad = 1;
        return 1;
    }
    *out = argv[++*i];
    return 1;
}

int gb_cli_parse(int argc, char **argv, int flags, gb_cli *out)
{
    memset(out, 0, sizeof *out);
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v = NULL;
        if (take(argc, argv, &i, "--set", &v, &bad)) {
            if (bad)
                break;
            if (out->nsets == GB_CLI_MAX_SETS) {
                fprintf(stderr, "gearbox %s: more than %d --set options\n", argv[0],
                        GB_CLI_MAX_SETS);
                return -1;
            }
            out->sets[out->nsets++] = v;
        } else if ((flags & GB_CLI_RUN_FLAGS) &&
                   (take(argc, argv, &i, "--backend", &out->backend, &bad) ||
                    take(argc, argv, &i, "--run-dir", &out->run_dir, &bad) ||
                    take(argc, argv, &i, "--record", &out->record, &bad) ||
                    take(argc, argv, &i, "--resume", &out->resume, &bad))) {
            continue;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "gearbox %s: unknown option %s (see gearbox %s --help)\n", argv[0],
                    argv[i], argv[0]);
            return -1;
        } else if (out->config) {
            fprintf(stderr, "gearbox %s: one CONFIG only, got %s and %s\n", argv[0], out->config,
                    argv[i]);
            return -1;
        } else {
            out->config = argv[i];
        }
    }
    if (bad)
        return -1;
    if (out->resume) {
        /* the run's own config, as it was resolved; --set may change it (a larger budget) */
        const char *clash = out->config ? out->config : out->run_dir ? "--run-dir"
                            : out->record ? "--record" : out->backend ? "--backend" : NULL;
        if (clash) {
            fprintf(stderr, "gearbox %s: --resume RUN_DIR continues that run with its own "
                    "config.yaml and folder: %s cannot go with it\n", argv[0], clash);
            return -1;
        }
        size_t n = strlen(out->resume);
        while (n > 1 && out->resume[n - 1] == '/')
            n--;
        if (n == 0 || snprintf(out->resume_config, sizeof out->resume_config, "%.*s/config.yaml",
                               (int)n, out->resume) >= (int)sizeof out->resume_config) {
            fprintf(stderr, "gearbox %s: --resume: \"%s\" is empty or too long\n", argv[0],
                    out->resume);
            return -1;
        }
        out->config = out->resume_config;
        return 0;
    }
    if (!out->config) {
        fprintf(stderr, "gearbox %s: missing CONFIG.yaml (see gearbox %s --help)\n", argv[0],
                argv[0]);
        return -1;
    }
    return 0;
}

int gb_cli_load(int argc, char **argv, int flags, gb_cli *cli, gb_config *cfg)
{
    if (gb_cli_parse(argc, argv, flags, cli) != 0)
        return GB_EXIT_USAGE;
    gb_error err = {0};
    if (gb_config_read(cfg, cli->config, cli->sets, cli->nsets, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    return GB_EXIT_OK;
}
