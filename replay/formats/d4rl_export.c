/* replay/formats/d4rl_export.c: gearbox dataset files (gearbox run --record) written as one D4RL
 * HDF5 file (gb_d4rl_export, layout in replay/formats/d4rl.h). */
#include "replay/formats/d4rl.h"

#include "runtime/base/log.h"
#include "runtime/streams/chunk.h"

#include <stdlib.h>
#include <string.h>

#ifndef GEARBOX_HAVE_HDF5

int gb_d4rl_export(const char *const *paths, int npaths, const char *out,
                   gb_d4rl_export_stats *st, gb_error *err)
{
    (void)paths;
    (void)npaths;
    (void)st;
    return gb_error_set(err, GB_EUNSUPPORTED, "%s: this gearbox was built without HDF5 "
                        "(install libhdf5-dev and rebuild) and cannot write D4RL files", out);
}

#else

#include <hdf5.h>

enum { X_OBS, X_ACTION, X_REWARD, X_TERM, X_TRUNC, X_VALID, X_NEXT, X_NCOLS };

/* The input's records, over all files, and the schema columns the export reads. */
typedef struct src {
    gb_dataset_reader **readers;
    int64_t *first; /* global index of each file's first record */
    int nfiles;
    int64_t records;
    const gb_dataset_schema *schema;
    int col[X_NCOLS];    /* schema column of each X_* */
    int next_per_item;   /* next_obs is one per item (a recording) rather than per step */
    uint64_t bytes[X_NCOLS]; /* one step's bytes (next_obs: one observation) */
    int extra[GB_REPLAY_MAX_COLUMNS]; /* the other per-step columns (logp, version): infos/ */
    uint64_t extra_bytes[GB_REPLAY_MAX_COLUMNS];
    int nextra;
    void *buf[GB_REPLAY_MAX_COLUMNS]; /* one record */
    /* A recording of frame stacks stored a frame a row (runtime/streams/chunk.h "Frame
     * stacks"): the chunk layout that rebuilds them, and the record's whole observations */
    gb_chunk_layout stack;
    int past;    /* obs_past's schema column */
    void *whole; /* [T, one observation], or NULL: obs holds whole observations */
} src;

/* Per record: what chains records of one stream (its first observation continues the record
 * whose next_obs it equals) and how many transitions it holds. */
typedef struct rec {
    int64_t valid;
    uint64_t head, tail; /* FNV-1a of obs[0] (when row 0 is valid) and of the final next obs
                            (when the last valid row ends no episode); 0 = none */
    int64_t next;        /* the record that continues this one, -1 none */
    int has_prev;
} rec;

/* FNV-1a of an observation: links a record's first observation to another's last next one. */
static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* The index of column a (or else b) in s, or -1. */
static int find_col(const gb_dataset_schema *s, const char *a, const char *b)
{
    for (int c = 0; c < s->ncolumns; c++)
        if (strcmp(s->columns[c].name, a) == 0 || (b && strcmp(s->columns[c].name, b) == 0))
            return c;
    return -1;
}

/* Reads record i of the sources into s->buf; *length gets its steps. */
static int read_rec(src *s, int64_t i, int32_t *length, gb_error *err)
{
    int f = s->nfiles - 1;
    while (f > 0 && s->first[f] > i)
        f--;
    int64_t version;
    int rc = gb_dataset_reader_read(s->readers[f], i - s->first[f], s->buf, &version, length,
                                    err);
    if (rc == 0 && s->whole)
        gb_chunk_stack_expand(&s->stack, 1, s->buf[s->col[X_OBS]], s->buf[s->past],
                              s->buf[s->col[X_VALID]], s->whole);
    return rc;
}

/* Step t of D4RL column x in the record just read. */
static const unsigned char *at(const src *s, int x, int64_t t)
{
    const void *b = x == X_OBS && s->whole ? s->whole : s->buf[s->col[x]];
    return (const unsigned char *)b + (uint64_t)t * s->bytes[x];
}

/* A recording with obs_past (column past): the layout that rebuilds its stacks, its whole
 * observations next_obs's shape; obs then reads them (s->bytes[X_OBS] one observation). Returns
 * 0, or GB_EINVAL (columns no frame-stack layout has) or GB_ENOMEM. */
