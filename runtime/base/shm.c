/* runtime/base/shm.c: shared host memory segments, and the names of run-owned ones (see shm.h). */
#include "runtime/base/shm.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

#define GB_HUGE_PAGE (2u << 20)

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static int map_fd(gb_shm *shm, size_t size, size_t mapped, int readonly, gb_error *err)
{
    int prot = readonly ? PROT_READ : PROT_READ | PROT_WRITE;
    void *p = mmap(NULL, mapped, prot, MAP_SHARED, shm->fd, 0);
    if (p == MAP_FAILED)
        return gb_error_errno(err, "shm: mmap of %zu bytes", mapped);
    shm->base = p;
    shm->size = size;
    shm->mapped = mapped;
    shm->readonly = readonly;
    return 0;
}

/* memfd with explicit huge pages; returns 0 on success, -1 when the system has none (the caller
 * falls back silently: huge pages are an optimisation). */
static int try_hugetlb(gb_shm *shm, size_t size)
{
    int fd = memfd_create("gearbox-shm-huge", MFD_CLOEXEC | MFD_HUGETLB);
    if (fd < 0)
        return -1;
    size_t mapped = round_up(size, GB_HUGE_PAGE);
    if (ftruncate(fd, (off_t)mapped) != 0) {
        close(fd);
        return -1;
    }
    /* Without MAP_NORESERVE the kernel reserves the huge pages now, so a pool too small for
     * the mapping fails here rather than with SIGBUS on a later first touch. */
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    shm->fd = fd;
    shm->base = p;
    shm->size = size;
    shm->mapped = mapped;
    shm->huge = 1;
    return 0;
}

int gb_shm_create(gb_shm *shm, size_t size, const char *name, int huge_pages, gb_error *err)
{
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
    if (size == 0)
        return gb_error_set(err, GB_EINVAL, "shm: size must be positive");
    if (name && (name[0] != '/' || strlen(name) >= GB_SHM_NAME_MAX || strchr(name + 1, '/')))
        return gb_error_set(err, GB_EINVAL,
                            "shm: name '%s' must start with '/', contain no other '/' and be "
                            "shorter than %d bytes", name, GB_SHM_NAME_MAX);
    if (!name && huge_pages && try_hugetlb(shm, size) == 0)
        return 0;
    if (name) {
        /* A named segment lives in /dev/shm (a tmpfs, 64 MiB in a default container), and its
         * pages come on first touch: one larger than the room there would die of SIGBUS
         * mid-run, so refuse it now. */
        struct statvfs vfs;
        if (statvfs("/dev/shm", &vfs) == 0 &&
            (unsigned long long)vfs.f_bavail * vfs.f_frsize < size)
            return gb_error_set(err, GB_EFULL, "shm: '%s' needs %zu bytes and /dev/shm has %llu "
                                "free (give the container more, e.g. docker --shm-size)", name,
                                size, (unsigned long long)vfs.f_bavail * vfs.f_frsize);
        shm->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (shm->fd < 0)
            return gb_error_errno(err, "shm: shm_open('%s')", name);
        snprintf(shm->name, sizeof shm->name, "%s", name);
        shm->owner = 1;
    } else {
        shm->fd = memfd_create("gearbox-shm", MFD_CLOEXEC);
        if (shm->fd < 0)
            return gb_error_errno(err, "shm: memfd_create");
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t mapped = round_up(size, huge_pages ? GB_HUGE_PAGE : page);
    if (ftruncate(shm->fd, (off_t)mapped) != 0) {
        int rc = gb_error_errno(err, "shm: ftruncate to %zu bytes", mapped);
        gb_shm_free(shm);
        return rc;
    }
    int rc = map_fd(shm, size, mapped, 0, err);
    if (rc) {
        gb_shm_free(shm);
        return rc;
    }
    /* Transparent huge pages for shared memory depend on
     * /sys/kernel/mm/transparent_hugepage/shmem_enabled; the hint is harmless where it is off. */
    if (huge_pages && madvise(shm->base, mapped, MADV_HUGEPAGE) == 0)
        shm->huge = 2;
    return 0;
}

int gb_shm_map_fd(gb_shm *shm, int fd, size_t size, int readonly, gb_error *err)
{
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gb_error_errno(err, "shm: fstat of descriptor %d", fd);
    if (size == 0)
        size = (size_t)st.st_size;
    if (size == 0 || size > (size_t)st.st_size)
        return gb_error_set(err, GB_EINVAL, "shm: asked to map %zu bytes of a %lld-byte segment",
                            size, (long long)st.st_size);
    shm->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (shm->fd < 0)
        return gb_error_errno(err, "shm: dup of descriptor %d", fd);
    int rc = map_fd(shm, size, size, readonly, err);
    if (rc)
        gb_shm_free(shm);
    return rc;
}

int gb_shm_open(gb_shm *shm, const char *name, size_t size, int readonly, gb_error *err)
{
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
    if (!name || name[0] != '/')
        return gb_error_set(err, GB_EINVAL, "shm: name must start with '/'");
    int fd = shm_open(name, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOENT)
            return gb_error_set(err, GB_ENOTFOUND, "shm: no shared memory named '%s'", name);
        return gb_error_errno(err, "shm: shm_open('%s')", name);
    }
    int rc = gb_shm_map_fd(shm, fd, size, readonly, err);
    close(fd);
    if (rc == 0)
        snprintf(shm->name, sizeof shm->name, "%s", name);
    return rc;
}

