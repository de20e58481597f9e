/* runtime/config/config.h: the experiment configuration: YAML file -> validated, typed C structs.
 * The schema (every key, its type, default, range or choices) is declared once, in
 * runtime/config/config_schema.c; loading, --set overrides, printing and comparison are all driven
 * by that table. Errors name file, line, column and key path:
 *   configs/x.yaml:12:5: trainer.replay.capacity: expected a positive integer, got "-3"
 * defines: gb_config and its sections, gb_config_load, gb_config_load_string, gb_config_apply_set,
 *          gb_config_finish, gb_config_read_checked, gb_config_fail_key, gb_config_key_origin,
 *          gb_config_write, gb_config_equal, gb_config_arg */
#ifndef GB_RUNTIME_CONFIG_H
#define GB_RUNTIME_CONFIG_H

#include "runtime/base/error.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GB_CONFIG_NAME_MAX 64
#define GB_CONFIG_PATH_MAX 1024
#define GB_CONFIG_LIST_MAX 8
#define GB_CONFIG_ARGS_MAX 32
#define GB_CONFIG_ARG_VALUE_MAX 256

/* A list of integers (e.g. MLP hidden sizes). */
typedef struct gb_config_int_list {
    int n;
    int64_t v[GB_CONFIG_LIST_MAX];
} gb_config_int_list;

/* A free-form mapping of scalar keys to scalar values (env.args): kept as text, interpreted by
 * whoever owns it (an environment reads its own arguments). */
typedef struct gb_config_args {
    int n;
    struct {
        char key[GB_CONFIG_NAME_MAX];
        char value[GB_CONFIG_ARG_VALUE_MAX];
    } kv[GB_CONFIG_ARGS_MAX];
} gb_config_args;

/* Enumerations: stored as these values, written as the names in config_schema.c. The replay's
 * kinds (remover, selector, dataset format) are the replay's own: replay/kinds.h. */
typedef enum { GB_DEVICE_CPU = 0, GB_DEVICE_CUDA = 1 } gb_device;
typedef enum { GB_PRECISION_FP32 = 0, GB_PRECISION_BF16 = 1, GB_PRECISION_INT8 = 2 } gb_precision;
typedef enum { GB_KERNELS_GEARBOX = 0, GB_KERNELS_LIBTORCH = 1 } gb_kernels;
/* trainer.collect: how a cuda trainer's chosen rows reach the device (workers/roles/learning.h). */
typedef enum { GB_COLLECT_GPU_ZERO_COPY = 0, GB_COLLECT_CPU_STAGED = 1 } gb_collect_mode;
/* trainer.prefetch: select and collect batch k+1 while batch k trains (auto: on with cuda). */
typedef enum { GB_PREFETCH_AUTO = 0, GB_PREFETCH_ON = 1, GB_PREFETCH_OFF = 2 } gb_prefetch_mode;
typedef enum { GB_MODEL_MLP = 0, GB_MODEL_CNN = 1, GB_MODEL_TORCHSCRIPT = 2 } gb_model_type;
/* policy.model.core: what carries memory from one step to the next, after the torso. */
typedef enum {
    GB_CORE_NONE = 0,
    GB_CORE_LSTM = 1,
    GB_CORE_GRU = 2,
    GB_CORE_TRANSFORMER = 3
} gb_core;
typedef enum { GB_ACT_TANH = 0, GB_ACT_RELU = 1, GB_ACT_ELU = 2, GB_ACT_GELU = 3 } gb_activation;
typedef enum { GB_ALGO_PPO = 0, GB_ALGO_DQN = 1, GB_ALGO_SAC = 2 } gb_algorithm;
typedef enum { GB_TARGET_HARD = 0, GB_TARGET_POLYAK = 1 } gb_target_update;
typedef enum { GB_TRANSPORT_IPC = 0, GB_TRANSPORT_TCP = 1 } gb_transport;
/* CURVE on tcp:// (runtime/streams/curve.h): auto = on exactly when the transport is tcp */
typedef enum { GB_CURVE_AUTO = 0, GB_CURVE_ON = 1, GB_CURVE_OFF = 2 } gb_curve_mode;
/* Several trainers: where each trains from (workers/roles/shards.h), and how they meet. */
typedef enum { GB_SELECTION_LOCAL = 0, GB_SELECTION_GLOBAL = 1 } gb_selection;
typedef enum { GB_STORE_FILE = 0, GB_STORE_TCP = 1, GB_STORE_REGISTRY = 2 } gb_store_kind;
/* trainer.backend: the library of the trainers' gradient all-reduce */
typedef enum { GB_BACKEND_AUTO = 0, GB_BACKEND_GLOO = 1, GB_BACKEND_NCCL = 2 } gb_backend;
/* parameters.relay: how policy workers get parameters (runtime/streams/params.h,
 * workers/roles/param_relay.c) */
