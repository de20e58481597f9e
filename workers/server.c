/* workers/server.c: the offline-RL data server: broker loop, request threads, request handlers
 * (protocol in workers/server.h). */
#include "workers/server.h"

#include "runtime/log.h"
#include "runtime/wire.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define POOL_KEEP 8 /* idle reply buffers kept per server */
#define ID_BYTES 4
#define FRONT_HWM 1024 /* frames queued per client, each way */  /* request thread routing ids: "w" + 3 digits */

typedef struct rbuf rbuf;
struct rbuf {
    rbuf *next;
    struct gb_server *s;
    size_t cap;
    atomic_int refs;
    unsigned char *data; /* 64-byte aligned, cap bytes */
};

struct gb_server {
    void *zctx;
    gb_replay *r;
    gb_server_opts o;
    char checkpoint[1024];
    char endpoint[256];
    char back_ep[64];
    void *front, *back;
    pthread_t *threads;
    int nthreads, started;
    atomic_int stop_threads;
    pthread_mutex_t ckpt_mu;
    pthread_mutex_t pool_mu;
    rbuf *pool;
    int pool_n;
    atomic_ullong requests[GB_SERVE_OP_END], errors, rejected, items_sent, bytes_sent;
    atomic_int buffers_out; /* reply buffers handed to ZeroMQ and not yet back */
    int close_waits, leak;
    struct worker *workers;
};

typedef struct worker worker;
struct worker {
    gb_server *s;
    int id;
    void *sock;
    gb_replay_selection sel;
};

/* ---- reply buffers: reused, released by ZeroMQ after the last frame is sent ------------------- */

static rbuf *pool_get(gb_server *s, size_t need)
{
    pthread_mutex_lock(&s->pool_mu);
    rbuf **pp = &s->pool, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= need) {
            b = *pp;
            *pp = b->next;
            s->pool_n--;
            break;
        }
    pthread_mutex_unlock(&s->pool_mu);
    if (b)
        return b;
    b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->s = s;
    b->cap = need < 4096 ? 4096 : need;
    if (posix_memalign((void **)&b->data, 64, b->cap) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

static void pool_put(gb_server *s, rbuf *b)
{
    pthread_mutex_lock(&s->pool_mu);
    if (s->pool_n < POOL_KEEP) {
        b->next = s->pool;
        s->pool = b;
        s->pool_n++;
        b = NULL;
    }
    pthread_mutex_unlock(&s->pool_mu);
    if (b) {
        free(b->data);
        free(b);
    }
}

static void rbuf_free_fn(void *data, void *hint)
{
    (void)data;
    rbuf *b = hint;
    if (atomic_fetch_sub(&b->refs, 1) == 1) {
        gb_server *s = b->s;
        pool_put(s, b);
        atomic_fetch_sub(&s->buffers_out, 1); /* last: close may free s after this */
    }
}

/* ---- replies -------------------------------------------------------------------------------- */

static int send_error(worker *w, const gb_wire_msg *m, int code, const char *text)
{
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, w->id);
    h.seq = m->hdr.seq;
    h.status = code;
    h.nmeta = 1;
    h.meta[0] = m->hdr.nmeta > 0 ? m->hdr.meta[0] : 0;
    snprintf(h.text, sizeof h.text, "%s", text);
    atomic_fetch_add(&w->s->errors, 1);
    gb_error e = {0};
    return gb_wire_send(w->sock, m->route, m->route_len, &h, NULL, 0, &e);
}

static void reply_init(gb_wire_header *h, const worker *w, const gb_wire_msg *m, int op)
{
    gb_wire_header_init(h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, w->id);
    h->seq = m->hdr.seq;
    h->nmeta = 1;
    h->meta[0] = op;
}

static int column_index(const gb_replay_options *o, const char *name)
{
    for (int c = 0; c < o->ncolumns; c++)
        if (strcmp(o->columns[c].name, name) == 0)
            return c;
    return -1;
}

