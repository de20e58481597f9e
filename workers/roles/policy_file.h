/* workers/roles/policy_file.h: a checkpoint set's policy file: the policy's parameters as the
 * parameter stream carries them to the policy workers (one flat buffer and its layout table,
 * runtime/streams/params.h), written beside the model file by a trainer whose model the policy
 * workers can play without libtorch (workers/roles/policy_mlp.h). `gearbox eval` plays it on
 * gearbox's C, so an evaluation does not wait for libtorch to load (0.4-1 s a start, which a
 * held evaluation holds the trainers for).
 *
 * The file (little-endian): "GBPOLICY", u32 format (1), u32 entries, u64 version, u64 data
 * bytes, u32 CRC-32C of the data, u32 CRC-32C of the layout records; then the layout, entries
 * records of GB_PARAM_RECORD_BYTES; then the data. It is written to a temporary file, fsynced
 * and renamed (runtime/base/file.h).
 * defines: gb_policy_file, gb_policy_file_write, gb_policy_file_read, gb_policy_file_free */
#ifndef GB_WORKERS_ROLES_POLICY_FILE_H
#define GB_WORKERS_ROLES_POLICY_FILE_H

#include "runtime/base/error.h"
#include "runtime/streams/params.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_policy_file {
    uint64_t version;
    gb_param_entry *layout; /* [count] */
    int count;
    void *data; /* [bytes] */
    uint64_t bytes;
} gb_policy_file;

/* Writes the parameters (count entries of layout over bytes of data) as the policy file at path.
 * Returns 0, GB_EINVAL (a layout that does not check against bytes) or GB_EIO (with the
 * system's reason; nothing is left at path). */
int gb_policy_file_write(const char *path, uint64_t version, const gb_param_entry *layout,
                         int count, const void *data, uint64_t bytes, gb_error *err);

/* Reads the policy file at path into out (gb_policy_file_free). Returns 0, GB_ENOTFOUND (no
 * file), GB_ECORRUPT (not a policy file, another format, a wrong size or CRC, a layout that
 * does not check) or GB_ENOMEM; out is then empty. */
int gb_policy_file_read(const char *path, gb_policy_file *out, gb_error *err);
void gb_policy_file_free(gb_policy_file *f);

#endif