typedef enum { GB_RELAY_NONE = 0, GB_RELAY_PER_HOST = 1 } gb_relay_mode;
typedef enum { GB_LAUNCH_LOCAL = 0, GB_LAUNCH_SLURM = 1, GB_LAUNCH_INLINE = 2 } gb_launch_mode;
typedef enum {
    GB_PROGRESS_AUTO = 0,
    GB_PROGRESS_LINE = 1,
    GB_PROGRESS_PLAIN = 2,
    GB_PROGRESS_OFF = 3,
} gb_progress_mode;

typedef struct gb_config_experiment {
    char name[GB_CONFIG_NAME_MAX];     /* required */
    int64_t seed;                      /* experiment seed; every RNG derives from it */
    double target_return;              /* solved when the mean of the last 100 returns reaches
                                          it; NAN (null) = no target */
    int64_t max_env_steps;             /* budget; 0 = unlimited */
    double max_seconds;                /* wall-time budget; 0 = unlimited */
    char run_root[GB_CONFIG_PATH_MAX]; /* runs go to <run_root>/<name>/<timestamp>/ */
    int log_level;                     /* gb_log_level */
    double metrics_interval_s;         /* how often workers report metrics */
    int64_t eval_every;    /* env steps between evaluation videos (RUN_DIR/videos); 0 = off */
    int64_t eval_episodes; /* episodes in each of them */
    int eval_hold;         /* with a verdict: the trainers hold while an evaluation plays */
    double eval_hold_wait_s; /* the longest an evaluation waits for trainer 0 to hold */
    gb_config_int_list trackers;            /* gb_tracker values: followers beside the run */
    char trackers_python[GB_CONFIG_PATH_MAX]; /* their Python; "" = $GEARBOX_PYTHON or the venv's */
    char mlflow_uri[GB_CONFIG_PATH_MAX];    /* MLflow's store; "" = <run_root>/mlruns */
} gb_config_experiment;

/* experiment.trackers: where a run's metrics rows also go (launch/trackers.h). */
typedef enum { GB_TRACKER_MLFLOW = 0, GB_TRACKER_WANDB = 1 } gb_tracker;

/* env.wrappers: the preprocessing wrappers (envs/wrap.h) put around the environment. */
typedef struct gb_config_wrappers {
    int64_t noop_max;    /* 0 = off */
    int64_t frame_skip;  /* 1 = off */
    int max_pool;        /* bool */
    int64_t screen_size; /* 0 = off */
    int grey;            /* bool */
    int episodic_life;   /* bool */
    int clip_reward;     /* bool */
    int64_t frame_stack; /* 1 = off */
} gb_config_wrappers;

typedef struct gb_config_env {
    char name[GB_CONFIG_NAME_MAX];   /* built-in name (CartPole-v1, ...) or "plugin" */
    char plugin[GB_CONFIG_PATH_MAX]; /* shared library path when name is "plugin" */
    int64_t max_episode_steps;       /* 0 = the environment's own limit */
    gb_config_args args;             /* passed to the environment's create() */
    gb_config_wrappers wrappers;
} gb_config_env;

