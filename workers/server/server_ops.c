/* workers/server/server_ops.c: the offline-RL data server's request handlers: info, sample, insert,
 * update priorities, checkpoint (protocol in workers/server/server.h; transport in server.c). */
#include "workers/server/server.h"
#include "workers/server/server_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

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
    return gb_wire_reply(w->sock, m, &h, NULL, 0, &e);
}

static void reply_init(gb_wire_header *h, const worker *w, const gb_wire_msg *m, int op)
{
    gb_wire_header_init(h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, w->id);
    h->seq = m->hdr.seq;
    h->nmeta = 1;
    h->meta[0] = op;
}

/* The answer to a request that succeeded. It is counted before it is sent, so a client that has
 * its answer sees it in the server's statistics. */
static int reply_done(worker *w, const gb_wire_msg *m, const gb_wire_header *h,
                      const gb_wire_payload *pl, gb_error *err)
{
    atomic_fetch_add(&w->s->requests[h->meta[0]], 1);
    return gb_wire_reply(w->sock, m, h, pl, 0, err);
}

static int column_index(const gb_replay_options *o, const char *name)
{
    for (int c = 0; c < o->ncolumns; c++)
        if (strcmp(o->columns[c].name, name) == 0)
            return c;
    return -1;
}

/* INFO's "weight_total" (the weighted selector's sum of priority^alpha) and "beta", as decimal
 * strings that read back exactly: what a client sampling across several servers needs for the
 * global probabilities and importance weights (workers/server/client/python/gearbox_shards.py). */
static int info_weighted(gb_replay *r, gb_wire_header *h, gb_error *err)
{
    double total = 0;
    int64_t size = 0;
    char buf[GB_WIRE_WORD_MAX];
    int rc = gb_replay_weight_total(r, GB_SELECTOR_WEIGHTED, &total, &size, err);
    if (rc)
        return rc;
    snprintf(buf, sizeof buf, "%.17g", total);
    if ((rc = gb_wire_attr_set_str(h, "weight_total", buf, err)))
        return rc;
    snprintf(buf, sizeof buf, "%.17g", gb_replay_options_of(r)->beta);
    return gb_wire_attr_set_str(h, "beta", buf, err);
}


/* Request attributes each operation accepts (a misspelt one is an error, not ignored). */
static int attr_allowed(int op, const char *key)
{
    if (strcmp(key, "table") == 0)
        return 1;
    return op == GB_SERVE_SAMPLE &&
           (strcmp(key, "mode") == 0 || strcmp(key, "len") == 0 || strcmp(key, "cursor") == 0 ||
            strcmp(key, "reset") == 0);
}

/* The table a request names (attribute "table"; absent: the default table), or NULL with the
 * reason in text (an unknown table or attribute). */
static const srv_table *table_of(const gb_server *s, const gb_wire_msg *m, char *text,
                                 size_t cap)
{
    int op = (int)m->hdr.meta[0];
    for (int a = 0; a < m->hdr.nattrs; a++)
        if (!attr_allowed(op, m->hdr.attrs[a].key)) {
            snprintf(text, cap, "unknown request attribute '%s' (%s)", m->hdr.attrs[a].key,
                     op == GB_SERVE_SAMPLE ? "a sample takes table, mode, len, cursor, reset"
                                           : "this operation takes only table");
            return NULL;
        }
    const gb_wire_attr *at = gb_wire_attr_find(&m->hdr, "table");
    if (!at)
        return &s->tables[0];
    const char *name = gb_wire_attr_str(&m->hdr, "table");
    for (int i = 0; name && i < s->ntables; i++)
        if (strcmp(s->tables[i].name, name) == 0)
            return &s->tables[i];
    size_t o = (size_t)snprintf(text, cap, "no table '%.31s'; this server has", name ? name : "?");
    for (int i = 0; i < s->ntables && o < cap; i++)
        o += (size_t)snprintf(text + o, cap - o, "%s %s", i ? "," : "", s->tables[i].name);
    return NULL;
}

