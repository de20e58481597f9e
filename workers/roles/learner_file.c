/* workers/roles/learner_file.c: the model file of a learner without libtorch (see
 * learner_file.h). */
#include "workers/roles/learner_file.h"

#include "runtime/base/crc32c.h"
#include "runtime/base/file.h"
#include "runtime/base/le.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAGIC "GBLEARNR"
#define FORMAT 1u
#define HEADER_BYTES 96
#define MAX_FLOATS ((int64_t)1 << 40) /* 4 TiB an array: past it a header is garbage */

/* The CRC-32C of the arrays in the file's order. */
static uint32_t arrays_crc(const gb_learner_file *f)
{
    size_t b = (size_t)f->n * sizeof(float);
    uint32_t c = gb_crc32c(0, f->p, b);
    c = gb_crc32c(c, f->m, b);
    c = gb_crc32c(c, f->v, b);
    return f->target_n ? gb_crc32c(c, f->target, (size_t)f->target_n * sizeof(float)) : c;
}

int gb_learner_file_write(const char *path, const gb_learner_file *f, gb_error *err)
{
    if (f->n <= 0 || f->n > MAX_FLOATS || f->target_n < 0 || f->target_n > MAX_FLOATS ||
        (f->target_n > 0) != (f->target != NULL) ||
        strnlen(f->algorithm, sizeof f->algorithm) == sizeof f->algorithm)
        return gb_error_set(err, GB_EINVAL, "learner file %s: sizes out of range", path);
    int rc = gb_param_layout_check(f->layout, f->count, f->layout_bytes, err);
    unsigned char *raw = NULL, head[HEADER_BYTES] = {0};
    size_t raw_len = 0;
    if (rc || (rc = gb_param_layout_encode(f->layout, f->count, &raw, &raw_len, err)))
        return rc;
    memcpy(head, MAGIC, 8);
    gb_put_le32(head + 8, FORMAT);
    gb_put_le32(head + 12, (uint32_t)f->count);
    memcpy(head + 16, f->algorithm, strlen(f->algorithm));
    gb_put_le64(head + 32, (uint64_t)f->n);
    gb_put_le64(head + 40, (uint64_t)f->target_n);
    gb_put_le64(head + 48, (uint64_t)f->adam_steps);
    gb_put_le64(head + 56, (uint64_t)f->train_steps);
    gb_put_le64(head + 64, f->version);
    gb_put_le64(head + 72, f->layout_bytes);
    gb_put_le32(head + 80, gb_crc32c(0, raw, raw_len));
    gb_put_le32(head + 84, arrays_crc(f));
    const size_t b = (size_t)f->n * sizeof(float);
    gb_file_part parts[] = {{head, sizeof head}, {raw, raw_len},  {f->p, b},
                            {f->m, b},           {f->v, b},
                            {f->target, (size_t)f->target_n * sizeof(float)}};
    int e = gb_file_write_atomic(path, parts, 6);
    free(raw);
    if (e)
        return gb_error_set(err, GB_EIO, "learner file: write %s: %s", path, strerror(e));
    return 0;
}

void gb_learner_file_free(gb_learner_file *f)
{
    free(f->owned);
    memset(f, 0, sizeof *f);
}

int gb_learner_file_is(const char *path)
{
    char head[8];
    FILE *fp = fopen(path, "rbe");
    int is = fp && fread(head, 1, sizeof head, fp) == sizeof head &&
             memcmp(head, MAGIC, 8) == 0;
    if (fp)
        fclose(fp);
    return is;
}

/* Checks a header against the file's size: NULL, or what is wrong. */
static const char *check_head(const unsigned char *head, uint64_t size)
{
    if (memcmp(head, MAGIC, 8) != 0)
        return "not a gearbox learner file";
    if (gb_get_le32(head + 8) != FORMAT)
        return "a format this gearbox does not read";
    uint64_t count = gb_get_le32(head + 12), n = gb_get_le64(head + 32);
    uint64_t tn = gb_get_le64(head + 40);
    if (memchr(head + 16, 0, 16) == NULL || head[16] == 0)
        return "its algorithm's name is not a name";
    if (count > GB_PARAM_MAX_ENTRIES || n == 0 || n > (uint64_t)MAX_FLOATS ||
        tn > (uint64_t)MAX_FLOATS ||
        size != HEADER_BYTES + count * GB_PARAM_RECORD_BYTES + (3 * n + tn) * sizeof(float))
        return "its size does not match its header";
    return NULL;
}

