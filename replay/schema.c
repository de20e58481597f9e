/* replay/schema.c: replay options, column schema, the shared segment's layout and read-only
 * views of it from another process. */
#include "replay/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void gb_replay_options_default(gb_replay_options *o)
{
    memset(o, 0, sizeof *o);
    o->capacity = 1024;
    o->max_size = 0;
    o->steps = 1;
    o->remover = GB_REMOVER_FIFO;
    o->selector = GB_SELECTOR_UNIFORM;
    o->alpha = 0.6;
    o->beta = 0.4;
    o->default_priority = NAN;
    o->min_size = 1;
    o->samples_per_insert = 0;
    o->error_buffer = 0;
    o->timeout_s = 10.0;
    o->collect_threads = 1;
}

int gb_replay_add_column(gb_replay_options *o, const char *name, gb_dtype dtype, int ndim,
                         const int64_t *shape, int per_item, gb_error *err)
{
    if (o->ncolumns >= GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "replay: more than %d columns", GB_REPLAY_MAX_COLUMNS);
    if (!name || !name[0] || strlen(name) >= GB_REPLAY_NAME_MAX)
        return gb_error_set(err, GB_EINVAL, "replay: column name must have 1 to %d bytes",
                            GB_REPLAY_NAME_MAX - 1);
    for (int c = 0; c < o->ncolumns; c++)
        if (strcmp(o->columns[c].name, name) == 0)
            return gb_error_set(err, GB_EINVAL, "replay: duplicate column '%s'", name);
    if (!gb_dtype_valid((int)dtype))
        return gb_error_set(err, GB_EINVAL, "replay: column '%s': invalid dtype %d", name,
                            (int)dtype);
    if (ndim < 0 || ndim > GB_REPLAY_MAX_DIMS || (ndim > 0 && !shape))
        return gb_error_set(err, GB_EINVAL, "replay: column '%s': ndim must be 0..%d", name,
                            GB_REPLAY_MAX_DIMS);
    gb_replay_column *col = &o->columns[o->ncolumns];
    memset(col, 0, sizeof *col);
    snprintf(col->name, sizeof col->name, "%s", name);
    col->dtype = dtype;
    col->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0)
            return gb_error_set(err, GB_EINVAL, "replay: column '%s': dimension %d is %lld", name,
                                d, (long long)shape[d]);
        col->shape[d] = shape[d];
    }
    col->per_item = per_item ? 1 : 0;
    o->ncolumns++;
    return 0;
}

/* Bytes of one step (or one per-item value) of a column. */
static size_t column_elem_bytes(const gb_replay_column *c)
{
    size_t n = gb_dtype_size(c->dtype);
    for (int d = 0; d < c->ndim; d++)
        n *= (size_t)c->shape[d];
    return n;
}

