/* tests/workers/roles/test_acting_lives.c: the actor's chunks under episodic life (Atari
 * Breakout, env.wrappers.episodic_life with frame_stack 4). A lost life ends the training
 * episode and the ring resets the copy there, though its statistics count whole games: every
 * terminated row must be followed by a reset row (valid 0) holding the final observation, and the
 * frame stacks stored a frame a row must pass the builder's check (the wrapper's reset after a
 * lost life fills the stack: without the reset row that is a stack the rule cannot rebuild, and
 * gb_acting_step fails with GB_ECORRUPT). Random actions, 2 copies, 3000 steps each.
 * Exits 77 (skip) where the ALE cannot be opened. */
#include "runtime/config/config.h"
#include "test.h"
#include "tests/workers/config_text.h"
#include "workers/roles/acting.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gb_config cfg;

static int load(const char *text)
{
    return config_text(&cfg, text);
}

static int games;

static void on_game(void *ctx, double ret, int64_t len)
{
    (void)ctx, (void)ret, (void)len;
    games++;
}

int main(void)
{
    CHECK(load("experiment: {name: t}\n"
               "env: {name: atari, args: {game: breakout},\n"
               "      wrappers: {frame_skip: 4, screen_size: 84, frame_stack: 4, noop_max: 30,\n"
               "                 episodic_life: true, clip_reward: true}}\n"
               "actors: {chunk_len: 16}\n"
               "trainer: {algorithm: {name: ppo}}\n") == 0);
    gb_error err = {0};
    gb_acting *a = NULL;
    gb_acting_opts o = {.cfg = &cfg, .copies = 2, .splits = 1, .seed = 3, .on_episode = on_game};
    if (gb_acting_create(&o, &a, &err)) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    const gb_chunk_layout *l = gb_acting_layout(a);
    CHECK_EQ_INT(l->frame_stack, 4);
    int64_t actions[2], lost = 0, reset_rows = 0, chunks = 0;
    float logp[2] = {0, 0};
    uint64_t x = 9;
    int carry_term[2] = {0, 0}; /* a stream's last chunk ended on a terminated row */
    for (int t = 0; t < 3000; t++) {
        for (int s = 0; s < 2; s++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            actions[s] = (int64_t)((x >> 33) % 4);
        }
        int rc = gb_acting_step(a, 0, actions, sizeof actions, logp, sizeof logp, 0, &err);
        CHECK_MSG(rc == 0, "step %d: %d %s", t, rc, err.msg);
        if (rc)
            break;
        gb_chunk c;
        while (gb_acting_take(a, &c)) {
            const uint8_t *term = gb_chunk_column(l, c.block, GB_CHUNK_TERMINATED);
            const uint8_t *valid = gb_chunk_column(l, c.block, GB_CHUNK_VALID);
            if (carry_term[c.stream])
                CHECK_EQ_INT(valid[0], 0);
            for (int64_t r = 0; r < l->T; r++) {
                lost += term[r];
                reset_rows += !valid[r];
                if (term[r] && r + 1 < l->T)
                    CHECK_MSG(!valid[r + 1], "chunk %lld row %lld: terminated, then a valid row",
                              (long long)chunks, (long long)r);
            }
            carry_term[c.stream] = term[l->T - 1];
            chunks++;
            gb_chunk_release(c.block);
        }
    }
    printf("%lld chunks, %lld terminated rows (lives), %lld reset rows, %d games\n",
           (long long)chunks, (long long)lost, (long long)reset_rows, games);
    CHECK(lost > 2 * games && lost >= 5);
    CHECK(reset_rows >= lost);
    gb_acting_destroy(a);
    return test_main_result();
}
