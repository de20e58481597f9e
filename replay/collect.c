/* replay/collect.c: collection: copy selected items (optionally a step range) from the column
 * tables into one contiguous batch per column, on a small thread pool when the batch is large.
 * No lock is held: the sample's pins keep its blocks from being reused. */
#include "replay/internal.h"

#include <stdlib.h>
#include <string.h>

/* Below this many bytes per collect, one thread copies (waking workers costs more). */
#define GB_COLLECT_PARALLEL_BYTES (1u << 20)

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define GB_HAVE_STREAM 1
#endif

/* Rows at least this long are copied with streaming (non-temporal) stores: a batch of them does
 * not fit in cache anyway (and goes on to a GPU or a pinned staging buffer), and ordinary stores
 * would first read every destination line (read-for-ownership): a third more memory traffic. */
#define GB_STREAM_MIN_ROW (16u << 10)

/* memcpy with non-temporal stores; the caller issues the store fence. */
static void copy_stream(uint8_t *dst, const uint8_t *src, size_t n)
{
#ifdef GB_HAVE_STREAM
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    size_t body = n & ~(size_t)63;
    for (size_t i = 0; i < body; i += 64) {
        __builtin_prefetch(src + i + 1024);
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    memcpy(dst + body, src + body, n - body);
#else
    memcpy(dst, src, n);
#endif
}

void gb_replay_gather(const gb_replay_table *table, const int64_t *idx, const int32_t *length,
                      int64_t n, int32_t t0, int32_t t1, void *dst)
{
    uint8_t *out = dst;
    size_t sb = table->per_item ? table->block_bytes : table->step_bytes;
    size_t first = table->per_item ? 0 : (size_t)t0 * sb;
    size_t row = table->per_item ? sb : (size_t)(t1 - t0) * sb;
    int stream = row >= GB_STREAM_MIN_ROW;
    /* Small rows: the items are random blocks, so each copy starts with cache misses; prefetch
     * the rows a few items ahead so that those misses overlap. */
    enum { AHEAD = 8, PREFETCH_MAX = 2048 };
    size_t pf = row < PREFETCH_MAX ? row : PREFETCH_MAX;
    for (int64_t k = 0; k < n && k < AHEAD && !stream; k++)
        for (size_t b = 0; b < pf; b += 64)
            __builtin_prefetch(table->base + (size_t)idx[k] * table->stride + first + b);
    if (table->per_item) {
        for (int64_t k = 0; k < n; k++) {
            if (k + AHEAD < n)
                for (size_t b = 0; b < pf; b += 64)
                    __builtin_prefetch(table->base + (size_t)idx[k + AHEAD] * table->stride + b);
            memcpy(out + (size_t)k * sb, table->base + (size_t)idx[k] * table->stride, sb);
        }
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        if (!stream && k + AHEAD < n)
            for (size_t b = 0; b < pf; b += 64)
                __builtin_prefetch(table->base + (size_t)idx[k + AHEAD] * table->stride + first +
                                   b);
        const uint8_t *src = table->base + (size_t)idx[k] * table->stride + first;
        int32_t valid = length ? length[idx[k]] - t0 : t1 - t0;
        if (valid > t1 - t0)
            valid = t1 - t0;
        if (valid < 0)
            valid = 0;
        if (stream)
            copy_stream(out, src, (size_t)valid * sb);
        else
            memcpy(out, src, (size_t)valid * sb);
        if ((size_t)valid * sb < row)
            memset(out + (size_t)valid * sb, 0, row - (size_t)valid * sb);
        out += row;
    }
#ifdef GB_HAVE_STREAM
    if (stream)
        _mm_sfence(); /* streaming stores are weakly ordered: publish them before returning */
#endif
}

/* ---- Pool: workers copy contiguous slices of the items ------------------------------------- */

typedef struct collect_job {
    const gb_replay_table *tables; /* (ndst) one per destination */
    uint8_t *const *dst;
    size_t *dst_row; /* bytes per item in each destination */
    int ndst;
    const int64_t *idx;
    const int32_t *length;
    int64_t n;
    int32_t t0, t1;
} collect_job;

struct gb_collect_pool {
    pthread_mutex_t busy; /* one collect at a time uses the pool; others copy alone */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int nthreads; /* workers, not counting the caller */
    pthread_t *threads;
    uint64_t generation;
    int pending;
    int stop;
    collect_job job;
};

static void run_slice(const collect_job *j, int part, int parts)
{
    int64_t lo = j->n * part / parts, hi = j->n * (part + 1) / parts;
    if (lo >= hi)
        return;
    for (int d = 0; d < j->ndst; d++)
        gb_replay_gather(&j->tables[d], j->idx + lo, j->length, hi - lo,
                         j->t0, j->t1, j->dst[d] + (size_t)lo * j->dst_row[d]);
}

typedef struct worker_arg {
    gb_collect_pool *p;
    int part;
} worker_arg;

static void *worker(void *arg)
{
    gb_collect_pool *p = ((worker_arg *)arg)->p;
    int part = ((worker_arg *)arg)->part;
    free(arg);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        collect_job job = p->job;
        pthread_mutex_unlock(&p->mu);
        run_slice(&job, part, p->nthreads + 1);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gb_collect_pool_create(gb_collect_pool **out, int threads, gb_error *err)
{
    gb_collect_pool *p = calloc(1, sizeof *p);
    if (!p)
        return gb_error_set(err, GB_ENOMEM, "replay: collect pool");
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return gb_error_set(err, GB_ENOMEM, "replay: collect pool");
    }
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 0; t < threads - 1; t++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a || (a->p = p, a->part = t + 1, pthread_create(&p->threads[t], NULL, worker, a))) {
            free(a);
            gb_collect_pool_free(p);
            return gb_error_set(err, GB_ESYS, "replay: could not start collect thread %d", t);
        }
        p->nthreads++;
    }
    *out = p;
    return 0;
}