typedef struct gb_config_actors {
    int64_t count;          /* actor worker processes */
    int64_t envs_per_actor; /* K environment copies in each actor's ring */
    int64_t splits;         /* S groups stepped in turn; divides K */
    int64_t chunk_len;      /* T steps per trajectory chunk (the replay's item length) */
    double noise_correlation; /* continuous actions: the actor's AR(1) exploration noise (0: the
                                 policy draws independent noise) */
    int64_t local;          /* how many of count the launcher starts itself (-1: all); the
                               others are slots for `gearbox join` from other hosts */
    int64_t join_max;       /* actors that may join beyond count (gearbox join) */
} gb_config_actors;

typedef struct gb_config_model {
    int type;                             /* gb_model_type */
    gb_config_int_list hidden;            /* MLP hidden sizes (also the CNN's head) */
    int activation;                       /* gb_activation */
    int layer_norm;                       /* bool */
    int shared;                           /* bool: actor and critic share the torso */
    char torchscript[GB_CONFIG_PATH_MAX]; /* file when type is torchscript */
    int core;                             /* gb_core */
    int64_t core_size;                    /* the core's hidden units (transformer: width d) */
    int64_t core_layers;                  /* transformer: blocks */
    int64_t core_heads;                   /* transformer: attention heads (divide core_size) */
    int64_t core_memory;                  /* transformer: steps each block looks back */
    int64_t torchscript_state;            /* floats of state a TorchScript model carries a row */
    int normalize_obs;                    /* bool: running mean/variance of the observations */
    double log_std_init;                  /* PPO, boxes: the initial log standard deviation */
    double obs_clip;                      /* normalised observations clipped to +- this */
} gb_config_model;

typedef struct gb_config_policy {
    int64_t count;          /* policy worker processes */
    int64_t local;          /* how many of count the launcher starts itself (-1: all); the
                               others are slots for `gearbox join` from other hosts */
    int device;             /* gb_device */
    int precision;          /* gb_precision: the inference model the policy workers run */
    int kernels;            /* gb_kernels: what computes a plain MLP's inference forward */
    int64_t threads;        /* libtorch intra-op threads */
    int64_t max_batch_rows; /* inference batch: row limit */
    double max_wait_ms;     /* inference batch: wait limit */
    int deterministic;      /* bool: greedy/mean actions */
    int pipelined;          /* bool: request and inference threads overlap (SRL) */
    gb_config_model model;
} gb_config_policy;

typedef struct gb_config_ppo {
    double gae_lambda;
    double clip;
    int clip_value;     /* bool */
    double value_coef;
    double entropy_coef;
    int64_t epochs;
    int64_t minibatches;
    int normalize_advantages; /* bool */
    int vtrace;               /* bool: V-trace targets and advantages in place of GAE's */
    double vtrace_rho_bar;    /* V-trace's truncation of the importance weights (rho) */
    double vtrace_c_bar;      /* and of the traces (c) */
    int vtrace_proximal;      /* bool: clip the ratio against the learner's policy before the
                                 update, not the actors' (the decoupled objective) */
    int vtrace_one_pass;      /* bool: with epochs 1 and no core, targets from each minibatch's
                                 own forward (ppo.cpp) */
} gb_config_ppo;

typedef struct gb_config_dqn {
    int64_t n_step;
    int target_update;          /* gb_target_update */
    int64_t target_update_every; /* train steps between hard updates */
    double tau;                 /* Polyak coefficient */
    int double_q;               /* bool */
    double epsilon_start;
    double epsilon_end;
    int64_t epsilon_decay_steps;
    double huber_delta;
    int64_t burn_in;     /* R2D2: rows repeated before each chunk's new rows, no loss */
    int value_rescale;   /* bool: R2D2's h(x) on the targets */
} gb_config_dqn;

