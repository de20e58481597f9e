/* replay/formats/minari.c: Minari dataset ingest (layout in replay/formats/d4rl.h,
 * gb_minari_open): the episodes of data/main_data.hdf5 read into D4RL's in-memory columns. */
#include "replay/formats/d4rl.h"
#include "replay/formats/d4rl_internal.h"

#include "runtime/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GEARBOX_HAVE_HDF5

int gb_minari_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err)
{
    (void)T;
    *out = NULL;
    return gb_error_set(err, GB_EUNSUPPORTED, "%s: this gearbox was built without HDF5 "
                        "(install libhdf5-dev and rebuild) and cannot read Minari datasets", path);
}

#else

#define MINARI_FILE "main_data.hdf5"

/* The HDF5 file a Minari path names: DIR/data/main_data.hdf5, DIR/main_data.hdf5 or the file. */
static int find_file(const char *path, char *file, size_t cap, gb_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "%s: no such file or folder",
                                              path)
                               : gb_error_errno(err, "%s", path);
    if (!S_ISDIR(st.st_mode)) {
        snprintf(file, cap, "%s", path);
        return 0;
    }
    static const char *const tries[] = {"data/" MINARI_FILE, MINARI_FILE};
    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(file, cap, "%s/%s", path, tries[i]) >= cap)
            return gb_error_set(err, GB_EINVAL, "%s: path too long", path);
        if (access(file, R_OK) == 0)
            return 0;
    }
    return gb_error_set(err, GB_ENOTFOUND, "%s: no data/%s or %s in this folder (a Minari "
                        "dataset folder holds data/main_data.hdf5)", path, MINARI_FILE,
                        MINARI_FILE);
}

/* One dataset of one episode: its column's dtype, per-row shape and rows, and the memory type
 * to read it as (want: a dtype to convert to, or -1 to keep the stored one). */
typedef struct ep_ds {
    gb_dtype dt;
    int ndim, is_enum;
    int64_t shape[GB_REPLAY_MAX_DIMS];
    int64_t rows;
    hid_t ds, mtype;
} ep_ds;

static void ep_ds_close(ep_ds *e)
{
    if (e->mtype >= 0)
        H5Tclose(e->mtype);
    if (e->ds >= 0)
        H5Dclose(e->ds);
    e->ds = e->mtype = -1;
}

static int ep_ds_open(hid_t file, int64_t ep, const char *name, int want, ep_ds *e,
                      const char *path, gb_error *err)
{
    char full[96];
    snprintf(full, sizeof full, "episode_%lld/%s", (long long)ep, name);
    memset(e, 0, sizeof *e);
    e->ds = e->mtype = -1;
    H5O_info_t oi;
    if (H5Lexists(file, full, H5P_DEFAULT) <= 0 ||
        H5Oget_info_by_name(file, full, &oi, H5P_DEFAULT) < 0)
        return gb_error_set(err, GB_ECORRUPT, "%s: no '%s' (a Minari episode holds "
                            "observations, actions, rewards, terminations, truncations)", path,
                            full);
    if (oi.type != H5O_TYPE_DATASET)
        return gb_error_set(err, GB_EUNSUPPORTED, "%s: '%s' is a group (a Dict or Tuple space): "
                            "gearbox reads Box and Discrete spaces only", path, full);
    int rc = 0;
    hid_t space = -1, ftype = -1;
    e->ds = H5Dopen2(file, full, H5P_DEFAULT);
    space = e->ds >= 0 ? H5Dget_space(e->ds) : -1;
    ftype = e->ds >= 0 ? H5Dget_type(e->ds) : -1;
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[GB_REPLAY_MAX_DIMS + 1];
    if (rank < 1 || rank > GB_REPLAY_MAX_DIMS + 1 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        rc = gb_error_set(err, GB_ECORRUPT, "%s: '%s': rank %d (1..%d)", path, full, rank,
                          GB_REPLAY_MAX_DIMS + 1);
        goto out;
    }
    if (ftype < 0 || gb_d4rl_map_type(ftype, &e->dt, &e->mtype) != 0) {
        rc = gb_error_set(err, GB_ECORRUPT, "%s: '%s': element type not supported (numbers "
                          "and bools only)", path, full);
        goto out;
    }
    e->is_enum = H5Tget_class(ftype) == H5T_ENUM;
    if (want >= 0 && !e->is_enum && (gb_dtype)want != e->dt) {
        H5Tclose(e->mtype);
        e->mtype = H5Tcopy(want == GB_DTYPE_FLOAT32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT8);
        e->dt = (gb_dtype)want;
    }
    e->rows = (int64_t)dims[0];
    e->ndim = rank - 1;
    for (int k = 1; k < rank; k++)
        e->shape[k - 1] = (int64_t)dims[k];
    if (want >= 0 && e->ndim == 1 && e->shape[0] == 1) /* [n, 1]: one value a row */
        e->ndim = 0;
    if (want >= 0 && e->ndim != 0)
        rc = gb_error_set(err, GB_ECORRUPT, "%s: '%s' must be one value per row", path, full);
out:
    if (ftype >= 0)
        H5Tclose(ftype);
    if (space >= 0)
        H5Sclose(space);
    if (rc)
        ep_ds_close(e);
    return rc;
}

