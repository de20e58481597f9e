/* runtime/run/tensorboard.h: TensorBoard event files (scalars and images), written from C: records
 * are TensorBoard's Event and Summary protobuf messages (runtime/run/tensorboard.proto, encoded by
 * protobuf-c) in TFRecord framing: uint64 length (little-endian), uint32 masked CRC-32C of those
 * 8 bytes, the message, uint32 masked CRC-32C of the message. The first record of a file is the
 * Event file_version "brain.Event:2". Every record is flushed as it is written, so a live
 * `tensorboard --logdir` shows it.
 *
 * Tags (gb_tensorboard_row): "<group>/<metrics.csv column>", the group chosen by the column:
 *   charts/  return_mean_100 length_mean_100 episodes (and any column not named below)
 *   losses/  loss policy_loss value_loss entropy approx_kl q_mean
 *   train/   lr epsilon alpha grad_norm clip_fraction explained_var td_abs_mean
 *   perf/    env_steps_per_s train_steps_per_s time_s wall_s train_steps samples_trained
 *   replay/  replay_size replay_fill sample_drops chunks_rejected
 *   policy/  policy_version served_version_min version_lag
 *   run/     segment
 * env_steps is the step of every value, not a tag of its own. An evaluation during the run
 * (launch/evals.h) adds eval/return_mean, eval/return_std, eval/length_mean and the image
 * eval/video (an animated GIF) at its env steps.
 * defines: gb_tensorboard, gb_tensorboard_open, gb_tensorboard_scalars, gb_tensorboard_image,
 *          gb_tensorboard_row, gb_tensorboard_group, gb_tensorboard_close,
 *          gb_tensorboard_masked_crc, gb_tensorboard_frame, GB_TENSORBOARD_* */
#ifndef GB_RUNTIME_TENSORBOARD_H
#define GB_RUNTIME_TENSORBOARD_H

#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>

#define GB_TENSORBOARD_FILE_VERSION "brain.Event:2"
#define GB_TENSORBOARD_MASK_DELTA 0xa282ead8u
#define GB_TENSORBOARD_HEADER_BYTES 12 /* length + its masked CRC */
#define GB_TENSORBOARD_FOOTER_BYTES 4  /* the data's masked CRC */
#define GB_TENSORBOARD_TAG_MAX 96
#define GB_TENSORBOARD_IMAGE_MAX (64 << 20) /* bytes of one encoded image */
#define GB_TENSORBOARD_COLORSPACE_RGB 3
#define GB_TENSORBOARD_COLORSPACE_RGBA 4

typedef struct gb_tensorboard gb_tensorboard;

/* TFRecord's masked CRC-32C of data: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t gb_tensorboard_masked_crc(const void *data, size_t len);

/* The framing of one record of len bytes: header gets the length (uint64 LE) and its masked
 * CRC, footer the masked CRC of data. */
void gb_tensorboard_frame(const void *data, uint64_t len,
                          uint8_t header[GB_TENSORBOARD_HEADER_BYTES],
                          uint8_t footer[GB_TENSORBOARD_FOOTER_BYTES]);

/* Creates dir when missing (its parent must exist), then a new file in it named as
 * TensorBoard's own writers name theirs, events.out.tfevents.<unix seconds>.<hostname> (".<k>"
 * appended when that exists: a resumed run in the same second), and writes the file_version
 * record. The caller owns *out (gb_tensorboard_close). Returns 0, GB_ENOMEM, GB_EINVAL (path too
 * long) or GB_ESYS. */
int gb_tensorboard_open(gb_tensorboard **out, const char *dir, gb_error *err);

/* The path of the events file. */
const char *gb_tensorboard_path(const gb_tensorboard *tb);

/* Writes one Event at step with a Summary of the n scalars (tags[i], values[i]), wall time now,
 * and flushes it. Non-finite values are left out (an Event with none is not written). Blocks on
 * the write. Returns 0, GB_ENOMEM, GB_EINVAL (n < 0) or GB_ESYS (a write failed: a full disk
 * ends the run, as metrics.csv's). */
int gb_tensorboard_scalars(gb_tensorboard *tb, int64_t step, const char *const *tags,
                           const double *values, int n, gb_error *err);

/* Writes one Event at step with a Summary of one image value (TensorBoard's Summary.Image):
 * tag, height × width pixels, colorspace (GB_TENSORBOARD_COLORSPACE_*: 3 RGB, 4 RGBA) and the
 * encoded image, len bytes of PNG or GIF (an animated GIF plays in TensorBoard's image plugin);
 * wall time now; flushed. Blocks on the write. Returns 0, GB_EINVAL (sizes not positive, no
 * bytes, len above GB_TENSORBOARD_IMAGE_MAX), GB_ENOMEM or GB_ESYS (a write failed). */
int gb_tensorboard_image(gb_tensorboard *tb, int64_t step, const char *tag, int height, int width,
                         int colorspace, const void *bytes, size_t len, gb_error *err);

/* The group of a metrics.csv column in the tag scheme above ("charts" for any other name). */
const char *gb_tensorboard_group(const char *column);

/* One metrics.csv row as one Event: every finite value but the step column's, tagged
 * "<group>/<column>"; step is values[step_column] (0 when step_column < 0 or not finite).
 * Returns as gb_tensorboard_scalars. */
int gb_tensorboard_row(gb_tensorboard *tb, const char *const *columns, const double *values,
                       int n, int step_column, gb_error *err);

/* Flushes and closes the file and frees tb. Returns 0, or GB_ESYS when the last flush or the
 * close failed. NULL is a no-op (0). */
int gb_tensorboard_close(gb_tensorboard *tb, gb_error *err);

#endif