typedef struct gb_config_sac {
    double tau;
    double init_alpha;
    int learn_alpha;       /* bool */
    double target_entropy; /* NAN (null) = -action_dim */
    double alpha_lr;
} gb_config_sac;

typedef struct gb_config_algorithm {
    int name; /* gb_algorithm; required */
    double lr;
    double gamma;
    double max_grad_norm; /* 0 = no clipping */
    int lr_anneal;        /* bool: linear to 0 over the env-step budget */
    int reward_scale;     /* bool: rewards over the deviation of the discounted return */
    double reward_clip;   /* scaled rewards clipped to +- this */
    gb_config_ppo ppo;
    gb_config_dqn dqn;
    gb_config_sac sac;
} gb_config_algorithm;

typedef struct gb_config_replay {
    int64_t capacity;          /* items (trajectory chunks) */
    int64_t max_size;          /* evict above this many items; 0 = capacity */
    int remover;               /* gb_remover_kind (replay/kinds.h) */
    int64_t max_times_sampled; /* for the max_times_sampled remover; 0 = off */
    int selector;              /* gb_selector_kind (replay/kinds.h) */
    gb_config_int_list extra_selectors; /* gb_selector_kind values kept beside `selector` for
                                           requests that name them (server.replay only; the
                                           trainer's stays empty) */
    double alpha;              /* weighted: priority exponent */
    double beta;               /* weighted: importance-weight exponent */
    double default_priority;   /* new items; NAN (null) = current maximum */
    int64_t min_size;          /* rate limiter: items before sampling starts */
    double samples_per_insert; /* rate limiter: 0 = no ratio limit */
    double error_buffer;       /* rate limiter: allowed deviation, in samples */
    double timeout_s;          /* every blocking replay call */
    int huge_pages;            /* bool: try huge pages for the column tables */
    int selection;             /* gb_selection: with several trainers, local or global */
} gb_config_replay;

typedef struct gb_config_rendezvous {
    int store; /* gb_store_kind: file (in the run directory), tcp (host:port) or registry (trainer
                  0's TCP store on its streams address, found through the registry) */
    char host[GB_CONFIG_NAME_MAX]; /* tcp: trainer 0's address; also every trainer's Gloo address */
    int64_t port;                  /* tcp: trainer 0's store port */
    double timeout_s;              /* the rendezvous and every collective */
} gb_config_rendezvous;

/* trainer.chunk_guard: bounds on a received chunk's values where the environment declares none
 * (workers/roles/trainer_ingest.c); a chunk beyond them is refused (chunks_rejected). */
typedef struct gb_config_chunk_guard {
    double max_abs_reward; /* also bounds an episode's return per step (runtime/run/metrics.h) */
    double max_abs_obs;    /* float observations */
    double max_abs_action; /* continuous actions, as the policy sampled them (before clipping) */
} gb_config_chunk_guard;

typedef struct gb_config_trainer {
    int64_t count;
    int64_t local; /* how many of count the launcher starts itself (-1: all); the rest join */
    int backend;   /* gb_backend: several trainers' gradient all-reduce (auto: nccl on cuda) */
    int device;  /* gb_device */
    int collect;  /* gb_collect_mode (device cuda) */
    int prefetch; /* gb_prefetch_mode */
    int64_t threads;
    int kernels; /* gb_kernels: what computes DQN's forward and backward of a plain MLP */
    int64_t batch_size;        /* trajectory items per training step */
    int64_t max_staleness;     /* policy versions; -1 = unbounded */
    int64_t push_params_every; /* train steps between parameter pushes */
    double checkpoint_every_s; /* 0 = only at the end */
    int64_t checksum_every;    /* several trainers: train steps between parameter checks */
    int64_t bucket_bytes;      /* several trainers: gradient all-reduce bucket size */
    gb_config_rendezvous rendezvous;
    gb_config_algorithm algorithm;
    gb_config_replay replay;
    gb_config_chunk_guard chunk_guard;
} gb_config_trainer;

