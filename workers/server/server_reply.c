/* workers/server/server_reply.c: the data server's replies: reply buffers (reused, released by
 * ZeroMQ after the last frame is sent), error and success answers, and a sample reply's layout: the
 * columns it asks for and the metadata arrays beside them (protocol:
 * workers/server/server_protocol.h).
 */
#include "workers/server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_KEEP 8 /* idle reply buffers kept per server */

/* ---- reply buffers -------------------------------------------------------------------------- */

rbuf *gb_server_rbuf_get(gb_server *s, size_t need)
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

void gb_server_rbuf_free(void *data, void *hint)
{
    (void)data;
    rbuf *b = hint;
    if (atomic_fetch_sub(&b->refs, 1) == 1) {
        gb_server *s = b->s;
        if (b->client)
            gb_server_client_release(s, b->client);
        b->client = NULL;
        pool_put(s, b);
        atomic_fetch_sub(&s->buffers_out, 1); /* last: close may free s after this */
    }
}

void gb_server_pool_free(gb_server *s)
{
    while (s->pool) {
        rbuf *b = s->pool;
        s->pool = b->next;
        free(b->data);
        free(b);
    }
}

/* ---- answers -------------------------------------------------------------------------------- */

int gb_server_send_error(worker *w, const gb_wire_msg *m, int code, const char *text)
{
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, w->id);
    h.seq = m->hdr.seq;
    h.status = code;
    snprintf(h.text, sizeof h.text, "%s", text);
    atomic_fetch_add(&w->s->errors, 1);
    gb_error e = {0};
    return gb_wire_reply(w->sock, m, &h, NULL, 0, &e);
}

void gb_server_reply_init(gb_wire_header *h, const worker *w, const gb_wire_msg *m)
{
    gb_wire_header_init(h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, w->id);
    h->seq = m->hdr.seq;
}

int gb_server_reply_done(worker *w, const gb_wire_msg *m, int op, const void *attrs,
                         gb_wire_header *h, const gb_wire_payload *pl, gb_error *err)
{
    int rc = attrs ? gb_wire_schema_write(gb_serve_reply_schemas[op], attrs, h, err) : 0;
    if (rc)
        return rc;
    atomic_fetch_add(&w->s->requests[op], 1);
    return gb_wire_reply(w->sock, m, h, pl, 0, err);
}

int gb_server_check_rows(const gb_server *s, int64_t n, const char *what, const char *unit,
                         char *text, size_t cap)
{
    if (n >= 1 && n <= s->o.max_batch_rows)
        return 0;
    snprintf(text, cap, "%s %lld%s outside 1..%lld (server.max_batch_rows)", what, (long long)n,
             unit, (long long)s->o.max_batch_rows);
    return -1;
}

/* ---- the columns a sample asks for ---------------------------------------------------------- */

int gb_server_column_index(const gb_replay_options *o, const char *name)
{
    for (int c = 0; c < o->ncolumns; c++)
        if (strcmp(o->columns[c].name, name) == 0)
            return c;
    return -1;
}

/* Adds the column named by the len bytes at p to cols[*n]. Returns 0 or -1 (text set). */
static int add_column(const gb_replay_options *o, const char *p, size_t len, int *cols, int *n,
                      char *text, size_t cap)
{
    char name[GB_REPLAY_NAME_MAX];
    if (len >= sizeof name) {
        snprintf(text, cap, "sample: column name of %zu bytes is too long", len);
        return -1;
    }
    memcpy(name, p, len);
    name[len] = 0;
    int c = gb_server_column_index(o, name);
    if (c < 0) {
        snprintf(text, cap, "sample: no column '%s' (INFO lists the columns)", name);
        return -1;
    }
    for (int k = 0; k < *n; k++)
        if (cols[k] == c) {
            snprintf(text, cap, "sample: column '%s' asked twice", name);
            return -1;
        }
    if (*n >= GB_WIRE_MAX_TENSORS - 5) {
        snprintf(text, cap, "sample: at most %d columns per request", GB_WIRE_MAX_TENSORS - 5);
        return -1;
    }
    cols[(*n)++] = c;
    return 0;
}

int gb_server_parse_columns(const gb_replay_options *o, const gb_wire_msg *m, int *cols,
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
        if (len && add_column(o, p, len, cols, &n, text, cap))
            return -1;
        p += len + 1;
    }
    if (n == 0)
        snprintf(text, cap, "sample: 'columns' names no column");
    return n ? n : -1;
}

/* ---- a sample reply ------------------------------------------------------------------------- */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

