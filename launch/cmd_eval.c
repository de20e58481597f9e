/* launch/cmd_eval.c: `gearbox eval RUN_DIR`: plays episodes with a run's checkpointed policy in
 * this process (one environment copy, no workers, no sockets) and reports the returns, as text
 * or one JSON object; with --video it renders every step and encodes an MP4 (launch/video.h),
 * and with --gif also makes it into a small animated GIF (for TensorBoard, launch/evals.h).
 *
 * Frames: exactly one per step played, the frame of the state the action was chosen in (the
 * reset state for an episode's first step); the state an episode ends in is not drawn. So an MP4
 * of N episodes has as many frames as the JSON's "steps" (the sum of the lengths). */
#include "envs/host.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/eval_policy.h"
#include "launch/video.h"
#include "runtime/config/config.h"
#include "runtime/run/rundir.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/roles/learning.h"
#include "workers/roles/policy_mlp.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --gif: frames per second and width (pixels) of the GIF made from the MP4 */
#define EVAL_GIF_FPS 15
#define EVAL_GIF_WIDTH 160

/* An episode longer than this ends (truncated) when neither the config nor the environment
 * sets a time limit. */
#define EVAL_STEP_CAP 100000
#define EVAL_MAX_EPISODES 100000

/* The shipped plugin that runs any Gymnasium environment (envs/gymnasium): its interface name. */
#define GB_EVAL_GYMNASIUM "gymnasium"

static void eval_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox eval RUN_DIR [--episodes N] [--deterministic] [--checkpoint NAME]\n"
            "                    [--video OUT.mp4 [--gif OUT.gif] [--video-episodes K]]\n"
            "                    [--fps F] [--json] [--seed S]\n\n"
            "Loads RUN_DIR/config.yaml and the policy the run delivered, plays N episodes of\n"
            "its environment in this process and prints the mean and standard deviation of\n"
            "the episode returns (multi-agent: the mean over agents) and lengths. The policy\n"
            "delivered: when the run ended solved by an evaluation, the policy that evaluation\n"
            "played (checkpoints/solved: the run's last checkpoint too when the evaluation held\n"
            "the trainers, experiment.eval_hold); otherwise the run's last checkpoint.\n\n"
            "  --episodes N       episodes to play (default 10)\n"
            "  --deterministic    greedy actions (PPO: argmax or the Gaussian mean; SAC: the\n"
            "                     mean; DQN: argmax); otherwise actions are sampled (DQN:\n"
            "                     epsilon-greedy with trainer.algorithm.dqn.epsilon_end)\n"
            "  --checkpoint NAME  a checkpoint set in RUN_DIR/checkpoints (the manifest\n"
            "                     NAME.checkpoint: trainer-0 is the last, solved the one the\n"
            "                     deciding evaluation played), or the path of a .model file\n"
            "  --video OUT.mp4    render every step and encode an H.264 MP4 with ffmpeg: one\n"
            "                     frame per step played (the state the action was chosen in);\n"
            "                     odd frame sizes are padded to even with black; env.name\n"
            "                     gymnasium: the environment is made with render_mode\n"
            "                     rgb_array (classic control draws with pygame)\n"
            "  --gif OUT.gif      with --video: also make the MP4 into an animated GIF (ffmpeg,\n"
            "                     %d frames per second, %d pixels wide), as TensorBoard shows\n"
            "                     videos (experiment.eval_every logs it as eval/video)\n"
            "  --video-episodes K with --video: film the first K episodes only (default all)\n"
            "  --fps F            frames per second of the video (default 30)\n"
            "  --json             print one JSON object instead of text: episodes, steps,\n"
            "                     return_mean, return_std, length_mean, length_std, returns,\n"
            "                     lengths, frames, checkpoint, checkpoint_step, kernels, ...\n"
            "  --seed S           seed of the environment and of sampled actions (default: the\n"
            "                     run's experiment.seed)\n"
            "  --kernels K        what plays the policy: gearbox (default): gearbox's C, without\n"
            "                     loading libtorch, where the checkpoint has a policy file (a\n"
            "                     plain MLP's trainer writes one), else libtorch; libtorch:\n"
            "                     libtorch's model from the model file, always\n"
            "  --wait-stdin       make the environment (and load libtorch where it will play),\n"
            "                     then wait for a line on standard input before reading the\n"
            "                     checkpoint (the launcher's held evaluations start it while\n"
            "                     the trainers are asked to hold)\n\n"
            "exit status: 0 done, 1 failure while playing or encoding, 2 usage error, not a run\n"
            "directory, no checkpoint, or --video for an environment without render\n",
            EVAL_GIF_FPS, EVAL_GIF_WIDTH);
}

