/* replay/formats/d4rl.c: D4RL HDF5 ingest through the HDF5 C library (layout in
 * replay/formats/d4rl.h). */
#include "replay/formats/d4rl.h"
#include "replay/formats/d4rl_internal.h"

#include "runtime/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GEARBOX_HAVE_HDF5
#include <hdf5.h>
#endif

/* Accessors: the schema (lives as long as d), items, transitions (rows) and episodes. */
const gb_dataset_schema *gb_d4rl_schema(const gb_d4rl *d) { return &d->schema; }
int64_t gb_d4rl_items(const gb_d4rl *d) { return d->nitems; }
int64_t gb_d4rl_transitions(const gb_d4rl *d) { return d->N; }
int64_t gb_d4rl_episodes(const gb_d4rl *d) { return d->episodes; }

/* Item i's first row and its length in steps (at most T). */
void gb_d4rl_item_span(const gb_d4rl *d, int64_t i, int64_t *first_row, int32_t *length)
{
    *first_row = d->item_row[i];
    *length = d->item_len[i];
}

/* Copies item i into dst (one buffer per column, T steps each, zero past its length). */
void gb_d4rl_fill(const gb_d4rl *d, int64_t i, void *const *dst)
{
    int64_t row = d->item_row[i];
    int32_t len = d->item_len[i];
    int64_t T = d->schema.steps;
    for (int c = 0; c < d->schema.ncolumns; c++) {
        size_t sb = d->step_bytes[c];
        unsigned char *out = dst[c];
        if (c == C_VALID) {
            memset(out, 1, (size_t)len);
            memset(out + len, 0, (size_t)(T - len));
            continue;
        }
        memcpy(out, d->data[c] + (size_t)row * sb, (size_t)len * sb);
        memset(out + (size_t)len * sb, 0, (size_t)(T - len) * sb);
    }
}

/* Frees d and every column it read; NULL is fine. */
void gb_d4rl_close(gb_d4rl *d)
{
    if (!d)
        return;
    for (int c = 0; c < GB_REPLAY_MAX_COLUMNS; c++)
        free(d->data[c]);
    free(d->item_row);
    free(d->item_len);
    free(d->ends);
    free(d);
}

#ifndef GEARBOX_HAVE_HDF5

/* Without HDF5: refuses with GB_EUNSUPPORTED. */
int gb_d4rl_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err)
{
    (void)T;
    *out = NULL;
    return gb_error_set(err, GB_EUNSUPPORTED, "%s: this gearbox was built without HDF5 "
                        "(install libhdf5-dev and rebuild) and cannot read D4RL files", path);
}

#else

/* See d4rl_internal.h: the gearbox dtype of an HDF5 type and the memory type to read it as. */
int gb_d4rl_map_type(hid_t ftype, gb_dtype *dt, hid_t *mtype)
{
    H5T_class_t cls = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    if (cls == H5T_ENUM && size == 1) { /* h5py's bool */
        *dt = GB_DTYPE_UINT8;
        *mtype = H5Tcopy(ftype);
        return *mtype >= 0 ? 0 : -1;
    }
    if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
        *dt = size == 4 ? GB_DTYPE_FLOAT32 : GB_DTYPE_FLOAT64;
        *mtype = H5Tcopy(size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE);
        return 0;
    }
    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(ftype) == H5T_SGN_2;
        static const struct { size_t size; int sgn; gb_dtype dt; } map[] = {
            {1, 1, GB_DTYPE_INT8},    {2, 1, GB_DTYPE_INT16},   {4, 1, GB_DTYPE_INT32},
            {8, 1, GB_DTYPE_INT64},   {1, 0, GB_DTYPE_UINT8},   {2, 0, GB_DTYPE_UINT16},
            {4, 0, GB_DTYPE_UINT32},  {8, 0, GB_DTYPE_UINT64},
        };
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (map[i].size == size && map[i].sgn == sgn) {
                *dt = map[i].dt;
                *mtype = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
                return *mtype >= 0 ? 0 : -1;
            }
    }
    return -1;
}

