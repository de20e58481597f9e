/* workers/roles/trainer_ledger.h: a trainer's ledger of the sample stream (docs/design.md,
 * Glossary), kept in the run's shared memory next to its replay
 * ("/gearbox-<run id>-ledger-<index>") so that a restarted trainer goes on with its predecessor's
 * counts: the launcher's sample ledger (launch/run_local.c, sent = received + lost_in_crash) stays
 * exact across trainer crashes.
 * defines: gb_trainer_ledger, gb_ledger_fate, gb_ledger_totals, gb_trainer_ledger_open,
 *          gb_trainer_ledger_take, gb_trainer_ledger_settle, gb_trainer_ledger_settle_steps,
 *          gb_trainer_ledger_published,
 *          gb_trainer_ledger_last_published, gb_trainer_ledger_continued,
 *          gb_trainer_ledger_totals, gb_trainer_ledger_rows, gb_trainer_ledger_close,
 *          gb_trainer_ledger_fault_hook
 *
 * What is counted, per sending actor process (one gb_ledger_row row each):
 * - taken: the ingest thread took the chunk off the socket (gb_trainer_ledger_take notes its
 *   number); received: the chunk is settled, i.e. stored in the replay (counted after the
 *   commit), discarded as the run ended, or refused as non-finite (gb_trainer_ledger_settle).
 *   A chunk a killed trainer held, in its hands or half written into the replay, was never
 *   received.
 * - lost in a crash: an actor process numbers its chunks 1, 2, ... and they reach the one
 *   trainer in that order (one PUSH -> PULL connection; actors never drop a chunk, they wait).
 *   So when a trainer that took over from a killed one takes its first chunk, numbered n, from
 *   a process, every chunk numbered below n was received or went down with a predecessor (in
 *   its hands, half written, in the socket buffers): lost_in_crash = n - 1 - received. It is
 *   set, not added, so a chain of crashes is counted once.
 * - crash safety: each change (a row and the totals) is written to an intent record in the
 *   segment, the intent is marked complete, applied, and unmarked; opening the ledger applies a
 *   complete intent that was not unmarked. A SIGKILL anywhere leaves the old state or the new
 *   one, never half: every chunk is counted exactly once.
 * What can be off: a chunk committed to the replay in the instant before the kill, before its
 * settle was written, is counted lost though the replay kept it (one ingest batch at most); the
 * ledger still balances. Not covered: senders beyond GB_LEDGER_ROWS_MAX rows (their chunks are in
 * the totals, a crash's losses among them are not found), and a sender that drops chunks (a
 * number it skipped would count as lost).
 *
 * Threads: every function may be called from any thread (one lock, never held for long). */
#ifndef GB_WORKERS_TRAINER_LEDGER_H
#define GB_WORKERS_TRAINER_LEDGER_H

#include "runtime/base/error.h"
#include "runtime/streams/sample_stream.h"

#include <stdint.h>

typedef struct gb_trainer_ledger gb_trainer_ledger;

/* What became of a received chunk. */
typedef enum gb_ledger_fate {
    GB_LEDGER_STORED,    /* committed to the replay */
    GB_LEDGER_DISCARDED, /* taken unused as the run ended */
    GB_LEDGER_NONFINITE, /* held a NaN or an infinity: not stored */
} gb_ledger_fate;

typedef struct gb_ledger_totals {
    int64_t received;                    /* = stored + discarded + nonfinite */
    int64_t stored, discarded, nonfinite;
    int64_t lost_in_crash;               /* the rows' lost_in_crash, summed */
    int64_t steps;                       /* the received chunks' new valid rows (agent steps),
                                            summed: what the actors' episodes and env steps are
                                            checked against (launch/run_rows.h) */
} gb_ledger_totals;

/* Opens trainer index's ledger: with run_dir, the run-owned segment "ledger-<index>", attached
 * when a predecessor left one (its counts go on: gb_trainer_ledger_continued) or created (zero
 * counts); fresh (1: the first trainer process of this launcher's run, incarnation 0) removes one
 * left from before and starts at zero. Without run_dir (NULL): ledger in process memory that die
 * with it. The segment's name stays when the ledger closes without unlink (the launcher removes
 * the run's segments when the run ends): a successor started again still finds it. The trainer
 * unlinks it when it stops cleanly at the run's end (workers/roles/trainer.c).
 * Returns 0, or GB_EFULL / GB_ESYS / GB_ECORRUPT (a segment of that name that is not a ledger of
 * this format) / GB_ENOMEM, the ledger then NULL: the caller may go on with process-memory ledger.
 * Does not block. */
int gb_trainer_ledger_open(gb_trainer_ledger **out, const char *run_dir, int index, int fresh,
                          gb_error *err);

/* 1 when the ledger went on from a predecessor's segment. */
int gb_trainer_ledger_continued(const gb_trainer_ledger *b);

/* 1 when the ledger is in the run's shared memory (it survives this process). */
int gb_trainer_ledger_shared(const gb_trainer_ledger *b);

/* Notes a chunk taken off the socket from actor sender (its wire header's index) with seq
 * (GB_SAMPLE_SEQ_BITS: incarnation and number). Returns the row to settle it on, or -1 when the
 * table is full (the chunk still counts in the totals when settled). */
int gb_trainer_ledger_take(gb_trainer_ledger *b, int64_t sender, uint64_t seq);

/* Counts a taken chunk as received, with its fate; row from gb_trainer_ledger_take. */
void gb_trainer_ledger_settle(gb_trainer_ledger *b, int row, gb_ledger_fate fate);
/* The same, for a chunk that holds steps new valid rows (totals.steps). */
void gb_trainer_ledger_settle_steps(gb_trainer_ledger *b, int row, gb_ledger_fate fate,
                                    int64_t steps);

/* Notes the parameter version last published (trainer 0), for a successor to go on from. */
void gb_trainer_ledger_published(gb_trainer_ledger *b, int64_t version);
/* The last version noted by this trainer or a predecessor; -1 when none. */
int64_t gb_trainer_ledger_last_published(const gb_trainer_ledger *b);

gb_ledger_totals gb_trainer_ledger_totals(gb_trainer_ledger *b);

/* Copies the rows (at most cap) into out; returns how many there are. */
int gb_trainer_ledger_rows(gb_trainer_ledger *b, gb_ledger_row *out, int cap);

/* Closes the ledger; unlink (1) also removes the segment's name (a test's clean-up; a trainer
 * leaves it to the launcher). NULL is a no-op. */
void gb_trainer_ledger_close(gb_trainer_ledger *b, int unlink);

/* Fault injection (crash tests): when set, called at each step of a change (intent written,
 * marked complete, applied); a test kills the process from it. NULL outside tests. */
extern void (*gb_trainer_ledger_fault_hook)(const char *where);

#endif
