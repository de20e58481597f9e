/* runtime/streams/chunk.h: the trajectory-chunk format: the items that actors send on the sample
 * stream (runtime/streams/sample_stream.h), that the replay stores and that the algorithms train
 * on; its column layout, the builder that turns environment-ring steps into chunks, and the
 * conversions to the replay's columns (gb_chunk_column_item). This is the one place the format is
 * defined.
 *
 * A chunk holds T consecutive steps of one stream (one agent of one environment copy).
 * Environments use *next-step reset* (Gymnasium 1.x's default autoreset mode): when step t ends
 * an episode (terminated or truncated), obs[t+1] is the episode's real final observation, and
 * step t+1 is a reset step whose action is ignored, whose reward is 0, and which is marked
 * valid[t+1] = 0; obs[t+2] is the first observation of the new episode. So obs[t+1] is always
 * the true next observation of a valid step t, and truncated steps can bootstrap from it
 * (terminated ones do not), without a second observation column. A chunk carries T
 * observations per step plus one per-item observation, next_obs, that follows its last step.
 * With an environment ring that resets in the same step (envs/ring.h hands back final_obs), the
 * builder appends, after a step that ended the episode, the final observation as the next row
 * and one reset step (valid 0), then continues from the ring's reset observation: no extra
 * environment step, so each stream's chunks simply fill at their own pace.
 *
 * Each finished chunk is one malloc'd block holding all its columns, handed to the caller
 * (gb_chunk_take): send it without a copy (gb_chunk_payloads: ZeroMQ frees it when sent) or copy
 * it into the replay and release it. Nothing is allocated per step; one block per chunk.
 *
 * Recurrent state (policy.model.core, workers/torch/bridge.h "Cores"): with S = state_size > 0
 * floats of state per row, a chunk also carries, per item, the state the core had entering its
 * row 0 (GB_CHUNK_STATE), so a learner can replay the rows from where the actor was. The
 * builder keeps a carry per stream: the state the stream's last row produced, staged by
 * gb_chunk_set_state before each gb_chunk_step. A chunk beginning at a row takes the carry as
 * it is then; gb_chunk_start and the row after a reset row (a new episode's first row) begin
 * from zeros. So a chunk beginning with a reset row (the final observation) carries the ended
 * episode's last state, one beginning with a new episode's first row carries zeros, and one
 * beginning mid-episode the state its row 0 was acted on with: the bridge's reset rule (zeros
 * after a reset row), seen from the chunk's start. Without a core (S = 0) the column is absent
 * (ncols = GB_CHUNK_STATE) and chunks are what they were before cores existed.
 *
 * Frame stacks (env.wrappers.frame_stack k > 1, gb_chunk_layout_set_frame_stack): an
 * observation [k*C, ...] is the last k frames [C, ...], oldest first. A chunk then stores each
 * frame once: the obs column holds each row's newest frame only ([T, C, ...]) and one per-item
 * column, obs_past ([(k-1)*C, ...], the last column), holds the k-1 older frames of row 0's
 * stack; next_obs stays whole. Row r's stack is rebuilt by one rule (gb_chunk_stack_expand),
 * the wrapper's (envs/wrap.c): slot j of row r (j = k-1 the newest) is row r-(k-1-j)'s frame,
 * clamped at the row's episode start, where an episode starts at every row r >= 1 whose row
 * r-1 is not valid (the row after a reset row, or after a padding row: a stack filled with
 * the first frame, as the wrapper's reset fills it); slots before row 0 with no episode start
 * in 1..r are obs_past's. A reset row continues the ended episode (its final observation is a
 * pushed frame), padding rows are zeros (their stacks are zeros: obs_past is zeros below them),
 * and a lost life under episodic_life is an episode end like any other (the wrapper's reset
 * fills the stack after it). The builder checks every stack it is given against the rule.
 * defines: gb_chunk_builder, gb_chunk, gb_chunk_layout, gb_chunk_* */
#ifndef GB_RUNTIME_CHUNK_H
#define GB_RUNTIME_CHUNK_H

#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
#include "runtime/streams/wire.h"

#include <stdatomic.h>
#include <stdint.h>

/* The columns of a chunk, in this order on the wire and in the replay. */
enum {
    GB_CHUNK_OBS = 0,     /* [T, *obs_shape] obs dtype */
    GB_CHUNK_NEXT_OBS,    /* [*obs_shape]: the observation after the last row */
    GB_CHUNK_ACTION,      /* [T] int64 (discrete) or [T, A] float32 */
    GB_CHUNK_REWARD,      /* [T] float32 */
    GB_CHUNK_TERMINATED,  /* [T] uint8 */
    GB_CHUNK_TRUNCATED,   /* [T] uint8 */
    GB_CHUNK_VALID,       /* [T] uint8: 0 on reset rows */
    GB_CHUNK_LOGP,        /* [T] float32: behaviour log-probability */
    GB_CHUNK_VERSION,     /* [T] int64: policy version that chose each row's action */
    GB_CHUNK_STATE,       /* [S] float32, per item: a core's state entering row 0; only with a
                             core (S > 0) */
    GB_CHUNK_NCOLS = GB_CHUNK_STATE + 2, /* the most columns a chunk has (layout.ncols: those it
                                            has); the last may be obs_past (layout.past_col) */
};

