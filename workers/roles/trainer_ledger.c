/* workers/roles/trainer_ledger.c: a trainer's sample-stream ledger in run-owned shared memory (see
 * trainer_ledger.h). */
#include "workers/roles/trainer_ledger.h"

#include "runtime/base/shm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LEDGER_MAGIC 0x736b6f6f42626700ull /* "\0gbBooks" */
#define LEDGER_FORMAT 2 /* 2: totals.steps */

/* A row: the ledger the launcher sees, and the epoch of the ledger (one per process that opened
 * them) that last took a chunk from that sender. */
typedef struct ledger_row {
    gb_ledger_row t;
    int64_t taken_epoch;
} ledger_row;

typedef struct ledger_state {
    gb_ledger_totals totals;
    int64_t nrows;
} ledger_state;

/* One change: row (or -1: the totals only) becomes value, the state becomes state. */
typedef struct ledger_intent {
    int64_t row;
    ledger_row value;
    ledger_state state;
} ledger_intent;

typedef struct ledger_seg {
    uint64_t magic; /* stored last when created: 0 means its creator died before finishing */
    uint64_t format;
    int64_t row_cap;
    int64_t epoch;          /* +1 at every open: rows taken in an older epoch had a crash since */
    int64_t last_published; /* -1: none */
    int64_t intent_valid;   /* 1: intent is complete and maybe not applied */
    ledger_intent intent;
    ledger_state state;
    ledger_row rows[GB_LEDGER_ROWS_MAX];
} ledger_seg;

struct gb_trainer_ledger {
    pthread_mutex_t lock;
    gb_shm shm;     /* shared ledger; unused (base NULL) for process-memory ones */
    ledger_seg *seg; /* into shm, or a heap copy */
    int continued;
};

void (*gb_trainer_ledger_fault_hook)(const char *where);

static inline void fault_point(const char *where)
{
    if (gb_trainer_ledger_fault_hook)
        gb_trainer_ledger_fault_hook(where);
}

/* Keeps the compiler from moving stores across it. That is all a crash needs: a SIGKILL stops
 * the process between two instructions, and every store made before it reaches the shared page
 * (the processor does not drop executed stores); the lock orders the threads of one process. */
static inline void barrier(void) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

static void apply_intent(ledger_seg *s)
{
    if (s->intent.row >= 0 && s->intent.row < s->row_cap)
        s->rows[s->intent.row] = s->intent.value;
    s->state = s->intent.state;
}

/* Makes one change crash-safe (see trainer_ledger.h); the lock held. value NULL: no row. */
static void change(ledger_seg *s, int64_t row, const ledger_row *value, const ledger_state *state)
{
    s->intent.row = value ? row : -1;
    if (value)
        s->intent.value = *value;
    s->intent.state = *state;
    barrier();
    fault_point("intent written");
    __atomic_store_n(&s->intent_valid, 1, __ATOMIC_RELEASE);
    barrier();
    fault_point("intent complete");
    apply_intent(s);
    barrier();
    fault_point("applied");
    __atomic_store_n(&s->intent_valid, 0, __ATOMIC_RELEASE);
    barrier();
}

static void init_seg(ledger_seg *s)
{
    s->format = LEDGER_FORMAT;
    s->row_cap = GB_LEDGER_ROWS_MAX;
    s->last_published = -1;
}

/* Maps the segment name: attached (*found = 1), or none usable (*found = 0: none, or one whose
 * creator died before finishing it, which is removed). */