static int op_info(worker *w, const gb_wire_msg *m, gb_error *err)
{
    const gb_replay_options *o = gb_replay_options_of(w->s->r);
    gb_replay_stats st;
    gb_replay_stats_get(w->s->r, &st);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_INFO);
    int64_t meta[] = {GB_SERVE_INFO, st.size, st.capacity, o->steps, (int64_t)st.inserts,
                      (int64_t)st.samples, w->s->o.max_batch_rows, w->s->o.max_batch_bytes};
    h.nmeta = 8;
    memcpy(h.meta, meta, sizeof meta);
    uint64_t mask = 0;
    h.ntensors = o->ncolumns;
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        gb_tensor_desc *d = &h.tensors[c];
        snprintf(d->name, sizeof d->name, "%s", col->name);
        d->dtype = col->dtype;
        d->rank = 0;
        d->shape[d->rank++] = 0;
        if (!col->per_item)
            d->shape[d->rank++] = o->steps;
        else
            mask |= 1ull << c;
        for (int k = 0; k < col->ndim; k++)
            d->shape[d->rank++] = col->shape[k];
    }
    char selectors[96];
    gb_replay_selector_names(gb_replay_selectors(w->s->r), ",", selectors, sizeof selectors);
    snprintf(h.text, sizeof h.text, "selector=%s remover=%s per_item=%llu selectors=%s",
             gb_replay_selector_name(o->selector),
             gb_config_enum_name("trainer.replay.remover", o->remover),
             (unsigned long long)mask, selectors);
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    for (int c = 0; c < h.ntensors; c++)
        pl[c] = (gb_wire_payload){.data = ""};
    return gb_wire_send(w->sock, m->route, m->route_len, &h, pl, 0, err);
}

/* Parses the "columns" tensor into column indices. Returns the count or -1 (text set). */
static int parse_columns(const gb_replay_options *o, const gb_wire_msg *m, int *cols,
                         char *text, size_t cap)
{
    int t = gb_wire_msg_find(m, "columns");
    if (t < 0) {
        for (int c = 0; c < o->ncolumns; c++)
            cols[c] = c;
        return o->ncolumns;
    }
    gb_tensor_view v = gb_wire_msg_tensor(m, t);
    if (v.desc->dtype != GB_DTYPE_UINT8 || v.desc->rank != 1) {
        snprintf(text, cap, "sample: 'columns' must be a uint8 vector of NUL-separated names");
        return -1;
    }
    int n = 0;
    const char *p = v.data, *end = p + v.bytes;
    while (p < end) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        size_t len = z ? (size_t)(z - p) : (size_t)(end - p);
        if (len) {
            char name[GB_REPLAY_NAME_MAX];
            if (len >= sizeof name) {
                snprintf(text, cap, "sample: column name of %zu bytes is too long", len);
                return -1;
            }
            memcpy(name, p, len);
            name[len] = 0;
            int c = column_index(o, name);
            if (c < 0) {
                snprintf(text, cap, "sample: no column '%s' (INFO lists the columns)", name);
                return -1;
            }
            for (int k = 0; k < n; k++)
                if (cols[k] == c) {
                    snprintf(text, cap, "sample: column '%s' asked twice", name);
                    return -1;
                }
            if (n >= GB_WIRE_MAX_TENSORS - 5) {
                snprintf(text, cap, "sample: at most %d columns per request",
                         GB_WIRE_MAX_TENSORS - 5);
                return -1;
            }
            cols[n++] = c;
        }
        p += len + 1;
    }
    if (n == 0)
        snprintf(text, cap, "sample: 'columns' names no column");
    return n ? n : -1;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Copies the selection's items into the reply (what gb_replay_collect does, with ordinary
 * stores: collect streams rows >= 16 KB past the cache, right for a batch a GPU or the
 * learner reads later, wrong here, where the kernel's socket copy reads it at once). Steps at or
 * past an item's length are zero; lengths[i] = valid steps inside [t0, t1). The selection is
 * pinned, so the blocks cannot be reused while this copies. */
static void gather(gb_replay *r, const gb_replay_selection *sel, const gb_replay_table *tables,
                   const gb_replay_dst *dst, int ndst, int32_t t0, int32_t t1, int32_t *lengths)
{
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    for (int64_t i = 0; i < sel->n; i++) {
        int32_t v = st.length[sel->index[i]] - t0;
        lengths[i] = v < 0 ? 0 : (v > t1 - t0 ? t1 - t0 : v);
    }
    for (int k = 0; k < ndst; k++) {
        const gb_replay_table *t = &tables[dst[k].column];
        unsigned char *out = dst[k].data;
        for (int64_t i = 0; i < sel->n; i++) {
            const unsigned char *src = t->base + (size_t)sel->index[i] * t->stride;
            if (t->per_item) {
                memcpy(out + (size_t)i * t->block_bytes, src, t->block_bytes);
                continue;
            }
            size_t row = (size_t)(t1 - t0) * t->step_bytes;
            size_t valid = (size_t)lengths[i] * t->step_bytes;
            memcpy(out + (size_t)i * row, src + (size_t)t0 * t->step_bytes, valid);
            memset(out + (size_t)i * row + valid, 0, row - valid);
        }
    }
}

