/* runtime/run/metrics.c: the metrics stream's launcher side, the collector (see metrics.h; the
 * workers' side is metrics_sender.c). */
#include "runtime/run/metrics.h"
#include "runtime/run/metrics_internal.h"

#include "runtime/base/clock.h"
#include "runtime/run/contract.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* A report from a newer process of w's worker: the counters that carry over add what the
 * previous process last reported to the new one's; every other value starts afresh. */
static void new_incarnation(const gb_metrics_collector *c, worker_values *w, uint64_t inc)
{
    for (int j = 0; j < w->n; j++) {
        if (gb_metrics_counter_kind(c, w->role, w->names[j]) == 2)
            w->carried[j] += w->values[j];
        else
            w->carried[j] = 0;
        w->values[j] = NAN;
    }
    w->incarnation = inc;
    w->episode_steps = 0;
}

int gb_metrics_collector_open(gb_metrics_collector **out, void *zctx, const char *endpoint,
                              gb_error *err)
{
    gb_metrics_collector *c = calloc(1, sizeof *c);
    if (!c)
        return gb_error_set(err, GB_ENOMEM, "metrics: out of memory");
    gb_wire_msg_init(&c->msg);
    pthread_mutex_init(&c->issued_lock, NULL);
    for (int r = 0; r < GB_METRICS_ROLES; r++)
        c->expected[r] = -1;
    c->sock = zmq_socket(zctx, ZMQ_PULL);
    /* Reports queued per peer between two polls: a worker sends one a report interval, so 16
     * is many seconds of a stalled launcher (then its sender drops reports, which carry
     * totals); a flooding peer is held back at 16 reports, at most 16 tables of
     * METRICS_MAX_FRAME (~128 MB; 10000 let one peer queue 80 GB). */
    int hwm = 16, linger = 0;
    /* the largest tensor a report may hold is its table: a peer sending a larger frame is
     * disconnected before it is read */
    if (!c->sock || zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        gb_wire_set_max_frame(c->sock, METRICS_MAX_FRAME, err) ||
        gb_curve_bind(zctx, c->sock, endpoint)) {
        int rc = gb_wire_zmq_error(err, "metrics: bind");
        gb_error_prefix(err, "%s", endpoint);
        gb_metrics_collector_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int gb_metrics_collector_endpoint(const gb_metrics_collector *c, char *out, size_t cap,
                                  gb_error *err)
{
    size_t len = cap;
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, out, &len))
        return gb_wire_zmq_error(err, "metrics: ZMQ_LAST_ENDPOINT");
    return 0;
}

void gb_metrics_collector_close(gb_metrics_collector *c)
{
    if (!c)
        return;
    gb_wire_msg_release(&c->msg);
    if (c->sock)
        zmq_close(c->sock);
    for (int i = 0; i < c->nworkers; i++)
        free(c->workers[i].table);
    free(c->workers);
    free(c->issued);
    pthread_mutex_destroy(&c->issued_lock);
    free(c);
}

int gb_metrics_collector_expect(gb_metrics_collector *c, int role, int64_t count, gb_error *err)
{
    if (role <= 0 || role >= GB_METRICS_ROLES || count < 0)
        return gb_error_set(err, GB_EINVAL, "metrics: cannot expect %lld workers of role %d",
                            (long long)count, role);
    int64_t total = count;
    for (int r = 0; r < GB_METRICS_ROLES; r++)
        if (r != role && c->expected[r] > 0)
            total += c->expected[r];
    if (total > GB_METRICS_MAX_REPORTERS)
        return gb_error_set(err, GB_EINVAL, "metrics: %lld workers exceed the collector's limit "
                            "of %d", (long long)total, GB_METRICS_MAX_REPORTERS);
    c->expected[role] = count;
    c->has_expected = 1;
    return 0;
}

/* 1 when (role, index) may report: one of the declared workers, or any while none is declared. */
static int sender_allowed(const gb_metrics_collector *c, int role, int index)
{
    if (!c->has_expected)
        return 1;
    return role > 0 && role < GB_METRICS_ROLES && index >= 0 && index < c->expected[role];
}

/* The reporter's row; NULL before its first report was taken. */
static worker_values *find_worker(gb_metrics_collector *c, int role, int index)
{
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == role && c->workers[i].index == index)
            return &c->workers[i];
    return NULL;
}

