/* runtime/base/team.c: a fork-join team of threads (team.h). A job is published as one ticket:
 * its generation in the high 32 bits, its count of parts in the next 16 and the next part to take
 * in the low 16. A thread takes a part by moving the ticket on while it still names the job's
 * generation and has parts left, so a helper that wakes after its job is done takes nothing
 * from the next one's (with the count apart from the ticket, a helper could read the next job's
 * count beside the last job's exhausted ticket and take a part twice). Helpers see a new
 * generation spinning for up to SPIN_NS, else asleep on `go`; the caller waits for the parts'
 * count the same way, asleep on `done`. */
#include "runtime/base/team.h"

#include "runtime/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A learner's gap between two jobs is tens to hundreds of us: a spin longer than a few us burns
 * a core the machine's other processes need (30 us: the trainer's CPU a call 1.3x, 3 us less) */
enum { SPIN_NS = 3000, MAX_PARTS = 0xffff };

struct gb_team {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t go, done_cv;
    _Atomic uint64_t ticket;
    _Atomic int done, stop;
    gb_team_fn fn; /* the job's: written before its ticket is published */
    void *arg;
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint32_t gen_of(uint64_t ticket) { return (uint32_t)(ticket >> 32); }
static int parts_of(uint64_t ticket) { return (int)((ticket >> 16) & MAX_PARTS); }
static int next_of(uint64_t ticket) { return (int)(ticket & MAX_PARTS); }

/* Takes and runs generation gen's parts until none is left (or the ticket moved on). */
static void serve(gb_team *t, uint32_t gen)
{
    uint64_t cur = atomic_load_explicit(&t->ticket, memory_order_acquire);
    for (;;) {
        const int parts = parts_of(cur);
        if (gen_of(cur) != gen || next_of(cur) >= parts)
            return;
        if (!atomic_compare_exchange_weak_explicit(&t->ticket, &cur, cur + 1,
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        t->fn(t->arg, next_of(cur), parts);
        if (atomic_fetch_add_explicit(&t->done, 1, memory_order_acq_rel) + 1 == parts) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_signal(&t->done_cv);
            pthread_mutex_unlock(&t->mu);
        }
        cur = atomic_load_explicit(&t->ticket, memory_order_acquire);
    }
}

/* Waits until ticket's generation differs from seen: spinning SPIN_NS, then asleep on go. */
static uint32_t next_gen(gb_team *t, uint32_t seen)
{
    const uint64_t until = gb_now_ns() + SPIN_NS;
    for (int i = 0;; i++) {
        const uint32_t g = gen_of(atomic_load_explicit(&t->ticket, memory_order_acquire));
        if (g != seen)
            return g;
        if ((i & 63) == 63 && gb_now_ns() > until)
            break;
        relax();
    }
    pthread_mutex_lock(&t->mu);
    uint32_t g;
    while ((g = gen_of(atomic_load_explicit(&t->ticket, memory_order_acquire))) == seen)
        pthread_cond_wait(&t->go, &t->mu);
    pthread_mutex_unlock(&t->mu);
    return g;
}

static void *helper_main(void *p)
{
    gb_team *t = p;
    uint32_t seen = 0;
    for (;;) {
        seen = next_gen(t, seen);
        if (atomic_load_explicit(&t->stop, memory_order_acquire))
            return NULL;
        serve(t, seen);
    }
}

int gb_team_open(int n, gb_team **out, gb_error *err)
{
    *out = NULL;
    if (n < 1)
        return gb_error_set(err, GB_EINVAL, "team: threads must be >= 1, got %d", n);
    gb_team *t = calloc(1, sizeof *t);
    if (!t || !(t->threads = calloc((size_t)n, sizeof *t->threads))) {
        free(t);
        return gb_error_set(err, GB_ENOMEM, "team: out of memory");
    }
    t->n = 1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done_cv, NULL);
    for (int i = 1; i < n; i++) {
        const int rc = pthread_create(&t->threads[i], NULL, helper_main, t);
        if (rc) {
            gb_team_close(t);
            return gb_error_set(err, GB_ENOMEM, "team: cannot start thread %d of %d: %s", i, n,
                                strerror(rc));
        }
        t->n++;
    }
    *out = t;
    return 0;
}

int gb_team_threads(const gb_team *t) { return t ? t->n : 1; }

/* A new generation's ticket of parts parts (part 0 next), moved under the lock: a helper between
 * its check and its wait sees it or is woken. */
static uint32_t publish(gb_team *t, int parts)
{
    pthread_mutex_lock(&t->mu);
    const uint32_t gen = gen_of(atomic_load_explicit(&t->ticket, memory_order_relaxed)) + 1;
    atomic_store_explicit(&t->ticket, (uint64_t)gen << 32 | (uint64_t)parts << 16,
                          memory_order_release);
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    return gen;
}

void gb_team_run(gb_team *t, int parts, gb_team_fn fn, void *arg)
{
    if (!t || t->n == 1 || parts <= 1 || parts > MAX_PARTS) {
        for (int p = 0; p < parts; p++)
            fn(arg, p, parts);
        return;
    }
    t->fn = fn;
    t->arg = arg;
    atomic_store_explicit(&t->done, 0, memory_order_relaxed);
    serve(t, publish(t, parts));
    const uint64_t until = gb_now_ns() + SPIN_NS;
    for (int i = 0; atomic_load_explicit(&t->done, memory_order_acquire) < parts; i++) {
        if ((i & 63) == 63 && gb_now_ns() > until) {
            pthread_mutex_lock(&t->mu);
            while (atomic_load_explicit(&t->done, memory_order_acquire) < parts)
                pthread_cond_wait(&t->done_cv, &t->mu);
            pthread_mutex_unlock(&t->mu);
            break;
        }
        relax();
    }
}

void gb_team_close(gb_team *t)
{
    if (!t)
        return;
    atomic_store_explicit(&t->stop, 1, memory_order_release);
    publish(t, 0);
    for (int i = 1; i < t->n; i++)
        pthread_join(t->threads[i], NULL);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done_cv);
    pthread_mutex_destroy(&t->mu);
    free(t->threads);
    free(t);
}
