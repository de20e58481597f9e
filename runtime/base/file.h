/* runtime/base/file.h: a file written whole or not at all: its parts go to PATH.tmp, which is
 * fsynced, renamed onto PATH, and the folder fsynced, so a crash leaves the old file or the new
 * one (the checkpoint set's writer contract, workers/roles/checkpoint_set.h), never a part.
 * gb_file_sync_folder is its last step, for writers that stream to their temporary themselves.
 * And a folder of this user's own under a shared one (/tmp): gb_user_dir.
 * defines: gb_file_part, gb_file_write_atomic, gb_file_sync_folder, gb_user_dir */
#ifndef GB_RUNTIME_BASE_FILE_H
#define GB_RUNTIME_BASE_FILE_H

#include "runtime/base/error.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_file_part {
    const void *p;
    size_t n;
} gb_file_part;

/* Writes the n parts in turn as path. Returns 0, or the errno of the call that failed
 * (ENAMETOOLONG: path too long for its temporary); nothing is left at PATH.tmp then, and path is
 * as it was. */
int gb_file_write_atomic(const char *path, const gb_file_part *parts, int n);

/* fsyncs the folder path is in, so that a rename to path survives a crash; best effort (a
 * folder that cannot be opened is let be: the file itself is written). */
void gb_file_sync_folder(const char *path);

/* Makes the folder path (mode 0700) unless it exists, and checks that it is a folder (not a
 * link) of this user, and with only_mine set that nobody else may enter it: another user's
 * folder at that path in /tmp would be theirs to fill. 0, or the system's error (mkdir, stat),
 * or GB_EINVAL naming what. */
int gb_user_dir(const char *path, int only_mine, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
