/* runtime/streams/inference_batch.c: what both modes of the inference server do with requests:
 * check each one, keep the client bookkeeping, merge a batch, run the callback and answer every
 * request with its rows or an error. The serial loop (inference_server.c) and the pipelined one
 * (inference_pipelined.c) call it; it calls neither. */
#include "runtime/streams/inference.h"
#include "runtime/streams/inference_internal.h"
#include "runtime/streams/wire_messages.h"

#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

/* Allocates *m when NULL. Returns 0 or GB_ENOMEM. */
int gb_infer_msg_ensure(gb_wire_msg **m, gb_error *err)
{
    if (*m)
        return 0;
    *m = malloc(sizeof **m);
    if (!*m)
        return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
    gb_wire_msg_init(*m);
    return 0;
}

/* The client of m, as a hash of its ROUTER identity. */
static uint64_t route_hash(const gb_wire_msg *m)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < m->route_len; i++)
        h = (h ^ m->route[i]) * 1099511628211ULL;
    return h;
}

/* Records that the client of m has a request in the current batch. */
void gb_infer_note_client(gb_infer_server *s, const gb_wire_msg *m, uint64_t now)
{
    uint64_t h = route_hash(m);
    int k, oldest = 0;
    for (k = 0; k < s->nclients; k++) {
        if (s->clients[k].hash == h)
            break;
        if (s->clients[k].last_ns < s->clients[oldest].last_ns)
            oldest = k;
    }
    if (k == s->nclients) {
        if (s->nclients < SERVER_MAX_CLIENTS)
            s->nclients++;
        else
            k = oldest;
        s->clients[k].hash = h;
    }
    s->clients[k].last_ns = now;
    s->clients[k].gen = s->gen;
}

/* 1 when every client seen within the active window has a request in this batch. */
int gb_infer_all_present(const gb_infer_server *s, uint64_t now)
{
    for (int k = 0; k < s->nclients; k++) {
        const client_ent *e = &s->clients[k];
        if (e->gen != s->gen && now - e->last_ns < SERVER_ACTIVE_WINDOW_NS)
            return 0;
    }
    return 1;
}

/* Answers m with an error status (without waiting; a reply that cannot go is counted). */
void gb_infer_reply_error(gb_infer_server *s, const gb_wire_msg *m, int code, const char *text)
{
    gb_wire_header *h = &s->reply;
    gb_wire_header_init(h, GB_MSG_INFER_REPLY, s->o.role, s->o.index);
    h->seq = m->hdr.seq;
    h->status = code;
    snprintf(h->text, sizeof h->text, "%.*s", (int)sizeof h->text - 1, text); /* cut to fit */
    gb_error e;
    if (gb_wire_send(s->sock, m->route, m->route_len, h, NULL, ZMQ_DONTWAIT, &e)) {
        s->st.unsent++;
        GB_DEBUG("inference server: could not answer a request with an error: %s", e.msg);
    }
}

/* Checks a request on its own; returns its rows, or 0 after answering it with an error. */
int64_t gb_infer_request_rows(gb_infer_server *s, gb_wire_msg *m)
{
    const gb_wire_header *h = &m->hdr;
    char why[200];
    gb_error e;
    if (h->type != GB_MSG_INFER_REQUEST) {
        snprintf(why, sizeof why, "expected an infer_request, got %s", gb_msg_type_name(h->type));
        goto bad;
    }
    if (gb_wire_schema_read(&gb_schema_infer_request, h, NULL, &e)) {
        snprintf(why, sizeof why, "%.199s", e.msg);
        goto bad;
    }
    if (h->ntensors < 1) {
        snprintf(why, sizeof why, "request without tensors");
        goto bad;
    }
    if (!gb_wire_peer_is(m, h->role, h->index)) { /* an actor asks as itself only (curve.h) */
        snprintf(why, sizeof why, "sent by %s", m->peer);
        goto bad;
    }
    for (int t = 0; t < h->ntensors; t++)
        if (h->tensors[t].rank < 1 || h->tensors[t].shape[0] < 1 ||
            h->tensors[t].shape[0] != h->tensors[0].shape[0]) {
            snprintf(why, sizeof why, "tensor '%s': first dimension must be rows >= 1, the same "
                     "for every tensor", h->tensors[t].name);
            goto bad;
        }
    s->st.received++;
    return h->tensors[0].shape[0];
bad:
    s->st.rejected++;
    if (gb_log_due(s->st.rejected))
        GB_WARN("inference server: rejected a request from %s %d (%llu so far): %s",
                gb_role_name(h->role), h->index, (unsigned long long)s->st.rejected, why);
    gb_infer_reply_error(s, m, GB_EPROTO, why);
    gb_wire_msg_release(m);
    return 0;
}

/* 1 when b can join a batch that starts with a (same names, dtypes and per-row shapes). */
int gb_infer_compatible(const gb_wire_header *a, const gb_wire_header *b)
{
    if (a->ntensors != b->ntensors)
        return 0;
    for (int t = 0; t < a->ntensors; t++) {
        const gb_tensor_desc *x = &a->tensors[t], *y = &b->tensors[t];
        if (x->dtype != y->dtype || x->rank != y->rank || strcmp(x->name, y->name) != 0)
            return 0;
        for (int i = 1; i < x->rank; i++)
            if (x->shape[i] != y->shape[i])
                return 0;
    }
    return 1;
}

