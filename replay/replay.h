/* replay/replay.h: the GEAR replay store: trajectory items in column tables in shared host
 * memory, an index manager (block allocator + status table), removers, selectors, a rate limiter,
 * collection into caller buffers, and checkpoints.
 * defines: gb_replay, gb_replay_options, gb_replay_column, gb_replay_create, gb_replay_free,
 *          gb_replay_allocate, gb_replay_allocate_unlimited, gb_replay_block, gb_replay_commit,
 *          gb_replay_abort,
 *          gb_replay_insert, gb_replay_sample, gb_replay_release, gb_replay_collect,
 *          gb_replay_update_priorities, gb_replay_expire, gb_replay_set_rate_limit,
 *          gb_replay_checkpoint, gb_replay_restore, gb_replay_stats, gb_replay_digest,
 *          gb_replay_checkpoint_digest, gb_replay_tables,
 *          gb_replay_status_view, gb_replay_selector_ops, gb_replay_gather,
 *          gb_replay_importance_weights, gb_replay_serve_writers, gb_replay_writer_*,
 *          gb_replay_selectors, gb_replay_selector_name, gb_replay_selector_parse,
 *          gb_replay_selector_names, gb_replay_attach, gb_replay_recovery,
 *          gb_replay_recovery_get, gb_replay_unlink, gb_replay_shm_name
 *
 * Model (docs/design.md, "The replay"):
 * - An item is a trajectory chunk of T steps. Each column is declared once (name, dtype, per-step
 *   shape) and is either per step (T values per item) or per item (one value, e.g. a bootstrap
 *   observation). A column table is one array of `capacity` blocks; block i of every table
 *   belongs to item index i. Rows (blocks) are 64-byte aligned. All tables and the status arrays
 *   live in one shared-memory segment that another local process can map read-only
 *   (gb_replay_shm_fd + gb_replay_view_open).
 * - Item states: FREE -> (allocate) WRITING -> (commit) COMMITTED -> (removed) RETIRED -> FREE.
 *   Only COMMITTED items are selectable.
 * - Readers pin: gb_replay_sample pins every selected item until gb_replay_release. A remover
 *   (eviction, max_times_sampled, staleness expiry) takes an item out of selection at once
 *   (RETIRED), but its block returns to the free queue only when its last pin is released. So a
 *   block a reader is still collecting is never handed to a writer, and no lock is held while
 *   readers or writers copy. An allocation that finds no free block evicts (by the remover); when
 *   every candidate is pinned it waits for a release, up to the timeout.
 * - One mutex guards the index manager (status, free queue, selector structures, rate limiter);
 *   writes into blocks and collection copies run without it.
 *
 * Thread safety: every function may be called from any thread, concurrently, unless it says
 * otherwise. Blocking calls wait at most the timeout (options.timeout_s, or the per-call one) and
 * then fail with GB_ETIMEOUT and a message saying what they waited for; gb_replay_close wakes them
 * with GB_ECLOSED. */
#ifndef GB_REPLAY_REPLAY_H
#define GB_REPLAY_REPLAY_H

#include "replay/kinds.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
#include "runtime/base/rng.h"

#include <stddef.h>
#include <stdint.h>

#define GB_REPLAY_MAX_COLUMNS 32
#define GB_REPLAY_MAX_DIMS 4
#define GB_REPLAY_NAME_MAX 32
#define GB_REPLAY_ROW_ALIGN 64 /* row stride alignment of blocks of 128 bytes and more */
/* "No staleness filter" for gb_replay_request.min_policy_version. */
#define GB_REPLAY_NO_MIN_VERSION INT64_MIN
/* "The replay's primary selector" for gb_replay_request.selector (the kinds: replay/kinds.h). */
#define GB_REPLAY_SELECTOR_PRIMARY (-1)

typedef struct gb_replay gb_replay;
typedef struct gb_replay_selector_ops gb_replay_selector_ops;

/* Item states in the status table. */
enum { GB_ITEM_FREE = 0, GB_ITEM_WRITING = 1, GB_ITEM_COMMITTED = 2, GB_ITEM_RETIRED = 3 };

typedef struct gb_replay_column {
    char name[GB_REPLAY_NAME_MAX];
    gb_dtype dtype;
    int ndim;                          /* 0 = scalar per step (or per item) */
    int64_t shape[GB_REPLAY_MAX_DIMS]; /* per-step (or per-item) shape */
    int per_item;                      /* 1: one value per item; 0: one per step (T per item) */
} gb_replay_column;

