/* workers/torch/bridge.h: the libtorch bridge: models, PPO/DQN/SAC learners, parameter
 * export/import, checkpoints and the trainers' process group behind one versioned table of C
 * functions (gb_torch_api; docs/design.md, "The libtorch bridge") and opaque handles. This is the
 * only header the C side includes for them (with group.h for the group's calls); the C++ lives in
 * the .cpp files beside it.
 * defines: gb_torch_api, GB_TORCH_ABI_VERSION, GB_TORCH_ENTRY_SYMBOL, gb_torch, gb_torch_load,
 *          gb_torch_loaded, gb_torch_space, gb_torch_model, gb_torch_learner, gb_torch_batch,
 *          gb_torch_stats, gb_torch_act_out, gb_group, gb_group_opts, gb_group_op, and the call
 *          names gb_torch_set_threads, gb_torch_cuda_available, gb_torch_model_*,
 *          gb_torch_learner_* (macros that call through the table)
 *
 * The table: the bridge is built twice from the same objects, as the static library the tests
 * and tools link and as the module libgearbox-torch.so, which exports the table through one
 * symbol, GB_TORCH_ENTRY_SYMBOL (workers/torch/module.c). The gearbox command does not link
 * libtorch: workers/torch/loader.c loads the module on the first call and checks the table's
 * ABI version and size, so only the processes that run a model pay for libtorch. Callers use
 * the call names below (gb_torch_model_act(...)); each is gb_torch()->model_act(...).
 *
 * Conventions
 * - Every fallible call returns 0 or a negative GB_E* code and fills err; libtorch exceptions are
 *   caught at the boundary and become GB_ETORCH with the exception's message. Nothing here exits,
 *   except gb_torch() in the gearbox command when the module cannot be loaded (see there).
 * - Caller buffers are read in place (torch::from_blob, no copy); results are written into caller
 *   buffers. Calls block until the computation is done. A handle is used by one thread at a time.
 * - Observations are float32 (MLP) or uint8 frames in CHW order (CNN: scaled by 1/255 inside the
 *   network). Discrete actions are int64, continuous actions float32 [A] in environment units.
 *
 * Trajectory chunks (what the algorithms train on; what actors send and the replay stores) are
 * defined in runtime/streams/chunk.h: T steps of one stream with next-step reset rows (valid 0) and
 * one per-item next_obs; gb_torch_batch below is a batch of them, column by column.
 * Targets and fused losses: workers/torch/targets.h; the loss entry points tests call: testing.h */
#ifndef GB_WORKERS_TORCH_BRIDGE_H
#define GB_WORKERS_TORCH_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

