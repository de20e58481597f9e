/* launch/bench.h: benchmark entry points behind `gearbox bench NAME [--json] [options]`.
 * Each prints human-readable figures, or one JSON object per line with --json, and returns an
 * exit status like a subcommand (launch/commands.h). Benchmarks report ratios against a
 * reference measured in the same run (memcpy, raw ZeroMQ, ...), never pass/fail on time.
 * defines: gb_bench_entry, gb_bench_table, gb_bench_* */
#ifndef GB_LAUNCH_BENCH_H
#define GB_LAUNCH_BENCH_H

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

#endif
