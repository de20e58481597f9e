/* launch/bench/bench.h: benchmark entry points behind `gearbox bench NAME [--json] [options]`.
 * Each prints human-readable figures, or one JSON object per line with --json, and returns an
 * exit status like a subcommand (launch/commands.h). Benchmarks report ratios against a
 * reference measured in the same run (memcpy, raw ZeroMQ, ...), never pass/fail on time.
 * defines: gb_bench_entry, gb_bench_table, gb_bench_*, gb_bench_quantile,
 *          gb_bench_net, gb_bench_thread, gb_bench_gs_net, gb_bench_replay_global_select */
#ifndef GB_LAUNCH_BENCH_H
#define GB_LAUNCH_BENCH_H

#include "launch/json.h"
#include "runtime/base/error.h"

#include <getopt.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

typedef struct gb_bench_entry {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv, int json); /* argv: options after the bench name */
} gb_bench_entry;

/* The benchmarks built into this gearbox, NULL-terminated (launch/cmd_bench.c). */
extern const gb_bench_entry gb_bench_table[];

int gb_bench_replay(int argc, char **argv, int json);
int gb_bench_streams(int argc, char **argv, int json);
int gb_bench_envs(int argc, char **argv, int json);
int gb_bench_kernels(int argc, char **argv, int json);
int gb_bench_serve(int argc, char **argv, int json);
int gb_bench_e2e(int argc, char **argv, int json);
int gb_bench_inference(int argc, char **argv, int json); /* bench_precision.c */
int gb_bench_learner(int argc, char **argv, int json);
int gb_bench_suite(int argc, char **argv, int json);

/* ---- shared by the benchmarks (launch/bench/bench_util.c) ------------------------------------ */

/* Sorts t[0..n) in place and returns its q-quantile (nearest rank; q = 0.5: the median). */
double gb_bench_quantile(double *t, int n, double q);

/* A file's text (at most 1 MiB, NUL-terminated, malloc'd), or NULL. */
char *gb_bench_slurp(const char *path);

/* The shipped configs' folder: ./configs when it holds the file named probe, else the source
 * tree's this gearbox was built from (GEARBOX_CONFIGS_DIR), else "configs". */
void gb_bench_configs_dir(const char *probe, char *out, size_t cap);

/* The BLAS libtorch's products run on, once the bridge is loaded: "OpenBLAS <its kernels>"
 * (Haswell, SkylakeX, ...: workers/torch/blas_cpu.h), or "not OpenBLAS". For the figures of
 * benchmarks whose products go to it (they differ 2x and more between kernels). */
const char *gb_bench_blas(void);

/* Removes the folder path and everything under it (symbolic links themselves, not their
 * targets). Returns 0, or -1 with errno set. */
int gb_bench_remove_tree(const char *path);

/* ---- options (launch/bench/bench_util.c) ----------------------------------------------------- */


/* Every benchmark's --json (cmd_bench.c reads it; the benchmarks accept and skip it). */
#define GB_BENCH_OPTION_JSON {"json", no_argument, NULL, 0}

/* Called for each option, with the option's val and its value (NULL when it takes none), and,
 * where positional arguments are allowed, with val 1 for each. Returns 0, or -1 to refuse the
 * command line (after printing why: the usage is not printed for it). */
typedef int (*gb_bench_option_fn)(void *ctx, int val, const char *arg);

/* Parses a benchmark's command line (argv[0] is its name) with getopt_long over longs (long
 * options only; end it with a zeroed entry and include GB_BENCH_OPTION_JSON), calling fn in
 * order. An unknown option, a missing value or (without positional) a positional argument is
 * named on stderr with the usage after it. Returns 0, or -1 when the command line is refused
 * (the caller exits GB_EXIT_USAGE). Parsed by the commands' one getopt_long driver
 * (gb_cli_getopt, launch/cli.h), whose state is global: one thread at a time. */
int gb_bench_options(int argc, char **argv, const struct option *longs, int positional,
                     gb_bench_option_fn fn, void *ctx, void (*usage)(FILE *out));

/* ---- `gearbox bench replay --case global_select` (bench_replay_shards.c) -------------------- */