typedef struct gb_config_streams {
    int transport;                      /* gb_transport */
    char interface[GB_CONFIG_NAME_MAX]; /* tcp: address to bind; "*" only if asked */
    int64_t sample_hwm;                 /* sample stream high-water mark (messages) */
    int64_t inference_timeout_ms;
    int64_t registry_timeout_ms;
    int64_t heartbeat_ms;
    int64_t ttl_ms;
    int curve;                          /* gb_curve_mode */
} gb_config_streams;

/* 1 when the run's tcp sockets use CURVE (streams.curve on, or auto with tcp). */
static inline int gb_config_streams_curve(const gb_config_streams *s)
{
    return s->curve == GB_CURVE_ON ||
           (s->curve == GB_CURVE_AUTO && s->transport == GB_TRANSPORT_TCP);
}

typedef struct gb_config_parameters {
    int64_t chunk_bytes; /* parameter blobs travel in chunks of this size */
    int relay;           /* gb_relay_mode: per_host puts one relay per host between the
                            parameter service and that host's policy workers */
} gb_config_parameters;

/* launch.restart: how often the launcher restarts a dead or hung worker before it gives up. */
typedef struct gb_config_restart {
    int64_t max_restarts; /* restarts allowed within any window_s; 0 = a dead worker ends the run */
    double window_s;
} gb_config_restart;

/* launch.slurm.<role>: what one worker of a role asks Slurm for (launch/slurm.h). */
typedef struct gb_config_slurm_role {
    int64_t cpus;   /* CPUs of each worker's step */
    int64_t gpus;   /* GPUs of each worker's step (0 = none) */
    int64_t mem_mb; /* memory of each worker's step in MB (0 = the cluster's default) */
} gb_config_slurm_role;

/* launch.slurm: the Slurm backend (gearbox run --backend slurm): one job per run, one step per
 * worker (launch/slurm.h). */
typedef struct gb_config_slurm {
    char partition[GB_CONFIG_NAME_MAX];  /* "" = the cluster's default partition */
    char account[GB_CONFIG_NAME_MAX];    /* "" = the user's default account */
    char time_limit[GB_CONFIG_NAME_MAX]; /* Slurm time ("90", "2:00:00", "1-0"); "" = default */
    int64_t nodes;                       /* nodes of the job; > 1 needs streams.transport tcp */
    char salloc_args[GB_CONFIG_PATH_MAX]; /* more options for the job (space-separated) */
    char srun_args[GB_CONFIG_PATH_MAX];   /* more options for every step (space-separated) */
    gb_config_slurm_role params, trainer, policy, actor;
} gb_config_slurm;

typedef struct gb_config_launch {
    int mode;                         /* gb_launch_mode */
    char run_dir[GB_CONFIG_PATH_MAX]; /* "" = <run_root>/<name>/<timestamp> */
    double stop_timeout_s;            /* children get this long after SIGTERM */
    double stop_checkpoint_s; /* and a trainer writing a checkpoint up to this long more */
    int progress;                     /* gb_progress_mode */
    double heartbeat_timeout_s;       /* a worker silent this long is hung: killed, restarted */
    gb_config_restart restart;
    gb_config_slurm slurm;
} gb_config_launch;

