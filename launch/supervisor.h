/* launch/supervisor.h: starting worker processes and watching them: each child gets its own
 * log file, its own process group (a Ctrl-C reaches only the launcher, which then stops them in
 * order) and dies with the launcher (PR_SET_PDEATHSIG). Stopping is SIGTERM, then SIGKILL after
 * a grace period.
 * defines: gb_supervisor, gb_child, gb_supervisor_* , gb_log_tail */
#ifndef GB_LAUNCH_SUPERVISOR_H
#define GB_LAUNCH_SUPERVISOR_H

#include "runtime/base/error.h"

#include <stdio.h>
#include <sys/types.h>

#define GB_SUPERVISOR_MAX_CHILDREN 1024
#define GB_CHILD_MAX_ARGS 64 /* room for a Slurm step's srun options before the worker's */
#define GB_CHILD_ARGS_BYTES 4096

typedef struct gb_child {
    char role[16];
    int index;
    pid_t pid;
    char log_path[1024];
    int running;
    int reported;    /* its end was returned by gb_supervisor_reap */
    int status;      /* waitpid status once it ended */
    int incarnation; /* 0, then +1 per gb_supervisor_restart */
    double started_s; /* gb_now_s() at the last start */
    /* the command line, kept for restarts: argv points into args */
    char *argv[GB_CHILD_MAX_ARGS + 1];
    char args[GB_CHILD_ARGS_BYTES];
    int killed; /* 1 when gb_supervisor_stop_all had to SIGKILL it (it outlived the grace) */
    double busy_until; /* gb_supervisor_stop_all: it may run on until then (gb_supervisor.busy) */
    /* Its last words: the error a worker that fails writes to the pipe named by
     * GEARBOX_LAST_WORDS_FD before it exits (gb_worker_last_words), read when it is reaped, so
     * that the run's error says why even when its log could not be written (a full disk).
     * words_fd: the pipe's read end (-1: none: a Slurm step's srun) */
    int words_fd;
    char last_words[256];
} gb_child;

typedef struct gb_supervisor {
    gb_child children[GB_SUPERVISOR_MAX_CHILDREN];
    int n;
    /* Where each child is an `srun` of a Slurm step (launch/slurm.h), SIGTERM to the srun
     * cancels the step at once (the worker is killed, its last checkpoint lost). So:
     * stop_hook, when set, is called once by gb_supervisor_stop_all instead of SIGTERM to each
     * child (it delivers SIGTERM to the workers themselves); kill_term_s > 0 makes
     * gb_supervisor_kill send SIGTERM first (srun cancels its step) and wait up to that long
     * before SIGKILL, so no step is left running without its srun. Both 0 for local children. */
    void (*stop_hook)(void *arg);
    void *stop_arg;
    double kill_term_s;
    /* while_waiting, when set, is called with up to 10 ms to spend instead of a sleep while
     * gb_supervisor_wait_role and gb_supervisor_stop_all wait: the launcher reads the workers'
     * reports there, so that a stopping worker's last report finds room (its queue holds 16). */
    void (*while_waiting)(void *arg, int ms);
    void *waiting_arg;
    /* busy, when set, says what work a running child is doing that a stop must not cut short
     * ("its checkpoint": a trainer writing one, launch/run_drain.c), or NULL: none.
     * gb_supervisor_stop_all waits for it past the grace, until it has not been busy for a
     * grace (at least 2 s), by up to busy_max_s in all. */
    const char *(*busy)(void *arg, const gb_child *c);
    void *busy_arg;
    double busy_max_s;
} gb_supervisor;

/* Starts argv (argv[0] a path) as a child whose stdout and stderr append to log_path.
 * The child gets SIGTERM when the *thread* that called this exits (PR_SET_PDEATHSIG follows
 * the forking thread, not the process): call it only from the launcher's main thread, or a
 * thread that lives as long as the launcher, or workers are stopped when that thread ends.
 * (`gearbox worker` ends itself within 1 s of that SIGTERM once its parent is gone.)
 * Returns 0, or GB_ESYS/GB_EFULL; the child that fails to exec exits 127 (its log says why). */
/* In a child the launcher just forked (parent: the launcher's pid before the fork): its own
 * process group, SIGTERM when the launcher dies (_exit(1) if it already has), stdout and stderr
 * to log_fd, stdin from /dev/null, default SIGINT/SIGTERM/SIGPIPE. Then the caller execs. */
void gb_supervisor_child_setup(int log_fd, pid_t parent);

/* The environment variable naming a worker's last-words pipe (gb_child.last_words). */
#define GB_LAST_WORDS_ENV "GEARBOX_LAST_WORDS_FD"

/* In a worker about to fail: writes msg (one line) to the last-words pipe its launcher gave it
 * (GB_LAST_WORDS_ENV), if any and if it is a pipe. Never blocks; no allocation. */
void gb_supervisor_last_words(const char *msg);

int gb_supervisor_spawn(gb_supervisor *s, const char *role, int index, char *const argv[],
                        const char *log_path, gb_error *err);

/* Starts an ended child again with its command line, "--incarnation N" appended (N counts its
 * restarts from 1), its log appended to. Returns 0 or GB_ESYS/GB_EINVAL (still running). */
int gb_supervisor_restart(gb_supervisor *s, gb_child *c, gb_error *err);

/* SIGKILLs a running child's process group and reaps it (blocking until it is gone). */
void gb_supervisor_kill(gb_supervisor *s, gb_child *c);

/* Reaps children that have ended, without blocking. Returns one that ended and was not returned
 * before (its status filled; call again for the next), or NULL. */
gb_child *gb_supervisor_reap(gb_supervisor *s);

/* Number of children still running. */
int gb_supervisor_running(const gb_supervisor *s);

/* Waits up to grace_s seconds for the running children of one role to end, without signalling
 * or killing any (gb_supervisor_stop_all does that). The launcher lets the actors end this way
 * once it released them (runtime/streams/runctl.h), before it stops the rest. Returns the number of
 * that role still running. */
int gb_supervisor_wait_role(gb_supervisor *s, const char *role, double grace_s);

/* Sends SIGTERM to every running child, waits up to grace_s seconds for them all, then SIGKILLs
 * the rest and reaps them; a child that s->busy says is busy is waited for longer (see there).
 * Returns the number that had to be killed. */
int gb_supervisor_stop_all(gb_supervisor *s, double grace_s);

/* Children that ended as a failure: exited non-zero, killed by a signal other than the SIGTERM
 * a stop sends, or SIGKILLed because they outlived the stop's grace. Names up to the first few
 * ("trainer-0 exited with status 1; actor-2 did not stop within the grace and was killed") in
 * buf (size n). Returns how many. */
int gb_supervisor_failures(const gb_supervisor *s, char *buf, size_t n);

/* Describes how a child ended ("exited with status 3", "killed by signal 9 (Killed)"). */
void gb_child_describe(const gb_child *c, char *buf, size_t n);

/* Writes the last `lines` lines of path to out, each prefixed with prefix. */
void gb_log_tail(const char *path, int lines, const char *prefix, FILE *out);

#endif
