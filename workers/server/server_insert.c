/* workers/server/server_insert.c: the data server's writes: insert (whole items, checked against
 * the table's schema; an insert waiting for room holds its request thread) and priority updates of
 * sampled items. */
#include "workers/server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An insert's tensors, found and checked against the schema. */
typedef struct insert_args {
    int64_t n;                       /* items */
    int src[GB_REPLAY_MAX_COLUMNS];  /* the tensor of each column */
    const double *prio;              /* optional */
    const int32_t *len;              /* optional */
} insert_args;

/* Finds every column's tensor and checks its dtype and shape (every n equal). Returns 0 or -1
 * (text set). */
static int insert_columns(const gb_replay_options *o, const gb_wire_msg *m, insert_args *a,
                          char *text, size_t cap)
{
    a->n = -1;
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        int t = gb_wire_msg_find(m, col->name);
        if (t < 0) {
            snprintf(text, cap, "insert: column '%s' missing (every column is needed)",
                     col->name);
            return -1;
        }
        const gb_tensor_desc *d = &m->hdr.tensors[t];
        int ok = d->dtype == col->dtype && d->rank == 1 + !col->per_item + col->ndim;
        for (int k = 0; ok && k < col->ndim; k++)
            ok = d->shape[1 + !col->per_item + k] == col->shape[k];
        if (ok && !col->per_item)
            ok = d->shape[1] == o->steps;
        if (ok && a->n >= 0)
            ok = d->shape[0] == a->n;
        if (!ok) {
            snprintf(text, cap, "insert: column '%s': dtype or shape does not match the schema "
                     "(%s, [n%s, ...] with every column's n equal)", col->name,
                     gb_dtype_name(col->dtype), col->per_item ? "" : ", T");
            return -1;
        }
        a->n = d->shape[0];
        a->src[c] = t;
    }
    return 0;
}

/* Checks the optional "priority" and "length" and refuses any other tensor that is not a
 * column (a misspelt optional field is not ignored). Returns 0 or -1 (text set). */
static int insert_optional(const gb_replay_options *o, const gb_wire_msg *m, insert_args *a,
                           char *text, size_t cap)
{
    int tp = gb_wire_msg_find(m, "priority"), tl = gb_wire_msg_find(m, "length");
    for (int t = 0; t < m->hdr.ntensors; t++) {
        const char *name = m->hdr.tensors[t].name;
        if (t != tp && t != tl && gb_server_column_index(o, name) < 0) {
            snprintf(text, cap, "insert: unknown tensor '%s' (an insert carries the columns "
                     "and, optionally, 'priority' and 'length')", name);
            return -1;
        }
    }
    a->prio = NULL;
    a->len = NULL;
    /* their dtypes and ranks are the request's table's to check; their length is n */
    if (tp >= 0) {
        if (m->hdr.tensors[tp].shape[0] != a->n) {
            snprintf(text, cap, "insert: 'priority' must be float64[n]");
            return -1;
        }
        a->prio = gb_wire_msg_tensor(m, tp).data;
    }
    if (tl < 0)
        return 0;
    if (m->hdr.tensors[tl].shape[0] != a->n) {
        snprintf(text, cap, "insert: 'length' must be int32[n]");
        return -1;
    }
    a->len = gb_wire_msg_tensor(m, tl).data;
    for (int64_t i = 0; i < a->n; i++)
        if (a->len[i] < 1 || a->len[i] > o->steps) {
            snprintf(text, cap, "insert: item %lld: length %d outside 1..%lld (the item's valid "
                     "steps, at most T)", (long long)i, a->len[i], (long long)o->steps);
            return -1;
        }
    return 0;
}

/* A per-step 'valid' column (datasets) says the same as length: the first length steps; without
 * a length tensor it gives the lengths. Fills lengths[n]. Returns 0 or -1 (text set). */
static int insert_valid(const gb_replay_options *o, const gb_wire_msg *m, const insert_args *a,
                        int32_t *lengths, char *text, size_t cap)
{
    int cv = gb_server_column_index(o, "valid");
    if (cv < 0 || o->columns[cv].per_item || o->columns[cv].dtype != GB_DTYPE_UINT8 ||
        o->columns[cv].ndim != 0)
        return 0;
    const uint8_t *valid = gb_wire_msg_tensor(m, a->src[cv]).data;
    for (int64_t i = 0; i < a->n; i++) {
        const uint8_t *v = valid + i * o->steps;
        int32_t k = 0;
        while (k < o->steps && v[k])
            k++;
        int64_t bad = k;
        while (bad < o->steps && !v[bad])
            bad++;
        const char *why = k == 0 ? "no valid step"
                          : bad < o->steps ? "a valid step after an invalid one"
                          : a->len && a->len[i] != k ? "its 'length' disagrees"
                                                     : NULL;
        if (why) {
            snprintf(text, cap, "insert: item %lld: 'valid' has %d leading valid steps and %s "
                     "(valid marks the first length steps, length >= 1)", (long long)i, k, why);
            return -1;
        }
        lengths[i] = k;
    }
    return 0;
}