void gb_collect_pool_free(gb_collect_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->nthreads; t++)
        pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->busy);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

/* Runs the job on the caller and the pool's workers; returns when every slice is copied. */
static void pool_run(gb_collect_pool *p, const collect_job *job)
{
    pthread_mutex_lock(&p->mu);
    p->job = *job;
    p->pending = p->nthreads;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_slice(job, 0, p->nthreads + 1);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int gb_replay_collect(gb_replay *r, const gb_replay_selection *s, const gb_replay_dst *dst,
                      int ndst, int32_t *lengths, gb_error *err)
{
    if (!s->pinned)
        return gb_error_set(err, GB_EINVAL, "replay: collect needs a pinned (not yet released) "
                            "sample");
    if (ndst < 0 || ndst > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "replay: collect of %d columns", ndst);
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    uint8_t *bufs[GB_REPLAY_MAX_COLUMNS];
    size_t rows[GB_REPLAY_MAX_COLUMNS];
    size_t total = 0;
    int32_t span = s->t1 - s->t0;
    for (int d = 0; d < ndst; d++) {
        int c = dst[d].column;
        if (c < 0 || c >= r->ncol)
            return gb_error_set(err, GB_EINVAL, "replay: collect: no column %d", c);
        tables[d] = r->tab[c];
        rows[d] = r->tab[c].per_item ? r->tab[c].block_bytes : (size_t)span * r->tab[c].step_bytes;
        size_t need = rows[d] * (size_t)s->n;
        if (!dst[d].data || dst[d].bytes < need)
            return gb_error_set(err, GB_EINVAL, "replay: collect: column '%s' needs %zu bytes "
                                "for %lld items, the buffer has %zu", r->opt.columns[c].name, need,
                                (long long)s->n, dst[d].bytes);
        bufs[d] = dst[d].data;
        total += need;
    }
    /* Lengths were set at commit, before the sample's pin (taken under the lock): reading them
     * here without the lock is ordered by that lock. */
    if (lengths)
        for (int64_t k = 0; k < s->n; k++) {
            int32_t v = r->st.length[s->index[k]] - s->t0;
            lengths[k] = v < 0 ? 0 : v > span ? span : v;
        }
    collect_job job = {tables, bufs, rows, ndst, s->index, r->st.length, s->n, s->t0, s->t1};
    if (r->pool && total >= GB_COLLECT_PARALLEL_BYTES &&
        pthread_mutex_trylock(&r->pool->busy) == 0) {
        pool_run(r->pool, &job);
        pthread_mutex_unlock(&r->pool->busy);
    } else {
        run_slice(&job, 0, 1);
    }
    return 0;
}
