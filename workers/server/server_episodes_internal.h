/* workers/server/server_episodes_internal.h: the data server's episode index inside (private to the
 * server): which replay slot holds which steps of which episode, and the plan of an offline
 * sample over it. The public face (gb_episodes_create, _add, ...) is in workers/server/server.h.
 * defines: gb_episodes (the struct), ep_cursor, ep_plan, gb_episodes_plan */
#ifndef GB_WORKERS_SERVER_EPISODES_INTERNAL_H
#define GB_WORKERS_SERVER_EPISODES_INTERNAL_H

#include "workers/server/server.h"
#include "workers/server/server_protocol.h"

#include "runtime/base/rng.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GB_SERVE_MAX_CURSORS 64 /* epoch cursors per table */

typedef struct ep_cursor {
    char name[32];
    int64_t epoch, pos; /* the epoch in progress and its next position */
} ep_cursor;

/* Items are added in dataset order; an episode's items are consecutive, all of T steps but its
 * last. Memory: 8 bytes per item, 16 per episode. */
struct gb_episodes {
    int64_t T;
    uint64_t seed;
    int64_t nitems, neps, max_len;
    int64_t cap[4];
    int32_t *item_slot;   /* the replay slot of each item */
    uint32_t *item_key;   /* the low 32 bits of its key (item seq) when loaded: other bits =
                             replaced (a key only grows: equal again after 2^32 inserts) */
    int64_t *ep_item0;    /* the first item of each episode */
    int64_t *ep_cum;      /* [neps + 1]: steps before each episode */
    int open;             /* the last episode takes more items */
    pthread_mutex_t mu;   /* cursors and the window cache */
    int64_t win_len;      /* the window length win_cum counts starts for (-1: none) */
    int64_t *win_cum;     /* [neps + 1]: window starts before each episode */
    int ncursors;
    ep_cursor cursors[GB_SERVE_MAX_CURSORS];
};

/* What a plan draws: n rows of S steps; size the units drawn from (window starts, transitions,
 * episodes); for epochs the epoch of the rows, its first position and end (1: the rows finish
 * it). */
typedef struct ep_plan {
    int64_t n, size, S, epoch, pos;
    int end;
} ep_plan;

/* Plans a sample of mode (gb_serve_mode, not item) of up to batch rows: row i starts at step
 * start[i] of episode[i]; len is the window's steps (window, transition, epoch). Thread-safe
 * (cursors and the window cache under e->mu). Returns 0 or -1 with the reason in text. */
int gb_episodes_plan(gb_episodes *e, int mode, int64_t batch, int64_t len, const char *cursor,
                     int reset, gb_rng *rng, int64_t *episode, int64_t *start, ep_plan *p,
                     char *text, size_t cap);

#endif
