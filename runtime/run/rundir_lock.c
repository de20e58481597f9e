/* runtime/run/rundir_lock.c: a run directory's lock and the table of runs on this machine (see
 * rundir.h): one live run a directory, and what a dead run left (ipc socket files, POSIX shm
 * segments named after it) removed by a later run once nothing holds the dead run's lock. */
#include "runtime/run/rundir.h"
#include "runtime/base/file.h"
#include "runtime/base/shm.h"
#include "runtime/streams/endpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME "run.lock"

/* The run table's folder: $GEARBOX_RUN_TABLE, else /tmp/gearbox-runs-<uid>; created 0700 and
 * checked to be this user's own folder (not a link another user planted). */
static int table_dir(char *out, size_t n, gb_error *err)
{
    const char *env = getenv("GEARBOX_RUN_TABLE");
    int w = env && env[0] ? snprintf(out, n, "%s", env)
                          : snprintf(out, n, "/tmp/gearbox-runs-%u", (unsigned)getuid());
    if (w < 0 || (size_t)w >= n)
        return gb_error_set(err, GB_EINVAL, "run table path too long");
    int rc = gb_user_dir(out, 0, err);
    return rc ? gb_error_prefix(err, "run table") : 0;
}

/* Unlinks the run's POSIX shm segments (gb_shm_unlink_id), best effort. Returns how many. */
static int remove_segments(const char *id)
{
    int removed = 0;
    gb_shm_unlink_id(id, &removed, NULL);
    return removed;
}

/* Reads the run path an entry of the table names; returns 0 or -1. */
static int read_entry(const char *path, char *out, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, out, n - 1);
    close(fd);
    if (got <= 0)
        return -1;
    out[got] = '\0';
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
    return out[0] == '/' ? 0 : -1;
}

int gb_rundir_reap_dead(gb_error *err)
{
    char table[GB_RUNDIR_PATH_MAX];
    int rc = table_dir(table, sizeof table, err);
    if (rc)
        return rc;
    DIR *d = opendir(table);
    if (!d)
        return gb_error_errno(err, "open %s", table);
    int reaped = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 16 || strspn(e->d_name, "0123456789abcdef") != 16)
            continue;
        char entry[GB_RUNDIR_PATH_MAX + 300], run[GB_RUNDIR_PATH_MAX];
        char lock[GB_RUNDIR_PATH_MAX + 16];
        snprintf(entry, sizeof entry, "%s/%s", table, e->d_name);
        if (read_entry(entry, run, sizeof run) != 0)
            continue;
        snprintf(lock, sizeof lock, "%s/" LOCK_NAME, run);
        int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd); /* a live process (the launcher or one of its workers) holds it */
            continue;
        }
        /* Nothing alive holds the run: what it left is garbage (a short socket folder in /tmp
         * too, found by the id, also once the run's folder is gone). */
        int socks = fd >= 0 || access(run, F_OK) != 0
                        ? gb_endpoint_ipc_remove(fd >= 0 ? run : NULL, e->d_name) : 0;
        int segs = remove_segments(e->d_name);
        unlink(entry);
        if (fd >= 0)
            close(fd);
        if (socks || segs)
            fprintf(stderr, "gearbox: removed %d socket files and %d shared-memory segments "
                    "left by the dead run in %s\n", socks, segs, run);
        reaped++;
    }
    closedir(d);
    return reaped;
}

int gb_rundir_lock(gb_rundir *rd, gb_error *err)
{
    char lock[GB_RUNDIR_PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s/" LOCK_NAME, rd->path);
    /* Not O_CLOEXEC on purpose: the workers the launcher starts inherit the descriptor, so the
     * lock stays held while any process of the run lives, even past the launcher's death. */
    int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
    if (fd < 0)
        return gb_error_errno(err, "open %s", lock);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[32] = "";
        ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        if (e != EWOULDBLOCK)
            return gb_error_set(err, GB_ESYS, "lock %s: %s", lock, strerror(e));
        long pid = got > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid > 0 && kill((pid_t)pid, 0) == 0)
            return gb_error_set(err, GB_EINVAL, "run directory %s is in use by another run "
                                "(gearbox pid %ld holds %s); wait for it to end or choose "
                                "another --run-dir", rd->path, pid, lock);
        return gb_error_set(err, GB_EINVAL, "run directory %s is in use: its launcher (pid %ld) "
                            "has exited but processes of that run still hold %s (see `fuser "
                            "%s`); choose another --run-dir", rd->path, pid, lock, lock);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        int rc = gb_error_errno(err, "write %s", lock);
        close(fd);
        return rc;
    }
    rd->lock_fd = fd;
    rd->locked = 1;
    return 0;
}

int gb_rundir_register(gb_rundir *rd, gb_error *err)
{
    char abs[GB_RUNDIR_PATH_MAX], table[GB_RUNDIR_PATH_MAX];
    if (!realpath(rd->path, abs))
        return gb_error_errno(err, "realpath %s", rd->path);
    /* the id the run's segments carry (gb_shm_run_name): the entry names it, so a later run
     * removes them even once this folder is gone */
    int rc = gb_shm_run_id(abs, rd->id, err);
    if (rc)
        return rc;
    rc = table_dir(table, sizeof table, err);
    if (rc)
        return rc;
    int w = snprintf(rd->table_entry, sizeof rd->table_entry, "%s/%s", table, rd->id);
    if (w < 0 || (size_t)w >= sizeof rd->table_entry)
        return gb_error_set(err, GB_EINVAL, "run table path too long");
    char tmp[sizeof rd->table_entry + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", rd->table_entry, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return gb_error_errno(err, "open %s", tmp);
    fprintf(f, "%s\n", abs);
    if (fclose(f) != 0 || rename(tmp, rd->table_entry) != 0) {
        rc = gb_error_errno(err, "write %s", rd->table_entry);
        unlink(tmp);
        rd->table_entry[0] = '\0';
        return rc;
    }
    return 0;
}

void gb_rundir_unlock(gb_rundir *rd)
{
    if (!rd->locked)
        return;
    if (rd->table_entry[0]) {
        /* the run's processes have ended: what they left goes now, and with it the entry */
        gb_endpoint_ipc_remove(rd->path, rd->id);
        remove_segments(rd->id);
        unlink(rd->table_entry);
        rd->table_entry[0] = '\0';
    }
    close(rd->lock_fd);
    rd->locked = 0;
}
