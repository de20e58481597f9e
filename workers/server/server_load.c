/* workers/server/server_load.c: the data server's replay from its config: schema from the dataset
 * (gearbox *.gbds files, a D4RL HDF5 file or a Minari dataset), items from the dataset or from
 * a checkpoint; a D4RL or Minari dataset's episode index (gb_episodes: each item's slot and
 * episode) for the offline sampling modes; the tables of server.tables. */
#include "workers/server/server.h"

#include "replay/formats/d4rl.h"
#include "replay/formats/dataset.h"
#include "replay/from_config.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOAD_BATCH 256

static int schema_equal(const gb_dataset_schema *a, const gb_dataset_schema *b)
{
    if (a->steps != b->steps || a->ncolumns != b->ncolumns)
        return 0;
    for (int c = 0; c < a->ncolumns; c++) {
        const gb_replay_column *x = &a->columns[c], *y = &b->columns[c];
        if (strcmp(x->name, y->name) != 0 || x->dtype != y->dtype || x->ndim != y->ndim ||
            x->per_item != y->per_item ||
            memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]) != 0)
            return 0;
    }
    return 1;
}

static int make_replay(const gb_config *cfg, const gb_dataset_schema *schema, int64_t items,
                       gb_replay **out, gb_error *err)
{
    const gb_config_server *sc = &cfg->server;
    gb_replay_options o;
    gb_replay_options_default(&o);
    gb_replay_options_from_config(&o, &sc->replay); /* selector, extra_selectors, ... */
    o.capacity = sc->replay.capacity > 0 ? sc->replay.capacity : (items > 0 ? items : 1);
    o.seed = (uint64_t)sc->seed;
    o.collect_threads = 1;
    int rc = gb_dataset_schema_apply(schema, &o, err);
    if (rc == 0)
        rc = gb_replay_create(&o, out, err);
    if (rc) {
        gb_error_prefix(err, "server replay");
        return rc;
    }
    char names[96];
    gb_replay_selector_names(gb_replay_selectors(*out), ", ", names, sizeof names);
    GB_INFO("selectors a request may name: %s (default %s)", names,
            gb_replay_selector_name(o.selector));
    return 0;
}

/* Inserts items [first, first+n) of a source through fill(), LOAD_BATCH at a time. */
typedef int (*fill_fn)(void *src, int64_t i, void *const *dst, int64_t *version,
                       int32_t *length, gb_error *err);

/* Whether an item's episode ends with it: its last valid step is terminal or a timeout. */
static int item_ends(const gb_replay_options *o, void *const *dst, int32_t length)
{
    for (int c = 0; c < o->ncolumns; c++) {
        const gb_replay_column *col = &o->columns[c];
        if ((strcmp(col->name, "terminal") == 0 || strcmp(col->name, "timeout") == 0) &&
            !col->per_item && col->ndim == 0 && col->dtype == GB_DTYPE_UINT8 && length > 0 &&
            ((const uint8_t *)dst[c])[length - 1])
            return 1;
    }
    return 0;
}

/* ep (optional) records each committed item's slot, key and episode boundary. */
static int load_items(gb_replay *r, void *src, fill_fn fill, int64_t first, int64_t n,
                      gb_episodes *ep, gb_error *err)
{
    const gb_replay_options *o = gb_replay_options_of(r);
    uint8_t ends[LOAD_BATCH];
    int64_t idx[LOAD_BATCH], versions[LOAD_BATCH];
    int32_t lengths[LOAD_BATCH];
    for (int64_t done = 0; done < n;) {
        int64_t k = n - done < LOAD_BATCH ? n - done : LOAD_BATCH;
        int rc = gb_replay_allocate_unlimited(r, k, idx, err); /* loading is not rate-limited */
        if (rc)
            return gb_error_prefix(err, "loading item %lld of %lld (server.replay.capacity and "
                                   "max_size must hold the dataset)", (long long)done,
                                   (long long)n);
        for (int64_t j = 0; j < k; j++) {
            void *dst[GB_REPLAY_MAX_COLUMNS];
            for (int c = 0; c < o->ncolumns; c++)
                dst[c] = gb_replay_block(r, c, idx[j]);
            if ((rc = fill(src, first + done + j, dst, &versions[j], &lengths[j], err))) {
                gb_replay_abort(r, k, idx, NULL);
                return rc;
            }
            ends[j] = (uint8_t)item_ends(o, dst, lengths[j]);
        }
        if ((rc = gb_replay_commit(r, k, idx, NULL, lengths, versions, err)))
            return rc;
        gb_replay_status st;
        gb_replay_status_view(r, &st);
        for (int64_t j = 0; ep && j < k; j++)
            if ((rc = gb_episodes_add(ep, idx[j], st.item[idx[j]].seq, lengths[j], ends[j],
                                      err)))
                return rc;
        done += k;
    }
    return 0;
}

