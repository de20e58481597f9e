/* tests/workers/torch/test_group.c: the trainers' process group (workers/torch/group.h) across
 * forked processes: allreduce (sum, min, max on float32, float64, int64, int32, uint8),
 * allgather, broadcast from a non-zero root, all-to-all with uneven and zero sizes (every byte
 * checked), barrier, on a FileStore and on a TCPStore (also on any free port that rank 0
 * publishes), with opts.abandon set (its own paths), the all-to-all traffic count, bad
 * options. Failures: test_group_failures.c. The parent never calls libtorch: every rank is a
 * child forked from a clean process. */
#include "workers/torch/group_ranks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MAX_RANKS = 4 };

/* A TCP port that was free a moment ago (bound to port 0, read back, released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* ---- collectives ------------------------------------------------------------------------- */

static void check_allreduce(gb_group *g, int rank, int size)
{
    gb_error err = {0};
    int rsum = size * (size - 1) / 2;
    /* float32: x[i] = 10 rank + i */
    float f[3][5];
    for (int op = 0; op < 3; op++)
        for (int i = 0; i < 5; i++)
            f[op][i] = (float)(10 * rank + i);
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT32, f[0], 5, GB_GROUP_SUM, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT32, f[1], 5, GB_GROUP_MIN, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT32, f[2], 5, GB_GROUP_MAX, &err));
    for (int i = 0; i < 5; i++) {
        CHECK_NEAR(f[0][i], 10 * rsum + size * i, 0);
        CHECK_NEAR(f[1][i], i, 0);
        CHECK_NEAR(f[2][i], 10 * (size - 1) + i, 0);
    }
    /* float64: x[i] = (rank + 1) * 0.25 - i */
    double d[3][4];
    for (int op = 0; op < 3; op++)
        for (int i = 0; i < 4; i++)
            d[op][i] = (rank + 1) * 0.25 - i;
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT64, d[0], 4, GB_GROUP_SUM, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT64, d[1], 4, GB_GROUP_MIN, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT64, d[2], 4, GB_GROUP_MAX, &err));
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(d[0][i], (rsum + size) * 0.25 - size * i, 0);
        CHECK_NEAR(d[1][i], 0.25 - i, 0);
        CHECK_NEAR(d[2][i], size * 0.25 - i, 0);
    }
    /* int64 beyond 32 bits: x[i] = (rank << 40) - i */
    int64_t q[3][3];
    for (int op = 0; op < 3; op++)
        for (int i = 0; i < 3; i++)
            q[op][i] = ((int64_t)rank << 40) - i;
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_INT64, q[0], 3, GB_GROUP_SUM, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_INT64, q[1], 3, GB_GROUP_MIN, &err));
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_INT64, q[2], 3, GB_GROUP_MAX, &err));
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(q[0][i], ((int64_t)rsum << 40) - (int64_t)size * i);
        CHECK_EQ_INT(q[1][i], -i);
        CHECK_EQ_INT(q[2][i], ((int64_t)(size - 1) << 40) - i);
    }
    int32_t n32[2] = {rank - 5, 7 * rank};
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_INT32, n32, 2, GB_GROUP_SUM, &err));
    CHECK_EQ_INT(n32[0], rsum - 5 * size);
    CHECK_EQ_INT(n32[1], 7 * rsum);
    uint8_t u8[2] = {(uint8_t)(200 + rank), (uint8_t)rank};
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_UINT8, u8, 2, GB_GROUP_MAX, &err));
    CHECK_EQ_INT(u8[0], 200 + size - 1);
    CHECK_EQ_INT(u8[1], size - 1);
    /* Small buffers go through one all-to-all, large ones through Gloo's ring (group.cpp's
     * kSmallAllreduceBytes, 256 KiB over the group): both paths, every op, a float64 sum whose
     * result depends on the order of the additions (1e16 + 1 - 1e16) the same on every rank. */
    enum { LARGE = 40000 }; /* 320 KB of float64 a rank */
    for (int large = 0; large < 2; large++) {
        int64_t n = large ? LARGE : 3;
        double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        float *z = malloc((size_t)n * sizeof *z);
        if (!x || !y || !z) {
            CHECK_MSG(0, "out of memory");
            return;
        }
        for (int64_t i = 0; i < n; i++) {
            x[i] = (double)(rank * 1000 + i % 997);
            y[i] = rank == 0 ? 1e16 : rank == 1 ? 1.0 : rank == 2 ? -1e16 : 0.5;
            z[i] = (float)((rank + i) % 13);
        }
        CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT64, x, n, GB_GROUP_SUM, &err));
        CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT64, y, n, GB_GROUP_SUM, &err));
        CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT32, z, n, GB_GROUP_MAX, &err));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float zmax = 0;
            for (int r = 0; r < size; r++)
                zmax = fmaxf(zmax, (float)((r + i) % 13));
            bad += x[i] != (double)(1000 * rsum + size * (i % 997)) || z[i] != zmax;
        }
        CHECK_EQ_INT(bad, 0);
        /* every rank ends with the same bytes, whatever order the sum took */
        double all[8];
        CHECK_OK(gb_group_allgather(g, &y[n - 1], sizeof y[n - 1], all, &err));
        for (int r = 1; r < size && r < 8; r++)
            CHECK(memcmp(&all[r], &all[0], sizeof all[0]) == 0);
        free(x);
        free(y);
        free(z);
    }
    /* zero values: nothing to do, on every rank */
    CHECK_OK(gb_group_allreduce(g, GB_DTYPE_FLOAT32, NULL, 0, GB_GROUP_SUM, &err));
    CHECK(gb_group_allreduce(g, GB_DTYPE_BOOL, u8, 2, GB_GROUP_SUM, &err) == GB_EINVAL);
}