int gb_replay_validate(const gb_replay_options *o, gb_error *err)
{
    if (o->capacity < 1 || o->capacity > (INT64_C(1) << 40))
        return gb_error_set(err, GB_EINVAL, "replay: capacity must be in [1, 2^40], got %lld",
                            (long long)o->capacity);
    if (o->max_size < 0 || o->max_size > o->capacity)
        return gb_error_set(err, GB_EINVAL, "replay: max_size %lld must be in [0, capacity %lld]",
                            (long long)o->max_size, (long long)o->capacity);
    if (o->steps < 1 || o->steps > INT32_MAX)
        return gb_error_set(err, GB_EINVAL, "replay: steps per item must be >= 1, got %lld",
                            (long long)o->steps);
    if (o->ncolumns < 1 || o->ncolumns > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, GB_EINVAL, "replay: needs 1 to %d columns, got %d",
                            GB_REPLAY_MAX_COLUMNS, o->ncolumns);
    for (int c = 0; c < o->ncolumns; c++)
        if (!gb_dtype_valid((int)o->columns[c].dtype) || column_elem_bytes(&o->columns[c]) == 0)
            return gb_error_set(err, GB_EINVAL, "replay: column %d ('%s') has no bytes", c,
                                o->columns[c].name);
    if ((int)o->remover < GB_REMOVER_FIFO || (int)o->remover > GB_REMOVER_NONE)
        return gb_error_set(err, GB_EINVAL, "replay: unknown remover %d", (int)o->remover);
    if (o->max_times_sampled < 0)
        return gb_error_set(err, GB_EINVAL, "replay: max_times_sampled must be >= 0");
    if (o->remover == GB_REMOVER_MAX_TIMES_SAMPLED && o->max_times_sampled < 1)
        return gb_error_set(err, GB_EINVAL,
                            "replay: the max_times_sampled remover needs max_times_sampled >= 1");
    if (o->remover == GB_REMOVER_NONE && o->max_times_sampled < 1)
        return gb_error_set(err, GB_EINVAL,
                            "replay: remover none needs max_times_sampled >= 1: nothing else "
                            "empties a full store, so its inserts would wait forever");
    /* With selector_ops too: the kind says which requests the replacement answers. */
    if ((int)o->selector < 0 || (int)o->selector >= GB_REPLAY_SELECTORS)
        return gb_error_set(err, GB_EINVAL, "replay: unknown selector %d", (int)o->selector);
    if (o->extra_selectors >> GB_REPLAY_SELECTORS)
        return gb_error_set(err, GB_EINVAL, "replay: extra_selectors 0x%x names selector kinds "
                            "beyond %d", o->extra_selectors, GB_REPLAY_SELECTORS - 1);
    if (!isfinite(o->alpha) || o->alpha < 0)
        return gb_error_set(err, GB_EINVAL, "replay: alpha must be >= 0, got %g", o->alpha);
    if (!isfinite(o->beta) || o->beta < 0)
        return gb_error_set(err, GB_EINVAL, "replay: beta must be >= 0, got %g", o->beta);
    if (!isnan(o->default_priority) && (!isfinite(o->default_priority) || o->default_priority < 0))
        return gb_error_set(err, GB_EINVAL, "replay: default_priority must be >= 0 or null, got %g",
                            o->default_priority);
    if (isnan(o->timeout_s) || o->timeout_s < 0)
        return gb_error_set(err, GB_EINVAL, "replay: timeout_s must be >= 0");
    if (o->collect_threads < 1 || o->collect_threads > 64)
        return gb_error_set(err, GB_EINVAL, "replay: collect_threads must be 1..64");
    gb_ratelimit rl;
    int64_t max_size = o->max_size ? o->max_size : o->capacity;
    return gb_ratelimit_set(&rl, o->min_size, o->samples_per_insert, o->error_buffer, max_size,
                            o->max_times_sampled, err);
}

static uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

/* Bytes from one item's block to the next: cache lines for large blocks (GB_REPLAY_ROW_ALIGN
 * from 128 bytes up, at most a third wasted), 16 bytes (a vector load) from 16, and the next
 * power of two below that, so that small rows stay small: a dataset of 1-step items padded
 * every 4-byte reward to 64 bytes, 5 x its size in all. */
static uint64_t row_stride(uint64_t block)
{
    if (block >= 2 * GB_REPLAY_ROW_ALIGN)
        return align_up(block, GB_REPLAY_ROW_ALIGN);
    if (block >= 16)
        return align_up(block, 16);
    uint64_t p = 1;
    while (p < block)
        p <<= 1;
    return p;
}

/* Lays out the segment: header, status arrays, then one table per column (each table starts on
 * a 2 MiB boundary so huge pages never straddle two tables; rows as row_stride says). */