typedef struct gb_replay_options {
    int64_t capacity;  /* blocks per table (items the store can hold) */
    int64_t max_size;  /* evict above this many committed items; 0 = capacity */
    int64_t steps;     /* T: steps per item */
    int ncolumns;
    gb_replay_column columns[GB_REPLAY_MAX_COLUMNS];

    gb_remover_kind remover;   /* who leaves when full; MAX_TIMES_SAMPLED evicts FIFO when full;
                                  NONE: nobody: inserts wait for room (a queue: on-policy data
                                  is never dropped unsampled, and the writers are held back
                                  instead); needs max_times_sampled >= 1 */
    int64_t max_times_sampled; /* > 0: an item leaves after this many samples (any remover) */
    gb_selector_kind selector; /* the primary selector: what a request gets by default */
    const gb_replay_selector_ops *selector_ops; /* NULL = the built-in one for `selector`; else
                                                   a replacement (e.g. the GPU selector) */
    unsigned extra_selectors; /* bit mask (1u << gb_selector_kind) of built-in selectors kept
                                 beside the primary so that a request can name them (see
                                 gb_replay_selectors); 0 = none. Only weighted and top-k cost
                                 anything (their own structure, kept in step on every insert,
                                 removal and priority update); uniform, FIFO and LIFO are always
                                 available, so their bits change nothing. */
    double alpha;            /* weighted: weight = priority^alpha */
    double beta;             /* weighted: importance weight = (size * prob)^-beta / max */
    double default_priority; /* priority of items committed without one; NAN = the largest
                                priority given to any item so far, by commit or update (the
                                usual prioritized-replay rule; 1.0 before the first) */

    int64_t min_size;          /* rate limiter: committed items before sampling starts (>= 1) */
    double samples_per_insert; /* rate limiter: 0 = no ratio limit */
    double error_buffer;       /* rate limiter: allowed deviation of samples from
                                  inserts * samples_per_insert */
    double timeout_s;          /* every blocking call; 0 = never block (fail at once) */

    int huge_pages;      /* try huge pages for the shared segment */
    int collect_threads; /* threads gb_replay_collect may use, the caller's included (>= 1) */
    uint64_t seed;       /* selector RNG seed */
    const char *shm_name; /* NULL: anonymous memfd; else a POSIX shm name ("/gearbox-...") */
    int shm_persistent;   /* with shm_name: the segment belongs to the run, not to this process:
                             gb_replay_create attaches to an existing segment of that name and
                             recovers its committed items (see "Surviving the owner's crash"),
                             and gb_replay_free leaves the name in place (gb_replay_unlink or
                             the launcher's gb_shm_unlink_run removes it). 0: the creator
                             unlinks the name at gb_replay_free. */
} gb_replay_options;

/* Fills o with defaults: capacity 1024, T 1, no columns, FIFO remover, uniform selector, no
 * extra selectors, alpha 0.6, beta 0.4, default priority NAN, min_size 1, no ratio limit, timeout
 * 10 s, 1 collect thread, seed 0. */
void gb_replay_options_default(gb_replay_options *o);

/* Appends a column. shape has ndim entries (ndim 0: scalar). Returns 0 or GB_EINVAL (too many
 * columns, bad dtype, duplicate or empty name, non-positive dimension). */
int gb_replay_add_column(gb_replay_options *o, const char *name, gb_dtype dtype, int ndim,
                         const int64_t *shape, int per_item, gb_error *err);

/* Checks options for mistakes and for rate-limiter settings that can never make progress. Returns
 * 0 or GB_EINVAL with a message naming the option. gb_replay_create calls it. */
int gb_replay_validate(const gb_replay_options *o, gb_error *err);

/* Creates a replay: allocates the shared segment (tables + status) and the index structures.
 * Memory is touched lazily by the kernel, except the index structures (O(capacity)). Returns 0
 * and sets *out (caller frees with gb_replay_free), or a GB_E* code. */
int gb_replay_create(const gb_replay_options *o, gb_replay **out, gb_error *err);