/* The reporter's row, added on its first report; NULL when the table is full (only without
 * declared workers: declared ones always fit) or out of memory. */
static worker_values *worker_for(gb_metrics_collector *c, int role, int index)
{
    worker_values *found = find_worker(c, role, index);
    if (found)
        return found;
    if (c->nworkers >= GB_METRICS_MAX_REPORTERS)
        return NULL;
    if (c->nworkers == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        worker_values *w = realloc(c->workers, (size_t)cap * sizeof *w);
        if (!w)
            return NULL;
        c->workers = w;
        c->cap = cap;
    }
    worker_values *w = &c->workers[c->nworkers++];
    memset(w, 0, sizeof *w);
    w->role = role;
    w->index = index;
    return w;
}

/* Adds a taken report's episodes to the window and the counts. */
static void take_episodes(gb_metrics_collector *c, worker_values *w, const metrics_report *r)
{
    for (size_t i = 0; i < r->neps; i++) {
        int64_t len;
        memcpy(&c->window_returns[c->window_next], (const char *)r->returns + i * 4, 4);
        memcpy(&len, (const char *)r->lengths + i * 8, 8);
        c->window_lengths[c->window_next] = len;
        c->window_next = (c->window_next + 1) % GB_RUN_WINDOW;
        if (c->window_n < GB_RUN_WINDOW)
            c->window_n++;
        w->episode_steps += len; /* bounded by its env_steps (gb_metrics_check_report) */
        c->episode_steps += len;
    }
    c->episodes += (int64_t)r->neps;
}

/* Applies one received report; returns 0, GB_EPROTO when its tensors are not as specified,
 * GB_ENOTFOUND when its sender is not one of the run's workers (or the table is full),
 * GB_EINVAL when it is refused for what it says (metrics.h: metrics_check.c). */
static int ingest(gb_metrics_collector *c, const gb_wire_msg *m)
{
    if (gb_wire_schema_read(&gb_schema_metrics, &m->hdr, NULL, NULL)) /* its tensors' kinds */
        return GB_EPROTO;
    int in = gb_wire_msg_find(m, "names"), iv = gb_wire_msg_find(m, "values");
    int ir = gb_wire_msg_find(m, "returns"), il = gb_wire_msg_find(m, "lengths");
    gb_tensor_view names = gb_wire_msg_tensor(m, in), values = gb_wire_msg_tensor(m, iv);
    gb_tensor_view rets = gb_wire_msg_tensor(m, ir), lens = gb_wire_msg_tensor(m, il);
    if (rets.bytes / 4 != lens.bytes / 8 || rets.bytes / 4 > GB_METRICS_MAX_EPISODES)
        return GB_EPROTO;
    size_t nvalues = values.bytes / sizeof(double);
    if (nvalues > GB_METRICS_MAX_VALUES)
        return GB_EPROTO;
    /* names: exactly nvalues NUL-terminated strings filling the tensor. */
    const char *p = names.data, *end = p + names.bytes;
    const char *starts[GB_METRICS_MAX_VALUES];
    for (size_t i = 0; i < nvalues; i++) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul || nul == p || nul - p >= GB_METRICS_NAME_MAX)
            return GB_EPROTO;
        starts[i] = p;
        p = nul + 1;
    }
    if (p != end)
        return GB_EPROTO;
    if (!sender_allowed(c, m->hdr.role, m->hdr.index))
        return GB_ENOTFOUND;
    int it = gb_wire_msg_find(m, "table");
    gb_tensor_view t = it >= 0 ? gb_wire_msg_tensor(m, it) : (gb_tensor_view){0};
    if (it >= 0 && (t.desc->shape[1] < 1 || t.desc->shape[1] > GB_METRICS_TABLE_MAX_COLS ||
                    t.desc->shape[0] > GB_METRICS_TABLE_MAX_ROWS))
        return GB_EPROTO;
    /* judged before the sender gets a row: a refused report leaves no trace but its count
     * (a row without a report would read as a worker silent since the epoch) */
    static const worker_values never_reported;
    worker_values *w = find_worker(c, m->hdr.role, m->hdr.index);
    const worker_values *seen = w ? w : &never_reported;
    uint64_t inc = m->hdr.seq >> GB_METRICS_INCARNATION_SHIFT;
    uint64_t issued = gb_metrics_issued_incarnation(c, m->hdr.role, m->hdr.index);
    if (inc < seen->incarnation || inc < seen->retired_below || inc < issued) {
        c->stale++; /* queued before its process died; a newer one reports now */
        return 0;
    }
    metrics_report r = {.role = m->hdr.role, .incarnation = inc, .nvalues = nvalues,
                        .names = starts, .values = values.data, .neps = rets.bytes / 4,
                        .returns = rets.data, .lengths = lens.data};
    if (inc > issued || !gb_metrics_check_report(c, seen, &r))
        return GB_EINVAL; /* an incarnation never issued, or values the run cannot have */
    if (!w && !(w = worker_for(c, m->hdr.role, m->hdr.index)))
        return GB_ENOTFOUND;
    if (inc > w->incarnation)
        new_incarnation(c, w, inc);
    if (it >= 0) {
        if (t.bytes > w->table_cap) { /* grows to the largest table sent, then stays */
            int64_t *bigger = realloc(w->table, t.bytes);
            if (!bigger)
                return GB_ENOMEM;
            w->table = bigger;
            w->table_cap = t.bytes;
        }
        if (t.bytes)
            memcpy(w->table, t.data, t.bytes);
        w->table_rows = (int)t.desc->shape[0];
        w->table_cols = (int)t.desc->shape[1];
    }
    w->last_s = gb_now_s();
    for (size_t i = 0; i < nvalues; i++) {
        double v;
        memcpy(&v, (const char *)values.data + i * sizeof v, sizeof v);
        int slot = -1;
        for (int j = 0; j < w->n; j++)
            if (strcmp(w->names[j], starts[i]) == 0)
                slot = j;
        if (slot < 0) {
            if (w->n == GB_METRICS_MAX_VALUES)
                continue;
            slot = w->n++;
            snprintf(w->names[slot], GB_METRICS_NAME_MAX, "%s", starts[i]);
            w->carried[slot] = 0;
        }
        w->values[slot] = v;
    }
    take_episodes(c, w, &r);
    return 0;
}

