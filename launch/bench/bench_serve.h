/* launch/bench/bench_serve.h: what `gearbox bench serve`'s driver (bench_serve.c) shares with its
 * Python cases (bench_serve_python.c): the options, and the cases that run a Python client.
 * defines: gb_bench_serve_opts, gb_bench_serve_python, gb_bench_serve_torch,
 *          gb_bench_serve_shards */
#ifndef GB_LAUNCH_BENCH_SERVE_H
#define GB_LAUNCH_BENCH_SERVE_H

#include <stdint.h>

typedef struct gb_bench_serve_opts {
    int json, python;
    double seconds;
    int64_t item_bytes, batch;
    int clients[8], nclients;
    int64_t memory_items; /* 1-step items of the memory case */
} gb_bench_serve_opts;

/* The Python clients against the server at ep, each a python3 child process (GEARBOX_PYTHON,
 * else the system's python3) running a script of workers/server/client/python for o->seconds; they
 * block until it exits. gb_bench_serve_python: one plain client's item bytes/s and items/s;
 * returns 0, or -1 when python3 with pyzmq, msgpack and numpy could not run it. The torch and
 * shards cases print their figures, or a line saying why they were not measured. */
int gb_bench_serve_python(const gb_bench_serve_opts *o, const char *ep, double *bps, double *ips);
void gb_bench_serve_torch(const gb_bench_serve_opts *o, const char *ep);
void gb_bench_serve_shards(const gb_bench_serve_opts *o, const char *ep1, const char *ep2);

#endif