/* ---- Surviving the owner's crash ------------------------------------------------------------
 *
 * The status table, the column tables and the counters that matter (insertion sequence, inserts,
 * deletes, samples, removals, max priority, staleness floor) live in the shared segment; the
 * index structures (free queue, commit-ordered list, live set, heaps, selector structures) are
 * this process's and are rebuilt from the status table. With options.shm_persistent, a process
 * that was killed (SIGKILL, a crash) leaves the named segment behind, and the next
 * gb_replay_create with the same name and options attaches to it:
 * - the header must be a complete replay segment of this gearbox's format with exactly the layout
 *   the options ask for (capacity, T, max_size, every column's name, dtype, shape and per-item
 *   flag), else GB_EINVAL (another schema: the message names the first difference) or
 *   GB_ECORRUPT (not a replay segment, or another format version). A segment whose creator died
 *   before finishing its header is removed and created anew.
 * - every COMMITTED item is kept with its data, priority, insertion sequence (its key), times
 *   sampled, length and policy version; items being written (allocated, not committed) are
 *   dropped and counted; removed items still pinned by the dead process's readers are freed;
 *   entries with impossible fields (a negative or non-finite priority, a length beyond T, no
 *   sequence: corruption, never a crash) are dropped and counted apart. Kept items at or past
 *   max_times_sampled, or below the staleness floor, are then removed as usual.
 * - the invariant that makes this safe: commit writes an item's status fields (priority, length,
 *   version, sequence, times sampled) first and its state last, with a release store; an item's
 *   block is written only while it is WRITING. So an item is either COMMITTED with every field
 *   and its data in place, or not COMMITTED and dropped; a crash in a priority update leaves the
 *   old or the new value (one aligned 8-byte store).
 * - not recovered: the selector RNG stream (reseeded from the seed and the sample count, so a
 *   restarted replay does not repeat its first draws), a rate limit changed at run time
 *   (gb_replay_set_rate_limit: the options' one applies), the timeout and beta set at run time,
 *   the wait counters (insert_waits, sample_waits), and the free queue's order (free blocks are
 *   queued by index). Counters are exact up to the one operation the crash interrupted: deletes
 *   is set so that inserts - deletes equals the items kept.
 * - the writer port is initialised again: writer processes of the dead owner must reopen.
 * Only one process may own a segment at a time: attaching while the previous owner still runs
 * breaks both (the launcher restarts a trainer only after it has died). */

/* What gb_replay_create found when it attached to an existing segment. */
typedef struct gb_replay_recovery {
    int attached;                /* 1: the segment existed and was recovered; 0: created new */
    int64_t kept;                /* committed items kept (selectable now, after the removals) */
    int64_t dropped_in_flight;   /* items being written at the crash, dropped */
    int64_t dropped_invalid;     /* COMMITTED entries with impossible fields, dropped */
    int64_t released_pins;       /* removed items the dead process's readers still pinned, freed */
    int64_t removed_on_attach;   /* kept items removed at once (sampled out, below the floor) */
} gb_replay_recovery;

/* Like gb_replay_create, but only attaches: GB_ENOTFOUND when no segment has the name
 * (o->shm_name required; shm_persistent is implied). Returns 0 or gb_replay_create's errors. */
int gb_replay_attach(const gb_replay_options *o, gb_replay **out, gb_error *err);

/* What the create or attach that made r recovered (all zero for a new segment). */
void gb_replay_recovery_get(const gb_replay *r, gb_replay_recovery *rec);

/* Removes r's segment name now (its mapping stays until gb_replay_free): a persistent replay
 * whose run is over, so that nothing attaches to it again. Returns 0, or GB_ENOTFOUND when r has
 * no name or the name was already gone. */
int gb_replay_unlink(gb_replay *r, gb_error *err);

/* The segment name of replay shard `shard` of the run in run_dir: "/gearbox-<run id>-replay-<n>"
 * (runtime/base/shm.h: gb_shm_run_name; the launcher removes all of a run's names with
 * gb_shm_unlink_run). Returns 0 or gb_shm_run_name's errors. */
int gb_replay_shm_name(const char *run_dir, int shard, char *out, size_t cap, gb_error *err);

/* Wakes every blocked call with GB_ECLOSED; later blocking calls fail at once. Non-blocking
 * calls keep working. */
void gb_replay_close(gb_replay *r);

/* Frees everything. No other thread may be using r. NULL is fine. */
void gb_replay_free(gb_replay *r);

/* ---- Writing (ingest) ---------------------------------------------------------------------- */