/* `gearbox serve`: the offline-RL data server (workers/server/server.h). */
typedef struct gb_config_server {
    char endpoint[GB_CONFIG_PATH_MAX]; /* bind address: tcp://127.0.0.1:PORT, ipc://PATH; port 0
                                          or * = any free port (printed at start) */
    int curve;                  /* bool: clients must use CURVE (server.endpoint tcp only) */
    char curve_key[GB_CONFIG_PATH_MAX];     /* the server's key pair file (made 0600 if absent) */
    char curve_clients[GB_CONFIG_PATH_MAX]; /* allow-list of client public keys; "" = any client
                                               that has the server's public key */
    int64_t threads;            /* request worker threads */
    int64_t max_batch_rows;     /* per request: items sampled, inserted or updated */
    int64_t max_batch_bytes;    /* per request: reply data bytes */
    int64_t max_request_bytes;  /* per request, its frames together (larger: an error reply) */
    int64_t max_pending_replies; /* sample replies a client may leave unread (over: refused) */
    double max_wait_s;          /* longest a request may wait (rate limiter, room) */
    char dataset[GB_CONFIG_PATH_MAX]; /* file, or directory of *.gbds files; "" = none */
    int dataset_format;         /* gb_dataset_format (replay/kinds.h) */
    int64_t steps;              /* d4rl, minari: T, steps per item */
    int64_t dataset_last_items; /* gearbox: load only the newest N items (0 = all) */
    char checkpoint[GB_CONFIG_PATH_MAX]; /* checkpoint file; "" = no checkpoints */
    int restore;                /* bool: start from the checkpoint when it exists */
    double checkpoint_every_s;  /* 0 = only on request and at exit */
    int64_t seed;               /* selector RNG */
    gb_config_replay replay;    /* the served replay; capacity 0 = the dataset's items */
    gb_config_args tables;      /* more tables: name -> "key=value ..." overrides of this
                                   section for that table (gb_config_server_table) */
} gb_config_server;

typedef struct gb_config {
    char source[GB_CONFIG_PATH_MAX]; /* file it was loaded from (not part of the schema) */
    gb_config_experiment experiment;
    gb_config_env env;
    gb_config_actors actors;
    gb_config_policy policy;
    gb_config_trainer trainer;
    gb_config_streams streams;
    gb_config_parameters parameters;
    gb_config_launch launch;
    gb_config_server server;
} gb_config;

/* Loading happens in three steps so that overrides are checked like file values:
 *   gb_config_load (defaults + file) -> gb_config_apply_set (each --set) -> gb_config_finish
 * (required keys, cross-key checks). gb_config_read does all three. All return 0 or GB_ECONFIG
 * with a "file:line:column: key.path: ..." message in err. Nothing is allocated in cfg. */
typedef struct gb_config_marks gb_config_marks; /* where each key was set, for messages */

int gb_config_load(gb_config *cfg, gb_config_marks **marks, const char *path, gb_error *err);
int gb_config_load_string(gb_config *cfg, gb_config_marks **marks, const char *name,
                          const char *text, size_t len, gb_error *err);
/* Applies one "key.path=value" override (value is YAML: 3, true, "x", [64, 64]). `which` numbers
 * the override in messages ("--set[1]:1:25: ..."). */
int gb_config_apply_set(gb_config *cfg, gb_config_marks *marks, const char *assignment,
                        int which, gb_error *err);
int gb_config_finish(gb_config *cfg, const gb_config_marks *marks, gb_error *err);
void gb_config_marks_free(gb_config_marks *marks);

/* load + every override + finish. */
int gb_config_read(gb_config *cfg, const char *path, const char *const *sets, int nsets,
                   gb_error *err);

/* A check beyond the config's own: what running it needs from this machine (launch/validate.h).
 * Called by gb_config_read_checked once every key is set and the config's own checks passed;
 * it may change cfg (a path made absolute). Returns 0 or an error; one made with
 * gb_config_fail_key names the place its key was set. */
typedef int (*gb_config_check_fn)(gb_config *cfg, const gb_config_marks *marks, void *arg,
                                  gb_error *err);

/* gb_config_read, then check(cfg, marks, arg, err) when check is not NULL. Returns 0,
 * GB_ECONFIG, or the check's error. */
int gb_config_read_checked(gb_config *cfg, const char *path, const char *const *sets, int nsets,
                           gb_config_check_fn check, void *arg, gb_error *err);

