/* tests/replay/test_replay_checkpoint_big.c (label slow): a checkpoint larger than 4 GiB
 * round-trips: every item at file offsets past 2^32 comes back intact, with its priority, and
 * the restored replay matches the original's counts. Needs ~4.5 GB of memory and of disk (in
 * $GEARBOX_TEST_TMPDIR, default /tmp); skips (77) when either is short. Holds one replay at a
 * time, so peak memory is one copy. */
#include "replay/replay.h"
#include "runtime/base/clock.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

enum { STEPS = 16, STEP_BYTES = 65536, ITEMS = 4200 }; /* 1 MiB items, 4.4e9 bytes */

static uint64_t word(uint64_t item, uint64_t at)
{
    uint64_t x = item * 0x9E3779B97F4A7C15ULL ^ at * 0xD1B54A32D192ED03ULL;
    return x ^ (x >> 29);
}

static long long mem_available_kb(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static void options(gb_replay_options *o)
{
    gb_replay_options_default(o);
    o->capacity = ITEMS;
    o->steps = STEPS;
    o->selector = GB_SELECTOR_WEIGHTED;
    int64_t sb = STEP_BYTES;
    gb_replay_add_column(o, "frames", GB_DTYPE_UINT8, 1, &sb, 0, NULL);
    gb_replay_add_column(o, "id", GB_DTYPE_UINT64, 0, NULL, 1, NULL);
}

int main(void)
{
    const char *tmp = getenv("GEARBOX_TEST_TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    struct statvfs vfs;
    double need = (double)ITEMS * STEPS * STEP_BYTES * 1.05;
    if (statvfs(tmp, &vfs) != 0 || (double)vfs.f_bavail * (double)vfs.f_frsize < need * 1.5) {
        fprintf(stderr, "skip: less than %.1f GB free in %s\n", need * 1.5e-9, tmp);
        return 77;
    }
    if (mem_available_kb() < 0 || (double)mem_available_kb() * 1024 < need * 1.3) {
        fprintf(stderr, "skip: less than %.1f GB of memory available\n", need * 1.3e-9);
        return 77;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/gearbox-test-big-%d.ckpt", tmp, (int)getpid());
    gb_error err = {0};
    gb_replay_options o;
    options(&o);
    gb_replay *r;
    CHECK_OK(gb_replay_create(&o, &r, &err));
    /* Fill: a word per 4 KiB of every block, derived from (id, offset); the rest stays zero. */
    double t = gb_now_s();
    for (uint64_t k = 0; k < ITEMS; k++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        uint8_t *b = gb_replay_block(r, 0, i);
        for (uint64_t at = 0; at < (uint64_t)STEPS * STEP_BYTES; at += 4096)
            memcpy(b + at, &(uint64_t){word(k, at)}, 8);
        *(uint64_t *)gb_replay_block(r, 1, i) = k;
        double p = 0.5 + (double)(k % 97);
        CHECK_OK(gb_replay_commit(r, 1, &i, &p, NULL, NULL, &err));
    }
    gb_replay_stats before;
    gb_replay_stats_get(r, &before);
    fprintf(stderr, "filled %d items in %.1f s\n", ITEMS, gb_now_s() - t);
    t = gb_now_s();
    CHECK_OK(gb_replay_checkpoint(r, path, &err));
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        fseeko(f, 0, SEEK_END);
        off_t size = ftello(f);
        fclose(f);
        fprintf(stderr, "checkpoint: %.2f GB in %.1f s\n", (double)size * 1e-9, gb_now_s() - t);
        CHECK(size > (off_t)1 << 32);
    }
    gb_replay_free(r); /* one copy in memory at a time */

    CHECK_OK(gb_replay_create(&o, &r, &err));
    t = gb_now_s();
    CHECK_OK(gb_replay_restore(r, path, &err));
    fprintf(stderr, "restore: %.1f s\n", gb_now_s() - t);
    gb_replay_stats after;
    gb_replay_stats_get(r, &after);
    CHECK(after.size == ITEMS && after.inserts == before.inserts &&
          after.max_priority == before.max_priority);
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    int64_t bad = 0;
    for (int64_t i = 0; i < ITEMS; i++) {
        uint64_t k = *(uint64_t *)gb_replay_block(r, 1, i);
        const uint8_t *b = gb_replay_block(r, 0, i);
        if (st.state[i] != GB_ITEM_COMMITTED || st.priority[i] != 0.5 + (double)(k % 97)) {
            bad++;
            continue;
        }
        for (uint64_t at = 0; at < (uint64_t)STEPS * STEP_BYTES; at += 4096) {
            uint64_t w;
            memcpy(&w, b + at, 8);
            if (w != word(k, at) || b[at + 8] != 0) {
                bad++;
                break;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    gb_replay_free(r);
    unlink(path);
    return test_main_result();
}