/* Allocates n blocks (one per new item) into idx[0..n) and marks them WRITING. Blocks while the
 * rate limiter refuses n more inserts (items being written count as inserted) or no block is
 * free, up to timeout_s (< 0: the replay's timeout; 0: don't block). When fewer than n blocks are
 * free, the remover evicts committed items now (items being written are never candidates, so a
 * batch of n reserves n blocks at once: with a LIFO or lowest-priority remover this differs from n
 * separate inserts); when the only candidates are pinned, it waits for their readers. With remover
 * NONE nothing is evicted: it waits until committed plus written items leave room for n under
 * max_size (items leave by max_times_sampled or the staleness floor). All or nothing: on error no
 * block is taken (items already evicted stay evicted). Returns 0,
 * GB_ETIMEOUT, GB_ECLOSED or GB_EINVAL. */
int gb_replay_allocate(gb_replay *r, int64_t n, int64_t *idx, double timeout_s, gb_error *err);

/* gb_replay_allocate for loading a dataset: the rate limiter is not asked (the items still count
 * as inserts once committed, so online inserts after the load wait for samples to catch up) and
 * it never waits. Returns 0, GB_ETIMEOUT (no room: capacity or max_size), GB_ECLOSED,
 * GB_EINVAL. */
int gb_replay_allocate_unlimited(gb_replay *r, int64_t n, int64_t *idx, gb_error *err);

/* Start of item idx's block in column col (T * step bytes, or the item bytes for a per-item
 * column). Write in place between allocate and commit; the pointer stays valid for the replay's
 * lifetime. No lock, no check of the state. */
void *gb_replay_block(const gb_replay *r, int col, int64_t idx);

/* Commits n WRITING items, making them selectable in the given order (insertion order). priority:
 * NULL or NAN entries = the default priority; length: valid steps (NULL = T; 0..T);
 * policy_version: NULL = 0 (an item below the staleness floor is removed at once, counted as
 * expired). Never blocks for room: the remover makes room, one item at a time, when committed
 * items would exceed max_size. Returns 0 or GB_EINVAL (an index not WRITING or listed twice, a
 * length out of range, a negative or non-finite priority; nothing is committed then). */
int gb_replay_commit(gb_replay *r, int64_t n, const int64_t *idx, const double *priority,
                     const int32_t *length, const int64_t *policy_version, gb_error *err);

/* Returns n WRITING blocks to the free queue unused (a writer that failed midway). Returns 0 or
 * GB_EINVAL (an index not WRITING; nothing changes then). */
int gb_replay_abort(gb_replay *r, int64_t n, const int64_t *idx, gb_error *err);

/* Convenience: allocate one item, copy each column's data (data[c]: the full block of column c,
 * or NULL to leave it zero-filled), commit. Blocks like gb_replay_allocate. */
int gb_replay_insert(gb_replay *r, const void *const *data, double priority, int32_t length,
                     int64_t policy_version, gb_error *err);

/* ---- Sampling ------------------------------------------------------------------------------ */

/* A selection: caller-allocated once (gb_replay_selection_init), reused every step. */
typedef struct gb_replay_selection {
    int64_t capacity; /* room in the arrays */
    int64_t n;        /* items selected */
    int64_t *index;   /* (n) block indices */
    uint64_t *key;    /* (n) insertion sequence of each item: identifies it for updates */
    double *prob;     /* (n) probability with which each entry was drawn (1/size for uniform,
                         1 for deterministic selectors) */
    float *weight;    /* (n) importance weights (size * prob)^-beta / max over the batch; 1 for
                         non-weighted selectors */
    int64_t size;     /* selectable items when the selection was made */
    int32_t t0, t1;   /* the step range the request asked for (collection uses it) */
    int selector;     /* the gb_selector_kind that drew it */
    int pinned;       /* 1 until gb_replay_release */
} gb_replay_selection;

/* Allocates arrays for up to capacity items. Returns 0 or GB_ENOMEM. */
int gb_replay_selection_init(gb_replay_selection *s, int64_t capacity, gb_error *err);
void gb_replay_selection_free(gb_replay_selection *s);

typedef struct gb_replay_request {
    int64_t batch;              /* items to select (<= sample capacity) */
    int64_t min_policy_version; /* staleness floor: items below it are removed first (the floor
                                   only rises; see gb_replay_expire); GB_REPLAY_NO_MIN_VERSION */
    int32_t t0, t1;             /* step range [t0, t1) to collect; t1 = 0 means T */
    double timeout_s;           /* < 0: the replay's timeout; 0: don't block */
    int selector;               /* GB_REPLAY_SELECTOR_PRIMARY: the replay's selector; else a
                                   gb_selector_kind that gb_replay_selectors lists */
    int admitted;               /* 1: the caller already had the rate limiter's yes (a group of
                                   shards that agreed on a step, each asking gb_replay_ready for
                                   its share): draw without waiting for the ratio; the draws
                                   still count, and an empty store still waits */
} gb_replay_request;