/* The runtime headers have no C++ guards of their own. */
#ifdef __cplusplus
extern "C" {
#endif

#include "runtime/config/config.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
/* gb_param_entry: the parameter layout, from trainer to policy */
#include "runtime/streams/params.h"

/* Version 11 gave learner_set_flat and learner_get_flat SAC's state (actor, critics,
 * temperature; the target critics: SAC's learner without libtorch hands over and continues too)
 * and added learner_set_noise (its test trains both learners on the same noise); 10 added
 * large_product (the learners without libtorch take libtorch's BLAS for their
 * large products once it has loaded); 9 gave learner_set_flat the target network's parameters
 * (DQN's learner without libtorch hands over too) and added learner_get_flat (it continues
 * restored runs); 8 added learner_set_flat (a trainer's PPO learner without libtorch hands
 * over); 7 dropped dqn_epsilon (now gb_config_dqn_epsilon: a policy worker without libtorch
 * asks it too); version 6 added learner_kernels; version 2 recurrent cores (model_state_size,
 * model_act_state, gb_torch_batch.state0), which version 1 had not. gb_torch_api and this
 * file's types (gb_config and other runtime types are one build's own); bumped when a layout or
 * meaning changes: the loader refuses another version or size. */
#define GB_TORCH_ABI_VERSION 11u

/* The symbol the module exports: const gb_torch_api *gearbox_torch_api(void). */
#define GB_TORCH_ENTRY_SYMBOL "gearbox_torch_api"

#define GB_TORCH_MAX_DIMS 8
#define GB_TORCH_MAX_ACTION_DIM 64
#define GB_TORCH_PARAM_ALIGN 64 /* every tensor's offset in a flat parameter buffer */

/* What the networks see and emit. */
typedef struct gb_torch_space {
    gb_dtype obs_dtype;                 /* GB_DTYPE_FLOAT32 or GB_DTYPE_UINT8 */
    int obs_ndim;                       /* 1 for vectors, 3 (C, H, W) for frames */
    int64_t obs_shape[GB_TORCH_MAX_DIMS];
    int discrete;                       /* 1: actions 0..n_actions-1; 0: a box of action_dim */
    int64_t n_actions;                  /* discrete */
    int64_t action_dim;                 /* continuous */
    float action_low[GB_TORCH_MAX_ACTION_DIM];  /* continuous bounds (finite for SAC) */
    float action_high[GB_TORCH_MAX_ACTION_DIM];
} gb_torch_space;

/* ---------------------------------------------------------------------------------------------
 * Models: the acting network of an algorithm (PPO: actor-critic; DQN: Q-network; SAC: the
 * squashed-Gaussian actor). Built from policy.model (mlp, cnn: Nature-DQN torso for 84x84 frames
 * followed by the hidden list; orthogonal init) or loaded from policy.model.torchscript.
 *
 * TorchScript contract: the user exports a module whose forward(obs: Tensor) takes a float batch
 * [N, *obs_shape] (uint8 frames arrive as float in 0..255) and returns
 *   PPO discrete:   (logits [N, n], value [N] or [N, 1])
 *   PPO continuous: (mean [N, A], log_std [N, A] or [A], value [N] or [N, 1])
 *   DQN:            q [N, n]
 *   SAC:            (mean [N, A], log_std [N, A])  (SAC's critics are built from policy.model)
 * Example (python):
 *   class Net(torch.nn.Module):
 *       def __init__(self):
 *           super().__init__()
 *           self.body = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh())
 *           self.pi = torch.nn.Linear(64, 2); self.v = torch.nn.Linear(64, 1)
 *       def forward(self, obs):
 *           h = self.body(obs); return self.pi(h), self.v(h)
 *   torch.jit.script(Net()).save("cartpole_ac.pt")
 * Its parameters train like a built-in model's and travel through export/import the same way.
 * A TorchScript model has no core (policy.model.core needs a built-in model), but it may carry
 * state of its own (PPO, DQN): with policy.model.torchscript_state = S > 0 the module declares
 * an integer attribute state_size = S, and its forward(obs, state) takes the rows' state [N, S]
 * (zeros at an episode's start) and returns its usual outputs followed by the next state [N, S],
 * e.g. (logits, value, next_state) or (q, next_state). The learner runs it row by row over a
 * chunk with the reset rule below (Cores; DQN as R2D2, with burn-in), so it trains and acts on
 * the same forward; it keeps nothing between calls.
 *
 * Cores (policy.model.core: lstm | gru | transformer; core_size H units): memory between the
 * torso and the heads; actor and critic share torso and core. The state a row carries from one
 * step to the next is S = model_state_size floats (gb_config_state_size: LSTM 2H as [h, c], GRU
 * H, the transformer its blocks' inputs at its last steps: workers/torch/transformer.hpp), zeros
 * at an episode's start. The model keeps no state of its own: the caller holds it (an actor, one
 * row per environment copy and agent), passes it in with the observations and gets the next one
 * back (model_act_state). Over a chunk (training) the state entering row 0 is the batch's
 * state0, and the state entering row t > 0 is the one row t-1 produced, or zeros when row t-1
 * is a reset row (valid 0: the new episode starts at row t); the per-item next_obs row follows
 * row T-1 the same way. So the learner and an actor compute the same forward for the same rows.
 * The core's tensors ("core.ih.weight", "core.hh.weight" and their biases, libtorch's gate
 * order: LSTM i, f, g, o; GRU r, z, n) are parameters like the others: export/import and
 * checkpoints carry them. PPO trains a core on minibatches of whole chunks, each run from its
 * state0 with gradients through the chunk (truncated at chunk boundaries); dqn and sac take
 * no core (GB_EUNSUPPORTED).
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_torch_model gb_torch_model;

/* Where a batched forward writes; any pointer may be NULL when not wanted.
 *   action [n] int64 or [n, A] float32: sampled (or greedy/mean when deterministic). PPO
 *          continuous actions are the raw Gaussian sample (clip to the bounds before stepping the
 *          environment; the raw value is what the chunk stores); SAC actions are squashed and
 *          scaled into [low, high].
 *   logp   [n]    log-probability of action under the policy (DQN: 0)
 *   value  [n]    PPO: V(obs); DQN: max_a Q(obs, a); SAC: 0
 *   q      [n, n_actions]  DQN only */
typedef struct gb_torch_act_out {
    void *action;
    float *logp;
    float *value;
    float *q;
} gb_torch_act_out;

/* ---------------------------------------------------------------------------------------------
 * Learners: an algorithm with its networks (the acting model, target networks, critics),
 * optimisers and counters.
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_torch_learner gb_torch_learner;

/* A batch of B trajectory chunks of T steps (runtime/streams/chunk.h). Arrays are C order. */
typedef struct gb_torch_batch {
    int64_t B, T;
    const void *obs;           /* [B, T, *obs_shape], the space's dtype */
    const void *next_obs;      /* [B, *obs_shape]: the observation after each chunk's last step */
    const void *action;        /* [B, T] int64 or [B, T, A] float32 (as acted) */
    const float *reward;       /* [B, T] */
    const uint8_t *terminated; /* [B, T] 0/1 */
    const uint8_t *truncated;  /* [B, T] 0/1 */
    const uint8_t *valid;      /* [B, T] 0 marks a reset step; NULL = every step valid */
    const float *logp;         /* [B, T] behaviour log-probabilities (PPO) */
    const float *weights;      /* [B] importance weights (prioritized replay); NULL = all 1 */
    int obs_on_device;         /* 1: obs and next_obs are in the learner's device memory (a
                                  cuda trainer's collection); the other columns are host */
    const float *state0;       /* [B, S] a core's state entering each chunk's row 0 (the chunk's
                                  state column); NULL = zeros; ignored without a core */
    int64_t state_stride;      /* floats from one chunk's state0 to the next (the column may
                                  hold more than the core's: the return carry); 0 = S */
} gb_torch_batch;

/* What one training call reports (fields that do not apply to the algorithm are 0). */
typedef struct gb_torch_stats {
    double loss;           /* total loss of the last gradient step */
    double policy_loss;    /* PPO clipped objective / SAC actor loss (epoch means for PPO) */
    double value_loss;     /* PPO value loss / DQN TD loss / SAC critic loss */
    double entropy;        /* PPO mean entropy / SAC -mean logp */
    double approx_kl;      /* PPO */
    double clip_fraction;  /* PPO */
    double explained_var;  /* PPO: of the value targets by the pre-update values */
    double q_mean;         /* DQN/SAC: mean Q of the taken actions */
    double td_abs_mean;    /* DQN/SAC: mean |TD error| */
    double alpha;          /* SAC temperature */
    double grad_norm;      /* before clipping, last step */
    double lr;             /* learning rate used */
    int64_t samples;       /* valid steps trained on */
    int64_t gradient_steps;
} gb_torch_stats;

/* ---------------------------------------------------------------------------------------------
 * The trainers' process group (data-parallel training and the sharded replay): its semantics,
 * and what each call does, are in workers/torch/group.h.
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_group gb_group;

typedef struct gb_group_opts {
    int rank, size;          /* 0 <= rank < size */
    const char *store_path;  /* FileStore: a path every rank can reach (the run directory); the
                                file must not exist before the group opens (a stale one from an
                                earlier group would mix rendezvous) */
    const char *tcp_host;    /* TCPStore when store_path is NULL: rank 0 listens on tcp_port */
    int tcp_port;            /* 1..65535; rank 0 with store_ready: 0 = any free port */
    const char *device_host; /* the address this rank's Gloo connections use ("127.0.0.1" on one
                                machine; NULL = 127.0.0.1) */
    const char *prefix;      /* store key prefix, so several groups can share a store (NULL: "") */
    double timeout_s;        /* rendezvous and every collective (> 0) */
    /* rank 0 of a TCPStore (optional): called once the store listens, with its port, before
       the group waits for the other ranks (which may learn the port from what this publishes);
       an error it returns fails the open */
    int (*store_ready)(void *arg, int port, gb_error *err);
    void *store_ready_arg;
    int nccl; /* 1: also an NCCL group, which all-reduces device tensors (the learner's gradient
                 buckets on cuda) on the current CUDA device; GB_EUNSUPPORTED where this
                 libtorch has no NCCL (group_has_nccl) */
    /* optional: asked every 20 ms while the open waits for the other ranks and every 0.1 s
       while a call waits for its collective, in the caller's thread; nonzero: the group is
       gone (another member failed and the caller knows it another way, e.g. the launcher's
       run control), and the wait gives up at once with GB_ECLOSED instead of waiting out
       timeout_s (Gloo may not notice a dead peer: group.cpp) */
    int (*abandon)(void *arg);
    void *abandon_arg;
} gb_group_opts;