static int op_info(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
{
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    gb_replay_stats st;
    gb_replay_stats_get(tb->r, &st);
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
    /* the selectors a request may name, in kind order */
    const char *names[GB_WIRE_WORDS_MAX];
    int nsel = 0;
    unsigned offered = gb_replay_selectors(tb->r);
    for (int k = 0; k < 32 && nsel < GB_WIRE_WORDS_MAX - 4 - GB_SERVER_MAX_TABLES; k++)
        if (offered & (1u << k))
            names[nsel++] = gb_replay_selector_name(k);
    const char *tables[GB_SERVER_MAX_TABLES];
    for (int k = 0; k < w->s->ntables; k++)
        tables[k] = w->s->tables[k].name;
    int rc;
    if ((rc = gb_wire_attr_set_str(&h, "selector", gb_replay_selector_name(o->selector), err)) ||
        (rc = gb_wire_attr_set_str(&h, "remover",
                                   gb_config_enum_name("trainer.replay.remover", o->remover),
                                   err)) ||
        (rc = gb_wire_attr_set_int(&h, "per_item", (int64_t)mask, err)) ||
        (rc = gb_wire_attr_set_strs(&h, "selectors", names, nsel, err)) ||
        (rc = gb_wire_attr_set_strs(&h, "tables", tables, w->s->ntables, err)) ||
        (rc = gb_wire_attr_set_int(&h, "episodes", gb_episodes_count(tb->ep), err)) ||
        (rc = gb_wire_attr_set_int(&h, "transitions", gb_episodes_transitions(tb->ep), err)) ||
        (rc = gb_wire_attr_set_int(&h, "max_len", tb->ep ? tb->ep->max_len : 0, err)))
        return rc;
    if ((offered & (1u << GB_SELECTOR_WEIGHTED)) && (rc = info_weighted(tb->r, &h, err)))
        return rc;
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    for (int c = 0; c < h.ntensors; c++)
        pl[c] = (gb_wire_payload){.data = ""};
    return reply_done(w, m, &h, pl, err);
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

/* ---- the offline modes: windows, transitions, episodes, epochs over the episode index ------ */

/* An int request attribute, or def when absent; -1 (text set) when it is another kind. */
static int attr_int(const gb_wire_msg *m, const char *key, int64_t def, int64_t *v, char *text,
                    size_t cap)
{
    gb_error e = {0};
    int rc = gb_wire_attr_int(&m->hdr, key, v, &e);
    if (rc == GB_ENOTFOUND) {
        *v = def;
        return 0;
    }
    if (rc)
        snprintf(text, cap, "sample: attribute '%s' must be an integer", key);
    return rc ? -1 : 0;
}

/* Copies the planned rows (p->n rows of p->S steps) of table tb into the reply buffer's column
 * destinations; fills the metadata. Returns 0, or -1 when an item read was replaced or
 * removed since it was loaded (its slot reused by an insert; text set). */
static int gather_rows(const srv_table *tb, const ep_plan *p, const int64_t *episode,
                       const int64_t *start, const gb_replay_table *tables,
                       const gb_replay_dst *dst, int ndst, int64_t *index, uint64_t *key,
                       double *prob, float *weight, int32_t *length, int64_t *ep_out,
                       int32_t *timestep, char *text, size_t cap)
{
    const gb_episodes *e = tb->ep;
    const int64_t T = e->T, S = p->S;
    gb_replay_status st;
    gb_replay_status_view(tb->r, &st);
    for (int64_t i = 0; i < p->n; i++) {
        int64_t left = gb_episodes_length(e, episode[i]) - start[i];
        int64_t valid = left < S ? left : S;
        int64_t item0 = e->ep_item0[episode[i]];
        int64_t first = item0 + start[i] / T;
        length[i] = (int32_t)valid;
        index[i] = e->item_slot[first];
        key[i] = st.item[e->item_slot[first]].seq; /* checked below to be the loaded one */
        prob[i] = 1.0 / (double)p->size;
        weight[i] = 1.0f;
        ep_out[i] = episode[i];
        for (int64_t k = 0; k < S; k++)
            timestep[i * S + k] = k < valid ? (int32_t)(start[i] + k) : 0;
        for (int c = 0; c < ndst; c++) {
            const gb_replay_table *t = &tables[dst[c].column];
            unsigned char *out = dst[c].data;
            if (t->per_item) {
                memcpy(out + (size_t)i * t->block_bytes,
                       t->base + (size_t)e->item_slot[first] * t->stride, t->block_bytes);
                continue;
            }
            unsigned char *row = out + (size_t)(i * S) * t->step_bytes;
            for (int64_t k = 0; k < valid;) { /* runs of steps inside one item */
                int64_t step = start[i] + k, it = item0 + step / T, at = step % T;
                int64_t run = T - at < valid - k ? T - at : valid - k;
                memcpy(row + (size_t)k * t->step_bytes,
                       t->base + (size_t)e->item_slot[it] * t->stride + (size_t)at * t->step_bytes,
                       (size_t)run * t->step_bytes);
                k += run;
            }
            memset(row + (size_t)valid * t->step_bytes, 0, (size_t)(S - valid) * t->step_bytes);
        }
    }
    /* every item read must still be the one loaded (checked after the copy: a key only grows) */
    for (int64_t i = 0; i < p->n; i++) {
        int64_t item0 = e->ep_item0[episode[i]];
        for (int64_t it = item0 + start[i] / T; it <= item0 + (start[i] + length[i] - 1) / T;
             it++) {
            int64_t slot = e->item_slot[it];
            if (st.state[slot] != GB_ITEM_COMMITTED ||
                (uint32_t)st.item[slot].seq != e->item_key[it] ||
                (it == item0 + start[i] / T && st.item[slot].seq != key[i])) {
                snprintf(text, cap, "sample: episode %lld: its item in slot %lld was replaced "
                         "by an insert since the dataset was loaded (the offline modes read "
                         "the loaded dataset; give the table room: server.replay.capacity)",
                         (long long)episode[i], (long long)slot);
                return -1;
            }
        }
    }
    return 0;
}

/* A sample request in an offline mode (not rate-limited, never parked: it reads the dataset). */
static int op_sample_offline(worker *w, const srv_table *tb, const gb_wire_msg *m, int mode,
                             gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    char text[GB_WIRE_TEXT_MAX];
    int64_t batch = m->hdr.meta[1], len, reset;
    if (!tb->ep) {
        snprintf(text, sizeof text, "sample: mode '%s': table '%s' has no episodes (they come "
                 "from a D4RL dataset loaded from its file; gearbox recordings and restored "
                 "checkpoints have none)", gb_episodes_mode_name(mode), tb->name);
        return send_error(w, m, GB_EUNSUPPORTED, text);
    }
    if (batch < 1 || batch > s->o.max_batch_rows) {
        snprintf(text, sizeof text, "sample: batch %lld outside 1..%lld (server.max_batch_rows)",
                 (long long)batch, (long long)s->o.max_batch_rows);
        return send_error(w, m, GB_EINVAL, text);
    }
    if (attr_int(m, "len", mode == GB_SERVE_MODE_WINDOW ? o->steps : 1, &len, text,
                 sizeof text) || attr_int(m, "reset", 0, &reset, text, sizeof text))
        return send_error(w, m, GB_EINVAL, text);
    if (len < 1 || len > (int64_t)1 << 24) {
        snprintf(text, sizeof text, "sample: len %lld outside 1..16777216", (long long)len);
        return send_error(w, m, GB_EINVAL, text);
    }
    const char *cursor = gb_wire_attr_str(&m->hdr, "cursor");
    if (mode == GB_SERVE_MODE_EPOCH && (!cursor || !cursor[0]))
        return send_error(w, m, GB_EINVAL, "sample: mode 'epoch' needs a 'cursor' (a string "
                          "naming this reader's place in the epoch)");
    int cols[GB_REPLAY_MAX_COLUMNS];
    int ncols = parse_columns(o, m, cols, text, sizeof text);
    if (ncols < 0)
        return send_error(w, m, GB_EINVAL, text);
    if (ncols > GB_WIRE_MAX_TENSORS - 7) {
        snprintf(text, sizeof text, "sample: at most %d columns in mode '%s'",
                 GB_WIRE_MAX_TENSORS - 7, gb_episodes_mode_name(mode));
        return send_error(w, m, GB_EINVAL, text);
    }
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(tb->r, tables);
    /* the data bytes of a row of S steps (the reply limit is checked before an epoch's cursor
     * moves: its S is len; an episode batch's S is known once drawn) */
    uint64_t step_row = 0, item_row = 0;
    for (int k = 0; k < ncols; k++) {
        if (tables[cols[k]].per_item)
            item_row += tables[cols[k]].block_bytes;
        else
            step_row += tables[cols[k]].step_bytes;
    }
    step_row += 4; /* timestep */
    item_row += 8; /* episode */
    uint64_t want = (uint64_t)batch * (item_row + (uint64_t)len * step_row);
    if (mode != GB_SERVE_MODE_EPISODE && want > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, sizeof text, "sample: a reply of %llu data bytes exceeds "
                 "server.max_batch_bytes = %lld; ask for fewer rows, columns or steps",
                 (unsigned long long)want, (long long)s->o.max_batch_bytes);
        return send_error(w, m, GB_EINVAL, text);
    }
    int64_t *episode = w->rows, *start = w->rows + s->o.max_batch_rows;
    ep_plan p;
    if (gb_episodes_plan(tb->ep, mode, batch, len, cursor, reset != 0, &w->rng, episode, start,
                         &p, text, sizeof text))
        return send_error(w, m, GB_EINVAL, text);
    uint64_t data_bytes = (uint64_t)p.n * (item_row + (uint64_t)p.S * step_row);
    if (data_bytes > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, sizeof text, "sample: a reply of %llu data bytes (episodes of up to %lld "
                 "steps) exceeds server.max_batch_bytes = %lld; ask for fewer episodes or "
                 "columns", (unsigned long long)data_bytes, (long long)p.S,
                 (long long)s->o.max_batch_bytes);
        return send_error(w, m, GB_EINVAL, text);
    }
    const int64_t n = p.n, S = p.S;
    size_t col_row[GB_REPLAY_MAX_COLUMNS];
    size_t total = align64((size_t)n * 8) * 4 + align64((size_t)n * 4) * 2 +
                   align64((size_t)(n * S) * 4);
    for (int k = 0; k < ncols; k++) {
        const gb_replay_table *t = &tables[cols[k]];
        col_row[k] = t->per_item ? t->block_bytes : (size_t)S * t->step_bytes;
        total += align64((size_t)n * col_row[k]);
    }
    rbuf *b = gb_server_rbuf_get(s, total);
    if (!b)
        return send_error(w, m, GB_ENOMEM, "sample: out of memory for the reply");
    unsigned char *at = b->data;
#define TAKE(ptr, type, count)                                                                 \
    ptr = (type *)at;                                                                          \
    at += align64((size_t)(count) * sizeof(type))
    int64_t *index, *ep_out;
    uint64_t *key;
    double *prob;
    float *weight;
    int32_t *length, *timestep;
    TAKE(index, int64_t, n);
    TAKE(key, uint64_t, n);
    TAKE(prob, double, n);
    TAKE(weight, float, n);
    TAKE(length, int32_t, n);
    TAKE(ep_out, int64_t, n);
    TAKE(timestep, int32_t, n * S);
#undef TAKE
    gb_replay_dst dst[GB_REPLAY_MAX_COLUMNS];
    for (int k = 0; k < ncols; k++) {
        dst[k] = (gb_replay_dst){.column = cols[k], .data = at, .bytes = (size_t)n * col_row[k]};
        at += align64((size_t)n * col_row[k]);
    }
    if (gather_rows(tb, &p, episode, start, tables, dst, ncols, index, key, prob, weight, length,
                    ep_out, timestep, text, sizeof text)) {
        atomic_store(&b->refs, 1);
        atomic_fetch_add(&s->buffers_out, 1);
        gb_server_rbuf_free(b->data, b);
        return send_error(w, m, GB_ENOTFOUND, text);
    }
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_SAMPLE);
    h.nmeta = 4;
    h.meta[1] = n;
    h.meta[2] = p.size;
    h.meta[3] = -1;
    int rc;
    if ((rc = gb_wire_attr_set_str(&h, "mode", gb_episodes_mode_name(mode), err)) ||
        (rc = gb_wire_attr_set_str(&h, "table", tb->name, err)) ||
        (mode == GB_SERVE_MODE_EPOCH &&
         ((rc = gb_wire_attr_set_int(&h, "epoch", p.epoch, err)) ||
          (rc = gb_wire_attr_set_int(&h, "pos", p.pos, err)) ||
          (rc = gb_wire_attr_set_int(&h, "end", p.end, err))))) {
        atomic_store(&b->refs, 1);
        atomic_fetch_add(&s->buffers_out, 1);
        gb_server_rbuf_free(b->data, b);
        return rc;
    }
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    static const struct { const char *name; gb_dtype dt; } fixed[] = {
        {"index", GB_DTYPE_INT64}, {"key", GB_DTYPE_UINT64}, {"prob", GB_DTYPE_FLOAT64},
        {"weight", GB_DTYPE_FLOAT32}, {"length", GB_DTYPE_INT32}};
    const void *fixed_data[] = {index, key, prob, weight, length};
    int nt = 0;
    for (int k = 0; k < 5; k++, nt++) {
        gb_wire_set_tensor(&h.tensors[nt], fixed[k].name, fixed[k].dt, 1, &n, NULL);
        pl[nt] = (gb_wire_payload){.data = fixed_data[k], .free_fn = gb_server_rbuf_free,
                                   .hint = b};
    }
    for (int k = 0; k < ncols; k++, nt++) {
        const gb_replay_column *col = &o->columns[cols[k]];
        gb_tensor_desc *d = &h.tensors[nt];
        snprintf(d->name, sizeof d->name, "%s", col->name);
        d->dtype = col->dtype;
        d->rank = 0;
        d->shape[d->rank++] = n;
        if (!col->per_item)
            d->shape[d->rank++] = S;
        for (int j = 0; j < col->ndim; j++)
            d->shape[d->rank++] = col->shape[j];
        pl[nt] = (gb_wire_payload){.data = dst[k].data, .free_fn = gb_server_rbuf_free, .hint = b};
    }
    int64_t ts_shape[2] = {n, S};
    gb_wire_set_tensor(&h.tensors[nt], "episode", GB_DTYPE_INT64, 1, &n, NULL);
    pl[nt++] = (gb_wire_payload){.data = ep_out, .free_fn = gb_server_rbuf_free, .hint = b};
    gb_wire_set_tensor(&h.tensors[nt], "timestep", GB_DTYPE_INT32, 2, ts_shape, NULL);
    pl[nt++] = (gb_wire_payload){.data = timestep, .free_fn = gb_server_rbuf_free, .hint = b};
    h.ntensors = nt;
    atomic_store(&b->refs, h.ntensors);
    atomic_fetch_add(&s->buffers_out, 1);
    atomic_fetch_add(&s->items_sent, (unsigned long long)n);
    atomic_fetch_add(&s->bytes_sent, data_bytes);
    return reply_done(w, m, &h, pl, err);
}

