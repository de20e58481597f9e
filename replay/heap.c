/* replay/heap.c: indexed binary heap over item indices (removers, staleness floor, top-k). */
#include "replay/internal.h"

#include <stdlib.h>

int gb_rheap_init(gb_rheap *h, int64_t capacity, const gb_replay_status *st,
                  gb_rheap_before before, gb_error *err)
{
    h->heap = malloc((size_t)capacity * sizeof *h->heap);
    h->pos = malloc((size_t)capacity * sizeof *h->pos);
    h->n = 0;
    h->st = st;
    h->before = before;
    if (!h->heap || !h->pos) {
        gb_rheap_free(h);
        return gb_error_set(err, GB_ENOMEM, "replay: heap of %lld items", (long long)capacity);
    }
    for (int64_t i = 0; i < capacity; i++)
        h->pos[i] = -1;
    return 0;
}

void gb_rheap_free(gb_rheap *h)
{
    free(h->heap);
    free(h->pos);
    h->heap = h->pos = NULL;
    h->n = 0;
}

static void place(gb_rheap *h, int64_t at, int64_t item)
{
    h->heap[at] = item;
    h->pos[item] = at;
}

static void sift_up(gb_rheap *h, int64_t at)
{
    int64_t item = h->heap[at];
    while (at > 0) {
        int64_t parent = (at - 1) / 2;
        if (!h->before(h->st, item, h->heap[parent]))
            break;
        place(h, at, h->heap[parent]);
        at = parent;
    }
    place(h, at, item);
}

static void sift_down(gb_rheap *h, int64_t at)
{
    int64_t item = h->heap[at];
    for (;;) {
        int64_t c = 2 * at + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->before(h->st, h->heap[c + 1], h->heap[c]))
            c++;
        if (!h->before(h->st, h->heap[c], item))
            break;
        place(h, at, h->heap[c]);
        at = c;
    }
    place(h, at, item);
}

void gb_rheap_push(gb_rheap *h, int64_t item)
{
    place(h, h->n++, item);
    sift_up(h, h->n - 1);
}

void gb_rheap_remove(gb_rheap *h, int64_t item)
{
    int64_t at = h->pos[item];
    if (at < 0)
        return;
    h->pos[item] = -1;
    int64_t last = h->heap[--h->n];
    if (at == h->n)
        return;
    place(h, at, last);
    sift_up(h, at);
    sift_down(h, h->pos[last]);
}

void gb_rheap_fix(gb_rheap *h, int64_t item)
{
    int64_t at = h->pos[item];
    if (at < 0)
        return;
    sift_up(h, at);
    sift_down(h, h->pos[item]);
}

int gb_rheap_lower_priority(const gb_replay_status *st, int64_t a, int64_t b)
{
    double pa = st->priority[a], pb = st->priority[b];
    return pa < pb || (pa == pb && st->item[a].seq < st->item[b].seq);
}

int gb_rheap_higher_priority(const gb_replay_status *st, int64_t a, int64_t b)
{
    double pa = st->priority[a], pb = st->priority[b];
    return pa > pb || (pa == pb && st->item[a].seq < st->item[b].seq);
}

int gb_rheap_lower_version(const gb_replay_status *st, int64_t a, int64_t b)
{
    int64_t va = st->policy_version[a], vb = st->policy_version[b];
    return va < vb || (va == vb && st->item[a].seq < st->item[b].seq);
}
