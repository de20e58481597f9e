/* replay/checkpoint.c: streaming checkpoints of a replay, and restore.
 *
 * File layout (little-endian; x86-64 and aarch64 hosts only, which is what gearbox runs on):
 *   header   : magic "GBREPLAY", format version, schema (T, columns), capacity, max_size,
 *              selector/remover/alpha/max_times_sampled, item and free counts, counters, max
 *              priority, staleness floor, selector RNG state; then the header's CRC-32C
 *   status   : one record per committed item, in the live-set order (which the uniform selector
 *              draws from, so restoring in this order reproduces its state); CRC
 *   free     : the free queue in order (then blocks that were being written or pinned); CRC
 *   tables   : per column, each item's block bytes in status order; CRC per table
 *   footer   : "GBRPLEND"
 * Restore reads everything, checks every CRC and every record, and only then installs it; a
 * trailing byte, a short read or a mismatch leaves the replay empty. */
#include "replay/internal.h"
#include "runtime/base/crc32c.h"
#include "runtime/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK_MAGIC "GBREPLAY"
#define CK_END "GBRPLEND"
/* Version 2 appended first_samples to the header; version 1 files are read too (as 0). */
#define CK_VERSION 2u

typedef struct ck_column {
    char name[GB_REPLAY_NAME_MAX];
    uint32_t dtype, ndim, per_item, pad;
    int64_t shape[GB_REPLAY_MAX_DIMS];
    uint64_t block_bytes;
} ck_column;

typedef struct ck_header {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t capacity, max_size, steps;
    uint32_t ncolumns, selector, remover, has_priority;
    double alpha;
    int64_t max_times_sampled;
    uint64_t items, free_blocks;
    uint64_t next_seq, inserts, deletes, samples, evicted, sampled_out, expired, aborted, updates,
        stale_updates;
    double max_priority;
    int64_t min_version;
    uint64_t rng_s[4];
    double rng_spare;
    int64_t rng_has_spare;
    ck_column columns[GB_REPLAY_MAX_COLUMNS];
    uint64_t first_samples; /* version 2 */
} ck_header;

#define CK_HEADER_V1 offsetof(ck_header, first_samples)

typedef struct ck_record {
    int64_t index;
    uint64_t seq;
    double priority;
    int64_t policy_version;
    uint32_t times_sampled;
    int32_t length;
} ck_record;

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct ck_out {
    FILE *f;
    const char *path;
    gb_error *err;
    int rc;
} ck_out;

/* Appends n bytes to the file (folding them into *crc when given); the first error sticks. */
static void put(ck_out *o, const void *p, size_t n, uint32_t *crc)
{
    if (o->rc || n == 0)
        return;
    if (fwrite(p, 1, n, o->f) != n)
        o->rc = gb_error_errno(o->err, "replay checkpoint: writing %s", o->path);
    else if (crc)
        *crc = gb_crc32c(*crc, p, n);
}

/* The replay's schema and selection options, into the header (what a restore must match). */
static void header_schema(const gb_replay *r, ck_header *h)
{
    memcpy(h->magic, CK_MAGIC, 8);
    h->version = CK_VERSION;
    h->header_bytes = sizeof *h;
    h->capacity = (uint64_t)r->capacity;
    h->max_size = (uint64_t)r->max_size;
    h->steps = (uint64_t)r->steps;
    h->ncolumns = (uint32_t)r->ncol;
    h->selector = (uint32_t)r->opt.selector;
    h->remover = (uint32_t)r->opt.remover;
    h->alpha = r->opt.alpha;
    h->max_times_sampled = r->opt.max_times_sampled;
    for (int c = 0; c < r->ncol; c++) {
        const gb_replay_column *col = &r->opt.columns[c];
        ck_column *k = &h->columns[c];
        memcpy(k->name, col->name, sizeof k->name);
        k->dtype = (uint32_t)col->dtype;
        k->ndim = (uint32_t)col->ndim;
        k->per_item = (uint32_t)col->per_item;
        for (int d = 0; d < col->ndim; d++)
            k->shape[d] = col->shape[d];
        k->block_bytes = r->tab[c].block_bytes;
    }
}

/* The counters, the priority bookkeeping and the selector RNG state, into the header. Under the
 * lock. */