/* A request for batch items, whole items, no staleness filter, the replay's timeout, the primary
 * selector. Start every request from it (a zeroed struct would name the uniform selector). */
gb_replay_request gb_replay_request_default(int64_t batch);

/* Waits for the rate limiter (min_size, samples per insert) up to the timeout, then selects with
 * the request's selector (the primary unless it names another available one) and pins the items
 * until gb_replay_release. Uniform and weighted draw with replacement (each draw counts as one
 * sample; with max_times_sampled, an item that reaches the limit leaves before the next draw, so
 * the batch can come back short when the store runs out). Uniform draws P(i) = 1/size; weighted
 * P(i) = priority_i^alpha / sum (uniform when every weight is zero), with importance weights
 * (size * P(i))^-beta normalised by the batch's largest. FIFO, LIFO and top-k return
 * min(batch, size) distinct items (oldest first, newest first, highest priority first; ties broken
 * by insertion order), prob and weight 1. The rate limiter, max_times_sampled, pins and the
 * staleness floor apply alike whichever selector draws.
 * Returns 0, GB_ETIMEOUT (message says whether min_size or the ratio held it back), GB_ECLOSED,
 * GB_EINVAL (bad request, a selector this replay does not keep (the message lists the available
 * ones), or s still pinned). */
int gb_replay_sample(gb_replay *r, const gb_replay_request *req, gb_replay_selection *s,
                     gb_error *err);

/* Waits as gb_replay_sample would for the same request (raising the staleness floor first), but
 * draws nothing: once it returns 0, a gb_replay_sample of that request made before anything else
 * samples finds the limiter's yes at once (inserts only widen it; items leave only by sampling,
 * the staleness floor the caller raises, or eviction when full, which keeps min_size). Returns
 * 0, GB_ETIMEOUT, GB_ECLOSED or GB_EINVAL. */
int gb_replay_ready(gb_replay *r, const gb_replay_request *req, gb_error *err);

/* The first n items a distinct selector (fifo, lifo, topk; GB_REPLAY_SELECTOR_PRIMARY for the
 * primary) would pick now, best first, into idx[0..*count) with their priorities, without
 * pinning or counting them. For merging candidates across replay shards. Returns 0 or GB_EINVAL
 * (a selector that draws at random, or one this replay does not keep). */
int gb_replay_peek(gb_replay *r, int selector, int64_t n, int64_t *idx, double *priority,
                   int64_t *count, gb_error *err);

/* For a selector that draws at random (uniform, weighted): the sum of the committed items'
 * weights that its draw normalises by (uniform: size; weighted: sum of priority^alpha, which is
 * 0 when every priority is 0), and the committed items. For the two-level draw over shards.
 * Returns 0 or GB_EINVAL. */
int gb_replay_weight_total(gb_replay *r, int selector, double *total, int64_t *size,
                           gb_error *err);

/* Unpins a sample's items (blocks of removed items become free). Idempotent. Never blocks beyond
 * the index lock. */
void gb_replay_release(gb_replay *r, gb_replay_selection *s);

/* One destination buffer per column for gb_replay_collect. */
typedef struct gb_replay_dst {
    int column;   /* column index */
    void *data;   /* (n, t1 - t0, *shape) for a per-step column; (n, *shape) for a per-item one */
    size_t bytes; /* room in data */
} gb_replay_dst;

/* Copies the sample's items (steps [t0, t1) of the sample's request) into one contiguous batch per
 * destination. Steps at or beyond an item's valid length are zero-filled. lengths (optional, n
 * entries) receives each item's valid steps inside the range. The sample must be pinned. Takes no
 * lock; copies on up to collect_threads threads when the batch is large. Returns 0 or GB_EINVAL
 * (a buffer too small, a bad column). */
int gb_replay_collect(gb_replay *r, const gb_replay_selection *s, const gb_replay_dst *dst,
                      int ndst, int32_t *lengths, gb_error *err);

/* Sets the priorities of n items. key (optional) is the sample's key array: an entry whose item
 * has since been removed (or whose block now holds another item) is skipped and counted in
 * *skipped (optional). Returns 0 or GB_EINVAL (negative or non-finite priority; nothing changes
 * then). O(n log capacity). */
