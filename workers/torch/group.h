/* workers/torch/group.h: the trainers' process group: libtorch's c10d collectives
 * (ProcessGroupGloo on CPU memory; ProcessGroupNCCL for device memory once the GPU trainer exists)
 * over a c10d store rendezvous (a FileStore in the run directory, or a TCPStore that rank 0
 * serves). Nothing here is home-made: the calls wrap c10d's, on tensors that view the caller's
 * buffers (no copy in or out).
 * defines: gb_group, gb_group_opts, gb_group_op, gb_group_*
 *
 * Every call is collective: every rank must make the same calls in the same order with matching
 * sizes. Every call waits at most opts.timeout_s; a peer that died makes the call fail at once
 * (its connections close) or, if it hangs, after the timeout, with GB_ECLOSED or GB_ETIMEOUT and a
 * message that names the call and this rank. After a failed call the group is unusable: every
 * later call returns GB_ECLOSED; close it, and only then reuse or free the failed call's buffers
 * (c10d may still be working on them until close has joined its threads). An allreduce,
 * allgather or broadcast of zero values returns at once (every rank passes the same size). One
 * thread at a time per group.
 *
 * Debian's libtorch 1.13 is CPU-only (no ProcessGroupNCCL symbols): groups are Gloo groups on
 * CPU memory. Gloo has no flat allgather: gb_group_allgather gathers into views of out, through
 * a buffer of Gloo's own. */
#ifndef GB_WORKERS_TORCH_GROUP_H
#define GB_WORKERS_TORCH_GROUP_H

#include "runtime/base/dtype.h"
#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_group gb_group;

typedef struct gb_group_opts {
    int rank, size;          /* 0 <= rank < size */
    const char *store_path;  /* FileStore: a path every rank can reach (the run directory); the
                                file must not exist before the group opens (a stale one from an
                                earlier group would mix rendezvous) */
    const char *tcp_host;    /* TCPStore when store_path is NULL: rank 0 listens on tcp_port */
    int tcp_port;
    const char *device_host; /* the address this rank's Gloo connections use ("127.0.0.1" on one
                                machine; NULL = 127.0.0.1) */
    const char *prefix;      /* store key prefix, so several groups can share a store (NULL: "") */
    double timeout_s;        /* rendezvous and every collective (> 0) */
} gb_group_opts;

/* Joins the group: waits (up to timeout_s) until all size ranks have joined. Returns 0,
 * GB_ETIMEOUT, GB_EINVAL (bad options) or GB_ETORCH. */
int gb_group_open(const gb_group_opts *o, gb_group **out, gb_error *err);
void gb_group_close(gb_group *g); /* NULL: no-op */

int gb_group_rank(const gb_group *g);
int gb_group_size(const gb_group *g);

typedef enum { GB_GROUP_SUM = 0, GB_GROUP_MIN = 1, GB_GROUP_MAX = 2 } gb_group_op;

/* In place: buf[count] of dtype (float32, float64, int32, int64, uint8) becomes the reduction over
 * every rank; every rank ends with the same bytes. */
int gb_group_allreduce(gb_group *g, gb_dtype dtype, void *buf, int64_t count, gb_group_op op,
                       gb_error *err);

/* out[size * bytes] receives every rank's in[bytes], in rank order (bytes equal on every rank). */
int gb_group_allgather(gb_group *g, const void *in, size_t bytes, void *out, gb_error *err);

/* buf[bytes] on every rank becomes root's. */
int gb_group_broadcast(gb_group *g, void *buf, size_t bytes, int root, gb_error *err);

/* All-to-all with per-peer sizes: in holds the parts for rank 0, 1, ... back to back
 * (send_bytes[r] each); out receives the parts from rank 0, 1, ... back to back (recv_bytes[r]
 * each). recv_bytes[r] on this rank must equal send_bytes[this rank] on rank r. Zero sizes are
 * fine. The part a rank sends itself is copied locally. */
int gb_group_alltoall(gb_group *g, const void *in, const size_t *send_bytes, void *out,
                      const size_t *recv_bytes, gb_error *err);

int gb_group_barrier(gb_group *g, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
