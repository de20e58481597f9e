/* replay/internal.h: the replay's private state, shared by the files that implement replay.h.
 * Their calls run one way, from the top down (no file calls one above it):
 *   replay.c (create, free, attach)
 *     -> attach.c (recovering a persistent segment whose owner died)
 *     -> remote.c (writer port)  -> write.c (allocate, commit, abort)
 *     -> sample.c, collect.c, checkpoint.c
 *     -> index.c, selectors.c, heap.c, ratelimit.c
 *     -> schema.c (options, segment layout, views)
 * defines: struct gb_replay, gb_replay_sel, gb_rheap, gb_ratelimit, gb_collect_pool, the
 *          index-manager calls, gb_replay_sel_insert/remove/update */
#ifndef GB_REPLAY_INTERNAL_H
#define GB_REPLAY_INTERNAL_H

#include "replay/replay.h"
#include "runtime/base/shm.h"

#include <pthread.h>

/* ---- Indexed binary heap over item indices (heap.c) ---------------------------------------- */

/* Returns 1 when item a must come out before item b. */
typedef int (*gb_rheap_before)(const gb_replay_status *st, int64_t a, int64_t b);

typedef struct gb_rheap {
    int64_t *heap; /* (capacity) item indices in heap order */
    int64_t *pos;  /* (capacity) position of each item in heap, -1 when absent */
    int64_t n;
    const gb_replay_status *st;
    gb_rheap_before before;
} gb_rheap;

int gb_rheap_init(gb_rheap *h, int64_t capacity, const gb_replay_status *st,
                  gb_rheap_before before, gb_error *err);
void gb_rheap_free(gb_rheap *h);
void gb_rheap_push(gb_rheap *h, int64_t item);
void gb_rheap_remove(gb_rheap *h, int64_t item);
void gb_rheap_fix(gb_rheap *h, int64_t item); /* after item's key changed */
static inline int64_t gb_rheap_top(const gb_rheap *h) { return h->n ? h->heap[0] : -1; }

/* Orders used by removers, the staleness floor and top-k. Ties go to the oldest (lowest seq). */
int gb_rheap_lower_priority(const gb_replay_status *st, int64_t a, int64_t b);
int gb_rheap_higher_priority(const gb_replay_status *st, int64_t a, int64_t b);
int gb_rheap_lower_version(const gb_replay_status *st, int64_t a, int64_t b);

/* ---- Rate limiter (ratelimit.c): Reverb's SampleToInsertRatio semantics --------------------- */

typedef struct gb_ratelimit {
    int64_t min_size;
    double samples_per_insert; /* 0 = no ratio */
    double error_buffer;
    double min_diff, max_diff; /* spi * min_size -/+ error_buffer */
} gb_ratelimit;

int gb_ratelimit_set(gb_ratelimit *rl, int64_t min_size, double spi, double error_buffer,
                     int64_t max_size, int64_t max_times_sampled, gb_error *err);
/* inserts: committed ever (+ pending writes); deletes: removed ever; samples: draws ever. */
int gb_ratelimit_can_insert(const gb_ratelimit *rl, uint64_t inserts, uint64_t deletes,
                            uint64_t samples, int64_t n);
int gb_ratelimit_can_sample(const gb_ratelimit *rl, int64_t size, uint64_t inserts,
                            uint64_t samples, int64_t n);
/* Whether a batch of n samples can ever be served with these settings. */
int gb_ratelimit_batch_ok(const gb_ratelimit *rl, int64_t n, gb_error *err);

/* ---- Collection thread pool (collect.c) ----------------------------------------------------- */

typedef struct gb_collect_pool gb_collect_pool;
int gb_collect_pool_create(gb_collect_pool **out, int threads, gb_error *err);
void gb_collect_pool_free(gb_collect_pool *p);

/* ---- Shared segment header (schema.c) ------------------------------------------------------- */

#define GB_REPLAY_SHM_MAGIC 0x4742525053484d31ULL /* "GBRPSHM1" */
/* The segment's format: bumped whenever the header, the status arrays or the layout change, so
 * that a replay never attaches to a segment written by another gearbox. */
#define GB_REPLAY_SHM_VERSION 3u
/* Segment start: the header (4 KiB), then the writer port (remote.c), then the status arrays. */
#define GB_REPLAY_SHM_HEADER (64u << 10)
#define GB_REPLAY_PORT_OFFSET 4096u
#define GB_REPLAY_PORT_MAX 256 /* items per remote request */

/* The counters that must outlive the process that owns the replay (rate limiter, statistics,
 * insertion sequence, staleness floor). They live in the segment header, so a replay that
 * attaches after its owner was killed (gb_replay_create with shm_persistent) finds them; every
 * change happens under r->mu like before. */
