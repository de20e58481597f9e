/* tests/runtime/streams/params_test.h: shared by the parameter stream tests: the byte pattern of a
 * version (streamable, position-dependent), a layout, and the service process.
 * defines: pt_byte, pt_fill, pt_check, pt_layout, pt_service_main, pt_service_arg */
#ifndef GB_TESTS_PARAMS_TEST_H
#define GB_TESTS_PARAMS_TEST_H

#include "runtime/streams/params.h"
#include "runtime/streams/wire.h"
#include "streams_test.h"

#include <signal.h>
#include <string.h>

static inline uint8_t pt_byte(uint64_t i, int64_t version)
{
    uint64_t x = (i >> 3) ^ (i * 131u) ^ ((uint64_t)version * 0x9e3779b97f4a7c15ULL >> 56);
    return (uint8_t)(x ^ (x >> 11));
}

static inline void pt_fill(uint8_t *p, uint64_t off, size_t n, int64_t version)
{
    for (size_t k = 0; k < n; k++)
        p[k] = pt_byte(off + k, version);
}

/* Index of the first wrong byte, or -1. */
static inline int64_t pt_check(const uint8_t *p, uint64_t off, size_t n, int64_t version)
{
    for (size_t k = 0; k < n; k++)
        if (p[k] != pt_byte(off + k, version))
            return (int64_t)(off + k);
    return -1;
}

/* Two float32 tensors at the front, the rest one uint8 tensor. */
static inline int pt_layout(gb_param_entry *e, uint64_t total)
{
    memset(e, 0, 3 * sizeof *e);
    snprintf(e[0].name, sizeof e[0].name, "encoder.layers.0.weight");
    e[0].dtype = GB_DTYPE_FLOAT32;
    e[0].rank = 2;
    e[0].shape[0] = 64;
    e[0].shape[1] = 32;
    e[0].offset = 0;
    snprintf(e[1].name, sizeof e[1].name, "encoder.layers.0.bias");
    e[1].dtype = GB_DTYPE_FLOAT32;
    e[1].rank = 1;
    e[1].shape[0] = 64;
    e[1].offset = 64 * 32 * 4;
    snprintf(e[2].name, sizeof e[2].name, "rest");
    e[2].dtype = GB_DTYPE_UINT8;
    e[2].rank = 1;
    e[2].offset = e[1].offset + 64 * 4;
    e[2].shape[0] = (int64_t)(total - e[2].offset);
    return 3;
}

static volatile sig_atomic_t pt_stop;
static inline void pt_on_term(int sig)
{
    (void)sig;
    pt_stop = 1;
}

typedef struct pt_service_arg {
    const char *dir;
    int pub_hwm;
} pt_service_arg;

/* A parameter service process: endpoints written to <dir>/service ("in pub fetch"), stats to
 * <dir>/service-stats at SIGTERM ("versions abandoned rejected fetches"). */
static inline int pt_service_main(void *arg)
{
    pt_service_arg *a = arg;
    signal(SIGTERM, pt_on_term);
    gb_error err;
    void *ctx = zmq_ctx_new();
    char in[256], pub[256], fetch[256], path[512], buf[1024];
    snprintf(in, sizeof in, "ipc://%s/params-in", a->dir);
    snprintf(pub, sizeof pub, "ipc://%s/params-pub", a->dir);
    snprintf(fetch, sizeof fetch, "ipc://%s/params-fetch", a->dir);
    gb_param_service_opts o = {in, pub, fetch, a->pub_hwm, GB_ROLE_PARAMS, 0, 0, 0};
    gb_param_service *s;
    if (gb_param_service_open(&s, ctx, &o, &err)) {
        fprintf(stderr, "service: %s\n", err.msg);
        return 3;
    }
    snprintf(path, sizeof path, "%s/service", a->dir);
    snprintf(buf, sizeof buf, "%s %s %s", gb_param_service_endpoint(s, "in"),
             gb_param_service_endpoint(s, "pub"), gb_param_service_endpoint(s, "fetch"));
    st_write_file(path, buf);
    while (!pt_stop) {
        int rc = gb_param_service_poll(s, 50, &err);
        if (rc < 0 && rc != GB_EINTR) {
            fprintf(stderr, "service: %s\n", err.msg);
            if (rc != GB_ENOMEM)
                return 4;
        }
    }
    gb_param_service_stats st = gb_param_service_get_stats(s);
    snprintf(path, sizeof path, "%s/service-stats", a->dir);
    snprintf(buf, sizeof buf, "%llu %llu %llu %llu", (unsigned long long)st.versions,
             (unsigned long long)st.abandoned, (unsigned long long)st.rejected,
             (unsigned long long)st.fetches);
    st_write_file(path, buf);
    gb_param_service_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

#endif