int gb_metrics_collector_poll(gb_metrics_collector *c, int timeout_ms, gb_error *err)
{
    int taken = 0;
    for (;;) {
        zmq_pollitem_t item = {c->sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&item, 1, taken ? 0 : timeout_ms);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                return taken;
            return gb_wire_zmq_error(err, "metrics: poll");
        }
        if (n == 0)
            return taken;
        gb_error rerr = {0};
        int rc = gb_wire_recv(c->sock, &c->msg, 0, ZMQ_DONTWAIT, &rerr);
        if (rc == GB_EAGAIN)
            return taken;
        if (rc == GB_ECLOSED || rc == GB_EZMQ) {
            if (err)
                *err = rerr;
            return rc;
        }
        if (rc == 0 && !gb_wire_peer_is(&c->msg, c->msg.hdr.role, c->msg.hdr.index)) {
            if (gb_log_due(++c->refused)) /* a worker reports as itself only (curve.h) */
                GB_WARN("metrics: refused a report as %s %d sent by %s (%llu so far; "
                        "reports_rejected)", gb_role_name(c->msg.hdr.role), c->msg.hdr.index,
                        c->msg.peer, (unsigned long long)c->refused);
            gb_wire_msg_refuse(&c->msg);
            continue;
        }
        int irc = rc == 0 ? ingest(c, &c->msg) : rc;
        /* any local process can write here, as often as it likes: warnings rate-limited */
        if (irc == GB_EINVAL) {
            if (gb_log_due(++c->refused))
                GB_WARN("metrics: refused a report from %s %d (incarnation %llu): an "
                        "incarnation the launcher did not issue, or values the run cannot have "
                        "(%llu so far; reports_rejected)", gb_role_name(c->msg.hdr.role),
                        c->msg.hdr.index,
                        (unsigned long long)(c->msg.hdr.seq >> GB_METRICS_INCARNATION_SHIFT),
                        (unsigned long long)c->refused);
        } else if (irc == GB_ENOTFOUND) {
            if (gb_log_due(++c->unexpected))
                GB_WARN("metrics: dropped a report from %s %d, not a worker of this run (%llu "
                        "so far)", gb_role_name(c->msg.hdr.role), c->msg.hdr.index,
                        (unsigned long long)c->unexpected);
        } else if (irc != 0) {
            if (gb_log_due(++c->rejected))
                GB_WARN("metrics: dropped a malformed report (%llu so far)%s%s",
                        (unsigned long long)c->rejected, rc ? ": " : "", rc ? rerr.msg : "");
        } else {
            taken++;
        }
        if (irc)
            gb_wire_msg_refuse(&c->msg); /* its memory back: a peer may send many */
        else
            gb_wire_msg_release(&c->msg);
    }
}