static void layout(const gb_replay_options *o, gb_replay_shm_header *h)
{
    memset(h, 0, sizeof *h);
    h->magic = GB_REPLAY_SHM_MAGIC;
    h->version = GB_REPLAY_SHM_VERSION;
    h->header_bytes = (uint32_t)sizeof *h;
    h->max_size = (uint64_t)(o->max_size ? o->max_size : o->capacity);
    h->capacity = (uint64_t)o->capacity;
    h->steps = (uint64_t)o->steps;
    h->ncolumns = (uint64_t)o->ncolumns;
    uint64_t cap = (uint64_t)o->capacity, at = GB_REPLAY_SHM_HEADER;
#define GB_PLACE(field, elem)                                                                    \
    do {                                                                                         \
        h->field = at;                                                                           \
        at = align_up(at + cap * (elem), 4096);                                                  \
    } while (0)
    GB_PLACE(off_priority, 8);
    GB_PLACE(off_item, sizeof(gb_replay_item));
    GB_PLACE(off_version, 8);
    GB_PLACE(off_length, 4);
    GB_PLACE(off_state, 1);
#undef GB_PLACE
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        uint64_t block = column_elem_bytes(col) * (col->per_item ? 1 : (uint64_t)o->steps);
        at = align_up(at, 2u << 20);
        h->table_off[c] = at;
        h->table_stride[c] = row_stride(block);
        h->columns[c] = *col;
        at += cap * h->table_stride[c];
    }
    h->total_bytes = at;
}

static void tables_from_header(const gb_replay_shm_header *h, uint8_t *base, int64_t steps,
                               gb_replay_table *tab)
{
    for (uint64_t c = 0; c < h->ncolumns; c++) {
        const gb_replay_column *col = &h->columns[c];
        size_t elem = column_elem_bytes(col);
        tab[c].base = base + h->table_off[c];
        tab[c].stride = h->table_stride[c];
        tab[c].per_item = col->per_item;
        tab[c].step_bytes = elem;
        tab[c].block_bytes = col->per_item ? elem : elem * (size_t)steps;
    }
}

/* Points r's tables, status arrays, counters and writer port into the mapped segment. */
static void point_into(gb_replay *r, const gb_replay_shm_header *h)
{
    uint8_t *base = r->shm.base;
    tables_from_header(h, base, r->steps, r->tab);
    r->port = (gb_replay_port *)(base + GB_REPLAY_PORT_OFFSET);
    r->c = &((gb_replay_shm_header *)base)->counters;
    r->st.capacity = r->capacity;
    r->st.priority = (double *)(base + h->off_priority);
    r->st.item = (gb_replay_item *)(base + h->off_item);
    r->st.policy_version = (int64_t *)(base + h->off_version);
    r->st.length = (int32_t *)(base + h->off_length);
    r->st.state = base + h->off_state;
}

/* An existing segment's header against the one the options lay out: 0 when the layout is
 * identical, else GB_ECORRUPT / GB_EINVAL naming the first difference. */
static int check_header(const gb_shm *shm, const gb_replay_shm_header *want, gb_error *err)
{
    const gb_replay_shm_header *h = shm->base;
    const char *name = shm->name;
    if (h->magic != GB_REPLAY_SHM_MAGIC)
        return gb_error_set(err, GB_ECORRUPT, "replay attach: shared memory '%s' is not a replay "
                            "segment (bad magic)", name);
    if (h->version != want->version || h->header_bytes != want->header_bytes)
        return gb_error_set(err, GB_ECORRUPT, "replay attach: shared memory '%s' has segment "
                            "format %u (%u header bytes); this gearbox uses format %u", name,
                            h->version, h->header_bytes, want->version);
    int rc = 0;
#define DIFF(cond, fmt, ...)                                                                     \
    if (!rc && (cond))                                                                           \
    rc = gb_error_set(err, GB_EINVAL, "replay attach: shared memory '%s' holds a replay with "   \
                      "another schema: " fmt, name, __VA_ARGS__)
    DIFF(h->capacity != want->capacity, "capacity %llu there, %llu in these options",
         (unsigned long long)h->capacity, (unsigned long long)want->capacity);
    DIFF(h->steps != want->steps, "T = %llu steps there, %llu in these options",
         (unsigned long long)h->steps, (unsigned long long)want->steps);
    DIFF(h->max_size != want->max_size, "max_size %llu there, %llu in these options",
         (unsigned long long)h->max_size, (unsigned long long)want->max_size);
    DIFF(h->ncolumns != want->ncolumns, "%llu columns there, %llu in these options",
         (unsigned long long)h->ncolumns, (unsigned long long)want->ncolumns);
    for (uint64_t c = 0; c < want->ncolumns && !rc; c++) {
        const gb_replay_column *a = &h->columns[c], *b = &want->columns[c];
        DIFF(strncmp(a->name, b->name, GB_REPLAY_NAME_MAX) != 0, "column %llu is '%.31s' there, "
             "'%.31s' in these options", (unsigned long long)c, a->name, b->name);
        int same = a->dtype == b->dtype && a->ndim == b->ndim && a->per_item == b->per_item;
        for (int d = 0; same && d < b->ndim && d < GB_REPLAY_MAX_DIMS; d++)
            same = a->shape[d] == b->shape[d];
        DIFF(!same, "column '%.31s' has another dtype, shape or per-item flag there", b->name);
    }
    /* Same schema, so the layout computed from it must match too; a mismatch is damage. */
    int layout_same = h->total_bytes == want->total_bytes &&
                      h->off_priority == want->off_priority && h->off_item == want->off_item &&
                      h->off_version == want->off_version && h->off_length == want->off_length &&
                      h->off_state == want->off_state &&
                      memcmp(h->table_off, want->table_off, sizeof h->table_off) == 0 &&
                      memcmp(h->table_stride, want->table_stride, sizeof h->table_stride) == 0;
    if (!rc && (!layout_same || shm->size < want->total_bytes))
        rc = gb_error_set(err, GB_ECORRUPT, "replay attach: shared memory '%s' has the schema "
                          "but not the layout of these options (%zu bytes mapped, %llu needed)",
                          name, shm->size, (unsigned long long)want->total_bytes);
#undef DIFF
    return rc;
}

