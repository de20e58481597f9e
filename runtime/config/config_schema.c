/* runtime/config/config_schema.c: every experiment config key, declared once: type, default, range
 * or choices. The loader, --set, `gearbox check` and the comparison all read this table (its
 * queries: config_schema_query.c). Later issues extend the schema here (and the structs in
 * config.h). */
#include "runtime/config/config_schema.h"

#include "runtime/config/config.h"
/* The replay's kinds and their names have one home, the replay's leaf header. The application
 * config is the one module of runtime/ that reads a higher layer's header, and only leaf kind
 * headers (enums and static name tables: no includes, nothing to link): it names every
 * subsystem's settings. A registration by the replay at start-up would keep the include out but
 * make parsing depend on who registered first, and a copy of the names here would drift. */
#include "replay/kinds.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define OFF(member) offsetof(gb_config, member)

#define INT(p, m, d, lo, hi, doc) {p, GB_CK_INT, OFF(m), 0, d, lo, hi, NULL, 0, doc}
#define FLOAT(p, m, d, lo, hi, doc) {p, GB_CK_FLOAT, OFF(m), 0, d, lo, hi, NULL, 0, doc}
#define FLOAT_OR_NULL(p, m, d, lo, hi, doc) {p, GB_CK_FLOAT, OFF(m), 0, d, lo, hi, NULL, 1, doc}
#define BOOL(p, m, d, doc) {p, GB_CK_BOOL, OFF(m), 0, d, 0, 1, NULL, 0, doc}
#define STR(p, m, d, doc)                                                                          \
    {p, GB_CK_STRING, OFF(m), sizeof(((gb_config *)0)->m), d, 0, 0, NULL, 0, doc}
#define ENUM(p, m, d, ch, doc) {p, GB_CK_ENUM, OFF(m), 0, d, 0, 0, ch, 0, doc}
#define LIST(p, m, d, lo, hi, doc) {p, GB_CK_INT_LIST, OFF(m), 0, d, lo, hi, NULL, 0, doc}
#define ARGS(p, m, doc) {p, GB_CK_ARGS, OFF(m), 0, "{}", 0, 0, NULL, 0, doc}
#define ENUM_LIST(p, m, d, ch, doc) {p, GB_CK_ENUM_LIST, OFF(m), 0, d, 0, 0, ch, 0, doc}

