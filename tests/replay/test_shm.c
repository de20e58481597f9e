/* tests/replay/test_shm.c: runtime/shm: memfd and named segments, alignment, mapping from another
 * process read-only (a write there faults) and read-write. */
#include "runtime/base/shm.h"
#include "test.h"

/* Under AddressSanitizer (abort_on_error=1) the fault is reported and the child aborts. */
#if TEST_ASAN
#define ASAN_ABORT SIGABRT
#else
#define ASAN_ABORT SIGSEGV
#endif

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_memfd_other_process(void)
{
    gb_error err = {0};
    gb_shm shm;
    CHECK_OK(gb_shm_create(&shm, 3 << 20, NULL, 1, &err));
    CHECK(((uintptr_t)shm.base & 4095) == 0);
    CHECK(shm.fd >= 0 && shm.mapped >= shm.size);
    uint64_t *p = shm.base;
    for (size_t i = 0; i < shm.size / 8; i++)
        if (p[i] != 0) { CHECK(p[i] == 0); break; } /* zero-filled */
    for (size_t i = 0; i < shm.size / 8; i++)
        p[i] = i * 3 + 1;
    /* A child maps the descriptor by /proc path, as an unrelated process would, read-only. */
    pid_t pid = fork();
    if (pid == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getppid(), shm.fd);
        FILE *f = fopen(path, "rb");
        if (!f)
            _exit(2);
        gb_shm view;
        gb_error e = {0};
        if (gb_shm_map_fd(&view, fileno(f), 3 << 20, 1, &e) != 0)
            _exit(3);
        fclose(f);
        const uint64_t *q = view.base;
        for (size_t i = 0; i < view.size / 8; i++)
            if (q[i] != i * 3 + 1)
                _exit(4);
        ((volatile uint64_t *)view.base)[0] = 7; /* read-only: must fault */
        _exit(5);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) &&
                  (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == ASAN_ABORT),
              "child status %d", status);
    CHECK(p[0] == 1);
    /* Read-write mapping through an inherited descriptor sees and makes changes. */
    pid = fork();
    if (pid == 0) {
        gb_shm rw;
        gb_error e = {0};
        if (gb_shm_map_fd(&rw, shm.fd, 0, 0, &e) != 0)
            _exit(3);
        ((uint64_t *)rw.base)[1] = 42;
        gb_shm_free(&rw);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(p[1] == 42);
    gb_shm_free(&shm);
    CHECK(shm.base == NULL && shm.fd == -1);
    gb_shm_free(&shm); /* twice is fine */
}

static void test_named(void)
{
    gb_error err = {0};
    char name[64];
    snprintf(name, sizeof name, "/gearbox-test-shm-%d", (int)getpid());
    gb_shm a, b;
    CHECK_OK(gb_shm_create(&a, 10000, name, 0, &err));
    CHECK(gb_shm_create(&b, 10000, name, 0, &err) == GB_ESYS); /* exists */
    memcpy(a.base, "hello", 6);
    CHECK_OK(gb_shm_open(&b, name, 0, 1, &err));
    CHECK(b.size >= 10000 && strcmp(b.base, "hello") == 0);
    gb_shm_free(&b);
    gb_shm_free(&a); /* owner unlinks */
    CHECK(gb_shm_open(&b, name, 0, 1, &err) == GB_ENOTFOUND);
    CHECK(gb_shm_create(&a, 0, NULL, 0, &err) == GB_EINVAL);
    CHECK(gb_shm_create(&a, 10, "no-slash", 0, &err) == GB_EINVAL);
}

int main(void)
{
    TEST_RUN(test_memfd_other_process);
    TEST_RUN(test_named);
    return test_main_result();
}