/* The wait a sample request m asked for (its timeout_ms, capped by server.max_wait_s). */
static double sample_wait_s(const gb_server *s, const gb_wire_msg *m)
{
    int64_t timeout_ms = m->hdr.nmeta > 4 ? m->hdr.meta[4] : -1;
    return timeout_ms < 0 ? s->o.max_wait_s : fmin(s->o.max_wait_s, (double)timeout_ms / 1000.0);
}

/* A sample request; parked: NULL the first time (a request that must wait returns
 * GB_SERVE_PARK with nothing sent), else its parking record (retried without waiting; answered
 * with the limiter's error once its deadline has passed). */
static int op_sample(worker *w, const srv_table *tb, const gb_wire_msg *m, const parked *pk,
                     gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    char text[GB_WIRE_TEXT_MAX];
    const gb_wire_header *q = &m->hdr;
    if (q->nmeta < 2)
        return send_error(w, m, GB_EPROTO, "sample: meta must hold [op, batch, ...]");
    const char *mode_name = gb_wire_attr_str(q, "mode");
    int mode = gb_episodes_mode_parse(mode_name);
    if (mode < 0 || (!mode_name && gb_wire_attr_find(q, "mode"))) {
        snprintf(text, sizeof text, "sample: unknown mode (expected the string item, window, "
                 "transition, episode or epoch)");
        return send_error(w, m, GB_EINVAL, text);
    }
    if (mode != GB_SERVE_MODE_ITEM)
        return op_sample_offline(w, tb, m, mode, err);
    int64_t batch = q->meta[1];
    int64_t t0 = q->nmeta > 2 ? q->meta[2] : 0, t1 = q->nmeta > 3 ? q->meta[3] : 0;
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
    unsigned offered = gb_replay_selectors(tb->r);
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
    gb_replay_tables(tb->r, tables);
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
    double wait_s = sample_wait_s(s, m);
    req.timeout_s = 0; /* never here: a request that must wait is parked */
    req.selector = (int)selector;
    gb_error e = {0};
    int rc = gb_replay_sample(tb->r, &req, &w->sel, &e);
    if (rc == GB_ETIMEOUT) {
        double now = gb_now_s();
        if (!pk ? wait_s > 0 : now < pk->deadline)
            return GB_SERVE_PARK;
        /* its time is up: the limiter's reason, with the time it waited */
        const char *why = strstr(e.msg, " s: ");
        snprintf(text, sizeof text, "sample: timed out after %.3f s (of %.3f s allowed)%s%s",
                 pk ? now - pk->since : 0.0, wait_s, why ? ": " : "", why ? why + 4 : "");
        return send_error(w, m, rc, text);
    }
    if (rc)
        return send_error(w, m, rc, e.msg);
    int64_t n = w->sel.n;
    size_t total = meta_bytes;
    for (int k = 0; k < ncols; k++)
        total += align64((size_t)batch * col_row[k]);
    rbuf *b = gb_server_rbuf_get(s, total);
    if (!b) {
        gb_replay_release(tb->r, &w->sel);
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
    gather(tb->r, &w->sel, tables, dst, ncols, (int32_t)t0, (int32_t)t1, length);
    memcpy(index, w->sel.index, (size_t)n * 8);
    memcpy(key, w->sel.key, (size_t)n * 8);
    memcpy(prob, w->sel.prob, (size_t)n * 8);
    memcpy(weight, w->sel.weight, (size_t)n * 4);
    int64_t size = w->sel.size, drawn_by = w->sel.selector;
    gb_replay_release(tb->r, &w->sel);
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
        pl[k] = (gb_wire_payload){.data = fixed_data[k], .free_fn = gb_server_rbuf_free, .hint = b};
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
        pl[5 + k] =
            (gb_wire_payload){.data = dst[k].data, .free_fn = gb_server_rbuf_free, .hint = b};
    }
    h.ntensors = 5 + ncols;
    atomic_store(&b->refs, h.ntensors);
    atomic_fetch_add(&s->buffers_out, 1);
    atomic_fetch_add(&s->items_sent, (unsigned long long)n);
    uint64_t sent = 0;
    for (int k = 0; k < ncols; k++)
        sent += (uint64_t)n * col_row[k];
    atomic_fetch_add(&s->bytes_sent, sent);
    return reply_done(w, m, &h, pl, err);
}