int gb_replay_update_priorities(gb_replay *r, int64_t n, const int64_t *idx, const uint64_t *key,
                                const double *priority, int64_t *skipped, gb_error *err);

/* Raises the staleness floor to min_version and removes every committed item whose policy version
 * is below it (O(k log n) for k removed items). A lower value than the current floor does nothing.
 * Returns the number of items removed. */
int64_t gb_replay_expire(gb_replay *r, int64_t min_version);

/* Importance weights for a selection: w_i = (size * prob_i)^-beta, divided by the largest. */
void gb_replay_importance_weights(const double *prob, int64_t n, int64_t size, double beta,
                                  float *weight);
/* The same with the normaliser given: w_i = (pmin / prob_i)^beta, pmin the smallest positive
 * probability of a batch this selection is part of (several shards' parts of one global batch);
 * prob_i <= 0 gives 0. */
void gb_replay_importance_weights_from(const double *prob, int64_t n, double pmin, double beta,
                                       float *weight);

/* ---- Run-time settings --------------------------------------------------------------------- */

/* Changes the rate limiter (validated as in gb_replay_validate; on error nothing changes) and
 * wakes waiters so they re-check. The counters (inserts, samples) are kept. */
int gb_replay_set_rate_limit(gb_replay *r, int64_t min_size, double samples_per_insert,
                             double error_buffer, gb_error *err);
void gb_replay_set_timeout(gb_replay *r, double timeout_s);
void gb_replay_set_beta(gb_replay *r, double beta);

/* ---- Introspection ------------------------------------------------------------------------- */

typedef struct gb_replay_stats {
    int64_t capacity, max_size, size; /* size: committed (selectable) items */
    int64_t writing, retired_pinned, free_blocks;
    uint64_t inserts;       /* committed items, ever */
    uint64_t samples;       /* draws, ever (rate limiter counter) */
    uint64_t evicted;       /* removed by the remover to make room */
    uint64_t sampled_out;   /* removed after max_times_sampled */
    uint64_t first_samples; /* items drawn at least once, ever (what trained on them) */
    uint64_t expired;       /* removed by the staleness floor */
    uint64_t aborted;       /* blocks returned by gb_replay_abort */
    uint64_t updates, stale_updates;
    uint64_t insert_waits, sample_waits; /* blocking calls that had to wait */
    double max_priority;
    int64_t min_version; /* staleness floor */
    int huge_pages;      /* 1 hugetlb, 2 transparent requested, 0 none */
    size_t shm_bytes;
} gb_replay_stats;

void gb_replay_stats_get(gb_replay *r, gb_replay_stats *st);

/* A digest of what a checkpoint must carry over: every committed item's index, key (insertion
 * seq), priority, length, policy version and times sampled, and the rate limiter's counters
 * (under the lock: a consistent snapshot). Two replays with the same digest hold the same items
 * with the same priorities (data is checked by the checkpoint's CRCs). Returns the number of
 * committed items; *digest the value. */
int64_t gb_replay_digest(gb_replay *r, uint64_t *digest);

/* The digest of what the last successful gb_replay_checkpoint wrote, taken in its snapshot (what
 * gb_replay_digest said at that instant, and says after a gb_replay_restore of that file, though
 * items came and went while it streamed). Returns its committed items, -1 before any. */
int64_t gb_replay_checkpoint_digest(gb_replay *r, uint64_t *digest);
const gb_replay_options *gb_replay_options_of(const gb_replay *r);

/* The selectors a request may name, as a bit mask (1u << gb_selector_kind): the primary, the
 * extra ones the options asked for, and always uniform, FIFO and LIFO (they keep no structure of
 * their own: they read the live set and the commit-ordered list the index manager keeps anyway,
 * so offering them costs nothing). Fixed at create. */
unsigned gb_replay_selectors(const gb_replay *r);

/* "uniform", "weighted", "fifo", "lifo", "topk" (the config's names), or "?" for another value. */
const char *gb_replay_selector_name(int kind);

/* Parses a selector name into *kind: one of the names above, or "default" (and "" or NULL) for
 * GB_REPLAY_SELECTOR_PRIMARY. Returns 0 or GB_EINVAL with a message listing the names. */
int gb_replay_selector_parse(const char *name, int *kind, gb_error *err);

/* Writes the names of the selectors in mask, in kind order, separated by sep, into buf (always
 * NUL-terminated when cap > 0). Returns the length it needed (like snprintf). */