static int open_stack(src *s, int past, const char *path, gb_error *err)
{
    const gb_replay_column *o = &s->schema->columns[s->col[X_OBS]],
                           *n = &s->schema->columns[s->col[X_NEXT]];
    int64_t k = o->ndim == n->ndim && o->ndim > 0 && o->shape[0] > 0 ? n->shape[0] / o->shape[0]
                                                                     : 0;
    gb_error e = {0};
    int rc = k < 2 ? GB_EINVAL
                   : gb_chunk_layout_init(&s->stack, s->schema->steps, n->dtype, n->ndim,
                                          n->shape, 1, 1, 0, &e);
    if (rc == 0)
        rc = gb_chunk_layout_set_frame_stack(&s->stack, k, &e);
    if (rc || o->dtype != n->dtype || s->stack.frame_bytes != s->bytes[X_OBS] ||
        s->stack.bytes[GB_CHUNK_OBS] / (uint64_t)s->schema->steps != s->bytes[X_OBS] ||
        gb_dataset_column_bytes(s->schema, past) != s->stack.bytes[s->stack.past_col] ||
        !s->schema->columns[past].per_item)
        return gb_error_set(err, GB_EINVAL, "%s: obs, obs_past and next_obs are not one frame "
                            "stack's columns (runtime/streams/chunk.h \"Frame stacks\")", path);
    s->past = past;
    s->bytes[X_OBS] = s->bytes[X_NEXT];
    if (!(s->whole = malloc((size_t)s->schema->steps * s->bytes[X_NEXT])))
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    return 0;
}

/* The observation after step t of the record in s->buf. */
static const unsigned char *next_obs(const src *s, int64_t t)
{
    if (!s->next_per_item)
        return at(s, X_NEXT, t);
    return t + 1 < s->schema->steps ? at(s, X_OBS, t + 1) : at(s, X_NEXT, 0);
}

/* Opens every dataset file, checks they share one schema, and finds the D4RL columns. */
static int open_src(src *s, const char *const *paths, int npaths, gb_error *err)
{
    s->readers = calloc((size_t)npaths, sizeof *s->readers);
    s->first = calloc((size_t)npaths, sizeof *s->first);
    if (!s->readers || !s->first)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    for (int i = 0; i < npaths; i++) {
        int rc = gb_dataset_reader_open(&s->readers[i], paths[i], err);
        if (rc)
            return rc;
        s->nfiles++;
        const gb_dataset_schema *a = gb_dataset_reader_schema(s->readers[0]),
                                *b = gb_dataset_reader_schema(s->readers[i]);
        if (a->steps != b->steps || a->ncolumns != b->ncolumns ||
            memcmp(a->columns, b->columns, (size_t)a->ncolumns * sizeof a->columns[0]) != 0)
            return gb_error_set(err, GB_EINVAL, "%s: its schema differs from %s's", paths[i],
                                paths[0]);
        s->first[i] = s->records;
        s->records += gb_dataset_reader_count(s->readers[i]);
    }
    s->schema = gb_dataset_reader_schema(s->readers[0]);
    static const char *const names[X_NCOLS][2] = {
        {"obs", NULL}, {"action", NULL}, {"reward", NULL}, {"terminated", "terminal"},
        {"truncated", "timeout"}, {"valid", NULL}, {"next_obs", NULL}};
    for (int x = 0; x < X_NCOLS; x++) {
        s->col[x] = find_col(s->schema, names[x][0], names[x][1]);
        if (s->col[x] < 0)
            return gb_error_set(err, GB_EINVAL, "%s: no column '%s'%s%s%s: not a recording "
                                "gearbox can export (obs, action, reward, terminated, truncated, "
                                "valid, next_obs)", paths[0], names[x][0],
                                names[x][1] ? " (or '" : "", names[x][1] ? names[x][1] : "",
                                names[x][1] ? "')" : "");
        const gb_replay_column *c = &s->schema->columns[s->col[x]];
        uint64_t b = gb_dataset_column_bytes(s->schema, s->col[x]);
        s->bytes[x] = c->per_item ? b : b / (uint64_t)s->schema->steps;
        if (x >= X_REWARD && x <= X_VALID && (c->per_item || c->ndim != 0 ||
            (x == X_REWARD ? c->dtype != GB_DTYPE_FLOAT32 : gb_dtype_size(c->dtype) != 1)))
            return gb_error_set(err, GB_EINVAL, "%s: column '%s' must be per step, one %s a "
                                "step", paths[0], c->name, x == X_REWARD ? "float32" : "byte");
    }
    s->next_per_item = s->schema->columns[s->col[X_NEXT]].per_item;
    for (int c = 0; c < s->schema->ncolumns; c++) {
        int used = 0;
        for (int x = 0; x < X_NCOLS; x++)
            used |= s->col[x] == c;
        if (!used && !s->schema->columns[c].per_item) {
            s->extra_bytes[s->nextra] =
                gb_dataset_column_bytes(s->schema, c) / (uint64_t)s->schema->steps;
            s->extra[s->nextra++] = c;
        }
    }
    int past = find_col(s->schema, "obs_past", NULL);
    int rc = past >= 0 && s->next_per_item ? open_stack(s, past, paths[0], err) : 0;
    if (rc)
        return rc;
    if (s->bytes[X_NEXT] != s->bytes[X_OBS] ||
        s->schema->columns[s->col[X_NEXT]].dtype != s->schema->columns[s->col[X_OBS]].dtype)
        return gb_error_set(err, GB_EINVAL, "%s: next_obs differs from obs in type or shape",
                            paths[0]);
    for (int c = 0; c < s->schema->ncolumns; c++)
        if (!(s->buf[c] = malloc(gb_dataset_column_bytes(s->schema, c) + 1)))
            return gb_error_set(err, GB_ENOMEM, "out of memory");
    return 0;
}