/* Reads rows [first, first + count) of e into dst (row bytes each). */
static int ep_ds_read(ep_ds *e, int64_t first, int64_t count, size_t row, void *dst,
                      const char *path, const char *what, gb_error *err)
{
    hid_t fspace = H5Dget_space(e->ds);
    int rank = H5Sget_simple_extent_ndims(fspace);
    hsize_t start[GB_REPLAY_MAX_DIMS + 1] = {0}, cnt[GB_REPLAY_MAX_DIMS + 1];
    H5Sget_simple_extent_dims(fspace, cnt, NULL);
    start[0] = (hsize_t)first;
    cnt[0] = (hsize_t)count;
    hid_t mspace = H5Screate_simple(rank, cnt, NULL);
    herr_t h = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, cnt, NULL);
    if (h >= 0 && count > 0)
        h = H5Dread(e->ds, e->mtype, mspace, fspace, H5P_DEFAULT, dst);
    H5Sclose(mspace);
    H5Sclose(fspace);
    if (h < 0)
        return gb_error_set(err, GB_EIO, "%s: reading %s failed", path, what);
    if (e->is_enum) /* bools as 0/1 */
        for (size_t i = 0; i < (size_t)count * row; i++)
            ((unsigned char *)dst)[i] = ((unsigned char *)dst)[i] != 0;
    return 0;
}

static int same_column(const gb_replay_column *c, const ep_ds *e)
{
    return c->dtype == e->dt && c->ndim == e->ndim &&
           memcmp(c->shape, e->shape, (size_t)e->ndim * sizeof e->shape[0]) == 0;
}

/* The Minari datasets of an episode, in column order: observations (obs and next_obs), then
 * actions, rewards, terminations, truncations. */
static const struct { const char *ds; const char *col; int want; int column; } PARTS[] = {
    {"observations", "obs", -1, C_OBS},
    {"actions", "action", -1, C_ACTION},
    {"rewards", "reward", GB_DTYPE_FLOAT32, C_REWARD},
    {"terminations", "terminal", GB_DTYPE_UINT8, C_TERMINAL},
    {"truncations", "timeout", GB_DTYPE_UINT8, C_TIMEOUT},
};
#define NPARTS 5
#define C_NEXT_OBS C_FIXED

