/* workers/server/server_info.c: the data server's info request (a table's schema, counters, limits,
 * selectors, episode index) and its checkpoint (the default table's, on request or at exit). */
#include "workers/server/server_internal.h"

#include "runtime/base/log.h"

#include <stdio.h>
#include <string.h>

/* INFO's "weighted": the weighted selector's sum of priority^alpha and beta, as decimal strings
 * that read back exactly (into buf, 2 x GB_WIRE_WORD_MAX bytes): what a client sampling across
 * several servers needs for the global probabilities and importance weights
 * (workers/server/client/python/gearbox_shards.py). */
static int info_weighted(gb_replay *r, gb_serve_info *in, char (*buf)[GB_WIRE_WORD_MAX],
                         gb_error *err)
{
    double total = 0;
    int64_t size = 0;
    int rc = gb_replay_weight_total(r, GB_SELECTOR_WEIGHTED, &total, &size, err);
    if (rc)
        return rc;
    snprintf(buf[0], GB_WIRE_WORD_MAX, "%.17g", total);
    snprintf(buf[1], GB_WIRE_WORD_MAX, "%.17g", gb_replay_options_of(r)->beta);
    in->weighted = (gb_wire_strs){.n = 2, .v = {buf[0], buf[1]}};
    return 0;
}

/* One 0-row tensor per column, [0, T, *shape] or [0, *shape] (per item); the per-item mask. */
static int64_t info_columns(const gb_replay_options *o, gb_wire_header *h)
{
    uint64_t mask = 0;
    h->ntensors = o->ncolumns;
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        gb_tensor_desc *d = &h->tensors[c];
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
    return (int64_t)mask;
}

int gb_server_op_info(worker *w, const srv_request *r, gb_error *err)
{
    const gb_server *s = w->s;
    const srv_table *tb = r->tb;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    gb_replay_stats st;
    gb_replay_stats_get(tb->r, &st);
    gb_wire_header h;
    gb_server_reply_init(&h, w, r->m);
    gb_serve_info in = {
        .size = st.size, .capacity = st.capacity, .steps = o->steps,
        .inserts = (int64_t)st.inserts, .samples = (int64_t)st.samples,
        .max_batch_rows = s->o.max_batch_rows, .max_batch_bytes = s->o.max_batch_bytes,
        .selector = gb_replay_selector_name(o->selector),
        .remover = gb_config_enum_name("trainer.replay.remover", o->remover),
        .per_item = info_columns(o, &h), .episodes = gb_episodes_count(tb->ep),
        .transitions = gb_episodes_transitions(tb->ep), .max_len = tb->ep ? tb->ep->max_len : 0};
    unsigned offered = gb_replay_selectors(tb->r); /* named in kind order */
    for (int k = 0; k < 32 && in.selectors.n < GB_SERVE_SELECTOR_KINDS; k++)
        if (offered & (1u << k))
            in.selectors.v[in.selectors.n++] = gb_replay_selector_name(k);
    for (int k = 0; k < s->ntables; k++)
        in.tables.v[in.tables.n++] = s->tables[k].name;
    char weighted[2][GB_WIRE_WORD_MAX];
    int rc;
    if ((offered & (1u << GB_SELECTOR_WEIGHTED)) &&
        (rc = info_weighted(tb->r, &in, weighted, err)))
        return rc;
    gb_wire_payload pl[GB_WIRE_MAX_TENSORS];
    for (int c = 0; c < h.ntensors; c++)
        pl[c] = (gb_wire_payload){.data = ""};
    return gb_server_reply_done(w, r->m, GB_SERVE_INFO, &in, &h, pl, err);
}

/* Writes the default table's checkpoint now, serialised with other checkpoint requests (blocks
 * while one is written). Returns 0, GB_EUNSUPPORTED (no checkpoint path) or
 * gb_replay_checkpoint's error. */
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

int gb_server_op_checkpoint(worker *w, const srv_request *r, gb_error *err)
{
    const gb_wire_msg *m = r->m;
    if (r->tb != &w->s->tables[0])
        return gb_server_send_error(w, m, GB_EUNSUPPORTED, "checkpoint: only the default table "
                                    "has a checkpoint (server.checkpoint)");
    gb_error e = {0};
    int rc = gb_server_checkpoint(w->s, &e);
    if (rc)
        return gb_server_send_error(w, m, rc, e.msg);
    gb_wire_header h;
    gb_server_reply_init(&h, w, m);
    snprintf(h.text, sizeof h.text, "%.*s", (int)sizeof h.text - 1, w->s->checkpoint);
    return gb_server_reply_done(w, m, GB_SERVE_CHECKPOINT, NULL, &h, NULL, err);
}