static int op_sample(worker *w, const gb_wire_msg *m, gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(s->r);
    char text[GB_WIRE_TEXT_MAX];
    const gb_wire_header *q = &m->hdr;
    if (q->nmeta < 2)
        return send_error(w, m, GB_EPROTO, "sample: meta must hold [op, batch, ...]");
    int64_t batch = q->meta[1];
    int64_t t0 = q->nmeta > 2 ? q->meta[2] : 0, t1 = q->nmeta > 3 ? q->meta[3] : 0;
    int64_t timeout_ms = q->nmeta > 4 ? q->meta[4] : -1;
    int64_t selector = q->nmeta > 5 ? q->meta[5] : -1;
    if (t1 == 0)
        t1 = o->steps;
    if (batch < 1 || batch > s->o.max_batch_rows) {
        snprintf(text, sizeof text, "sample: batch %lld outside 1..%lld (server.max_batch_rows)",
                 (long long)batch, (long long)s->o.max_batch_rows);
        return send_error(w, m, GB_EINVAL, text);
    }
    if (t0 < 0 || t1 <= t0 || t1 > o->steps) {
        snprintf(text, sizeof text, "sample: step range [%lld, %lld) is not inside [0, %lld)",
                 (long long)t0, (long long)t1, (long long)o->steps);
        return send_error(w, m, GB_EINVAL, text);
    }
    unsigned offered = gb_replay_selectors(s->r);
    if (selector != GB_REPLAY_SELECTOR_PRIMARY &&
        (selector < 0 || selector >= GB_REPLAY_SELECTORS || !(offered & (1u << selector)))) {
        char have[96];
        gb_replay_selector_names(offered, ", ", have, sizeof have);
        if (selector < 0 || selector >= GB_REPLAY_SELECTORS)
            snprintf(text, sizeof text, "sample: unknown selector %lld; this server offers %s "
                     "(default %s)", (long long)selector, have,
                     gb_replay_selector_name(o->selector));
        else
            snprintf(text, sizeof text, "sample: this server has no '%s' selector; it offers "
                     "%s (default %s; server.replay.extra_selectors adds weighted or topk)",
                     gb_replay_selector_name((int)selector), have,
                     gb_replay_selector_name(o->selector));
        return send_error(w, m, GB_EINVAL, text);
    }
    int cols[GB_REPLAY_MAX_COLUMNS];
    int ncols = parse_columns(o, m, cols, text, sizeof text);
    if (ncols < 0)
        return send_error(w, m, GB_EINVAL, text);
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(s->r, tables);
    /* Reply layout for the full batch: metadata arrays, then each column, 64-byte aligned. */
    size_t meta_bytes = align64((size_t)batch * 8) * 3 + align64((size_t)batch * 4) * 2;
    uint64_t data_bytes = 0;
    size_t col_row[GB_REPLAY_MAX_COLUMNS];
    for (int k = 0; k < ncols; k++) {
        const gb_replay_table *t = &tables[cols[k]];
        col_row[k] = t->per_item ? t->block_bytes : (size_t)(t1 - t0) * t->step_bytes;
        data_bytes += (uint64_t)batch * col_row[k];
    }
    if (data_bytes > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, sizeof text, "sample: a reply of %llu data bytes exceeds "
                 "server.max_batch_bytes = %lld; ask for fewer items, columns or steps",
                 (unsigned long long)data_bytes, (long long)s->o.max_batch_bytes);
        return send_error(w, m, GB_EINVAL, text);
    }
    gb_replay_request req = gb_replay_request_default(batch);
    req.t0 = (int32_t)t0;
    req.t1 = (int32_t)t1;
    double max_wait = s->o.max_wait_s;
    req.timeout_s = timeout_ms < 0 ? max_wait : fmin(max_wait, (double)timeout_ms / 1000.0);
    req.selector = (int)selector;
    gb_error e = {0};
    int rc = gb_replay_sample(s->r, &req, &w->sel, &e);
    if (rc)
        return send_error(w, m, rc, e.msg);
    int64_t n = w->sel.n;
    size_t total = meta_bytes;
    for (int k = 0; k < ncols; k++)
        total += align64((size_t)batch * col_row[k]);
    rbuf *b = pool_get(s, total);
    if (!b) {
        gb_replay_release(s->r, &w->sel);
        return send_error(w, m, GB_ENOMEM, "sample: out of memory for the reply");
    }
    unsigned char *p = b->data;
    int64_t *index = (int64_t *)p;
    uint64_t *key = (uint64_t *)(p + align64((size_t)batch * 8));
    double *prob = (double *)(p + 2 * align64((size_t)batch * 8));
    float *weight = (float *)(p + 3 * align64((size_t)batch * 8));
    int32_t *length = (int32_t *)(p + 3 * align64((size_t)batch * 8) + align64((size_t)batch * 4));
    gb_replay_dst dst[GB_REPLAY_MAX_COLUMNS];
    size_t off = meta_bytes;
    for (int k = 0; k < ncols; k++) {
        dst[k] = (gb_replay_dst){.column = cols[k], .data = p + off,
                                 .bytes = (size_t)batch * col_row[k]};
        off += align64((size_t)batch * col_row[k]);
    }
    gather(s->r, &w->sel, tables, dst, ncols, (int32_t)t0, (int32_t)t1, length);
    memcpy(index, w->sel.index, (size_t)n * 8);
    memcpy(key, w->sel.key, (size_t)n * 8);
    memcpy(prob, w->sel.prob, (size_t)n * 8);
    memcpy(weight, w->sel.weight, (size_t)n * 4);
    int64_t size = w->sel.size, drawn_by = w->sel.selector;
    gb_replay_release(s->r, &w->sel);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_SAMPLE);
    h.nmeta = 4;
    h.meta[1] = n;
    h.meta[2] = size;
    h.meta[3] = drawn_by;
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    static const struct { const char *name; gb_dtype dt; } fixed[] = {
        {"index", GB_DTYPE_INT64}, {"key", GB_DTYPE_UINT64}, {"prob", GB_DTYPE_FLOAT64},
        {"weight", GB_DTYPE_FLOAT32}, {"length", GB_DTYPE_INT32}};
    const void *fixed_data[] = {index, key, prob, weight, length};
    for (int k = 0; k < 5; k++) {
        gb_wire_set_tensor(&h.tensors[k], fixed[k].name, fixed[k].dt, 1, &n, NULL);
        pl[k] = (gb_wire_payload){.data = fixed_data[k], .free_fn = rbuf_free_fn, .hint = b};
    }
    for (int k = 0; k < ncols; k++) {
        const gb_replay_column *col = &o->columns[cols[k]];
        gb_tensor_desc *d = &h.tensors[5 + k];
        snprintf(d->name, sizeof d->name, "%s", col->name);
        d->dtype = col->dtype;
        d->rank = 0;
        d->shape[d->rank++] = n;
        if (!col->per_item)
            d->shape[d->rank++] = t1 - t0;
        for (int j = 0; j < col->ndim; j++)
            d->shape[d->rank++] = col->shape[j];
        pl[5 + k] = (gb_wire_payload){.data = dst[k].data, .free_fn = rbuf_free_fn, .hint = b};
    }
    h.ntensors = 5 + ncols;
    atomic_store(&b->refs, h.ntensors);
    atomic_fetch_add(&s->buffers_out, 1);
    atomic_fetch_add(&s->items_sent, (unsigned long long)n);
    uint64_t sent = 0;
    for (int k = 0; k < ncols; k++)
        sent += (uint64_t)n * col_row[k];
    atomic_fetch_add(&s->bytes_sent, sent);
    return gb_wire_send(w->sock, m->route, m->route_len, &h, pl, 0, err);
}