static void header_counters(const gb_replay *r, ck_header *h)
{
    h->next_seq = r->c->next_seq;
    h->inserts = r->c->inserts;
    h->deletes = r->c->deletes;
    h->samples = r->c->samples;
    h->evicted = r->c->evicted;
    h->sampled_out = r->c->sampled_out;
    h->first_samples = r->c->first_samples;
    h->expired = r->c->expired;
    h->aborted = r->c->aborted;
    h->updates = r->c->updates;
    h->stale_updates = r->c->stale_updates;
    h->max_priority = r->c->max_priority;
    h->has_priority = (uint32_t)r->c->has_priority;
    h->min_version = r->c->min_version;
    memcpy(h->rng_s, r->rng.s, sizeof h->rng_s);
    h->rng_spare = r->rng.spare_normal;
    h->rng_has_spare = r->rng.has_spare;
}

/* Snapshots the metadata into h, rec (the live items, each pinned) and freeq (the free queue,
 * then the blocks being written or pinned, which are free after a restore), under the lock.
 * Sets h->items and h->free_blocks. */
static void snapshot(gb_replay *r, ck_header *h, ck_record *rec, int64_t *freeq,
                     uint64_t *digest)
{
    pthread_mutex_lock(&r->mu);
    gb_replay_digest_locked(r, digest); /* of exactly what the file will hold */
    header_schema(r, h);
    const gb_replay_status *st = &r->st;
    int64_t n = st->size, nf = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = r->live[k];
        rec[k] = (ck_record){i, st->item[i].seq, st->priority[i], st->policy_version[i],
                             st->item[i].times_sampled, st->length[i]};
        st->item[i].pins++;
    }
    for (int64_t k = 0; k < r->free_count; k++)
        freeq[nf++] = r->freeq[(r->free_head + k) % r->capacity];
    for (int64_t i = 0; i < r->capacity; i++) /* being written or pinned: free after restore */
        if (st->state[i] == GB_ITEM_WRITING || st->state[i] == GB_ITEM_RETIRED)
            freeq[nf++] = i;
    h->items = (uint64_t)n;
    h->free_blocks = (uint64_t)nf;
    header_counters(r, h);
    pthread_mutex_unlock(&r->mu);
}

/* Streams the snapshot and the pinned items' blocks to tmp (see the layout above), flushed and
 * fsynced. Returns 0 or the error (o->rc). */
