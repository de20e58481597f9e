/* tests/runtime/run/test_tensorboard.c: TensorBoard event files (runtime/run/tensorboard.h): the
 * TFRecord masked CRC and framing against values from TensorBoard's own Python implementation
 * (tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c), the protobuf-c encoding
 * of an Event against the bytes TensorBoard's event_pb2 serialises for the same message, a file
 * written and read back record by record, and metrics.csv rows mirrored into tb/ by the run
 * directory (runtime/run/rundir.h), including an earlier gearbox's metrics.csv widened on resume;
 * an image summary (Summary.Image, an evaluation's GIF) encoded as event_pb2 encodes it, written
 * and read back, directly and through the run directory's writer. */
#include "runtime/run/rundir.h"
#include "runtime/run/tensorboard.h"
#include "runtime/run/tensorboard.pb-c.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* Reference values from TensorBoard's masked_crc32c (Python). */
static void test_masked_crc(void)
{
    CHECK_EQ_INT(gb_tensorboard_masked_crc("123456789", 9), 0xc78ab0e5u);
    CHECK_EQ_INT(gb_tensorboard_masked_crc("", 0), 0xa282ead8u); /* crc 0: the mask delta */
    uint8_t len24[8] = {24, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ_INT(gb_tensorboard_masked_crc(len24, 8), 0x224b7fa3u);
}

/* The file_version Event (wall_time 1.5) as TensorBoard's event_pb2 serialises it, and its
 * frame: length 24 and the masked CRCs TensorBoard computes. */
static void test_frame_and_encoding(void)
{
    uint8_t want[64];
    size_t n = unhex("09000000000000f83f1a0d627261696e2e4576656e743a32", want);
    Gearbox__Tb__Event ev = GEARBOX__TB__EVENT__INIT;
    ev.wall_time = 1.5;
    ev.what_case = GEARBOX__TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)GB_TENSORBOARD_FILE_VERSION;
    uint8_t got[64];
    CHECK_EQ_INT(gearbox__tb__event__get_packed_size(&ev), n);
    gearbox__tb__event__pack(&ev, got);
    CHECK(memcmp(got, want, n) == 0);
    uint8_t header[GB_TENSORBOARD_HEADER_BYTES], footer[GB_TENSORBOARD_FOOTER_BYTES];
    gb_tensorboard_frame(got, n, header, footer);
    CHECK_EQ_INT(header[0], 24);
    for (int i = 1; i < 8; i++)
        CHECK_EQ_INT(header[i], 0);
    CHECK_EQ_INT(le32(header + 8), 0x224b7fa3u);
    CHECK_EQ_INT(le32(footer), 0x6c64282au);

    /* a summary of two scalars, one of them 0.0 (present: simple_value is in a oneof) */
    n = unhex("09000000000000004010072a250a0f0a086368617274732f7815000000000a120a0b6c6f73736573"
              "2f6c6f7373150000a0bf", want);
    Gearbox__Tb__SummaryValue v[2] = {GEARBOX__TB__SUMMARY_VALUE__INIT,
                                      GEARBOX__TB__SUMMARY_VALUE__INIT};
    Gearbox__Tb__SummaryValue *pv[2] = {&v[0], &v[1]};
    v[0].tag = "charts/x";
    v[0].value_case = GEARBOX__TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
    v[0].simple_value = 0.0f;
    v[1].tag = "losses/loss";
    v[1].value_case = GEARBOX__TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
    v[1].simple_value = -1.25f;
    Gearbox__Tb__Summary s = GEARBOX__TB__SUMMARY__INIT;
    s.n_value = 2;
    s.value = pv;
    Gearbox__Tb__Event e2 = GEARBOX__TB__EVENT__INIT;
    e2.wall_time = 2.0;
    e2.step = 7;
    e2.what_case = GEARBOX__TB__EVENT__WHAT_SUMMARY;
    e2.summary = &s;
    CHECK_EQ_INT(gearbox__tb__event__get_packed_size(&e2), n);
    gearbox__tb__event__pack(&e2, got);
    CHECK(memcmp(got, want, n) == 0);
}

/* Reads the records of path into events (unpacked; caller frees); checks every CRC. Returns the
 * count, or -1 on a framing error. */
