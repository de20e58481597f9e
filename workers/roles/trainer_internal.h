/* workers/roles/trainer_internal.h: the trainer worker's state, shared by its files: trainer.c
 * (start, the training loop, reports, checkpoints, stop), trainer_ingest.c (the ingest
 * thread: sample stream -> ledger -> replay) and trainer_group.c (several trainers' group).
 * Calls go one way: trainer.c -> trainer_ingest.c, trainer_group.c.
 * defines: trainer, gb_trainer_ingest_main, gb_trainer_drain_at_stop, gb_trainer_record_open,
 *          gb_trainer_join_group */
#ifndef GB_WORKERS_TRAINER_INTERNAL_H
#define GB_WORKERS_TRAINER_INTERNAL_H

#include "replay/formats/dataset.h"
#include "runtime/streams/chunk.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/base/shm.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/roles/learner_report.h"
#include "workers/roles/learning.h"
#include "workers/roles/trainer_ledger.h"
#include "workers/roles/worker.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct trainer {
    gb_worker *w;
    gb_torch_space space;
    gb_env_spec spec; /* the environment's (its bound pointers cleared): its reward range */
    gb_chunk_layout layout;
    gb_group *group;       /* several trainers: the data-parallel group; NULL: one trainer */
    int64_t generation;    /* the group's generation (trainer_group.c) */
    int store_port;        /* trainer 0 of a registry store: the port it served on, 0: none */
    gb_learning *learning; /* learner, replay, staging: workers/roles/learning.h */
    gb_replay *replay;     /* the learning's, for ingest */
    gb_sample_receiver *samples;
    gb_param_publisher *publisher;
    /* ingest thread */
    pthread_t ingest;
    int ingest_started;
    int ingest_rc;
    gb_error ingest_err;
    /* The sample ledger (launch/run_local.c): the ledger counts chunks in this run's layout from
     * one of its actors, once settled (stored, discarded at stop, non-finite), per actor process
     * and across this trainer's restarts, so that the actors' chunks_sent = received +
     * lost_in_crash. rejected = malformed or foreign chunks, or chunks holding values beyond
     * the run's bounds (trainer.chunk_guard, the action space): taken as never sent by an actor
     * of the run, shown on their own, outside that ledger. */
    gb_trainer_ledger *ledger;
    atomic_llong rejected_chunks;
    atomic_int ending_seen;    /* 1: the ingest thread saw the run is ending and confirmed it */
    double ending_at;          /* when it saw that (gb_now_s; the ingest thread's own) */
    void *param_buf;
    uint64_t param_bytes;
    const gb_param_entry *param_layout; /* the learner model's, [param_count] */
    int param_count;
    int writes_policy; /* its checkpoint sets carry a policy file (policy_file.h) */
    int64_t published_version;
    int64_t held_at; /* trainer 0: the held request it holds at (0: none) */
    gb_dataset_writer *record; /* gearbox run --record DIR: every chunk received, appended */
    gb_ledger_row *ledger_rows; /* [GB_LEDGER_ROWS_MAX] for reports, allocated at the first */
    gb_learner_report timing;  /* the learner's timings at the last report */
    char replay_shm[GB_SHM_NAME_MAX]; /* the run-owned replay segment's name, "" if anonymous */
    gb_checkpoint_files ckpt;         /* the last complete checkpoint set at start (step -1:
                                         none) */
    gb_replay_recovery recovery;      /* what the replay kept from a killed predecessor */
} trainer;

/* The ingest thread (arg: the trainer): takes chunks from the sample stream, checks them, counts
 * them in the ledger and commits them to the replay until the worker stops or the replay
 * closes; an error is left in t->ingest_rc and t->ingest_err, and stops the worker. */
void *gb_trainer_ingest_main(void *arg);

/* At stop, after the ingest thread ended and before the replay closes: takes the chunks still
 * queued on the sample stream (the actors stop first and flush them here) and stores each in the
 * replay when it has room (past the rate limiter: the final checkpoint keeps them), else (a full
 * queue with remover none, PPO's) counts it as received but discarded, so the launcher's ledger
 * (actors' chunks_sent = trainers' chunks_received) shows any chunk lost in transport. With
 * --record they all go into the dataset. It stops after 50 ms without one, or at once when the
 * queue is empty after a drained run (gb_runctl_client_drained: nothing is in flight), and
 * blocks for at most 2 s. failing: this trainer stops on its own error, not with the run: it
 * takes chunks only while they fit, and stops at the first that does not (the rest stay queued,
 * holding the actors back until it is restarted) rather than let the actors run on unthrottled
 * into chunks it throws away. */
void gb_trainer_drain_at_stop(trainer *t, int failing);

/* gearbox run --record DIR: opens DIR/trainer-<index>.gbds with the replay's columns as schema
 * (the chunk's columns, next_obs per item). Returns 0 or the dataset writer's error. */
int gb_trainer_record_open(trainer *t, gb_error *err);

/* Several trainers: joins the data-parallel group through the store trainer.rendezvous names
 * (trainer_group.c) into t->group, as the generation run control says (t->generation);
 * nothing with one trainer. Returns 0 or the group's error. */
int gb_trainer_join_group(trainer *t, gb_error *err);

/* The seed of the shards' shared draw in t's generation: equal on every trainer. */
uint64_t gb_trainer_shared_seed(const trainer *t);

/* After a collective failed (gb_group_failed; err says how): closes the group, waits for the
 * launcher to restart the trainer that failed (the next generation), joins the group again and
 * takes the state of the trainer that trained furthest. Returns 0, or GB_ECLOSED when no
 * restart came within the heartbeat and rendezvous timeouts (or the run ended), or the
 * group's error. */
int gb_trainer_regroup(trainer *t, gb_error *err);

/* rc: a call over the group (a training step, the first collective). When it failed because
 * the group failed, and the worker is neither stopping nor its run ending (peers that leave
 * then are not failures), forms the group again (gb_trainer_regroup). Returns 0 when the group
 * formed again, else rc or the regroup's error; rc itself when it did not fail (>= 0). */
int gb_trainer_recover_group(trainer *t, int rc, gb_error *err);

#endif