static int write_file(gb_replay *r, ck_out *o, const ck_header *h, const ck_record *rec,
                      const int64_t *freeq)
{
    int64_t n = (int64_t)h->items, nf = (int64_t)h->free_blocks;
    int fd = open(o->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return o->rc = gb_error_errno(o->err, "replay checkpoint: cannot create %s", o->path);
    if (!(o->f = fdopen(fd, "wb"))) {
        o->rc = gb_error_errno(o->err, "replay checkpoint: fdopen %s", o->path);
        close(fd);
        return o->rc;
    }
    setvbuf(o->f, NULL, _IOFBF, 1 << 20);
    uint32_t crc = 0;
    put(o, h, sizeof *h, &crc);
    put(o, &crc, 4, NULL);
    crc = 0;
    put(o, rec, (size_t)n * sizeof *rec, &crc);
    put(o, &crc, 4, NULL);
    crc = 0;
    put(o, freeq, (size_t)nf * sizeof *freeq, &crc);
    put(o, &crc, 4, NULL);
    for (int c = 0; c < r->ncol && !o->rc; c++) {
        crc = 0;
        for (int64_t k = 0; k < n && !o->rc; k++)
            put(o, gb_replay_block(r, c, rec[k].index), r->tab[c].block_bytes, &crc);
        put(o, &crc, 4, NULL);
    }
    put(o, CK_END, 8, NULL);
    if (!o->rc && fflush(o->f) != 0)
        o->rc = gb_error_errno(o->err, "replay checkpoint: flushing %s", o->path);
    if (!o->rc && fsync(fileno(o->f)) != 0)
        o->rc = gb_error_errno(o->err, "replay checkpoint: fsync %s", o->path);
    if (fclose(o->f) != 0 && !o->rc)
        o->rc = gb_error_errno(o->err, "replay checkpoint: closing %s", o->path);
    o->f = NULL;
    return o->rc;
}

/* See replay.h: written to path.tmp, then renamed; items pinned while they stream. */
int gb_replay_checkpoint(gb_replay *r, const char *path, gb_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return gb_error_set(err, GB_EINVAL, "replay checkpoint: path too long");
    ck_header *h = calloc(1, sizeof *h);
    ck_record *rec = malloc((size_t)r->capacity * sizeof *rec);
    int64_t *freeq = malloc((size_t)r->capacity * sizeof *freeq);
    if (!h || !rec || !freeq) {
        free(h);
        free(rec);
        free(freeq);
        return gb_error_set(err, GB_ENOMEM, "replay checkpoint: out of memory");
    }
    /* Snapshot the metadata and pin every item under the lock; stream with no lock held. */
    uint64_t digest = 0;
    snapshot(r, h, rec, freeq, &digest);
    ck_out o = {NULL, tmp, err, 0};
    write_file(r, &o, h, rec, freeq);
    if (!o.rc && rename(tmp, path) != 0)
        o.rc = gb_error_errno(err, "replay checkpoint: renaming %s to %s", tmp, path);
    if (o.rc)
        unlink(tmp);
    else
        gb_file_sync_folder(path);
    pthread_mutex_lock(&r->mu);
    for (int64_t k = 0; k < (int64_t)h->items; k++)
        gb_index_unpin(r, rec[k].index);
    if (!o.rc) {
        r->ckpt_items = (int64_t)h->items;
        r->ckpt_digest = digest;
    }
    pthread_mutex_unlock(&r->mu);
    free(h);
    free(rec);
    free(freeq);
    return o.rc;
}

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct ck_in {
    FILE *f;
    const char *path;
    gb_error *err;
    int rc;
} ck_in;

/* Reads n bytes (folding them into *crc when given); a short read is a truncated file. */
static int get(ck_in *in, void *p, size_t n, uint32_t *crc, const char *what)
{
    if (in->rc || n == 0)
        return in->rc;
    size_t got = fread(p, 1, n, in->f);
    if (got != n) {
        if (ferror(in->f))
            in->rc = gb_error_errno(in->err, "replay restore: reading %s", in->path);
        else
            in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s is truncated (in "
                                  "the %s section)", in->path, what);
        return in->rc;
    }
    if (crc)
        *crc = gb_crc32c(*crc, p, n);
    return 0;
}

/* Reads a section's stored CRC-32C and compares it with the computed one. */
static int check_crc(ck_in *in, uint32_t crc, const char *what)
{
    uint32_t stored;
    if (get(in, &stored, 4, NULL, what))
        return in->rc;
    if (stored != crc)
        in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s: the %s section fails "
                              "its CRC-32C (stored %08x, computed %08x)", in->path, what, stored,
                              crc);
    return in->rc;
}

/* Opens path and reads its header, checked (magic, CRC, version). *h is the caller's; in->f
 * is left open at the first record. Returns 0 or the error (in->rc). */
static int read_header(ck_in *in, ck_header *h)
{
    in->f = fopen(in->path, "rb");
    if (!in->f) {
        int code = errno == ENOENT ? GB_ENOTFOUND : GB_EIO;
        gb_error_errno(in->err, "replay restore: cannot open %s", in->path);
        in->err->code = code;
        return in->rc = code;
    }
    setvbuf(in->f, NULL, _IOFBF, 1 << 20);
    uint32_t crc = 0;
    if (get(in, h, CK_HEADER_V1, &crc, "header"))
        return in->rc;
    if (memcmp(h->magic, CK_MAGIC, 8) != 0)
        return in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s is not a replay "
                                     "checkpoint (bad magic)", in->path);
    h->first_samples = 0;
    if (h->version == CK_VERSION && h->header_bytes == sizeof *h &&
        get(in, (char *)h + CK_HEADER_V1, sizeof *h - CK_HEADER_V1, &crc, "header"))
        return in->rc;
    if (check_crc(in, crc, "header"))
        return in->rc;
    const int v1 = h->version == 1 && h->header_bytes == CK_HEADER_V1;
    if (!v1 && (h->version != CK_VERSION || h->header_bytes != sizeof *h))
        return in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s has format "
                                     "version %u (%u header bytes); this gearbox reads version "
                                     "%u", in->path, h->version, h->header_bytes, CK_VERSION);
    if (h->ncolumns < 1 || h->ncolumns > GB_REPLAY_MAX_COLUMNS || h->steps < 1)
        return in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s: %u columns, "
                                     "T %llu", in->path, h->ncolumns,
                                     (unsigned long long)h->steps);
    return 0;
}

