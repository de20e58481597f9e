/* workers/roles/shards.h: the replay sharded over the trainers of a data-parallel group (GEAR: the
 * replay lives in the training servers' memory). Rank r of the group (workers/torch/group.h) owns
 * shard r, its own gb_replay; an item's global index is shard * shard_capacity + local index.
 * Global selection makes one selection over the union of the shards and brings every chosen row
 * to the trainer that trains on it:
 *
 *  - weighted and uniform (centralised, two-level draw): every shard's weight sum (uniform: its
 *    size) is gathered; a draw shared by every rank (same seed, same sequence) assigns each of the
 *    B positions of the global batch to a shard with probability sum_s / sum; shard s then draws
 *    its positions' items from its own selector (P(i | s) = w_i / sum_s). So P(i) = w_i / sum,
 *    exactly as one replay holding the union, and the importance weights use these global
 *    probabilities and the union's size, normalised by the global batch's largest;
 *  - fifo, lifo and topk (decentralised): every shard peeks its best B candidates (without
 *    drawing), the candidates are gathered and merged (fifo/lifo by commit time, topk by priority,
 *    ties to the older), and each shard draws the count it won: the global result is the first B
 *    of the union.
 *
 * The global batch's positions [r * B/N, (r+1) * B/N) are trained by rank r. After the draw, ONE
 * all-to-all does the rest: each owner sends each trainer a block holding its count of draws and
 * their smallest probability (a header every pair carries), then for each position of that
 * trainer's part the labels gave it, the draw's local index, key and probability, then the rows,
 * gathered straight from the column tables (no per-row messages, no re-serialisation). The split
 * sizes follow from the shared labels, so no size exchange precedes it; the headers tell every
 * rank every shard's count (a shard that came back short leaves its last positions empty) and
 * the global batch's smallest probability, which normalises the importance weights over the
 * whole global batch. The trainer copies the rows into its staging grouped by owner (shard 0's
 * first), the order of gb_shards_select's weights and of gb_shards_update_priorities'
 * priorities. Priorities go back to the owning shard (an all-to-all of the same routes).
 *
 * Commit times order fifo and lifo across shards: call gb_shards_stamp before committing. They
 * come from the wall clock (CLOCK_REALTIME), so across machines the merge is as good as the
 * clocks' agreement.
 * defines: gb_shards, gb_shards_opts, gb_shards_batch, gb_shards_* */
#ifndef GB_WORKERS_SHARDS_H
#define GB_WORKERS_SHARDS_H

#include "replay/replay.h"
#include "runtime/base/error.h"
#include "workers/torch/group.h"

#include <stdint.h>

typedef struct gb_shards gb_shards;

typedef struct gb_shards_opts {
    gb_group *group;   /* rank = this shard; not owned */
    gb_replay *replay; /* this rank's shard; not owned; the same capacity and schema on every
                          rank */
    int64_t batch;     /* B, the global batch: a multiple of the group's size */
    uint64_t seed;     /* the shared draw's seed: the same on every rank */
    int global;        /* 1: global selection (gb_shards_select); 0: every trainer samples its
                          own shard, and only gb_shards_agree is used */
} gb_shards_opts;

/* Returns 0, GB_EINVAL (batch not a multiple of the group size) or GB_ENOMEM. */
int gb_shards_create(const gb_shards_opts *o, gb_shards **out, gb_error *err);
void gb_shards_destroy(gb_shards *S); /* NULL: no-op */

/* After the trainers' group re-formed (workers/roles/trainer_group.c): the collectives go over g
 * (same rank and size), the shared draw starts again from seed (equal on every rank). */
void gb_shards_regroup(gb_shards *S, gb_group *g, uint64_t seed);

/* Records the commit time of n items about to be committed (still WRITING), for the fifo/lifo
 * merge. stamp: NULL = now (ns, CLOCK_REALTIME); else one per item (tests use insertion order).
 * Callable from the ingest thread while another selects. */
void gb_shards_stamp(gb_shards *S, int64_t n, const int64_t *idx, const int64_t *stamp);

/* Do all the trainers take a step now? Every rank calls it together: one all-reduce of (shards
 * whose rate limiter does not yet admit their share -- gb_replay_ready of share, normally
 * batch/N, waiting up to its timeout -- or that hold, ranks that want to stop, the summed
 * progress) and, for a
 * global weighted or uniform draw, every shard's weight sum and size (which gb_shards_select then
 * uses instead of gathering them again). Returns 1 (go: every shard admits its share), 0 (not
 * yet), 2 (some rank wants to stop: all stop), or the replay's or the group's errors.
 * progress_sum (may be NULL) receives the sum of the ranks' progress. */
int gb_shards_agree(gb_shards *S, const gb_replay_request *share, int stop, int hold,
                    double progress, double *progress_sum, gb_error *err);

/* One global selection and collection; every rank calls it together, after agreeing to take a
 * step (gb_shards_agree said go). req: the selector (the primary or another
 * this replay keeps), step range and staleness floor; its batch is ignored (the global batch is
 * opts.batch). Draws this shard's part into sel (pinned until gb_replay_release), exchanges, and
 * collects the rows this rank trains on into dst (one per column, as gb_replay_collect, room for
 * batch/N rows), their importance weights into weight[batch/N] and their count into *n (batch/N,
 * fewer when the union held fewer items than a distinct selector asked for, or max_times_sampled
 * emptied a shard during a weighted draw). Returns 0, GB_EINVAL, GB_ECLOSED or the group's
 * errors (after which the group is unusable). */
int gb_shards_select(gb_shards *S, const gb_replay_request *req, gb_replay_selection *sel,
                     const gb_replay_dst *dst, int ndst, float *weight, int64_t *n,
                     gb_error *err);

/* After gb_shards_select: sends the new priorities of this rank's n rows (in gb_shards_select's
 * order) to the shards that own them, and applies those of this shard's items (entries whose item
 * has left since are skipped). Collective. Returns 0 or the group's or the replay's errors. */
int gb_shards_update_priorities(gb_shards *S, const double *priority, gb_error *err);

/* This trainer's part of the last global batch, as one replay holding the union would report
 * it, for checks, tests and benchmarks: its n rows in gb_shards_select's order (grouped by
 * owner), with their positions in the global batch (position / (B/N) is this rank). Gathering
 * every rank's part gives the whole batch. */
typedef struct gb_shards_batch {
    int64_t n;                   /* this trainer's rows */
    const int64_t *global_index; /* [n] shard * capacity + local index */
    const int64_t *position;     /* [n] the position each row holds in the global batch */
    const double *prob;          /* [n] the probability of the draw, over the union */
    const float *weight;         /* [n] importance weights, normalised over the global batch */
    int64_t union_size;          /* items in the union when the selection was made */
    const size_t *send_bytes;    /* [group size] the last all-to-all's bytes to each rank */
    const size_t *recv_bytes;    /* [group size] and from each rank */
} gb_shards_batch;

void gb_shards_last(const gb_shards *S, gb_shards_batch *b);

#endif