/* Reads dataset name (shape [N, ...]) into a new buffer. want: -1 keep the stored type;
 * else read as that dtype (float32 rewards, uint8 flags, converted by HDF5 or, for bool enums,
 * here). Fills the column (name, dtype, per-step shape) and *rows. */
static int read_dataset(hid_t file, const char *name, const char *col_name, int want,
                        gb_replay_column *col, unsigned char **buf, int64_t *rows,
                        const char *path, gb_error *err)
{
    int rc = 0;
    hid_t ds = -1, space = -1, ftype = -1, mtype = -1;
    *buf = NULL;
    ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0)
        return gb_error_set(err, GB_ECORRUPT, "%s: no dataset '%s' (D4RL layout needs "
                            "observations, actions, rewards, terminals, timeouts)", path, name);
    space = H5Dget_space(ds);
    ftype = H5Dget_type(ds);
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[8];
    if (rank < 1 || rank > GB_REPLAY_MAX_DIMS + 1 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        rc = gb_error_set(err, GB_ECORRUPT, "%s: dataset '%s': rank %d (1..%d)", path, name, rank,
                          GB_REPLAY_MAX_DIMS + 1);
        goto out;
    }
    gb_dtype dt;
    if (ftype < 0 || gb_d4rl_map_type(ftype, &dt, &mtype) != 0) {
        rc = gb_error_set(err, GB_ECORRUPT, "%s: dataset '%s': element type not supported "
                          "(numbers and bools only)", path, name);
        goto out;
    }
    int is_enum = H5Tget_class(ftype) == H5T_ENUM;
    if (want >= 0 && !is_enum && (gb_dtype)want != dt) {
        H5Tclose(mtype);
        mtype = H5Tcopy(want == GB_DTYPE_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT8);
        dt = (gb_dtype)want;
    }
    memset(col, 0, sizeof *col);
    snprintf(col->name, sizeof col->name, "%s", col_name);
    col->dtype = dt;
    col->ndim = rank - 1;
    size_t step = gb_dtype_size(dt);
    for (int d = 1; d < rank; d++) {
        col->shape[d - 1] = (int64_t)dims[d];
        step *= (size_t)dims[d];
    }
    *rows = (int64_t)dims[0];
    *buf = malloc(step * (size_t)dims[0] + 1);
    if (!*buf) {
        rc = gb_error_set(err, GB_ENOMEM, "%s: out of memory for '%s'", path, name);
        goto out;
    }
    if (H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *buf) < 0) {
        rc = gb_error_set(err, GB_EIO, "%s: reading dataset '%s' failed", path, name);
        goto out;
    }
    if (is_enum && want == GB_DTYPE_UINT8) /* normalise bools to 0/1 */
        for (hsize_t i = 0; i < dims[0] * (step / gb_dtype_size(dt)); i++)
            (*buf)[i] = (*buf)[i] != 0;
out:
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    if (mtype >= 0)
        H5Tclose(mtype);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (space >= 0)
        H5Sclose(space);
    H5Dclose(ds);
    return rc;
}

typedef struct info_iter {
    char names[GB_REPLAY_MAX_COLUMNS][64];
    int n;
} info_iter;

/* H5Literate callback: collects the names of the datasets in infos/ that fit a column. */
static herr_t info_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    info_iter *it = data;
    H5O_info_t oi;
    if (H5Oget_info_by_name(g, name, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET) {
        GB_WARN("d4rl: infos/%s is not a dataset; skipped", name);
        return 0;
    }
    if (strlen(name) + 6 > GB_REPLAY_NAME_MAX - 1 || it->n >= GB_REPLAY_MAX_COLUMNS) {
        GB_WARN("d4rl: infos/%s skipped (name too long or too many columns)", name);
        return 0;
    }
    snprintf(it->names[it->n++], 64, "%s", name);
    return 0;
}

