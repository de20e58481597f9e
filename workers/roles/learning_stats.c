/* workers/roles/learning_stats.c: the chunks' rows into the learner's running statistics of
 * observations and returns (see gb_learning_observe in learning.h). */
#include "workers/roles/learning.h"

#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

enum { SEG_ROWS = 4096 }; /* rows whose returns are replayed on the stack at a time */

void gb_learning_observe(const gb_config *cfg, const gb_chunk_layout *l,
                         gb_torch_learner *learner, const void *const cols[GB_CHUNK_NCOLS])
{
    const int obs = cfg->policy.model.normalize_obs, ret = l->return_carry;
    if (!obs && !ret)
        return;
    const int64_t k = l->overlap, T = l->T, D = (int64_t)l->bytes[GB_CHUNK_NEXT_OBS] / 4;
    const uint8_t *valid = cols[GB_CHUNK_VALID];
    const float *reward = cols[GB_CHUNK_REWARD];
    const uint8_t *term = cols[GB_CHUNK_TERMINATED], *trunc = cols[GB_CHUNK_TRUNCATED];
    double R = ret ? ((const float *)cols[GB_CHUNK_STATE])[l->state_size - 1] : 0.0;
    const float *rows = obs ? cols[GB_CHUNK_OBS] : NULL;
    float *whole = NULL; /* a frame stack's rows' whole observations (chunk.h "Frame stacks") */
    if (obs && l->frame_stack > 1) {
        if (!(whole = malloc((size_t)T * l->bytes[GB_CHUNK_NEXT_OBS]))) {
            GB_WARN("learning: the running statistics: out of memory");
            return;
        }
        gb_chunk_stack_expand(l, 1, cols[GB_CHUNK_OBS], cols[l->past_col], valid, whole);
        rows = whole;
    }
    float returns[SEG_ROWS];
    /* segment by segment, R carried over: a chunk of any length */
    for (int64_t s = 0; s < T; s += SEG_ROWS) {
        const int64_t e = s + SEG_ROWS < T ? s + SEG_ROWS : T, from = s > k ? s : k;
        for (int64_t t = s; ret && t < e; t++) { /* R after each valid row's reward */
            if (!valid[t]) { /* a reset row (or padding): the next row starts an episode */
                R = 0.0;
                returns[t - s] = 0.0f;
                continue;
            }
            R = l->gamma * R + (double)reward[t];
            returns[t - s] = (float)R;
            if (term[t] || trunc[t])
                R = 0.0;
        }
        if (from >= e) /* the overlap's rows: observed in the chunk before */
            continue;
        gb_error err = {0};
        if (gb_torch_learner_observe(learner,
                                     rows ? rows + from * D : NULL,
                                     ret ? returns + (from - s) : NULL, e - from, valid + from,
                                     &err)) {
            GB_WARN("learning: the running statistics: %s", err.msg);
            break;
        }
    }
    free(whole);
}
