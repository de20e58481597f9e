/* replay/replay.c: creating and freeing a replay, run-time settings, statistics. */
#include "replay/internal.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

void (*gb_replay_fault_hook)(const char *where);

/* The primary selector (kept[0]), the extra weighted / top-k ones asked for (kept[1..]), and the
 * stateless built-ins, which every replay offers (sel[] only: no callbacks to run). */
static int create_selectors(gb_replay *r, const gb_replay_options *o, gb_error *err)
{
    const gb_replay_selector_ops *primary =
        o->selector_ops ? o->selector_ops : gb_replay_selector_builtin(o->selector);
    for (int kind = -1; kind < GB_REPLAY_SELECTORS; kind++) { /* -1: the primary, first */
        if (kind == (int)o->selector)
            continue;
        const gb_replay_selector_ops *ops = kind < 0 ? primary : gb_replay_selector_builtin(kind);
        int at = kind < 0 ? (int)o->selector : kind;
        if (kind >= 0 && gb_selector_stateless(ops)) {
            r->sel[at] = (gb_replay_sel){ops, NULL};
            continue;
        }
        if (kind >= 0 && !(o->extra_selectors & (1u << kind)))
            continue;
        void *self = NULL;
        int rc = ops->create(&self, &r->opt, &r->st, err);
        if (rc)
            return rc;
        r->kept[r->nkept++] = (gb_replay_sel){ops, self};
        r->sel[at] = (gb_replay_sel){ops, self};
    }
    return 0;
}

int gb_replay_create(const gb_replay_options *o, gb_replay **out, gb_error *err)
{
    *out = NULL;
    int rc = gb_replay_validate(o, err);
    if (rc)
        return rc;
    gb_replay *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "replay: out of memory");
    r->opt = *o; /* shm_name: the caller's string until mapped, then r->shm.name */
    r->persistent = o->shm_name && o->shm_persistent;
    r->capacity = o->capacity;
    r->max_size = o->max_size ? o->max_size : o->capacity;
    r->steps = o->steps;
    r->ncol = o->ncolumns;
    r->timeout_s = o->timeout_s;
    r->beta = o->beta;
    r->ckpt_items = -1;
    r->shm.fd = -1;
    gb_ratelimit_set(&r->rl, o->min_size, o->samples_per_insert, o->error_buffer, r->max_size,
                     o->max_times_sampled, NULL);

    pthread_condattr_t ca;
    int mu_ok = pthread_mutex_init(&r->mu, NULL) == 0;
    int ca_ok = pthread_condattr_init(&ca) == 0 &&
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    int cv1 = ca_ok && pthread_cond_init(&r->cv_insert, &ca) == 0;
    int cv2 = ca_ok && pthread_cond_init(&r->cv_sample, &ca) == 0;
    if (ca_ok)
        pthread_condattr_destroy(&ca);
    if (!mu_ok || !cv1 || !cv2) {
        if (mu_ok)
            pthread_mutex_destroy(&r->mu);
        if (cv1)
            pthread_cond_destroy(&r->cv_insert);
        if (cv2)
            pthread_cond_destroy(&r->cv_sample);
        free(r);
        return gb_error_set(err, GB_ESYS, "replay: pthread mutex/condition init failed");
    }
    /* From here on gb_replay_free can undo a partial create. */
    int attached;
    rc = gb_replay_map_segment(r, &attached, err);
    r->opt.shm_name = r->shm.name[0] ? r->shm.name : NULL; /* the caller owns its string */
    if (rc)
        goto fail;
    /* A recovered replay must not repeat the draws its first life began with. */
    if (attached)
        gb_rng_seed_for(&r->rng, o->seed, "replay-selector-attach",
                        r->c->samples ^ (r->c->attaches << 48));
    else
        gb_rng_seed_for(&r->rng, o->seed, "replay-selector", 0);
    rc = gb_replay_port_init(r->port, err);
    if (rc)
        goto fail;
    r->port_ok = 1;
    size_t cap = (size_t)r->capacity;
    r->freeq = malloc(cap * sizeof *r->freeq);
    r->live = malloc(cap * sizeof *r->live);
    r->live_pos = malloc(cap * sizeof *r->live_pos);
    r->next = malloc(cap * sizeof *r->next);
    r->prev = malloc(cap * sizeof *r->prev);
    if (!r->freeq || !r->live || !r->live_pos || !r->next || !r->prev) {
        rc = gb_error_set(err, GB_ENOMEM, "replay: index arrays for %zu items", cap);
        goto fail;
    }
    r->st.live = r->live;
    r->st.next = r->next;
    r->st.prev = r->prev;
    rc = gb_rheap_init(&r->by_version, r->capacity, &r->st, gb_rheap_lower_version, err);
    if (rc)
        goto fail;
    if (o->remover == GB_REMOVER_LOWEST_PRIORITY) {
        rc = gb_rheap_init(&r->low_priority, r->capacity, &r->st, gb_rheap_lower_priority, err);
        if (rc)
            goto fail;
    }
    rc = create_selectors(r, o, err);
    if (rc)
        goto fail;
    if (o->collect_threads > 1) {
        rc = gb_collect_pool_create(&r->pool, o->collect_threads, err);
        if (rc)
            goto fail;
    }
    if (attached) {
        gb_replay_recover(r);
    } else {
        gb_index_reset(r);
        gb_replay_publish_segment(r);
    }
    *out = r;
    return 0;
