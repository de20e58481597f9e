/* workers/server/client/client_shards.h: one C client over several data servers, each holding a
 * part of the data: batches drawn across them with the probabilities one server holding the union
 * would give (the method: docs/protocol.md, "Sampling across several servers"; the Python twin:
 * python/gearbox_shards.py). Library gearbox_client.
 * defines: gb_client_shards, gb_client_shards_open, gb_client_shards_close,
 *          gb_client_shards_client, gb_client_shards_sample
 *   gb_client_shards *s;  gb_client_shards_open(&s, eps, 2, 10000, seed, &err);
 *   req.selector = "weighted";  gb_client_shards_sample(s, &req, &batch, server, &err);
 *   // batch.prob, batch.weight: global; server[i]: which server item i came from
 * Blocking; one thread uses a gb_client_shards. */
#ifndef GB_WORKERS_CLIENT_SHARDS_H
#define GB_WORKERS_CLIENT_SHARDS_H

#include "workers/server/client/client.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GB_CLIENT_SHARDS_MAX 64

typedef struct gb_client_shards gb_client_shards;

/* Connects one client to each of n (1..GB_CLIENT_SHARDS_MAX) endpoints; seed drives the split
 * of each batch over the servers. Returns 0 or GB_EINVAL, GB_ENOMEM, gb_client_open's errors. */
int gb_client_shards_open(gb_client_shards **out, const char *const *endpoints, int n,
                          int timeout_ms, uint64_t seed, gb_error *err);
void gb_client_shards_close(gb_client_shards *s);

/* Server i's client (for info, inserts and priority updates on that server), or NULL. */
gb_client *gb_client_shards_client(gb_client_shards *s, int i);

/* Draws req->batch items across the servers: asks each its total weight (INFO: uniform, its
 * size; weighted, its weight_total), splits the batch by a multinomial draw over W_s / W and
 * samples each server's share into out's buffers (rows in server order). out->prob is then the
 * global probability (the server's times W_s / W), out->weight (N * prob)^-beta over the batch's
 * largest (N: the items on all servers; 1 for uniform), out->size N, out->n the items. server
 * (optional, req->batch entries) receives each item's server; index and key are that server's.
 * Servers must share one schema (checked: same columns and T). req->selector: "uniform" or
 * "weighted" (NULL: the first server's default). Returns 0, GB_EINVAL (another selector, a
 * server without weighted totals, schemas that differ, buffers too small), GB_ETIMEOUT (no
 * weight anywhere: nothing to sample), or the clients' errors. */
int gb_client_shards_sample(gb_client_shards *s, const gb_client_sample_req *req,
                            gb_client_batch *out, int32_t *server, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
