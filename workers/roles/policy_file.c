/* workers/roles/policy_file.c: a checkpoint set's policy file (see policy_file.h). */
#include "workers/roles/policy_file.h"

#include "runtime/base/crc32c.h"
#include "runtime/base/file.h"
#include "runtime/base/le.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "GBPOLICY"
#define FORMAT 1u
#define HEADER_BYTES 40

int gb_policy_file_write(const char *path, uint64_t version, const gb_param_entry *layout,
                         int count, const void *data, uint64_t bytes, gb_error *err)
{
    int rc = gb_param_layout_check(layout, count, bytes, err);
    if (rc)
        return rc;
    unsigned char *raw = NULL, head[HEADER_BYTES];
    size_t raw_len = 0;
    if ((rc = gb_param_layout_encode(layout, count, &raw, &raw_len, err)))
        return rc;
    memcpy(head, MAGIC, 8);
    gb_put_le32(head + 8, FORMAT);
    gb_put_le32(head + 12, (uint32_t)count);
    gb_put_le64(head + 16, version);
    gb_put_le64(head + 24, bytes);
    gb_put_le32(head + 32, gb_crc32c(0, data, (size_t)bytes));
    gb_put_le32(head + 36, gb_crc32c(0, raw, raw_len));
    gb_file_part parts[] = {{head, sizeof head}, {raw, raw_len}, {data, (size_t)bytes}};
    int e = gb_file_write_atomic(path, parts, 3);
    free(raw);
    if (e)
        return gb_error_set(err, GB_EIO, "policy file: write %s: %s", path, strerror(e));
    return 0;
}

void gb_policy_file_free(gb_policy_file *f)
{
    free(f->layout);
    free(f->data);
    memset(f, 0, sizeof *f);
}

/* Reads exactly len bytes at the file's position; 0 when it could. */
static int read_all(FILE *fp, void *buf, size_t len)
{
    return fread(buf, 1, len, fp) == len ? 0 : -1;
}

int gb_policy_file_read(const char *path, gb_policy_file *out, gb_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rbe");
    if (!fp)
        return gb_error_set(err, errno == ENOENT ? GB_ENOTFOUND : GB_EIO, "policy file %s: %s",
                            path, strerror(errno));
    struct stat st;
    unsigned char head[HEADER_BYTES], *raw = NULL;
    const char *bad = NULL;
    int rc = 0;
    if (fstat(fileno(fp), &st) != 0 || read_all(fp, head, sizeof head) != 0 ||
        memcmp(head, MAGIC, 8) != 0)
        bad = "not a gearbox policy file";
    else if (gb_get_le32(head + 8) != FORMAT)
        bad = "a format this gearbox does not read";
    uint32_t count = bad ? 0 : gb_get_le32(head + 12);
    uint64_t bytes = bad ? 0 : gb_get_le64(head + 24);
    uint64_t raw_len = (uint64_t)count * GB_PARAM_RECORD_BYTES;
    if (!bad && (count > GB_PARAM_MAX_ENTRIES || bytes > (uint64_t)st.st_size ||
                 (uint64_t)st.st_size != HEADER_BYTES + raw_len + bytes))
        bad = "its size does not match its header";
    if (!bad) {
        raw = malloc(raw_len ? raw_len : 1);
        out->layout = calloc(count ? count : 1, sizeof *out->layout);
        out->data = malloc(bytes ? bytes : 1);
        if (!raw || !out->layout || !out->data)
            rc = gb_error_set(err, GB_ENOMEM, "policy file %s: out of memory", path);
    }
    if (!bad && !rc && (read_all(fp, raw, raw_len) != 0 || read_all(fp, out->data, bytes) != 0))
        bad = "it ends early";
    if (!bad && !rc && (gb_crc32c(0, raw, raw_len) != gb_get_le32(head + 36) ||
                        gb_crc32c(0, out->data, bytes) != gb_get_le32(head + 32)))
        bad = "a CRC does not match";
    gb_error lerr = {0};
    if (!bad && !rc && gb_param_layout_decode(raw, (int)count, bytes, out->layout, &lerr))
        bad = lerr.msg;
    fclose(fp);
    free(raw);
    if (bad)
        rc = gb_error_set(err, GB_ECORRUPT, "policy file %s is corrupt: %s", path, bad);
    if (rc) {
        gb_policy_file_free(out);
        return rc;
    }
    out->version = gb_get_le64(head + 16);
    out->count = (int)count;
    out->bytes = bytes;
    return 0;
}