typedef struct eval_opts {
    const char *run_dir, *checkpoint, *video, *gif;
    long long episodes, fps, seed, video_episodes;
    int deterministic, json, have_seed, wait_stdin;
    int libtorch; /* --kernels libtorch */
} eval_opts;

static int parse_count(const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "gearbox eval: %s wants an integer in [%lld, %lld], got \"%s\"\n", opt,
                lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

enum { OPT_EPISODES = 256, OPT_FPS, OPT_SEED, OPT_CHECKPOINT, OPT_VIDEO, OPT_GIF,
       OPT_DETERMINISTIC, OPT_JSON, OPT_VIDEO_EPISODES, OPT_WAIT_STDIN, OPT_KERNELS };

static const struct option eval_options[] = {
    {"episodes", required_argument, NULL, OPT_EPISODES},
    {"fps", required_argument, NULL, OPT_FPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"video", required_argument, NULL, OPT_VIDEO},
    {"gif", required_argument, NULL, OPT_GIF},
    {"video-episodes", required_argument, NULL, OPT_VIDEO_EPISODES},
    {"deterministic", no_argument, NULL, OPT_DETERMINISTIC},
    {"json", no_argument, NULL, OPT_JSON},
    {"wait-stdin", no_argument, NULL, OPT_WAIT_STDIN},
    {"kernels", required_argument, NULL, OPT_KERNELS},
    {NULL, 0, NULL, 0},
};

static int take_eval(void *ctx, int opt, const char *arg)
{
    eval_opts *o = ctx;
    switch (opt) {
    case OPT_EPISODES: return parse_count("--episodes", arg, 1, EVAL_MAX_EPISODES, &o->episodes);
    case OPT_FPS: return parse_count("--fps", arg, 1, 240, &o->fps);
    case OPT_SEED:
        o->have_seed = 1;
        return parse_count("--seed", arg, 0, (long long)1 << 53, &o->seed);
    case OPT_CHECKPOINT: o->checkpoint = arg; return 0;
    case OPT_VIDEO: o->video = arg; return 0;
    case OPT_GIF: o->gif = arg; return 0;
    case OPT_VIDEO_EPISODES:
        return parse_count("--video-episodes", arg, 1, EVAL_MAX_EPISODES, &o->video_episodes);
    case OPT_DETERMINISTIC: o->deterministic = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_WAIT_STDIN: o->wait_stdin = 1; return 0;
    case OPT_KERNELS:
        if (strcmp(arg, "gearbox") != 0 && strcmp(arg, "libtorch") != 0) {
            fprintf(stderr, "gearbox eval: --kernels is gearbox or libtorch, got \"%s\"\n", arg);
            return -1;
        }
        o->libtorch = strcmp(arg, "libtorch") == 0;
        return 0;
    case GB_CLI_NO_VALUE:
        fprintf(stderr, "gearbox eval: %s needs a value\n", arg);
        return -1;
    case GB_CLI_POSITIONAL:
        if (o->run_dir) {
            fprintf(stderr, "gearbox eval: one RUN_DIR only, got %s and %s\n", o->run_dir, arg);
            return -1;
        }
        o->run_dir = arg;
        return 0;
    default:
        fprintf(stderr, "gearbox eval: unknown option %s (see gearbox eval --help)\n", arg);
        return -1;
    }
}

static int parse_args(int argc, char **argv, eval_opts *o)
{
    *o = (eval_opts){.episodes = 10, .fps = 30, .video_episodes = EVAL_MAX_EPISODES};
    if (gb_cli_getopt(argc, argv, "", eval_options, take_eval, o) != 0)
        return -1;
    if (!o->run_dir) {
        fprintf(stderr, "gearbox eval: missing RUN_DIR (see gearbox eval --help)\n");
        return -1;
    }
    if (o->gif && !o->video) {
        fprintf(stderr, "gearbox eval: --gif is made from the MP4: it needs --video\n");
        return -1;
    }
    return 0;
}

static void mean_std(const double *x, long long n, double *mean, double *std)
{
    double s = 0, ss = 0;
    for (long long i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (long long i = 0; i < n; i++)
        ss += (x[i] - *mean) * (x[i] - *mean);
    *std = sqrt(ss / (double)n); /* population std, as numpy.std */
}

/* Everything one evaluation holds; freed by eval_free. */
typedef struct eval_state {
    gb_env_source src;
    void *env;
    gb_env_spec spec;
    gb_torch_space space;
    gb_eval_policy *policy;
    void *obs, *env_actions, *model_actions;
    float *state; /* [agents, S]: a core's state per agent, zeros at each episode's start */
    int64_t state_size;
    float *rewards;
    uint8_t *terminated, *truncated, *acting, *done, *frame;
    double *returns, *lengths;
    gb_video video;
    char env_name[GB_CONFIG_NAME_MAX + GB_CONFIG_ARG_VALUE_MAX]; /* for logs, JSON, the video */
} eval_state;

static void eval_free(eval_state *s)
{
    gb_error ignored = {0};
    gb_video_close(&s->video, &ignored);
    if (s->env)
        s->src.iface->destroy(s->env);
    gb_env_source_close(&s->src);
    gb_eval_policy_close(s->policy);
    free(s->obs);
    free(s->env_actions);
    free(s->model_actions);
    free(s->state);
    free(s->rewards);
    free(s->terminated);
    free(s->truncated);
    free(s->acting);
    free(s->done);
    free(s->frame);
    free(s->returns);
    free(s->lengths);
}

/* The model's actions (int64 or float32 rows) as the environment takes them: int32 indices, or
 * floats clipped to the declared bounds with NaN as 0 (what the actors do). */
static int to_env_actions(eval_state *s, gb_error *err)
{
    const int A = s->spec.agents, n = s->spec.action.n;
    for (int a = 0; a < A; a++) {
        if (s->spec.action.kind == GB_ENV_SPACE_DISCRETE) {
            int64_t v = ((const int64_t *)s->model_actions)[a];
            if (v < 0 || v >= n)
                return gb_error_set(err, GB_EPROTO, "the policy chose action %lld of %d",
                                    (long long)v, n);
            ((int32_t *)s->env_actions)[a] = (int32_t)v;
        } else {
            for (int j = 0; j < n; j++) {
                float x = ((const float *)s->model_actions)[a * n + j];
                float lo = s->spec.action.low[j], hi = s->spec.action.high[j];
                ((float *)s->env_actions)[a * n + j] =
                    isnan(x) ? 0.0f : (x < lo ? lo : (x > hi ? hi : x));
            }
        }
    }
    return 0;
}

/* Plays one episode; returns its return (mean over agents) and length through *ret, *len.
 * Returns 0 or the first error. */
static int play_episode(eval_state *s, const eval_opts *o, int filmed, double epsilon,
                        int64_t limit, double *ret, int64_t *len, gb_error *err)
{
    const gb_env_interface *iface = s->src.iface;
    const int A = s->spec.agents;
    gb_env_buffers buf = {s->env_actions, s->obs, s->rewards, s->terminated, s->truncated,
                          s->acting};
    if (iface->reset(s->env, &buf) != 0)
        return gb_error_set(err, GB_EIO, "%s: reset failed", s->env_name);
    memset(s->done, 0, (size_t)A);
    if (s->state)
        memset(s->state, 0, (size_t)A * (size_t)s->state_size * sizeof *s->state);
    double total = 0;
    int64_t t = 0;
    for (;;) {
        if (filmed) {
            int rc = iface->render(s->env, s->frame);
            if (rc != 0)
                return gb_error_set(err, GB_EIO, "%s: render returned %d at step %lld",
                                    s->env_name, rc, (long long)t);
            if ((rc = gb_video_frame(&s->video, s->frame, err)))
                return rc;
        }
        gb_torch_act_out out = {.action = s->model_actions};
        /* s->state: NULL without a core (then this is model_act) */
        int rc = gb_eval_policy_act(s->policy, s->obs, A, o->deterministic, epsilon, s->state,
                                    &out, err);
        if (rc || (rc = to_env_actions(s, err)))
            return rc;
        if (iface->step(s->env, &buf) != 0)
            return gb_error_set(err, GB_EIO, "%s: step %lld failed", s->env_name, (long long)t);
        t++;
        int all_done = 1;
        for (int a = 0; a < A; a++) {
            if (!s->done[a])
                total += s->rewards[a];
            s->done[a] |= s->terminated[a] | s->truncated[a];
            all_done &= s->done[a];
        }
        if (all_done || t >= limit)
            break;
    }
    *ret = total / A;
    *len = t;
    return 0;
}

/* Opens the checkpoint's policy (launch/eval_policy.h). A live run's trainer replaces its set
 * (writes the new one, then removes the old files) while we read: a file gone between reading
 * the manifest and opening it is looked up again, a few times. */
static int load_policy(eval_state *s, const eval_opts *o, const gb_config *cfg, uint64_t seed,
                       gb_checkpoint_files *ck, gb_error *err)
{
    int rc = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (attempt > 0 && gb_eval_policy_find(o->run_dir, o->checkpoint, cfg, ck) != GB_EXIT_OK)
            break;
        rc = gb_eval_policy_open(cfg, &s->space, seed, !o->libtorch, ck, &s->policy, err);
        if (rc != GB_ENOTFOUND || ck->step < 0) /* done, or an explicit .model path */
            break;
    }
    return rc;
}

/* The environment as logs, the JSON and the video's title name it: the interface's name, and
 * for one interface of many environments the run's label (gymnasium:<env.args.id>,
 * atari:<env.args.game>). */
static void name_env(eval_state *s, const gb_config *cfg)
{
    /* an argument that names the task (gymnasium:<id>, atari:<game>) makes the label */
    gb_config_env_label(cfg, s->env_name, sizeof s->env_name);
    if (strcmp(s->env_name, cfg->env.name) == 0)
        snprintf(s->env_name, sizeof s->env_name, "%s", s->src.iface->name);
}

/* Creates the environment copy; with --video one that renders: the gymnasium plugin draws
 * only when made with render_mode rgb_array (envs/gymnasium), which is added here unless the
 * config sets render_mode itself. Returns 0, GB_EUNSUPPORTED (no frames to be had) or the
 * error of create(). */
static int make_env(eval_state *s, const eval_opts *o, const gb_config *cfg, uint64_t seed,
                    gb_error *err)
{
    gb_env_args_store args;
    gb_env_args_from_config(&args, &cfg->env.args);
    const int gym = strcmp(s->src.iface->name, GB_EVAL_GYMNASIUM) == 0;
    int rc;
    if (o->video && gym && !gb_config_arg(&cfg->env.args, "render_mode") &&
        (rc = gb_env_args_add(&args, "render_mode", "rgb_array", err)))
        return rc;
    if ((rc = gb_env_create(s->src.iface, &args.args, seed, &s->env, &s->spec, err)))
        return rc;
    if (o->video && !s->src.iface->render)
        return gb_error_set(err, GB_EUNSUPPORTED,
                            "%s has no render function: --video needs one (envs/env.h: "
                            "gb_env_interface.render)", s->env_name);
    const char *mode = gb_config_arg(&cfg->env.args, "render_mode");
    if (o->video && (s->spec.render_height < 1 || s->spec.render_width < 1)) {
        if (gym && mode)
            return gb_error_set(err, GB_EUNSUPPORTED, "%s was made without frames to render: "
                                "the run's env.args.render_mode is %s, --video needs rgb_array",
                                s->env_name, mode);
        return gb_error_set(err, GB_EUNSUPPORTED, "%s was made without frames to render "
                            "(render size %d x %d)", s->env_name, s->spec.render_height,
                            s->spec.render_width);
    }
    return 0;
}

/* The environment, its space and the buffers: all but the policy and the video's encoder. */
static int eval_prepare(eval_state *s, const eval_opts *o, gb_config *cfg, uint64_t seed,
                        gb_error *err)
{
    /* for_eval: whole games in the game's points */
    int rc = gb_env_source_open_config(&s->src, &cfg->env, 1, NULL, err);
    if (rc)
        return rc;
    name_env(s, cfg);
    if ((rc = make_env(s, o, cfg, seed, err)))
        return rc;
    if ((rc = gb_learning_space(&s->spec, &s->space, err)))
        return rc;
    /* evaluation runs on this machine's CPU, whatever the run trained on */
    cfg->trainer.device = GB_DEVICE_CPU;
    cfg->policy.device = GB_DEVICE_CPU;
    const size_t A = (size_t)s->spec.agents;
    size_t model_row = s->space.discrete ? sizeof(int64_t)
                                         : (size_t)s->space.action_dim * sizeof(float);
    s->obs = calloc(A, gb_env_obs_bytes(&s->spec));
    s->env_actions = calloc(A, gb_env_action_bytes(&s->spec));
    s->model_actions = calloc(A, model_row);
    s->state_size = gb_config_state_size(cfg);
    if (s->state_size > 0 &&
        !(s->state = calloc(A * (size_t)s->state_size, sizeof *s->state)))
        return gb_error_set(err, GB_ENOMEM, "out of memory for the evaluation buffers");
    s->rewards = calloc(A, sizeof(float));
    s->terminated = calloc(A, 1);
    s->truncated = calloc(A, 1);
    s->acting = calloc(A, 1);
    s->done = calloc(A, 1);
    s->returns = calloc((size_t)o->episodes, sizeof(double));
    s->lengths = calloc((size_t)o->episodes, sizeof(double));
    if (o->video)
        s->frame = calloc((size_t)s->spec.render_height * (size_t)s->spec.render_width, 3);
    if (!s->obs || !s->env_actions || !s->model_actions || !s->rewards || !s->terminated ||
        !s->truncated || !s->acting || !s->done || !s->returns || !s->lengths ||
        (o->video && !s->frame))
        return gb_error_set(err, GB_ENOMEM, "out of memory for the evaluation buffers");
    return 0;
}

static void report(const eval_opts *o, const gb_config *cfg, const eval_state *s,
                   const gb_checkpoint_files *ck, uint64_t seed, int64_t steps)
{
    double rm, rs, lm, ls;
    mean_std(s->returns, o->episodes, &rm, &rs);
    mean_std(s->lengths, o->episodes, &lm, &ls);
    if (!o->json) {
        printf("%s: %lld episodes of %s (%s), checkpoint %s (training step %lld)\n", o->run_dir,
               o->episodes, s->env_name, o->deterministic ? "deterministic" : "sampled",
               ck->model, (long long)ck->step);
        printf("return  mean %.3f  std %.3f\nlength  mean %.1f  std %.1f\nsteps   %lld\n"
               "played  on %s\n", rm, rs, lm, ls, (long long)steps,
               gb_eval_policy_kernels(s->policy));
        if (o->video)
            printf("video   %s (%lld frames, %d x %d)\n", o->video, (long long)s->video.frames,
                   s->video.out_w, s->video.out_h);
        if (o->gif)
            printf("gif     %s\n", o->gif);
        return;
    }
    printf("{\"run_dir\": ");
    gb_rundir_json_string(stdout, o->run_dir);
    printf(", \"env\": ");
    gb_rundir_json_string(stdout, s->env_name);
    printf(", \"algorithm\": ");
    const int algo = (int)cfg->trainer.algorithm.name;
    gb_rundir_json_string(stdout, gb_config_enum_name("trainer.algorithm.name", algo));
    printf(", \"checkpoint\": ");
    gb_rundir_json_string(stdout, ck->model);
    printf(", \"kernels\": ");
    gb_rundir_json_string(stdout, gb_eval_policy_kernels(s->policy));
    printf(", \"libtorch_loaded\": %s", gb_torch_loaded() ? "true" : "false");
    printf(", \"checkpoint_step\": %lld, \"deterministic\": %s, \"seed\": %llu, "
           "\"episodes\": %lld, \"steps\": %lld, \"return_mean\": %.17g, \"return_std\": %.17g, "
           "\"length_mean\": %.17g, \"length_std\": %.17g, \"returns\": [",
           (long long)ck->step, o->deterministic ? "true" : "false", (unsigned long long)seed,
           o->episodes, (long long)steps, rm, rs, lm, ls);
    for (long long i = 0; i < o->episodes; i++)
        printf("%s%.9g", i ? ", " : "", s->returns[i]);
    printf("], \"lengths\": [");
    for (long long i = 0; i < o->episodes; i++)
        printf("%s%lld", i ? ", " : "", (long long)s->lengths[i]);
    printf("], \"video\": ");
    if (o->video)
        gb_rundir_json_string(stdout, o->video);
    else
        printf("null");
    printf(", \"gif\": ");
    if (o->gif)
        gb_rundir_json_string(stdout, o->gif);
    else
        printf("null");
    printf(", \"frames\": %lld}\n", (long long)s->video.frames);
}

/* --wait-stdin: loads libtorch unless the policy may play on gearbox's C (libtorch is most of
 * a small evaluation's start: 0.4-1 s here), then waits for a line on standard input. Returns
 * 0, or -1 when the input ends without one (the launcher gave up on this evaluation). A library
 * that does not load fails later, as without. */
static int wait_for_go(const eval_opts *o, const gb_config *cfg, const eval_state *s)
{
    gb_error ignored = {0};
    if (o->libtorch || !gb_policy_mlp_plays_fp32(cfg, &s->space))
        gb_torch_load(&ignored);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) {
        fprintf(stderr, "gearbox eval: standard input ended before the go (--wait-stdin)\n");
        return -1;
    }
    return 0;
}