/* See d4rl_internal.h: cuts the episodes into items of at most T steps (two passes: count,
 * then fill). Returns 0 or GB_ENOMEM. */
int gb_d4rl_plan_items(gb_d4rl *d, const char *path, gb_error *err)
{
    const uint8_t *term = d->data[C_TERMINAL], *tout = d->data[C_TIMEOUT];
    int64_t T = d->schema.steps, n = 0, eps = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        eps = 0;
        int64_t start = 0;
        for (int64_t i = 0; i < d->N; i++) {
            int end = d->ends ? d->ends[i] : term[i] || tout[i];
            if (!(end || i == d->N - 1))
                continue;
            int64_t len = i + 1 - start;
            for (int64_t k = 0; k < len; k += T) {
                if (pass == 1) {
                    d->item_row[n] = start + k;
                    d->item_len[n] = (int32_t)(len - k < T ? len - k : T);
                }
                n++;
            }
            eps++;
            start = i + 1;
        }
        if (pass == 0) {
            d->item_row = malloc((size_t)(n ? n : 1) * sizeof *d->item_row);
            d->item_len = malloc((size_t)(n ? n : 1) * sizeof *d->item_len);
            if (!d->item_row || !d->item_len)
                return gb_error_set(err, GB_ENOMEM, "%s: out of memory for %lld items", path,
                                    (long long)n);
        }
    }
    d->nitems = n;
    d->episodes = eps;
    return 0;
}

/* Reads the fixed columns (observations, actions, rewards, terminals, timeouts; a v0 dataset's
 * missing timeouts are all 0) into d, sets d->N and checks every column has N rows. */
static int read_fixed(gb_d4rl *d, hid_t file, const char *path, gb_error *err)
{
    static const struct { const char *ds, *col; int want; } fixed[] = {
        {"observations", "obs", -1},          {"actions", "action", -1},
        {"rewards", "reward", GB_DTYPE_FLOAT32}, {"terminals", "terminal", GB_DTYPE_UINT8},
        {"timeouts", "timeout", GB_DTYPE_UINT8},
    };
    int64_t rows;
    int rc;
    for (int c = 0; c < 5; c++) {
        if (c == 4 && H5Lexists(file, "timeouts", H5P_DEFAULT) <= 0) {
            /* D4RL's v0 datasets have none: episodes end at terminals (and the last row) */
            GB_INFO("%s: no 'timeouts' (a v0 dataset): episodes end at terminals only", path);
            gb_replay_column *col = &d->schema.columns[c];
            snprintf(col->name, sizeof col->name, "%s", fixed[c].col);
            col->dtype = GB_DTYPE_UINT8;
            col->ndim = 0;
            if (!(d->data[c] = calloc((size_t)d->N + 1, 1)))
                return gb_error_set(err, GB_ENOMEM, "%s: out of memory", path);
            continue;
        }
        if ((rc = read_dataset(file, fixed[c].ds, fixed[c].col, fixed[c].want,
                               &d->schema.columns[c], &d->data[c], &rows, path, err)))
            return rc;
        /* rewards, terminals, timeouts stored [N, 1] are one value a row too */
        if (c >= 2 && d->schema.columns[c].ndim == 1 && d->schema.columns[c].shape[0] == 1)
            d->schema.columns[c].ndim = 0;
        if (c == 0)
            d->N = rows;
        else if (rows != d->N)
            return gb_error_set(err, GB_ECORRUPT, "%s: '%s' has %lld rows, observations %lld",
                                path, fixed[c].ds, (long long)rows, (long long)d->N);
        if (c >= 2 && d->schema.columns[c].ndim != 0)
            return gb_error_set(err, GB_ECORRUPT, "%s: '%s' must be one value per row", path,
                                fixed[c].ds);
    }
    if (d->N < 1)
        return gb_error_set(err, GB_ECORRUPT, "%s: no transitions", path);
    return 0;
}

/* Adds the datasets of the group infos/ (when there is one) as columns info_<name> from *nc on,
 * skipping (with a warning) those that cannot be read or have another row count. */
