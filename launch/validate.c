/* launch/validate.c: the one validation of a config before anything of a run starts (see
 * validate.h): env.plugin's path, the environment, the devices. */
#include "launch/validate.h"
#include "launch/footprint.h"
#include "launch/model_check.h"
#include "launch/trackers.h"

#include "envs/host.h"
#include "kernels/kernels.h"
#include "launch/commands.h"
#include "workers/roles/learning.h" /* gb_torch_space */
#include "workers/roles/worker.h"
#include "workers/torch/group.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The absolute folder of the config file cfg was read from, into out; 0 when it came from no
 * file (a joiner's config, from the run's registry). */
static int config_folder(const gb_config *cfg, char *out, size_t cap)
{
    char real[PATH_MAX];
    struct stat st;
    if (!cfg->source[0] || stat(cfg->source, &st) != 0 || !S_ISREG(st.st_mode) ||
        !realpath(cfg->source, real))
        return 0;
    char *slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0'; /* a config in "/" */
    else
        *slash = '\0';
    return snprintf(out, cap, "%s", real) < (int)cap;
}

/* dir/rel as an absolute path with its folders resolved (the file's own name kept, so a
 * symlinked library stays the link), into out; 0 when that folder does not exist or the result
 * does not fit. */
static int absolute_in(const char *dir, const char *rel, char *out, size_t cap)
{
    char joined[2 * PATH_MAX], folder[PATH_MAX];
    snprintf(joined, sizeof joined, "%s/%s", dir, rel);
    char *slash = strrchr(joined, '/');
    *slash = '\0';
    if (!realpath(joined, folder))
        return 0;
    return snprintf(out, cap, "%s%s%s", folder, strcmp(folder, "/") ? "/" : "", slash + 1) <
           (int)cap;
}

/* A relative env.plugin made absolute (see validate.h: the config file's folder, then the current
 * one; for a --set the other way round). Returns 0, or GB_ECONFIG naming every path tried. */
static int resolve_plugin(gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    const char *rel = cfg->env.plugin;
    if (strcmp(cfg->env.name, "plugin") != 0 || !rel[0] || rel[0] == '/')
        return 0; /* an absolute path is taken as it is (the loader names a missing one) */
    char cwd[PATH_MAX], conf[PATH_MAX];
    int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
    int have_conf = config_folder(cfg, conf, sizeof conf);
    int set_by_flag = gb_config_key_origin(marks, "env.plugin") == 2;
    const char *dirs[2], *why[2];
    int n = 0;
    if (have_cwd && set_by_flag) { /* typed where gearbox runs: the current folder first */
        dirs[n] = cwd;
        why[n++] = "the current folder";
    }
    if (have_conf) {
        dirs[n] = conf;
        why[n++] = "beside the config file";
    }
    if (have_cwd && !set_by_flag) {
        dirs[n] = cwd;
        why[n++] = "the current folder";
    }
    if (n == 2 && strcmp(dirs[0], dirs[1]) == 0) /* the config is in the current folder */
        n = 1;
    char tried[2][GB_CONFIG_PATH_MAX];
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (!absolute_in(dirs[i], rel, tried[i], sizeof tried[i])) {
            /* its folder does not exist: named as joined (cut to fit) */
            if (snprintf(tried[i], sizeof tried[i], "%s/%s", dirs[i], rel) < 0)
                tried[i][0] = '\0';
            continue;
        }
        if (stat(tried[i], &st) == 0) {
            _Static_assert(sizeof tried[i] == sizeof cfg->env.plugin, "one size of path");
            memcpy(cfg->env.plugin, tried[i], sizeof cfg->env.plugin);
            return 0;
        }
    }
    if (n == 0)
        return gb_config_fail_key(marks, "env.plugin", err, "%s: a relative path, and neither "
                                  "the config's folder nor the current one is known", rel);
    if (n == 1)
        return gb_config_fail_key(marks, "env.plugin", err, "no file %s: tried %s (%s)", rel,
                                  tried[0], why[0]);
    return gb_config_fail_key(marks, "env.plugin", err, "no file %s: tried %s (%s) and %s (%s)",
                              rel, tried[0], why[0], tried[1], why[1]);
}

/* What every worker does first with the environment: resolve it (a built-in, a shipped plugin
 * or env.plugin), create one copy with env.args and the config's seed, and convert its spaces
 * for the learner. Errors at env.plugin or env.name (not found, not loadable), env.args (the
 * copy refused them) or env.name (spaces the algorithms cannot take). */
static int check_env(gb_config *cfg, const gb_config_marks *marks, gb_env_spec *spec,
                     gb_error *err)
{
    int rc = resolve_plugin(cfg, marks, err);
    if (rc)
        return rc;
    const char *where = strcmp(cfg->env.name, "plugin") == 0 ? "env.plugin" : "env.name";
    gb_env_source src;
    gb_error e = {0};
    if (gb_env_source_open(&src, cfg->env.name, cfg->env.plugin, &e) != 0)
        return gb_config_fail_key(marks, where, err, "%s", e.msg);
    gb_env_source_close(&src);
    gb_torch_space space;
    if ((rc = gb_worker_env_space(cfg, spec, &space, &e)) != 0) {
        if (rc == GB_ENOMEM)
            return gb_error_set(err, rc, "%s", e.msg);
        return gb_config_fail_key(marks, cfg->env.args.n ? "env.args" : where, err, "%s", e.msg);
    }
    return 0;
}

