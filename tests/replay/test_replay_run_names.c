/* tests/replay/test_replay_run_names.c: the names of a run's shared-memory segments
 * (gb_replay_shm_name, gb_shm_run_name): the same folder spelt two ways gives one name, another
 * folder or a folder made again another; segments too large for /dev/shm refused; a run's
 * segments removed together, another run's left. */
#include "replay/replay.h"
#include "runtime/base/shm.h"
#include "test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_run_names(void)
{
    gb_error err = {0};
    char d1[] = "/tmp/gearbox-test-attach-runXXXXXX", d2[] = "/tmp/gearbox-test-attach-runXXXXXX";
    CHECK(mkdtemp(d1) != NULL && mkdtemp(d2) != NULL);
    char a[GB_SHM_NAME_MAX], b[GB_SHM_NAME_MAX], c[GB_SHM_NAME_MAX], d[GB_SHM_NAME_MAX];
    CHECK_OK(gb_replay_shm_name(d1, 0, a, sizeof a, &err));
    char rel[256];
    snprintf(rel, sizeof rel, "%s/../%s", d1, strrchr(d1, '/') + 1);
    CHECK_OK(gb_replay_shm_name(rel, 0, b, sizeof b, &err)); /* another spelling, same folder */
    CHECK_OK(gb_replay_shm_name(d1, 1, c, sizeof c, &err));
    CHECK_OK(gb_replay_shm_name(d2, 0, d, sizeof d, &err));
    CHECK(strncmp(a, "/gearbox-", 9) == 0 && strstr(a, "-replay-0") != NULL);
    CHECK(strcmp(a, b) == 0);
    CHECK(strcmp(a, c) != 0 && strcmp(a, d) != 0);
    /* A folder made again at the same path (ext4 hands the inode number straight back) is
     * another run, where the file system records birth times. */
    struct statx sx;
    int has_btime = statx(AT_FDCWD, d2, 0, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME);
    char d2_again[GB_SHM_NAME_MAX];
    CHECK(rmdir(d2) == 0 && mkdir(d2, 0700) == 0);
    CHECK_OK(gb_replay_shm_name(d2, 0, d2_again, sizeof d2_again, &err));
    if (has_btime)
        CHECK(strcmp(d, d2_again) != 0);
    else
        fprintf(stderr, "no birth times here: a re-made run folder keeps its run id\n");
    strcpy(d, d2_again);
    CHECK_EQ_INT(gb_replay_shm_name("/nonexistent/gearbox/run", 0, b, sizeof b, &err),
                 GB_ENOTFOUND);
    CHECK_EQ_INT(gb_shm_run_name(d1, "bad/name", b, sizeof b, &err), GB_EINVAL);

    gb_shm s1, s2, s3;
    /* Larger than /dev/shm's room: refused at once (it would die of SIGBUS on first touch). */
    CHECK_EQ_INT(gb_shm_create(&s1, (size_t)1 << 52, a, 0, &err), GB_EFULL);
    CHECK_MSG(strstr(err.msg, "/dev/shm") != NULL, "%s", err.msg);
    CHECK_OK(gb_shm_create(&s1, 4096, a, 0, &err));
    CHECK_OK(gb_shm_create(&s2, 4096, c, 0, &err));
    CHECK_OK(gb_shm_create(&s3, 4096, d, 0, &err));
    s1.owner = s2.owner = 0; /* the run removes them */
    int removed = -1;
    CHECK_OK(gb_shm_unlink_run(d1, &removed, &err));
    CHECK_EQ_INT(removed, 2);
    gb_shm probe;
    CHECK_EQ_INT(gb_shm_open(&probe, a, 0, 1, &err), GB_ENOTFOUND);
    CHECK_EQ_INT(gb_shm_open(&probe, c, 0, 1, &err), GB_ENOTFOUND);
    CHECK_OK(gb_shm_open(&probe, d, 0, 1, &err)); /* the other run's stays */
    gb_shm_free(&probe);
    gb_shm_free(&s1);
    gb_shm_free(&s2);
    gb_shm_free(&s3);
    rmdir(d1);
    rmdir(d2);
}

int main(void)
{
    TEST_RUN(test_run_names);
    return test_main_result();
}