/* An error about key (a schema key path) at the place it was set: its line in the file, or its
 * --set; a key left at its default: its closest section in the file, or line 1. Formats
 * "<source>:line:col: key: message" into err and returns GB_ECONFIG. */
__attribute__((format(printf, 4, 5))) int gb_config_fail_key(const gb_config_marks *marks,
                                                             const char *key, gb_error *err,
                                                             const char *fmt, ...);

/* Where key was set: 0 left at its default (or not a schema key), 1 in the file, 2 by a --set
 * (or an override applied like one). */
int gb_config_key_origin(const gb_config_marks *marks, const char *key);

/* Writes the resolved config as YAML that loads back to an equal struct. */
int gb_config_write(const gb_config *cfg, FILE *out);

/* 1 when every schema field is equal (floats bit-for-bit, NaN equal to NaN), else 0; on
 * difference, names the first differing key in *diff_key when given. */
int gb_config_equal(const gb_config *a, const gb_config *b, const char **diff_key);

/* The config of the data server's table `name` (a key of server.tables): cfg with the table's
 * overrides ("key=value" words separated by spaces; keys relative to server.: dataset,
 * dataset_format, steps, dataset_last_items, seed, replay.*) applied, checked like --set, and
 * no checkpoint. out may not be cfg. Returns 0, GB_ENOTFOUND (no such table) or GB_ECONFIG. */
int gb_config_server_table(const gb_config *cfg, const char *name, gb_config *out,
                           gb_error *err);

/* The value of env.args[key], or NULL. */
const char *gb_config_arg(const gb_config_args *args, const char *key);

/* The environment as logs and reports name it, written to buf (n bytes; GB_CONFIG_ENV_LABEL_MAX
 * holds any) and returned: env.name, or gymnasium:<env.args.id> for the gymnasium plugin and
 * atari:<env.args.game> for the Atari environment (one interface, many environments). */
#define GB_CONFIG_ENV_LABEL_MAX (GB_CONFIG_NAME_MAX + GB_CONFIG_ARG_VALUE_MAX)
const char *gb_config_env_label(const gb_config *cfg, char *buf, size_t n);

/* Names of enum values (for logs): e.g. gb_config_enum_name("trainer.replay.selector", 1). */
/* Floats of recurrent state the policy carries per row from one step to the next: 2 x core_size
 * for an LSTM (h, c), core_size for a GRU, core_layers x core_memory x core_size + core_memory
 * for a transformer (each block's inputs at the last core_memory steps, and which slots hold
 * one: workers/torch/transformer.hpp), torchscript_state for a TorchScript model, 0 without a
 * core. Actors, policy workers and
 * trainers size their state buffers and the chunk's state column from it. */
int64_t gb_config_state_size(const gb_config *cfg);

/* Rows of R2D2's burn-in that each chunk repeats from the end of its stream's previous one
 * (trainer.algorithm.dqn.burn_in with dqn; 0 otherwise): a chunk has actors.chunk_len + this. */
int64_t gb_config_burn_in(const gb_config *cfg);

/* DQN's linear epsilon schedule: epsilon_start -> epsilon_end over epsilon_decay_steps env steps
 * (epsilon_end from then on, or at once when the decay is 0). The policy worker, inline mode and
 * the learner's report each ask it. */
double gb_config_dqn_epsilon(const gb_config_dqn *dqn, int64_t env_steps);

const char *gb_config_enum_name(const char *key_path, int value);

/* Writes the schema's documentation (type, default, range or choices, meaning) of key, of every
 * key in section key (e.g. "trainer.replay"), or of every key when key is NULL or "", to out
 * (`gearbox check --explain`). Returns 0, or GB_ENOTFOUND when key names no key or section. */
int gb_config_explain(FILE *out, const char *key);

/* Writes every key of the schema as Markdown tables, one per top-level section (the generated
 * docs/config-reference.md). Returns 0, or GB_ESYS when writing to out failed. */
int gb_config_markdown(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
