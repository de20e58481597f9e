/* runtime/base/file.c: a file written whole or not at all (see file.h). */
#include "runtime/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes all of len bytes; 0 or errno. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

void gb_file_sync_folder(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int gb_file_write_atomic(const char *path, const gb_file_part *parts, int n)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = fd < 0 ? errno : 0;
    for (int i = 0; i < n && !e; i++)
        e = write_all(fd, parts[i].p, parts[i].n);
    if (!e && fsync(fd) != 0)
        e = errno;
    if (fd >= 0 && close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e) {
        if (fd >= 0)
            unlink(tmp);
        return e;
    }
    gb_file_sync_folder(path);
    return 0;
}

int gb_user_dir(const char *path, int only_mine, gb_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return gb_error_errno(err, "mkdir %s", path);
    struct stat st;
    if (lstat(path, &st) != 0)
        return gb_error_errno(err, "stat %s", path);
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (only_mine && (st.st_mode & 077)))
        return gb_error_set(err, GB_EINVAL, "%s is not a %sfolder of this user", path,
                            only_mine ? "private " : "");
    return 0;
}
