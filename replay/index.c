/* replay/index.c: the index manager: block allocator (free queue), status table transitions,
 * the commit-ordered list, the dense live set, and the eviction-vs-reader rule (pins).
 * Every function here runs with r->mu held. */
#include "replay/internal.h"

#include <errno.h>
#include <string.h>

void gb_index_reset(gb_replay *r)
{
    int64_t cap = r->capacity;
    gb_replay_status *st = &r->st;
    memset(st->priority, 0, (size_t)cap * sizeof *st->priority);
    memset(st->item, 0, (size_t)cap * sizeof *st->item);
    memset(st->policy_version, 0, (size_t)cap * sizeof *st->policy_version);
    memset(st->length, 0, (size_t)cap * sizeof *st->length);
    memset(st->state, GB_ITEM_FREE, (size_t)cap);
    for (int64_t i = 0; i < cap; i++) {
        r->freeq[i] = i;
        r->live_pos[i] = -1;
        r->next[i] = r->prev[i] = -1;
    }
    r->free_head = 0;
    r->free_count = cap;
    r->writing = r->retired_pinned = 0;
    st->size = 0;
    st->oldest = st->newest = -1;
}

void gb_index_push_free(gb_replay *r, int64_t idx)
{
    r->st.state[idx] = GB_ITEM_FREE;
    int64_t tail = r->free_head + r->free_count;
    if (tail >= r->capacity)
        tail -= r->capacity;
    r->freeq[tail] = idx;
    r->free_count++;
}

void gb_index_link(gb_replay *r, int64_t idx)
{
    gb_replay_status *st = &r->st;
    /* The state last, with release ordering: every status field the caller wrote (and the
     * block's data) is in the segment before the item counts as committed, so a process killed
     * at any instruction leaves either a whole committed item or one that attach drops. */
    __atomic_store_n(&st->state[idx], (uint8_t)GB_ITEM_COMMITTED, __ATOMIC_RELEASE);
    r->live_pos[idx] = st->size;
    r->live[st->size++] = idx;
    r->prev[idx] = st->newest;
    r->next[idx] = -1;
    if (st->newest >= 0)
        r->next[st->newest] = idx;
    else
        st->oldest = idx;
    st->newest = idx;
    gb_rheap_push(&r->by_version, idx);
    if (r->opt.remover == GB_REMOVER_LOWEST_PRIORITY)
        gb_rheap_push(&r->low_priority, idx);
    gb_replay_sel_insert(r, idx, st->priority[idx]);
}

/* Takes a committed item out of selection. Its block returns to the free queue now when no reader
 * holds it, else at the last gb_index_unpin (the eviction-vs-reader rule). */
void gb_index_remove(gb_replay *r, int64_t idx, int reason)
{
    gb_replay_status *st = &r->st;
    gb_replay_sel_remove(r, idx);
    gb_rheap_remove(&r->by_version, idx);
    if (r->opt.remover == GB_REMOVER_LOWEST_PRIORITY)
        gb_rheap_remove(&r->low_priority, idx);
    int64_t at = r->live_pos[idx], last = r->live[--st->size];
    r->live[at] = last;
    r->live_pos[last] = at;
    r->live_pos[idx] = -1;
    if (r->prev[idx] >= 0)
        r->next[r->prev[idx]] = r->next[idx];
    else
        st->oldest = r->next[idx];
    if (r->next[idx] >= 0)
        r->prev[r->next[idx]] = r->prev[idx];
    else
        st->newest = r->prev[idx];
    r->next[idx] = r->prev[idx] = -1;
    GB_REPLAY_FAULT_POINT("remove: unlinked");
    if (st->item[idx].pins > 0) {
        st->state[idx] = GB_ITEM_RETIRED;
        r->retired_pinned++;
    } else {
        gb_index_push_free(r, idx);
    }
    /* Counted after the state leaves COMMITTED (as inserts after it enters): a crash between
     * leaves deletes one behind, never ahead, and attach raises it. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    r->c->deletes++;
    if (reason == GB_REMOVE_EVICT)
        r->c->evicted++;
    else if (reason == GB_REMOVE_SAMPLED_OUT)
        r->c->sampled_out++;
    else
        r->c->expired++;
    pthread_cond_broadcast(&r->cv_insert);
}

void gb_index_unpin(gb_replay *r, int64_t idx)
{
    gb_replay_status *st = &r->st;
    /* The state is read only while some removed item waits for its readers. */
    if (--st->item[idx].pins == 0 && r->retired_pinned > 0 && st->state[idx] == GB_ITEM_RETIRED) {
        r->retired_pinned--;
        gb_index_push_free(r, idx);
        pthread_cond_broadcast(&r->cv_insert);
    }
}

int64_t gb_index_victim(gb_replay *r)
{
    const gb_replay_status *st = &r->st;
    if (st->size == 0)
        return -1;
    switch (r->opt.remover) {
    case GB_REMOVER_LIFO:
        return st->newest;
    case GB_REMOVER_LOWEST_PRIORITY:
        return gb_rheap_top(&r->low_priority);
    case GB_REMOVER_FIFO:
    case GB_REMOVER_MAX_TIMES_SAMPLED: /* when full before anything was sampled out: oldest */
    default:
        return st->oldest;
    }
}

struct timespec gb_replay_deadline(const gb_replay *r, double timeout_s, double *used_s)
{
    if (timeout_s < 0)
        timeout_s = r->timeout_s;
    if (timeout_s > 1e9)
        timeout_s = 1e9;
    *used_s = timeout_s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = (double)(int64_t)timeout_s;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits on cv (CLOCK_MONOTONIC condvars) until signalled or the deadline; returns GB_ETIMEOUT when
 * the deadline has passed, GB_ECLOSED when the replay was closed, else 0 (re-check the
 * condition). */
int gb_replay_wait(gb_replay *r, pthread_cond_t *cv, const struct timespec *deadline)
{
    if (r->closed)
        return GB_ECLOSED;
    /* A deadline already passed (timeout 0: "do not wait") returns at once: a futex wait on it
     * still sleeps for the timer slack (~50-100 us measured per call), which made every
     * non-blocking insert or sample of a single-threaded caller cost a sleep. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline->tv_sec ||
        (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
        return GB_ETIMEOUT;
    int rc = pthread_cond_timedwait(cv, &r->mu, deadline);
    if (r->closed)
        return GB_ECLOSED;
    return rc == ETIMEDOUT ? GB_ETIMEOUT : 0;
}
