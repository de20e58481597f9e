/* launch/bench/bench_util.c: helpers the benchmarks share: quantiles of timings, files and folders,
 * tcp://HOST:PORT options, and the streams cases' sockets (endpoints in a temporary folder or on
 * 127.0.0.1). */
#include "launch/bench/bench.h"
#include "launch/cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

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

char *gb_bench_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

typedef struct bench_take {
    char **argv;
    int positional;
    gb_bench_option_fn fn;
    void *ctx;
    void (*usage)(FILE *out);
} bench_take;

static int take_bench_option(void *ctx, int c, const char *arg)
{
    bench_take *t = ctx;
    if (c == GB_CLI_UNKNOWN || c == GB_CLI_NO_VALUE || (c == GB_CLI_POSITIONAL && !t->positional)) {
        fprintf(stderr, "gearbox bench %s: %s '%s'\n", t->argv[0],
                c == GB_CLI_NO_VALUE ? "a value is needed after" : "unknown option", arg);
        t->usage(stderr);
        return -1;
    }
    return c == 0 ? 0 : t->fn(t->ctx, c, arg); /* 0: --json, which cmd_bench.c reads */
}

int gb_bench_options(int argc, char **argv, const struct option *longs, int positional,
                     gb_bench_option_fn fn, void *ctx, void (*usage)(FILE *out))
{
    bench_take t = {argv, positional, fn, ctx, usage};
    return gb_cli_getopt(argc, argv, "", longs, take_bench_option, &t) ? -1 : 0;
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

int gb_bench_net_raw_pair(gb_bench_net *b, int bind_type, int connect_type, const char *what,
                          int hwm, void **bound, void **connected, gb_error *err)
{
    *bound = zmq_socket(b->ctx, bind_type);
    *connected = zmq_socket(b->ctx, connect_type);
    if (!*bound || !*connected)
        return gb_error_set(err, GB_EZMQ, "raw %s: %s", what, zmq_strerror(zmq_errno()));
    int linger = 0;
    for (int i = 0; i < 2; i++) {
        void *s = i ? *connected : *bound;
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        if (hwm > 0) {
            zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
            zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
        }
    }
    char ep[256];
    gb_bench_net_endpoint(b, ep, sizeof ep, what);
    if (zmq_bind(*bound, ep) != 0)
        return gb_error_set(err, GB_EZMQ, "raw %s: bind %s: %s", what, ep,
                            zmq_strerror(zmq_errno()));
    gb_bench_net_bound(*bound, ep, sizeof ep);
    if (zmq_connect(*connected, ep) != 0)
        return gb_error_set(err, GB_EZMQ, "raw %s: connect %s: %s", what, ep,
                            zmq_strerror(zmq_errno()));
    return 0;
}

void gb_bench_configs_dir(const char *probe, char *out, size_t cap)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "configs/%s", probe);
    int here = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    snprintf(out, cap, "%s", here || !GEARBOX_CONFIGS_DIR[0] ? "configs" : GEARBOX_CONFIGS_DIR);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int gb_bench_remove_tree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *gb_bench_blas(void)
{
    static char name[64];
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    char *(*corename)(void) = h ? (char *(*)(void))(uintptr_t)dlsym(h, "openblas_get_corename")
                                : NULL;
    snprintf(name, sizeof name, "%s%.40s", corename ? "OpenBLAS " : "not OpenBLAS",
             corename ? corename() : "");
    if (h)
        dlclose(h);
    return name;
}