static void check_allgather_broadcast(gb_group *g, int rank, int size)
{
    gb_error err = {0};
    enum { N = 7 };
    uint8_t in[N], out[MAX_RANKS * N];
    for (int j = 0; j < N; j++)
        in[j] = (uint8_t)(rank * 16 + j);
    memset(out, 0xee, sizeof out);
    CHECK_OK(gb_group_allgather(g, in, N, out, &err));
    int right = 1;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < N; j++)
            right &= out[r * N + j] == (uint8_t)(r * 16 + j);
    CHECK(right);

    const int root = size - 1;
    double buf[9];
    for (int j = 0; j < 9; j++)
        buf[j] = rank == root ? 1.5 * j - 3 : -1.0;
    CHECK_OK(gb_group_broadcast(g, buf, sizeof buf, root, &err));
    right = 1;
    for (int j = 0; j < 9; j++)
        right &= buf[j] == 1.5 * j - 3;
    CHECK(right);
    CHECK(gb_group_broadcast(g, buf, sizeof buf, size, &err) == GB_EINVAL);
}

/* Bytes rank s sends rank d: (s + 2 d) % 4 * 5, so some parts (self included) are empty. */
static size_t part_bytes(int s, int d) { return (size_t)((s + 2 * d) % 4 * 5); }
static uint8_t part_byte(int s, int d, size_t k) { return (uint8_t)(s * 31 + d * 7 + k * 3 + 1); }

static void check_alltoall(gb_group *g, int rank, int size)
{
    gb_error err = {0};
    size_t send[MAX_RANKS], recv[MAX_RANKS], st = 0, rt = 0;
    for (int r = 0; r < size; r++) {
        send[r] = part_bytes(rank, r);
        recv[r] = part_bytes(r, rank);
        st += send[r];
        rt += recv[r];
    }
    uint8_t *in = malloc(st + 1), *out = malloc(rt + 1);
    size_t at = 0;
    for (int d = 0; d < size; d++)
        for (size_t k = 0; k < send[d]; k++)
            in[at++] = part_byte(rank, d, k);
    memset(out, 0xee, rt + 1);
    int64_t sent0, received0, sent1, received1;
    gb_group_traffic(g, &sent0, &received0);
    CHECK_OK(gb_group_alltoall(g, in, send, out, recv, &err));
    /* the traffic counts what went to and came from the others, not the own part */
    gb_group_traffic(g, &sent1, &received1);
    CHECK_EQ_INT(sent1 - sent0, (int64_t)(st - send[rank]));
    CHECK_EQ_INT(received1 - received0, (int64_t)(rt - recv[rank]));
    int right = 1;
    at = 0;
    for (int s = 0; s < size; s++)
        for (size_t k = 0; k < recv[s]; k++)
            right &= out[at++] == part_byte(s, rank, k);
    CHECK(right);
    CHECK(out[rt] == 0xee); /* nothing past the end */

    /* all sizes zero */
    size_t zero[MAX_RANKS] = {0};
    CHECK_OK(gb_group_alltoall(g, NULL, zero, NULL, zero, &err));
    free(in);
    free(out);
}

static int collectives_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *g = NULL;
    CHECK_OK(gb_group_open(o, &g, &err));
    if (!g)
        return 1;
    CHECK_EQ_INT(gb_group_rank(g), o->rank);
    CHECK_EQ_INT(gb_group_size(g), o->size);
    check_allreduce(g, o->rank, o->size);
    check_allgather_broadcast(g, o->rank, o->size);
    check_alltoall(g, o->rank, o->size);
    CHECK_OK(gb_group_barrier(g, &err));
    gb_group_close(g);
    return test_failures_;
}

static void test_file_store(void)
{
    CHECK_EQ_INT(run_ranks(file_opts(3, 20.0), collectives_rank, 90), 0);
}

/* With opts.abandon (never gone here) the calls work otherwise (group.cpp): allreduce and
 * allgather on the group's own buffers, all-to-all with empty own parts (as two where some rank
 * has ranks both below and above it, as in four). */
static int never_gone(void *arg)
{
    (void)arg;
    return 0;
}

static void test_abandon_set(void)
{
    for (int size = 1; size <= 4; size *= 2) { /* 2 ranks make one all-to-all, 4 two, 1 none */
        gb_group_opts o = file_opts(size, 20.0);
        o.abandon = never_gone;
        CHECK_EQ_INT(run_ranks(o, collectives_rank, 90), 0);
    }
}