static int op_insert(worker *w, const gb_wire_msg *m, gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(s->r);
    char text[GB_WIRE_TEXT_MAX];
    int src[GB_REPLAY_MAX_COLUMNS];
    int64_t n = -1;
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(s->r, tables);
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        int t = gb_wire_msg_find(m, col->name);
        if (t < 0) {
            snprintf(text, sizeof text, "insert: column '%s' missing (every column is needed)",
                     col->name);
            return send_error(w, m, GB_EINVAL, text);
        }
        const gb_tensor_desc *d = &m->hdr.tensors[t];
        int ok = d->dtype == col->dtype && d->rank == 1 + !col->per_item + col->ndim;
        for (int k = 0; ok && k < col->ndim; k++)
            ok = d->shape[1 + !col->per_item + k] == col->shape[k];
        if (ok && !col->per_item)
            ok = d->shape[1] == o->steps;
        if (ok && n >= 0)
            ok = d->shape[0] == n;
        if (!ok) {
            snprintf(text, sizeof text, "insert: column '%s': dtype or shape does not match the "
                     "schema (%s, [n%s, ...] with every column's n equal)", col->name,
                     gb_dtype_name(col->dtype), col->per_item ? "" : ", T");
            return send_error(w, m, GB_EINVAL, text);
        }
        n = d->shape[0];
        src[c] = t;
    }
    if (n < 1 || n > s->o.max_batch_rows) {
        snprintf(text, sizeof text, "insert: %lld items outside 1..%lld (server.max_batch_rows)",
                 (long long)n, (long long)s->o.max_batch_rows);
        return send_error(w, m, GB_EINVAL, text);
    }
    const double *prio = NULL;
    const int32_t *len = NULL;
    int tp = gb_wire_msg_find(m, "priority"), tl = gb_wire_msg_find(m, "length");
    if (tp >= 0) {
        const gb_tensor_desc *d = &m->hdr.tensors[tp];
        if (d->dtype != GB_DTYPE_FLOAT64 || d->rank != 1 || d->shape[0] != n)
            return send_error(w, m, GB_EINVAL, "insert: 'priority' must be float64[n]");
        prio = gb_wire_msg_tensor(m, tp).data;
    }
    if (tl >= 0) {
        const gb_tensor_desc *d = &m->hdr.tensors[tl];
        if (d->dtype != GB_DTYPE_INT32 || d->rank != 1 || d->shape[0] != n)
            return send_error(w, m, GB_EINVAL, "insert: 'length' must be int32[n]");
        len = gb_wire_msg_tensor(m, tl).data;
    }
    int64_t *idx = malloc((size_t)n * (sizeof(int64_t) * 2 + sizeof(int32_t)));
    if (!idx)
        return send_error(w, m, GB_ENOMEM, "insert: out of memory");
    int64_t *versions = idx + n;
    int32_t *lengths = (int32_t *)(versions + n);
    for (int64_t i = 0; i < n; i++) {
        versions[i] = m->hdr.policy_version < 0 ? 0 : m->hdr.policy_version;
        lengths[i] = len ? len[i] : (int32_t)o->steps;
    }
    gb_error e = {0};
    int rc = gb_replay_allocate(s->r, n, idx, s->o.max_wait_s, &e);
    if (rc == 0) {
        for (int c = 0; c < o->ncolumns; c++) {
            gb_tensor_view v = gb_wire_msg_tensor(m, src[c]);
            size_t row = tables[c].block_bytes;
            for (int64_t i = 0; i < n; i++)
                memcpy(gb_replay_block(s->r, c, idx[i]), (const char *)v.data + (size_t)i * row,
                       row);
        }
        rc = gb_replay_commit(s->r, n, idx, prio, lengths, versions, &e);
        if (rc)
            gb_replay_abort(s->r, n, idx, NULL);
    }
    free(idx);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_replay_stats st;
    gb_replay_stats_get(s->r, &st);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_INSERT);
    h.nmeta = 3;
    h.meta[1] = n;
    h.meta[2] = st.size;
    return gb_wire_send(w->sock, m->route, m->route_len, &h, NULL, 0, err);
}

