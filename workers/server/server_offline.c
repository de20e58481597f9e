/* workers/server/server_offline.c: the data server's sample request in an offline mode: windows,
 * transitions, whole episodes and epochs, planned over the table's episode index
 * (server_episodes.c) and copied from the loaded items; not rate-limited, never parked. */
#include "workers/server/server_internal.h"

#include <stdio.h>
#include <string.h>

/* What an offline sample asks for, read and checked. */
typedef struct offline_args {
    int64_t batch, len, reset;
    const char *cursor;
} offline_args;

/* Reads and checks the request's batch, len, reset and cursor. Returns 0 or the error code to
 * answer with (text set). */
static int offline_args_read(const gb_server *s, const srv_request *r, int mode,
                             offline_args *a, char *text, size_t cap)
{
    const srv_table *tb = r->tb;
    const gb_replay_options *o = gb_replay_options_of(tb->r);
    a->batch = r->q.batch;
    if (!tb->ep) {
        snprintf(text, cap, "sample: mode '%s': table '%s' has no episodes (they come from a "
                 "D4RL dataset loaded from its file; gearbox recordings and restored "
                 "checkpoints have none)", gb_serve_mode_name(mode), tb->name);
        return GB_EUNSUPPORTED;
    }
    if (gb_server_check_rows(s, a->batch, "sample: batch", "", text, cap))
        return GB_EINVAL;
    /* len within 1..2^24 when given: the request's table says so */
    a->len = r->q.len > 0 ? r->q.len : (mode == GB_SERVE_MODE_WINDOW ? o->steps : 1);
    a->reset = r->q.reset;
    a->cursor = r->q.cursor;
    if (mode == GB_SERVE_MODE_EPOCH && (!a->cursor || !a->cursor[0])) {
        snprintf(text, cap, "sample: mode 'epoch' needs a 'cursor' (a string naming this "
                 "reader's place in the epoch)");
        return GB_EINVAL;
    }
    return 0;
}

/* Copies row i (p->S steps of episode[i] from start[i]) into sr; fills its metadata. */
static void copy_row(const srv_table *tb, const gb_replay_status *st, const ep_plan *p,
                     const gb_replay_table *tables, sample_reply *sr, int64_t i,
                     int64_t episode, int64_t start)
{
    const gb_episodes *e = tb->ep;
    const int64_t T = e->T, S = p->S;
    int64_t left = gb_episodes_length(e, episode) - start;
    int64_t valid = left < S ? left : S;
    int64_t item0 = e->ep_item0[episode];
    int64_t first = item0 + start / T;
    sr->length[i] = (int32_t)valid;
    sr->index[i] = e->item_slot[first];
    sr->key[i] = st->item[e->item_slot[first]].seq; /* checked to be the loaded one */
    sr->prob[i] = 1.0 / (double)p->size;
    sr->weight[i] = 1.0f;
    sr->episode[i] = episode;
    for (int64_t k = 0; k < S; k++)
        sr->timestep[i * S + k] = k < valid ? (int32_t)(start + k) : 0;
    for (int c = 0; c < sr->ncols; c++) {
        const gb_replay_table *t = &tables[sr->dst[c].column];
        unsigned char *out = sr->dst[c].data;
        if (t->per_item) {
            memcpy(out + (size_t)i * t->block_bytes,
                   t->base + (size_t)e->item_slot[first] * t->stride, t->block_bytes);
            continue;
        }
        unsigned char *row = out + (size_t)(i * S) * t->step_bytes;
        for (int64_t k = 0; k < valid;) { /* runs of steps inside one item */
            int64_t step = start + k, it = item0 + step / T, at = step % T;
            int64_t run = T - at < valid - k ? T - at : valid - k;
            memcpy(row + (size_t)k * t->step_bytes,
                   t->base + (size_t)e->item_slot[it] * t->stride + (size_t)at * t->step_bytes,
                   (size_t)run * t->step_bytes);
            k += run;
        }
        memset(row + (size_t)valid * t->step_bytes, 0, (size_t)(S - valid) * t->step_bytes);
    }
}

/* Copies the planned rows (p->n rows of p->S steps) of table tb into sr. Returns 0, or -1 when
 * an item read was replaced or removed since it was loaded (its slot reused by an insert; text
 * set). */
