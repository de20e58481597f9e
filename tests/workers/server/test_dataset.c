/* tests/workers/server/test_dataset.c: gearbox dataset files: write/read round trip, torn tail
 * after a killed writer, corrupted records and headers, directory listing, and a gearbox dataset
 * served by gb_server_load_dataset (dataset_last_items). Usage: test_dataset TMPDIR */
#include "test.h"

#include "replay/formats/dataset.h"
#include "workers/server/server.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

static void schema(gb_dataset_schema *s)
{
    memset(s, 0, sizeof *s);
    s->steps = 4;
    s->ncolumns = 3;
    snprintf(s->columns[0].name, 32, "obs");
    s->columns[0].dtype = GB_DTYPE_FLOAT32;
    s->columns[0].ndim = 1;
    s->columns[0].shape[0] = 2;
    snprintf(s->columns[1].name, 32, "action");
    s->columns[1].dtype = GB_DTYPE_INT64;
    snprintf(s->columns[2].name, 32, "next_obs");
    s->columns[2].dtype = GB_DTYPE_FLOAT32;
    s->columns[2].ndim = 1;
    s->columns[2].shape[0] = 2;
    s->columns[2].per_item = 1;
}

static void item(int64_t i, float obs[8], int64_t act[4], float next[2])
{
    for (int k = 0; k < 8; k++)
        obs[k] = (float)(i * 100 + k);
    for (int k = 0; k < 4; k++)
        act[k] = i * 7 + k;
    next[0] = (float)-i;
    next[1] = (float)i / 3;
}

static int write_file(const char *path, int64_t n, int64_t first)
{
    gb_error err = {0};
    gb_dataset_schema s;
    schema(&s);
    gb_dataset_writer *w = NULL;
    if (gb_dataset_writer_open(&w, path, &s, &err))
        return -1;
    for (int64_t i = first; i < first + n; i++) {
        float obs[8], next[2];
        int64_t act[4];
        item(i, obs, act, next);
        const void *cols[3] = {obs, act, next};
        if (gb_dataset_writer_append(w, cols, i / 10, (int32_t)(i % 5), &err))
            return -1;
    }
    return gb_dataset_writer_close(w, &err);
}

static void test_round_trip(void)
{
    gb_error err = {0};
    char path[700];
    snprintf(path, sizeof path, "%s/a.gbds", dir);
    CHECK_EQ_INT(write_file(path, 50, 0), 0);
    gb_dataset_reader *r = NULL;
    CHECK_OK(gb_dataset_reader_open(&r, path, &err));
    if (!r)
        return;
    gb_dataset_schema s;
    schema(&s);
    const gb_dataset_schema *rs = gb_dataset_reader_schema(r);
    CHECK(rs->steps == 4 && rs->ncolumns == 3 && rs->columns[2].per_item == 1);
    CHECK(strcmp(rs->columns[1].name, "action") == 0);
    CHECK_EQ_INT(gb_dataset_reader_count(r), 50);
    int bad = 0;
    for (int64_t i = 0; i < 50; i++) {
        float obs[8], next[2], eo[8], en[2];
        int64_t act[4], ea[4], v;
        int32_t len;
        void *dst[3] = {obs, act, next};
        CHECK_OK(gb_dataset_reader_read(r, i, dst, &v, &len, &err));
        item(i, eo, ea, en);
        bad += memcmp(obs, eo, sizeof obs) != 0 || memcmp(act, ea, sizeof act) != 0 ||
               memcmp(next, en, sizeof next) != 0 || v != i / 10 || len != i % 5;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(gb_dataset_reader_read(r, 50, NULL, NULL, NULL, &err) == GB_EINVAL);
    gb_dataset_reader_close(r);

    /* torn tail: cut the file mid-record; the complete records are still read */
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 10) == 0);
    CHECK_OK(gb_dataset_reader_open(&r, path, &err));
    if (r) {
        CHECK_EQ_INT(gb_dataset_reader_count(r), 49);
        gb_dataset_reader_close(r);
    }
    /* a flipped byte in record 3 is found by its CRC */
    FILE *f = fopen(path, "r+b");
    long rec = (long)(st.st_size - 50 * (24 + 8 * 4 + 4 * 8 + 8)) + 3 * (24 + 32 + 32 + 8) + 30;
    fseek(f, rec, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    CHECK_OK(gb_dataset_reader_open(&r, path, &err));
    if (r) {
        CHECK(gb_dataset_reader_read(r, 3, NULL, NULL, NULL, &err) == GB_ECORRUPT);
        CHECK(strstr(err.msg, "record 3") != NULL);
        CHECK_OK(gb_dataset_reader_read(r, 4, NULL, NULL, NULL, &err));
        gb_dataset_reader_close(r);
    }
    /* a damaged header */
    f = fopen(path, "r+b");
    fseek(f, 40, SEEK_SET);
    fputc('Z', f);
    fclose(f);
    CHECK(gb_dataset_reader_open(&r, path, &err) == GB_ECORRUPT);
    CHECK(strstr(err.msg, "CRC") != NULL);
    char other[700];
    snprintf(other, sizeof other, "%s/junk.gbds", dir);
    f = fopen(other, "wb");
    fputs("not a dataset at all, but long enough for a header..........", f);
    fclose(f);
    CHECK(gb_dataset_reader_open(&r, other, &err) == GB_ECORRUPT);
    CHECK(gb_dataset_reader_open(&r, "/nonexistent.gbds", &err) == GB_ENOTFOUND);
    unlink(other);
    unlink(path);
}

