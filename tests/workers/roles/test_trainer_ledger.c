/* tests/workers/roles/test_trainer_ledger.c: a trainer's sample ledger survives the trainer being
 * killed (workers/roles/trainer_ledger.h). In process memory and in a run's segment: rows, totals,
 * the last published version, a fresh start removing an old ledger. The crash rule: a restarted
 * trainer's first chunk from a sender numbered n makes that sender's received + lost_in_crash = n -
 * 1, over a chain of restarts too. Exactly once at the crash point: a child process takes and
 * settles chunks from three senders (some skipped, as if lost in the socket buffers) and is
 * SIGKILLed after a random delay or at one of the ledger's own fault points (inside a change); the
 * parent, as the restarted trainer, finds every chunk the child said it settled counted once, the
 * one change in progress at the kill counted whole or not at all, and after its first chunk from
 * each sender the ledger balances exactly. */
#include "runtime/base/shm.h"
#include "test.h"
#include "workers/roles/trainer_ledger.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SENDERS = 3, ITERATIONS = 200 };

static char run_dir[64];

static uint64_t seq_of(int64_t incarnation, int64_t number)
{
    return (uint64_t)incarnation << GB_SAMPLE_SEQ_BITS | (uint64_t)number;
}

/* The row of (sender, incarnation) in b's ledger; 0 when none. */
static int row_of(gb_trainer_ledger *b, int64_t sender, int64_t inc, gb_ledger_row *out)
{
    static gb_ledger_row rows[GB_LEDGER_ROWS_MAX];
    int n = gb_trainer_ledger_rows(b, rows, GB_LEDGER_ROWS_MAX);
    for (int i = 0; i < n; i++)
        if (rows[i].sender == sender && rows[i].incarnation == inc) {
            *out = rows[i];
            return 1;
        }
    return 0;
}

/* The totals agree with the rows: received and lost summed, received split by fate. */
static int consistent(gb_trainer_ledger *b)
{
    static gb_ledger_row rows[GB_LEDGER_ROWS_MAX];
    gb_ledger_totals t = gb_trainer_ledger_totals(b);
    int n = gb_trainer_ledger_rows(b, rows, GB_LEDGER_ROWS_MAX);
    int64_t received = 0, lost = 0;
    for (int i = 0; i < n; i++) {
        received += rows[i].received;
        lost += rows[i].lost_in_crash;
    }
    return t.received == received && t.lost_in_crash == lost &&
           t.received == t.stored + t.discarded + t.nonfinite;
}

/* Process memory: rows per sending process, fates, versions; no look back at first sight. */
static void test_process_memory(void)
{
    gb_error err = {0};
    gb_trainer_ledger *b;
    CHECK_OK(gb_trainer_ledger_open(&b, NULL, 0, 1, &err));
    CHECK(!gb_trainer_ledger_shared(b) && !gb_trainer_ledger_continued(b));
    CHECK_EQ_INT(gb_trainer_ledger_last_published(b), -1);
    int r = gb_trainer_ledger_take(b, 1, seq_of(0, 1));
    CHECK_EQ_INT(r, 0);
    gb_trainer_ledger_settle_steps(b, r, GB_LEDGER_STORED, 32);
    r = gb_trainer_ledger_take(b, 1, seq_of(2, 5)); /* actor 1's third process, from its 5th */
    CHECK_EQ_INT(r, 1);
    gb_trainer_ledger_settle_steps(b, r, GB_LEDGER_NONFINITE, 7);
    CHECK_EQ_INT(gb_trainer_ledger_take(b, 1, seq_of(0, 2)), 0);
    gb_trainer_ledger_settle(b, 0, GB_LEDGER_DISCARDED);
    gb_trainer_ledger_published(b, 17);
    CHECK_EQ_INT(gb_trainer_ledger_last_published(b), 17);
    gb_ledger_row y;
    CHECK(row_of(b, 1, 0, &y));
    CHECK_EQ_INT(y.received, 2);
    CHECK_EQ_INT(y.max_number, 2);
    CHECK(row_of(b, 1, 2, &y));
    CHECK_EQ_INT(y.received, 1);
    CHECK_EQ_INT(y.max_number, 5);
    CHECK_EQ_INT(y.lost_in_crash, 0); /* the ledger's first life: nothing went down before */
    gb_ledger_totals t = gb_trainer_ledger_totals(b);
    CHECK_EQ_INT(t.received, 3);
    CHECK_EQ_INT(t.stored, 1);
    CHECK_EQ_INT(t.discarded, 1);
    CHECK_EQ_INT(t.nonfinite, 1);
    CHECK_EQ_INT(t.steps, 39); /* every received chunk's steps, whatever its fate */
    CHECK(consistent(b));
    gb_trainer_ledger_close(b, 0);
}

/* A chain of restarts: each first chunk from a sender sets received + lost = its number - 1;
 * a sender first seen after a restart counts its earlier numbers lost; the version and the
 * counts go on; a fresh ledger starts at zero. */