fail:
    gb_replay_free(r);
    return rc;
}

int gb_replay_attach(const gb_replay_options *o, gb_replay **out, gb_error *err)
{
    *out = NULL;
    if (!o->shm_name)
        return gb_error_set(err, GB_EINVAL, "replay attach: needs a segment name (shm_name)");
    gb_shm probe;
    int rc = gb_shm_open(&probe, o->shm_name, 0, 1, err);
    if (rc) {
        gb_error_prefix(err, "replay attach");
        return rc;
    }
    gb_shm_free(&probe);
    gb_replay_options po = *o;
    po.shm_persistent = 1;
    return gb_replay_create(&po, out, err);
}

void gb_replay_recovery_get(const gb_replay *r, gb_replay_recovery *rec) { *rec = r->recovery; }

int gb_replay_unlink(gb_replay *r, gb_error *err)
{
    if (!r->shm.name[0])
        return gb_error_set(err, GB_ENOTFOUND, "replay: the segment has no name to unlink");
    if (shm_unlink(r->shm.name) != 0)
        return gb_error_set(err, GB_ENOTFOUND, "replay: segment '%s' was already unlinked",
                            r->shm.name);
    r->shm.owner = 0;
    return 0;
}

int gb_replay_shm_name(const char *run_dir, int shard, char *out, size_t cap, gb_error *err)
{
    char what[32];
    if (shard < 0)
        return gb_error_set(err, GB_EINVAL, "replay: shard %d < 0", shard);
    snprintf(what, sizeof what, "replay-%d", shard);
    return gb_shm_run_name(run_dir, what, out, cap, err);
}

void gb_replay_close(gb_replay *r)
{
    pthread_mutex_lock(&r->mu);
    r->closed = 1;
    pthread_cond_broadcast(&r->cv_insert);
    pthread_cond_broadcast(&r->cv_sample);
    pthread_mutex_unlock(&r->mu);
}

void gb_replay_free(gb_replay *r)
{
    if (!r)
        return;
    gb_replay_stop_writers(r);
    if (r->port_ok)
        gb_replay_port_destroy(r->port);
    if (r->pool)
        gb_collect_pool_free(r->pool);
    for (int k = 0; k < r->nkept; k++)
        r->kept[k].ops->destroy(r->kept[k].self);
    gb_rheap_free(&r->by_version);
    gb_rheap_free(&r->low_priority);
    free(r->freeq);
    free(r->live);
    free(r->live_pos);
    free(r->next);
    free(r->prev);
    gb_shm_free(&r->shm);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv_insert);
    pthread_cond_destroy(&r->cv_sample);
    free(r);
}