static int read_events(const char *path, Gearbox__Tb__Event **events, int max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int n = 0;
    uint8_t header[12], footer[4], data[65536];
    while (n < max && fread(header, 1, 12, f) == 12) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)header[i] << (8 * i);
        if (le32(header + 8) != gb_tensorboard_masked_crc(header, 8) || len > sizeof data ||
            fread(data, 1, len, f) != len || fread(footer, 1, 4, f) != 4 ||
            le32(footer) != gb_tensorboard_masked_crc(data, len)) {
            fclose(f);
            return -1;
        }
        events[n] = gearbox__tb__event__unpack(NULL, len, data);
        if (!events[n]) {
            fclose(f);
            return -1;
        }
        n++;
    }
    int trailing = fgetc(f) != EOF;
    fclose(f);
    return trailing ? -1 : n;
}

/* The one events file in dir into path; returns how many there are. */
static int events_file(const char *dir, char *path, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0) {
            snprintf(path, cap, "%s/%s", dir, e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static const Gearbox__Tb__SummaryValue *find_tag(const Gearbox__Tb__Event *e, const char *tag)
{
    for (size_t i = 0; e->summary && i < e->summary->n_value; i++)
        if (strcmp(e->summary->value[i]->tag, tag) == 0)
            return e->summary->value[i];
    return NULL;
}

static void test_write_read_back(void)
{
    gb_error err = {0};
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tb", tmpdir);
    gb_tensorboard *tb = NULL;
    CHECK_OK(gb_tensorboard_open(&tb, dir, &err));
    if (!tb)
        return;
    const char *tags[3] = {"charts/a", "losses/b", "charts/nan"};
    double vals[3] = {3.5, -0.0, NAN};
    CHECK_OK(gb_tensorboard_scalars(tb, 123456789012LL, tags, vals, 3, &err));
    double nans[1] = {NAN};
    CHECK_OK(gb_tensorboard_scalars(tb, 5, tags, nans, 1, &err)); /* nothing: no record */
    const char *cols[4] = {"time_s", "env_steps", "return_mean_100", "q_mean"};
    double row[4] = {1.25, 4096, 21.5, 0.75};
    CHECK_OK(gb_tensorboard_row(tb, cols, row, 4, 1, &err));
    char name[1024];
    snprintf(name, sizeof name, "%s", gb_tensorboard_path(tb));
    /* flushed as written: readable before the close */
    Gearbox__Tb__Event *ev[8] = {0};
    CHECK_EQ_INT(read_events(name, ev, 8), 3);
    CHECK_OK(gb_tensorboard_close(tb, &err));
    char host[256] = "";
    gethostname(host, sizeof host);
    CHECK(strstr(name, "/events.out.tfevents.") != NULL);
    CHECK(strlen(name) > strlen(host) && strcmp(name + strlen(name) - strlen(host), host) == 0);
    if (!ev[2])
        return;
    CHECK_EQ_INT(ev[0]->what_case, GEARBOX__TB__EVENT__WHAT_FILE_VERSION);
    CHECK(strcmp(ev[0]->file_version, "brain.Event:2") == 0);
    CHECK(ev[0]->wall_time > 1.7e9);
    CHECK_EQ_INT(ev[1]->step, 123456789012LL);
    CHECK_EQ_INT(ev[1]->summary->n_value, 2);
    CHECK(find_tag(ev[1], "charts/a") && find_tag(ev[1], "charts/a")->simple_value == 3.5f);
    CHECK(find_tag(ev[1], "losses/b") && find_tag(ev[1], "losses/b")->value_case ==
                                             GEARBOX__TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE);
    CHECK(find_tag(ev[1], "charts/nan") == NULL);
    CHECK_EQ_INT(ev[2]->step, 4096);
    CHECK_EQ_INT(ev[2]->summary->n_value, 3); /* env_steps is the step, not a tag */
    CHECK(find_tag(ev[2], "perf/time_s") && find_tag(ev[2], "perf/time_s")->simple_value == 1.25f);
    CHECK(find_tag(ev[2], "charts/return_mean_100") != NULL);
    CHECK(find_tag(ev[2], "losses/q_mean") != NULL);
    for (int i = 0; i < 8; i++)
        if (ev[i])
            gearbox__tb__event__free_unpacked(ev[i], NULL);
    /* a second writer in the same second gets a file of its own */
    gb_tensorboard *t2 = NULL, *t3 = NULL;
    CHECK_OK(gb_tensorboard_open(&t2, dir, &err));
    CHECK_OK(gb_tensorboard_open(&t3, dir, &err));
    CHECK(t2 && t3 && strcmp(gb_tensorboard_path(t2), gb_tensorboard_path(t3)) != 0);
    gb_tensorboard_close(t2, NULL);
    gb_tensorboard_close(t3, NULL);
    CHECK_EQ_INT(gb_tensorboard_open(&t2, "/nonexistent/a/b", &err), GB_ESYS);
}

/* Summary.Image: the bytes TensorBoard's event_pb2 serialises for Event(wall_time=2, step=7,
 * summary=[Value(tag="eval/video", image=Image(height=3, width=5, colorspace=3,
 * encoded_image_string=b"GIF89a"))]); then written to a file and read back. */
static void test_image(void)
{
    uint8_t want[128];
    size_t n = unhex("09000000000000004010072a1e0a1c0a0a6576616c2f766964656f220e08031005180322"
                     "06474946383961", want);
    Gearbox__Tb__SummaryImage im = GEARBOX__TB__SUMMARY_IMAGE__INIT;
    im.height = 3;
    im.width = 5;
    im.colorspace = 3;
    im.encoded_image_string.data = (uint8_t *)"GIF89a";
    im.encoded_image_string.len = 6;
    Gearbox__Tb__SummaryValue v = GEARBOX__TB__SUMMARY_VALUE__INIT, *pv = &v;
    v.tag = "eval/video";
    v.value_case = GEARBOX__TB__SUMMARY_VALUE__VALUE_IMAGE;
    v.image = &im;
    Gearbox__Tb__Summary s = GEARBOX__TB__SUMMARY__INIT;
    s.n_value = 1;
    s.value = &pv;
    Gearbox__Tb__Event ev = GEARBOX__TB__EVENT__INIT;
    ev.wall_time = 2.0;
    ev.step = 7;
    ev.what_case = GEARBOX__TB__EVENT__WHAT_SUMMARY;
    ev.summary = &s;
    uint8_t got[128];
    CHECK_EQ_INT(gearbox__tb__event__get_packed_size(&ev), n);
    gearbox__tb__event__pack(&ev, got);
    CHECK(memcmp(got, want, n) == 0);

    gb_error err = {0};
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tb_image", tmpdir);
    gb_tensorboard *tb = NULL;
    CHECK_OK(gb_tensorboard_open(&tb, dir, &err));
    if (!tb)
        return;
    uint8_t gif[3000]; /* bytes with zeros inside: a binary string, not a C string */
    for (size_t i = 0; i < sizeof gif; i++)
        gif[i] = (uint8_t)(i * 7);
    memcpy(gif, "GIF89a", 6);
    CHECK_OK(gb_tensorboard_image(tb, 40000, "eval/video", 120, 160,
                                  GB_TENSORBOARD_COLORSPACE_RGB, gif, sizeof gif, &err));
    CHECK_EQ_INT(gb_tensorboard_image(tb, 1, "eval/video", 0, 160, 3, gif, sizeof gif, &err),
                 GB_EINVAL);
    CHECK_EQ_INT(gb_tensorboard_image(tb, 1, "eval/video", 120, 160, 3, gif, 0, &err), GB_EINVAL);
    char name[1024];
    snprintf(name, sizeof name, "%s", gb_tensorboard_path(tb));
    Gearbox__Tb__Event *rd[4] = {0};
    CHECK_EQ_INT(read_events(name, rd, 4), 2); /* file_version, the image; no refused one */
    CHECK_OK(gb_tensorboard_close(tb, &err));
    if (rd[1]) {
        CHECK_EQ_INT(rd[1]->step, 40000);
        const Gearbox__Tb__SummaryValue *val = find_tag(rd[1], "eval/video");
        CHECK(val && val->value_case == GEARBOX__TB__SUMMARY_VALUE__VALUE_IMAGE);
        if (val && val->image) {
            CHECK_EQ_INT(val->image->height, 120);
            CHECK_EQ_INT(val->image->width, 160);
            CHECK_EQ_INT(val->image->colorspace, 3);
            CHECK_EQ_INT(val->image->encoded_image_string.len, sizeof gif);
            CHECK(memcmp(val->image->encoded_image_string.data, gif, sizeof gif) == 0);
        }
    }
    for (int i = 0; i < 4; i++)
        if (rd[i])
            gearbox__tb__event__free_unpacked(rd[i], NULL);
}

static void test_groups(void)
{
    CHECK(strcmp(gb_tensorboard_group("return_mean_100"), "charts") == 0);
    CHECK(strcmp(gb_tensorboard_group("approx_kl"), "losses") == 0);
    CHECK(strcmp(gb_tensorboard_group("lr"), "train") == 0);
    CHECK(strcmp(gb_tensorboard_group("env_steps_per_s"), "perf") == 0);
    CHECK(strcmp(gb_tensorboard_group("replay_fill"), "replay") == 0);
    CHECK(strcmp(gb_tensorboard_group("version_lag"), "policy") == 0);
    CHECK(strcmp(gb_tensorboard_group("something_new"), "charts") == 0);
}

/* A resumed run whose metrics.csv an earlier gearbox wrote (fewer columns, the new ones after):
 * widened in place, its last row read, and every row written goes to tb/ as well. */
static void test_rundir_widen_and_mirror(void)
{
    gb_error err = {0};
    gb_rundir rd;
    memset(&rd, 0, sizeof rd);
    snprintf(rd.path, sizeof rd.path, "%s/run", tmpdir);
    char p[1200];
    snprintf(p, sizeof p, "mkdir -p %s", rd.path);
    CHECK(system(p) == 0);
    snprintf(p, sizeof p, "%s/metrics.csv", rd.path);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("time_s,env_steps,segment\n1,100,0\n2,200,\n3,30", f); /* the last row cut short */
    fclose(f);
    static const char *const names[5] = {"time_s", "env_steps", "segment", "approx_kl", "lr"};
    double last[5];
    CHECK_OK(gb_rundir_metrics_continue(&rd, names, 5, last, &err));
    CHECK_NEAR(last[0], 2, 0);
    CHECK_NEAR(last[1], 200, 0);
    CHECK(isnan(last[2]) && isnan(last[3]) && isnan(last[4]));
    double row[5] = {4, 400, 1, 0.01, NAN};
    CHECK_OK(gb_rundir_metrics_row(&rd, row, 5, &err));
    /* an evaluation's results beside the rows, on the same writer */
    static const char *const etags[2] = {"eval/return_mean", "eval/length_mean"};
    double evals[2] = {500, 500};
    CHECK_OK(gb_rundir_tb_scalars(&rd, 350, etags, evals, 2, &err));
    CHECK_OK(gb_rundir_tb_image(&rd, 350, "eval/video", 2, 4, GB_TENSORBOARD_COLORSPACE_RGB,
                                "GIF89a..", 8, &err));
    gb_rundir_close(&rd);
    f = fopen(p, "r");
    char text[512] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    CHECK_MSG(strcmp(text, "time_s,env_steps,segment,approx_kl,lr\n1,100,0,,\n2,200,,,\n"
                           "4,400,1,0.01,\n") == 0, "metrics.csv is:\n%s", text);
    char dir[1100], path[1400];
    snprintf(dir, sizeof dir, "%s/tb", rd.path);
    CHECK_EQ_INT(events_file(dir, path, sizeof path), 1);
    Gearbox__Tb__Event *ev[6] = {0};
    CHECK_EQ_INT(read_events(path, ev, 6), 4);
    if (ev[3]) {
        CHECK_EQ_INT(ev[2]->step, 350);
        CHECK(find_tag(ev[2], "eval/return_mean") &&
              find_tag(ev[2], "eval/return_mean")->simple_value == 500.0f);
        CHECK_EQ_INT(ev[3]->step, 350);
        CHECK(find_tag(ev[3], "eval/video") && find_tag(ev[3], "eval/video")->image &&
              find_tag(ev[3], "eval/video")->image->width == 4);
    }
    if (ev[1]) {
        CHECK_EQ_INT(ev[1]->step, 400);
        CHECK_EQ_INT(ev[1]->summary->n_value, 3);
        CHECK(find_tag(ev[1], "losses/approx_kl") &&
              find_tag(ev[1], "losses/approx_kl")->simple_value == 0.01f);
        CHECK(find_tag(ev[1], "run/segment") != NULL);
        CHECK(find_tag(ev[1], "train/lr") == NULL);
    }
    for (int i = 0; i < 6; i++)
        if (ev[i])
            gearbox__tb__event__free_unpacked(ev[i], NULL);
    /* columns that are not an extension of ours: refused, the file untouched */
    f = fopen(p, "w");
    fputs("time_s,other\n1,2\n", f);
    fclose(f);
    memset(&rd, 0, sizeof rd);
    snprintf(rd.path, sizeof rd.path, "%s/run", tmpdir);
    CHECK_EQ_INT(gb_rundir_metrics_continue(&rd, names, 5, last, &err), GB_EINVAL);
    gb_rundir_close(&rd);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gb_test_tensorboard_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_masked_crc);
    TEST_RUN(test_frame_and_encoding);
    TEST_RUN(test_write_read_back);
    TEST_RUN(test_image);
    TEST_RUN(test_groups);
    TEST_RUN(test_rundir_widen_and_mirror);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_main_result();
}
