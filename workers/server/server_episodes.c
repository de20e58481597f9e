/* workers/server/server_episodes.c: the data server's episode index (which items hold which steps
 * of which episode) and the planning of the offline sampling modes over it: windows, transitions,
 * whole episodes and epochs with a cursor per client (protocol in docs/protocol.md, "Sampling
 * modes"). The data itself is gathered from the replay by server_offline.c.
 * defines: gb_episodes_create, gb_episodes_add, gb_episodes_free, gb_episodes_count,
 *          gb_episodes_transitions, gb_episodes_length, gb_episodes_plan */
#include "workers/server/server_episodes_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gb_episodes_create(gb_episodes **out, int64_t steps, uint64_t seed, gb_error *err)
{
    *out = NULL;
    if (steps < 1)
        return gb_error_set(err, GB_EINVAL, "episodes: steps per item must be >= 1");
    gb_episodes *e = calloc(1, sizeof *e);
    if (!e)
        return gb_error_set(err, GB_ENOMEM, "episodes: out of memory");
    e->T = steps;
    e->seed = seed;
    e->open = 0;
    e->win_len = -1;
    pthread_mutex_init(&e->mu, NULL);
    *out = e;
    return 0;
}

void gb_episodes_free(gb_episodes *e)
{
    if (!e)
        return;
    free(e->item_slot);
    free(e->item_key);
    free(e->ep_item0);
    free(e->ep_cum);
    free(e->win_cum);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* Grows *p (elem bytes each) to hold need entries; doubles. Returns 0 or -1. */
static int grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int gb_episodes_add(gb_episodes *e, int64_t slot, uint64_t key, int32_t length, int ends,
                    gb_error *err)
{
    if (length < 1 || length > e->T)
        return gb_error_set(err, GB_EINVAL, "episodes: item length %d outside 1..%lld", length,
                            (long long)e->T);
    if (grow((void **)&e->item_slot, &e->cap[0], e->nitems + 1, sizeof *e->item_slot) ||
        grow((void **)&e->item_key, &e->cap[1], e->nitems + 1, sizeof *e->item_key))
        return gb_error_set(err, GB_ENOMEM, "episodes: out of memory");
    if (!e->open) { /* this item starts an episode */
        if (grow((void **)&e->ep_item0, &e->cap[2], e->neps + 1, sizeof *e->ep_item0) ||
            grow((void **)&e->ep_cum, &e->cap[3], e->neps + 2, sizeof *e->ep_cum))
            return gb_error_set(err, GB_ENOMEM, "episodes: out of memory");
        if (e->neps == 0)
            e->ep_cum[0] = 0;
        e->ep_item0[e->neps] = e->nitems;
        e->ep_cum[e->neps + 1] = e->ep_cum[e->neps];
        e->neps++;
        e->open = 1;
    }
    if (slot < 0 || slot > INT32_MAX)
        return gb_error_set(err, GB_EINVAL, "episodes: slot %lld beyond 2^31 (a table of over "
                            "2^31 items has no episode index)", (long long)slot);
    e->item_slot[e->nitems] = (int32_t)slot;
    e->item_key[e->nitems] = (uint32_t)key;
    e->nitems++;
    e->ep_cum[e->neps] += length;
    int64_t len = e->ep_cum[e->neps] - e->ep_cum[e->neps - 1];
    if (length < e->T || ends)
        e->open = 0; /* a short item is always an episode's last: its steps end there */
    if (len > e->max_len)
        e->max_len = len;
    return 0;
}

int64_t gb_episodes_count(const gb_episodes *e) { return e ? e->neps : 0; }
int64_t gb_episodes_transitions(const gb_episodes *e)
{
    return e && e->neps ? e->ep_cum[e->neps] : 0;
}
int64_t gb_episodes_length(const gb_episodes *e, int64_t ep)
{
    return e->ep_cum[ep + 1] - e->ep_cum[ep];
}

/* The episode holding global step g (0 <= g < transitions): the last e with ep_cum[e] <= g. */
static int64_t episode_of(const int64_t *cum, int64_t neps, int64_t g)
{
    int64_t lo = 0, hi = neps - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (cum[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- epochs: a keyed pseudo-random permutation of [0, n) (a Feistel network on the next
 * power of 4 with cycle walking), so a cursor is (seed, position) and needs no table ---------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t permute(uint64_t x, uint64_t n, uint64_t seed)
{
    int half = 1;
    while (half < 32 && (1ull << (2 * half)) < n)
        half++;
    uint64_t mask = (1ull << half) - 1;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t f = mix64(r ^ mix64(seed + (uint64_t)round)) & mask;
            uint64_t nl = r;
            r = l ^ f;
            l = nl;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The seed of epoch `epoch` of cursor `name`: a new shuffle each epoch, cursor and server seed. */
static uint64_t epoch_seed(const gb_episodes *e, const char *name, int64_t epoch)
{
    return mix64(e->seed ^ mix64(name_hash(name) ^ mix64((uint64_t)epoch)));
}

/* Claims the next k <= batch positions of cursor name. Returns 0 or -1 (text set). */
static int cursor_take(gb_episodes *e, const char *name, int reset, int64_t batch, int64_t *pos,
                       int64_t *k, int64_t *epoch, int *end, uint64_t *seed, char *text,
                       size_t cap)
{
    int64_t N = gb_episodes_transitions(e);
    pthread_mutex_lock(&e->mu);
    ep_cursor *c = NULL;
    for (int i = 0; i < e->ncursors && !c; i++)
        if (strcmp(e->cursors[i].name, name) == 0)
            c = &e->cursors[i];
    if (!c) {
        if (e->ncursors == GB_SERVE_MAX_CURSORS) {
            pthread_mutex_unlock(&e->mu);
            snprintf(text, cap, "sample: epoch: %d cursors in use on this table; reuse a name",
                     GB_SERVE_MAX_CURSORS);
            return -1;
        }
        c = &e->cursors[e->ncursors++];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", name);
    }
    if (reset) {
        c->epoch = 0;
        c->pos = 0;
    }
    if (c->pos >= N) { /* the last one ended: a new epoch, a new shuffle */
        c->epoch++;
        c->pos = 0;
    }
    *pos = c->pos;
    *k = N - c->pos < batch ? N - c->pos : batch;
    c->pos += *k;
    *epoch = c->epoch;
    *end = c->pos == N;
    *seed = epoch_seed(e, c->name, c->epoch);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* The cumulative count of window starts of length L per episode (cached for the last L). */
static int window_cum(gb_episodes *e, int64_t L, int64_t **cum)
{
    if (e->win_len != L) {
        int64_t *c = e->win_cum ? e->win_cum : malloc((size_t)(e->neps + 1) * sizeof *c);
        if (!c)
            return -1;
        e->win_cum = c;
        c[0] = 0;
        for (int64_t k = 0; k < e->neps; k++) {
            int64_t len = gb_episodes_length(e, k);
            c[k + 1] = c[k] + (len >= L ? len - L + 1 : 0);
        }
        e->win_len = L;
    }
    *cum = e->win_cum;
    return 0;
}

/* Windows of len steps, every start alike (the starts counted per episode under e->mu).
 * Returns 0 or -1 (text set: out of memory, or no episode that long). */
static int plan_window(gb_episodes *e, int64_t batch, int64_t len, gb_rng *rng,
                       int64_t *episode, int64_t *start, ep_plan *p, char *text, size_t cap)
{
    int64_t *cum;
    pthread_mutex_lock(&e->mu);
    if (window_cum(e, len, &cum)) {
        pthread_mutex_unlock(&e->mu);
        snprintf(text, cap, "sample: out of memory");
        return -1;
    }
    int64_t W = cum[e->neps];
    for (int64_t i = 0; i < batch && W > 0; i++) {
        int64_t w = (int64_t)gb_rng_below(rng, (uint64_t)W);
        int64_t k = episode_of(cum, e->neps, w); /* never one without starts */
        episode[i] = k;
        start[i] = w - cum[k];
    }
    pthread_mutex_unlock(&e->mu);
    if (W == 0) {
        snprintf(text, cap, "sample: window: no episode has %lld steps (the longest has %lld); "
                 "ask for a shorter window or use mode 'transition'", (long long)len,
                 (long long)e->max_len);
        return -1;
    }
    p->n = batch;
    p->size = W;
    p->S = len;
    return 0;
}

int gb_episodes_plan(gb_episodes *e, int mode, int64_t batch, int64_t len, const char *cursor,
                     int reset, gb_rng *rng, int64_t *episode, int64_t *start, ep_plan *p,
                     char *text, size_t cap)
{
    memset(p, 0, sizeof *p);
    int64_t N = gb_episodes_transitions(e);
    if (!e || e->neps == 0) {
        snprintf(text, cap, "sample: mode '%s': the table has no episodes",
                 gb_serve_mode_name(mode));
        return -1;
    }
    p->epoch = -1;
    switch (mode) {
    case GB_SERVE_MODE_WINDOW:
        return plan_window(e, batch, len, rng, episode, start, p, text, cap);
    case GB_SERVE_MODE_TRANSITION:
        for (int64_t i = 0; i < batch; i++) {
            int64_t g = (int64_t)gb_rng_below(rng, (uint64_t)N);
            episode[i] = episode_of(e->ep_cum, e->neps, g);
            start[i] = g - e->ep_cum[episode[i]];
        }
        p->n = batch;
        p->size = N;
        p->S = len;
        return 0;
    case GB_SERVE_MODE_EPISODE: {
        int64_t longest = 0;
        for (int64_t i = 0; i < batch; i++) {
            episode[i] = (int64_t)gb_rng_below(rng, (uint64_t)e->neps);
            start[i] = 0;
            int64_t l = gb_episodes_length(e, episode[i]);
            longest = l > longest ? l : longest;
        }
        p->n = batch;
        p->size = e->neps;
        p->S = longest;
        return 0;
    }
    case GB_SERVE_MODE_EPOCH: {
        int64_t pos, k;
        uint64_t seed;
        if (cursor_take(e, cursor, reset, batch, &pos, &k, &p->epoch, &p->end, &seed, text,
                        cap))
            return -1;
        for (int64_t i = 0; i < k; i++) {
            int64_t g = (int64_t)permute((uint64_t)(pos + i), (uint64_t)N, seed);
            episode[i] = episode_of(e->ep_cum, e->neps, g);
            start[i] = g - e->ep_cum[episode[i]];
        }
        p->n = k;
        p->size = N;
        p->S = len;
        p->pos = pos;
        return 0;
    }
    default:
        snprintf(text, cap, "sample: unknown mode %d", mode);
        return -1;
    }
}
