/* replay/formats/dataset.c: gearbox dataset files (format in replay/formats/dataset.h): writer
 * and reader. */
#include "replay/formats/dataset.h"

#include "runtime/base/crc32c.h"
#include "runtime/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "GBDSET1"
#define VERSION 1u
#define RECORD_MAGIC 0x52444247u /* "GBDR" */
#define COL_BYTES 80
#define FIXED_BYTES 32   /* magic, version, header bytes, T, ncolumns, pad */
#define TAIL_BYTES 16    /* item bytes, crc, pad */
#define REC_HEAD 24      /* magic, crc, version, length, pad */

uint64_t gb_dataset_column_bytes(const gb_dataset_schema *s, int c)
{
    const gb_replay_column *col = &s->columns[c];
    uint64_t n = gb_dtype_size(col->dtype);
    for (int d = 0; d < col->ndim; d++)
        n *= (uint64_t)col->shape[d];
    return col->per_item ? n : n * (uint64_t)s->steps;
}

/* Bytes of every column of one item. */
static uint64_t item_bytes(const gb_dataset_schema *s)
{
    uint64_t n = 0;
    for (int c = 0; c < s->ncolumns; c++)
        n += gb_dataset_column_bytes(s, c);
    return n;
}

/* Adds s's columns and T to replay options o. Returns 0 or gb_replay_add_column's error. */
int gb_dataset_schema_apply(const gb_dataset_schema *s, gb_replay_options *o, gb_error *err)
{
    o->steps = s->steps;
    for (int c = 0; c < s->ncolumns; c++) {
        const gb_replay_column *col = &s->columns[c];
        int rc = gb_replay_add_column(o, col->name, col->dtype, col->ndim, col->shape,
                                      col->per_item, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* A schema a file may hold: 1..GB_REPLAY_MAX_COLUMNS valid columns, T >= 1. */
static int check_schema(const gb_dataset_schema *s, const char *what, gb_error *err)
{
    int code = strcmp(what, "schema") == 0 ? GB_EINVAL : GB_ECORRUPT;
    if (s->steps < 1 || s->steps > (1 << 20))
        return gb_error_set(err, code, "%s: T = %lld out of range", what, (long long)s->steps);
    if (s->ncolumns < 1 || s->ncolumns > GB_REPLAY_MAX_COLUMNS)
        return gb_error_set(err, code, "%s: %d columns (1..%d)", what, s->ncolumns,
                            GB_REPLAY_MAX_COLUMNS);
    for (int c = 0; c < s->ncolumns; c++) {
        const gb_replay_column *col = &s->columns[c];
        if (memchr(col->name, 0, sizeof col->name) == NULL || col->name[0] == 0)
            return gb_error_set(err, code, "%s: column %d has no valid name", what, c);
        if (!gb_dtype_valid(col->dtype) || col->ndim < 0 || col->ndim > GB_REPLAY_MAX_DIMS ||
            (col->per_item != 0 && col->per_item != 1))
            return gb_error_set(err, code, "%s: column '%s': bad dtype, rank or kind", what,
                                col->name);
        for (int d = 0; d < col->ndim; d++)
            if (col->shape[d] < 1 || col->shape[d] > (1LL << 32))
                return gb_error_set(err, code, "%s: column '%s': dimension %d = %lld", what,
                                    col->name, d, (long long)col->shape[d]);
    }
    if (item_bytes(s) > (1ULL << 34))
        return gb_error_set(err, code, "%s: items of %llu bytes are too large", what,
                            (unsigned long long)item_bytes(s));
    return 0;
}

/* ---- little-endian helpers (the host is little-endian; these keep the layout explicit) ------ */

static void put32(unsigned char **p, uint32_t v) { memcpy(*p, &v, 4); *p += 4; }
static void put64(unsigned char **p, uint64_t v) { memcpy(*p, &v, 8); *p += 8; }
static uint32_t get32(const unsigned char **p) { uint32_t v; memcpy(&v, *p, 4); *p += 4; return v; }
static uint64_t get64(const unsigned char **p) { uint64_t v; memcpy(&v, *p, 8); *p += 8; return v; }

/* Bytes of a file header with ncolumns columns. */
static size_t header_size(int ncolumns)
{
    return FIXED_BYTES + (size_t)ncolumns * COL_BYTES + TAIL_BYTES;
}

/* ---- writer ---------------------------------------------------------------------------------- */

struct gb_dataset_writer {
    FILE *f;
    char path[1024];
    gb_dataset_schema schema;
    uint64_t col_bytes[GB_REPLAY_MAX_COLUMNS];
    int64_t count;
};

/* Creates (truncates) path and writes the header; *out is the caller's, for
 * gb_dataset_writer_close. Blocks on disk I/O. Errors: see dataset.h. */
int gb_dataset_writer_open(gb_dataset_writer **out, const char *path,
                           const gb_dataset_schema *s, gb_error *err)
{
    *out = NULL;
    int rc = check_schema(s, "schema", err);
    if (rc)
        return rc;
    gb_dataset_writer *w = calloc(1, sizeof *w);
    unsigned char *hdr = calloc(1, header_size(s->ncolumns));
    if (!w || !hdr) {
        free(w);
        free(hdr);
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    }
    w->schema = *s;
    snprintf(w->path, sizeof w->path, "%s", path);
    for (int c = 0; c < s->ncolumns; c++)
        w->col_bytes[c] = gb_dataset_column_bytes(s, c);
    w->f = fopen(path, "wb");
    if (!w->f) {
        rc = gb_error_errno(err, "dataset %s: cannot create", path);
        goto fail;
    }
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    unsigned char *p = hdr;
    memcpy(p, MAGIC, 8);
    p += 8;
    put32(&p, VERSION);
    put32(&p, (uint32_t)header_size(s->ncolumns));
    put64(&p, (uint64_t)s->steps);
    put32(&p, (uint32_t)s->ncolumns);
    put32(&p, 0);
    for (int c = 0; c < s->ncolumns; c++) {
        const gb_replay_column *col = &s->columns[c];
        memcpy(p, col->name, 32);
        p += 32;
        put32(&p, (uint32_t)col->dtype);
        put32(&p, (uint32_t)col->ndim);
        for (int d = 0; d < GB_REPLAY_MAX_DIMS; d++)
            put64(&p, d < col->ndim ? (uint64_t)col->shape[d] : 0);
        put32(&p, (uint32_t)col->per_item);
        put32(&p, 0);
    }
    put64(&p, item_bytes(s));
    put32(&p, gb_crc32c(0, hdr, (size_t)(p - hdr)));
    put32(&p, 0);
    if (fwrite(hdr, 1, (size_t)(p - hdr), w->f) != (size_t)(p - hdr)) {
        rc = gb_error_errno(err, "dataset %s: writing the header", path);
        goto fail;
    }
    free(hdr);
    *out = w;
    return 0;
fail:
    if (w->f)
        fclose(w->f);
    free(w);
    free(hdr);
    return rc;
}

/* Appends one item (one buffer per column) with its CRC-32C, buffered. Returns 0 or GB_EIO. */
int gb_dataset_writer_append(gb_dataset_writer *w, const void *const *cols,
                             int64_t policy_version, int32_t length, gb_error *err)
{
    unsigned char head[REC_HEAD], *p = head;
    put32(&p, RECORD_MAGIC);
    put32(&p, 0); /* CRC, filled below */
    put64(&p, (uint64_t)policy_version);
    put32(&p, (uint32_t)length);
    put32(&p, 0);
    uint32_t crc = gb_crc32c(0, head + 8, REC_HEAD - 8);
    for (int c = 0; c < w->schema.ncolumns; c++)
        crc = gb_crc32c(crc, cols[c], w->col_bytes[c]);
    memcpy(head + 4, &crc, 4);
    if (fwrite(head, 1, REC_HEAD, w->f) != REC_HEAD)
        goto fail;
    for (int c = 0; c < w->schema.ncolumns; c++)
        if (fwrite(cols[c], 1, w->col_bytes[c], w->f) != w->col_bytes[c])
            goto fail;
    w->count++;
    return 0;
fail:
    return gb_error_set(err, GB_EIO, "dataset %s: write failed after %lld items: %s", w->path,
                        (long long)w->count, strerror(errno));
}

/* Items appended so far. */
int64_t gb_dataset_writer_count(const gb_dataset_writer *w) { return w->count; }

/* Flushes, fsyncs and closes, and frees w (NULL is fine). Returns 0 or GB_EIO. */
int gb_dataset_writer_close(gb_dataset_writer *w, gb_error *err)
{
    if (!w)
        return 0;
    int rc = 0;
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0)
        rc = gb_error_set(err, GB_EIO, "dataset %s: flush failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == 0)
        rc = gb_error_set(err, GB_EIO, "dataset %s: close failed: %s", w->path, strerror(errno));
    free(w);
    return rc;
}

/* ---- reader ---------------------------------------------------------------------------------- */

struct gb_dataset_reader {
    int fd;
    char path[1024];
    gb_dataset_schema schema;
    uint64_t col_bytes[GB_REPLAY_MAX_COLUMNS];
    uint64_t header_bytes, record_bytes;
    int64_t count;
    unsigned char *buf; /* one record */
};

/* The error for a file that is not a gearbox dataset, or is damaged. */
static int corrupt(gb_error *err, const char *path, const char *what)
{
    return gb_error_set(err, GB_ECORRUPT, "dataset %s: %s (not a gearbox dataset, or damaged)",
                        path, what);
}

/* Reads and checks the header of the open file r->fd (magic, version, columns, CRC, schema):
 * sets r->schema, r->col_bytes, r->header_bytes and r->record_bytes. Returns 0 or GB_ECORRUPT,
 * GB_ENOMEM. */
static int read_header(gb_dataset_reader *r, gb_error *err)
{
    const char *path = r->path;
    unsigned char fixed[FIXED_BYTES];
    if (pread(r->fd, fixed, FIXED_BYTES, 0) != FIXED_BYTES)
        return corrupt(err, path, "shorter than a header");
    if (memcmp(fixed, MAGIC, 8) != 0)
        return corrupt(err, path, "bad magic");
    const unsigned char *p = fixed + 8;
    uint32_t version = get32(&p), hbytes = get32(&p);
    r->schema.steps = (int64_t)get64(&p);
    uint32_t ncol = get32(&p);
    if (version != VERSION)
        return gb_error_set(err, GB_ECORRUPT, "dataset %s: format version %u, this gearbox "
                            "reads %u", path, version, VERSION);
    if (ncol < 1 || ncol > GB_REPLAY_MAX_COLUMNS || hbytes != header_size((int)ncol))
        return corrupt(err, path, "bad column count or header size");
    unsigned char *hdr = malloc(hbytes);
    if (!hdr)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    int rc = 0;
    if (pread(r->fd, hdr, hbytes, 0) != (ssize_t)hbytes) {
        rc = corrupt(err, path, "truncated header");
        goto out;
    }
    r->schema.ncolumns = (int)ncol;
    p = hdr + FIXED_BYTES;
    for (int c = 0; c < (int)ncol; c++) {
        gb_replay_column *col = &r->schema.columns[c];
        memcpy(col->name, p, 32);
        p += 32;
        col->dtype = (gb_dtype)get32(&p);
        col->ndim = (int)get32(&p);
        for (int d = 0; d < GB_REPLAY_MAX_DIMS; d++)
            col->shape[d] = (int64_t)get64(&p);
        col->per_item = (int)get32(&p);
        get32(&p);
    }
    uint64_t ib = get64(&p);
    uint32_t crc = get32(&p);
    if (crc != gb_crc32c(0, hdr, (size_t)(p - 4 - hdr)))
        rc = corrupt(err, path, "header CRC mismatch");
    if (rc == 0)
        rc = check_schema(&r->schema, "dataset header", err);
    if (rc == 0 && ib != item_bytes(&r->schema))
        rc = corrupt(err, path, "item bytes do not match the schema");
    if (rc)
        goto out;
    for (int c = 0; c < (int)ncol; c++)
        r->col_bytes[c] = gb_dataset_column_bytes(&r->schema, c);
    r->header_bytes = hbytes;
    r->record_bytes = REC_HEAD + ib;
out:
    free(hdr);
    return rc;
}

/* See dataset.h. */
int gb_dataset_reader_open(gb_dataset_reader **out, const char *path, gb_error *err)
{
    *out = NULL;
    gb_dataset_reader *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    snprintf(r->path, sizeof r->path, "%s", path);
    int rc;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        rc = errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "dataset %s: no such file", path)
                             : gb_error_errno(err, "dataset %s: cannot open", path);
        free(r);
        return rc;
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0) {
        rc = gb_error_errno(err, "dataset %s: stat", path);
        goto fail;
    }
    if ((rc = read_header(r, err)))
        goto fail;
    uint64_t body = (uint64_t)st.st_size - r->header_bytes;
    r->count = (int64_t)(body / r->record_bytes);
    if (body % r->record_bytes)
        GB_WARN("dataset %s: ignoring a torn last record (%llu of %llu bytes; the writer "
                "stopped mid-record)", path, (unsigned long long)(body % r->record_bytes),
                (unsigned long long)r->record_bytes);
    r->buf = malloc(r->record_bytes);
    if (!r->buf) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory for a %llu-byte record",
                          (unsigned long long)r->record_bytes);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    close(r->fd);
    free(r);
    return rc;
}

