/* launch/restart_window.h: launch.restart's sliding window: at most max_restarts restarts within
 * any window_s seconds (a failure long ago uses up nothing). The launcher's watchdog keeps one
 * over all its workers (launch/watchdog.h); gearbox join keeps one per joined trainer: it sees
 * only its own. The times are a monotonic clock's, in seconds.
 * defines: gb_restart_window, gb_restart_window_allows, gb_restart_window_note,
 *          gb_restart_window_free */
#ifndef GB_LAUNCH_RESTART_WINDOW_H
#define GB_LAUNCH_RESTART_WINDOW_H

#include <stdint.h>
#include <stdlib.h>

typedef struct gb_restart_window {
    double *at; /* [n] every restart's time, oldest first */
    int64_t n, cap;
} gb_restart_window;

/* Whether one more restart at now keeps within max_restarts in the last window_s. */
static inline int gb_restart_window_allows(const gb_restart_window *w, double now,
                                           int64_t max_restarts, double window_s)
{
    int64_t recent = 0;
    for (int64_t i = w->n - 1; i >= 0 && w->at[i] > now - window_s; i--)
        recent++;
    return recent < max_restarts;
}

/* Notes a restart at now (times given in order). Returns 0, or -1 without memory (not noted). */
static inline int gb_restart_window_note(gb_restart_window *w, double now)
{
    if (w->n == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 8;
        double *at = (double *)realloc(w->at, (size_t)cap * sizeof *at);
        if (!at)
            return -1;
        w->at = at, w->cap = cap;
    }
    w->at[w->n++] = now;
    return 0;
}

static inline void gb_restart_window_free(gb_restart_window *w)
{
    free(w->at);
    w->at = NULL, w->n = w->cap = 0;
}

#endif