static int op_update(worker *w, const gb_wire_msg *m, gb_error *err)
{
    gb_server *s = w->s;
    int ti = gb_wire_msg_find(m, "index"), tp = gb_wire_msg_find(m, "priority"),
        tk = gb_wire_msg_find(m, "key");
    if (ti < 0 || tp < 0)
        return send_error(w, m, GB_EINVAL, "update: tensors 'index' and 'priority' needed");
    const gb_tensor_desc *di = &m->hdr.tensors[ti], *dp = &m->hdr.tensors[tp];
    int64_t n = di->rank == 1 ? di->shape[0] : -1;
    if (di->dtype != GB_DTYPE_INT64 || di->rank != 1 || dp->dtype != GB_DTYPE_FLOAT64 ||
        dp->rank != 1 || dp->shape[0] != n)
        return send_error(w, m, GB_EINVAL, "update: 'index' int64[n] and 'priority' "
                          "float64[n] needed");
    if (tk >= 0 && (m->hdr.tensors[tk].dtype != GB_DTYPE_UINT64 ||
                    m->hdr.tensors[tk].rank != 1 || m->hdr.tensors[tk].shape[0] != n))
        return send_error(w, m, GB_EINVAL, "update: 'key' must be uint64[n]");
    if (n < 1 || n > s->o.max_batch_rows) {
        char text[GB_WIRE_TEXT_MAX];
        snprintf(text, sizeof text, "update: %lld items outside 1..%lld (server.max_batch_rows)",
                 (long long)n, (long long)s->o.max_batch_rows);
        return send_error(w, m, GB_EINVAL, text);
    }
    int64_t skipped = 0;
    gb_error e = {0};
    int rc = gb_replay_update_priorities(s->r, n, gb_wire_msg_tensor(m, ti).data,
                                         tk >= 0 ? gb_wire_msg_tensor(m, tk).data : NULL,
                                         gb_wire_msg_tensor(m, tp).data, &skipped, &e);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_UPDATE);
    h.nmeta = 3;
    h.meta[1] = n;
    h.meta[2] = skipped;
    return gb_wire_send(w->sock, m->route, m->route_len, &h, NULL, 0, err);
}