/* Opens the persistent segment r->opt.shm_name if there is one: 0 with *found = 1 (mapped and
 * checked), 0 with *found = 0 (no usable segment: none, or one whose creator died before
 * publishing its header, which is removed), or an error. */
static int open_existing(gb_replay *r, const gb_replay_shm_header *want, int *found,
                         gb_error *err)
{
    *found = 0;
    const char *name = r->opt.shm_name;
    int rc = gb_shm_open(&r->shm, name, 0, 0, err);
    if (rc == GB_ENOTFOUND)
        return 0;
    if (rc) {
        gb_error_prefix(err, "replay attach");
        return rc;
    }
    const gb_replay_shm_header *h = r->shm.base;
    if (r->shm.size < sizeof *h ||
        __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == 0) { /* its creator never finished */
        gb_shm_free(&r->shm);
        shm_unlink(name);
        return 0;
    }
    if ((rc = check_header(&r->shm, want, err))) {
        gb_shm_free(&r->shm);
        return rc;
    }
    *found = 1;
    return 0;
}

/* Allocates (or, persistent, finds) the segment and points r's tables, status arrays, counters
 * and writer port into it. The port is only placed here; its owner (replay.c) initialises it
 * with remote.c's gb_replay_port_init, so the schema depends on nothing above it. */
int gb_replay_map_segment(gb_replay *r, int *attached, gb_error *err)
{
    gb_replay_shm_header h;
    layout(&r->opt, &h);
    *attached = 0;
    int rc = 0;
    if (r->persistent) {
        int found;
        if ((rc = open_existing(r, &h, &found, err)))
            return rc;
        if (found) {
            point_into(r, &h);
            *attached = 1;
            return 0;
        }
    }
    rc = gb_shm_create(&r->shm, h.total_bytes, r->opt.shm_name, r->opt.huge_pages, err);
    if (rc) { /* the code kept: GB_EFULL tells a caller to do without a named segment */
        gb_error_prefix(err, "replay: shared segment of %llu bytes",
                        (unsigned long long)h.total_bytes);
        return rc;
    }
    if (r->persistent)
        r->shm.owner = 0; /* the run removes the name, not this process */
    h.magic = 0; /* published by gb_replay_publish_segment once everything is in place */
    memcpy(r->shm.base, &h, sizeof h);
    point_into(r, &h);
    r->c->min_version = GB_REPLAY_NO_MIN_VERSION;
    return 0;
}

