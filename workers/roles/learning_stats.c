/* workers/roles/learning_stats.c: the chunks' rows into the learner's running statistics of
 * observations and returns (see gb_learning_observe in learning.h). */
#include "workers/roles/learning.h"

#include "runtime/base/log.h"

#include <string.h>

enum { MAX_ROWS = 4096 }; /* the longest chunk whose returns are replayed on the stack */

void gb_learning_observe(const gb_config *cfg, const gb_chunk_layout *l,
                         gb_torch_learner *learner, const void *const cols[GB_CHUNK_NCOLS])
{
    const int obs = cfg->policy.model.normalize_obs, ret = l->return_carry;
    if (!obs && !ret)
        return;
    const int64_t k = l->overlap, T = l->T, D = (int64_t)l->bytes[GB_CHUNK_NEXT_OBS] / 4;
    const uint8_t *valid = cols[GB_CHUNK_VALID];
    float returns[MAX_ROWS];
    if (ret && T <= MAX_ROWS) { /* R after each valid row's reward, 0 after an episode's end */
        const float *reward = cols[GB_CHUNK_REWARD];
        const uint8_t *term = cols[GB_CHUNK_TERMINATED], *trunc = cols[GB_CHUNK_TRUNCATED];
        double R = ((const float *)cols[GB_CHUNK_STATE])[l->state_size - 1];
        for (int64_t t = 0; t < T; t++) {
            if (!valid[t]) { /* a reset row (or padding): the next row starts an episode */
                R = 0.0;
                returns[t] = 0.0f;
                continue;
            }
            R = l->gamma * R + (double)reward[t];
            returns[t] = (float)R;
            if (term[t] || trunc[t])
                R = 0.0;
        }
    }
    gb_error e = {0};
    if (gb_torch_learner_observe(learner, obs ? (const float *)cols[GB_CHUNK_OBS] + k * D : NULL,
                                 ret && T <= MAX_ROWS ? returns + k : NULL, T - k, valid + k,
                                 &e))
        GB_WARN("learning: the running statistics: %s", e.msg);
}
