/* launch/bench_util.c: helpers the benchmarks share: quantiles of timings, and the streams
 * cases' sockets (endpoints in a temporary folder or on 127.0.0.1). */
#include "launch/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double gb_bench_quantile(double *t, int n, double q)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[(int)(q * (n - 1) + 0.5)];
}

int gb_bench_net_want(const gb_bench_net *b, const char *name)
{
    return !b->only || strcmp(b->only, name) == 0;
}

void gb_bench_net_figure(gb_bench_net *b, double v)
{
    if (b->nfigures < (int)(sizeof b->figures / sizeof b->figures[0]))
        b->figures[b->nfigures++] = v;
}

void gb_bench_net_endpoint(gb_bench_net *b, char *out, size_t cap, const char *what)
{
    if (b->tcp)
        snprintf(out, cap, "tcp://127.0.0.1:*");
    else
        snprintf(out, cap, "ipc://%s/%s-%d", b->dir, what, b->seq++);
}

void gb_bench_net_bound(void *sock, char *out, size_t cap)
{
    size_t len = cap;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, out, &len);
}