void gb_shm_free(gb_shm *shm)
{
    if (!shm)
        return;
    if (shm->base)
        munmap(shm->base, shm->mapped);
    if (shm->fd >= 0)
        close(shm->fd);
    if (shm->owner && shm->name[0])
        shm_unlink(shm->name);
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
}

/* ---- run-owned segments -------------------------------------------------------------------- */

int gb_shm_run_id(const char *run_dir, char id[GB_SHM_RUN_ID_LEN + 1], gb_error *err)
{
    id[0] = '\0';
    if (!run_dir || !run_dir[0])
        return gb_error_set(err, GB_EINVAL, "shm: run id of an empty run directory path");
    char *real = realpath(run_dir, NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0) {
        int code = errno == ENOENT ? GB_ENOTFOUND : GB_ESYS;
        gb_error_errno(err, "shm: run directory '%s'", run_dir);
        free(real);
        if (err)
            err->code = code;
        return code;
    }
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)real; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    /* The birth time tells a folder from one made again at the same path: file systems hand a
     * freed inode number straight back (ext4 does), so path and inode alone would give a fresh
     * run in a re-made folder the id, and the segments, of the run that was there before. */
    uint64_t ids[4] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, 0};
    struct statx sx;
    if (statx(AT_FDCWD, real, 0, STATX_INO | STATX_BTIME, &sx) == 0 &&
        (sx.stx_mask & STATX_BTIME)) {
        ids[2] = (uint64_t)sx.stx_btime.tv_sec;
        ids[3] = sx.stx_btime.tv_nsec;
    }
    for (size_t k = 0; k < sizeof ids; k++)
        h = (h ^ ((const unsigned char *)ids)[k]) * 0x100000001b3ULL;
    free(real);
    snprintf(id, GB_SHM_RUN_ID_LEN + 1, "%016llx", (unsigned long long)h);
    return 0;
}

int gb_shm_run_name(const char *run_dir, const char *what, char *out, size_t cap, gb_error *err)
{
    if (!what || !what[0])
        return gb_error_set(err, GB_EINVAL, "shm: a run-owned segment needs a name");
    for (const char *p = what; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return gb_error_set(err, GB_EINVAL, "shm: segment name '%s' may hold only letters, "
                                "digits, '-', '_' and '.'", what);
    char id[GB_SHM_RUN_ID_LEN + 1];
    int rc = gb_shm_run_id(run_dir, id, err);
    if (rc)
        return rc;
    int n = snprintf(out, cap, "/gearbox-%s-%s", id, what);
    if (n < 0 || (size_t)n >= cap || (size_t)n >= GB_SHM_NAME_MAX)
        return gb_error_set(err, GB_EINVAL, "shm: segment name '/gearbox-%s-%s' is too long", id,
                            what);
    return 0;
}

int gb_shm_unlink_id(const char *id, int *removed, gb_error *err)
{
    if (removed)
        *removed = 0;
    char prefix[64];
    if (!id || strlen(id) != GB_SHM_RUN_ID_LEN)
        return gb_error_set(err, GB_EINVAL, "shm: '%s' is not a run id", id ? id : "");
    snprintf(prefix, sizeof prefix, "gearbox-%s-", id);
    size_t plen = strlen(prefix);
    DIR *d = opendir("/dev/shm"); /* where glibc keeps POSIX shm objects */
    if (!d)
        return errno == ENOENT ? 0 : gb_error_errno(err, "shm: listing /dev/shm");
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        char name[GB_SHM_NAME_MAX + 2];
        if (snprintf(name, sizeof name, "/%s", e->d_name) >= (int)sizeof name)
            continue;
        if (shm_unlink(name) == 0) {
            if (removed)
                (*removed)++;
        } else if (errno != ENOENT && rc == 0) {
            rc = gb_error_errno(err, "shm: unlinking '%s'", name);
        }
    }
    closedir(d);
    return rc;
}

int gb_shm_unlink_run(const char *run_dir, int *removed, gb_error *err)
{
    if (removed)
        *removed = 0; /* also when the id cannot be made */
    char id[GB_SHM_RUN_ID_LEN + 1];
    int rc = gb_shm_run_id(run_dir, id, err);
    return rc ? rc : gb_shm_unlink_id(id, removed, err);
}