int gb_server_checkpoint(gb_server *s, gb_error *err)
{
    if (!s->checkpoint[0])
        return gb_error_set(err, GB_EUNSUPPORTED, "checkpoint: the server has no checkpoint "
                            "path (server.checkpoint)");
    pthread_mutex_lock(&s->ckpt_mu);
    int rc = gb_replay_checkpoint(s->r, s->checkpoint, err);
    pthread_mutex_unlock(&s->ckpt_mu);
    if (rc == 0)
        GB_INFO("checkpoint written to %s", s->checkpoint);
    return rc;
}

static int op_checkpoint(worker *w, const gb_wire_msg *m, gb_error *err)
{
    gb_error e = {0};
    int rc = gb_server_checkpoint(w->s, &e);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_CHECKPOINT);
    snprintf(h.text, sizeof h.text, "%.*s", (int)sizeof h.text - 1, w->s->checkpoint);
    return gb_wire_send(w->sock, m->route, m->route_len, &h, NULL, 0, err);
}

/* Handles one received request; always sends exactly one message back to the broker (the
 * reply, or an empty "done" frame when there is nobody to answer). */
static void handle(worker *w, gb_wire_msg *m, int recv_rc, const gb_error *recv_err)
{
    gb_server *s = w->s;
    gb_error err = {0};
    int rc = 0;
    if (recv_rc) {
        atomic_fetch_add(&s->rejected, 1);
        if (m->route_len)
            rc = send_error(w, m, GB_EPROTO, recv_err->msg);
        else
            rc = -1;
    } else if (m->hdr.type != GB_MSG_SERVE_REQUEST || m->hdr.nmeta < 1 ||
               m->hdr.meta[0] < GB_SERVE_INFO || m->hdr.meta[0] >= GB_SERVE_OP_END) {
        atomic_fetch_add(&s->rejected, 1);
        rc = send_error(w, m, GB_EPROTO, "expected a serve_request with meta[0] = op (1..5)");
    } else {
        int op = (int)m->hdr.meta[0];
        unsigned long long errors0 = atomic_load(&s->errors);
        switch (op) {
        case GB_SERVE_INFO: rc = op_info(w, m, &err); break;
        case GB_SERVE_SAMPLE: rc = op_sample(w, m, &err); break;
        case GB_SERVE_INSERT: rc = op_insert(w, m, &err); break;
        case GB_SERVE_UPDATE: rc = op_update(w, m, &err); break;
        default: rc = op_checkpoint(w, m, &err); break;
        }
        if (rc == 0 && atomic_load(&s->errors) == errors0)
            atomic_fetch_add(&s->requests[op], 1);
    }
    if (rc) { /* nothing reached the broker: tell it this thread is free */
        if (rc != -1)
            GB_WARN("server: reply failed: %s", err.msg);
        zmq_send(w->sock, "", 0, 0);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    gb_server *s = w->s;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    zmq_send(w->sock, "", 0, 0); /* ready */
    while (!atomic_load(&s->stop_threads)) {
        gb_error err = {0};
        int rc = gb_wire_recv(w->sock, &m, 1, 0, &err);
        if (rc == GB_EAGAIN || rc == GB_ETIMEOUT)
            continue;
        if (rc == GB_ECLOSED || rc == GB_EZMQ)
            break;
        handle(w, &m, rc, &err);
        gb_wire_msg_release(&m);
    }
    gb_wire_msg_release(&m);
    return NULL;
}

/* ---- broker --------------------------------------------------------------------------------- */

/* Moves the remaining parts of the message on `from` to `to` (the first part in msg). */
static int forward(void *from, void *to, zmq_msg_t *msg, int more)
{
    for (;;) {
        if (zmq_msg_send(msg, to, more ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(msg);
            /* drain what is left so the next message starts clean */
            while (more) {
                zmq_msg_init(msg);
                if (zmq_msg_recv(msg, from, 0) < 0)
                    return -1;
                more = zmq_msg_more(msg);
                zmq_msg_close(msg);
            }
            return -1;
        }
        if (!more)
            return 0;
        zmq_msg_init(msg);
        if (zmq_msg_recv(msg, from, 0) < 0)
            return -1;
        more = zmq_msg_more(msg);
    }
}

/* The request thread index in a routing id "wNNN" (ID_BYTES bytes), or -1. */
static int worker_of(const char *id)
{
    if (id[0] != 'w')
        return -1;
    int v = 0;
    for (int i = 1; i < ID_BYTES; i++) {
        if (id[i] < '0' || id[i] > '9')
            return -1;
        v = v * 10 + (id[i] - '0');
    }
    return v;
}

int gb_server_run(gb_server *s, const atomic_int *stop, gb_error *err)
{
    int *idle = malloc((size_t)s->nthreads * sizeof *idle), nidle = 0;
    if (!idle)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    int rc = 0;
    while (!atomic_load(stop)) {
        zmq_pollitem_t items[2] = {{s->back, 0, ZMQ_POLLIN, 0}, {s->front, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(items, nidle > 0 ? 2 : 1, 100);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = gb_wire_zmq_error(err, "server: zmq_poll");
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char id[16];
            int l = zmq_recv(s->back, id, sizeof id, 0);
            if (l < 0) {
                rc = gb_wire_zmq_error(err, "server: receive from a request thread");
                break;
            }
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, s->back, 0) < 0) {
                zmq_msg_close(&msg);
                rc = gb_wire_zmq_error(err, "server: receive from a request thread");
                break;
            }
            int more = zmq_msg_more(&msg);
            if (!more && zmq_msg_size(&msg) == 0)
                zmq_msg_close(&msg); /* ready / done */
            else
                forward(s->back, s->front, &msg, more);
            /* "wNNN": exactly ID_BYTES bytes, not NUL-terminated (atoi on the raw buffer read
             * whatever followed on the stack: "w001" then a stale '3' dispatched to a "w013"
             * that does not exist, and the request was dropped) */
            int wid = l == ID_BYTES ? worker_of(id) : -1;
            if (wid >= 0 && wid < s->nthreads && nidle < s->nthreads)
                idle[nidle++] = wid;
        }
        if (nidle > 0 && (items[1].revents & ZMQ_POLLIN)) {
            int wid = idle[--nidle];
            char id[16];
            snprintf(id, sizeof id, "w%03d", wid % 1000);
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, s->front, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&msg);
                idle[nidle++] = wid;
                continue;
            }
            if (zmq_send(s->back, id, ID_BYTES, ZMQ_SNDMORE) < 0 ||
                forward(s->front, s->back, &msg, zmq_msg_more(&msg)) != 0) {
                GB_WARN("server: handing a request to thread %d failed: %s", wid,
                        zmq_strerror(zmq_errno()));
                idle[nidle++] = wid;
            }
        }
    }
    free(idle);
    return rc;
}

