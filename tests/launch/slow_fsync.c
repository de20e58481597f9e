/* tests/launch/slow_fsync.c: an LD_PRELOAD library for run_slow_checkpoint.sh: a process's
 * first fsync of a temporary file under a checkpoints/ folder (or, with
 * GB_TEST_SLOW_FSYNC_MATCH, of a file whose path contains that) sleeps GB_TEST_SLOW_FSYNC_S
 * seconds before it syncs, as a loaded disk's did (24 s, a trainer's requested checkpoint
 * while three runs wrote theirs). Every other fsync is the real one at once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fsync(int fd)
{
    static int (*real)(int);
    static int slept;
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const char *secs = getenv("GB_TEST_SLOW_FSYNC_S");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (secs && !slept && n > 0) {
        path[n] = '\0';
        const char *match = getenv("GB_TEST_SLOW_FSYNC_MATCH");
        if (match ? strstr(path, match) != NULL
                  : strstr(path, "/checkpoints/") && strstr(path, ".tmp")) {
            slept = 1;
            fprintf(stderr, "slow_fsync: %s s before fsync of %s\n", secs, path);
            sleep((unsigned)atoi(secs));
        }
    }
    return real(fd);
}