static void test_restarts(void)
{
    gb_error err = {0};
    gb_trainer_ledger *b;
    CHECK_OK(gb_trainer_ledger_open(&b, run_dir, 0, 1, &err));
    CHECK(gb_trainer_ledger_shared(b) && !gb_trainer_ledger_continued(b));
    for (int64_t n = 1; n <= 5; n++) /* 1..5 taken, 1..3 settled: 4 and 5 in its hands */
        CHECK_EQ_INT(gb_trainer_ledger_take(b, 0, seq_of(0, n)), 0);
    for (int k = 0; k < 3; k++)
        gb_trainer_ledger_settle_steps(b, 0, GB_LEDGER_STORED, 30 + k);
    gb_trainer_ledger_published(b, 40);
    gb_trainer_ledger_close(b, 0); /* killed: the segment stays */

    CHECK_OK(gb_trainer_ledger_open(&b, run_dir, 0, 0, &err));
    CHECK(gb_trainer_ledger_continued(b));
    CHECK_EQ_INT(gb_trainer_ledger_last_published(b), 40);
    CHECK_EQ_INT(gb_trainer_ledger_totals(b).received, 3);
    CHECK_EQ_INT(gb_trainer_ledger_totals(b).steps, 93); /* the steps received go on too */
    int r = gb_trainer_ledger_take(b, 0, seq_of(0, 9)); /* 6..8 went with the socket */
    gb_ledger_row y;
    CHECK(row_of(b, 0, 0, &y));
    CHECK_EQ_INT(y.lost_in_crash, 5); /* 4, 5 (in its hands), 6, 7, 8 */
    gb_trainer_ledger_settle(b, r, GB_LEDGER_STORED);
    CHECK_EQ_INT(gb_trainer_ledger_take(b, 0, seq_of(0, 10)), r); /* no look back now */
    CHECK(row_of(b, 0, 0, &y));
    CHECK_EQ_INT(y.lost_in_crash, 5);
    int r2 = gb_trainer_ledger_take(b, 2, seq_of(1, 4)); /* first seen now: 1..3 went down */
    CHECK(row_of(b, 2, 1, &y));
    CHECK_EQ_INT(y.lost_in_crash, 3);
    gb_trainer_ledger_settle(b, r2, GB_LEDGER_STORED);
    gb_trainer_ledger_close(b, 0); /* killed again, 10 in its hands */

    CHECK_OK(gb_trainer_ledger_open(&b, run_dir, 0, 0, &err));
    CHECK_EQ_INT(gb_trainer_ledger_take(b, 0, seq_of(0, 12)), r);
    CHECK(row_of(b, 0, 0, &y));
    CHECK_EQ_INT(y.received + y.lost_in_crash, 11); /* counted once over two crashes */
    CHECK_EQ_INT(y.lost_in_crash, 7);
    CHECK_EQ_INT(y.max_number, 12);
    CHECK(consistent(b));
    CHECK_EQ_INT(gb_trainer_ledger_totals(b).lost_in_crash, 10);
    gb_trainer_ledger_close(b, 0);

    CHECK_OK(gb_trainer_ledger_open(&b, run_dir, 0, 1, &err)); /* a new run's first trainer */
    CHECK(!gb_trainer_ledger_continued(b));
    CHECK_EQ_INT(gb_trainer_ledger_totals(b).received, 0);
    CHECK_EQ_INT(gb_trainer_ledger_last_published(b), -1);
    gb_trainer_ledger_close(b, 1);
    char name[GB_SHM_NAME_MAX];
    CHECK_OK(gb_shm_run_name(run_dir, "ledger-0", name, sizeof name, &err));
    gb_shm probe;
    CHECK_EQ_INT(gb_shm_open(&probe, name, 0, 1, &err), GB_ENOTFOUND);
}

/* What the child says, one record per write (atomic on a pipe). */
typedef struct say_rec {
    char op; /* 'O' open; 'B' an operation begins, 'E' it ended (kind: 'T' take, 'S' settle) */
    char kind;
    int32_t sender;
    int64_t number;
} say_rec;

static void say(int fd, char op, char kind, int sender, int64_t number)
{
    say_rec r = {op, kind, sender, number};
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(9);
}

static int64_t fault_target, faults;
static void fault_kill(const char *where)
{
    (void)where;
    if (++faults == fault_target)
        raise(SIGKILL);
}

/* The dying trainer: batches of 1..8 chunks from three senders in number order (one in five
 * numbers skipped: lost on the way), a non-finite one settled at once, the rest after. */
