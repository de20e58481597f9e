/* replay/sample.c: the training side: rate-limited selection with reader pins, release,
 * priority updates, the staleness floor, importance weights. */
#include "replay/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gb_replay_selection_init(gb_replay_selection *s, int64_t capacity, gb_error *err)
{
    memset(s, 0, sizeof *s);
    if (capacity < 1)
        return gb_error_set(err, GB_EINVAL, "replay sample: capacity must be >= 1");
    s->index = malloc((size_t)capacity * sizeof *s->index);
    s->key = malloc((size_t)capacity * sizeof *s->key);
    s->prob = malloc((size_t)capacity * sizeof *s->prob);
    s->weight = malloc((size_t)capacity * sizeof *s->weight);
    if (!s->index || !s->key || !s->prob || !s->weight) {
        gb_replay_selection_free(s);
        return gb_error_set(err, GB_ENOMEM, "replay sample: arrays for %lld items",
                            (long long)capacity);
    }
    s->capacity = capacity;
    return 0;
}

void gb_replay_selection_free(gb_replay_selection *s)
{
    free(s->index);
    free(s->key);
    free(s->prob);
    free(s->weight);
    memset(s, 0, sizeof *s);
}

gb_replay_request gb_replay_request_default(int64_t batch)
{
    gb_replay_request q = {batch, GB_REPLAY_NO_MIN_VERSION, 0, 0, -1.0,
                           GB_REPLAY_SELECTOR_PRIMARY, 0};
    return q;
}

void gb_replay_importance_weights(const double *prob, int64_t n, int64_t size, double beta,
                                  float *weight)
{
    /* (size * p_k)^-beta / max_j (size * p_j)^-beta = (p_min / p_k)^beta: size cancels, and the
     * ratio lies in (0, 1], where single precision is plenty for a loss weight. */
    (void)size;
    double pmin = INFINITY;
    for (int64_t k = 0; k < n; k++)
        if (prob[k] > 0 && prob[k] < pmin)
            pmin = prob[k];
    gb_replay_importance_weights_from(prob, n, pmin, beta, weight);
}

void gb_replay_importance_weights_from(const double *prob, int64_t n, double pmin, double beta,
                                       float *weight)
{
    float b = (float)beta;
    for (int64_t k = 0; k < n; k++) {
        if (!(prob[k] > 0))
            weight[k] = 0.0f;
        else if (prob[k] == pmin || beta == 0)
            weight[k] = 1.0f;
        else if (beta == 1)
            weight[k] = (float)(pmin / prob[k]);
        else
            weight[k] = powf((float)(pmin / prob[k]), b);
    }
}

/* Raises the floor and removes everything below it; r->mu held. */
static int64_t expire_locked(gb_replay *r, int64_t min_version)
{
    if (min_version <= r->c->min_version)
        return 0;
    r->c->min_version = min_version;
    int64_t removed = 0;
    for (int64_t i; (i = gb_rheap_top(&r->by_version)) >= 0 &&
                    r->st.policy_version[i] < min_version;
         removed++)
        gb_index_remove(r, i, GB_REMOVE_EXPIRED);
    return removed;
}

