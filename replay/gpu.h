/* replay/gpu.h: the replay's GPU path (kernels/kernels.h underneath): a weighted selector whose
 * priorities live in a device mirror kept in sync by the scatter kernel, and zero-copy collection
 * of a pinned sample from the registered column tables straight into device batches.
 * Used by a trainer with trainer.device: cuda; everything else in the replay is unchanged.
 * defines: gb_replay_gpu_selector, gb_replay_gpu, gb_replay_gpu_open, gb_replay_gpu_close,
 *          gb_replay_gpu_collect */
#ifndef GB_REPLAY_GPU_H
#define GB_REPLAY_GPU_H

#include "kernels/kernels.h"
#include "replay/replay.h"

/* Selector ops running on the GPU for `kind`, to put in gb_replay_options.selector_ops; NULL for
 * kinds that stay on the CPU (FIFO and LIFO: O(batch) there, nothing to select).
 * Each keeps a device array of `capacity` floats for every slot, kept in step by the scatter
 * kernel: inserts, removals and updates are queued on the host and applied by one scatter
 * launch before the next selection, and a selection costs one synchronisation.
 * - WEIGHTED: the mirror holds each committed item's priority (as float; values above FLT_MAX
 *   clamp to it), 0 elsewhere; gb_kernels_select_weighted draws independently, its seed from
 *   the replay's RNG (a seeded replay repeats). When every committed item has priority 0 it
 *   draws uniformly, like the built-in one.
 * - UNIFORM: the mirror holds 1 for each committed item; the same weighted kernel then draws
 *   uniformly over them (probability 1/size).
 * - TOPK: the mirror holds priorities; gb_kernels_select_topk (a radix sort of the whole mirror,
 *   O(capacity) per selection where the built-in heap costs O(log n) per change) picks the
 *   highest, ties by lower index. Unlike the built-in one it never picks an item of priority 0.
 * Each creates its own kernels context on the calling thread's current device. A CUDA failure
 * inside a callback (which cannot return errors) is logged and makes select return 0 items. */
const gb_replay_selector_ops *gb_replay_gpu_selector(gb_selector_kind kind);

/* Zero-copy collection for one replay on one kernels context. */
typedef struct gb_replay_gpu gb_replay_gpu;

/* Page-locks and maps every column table of r for the GPU (cudaHostRegister, read-only) and
 * allocates index and length buffers for samples of up to max_batch items. ctx is the caller's
 * (e.g. on libtorch's stream), not owned. Blocks. Returns 0, GB_EUNSUPPORTED, GB_ECUDA,
 * GB_ENOMEM. */
int gb_replay_gpu_open(gb_replay *r, gb_kernels_ctx *ctx, int64_t max_batch, gb_replay_gpu **out,
                       gb_error *err);

/* Unregisters the tables and frees the buffers (waits for the context's stream first). */
void gb_replay_gpu_close(gb_replay_gpu *g);

/* Enqueues on the context's stream the collection of sample s (pinned) into the device buffers of
 * dst: same layout and zero-filling past each item's length as gb_replay_collect, done by one
 * gather launch for the per-step columns and one for the per-item columns. lengths (optional,
 * host, s->n entries) receives each item's valid steps inside the range. Blocks only while the
 * previous collection's index upload is still in flight. The sample must stay pinned until the
 * stream has passed the gather: call gb_kernels_sync (or wait on the stream) before
 * gb_replay_release. Returns 0, GB_EINVAL (unpinned sample, a bad column, a buffer too small, a
 * batch over max_batch), GB_ECUDA. */
int gb_replay_gpu_collect(gb_replay_gpu *g, const gb_replay_selection *s,
                          const gb_replay_dst *dst, int ndst, int32_t *lengths, gb_error *err);

#endif