static void test_served(void)
{
    gb_error err = {0};
    char sub[700], path[800];
    snprintf(sub, sizeof sub, "%s/ds", dir);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/trainer-0.gbds", sub);
    CHECK_EQ_INT(write_file(path, 30, 0), 0);
    snprintf(path, sizeof path, "%s/trainer-1.gbds", sub);
    CHECK_EQ_INT(write_file(path, 30, 1000), 0);
    char **paths;
    int n;
    CHECK_OK(gb_dataset_list(sub, &paths, &n, &err));
    CHECK_EQ_INT(n, 2);
    if (n == 2)
        CHECK(strstr(paths[0], "trainer-0") && strstr(paths[1], "trainer-1"));
    free(paths);

    static gb_config cfg;
    char text[2048];
    snprintf(text, sizeof text,
             "experiment: {name: t}\nenv: {name: CartPole-v1}\ntrainer: {algorithm: {name: ppo}}\n"
             "server: {dataset: %s, dataset_last_items: 20, replay: {selector: fifo}}\n", sub);
    gb_config_marks *marks = NULL;
    CHECK_OK(gb_config_load_string(&cfg, &marks, "t.yaml", text, strlen(text), &err));
    CHECK_OK(gb_config_finish(&cfg, marks, &err));
    gb_config_marks_free(marks);
    gb_replay *r = NULL;
    int64_t loaded = 0;
    CHECK_OK(gb_server_load_dataset(&cfg, &r, &loaded, &err));
    CHECK_EQ_INT(loaded, 20);
    if (r) {
        /* the newest 10 of each file, oldest first */
        gb_replay_selection sel;
        CHECK_OK(gb_replay_selection_init(&sel, 20, &err));
        gb_replay_request req = gb_replay_request_default(20);
        CHECK_OK(gb_replay_sample(r, &req, &sel, &err));
        CHECK_EQ_INT(sel.n, 20);
        float next[20 * 2];
        int32_t lens[20];
        gb_replay_dst dst = {.column = 2, .data = next, .bytes = sizeof next};
        CHECK_OK(gb_replay_collect(r, &sel, &dst, 1, lens, &err));
        for (int i = 0; i < 20; i++) {
            int64_t id = i < 10 ? 20 + i : 1000 + 20 + (i - 10);
            CHECK(next[2 * i] == (float)-id);
            CHECK_EQ_INT(lens[i], id % 5 == 0 ? 0 : id % 5);
        }
        gb_replay_release(r, &sel);
        gb_replay_selection_free(&sel);
        gb_replay_free(r);
    }
    /* a bad path is a clear error */
    snprintf(cfg.server.dataset, sizeof cfg.server.dataset, "%s/missing", dir);
    CHECK(gb_server_load_dataset(&cfg, &r, &loaded, &err) == GB_ENOTFOUND);
}

int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "/tmp");
    TEST_RUN(test_round_trip);
    TEST_RUN(test_served);
    return test_main_result();
}