/* Checks what the callback produced: 1..GB_WIRE_MAX_TENSORS outputs of rows rows each. */
static int check_outputs(const gb_infer_outputs *out, int64_t rows, gb_error *err)
{
    if (out->ntensors < 1 || out->ntensors > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL, "policy callback produced %d outputs, need 1..%d",
                            out->ntensors, GB_WIRE_MAX_TENSORS);
    for (int t = 0; t < out->ntensors; t++) {
        const gb_tensor_desc *d = &out->descs[t];
        uint64_t bytes;
        if (gb_tensor_desc_bytes(d, &bytes, err) || d->rank < 1 || d->shape[0] != rows ||
            (!out->data[t] && bytes > 0))
            return gb_error_set(err, GB_EINVAL, "policy callback output '%s': needs rows (%lld) "
                                "as first dimension, a valid dtype and data", d->name,
                                (long long)rows);
    }
    return 0;
}

/* Builds the batch of slot[0..n) (rows in all): a lone request is read in place, more are
 * copied into the merge buffers (grown when needed, never shrunk). Returns 0 or GB_ENOMEM. */
int gb_infer_build_batch(gb_wire_msg **slot, int n, int64_t rows, void **merge, size_t *merge_cap,
                         gb_infer_batch *b, gb_error *err)
{
    const gb_wire_header *h0 = &slot[0]->hdr;
    b->rows = (int)rows;
    b->n_requests = n;
    b->ntensors = h0->ntensors;
    for (int t = 0; t < h0->ntensors; t++) {
        b->descs[t] = h0->tensors[t];
        b->descs[t].shape[0] = rows;
        gb_tensor_view v0 = gb_wire_msg_tensor(slot[0], t);
        size_t row_bytes = v0.bytes / (size_t)h0->tensors[t].shape[0];
        size_t need = row_bytes * (size_t)rows;
        b->inputs[t].desc = &b->descs[t];
        b->inputs[t].bytes = need;
        if (n == 1) { /* a lone request is read in place */
            b->inputs[t].data = v0.data;
            continue;
        }
        if (need > merge_cap[t]) {
            void *p = realloc(merge[t], need);
            if (!p)
                return gb_error_set(err, GB_ENOMEM, "inference server: merge buffer of %zu bytes",
                                    need);
            merge[t] = p;
            merge_cap[t] = need;
        }
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            gb_tensor_view v = gb_wire_msg_tensor(slot[i], t);
            memcpy((char *)merge[t] + off, v.data, v.bytes);
            off += v.bytes;
        }
        b->inputs[t].data = merge[t];
    }
    return 0;
}

/* Runs the callback on b and checks what it produced. */
int gb_infer_run_fn(gb_infer_server *s, const gb_infer_batch *b, gb_infer_outputs *out,
                    gb_error *err)
{
    out->ntensors = 0;
    out->policy_version = -1;
    int rc = s->o.fn(s->o.user, b, out, err);
    if (rc == 0)
        rc = check_outputs(out, b->rows, err);
    return rc;
}

/* Answers each request of slot[0..n) with its rows of out, releases them, counts the batch. */
void gb_infer_send_replies(gb_infer_server *s, gb_wire_msg **slot, int n, int64_t rows,
                           const gb_infer_outputs *out)
{
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        gb_wire_msg *m = slot[i];
        int64_t ri = m->hdr.tensors[0].shape[0];
        gb_wire_header *h = &s->reply;
        gb_wire_header_init(h, GB_MSG_INFER_REPLY, s->o.role, s->o.index);
        h->seq = m->hdr.seq;
        h->policy_version = out->policy_version;
        h->ntensors = out->ntensors;
        gb_wire_payload p[GB_WIRE_MAX_TENSORS];
        for (int t = 0; t < out->ntensors; t++) {
            h->tensors[t] = out->descs[t];
            h->tensors[t].shape[0] = ri;
            uint64_t all;
            gb_tensor_desc_bytes(&out->descs[t], &all, NULL);
            size_t row_bytes = (size_t)(all / (uint64_t)rows);
            p[t] = (gb_wire_payload){(const char *)out->data[t] + (size_t)r0 * row_bytes, NULL,
                                     NULL, NULL};
        }
        gb_error e;
        if (gb_wire_send(s->sock, m->route, m->route_len, h, p, ZMQ_DONTWAIT, &e)) {
            s->st.unsent++;
            GB_DEBUG("inference server: reply to request %llu not sent: %s",
                     (unsigned long long)m->hdr.seq, e.msg);
        }
        r0 += ri;
        gb_wire_msg_release(m);
    }
    s->st.requests += (uint64_t)n;
    s->st.rows += (uint64_t)rows;
    s->st.batches++;
}

/* Answers every request of slot[0..n) with code and text, releases them. */
void gb_infer_reply_all_error(gb_infer_server *s, gb_wire_msg **slot, int n, int code,
                              const char *text)
{
    for (int i = 0; i < n; i++) {
        gb_infer_reply_error(s, slot[i], code, text);
        gb_wire_msg_release(slot[i]);
    }
}
