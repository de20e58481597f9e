/* workers/server/server_sample.c: the data server's sample request in mode item: items drawn by the
 * table's selectors, rate-limited (a request that must wait is parked by server_dispatch.c and
 * retried here), copied into a reply buffer sent without a further copy. */
#include "workers/server/server_internal.h"

#include "runtime/base/clock.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* What an item sample asks for, read and checked. */
typedef struct item_args {
    int64_t batch, t0, t1, selector;
} item_args;

double gb_server_sample_wait_s(const gb_server *s, const gb_serve_request *q)
{
    return q->timeout_ms < 0 ? s->o.max_wait_s
                             : fmin(s->o.max_wait_s, (double)q->timeout_ms / 1000.0);
}

/* Refuses a selector the table does not offer, naming the ones it does. Returns 0 or -1 (text
 * set). */
static int check_selector(const srv_table *tb, int64_t selector, char *text, size_t cap)
{
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    unsigned offered = gb_replay_selectors(tb->r);
    if (selector == GB_REPLAY_SELECTOR_PRIMARY ||
        (selector >= 0 && selector < GB_REPLAY_SELECTORS && (offered & (1u << selector))))
        return 0;
    char have[96];
    gb_replay_selector_names(offered, ", ", have, sizeof have);
    if (selector < 0 || selector >= GB_REPLAY_SELECTORS)
        snprintf(text, cap, "sample: unknown selector %lld; this server offers %s (default %s)",
                 (long long)selector, have, gb_replay_selector_name(o->selector));
    else
        snprintf(text, cap, "sample: this server has no '%s' selector; it offers %s (default "
                 "%s; server.replay.extra_selectors adds weighted or topk)",
                 gb_replay_selector_name((int)selector), have,
                 gb_replay_selector_name(o->selector));
    return -1;
}

/* Reads and checks the request's batch, step range and selector. Returns 0 or -1 (text set). */
static int item_args_read(const gb_server *s, const srv_table *tb, const gb_serve_request *q,
                          item_args *a, char *text, size_t cap)
{
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    a->batch = q->batch;
    a->t0 = q->t0;
    a->t1 = q->t1;
    a->selector = q->selector;
    if (a->t1 == 0)
        a->t1 = o->steps;
    if (gb_server_check_rows(s, a->batch, "sample: batch", "", text, cap))
        return -1;
    if (a->t0 < 0 || a->t1 <= a->t0 || a->t1 > o->steps) {
        snprintf(text, cap, "sample: step range [%lld, %lld) is not inside [0, %lld)",
                 (long long)a->t0, (long long)a->t1, (long long)o->steps);
        return -1;
    }
    return check_selector(tb, a->selector, text, cap);
}

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

/* Draws the batch (never waiting here: the limiter's timeout means park, or, past its deadline,
 * the limiter's error). Returns 0 with w->sel pinned, GB_SERVE_PARK, or an error (e set). */
static int draw(worker *w, const srv_request *r, const parked *pk, const item_args *a,
                gb_error *e)
{
    gb_replay_request req = gb_replay_request_default(a->batch);
    req.t0 = (int32_t)a->t0;
    req.t1 = (int32_t)a->t1;
    req.timeout_s = 0; /* never here: a request that must wait is parked */
    req.selector = (int)a->selector;
    double wait_s = gb_server_sample_wait_s(w->s, &r->q);
    int rc = gb_replay_sample(r->tb->r, &req, &w->sel, e);
    if (rc != GB_ETIMEOUT)
        return rc;
    double now = gb_now_s();
    if (!pk ? wait_s > 0 : now < pk->deadline)
        return GB_SERVE_PARK;
    /* its time is up: the limiter's reason, with the time it waited */
    char text[GB_WIRE_TEXT_MAX];
    const char *why = strstr(e->msg, " s: ");
    snprintf(text, sizeof text, "sample: timed out after %.3f s (of %.3f s allowed)%s%s",
             pk ? now - pk->since : 0.0, wait_s, why ? ": " : "", why ? why + 4 : "");
    return gb_error_set(e, rc, "%s", text);
}

/* Fills the reply from the pinned selection, releases it and sends. */
static int send_items(worker *w, const srv_request *r, sample_reply *sr,
                      const gb_replay_table *tables, const item_args *a, uint64_t data_bytes,
                      gb_error *err)
{
    const srv_table *tb = r->tb;
    const gb_replay_selection *sel = &w->sel;
    int64_t n = sel->n;
    gather(tb->r, sel, tables, sr->dst, sr->ncols, (int32_t)a->t0, (int32_t)a->t1, sr->length);
    memcpy(sr->index, sel->index, (size_t)n * 8);
    memcpy(sr->key, sel->key, (size_t)n * 8);
    memcpy(sr->prob, sel->prob, (size_t)n * 8);
    memcpy(sr->weight, sel->weight, (size_t)n * 4);
    gb_serve_sampled out = {.n = n, .size = sel->size, .selector = sel->selector, .epoch = -1};
    gb_replay_release(tb->r, &w->sel);
    return gb_server_sample_reply_send(w, r, sr, &out, data_bytes, err);
}

int gb_server_op_sample(worker *w, const srv_request *r, const parked *pk, gb_error *err)
{
    gb_server *s = w->s;
    const srv_table *tb = r->tb;
    const gb_wire_msg *m = r->m;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    char text[GB_WIRE_TEXT_MAX];
    item_args a;
    if (item_args_read(s, tb, &r->q, &a, text, sizeof text))
        return gb_server_send_error(w, m, GB_EINVAL, text);
    sample_reply sr = {.rows = a.batch, .S = a.t1 - a.t0};
    if ((sr.ncols = gb_server_parse_columns(o, m, sr.cols, text, sizeof text)) < 0)
        return gb_server_send_error(w, m, GB_EINVAL, text);
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(tb->r, tables);
    uint64_t data_bytes = 0;
    for (int k = 0; k < sr.ncols; k++) {
        const gb_replay_table *t = &tables[sr.cols[k]];
        data_bytes += (uint64_t)a.batch * (t->per_item ? t->block_bytes
                                                       : (size_t)sr.S * t->step_bytes);
    }
    if (data_bytes > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, sizeof text, "sample: a reply of %llu data bytes exceeds "
                 "server.max_batch_bytes = %lld; ask for fewer items, columns or steps",
                 (unsigned long long)data_bytes, (long long)s->o.max_batch_bytes);
        return gb_server_send_error(w, m, GB_EINVAL, text);
    }
    gb_error e = {0};
    int rc = draw(w, r, pk, &a, &e);
    if (rc == GB_SERVE_PARK)
        return rc;
    if (rc)
        return gb_server_send_error(w, m, rc, e.msg);
    if (gb_server_sample_reply_alloc(s, tables, &sr)) {
        gb_replay_release(tb->r, &w->sel);
        return gb_server_send_error(w, m, GB_ENOMEM, "sample: out of memory for the reply");
    }
    /* the bytes sent: the rows drawn, not the batch asked */
    uint64_t sent = 0;
    for (int k = 0; k < sr.ncols; k++)
        sent += (uint64_t)w->sel.n * sr.col_row[k];
    return send_items(w, r, &sr, tables, &a, sent, err);
}