typedef enum { GB_GROUP_SUM = 0, GB_GROUP_MIN = 1, GB_GROUP_MAX = 2 } gb_group_op;

/* ---------------------------------------------------------------------------------------------
 * The table. Each field's comment is the contract of its call name (gb_torch_<field>, the
 * group's gb_<field>).
 * ------------------------------------------------------------------------------------------- */
typedef struct gb_torch_api {
    uint32_t abi_version; /* GB_TORCH_ABI_VERSION as the module was built */
    uint32_t struct_size; /* sizeof(gb_torch_api) as the module was built */

    /* Sets libtorch's intra-op threads for this process (policy.threads / trainer.threads),
     * and, on the first call only, the inter-op pool to 1 thread, so that several workers on one
     * machine do not oversubscribe its cores. n >= 1. Returns 0 or GB_EINVAL/GB_ETORCH. */
    int (*set_threads)(int n, gb_error *err);

    /* 1 when libtorch sees a CUDA device, else 0. */
    int (*cuda_available)(void);

    /* Creates the acting network for cfg->trainer.algorithm.name on cfg->policy.device, seeded
     * from seed (initialisation uses libtorch's process-wide generator under a lock; sampling
     * uses a generator owned by the model). *out is owned by the caller (model_destroy).
     * Returns 0, GB_EINVAL (space/config mismatch), GB_EUNSUPPORTED (e.g. a core with dqn, sac
     * or torchscript), GB_ENOTFOUND (torchscript file) or GB_ETORCH. */
    int (*model_create)(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                        gb_torch_model **out, gb_error *err);
    void (*model_destroy)(gb_torch_model *m); /* not NULL (the call name skips NULL) */

    /* One batched forward over n observations read in place from obs ([n, *obs_shape], the
     * space's dtype). deterministic: greedy/mean actions. epsilon: DQN's epsilon-greedy
     * probability (ignored by PPO and SAC). Blocks; no allocation proportional to anything but
     * n. Returns 0, GB_EINVAL (a model with a core: it acts through model_act_state, never on
     * a silent zero state) or GB_ETORCH. */
    int (*model_act)(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                     double epsilon, gb_torch_act_out *out, gb_error *err);

    /* model_act with the exploration noise of continuous actions given: noise [n, action dim]
     * standard-normal values (actors.noise_correlation's, workers/roles/acting.h) take the place of
     * the policy's own draws (PPO: a = mean + std noise; SAC: a = tanh(mean + std noise),
     * scaled), and the log-probabilities are those of the actions so made. NULL: drawn here.
     * Ignored for discrete actions and when deterministic. GB_EINVAL on a model with a core,
     * as model_act. */
    int (*model_act_noise)(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                           double epsilon, const float *noise, gb_torch_act_out *out,
                           gb_error *err);

    /* Floats of recurrent state per row (see Cores above): 0 without a core. Never fails. */
    int64_t (*model_state_size)(const gb_torch_model *m);

    /* model_act_noise for a model with a core: state_in [n, S] is each row's state entering
     * this step (zeros at an episode's start), state_out [n, S] receives the state it leaves
     * (state_out may be state_in: updated in place). Without a core (S = 0) both are ignored
     * and may be NULL, and this is model_act_noise. Returns 0, GB_EINVAL (S > 0 and a NULL
     * state) or GB_ETORCH. */
    int (*model_act_state)(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                           double epsilon, const float *noise, const float *state_in,
                           float *state_out, gb_torch_act_out *out, gb_error *err);

    /* The layout of this model's flat parameter buffer: every parameter and buffer of the acting
     * network in a fixed order ("torso.0.weight", "log_std", ...), each entry's offset a multiple
     * of GB_TORCH_PARAM_ALIGN. The table is the parameter stream's own type
     * (runtime/streams/params.h), so the trainer publishes it and the policy worker imports a
     * received blob's table as they are. *table points into the model (valid until destroy); *total
     * is the buffer size in bytes. Never fails. */
    void (*model_layout)(const gb_torch_model *m, const gb_param_entry **table, int *count,
                         uint64_t *total);

    /* Copies every parameter and buffer into buf (cap >= total from model_layout), laid out as
     * the layout says; *version (may be NULL) receives the model's version. Returns 0,
     * GB_EINVAL (buffer too small) or GB_ETORCH. */
    int (*model_export)(const gb_torch_model *m, void *buf, size_t cap, uint64_t *version,
                        gb_error *err);

    /* Loads a buffer written by model_export of an identically configured model. The sender's
     * layout table is checked entry by entry against this model's (names, dtypes, shapes,
     * offsets) and len against the total: any mismatch is GB_EINVAL naming the entry, and
     * nothing is changed. On success the model's version becomes `version`. */
    int (*model_import)(gb_torch_model *m, const void *buf, size_t len,
                        const gb_param_entry *table, int count, uint64_t version, gb_error *err);

    /* Runs this model's acting forward in precision (gb_precision, policy.precision) from now
     * on, through the kernels of the config's policy.kernels. With gearbox's (a plain MLP, the
     * cpu has AVX-512 VNNI) the whole forward is one C program (workers/torch/mlp_infer.h), for
     * fp32 and int8; int8 there quantizes the weights as below and each input row as it enters
     * a layer. Otherwise libtorch's modules run it: int8 quantizes every Linear layer's weights
     * (per output channel, symmetric) for libtorch's dynamic int8 linear, which quantizes the
     * activations per batch (in both, a layer with fewer than 16 inputs or outputs, e.g.
     * CartPole's first layer or a value head, stays fp32: quantizing its input costs more than
     * its GEMM); bf16 keeps bf16 copies of those weights and casts the layer inputs. The
     * activations between layers of a bf16 torso stay bf16; everything else (layer norms,
     * convolutions, log_std, the distributions) and every output stay fp32. The reduced copies
     * are built now from the fp32 parameters and rebuilt by every model_import (once a
     * parameter swap, never per batch); the parameters themselves, the layout and export stay
     * fp32. GB_PRECISION_FP32 with libtorch's kernels drops them. Only for a model whose
     * parameters change through import (not a learner's, which its optimizer changes in place).
     * A model with a core runs libtorch's modules in fp32 whatever the kernels (gearbox's
     * program is a plain MLP's). Returns 0, GB_EINVAL (not a gb_precision), GB_EUNSUPPORTED
     * (int8 off the cpu; bf16 or int8 with a torchscript model or a core) or GB_ETORCH (no
     * quantized engine in this libtorch). */
    int (*model_set_precision)(gb_torch_model *m, int precision, gb_error *err);

    /* The quantized engine int8 runs on ("onednn", "qnnpack", "fbgemm", "x86": the fastest this
     * libtorch has, chosen once a process; the environment variable GEARBOX_QENGINE=name asks
     * for one). *name is static. Returns 0 or GB_ETORCH (none usable). */
    int (*model_int8_engine)(const char **name, gb_error *err);

    /* What runs the model's inference forward since its last model_set_precision: "gearbox
     * fp32", "gearbox int8 (avx512-vnni)" or "gearbox int8 (avx2)" (policy.kernels gearbox: a
     * plain MLP on a cpu with AVX-512 or AVX2 and FMA, workers/torch/mlp_infer.h), else
     * "libtorch fp32", "libtorch int8", "libtorch bf16" or "libtorch (torchscript)". Static. */
    const char *(*model_kernels)(const gb_torch_model *m);

    /* The network's forward alone over n observations (no sampling, outputs discarded): for
     * benchmarks that separate the layers' cost from the distributions'. A model with a core
     * steps from zero state. Returns 0 or GB_ETORCH. */
    int (*model_forward)(gb_torch_model *m, const void *obs, int64_t n, gb_error *err);

    /* Policy version: incremented by every training step of the learner that owns the model,
     * set by import. */
    uint64_t (*model_version)(const gb_torch_model *m);
    /* Sets it: a restarted trainer goes on above the versions its predecessor published
     * (workers/roles/trainer.c). Training steps go on incrementing it from there. */
    void (*model_set_version)(gb_torch_model *m, uint64_t version);

    /* Creates the algorithm of cfg->trainer.algorithm on cfg->trainer.device, seeded from seed.
     * Returns 0 or the codes of model_create. Owned by the caller. */
    int (*learner_create)(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                          gb_torch_learner **out, gb_error *err);
    void (*learner_destroy)(gb_torch_learner *l); /* not NULL (the call name skips NULL) */

    /* The learner's own acting model (shares its parameters; owned by the learner). Inline mode
     * acts with it directly; distributed trainers export it for the parameter stream. */
    gb_torch_model *(*learner_model)(gb_torch_learner *l);

    /* Runs the configured algorithm on one batch: PPO: GAE + epochs x minibatches; DQN: one
     * gradient step on every valid step's n-step target, then the target update; SAC: one
     * critic, actor and temperature step, then the Polyak update. priorities (may be NULL)
     * receives [B] new priorities for prioritized replay (DQN/SAC: 0.9 max + 0.1 mean of |TD|
     * over the chunk's valid steps, as R2D2; PPO: mean |advantage|). With
     * trainer.algorithm.reward_scale it trains on the rewards divided by the deviation of the
     * observed returns (learner_observe), clipped to reward_clip. Increments the model
     * version. Blocks for the whole computation. Returns 0, GB_EINVAL (malformed batch) or
     * GB_ETORCH. */
    int (*learner_train)(gb_torch_learner *l, const gb_torch_batch *batch, gb_torch_stats *stats,
                         float *priorities, gb_error *err);

    /* Adds n rows to the running statistics: obs (float32 rows of the model's observation
     * size; NULL: none) to policy.model.normalize_obs's, returns ([n] each row's discounted
     * return of its episode so far; NULL: none) to trainer.algorithm.reward_scale's; mask ([n],
     * a row counts where it is non-zero; NULL: all). They are merged at the start of the next
     * learner_train (summed over the learner's group first): the observations' into the model
     * (so into its exported parameters and checkpoints), the returns' into the learner's
     * checkpointed scale. Any thread, concurrently with learner_train (a trainer's ingest).
     * Statistics the config does not ask for are ignored. Returns 0, GB_EINVAL or GB_ETORCH. */
    int (*learner_observe)(gb_torch_learner *l, const float *obs, const float *returns,
                           int64_t n, const uint8_t *mask, gb_error *err);

    /* Tells the learner how far through its budget the run is (0..1), for lr annealing
     * (trainer.algorithm.lr_anneal: lr = lr0 * (1 - progress)). */
    void (*learner_set_progress)(gb_torch_learner *l, double progress);

    /* Training steps taken so far (restored by load). */
    int64_t (*learner_train_steps)(const gb_torch_learner *l);

    /* What computes the learner's network forward and backward: "gearbox C" (trainer.kernels
     * gearbox on a plain MLP, on the cpu, float32: DQN without value rescaling, PPO with
     * separate actor and critic torsos; workers/torch/mlp_train.h), else "libtorch autograd".
     * Static. */
    const char *(*learner_kernels)(const gb_torch_learner *l);

    /* Saves every network, optimiser state and counter to path (serialised in memory, written
     * to path.tmp, fsynced, renamed: a crash or a full disk leaves the previous checkpoint
     * intact and no path.tmp). Returns 0, GB_EIO (the file and the system's reason, e.g. "No
     * space left on device"), GB_ENOMEM or GB_ETORCH. */
    int (*learner_save)(const gb_torch_learner *l, const char *path, gb_error *err);

    /* Loads a checkpoint written by learner_save of an identically configured learner.
     * Returns 0, GB_ENOTFOUND, GB_ECORRUPT (shapes or names differ) or GB_ETORCH. */
    int (*learner_load)(gb_torch_learner *l, const char *path, gb_error *err);

    /* Data-parallel training over g (workers/torch/group.h; NULL: back to local training): the
     * learner's tensors (networks, targets, critics, temperature), optimiser states and
     * counters (train steps, model version) become the root rank's now (broadcast; the root:
     * the rank with the most train steps, the lowest such: rank 0 when all are equal), and
     * from then on every optimiser step all-reduces the gradients (summed in buckets of at most
     * bucket_bytes, 0 = 25 MiB, then divided by the number of ranks that had a gradient for the
     * parameter: the group size, unless a rank had no valid step in its batch) before clipping
     * and stepping, so every replica stays bit-identical. Every rank must then call
     * learner_train the same number of times, in step, and pass learner_set_progress the same
     * values (a rank whose batch has no valid step still takes part). PPO's minibatch count per
     * epoch is agreed across the group (the largest); a rank with fewer minibatches takes part
     * without a gradient in the extra steps. Advantage normalisation stays per rank and per
     * minibatch. The learner keeps g (owned by the caller; close it only after set_group(NULL)
     * or destroy). After a group error in train the replicas may differ: call set_group again
     * (with a new group) to resynchronise. Collective: every rank calls it. Returns 0 or the
     * group's errors (GB_ETIMEOUT, GB_ECLOSED, GB_ETORCH), or GB_ECORRUPT when the root's state
     * does not fit this learner (another configuration) on some rank (every rank then fails,
     * and the learner is back to local training). */
    int (*learner_set_group)(gb_torch_learner *l, gb_group *g, size_t bucket_bytes,
                             gb_error *err);

    /* A 64-bit checksum of the bits of every tensor the learner trains or keeps (networks,
     * targets, critics, temperature), in a fixed order: equal on every rank of a data-parallel
     * group. */
    uint64_t (*learner_checksum)(const gb_torch_learner *l);

    /* The learner's optimiser state and counters from flat arrays of n floats each, in the
     * order of its trainable parameters (libtorch's parameters() of the network, as its flat
     * Adam keeps them): params, Adam's first and second moments, the target network's
     * parameters (DQN's; NULL for a learner without one), Adam's step count, and train_steps.
     * SAC's arrays are three blocks, each optimiser's in turn: the actor's parameters, the
     * critics' (q1's, then q2's) and the temperature's one float (log alpha), n their sum; its
     * target (required) is the target critics' parameters laid out as the critics' block;
     * adam_steps is the actor's and the critics' step count, and the temperature's too when
     * trainer.algorithm.sac.learn_alpha (else its Adam has not stepped: 0). What a PPO, DQN or
     * SAC learner of the same configuration trained without libtorch has libtorch write in a
     * checkpoint (workers/roles/ppo_mlp.h, dqn_mlp.h, sac_mlp.h). Returns 0, or GB_EINVAL when
     * n is not the learner's count, or target is NULL for a learner with a target network or
     * not NULL for one without (nothing changed then). */
    int (*learner_set_flat)(gb_torch_learner *l, const float *params, const float *exp_avg,
                            const float *exp_avg_sq, const float *target, int64_t n,
                            int64_t adam_steps, int64_t train_steps, gb_error *err);
    /* The other way, the same arrays and refusals (*adam_steps: the actor's count for SAC): what
     * a learner without libtorch continues a restored run from (workers/roles/ppo_mlp.h,
     * dqn_mlp.h, sac_mlp.h). */
    int (*learner_get_flat)(const gb_torch_learner *l, float *params, float *exp_avg,
                            float *exp_avg_sq, float *target, int64_t n, int64_t *adam_steps,
                            int64_t *train_steps, gb_error *err);

    /* Every standard-normal draw of a SAC learner's training steps (the actions of its targets
     * and of its actor's loss) from fill from now on: fill(ctx, out, n) writes n floats, a draw
     * of shape [rows, A] row-major, in the order the steps draw. So a test can train SAC's
     * learner without libtorch (workers/roles/sac_mlp.h) beside this one from the same state
     * on the same noise and compare their parameters. fill NULL: the learner's generator again.
     * fill runs on the training thread, inside learner_train. Returns 0, or GB_EINVAL for a
     * learner that is not SAC's. */
    int (*learner_set_noise)(gb_torch_learner *l, void (*fill)(void *ctx, float *out, int64_t n),
                             void *ctx, gb_error *err);

    /* c = op(a) op(b) (added to c when add; op transposes a when ta, b when tb) through
     * libtorch's matrix product, on views of the caller's row-major arrays: what the bridge's
     * learners give workers/torch/mlp_train.h's large products (gb_mlp_train_set_large), and a
     * process's learner without libtorch takes once the module has loaded (its own copy of
     * mlp_train.c is the command's). Never fails; the caller's thread runs it. */
    void (*large_product)(int ta, int tb, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float *c, int ldc, int add);

    /* The process group's calls: workers/torch/group.h says what each does. */
    int (*group_open)(const gb_group_opts *o, gb_group **out, gb_error *err);
    void (*group_close)(gb_group *g); /* not NULL (the call name skips NULL) */
    int (*group_rank)(const gb_group *g);
    int (*group_size)(const gb_group *g);
    int (*group_allreduce)(gb_group *g, gb_dtype dtype, void *buf, int64_t count,
                           gb_group_op op, gb_error *err);
    int (*group_allgather)(gb_group *g, const void *in, size_t bytes, void *out, gb_error *err);
    int (*group_broadcast)(gb_group *g, void *buf, size_t bytes, int root, gb_error *err);
    int (*group_alltoall)(gb_group *g, const void *in, const size_t *send_bytes, void *out,
                          const size_t *recv_bytes, gb_error *err);
    int (*group_barrier)(gb_group *g, gb_error *err);
    void (*group_traffic)(const gb_group *g, int64_t *sent, int64_t *received);
    int (*group_failed)(const gb_group *g);
    int (*group_has_nccl)(void);
} gb_torch_api;