static void test_tcp_store(void)
{
    int port = free_port();
    CHECK(port > 0);
    gb_group_opts o = {.size = 3, .tcp_host = "127.0.0.1", .tcp_port = port,
                       .device_host = "127.0.0.1", .prefix = "tcp/", .timeout_s = 20.0};
    CHECK_EQ_INT(run_ranks(o, collectives_rank, 90), 0);
}

/* Rank 0's store on any free port: store_ready writes the port it got where the others read it
 * (as trainer 0 publishes it in the registry: workers/roles/trainer_group.c). */
static int write_port(void *arg, int port, gb_error *err)
{
    char path[300], tmp[310];
    snprintf(path, sizeof path, "%s/%s", group_dir, (const char *)arg);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return gb_error_errno(err, "write %s", path);
    return port > 0 ? 0 : gb_error_set(err, GB_EINVAL, "store_ready: port %d", port);
}

static int any_port_rank(gb_group_opts *o)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", group_dir, (const char *)o->store_ready_arg);
    for (int tries = 0; o->rank != 0 && o->tcp_port == 0 && tries < 2000; tries++) {
        FILE *f = fopen(path, "r");
        if (!f || fscanf(f, "%d", &o->tcp_port) != 1)
            usleep(10000);
        if (f)
            fclose(f);
    }
    CHECK(o->rank == 0 || o->tcp_port > 0);
    return collectives_rank(o);
}

static void test_tcp_store_any_port(void)
{
    gb_group_opts o = {.size = 3, .tcp_host = "127.0.0.1", .tcp_port = 0,
                       .device_host = "127.0.0.1", .prefix = "any/", .timeout_s = 20.0,
                       .store_ready = write_port, .store_ready_arg = "store-port"};
    CHECK_EQ_INT(run_ranks(o, any_port_rank, 90), 0);
    /* a port of 0 without store_ready, or on another rank than 0, is refused */
    gb_group *g = NULL;
    gb_error err = {0};
    o.store_ready = NULL;
    CHECK(gb_group_open(&o, &g, &err) == GB_EINVAL);
    o.store_ready = write_port;
    o.rank = 1;
    CHECK(gb_group_open(&o, &g, &err) == GB_EINVAL);
    CHECK(g == NULL);
}

/* Two groups on one store, told apart by their prefixes, in the same two processes. */
static int two_groups_rank(gb_group_opts *o)
{
    gb_error err = {0};
    gb_group *a = NULL, *b = NULL;
    gb_group_opts ob = *o;
    ob.prefix = "second/";
    CHECK_OK(gb_group_open(o, &a, &err));
    CHECK_OK(gb_group_open(&ob, &b, &err));
    if (a && b) {
        int64_t x = o->rank + 1, y = 10 * (o->rank + 1);
        CHECK_OK(gb_group_allreduce(b, GB_DTYPE_INT64, &y, 1, GB_GROUP_SUM, &err));
        CHECK_OK(gb_group_allreduce(a, GB_DTYPE_INT64, &x, 1, GB_GROUP_SUM, &err));
        CHECK_EQ_INT(x, 3);
        CHECK_EQ_INT(y, 30);
    }
    gb_group_close(a);
    gb_group_close(b);
    return test_failures_;
}

static void test_prefixes(void)
{
    CHECK_EQ_INT(run_ranks(file_opts(2, 20.0), two_groups_rank, 60), 0);
}

static void test_bad_options(void)
{
    gb_error err = {0};
    gb_group *g = (gb_group *)&err;
    gb_group_opts o = file_opts(2, 1.0);
    o.rank = 2;
    CHECK(gb_group_open(&o, &g, &err) == GB_EINVAL);
    CHECK(g == NULL);
    o = file_opts(2, 0.0);
    CHECK(gb_group_open(&o, &g, &err) == GB_EINVAL);
    gb_group_opts none = {.size = 2, .timeout_s = 1.0};
    CHECK(gb_group_open(&none, &g, &err) == GB_EINVAL);
    /* an NCCL group where this libtorch has none (Debian's) is refused, saying what to do */
    if (!gb_group_has_nccl()) {
        o = file_opts(1, 1.0);
        o.nccl = 1;
        CHECK(gb_group_open(&o, &g, &err) == GB_EUNSUPPORTED);
        CHECK(strstr(err.msg, "no NCCL") != NULL);
        CHECK(g == NULL);
    }
    gb_group_close(NULL);
}

int main(void)
{
    /* as in `gearbox worker`: a write to a peer that left is an error return, not a SIGPIPE (one
     * CI run lost rank 0 of test_failures' exiting peer to it: signal 13) */
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(group_dir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_bad_options);
    TEST_RUN(test_file_store);
    TEST_RUN(test_abandon_set);
    TEST_RUN(test_tcp_store);
    TEST_RUN(test_tcp_store_any_port);
    TEST_RUN(test_prefixes);
    ranks_remove_dir(group_dir);
    return test_main_result();
}
