/* launch/cli.c: the commands' getopt_long driver, and CONFIG [--set key=value ...] with run's
 * flags (see cli.h). */
#include "launch/cli.h"
#include "launch/commands.h"
#include "runtime/config/config.h"

#include <stdio.h>
#include <string.h>

/* The option getopt_long just refused (opterr off), as typed: an unknown short option of a
 * group (-xv) by its letter, anything else as its whole element (--name=value). */
static const char *refused(char **argv, int c, char *buf, size_t n)
{
    if (c == '?' && optopt > 0 && optopt < 256) {
        snprintf(buf, n, "-%c", optopt);
        return buf;
    }
    return argv[optind - 1];
}

/* Runs getopt_long over argv (argv[0] the command; argv itself is not reordered) and hands
 * take each element in the order given: an option with its value (--name value, --name=value,
 * -o value, -ovalue; a long name may be shortened to a unique prefix), a positional argument
 * (also each one after "--"), or a refused option with its text. An optional value
 * (optional_argument) may also be the next element, when that does not start with '-'.
 * Stops at the first nonzero take and returns it; 0 when every element was taken. getopt's
 * state is global: this resets it before and after (optind 0, glibc's full reset), so that a
 * later getopt_long, in a command or a benchmark, starts afresh when it sets optind to 0. */
int gb_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
                  gb_cli_take_fn take, void *ctx)
{
    char opts[64], bad[8];
    snprintf(opts, sizeof opts, "-:%s", shortopts); /* in order, and ':' for a missing value */
    optind = 0;
    opterr = 0;
    int c, idx = 0, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, opts, longopts, &idx)) != -1) {
        const char *arg = optarg;
        if (c == GB_CLI_UNKNOWN || c == GB_CLI_NO_VALUE)
            arg = refused(argv, c, bad, sizeof bad);
        else if (c != GB_CLI_POSITIONAL && !arg && argv[optind - 1][1] == '-' &&
                 longopts[idx].has_arg == optional_argument && optind < argc &&
                 argv[optind][0] != '-')
            arg = argv[optind++];
        rc = take(ctx, c, arg);
    }
    for (int i = optind; rc == 0 && i < argc; i++) /* the positionals after "--" */
        rc = take(ctx, GB_CLI_POSITIONAL, argv[i]);
    optind = 0;
    return rc;
}

typedef struct find_ctx {
    int found;
    const char *arg;
} find_ctx;

static int take_found(void *ctx, int opt, const char *arg)
{
    find_ctx *f = ctx;
    if (opt == GB_CLI_POSITIONAL || opt == GB_CLI_UNKNOWN || opt == GB_CLI_NO_VALUE)
        return 0;
    f->found = opt;
    f->arg = arg;
    return 1;
}

/* The first of the given options anywhere in argv before a "--", whatever else argv holds (the
 * other options are skipped, not checked): returns its val with its value in *arg (NULL when
 * none), or 0 when argv has none of them. What a command looks for before it parses the rest:
 * --help, check's --explain, bench's --json. */
int gb_cli_find(int argc, char **argv, const char *shortopts, const struct option *longopts,
                const char **arg)
{
    find_ctx f = {0, NULL};
    gb_cli_getopt(argc, argv, shortopts, longopts, take_found, &f);
    if (arg)
        *arg = f.arg;
    return f.found;
}

/* -h or --help anywhere in argv before a "--". */
int gb_wants_help(int argc, char **argv)
{
    static const struct option help[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    return gb_cli_find(argc, argv, "h", help, NULL) == 'h';
}

enum { OPT_SET = 256, OPT_BACKEND, OPT_RUN_DIR, OPT_RECORD, OPT_RESUME };

/* run's options, then the one serve and check have too (set_options) */
static const struct option cli_options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"run-dir", required_argument, NULL, OPT_RUN_DIR},
    {"record", required_argument, NULL, OPT_RECORD},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"set", required_argument, NULL, OPT_SET},
    {NULL, 0, NULL, 0},
};
static const struct option *const set_options = &cli_options[4];