/* Closes the readers and frees the buffers of s. */
static void close_src(src *s)
{
    for (int i = 0; i < s->nfiles; i++)
        gb_dataset_reader_close(s->readers[i]);
    for (int c = 0; c < GB_REPLAY_MAX_COLUMNS; c++)
        free(s->buf[c]);
    free(s->readers);
    free(s->first);
    free(s->whole);
}

/* Pass 1: each record's valid rows and its chain hashes; then the links between records. */
static int scan(src *s, rec *r, gb_error *err)
{
    for (int64_t i = 0; i < s->records; i++) {
        int32_t len;
        int rc = read_rec(s, i, &len, err);
        if (rc)
            return rc;
        r[i] = (rec){.next = -1};
        int64_t last = -1;
        for (int64_t t = 0; t < len; t++)
            if (*at(s, X_VALID, t)) {
                r[i].valid++;
                last = t;
            }
        if (len > 0 && *at(s, X_VALID, 0))
            r[i].head = fnv(at(s, X_OBS, 0), s->bytes[X_OBS]);
        if (last >= 0 && !*at(s, X_TERM, last) && !*at(s, X_TRUNC, last))
            r[i].tail = fnv(next_obs(s, last), s->bytes[X_OBS]);
    }
    /* a record whose first observation is an unfinished record's next one continues it (the
     * earliest such record in file order: streams are recorded in order) */
    int64_t cap = 1;
    while (cap < 2 * s->records)
        cap <<= 1;
    int64_t *open = malloc((size_t)cap * sizeof *open); /* hash table of tails, by record */
    if (!open)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    for (int64_t k = 0; k < cap; k++)
        open[k] = -1;
    for (int64_t i = 0; i < s->records; i++) {
        if (r[i].head) {
            for (int64_t k = (int64_t)(r[i].head & (uint64_t)(cap - 1));; k = (k + 1) & (cap - 1)) {
                if (open[k] < 0)
                    break;
                if (open[k] != INT64_MAX && r[open[k]].tail == r[i].head) {
                    r[open[k]].next = i;
                    r[i].has_prev = 1;
                    open[k] = INT64_MAX; /* taken: a tombstone keeps the probe chain */
                    break;
                }
            }
        }
        if (r[i].tail) {
            int64_t k = (int64_t)(r[i].tail & (uint64_t)(cap - 1));
            while (open[k] >= 0 && open[k] != INT64_MAX)
                k = (k + 1) & (cap - 1);
            open[k] = i;
        }
    }
    free(open);
    return 0;
}

/* Writes one dataset of rank dims under file (or a group). Returns 0 or GB_EIO. */
static int write_ds(hid_t file, const char *name, hid_t ftype, hid_t mtype, int rank,
                    const hsize_t *dims, const void *data, const char *out, gb_error *err)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t ds = space >= 0 ? H5Dcreate2(file, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT) : -1;
    herr_t h = ds >= 0 ? H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    return h < 0 ? gb_error_set(err, GB_EIO, "%s: writing '%s' failed", out, name) : 0;
}

