/* workers/roles/checkpoint_set.h: a trainer's checkpoint as one consistent set: the model (and
 * optimiser) file and the replay file from the same training step, named by a small manifest
 * written last; and where the policy workers play the model without libtorch, its policy file
 * (workers/roles/policy_file.h), which `gearbox eval` plays on gearbox's C.
 * In <dir>:
 *   <name>.step<S>-<K>.model, .replay, .policy   the set (K: 0, or more when a set of step S
 *                                                 already exists)
 *   <name>.checkpoint                             the manifest: "gearbox-checkpoint 1", "step S",
 *                                                 "model FILE", "replay FILE", "policy FILE"
 *                                                 (replay and policy where the set has them)
 * The files of a new set are each written to a temporary file, fsynced and renamed; then the
 * manifest likewise; only then are the previous set's files removed. A failure at any point
 * (ENOSPC, EIO) removes what the new set had written and leaves the manifest naming the previous
 * set, intact: a reader (gb_checkpoint_find) always finds a matching pair or none.
 * defines: gb_checkpoint_files, gb_checkpoint_writer_fn, gb_checkpoint_write, gb_checkpoint_find */
#ifndef GB_WORKERS_CHECKPOINT_H
#define GB_WORKERS_CHECKPOINT_H

#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>

#define GB_CHECKPOINT_PATH_MAX 2048

typedef struct gb_checkpoint_files {
    int64_t step;
    char model[GB_CHECKPOINT_PATH_MAX];  /* full paths */
    char replay[GB_CHECKPOINT_PATH_MAX]; /* "" when the set has no replay */
    char policy[GB_CHECKPOINT_PATH_MAX]; /* "" when the set has no policy file */
} gb_checkpoint_files;

enum { GB_CHECKPOINT_REPLAY = 1, GB_CHECKPOINT_POLICY = 2 }; /* what a set has besides its model */

/* Writes the set's files: model_path, and replay_path and policy_path unless they are NULL.
 * Each must be written atomically (temporary file + rename), so a failed write leaves nothing
 * at its path. Returns 0 or a GB_E* code with err filled. */
typedef int (*gb_checkpoint_writer_fn)(void *ctx, const char *model_path,
                                       const char *replay_path, const char *policy_path,
                                       gb_error *err);

/* Writes a new set for training step `step` through write (with: GB_CHECKPOINT_* flags, the
 * files besides the model) and makes it the current one, as the header describes. Returns 0;
 * the writer's code; GB_EIO for the manifest (path and the system's reason); GB_EINVAL when a
 * path does not fit. On failure the previous set stays current and complete. */
int gb_checkpoint_write(const char *dir, const char *name, int64_t step, int with,
                        gb_checkpoint_writer_fn write, void *ctx, gb_error *err);

/* Reads <dir>/<name>.checkpoint into out and checks that the files it names exist. Returns 0,
 * GB_ENOTFOUND (no checkpoint, or a file it names is missing) or GB_ECORRUPT (a malformed
 * manifest). */
int gb_checkpoint_find(const char *dir, const char *name, gb_checkpoint_files *out,
                       gb_error *err);

#endif
