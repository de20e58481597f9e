/* launch/slurm.h: the Slurm backend of `gearbox run` (--backend slurm, launch.mode slurm).
 *
 * Design: the launcher stays where the user typed the command (it serves the registry, collects
 * the metrics, writes the run directory and decides when the run stops, as with the local
 * backend) and holds ONE Slurm job for the run, named "gearbox:<experiment.name>". The job is
 * an allocation made by a child `salloc ... -- tail --pid=<launcher> -f /dev/null`: salloc keeps
 * the allocation while its command runs, and that command ends when the launcher does, so even
 * a SIGKILLed launcher leaves no job behind (and salloc itself dies with the launcher,
 * PR_SET_PDEATHSIG). Each worker is then one job step, a foreground child of the launcher:
 * `srun --jobid=J --job-name=<role>-<i> -n1 -c<cpus> [--gpus=G] [--mem=M] --exact -- gearbox
 * worker ...`. So the supervision of the local backend works unchanged: a worker that ends is
 * its srun exiting with the worker's status, its output is the srun's output (logs/<role>-<i>.log),
 * and a restart is a new step. Why one job with steps rather than a job per worker: the run
 * starts whole or not at all (no trainer waiting in the queue while its actors run, no worker
 * thought hung because it is still pending), squeue shows one line per run and sacct one line
 * per worker, and one scancel ends all of it. Why not a heterogeneous job (one component per
 * role): Slurm starts those only from its backfill scheduler (tens of seconds to minutes on an
 * idle cluster, measured on 22.05), and a plain allocation already fits every role's step.
 *
 * What the job asks for: with launch.slurm.nodes 1 (the default) one node with the sum of the
 * steps' CPUs, GPUs and memory; with more nodes, whole nodes (--exclusive), each step placed by
 * Slurm where its CPUs/GPUs fit. Several nodes need streams.transport tcp on an interface every
 * node has (runtime/config/config_check.c refuses the rest); with ipc the run must fit one node.
 *
 * Parameter relays (parameters.relay per_host) on several nodes: one relay step per node of the
 * job, relay-<k> pinned to the k-th node of the allocation (--nodelist, the list asked of Slurm
 * once the job is granted: squeue %N expanded by scontrol show hostnames), and policy worker i
 * pinned to node i mod nodes; both steps get GEARBOX_HOST=<node> (srun --export=ALL,...), so a
 * policy worker subscribes to "relay/<its node>/" (workers/roles/worker.h), whatever the node's
 * gethostname says and whatever GEARBOX_HOST the launcher had. A restarted step keeps its
 * command line, so a relay that dies comes back on its node. With one node: one relay, placed
 * by Slurm, named by the node's hostname as on a local run.
 *
 * Stopping: the launcher ends the workers through the run-control protocol as locally; what
 * still runs gets SIGTERM through `scancel --signal=TERM J` (a SIGTERM to srun would cancel the
 * step at once, killing the worker before its last checkpoint), SIGTERM to its srun after the
 * grace (which cancels the step), and at last `scancel J` releases the job.
 * defines: gb_slurm_job, gb_slurm_relays, gb_slurm_allocate, gb_slurm_step_argv,
 *          gb_slurm_signal_steps, gb_slurm_release */
#ifndef GB_LAUNCH_SLURM_H
#define GB_LAUNCH_SLURM_H

#include "runtime/config/config.h"
#include "runtime/base/error.h"

#include <stdatomic.h>
#include <sys/types.h>

#define GB_SLURM_NODES_MAX 256 /* nodes whose names a job keeps (relays and policy placed) */
#define GB_SLURM_NODE_NAME_MAX 64

typedef struct gb_slurm_job {
    long long id;        /* the job's id, 0 until salloc names it */
    int nnodes;          /* nodes named in nodes[] (several nodes with per_host relays), or 0 */
    char nodes[GB_SLURM_NODES_MAX][GB_SLURM_NODE_NAME_MAX]; /* the allocation's, in order */
    pid_t salloc;        /* the salloc holding the allocation, 0 once reaped */
    char name[160];      /* "gearbox:<experiment.name>" */
    char log_path[1024]; /* salloc's output (logs/slurm.log) */
    const gb_config *cfg;
} gb_slurm_job;

/* How many parameter relays the launcher starts with parameters.relay per_host: one a node of
 * the job (launch.slurm.nodes) on Slurm, else 1 (this host's). */
int gb_slurm_relays(const gb_config *cfg);

/* Starts salloc for the run's job (its output appended to log_path) and waits until Slurm grants
 * it, however long it is pending; gives up when *interrupted becomes non-zero (the job is then
 * cancelled). With launch.slurm.nodes > 1 and per_host relays it then asks Slurm for the job's
 * node names (squeue, scontrol show hostnames; at most GB_SLURM_NODES_MAX). Returns 0 (j->id
 * set, and j->nodes), GB_ESYS (salloc could not start, or exited first: the error says how and
 * quotes its last line; or the node list could not be had) or GB_EINTR (interrupted). On
 * failure call gb_slurm_release all the same. */
int gb_slurm_allocate(gb_slurm_job *j, const gb_config *cfg, const char *log_path,
                      atomic_int *interrupted, gb_error *err);

/* Writes into out (cap entries, NULL-terminated) the srun command line that runs worker_argv
 * (NULL-terminated) as step "<role>-<index>" of the job with the role's launch.slurm.<role>
 * resources; strings it makes live in buf (bufcap bytes). On several nodes with per_host relays,
 * relay-<index> is placed on node index and policy-<index> on node index mod nodes, each with
 * GEARBOX_HOST set to its node. Returns 0 or GB_EINVAL (too long, or a relay index past the
 * job's nodes). */
int gb_slurm_step_argv(const gb_slurm_job *j, const char *role, int index,
                       char *const worker_argv[], char **out, int cap, char *buf, size_t bufcap,
                       gb_error *err);

/* The supervisor's stop hook (launch/supervisor.h; arg a gb_slurm_job): SIGTERM to the tasks of
 * every step of the job (scancel --signal=TERM), the sruns left running. */
void gb_slurm_signal_steps(void *arg);

/* Cancels the job (scancel) and reaps salloc; nothing of the run is left in squeue after it.
 * Safe to call on a job never granted or already released. Returns 0, or GB_ESYS when scancel
 * failed (err says why; the job ends at the latest with its time limit or the launcher). */
int gb_slurm_release(gb_slurm_job *j, gb_error *err);

#endif
