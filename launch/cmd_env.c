/* launch/cmd_env.c: `gearbox env list` and `gearbox env check TARGET [--args k=v ...]
 * [--wrap k=v ...]`. */
#include "envs/builtin.h"
#include "envs/check.h"
#include "envs/host.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "runtime/run/rundir.h"
#include "workers/roles/worker.h"
#include "workers/torch/bridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void env_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox env list\n"
            "       gearbox env spec CONFIG|RUN_DIR\n"
            "       gearbox env check PLUGIN.so|NAME [--args KEY=VALUE ...]\n"
            "                         [--wrap KEY=VALUE ...] [--seed N]\n"
            "                         [--steps N] [--max-episode-steps N] [--seconds S]\n"
            "                         [--timeout S] [--no-fork]\n\n"
            "list   the built-in environments with their spaces and time limits\n"
            "spec   the spaces a config's environment (with its arguments and wrappers) gives the\n"
            "       networks, as one JSON object: observation dtype and shape, agents, the\n"
            "       action space (discrete n, or a box's dimensions and bounds)\n"
            "check  load an environment (a plugin path, or a built-in name) and check it: its\n"
            "       interface and spaces; N random-action steps on two copies with the same seed\n"
            "       in lockstep (they must agree bit for bit; NaN or infinite values, flags other\n"
            "       than 0/1, and writes past or short of the declared sizes fail); render; and\n"
            "       steps per second. Runs in a child process: a crash or a hang is reported.\n\n"
            "options:\n"
            "  --args KEY=VALUE ...    the environment's arguments (env.args in a config)\n"
            "  --wrap KEY=VALUE ...    preprocessing wrappers around it (env.wrappers), e.g.\n"
            "                          frame_skip=4 screen_size=84 frame_stack=4 noop_max=30\n"
            "  --seed N                seed of the copies (default 1)\n"
            "  --steps N               lockstep steps (default 10000)\n"
            "  --max-episode-steps N   override the environment's time limit\n"
            "  --seconds S             length of the speed measurement (default 1)\n"
            "  --timeout S             fail when the check takes longer (default 120)\n"
            "  --no-fork               run in this process (for a debugger)\n\n"
            "exit status: 0 passed, 1 the environment misbehaved, 2 usage error, not found,\n"
            "             or --args refused by the environment (its create())\n");
}

static int env_list(void)
{
    int n;
    const gb_env_interface *const *all = gb_env_builtins(&n);
    printf("%-26s %-7s %-16s %-18s %-6s %s\n", "NAME", "AGENTS", "OBSERVATION", "ACTION",
           "LIMIT", "DESCRIPTION");
    for (int i = 0; i < n; i++) {
        const gb_env_interface *e = all[i];
        gb_error err = {0};
        void *env = NULL;
        gb_env_spec s;
        if (gb_env_create(e, NULL, 0, &env, &s, &err)) {
            printf("%-26s (cannot create: %s)\n", e->name, err.msg);
            continue;
        }
        char obs[64], act[64];
        int used = snprintf(obs, sizeof obs, "%s[", gb_dtype_name(gb_env_dtype_to_gb(s.obs.dtype)));
        for (int d = 0; d < s.obs.ndim && used < (int)sizeof obs; d++)
            used += snprintf(obs + used, sizeof obs - (size_t)used, "%s%lld", d ? "," : "",
                             (long long)s.obs.shape[d]);
        if (used < (int)sizeof obs - 1)
            strcat(obs, "]");
        if (s.action.kind == GB_ENV_SPACE_DISCRETE)
            snprintf(act, sizeof act, "Discrete(%d)", s.action.n);
        else
            snprintf(act, sizeof act, "Box(%d)[%g,%g]", s.action.n, (double)s.action.low[0],
                     (double)s.action.high[0]);
        printf("%-26s %-7d %-16s %-18s %-6lld %s\n", e->name, s.agents, obs, act,
               (long long)s.max_episode_steps, e->description ? e->description : "");
        e->destroy(env);
    }
    printf("\nA plugin is any shared library exporting %s (see envs/README.md);\n"
           "configs name it with env.name: plugin and env.plugin: PATH.\n",
           GB_ENV_ENTRY_SYMBOL);
    return GB_EXIT_OK;
}