/* The file's schema; lives as long as r. */
const gb_dataset_schema *gb_dataset_reader_schema(const gb_dataset_reader *r)
{
    return &r->schema;
}

/* Whole items in the file (a torn last one is not counted). */
int64_t gb_dataset_reader_count(const gb_dataset_reader *r) { return r->count; }

/* Reads item i into dst (one buffer per column; NULL skips one), checking its magic and CRC-32C
 * first. Blocks on disk I/O. Returns 0, GB_EINVAL, GB_EIO or GB_ECORRUPT. */
int gb_dataset_reader_read(gb_dataset_reader *r, int64_t i, void *const *dst,
                           int64_t *policy_version, int32_t *length, gb_error *err)
{
    if (i < 0 || i >= r->count)
        return gb_error_set(err, GB_EINVAL, "dataset %s: record %lld out of range (%lld)",
                            r->path, (long long)i, (long long)r->count);
    off_t off = (off_t)(r->header_bytes + (uint64_t)i * r->record_bytes);
    size_t left = r->record_bytes;
    unsigned char *p = r->buf;
    while (left) {
        ssize_t n = pread(r->fd, p, left, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return gb_error_set(err, GB_EIO, "dataset %s: reading record %lld: %s", r->path,
                                (long long)i, n < 0 ? strerror(errno) : "unexpected end");
        p += n;
        off += n;
        left -= (size_t)n;
    }
    const unsigned char *q = r->buf;
    uint32_t magic = get32(&q), crc = get32(&q);
    if (magic != RECORD_MAGIC)
        return gb_error_set(err, GB_ECORRUPT, "dataset %s: record %lld: bad magic", r->path,
                            (long long)i);
    if (crc != gb_crc32c(0, r->buf + 8, r->record_bytes - 8))
        return gb_error_set(err, GB_ECORRUPT, "dataset %s: record %lld: CRC mismatch", r->path,
                            (long long)i);
    int64_t v = (int64_t)get64(&q);
    int32_t len = (int32_t)get32(&q);
    if (len < 0 || len > r->schema.steps)
        return gb_error_set(err, GB_ECORRUPT, "dataset %s: record %lld: length %d", r->path,
                            (long long)i, len);
    q = r->buf + REC_HEAD;
    for (int c = 0; c < r->schema.ncolumns; c++) {
        if (dst && dst[c])
            memcpy(dst[c], q, r->col_bytes[c]);
        q += r->col_bytes[c];
    }
    if (policy_version)
        *policy_version = v;
    if (length)
        *length = len;
    return 0;
}

/* Closes the file and frees r; NULL is fine. */
void gb_dataset_reader_close(gb_dataset_reader *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r->buf);
    free(r);
}

