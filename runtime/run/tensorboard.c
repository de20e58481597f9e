/* runtime/run/tensorboard.c: TensorBoard event files (see tensorboard.h). */
#include "runtime/run/tensorboard.h"

#include "runtime/base/crc32c.h"
#include "runtime/base/le.h"
#include "runtime/run/tensorboard.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TB_PATH_MAX 2048
#define TB_MAX_VALUES 256 /* scalars in one Event */

struct gb_tensorboard {
    FILE *f;
    char path[TB_PATH_MAX];
    uint8_t *buf; /* one packed Event, grown as needed */
    size_t cap;
};

uint32_t gb_tensorboard_masked_crc(const void *data, size_t len)
{
    uint32_t crc = gb_crc32c(0, data, len);
    return ((crc >> 15) | (crc << 17)) + GB_TENSORBOARD_MASK_DELTA;
}

void gb_tensorboard_frame(const void *data, uint64_t len,
                          uint8_t header[GB_TENSORBOARD_HEADER_BYTES],
                          uint8_t footer[GB_TENSORBOARD_FOOTER_BYTES])
{
    for (int i = 0; i < 8; i++)
        header[i] = (uint8_t)(len >> (8 * i));
    gb_put_le32(header + 8, gb_tensorboard_masked_crc(header, 8));
    gb_put_le32(footer, gb_tensorboard_masked_crc(data, (size_t)len));
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Packs ev, frames it and writes it, then flushes. Returns 0, GB_ENOMEM or GB_ESYS. */
static int write_event(gb_tensorboard *tb, const Gearbox__Tb__Event *ev, gb_error *err)
{
    size_t len = gearbox__tb__event__get_packed_size(ev);
    if (len > tb->cap) {
        uint8_t *b = realloc(tb->buf, len);
        if (!b)
            return gb_error_set(err, GB_ENOMEM, "tensorboard: out of memory (%zu bytes)", len);
        tb->buf = b;
        tb->cap = len;
    }
    gearbox__tb__event__pack(ev, tb->buf);
    uint8_t header[GB_TENSORBOARD_HEADER_BYTES], footer[GB_TENSORBOARD_FOOTER_BYTES];
    gb_tensorboard_frame(tb->buf, len, header, footer);
    if (fwrite(header, 1, sizeof header, tb->f) != sizeof header ||
        fwrite(tb->buf, 1, len, tb->f) != len ||
        fwrite(footer, 1, sizeof footer, tb->f) != sizeof footer || fflush(tb->f) != 0)
        return gb_error_errno(err, "write %s", tb->path);
    return 0;
}

int gb_tensorboard_open(gb_tensorboard **out, const char *dir, gb_error *err)
{
    *out = NULL;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return gb_error_errno(err, "mkdir %s", dir);
    gb_tensorboard *tb = calloc(1, sizeof *tb);
    if (!tb)
        return gb_error_set(err, GB_ENOMEM, "tensorboard: out of memory");
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    long long secs = (long long)time(NULL);
    int fd = -1;
    /* O_EXCL: never append to (or truncate) another writer's file; a resumed run that starts
     * in the same second gets the next free suffix */
    for (int k = 0; fd < 0 && k < 1000; k++) {
        int n = k ? snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%d", dir,
                             secs, host, k)
                  : snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s", dir,
                             secs, host);
        if (n < 0 || (size_t)n >= sizeof tb->path) {
            free(tb);
            return gb_error_set(err, GB_EINVAL, "tensorboard: path in %s too long", dir);
        }
        fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) {
            int rc = gb_error_errno(err, "open %s", tb->path);
            free(tb);
            return rc;
        }
    }
    if (fd < 0) {
        free(tb);
        return gb_error_set(err, GB_ESYS, "tensorboard: no free file name in %s", dir);
    }
    tb->f = fdopen(fd, "wb");
    if (!tb->f) {
        int rc = gb_error_errno(err, "fdopen %s", tb->path);
        close(fd);
        free(tb);
        return rc;
    }
    Gearbox__Tb__Event ev = GEARBOX__TB__EVENT__INIT;
    ev.wall_time = wall_now();
    ev.what_case = GEARBOX__TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)GB_TENSORBOARD_FILE_VERSION;
    int rc = write_event(tb, &ev, err);
    if (rc) {
        gb_tensorboard_close(tb, NULL);
        return rc;
    }
    *out = tb;
    return 0;
}

const char *gb_tensorboard_path(const gb_tensorboard *tb) { return tb->path; }