/* Shapes and sizes of every column of a chunk. */
typedef struct gb_chunk_layout {
    int64_t T;
    gb_dtype obs_dtype;
    int obs_rank;
    int64_t obs_shape[GB_WIRE_MAX_RANK - 1];
    int discrete;
    int64_t action_dim; /* 1 for discrete */
    int64_t state_size; /* S: floats of recurrent state per row; 0 without a core */
    int64_t frame_stack; /* k: frames in an observation stored once each (1: whole
                            observations; gb_chunk_layout_set_frame_stack) */
    int past_col;       /* with k > 1: the obs_past column's index (the last); else -1 */
    uint64_t frame_bytes; /* one row of the obs column: an observation / k */
    int64_t overlap;    /* rows each chunk repeats from the end of the stream's previous one
                           (a burn-in prefix: gb_chunk_layout_set_overlap); 0 by default */
    int return_carry;   /* 1: the state column's last float is the stream's discounted return
                           entering row 0 (gb_chunk_layout_set_return_carry); 0 by default */
    double gamma;       /* its discount */
    int ncols;          /* columns present: GB_CHUNK_NCOLS with a state, one fewer without */
    gb_tensor_desc desc[GB_CHUNK_NCOLS]; /* name, dtype, full shape of each column */
    uint64_t bytes[GB_CHUNK_NCOLS];
    uint64_t offset[GB_CHUNK_NCOLS]; /* within a block, 64-byte aligned */
    uint64_t block_bytes;
} gb_chunk_layout;

/* Fills a layout. obs_shape has obs_rank dims; action: discrete (int64 per row) or a float32
 * box of action_dim; state_size: S floats of a core's state per row (gb_config_state_size),
 * 0 for none (then no state column). Returns 0 or GB_EINVAL. */
int gb_chunk_layout_init(gb_chunk_layout *l, int64_t T, gb_dtype obs_dtype, int obs_rank,
                         const int64_t *obs_shape, int discrete, int64_t action_dim,
                         int64_t state_size, gb_error *err);

/* Stores observations of k frames ([k*C, ...], obs_shape[0] divisible by k) as frames: the
 * obs column [T, C, ...] (each row's newest frame) and a last column obs_past [(k-1)*C, ...]
 * (see "Frame stacks" above). k = 1 keeps whole observations. Call it after
 * gb_chunk_layout_init, before the other setters. Returns 0 or GB_EINVAL. */
int gb_chunk_layout_set_frame_stack(gb_chunk_layout *l, int64_t k, gb_error *err);

/* Rebuilds the whole observations of n items' rows: obs [n, T, frame_bytes] (the obs column's
 * rows), past [n, past bytes] (obs_past), valid [n, T] (the valid column), each item's blocks
 * contiguous (strides: the columns' bytes), into out [n, T, k * frame_bytes], the observation
 * each row had. The one rule (see "Frame stacks" above); no allocation. */
void gb_chunk_stack_expand(const gb_chunk_layout *l, int64_t n, const void *obs,
                           const void *past, const uint8_t *valid, void *out);

/* The same for row r of one item (obs [T, frame_bytes], past, valid [T]) into out (one
 * observation). */
void gb_chunk_stack_row(const gb_chunk_layout *l, const void *obs, const void *past,
                        const uint8_t *valid, int64_t r, void *out);

/* Makes each chunk begin with the last `overlap` rows of the stream's previous chunk (R2D2's
 * burn-in: a learner replays them only to warm a core's state up, and trains on the T - overlap
 * rows after them), so that every row is trained on once and its core state is warmed up from
 * real steps. The state column is then the state entering the chunk's row 0 (the first repeated
 * row). A stream's first chunk (and one restarted after gb_chunk_start) has nothing to repeat:
 * its first `overlap` rows are padding rows, zeros marked not valid like reset rows, so the
 * learner's reset rule starts row `overlap` from zeros. A chunk's `steps` counts only its new
 * rows. 0 <= overlap < T; returns 0 or GB_EINVAL. */
int gb_chunk_layout_set_overlap(gb_chunk_layout *l, int64_t overlap, gb_error *err);

/* Makes the state column's last float (state_size >= 1) the discounted return of the stream's
 * episode so far, entering the chunk's row 0: R = gamma R + reward after each valid row, 0 at
 * an episode's start (the builder keeps it; gb_chunk_set_state stages the first state_size - 1
 * floats, a core's). A trainer replays R over the chunk's rows for reward scaling
 * (trainer.algorithm.reward_scale) without the stream's earlier chunks. Returns 0 or
 * GB_EINVAL (no state column). */
int gb_chunk_layout_set_return_carry(gb_chunk_layout *l, double gamma, gb_error *err);

