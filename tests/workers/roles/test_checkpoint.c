/* tests/workers/roles/test_checkpoint.c: a trainer's checkpoint sets
 * (workers/roles/checkpoint_set.h): the manifest names a model, a replay and a policy file of one
 * step; a set whose replay or policy (or manifest) write fails, as on a full disk, leaves the
 * previous set current and complete, and nothing of its own. The trainer used to write
 * trainer-0.model and then trainer-0.replay in place: a failure between the two left a model
 * and a replay from different steps. */
#include "test.h"
#include "workers/roles/checkpoint_set.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A writer whose files say which step they are from; fails the replay when fail_replay, the
 * policy file when fail_policy. */
typedef struct fake {
    int64_t step;
    int fail_replay, fail_policy;
} fake;

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static int fake_write(void *ctx, const char *model, const char *replay, const char *policy,
                      gb_error *err)
{
    fake *f = ctx;
    char text[64];
    snprintf(text, sizeof text, "model %lld", (long long)f->step);
    if (write_text(model, text))
        return gb_error_set(err, GB_EIO, "write %s", model);
    if (replay && f->fail_replay)
        return gb_error_set(err, GB_EIO, "write %s.tmp: No space left on device", replay);
    snprintf(text, sizeof text, "replay %lld", (long long)f->step);
    if (replay && write_text(replay, text))
        return gb_error_set(err, GB_EIO, "write %s", replay);
    if (policy && f->fail_policy)
        return gb_error_set(err, GB_EIO, "write %s.tmp: No space left on device", policy);
    snprintf(text, sizeof text, "policy %lld", (long long)f->step);
    return policy && write_text(policy, text) ? gb_error_set(err, GB_EIO, "write %s", policy) : 0;
}

static void read_text(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    fclose(f);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* The current set's files hold step `step`. */
static void check_current(const char *dir, int64_t step)
{
    gb_checkpoint_files cf;
    gb_error err = {0};
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    CHECK_EQ_INT(cf.step, step);
    char text[64], want[64];
    read_text(cf.model, text, sizeof text);
    snprintf(want, sizeof want, "model %lld", (long long)step);
    CHECK(strcmp(text, want) == 0);
    read_text(cf.replay, text, sizeof text);
    snprintf(want, sizeof want, "replay %lld", (long long)step);
    CHECK(strcmp(text, want) == 0);
    if (cf.policy[0]) {
        read_text(cf.policy, text, sizeof text);
        snprintf(want, sizeof want, "policy %lld", (long long)step);
        CHECK(strcmp(text, want) == 0);
    }
}

static void test_sets(void)
{
    char dir[] = "/tmp/gb_ckpt_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    gb_error err = {0};
    gb_checkpoint_files cf;
    CHECK(gb_checkpoint_find(dir, "trainer-0", &cf, &err) == GB_ENOTFOUND);

    fake f = {.step = 10};
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 10, GB_CHECKPOINT_REPLAY, fake_write, &f, &err));
    check_current(dir, 10);
    f.step = 20;
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 20, GB_CHECKPOINT_REPLAY, fake_write, &f, &err));
    check_current(dir, 20);
    CHECK_EQ_INT(count_files(dir), 3); /* the manifest and one pair: step 10's are gone */

    /* the disk fills between the model and the replay: step 20 stays current, whole */
    f.step = 30;
    f.fail_replay = 1;
    CHECK(gb_checkpoint_write(dir, "trainer-0", 30, GB_CHECKPOINT_REPLAY, fake_write, &f, &err) ==
          GB_EIO);
    CHECK(strstr(err.msg, "No space left") != NULL);
    check_current(dir, 20);
    CHECK_EQ_INT(count_files(dir), 3);

    /* a second checkpoint at the same step is a new set, not a rewrite of the current one */
    f.step = 20;
    f.fail_replay = 0;
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 20, GB_CHECKPOINT_REPLAY, fake_write, &f, &err));
    check_current(dir, 20);
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    CHECK(strstr(cf.model, "trainer-0.step20-1.model") != NULL);
    CHECK_EQ_INT(count_files(dir), 3);

    /* with a policy file: a set of three; one whose policy file fails leaves nothing; the next
     * set without one removes the last one's */
    const int all = GB_CHECKPOINT_REPLAY | GB_CHECKPOINT_POLICY;
    f.step = 40;
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 40, all, fake_write, &f, &err));
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    CHECK(strstr(cf.policy, "trainer-0.step40-0.policy") != NULL);
    check_current(dir, 40);
    CHECK_EQ_INT(count_files(dir), 4);
    f.step = 50;
    f.fail_policy = 1;
    CHECK(gb_checkpoint_write(dir, "trainer-0", 50, all, fake_write, &f, &err) == GB_EIO);
    check_current(dir, 40);
    CHECK_EQ_INT(count_files(dir), 4);
    f.fail_policy = 0;
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 50, GB_CHECKPOINT_REPLAY, fake_write, &f,
                                 &err));
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    CHECK(cf.policy[0] == '\0');
    check_current(dir, 50);
    CHECK_EQ_INT(count_files(dir), 3);
    f.step = 60;
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 60, all, fake_write, &f, &err));
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    unlink(cf.policy); /* a set whose policy file is gone is no checkpoint */
    CHECK(gb_checkpoint_find(dir, "trainer-0", &cf, &err) == GB_ENOTFOUND);
    CHECK_OK(gb_checkpoint_write(dir, "trainer-0", 60, all, fake_write, &f, &err));
    CHECK_OK(gb_checkpoint_find(dir, "trainer-0", &cf, &err));
    check_current(dir, 60);

    /* a manifest naming a missing file, or garbage, is no checkpoint */
    unlink(cf.replay);
    CHECK(gb_checkpoint_find(dir, "trainer-0", &cf, &err) == GB_ENOTFOUND);
    char manifest[300];
    snprintf(manifest, sizeof manifest, "%s/trainer-0.checkpoint", dir);
    write_text(manifest, "step x\nmodel ../../etc/passwd\n");
    CHECK(gb_checkpoint_find(dir, "trainer-0", &cf, &err) == GB_ECORRUPT);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    TEST_RUN(test_sets);
    return test_main_result();
}