void gb_replay_publish_segment(gb_replay *r)
{
    gb_replay_shm_header *h = r->shm.base;
    __atomic_store_n(&h->magic, GB_REPLAY_SHM_MAGIC, __ATOMIC_RELEASE);
}

void *gb_replay_block(const gb_replay *r, int col, int64_t idx)
{
    return r->tab[col].base + (size_t)idx * r->tab[col].stride;
}

void gb_replay_tables(const gb_replay *r, gb_replay_table *tables)
{
    for (int c = 0; c < r->ncol; c++)
        tables[c] = r->tab[c];
}

int gb_replay_shm_fd(const gb_replay *r, size_t *bytes)
{
    if (bytes)
        *bytes = r->shm.size;
    return r->shm.fd;
}

int gb_replay_view_open(gb_replay_view *v, int fd, gb_error *err)
{
    memset(v, 0, sizeof *v);
    gb_shm *shm = calloc(1, sizeof *shm);
    if (!shm)
        return gb_error_set(err, GB_ENOMEM, "replay view: out of memory");
    int rc = gb_shm_map_fd(shm, fd, 0, 1, err);
    if (rc) {
        free(shm);
        return gb_error_prefix(err, "replay view");
    }
    const gb_replay_shm_header *h = shm->base;
    if (shm->size < sizeof *h || h->magic != GB_REPLAY_SHM_MAGIC || h->total_bytes > shm->size ||
        h->ncolumns < 1 || h->ncolumns > GB_REPLAY_MAX_COLUMNS) {
        gb_shm_free(shm);
        free(shm);
        return gb_error_set(err, GB_ECORRUPT, "replay view: descriptor %d is not a replay segment",
                            fd);
    }
    /* The header comes from another process: every region it names must lie inside the
     * segment before any pointer is formed from it. */
    uint64_t cap = h->capacity, ends[5] = {h->off_priority + cap * 8,
                                           h->off_item + cap * sizeof(gb_replay_item),
                                           h->off_version + cap * 8, h->off_length + cap * 4,
                                           h->off_state + cap};
    int inside = cap > 0 && cap < (UINT64_C(1) << 40) && h->steps > 0 && h->steps <= INT32_MAX;
    for (int k = 0; k < 5 && inside; k++)
        inside = ends[k] <= h->total_bytes;
    for (uint64_t c = 0; c < h->ncolumns && inside; c++) {
        gb_replay_column col = h->columns[c];
        inside = gb_dtype_valid((int)col.dtype) && col.ndim >= 0 && col.ndim <= GB_REPLAY_MAX_DIMS;
        for (int d = 0; d < col.ndim && inside; d++)
            inside = col.shape[d] > 0 && col.shape[d] < (INT64_C(1) << 32);
        uint64_t block = inside ? column_elem_bytes(&col) * (col.per_item ? 1 : h->steps) : 0;
        inside = inside && h->table_stride[c] >= block &&
                 h->table_off[c] + cap * h->table_stride[c] <= h->total_bytes;
    }
    if (!inside) {
        gb_shm_free(shm);
        free(shm);
        return gb_error_set(err, GB_ECORRUPT, "replay view: descriptor %d holds an inconsistent "
                            "replay header", fd);
    }
    uint8_t *base = shm->base;
    v->shm = shm;
    v->capacity = (int64_t)h->capacity;
    v->steps = (int64_t)h->steps;
    v->ncolumns = (int)h->ncolumns;
    memcpy(v->columns, h->columns, sizeof v->columns);
    tables_from_header(h, base, v->steps, v->tables);
    v->priority = (const double *)(base + h->off_priority);
    v->item = (const gb_replay_item *)(base + h->off_item);
    v->length = (const int32_t *)(base + h->off_length);
    v->policy_version = (const int64_t *)(base + h->off_version);
    v->state = base + h->off_state;
    return 0;
}

void gb_replay_view_close(gb_replay_view *v)
{
    if (v->shm) {
        gb_shm_free(v->shm);
        free(v->shm);
    }
    memset(v, 0, sizeof *v);
}