/* One rank of a group spread over machines (--ranks, --rank, --store, --interface). */
typedef struct gb_bench_gs_net {
    int ranks, rank;       /* this process is rank `rank` of `ranks` (ranks 0: not given) */
    char store_host[256];  /* rank 0 serves the group's TCPStore on store_host:store_port */
    int store_port;        /* rank 0 only: 0 = any free port (printed on stderr) */
    const char *interface; /* this rank's Gloo device address (NULL: 127.0.0.1) */
} gb_bench_gs_net;

/* Built only with the trainers' group (libtorch; GEARBOX_BENCH_GLOBAL_SELECT defined).
 * net NULL: forks 4 ranks, each with one replay shard in a Gloo group on a FileStore in a fresh
 * temporary directory (call it before anything in this process touches libtorch); else this
 * process is net->rank of net->ranks over tcp, each started by the user (on its own host),
 * rank 0 measuring the local reference before it joins. Both: weighted global selection against
 * one local replay of the union, and remote collection of 64 KiB rows against a raw
 * all-to-all; rank 0 prints. quick: small shards, few reps; reps: the weighted part's
 * repetitions (the collection part takes at most 200). Returns 0, or 1 when a measurement
 * failed (the message is on stderr). */
int gb_bench_replay_global_select(int json, int quick, int reps, const gb_bench_gs_net *net);

/* ---- the cases of `gearbox bench streams` (bench_streams.c runs them) ------------------------ */

/* What every streams case shares: the ZeroMQ context, the transport, the output mode. */
typedef struct gb_bench_net {
    void *ctx;
    int tcp;   /* tcp://127.0.0.1, else ipc:// in dir */
    int quick; /* --quick: fewer iterations and bytes */
    int json;
    char dir[64];
    int seq;          /* endpoint names */
    const char *only; /* --case NAME: run only that case */
    /* gearbox's sockets use CURVE (ctx has keys: runtime/streams/curve.h); the raw ZeroMQ
       reference stays plain tcp */
    int curve;
    double figures[16]; /* each measured row's headline (inference p50 us, sample Gbit/s), in
                           order: bench_streams compares a CURVE pass with a plain one */
    int nfigures;
} gb_bench_net;

/* Records a row's headline figure (beyond 16 rows: not kept). */
void gb_bench_net_figure(gb_bench_net *b, double v);

/* Whether the case called name runs (no --case, or --case name). */
int gb_bench_net_want(const gb_bench_net *b, const char *name);
/* A fresh endpoint to bind: "tcp://127.0.0.1:*" or "ipc://<dir>/<what>-<seq>". */
void gb_bench_net_endpoint(gb_bench_net *b, char *out, size_t cap, const char *what);
/* The address sock actually bound (the port of a "tcp://...:*" filled in). */
void gb_bench_net_bound(void *sock, char *out, size_t cap);
/* The raw ZeroMQ reference of a case: *bound, a socket of bind_type bound to a fresh endpoint
 * (named what), and *connected, of connect_type, connected to it; linger 0 and, when hwm > 0,
 * that high-water mark both ways. Returns 0, or GB_EZMQ with what was made in *bound and
 * *connected (NULL otherwise) for the caller to close. */
int gb_bench_net_raw_pair(gb_bench_net *b, int bind_type, int connect_type, const char *what,
                          int hwm, void **bound, void **connected, gb_error *err);

/* A thread that polls a server object (obj) until stop. */
typedef struct gb_bench_thread {
    atomic_int stop;
    atomic_int ready;
    void *obj;
    char ep[256];
    size_t reply_bytes;
    gb_bench_net *b;
} gb_bench_thread;

/* The cases; each prints its lines and returns 0, or nonzero when a measurement failed. */
int gb_bench_inference_rtt(gb_bench_net *b);       /* bench_inference.c */
int gb_bench_inference_pipelined(gb_bench_net *b); /* bench_inference.c */
int gb_bench_sample_throughput(gb_bench_net *b);   /* bench_sample.c */
int gb_bench_param_broadcast(gb_bench_net *b);     /* bench_params.c */
int gb_bench_param_relay(gb_bench_net *b);         /* bench_relay.c */

#endif