/* The native HDF5 type of a dtype, or -1. */
static hid_t h5_type(gb_dtype dt)
{
    switch (dt) {
    case GB_DTYPE_FLOAT32: return H5T_NATIVE_FLOAT;
    case GB_DTYPE_FLOAT64: return H5T_NATIVE_DOUBLE;
    case GB_DTYPE_INT8: return H5T_NATIVE_INT8;
    case GB_DTYPE_INT16: return H5T_NATIVE_INT16;
    case GB_DTYPE_INT32: return H5T_NATIVE_INT32;
    case GB_DTYPE_INT64: return H5T_NATIVE_INT64;
    case GB_DTYPE_UINT8:
    case GB_DTYPE_BOOL: return H5T_NATIVE_UINT8;
    case GB_DTYPE_UINT16: return H5T_NATIVE_UINT16;
    case GB_DTYPE_UINT32: return H5T_NATIVE_UINT32;
    case GB_DTYPE_UINT64: return H5T_NATIVE_UINT64;
    default: return -1;
    }
}

/* Pass 2, into memory: the valid transitions of every chain of records, in chain order, into
 * o (the D4RL columns) and ox (the other per-step columns); a chain's unfinished last episode is
 * cut there (a timeout). *rows gets the transitions copied. Returns 0 or read_rec's error. */
static int gather_rows(src *s, const rec *r, unsigned char **o, unsigned char **ox,
                       gb_d4rl_export_stats *st, int64_t *rows, gb_error *err)
{
    int64_t row = 0;
    int rc = 0;
    for (int64_t start = 0; start < s->records && rc == 0; start++) {
        if (r[start].has_prev)
            continue;
        st->chains++;
        for (int64_t i = start; i >= 0 && rc == 0; i = r[i].next) {
            int32_t len;
            if ((rc = read_rec(s, i, &len, err)))
                break;
            for (int64_t t = 0; t < len; t++) {
                if (!*at(s, X_VALID, t))
                    continue;
                for (int x = X_OBS; x <= X_TRUNC; x++)
                    memcpy(o[x] + (size_t)row * s->bytes[x], at(s, x, t), s->bytes[x]);
                memcpy(o[X_NEXT] + (size_t)row * s->bytes[X_NEXT], next_obs(s, t),
                       s->bytes[X_NEXT]);
                for (int e = 0; e < s->nextra; e++)
                    memcpy(ox[e] + (size_t)row * s->extra_bytes[e],
                           (const unsigned char *)s->buf[s->extra[e]] +
                               (uint64_t)t * s->extra_bytes[e],
                           s->extra_bytes[e]);
                o[X_TERM][row] = o[X_TERM][row] != 0;
                o[X_TRUNC][row] = o[X_TRUNC][row] != 0;
                st->episodes += o[X_TERM][row] || o[X_TRUNC][row];
                row++;
            }
        }
        /* the stream's recording ended inside an episode: that episode was cut (a timeout),
         * so that readers do not join it to the next one */
        if (row > 0 && !o[X_TERM][row - 1] && !o[X_TRUNC][row - 1]) {
            o[X_TRUNC][row - 1] = 1;
            st->cut++;
            st->episodes++;
        }
    }
    *rows = row;
    return rc;
}

/* Writes the N gathered rows into the open HDF5 file: the D4RL datasets (terminals and
 * timeouts as h5py's bools), then the other per-step columns (a recording's logp and version)
 * as infos/<name>, which the D4RL reader serves as info_<name>. */