enum {
    OPT_ARGS = 256,
    OPT_WRAP,
    OPT_SEED,
    OPT_STEPS,
    OPT_MAX_STEPS,
    OPT_SECONDS,
    OPT_TIMEOUT,
    OPT_NO_FORK
};

static const struct option check_options[] = {
    {"args", no_argument, NULL, OPT_ARGS},
    {"wrap", no_argument, NULL, OPT_WRAP},
    {"seed", required_argument, NULL, OPT_SEED},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"max-episode-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"no-fork", no_argument, NULL, OPT_NO_FORK},
    {NULL, 0, NULL, 0},
};

typedef struct check_args {
    const char *target;
    int in_args; /* after --args (1) or --wrap (2): positionals are KEY=VALUE until an option */
    gb_env_args_store args;
    gb_env_wrap_params wrap;
    gb_env_check_options o;
} check_args;

static const char *option_name(int opt)
{
    for (const struct option *o = check_options; o->name; o++)
        if (o->val == opt)
            return o->name;
    return "?";
}

/* KEY=VALUE of --args, an argv string: cut at '=' in place (argv is writable), as the store
 * keeps pointers. */
static int take_env_arg(check_args *c, const char *arg)
{
    char *kv = (char *)arg;
    char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
        fprintf(stderr, "gearbox env check: --args expects KEY=VALUE, got '%s'\n", kv);
        return -1;
    }
    *eq = '\0';
    gb_error err = {0};
    if (gb_env_args_add(&c->args, kv, eq + 1, &err)) {
        fprintf(stderr, "gearbox env check: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* KEY=VALUE of --wrap: one preprocessing wrapper's setting (env.wrappers.KEY). */
static int take_wrap(check_args *c, const char *arg)
{
    char msg[256];
    if (gb_env_wrap_params_pair(&c->wrap, arg, msg, sizeof msg)) {
        fprintf(stderr, "gearbox env check: --wrap: %s\n", msg);
        return -1;
    }
    return 0;
}

static int take_number(check_args *c, int opt, const char *v)
{
    char *end;
    if (opt == OPT_SECONDS || opt == OPT_TIMEOUT) {
        double d = strtod(v, &end);
        if (end == v || *end || !(d > 0)) {
            fprintf(stderr, "gearbox env check: --%s expects a positive number, got '%s'\n",
                    option_name(opt), v);
            return -1;
        }
        *(opt == OPT_SECONDS ? &c->o.speed_seconds : &c->o.timeout_s) = d;
        return 0;
    }
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || x < 0) {
        fprintf(stderr, "gearbox env check: --%s expects a non-negative integer, got '%s'\n",
                option_name(opt), v);
        return -1;
    }
    if (opt == OPT_SEED)
        c->o.seed = (uint64_t)x;
    else
        *(opt == OPT_STEPS ? &c->o.steps : &c->o.max_episode_steps) = x;
    return 0;
}

static int take_check(void *ctx, int opt, const char *arg)
{
    check_args *c = ctx;
    int in_args = c->in_args;
    c->in_args = opt == OPT_ARGS   ? 1
                 : opt == OPT_WRAP ? 2
                 : opt == GB_CLI_POSITIONAL ? in_args
                                            : 0;
    switch (opt) {
    case OPT_ARGS: return 0;
    case OPT_WRAP: return 0;
    case OPT_NO_FORK: c->o.no_fork = 1; return 0;
    case GB_CLI_POSITIONAL:
        if (in_args)
            return in_args == 2 ? take_wrap(c, arg) : take_env_arg(c, arg);
        if (c->target) {
            fprintf(stderr, "gearbox env check: more than one target ('%s', '%s')\n",
                    c->target, arg);
            return -1;
        }
        c->target = arg;
        return 0;
    case GB_CLI_UNKNOWN:
    case GB_CLI_NO_VALUE:
        fprintf(stderr, "gearbox env check: unknown or incomplete option '%s'\n\n", arg);
        env_usage(stderr);
        return -1;
    default:
        return take_number(c, opt, arg);
    }
}

static int env_check(int argc, char **argv)
{
    static check_args c; /* the store is large */
    c = (check_args){.wrap = gb_env_wrap_params_default(),
                     .o = {.seed = 1, .steps = 10000, .speed_seconds = 1.0, .timeout_s = 120.0,
                           .out = stdout}};
    if (gb_cli_getopt(argc, argv, "", check_options, take_check, &c) != 0)
        return GB_EXIT_USAGE;
    const char *target = c.target;
    gb_env_check_options o = c.o;
    gb_error err = {0};
    if (!target) {
        env_usage(stderr);
        return GB_EXIT_USAGE;
    }
    o.args = &c.args.args;
    o.wrap = gb_env_wrap_active(&c.wrap) ? &c.wrap : NULL;
    int rc = gb_env_check(target, &o, &err);
    if (rc) {
        printf("FAIL: %s\n", err.msg);
        fflush(stdout);
        /* not found, or its arguments refused: the user's input (exit 2, as for a config) */
        return rc == GB_ENOTFOUND || rc == GB_ECONFIG ? GB_EXIT_USAGE : GB_EXIT_FAILURE;
    }
    printf("PASS\n");
    return GB_EXIT_OK;
}

/* gearbox env spec: what a program outside gearbox needs to play a run's policy beside the
 * policy file (launch/python/gearbox/policy.py): the space the networks see and emit. */
static int env_spec(int argc, char **argv)
{
    if (argc != 2) {
        env_usage(stderr);
        return GB_EXIT_USAGE;
    }
    static gb_config cfg; /* large */
    char path[4096];
    const char *config = argv[1];
    struct stat st;
    if (stat(config, &st) == 0 && S_ISDIR(st.st_mode)) { /* a run directory: its config */
        snprintf(path, sizeof path, "%s/config.yaml", config);
        config = path;
    }
    gb_error err = {0};
    gb_env_spec spec;
    gb_torch_space sp;
    int rc = gb_config_read(&cfg, config, NULL, 0, &err);
    if (rc == 0)
        rc = gb_worker_env_space(&cfg, &spec, &sp, &err);
    if (rc) {
        fprintf(stderr, "gearbox env spec: %s\n", err.msg);
        return rc == GB_EIO || rc == GB_ENOMEM ? GB_EXIT_FAILURE : GB_EXIT_USAGE;
    }
    printf("{\"env\": ");
    gb_rundir_json_string(stdout, cfg.env.name);
    printf(", \"agents\": %d, \"observation\": {\"dtype\": \"%s\", \"shape\": [", spec.agents,
           gb_dtype_name(sp.obs_dtype));
    for (int d = 0; d < sp.obs_ndim; d++)
        printf("%s%lld", d ? ", " : "", (long long)sp.obs_shape[d]);
    if (sp.discrete) {
        printf("]}, \"action\": {\"kind\": \"discrete\", \"n\": %lld}}\n",
               (long long)sp.n_actions);
        return GB_EXIT_OK;
    }
    printf("]}, \"action\": {\"kind\": \"box\", \"dim\": %lld, \"low\": [",
           (long long)sp.action_dim);
    for (int64_t i = 0; i < sp.action_dim; i++)
        printf("%s%.9g", i ? ", " : "", (double)sp.action_low[i]);
    printf("], \"high\": [");
    for (int64_t i = 0; i < sp.action_dim; i++)
        printf("%s%.9g", i ? ", " : "", (double)sp.action_high[i]);
    printf("]}}\n");
    return GB_EXIT_OK;
}

int gb_cmd_env(int argc, char **argv)
{
    if (argc < 2 || gb_wants_help(argc, argv)) {
        env_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? GB_EXIT_USAGE : GB_EXIT_OK;
    }
    if (strcmp(argv[1], "list") == 0)
        return env_list();
    if (strcmp(argv[1], "check") == 0)
        return env_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "spec") == 0)
        return env_spec(argc - 1, argv + 1);
    fprintf(stderr, "gearbox env: unknown subcommand '%s'\n\n", argv[1]);
    env_usage(stderr);
    return GB_EXIT_USAGE;
}
