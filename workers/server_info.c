/* workers/server_info.c: the data server's info request (a table's schema, counters, limits,
 * selectors, episode index) and its checkpoint (the default table's, on request or at exit). */
#include "workers/server_internal.h"

#include "runtime/log.h"

#include <stdio.h>
#include <string.h>

/* INFO's "weight_total" (the weighted selector's sum of priority^alpha) and "beta", as decimal
 * strings that read back exactly: what a client sampling across several servers needs for the
 * global probabilities and importance weights (workers/client/python/gearbox_shards.py). */
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

int gb_server_op_info(worker *w, const srv_table *tb, const gb_wire_msg *m, gb_error *err)
{
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    gb_replay_stats st;
    gb_replay_stats_get(tb->r, &st);
    gb_wire_header h;
    gb_server_reply_init(&h, w, m, GB_SERVE_INFO);
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
    return gb_server_reply_done(w, m, &h, pl, err);
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

int gb_server_op_checkpoint(worker *w, const srv_table *tb, const gb_wire_msg *m,
                            gb_error *err)
{
    if (tb != &w->s->tables[0])
        return gb_server_send_error(w, m, GB_EUNSUPPORTED, "checkpoint: only the default table "
                                    "has a checkpoint (server.checkpoint)");
    gb_error e = {0};
    int rc = gb_server_checkpoint(w->s, &e);
    if (rc)
        return gb_server_send_error(w, m, rc, e.msg);
    gb_wire_header h;
    gb_server_reply_init(&h, w, m, GB_SERVE_CHECKPOINT);
    snprintf(h.text, sizeof h.text, "%.*s", (int)sizeof h.text - 1, w->s->checkpoint);
    return gb_server_reply_done(w, m, &h, NULL, err);
}
