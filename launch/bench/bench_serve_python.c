/* launch/bench/bench_serve_python.c: `gearbox bench serve`'s Python cases: the plain Python client,
 * the PyTorch DataLoader path and sampling across 2 servers, each a python3 child running a
 * script of workers/server/client/python in its bench mode. */
#include "launch/bench/bench_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef GEARBOX_PYTHON_DIR
#define GEARBOX_PYTHON_DIR ""
#endif

/* Runs `PYTHON DIR/script bench ARGS` and reads n numbers from its one output line into v.
 * Returns 0, or -1 when it failed or printed something else. */
static int run_py(const char *script, const char *args, int n, double *v)
{
    const char *dir = getenv("GEARBOX_PYTHON_DIR");
    if (!dir || !dir[0])
        dir = GEARBOX_PYTHON_DIR;
    /* GEARBOX_PYTHON, else the system's python3 (Debian's python3-zmq/-msgpack/-numpy live
     * there even when another python3 comes first on PATH), else python3 from PATH. */
    const char *py = getenv("GEARBOX_PYTHON");
    if (!py || !py[0])
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s/%s bench %s 2>/dev/null", py, dir, script, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int got = 0;
    while (got < n && fscanf(p, "%lf", &v[got]) == 1)
        got++;
    int st = pclose(p);
    return got == n && st == 0 ? 0 : -1;
}

/* One Python client (workers/server/client/python/gearbox_client.py bench): items/s and bytes/s. */
int gb_bench_serve_python(const gb_bench_serve_opts *o, const char *ep, double *bps, double *ips)
{
    char args[512];
    double v[2];
    snprintf(args, sizeof args, "%s %lld %.2f", ep, (long long)o->batch, o->seconds);
    if (run_py("gearbox_client.py", args, 2, v))
        return -1;
    *bps = v[0];
    *ips = v[1];
    return 0;
}

/* The PyTorch DataLoader path (gearbox_torch.py bench): items/s of the plain Python client, of
 * GearboxDataset in the DataLoader's process and with 2 worker processes, and of the plain
 * client and the in-process DataLoader with a 2 ms training step (a sleep) after each batch,
 * in one run. */
void gb_bench_serve_torch(const gb_bench_serve_opts *o, const char *ep)
{
    char args[512];
    double v[5];
    snprintf(args, sizeof args, "%s %lld %.2f 2 2", ep, (long long)o->batch, o->seconds);
    if (run_py("gearbox_torch.py", args, 5, v)) {
        if (!o->json)
            printf("  PyTorch DataLoader: not measured (a python3 with torch, pyzmq, msgpack "
                   "and numpy not found)\n");
        return;
    }
    if (o->json)
        printf("{\"bench\":\"serve\",\"client\":\"torch_dataloader\",\"batch\":%lld,"
               "\"item_bytes\":%lld,\"raw_client_samples_per_s\":%.1f,"
               "\"loader_samples_per_s\":%.1f,\"loader_2workers_samples_per_s\":%.1f,"
               "\"step_ms\":2,\"raw_client_step_samples_per_s\":%.1f,"
               "\"loader_step_samples_per_s\":%.1f}\n",
               (long long)o->batch, (long long)o->item_bytes, v[0], v[1], v[2], v[3], v[4]);
    else
        printf("  PyTorch DataLoader (gearbox_torch, prefetch 4): %7.0f items/s in-process, "
               "%7.0f with 2 workers; plain Python client %7.0f items/s\n"
               "    with a 2 ms training step a batch: DataLoader %7.0f items/s, plain client "
               "%7.0f\n", v[1], v[2], v[0], v[4], v[3]);
}

/* Sampling across 2 servers (gearbox_shards.py bench, uniform): items/s of one client on one
 * server and of the sharded client over both. */
void gb_bench_serve_shards(const gb_bench_serve_opts *o, const char *ep1, const char *ep2)
{
    char args[1024];
    double v[2];
    snprintf(args, sizeof args, "%s,%s %lld %.2f uniform", ep1, ep2, (long long)o->batch,
             o->seconds);
    if (run_py("gearbox_shards.py", args, 2, v)) {
        if (!o->json)
            printf("  2 servers: not measured (python3 with pyzmq, msgpack, numpy not found)\n");
        return;
    }
    if (o->json)
        printf("{\"bench\":\"serve\",\"client\":\"python_sharded\",\"servers\":2,"
               "\"batch\":%lld,\"item_bytes\":%lld,\"samples_per_s\":%.1f,"
               "\"one_server_samples_per_s\":%.1f}\n", (long long)o->batch,
               (long long)o->item_bytes, v[1], v[0]);
    else
        printf("  2 servers (gearbox_shards, uniform, global probabilities): %7.0f items/s; "
               "1 server, plain client: %7.0f items/s\n", v[1], v[0]);
}