/* A cuda trainer or policy worker that cannot run: without CUDA in this build, or (where it
 * runs here: trainer_here, policy_here) without a visible device. On Slurm the nodes have the
 * GPUs: only the build is checked (the trainer checks the rest, libtorch's CUDA included). */
static int check_devices(const gb_config *cfg, const gb_config_marks *marks, int trainer_here,
                         int policy_here, gb_error *err)
{
    int built = gb_kernels_cuda_built();
    if (trainer_here >= 0 && cfg->trainer.device == GB_DEVICE_CUDA &&
        (!built || (trainer_here && gb_kernels_device_count() < 1)))
        return gb_config_fail_key(marks, "trainer.device", err, "cuda: %s; use cpu",
                                  !built ? "this gearbox was built without CUDA"
                                         : "no CUDA device is visible here");
    /* several trainers' gradients over NCCL: a libtorch that has it (loads the module) */
    if (trainer_here >= 0 && cfg->trainer.count > 1 && cfg->trainer.backend == GB_BACKEND_NCCL &&
        !gb_group_has_nccl())
        return gb_config_fail_key(marks, "trainer.backend", err,
                                  "nccl: this gearbox's libtorch has no NCCL (Debian's is "
                                  "CPU-only); build against PyTorch's CUDA wheel, or use gloo");
    /* a policy worker on cuda runs the bridge's model (libtorch's): a build without gearbox's
     * kernels may still act on a GPU */
    if (policy_here > 0 && cfg->policy.device == GB_DEVICE_CUDA && built &&
        gb_kernels_device_count() < 1)
        return gb_config_fail_key(marks, "policy.device", err,
                                  "cuda: no CUDA device is visible here; use cpu");
    return 0;
}

int gb_validate_check(gb_config *cfg, const gb_config_marks *marks, void *arg, gb_error *err)
{
    gb_validate_here here = arg ? *(const gb_validate_here *)arg : GB_VALIDATE_RUN;
    gb_env_spec spec;
    gb_footprint fp;
    int rc = check_env(cfg, marks, &spec, err);
    if (rc == 0 && here == GB_VALIDATE_RUN)
        rc = gb_footprint_check(cfg, marks, &spec, &fp, err);
    if (rc == 0 && here == GB_VALIDATE_RUN)
        rc = gb_trackers_check(cfg, marks, err);
    if (rc)
        return rc;
    /* trainer_here: 1 here, 0 on Slurm's nodes, -1 none; policy_here: 1 here, else 0 */
    int trainer_here = 1, policy_here = 1;
    if (here == GB_VALIDATE_RUN && cfg->launch.mode == GB_LAUNCH_SLURM)
        trainer_here = policy_here = 0;
    else if (here == GB_VALIDATE_RUN && cfg->launch.mode == GB_LAUNCH_INLINE)
        policy_here = 0; /* inline acts with the learner's own model */
    else if (here != GB_VALIDATE_RUN)
        trainer_here = here == GB_VALIDATE_JOIN_TRAINER ? 1 : -1,
        policy_here = here == GB_VALIDATE_JOIN_POLICY;
    rc = check_devices(cfg, marks, trainer_here, policy_here, err);
    /* a TorchScript model's outputs against the environment's spaces, before any worker */
    if (rc == 0 && here != GB_VALIDATE_JOIN_ACTOR)
        rc = gb_model_check(cfg, marks, err);
    return rc;
}

int gb_validate_cli(int argc, char **argv, int flags, gb_cli *cli, gb_config *cfg)
{
    if (gb_cli_parse(argc, argv, flags, cli) != 0)
        return GB_EXIT_USAGE;
    /* run's --backend is launch.mode, set before the checks (some keys must agree with it) */
    static const char *sets[GB_CLI_MAX_SETS + 1];
    int nsets = cli->nsets;
    memcpy(sets, cli->sets, (size_t)nsets * sizeof sets[0]);
    if (cli->backend) {
        if (strcmp(cli->backend, "local") == 0)
            sets[nsets++] = "launch.mode=local";
        else if (strcmp(cli->backend, "slurm") == 0)
            sets[nsets++] = "launch.mode=slurm";
        else {
            fprintf(stderr, "gearbox %s: --backend must be local or slurm, not \"%s\"\n",
                    argv[0], cli->backend);
            return GB_EXIT_USAGE;
        }
    }
    gb_error err = {0};
    gb_validate_here here = GB_VALIDATE_RUN;
    int rc = gb_config_read_checked(cfg, cli->config, sets, nsets, gb_validate_check, &here,
                                    &err);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return rc == GB_ENOMEM ? GB_EXIT_FAILURE : GB_EXIT_USAGE;
    }
    return GB_EXIT_OK;
}

int gb_validate_reward_range(const gb_config *cfg, double *low, double *high)
{
    gb_env_spec spec;
    gb_torch_space space;
    gb_error e = {0};
    if (cfg->env.wrappers.episodic_life || cfg->env.wrappers.clip_reward ||
        gb_worker_env_space(cfg, &spec, &space, &e) != 0 ||
        !(spec.flags & GB_ENV_REWARD_RANGE))
        return 0;
    *low = spec.reward_low;
    *high = spec.reward_high;
    return 1;
}