int64_t gb_replay_expire(gb_replay *r, int64_t min_version)
{
    pthread_mutex_lock(&r->mu);
    int64_t n = expire_locked(r, min_version);
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Counts a draw of item i: pin, times sampled, and max_times_sampled removal (after the pin, so
 * the block stays with the reader). */
static void take(gb_replay *r, gb_replay_selection *s, int64_t k, int64_t i)
{
    gb_replay_status *st = &r->st;
    st->item[i].pins++;
    if (st->item[i].times_sampled++ == 0)
        r->c->first_samples++;
    GB_REPLAY_FAULT_POINT("sample: item counted");
    s->key[k] = st->item[i].seq;
    if (r->opt.max_times_sampled > 0 && st->state[i] == GB_ITEM_COMMITTED &&
        st->item[i].times_sampled >= (uint64_t)r->opt.max_times_sampled)
        gb_index_remove(r, i, GB_REMOVE_SAMPLED_OUT);
}

static int sample_blocked(gb_replay *r, int64_t n, double waited, gb_error *err)
{
    if (r->st.size < r->rl.min_size || r->st.size == 0)
        return gb_error_set(err, GB_ETIMEOUT,
                            "replay: sample of %lld timed out after %.3f s: %lld items, sampling "
                            "starts at min_size %lld", (long long)n, waited,
                            (long long)r->st.size, (long long)r->rl.min_size);
    return gb_error_set(err, GB_ETIMEOUT,
                        "replay: sample of %lld timed out after %.3f s: the rate limiter holds "
                        "samples back until inserts catch up (inserts %llu x samples_per_insert "
                        "%g - samples %llu - %lld < min_diff %g)", (long long)n, waited,
                        (unsigned long long)r->c->inserts, r->rl.samples_per_insert,
                        (unsigned long long)r->c->samples, (long long)n, r->rl.min_diff);
}

/* A request for a selector this replay does not keep: name what it does keep. */
static int no_selector(const gb_replay *r, int kind, gb_error *err)
{
    char have[96];
    gb_replay_selector_names(gb_replay_selectors(r), ", ", have, sizeof have);
    if (kind < 0 || kind >= GB_REPLAY_SELECTORS)
        return gb_error_set(err, GB_EINVAL, "replay: unknown selector %d (this replay has: %s; "
                            "primary: %s)", kind, have, gb_replay_selector_name(r->opt.selector));
    return gb_error_set(err, GB_EINVAL, "replay: no '%s' selector here (this replay has: %s; "
                        "primary: %s); weighted and topk need to be the primary or an extra "
                        "selector", gb_replay_selector_name(kind), have,
                        gb_replay_selector_name(r->opt.selector));
}

/* The rate limiter's and min_size's say for a request: raises the staleness floor, then waits
 * (up to the request's timeout) until its draws may go ahead, unless req->admitted. r->mu held.
 * Returns 0, GB_ETIMEOUT, GB_ECLOSED or GB_EINVAL (a batch the limiter can never admit). */
static int admit_locked(gb_replay *r, const gb_replay_request *req,
                        const gb_replay_selector_ops *sel, gb_error *err)
{
    int64_t batch = req->batch;
    int rc = r->rl.samples_per_insert > 0 && !req->admitted
                 ? gb_ratelimit_batch_ok(&r->rl, batch, err)
                 : 0;
    if (rc)
        return rc;
    if (req->min_policy_version != GB_REPLAY_NO_MIN_VERSION)
        expire_locked(r, req->min_policy_version);
    double waited;
    struct timespec deadline = gb_replay_deadline(r, req->timeout_s, &waited);
    int timed_out = 0, counted = 0;
    gb_replay_status *st = &r->st;
    for (;;) {
        if (r->closed)
            return gb_error_set(err, GB_ECLOSED, "replay: closed");
        int64_t draws = sel->with_replacement ? batch : (batch < st->size ? batch : st->size);
        if (st->size > 0 && (req->admitted || gb_ratelimit_can_sample(&r->rl, st->size,
                                                                      r->c->inserts, r->c->samples,
                                                                      draws)))
            return 0;
        if (timed_out)
            return sample_blocked(r, batch, waited, err);
        if (!counted++)
            r->sample_waits++;
        int w = gb_replay_wait(r, &r->cv_sample, &deadline);
        if (w == GB_ETIMEOUT)
            timed_out = 1;
        else if (w)
            return gb_error_set(err, GB_ECLOSED, "replay: closed while waiting to sample");
    }
}

/* The selector a request names (GB_REPLAY_SELECTOR_PRIMARY: the primary), or the error that it
 * is not kept here. */
static int named_selector(const gb_replay *r, int selector, const gb_replay_selector_ops **sel,
                          void **self, int *kind, gb_error *err)
{
    *sel = NULL; /* set on every path: an optimising compiler cannot see that errors are non-0 */
    *kind = -1;
    if (self)
        *self = NULL;
    int k = selector == GB_REPLAY_SELECTOR_PRIMARY ? (int)r->opt.selector : selector;
    if (k < 0 || k >= GB_REPLAY_SELECTORS || !r->sel[k].ops)
        return no_selector(r, selector, err);
    /* sel[] is fixed at create: read without the lock. */
    *sel = r->sel[k].ops;
    if (self)
        *self = r->sel[k].self;
    *kind = k;
    return 0;
}

int gb_replay_ready(gb_replay *r, const gb_replay_request *req, gb_error *err)
{
    const gb_replay_selector_ops *sel;
    int kind;
    int rc = named_selector(r, req->selector, &sel, NULL, &kind, err);
    if (rc)
        return rc;
    if (req->batch < 1)
        return gb_error_set(err, GB_EINVAL, "replay: batch %lld < 1", (long long)req->batch);
    pthread_mutex_lock(&r->mu);
    rc = admit_locked(r, req, sel, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gb_replay_peek(gb_replay *r, int selector, int64_t n, int64_t *idx, double *priority,
                   int64_t *count, gb_error *err)
{
    const gb_replay_selector_ops *sel;
    void *self;
    int kind;
    *count = 0;
    int rc = named_selector(r, selector, &sel, &self, &kind, err);
    if (rc)
        return rc;
    if (sel->with_replacement)
        return gb_error_set(err, GB_EINVAL, "replay: peek: '%s' draws at random; only fifo, "
                            "lifo and topk have a definite order", gb_replay_selector_name(kind));
    pthread_mutex_lock(&r->mu);
    int64_t want = n < r->st.size ? n : r->st.size;
    double *scratch_prob = priority; /* distinct selectors write 1.0 there: overwritten below */
    int64_t k = want > 0 ? sel->select(self, &r->st, want, &r->rng, idx, scratch_prob) : 0;
    for (int64_t i = 0; i < k; i++)
        priority[i] = r->st.priority[idx[i]];
    pthread_mutex_unlock(&r->mu);
    *count = k;
    return 0;
}

int gb_replay_weight_total(gb_replay *r, int selector, double *total, int64_t *size,
                           gb_error *err)
{
    const gb_replay_selector_ops *sel;
    void *self;
    int kind;
    int rc = named_selector(r, selector, &sel, &self, &kind, err);
    if (rc)
        return rc;
    if (!sel->with_replacement)
        return gb_error_set(err, GB_EINVAL, "replay: '%s' does not draw by weight",
                            gb_replay_selector_name(kind));
    pthread_mutex_lock(&r->mu);
    *size = r->st.size;
    *total = sel->total ? sel->total(self, &r->st) : (double)r->st.size;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int gb_replay_sample(gb_replay *r, const gb_replay_request *req, gb_replay_selection *s,
                     gb_error *err)
{
    int64_t batch = req->batch;
    const gb_replay_selector_ops *sel;
    void *sel_self;
    int kind;
    int rc = named_selector(r, req->selector, &sel, &sel_self, &kind, err);
    if (rc)
        return rc;
    int32_t t0 = req->t0, t1 = req->t1 ? req->t1 : (int32_t)r->steps;
    if (s->pinned)
        return gb_error_set(err, GB_EINVAL, "replay: sample still pinned: release it first");
    if (batch < 1 || batch > s->capacity)
        return gb_error_set(err, GB_EINVAL, "replay: batch %lld not in [1, %lld]",
                            (long long)batch, (long long)s->capacity);
    if (t0 < 0 || t1 > r->steps || t0 >= t1)
        return gb_error_set(err, GB_EINVAL, "replay: step range [%d, %d) not inside [0, %lld)",
                            t0, t1, (long long)r->steps);
    s->n = 0;
    pthread_mutex_lock(&r->mu);
    rc = admit_locked(r, req, sel, err);
    if (rc) {
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    gb_replay_status *st = &r->st;
    s->size = st->size;
    if (sel->with_replacement && r->opt.max_times_sampled > 0) {
        /* Reverb's semantics: an item that reaches the limit leaves before the next draw. */
        int64_t k = 0;
        for (; k < batch && st->size > 0; k++) {
            if (sel->select(sel_self, st, 1, &r->rng, &s->index[k], &s->prob[k]) != 1)
                break;
            take(r, s, k, s->index[k]);
        }
        s->n = k;
    } else {
        int64_t want = sel->with_replacement ? batch : (batch < st->size ? batch : st->size);
        s->n = sel->select(sel_self, st, want, &r->rng, s->index, s->prob);
        enum { AHEAD = 16 }; /* the items' counters are random reads: keep several in flight */
        for (int64_t k = 0; k < s->n && k < AHEAD; k++)
            __builtin_prefetch(&st->item[s->index[k]], 1);
        for (int64_t k = 0; k < s->n; k++) {
            if (k + AHEAD < s->n)
                __builtin_prefetch(&st->item[s->index[k + AHEAD]], 1);
            take(r, s, k, s->index[k]);
        }
    }
    r->c->samples += (uint64_t)s->n;
    if (sel->with_replacement)
        gb_replay_importance_weights(s->prob, s->n, s->size, r->beta, s->weight);
    else
        for (int64_t k = 0; k < s->n; k++)
            s->weight[k] = 1.0f;
    s->t0 = t0;
    s->t1 = t1;
    s->selector = kind;
    s->pinned = 1;
    pthread_cond_broadcast(&r->cv_insert); /* samples moved: the ratio may admit inserts */
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void gb_replay_release(gb_replay *r, gb_replay_selection *s)
{
    if (!s->pinned)
        return;
    pthread_mutex_lock(&r->mu);
    for (int64_t k = 0; k < s->n; k++)
        gb_index_unpin(r, s->index[k]);
    pthread_mutex_unlock(&r->mu);
    s->pinned = 0;
}

int gb_replay_update_priorities(gb_replay *r, int64_t n, const int64_t *idx, const uint64_t *key,
                                const double *priority, int64_t *skipped, gb_error *err)
{
    if (skipped)
        *skipped = 0;
    for (int64_t k = 0; k < n; k++) {
        if (!isfinite(priority[k]) || priority[k] < 0)
            return gb_error_set(err, GB_EINVAL, "replay: update: priority %g (entry %lld) must "
                                "be finite and >= 0", priority[k], (long long)k);
        if (idx[k] < 0 || idx[k] >= r->capacity)
            return gb_error_set(err, GB_EINVAL, "replay: update: index %lld (entry %lld) out "
                                "of range", (long long)idx[k], (long long)k);
    }
    int64_t stale = 0;
    gb_replay_status *st = &r->st;
    pthread_mutex_lock(&r->mu);
    for (int64_t k = 0; k < n; k++) {
        int64_t i = idx[k];
        if (st->state[i] != GB_ITEM_COMMITTED || (key && st->item[i].seq != key[k])) {
            stale++;
            continue;
        }
        st->priority[i] = priority[k];
        GB_REPLAY_FAULT_POINT("update: priority stored");
        gb_replay_sel_update(r, i, priority[k]);
        if (r->opt.remover == GB_REMOVER_LOWEST_PRIORITY)
            gb_rheap_fix(&r->low_priority, i);
        if (priority[k] > r->c->max_priority || !r->c->has_priority) {
            r->c->max_priority = priority[k];
            r->c->has_priority = 1;
        }
    }
    r->c->updates += (uint64_t)(n - stale);
    r->c->stale_updates += (uint64_t)stale;
    pthread_mutex_unlock(&r->mu);
    if (skipped)
        *skipped = stale;
    return 0;
}