/* w's value of name (what earlier incarnations counted included) into *v; 0 when never
 * reported (or not yet by this incarnation, for a value that does not carry over). */
static int find_value(const worker_values *w, const char *name, double *v)
{
    for (int j = 0; j < w->n; j++)
        if (strcmp(w->names[j], name) == 0) {
            if (isnan(w->values[j]) && w->carried[j] == 0)
                return 0;
            *v = (isnan(w->values[j]) ? 0 : w->values[j]) + w->carried[j];
            return 1;
        }
    return 0;
}

double gb_metrics_get(const gb_metrics_collector *c, int role, int index, const char *name)
{
    for (int i = 0; i < c->nworkers; i++) {
        const worker_values *w = &c->workers[i];
        if (w->role == role && w->index == index) {
            double v;
            return find_value(w, name, &v) ? v : NAN;
        }
    }
    return NAN;
}

/* op: 0 sum, 1 max, 2 min over the workers of role that reported name. */
static double reduce(const gb_metrics_collector *c, int role, const char *name, int op)
{
    double acc = NAN;
    for (int i = 0; i < c->nworkers; i++) {
        if (c->workers[i].role != role)
            continue;
        double v;
        if (!find_value(&c->workers[i], name, &v))
            continue;
        if (isnan(acc))
            acc = v;
        else if (op == 0)
            acc += v;
        else if (op == 1)
            acc = v > acc ? v : acc;
        else
            acc = v < acc ? v : acc;
    }
    return acc;
}

double gb_metrics_sum(const gb_metrics_collector *c, int role, const char *name)
{
    return reduce(c, role, name, 0);
}

double gb_metrics_max(const gb_metrics_collector *c, int role, const char *name)
{
    return reduce(c, role, name, 1);
}

double gb_metrics_min(const gb_metrics_collector *c, int role, const char *name)
{
    return reduce(c, role, name, 2);
}

int gb_metrics_workers(const gb_metrics_collector *c, int role)
{
    int n = 0;
    for (int i = 0; i < c->nworkers; i++)
        n += c->workers[i].role == role;
    return n;
}

int64_t gb_metrics_episodes(const gb_metrics_collector *c) { return c->episodes; }

double gb_metrics_return_mean(const gb_metrics_collector *c)
{
    if (c->window_n == 0)
        return NAN;
    double s = 0;
    for (int i = 0; i < c->window_n; i++)
        s += c->window_returns[i];
    return s / c->window_n;
}

double gb_metrics_length_mean(const gb_metrics_collector *c)
{
    if (c->window_n == 0)
        return NAN;
    double s = 0;
    for (int i = 0; i < c->window_n; i++)
        s += (double)c->window_lengths[i];
    return s / c->window_n;
}

uint64_t gb_metrics_collector_rejected(const gb_metrics_collector *c) { return c->rejected; }

uint64_t gb_metrics_collector_stale(const gb_metrics_collector *c) { return c->stale; }

double gb_metrics_last_report_s(const gb_metrics_collector *c, int role, int index)
{
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == role && c->workers[i].index == index)
            return c->workers[i].last_s;
    return NAN;
}

int gb_metrics_table(const gb_metrics_collector *c, int role, int index, const int64_t **data,
                     int *rows, int *cols)
{
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == role && c->workers[i].index == index &&
            c->workers[i].table_cols) {
            *data = c->workers[i].table;
            *rows = c->workers[i].table_rows;
            *cols = c->workers[i].table_cols;
            return 1;
        }
    return 0;
}

void gb_metrics_collector_retire(gb_metrics_collector *c, int role, int index, int incarnation)
{
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == role && c->workers[i].index == index &&
            incarnation >= 0 && (uint64_t)incarnation + 1 > c->workers[i].retired_below)
            c->workers[i].retired_below = (uint64_t)incarnation + 1;
}

int gb_metrics_incarnation(const gb_metrics_collector *c, int role, int index)
{
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == role && c->workers[i].index == index)
            return (int)c->workers[i].incarnation;
    return -1;
}

uint64_t gb_metrics_collector_unexpected(const gb_metrics_collector *c)
{
    return c->unexpected;
}
