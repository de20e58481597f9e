/* replay/write.c: the ingest side: allocate blocks, write in place, commit (or abort). */
#include "replay/internal.h"

#include <math.h>
#include <string.h>

/* Why an insert cannot go ahead now, for timeout messages. */
static int insert_blocked(gb_replay *r, int64_t n, int rate_ok, double waited, gb_error *err)
{
    if (!rate_ok)
        return gb_error_set(err, GB_ETIMEOUT,
                            "replay: allocate of %lld timed out after %.3f s: the rate limiter "
                            "holds inserts back until samples catch up (inserts %llu x "
                            "samples_per_insert %g - samples %llu > max_diff %g)",
                            (long long)n, waited,
                            (unsigned long long)(r->c->inserts + (uint64_t)r->writing),
                            r->rl.samples_per_insert, (unsigned long long)r->c->samples,
                            r->rl.max_diff);
    if (r->opt.remover == GB_REMOVER_NONE)
        return gb_error_set(err, GB_ETIMEOUT,
                            "replay: allocate of %lld timed out after %.3f s: the store is full "
                            "(remover none: %lld committed and %lld being written of max_size "
                            "%lld; inserts wait for samples or the staleness floor to make room)",
                            (long long)n, waited, (long long)r->st.size, (long long)r->writing,
                            (long long)r->max_size);
    return gb_error_set(err, GB_ETIMEOUT,
                        "replay: allocate of %lld timed out after %.3f s: no free block "
                        "(%lld free, %lld being written, %lld removed but still pinned by "
                        "readers, %lld committed)", (long long)n, waited, (long long)r->free_count,
                        (long long)r->writing, (long long)r->retired_pinned,
                        (long long)r->st.size);
}