static int op_insert(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
{
    gb_server *s = w->s;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    char text[GB_WIRE_TEXT_MAX];
    int src[GB_REPLAY_MAX_COLUMNS];
    int64_t n = -1;
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(tb->r, tables);
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
    for (int t = 0; t < m->hdr.ntensors; t++) { /* a misspelt optional field is not ignored */
        const char *name = m->hdr.tensors[t].name;
        if (t != tp && t != tl && column_index(o, name) < 0) {
            snprintf(text, sizeof text, "insert: unknown tensor '%s' (an insert carries the "
                     "columns and, optionally, 'priority' and 'length')", name);
            return send_error(w, m, GB_EINVAL, text);
        }
    }
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
        for (int64_t i = 0; i < n; i++)
            if (len[i] < 1 || len[i] > o->steps) {
                snprintf(text, sizeof text, "insert: item %lld: length %d outside 1..%lld (the "
                         "item's valid steps, at most T)", (long long)i, len[i],
                         (long long)o->steps);
                return send_error(w, m, GB_EINVAL, text);
            }
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
    /* A per-step 'valid' column (datasets) says the same as length: the first length steps;
     * without a length tensor it gives the lengths */
    int cv = column_index(o, "valid");
    const uint8_t *valid = NULL;
    if (cv >= 0 && !o->columns[cv].per_item && o->columns[cv].dtype == GB_DTYPE_UINT8 &&
        o->columns[cv].ndim == 0)
        valid = gb_wire_msg_tensor(m, src[cv]).data;
    for (int64_t i = 0; valid && i < n; i++) {
        const uint8_t *v = valid + i * o->steps;
        int32_t k = 0;
        while (k < o->steps && v[k])
            k++;
        int64_t bad = k;
        while (bad < o->steps && !v[bad])
            bad++;
        const char *why = k == 0 ? "no valid step"
                          : bad < o->steps ? "a valid step after an invalid one"
                          : len && len[i] != k ? "its 'length' disagrees"
                                               : NULL;
        if (why) {
            snprintf(text, sizeof text, "insert: item %lld: 'valid' has %d leading valid steps "
                     "and %s (valid marks the first length steps, length >= 1)", (long long)i,
                     k, why);
            free(idx);
            return send_error(w, m, GB_EINVAL, text);
        }
        lengths[i] = k;
    }
    gb_error e = {0};
    int rc = gb_replay_allocate(tb->r, n, idx, s->o.max_wait_s, &e);
    if (rc == 0) {
        for (int c = 0; c < o->ncolumns; c++) {
            gb_tensor_view v = gb_wire_msg_tensor(m, src[c]);
            size_t row = tables[c].block_bytes;
            for (int64_t i = 0; i < n; i++)
                memcpy(gb_replay_block(tb->r, c, idx[i]), (const char *)v.data + (size_t)i * row,
                       row);
        }
        rc = gb_replay_commit(tb->r, n, idx, prio, lengths, versions, &e);
        if (rc)
            gb_replay_abort(tb->r, n, idx, NULL);
    }
    free(idx);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_replay_stats st;
    gb_replay_stats_get(tb->r, &st);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_INSERT);
    h.nmeta = 3;
    h.meta[1] = n;
    h.meta[2] = st.size;
    return reply_done(w, m, &h, NULL, err);
}