/* One event at step holding a summary of n values. */
static int write_summary(gb_tensorboard *tb, int64_t step, Gearbox__Tb__SummaryValue **values,
                         size_t n, gb_error *err)
{
    Gearbox__Tb__Summary summary = GEARBOX__TB__SUMMARY__INIT;
    summary.n_value = n;
    summary.value = values;
    Gearbox__Tb__Event ev = GEARBOX__TB__EVENT__INIT;
    ev.wall_time = wall_now();
    ev.step = step;
    ev.what_case = GEARBOX__TB__EVENT__WHAT_SUMMARY;
    ev.summary = &summary;
    return write_event(tb, &ev, err);
}

int gb_tensorboard_scalars(gb_tensorboard *tb, int64_t step, const char *const *tags,
                           const double *values, int n, gb_error *err)
{
    if (n < 0 || n > TB_MAX_VALUES)
        return gb_error_set(err, GB_EINVAL, "tensorboard: %d scalars in one event (0..%d)", n,
                            TB_MAX_VALUES);
    Gearbox__Tb__SummaryValue vals[TB_MAX_VALUES], *ptrs[TB_MAX_VALUES];
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(values[i]))
            continue;
        gearbox__tb__summary_value__init(&vals[used]);
        vals[used].tag = (char *)tags[i];
        vals[used].value_case = GEARBOX__TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
        vals[used].simple_value = (float)values[i];
        ptrs[used] = &vals[used];
        used++;
    }
    if (used == 0)
        return 0;
    return write_summary(tb, step, ptrs, used, err);
}

int gb_tensorboard_image(gb_tensorboard *tb, int64_t step, const char *tag, int height, int width,
                         int colorspace, const void *bytes, size_t len, gb_error *err)
{
    if (height <= 0 || width <= 0 || colorspace < 0 || !tag || !bytes || len == 0 ||
        len > GB_TENSORBOARD_IMAGE_MAX)
        return gb_error_set(err, GB_EINVAL,
                            "tensorboard: image %s of %d x %d, %zu bytes (at most %d)",
                            tag ? tag : "(no tag)", width, height, len, GB_TENSORBOARD_IMAGE_MAX);
    Gearbox__Tb__SummaryImage image = GEARBOX__TB__SUMMARY_IMAGE__INIT;
    image.height = height;
    image.width = width;
    image.colorspace = colorspace;
    image.encoded_image_string.data = (uint8_t *)bytes;
    image.encoded_image_string.len = len;
    Gearbox__Tb__SummaryValue value = GEARBOX__TB__SUMMARY_VALUE__INIT, *ptr = &value;
    value.tag = (char *)tag;
    value.value_case = GEARBOX__TB__SUMMARY_VALUE__VALUE_IMAGE;
    value.image = &image;
    return write_summary(tb, step, &ptr, 1, err);
}

const char *gb_tensorboard_group(const char *column)
{
    static const struct { const char *group; const char *columns[10]; } groups[] = {
        {"losses", {"loss", "policy_loss", "value_loss", "entropy", "approx_kl", "q_mean"}},
        {"train", {"lr", "epsilon", "alpha", "grad_norm", "clip_fraction", "explained_var",
                   "td_abs_mean"}},
        {"perf", {"env_steps_per_s", "train_steps_per_s", "time_s", "wall_s", "train_steps",
                  "samples_trained"}},
        {"replay", {"replay_size", "replay_fill", "sample_drops", "chunks_rejected",
                    "trained_share"}},
        {"policy", {"policy_version", "served_version_min", "version_lag"}},
        {"run", {"segment"}},
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int i = 0; i < 10 && groups[g].columns[i]; i++)
            if (strcmp(groups[g].columns[i], column) == 0)
                return groups[g].group;
    return "charts";
}

int gb_tensorboard_row(gb_tensorboard *tb, const char *const *columns, const double *values,
                       int n, int step_column, gb_error *err)
{
    if (n < 0 || n > TB_MAX_VALUES)
        return gb_error_set(err, GB_EINVAL, "tensorboard: a row of %d values (0..%d)", n,
                            TB_MAX_VALUES);
    char tags[TB_MAX_VALUES][GB_TENSORBOARD_TAG_MAX];
    const char *tag_ptrs[TB_MAX_VALUES];
    double vals[TB_MAX_VALUES];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (i == step_column)
            continue;
        snprintf(tags[m], sizeof tags[m], "%s/%s", gb_tensorboard_group(columns[i]), columns[i]);
        tag_ptrs[m] = tags[m];
        vals[m++] = values[i];
    }
    double s = step_column >= 0 && step_column < n ? values[step_column] : 0;
    int64_t step = isfinite(s) ? (int64_t)s : 0;
    return gb_tensorboard_scalars(tb, step, tag_ptrs, vals, m, err);
}

int gb_tensorboard_close(gb_tensorboard *tb, gb_error *err)
{
    if (!tb)
        return 0;
    int rc = 0;
    if (tb->f && fclose(tb->f) != 0)
        rc = gb_error_errno(err, "close %s", tb->path);
    free(tb->buf);
    free(tb);
    return rc;
}
