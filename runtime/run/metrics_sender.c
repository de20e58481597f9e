/* runtime/run/metrics_sender.c: the metrics stream's workers' side, the sender (see metrics.h; the
 * launcher's side is metrics.c). */
#include "runtime/run/metrics.h"

#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct gb_metrics_sender {
    void *sock;
    void *zctx; /* its CURVE security's refusals (runtime/streams/curve.h) go with every report */
    int role, index;
    int nvalues;
    char names[GB_METRICS_MAX_VALUES][GB_METRICS_NAME_MAX];
    double values[GB_METRICS_MAX_VALUES];
    int nepisodes;
    float returns[GB_METRICS_MAX_EPISODES];
    int64_t lengths[GB_METRICS_MAX_EPISODES];
    uint64_t seq, dropped;
    uint64_t incarnation;
    int64_t *table; /* gb_metrics_set_table's copy, [table_rows, table_cols] */
    int table_rows, table_cols, table_cap;
    char packed_names[GB_METRICS_MAX_VALUES * GB_METRICS_NAME_MAX];
};

int gb_metrics_sender_open(gb_metrics_sender **out, void *zctx, const char *endpoint, int role,
                           int index, gb_error *err)
{
    gb_metrics_sender *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "metrics: out of memory");
    s->role = role;
    s->index = index;
    s->zctx = zctx;
    s->sock = zmq_socket(zctx, ZMQ_PUSH);
    int hwm = 64, linger = 0;
    if (!s->sock || zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        gb_curve_connect(zctx, s->sock, endpoint)) {
        int rc = gb_wire_zmq_error(err, "metrics: connect");
        gb_error_prefix(err, "%s", endpoint);
        gb_metrics_sender_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void gb_metrics_sender_close(gb_metrics_sender *s)
{
    if (!s)
        return;
    if (s->sock) {
        int linger = GB_METRICS_CLOSE_LINGER_MS; /* the last report still leaves */
        zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(s->sock);
    }
    free(s->table);
    free(s);
}

int gb_metrics_set(gb_metrics_sender *s, const char *name, double value)
{
    if (isinf(value)) /* the collector refuses reports holding one (metrics.h): no value */
        value = NAN;
    for (int i = 0; i < s->nvalues; i++) {
        if (strncmp(s->names[i], name, GB_METRICS_NAME_MAX - 1) == 0) {
            s->values[i] = value;
            return 0;
        }
    }
    if (s->nvalues == GB_METRICS_MAX_VALUES)
        return GB_EFULL;
    snprintf(s->names[s->nvalues], GB_METRICS_NAME_MAX, "%s", name);
    s->values[s->nvalues++] = value;
    return 0;
}

void gb_metrics_episode(gb_metrics_sender *s, float episode_return, int64_t length)
{
    /* the collector refuses a report holding such an episode (metrics.h), and with it the
     * worker's heartbeat: an environment that returned NaN shows in the trainers' count of
     * non-finite chunks instead */
    if (!isfinite(episode_return) || length < 1)
        return;
    if (s->nepisodes == GB_METRICS_MAX_EPISODES) {
        /* Keep the newest: shift out the oldest half at once (rare). */
        int keep = GB_METRICS_MAX_EPISODES / 2;
        memmove(s->returns, s->returns + keep, (size_t)keep * sizeof s->returns[0]);
        memmove(s->lengths, s->lengths + keep, (size_t)keep * sizeof s->lengths[0]);
        s->nepisodes = keep;
    }
    s->returns[s->nepisodes] = episode_return;
    s->lengths[s->nepisodes++] = length;
}

int gb_metrics_episodes_unsent(const gb_metrics_sender *s) { return s->nepisodes; }

int gb_metrics_send(gb_metrics_sender *s, gb_error *err)
{
    const gb_curve *curve = gb_curve_of(s->zctx);
    if (curve) /* connections refused for want of the run's keys, reported by every worker */
        gb_metrics_set(s, "auth_refused", (double)gb_curve_refused(curve));
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_METRICS, s->role, s->index);
    /* the sequence number carries the process's incarnation in its high bits: the collector
     * tells a restarted worker's reports from its predecessor's */
    h.seq = s->incarnation << GB_METRICS_INCARNATION_SHIFT | (++s->seq & GB_METRICS_SEQ_MASK);
    size_t off = 0;
    for (int i = 0; i < s->nvalues; i++) {
        size_t l = strlen(s->names[i]) + 1;
        memcpy(s->packed_names + off, s->names[i], l);
        off += l;
    }
    int64_t shape;
    int rc;
    shape = (int64_t)off;
    if ((rc = gb_wire_set_tensor(&h.tensors[0], "names", GB_DTYPE_UINT8, 1, &shape, err)))
        return rc;
    shape = s->nvalues;
    if ((rc = gb_wire_set_tensor(&h.tensors[1], "values", GB_DTYPE_FLOAT64, 1, &shape, err)))
        return rc;
    shape = s->nepisodes;
    if ((rc = gb_wire_set_tensor(&h.tensors[2], "returns", GB_DTYPE_FLOAT32, 1, &shape, err)) ||
        (rc = gb_wire_set_tensor(&h.tensors[3], "lengths", GB_DTYPE_INT64, 1, &shape, err)))
        return rc;
    h.ntensors = 4;
    if (s->table_cols) {
        int64_t tshape[2] = {s->table_rows, s->table_cols};
        if ((rc = gb_wire_set_tensor(&h.tensors[4], "table", GB_DTYPE_INT64, 2, tshape, err)))
            return rc;
        h.ntensors = 5;
    }
    gb_wire_payload p[5] = {{.data = s->packed_names},
                            {.data = s->values},
                            {.data = s->returns},
                            {.data = s->lengths},
                            {.data = s->table}};
    rc = gb_wire_send(s->sock, NULL, 0, &h, p, ZMQ_DONTWAIT, err);
    if (rc == 0) {
        s->nepisodes = 0;
    } else if (rc == GB_EAGAIN) {
        s->dropped++;
    }
    return rc;
}

uint64_t gb_metrics_sender_dropped(const gb_metrics_sender *s) { return s->dropped; }

int gb_metrics_set_table(gb_metrics_sender *s, const int64_t *data, int rows, int cols,
                         gb_error *err)
{
    if (rows < 0 || cols < 1 || rows > GB_METRICS_TABLE_MAX_ROWS ||
        cols > GB_METRICS_TABLE_MAX_COLS)
        return gb_error_set(err, GB_EINVAL, "metrics table of %d x %d: at most %d x %d", rows,
                            cols, GB_METRICS_TABLE_MAX_ROWS, GB_METRICS_TABLE_MAX_COLS);
    int need = rows * cols;
    if (need > s->table_cap) {
        int64_t *t = realloc(s->table, (size_t)need * sizeof *t);
        if (!t)
            return gb_error_set(err, GB_ENOMEM, "metrics table: out of memory");
        s->table = t;
        s->table_cap = need;
    }
    if (need)
        memcpy(s->table, data, (size_t)need * sizeof *data);
    s->table_rows = rows;
    s->table_cols = cols;
    return 0;
}

void gb_metrics_sender_set_incarnation(gb_metrics_sender *s, int incarnation)
{
    s->incarnation = (uint64_t)(incarnation > 0 ? incarnation : 0);
}