static int gather_rows(const srv_table *tb, const ep_plan *p, const int64_t *episode,
                       const int64_t *start, const gb_replay_table *tables, sample_reply *sr,
                       char *text, size_t cap)
{
    const gb_episodes *e = tb->ep;
    const int64_t T = e->T;
    gb_replay_status st;
    gb_replay_status_view(tb->r, &st);
    for (int64_t i = 0; i < p->n; i++)
        copy_row(tb, &st, p, tables, sr, i, episode[i], start[i]);
    /* every item read must still be the one loaded (checked after the copy: a key only grows) */
    for (int64_t i = 0; i < p->n; i++) {
        int64_t item0 = e->ep_item0[episode[i]];
        for (int64_t it = item0 + start[i] / T; it <= item0 + (start[i] + sr->length[i] - 1) / T;
             it++) {
            int64_t slot = e->item_slot[it];
            if (st.state[slot] != GB_ITEM_COMMITTED ||
                (uint32_t)st.item[slot].seq != e->item_key[it] ||
                (it == item0 + start[i] / T && st.item[slot].seq != sr->key[i])) {
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

/* The data bytes of one row: per step (step_row) and per row (item_row), with the episode and
 * timestep columns. */
static void row_bytes(const gb_replay_table *tables, const sample_reply *sr, uint64_t *step_row,
                      uint64_t *item_row)
{
    *step_row = 4; /* timestep */
    *item_row = 8; /* episode */
    for (int k = 0; k < sr->ncols; k++) {
        if (tables[sr->cols[k]].per_item)
            *item_row += tables[sr->cols[k]].block_bytes;
        else
            *step_row += tables[sr->cols[k]].step_bytes;
    }
}

/* Plans the rows and checks the reply's size: before an epoch's cursor moves (its S is len)
 * and once an episode batch's S is known. Returns 0 or an error code (text set). */
static int plan(worker *w, const srv_table *tb, int mode, const offline_args *a,
                uint64_t step_row, uint64_t item_row, ep_plan *p, char *text, size_t cap)
{
    gb_server *s = w->s;
    uint64_t want = (uint64_t)a->batch * (item_row + (uint64_t)a->len * step_row);
    if (mode != GB_SERVE_MODE_EPISODE && want > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, cap, "sample: a reply of %llu data bytes exceeds server.max_batch_bytes "
                 "= %lld; ask for fewer rows, columns or steps", (unsigned long long)want,
                 (long long)s->o.max_batch_bytes);
        return GB_EINVAL;
    }
    if (gb_episodes_plan(tb->ep, mode, a->batch, a->len, a->cursor, a->reset != 0, &w->rng,
                         w->rows, w->rows + s->o.max_batch_rows, p, text, cap))
        return GB_EINVAL;
    uint64_t data_bytes = (uint64_t)p->n * (item_row + (uint64_t)p->S * step_row);
    if (data_bytes > (uint64_t)s->o.max_batch_bytes) {
        snprintf(text, cap, "sample: a reply of %llu data bytes (episodes of up to %lld steps) "
                 "exceeds server.max_batch_bytes = %lld; ask for fewer episodes or columns",
                 (unsigned long long)data_bytes, (long long)p->S,
                 (long long)s->o.max_batch_bytes);
        return GB_EINVAL;
    }
    return 0;
}

int gb_server_op_sample_offline(worker *w, const srv_request *r, int mode, gb_error *err)
{
    gb_server *s = w->s;
    const srv_table *tb = r->tb;
    const gb_wire_msg *m = r->m;
    char text[GB_WIRE_TEXT_MAX];
    offline_args a;
    int rc = offline_args_read(s, r, mode, &a, text, sizeof text);
    if (rc)
        return gb_server_send_error(w, m, rc, text);
    sample_reply sr = {.offline = 1};
    sr.ncols = gb_server_parse_columns(gb_replay_options_of(tb->r), m, sr.cols, text,
                                       sizeof text);
    if (sr.ncols < 0)
        return gb_server_send_error(w, m, GB_EINVAL, text);
    if (sr.ncols > GB_WIRE_MAX_TENSORS - 7) {
        snprintf(text, sizeof text, "sample: at most %d columns in mode '%s'",
                 GB_WIRE_MAX_TENSORS - 7, gb_serve_mode_name(mode));
        return gb_server_send_error(w, m, GB_EINVAL, text);
    }
    gb_replay_table tables[GB_REPLAY_MAX_COLUMNS];
    gb_replay_tables(tb->r, tables);
    uint64_t step_row, item_row;
    row_bytes(tables, &sr, &step_row, &item_row);
    ep_plan p;
    if ((rc = plan(w, tb, mode, &a, step_row, item_row, &p, text, sizeof text)))
        return gb_server_send_error(w, m, rc, text);
    sr.rows = p.n;
    sr.S = p.S;
    if (gb_server_sample_reply_alloc(s, tables, &sr))
        return gb_server_send_error(w, m, GB_ENOMEM, "sample: out of memory for the reply");
    if (gather_rows(tb, &p, w->rows, w->rows + s->o.max_batch_rows, tables, &sr, text,
                    sizeof text)) {
        gb_server_sample_reply_drop(s, &sr);
        return gb_server_send_error(w, m, GB_ENOTFOUND, text);
    }
    int epoch = mode == GB_SERVE_MODE_EPOCH;
    gb_serve_sampled out = {.n = p.n, .size = p.size, .selector = -1,
                            .mode = gb_serve_mode_name(mode), .table = tb->name,
                            .epoch = epoch ? p.epoch : -1, .pos = epoch ? p.pos : 0,
                            .end = epoch ? p.end : 0};
    uint64_t data_bytes = (uint64_t)p.n * (item_row + (uint64_t)p.S * step_row);
    return gb_server_sample_reply_send(w, r, &sr, &out, data_bytes, err);
}