/* gb_replay_allocate; limited 0: the rate limiter is not asked (loading). */
static int allocate(gb_replay *r, int64_t n, int64_t *idx, double timeout_s, int limited,
                    gb_error *err)
{
    if (n < 1 || n > r->capacity)
        return gb_error_set(err, GB_EINVAL, "replay: allocate of %lld items (capacity %lld)",
                            (long long)n, (long long)r->capacity);
    pthread_mutex_lock(&r->mu);
    double waited;
    struct timespec deadline = gb_replay_deadline(r, timeout_s, &waited);
    int timed_out = 0, counted = 0, rc = 0;
    for (;;) {
        if (r->closed) {
            rc = gb_error_set(err, GB_ECLOSED, "replay: closed");
            break;
        }
        int rate_ok = !limited ||
                      gb_ratelimit_can_insert(&r->rl, r->c->inserts + (uint64_t)r->writing,
                                              r->c->deletes, r->c->samples, n);
        if (rate_ok) {
            /* Evict only what cannot come back otherwise: blocks of removed-but-pinned items
             * return when their readers release them. Remover none evicts nothing: the insert
             * waits until items leave by sampling or the staleness floor (max_size bounds the
             * committed and the written items together, so commit never evicts either). */
            int fits;
            if (r->opt.remover == GB_REMOVER_NONE) {
                fits = r->free_count >= n && r->max_size - r->st.size - r->writing >= n;
            } else {
                while (r->free_count + r->retired_pinned < n && r->st.size > 0)
                    gb_index_remove(r, gb_index_victim(r), GB_REMOVE_EVICT);
                fits = r->free_count >= n;
            }
            if (fits) {
                for (int64_t k = 0; k < n; k++) {
                    int64_t i = r->freeq[r->free_head];
                    r->free_head = r->free_head + 1 == r->capacity ? 0 : r->free_head + 1;
                    r->free_count--;
                    r->st.state[i] = GB_ITEM_WRITING;
                    idx[k] = i;
                    GB_REPLAY_FAULT_POINT("allocate: block marked");
                }
                r->writing += n;
                break;
            }
        }
        if (timed_out) {
            rc = insert_blocked(r, n, rate_ok, waited, err);
            break;
        }
        if (!counted++)
            r->insert_waits++;
        int w = gb_replay_wait(r, &r->cv_insert, &deadline);
        if (w == GB_ETIMEOUT)
            timed_out = 1;
        else if (w) {
            rc = gb_error_set(err, GB_ECLOSED, "replay: closed while waiting to allocate");
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gb_replay_allocate(gb_replay *r, int64_t n, int64_t *idx, double timeout_s, gb_error *err)
{
    return allocate(r, n, idx, timeout_s, 1, err);
}

int gb_replay_allocate_unlimited(gb_replay *r, int64_t n, int64_t *idx, gb_error *err)
{
    return allocate(r, n, idx, 0, 0, err);
}

static double default_priority(const gb_replay *r)
{
    if (!isnan(r->opt.default_priority))
        return r->opt.default_priority;
    return r->c->has_priority ? r->c->max_priority : 1.0;
}

static int check_writing(gb_replay *r, int64_t n, const int64_t *idx, const char *what,
                         gb_error *err)
{
    /* Marks each index as seen (state 0xFF) to catch duplicates, then restores WRITING. */
    int64_t k = 0;
    int rc = 0;
    for (; k < n; k++) {
        int64_t i = idx[k];
        if (i < 0 || i >= r->capacity || r->st.state[i] != GB_ITEM_WRITING) {
            rc = gb_error_set(err, GB_EINVAL, "replay: %s: item %lld (entry %lld) is not being "
                              "written (allocated and not yet committed)", what, (long long)i,
                              (long long)k);
            break;
        }
        r->st.state[i] = 0xFF;
        GB_REPLAY_FAULT_POINT("check: entry marked");
    }
    for (int64_t j = 0; j < k; j++)
        r->st.state[idx[j]] = GB_ITEM_WRITING;
    return rc;
}

int gb_replay_commit(gb_replay *r, int64_t n, const int64_t *idx, const double *priority,
                     const int32_t *length, const int64_t *policy_version, gb_error *err)
{
    if (n < 0)
        return gb_error_set(err, GB_EINVAL, "replay: commit of %lld items", (long long)n);
    for (int64_t k = 0; k < n; k++) {
        if (priority && !isnan(priority[k]) && (!isfinite(priority[k]) || priority[k] < 0))
            return gb_error_set(err, GB_EINVAL, "replay: commit: priority %g (entry %lld) must "
                                "be finite and >= 0", priority[k], (long long)k);
        if (length && (length[k] < 0 || length[k] > r->steps))
            return gb_error_set(err, GB_EINVAL, "replay: commit: length %d (entry %lld) not in "
                                "[0, %lld]", length[k], (long long)k, (long long)r->steps);
    }
    pthread_mutex_lock(&r->mu);
    int rc = check_writing(r, n, idx, "commit", err);
    if (rc) {
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    gb_replay_status *st = &r->st;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = idx[k];
        double p = priority && !isnan(priority[k]) ? priority[k] : default_priority(r);
        while (st->size >= r->max_size)
            gb_index_remove(r, gb_index_victim(r), GB_REMOVE_EVICT);
        st->priority[i] = p;
        st->item[i].seq = ++r->c->next_seq;
        st->item[i].times_sampled = 0;
        st->length[i] = length ? length[k] : (int32_t)r->steps;
        st->policy_version[i] = policy_version ? policy_version[k] : 0;
        GB_REPLAY_FAULT_POINT("commit: fields written");
        if (!r->c->has_priority || p > r->c->max_priority) {
            r->c->max_priority = p;
            r->c->has_priority = 1;
        }
        r->writing--;
        gb_index_link(r, i);
        /* Counted after the item is committed in the segment: a crash between the two leaves
         * inserts one behind, which attach raises (it cannot tell an insert one ahead from a
         * delete one behind). */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        r->c->inserts++;
        GB_REPLAY_FAULT_POINT("commit: item linked");
        if (st->policy_version[i] < r->c->min_version) /* already below the staleness floor */
            gb_index_remove(r, i, GB_REMOVE_EXPIRED);
    }
    pthread_cond_broadcast(&r->cv_sample);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int gb_replay_abort(gb_replay *r, int64_t n, const int64_t *idx, gb_error *err)
{
    pthread_mutex_lock(&r->mu);
    int rc = check_writing(r, n, idx, "abort", err);
    if (rc == 0) {
        for (int64_t k = 0; k < n; k++) {
            gb_index_push_free(r, idx[k]);
            GB_REPLAY_FAULT_POINT("abort: block freed");
        }
        r->writing -= n;
        r->c->aborted += (uint64_t)n;
        pthread_cond_broadcast(&r->cv_insert);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gb_replay_insert(gb_replay *r, const void *const *data, double priority, int32_t length,
                     int64_t policy_version, gb_error *err)
{
    int64_t i;
    int rc = gb_replay_allocate(r, 1, &i, -1, err);
    if (rc)
        return rc;
    for (int c = 0; c < r->ncol; c++) {
        void *dst = gb_replay_block(r, c, i);
        if (data && data[c])
            memcpy(dst, data[c], r->tab[c].block_bytes);
        else
            memset(dst, 0, r->tab[c].block_bytes);
    }
    rc = gb_replay_commit(r, 1, &i, &priority, &length, &policy_version, err);
    if (rc)
        gb_replay_abort(r, 1, &i, NULL);
    return rc;
}