/* Writes the items into the table (waiting up to server.max_wait_s for room). Returns 0 or the
 * replay's error (e set). */
static int insert_write(const srv_table *tb, const gb_wire_msg *m, const insert_args *a,
                        int64_t *idx, const int32_t *lengths, const int64_t *versions,
                        double max_wait_s, gb_error *e)
{
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(tb->r, tables);
    int rc = gb_replay_allocate(tb->r, a->n, idx, max_wait_s, e);
    if (rc)
        return rc;
    for (int c = 0; c < o->ncolumns; c++) {
        gb_tensor_view v = gb_wire_msg_tensor(m, a->src[c]);
        size_t row = tables[c].block_bytes;
        for (int64_t i = 0; i < a->n; i++)
            memcpy(gb_replay_block(tb->r, c, idx[i]), (const char *)v.data + (size_t)i * row,
                   row);
    }
    rc = gb_replay_commit(tb->r, a->n, idx, a->prio, lengths, versions, e);
    if (rc)
        gb_replay_abort(tb->r, a->n, idx, NULL);
    return rc;
}

int gb_server_op_insert(worker *w, const srv_request *r, gb_error *err)
{
    gb_server *s = w->s;
    const gb_wire_msg *m = r->m;
    const srv_table *tb = r->tb;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    insert_args a;
    char text[GB_WIRE_TEXT_MAX];
    if (insert_columns(o, m, &a, text, sizeof text))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    if (gb_server_check_rows(s, a.n, "insert:", " items", text, sizeof text) ||
        insert_optional(o, m, &a, text, sizeof text))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    int64_t *idx = malloc((size_t)a.n * (sizeof(int64_t) * 2 + sizeof(int32_t)));
    if (!idx)
        return gb_server_send_error(w, m, GB_ENOMEM, "insert: out of memory");
    int64_t *versions = idx + a.n;
    int32_t *lengths = (int32_t *)(versions + a.n);
    for (int64_t i = 0; i < a.n; i++) {
        versions[i] = m->hdr.policy_version < 0 ? 0 : m->hdr.policy_version;
        lengths[i] = a.len ? a.len[i] : (int32_t)o->steps;
    }
    if (insert_valid(o, m, &a, lengths, text, sizeof text)) {
        free(idx);
        return gb_server_send_error(w, m, GB_EINVAL, text);
    }
    gb_error e = {0};
    int rc = insert_write(tb, m, &a, idx, lengths, versions, s->o.max_wait_s, &e);
    free(idx);
    if (rc)
        return gb_server_send_error(w, m, rc, e.msg);
    gb_replay_stats st;
    gb_replay_stats_get(tb->r, &st);
    gb_wire_header h;
    gb_server_reply_init(&h, w, m);
    gb_serve_inserted out = {.n = a.n, .size = st.size};
    return gb_server_reply_done(w, m, GB_SERVE_INSERT, &out, &h, NULL, err);
}

int gb_server_op_update(worker *w, const srv_request *r, gb_error *err)
{
    const gb_wire_msg *m = r->m;
    /* present, of their dtypes and vectors: the request's table says so */
    int ti = gb_wire_msg_find(m, "index"), tp = gb_wire_msg_find(m, "priority"),
        tk = gb_wire_msg_find(m, "key");
    int64_t n = m->hdr.tensors[ti].shape[0];
    if (m->hdr.tensors[tp].shape[0] != n || (tk >= 0 && m->hdr.tensors[tk].shape[0] != n))
        return gb_server_send_error(w, m, GB_EINVAL, "update: 'index', 'priority' and 'key' "
                                    "must have one length n");
    char text[GB_WIRE_TEXT_MAX];
    if (gb_server_check_rows(w->s, n, "update:", " items", text, sizeof text))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    int64_t skipped = 0;
    gb_error e = {0};
    int rc = gb_replay_update_priorities(r->tb->r, n, gb_wire_msg_tensor(m, ti).data,
                                         tk >= 0 ? gb_wire_msg_tensor(m, tk).data : NULL,
                                         gb_wire_msg_tensor(m, tp).data, &skipped, &e);
    if (rc)
        return gb_server_send_error(w, m, rc, e.msg);
    gb_wire_header h;
    gb_server_reply_init(&h, w, m);
    gb_serve_updated out = {.n = n, .skipped = skipped};
    return gb_server_reply_done(w, m, GB_SERVE_UPDATE, &out, &h, NULL, err);
}