typedef struct gb_replay_counters {
    uint64_t next_seq; /* the last insertion sequence handed out */
    uint64_t inserts, deletes, samples;
    uint64_t evicted, sampled_out, expired, aborted, updates, stale_updates;
    double max_priority;
    int64_t min_version;
    int32_t has_priority;
    int32_t pad;
    /* What attaches recovered, over the segment's life (gb_replay_recovery). */
    uint64_t attaches, recovered, dropped_in_flight, dropped_invalid;
    uint64_t first_samples; /* draws of an item never drawn before: items trained on, ever */
} gb_replay_counters;

typedef struct gb_replay_shm_header {
    uint64_t magic;   /* written last at create (release): a segment whose creator died while
                         laying it out has none and is recreated */
    uint32_t version; /* GB_REPLAY_SHM_VERSION */
    uint32_t header_bytes;
    uint64_t capacity, steps, ncolumns;
    uint64_t max_size; /* the committed-item bound the status table was kept under */
    uint64_t off_priority, off_item, off_version, off_length, off_state;
    uint64_t table_off[GB_REPLAY_MAX_COLUMNS];
    uint64_t table_stride[GB_REPLAY_MAX_COLUMNS];
    uint64_t total_bytes;
    gb_replay_column columns[GB_REPLAY_MAX_COLUMNS];
    gb_replay_counters counters;
} gb_replay_shm_header;

/* The writer port: another process's allocate/commit/abort requests, one at a time, served by
 * the owner's port thread (remote.c). Process-shared robust mutexes, monotonic condvars. */
typedef struct gb_replay_port {
    pthread_mutex_t client; /* held by one writer for a whole exchange */
    pthread_mutex_t mu;     /* guards the fields below */
    pthread_cond_t cv_req, cv_rep;
    uint64_t req_seq, rep_seq;
    int served; /* 1 while the owner's port thread runs */
    int op;     /* GB_PORT_* */
    int64_t n;
    double timeout_s;
    int rc;
    char msg[256];
    int64_t idx[GB_REPLAY_PORT_MAX];
    double priority[GB_REPLAY_PORT_MAX];
    int32_t length[GB_REPLAY_PORT_MAX];
    int64_t version[GB_REPLAY_PORT_MAX];
} gb_replay_port;
enum { GB_PORT_ALLOCATE = 1, GB_PORT_COMMIT = 2, GB_PORT_ABORT = 3 };
int gb_replay_port_init(gb_replay_port *p, gb_error *err);
void gb_replay_port_destroy(gb_replay_port *p);

/* Allocates the shared segment and points r->tab, r->st's arrays, r->c and r->port into it
 * (schema.c); the caller then initialises the port (gb_replay_port_init) and publishes the header
 * (gb_replay_publish_segment). With r->persistent and an existing segment of that name, maps
 * that one instead, after checking that its header describes exactly the layout r->opt asks for
 * (else GB_EINVAL naming the first difference, or GB_ECORRUPT for a segment that is not a
 * replay's), and sets *attached to 1; the caller then recovers it (attach.c). */
struct gb_replay;
int gb_replay_map_segment(struct gb_replay *r, int *attached, gb_error *err);
/* Stores the header's magic (release): from here on the segment can be attached to. */
void gb_replay_publish_segment(struct gb_replay *r);

/* Rebuilds the process-memory state (free queue, commit list, live set, heaps, selectors) from
 * the status table of an attached segment, dropping items that were being written at the crash
 * (attach.c). r->mu need not be held: nothing else uses r yet. */
void gb_replay_recover(struct gb_replay *r);

/* ---- Fault injection (crash tests) ---------------------------------------------------------- */

/* When set, called at each point where the process dying matters to a later attach (inside
 * allocate, commit, abort, priority updates, sampling and removal); the crash tests kill the
 * process from it. NULL outside tests: one predictable branch per point. Not thread-safe to
 * change while the replay is in use. */
extern void (*gb_replay_fault_hook)(const char *where);
#define GB_REPLAY_FAULT_POINT(where)                                                             \
    do {                                                                                         \
        if (gb_replay_fault_hook)                                                                \
            gb_replay_fault_hook(where);                                                         \
    } while (0)

/* ---- The replay ---------------------------------------------------------------------------- */

/* A selector instance: its ops and its state (NULL for the stateless ones). */
typedef struct gb_replay_sel {
    const gb_replay_selector_ops *ops;
    void *self;
} gb_replay_sel;

struct gb_replay {
    gb_replay_options opt;
    int64_t capacity, max_size, steps;
    int ncol;
    gb_replay_table tab[GB_REPLAY_MAX_COLUMNS];
    gb_shm shm;

