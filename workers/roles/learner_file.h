/* workers/roles/learner_file.h: the model file of a checkpoint set written by a learner without
 * libtorch (workers/roles/ppo_mlp.h, dqn_mlp.h, sac_mlp.h; workers/roles/learning.h, "The
 * learning without libtorch"): its whole state as flat arrays, as learner_set_flat takes them
 * (workers/torch/bridge.h): the parameters, Adam's two moments, the target network's parameters
 * (DQN's network, SAC's critics; none for PPO), Adam's and the training steps, the version, and
 * the exported layout (names, shapes, offsets of the parameters the policy plays). A trainer
 * that trains in C for the whole run writes it without loading libtorch, and restores from it in
 * C; a learner of libtorch (several trainers, `gearbox eval --kernels libtorch`) is loaded from
 * it by gb_learner_checkpoint_load, which reads libtorch's own checkpoints too.
 *
 * The file (little-endian): "GBLEARNR", u32 format (1), u32 layout entries, char algorithm[16]
 * (trainer.algorithm.name, NUL-padded), u64 n, u64 target floats, i64 Adam's steps, i64
 * training steps, u64 version, u64 the layout's bytes, u32 CRC-32C of the layout records, u32
 * CRC-32C of the arrays; then the layout records (GB_PARAM_RECORD_BYTES each,
 * runtime/streams/params.h); then the float32 arrays params[n], exp_avg[n], exp_avg_sq[n],
 * target[target floats]. It is written whole or not at all (runtime/base/file.h).
 * defines: gb_learner_file, gb_learner_file_write, gb_learner_file_read, gb_learner_file_free,
 *          gb_learner_file_is, gb_learner_file_algorithm, gb_learner_file_fits,
 *          gb_learner_checkpoint_load */
#ifndef GB_WORKERS_ROLES_LEARNER_FILE_H
#define GB_WORKERS_ROLES_LEARNER_FILE_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "runtime/streams/params.h"
#include "workers/torch/bridge.h"

#include <stdint.h>

typedef struct gb_learner_file {
    char algorithm[16];
    const gb_param_entry *layout; /* [count]: the exported parameters' */
    int count;
    uint64_t layout_bytes;
    int64_t n, target_n;
    const float *p, *m, *v, *target; /* [n] each; target [target_n] (NULL when 0) */
    int64_t adam_steps, train_steps;
    uint64_t version;
    void *owned; /* gb_learner_file_read's allocation (the arrays and layout point into it) */
} gb_learner_file;

/* Writes f (its arrays are read, not kept) as the learner file at path. Returns 0, GB_EINVAL
 * (a layout that does not check, sizes out of range) or GB_EIO (with the system's reason;
 * path is as it was). */
int gb_learner_file_write(const char *path, const gb_learner_file *f, gb_error *err);

/* Reads the learner file at path into out (gb_learner_file_free). Returns 0, GB_ENOTFOUND (no
 * file), GB_ECORRUPT (not a learner file, another format, a wrong size or CRC, a layout that
 * does not check) or GB_ENOMEM; out is then empty. */
int gb_learner_file_read(const char *path, gb_learner_file *out, gb_error *err);
void gb_learner_file_free(gb_learner_file *f);

/* 1 when the file at path begins as a learner file does; 0 when it does not or cannot be read
 * (libtorch's checkpoints are zip archives). */
int gb_learner_file_is(const char *path);

/* What a learner file of cfg's learner names its algorithm: trainer.algorithm.name's value. */
const char *gb_learner_file_algorithm(const gb_config *cfg);

/* 0 when f's state is a learner's of cfg's algorithm, exported layout and sizes (n floats each
 * array, target_n of the target's; n -1: not checked), else GB_ECORRUPT naming the first
 * difference (another configuration's checkpoint: the state would land in the wrong tensors). */
int gb_learner_file_fits(const gb_learner_file *f, const gb_config *cfg,
                         const gb_param_entry *layout, int count, uint64_t bytes, int64_t n,
                         int64_t target_n, gb_error *err);

/* The model checkpoint at path into the bridge's learner l of cfg:
 * a learner file (its layout checked against l's model, then learner_set_flat and the version),
 * or libtorch's own (learner_load). Returns 0, GB_ENOTFOUND (no file), or the reader's or the
 * learner's error. */
int gb_learner_checkpoint_load(gb_torch_learner *l, const gb_config *cfg, const char *path,
                               gb_error *err);

#endif
