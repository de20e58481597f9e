/* tests/runtime/streams/registry_thread.h: a registry server run on its own thread, as the
 * launcher runs it, for the registry and run-control tests.
 * defines: reg_thread, reg_run */
#ifndef GB_TESTS_REGISTRY_THREAD_H
#define GB_TESTS_REGISTRY_THREAD_H

#include "runtime/streams/registry.h"

#include <stdatomic.h>

typedef struct reg_thread {
    gb_registry_server *s;
    atomic_int stop;
    int rc;
} reg_thread;

static inline void *reg_run(void *arg)
{
    reg_thread *t = arg;
    gb_error err;
    t->rc = gb_registry_server_run(t->s, &t->stop, &err);
    return NULL;
}

#endif
