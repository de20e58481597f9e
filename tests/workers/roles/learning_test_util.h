/* tests/workers/roles/learning_test_util.h: what the learning step's tests compare learners by:
 * a hash of the parameters as the trainer exports them, whichever learner holds them (the one
 * without libtorch, or the bridge's: workers/roles/learning.h, "The learning without libtorch").
 * defines: learning_params_hash */
#ifndef GB_TESTS_WORKERS_ROLES_LEARNING_TEST_UTIL_H
#define GB_TESTS_WORKERS_ROLES_LEARNING_TEST_UTIL_H

#include "workers/roles/learning.h"

#include <stdint.h>
#include <stdlib.h>

/* An FNV-1a hash of L's exported parameters; 0 when they cannot be exported. */
static inline uint64_t learning_params_hash(const gb_learning *L)
{
    const gb_param_entry *table;
    int count;
    uint64_t total, version, h = 1469598103934665603ull;
    gb_learning_param_layout(L, &table, &count, &total);
    uint8_t *buf = malloc(total ? total : 1);
    gb_error err = {0};
    if (!buf || gb_learning_export(L, buf, total, &version, &err) != 0) {
        free(buf);
        return 0;
    }
    for (uint64_t i = 0; i < total; i++)
        h = (h ^ buf[i]) * 1099511628211ull;
    free(buf);
    return h;
}

#endif