static void read_infos(gb_d4rl *d, hid_t file, const char *path, int *nc)
{
    if (H5Lexists(file, "infos", H5P_DEFAULT) <= 0)
        return;
    info_iter it = {.n = 0};
    hid_t g = H5Gopen2(file, "infos", H5P_DEFAULT);
    if (g >= 0) {
        H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, info_cb, &it);
        H5Gclose(g);
    }
    int64_t rows;
    for (int i = 0; i < it.n; i++) {
        if (*nc >= GB_REPLAY_MAX_COLUMNS) {
            GB_WARN("d4rl: %s: more than %d columns; infos/%s and later skipped", path,
                    GB_REPLAY_MAX_COLUMNS, it.names[i]);
            break;
        }
        char ds[80], col[GB_REPLAY_NAME_MAX];
        snprintf(ds, sizeof ds, "infos/%s", it.names[i]);
        /* Column names are cut at GB_REPLAY_NAME_MAX - 1 bytes on purpose. */
        snprintf(col, sizeof col, "info_%.*s", (int)(sizeof col - 6), it.names[i]);
        gb_error e2 = {0};
        if (read_dataset(file, ds, col, -1, &d->schema.columns[*nc], &d->data[*nc], &rows, path,
                         &e2) != 0 || rows != d->N) {
            GB_WARN("d4rl: %s: skipped (%s)", ds, e2.msg[0] ? e2.msg : "row count differs");
            free(d->data[*nc]);
            d->data[*nc] = NULL;
            continue;
        }
        (*nc)++;
    }
}

/* Reads every column of an open D4RL file into d (the fixed ones, the valid column's schema,
 * next_observations when present, infos/) and sets the schema's columns and step sizes. */
static int read_columns(gb_d4rl *d, hid_t file, const char *path, gb_error *err)
{
    int rc = read_fixed(d, file, path, err);
    if (rc)
        return rc;
    gb_replay_column *valid = &d->schema.columns[C_VALID];
    snprintf(valid->name, sizeof valid->name, "valid");
    valid->dtype = GB_DTYPE_UINT8;
    int nc = C_FIXED;
    int64_t rows;
    if (H5Lexists(file, "next_observations", H5P_DEFAULT) > 0) {
        if ((rc = read_dataset(file, "next_observations", "next_obs", -1, &d->schema.columns[nc],
                               &d->data[nc], &rows, path, err)))
            return rc;
        if (rows != d->N)
            return gb_error_set(err, GB_ECORRUPT, "%s: 'next_observations' has %lld rows, "
                                "observations %lld", path, (long long)rows, (long long)d->N);
        nc++;
    }
    read_infos(d, file, path, &nc);
    d->schema.ncolumns = nc;
    for (int c = 0; c < nc; c++) {
        const gb_replay_column *col = &d->schema.columns[c];
        size_t s = gb_dtype_size(col->dtype);
        for (int k = 0; k < col->ndim; k++)
            s *= (size_t)col->shape[k];
        d->step_bytes[c] = s;
    }
    return 0;
}

/* See d4rl.h. */
int gb_d4rl_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err)
{
    *out = NULL;
    if (T < 1)
        return gb_error_set(err, GB_EINVAL, "d4rl: T = %lld, must be >= 1", (long long)T);
    if (access(path, R_OK) != 0)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "%s: no such file", path)
                               : gb_error_errno(err, "%s", path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported here, not printed by HDF5 */
    gb_d4rl *d = calloc(1, sizeof *d);
    if (!d)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    d->schema.steps = T;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        free(d);
        return gb_error_set(err, GB_ECORRUPT, "%s: not an HDF5 file (or unreadable)", path);
    }
    int rc = read_columns(d, file, path, err);
    if (rc == 0)
        rc = gb_d4rl_plan_items(d, path, err);
    H5Fclose(file);
    if (rc) {
        gb_d4rl_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

#endif