/* ---- setup ---------------------------------------------------------------------------------- */

void gb_server_opts_from_config(gb_server_opts *o, const gb_config_server *c)
{
    *o = (gb_server_opts){.endpoint = c->endpoint,
                          .threads = (int)c->threads,
                          .max_batch_rows = c->max_batch_rows,
                          .max_batch_bytes = c->max_batch_bytes,
                          .max_request_bytes = c->max_request_bytes,
                          .max_wait_s = c->max_wait_s,
                          .checkpoint = c->checkpoint};
}

static int set_int(void *sock, int opt, int v) { return zmq_setsockopt(sock, opt, &v, sizeof v); }

int gb_server_open(gb_server **out, void *zctx, gb_replay *r, const gb_server_opts *o,
                   gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || !o->endpoint[0] || o->threads < 1 || o->threads > 999 ||
        o->max_batch_rows < 1 || o->max_batch_bytes < 1 || o->max_request_bytes < 1 ||
        o->max_wait_s < 0)
        return gb_error_set(err, GB_EINVAL, "server: bad options (endpoint, threads 1..999, "
                            "positive limits)");
    gb_server *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    s->zctx = zctx;
    s->r = r;
    s->o = *o;
    snprintf(s->checkpoint, sizeof s->checkpoint, "%s", o->checkpoint ? o->checkpoint : "");
    pthread_mutex_init(&s->ckpt_mu, NULL);
    pthread_mutex_init(&s->pool_mu, NULL);
    int rc = 0;
    /* "tcp://host:0" means any port, as "tcp://host:*" does. */
    char ep[512];
    snprintf(ep, sizeof ep, "%s", o->endpoint);
    size_t el = strlen(ep);
    if (strncmp(ep, "tcp://", 6) == 0 && el > 2 && strcmp(ep + el - 2, ":0") == 0)
        ep[el - 1] = '*';
    s->front = zmq_socket(zctx, ZMQ_ROUTER);
    s->back = zmq_socket(zctx, ZMQ_ROUTER);
    if (!s->front || !s->back) {
        rc = gb_wire_zmq_error(err, "server: zmq_socket");
        goto fail;
    }
    int64_t maxmsg = o->max_request_bytes;
    if (zmq_setsockopt(s->front, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
        set_int(s->front, ZMQ_LINGER, 0) || set_int(s->back, ZMQ_LINGER, 0) ||
        /* Bounded queues per client: a client that sends requests without reading the replies
         * loses replies beyond ~FRONT_HWM frames (the ROUTER drops them); one that floods
         * requests is held back by TCP. Clients with one request in flight never come near. */
        set_int(s->front, ZMQ_SNDHWM, FRONT_HWM) || set_int(s->front, ZMQ_RCVHWM, FRONT_HWM) ||
        set_int(s->back, ZMQ_SNDHWM, 0) || set_int(s->back, ZMQ_RCVHWM, 0)) {
        rc = gb_wire_zmq_error(err, "server: zmq_setsockopt");
        goto fail;
    }
    if (zmq_bind(s->front, ep) != 0) {
        rc = gb_wire_zmq_error(err, "server: bind");
        gb_error_prefix(err, "%s", ep);
        goto fail;
    }
    size_t cap = sizeof s->endpoint;
    if (zmq_getsockopt(s->front, ZMQ_LAST_ENDPOINT, s->endpoint, &cap) != 0) {
        rc = gb_wire_zmq_error(err, "server: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    snprintf(s->back_ep, sizeof s->back_ep, "inproc://gearbox-server-%p", (void *)s);
    if (zmq_bind(s->back, s->back_ep) != 0) {
        rc = gb_wire_zmq_error(err, "server: bind inproc");
        goto fail;
    }
    s->nthreads = o->threads;
    s->threads = calloc((size_t)s->nthreads, sizeof *s->threads);
    s->workers = calloc((size_t)s->nthreads, sizeof *s->workers);
    if (!s->threads || !s->workers) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < s->nthreads; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->id = i;
        char id[16];
        snprintf(id, sizeof id, "w%03d", i % 1000);
        w->sock = zmq_socket(zctx, ZMQ_DEALER);
        if (!w->sock || zmq_setsockopt(w->sock, ZMQ_ROUTING_ID, id, ID_BYTES) != 0 ||
            set_int(w->sock, ZMQ_RCVTIMEO, 100) || set_int(w->sock, ZMQ_LINGER, 0) ||
            set_int(w->sock, ZMQ_SNDHWM, 0) || set_int(w->sock, ZMQ_RCVHWM, 0) ||
            zmq_connect(w->sock, s->back_ep) != 0) {
            rc = gb_wire_zmq_error(err, "server: request thread socket");
            goto fail;
        }
        if ((rc = gb_replay_selection_init(&w->sel, o->max_batch_rows, err)))
            goto fail;
        if (pthread_create(&s->threads[i], NULL, worker_main, w) != 0) {
            rc = gb_error_errno(err, "server: pthread_create");
            goto fail;
        }
        s->started++;
    }
    *out = s;
    return 0;
fail:
    gb_server_close(s);
    return rc;
}

const char *gb_server_endpoint(const gb_server *s) { return s->endpoint; }

void gb_server_close(gb_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop_threads, 1);
    for (int i = 0; i < s->started; i++)
        pthread_join(s->threads[i], NULL);
    for (int i = 0; s->workers && i < s->nthreads; i++) {
        if (s->workers[i].sock)
            zmq_close(s->workers[i].sock);
        gb_replay_selection_free(&s->workers[i].sel);
    }
    if (s->front)
        zmq_close(s->front);
    if (s->back)
        zmq_close(s->back);
    /* Reply buffers still held by ZeroMQ come back through pool_put after this: they are freed
     * there once the pool is full; the pool itself is freed here. Sockets are closed with
     * linger 0 above, so ZeroMQ releases pending messages when the context terminates; the
     * caller terminates the context after close, and pool_put must not run on a freed server,
     * so close waits for every buffer to come back (bounded: linger 0 drops them at once). */
    for (;;) {
        pthread_mutex_lock(&s->pool_mu);
        int out = atomic_load(&s->buffers_out);
        pthread_mutex_unlock(&s->pool_mu);
        if (out == 0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        if (++s->close_waits > 5000) {
            GB_WARN("server: %d reply buffers still held by ZeroMQ at close; leaking them", out);
            s->leak = 1;
            break;
        }
    }
    while (s->pool) {
        rbuf *b = s->pool;
        s->pool = b->next;
        free(b->data);
        free(b);
    }
    free(s->threads);
    free(s->workers);
    if (!s->leak) {
        pthread_mutex_destroy(&s->ckpt_mu);
        pthread_mutex_destroy(&s->pool_mu);
        free(s);
    }
}

gb_server_stats gb_server_get_stats(const gb_server *s)
{
    gb_server_stats st = {0};
    for (int i = 0; i < GB_SERVE_OP_END; i++)
        st.requests[i] = atomic_load(&((gb_server *)s)->requests[i]);
    st.errors = atomic_load(&((gb_server *)s)->errors);
    st.rejected = atomic_load(&((gb_server *)s)->rejected);
    st.items_sent = atomic_load(&((gb_server *)s)->items_sent);
    st.bytes_sent = atomic_load(&((gb_server *)s)->bytes_sent);
    return st;
}