static int fill_d4rl(void *src, int64_t i, void *const *dst, int64_t *version, int32_t *length,
                     gb_error *err)
{
    (void)err;
    int64_t row;
    gb_d4rl_fill(src, i, dst);
    gb_d4rl_item_span(src, i, &row, length);
    *version = 0;
    return 0;
}

typedef struct gbds_src {
    gb_dataset_reader **readers;
    int64_t *first; /* global index of each reader's first record */
    int n;
} gbds_src;

static int fill_gbds(void *src, int64_t i, void *const *dst, int64_t *version, int32_t *length,
                     gb_error *err)
{
    gbds_src *s = src;
    int f = s->n - 1;
    while (f > 0 && s->first[f] > i)
        f--;
    return gb_dataset_reader_read(s->readers[f], i - s->first[f], dst, version, length, err);
}

static int restoring(const gb_config_server *sc)
{
    return sc->restore && sc->checkpoint[0] && access(sc->checkpoint, F_OK) == 0;
}

static int finish(const gb_config_server *sc, gb_replay *r, int64_t *loaded, gb_error *err)
{
    if (restoring(sc)) {
        int rc = gb_replay_restore(r, sc->checkpoint, err);
        if (rc)
            return gb_error_prefix(err, "restoring %s", sc->checkpoint);
        gb_replay_stats st;
        gb_replay_stats_get(r, &st);
        *loaded = st.size;
        GB_INFO("restored %lld items from %s", (long long)st.size, sc->checkpoint);
    }
    return 0;
}

static int load_d4rl(const gb_config *cfg, gb_replay **out, gb_episodes **ep, int64_t *loaded,
                     gb_error *err)
{
    const gb_config_server *sc = &cfg->server;
    gb_d4rl *d = NULL;
    int rc = sc->dataset_format == GB_DATASET_MINARI
                 ? gb_minari_open(&d, sc->dataset, sc->steps, err)
                 : gb_d4rl_open(&d, sc->dataset, sc->steps, err);
    if (rc)
        return rc;
    int64_t n = gb_d4rl_items(d);
    GB_INFO("%s: %lld transitions, %lld episodes -> %lld items of %lld steps", sc->dataset,
            (long long)gb_d4rl_transitions(d), (long long)gb_d4rl_episodes(d), (long long)n,
            (long long)sc->steps);
    if ((rc = make_replay(cfg, gb_d4rl_schema(d), n, out, err)))
        goto out;
    if (restoring(sc))
        rc = finish(sc, *out, loaded, err);
    else if (ep && (rc = gb_episodes_create(ep, sc->steps, gb_rng_seed_of((uint64_t)sc->seed,
                                                   "server", 0, "epochs"), err)))
        goto out;
    else if ((rc = load_items(*out, d, fill_d4rl, 0, n, ep ? *ep : NULL, err)) == 0)
        *loaded = n;
out:
    gb_d4rl_close(d);
    return rc;
}

