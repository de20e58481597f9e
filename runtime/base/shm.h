/* runtime/base/shm.h: shared host memory segments (memfd or POSIX shm) that other local processes
 * can map, read-only or read-write; page aligned (so every 64-byte row offset is 64-byte
 * aligned), on huge pages where the system has them.
 * Segments that belong to a run rather than to one process (a trainer's replay, which must outlive
 * a trainer that crashes) are named after the run: "/gearbox-<run id>-<what>", the run id derived
 * from the run directory (gb_shm_run_name); the launcher removes them all when the run ends
 * (gb_shm_unlink_run).
 * defines: gb_shm, gb_shm_create, gb_shm_open, gb_shm_map_fd, gb_shm_free, gb_shm_run_id,
 *          gb_shm_run_name, gb_shm_unlink_run, gb_shm_unlink_id */
#ifndef GB_RUNTIME_SHM_H
#define GB_RUNTIME_SHM_H

#include "runtime/base/error.h"

#include <stddef.h>

#define GB_SHM_NAME_MAX 128

typedef struct gb_shm {
    void *base;                  /* mapping start, page aligned; NULL when empty */
    size_t size;                 /* bytes requested */
    size_t mapped;               /* bytes mapped (size rounded up to the page size used) */
    int fd;                      /* memfd or shm descriptor, -1 when none */
    int huge;                    /* 1: explicit huge pages (MFD_HUGETLB); 2: transparent huge
                                    pages were requested with madvise; 0: normal pages */
    int readonly;                /* 1 when mapped PROT_READ */
    int owner;                   /* 1 when this process created it (unlinks a POSIX name) */
    char name[GB_SHM_NAME_MAX];  /* POSIX shm name ("/gearbox-..."), "" for a memfd */
} gb_shm;

/* Creates a zero-filled segment of size bytes, mapped read-write. name NULL gives an anonymous
 * memfd (other processes map it through the descriptor: inherited, passed over a Unix socket, or
 * /proc/<pid>/fd/<fd>); a name ("/gearbox-run-trainer0") gives a POSIX shm object that
 * gb_shm_open finds by name and that gb_shm_free unlinks. huge_pages: try MFD_HUGETLB first, else
 * ask for transparent huge pages (MADV_HUGEPAGE); never fails for lack of huge pages. Pages are
 * allocated by the kernel on first touch. Returns 0 or GB_EINVAL / GB_ESYS, or GB_EFULL for a
 * named segment larger than the free room in /dev/shm (where it would fault on first touch);
 * shm is zeroed on failure. Does not block. */
int gb_shm_create(gb_shm *shm, size_t size, const char *name, int huge_pages, gb_error *err);

/* Maps an existing POSIX shm object by name (created by gb_shm_create in this or another
 * process); size 0 maps the whole object. readonly maps PROT_READ (writes then fault). The mapping
 * is not the owner: gb_shm_free unmaps it without unlinking. Returns 0 or GB_ENOTFOUND / GB_ESYS /
 * GB_EINVAL. */
int gb_shm_open(gb_shm *shm, const char *name, size_t size, int readonly, gb_error *err);

/* Maps size bytes (0 = the whole file) of a shared-memory descriptor, e.g. another process's
 * memfd received over a socket or opened through /proc/<pid>/fd/<n>. The descriptor is
 * duplicated: the caller keeps its own. Returns 0 or GB_ESYS / GB_EINVAL. */
int gb_shm_map_fd(gb_shm *shm, int fd, size_t size, int readonly, gb_error *err);

/* Unmaps, closes the descriptor and, for a named segment this process created, unlinks the name.
 * Safe on a zeroed or already freed gb_shm. */
void gb_shm_free(gb_shm *shm);

/* The run id of a run directory: 16 hex digits of a 64-bit FNV-1a hash of its canonical path
 * (realpath), its device and inode numbers and its birth time (statx, where the file system
 * records one), into id (17 bytes with the NUL). The same folder gives the same id in every
 * process of the run (and to `--resume`); another path, or a folder deleted and made again under
 * the same path (which may get the same inode number back), gives another. run_dir must exist.
 * Returns 0 or GB_ENOTFOUND / GB_ESYS. */
#define GB_SHM_RUN_ID_LEN 16
int gb_shm_run_id(const char *run_dir, char id[GB_SHM_RUN_ID_LEN + 1], gb_error *err);

/* The POSIX shm name of a run-owned segment: "/gearbox-<run id>-<what>" into out (cap bytes).
 * what: letters, digits, '-', '_' and '.' only (e.g. "replay-0"). Returns 0, GB_EINVAL (bad what,
 * or out too small) or gb_shm_run_id's errors. */
int gb_shm_run_name(const char *run_dir, const char *what, char *out, size_t cap, gb_error *err);

/* Unlinks every POSIX shm object of the run ("/gearbox-<run id>-*", found in /dev/shm) and puts
 * their count in *removed (optional). Processes that still map one keep their mapping; the name
 * is gone. For the launcher at the end of a run. Returns 0 (also when there was none) or
 * gb_shm_run_id's errors / GB_ESYS (a name that could not be unlinked; the others still are). */
int gb_shm_unlink_run(const char *run_dir, int *removed, gb_error *err);

/* gb_shm_unlink_run for a run known by its id (gb_shm_run_id) alone, e.g. one whose folder is
 * gone. Returns 0, GB_EINVAL (not an id) or GB_ESYS. */
int gb_shm_unlink_id(const char *id, int *removed, gb_error *err);

#endif