int gb_learner_file_read(const char *path, gb_learner_file *out, gb_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rbe");
    if (!fp)
        return gb_error_set(err, errno == ENOENT ? GB_ENOTFOUND : GB_EIO, "learner file %s: %s",
                            path, strerror(errno));
    struct stat st;
    unsigned char head[HEADER_BYTES];
    const char *bad = NULL;
    int rc = 0;
    if (fstat(fileno(fp), &st) != 0 || fread(head, 1, sizeof head, fp) != sizeof head)
        bad = "not a gearbox learner file";
    else
        bad = check_head(head, (uint64_t)st.st_size);
    const uint32_t count = bad ? 0 : gb_get_le32(head + 12);
    const size_t raw_len = (size_t)count * GB_PARAM_RECORD_BYTES;
    const int64_t n = bad ? 0 : (int64_t)gb_get_le64(head + 32);
    const int64_t tn = bad ? 0 : (int64_t)gb_get_le64(head + 40);
    const size_t floats = (size_t)(3 * n + tn), lay = (count ? count : 1) * sizeof(gb_param_entry);
    unsigned char *raw = NULL;
    gb_param_entry *layout = NULL;
    float *a = NULL;
    if (!bad) {
        raw = malloc(raw_len ? raw_len : 1);
        out->owned = malloc(lay + floats * sizeof(float));
        if (!raw || !out->owned)
            rc = gb_error_set(err, GB_ENOMEM, "learner file %s: out of memory", path);
        layout = out->owned;
        a = (float *)((char *)out->owned + lay);
    }
    if (!bad && !rc && (fread(raw, 1, raw_len, fp) != raw_len ||
                        fread(a, sizeof(float), floats, fp) != floats))
        bad = "it ends early";
    fclose(fp);
    if (!bad && !rc) {
        out->p = a;
        out->m = a + n;
        out->v = a + 2 * n;
        out->target = tn ? a + 3 * n : NULL;
        out->n = n;
        out->target_n = tn;
        if (gb_crc32c(0, raw, raw_len) != gb_get_le32(head + 80) ||
            arrays_crc(out) != gb_get_le32(head + 84))
            bad = "a CRC does not match";
    }
    gb_error lerr = {0};
    if (!bad && !rc &&
        gb_param_layout_decode(raw, (int)count, gb_get_le64(head + 72), layout, &lerr))
        bad = lerr.msg;
    free(raw);
    if (bad)
        rc = gb_error_set(err, GB_ECORRUPT, "learner file %s is corrupt: %s", path, bad);
    if (rc) {
        gb_learner_file_free(out);
        return rc;
    }
    memcpy(out->algorithm, head + 16, 16);
    out->layout = layout;
    out->count = (int)count;
    out->layout_bytes = gb_get_le64(head + 72);
    out->adam_steps = (int64_t)gb_get_le64(head + 48);
    out->train_steps = (int64_t)gb_get_le64(head + 56);
    out->version = gb_get_le64(head + 64);
    return 0;
}

const char *gb_learner_file_algorithm(const gb_config *cfg)
{
    return gb_config_enum_name("trainer.algorithm.name", cfg->trainer.algorithm.name);
}

int gb_learner_file_fits(const gb_learner_file *f, const gb_config *cfg,
                         const gb_param_entry *layout, int count, uint64_t bytes, int64_t n,
                         int64_t target_n, gb_error *err)
{
    const char *algorithm = gb_learner_file_algorithm(cfg);
    if (strcmp(f->algorithm, algorithm) != 0)
        return gb_error_set(err, GB_ECORRUPT, "it is a %s learner's, this one is %s's",
                            f->algorithm, algorithm);
    if (gb_param_layout_fits(f->layout, f->count, (size_t)f->layout_bytes, layout, count, bytes,
                             err) != 0) {
        err->code = GB_ECORRUPT;
        return GB_ECORRUPT;
    }
    if (n >= 0 && (f->n != n || f->target_n != target_n))
        return gb_error_set(err, GB_ECORRUPT, "it holds %lld floats a state array and %lld of "
                            "a target, this learner %lld and %lld", (long long)f->n,
                            (long long)f->target_n, (long long)n, (long long)target_n);
    return 0;
}

int gb_learner_checkpoint_load(gb_torch_learner *l, const gb_config *cfg, const char *path,
                               gb_error *err)
{
    if (!gb_learner_file_is(path))
        return gb_torch_learner_load(l, path, err);
    gb_learner_file f;
    int rc = gb_learner_file_read(path, &f, err);
    if (rc)
        return rc;
    const gb_param_entry *table;
    int count;
    uint64_t bytes;
    gb_torch_model *model = gb_torch_learner_model(l);
    gb_torch_model_layout(model, &table, &count, &bytes);
    rc = gb_learner_file_fits(&f, cfg, table, count, bytes, -1, -1, err);
    if (rc == 0) /* set_flat checks the sizes */
        rc = gb_torch_learner_set_flat(l, f.p, f.m, f.v, f.target, f.n, f.adam_steps,
                                       f.train_steps, err);
    if (rc == 0)
        gb_torch_model_set_version(model, f.version);
    else
        gb_error_prefix(err, "checkpoint %s", path);
    gb_learner_file_free(&f);
    return rc;
}
