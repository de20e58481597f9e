/* launch/bench/bench_util.c: helpers the benchmarks share: quantiles of timings, reading a run's
 * summary.json, and the streams cases' sockets (endpoints in a temporary folder or on
 * 127.0.0.1). */
#include "launch/bench/bench.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include <math.h>
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

/* Where "key": starts its value in a small flat JSON text, or NULL. */
static const char *json_value(const char *text, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return p;
}

double gb_bench_json_number(const char *text, const char *key)
{
    const char *p = json_value(text, key);
    if (!p)
        return NAN;
    if (strncmp(p, "true", 4) == 0)
        return 1;
    if (strncmp(p, "false", 5) == 0)
        return 0;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

void gb_bench_json_string(const char *text, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = json_value(text, key);
    if (!p || *p != '"')
        return;
    size_t n = strcspn(p + 1, "\"\\");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p + 1, n);
    out[n] = '\0';
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
