/* tests/runtime/base/test_error_log.c: error messages compose, the logger writes whole lines with
 * time, level, role and index to its file, and drops lines below its level. */
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_errors(void)
{
    gb_error err;
    gb_error_clear(&err);
    CHECK_EQ_INT(gb_error_set(&err, GB_ECONFIG, "x.yaml:%d:%d: a.b: bad", 3, 5), GB_ECONFIG);
    CHECK(strcmp(err.msg, "x.yaml:3:5: a.b: bad") == 0);
    CHECK_EQ_INT(gb_error_prefix(&err, "loading %s", "x.yaml"), GB_ECONFIG);
    CHECK(strcmp(err.msg, "loading x.yaml: x.yaml:3:5: a.b: bad") == 0);
    errno = ENOENT;
    CHECK_EQ_INT(gb_error_errno(&err, "open %s", "/nope"), GB_ESYS);
    CHECK(strstr(err.msg, "open /nope: No such file") != NULL);
    CHECK_EQ_INT(gb_error_set(NULL, GB_EIO, "ignored"), GB_EIO);
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    gb_error_set(&err, GB_EINVAL, "%s", big);
    gb_error_prefix(&err, "%s", big);
    CHECK(strlen(err.msg) == GB_ERROR_MSG_MAX - 1);
    CHECK(strcmp(gb_strerror(GB_ETIMEOUT), "timeout") == 0);
}

static void test_logger(void)
{
    char path[] = "/tmp/gb_test_log_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    gb_log_init("trainer", 2, GB_LOG_INFO);
    gb_log_set_stderr(0);
    CHECK(gb_log_open_file(path) == 0);
    GB_INFO("hello %d", 7);
    GB_DEBUG("not shown");
    GB_WARN("careful");
    gb_log_close();
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[512];
    int lines = 0;
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        CHECK(strlen(line) > 24 && line[4] == '-' && line[10] == 'T' && line[23] == 'Z');
        CHECK(strstr(line, " trainer-2 ") != NULL);
        if (lines == 1)
            CHECK(strstr(line, "INFO") && strstr(line, "hello 7\n"));
        else
            CHECK(strstr(line, "WARN") && strstr(line, "careful\n"));
    }
    CHECK_EQ_INT(lines, 2);
    if (f)
        fclose(f);
    unlink(path);
    gb_log_level lv;
    CHECK(gb_log_parse_level("debug", &lv) == 0 && lv == GB_LOG_DEBUG);
    CHECK(gb_log_parse_level("loud", &lv) == GB_EINVAL);
}

int main(void)
{
    TEST_RUN(test_errors);
    TEST_RUN(test_logger);
    return test_main_result();
}