typedef const gb_torch_api *(*gb_torch_entry_fn)(void);

/* The bridge's table. In the tests and tools that link the bridge (gearbox_torch), its own; in
 * the gearbox command, the module's, loaded on the first call (workers/torch/loader.c): from
 * $GEARBOX_TORCH_MODULE when set, else beside the executable (the build tree), else
 * ../lib/gearbox/ from the executable's folder (an install). A module that cannot be loaded, or
 * that speaks another GB_TORCH_ABI_VERSION, ends the process with exit status 1 and the reason
 * on stderr: a worker without its model cannot do anything useful, and the launcher reports the
 * worker's failure with its log tail. Thread-safe; the table lives as long as the process. */
const gb_torch_api *gb_torch(void);

/* Loads the table now (gb_torch without the exit): 0, or GB_EIO with the reason in err. */
int gb_torch_load(gb_error *err);

/* 1 when libtorch is in this process: the command has loaded the module (whether or not its
 * table fitted), or the program links the bridge; 0 when nothing has called for it yet. */
int gb_torch_loaded(void);

/* The call names. */
#define gb_torch_set_threads(...) (gb_torch()->set_threads(__VA_ARGS__))
#define gb_torch_cuda_available() (gb_torch()->cuda_available())
#define gb_torch_model_create(...) (gb_torch()->model_create(__VA_ARGS__))
#define gb_torch_model_act(...) (gb_torch()->model_act(__VA_ARGS__))
#define gb_torch_model_act_noise(...) (gb_torch()->model_act_noise(__VA_ARGS__))
#define gb_torch_model_state_size(...) (gb_torch()->model_state_size(__VA_ARGS__))
#define gb_torch_model_act_state(...) (gb_torch()->model_act_state(__VA_ARGS__))
#define gb_torch_model_layout(...) (gb_torch()->model_layout(__VA_ARGS__))
#define gb_torch_model_export(...) (gb_torch()->model_export(__VA_ARGS__))
#define gb_torch_model_import(...) (gb_torch()->model_import(__VA_ARGS__))
#define gb_torch_model_set_precision(...) (gb_torch()->model_set_precision(__VA_ARGS__))
#define gb_torch_model_int8_engine(...) (gb_torch()->model_int8_engine(__VA_ARGS__))
#define gb_torch_model_kernels(...) (gb_torch()->model_kernels(__VA_ARGS__))
#define gb_torch_model_forward(...) (gb_torch()->model_forward(__VA_ARGS__))
#define gb_torch_model_version(...) (gb_torch()->model_version(__VA_ARGS__))
#define gb_torch_model_set_version(...) (gb_torch()->model_set_version(__VA_ARGS__))
#define gb_torch_learner_create(...) (gb_torch()->learner_create(__VA_ARGS__))
#define gb_torch_learner_model(...) (gb_torch()->learner_model(__VA_ARGS__))
#define gb_torch_learner_train(...) (gb_torch()->learner_train(__VA_ARGS__))
#define gb_torch_learner_observe(...) (gb_torch()->learner_observe(__VA_ARGS__))
#define gb_torch_learner_set_progress(...) (gb_torch()->learner_set_progress(__VA_ARGS__))
#define gb_torch_learner_train_steps(...) (gb_torch()->learner_train_steps(__VA_ARGS__))
#define gb_torch_learner_kernels(...) (gb_torch()->learner_kernels(__VA_ARGS__))
#define gb_torch_learner_save(...) (gb_torch()->learner_save(__VA_ARGS__))
#define gb_torch_learner_load(...) (gb_torch()->learner_load(__VA_ARGS__))
#define gb_torch_learner_set_group(...) (gb_torch()->learner_set_group(__VA_ARGS__))
#define gb_torch_learner_checksum(...) (gb_torch()->learner_checksum(__VA_ARGS__))
#define gb_torch_learner_set_flat(...) (gb_torch()->learner_set_flat(__VA_ARGS__))
#define gb_torch_learner_get_flat(...) (gb_torch()->learner_get_flat(__VA_ARGS__))
#define gb_torch_learner_set_noise(...) (gb_torch()->learner_set_noise(__VA_ARGS__))

/* Destroying NULL is a no-op that loads nothing (a worker's cleanup after an early failure). */
static inline void gb_torch_model_destroy(gb_torch_model *m)
{
    if (m)
        gb_torch()->model_destroy(m);
}
static inline void gb_torch_learner_destroy(gb_torch_learner *l)
{
    if (l)
        gb_torch()->learner_destroy(l);
}

#ifdef __cplusplus
}
#endif

#endif