    /* Status table (arrays in shm) and index orders (process memory): the selectors' view. */
    gb_replay_status st;
    int64_t *live, *live_pos, *next, *prev; /* mutable aliases of st.live/next/prev */

    /* Block allocator: ring queue of free indices. */
    int64_t *freeq;
    int64_t free_head, free_count;
    int64_t writing, retired_pinned;

    gb_rheap low_priority; /* lowest-priority remover (only when that remover is chosen) */
    gb_rheap by_version;   /* staleness floor */
    /* Selectors. sel[kind]: the ones a request may name (ops NULL = not kept here; see
     * gb_replay_selectors). kept[0..nkept): the ones with callbacks to run on every insert,
     * removal and priority update: the primary first (kept[0] = sel[opt.selector]), then the
     * extra weighted / top-k ones. The stateless built-ins beside the primary are in sel[] only. */
    gb_replay_sel sel[GB_REPLAY_SELECTORS];
    gb_replay_sel kept[GB_REPLAY_SELECTORS];
    int nkept;
    gb_rng rng; /* one stream for every selector (checkpointed) */

    gb_ratelimit rl;
    double timeout_s;
    double beta;

    /* Counters (rate limiter and stats): in the segment header, so they survive this process
     * (see gb_replay_counters). The wait counts are this process's only. */
    gb_replay_counters *c;
    uint64_t insert_waits, sample_waits;
    int persistent;          /* opt.shm_persistent with a name: the run owns the segment */
    gb_replay_recovery recovery; /* what gb_replay_recover found (zero when created fresh) */

    pthread_mutex_t mu;
    pthread_cond_t cv_insert; /* blocks freed, samples taken, settings changed */
    pthread_cond_t cv_sample; /* items committed, settings changed */
    int closed;

    gb_collect_pool *pool;

    gb_replay_port *port; /* in the segment */
    int port_ok;          /* its mutexes were initialised */
    pthread_t port_thread;
    int port_running;
    uint64_t port_seen; /* the request sequence when serving began: the port thread serves
                           every request after it, also one sent before the thread ran */

    /* What the last successful gb_replay_checkpoint wrote (its snapshot's digest and items;
     * ckpt_items -1 before one): gb_replay_checkpoint_digest. Under mu. */
    int64_t ckpt_items;
    uint64_t ckpt_digest;
};

/* gb_replay_digest with r->mu held (replay.c). */
int64_t gb_replay_digest_locked(gb_replay *r, uint64_t *digest);

/* Index manager (index.c). All of these run with r->mu held. */
enum { GB_REMOVE_EVICT, GB_REMOVE_SAMPLED_OUT, GB_REMOVE_EXPIRED };
void gb_index_reset(gb_replay *r);                  /* everything free, queue 0..capacity-1 */
void gb_index_push_free(gb_replay *r, int64_t idx); /* FREE, to the queue's tail */
void gb_index_link(gb_replay *r, int64_t idx);      /* COMMITTED item joins every structure */
void gb_index_remove(gb_replay *r, int64_t idx, int reason);
int64_t gb_index_victim(gb_replay *r);              /* the remover's next victim, -1 if none */
void gb_index_unpin(gb_replay *r, int64_t idx);
/* Absolute deadline for a relative timeout (< 0: the replay's), and a wait on cv until it. */
struct timespec gb_replay_deadline(const gb_replay *r, double timeout_s, double *used_s);
int gb_replay_wait(gb_replay *r, pthread_cond_t *cv, const struct timespec *deadline);

/* Selector builtins (selectors.c). */
extern const gb_replay_selector_ops gb_selector_uniform, gb_selector_weighted, gb_selector_fifo,
    gb_selector_lifo, gb_selector_topk;
/* 1 for the built-ins that keep no state (uniform, FIFO, LIFO): they read the status view only,
 * so one shared instance with self = NULL serves any replay and needs no callbacks. */
int gb_selector_stateless(const gb_replay_selector_ops *ops);

/* Selector callbacks for every kept selector (r->mu held). */
static inline void gb_replay_sel_insert(gb_replay *r, int64_t idx, double priority)
{
    for (int k = 0; k < r->nkept; k++)
        r->kept[k].ops->insert(r->kept[k].self, idx, priority);
}
static inline void gb_replay_sel_remove(gb_replay *r, int64_t idx)
{
    for (int k = 0; k < r->nkept; k++)
        r->kept[k].ops->remove(r->kept[k].self, idx);
}
static inline void gb_replay_sel_update(gb_replay *r, int64_t idx, double priority)
{
    for (int k = 0; k < r->nkept; k++)
        r->kept[k].ops->update(r->kept[k].self, idx, priority);
}

#endif