/* Pass 0 checks every episode against episode 0 and counts rows; pass 1 reads them. */
static int read_episodes(gb_d4rl *d, hid_t file, int64_t episodes, const char *path,
                         gb_error *err)
{
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        int64_t row = 0;
        for (int64_t ep = 0; ep < episodes && rc == 0; ep++) {
            ep_ds e[NPARTS];
            int opened = 0;
            for (; opened < NPARTS; opened++)
                if ((rc = ep_ds_open(file, ep, PARTS[opened].ds, PARTS[opened].want,
                                     &e[opened], path, err)))
                    break;
            int64_t n = rc == 0 ? e[1].rows : 0;
            char what[96];
            for (int p = 0; p < NPARTS && rc == 0; p++) {
                gb_replay_column *col = &d->schema.columns[PARTS[p].column];
                snprintf(what, sizeof what, "episode_%lld/%s", (long long)ep, PARTS[p].ds);
                int64_t want_rows = p == 0 ? n + 1 : n;
                if (e[p].rows != want_rows)
                    rc = gb_error_set(err, GB_ECORRUPT, "%s: '%s' has %lld rows, expected %lld "
                                      "(%lld steps%s)", path, what, (long long)e[p].rows,
                                      (long long)want_rows, (long long)n,
                                      p == 0 ? " and the final observation" : "");
                else if (pass == 0 && ep == 0) {
                    snprintf(col->name, sizeof col->name, "%s", PARTS[p].col);
                    col->dtype = e[p].dt;
                    col->ndim = e[p].ndim;
                    memcpy(col->shape, e[p].shape, sizeof e[p].shape);
                } else if (pass == 0 && !same_column(col, &e[p]))
                    rc = gb_error_set(err, GB_ECORRUPT, "%s: '%s': its type or shape differs "
                                      "from episode_0's", path, what);
                else if (pass == 1) {
                    size_t sb = d->step_bytes[PARTS[p].column];
                    unsigned char *dst = d->data[PARTS[p].column] + (size_t)row * sb;
                    rc = ep_ds_read(&e[p], 0, n, sb, dst, path, what, err);
                    if (rc == 0 && p == 0) /* next_obs: rows 1..n */
                        rc = ep_ds_read(&e[p], 1, n, sb,
                                        d->data[C_NEXT_OBS] + (size_t)row * sb, path, what,
                                        err);
                }
            }
            for (int p = 0; p < opened; p++)
                ep_ds_close(&e[p]);
            if (rc == 0 && pass == 1 && n > 0)
                d->ends[row + n - 1] = 1;
            row += n;
        }
        if (rc == 0 && pass == 0) {
            d->N = row;
            if (row < 1)
                return gb_error_set(err, GB_ECORRUPT, "%s: no steps in %lld episodes", path,
                                    (long long)episodes);
            gb_replay_column *valid = &d->schema.columns[C_VALID], *next =
                &d->schema.columns[C_NEXT_OBS];
            snprintf(valid->name, sizeof valid->name, "valid");
            valid->dtype = GB_DTYPE_UINT8;
            *next = d->schema.columns[C_OBS];
            snprintf(next->name, sizeof next->name, "next_obs");
            d->schema.ncolumns = C_FIXED + 1;
            for (int c = 0; c < d->schema.ncolumns; c++) {
                const gb_replay_column *col = &d->schema.columns[c];
                size_t s = gb_dtype_size(col->dtype);
                for (int k = 0; k < col->ndim; k++)
                    s *= (size_t)col->shape[k];
                d->step_bytes[c] = s;
                if (c != C_VALID && !(d->data[c] = malloc(s * (size_t)row + 1)))
                    return gb_error_set(err, GB_ENOMEM, "%s: out of memory for %lld rows",
                                        path, (long long)row);
            }
            if (!(d->ends = calloc((size_t)row, 1)))
                return gb_error_set(err, GB_ENOMEM, "%s: out of memory", path);
        }
    }
    return rc;
}

int gb_minari_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err)
{
    *out = NULL;
    if (T < 1)
        return gb_error_set(err, GB_EINVAL, "minari: T = %lld, must be >= 1", (long long)T);
    char file[4096];
    int rc = find_file(path, file, sizeof file, err);
    if (rc)
        return rc;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported here, not printed by HDF5 */
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return gb_error_set(err, GB_ECORRUPT, "%s: not an HDF5 file (or unreadable)", file);
    gb_d4rl *d = calloc(1, sizeof *d);
    if (!d) {
        H5Fclose(f);
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    }
    d->schema.steps = T;
    /* episodes are episode_0 .. episode_<E-1>; every group of the file must be one of them */
    H5G_info_t gi;
    int64_t episodes = 0;
    char name[64];
    for (;; episodes++) {
        snprintf(name, sizeof name, "episode_%lld", (long long)episodes);
        if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
            break;
    }
    if (episodes == 0)
        rc = gb_error_set(err, GB_ECORRUPT, "%s: no group episode_0: not a Minari dataset",
                          file);
    else if (H5Gget_info(f, &gi) >= 0 && (int64_t)gi.nlinks != episodes)
        rc = gb_error_set(err, GB_ECORRUPT, "%s: %llu entries but episodes episode_0 .. "
                          "episode_%lld: the episode numbers have a gap, or other entries",
                          file, (unsigned long long)gi.nlinks, (long long)episodes - 1);
    if (rc == 0)
        rc = read_episodes(d, f, episodes, file, err);
    if (rc == 0)
        rc = gb_d4rl_plan_items(d, file, err);
    H5Fclose(f);
    if (rc) {
        gb_d4rl_close(d);
        return rc;
    }
    GB_INFO("%s: Minari dataset, %lld episodes, %lld steps", file, (long long)episodes,
            (long long)d->N);
    *out = d;
    return 0;
}

#endif
