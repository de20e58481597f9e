/* workers/torch/group.h: the trainers' process group: libtorch's c10d collectives
 * (ProcessGroupGloo on CPU memory; ProcessGroupNCCL for the GPU trainers' gradients)
 * over a c10d store rendezvous (a FileStore in the run directory, or a TCPStore that rank 0
 * serves). Nothing here is home-made: the calls wrap c10d's, on tensors that view the caller's
 * buffers (no copy in or out; with opts.abandon an allgather and an all-reduce over 256 KiB
 * copy through the group's own buffers: below).
 * defines: the call names gb_group_* (through the bridge's table, workers/torch/bridge.h, which
 *          also defines the types gb_group, gb_group_opts and gb_group_op)
 *
 * Every call is collective: every rank must make the same calls in the same order with matching
 * sizes. Every call waits at most opts.timeout_s; a peer that died makes the call fail at once
 * (its connections close) or, if it hangs, after the timeout, with GB_ECLOSED or GB_ETIMEOUT and a
 * message that names the call and this rank. Gloo does not always notice a dead peer (a send it
 * could not write in place waits out the timeout: group.cpp); opts.abandon, asked every 0.1 s of a
 * wait, ends it at once with GB_ECLOSED ("given up"). After a failed call the group is unusable:
 * every later call returns GB_ECLOSED; close it, and only then reuse or free the failed call's
 * buffers (c10d may still be working on them until close has joined its threads). With
 * opts.abandon the buffers are the caller's again as soon as any call returns, given up or
 * failed: the collective c10d may still run (until its timeout; close leaves such a group to its
 * threads) moves no more bytes, and no local step of it works on them (group.cpp). An
 * allreduce, allgather or broadcast of zero values returns at once (every rank passes the same
 * size). One thread at a time per group.
 *
 * Debian's libtorch 1.13 is CPU-only (no ProcessGroupNCCL symbols): groups are Gloo groups on
 * CPU memory. Built against a libtorch with NCCL (USE_C10D_NCCL: PyTorch's CUDA wheels), a group
 * opened with opts.nccl also holds a ProcessGroupNCCL on the same store, which the learner's
 * gradient buckets on the GPU go through (workers/torch/group.hpp); the rest stays Gloo's. Gloo
 * has no flat allgather: gb_group_allgather gathers into views of out, through a buffer of
 * Gloo's own. */
#ifndef GB_WORKERS_TORCH_GROUP_H
#define GB_WORKERS_TORCH_GROUP_H

#include "workers/torch/bridge.h"

/* Joins the group: waits (up to timeout_s) until all size ranks have joined. Returns 0,
 * GB_ETIMEOUT, GB_EINVAL (bad options) or GB_ETORCH. */
#define gb_group_open(...) (gb_torch()->group_open(__VA_ARGS__))

/* NULL: a no-op that loads nothing. */
static inline void gb_group_close(gb_group *g)
{
    if (g)
        gb_torch()->group_close(g);
}

#define gb_group_rank(...) (gb_torch()->group_rank(__VA_ARGS__))
#define gb_group_size(...) (gb_torch()->group_size(__VA_ARGS__))

/* In place: buf[count] of dtype (float32, float64, int32, int64, uint8) becomes the reduction over
 * every rank; every rank ends with the same bytes. */
#define gb_group_allreduce(...) (gb_torch()->group_allreduce(__VA_ARGS__))

/* out[size * bytes] receives every rank's in[bytes], in rank order (bytes equal on every rank). */
#define gb_group_allgather(...) (gb_torch()->group_allgather(__VA_ARGS__))

/* buf[bytes] on every rank becomes root's. */
#define gb_group_broadcast(...) (gb_torch()->group_broadcast(__VA_ARGS__))

/* All-to-all with per-peer sizes: in holds the parts for rank 0, 1, ... back to back
 * (send_bytes[r] each); out receives the parts from rank 0, 1, ... back to back (recv_bytes[r]
 * each). recv_bytes[r] on this rank must equal send_bytes[this rank] on rank r. Zero sizes are
 * fine. The part a rank sends itself is copied locally. */
#define gb_group_alltoall(...) (gb_torch()->group_alltoall(__VA_ARGS__))

#define gb_group_barrier(...) (gb_torch()->group_barrier(__VA_ARGS__))

/* The payload bytes this rank's all-to-alls (and the small all-reduces made of one: the step's
 * agreement, a small model's gradient buckets) have sent to and received from the other ranks
 * since the group opened, the part a rank keeps excluded: what the sharded replay's global
 * selection and remote collection put on the network, with those all-reduces. */
#define gb_group_traffic(...) (gb_torch()->group_traffic(__VA_ARGS__))

/* 1 once a call of the group failed (a peer died or hung, a timeout): the group is unusable;
 * close it (and re-form another, workers/roles/trainer_group.c). NULL: 0. */
#define gb_group_failed(...) (gb_torch()->group_failed(__VA_ARGS__))

/* 1 when this module's libtorch has NCCL (PyTorch's CUDA builds; Debian's has none), so that
 * gb_group_opts.nccl can be asked for. */
#define gb_group_has_nccl() (gb_torch()->group_has_nccl())

#endif
