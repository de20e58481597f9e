/* workers/server/client/client.c: the C client of the offline-RL data server (API in
 * workers/server/client/client.h). */
#include "workers/server/client/client.h"

#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/wire.h"
#include "workers/server/server_protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct gb_client {
    void *zctx, *sock;
    gb_curve *curve; /* gb_client_open_curve: the context's keys */
    int timeout_ms;
    uint64_t seq;
    char endpoint[256];
    char table[32]; /* gb_client_use_table: "" the default */
    gb_wire_msg reply;
};

/* The client keys of gb_client_open_curve: the server's public key and the client's pair (from
 * key_file, or a fresh one). */
static int client_keys(gb_curve_keys *k, const char *server_public, const char *key_file,
                       gb_error *err)
{
    memset(k, 0, sizeof *k);
    if (!server_public || strlen(server_public) != GB_CURVE_KEY_Z85 - 1)
        return gb_error_set(err, GB_EINVAL, "client: the server's public key must be 40 Z85 "
                            "characters");
    memcpy(k->server_public, server_public, GB_CURVE_KEY_Z85);
    if (key_file && key_file[0])
        return gb_curve_keypair_read(key_file, k->client_public, k->client_secret, err);
    if (!gb_curve_available() || zmq_curve_keypair(k->client_public, k->client_secret) != 0)
        return gb_error_set(err, GB_EUNSUPPORTED, "client: this libzmq has no CURVE");
    return 0;
}

/* A client without CURVE (see gb_client_open_curve). */
int gb_client_open(gb_client **out, const char *endpoint, int timeout_ms, gb_error *err)
{
    return gb_client_open_curve(out, endpoint, timeout_ms, NULL, NULL, err);
}

/* Creates c with its own ZeroMQ context and DEALER, connected (not waiting for the server).
 * Returns 0 with *out set (gb_client_close), or GB_EINVAL, GB_ENOMEM, GB_EUNSUPPORTED, GB_EZMQ. */
int gb_client_open_curve(gb_client **out, const char *endpoint, int timeout_ms,
                         const char *server_public, const char *key_file, gb_error *err)
{
    *out = NULL;
    if (!endpoint || !endpoint[0] || timeout_ms <= 0)
        return gb_error_set(err, GB_EINVAL, "client: an endpoint and a positive timeout needed");
    gb_client *c = calloc(1, sizeof *c);
    if (!c)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    c->timeout_ms = timeout_ms;
    gb_wire_msg_init(&c->reply);
    int zero = 0;
    c->zctx = zmq_ctx_new();
    if (c->zctx && server_public) {
        gb_curve_keys k;
        int rc = client_keys(&k, server_public, key_file, err);
        gb_curve_opts o = {.keys = &k};
        if (rc == 0)
            rc = gb_curve_attach(&c->curve, c->zctx, &o, err);
        explicit_bzero(&k, sizeof k);
        if (rc) {
            gb_client_close(c);
            return rc;
        }
    }
    c->sock = c->zctx ? zmq_socket(c->zctx, ZMQ_DEALER) : NULL;
    if (!c->sock || zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_RCVHWM, &zero, sizeof zero) != 0 ||
        gb_curve_connect(c->zctx, c->sock, endpoint) != 0) {
        int rc = gb_wire_zmq_error(err, "client: connect");
        gb_error_prefix(err, "%s", endpoint);
        gb_client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Closes the socket and terminates c's context (a pending request is dropped); NULL is fine. */
void gb_client_close(gb_client *c)
{
    if (!c)
        return;
    gb_wire_msg_release(&c->reply);
    if (c->sock)
        zmq_close(c->sock);
    gb_curve_detach(c->curve);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    free(c);
}

/* Sends a request for op and receives its reply into c->reply (views valid until the next
 * call), its attributes read by op's reply table into out (op's reply struct; NULL: none).
 * Returns 0, the server's status with its text, GB_ETIMEOUT, GB_EPROTO. */
static int roundtrip(gb_client *c, gb_wire_header *h, const gb_wire_payload *pl, int op,
                     void *out, gb_error *err)
{
    gb_wire_msg_release(&c->reply);
    h->seq = ++c->seq;
    int rc = gb_wire_send(c->sock, NULL, 0, h, pl, 0, err);
    if (rc)
        return rc;
    double deadline = gb_now_s() + c->timeout_ms / 1000.0;
    for (;;) {
        int left = (int)((deadline - gb_now_s()) * 1000.0);
        if (left <= 0)
            return gb_error_set(err, GB_ETIMEOUT, "client: no reply from %s within %d ms",
                                c->endpoint, c->timeout_ms);
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, left);
        if (n < 0)
            return gb_wire_zmq_error(err, "client: poll");
        if (n == 0)
            continue;
        rc = gb_wire_recv(c->sock, &c->reply, 0, ZMQ_DONTWAIT, err);
        if (rc == GB_EAGAIN)
            continue;
        if (rc)
            return rc;
        if (c->reply.hdr.seq != c->seq) { /* a late reply to a request that timed out */
            gb_wire_msg_release(&c->reply);
            continue;
        }
        const gb_wire_header *r = &c->reply.hdr;
        if (r->status != 0)
            return gb_error_set(err, r->status < 0 ? r->status : GB_EPROTO, "server: %s",
                                r->text);
        if (gb_wire_schema_read(gb_serve_reply_schemas[op], r, out, err))
            return gb_error_prefix(err, "client: unexpected reply");
        return 0;
    }
}

