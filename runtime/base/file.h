/* runtime/base/file.h: a file written whole or not at all: its parts go to PATH.tmp, which is
 * fsynced, renamed onto PATH, and the folder fsynced, so a crash leaves the old file or the new
 * one (the checkpoint set's writer contract, workers/roles/checkpoint_set.h), never a part.
 * defines: gb_file_part, gb_file_write_atomic */
#ifndef GB_RUNTIME_BASE_FILE_H
#define GB_RUNTIME_BASE_FILE_H

#include <stddef.h>

typedef struct gb_file_part {
    const void *p;
    size_t n;
} gb_file_part;

/* Writes the n parts in turn as path. Returns 0, or the errno of the call that failed
 * (ENAMETOOLONG: path too long for its temporary); nothing is left at PATH.tmp then, and path is
 * as it was. */
int gb_file_write_atomic(const char *path, const gb_file_part *parts, int n);

#endif