static int open_existing(gb_trainer_ledger *b, const char *name, int *found, gb_error *err)
{
    *found = 0;
    int rc = gb_shm_open(&b->shm, name, 0, 0, err);
    if (rc == GB_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    ledger_seg *s = b->shm.base;
    if (b->shm.size < sizeof *s || __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == 0) {
        gb_shm_free(&b->shm);
        shm_unlink(name);
        return 0;
    }
    if (s->magic != LEDGER_MAGIC || s->format != LEDGER_FORMAT ||
        s->row_cap != GB_LEDGER_ROWS_MAX) {
        gb_shm_free(&b->shm);
        return gb_error_set(err, GB_ECORRUPT, "trainer ledger: shared memory '%s' holds no "
                            "ledger of format %d", name, LEDGER_FORMAT);
    }
    *found = 1;
    return 0;
}

static int open_shared(gb_trainer_ledger *b, const char *run_dir, int index, int fresh,
                       gb_error *err)
{
    char what[32], name[GB_SHM_NAME_MAX];
    snprintf(what, sizeof what, "ledger-%d", index);
    int found = 0, rc = gb_shm_run_name(run_dir, what, name, sizeof name, err);
    if (rc == 0 && fresh)
        shm_unlink(name); /* none is the usual case */
    else if (rc == 0)
        rc = open_existing(b, name, &found, err);
    if (rc)
        return rc;
    if (found) {
        ledger_seg *s = b->seg = b->shm.base;
        if (__atomic_load_n(&s->intent_valid, __ATOMIC_ACQUIRE)) { /* killed mid-change */
            apply_intent(s);
            barrier();
            __atomic_store_n(&s->intent_valid, 0, __ATOMIC_RELEASE);
        }
        s->epoch++;
        b->continued = 1;
        return 0;
    }
    if ((rc = gb_shm_create(&b->shm, sizeof(ledger_seg), name, 0, err)))
        return rc;
    b->shm.owner = 0; /* the run removes the name (or gb_trainer_ledger_close with unlink) */
    ledger_seg *s = b->seg = b->shm.base;
    init_seg(s);
    __atomic_store_n(&s->magic, LEDGER_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

int gb_trainer_ledger_open(gb_trainer_ledger **out, const char *run_dir, int index, int fresh,
                          gb_error *err)
{
    *out = NULL;
    gb_trainer_ledger *b = calloc(1, sizeof *b);
    if (!b)
        return gb_error_set(err, GB_ENOMEM, "trainer ledger: out of memory");
    b->shm.fd = -1;
    int rc = 0;
    if (run_dir) {
        rc = open_shared(b, run_dir, index, fresh, err);
    } else if ((b->seg = calloc(1, sizeof *b->seg))) {
        init_seg(b->seg);
        b->seg->magic = LEDGER_MAGIC;
    } else {
        rc = gb_error_set(err, GB_ENOMEM, "trainer ledger: out of memory");
    }
    if (rc) {
        gb_error_prefix(err, "trainer ledger");
        free(b);
        return rc;
    }
    pthread_mutex_init(&b->lock, NULL);
    *out = b;
    return 0;
}

int gb_trainer_ledger_continued(const gb_trainer_ledger *b) { return b->continued; }

int gb_trainer_ledger_shared(const gb_trainer_ledger *b) { return b->shm.base != NULL; }

int gb_trainer_ledger_take(gb_trainer_ledger *b, int64_t sender, uint64_t seq)
{
    int64_t inc = (int64_t)(seq >> GB_SAMPLE_SEQ_BITS);
    int64_t number = (int64_t)(seq & ((1ULL << GB_SAMPLE_SEQ_BITS) - 1));
    pthread_mutex_lock(&b->lock);
    ledger_seg *s = b->seg;
    ledger_state st = s->state;
    int64_t r = st.nrows - 1;
    while (r >= 0 && (s->rows[r].t.sender != sender || s->rows[r].t.incarnation != inc))
        r--;
    ledger_row v;
    int changed = r < 0;
    if (r < 0) {
        if (st.nrows >= s->row_cap) {
            pthread_mutex_unlock(&b->lock);
            return -1;
        }
        r = st.nrows++;
        /* epoch 0: in the ledger's first epoch, a sender seen first needs no look back */
        v = (ledger_row){.t = {.sender = sender, .incarnation = inc}, .taken_epoch = 0};
    } else {
        v = s->rows[r];
    }
    if (v.taken_epoch != s->epoch) {
        /* the first chunk from this sender since a crash: what came before it and was not
         * received went down with a predecessor (trainer_ledger.h) */
        int64_t lost = number - 1 - v.t.received;
        if (lost > v.t.lost_in_crash) {
            st.totals.lost_in_crash += lost - v.t.lost_in_crash;
            v.t.lost_in_crash = lost;
        }
        v.taken_epoch = s->epoch;
        changed = 1;
    }
    if (number > v.t.max_number) {
        v.t.max_number = number;
        changed = 1;
    }
    if (changed)
        change(s, r, &v, &st);
    pthread_mutex_unlock(&b->lock);
    return (int)r;
}

void gb_trainer_ledger_settle(gb_trainer_ledger *b, int row, gb_ledger_fate fate)
{
    gb_trainer_ledger_settle_steps(b, row, fate, 0);
}

void gb_trainer_ledger_settle_steps(gb_trainer_ledger *b, int row, gb_ledger_fate fate,
                                    int64_t steps)
{
    pthread_mutex_lock(&b->lock);
    ledger_seg *s = b->seg;
    ledger_state st = s->state;
    st.totals.received++;
    st.totals.steps += steps;
    st.totals.stored += fate == GB_LEDGER_STORED;
    st.totals.discarded += fate == GB_LEDGER_DISCARDED;
    st.totals.nonfinite += fate == GB_LEDGER_NONFINITE;
    if (row >= 0 && row < st.nrows) {
        ledger_row v = s->rows[row];
        v.t.received++;
        change(s, row, &v, &st);
    } else {
        change(s, -1, NULL, &st);
    }
    pthread_mutex_unlock(&b->lock);
}

void gb_trainer_ledger_published(gb_trainer_ledger *b, int64_t version)
{
    pthread_mutex_lock(&b->lock);
    __atomic_store_n(&b->seg->last_published, version, __ATOMIC_RELEASE); /* one 8-byte store */
    pthread_mutex_unlock(&b->lock);
}

int64_t gb_trainer_ledger_last_published(const gb_trainer_ledger *b)
{
    return __atomic_load_n(&b->seg->last_published, __ATOMIC_ACQUIRE);
}

gb_ledger_totals gb_trainer_ledger_totals(gb_trainer_ledger *b)
{
    pthread_mutex_lock(&b->lock);
    gb_ledger_totals t = b->seg->state.totals;
    pthread_mutex_unlock(&b->lock);
    return t;
}

int gb_trainer_ledger_rows(gb_trainer_ledger *b, gb_ledger_row *out, int cap)
{
    pthread_mutex_lock(&b->lock);
    int n = (int)b->seg->state.nrows;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = b->seg->rows[i].t;
    pthread_mutex_unlock(&b->lock);
    return n;
}

void gb_trainer_ledger_close(gb_trainer_ledger *b, int unlink)
{
    if (!b)
        return;
    if (b->shm.base) {
        if (unlink && b->shm.name[0])
            shm_unlink(b->shm.name);
        gb_shm_free(&b->shm);
    } else {
        free(b->seg);
    }
    pthread_mutex_destroy(&b->lock);
    free(b);
}