/* A request's attributes for op at their defaults, naming table (or c's table in use; none:
 * the default table). */
static gb_serve_request request_init(const gb_client *c, int op, const char *table)
{
    if (!table)
        table = c->table;
    return (gb_serve_request){.op = op, .table = table[0] ? table : NULL, .timeout_ms = -1,
                              .selector = -1};
}

/* A request header carrying q, written by its operation's table. Returns 0 or GB_EINVAL (a
 * value out of its bounds). */
static int request_header(gb_wire_header *h, const gb_serve_request *q, gb_error *err)
{
    gb_wire_header_init(h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    int rc = gb_wire_schema_write(gb_serve_request_schemas[q->op], q, h, err);
    return rc ? gb_error_prefix(err, "client") : 0;
}

/* Names the table later requests go to (copied). Returns 0 or GB_EINVAL. */
int gb_client_use_table(gb_client *c, const char *table, gb_error *err)
{
    if (table && strlen(table) > 31)
        return gb_error_set(err, GB_EINVAL, "client: table name over 31 bytes");
    snprintf(c->table, sizeof c->table, "%s", table ? table : "");
    return 0;
}

/* The columns of an INFO reply r: its 0-row tensors, per item where bit c of mask is set.
 * Returns 0 or GB_EPROTO. */
static int info_columns(const gb_wire_header *r, int64_t mask, gb_client_info *info,
                        gb_error *err)
{
    if (r->ntensors > GB_CLIENT_MAX_COLUMNS)
        return gb_error_set(err, GB_EPROTO, "client: malformed info reply");
    info->ncolumns = r->ntensors;
    for (int k = 0; k < r->ntensors; k++) {
        const gb_tensor_desc *d = &r->tensors[k];
        gb_client_column *col = &info->columns[k];
        snprintf(col->name, sizeof col->name, "%s", d->name);
        col->dtype = d->dtype;
        col->per_item = (int)(((uint64_t)mask >> k) & 1);
        int skip = col->per_item ? 1 : 2;
        col->ndim = d->rank - skip;
        if (col->ndim < 0 || col->ndim > GB_CLIENT_MAX_DIMS)
            return gb_error_set(err, GB_EPROTO, "client: column '%s': bad rank", d->name);
        col->step_bytes = gb_dtype_size(d->dtype);
        for (int j = 0; j < col->ndim; j++) {
            col->shape[j] = d->shape[skip + j];
            col->step_bytes *= (size_t)col->shape[j];
        }
    }
    return 0;
}

/* INFO of the table in use into info (copied). Blocks up to the timeout. Returns 0,
 * GB_ETIMEOUT, GB_EPROTO, or the server's error. */
int gb_client_get_info(gb_client *c, gb_client_info *info, gb_error *err)
{
    gb_wire_header h;
    gb_serve_request q = request_init(c, GB_SERVE_INFO, NULL);
    gb_serve_info in;
    int rc = request_header(&h, &q, err);
    if (rc || (rc = roundtrip(c, &h, NULL, GB_SERVE_INFO, &in, err)))
        return rc;
    *info = (gb_client_info){
        .size = in.size, .capacity = in.capacity, .steps = in.steps,
        .inserts = (uint64_t)in.inserts, .samples = (uint64_t)in.samples,
        .max_batch_rows = in.max_batch_rows, .max_batch_bytes = in.max_batch_bytes,
        .episodes = in.episodes, .transitions = in.transitions, .max_episode_len = in.max_len};
    snprintf(info->selector, sizeof info->selector, "%s", in.selector);
    snprintf(info->remover, sizeof info->remover, "%s", in.remover);
    size_t o = 0;
    for (int k = 0; k < in.selectors.n && o < sizeof info->selectors; k++)
        o += (size_t)snprintf(info->selectors + o, sizeof info->selectors - o, "%s%s",
                              k ? "," : "", in.selectors.v[k]);
    if (o >= sizeof info->selectors)
        return gb_error_set(err, GB_EPROTO, "client: info reply: selector list too long");
    for (int k = 0; k < in.tables.n && k < GB_CLIENT_MAX_TABLES; k++)
        snprintf(info->tables[info->ntables++], sizeof info->tables[0], "%s", in.tables.v[k]);
    if (in.weighted.n == 2) { /* exact decimal strings (workers/server/server_info.c) */
        info->has_weight_total = 1;
        info->weight_total = strtod(in.weighted.v[0], NULL);
        info->beta = strtod(in.weighted.v[1], NULL);
    }
    return info_columns(&c->reply.hdr, in.per_item, info, err);
}

/* A column's index in info by name, or -1. */
int gb_client_column_index(const gb_client_info *info, const char *name)
{
    for (int c = 0; c < info->ncolumns; c++)
        if (strcmp(info->columns[c].name, name) == 0)
            return c;
    return -1;
}

/* A static name, or NULL (workers/server/server_protocol.h). */
const char *gb_client_selector_name(int kind) { return gb_serve_selector_name(kind); }

/* 1 when name is in info->selectors. */
int gb_client_has_selector(const gb_client_info *info, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    for (const char *p = info->selectors; n && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p += len + (end ? 1 : 0);
    }
    return 0;
}

/* A sample request's header (and its "columns" tensor, names packed into the caller's buffer
 * names of cap bytes). Returns 0 or GB_EINVAL. */
static int sample_request(const gb_client *c, const gb_client_sample_req *req, gb_wire_header *h,
                          gb_wire_payload *pl, char *names, size_t cap, gb_error *err)
{
    if (req->table && strlen(req->table) > 31)
        return gb_error_set(err, GB_EINVAL, "client: table name over 31 bytes");
    gb_serve_request q = request_init(c, GB_SERVE_SAMPLE, req->table);
    q.batch = req->batch;
    q.t0 = req->t0;
    q.t1 = req->t1;
    q.timeout_ms = req->timeout_ms;
    if (req->mode && req->mode[0]) {
        if (strlen(req->mode) > 31 || (req->cursor && strlen(req->cursor) > 31))
            return gb_error_set(err, GB_EINVAL, "client: mode or cursor name over 31 bytes");
        q.mode = req->mode;
        q.len = req->len > 0 ? req->len : 0;
        q.cursor = req->cursor && req->cursor[0] ? req->cursor : NULL;
        q.reset = req->reset ? 1 : 0;
    }
    int rc = gb_serve_selector_kind(req->selector, &q.selector, err);
    if (rc || (rc = request_header(h, &q, err)) || req->ncolumns <= 0)
        return rc;
    if (req->ncolumns > GB_CLIENT_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "client: too many columns");
    size_t nl = 0;
    for (int k = 0; k < req->ncolumns; k++) {
        size_t l = strlen(req->columns[k]);
        if (l >= 32 || nl + l + 1 > cap)
            return gb_error_set(err, GB_EINVAL, "client: column name too long");
        memcpy(names + nl, req->columns[k], l + 1);
        nl += l + 1;
    }
    int64_t len = (int64_t)nl;
    gb_wire_set_tensor(&h->tensors[0], "columns", GB_DTYPE_UINT8, 1, &len, NULL);
    h->ntensors = 1;
    pl[0] = (gb_wire_payload){.data = names};
    return 0;
}

/* The rows' metadata of a sample reply m (n rows): "index", "key", "prob", "weight", "length",
 * copied to out's arrays that are set. Returns 0 or GB_EPROTO. */
static int sample_meta(const gb_wire_msg *m, int64_t n, gb_client_batch *out, gb_error *err)
{
    static const char *const meta_names[] = {"index", "key", "prob", "weight", "length"};
    static const size_t meta_size[] = {8, 8, 8, 4, 4};
    void *meta_dst[] = {out->index, out->key, out->prob, out->weight, out->length};
    for (int k = 0; k < 5; k++) {
        gb_tensor_view v = gb_wire_msg_tensor(m, k);
        if (strcmp(v.desc->name, meta_names[k]) != 0 || v.bytes != (size_t)n * meta_size[k])
            return gb_error_set(err, GB_EPROTO, "client: sample reply: bad '%s'",
                                meta_names[k]);
        if (meta_dst[k])
            memcpy(meta_dst[k], v.data, v.bytes);
    }
    return 0;
}

/* An offline mode's reply: "episode" [n] and "timestep" [n, S] last. Returns 0 or GB_EPROTO. */
static int sample_offline(const gb_wire_msg *m, int64_t n, int64_t batch, gb_client_batch *out,
                          gb_error *err)
{
    gb_tensor_view ve = gb_wire_msg_tensor(m, m->hdr.ntensors - 2);
    gb_tensor_view vt = gb_wire_msg_tensor(m, m->hdr.ntensors - 1);
    if (m->hdr.ntensors < 7 || strcmp(ve.desc->name, "episode") != 0 ||
        strcmp(vt.desc->name, "timestep") != 0 || ve.bytes != (size_t)n * 8 ||
        vt.desc->rank != 2 || vt.desc->shape[0] != n)
        return gb_error_set(err, GB_EPROTO, "client: sample reply: no episode/timestep");
    out->steps = vt.desc->shape[1];
    if (out->episode)
        memcpy(out->episode, ve.data, ve.bytes);
    if (out->timestep) {
        if (vt.bytes > (size_t)batch * (size_t)out->steps * 4)
            return gb_error_set(err, GB_EPROTO, "client: sample reply: bad timestep");
        memcpy(out->timestep, vt.data, vt.bytes);
    }
    return 0;
}

static int sample(gb_client *c, const gb_client_sample_req *req, gb_client_batch *out,
                  const void **views, size_t *bytes, gb_error *err)
{
    gb_wire_header h;
    gb_wire_payload pl[1];
    char names[GB_CLIENT_MAX_COLUMNS * 32];
    gb_serve_sampled got;
    int rc = sample_request(c, req, &h, pl, names, sizeof names, err);
    if (rc || (rc = roundtrip(c, &h, pl, GB_SERVE_SAMPLE, &got, err)))
        return rc;
    const gb_wire_msg *m = &c->reply;
    if (m->hdr.ntensors < 5 || got.n > req->batch)
        return gb_error_set(err, GB_EPROTO, "client: malformed sample reply");
    int64_t n = got.n;
    out->n = n;
    out->size = got.size;
    out->selector = (int)got.selector;
    if ((rc = sample_meta(m, n, out, err)))
        return rc;
    int offline = req->mode && req->mode[0] && strcmp(req->mode, "item") != 0;
    int ncols = m->hdr.ntensors - 5 - (offline ? 2 : 0);
    out->steps = req->t1 ? req->t1 - req->t0 : 0;
    out->epoch = got.epoch;
    out->epoch_pos = got.pos;
    out->epoch_end = (int)got.end;
    if (offline && (rc = sample_offline(m, n, req->batch, out, err)))
        return rc;
    if (req->ncolumns > 0 && ncols != req->ncolumns)
        return gb_error_set(err, GB_EPROTO, "client: sample reply: %d columns, asked %d",
                            ncols, req->ncolumns);
    for (int k = 0; k < ncols; k++) {
        gb_tensor_view v = gb_wire_msg_tensor(m, 5 + k);
        if (views)
            views[k] = v.data;
        if (bytes)
            bytes[k] = v.bytes;
        if (!out->data || !out->data[k])
            continue;
        if (v.bytes > out->cap[k])
            return gb_error_set(err, GB_EINVAL, "client: column '%s': %zu bytes, buffer holds "
                                "%zu", v.desc->name, v.bytes, out->cap[k]);
        memcpy(out->data[k], v.data, v.bytes);
    }
    return 0;
}

/* A sample copied into out's buffers (caller-owned). Blocks up to the timeout. */
int gb_client_sample(gb_client *c, const gb_client_sample_req *req, gb_client_batch *out,
                     gb_error *err)
{
    return sample(c, req, out, NULL, NULL, err);
}

/* A sample whose columns are views of c's last reply (valid until c's next call). */
int gb_client_sample_views(gb_client *c, const gb_client_sample_req *req, gb_client_batch *out,
                           const void **views, size_t *bytes, gb_error *err)
{
    gb_client_batch o = *out;
    o.data = NULL; /* no copies */
    int rc = sample(c, req, &o, views, bytes, err);
    out->n = o.n;
    out->size = o.size;
    out->selector = o.selector;
    out->steps = o.steps;
    out->epoch = o.epoch;
    out->epoch_pos = o.epoch_pos;
    out->epoch_end = o.epoch_end;
    return rc;
}

/* Sends n items (the caller's buffers, copied into the message). Blocks up to the timeout. */
int gb_client_insert(gb_client *c, const gb_client_info *info, int64_t n,
                     const void *const *cols, const double *priority, const int32_t *length,
                     int64_t policy_version, int64_t *size, gb_error *err)
{
    if (n < 1 || info->ncolumns + 2 > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL, "client: insert: n must be >= 1");
    gb_wire_header h;
    gb_serve_request q = request_init(c, GB_SERVE_INSERT, NULL);
    int rc = request_header(&h, &q, err);
    if (rc)
        return rc;
    h.policy_version = policy_version;
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    int t = 0;
    for (int k = 0; k < info->ncolumns; k++) {
        const gb_client_column *col = &info->columns[k];
        int64_t shape[GB_WIRE_MAX_RANK];
        int rank = 0;
        shape[rank++] = n;
        if (!col->per_item)
            shape[rank++] = info->steps;
        for (int j = 0; j < col->ndim; j++)
            shape[rank++] = col->shape[j];
        if ((rc = gb_wire_set_tensor(&h.tensors[t], col->name, col->dtype, rank, shape, err)))
            return rc;
        pl[t++] = (gb_wire_payload){.data = cols[k]};
    }
    if (priority) {
        gb_wire_set_tensor(&h.tensors[t], "priority", GB_DTYPE_FLOAT64, 1, &n, NULL);
        pl[t++] = (gb_wire_payload){.data = priority};
    }
    if (length) {
        gb_wire_set_tensor(&h.tensors[t], "length", GB_DTYPE_INT32, 1, &n, NULL);
        pl[t++] = (gb_wire_payload){.data = length};
    }
    h.ntensors = t;
    gb_serve_inserted got;
    rc = roundtrip(c, &h, pl, GB_SERVE_INSERT, &got, err);
    if (rc == 0 && size)
        *size = got.size;
    return rc;
}

/* Sends n priorities (copied). Blocks up to the timeout; *skipped from the reply. */
int gb_client_update_priorities(gb_client *c, int64_t n, const int64_t *index,
                                const uint64_t *key, const double *priority, int64_t *skipped,
                                gb_error *err)
{
    gb_wire_header h;
    gb_serve_request q = request_init(c, GB_SERVE_UPDATE, NULL);
    int rc = request_header(&h, &q, err);
    if (rc)
        return rc;
    gb_wire_payload pl[3];
    gb_wire_set_tensor(&h.tensors[0], "index", GB_DTYPE_INT64, 1, &n, NULL);
    gb_wire_set_tensor(&h.tensors[1], "priority", GB_DTYPE_FLOAT64, 1, &n, NULL);
    pl[0] = (gb_wire_payload){.data = index};
    pl[1] = (gb_wire_payload){.data = priority};
    h.ntensors = 2;
    if (key) {
        gb_wire_set_tensor(&h.tensors[2], "key", GB_DTYPE_UINT64, 1, &n, NULL);
        pl[2] = (gb_wire_payload){.data = key};
        h.ntensors = 3;
    }
    gb_serve_updated got;
    rc = roundtrip(c, &h, pl, GB_SERVE_UPDATE, &got, err);
    if (rc == 0 && skipped)
        *skipped = got.skipped;
    return rc;
}

/* Asks for the default table's checkpoint; path (cap bytes) gets where. Blocks up to the
 * timeout (the write itself may take longer: give the client time). */
int gb_client_checkpoint(gb_client *c, char *path, size_t cap, gb_error *err)
{
    gb_wire_header h;
    gb_serve_request q = request_init(c, GB_SERVE_CHECKPOINT, NULL);
    int rc = request_header(&h, &q, err);
    if (rc == 0)
        rc = roundtrip(c, &h, NULL, GB_SERVE_CHECKPOINT, NULL, err);
    if (rc == 0 && path && cap)
        snprintf(path, cap, "%s", c->reply.hdr.text);
    return rc;
}
