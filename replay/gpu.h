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
 * kinds that stay on the CPU. Only WEIGHTED has one: uniform, FIFO and LIFO cost O(batch) on the
 * CPU, and the built-in top-k keeps a heap up to date at O(log n) per change, which a full GPU
 * sort per sample cannot beat.
 * The weighted selector keeps priority (as float; values above FLT_MAX clamp to it) for every
 * committed item and 0 for every other slot in a device array of `capacity` floats. Inserts,
 * removals and updates are queued on the host and applied by one scatter launch before the next
 * selection; a selection runs gb_kernels_select_weighted (independent draws, the seed drawn from
 * the replay's RNG, so a seeded replay repeats) and copies the indices and probabilities back.
 * When every committed item has priority 0 it draws uniformly, like the built-in one. It creates
 * its own kernels context on the calling thread's current device. A CUDA failure inside a
 * callback (which cannot return errors) is logged and makes select return 0 items. */
const gb_replay_selector_ops *gb_replay_gpu_selector(gb_selector_kind kind);

/* Zero-copy collection for one replay on one kernels context. */
typedef struct gb_replay_gpu gb_replay_gpu;

/* Page-locks and maps every column table of r for the GPU (cudaHostRegister, read-only) and
 * allocates index and length buffers for samples of up to max_batch items. ctx is the caller's
 * (e.g. on libtorch's stream), not owned. Blocks. Returns 0, GB_EUNSUPPORTED, GB_ECUDA, GB_ENOMEM. */
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
