/* tests/runtime/base/test_file.c: runtime/base/file.h. A file written in parts replaces the old
 * one whole, and a write that cannot finish leaves the old one and no temporary; a user folder is
 * made private, taken again, and refused when it is a link or (private) open to others. */
#include "runtime/base/file.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void test_write(void)
{
    char path[128], tmp[160], buf[32] = {0};
    snprintf(path, sizeof path, "%s/f", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gb_file_part a[] = {{"hello ", 6}, {"", 0}, {"world", 5}};
    CHECK_EQ_INT(gb_file_write_atomic(path, a, 3), 0);
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(buf, 1, sizeof buf, f) == 11 && memcmp(buf, "hello world", 11) == 0);
    if (f)
        fclose(f);
    gb_file_part b[] = {{"new", 3}};
    CHECK_EQ_INT(gb_file_write_atomic(path, b, 1), 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 3);
    CHECK(access(tmp, F_OK) != 0);
    /* a folder in its way: the rename fails, the old file stays, no temporary is left */
    char blocked[128], btmp[160];
    snprintf(blocked, sizeof blocked, "%s/d", dir);
    snprintf(btmp, sizeof btmp, "%s.tmp", blocked);
    CHECK(mkdir(blocked, 0700) == 0);
    CHECK(gb_file_write_atomic(blocked, b, 1) != 0);
    CHECK(access(btmp, F_OK) != 0);
    CHECK(stat(blocked, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ_INT(gb_file_write_atomic("/nonexistent/dir/f", b, 1), ENOENT);
    unlink(path);
    rmdir(blocked);
}

static void test_user_dir(void)
{
    char mine[128], link[128], open_dir[128];
    gb_error err = {0};
    snprintf(mine, sizeof mine, "%s/mine", dir);
    CHECK_OK(gb_user_dir(mine, 1, &err));
    struct stat st;
    CHECK(stat(mine, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK_OK(gb_user_dir(mine, 1, &err)); /* there already */
    snprintf(link, sizeof link, "%s/link", dir);
    CHECK(symlink(mine, link) == 0);
    CHECK_EQ_INT(gb_user_dir(link, 0, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "is not a folder of this user") != NULL);
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    CHECK(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
    CHECK_OK(gb_user_dir(open_dir, 0, &err));
    CHECK_EQ_INT(gb_user_dir(open_dir, 1, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "is not a private folder of this user") != NULL);
    unlink(link);
    rmdir(mine);
    rmdir(open_dir);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gb_test_file_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    TEST_RUN(test_write);
    TEST_RUN(test_user_dir);
    rmdir(dir);
    return test_main_result();
}
