/* tests/launch/test_as.h: the launch tests' helpers speak into a live run as one of its workers
 * (issue 35: each proves its identity with its own key pair, runtime/streams/curve.h).
 * defines: test_as_attach, test_as_detach
 *
 * GB_TEST_KEYS=DIR (a run's keys folder) and GB_TEST_AS=IDENTITY ("actor/1") in the
 * environment: the helper's ZeroMQ context proves IDENTITY (default: the identity the helper
 * claims, fallback). Without GB_TEST_KEYS the context stays bare (a process with no keys). */
#ifndef GB_TESTS_LAUNCH_TEST_AS_H
#define GB_TESTS_LAUNCH_TEST_AS_H

#include "runtime/streams/curve.h"

#include <stdio.h>
#include <stdlib.h>

/* Attaches ctx as described above; the gb_curve (NULL without GB_TEST_KEYS). Exits 2 when the
 * keys cannot be read. */
static inline gb_curve *test_as_attach(void *ctx, const char *fallback)
{
    const char *keys = getenv("GB_TEST_KEYS"), *as = getenv("GB_TEST_AS");
    if (!keys || !keys[0])
        return NULL;
    gb_curve *c = NULL;
    gb_error err = {0};
    if (gb_curve_identity_attach(&c, ctx, keys, as && as[0] ? as : fallback, &err)) {
        fprintf(stderr, "test helper: keys %s: %s\n", keys, err.msg);
        exit(2);
    }
    return c;
}

/* Detaches what test_as_attach attached (before zmq_ctx_term). */
static inline void test_as_detach(gb_curve *c) { gb_curve_detach(c); }

#endif