static int child(int fd, uint64_t seed, int64_t at_fault)
{
    gb_error err = {0};
    gb_trainer_ledger *b;
    if (gb_trainer_ledger_open(&b, run_dir, 0, 1, &err) != 0)
        return 2;
    say(fd, 'O', 0, 0, 0);
    if (at_fault > 0) {
        fault_target = at_fault;
        gb_trainer_ledger_fault_hook = fault_kill;
    }
    uint64_t x = seed | 1;
    int64_t next[SENDERS] = {1, 1, 1};
    for (;;) {
        int sender[8], row[8], fresh[8];
        int64_t number[8];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n = 1 + (int)(x % 8);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int s = (int)(x % SENDERS);
            int64_t k = next[s] + (x / 8 % 5 == 0); /* the one before went astray */
            next[s] = k + 1;
            say(fd, 'B', 'T', s, k);
            row[i] = gb_trainer_ledger_take(b, s, seq_of(s, k));
            say(fd, 'E', 'T', s, k);
            sender[i] = s;
            number[i] = k;
            fresh[i] = x / 64 % 9 != 0;
            if (!fresh[i]) { /* non-finite: settled as it is taken */
                say(fd, 'B', 'S', s, k);
                gb_trainer_ledger_settle(b, row[i], GB_LEDGER_NONFINITE);
                say(fd, 'E', 'S', s, k);
            }
        }
        for (int i = 0; i < n; i++)
            if (fresh[i]) {
                say(fd, 'B', 'S', sender[i], number[i]);
                gb_trainer_ledger_settle(b, row[i], i % 7 == 6 ? GB_LEDGER_DISCARDED
                                                              : GB_LEDGER_STORED);
                say(fd, 'E', 'S', sender[i], number[i]);
            }
    }
}

static void crash_once(uint64_t seed, int64_t at_fault, unsigned delay_us)
{
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        _exit(child(p[1], seed, at_fault));
    }
    close(p[1]);
    /* The parent's model: per sender, settles and the highest number taken, as reported; the
     * operation begun and not reported ended (at most one) may or may not have happened. */
    int64_t settled[SENDERS] = {0}, taken_max[SENDERS] = {0};
    say_rec rec, open = {0}, pending = {0};
    while (read(p[0], &rec, sizeof rec) == (ssize_t)sizeof rec) {
        if (rec.op == 'O') {
            open = rec;
            if (at_fault <= 0) {
                usleep(delay_us);
                kill(pid, SIGKILL);
            }
        } else if (rec.op == 'B') {
            pending = rec;
        } else if (rec.op == 'E') {
            pending.op = 0;
            if (rec.kind == 'S')
                settled[rec.sender]++;
            else if (rec.number > taken_max[rec.sender])
                taken_max[rec.sender] = rec.number;
        }
    }
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
    if (!open.op)
        return;

    gb_error err = {0};
    gb_trainer_ledger *b;
    CHECK_OK(gb_trainer_ledger_open(&b, run_dir, 0, 0, &err));
    if (!b)
        return;
    CHECK(gb_trainer_ledger_continued(b));
    CHECK(consistent(b));
    int exact = 1;
    int64_t first[SENDERS];
    for (int s = 0; s < SENDERS; s++) {
        gb_ledger_row y = {0};
        row_of(b, s, s, &y);
        int maybe_settle = pending.op && pending.kind == 'S' && pending.sender == s;
        int maybe_take = pending.op && pending.kind == 'T' && pending.sender == s;
        exact &= y.received == settled[s] || (maybe_settle && y.received == settled[s] + 1);
        exact &= y.max_number == taken_max[s] ||
                 (maybe_take && y.max_number == pending.number);
        exact &= y.lost_in_crash == 0; /* nothing went down before the child */
        first[s] = (taken_max[s] > y.max_number ? taken_max[s] : y.max_number) + 1 +
                   (int64_t)((seed >> (8 * s)) % 4); /* some lost in the socket buffers */
    }
    CHECK_MSG(exact, "seed %llu fault %lld delay %u: the ledger differs from what the child "
              "reported", (unsigned long long)seed, (long long)at_fault, delay_us);
    /* The successor's first chunk from each sender: the ledger balances exactly. */
    int balanced = 1;
    for (int s = 0; s < SENDERS; s++) {
        int r = gb_trainer_ledger_take(b, s, seq_of(s, first[s]));
        gb_trainer_ledger_settle(b, r, GB_LEDGER_STORED);
        gb_ledger_row y = {0};
        balanced &= row_of(b, s, s, &y) && y.received + y.lost_in_crash == first[s] &&
                    y.max_number == first[s];
    }
    CHECK_MSG(balanced, "seed %llu fault %lld delay %u: received + lost != chunks numbered",
              (unsigned long long)seed, (long long)at_fault, delay_us);
    CHECK(consistent(b));
    gb_trainer_ledger_close(b, 1);
}

static void test_crash_anywhere(void)
{
    for (int it = 0; it < ITERATIONS; it++) {
        uint64_t seed = 0x600dULL + (uint64_t)it * 2654435761u;
        int64_t at_fault = it % 2 ? 1 + (int64_t)(seed % 600) : 0;
        crash_once(seed, at_fault, (unsigned)(seed % 3000));
    }
}

int main(void)
{
    snprintf(run_dir, sizeof run_dir, "/tmp/gearbox-ledger-XXXXXX");
    if (!mkdtemp(run_dir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_process_memory);
    TEST_RUN(test_restarts);
    TEST_RUN(test_crash_anywhere);
    rmdir(run_dir);
    return test_main_result();
}