size_t gb_replay_selector_names(unsigned mask, const char *sep, char *buf, size_t cap);

/* Where a column table lives: block i starts at base + i * stride. For the GPU gather kernel. */
typedef struct gb_replay_table {
    uint8_t *base;
    size_t stride;      /* bytes between blocks (multiple of 64) */
    size_t block_bytes; /* bytes used in a block */
    size_t step_bytes;  /* bytes of one step (per-item column: block_bytes) */
    int per_item;
} gb_replay_table;

/* Fills tables[0..ncolumns). Pointers are valid for the replay's lifetime. */
void gb_replay_tables(const gb_replay *r, gb_replay_table *tables);

/* The counters a draw touches, kept together so that pinning and counting an item costs one
 * cache line. */
typedef struct gb_replay_item {
    uint64_t seq;           /* insertion sequence (commit order), 0 = never committed */
    uint32_t times_sampled;
    int32_t pins;           /* readers holding the item */
} gb_replay_item;

/* The status table (structure of arrays, capacity entries each, in the shared segment) plus the
 * index manager's orders, for selectors. Read under the replay's lock (selector callbacks are) or
 * by another process that accepts racy snapshots. */
typedef struct gb_replay_status {
    int64_t capacity;
    double *priority;        /* raw priority (weights are priority^alpha) */
    gb_replay_item *item;    /* seq, times sampled, pins */
    int32_t *length;         /* valid steps */
    int64_t *policy_version;
    uint8_t *state;          /* GB_ITEM_* */
    /* The committed items, densely packed (any order): live[0..size). */
    const int64_t *live;
    int64_t size;
    /* Commit order: oldest and newest committed item, next/prev links (-1 ends). */
    int64_t oldest, newest;
    const int64_t *next, *prev;
} gb_replay_status;

/* A snapshot of the pointers and counts (no copy). Call under no lock; the arrays change as the
 * replay runs. */
void gb_replay_status_view(gb_replay *r, gb_replay_status *st);

/* The shared segment's descriptor and size, for another process to map (gb_replay_view_open). */
int gb_replay_shm_fd(const gb_replay *r, size_t *bytes);

/* A read-only view of a replay's shared segment mapped in another process (or this one). */
typedef struct gb_replay_view {
    void *shm;                      /* internal (gb_shm *) */
    int64_t capacity, steps;
    int ncolumns;
    gb_replay_column columns[GB_REPLAY_MAX_COLUMNS];
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    const double *priority;
    const gb_replay_item *item;
    const int32_t *length;
    const int64_t *policy_version;
    const uint8_t *state;
} gb_replay_view;

/* Maps the segment read-only from a descriptor (inherited, received, or /proc/<pid>/fd/<n>) and
 * checks its header. Returns 0 or GB_ECORRUPT / GB_ESYS. */
int gb_replay_view_open(gb_replay_view *v, int fd, gb_error *err);
void gb_replay_view_close(gb_replay_view *v);

/* ---- Writers in another local process -------------------------------------------------------- */

/* Starts the owner's port thread, which runs allocate/commit/abort requests from writer processes
 * (gb_replay_writer_*) with this replay's own calls. Returns 0 or GB_ESYS. */
int gb_replay_serve_writers(gb_replay *r, gb_error *err);

/* Stops the port thread (pending and later writer requests fail with GB_ECLOSED). gb_replay_free
 * calls it. */
void gb_replay_stop_writers(gb_replay *r);

/* A writer in another process (or this one): maps the segment read-write from a descriptor
 * (inherited, received over a Unix socket, or /proc/<pid>/fd/<n>), writes items in place, and sends
 * allocate/commit/abort to the owner through the segment's port. The calls mean what
 * gb_replay_allocate/commit/abort mean, with at most GB_REPLAY_PORT_MAX (256) items per call and
 * the owner's timeouts; a writer also gives up with GB_ETIMEOUT when the owner has not answered
 * 5 s after the request's timeout. A writer process that dies between allocate and commit leaves
 * its blocks WRITING (lost to the store until it is restarted). */
typedef struct gb_replay_writer gb_replay_writer;
int gb_replay_writer_open(gb_replay_writer **w, int fd, double timeout_s, gb_error *err);
void gb_replay_writer_close(gb_replay_writer *w);
void *gb_replay_writer_block(const gb_replay_writer *w, int col, int64_t idx);
const gb_replay_view *gb_replay_writer_view(const gb_replay_writer *w);
int gb_replay_writer_allocate(gb_replay_writer *w, int64_t n, int64_t *idx, double timeout_s,
                              gb_error *err);