/* Reads only the header of the checkpoint at path: its T, columns (the caller's array, at least
 * GB_REPLAY_MAX_COLUMNS) and capacity. Blocks on disk I/O. Returns 0, GB_ENOTFOUND, GB_EIO,
 * GB_ECORRUPT or GB_ENOMEM. */
int gb_replay_checkpoint_schema(const char *path, int64_t *steps, gb_replay_column *columns,
                                int *ncolumns, int64_t *capacity, gb_error *err)
{
    ck_in in = {NULL, path, err, 0};
    ck_header *h = calloc(1, sizeof *h);
    if (!h)
        return gb_error_set(err, GB_ENOMEM, "replay restore: out of memory");
    int rc = read_header(&in, h);
    if (rc == 0) {
        *steps = (int64_t)h->steps;
        *capacity = (int64_t)h->capacity;
        *ncolumns = (int)h->ncolumns;
        for (uint32_t c = 0; c < h->ncolumns; c++) {
            const ck_column *f = &h->columns[c];
            gb_replay_column *col = &columns[c];
            memset(col, 0, sizeof *col);
            memcpy(col->name, f->name, sizeof col->name);
            col->name[sizeof col->name - 1] = '\0';
            col->dtype = (gb_dtype)f->dtype;
            col->ndim = f->ndim <= GB_REPLAY_MAX_DIMS ? (int)f->ndim : 0;
            memcpy(col->shape, f->shape, sizeof col->shape);
            col->per_item = (int)f->per_item;
        }
    }
    if (in.f)
        fclose(in.f);
    free(h);
    return rc;
}

/* The file's schema must equal the replay's; names the first difference. */
static int compare_schema(const gb_replay *r, const ck_header *f, const char *path, gb_error *err)
{
    ck_header *mine = calloc(1, sizeof *mine);
    if (!mine)
        return gb_error_set(err, GB_ENOMEM, "replay restore: out of memory");
    header_schema(r, mine);
    int rc = 0;
#define DIFF(cond, fmt, ...)                                                                     \
    if (!rc && (cond))                                                                           \
    rc = gb_error_set(err, GB_EINVAL, "replay restore: %s was written by a different replay: " \
                      fmt, path, __VA_ARGS__)
    DIFF(f->steps != mine->steps, "file T = %llu steps, this replay %llu",
         (unsigned long long)f->steps, (unsigned long long)mine->steps);
    DIFF(f->capacity != mine->capacity, "file capacity %llu, this replay %llu",
         (unsigned long long)f->capacity, (unsigned long long)mine->capacity);
    DIFF(f->ncolumns != mine->ncolumns, "file has %u columns, this replay %u", f->ncolumns,
         mine->ncolumns);
    for (uint32_t c = 0; c < mine->ncolumns && !rc; c++) {
        const ck_column *a = &f->columns[c], *b = &mine->columns[c];
        DIFF(memcmp(a->name, b->name, sizeof a->name) != 0, "file column %u is '%.31s', this "
             "replay's is '%.31s'", c, a->name, b->name);
        DIFF(a->dtype != b->dtype || a->ndim != b->ndim || a->per_item != b->per_item ||
                 memcmp(a->shape, b->shape, sizeof a->shape) != 0 ||
                 a->block_bytes != b->block_bytes,
             "file column '%.31s' has another dtype, shape or per-item flag", b->name);
    }
    DIFF(f->selector != mine->selector, "file selector %u, this replay %u", f->selector,
         mine->selector);
    DIFF(f->remover != mine->remover, "file remover %u, this replay %u", f->remover,
         mine->remover);
    DIFF(memcmp(&f->alpha, &mine->alpha, sizeof f->alpha) != 0, "file alpha %g, this replay %g",
         f->alpha, mine->alpha);
    DIFF(f->max_times_sampled != mine->max_times_sampled, "file max_times_sampled %lld, this "
         "replay %lld", (long long)f->max_times_sampled, (long long)mine->max_times_sampled);
    DIFF(f->max_size != mine->max_size, "file max_size %llu, this replay %llu",
         (unsigned long long)f->max_size, (unsigned long long)mine->max_size);
#undef DIFF
    free(mine);
    return rc;
}