static int load_gbds(const gb_config *cfg, gb_replay **out, int64_t *loaded, gb_error *err)
{
    const gb_config_server *sc = &cfg->server;
    char **paths = NULL;
    int npaths = 0;
    int rc = gb_dataset_list(sc->dataset, &paths, &npaths, err);
    if (rc)
        return rc;
    gbds_src src = {calloc((size_t)npaths, sizeof(gb_dataset_reader *)),
                    calloc((size_t)npaths, sizeof(int64_t)), 0};
    int64_t total = 0;
    if (!src.readers || !src.first) {
        rc = gb_error_set(err, GB_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < npaths; i++) {
        if ((rc = gb_dataset_reader_open(&src.readers[i], paths[i], err)))
            goto out;
        src.n++;
        if (!schema_equal(gb_dataset_reader_schema(src.readers[0]),
                          gb_dataset_reader_schema(src.readers[i]))) {
            rc = gb_error_set(err, GB_EINVAL, "dataset %s: its schema differs from %s's",
                              paths[i], paths[0]);
            goto out;
        }
        src.first[i] = total;
        total += gb_dataset_reader_count(src.readers[i]);
    }
    /* Items are loaded file by file; with several files (several trainers recorded in
     * parallel), "newest" is per file: the last items of each file in proportion. */
    int64_t keep = sc->dataset_last_items > 0 && sc->dataset_last_items < total
                       ? sc->dataset_last_items : total;
    GB_INFO("%s: %d file(s), %lld items; loading %lld", sc->dataset, npaths, (long long)total,
            (long long)keep);
    if ((rc = make_replay(cfg, gb_dataset_reader_schema(src.readers[0]), keep, out, err)))
        goto out;
    if (restoring(sc)) {
        rc = finish(sc, *out, loaded, err);
        goto out;
    }
    *loaded = 0;
    for (int i = 0; i < npaths; i++) {
        int64_t cnt = gb_dataset_reader_count(src.readers[i]);
        int64_t take = keep == total ? cnt : (int64_t)((double)keep * (double)cnt / (double)total);
        if (i == npaths - 1)
            take = keep - *loaded;
        if (take > cnt)
            take = cnt;
        if ((rc = load_items(*out, &src, fill_gbds, src.first[i] + cnt - take, take, NULL,
                             err)))
            goto out;
        *loaded += take;
    }
out:
    for (int i = 0; i < src.n; i++)
        gb_dataset_reader_close(src.readers[i]);
    free(src.readers);
    free(src.first);
    free(paths);
    if (rc && *out) {
        gb_replay_free(*out);
        *out = NULL;
    }
    return rc;
}

/* A restart from the checkpoint alone: its header gives the schema and capacity (the dataset it
 * was first loaded from may be gone). */
static int load_checkpoint(const gb_config *cfg, gb_replay **out, int64_t *loaded, gb_error *err)
{
    const gb_config_server *sc = &cfg->server;
    gb_dataset_schema s = {0};
    int64_t capacity = 0;
    int rc = gb_replay_checkpoint_schema(sc->checkpoint, &s.steps, s.columns, &s.ncolumns,
                                         &capacity, err);
    if (rc)
        return gb_error_prefix(err, "restoring %s", sc->checkpoint);
    GB_INFO("%s: restoring from the checkpoint alone (%s)", sc->checkpoint,
            sc->dataset[0] ? "the dataset is not there" : "no server.dataset");
    if ((rc = make_replay(cfg, &s, capacity, out, err)) == 0)
        rc = finish(sc, *out, loaded, err);
    return rc;
}

int gb_server_load_dataset(const gb_config *cfg, gb_replay **out, int64_t *loaded,
                           gb_error *err)
{
    return gb_server_load_dataset_episodes(cfg, out, NULL, loaded, err);
}

int gb_server_load_dataset_episodes(const gb_config *cfg, gb_replay **out, gb_episodes **ep,
                                    int64_t *loaded, gb_error *err)
{
    *out = NULL;
    if (ep)
        *ep = NULL;
    *loaded = 0;
    int rc;
    if (restoring(&cfg->server) &&
        (!cfg->server.dataset[0] || access(cfg->server.dataset, F_OK) != 0)) {
        if ((rc = load_checkpoint(cfg, out, loaded, err)) && *out) {
            gb_replay_free(*out);
            *out = NULL;
        }
        return rc;
    }
    if (!cfg->server.dataset[0])
        return gb_error_set(err, GB_EINVAL, "server.dataset: not set; the server takes its "
                            "schema (and, unless restoring, its items) from a dataset");
    rc = cfg->server.dataset_format == GB_DATASET_GEARBOX ? load_gbds(cfg, out, loaded, err)
                                                         : load_d4rl(cfg, out, ep, loaded, err);
    if (rc && *out) {
        gb_replay_free(*out);
        *out = NULL;
    }
    if (rc && ep) {
        gb_episodes_free(*ep);
        *ep = NULL;
    }
    return rc;
}

void gb_server_tables_free(gb_server_tables *t)
{
    for (int i = 0; i < t->n; i++) {
        gb_replay_free(t->t[i].r);
        gb_episodes_free(t->t[i].ep);
    }
    t->n = 0;
}

int gb_server_load_tables(const gb_config *cfg, gb_server_tables *t, gb_error *err)
{
    memset(t, 0, sizeof *t);
    int rc = 0;
    gb_config *tc = NULL;
    for (int i = 0; rc == 0 && i <= cfg->server.tables.n && i < GB_SERVER_MAX_TABLES; i++) {
        const char *name = i == 0 ? GB_SERVER_DEFAULT_TABLE : cfg->server.tables.kv[i - 1].key;
        const gb_config *c = cfg;
        if (i > 0) {
            if (!tc && !(tc = malloc(sizeof *tc))) {
                rc = gb_error_set(err, GB_ENOMEM, "out of memory");
                break;
            }
            if ((rc = gb_config_server_table(cfg, name, tc, err)))
                break;
            c = tc;
        }
        /* names are at most 31 bytes (gb_config_finish checks server.tables) */
        snprintf(t->t[i].name, sizeof t->t[i].name, "%.31s", name);
        rc = gb_server_load_dataset_episodes(c, &t->t[i].r, &t->t[i].ep, &t->t[i].loaded, err);
        if (rc)
            gb_error_prefix(err, "table '%s'", name);
        else
            t->n = i + 1;
    }
    free(tc);
    if (rc)
        gb_server_tables_free(t);
    return rc;
}