typedef struct cli_ctx {
    gb_cli *out;
    const char *cmd;
} cli_ctx;

static int take_cli(void *ctx, int opt, const char *arg)
{
    cli_ctx *c = ctx;
    gb_cli *out = c->out;
    switch (opt) {
    case OPT_SET:
        if (out->nsets == GB_CLI_MAX_SETS) {
            fprintf(stderr, "gearbox %s: more than %d --set options\n", c->cmd, GB_CLI_MAX_SETS);
            return -1;
        }
        out->sets[out->nsets++] = arg;
        return 0;
    case OPT_BACKEND: out->backend = arg; return 0;
    case OPT_RUN_DIR: out->run_dir = arg; return 0;
    case OPT_RECORD: out->record = arg; return 0;
    case OPT_RESUME: out->resume = arg; return 0;
    case GB_CLI_NO_VALUE:
        fprintf(stderr, "gearbox %s: %s needs a value\n", c->cmd, arg);
        return -1;
    case GB_CLI_POSITIONAL:
        if (out->config) {
            fprintf(stderr, "gearbox %s: one CONFIG only, got %s and %s\n", c->cmd, out->config,
                    arg);
            return -1;
        }
        out->config = arg;
        return 0;
    default:
        fprintf(stderr, "gearbox %s: unknown option %s (see gearbox %s --help)\n", c->cmd, arg,
                c->cmd);
        return -1;
    }
}

/* --resume RUN_DIR: CONFIG is the run's own config.yaml, as it was resolved (--set may change
 * it: a larger budget); neither another CONFIG nor another folder goes with it. */
static int resolve_resume(gb_cli *out, const char *cmd)
{
    const char *clash = out->config ? out->config : out->run_dir ? "--run-dir"
                        : out->record ? "--record" : out->backend ? "--backend" : NULL;
    if (clash) {
        fprintf(stderr, "gearbox %s: --resume RUN_DIR continues that run with its own "
                "config.yaml and folder: %s cannot go with it\n", cmd, clash);
        return -1;
    }
    size_t n = strlen(out->resume);
    while (n > 1 && out->resume[n - 1] == '/')
        n--;
    if (n == 0 || snprintf(out->resume_config, sizeof out->resume_config, "%.*s/config.yaml",
                           (int)n, out->resume) >= (int)sizeof out->resume_config) {
        fprintf(stderr, "gearbox %s: --resume: \"%s\" is empty or too long\n", cmd, out->resume);
        return -1;
    }
    out->config = out->resume_config;
    return 0;
}

/* Parses argv (argv[0] the subcommand's name) into out: CONFIG, --set in order, and with
 * GB_CLI_RUN_FLAGS run's flags. Nothing is copied: the strings point into argv. On a usage
 * error prints it to stderr prefixed with "gearbox <cmd>: " and returns -1; else 0. */
int gb_cli_parse(int argc, char **argv, int flags, gb_cli *out)
{
    memset(out, 0, sizeof *out);
    cli_ctx c = {out, argv[0]};
    const struct option *options = flags & GB_CLI_RUN_FLAGS ? cli_options : set_options;
    if (gb_cli_getopt(argc, argv, "", options, take_cli, &c) != 0)
        return -1;
    if (out->resume)
        return resolve_resume(out, argv[0]);
    if (!out->config) {
        fprintf(stderr, "gearbox %s: missing CONFIG.yaml (see gearbox %s --help)\n", argv[0],
                argv[0]);
        return -1;
    }
    return 0;
}

/* gb_cli_parse, then reads cli->config (with --resume: the run's config.yaml) with the --set
 * overrides into cfg, validated; errors name file:line:column and key and go to stderr.
 * Returns GB_EXIT_OK or GB_EXIT_USAGE. */
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