/* Enum choices, in the order of the C enums in config.h (the replay's: gb_*_kind_names). */
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const devices[] = {"cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "bf16", "int8", NULL};
static const char *const kernels[] = {"gearbox", "libtorch", NULL};
static const char *const collect_modes[] = {"gpu_zero_copy", "cpu_staged", NULL};
static const char *const prefetch_modes[] = {"auto", "on", "off", NULL};
static const char *const model_types[] = {"mlp", "cnn", "torchscript", NULL};
static const char *const cores[] = {"none", "lstm", "gru", "transformer", NULL};
static const char *const activations[] = {"tanh", "relu", "elu", "gelu", NULL};
static const char *const algorithms[] = {"ppo", "dqn", "sac", NULL};
static const char *const target_updates[] = {"hard", "polyak", NULL};
static const char *const transports[] = {"ipc", "tcp", NULL};
static const char *const curve_modes[] = {"auto", "on", "off", NULL};
static const char *const selections[] = {"local", "global", NULL};
static const char *const stores[] = {"file", "tcp", "registry", NULL};
static const char *const backends[] = {"auto", "gloo", "nccl", NULL};
static const char *const relay_modes[] = {"none", "per_host", NULL};
static const char *const launch_modes[] = {"local", "slurm", "inline", NULL};
static const char *const progress_modes[] = {"auto", "line", "plain", "off", NULL};
static const char *const trackers[] = {"mlflow", "wandb", NULL};

const gb_config_field gb_config_fields[] = {
    STR("experiment.name", experiment.name, NULL, "experiment name (runs/<name>/...)"),
    INT("experiment.seed", experiment.seed, "1", 0, BIG, "seed of every RNG in the run"),
    FLOAT_OR_NULL("experiment.target_return", experiment.target_return, "null", -INF, INF,
                  "solved when this is reached: by an evaluation of the policy when "
                  "experiment.eval_every is on, else by the mean of the last 100 training "
                  "episodes"),
    INT("experiment.max_env_steps", experiment.max_env_steps, "10000000", 0, BIG,
        "environment-step budget (0 = unlimited)"),
    FLOAT("experiment.max_seconds", experiment.max_seconds, "600", 0, INF,
          "wall-time budget in seconds (0 = unlimited)"),
    STR("experiment.run_root", experiment.run_root, "runs", "root folder of run directories"),
    ENUM("experiment.log_level", experiment.log_level, "info", log_levels, "logging level"),
    FLOAT("experiment.metrics_interval_s", experiment.metrics_interval_s, "1", 0.01, 3600,
          "seconds between metrics.csv rows and worker reports once a run is past its first "
          "seconds (denser before: every 0.1 s at first)"),
    INT("experiment.eval_every", experiment.eval_every, "0", 0, BIG,
        "env steps between evaluations of the newest checkpoint: videos in RUN_DIR/videos, and "
        "the verdict (with a target_return the run is solved only when an evaluation reaches "
        "it); 0 = off: the training episodes decide; needs trainer.checkpoint_every_s > 0"),
    INT("experiment.eval_episodes", experiment.eval_episodes, "2", 1, 1000,
        "deterministic episodes in each evaluation (experiment.eval_every)"),
    BOOL("experiment.eval_hold", experiment.eval_hold, "true",
         "with a verdict (target_return and eval_every): each evaluation plays a checkpoint "
         "trainer 0 writes when asked, and the trainers take no step until it ends; one short "
         "of the target lets them go on, one that reaches it ends the run on the policy it "
         "played (the final checkpoint is that policy). false: evaluations play the newest "
         "checkpoint while training goes on"),
    FLOAT("experiment.eval_hold_wait_s", experiment.eval_hold_wait_s, "60", 0.1, 86400,
          "the longest a held evaluation waits for trainer 0 to write its checkpoint and "
          "hold (a restart, a slow disk); past it the hold is released and the evaluation "
          "plays the newest checkpoint while the trainers learn on"),
    ENUM_LIST("experiment.trackers", experiment.trackers, "[]", trackers,
              "trackers the run's metrics rows, config and summary also go to, each fed by a "
              "Python follower (gearbox.follow) beside the launcher: mlflow (MLflow's local "
              "store, experiment.mlflow_uri), wandb (Weights & Biases offline, RUN_DIR/wandb); "
              "a tracker that fails is named in summary.json and fails the command"),
    STR("experiment.trackers_python", experiment.trackers_python, "",
        "the Python the trackers run in (with the gearbox package and mlflow or wandb); "
        "\"\": $GEARBOX_PYTHON, else gearbox's venv"),
    STR("experiment.mlflow_uri", experiment.mlflow_uri, "",
        "MLflow tracking URI of experiment.trackers' mlflow: a folder (its file store), "
        "file:PATH or sqlite:///PATH.db; \"\": <experiment.run_root>/mlruns"),

    STR("env.name", env.name, NULL, "built-in environment name, or \"plugin\""),
    STR("env.plugin", env.plugin, "", "shared library of a plugin environment"),
    INT("env.max_episode_steps", env.max_episode_steps, "0", 0, BIG,
        "truncation limit (0 = the environment's own)"),
    ARGS("env.args", env.args, "arguments for the environment's create()"),
    INT("env.wrappers.noop_max", env.wrappers.noop_max, "0", 0, 1000,
        "at each reset, 1..noop_max (uniform) no-op frames (action 0), below the frame skip; "
        "0 = off"),
    INT("env.wrappers.frame_skip", env.wrappers.frame_skip, "1", 1, 1000,
        "each action repeated this many frames, rewards summed (stops at the episode's end)"),
    BOOL("env.wrappers.max_pool", env.wrappers.max_pool, "true",
         "with frame_skip > 1, the observation is the element-wise max of the last two frames "
         "(uint8 frames only)"),
    INT("env.wrappers.screen_size", env.wrappers.screen_size, "0", 0, 4096,
        "frames shrunk to screen_size x screen_size by an area average (OpenCV's INTER_AREA), "
        "channels first; 0 = off"),
    BOOL("env.wrappers.grey", env.wrappers.grey, "false",
         "RGB frames to one grey channel (OpenCV's RGB2GRAY weights)"),
    BOOL("env.wrappers.episodic_life", env.wrappers.episodic_life, "false",
         "a lost life ends the episode for training while the game goes on (environments "
         "with lives: atari); metrics report whole games; off in evaluations"),
    BOOL("env.wrappers.clip_reward", env.wrappers.clip_reward, "false",
         "rewards replaced by their sign for training; metrics report the game's own; off in "
         "evaluations"),
    INT("env.wrappers.frame_stack", env.wrappers.frame_stack, "1", 1, 64,
        "the observation is the last frame_stack frames, oldest first, along the first axis"),

    INT("actors.count", actors.count, "1", 1, 4096, "actor worker processes"),
    INT("actors.envs_per_actor", actors.envs_per_actor, "16", 1, 1 << 20,
        "environment copies in each actor's ring (K)"),
    INT("actors.splits", actors.splits, "2", 1, 1024, "groups of the ring stepped in turn (S)"),
    INT("actors.chunk_len", actors.chunk_len, "32", 1, 1 << 16,
        "steps per trajectory chunk (T, the replay item length)"),
    FLOAT("actors.noise_correlation", actors.noise_correlation, "0", 0, 1,
          "continuous actions: correlation from one step to the next of each environment's "
          "exploration noise, drawn by the actor (an AR(1) with N(0, 1) marginals, new at every "
          "episode start) and used by the policy in place of its own independent draws: 0 "
          "draws independently each step (the policy's own); 0.9-0.99 keeps an action's sign "
          "for tens of steps, what MountainCarContinuous needs to be explored"),
    INT("actors.local", actors.local, "-1", -1, 4096,
        "actors the launcher starts itself (-1: all); the rest of count join from other hosts "
        "(gearbox join)"),
    INT("actors.join_max", actors.join_max, "16", 0, 4096,
        "actors that may join a running run beyond count (gearbox join)"),

    INT("policy.count", policy.count, "1", 1, 1024, "policy worker processes"),
    INT("policy.local", policy.local, "-1", -1, 1024,
        "policy workers the launcher starts itself (-1: all); the rest of count join from "
        "other hosts (gearbox join)"),
    ENUM("policy.device", policy.device, "cpu", devices, "where inference runs"),
    ENUM("policy.precision", policy.precision, "fp32", precisions,
         "inference precision of the policy workers, built from the fp32 parameters after each "
         "swap (int8: dynamic quantization of the Linear layers, cpu only)"),
    ENUM("policy.kernels", policy.kernels, "gearbox", kernels,
         "what runs a plain MLP policy's forward (Linear layers with tanh or relu) in fp32 and "
         "int8 on the cpu, and such a torso with an LSTM or GRU core (PPO's, DQN's) in fp32: "
         "gearbox's own kernels (workers/torch/mlp_infer.c, core_train.c; where the cpu has "
         "AVX2 and FMA or AVX-512, else libtorch), with which a policy worker does not load "
         "libtorch at all (workers/roles/policy_mlp.h), or always libtorch's modules"),
    INT("policy.threads", policy.threads, "1", 1, 1024, "libtorch intra-op threads"),
    INT("policy.max_batch_rows", policy.max_batch_rows, "4096", 1, 1 << 24,
        "inference batch row limit"),
    FLOAT("policy.max_wait_ms", policy.max_wait_ms, "1", 0, 60000,
          "inference batch wait limit in milliseconds"),
    BOOL("policy.deterministic", policy.deterministic, "false", "greedy or mean actions"),
    BOOL("policy.pipelined", policy.pipelined, "true",
         "a request thread gathers the next batch while the inference thread runs the model "
         "(false: one thread does both in turn)"),
    ENUM("policy.model.type", policy.model.type, "mlp", model_types, "model architecture"),
    LIST("policy.model.hidden", policy.model.hidden, "[64, 64]", 1, 1 << 20,
         "hidden layer sizes"),
    ENUM("policy.model.activation", policy.model.activation, "tanh", activations,
         "hidden activation"),
    BOOL("policy.model.layer_norm", policy.model.layer_norm, "false",
         "layer norm after each hidden layer"),
    BOOL("policy.model.shared", policy.model.shared, "false",
         "actor and critic share the torso"),
    STR("policy.model.torchscript", policy.model.torchscript, "",
        "TorchScript file when type is torchscript"),
    INT("policy.model.torchscript_state", policy.model.torchscript_state, "0", 0, 1 << 24,
        "floats of state a TorchScript model carries per row (0: none); it declares state_size "
        "and its forward takes (obs, state) and returns its outputs, then the next state"),
    BOOL("policy.model.normalize_obs", policy.model.normalize_obs, "false",
         "observations minus their running mean over their running deviation, clipped (the "
         "statistics: the trainers', from every chunk, shipped with the parameters)"),
    FLOAT("policy.model.obs_clip", policy.model.obs_clip, "10", 0, INF,
          "normalised observations are clipped to [-obs_clip, obs_clip]"),
    FLOAT("policy.model.log_std_init", policy.model.log_std_init, "0", -20, 2,
          "ppo with continuous actions: the policy's initial log standard deviation"),
    ENUM("policy.model.core", policy.model.core, "none", cores,
         "memory after the torso: none, lstm, gru or transformer (a gated transformer, GTrXL, "
         "over the episode's last steps); each environment carries its state from step to "
         "step; actor and critic share torso and core"),
    INT("policy.model.core_size", policy.model.core_size, "128", 1, 1 << 16,
        "hidden units of the core (an LSTM's state is twice this: h and c; a transformer's "
        "width)"),
    INT("policy.model.core_layers", policy.model.core_layers, "2", 1, 64,
        "transformer: gated blocks"),
    INT("policy.model.core_heads", policy.model.core_heads, "4", 1, 256,
        "transformer: attention heads per block (they divide core_size)"),
    INT("policy.model.core_memory", policy.model.core_memory, "32", 1, 4096,
        "transformer: steps each block looks back (its state holds each block's inputs at "
        "that many steps)"),

    INT("trainer.count", trainer.count, "1", 1, 1024, "trainer worker processes"),
    INT("trainer.local", trainer.local, "-1", -1, 1024,
        "trainers the launcher starts itself (-1: all; at least 1: trainer 0 runs beside the "
        "launcher); the rest of count join from other hosts (gearbox join --role trainer) "
        "within trainer.rendezvous.timeout_s of the run's start"),
    ENUM("trainer.device", trainer.device, "cpu", devices, "where training runs"),
    ENUM("trainer.backend", trainer.backend, "auto", backends,
         "several trainers: the library of their gradient all-reduce: gloo (host memory; GPU "
         "gradients are staged through it), nccl (GPU memory, trainer.device cuda, a libtorch "
         "built with NCCL: PyTorch's CUDA builds, not Debian's), auto (nccl on cuda, else "
         "gloo). The sharded replay's collectives are Gloo's on host memory either way"),
    ENUM("trainer.collect", trainer.collect, "gpu_zero_copy", collect_modes,
         "device cuda: how the chosen rows reach the GPU: gpu_zero_copy (GEAR's path: selection "
         "on the GPU, the gather kernel reads the rows from the page-locked replay tables straight "
         "into device memory) or cpu_staged (selection and gather on the CPU into pinned staging, "
         "then one host-to-device copy per column)"),
    ENUM("trainer.prefetch", trainer.prefetch, "auto", prefetch_modes,
         "select and collect batch k+1 while batch k trains, into a second buffer (auto: on with "
         "device cuda, off on the cpu; one trainer, not inline): the next selection does not "
         "see step k's priority updates"),
    INT("trainer.threads", trainer.threads, "1", 1, 1024,
        "libtorch intra-op threads; PPO's C learner with a core splits each minibatch's "
        "sequences over this many threads"),
    ENUM("trainer.kernels", trainer.kernels, "gearbox", kernels,
         "what runs a learner's forward and backward on the cpu where gearbox has its own: "
         "a plain MLP's (Linear layers with tanh or relu, no layer norm) as DQN's Q-network, "
         "PPO's actor and critic with separate torsos, SAC's actor and critics, and PPO's "
         "torso, LSTM or GRU core and heads: gearbox's (workers/torch/mlp_train.c, "
         "core_train.c) or always libtorch's autograd (the trainer's log says which runs); "
         "with gearbox a lone PPO, DQN or SAC trainer of such a model learns in C from its "
         "first step to its last and writes its checkpoints itself (workers/roles/ppo_mlp.h, "
         "dqn_mlp.h, sac_mlp.h)"),
    INT("trainer.batch_size", trainer.batch_size, "64", 1, 1 << 24,
        "trajectory items per training step"),
    INT("trainer.max_staleness", trainer.max_staleness, "-1", -1, BIG,
        "max policy-version lag of trained samples (-1 = unbounded)"),
    INT("trainer.push_params_every", trainer.push_params_every, "1", 1, BIG,
        "training steps between parameter pushes (each copies the network to every policy "
        "worker: a learner of thousands of small steps a second, as DQN's, wants 8-32)"),
    FLOAT("trainer.checkpoint_every_s", trainer.checkpoint_every_s, "300", 0, INF,
          "seconds between checkpoints, what a crashed run resumes from (0 = only at the end)"),
    INT("trainer.checksum_every", trainer.checksum_every, "100", 0, BIG,
        "several trainers: train steps between checks that every replica holds the same "
        "parameters (0 = never)"),
    INT("trainer.bucket_bytes", trainer.bucket_bytes, "26214400", 1024, BIG,
        "several trainers: gradients are all-reduced in buckets of at most this many bytes"),
    FLOAT("trainer.chunk_guard.max_abs_reward", trainer.chunk_guard.max_abs_reward, "1e6",
          1e-6, 3e38, "a received chunk with a reward beyond +-this is refused, not trained on "
          "(summary.json samples.rejected), and a reported episode whose return is beyond its "
          "length times this is refused (reports_rejected): a guard against absurd values where "
          "the environment declares no reward range"),
    FLOAT("trainer.chunk_guard.max_abs_obs", trainer.chunk_guard.max_abs_obs, "1e6", 1e-6, 3e38,
          "a received chunk with a float observation beyond +-this is refused (samples.rejected)"),
    FLOAT("trainer.chunk_guard.max_abs_action", trainer.chunk_guard.max_abs_action, "1e6", 1e-6,
          3e38, "a received chunk with a continuous action beyond +-this (as the policy sampled "
          "it, before the environment's clipping) is refused (samples.rejected); discrete "
          "actions are checked against the action space"),
    ENUM("trainer.rendezvous.store", trainer.rendezvous.store, "file", stores,
         "several trainers meet through a file in the run directory (one host, or a shared "
         "filesystem), trainer 0's TCP store at host:port, or (registry) trainer 0's TCP store "
         "on its streams.interface address, found through the run's registry: trainers on "
         "several hosts (trainer.local, gearbox join --role trainer)"),
    STR("trainer.rendezvous.host", trainer.rendezvous.host, "127.0.0.1",
        "tcp store: trainer 0's address; on one host (streams.transport ipc) also the address "
        "the trainers' collectives use (over tcp each trainer's streams.interface address)"),
    INT("trainer.rendezvous.port", trainer.rendezvous.port, "0", 0, 65535,
        "tcp store: trainer 0's port (required with store: tcp); registry: 0 = any free port"),
    FLOAT("trainer.rendezvous.timeout_s", trainer.rendezvous.timeout_s, "30", 0.1, 86400,
          "several trainers: the rendezvous and every collective wait at most this long"),
    ENUM("trainer.algorithm.name", trainer.algorithm.name, NULL, algorithms, "algorithm"),
    FLOAT("trainer.algorithm.lr", trainer.algorithm.lr, "0.0003", 0, 10, "learning rate"),
    FLOAT("trainer.algorithm.gamma", trainer.algorithm.gamma, "0.99", 0, 1, "discount"),
    FLOAT("trainer.algorithm.max_grad_norm", trainer.algorithm.max_grad_norm, "0.5", 0, INF,
          "gradient-norm clipping (0 = off)"),
    BOOL("trainer.algorithm.lr_anneal", trainer.algorithm.lr_anneal, "false",
         "anneal the learning rate linearly to 0 over the env-step budget"),
    BOOL("trainer.algorithm.reward_scale", trainer.algorithm.reward_scale, "false",
         "train on rewards divided by the running deviation of the discounted return (each "
         "stream's, carried by its chunks; the statistics merged over the trainers and "
         "checkpointed), then clipped"),
    FLOAT("trainer.algorithm.reward_clip", trainer.algorithm.reward_clip, "10", 0, INF,
          "scaled rewards are clipped to [-reward_clip, reward_clip]"),
    FLOAT("trainer.algorithm.ppo.gae_lambda", trainer.algorithm.ppo.gae_lambda, "0.95", 0, 1,
          "GAE lambda"),
    FLOAT("trainer.algorithm.ppo.clip", trainer.algorithm.ppo.clip, "0.2", 0, 10,
          "ratio clipping"),
    BOOL("trainer.algorithm.ppo.clip_value", trainer.algorithm.ppo.clip_value, "false",
         "clip the value loss too"),
    FLOAT("trainer.algorithm.ppo.value_coef", trainer.algorithm.ppo.value_coef, "0.5", 0, INF,
          "value loss coefficient"),
    FLOAT("trainer.algorithm.ppo.entropy_coef", trainer.algorithm.ppo.entropy_coef, "0", 0, INF,
          "entropy bonus coefficient"),
    INT("trainer.algorithm.ppo.epochs", trainer.algorithm.ppo.epochs, "4", 1, 1000,
        "passes over each batch"),
    INT("trainer.algorithm.ppo.minibatches", trainer.algorithm.ppo.minibatches, "4", 1, 1 << 20,
        "minibatches per epoch"),
    BOOL("trainer.algorithm.ppo.normalize_advantages",
         trainer.algorithm.ppo.normalize_advantages, "true", "normalise advantages per minibatch"),
    BOOL("trainer.algorithm.ppo.vtrace", trainer.algorithm.ppo.vtrace, "false",
         "V-trace (IMPALA): value targets and advantages corrected by truncated importance "
         "weights of the learner's policy over the actors', so that stale chunks train (raise "
         "trainer.max_staleness) instead of GAE's, which assume the chunks on-policy"),
    FLOAT("trainer.algorithm.ppo.vtrace_rho_bar", trainer.algorithm.ppo.vtrace_rho_bar, "1",
          0, INF, "V-trace: the importance weights' truncation (rho)"),
    FLOAT("trainer.algorithm.ppo.vtrace_c_bar", trainer.algorithm.ppo.vtrace_c_bar, "1", 0,
          INF, "V-trace: the traces' truncation (c), times gae_lambda"),
    BOOL("trainer.algorithm.ppo.vtrace_proximal", trainer.algorithm.ppo.vtrace_proximal, "false",
         "V-trace: PPO's ratio and clip against the learner's policy before the update (the "
         "decoupled objective of Hilton et al. 2021, the behaviour's truncated importance "
         "weight staying in the advantages) instead of against the actors' policy, whose "
         "ratio on a stale chunk is mostly clipped away"),
    BOOL("trainer.algorithm.ppo.vtrace_one_pass", trainer.algorithm.ppo.vtrace_one_pass,
         "false",
         "V-trace with one epoch and no recurrent core: each minibatch of whole chunks is "
         "forwarded once, and its targets come from that forward (IMPALA's one pass) instead "
         "of from a forward over the batch before the update (minibatches of steps)"),
    INT("trainer.algorithm.dqn.n_step", trainer.algorithm.dqn.n_step, "1", 1, 1000,
        "n-step returns"),
    ENUM("trainer.algorithm.dqn.target_update", trainer.algorithm.dqn.target_update, "hard",
         target_updates, "target network update"),
    INT("trainer.algorithm.dqn.target_update_every", trainer.algorithm.dqn.target_update_every,
        "500", 1, BIG, "training steps between hard target updates"),
    FLOAT("trainer.algorithm.dqn.tau", trainer.algorithm.dqn.tau, "0.005", 0, 1,
          "Polyak coefficient"),
    BOOL("trainer.algorithm.dqn.double_q", trainer.algorithm.dqn.double_q, "true", "double Q"),
    FLOAT("trainer.algorithm.dqn.epsilon_start", trainer.algorithm.dqn.epsilon_start, "1", 0, 1,
          "initial exploration rate"),
    FLOAT("trainer.algorithm.dqn.epsilon_end", trainer.algorithm.dqn.epsilon_end, "0.05", 0, 1,
          "final exploration rate"),
    INT("trainer.algorithm.dqn.epsilon_decay_steps", trainer.algorithm.dqn.epsilon_decay_steps,
        "10000", 0, BIG, "env steps over which epsilon decays linearly"),
    FLOAT("trainer.algorithm.dqn.huber_delta", trainer.algorithm.dqn.huber_delta, "1", 0, INF,
          "Huber loss threshold"),
    INT("trainer.algorithm.dqn.burn_in", trainer.algorithm.dqn.burn_in, "0", 0, 1 << 16,
        "R2D2 with a core or a TorchScript model's state: rows each chunk repeats from its "
        "stream's previous one, run only to warm the state up from the stored one (no loss, no "
        "gradient)"),
    BOOL("trainer.algorithm.dqn.value_rescale", trainer.algorithm.dqn.value_rescale, "false",
         "R2D2's invertible value rescaling of the n-step targets"),
    FLOAT("trainer.algorithm.sac.tau", trainer.algorithm.sac.tau, "0.005", 0, 1,
          "Polyak coefficient"),
    FLOAT("trainer.algorithm.sac.init_alpha", trainer.algorithm.sac.init_alpha, "0.2", 0, INF,
          "initial temperature"),
    BOOL("trainer.algorithm.sac.learn_alpha", trainer.algorithm.sac.learn_alpha, "true",
         "learn the temperature"),
    FLOAT_OR_NULL("trainer.algorithm.sac.target_entropy", trainer.algorithm.sac.target_entropy,
                  "null", -INF, INF, "target entropy (null = -action dimension)"),
    FLOAT("trainer.algorithm.sac.alpha_lr", trainer.algorithm.sac.alpha_lr, "0.0003", 0, 10,
          "temperature learning rate"),
    INT("trainer.replay.capacity", trainer.replay.capacity, "100000", 1, BIG,
        "items (trajectory chunks) the replay holds (PPO: trainer.batch_size)"),
    INT("trainer.replay.max_size", trainer.replay.max_size, "0", 0, BIG,
        "evict above this many items (0 = capacity)"),
    ENUM("trainer.replay.remover", trainer.replay.remover, "fifo", gb_remover_kind_names,
         "eviction order (none: nothing is evicted, ingest waits for room: a queue; PPO's "
         "default)"),
    INT("trainer.replay.max_times_sampled", trainer.replay.max_times_sampled, "0", 0, BIG,
        "remove an item after this many samples (0 = never; PPO: 1)"),
    ENUM("trainer.replay.selector", trainer.replay.selector, "uniform", gb_selector_kind_names,
         "sampling order (PPO: fifo)"),
    FLOAT("trainer.replay.alpha", trainer.replay.alpha, "0.6", 0, 100, "priority exponent"),
    FLOAT("trainer.replay.beta", trainer.replay.beta, "0.4", 0, 1, "importance-weight exponent"),
    FLOAT_OR_NULL("trainer.replay.default_priority", trainer.replay.default_priority, "null", 0,
                  INF, "priority of new items (null = current maximum)"),
    INT("trainer.replay.min_size", trainer.replay.min_size, "1", 1, BIG,
        "items before sampling starts (PPO: one trainer's part of trainer.batch_size)"),
    FLOAT("trainer.replay.samples_per_insert", trainer.replay.samples_per_insert, "0", 0, INF,
          "samples per inserted item (0 = no ratio limit)"),
    FLOAT("trainer.replay.error_buffer", trainer.replay.error_buffer, "0", 0, INF,
          "allowed deviation from samples_per_insert, in samples"),
    FLOAT("trainer.replay.timeout_s", trainer.replay.timeout_s, "30", 0, INF,
          "timeout of every blocking replay call"),
    BOOL("trainer.replay.huge_pages", trainer.replay.huge_pages, "true",
         "use huge pages for the tables where available"),
    ENUM("trainer.replay.selection", trainer.replay.selection, "local", selections,
         "several trainers: each samples batch/count from its own shard (local), or one "
         "selection over every shard's items (global)"),

    ENUM("streams.transport", streams.transport, "ipc", transports,
         "ipc (one machine) or tcp (across machines)"),
    STR("streams.interface", streams.interface, "127.0.0.1",
        "tcp: address to bind (\"*\" binds every interface)"),
    INT("streams.sample_hwm", streams.sample_hwm, "64", 1, 1 << 24,
        "sample stream high-water mark, in messages"),
    INT("streams.inference_timeout_ms", streams.inference_timeout_ms, "10000", 1, BIG,
        "inference request timeout"),
    INT("streams.registry_timeout_ms", streams.registry_timeout_ms, "10000", 1, BIG,
        "endpoint lookup timeout"),
    INT("streams.heartbeat_ms", streams.heartbeat_ms, "500", 1, BIG, "registry heartbeat period"),
    INT("streams.ttl_ms", streams.ttl_ms, "3000", 1, BIG,
        "a worker silent this long is dropped from the registry"),
    ENUM("streams.curve", streams.curve, "auto", curve_modes,
         "CURVE authentication and encryption of tcp sockets with the run's keys "
         "(RUN_DIR/keys, a key pair a worker); auto = on for tcp; on ipc the same keys prove "
         "each worker's identity (ZeroMQ PLAIN) unless off"),

    INT("parameters.chunk_bytes", parameters.chunk_bytes, "4194304", 4096, 1LL << 31,
        "parameter blobs travel in chunks of this many bytes"),
    ENUM("parameters.relay", parameters.relay, "none", relay_modes,
         "none (policy workers subscribe to the parameter service) or per_host (one relay a "
         "host re-serves that host's policy workers: each version crosses the network once a "
         "host)"),

    ENUM("launch.mode", launch.mode, "local", launch_modes,
         "local processes, Slurm, or inline (one process, no sockets)"),
    STR("launch.run_dir", launch.run_dir, "",
        "run directory (\"\" = <run_root>/<name>/<timestamp>)"),
    FLOAT("launch.stop_timeout_s", launch.stop_timeout_s, "5", 0, 3600,
          "seconds children get after SIGTERM"),
    FLOAT("launch.stop_checkpoint_s", launch.stop_checkpoint_s, "120", 0, 86400,
          "how much longer a stop waits for a trainer that is writing a checkpoint or "
          "closing its --record dataset"),
    ENUM("launch.progress", launch.progress, "auto", progress_modes,
         "progress display: auto (a live line on a terminal), line, plain, off"),
    FLOAT("launch.heartbeat_timeout_s", launch.heartbeat_timeout_s, "30", 0.5, 86400,
          "a worker that sends no report for this long is hung: killed and restarted"),
    INT("launch.restart.max_restarts", launch.restart.max_restarts, "3", 0, 1000000,
        "restarts of dead or hung workers allowed within window_s (0 = a death ends the run)"),
    FLOAT("launch.restart.window_s", launch.restart.window_s, "60", 0.1, 86400,
          "the sliding window max_restarts counts in"),
    STR("launch.slurm.partition", launch.slurm.partition, "",
        "slurm: partition of the run's job (\"\" = the cluster's default)"),
    STR("launch.slurm.account", launch.slurm.account, "",
        "slurm: account charged (\"\" = your default)"),
    STR("launch.slurm.time_limit", launch.slurm.time_limit, "",
        "slurm: the job's time limit, in Slurm's format (\"90\", \"2:00:00\", \"1-0\"; "
        "\"\" = the partition's default)"),
    INT("launch.slurm.nodes", launch.slurm.nodes, "1", 1, 4096,
        "slurm: nodes of the run's job (more than 1 needs streams.transport tcp)"),
    STR("launch.slurm.salloc_args", launch.slurm.salloc_args, "",
        "slurm: more salloc options for the job, space-separated (e.g. \"--qos=long\")"),
    STR("launch.slurm.srun_args", launch.slurm.srun_args, "",
        "slurm: more srun options for every worker's step, space-separated"),
    INT("launch.slurm.params.cpus", launch.slurm.params.cpus, "1", 1, 4096,
        "slurm: CPUs of the parameter service's step"),
    INT("launch.slurm.params.gpus", launch.slurm.params.gpus, "0", 0, 64,
        "slurm: GPUs of the parameter service's step"),
    INT("launch.slurm.params.mem_mb", launch.slurm.params.mem_mb, "0", 0, BIG,
        "slurm: memory of the parameter service's step in MB (0 = the cluster's default)"),
    INT("launch.slurm.trainer.cpus", launch.slurm.trainer.cpus, "1", 1, 4096,
        "slurm: CPUs of each trainer's step"),
    INT("launch.slurm.trainer.gpus", launch.slurm.trainer.gpus, "0", 0, 64,
        "slurm: GPUs of each trainer's step"),
    INT("launch.slurm.trainer.mem_mb", launch.slurm.trainer.mem_mb, "0", 0, BIG,
        "slurm: memory of each trainer's step in MB (0 = the cluster's default)"),
    INT("launch.slurm.policy.cpus", launch.slurm.policy.cpus, "1", 1, 4096,
        "slurm: CPUs of each policy worker's step"),
    INT("launch.slurm.policy.gpus", launch.slurm.policy.gpus, "0", 0, 64,
        "slurm: GPUs of each policy worker's step"),
    INT("launch.slurm.policy.mem_mb", launch.slurm.policy.mem_mb, "0", 0, BIG,
        "slurm: memory of each policy worker's step in MB (0 = the cluster's default)"),
    INT("launch.slurm.actor.cpus", launch.slurm.actor.cpus, "1", 1, 4096,
        "slurm: CPUs of each actor's step"),
    INT("launch.slurm.actor.gpus", launch.slurm.actor.gpus, "0", 0, 64,
        "slurm: GPUs of each actor's step"),
    INT("launch.slurm.actor.mem_mb", launch.slurm.actor.mem_mb, "0", 0, BIG,
        "slurm: memory of each actor's step in MB (0 = the cluster's default)"),

    STR("server.endpoint", server.endpoint, "tcp://127.0.0.1:5555",
        "data server bind address (tcp://HOST:PORT, port * = any free; ipc://PATH)"),
    BOOL("server.curve", server.curve, "false",
         "clients must use CURVE: they need the server's public key (server.curve_key) and, "
         "with server.curve_clients, an allowed key pair"),
    STR("server.curve_key", server.curve_key, "",
        "the server's CURVE key pair file (created 0600 when absent)"),
    STR("server.curve_clients", server.curve_clients, "",
        "file of allowed client public keys, one a line (\"\" = any client with the server's "
        "public key)"),
    INT("server.threads", server.threads, "2", 1, 256, "data server request threads"),
    INT("server.max_batch_rows", server.max_batch_rows, "4096", 1, 1 << 24,
        "items per sample, insert or priority-update request"),
    INT("server.max_batch_bytes", server.max_batch_bytes, "268435456", 1, BIG,
        "data bytes per sample reply"),
    INT("server.max_request_bytes", server.max_request_bytes, "268435456", 1024, BIG,
        "largest request accepted, its frames together (a larger one gets an error reply; "
        "one frame over twice this disconnects its sender)"),
    INT("server.max_pending_replies", server.max_pending_replies, "8", 1, 1 << 16,
        "sample replies one client may leave unread; past it its samples are refused with an "
        "error and counted (bounds the server's memory at this many times max_batch_bytes a "
        "client)"),
    FLOAT("server.max_wait_s", server.max_wait_s, "10", 0, 3600,
          "longest a request waits for the rate limiter or for room"),
    STR("server.dataset", server.dataset, "",
        "dataset file, or directory of *.gbds files (\"\" = start empty from a checkpoint)"),
    ENUM("server.dataset_format", server.dataset_format, "gearbox", gb_dataset_format_names,
         "gearbox (written by gearbox run --record), d4rl (HDF5) or minari (a Minari "
         "dataset folder)"),
    INT("server.steps", server.steps, "32", 1, 1 << 16, "d4rl, minari: steps per item (T)"),
    INT("server.dataset_last_items", server.dataset_last_items, "0", 0, BIG,
        "gearbox datasets: load only the newest N items (0 = all)"),
    STR("server.checkpoint", server.checkpoint, "", "checkpoint file (\"\" = none)"),
    BOOL("server.restore", server.restore, "false",
         "start from the checkpoint when it exists instead of loading the dataset"),
    FLOAT("server.checkpoint_every_s", server.checkpoint_every_s, "0", 0, INF,
          "seconds between checkpoints (0 = on request and at exit)"),
    INT("server.seed", server.seed, "1", 0, BIG, "selector RNG seed"),
    ARGS("server.tables", server.tables,
         "more tables, named in requests: name -> \"key=value ...\" overriding this section's "
         "dataset, dataset_format, steps, dataset_last_items, seed and replay.* keys"),
    INT("server.replay.capacity", server.replay.capacity, "0", 0, BIG,
        "items the served replay holds (0 = the dataset's items)"),
    INT("server.replay.max_size", server.replay.max_size, "0", 0, BIG,
        "evict above this many items (0 = capacity)"),
    ENUM("server.replay.remover", server.replay.remover, "fifo", gb_remover_kind_names,
         "eviction order (none: nothing is evicted, writers wait for room)"),
    INT("server.replay.max_times_sampled", server.replay.max_times_sampled, "0", 0, BIG,
        "remove an item after this many samples (0 = never)"),
    ENUM("server.replay.selector", server.replay.selector, "uniform", gb_selector_kind_names,
         "sampling order of requests that name no selector"),
    ENUM_LIST("server.replay.extra_selectors", server.replay.extra_selectors, "[]",
              gb_selector_kind_names,
              "selectors kept beside server.replay.selector for requests that name them "
              "(uniform, fifo, lifo are always there; weighted, topk cost an update each)"),
    FLOAT("server.replay.alpha", server.replay.alpha, "0.6", 0, 100, "priority exponent"),
    FLOAT("server.replay.beta", server.replay.beta, "0.4", 0, 1, "importance-weight exponent"),
    FLOAT_OR_NULL("server.replay.default_priority", server.replay.default_priority, "1", 0, INF,
                  "priority of loaded and inserted items (null = current maximum)"),
    INT("server.replay.min_size", server.replay.min_size, "1", 1, BIG,
        "items before sampling starts"),
    FLOAT("server.replay.samples_per_insert", server.replay.samples_per_insert, "0", 0, INF,
          "samples per inserted item (0 = no ratio limit)"),
    FLOAT("server.replay.error_buffer", server.replay.error_buffer, "0", 0, INF,
          "allowed deviation from samples_per_insert, in samples"),
    FLOAT("server.replay.timeout_s", server.replay.timeout_s, "10", 0, INF,
          "timeout of every blocking replay call"),
    BOOL("server.replay.huge_pages", server.replay.huge_pages, "true",
         "use huge pages for the tables where available"),
};

const size_t gb_config_nfields = sizeof gb_config_fields / sizeof gb_config_fields[0];