/* Orders block indices by their items' commit sequence (qsort_r over the item array). */
static int cmp_seq(const void *a, const void *b, void *arg)
{
    const gb_replay_item *item = arg;
    uint64_t x = item[*(const int64_t *)a].seq, y = item[*(const int64_t *)b].seq;
    return x < y ? -1 : x > y;
}

/* Reads the status and free-queue sections into rec and freeq and checks every record: the
 * CRCs passed, but a file written by a buggy or hostile program must not put the index
 * structures in an impossible state. seen: capacity bytes, zeroed. Returns 0 or in->rc. */
static int read_records(ck_in *in, const gb_replay *r, const ck_header *h, ck_record *rec,
                        int64_t *freeq, uint8_t *seen)
{
    int64_t n = (int64_t)h->items, nf = (int64_t)h->free_blocks;
    uint32_t crc = 0;
    if (get(in, rec, (size_t)n * sizeof *rec, &crc, "status") || check_crc(in, crc, "status"))
        return in->rc;
    crc = 0;
    if (get(in, freeq, (size_t)nf * sizeof *freeq, &crc, "free queue") ||
        check_crc(in, crc, "free queue"))
        return in->rc;
    for (int64_t k = 0; k < n + nf && !in->rc; k++) {
        int64_t i = k < n ? rec[k].index : freeq[k - n];
        if (i < 0 || i >= r->capacity || seen[i])
            in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s: block %lld is out "
                                  "of range or listed twice", in->path, (long long)i);
        else
            seen[i] = 1;
        if (!in->rc && k < n &&
            (rec[k].length < 0 || rec[k].length > r->steps || !isfinite(rec[k].priority) ||
             rec[k].priority < 0 || rec[k].seq == 0 || rec[k].seq > h->next_seq))
            in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s: item record %lld "
                                  "is invalid", in->path, (long long)k);
    }
    return in->rc;
}

/* Reads each table's blocks straight into the replay's blocks of rec[0..n), then the footer,
 * which must end the file. Returns 0 or in->rc. */
static int read_tables(ck_in *in, gb_replay *r, const ck_record *rec, int64_t n)
{
    for (int c = 0; c < r->ncol; c++) {
        char what[64];
        snprintf(what, sizeof what, "table '%s'", r->opt.columns[c].name);
        uint32_t crc = 0;
        for (int64_t k = 0; k < n; k++)
            if (get(in, gb_replay_block(r, c, rec[k].index), r->tab[c].block_bytes, &crc, what))
                return in->rc;
        if (check_crc(in, crc, what))
            return in->rc;
    }
    char end[8];
    if (get(in, end, 8, NULL, "footer"))
        return in->rc;
    if (memcmp(end, CK_END, 8) != 0 || fgetc(in->f) != EOF)
        in->rc = gb_error_set(in->err, GB_ECORRUPT, "replay restore: %s: bad footer or trailing "
                              "bytes", in->path);
    return in->rc;
}

/* The header's counters, priority bookkeeping and selector RNG state, into r. Under the lock. */
static void restore_counters(gb_replay *r, const ck_header *h)
{
    r->c->next_seq = h->next_seq;
    r->c->inserts = h->inserts;
    r->c->deletes = h->deletes;
    r->c->samples = h->samples;
    r->c->evicted = h->evicted;
    r->c->sampled_out = h->sampled_out;
    r->c->first_samples = h->first_samples;
    r->c->expired = h->expired;
    r->c->aborted = h->aborted;
    r->c->updates = h->updates;
    r->c->stale_updates = h->stale_updates;
    r->c->max_priority = h->max_priority;
    r->c->has_priority = (int)h->has_priority;
    r->c->min_version = h->min_version;
    memcpy(r->rng.s, h->rng_s, sizeof h->rng_s);
    r->rng.spare_normal = h->rng_spare;
    r->rng.has_spare = (int)h->rng_has_spare;
}

/* Installs checked records into the empty replay: status, free queue, the commit-ordered list
 * (by sequence), the live set, heaps and selectors (in the file's order), counters. order: n
 * scratch slots. Takes the lock and wakes samplers. */
