/* replay/attach.c: recovering a replay from a persistent segment whose owner died (replay.h,
 * "Surviving the owner's crash"). The status table in the segment is the truth; the free queue,
 * the commit-ordered list, the live set, the heaps and the selector structures (process memory)
 * are rebuilt from it, and the counters in the header are reconciled with what was kept. */
#include "replay/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* check_writing (write.c) marks entries 0xFF for a moment while it looks for duplicates: an item
 * caught there was being committed, not committed. */
#define MARKED_BY_CHECK 0xFF

/* A COMMITTED entry's fields are possible ones (a crash cannot produce anything else: commit
 * stores the state last). */
static int entry_valid(const gb_replay *r, int64_t i)
{
    const gb_replay_status *st = &r->st;
    double p = st->priority[i];
    return st->item[i].seq != 0 && isfinite(p) && p >= 0 && st->length[i] >= 0 &&
           st->length[i] <= r->steps;
}

static int cmp_seq(const void *a, const void *b, void *arg)
{
    const gb_replay_item *item = arg;
    uint64_t x = item[*(const int64_t *)a].seq, y = item[*(const int64_t *)b].seq;
    return x < y ? -1 : x > y;
}

/* Back to FREE with a clean entry, to the free queue's tail. */
static void free_entry(gb_replay *r, int64_t i)
{
    gb_replay_status *st = &r->st;
    st->priority[i] = 0;
    st->item[i] = (gb_replay_item){0, 0, 0};
    st->length[i] = 0;
    st->policy_version[i] = 0;
    gb_index_push_free(r, i);
}

void gb_replay_recover(gb_replay *r)
{
    gb_replay_status *st = &r->st;
    gb_replay_counters *c = r->c;
    gb_replay_recovery *rec = &r->recovery;
    memset(rec, 0, sizeof *rec);
    rec->attached = 1;
    int64_t cap = r->capacity, n = 0;
    r->free_head = r->free_count = 0;
    r->writing = r->retired_pinned = 0;
    st->size = 0;
    st->oldest = st->newest = -1;
    /* Pass 1: sort every entry into kept (live[0..n), used as scratch until pass 3 refills it in
     * commit order) or free. Every reader died with the owner: no pins survive. */
    for (int64_t i = 0; i < cap; i++) {
        r->live_pos[i] = -1;
        r->next[i] = r->prev[i] = -1;
        st->item[i].pins = 0;
        uint8_t s = __atomic_load_n(&st->state[i], __ATOMIC_ACQUIRE);
        if (s == GB_ITEM_COMMITTED && entry_valid(r, i)) {
            r->live[n++] = i;
            continue;
        }
        if (s == GB_ITEM_COMMITTED)
            rec->dropped_invalid++;
        else if (s == GB_ITEM_WRITING || s == MARKED_BY_CHECK)
            rec->dropped_in_flight++;
        else if (s == GB_ITEM_RETIRED)
            rec->released_pins++;
        else if (s != GB_ITEM_FREE)
            rec->dropped_invalid++;
        free_entry(r, i);
    }
    /* Pass 2: commit order; two entries with one sequence can only be damage: keep the first. */
    qsort_r(r->live, (size_t)n, sizeof *r->live, cmp_seq, st->item);
    int64_t kept = 0;
    uint64_t last_seq = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = r->live[k];
        if (kept > 0 && st->item[i].seq == last_seq) {
            rec->dropped_invalid++;
            free_entry(r, i);
            continue;
        }
        last_seq = st->item[i].seq;
        r->live[kept++] = i;
    }
    /* Pass 3: link in commit order (gb_index_link appends to live[], so entry k is written over
     * itself: live[size] with size == k). */
    for (int64_t k = 0; k < kept; k++) {
        int64_t i = r->live[k];
        double p = st->priority[i];
        if (!c->has_priority || p > c->max_priority) {
            c->max_priority = p;
            c->has_priority = 1;
        }
        gb_index_link(r, i);
    }
    if (last_seq > c->next_seq)
        c->next_seq = last_seq;
    /* inserts - deletes = committed items held (the rate limiter relies on it). Both counters
     * move after the state does (commit, gb_index_remove), so a crash between leaves one of
     * them behind the status table, never ahead: raise whichever is behind. */
    if (c->inserts >= c->deletes + (uint64_t)kept)
        c->deletes = c->inserts - (uint64_t)kept;
    else
        c->inserts = c->deletes + (uint64_t)kept;
    /* What the dead owner would have removed next: items at max_times_sampled (a crash between
     * the count and the removal), below the staleness floor, or beyond max_size. */
    int64_t removed = 0;
    for (int64_t i = st->oldest, nx; i >= 0; i = nx) {
        nx = r->next[i];
        if (r->opt.max_times_sampled > 0 &&
            st->item[i].times_sampled >= (uint64_t)r->opt.max_times_sampled) {
            gb_index_remove(r, i, GB_REMOVE_SAMPLED_OUT);
            removed++;
        } else if (st->policy_version[i] < c->min_version) {
            gb_index_remove(r, i, GB_REMOVE_EXPIRED);
            removed++;
        }
    }
    while (st->size > r->max_size) {
        gb_index_remove(r, gb_index_victim(r), GB_REMOVE_EVICT);
        removed++;
    }
    rec->removed_on_attach = removed;
    rec->kept = st->size;
    c->attaches++;
    c->recovered += (uint64_t)rec->kept;
    c->dropped_in_flight += (uint64_t)rec->dropped_in_flight;
    c->dropped_invalid += (uint64_t)rec->dropped_invalid;
}