static int op_update(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
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
    int rc = gb_replay_update_priorities(tb->r, n, gb_wire_msg_tensor(m, ti).data,
                                         tk >= 0 ? gb_wire_msg_tensor(m, tk).data : NULL,
                                         gb_wire_msg_tensor(m, tp).data, &skipped, &e);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_UPDATE);
    h.nmeta = 3;
    h.meta[1] = n;
    h.meta[2] = skipped;
    return reply_done(w, m, &h, NULL, err);
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

static int op_checkpoint(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
{
    if (tb != &w->s->tables[0])
        return send_error(w, m, GB_EUNSUPPORTED, "checkpoint: only the default table has a "
                          "checkpoint (server.checkpoint)");
    gb_error e = {0};
    int rc = gb_server_checkpoint(w->s, &e);
    if (rc)
        return send_error(w, m, rc, e.msg);
    gb_wire_header h;
    reply_init(&h, w, m, GB_SERVE_CHECKPOINT);
    snprintf(h.text, sizeof h.text, "%.*s", (int)sizeof h.text - 1, w->s->checkpoint);
    return reply_done(w, m, &h, NULL, err);
}

/* The bytes of a received request's tensor frames together. */
static uint64_t request_bytes(const gb_wire_msg *m)
{
    uint64_t n = 0;
    for (int i = 0; i < m->nframes; i++)
        n += zmq_msg_size((zmq_msg_t *)&m->frames[i]);
    return n;
}

/* Parks w->m (a sample that must wait up to its timeout) and gives w a fresh message. Returns
 * 0, GB_EFULL (MAX_PARKED waiting: the caller answers with an error) or GB_ENOMEM. */
static int park(worker *w, double wait_s)
{
    gb_server *s = w->s;
    parked *p = malloc(sizeof *p);
    gb_wire_msg *fresh = malloc(sizeof *fresh);
    if (!p || !fresh) {
        free(p);
        free(fresh);
        return GB_ENOMEM;
    }
    gb_wire_msg_init(fresh);
    p->next = NULL;
    p->m = w->m;
    p->since = gb_now_s();
    p->deadline = p->since + wait_s;
    pthread_mutex_lock(&s->park_mu);
    int full = s->nparked >= MAX_PARKED;
    if (!full) {
        if (s->park_tail)
            s->park_tail->next = p;
        else
            s->park_head = p;
        s->park_tail = p;
        s->nparked++;
    }
    pthread_mutex_unlock(&s->park_mu);
    if (full) {
        free(p);
        free(fresh);
        return GB_EFULL;
    }
    atomic_fetch_add(&s->parked_total, 1);
    w->m = fresh;
    return 0;
}

void gb_server_retry_parked(worker *w)
{
    gb_server *s = w->s;
    pthread_mutex_lock(&s->park_mu);
    parked *list = s->park_head;
    s->park_head = s->park_tail = NULL;
    s->nparked = 0;
    pthread_mutex_unlock(&s->park_mu);
    parked *keep = NULL, *last = NULL;
    int kept = 0;
    for (parked *p = list, *nx; p; p = nx) {
        nx = p->next;
        gb_error err = {0};
        char text[GB_WIRE_TEXT_MAX];
        const srv_table *tb = table_of(s, p->m, text, sizeof text); /* found when parked */
        int rc = op_sample(w, tb ? tb : &s->tables[0], p->m, p, &err);
        if (rc == GB_SERVE_PARK) {
            p->next = NULL;
            if (last)
                last->next = p;
            else
                keep = p;
            last = p;
            kept++;
            continue;
        }
        if (rc)
            GB_WARN("server: reply to a parked request failed: %s", err.msg);
        gb_wire_msg_release(p->m);
        free(p->m);
        free(p);
    }
    if (!keep)
        return;
    /* back in front of any parked meanwhile: the oldest are tried first */
    pthread_mutex_lock(&s->park_mu);
    last->next = s->park_head;
    s->park_head = keep;
    if (!s->park_tail)
        s->park_tail = last;
    s->nparked += kept;
    pthread_mutex_unlock(&s->park_mu);
}

void gb_server_drop_parked(gb_server *s)
{
    for (parked *p = s->park_head, *nx; p; p = nx) {
        nx = p->next;
        gb_wire_msg_release(p->m);
        free(p->m);
        free(p);
    }
    s->park_head = s->park_tail = NULL;
    s->nparked = 0;
}

void gb_server_handle(worker *w, int recv_rc, const gb_error *recv_err)
{
    gb_server *s = w->s;
    gb_wire_msg *m = w->m;
    gb_error err = {0};
    int rc = 0;
    uint64_t bytes;
    const srv_table *tb;
    char text[GB_WIRE_TEXT_MAX];
    if (recv_rc) {
        atomic_fetch_add(&s->rejected, 1);
        if (m->route_len)
            rc = send_error(w, m, GB_EPROTO, recv_err->msg);
        else
            rc = -1;
    } else if ((bytes = request_bytes(m)) > (uint64_t)s->o.max_request_bytes) {
        atomic_fetch_add(&s->rejected, 1);
        snprintf(text, sizeof text, "request of %llu bytes (its frames together) is over the "
                 "server's limit of %lld bytes (server.max_request_bytes): split it",
                 (unsigned long long)bytes, (long long)s->o.max_request_bytes);
        rc = send_error(w, m, GB_EINVAL, text);
    } else if (m->hdr.type != GB_MSG_SERVE_REQUEST || m->hdr.nmeta < 1 ||
               m->hdr.meta[0] < GB_SERVE_INFO || m->hdr.meta[0] >= GB_SERVE_OP_END) {
        atomic_fetch_add(&s->rejected, 1);
        rc = send_error(w, m, GB_EPROTO, "expected a serve_request with meta[0] = op (1..5)");
    } else if (!(tb = table_of(s, m, text, sizeof text))) {
        rc = send_error(w, m, GB_EINVAL, text);
    } else {
        int op = (int)m->hdr.meta[0];
        switch (op) {
        case GB_SERVE_INFO: rc = op_info(w, tb, m, &err); break;
        case GB_SERVE_SAMPLE:
            rc = op_sample(w, tb, m, NULL, &err);
            if (rc == GB_SERVE_PARK) {
                int pr = park(w, sample_wait_s(s, m));
                if (pr == 0)
                    return; /* answered (and counted) by gb_server_retry_parked */
                rc = send_error(w, m, pr, pr == GB_EFULL ? "sample: too many requests waiting "
                                                           "for the rate limiter; try again later"
                                                         : "sample: out of memory");
            }
            break;
        case GB_SERVE_INSERT: rc = op_insert(w, tb, m, &err); break;
        case GB_SERVE_UPDATE: rc = op_update(w, tb, m, &err); break;
        default: rc = op_checkpoint(w, tb, m, &err); break;
        }
    }
    if (rc && rc != -1)
        GB_WARN("server: reply failed: %s", err.msg);
}