/* A finished chunk: its block and where each column starts in it. */
typedef struct gb_chunk {
    void *block;    /* owned by the holder until released or given to ZeroMQ */
    int stream;     /* copy * agents + agent */
    int64_t policy_version; /* the newest version among its rows */
    int64_t steps;  /* valid rows, those repeated from the previous chunk aside (overlap) */
} gb_chunk;

typedef struct gb_chunk_builder gb_chunk_builder;

/* A builder for `streams` streams (K copies × A agents). Returns 0, GB_EINVAL or GB_ENOMEM. */
int gb_chunk_builder_create(const gb_chunk_layout *l, int streams, gb_chunk_builder **out,
                            gb_error *err);
void gb_chunk_builder_destroy(gb_chunk_builder *b);
const gb_chunk_layout *gb_chunk_builder_layout(const gb_chunk_builder *b);

/* Starts stream s from its first observation (after a ring reset); its state from zeros. */
void gb_chunk_start(gb_chunk_builder *b, int s, const void *obs);

/* Stages the state [S] float32 that stream s's current row produced (the core's state_out for
 * it; S = state_size - return_carry), copied: call it before gb_chunk_step for that row. It is the
 * state entering the next row, which a chunk beginning there records (see "Recurrent state" above).
 * No-op without a core (S = 0). */
void gb_chunk_set_state(gb_chunk_builder *b, int s, const float *state);

/* Records the action chosen for stream s's current row (action: one int64 or action_dim floats,
 * in the form the policy produced), its log-probability and the policy version. */
void gb_chunk_act(gb_chunk_builder *b, int s, const void *action, float logp, int64_t version);

/* Records the outcome of the step for stream s. ended: the copy's episode ended on this step
 * (then final_obs is the episode's last observation and obs the reset observation); else obs is
 * the next observation. A chunk finished by this step is queued (gb_chunk_take). Returns 0, or
 * GB_ENOMEM when a new block cannot be allocated: the chunk being finished is then dropped, the
 * stream restarts at obs in the block it had, and the builder stays usable. With frame
 * stacks, GB_ECORRUPT when obs's older frames are not what the stored rows rebuild (see "Frame
 * stacks": the environment's stacking is not the wrapper's); the stream goes on. */
int gb_chunk_step(gb_chunk_builder *b, int s, float reward, int terminated, int truncated,
                  int ended, const void *final_obs, const void *obs, gb_error *err);

/* Takes the next finished chunk, if any (1: *out filled; 0: none). */
int gb_chunk_take(gb_chunk_builder *b, gb_chunk *out);

/* Column c as the replay stores it: per step ([T, *shape], *ndim dims after T) or per item
 * (next_obs, state, obs_past: [*shape]). *shape points into the layout. */
void gb_chunk_column_item(const gb_chunk_layout *l, int c, int *ndim, const int64_t **shape,
                          int *per_item);

/* Checks that a received message's tensors are exactly this layout's columns (names, dtypes,
 * shapes, in order). Returns 1 when they are, else 0. */
int gb_chunk_matches(const gb_chunk_layout *l, const gb_tensor_desc *descs, int n);

/* Index of the first floating column (float32: observations when they are, next_obs, a
 * continuous action, reward, logp, state) of a chunk that holds a NaN or an infinity, or -1
 * when every value is finite. cols[c] (c < l->ncols) as gb_chunk_column or a received
 * message's tensors. One pass over the floating bytes, vectorised, no allocation: cheap enough
 * for every chunk at ingest. */
int gb_chunk_nonfinite(const gb_chunk_layout *l, const void *const cols[GB_CHUNK_NCOLS]);

/* What one pass over a chunk's float32 columns finds (gb_chunk_scan_floats). */
typedef struct gb_chunk_scan {
    int nonfinite; /* the first float32 column holding a NaN or an infinity, or -1 */
    float max_abs[GB_CHUNK_NCOLS]; /* per float32 column the largest |value| (an infinity counts,
                                      a NaN does not); 0 for the other columns */
} gb_chunk_scan;

/* gb_chunk_nonfinite's pass, which also finds each float32 column's largest magnitude: what a
 * trainer checks every received chunk for (non-finite values, values beyond its bounds) in one
 * read of the floating bytes. cols as for gb_chunk_nonfinite. */
void gb_chunk_scan_floats(const gb_chunk_layout *l, const void *const cols[GB_CHUNK_NCOLS],
                          gb_chunk_scan *s);

/* Pointer to column c of a chunk block. */
static inline void *gb_chunk_column(const gb_chunk_layout *l, void *block, int c)
{
    return (char *)block + l->offset[c];
}

/* Frees a block that was not handed to ZeroMQ. */
void gb_chunk_release(void *block);

/* Fills payloads[0, l->ncols) to send the chunk's columns without a copy: ZeroMQ releases
 * the block after the last column is sent (a reference count in the block). On a send error
 * gb_wire_send calls the free functions itself, so the block is never leaked. */
void gb_chunk_payloads(const gb_chunk_layout *l, const gb_chunk *c,
                       gb_wire_payload payloads[GB_CHUNK_NCOLS]);

/* For tests: the next n block allocations of every builder fail (0 turns it off). */
void gb_chunk_fail_next_allocs(int n);

#endif