static int write_columns(src *s, hid_t file, unsigned char *const *o, unsigned char *const *ox,
                         int64_t N, const char *out, gb_error *err)
{
    const gb_dataset_schema *sc = s->schema;
    int rc = 0;
    hid_t boolt = H5Tenum_create(H5T_NATIVE_INT8); /* h5py's bool: enum {FALSE, TRUE} */
    int8_t v0 = 0, v1 = 1;
    H5Tenum_insert(boolt, "FALSE", &v0);
    H5Tenum_insert(boolt, "TRUE", &v1);
    static const char *const dsname[X_NCOLS] = {"observations", "actions", "rewards",
                                                "terminals", "timeouts", NULL,
                                                "next_observations"};
    for (int x = 0; x < X_NCOLS && rc == 0; x++) {
        if (x == X_VALID)
            continue;
        /* observations are obs's shape, or next_obs's whole ones where frames are rebuilt */
        const int obs_like = s->whole ? X_NEXT : X_OBS;
        const gb_replay_column *c = &sc->columns[s->col[x == X_NEXT || x == X_OBS ? obs_like : x]];
        hsize_t dims[GB_REPLAY_MAX_DIMS + 1] = {(hsize_t)N};
        for (int k = 0; k < c->ndim; k++)
            dims[k + 1] = (hsize_t)c->shape[k];
        int flag = x == X_TERM || x == X_TRUNC;
        hid_t t = flag ? boolt : h5_type(c->dtype);
        if (t < 0) {
            rc = gb_error_set(err, GB_EINVAL, "column '%s': %s cannot be written to HDF5",
                              c->name, gb_dtype_name(c->dtype));
            break;
        }
        rc = write_ds(file, dsname[x], t, t, c->ndim + 1, dims, o[x], out, err);
    }
    H5Tclose(boolt);
    hid_t infos = rc == 0 && s->nextra ? H5Gcreate2(file, "infos", H5P_DEFAULT, H5P_DEFAULT,
                                                   H5P_DEFAULT) : -1;
    for (int e = 0; e < s->nextra && infos >= 0 && rc == 0; e++) {
        const gb_replay_column *c = &sc->columns[s->extra[e]];
        hsize_t dims[GB_REPLAY_MAX_DIMS + 1] = {(hsize_t)N};
        for (int k = 0; k < c->ndim; k++)
            dims[k + 1] = (hsize_t)c->shape[k];
        hid_t t = h5_type(c->dtype);
        if (t < 0) {
            GB_WARN("d4rl export: column '%s' (%s) not written: no HDF5 type for it", c->name,
                    gb_dtype_name(c->dtype));
            continue;
        }
        rc = write_ds(infos, c->name, t, t, c->ndim + 1, dims, ox[e], out, err);
    }
    if (infos >= 0)
        H5Gclose(infos);
    return rc;
}

/* Pass 2: the transitions chain by chain into memory, then one HDF5 dataset per column. */
static int emit(src *s, const rec *r, int64_t N, const char *out, gb_d4rl_export_stats *st,
                gb_error *err)
{
    unsigned char *o[X_NCOLS] = {0}, *ox[GB_REPLAY_MAX_COLUMNS] = {0};
    int rc = 0;
    for (int x = 0; x < X_NCOLS; x++)
        if (x != X_VALID && !(o[x] = malloc((size_t)N * s->bytes[x] + 1)))
            rc = gb_error_set(err, GB_ENOMEM, "out of memory for %lld transitions",
                              (long long)N);
    for (int e = 0; e < s->nextra; e++)
        if (!(ox[e] = malloc((size_t)N * s->extra_bytes[e] + 1)))
            rc = gb_error_set(err, GB_ENOMEM, "out of memory for %lld transitions",
                              (long long)N);
    int64_t row = 0;
    if (rc == 0)
        rc = gather_rows(s, r, o, ox, st, &row, err);
    hid_t file = rc == 0 ? H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (rc == 0 && file < 0)
        rc = gb_error_set(err, GB_EIO, "%s: cannot create", out);
    if (rc == 0)
        rc = write_columns(s, file, o, ox, N, out, err);
    for (int e = 0; e < s->nextra; e++)
        free(ox[e]);
    if (file >= 0 && H5Fclose(file) < 0 && rc == 0)
        rc = gb_error_set(err, GB_EIO, "%s: closing failed", out);
    for (int x = 0; x < X_NCOLS; x++)
        free(o[x]);
    st->transitions = row;
    return rc;
}

int gb_d4rl_export(const char *const *paths, int npaths, const char *out,
                   gb_d4rl_export_stats *st, gb_error *err)
{
    memset(st, 0, sizeof *st);
    if (npaths < 1)
        return gb_error_set(err, GB_EINVAL, "d4rl export: no dataset files");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    src s = {0};
    rec *r = NULL;
    int rc = open_src(&s, paths, npaths, err);
    if (rc == 0 && !(r = malloc((size_t)(s.records ? s.records : 1) * sizeof *r)))
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
    if (rc == 0)
        rc = scan(&s, r, err);
    int64_t N = 0;
    for (int64_t i = 0; rc == 0 && i < s.records; i++)
        N += r[i].valid;
    if (rc == 0 && N == 0)
        rc = gb_error_set(err, GB_EINVAL, "%s: no valid steps to export", paths[0]);
    st->records = s.records;
    if (rc == 0)
        rc = emit(&s, r, N, out, st, err);
    free(r);
    close_src(&s);
    return rc;
}

#endif