int gb_cmd_eval(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        eval_usage(stdout);
        return GB_EXIT_OK;
    }
    eval_opts o;
    if (parse_args(argc, argv, &o) != 0)
        return GB_EXIT_USAGE;
    static gb_config cfg; /* large: keep it off the stack */
    char cfg_path[GB_CHECKPOINT_PATH_MAX];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.yaml", o.run_dir);
    FILE *probe = fopen(cfg_path, "r");
    if (!probe) {
        fprintf(stderr, "gearbox eval: %s is not a run directory (no config.yaml)\n", o.run_dir);
        return GB_EXIT_USAGE;
    }
    fclose(probe);
    gb_error err = {0};
    if (gb_config_read(&cfg, cfg_path, NULL, 0, &err) != 0) {
        fprintf(stderr, "gearbox eval: %s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    /* without --wait-stdin the checkpoint is there before the environment is made */
    gb_checkpoint_files ck = {0};
    int urc = o.wait_stdin ? GB_EXIT_OK : gb_eval_policy_find(o.run_dir, o.checkpoint, &cfg, &ck);
    if (urc != GB_EXIT_OK)
        return urc;
    uint64_t seed = (uint64_t)(o.have_seed ? o.seed : cfg.experiment.seed);
    static eval_state s;
    memset(&s, 0, sizeof s);
    int rc = eval_prepare(&s, &o, &cfg, seed, &err);
    if (rc == 0 && o.wait_stdin) {
        if (wait_for_go(&o, &cfg, &s) != 0) {
            eval_free(&s);
            return GB_EXIT_FAILURE;
        }
        if ((urc = gb_eval_policy_find(o.run_dir, o.checkpoint, &cfg, &ck)) != GB_EXIT_OK) {
            eval_free(&s);
            return urc;
        }
    }
    if (rc == 0)
        rc = load_policy(&s, &o, &cfg, seed, &ck, &err);
    if (rc == 0 && o.video) /* once there is something to film */
        rc = gb_video_open(&s.video, o.video, s.spec.render_width, s.spec.render_height,
                           (int)o.fps, s.env_name, &err);
    if (rc) {
        fprintf(stderr, "gearbox eval: %s\n", err.msg);
        eval_free(&s);
        /* what the user asked for cannot be done: a usage error, not a failure */
        return rc == GB_EUNSUPPORTED || rc == GB_ENOTFOUND ? GB_EXIT_USAGE : GB_EXIT_FAILURE;
    }
    double epsilon = cfg.trainer.algorithm.name == GB_ALGO_DQN && !o.deterministic
                         ? cfg.trainer.algorithm.dqn.epsilon_end
                         : 0.0;
    int64_t limit = cfg.env.max_episode_steps > 0 ? cfg.env.max_episode_steps
                    : s.spec.max_episode_steps > 0 ? s.spec.max_episode_steps
                                                   : EVAL_STEP_CAP;
    int64_t steps = 0;
    for (long long e = 0; e < o.episodes && rc == 0; e++) {
        int64_t len = 0;
        rc = play_episode(&s, &o, o.video && e < o.video_episodes, epsilon, limit,
                          &s.returns[e], &len, &err);
        s.lengths[e] = (double)len;
        steps += len;
    }
    if (rc == 0)
        rc = gb_video_close(&s.video, &err);
    if (rc == 0 && o.gif)
        rc = gb_video_gif(o.video, o.gif, EVAL_GIF_FPS, EVAL_GIF_WIDTH, &err);
    if (rc) {
        fprintf(stderr, "gearbox eval: %s\n", err.msg);
        eval_free(&s);
        return GB_EXIT_FAILURE;
    }
    report(&o, &cfg, &s, &ck, seed, steps);
    eval_free(&s);
    return fflush(stdout) == 0 ? GB_EXIT_OK : GB_EXIT_FAILURE;
}