/* qsort order of file names. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.gbds files of a directory, sorted (or path itself when it is a file): *paths is the
 * caller's, one block (free(*paths)). Errors: see dataset.h. */
int gb_dataset_list(const char *path, char ***paths, int *n, gb_error *err)
{
    *paths = NULL;
    *n = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "dataset %s: no such file or "
                                              "directory", path)
                               : gb_error_errno(err, "dataset %s", path);
    if (!S_ISDIR(st.st_mode)) {
        char **out = malloc(sizeof(char *) + strlen(path) + 1);
        if (!out)
            return gb_error_set(err, GB_ENOMEM, "out of memory");
        out[0] = (char *)(out + 1);
        strcpy(out[0], path);
        *paths = out;
        *n = 1;
        return 0;
    }
    DIR *d = opendir(path);
    if (!d)
        return gb_error_errno(err, "dataset %s: cannot list", path);
    /* Two passes: count and size, then fill one block. */
    size_t bytes = 0;
    int count = 0;
    size_t ext = strlen(GB_DATASET_EXT), plen = strlen(path);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > ext && strcmp(e->d_name + l - ext, GB_DATASET_EXT) == 0) {
            count++;
            bytes += plen + 1 + l + 1;
        }
    }
    if (count == 0) {
        closedir(d);
        return gb_error_set(err, GB_ENOTFOUND, "dataset %s: no *%s files in this directory",
                            path, GB_DATASET_EXT);
    }
    char **out = malloc((size_t)count * sizeof(char *) + bytes);
    if (!out) {
        closedir(d);
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    }
    char *s = (char *)(out + count);
    int k = 0;
    rewinddir(d);
    while ((e = readdir(d)) && k < count) {
        size_t l = strlen(e->d_name);
        if (l > ext && strcmp(e->d_name + l - ext, GB_DATASET_EXT) == 0) {
            out[k++] = s;
            s += sprintf(s, "%s/%s", path, e->d_name) + 1;
        }
    }
    closedir(d);
    qsort(out, (size_t)k, sizeof *out, cmp_str);
    *paths = out;
    *n = k;
    return 0;
}
