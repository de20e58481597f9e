/* tests/runtime/streams/streams_test.h: helpers for the multi-process stream tests: temporary run
 * directories, forked children, small result files.
 * defines: st_tmpdir, st_rmdir, st_fork, st_wait, st_write_file, st_read_file, st_wait_file */
#ifndef GB_TESTS_STREAMS_TEST_H
#define GB_TESTS_STREAMS_TEST_H

#include "runtime/base/clock.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A fresh directory under /tmp (short, for ipc socket paths). Exits on failure (tests only). */
static inline void st_tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/gbst-XXXXXX");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        exit(2);
    }
}

/* Removes a directory tree one level deep plus its "sockets" folder. */
static inline void st_rmdir(const char *dir)
{
    char sub[512];
    const char *dirs[2] = {"sockets", ""};
    for (int k = 0; k < 2; k++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, dirs[k]);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", sub, e->d_name);
            unlink(p);
        }
        closedir(d);
        rmdir(sub);
    }
}

/* Forks a child running fn(arg) and exiting with its return value. Child processes must not
 * touch the parent's ZeroMQ context: fork before creating one, or create a new one in fn. */
static inline pid_t st_fork(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

/* Waits for pid; returns its exit status, or 128 + signal. */
static inline int st_wait(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

static inline int st_write_file(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fputs(text, f);
    fclose(f);
    return rename(tmp, path);
}

static inline int st_read_file(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    return 0;
}

/* Waits up to seconds for path to exist and reads it. */
static inline int st_wait_file(const char *path, char *out, size_t cap, double seconds)
{
    double end = gb_now_s() + seconds;
    while (gb_now_s() < end) {
        if (st_read_file(path, out, cap) == 0)
            return 0;
        gb_sleep_ms(5);
    }
    return -1;
}

#endif