static void install(gb_replay *r, const ck_header *h, const ck_record *rec,
                    const int64_t *freeq, int64_t *order)
{
    int64_t n = (int64_t)h->items, nf = (int64_t)h->free_blocks;
    pthread_mutex_lock(&r->mu);
    gb_replay_status *st = &r->st;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = rec[k].index;
        st->priority[i] = rec[k].priority;
        st->item[i].seq = rec[k].seq;
        st->policy_version[i] = rec[k].policy_version;
        st->item[i].times_sampled = rec[k].times_sampled;
        st->length[i] = rec[k].length;
        order[k] = i;
    }
    /* The commit-ordered list is rebuilt by sequence; the live set keeps the file's order. */
    qsort_r(order, (size_t)n, sizeof *order, cmp_seq, st->item);
    r->free_head = 0;
    r->free_count = 0;
    for (int64_t k = 0; k < nf; k++)
        gb_index_push_free(r, freeq[k]);
    for (int64_t k = 0; k < n; k++) { /* list in seq order */
        int64_t i = order[k];
        r->prev[i] = k ? order[k - 1] : -1;
        r->next[i] = k + 1 < n ? order[k + 1] : -1;
    }
    st->oldest = n ? order[0] : -1;
    st->newest = n ? order[n - 1] : -1;
    for (int64_t k = 0; k < n; k++) { /* live set, heaps and selector in the file's order */
        int64_t i = rec[k].index;
        st->state[i] = GB_ITEM_COMMITTED;
        r->live_pos[i] = k;
        r->live[k] = i;
        gb_rheap_push(&r->by_version, i);
        if (r->opt.remover == GB_REMOVER_LOWEST_PRIORITY)
            gb_rheap_push(&r->low_priority, i);
        gb_replay_sel_insert(r, i, st->priority[i]); /* every kept selector */
    }
    st->size = n;
    restore_counters(r, h);
    pthread_cond_broadcast(&r->cv_sample);
    pthread_mutex_unlock(&r->mu);
}

/* See replay.h: everything is read and checked before anything is installed. */
int gb_replay_restore(gb_replay *r, const char *path, gb_error *err)
{
    pthread_mutex_lock(&r->mu);
    int busy = r->st.size != 0 || r->writing != 0 || r->retired_pinned != 0 || r->c->inserts != 0;
    pthread_mutex_unlock(&r->mu);
    if (busy)
        return gb_error_set(err, GB_EINVAL, "replay restore: the replay must be new and empty");
    ck_in in = {NULL, path, err, 0};
    ck_header *h = calloc(1, sizeof *h);
    ck_record *rec = NULL;
    int64_t *freeq = NULL, *order = NULL;
    uint8_t *seen = NULL;
    if (!h)
        return gb_error_set(err, GB_ENOMEM, "replay restore: out of memory");
    if (read_header(&in, h))
        goto fail;
    if ((in.rc = compare_schema(r, h, path, err)))
        goto fail;
    uint64_t cap = (uint64_t)r->capacity;
    if (h->items > (uint64_t)r->max_size || h->items + h->free_blocks != cap) {
        in.rc = gb_error_set(err, GB_ECORRUPT, "replay restore: %s: %llu items + %llu free blocks "
                             "do not make capacity %llu (max_size %lld)", path,
                             (unsigned long long)h->items, (unsigned long long)h->free_blocks,
                             (unsigned long long)cap, (long long)r->max_size);
        goto fail;
    }
    int64_t n = (int64_t)h->items, nf = (int64_t)h->free_blocks;
    rec = malloc((size_t)(n ? n : 1) * sizeof *rec);
    freeq = malloc((size_t)(nf ? nf : 1) * sizeof *freeq);
    order = malloc((size_t)(n ? n : 1) * sizeof *order);
    seen = calloc(cap, 1);
    if (!rec || !freeq || !order || !seen) {
        in.rc = gb_error_set(err, GB_ENOMEM, "replay restore: out of memory");
        goto fail;
    }
    if (read_records(&in, r, h, rec, freeq, seen) || read_tables(&in, r, rec, n))
        goto fail;
    install(r, h, rec, freeq, order); /* everything checked */
fail:
    if (in.f)
        fclose(in.f);
    free(h);
    free(rec);
    free(freeq);
    free(order);
    free(seen);
    return in.rc;
}
