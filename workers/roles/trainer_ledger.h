/* workers/roles/trainer_books.h: a trainer's books of the sample stream, kept in the run's shared
 * memory next to its replay ("/gearbox-<run id>-books-<index>") so that a restarted trainer goes
 * on with its predecessor's counts: the launcher's sample ledger (launch/run_local.c,
 * sent = received + lost_in_crash) stays exact across trainer crashes.
 * defines: gb_trainer_books, gb_books_fate, gb_books_totals, gb_trainer_books_open,
 *          gb_trainer_books_take, gb_trainer_books_settle, gb_trainer_books_published,
 *          gb_trainer_books_last_published, gb_trainer_books_continued,
 *          gb_trainer_books_totals, gb_trainer_books_tally, gb_trainer_books_close,
 *          gb_trainer_books_fault_hook
 *
 * What is counted, per sending actor process (one gb_sample_tally row each):
 * - taken: the ingest thread took the chunk off the socket (gb_trainer_books_take notes its
 *   number); received: the chunk is settled, i.e. stored in the replay (counted after the
 *   commit), discarded as the run ended, or refused as non-finite (gb_trainer_books_settle).
 *   A chunk a killed trainer held, in its hands or half written into the replay, was never
 *   received.
 * - lost in a crash: an actor process numbers its chunks 1, 2, ... and they reach the one
 *   trainer in that order (one PUSH -> PULL connection; actors never drop a chunk, they wait).
 *   So when a trainer that took over from a killed one takes its first chunk, numbered n, from
 *   a process, every chunk numbered below n was received or went down with a predecessor (in
 *   its hands, half written, in the socket buffers): lost_in_crash = n - 1 - received. It is
 *   set, not added, so a chain of crashes is counted once.
 * - crash safety: each change (a row and the totals) is written to an intent record in the
 *   segment, the intent is marked complete, applied, and unmarked; opening the books applies a
 *   complete intent that was not unmarked. A SIGKILL anywhere leaves the old state or the new
 *   one, never half: every chunk is counted exactly once.
 * What can be off: a chunk committed to the replay in the instant before the kill, before its
 * settle was written, is counted lost though the replay kept it (one ingest batch at most); the
 * books still balance. Not covered: senders beyond GB_SAMPLE_TALLY_MAX rows (their chunks are in
 * the totals, a crash's losses among them are not found), and a sender that drops chunks (a
 * number it skipped would count as lost).
 *
 * Threads: every function may be called from any thread (one lock, never held for long). */
#ifndef GB_WORKERS_TRAINER_BOOKS_H
#define GB_WORKERS_TRAINER_BOOKS_H

#include "runtime/base/error.h"
#include "runtime/streams/sample_stream.h"

#include <stdint.h>

typedef struct gb_trainer_books gb_trainer_books;

/* What became of a received chunk. */
typedef enum gb_books_fate {
    GB_BOOKS_STORED,    /* committed to the replay */
    GB_BOOKS_DISCARDED, /* taken unused as the run ended */
    GB_BOOKS_NONFINITE, /* held a NaN or an infinity: not stored */
} gb_books_fate;

typedef struct gb_books_totals {
    int64_t received;                    /* = stored + discarded + nonfinite */
    int64_t stored, discarded, nonfinite;
    int64_t lost_in_crash;               /* the rows' lost_in_crash, summed */
} gb_books_totals;

/* Opens trainer index's books: with run_dir, the run-owned segment "books-<index>", attached
 * when a predecessor left one (its counts go on: gb_trainer_books_continued) or created (zero
 * counts); fresh (1: the first trainer process of this launcher's run, incarnation 0) removes one
 * left from before and starts at zero. Without run_dir (NULL): books in process memory that die
 * with it. The segment's name stays when the books close (the launcher removes the run's
 * segments when the run ends): a trainer that ends cleanly and is started again still finds them.
 * Returns 0, or GB_EFULL / GB_ESYS / GB_ECORRUPT (a segment of that name that is not books of
 * this format) / GB_ENOMEM, the books then NULL: the caller may go on with process-memory books.
 * Does not block. */
int gb_trainer_books_open(gb_trainer_books **out, const char *run_dir, int index, int fresh,
                          gb_error *err);

/* 1 when the books went on from a predecessor's segment. */
int gb_trainer_books_continued(const gb_trainer_books *b);

/* 1 when the books are in the run's shared memory (they survive this process). */
int gb_trainer_books_shared(const gb_trainer_books *b);

/* Notes a chunk taken off the socket from actor sender (its wire header's index) with seq
 * (GB_SAMPLE_SEQ_BITS: incarnation and number). Returns the row to settle it on, or -1 when the
 * table is full (the chunk still counts in the totals when settled). */
int gb_trainer_books_take(gb_trainer_books *b, int64_t sender, uint64_t seq);

/* Counts a taken chunk as received, with its fate; row from gb_trainer_books_take. */
void gb_trainer_books_settle(gb_trainer_books *b, int row, gb_books_fate fate);

/* Notes the parameter version last published (trainer 0), for a successor to go on from. */
void gb_trainer_books_published(gb_trainer_books *b, int64_t version);
/* The last version noted by this trainer or a predecessor; -1 when none. */
int64_t gb_trainer_books_last_published(const gb_trainer_books *b);

gb_books_totals gb_trainer_books_totals(gb_trainer_books *b);

/* Copies the rows (at most cap) into out; returns how many there are. */
int gb_trainer_books_tally(gb_trainer_books *b, gb_sample_tally *out, int cap);

/* Closes the books; unlink (1) also removes the segment's name (a test's clean-up; a trainer
 * leaves it to the launcher). NULL is a no-op. */
void gb_trainer_books_close(gb_trainer_books *b, int unlink);

/* Fault injection (crash tests): when set, called at each step of a change (intent written,
 * marked complete, applied); a test kills the process from it. NULL outside tests. */
extern void (*gb_trainer_books_fault_hook)(const char *where);

#endif