int gb_server_sample_reply_alloc(gb_server *s, const gb_replay_table *tables, sample_reply *sr)
{
    const int64_t n = sr->rows, S = sr->S;
    size_t total = align64((size_t)n * 8) * 3 + align64((size_t)n * 4) * 2;
    if (sr->offline)
        total += align64((size_t)n * 8) + align64((size_t)(n * S) * 4);
    for (int k = 0; k < sr->ncols; k++) {
        const gb_replay_table *t = &tables[sr->cols[k]];
        sr->col_row[k] = t->per_item ? t->block_bytes : (size_t)S * t->step_bytes;
        total += align64((size_t)n * sr->col_row[k]);
    }
    if (!(sr->b = gb_server_rbuf_get(s, total)))
        return GB_ENOMEM;
    unsigned char *at = sr->b->data;
#define TAKE(ptr, type, count)                                                                 \
    ptr = (type *)at;                                                                          \
    at += align64((size_t)(count) * sizeof(type))
    TAKE(sr->index, int64_t, n);
    TAKE(sr->key, uint64_t, n);
    TAKE(sr->prob, double, n);
    TAKE(sr->weight, float, n);
    TAKE(sr->length, int32_t, n);
    sr->episode = NULL;
    sr->timestep = NULL;
    if (sr->offline) {
        TAKE(sr->episode, int64_t, n);
        TAKE(sr->timestep, int32_t, n * S);
    }
#undef TAKE
    for (int k = 0; k < sr->ncols; k++) {
        sr->dst[k] = (gb_replay_dst){.column = sr->cols[k], .data = at,
                                     .bytes = (size_t)n * sr->col_row[k]};
        at += align64((size_t)n * sr->col_row[k]);
    }
    return 0;
}

void gb_server_sample_reply_drop(gb_server *s, sample_reply *sr)
{
    atomic_store(&sr->b->refs, 1);
    atomic_fetch_add(&s->buffers_out, 1);
    gb_server_rbuf_free(sr->b->data, sr->b);
}

/* A frame sent from sr's buffer without a copy (its reference given back when sent). */
static gb_wire_payload frame(const sample_reply *sr, const void *data)
{
    return (gb_wire_payload){.data = data, .free_fn = gb_server_rbuf_free, .hint = sr->b};
}

int gb_server_sample_reply_send(worker *w, const srv_request *r, sample_reply *sr,
                                const gb_serve_sampled *out, uint64_t data_bytes,
                                gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(r->tb->r);
    const int64_t n = out->n;
    gb_wire_header hdr, *h = &hdr;
    gb_server_reply_init(h, w, r->m);
    int rc = gb_wire_schema_write(gb_serve_reply_schemas[GB_SERVE_SAMPLE], out, h, err);
    if (rc) {
        gb_server_sample_reply_drop(s, sr);
        return rc;
    }
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    static const struct { const char *name; gb_dtype dt; } fixed[] = {
        {"index", GB_DTYPE_INT64}, {"key", GB_DTYPE_UINT64}, {"prob", GB_DTYPE_FLOAT64},
        {"weight", GB_DTYPE_FLOAT32}, {"length", GB_DTYPE_INT32}};
    const void *fixed_data[] = {sr->index, sr->key, sr->prob, sr->weight, sr->length};
    int nt = 0;
    for (int k = 0; k < 5; k++, nt++) {
        gb_wire_set_tensor(&h->tensors[nt], fixed[k].name, fixed[k].dt, 1, &n, NULL);
        pl[nt] = frame(sr, fixed_data[k]);
    }
    for (int k = 0; k < sr->ncols; k++, nt++) {
        const gb_replay_column *col = &o->columns[sr->cols[k]];
        gb_tensor_desc *d = &h->tensors[nt];
        snprintf(d->name, sizeof d->name, "%s", col->name);
        d->dtype = col->dtype;
        d->rank = 0;
        d->shape[d->rank++] = n;
        if (!col->per_item)
            d->shape[d->rank++] = sr->S;
        for (int j = 0; j < col->ndim; j++)
            d->shape[d->rank++] = col->shape[j];
        pl[nt] = frame(sr, sr->dst[k].data);
    }
    if (sr->offline) {
        int64_t ts_shape[2] = {n, sr->S};
        gb_wire_set_tensor(&h->tensors[nt], "episode", GB_DTYPE_INT64, 1, &n, NULL);
        pl[nt++] = frame(sr, sr->episode);
        gb_wire_set_tensor(&h->tensors[nt], "timestep", GB_DTYPE_INT32, 2, ts_shape, NULL);
        pl[nt++] = frame(sr, sr->timestep);
    }
    h->ntensors = nt;
    sr->b->client = gb_server_client_hold(s, r->m);
    atomic_store(&sr->b->refs, h->ntensors);
    atomic_fetch_add(&s->buffers_out, 1);
    atomic_fetch_add(&s->items_sent, (unsigned long long)n);
    atomic_fetch_add(&s->bytes_sent, data_bytes);
    return gb_server_reply_done(w, r->m, GB_SERVE_SAMPLE, NULL, h, pl, err);
}