int gb_replay_writer_commit(gb_replay_writer *w, int64_t n, const int64_t *idx,
                            const double *priority, const int32_t *length,
                            const int64_t *policy_version, gb_error *err);
int gb_replay_writer_abort(gb_replay_writer *w, int64_t n, const int64_t *idx, gb_error *err);

/* ---- Selection and collection as functions of (indices, priorities, tables) ------------------ */

/* A selector: owns whatever structure it needs (sum tree, heap), kept in step by the index
 * manager's callbacks, which all run under the replay's lock. A GPU selector implements the same
 * table (options.selector_ops). */
struct gb_replay_selector_ops {
    const char *name;
    int with_replacement; /* 1: independent draws (uniform, weighted); 0: distinct items */
    /* st stays valid (and current) for the selector's lifetime: its arrays are the replay's. */
    int (*create)(void **self, const gb_replay_options *o, const gb_replay_status *st,
                  gb_error *err);
    void (*destroy)(void *self);
    void (*insert)(void *self, int64_t idx, double priority); /* item became selectable */
    void (*remove)(void *self, int64_t idx);                  /* item left */
    void (*update)(void *self, int64_t idx, double priority);
    /* Picks up to n items from the status's live set into idx (and each draw's probability into
     * prob); returns the count picked. n is <= st->size for distinct selectors. */
    int64_t (*select)(void *self, const gb_replay_status *st, int64_t n, gb_rng *rng,
                      int64_t *idx, double *prob);
    /* Draws by weight: the sum of the live items' weights (select's normaliser); NULL = every
     * item weighs 1 (size). */
    double (*total)(void *self, const gb_replay_status *st);
};

/* The built-in selector for a kind. */
const gb_replay_selector_ops *gb_replay_selector_builtin(gb_selector_kind kind);

/* CPU gather: for each of n items, copies steps [t0, t1) of its block in table into
 * dst + i * (t1 - t0) * step_bytes (a per-item table ignores the range), zero-filling steps at or
 * beyond length[idx[i]] (length: the status table's per-item array, indexed by block index;
 * NULL: all valid). The CPU reference of the GPU gather kernel. */
void gb_replay_gather(const gb_replay_table *table, const int64_t *idx, const int32_t *length,
                      int64_t n, int32_t t0, int32_t t1, void *dst);

/* ---- Checkpoint ---------------------------------------------------------------------------- */

/* Streams every committed item (status and column data) to path: written to "path.tmp", flushed
 * (fsync) and renamed, so a crash leaves any previous checkpoint intact. Header: magic, format
 * version, schema, capacity, counters, rate limiter counters, selector RNG state; then the status
 * records, the free queue, and one section per table, each with its CRC-32C. Pins the items while
 * it streams (no lock held during the writes): writers that need to evict a pinned item wait.
 * Blocks on disk I/O. Returns 0 or GB_EIO / GB_ESYS. */
int gb_replay_checkpoint(gb_replay *r, const char *path, gb_error *err);

/* Loads a checkpoint into r, which must be empty (nothing committed or being written) and have the
 * same schema, T, capacity, primary selector, remover and alpha as the file. Afterwards r holds
 * exactly the same items at the same indices, with the same priorities, counters, free queue and
 * selector state. The extra selectors need not match the file's: every selector r keeps is
 * rebuilt from the restored priorities (a server can add one and restart from its checkpoint).
 * Every section's CRC is checked; on any error (GB_ECORRUPT for a damaged or truncated file,
 * GB_EINVAL for a different schema, GB_EIO) r is left empty and the message says what differs or
 * which section failed. Blocks on disk I/O. */
int gb_replay_restore(gb_replay *r, const char *path, gb_error *err);

/* The schema a checkpoint holds (its header, checked: magic, CRC, version): T, the columns
 * (columns has room for GB_REPLAY_MAX_COLUMNS) and the capacity, so that a replay to restore it
 * into can be made without the data it came from. Returns 0, GB_ENOTFOUND, GB_ECORRUPT, GB_EIO,
 * GB_ENOMEM. */
int gb_replay_checkpoint_schema(const char *path, int64_t *steps, gb_replay_column *columns,
                                int *ncolumns, int64_t *capacity, gb_error *err);

#endif
