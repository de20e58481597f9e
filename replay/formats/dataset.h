/* replay/formats/dataset.h: gearbox's own offline dataset format: what
 * `gearbox run --record DIR` writes and `gearbox serve` loads. One file per writer
 * (DIR/trainer-<i>.gbds), append-only.
 * defines: gb_dataset_schema, gb_dataset_writer, gb_dataset_reader, gb_dataset_*
 *
 * File layout (little-endian):
 *   header  "GBDSET1\0" magic (8 bytes), u32 format version (1), u32 header bytes,
 *           i64 T (steps per item), u32 ncolumns, u32 0,
 *           ncolumns x {char name[32], u32 dtype, u32 ndim, i64 shape[4], u32 per_item, u32 0},
 *           u64 item bytes, u32 CRC-32C of everything before it, u32 0
 *   records one per item, all the same size:
 *           u32 "GBDR" record magic, u32 CRC-32C of the rest of the record,
 *           i64 policy version, i32 valid steps (length), u32 0,
 *           the item's column blocks in schema order, unpadded (per-step column: T x step bytes;
 *           per-item column: its item bytes).
 * A record is written whole with one buffered write; a writer killed mid-record leaves a torn
 * tail, which the reader reports and ignores (every complete record before it is still read).
 * A record whose magic or CRC is wrong is corruption (GB_ECORRUPT naming the record). */
#ifndef GB_REPLAY_DATASET_H
#define GB_REPLAY_DATASET_H

#include "replay/replay.h"

#include <stdint.h>

#define GB_DATASET_EXT ".gbds"

typedef struct gb_dataset_schema {
    int64_t steps; /* T */
    int ncolumns;
    gb_replay_column columns[GB_REPLAY_MAX_COLUMNS];
} gb_dataset_schema;

/* Bytes of column c of one item (T x step bytes, or the per-item bytes). */
uint64_t gb_dataset_column_bytes(const gb_dataset_schema *s, int c);

/* Copies the schema's T and columns into replay options (added after any columns already
 * there). Returns 0 or gb_replay_add_column's error. */
int gb_dataset_schema_apply(const gb_dataset_schema *s, gb_replay_options *o, gb_error *err);

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct gb_dataset_writer gb_dataset_writer;

/* Creates (truncates) path and writes the header. Returns 0 or GB_EINVAL (bad schema), GB_ESYS
 * (cannot create), GB_ENOMEM. Blocks on disk I/O. One thread uses a writer. */
int gb_dataset_writer_open(gb_dataset_writer **out, const char *path,
                           const gb_dataset_schema *s, gb_error *err);

/* Appends one item: cols[c] points at column c's block (gb_dataset_column_bytes bytes).
 * Buffered: the bytes reach the file by the next buffer flush or close. Returns 0 or GB_EIO. */
int gb_dataset_writer_append(gb_dataset_writer *w, const void *const *cols,
                             int64_t policy_version, int32_t length, gb_error *err);

/* Items appended so far. */
int64_t gb_dataset_writer_count(const gb_dataset_writer *w);

/* Flushes, fsyncs and closes; frees w (NULL is fine). Returns 0 or GB_EIO. */
int gb_dataset_writer_close(gb_dataset_writer *w, gb_error *err);

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct gb_dataset_reader gb_dataset_reader;

/* Opens a dataset file and checks its header (magic, version, CRC, schema). Returns 0,
 * GB_ENOTFOUND / GB_ESYS (cannot open), GB_ECORRUPT (bad header, naming what). A torn final
 * record is logged as a warning and not counted. */
int gb_dataset_reader_open(gb_dataset_reader **out, const char *path, gb_error *err);
const gb_dataset_schema *gb_dataset_reader_schema(const gb_dataset_reader *r);

/* Complete records in the file. */
int64_t gb_dataset_reader_count(const gb_dataset_reader *r);

/* Reads record i (0 <= i < count) and copies its columns into dst[c] (each
 * gb_dataset_column_bytes bytes; NULL skips a column). Checks the record's magic and CRC before
 * anything is copied. Returns 0, GB_EINVAL (i out of range), GB_ECORRUPT, GB_EIO. */
int gb_dataset_reader_read(gb_dataset_reader *r, int64_t i, void *const *dst,
                           int64_t *policy_version, int32_t *length, gb_error *err);

void gb_dataset_reader_close(gb_dataset_reader *r);

/* Lists the dataset files a path names: the file itself, or every *.gbds file in a directory,
 * sorted by name. *paths is one malloc'd block (free(*paths)). Returns 0, GB_ENOTFOUND (no
 * such path, or a directory without dataset files), GB_ESYS, GB_ENOMEM. */
int gb_dataset_list(const char *path, char ***paths, int *n, gb_error *err);

#endif
