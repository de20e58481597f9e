/* tests/workers/roles/test_policy_file.c: a checkpoint set's policy file
 * (workers/roles/policy_file.h): the parameters and their layout read back as written; a file
 * that is not one, of another format, cut short, with a flipped bit in its data or layout, or a
 * layout that does not fit its data is refused as corrupt; a write that cannot finish leaves
 * nothing at its path. */
#include "test.h"
#include "workers/roles/policy_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gb_param_entry layout[2];
static float data[16];
static uint64_t bytes;

static void make(void)
{
    bytes = 0;
    gb_param_entry_append(&layout[0], &bytes, 4, "actor.0.weight", GB_DTYPE_FLOAT32, 3, 4);
    gb_param_entry_append(&layout[1], &bytes, 4, "actor.0.bias", GB_DTYPE_FLOAT32, 4, 0);
    for (int i = 0; i < 16; i++)
        data[i] = 0.25f * (float)i - 1.0f;
}

/* Flips bit 0 of the byte at offset of path (from the end when offset < 0). */
static void flip(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    fseek(f, offset, offset < 0 ? SEEK_END : SEEK_SET);
    long at = ftell(f);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
}

static int read_code(const char *path)
{
    gb_policy_file pf;
    gb_error err = {0};
    int rc = gb_policy_file_read(path, &pf, &err);
    if (rc) /* nothing held after a refusal, which names the file */
        CHECK(pf.data == NULL && pf.layout == NULL && strstr(err.msg, path) != NULL);
    gb_policy_file_free(&pf);
    return rc;
}

static void test_round_trip(void)
{
    char path[] = "/tmp/gb_policy_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    gb_error err = {0};
    CHECK_OK(gb_policy_file_write(path, 77, layout, 2, data, bytes, &err));
    gb_policy_file pf;
    CHECK_OK(gb_policy_file_read(path, &pf, &err));
    CHECK(pf.version == 77 && pf.count == 2 && pf.bytes == bytes && bytes == 64);
    CHECK(strcmp(pf.layout[1].name, "actor.0.bias") == 0 && pf.layout[1].rank == 1 &&
          pf.layout[1].shape[0] == 4 && pf.layout[1].offset == 48);
    CHECK(pf.layout[0].rank == 2 && pf.layout[0].shape[1] == 4);
    CHECK(memcmp(pf.data, data, bytes) == 0);
    gb_policy_file_free(&pf);

    const long head = 40, body = head + 2 * GB_PARAM_RECORD_BYTES;
    flip(path, -1); /* the data */
    CHECK_EQ_INT(read_code(path), GB_ECORRUPT);
    flip(path, -1);
    flip(path, head + 3); /* a layout record's name */
    CHECK_EQ_INT(read_code(path), GB_ECORRUPT);
    flip(path, head + 3);
    flip(path, 8); /* the format */
    CHECK_EQ_INT(read_code(path), GB_ECORRUPT);
    flip(path, 8);
    flip(path, 0); /* the magic */
    CHECK_EQ_INT(read_code(path), GB_ECORRUPT);
    flip(path, 0);
    CHECK_OK(read_code(path));
    CHECK(truncate(path, body + 10) == 0); /* cut short */
    CHECK_EQ_INT(read_code(path), GB_ECORRUPT);
    CHECK(unlink(path) == 0);
    CHECK_EQ_INT(read_code(path), GB_ENOTFOUND);

    /* a layout beyond the data is not written; nor is anything where the write cannot finish */
    CHECK(gb_policy_file_write(path, 1, layout, 2, data, bytes - 4, &err) == GB_EINVAL);
    CHECK(access(path, F_OK) != 0);
    CHECK(gb_policy_file_write("/nonexistent/dir/p.policy", 1, layout, 2, data, bytes, &err) ==
          GB_EIO);
    CHECK(strstr(err.msg, "/nonexistent/dir/p.policy") != NULL);
}

int main(void)
{
    make();
    TEST_RUN(test_round_trip);
    return test_main_result();
}