int gb_replay_set_rate_limit(gb_replay *r, int64_t min_size, double samples_per_insert,
                             double error_buffer, gb_error *err)
{
    gb_ratelimit rl;
    int rc = gb_ratelimit_set(&rl, min_size, samples_per_insert, error_buffer, r->max_size,
                              r->opt.max_times_sampled, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&r->mu);
    r->rl = rl;
    pthread_cond_broadcast(&r->cv_insert);
    pthread_cond_broadcast(&r->cv_sample);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void gb_replay_set_timeout(gb_replay *r, double timeout_s)
{
    pthread_mutex_lock(&r->mu);
    r->timeout_s = timeout_s >= 0 ? timeout_s : 0;
    pthread_mutex_unlock(&r->mu);
}

void gb_replay_set_beta(gb_replay *r, double beta)
{
    pthread_mutex_lock(&r->mu);
    r->beta = beta >= 0 ? beta : 0;
    pthread_mutex_unlock(&r->mu);
}

/* One 64-bit word into a running digest (multiply-xorshift; not cryptographic). */
static uint64_t digest_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

int64_t gb_replay_digest_locked(gb_replay *r, uint64_t *digest)
{
    uint64_t h = 0x6a09e667f3bcc908ULL;
    int64_t n = 0;
    const gb_replay_status *st = &r->st;
    for (int64_t i = 0; i < st->capacity; i++) {
        if (st->state[i] != GB_ITEM_COMMITTED)
            continue;
        uint64_t prio;
        memcpy(&prio, &st->priority[i], sizeof prio);
        h = digest_mix(h, (uint64_t)i);
        h = digest_mix(h, st->item[i].seq);
        h = digest_mix(h, prio);
        h = digest_mix(h, (uint64_t)(uint32_t)st->length[i]);
        h = digest_mix(h, (uint64_t)st->policy_version[i]);
        h = digest_mix(h, st->item[i].times_sampled);
        n++;
    }
    h = digest_mix(h, r->c->inserts);
    h = digest_mix(h, r->c->samples);
    *digest = h;
    return n;
}

int64_t gb_replay_digest(gb_replay *r, uint64_t *digest)
{
    pthread_mutex_lock(&r->mu);
    int64_t n = gb_replay_digest_locked(r, digest);
    pthread_mutex_unlock(&r->mu);
    return n;
}

int64_t gb_replay_checkpoint_digest(gb_replay *r, uint64_t *digest)
{
    pthread_mutex_lock(&r->mu);
    int64_t n = r->ckpt_items;
    *digest = r->ckpt_digest;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void gb_replay_stats_get(gb_replay *r, gb_replay_stats *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&r->mu);
    s->capacity = r->capacity;
    s->max_size = r->max_size;
    s->size = r->st.size;
    s->writing = r->writing;
    s->retired_pinned = r->retired_pinned;
    s->free_blocks = r->free_count;
    s->inserts = r->c->inserts;
    s->samples = r->c->samples;
    s->evicted = r->c->evicted;
    s->sampled_out = r->c->sampled_out;
    s->first_samples = r->c->first_samples;
    s->expired = r->c->expired;
    s->aborted = r->c->aborted;
    s->updates = r->c->updates;
    s->stale_updates = r->c->stale_updates;
    s->insert_waits = r->insert_waits;
    s->sample_waits = r->sample_waits;
    s->max_priority = r->c->has_priority ? r->c->max_priority : NAN;
    s->min_version = r->c->min_version;
    s->huge_pages = r->shm.huge;
    s->shm_bytes = r->shm.size;
    pthread_mutex_unlock(&r->mu);
}

const gb_replay_options *gb_replay_options_of(const gb_replay *r) { return &r->opt; }

unsigned gb_replay_selectors(const gb_replay *r)
{
    unsigned mask = 0;
    for (int k = 0; k < GB_REPLAY_SELECTORS; k++)
        if (r->sel[k].ops)
            mask |= 1u << k;
    return mask;
}

void gb_replay_status_view(gb_replay *r, gb_replay_status *st)
{
    pthread_mutex_lock(&r->mu);
    *st = r->st;
    pthread_mutex_unlock(&r->mu);
}
