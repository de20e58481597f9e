/* runtime/shm.h: shared host memory segments (memfd or POSIX shm) that other local processes
 * can map, read-only or read-write; page aligned (so every 64-byte row offset is 64-byte
 * aligned), on huge pages where the system has them.
 * defines: gb_shm, gb_shm_create, gb_shm_open, gb_shm_map_fd, gb_shm_free */
#ifndef GB_RUNTIME_SHM_H
#define GB_RUNTIME_SHM_H

#include "runtime/error.h"

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
 * allocated by the kernel on first touch. Returns 0 or GB_EINVAL / GB_ESYS; shm is zeroed on
 * failure. Does not block. */
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

#endif
