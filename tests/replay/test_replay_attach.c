/* tests/replay/test_replay_attach.c: the replay survives its owner's crash (replay.h, "Surviving
 * the owner's crash"). A child process creates a persistent named replay, commits N items with
 * distinct keys and priorities, then goes on ingesting (allocate, write, commit, priority
 * updates) until it is SIGKILLed: at a chosen point of the ingest loop (every point in turn), or
 * after a random delay, which lands anywhere, inside the replay's calls included. The parent
 * attaches and checks that every committed item is there with its key, priority, length,
 * version and data, that the half-written ones are gone and counted, that uniform, weighted and
 * FIFO selection work over exactly the kept items, that new inserts work, and that a checkpoint
 * of the attached replay restores the same items. Also: a mismatched schema, a foreign segment,
 * an unfinished segment and a missing one. (Run-owned segment names: test_replay_run_names.c.) */
#include "replay/internal.h" /* gb_replay_fault_hook */
#include "replay/replay.h"
#include "runtime/base/rng.h"
#include "runtime/base/shm.h"
#include "test.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { CAP = 512, STEPS = 8, MAX_BATCH = 4, ITERATIONS = 150 };

static char seg_name[64];

static double prio_of(uint64_t id) { return id % 7 == 0 ? 0.0 : 0.25 + (double)(id % 13); }
static double prio2_of(uint64_t id) { return 100.0 + (double)(id % 5); }
static int32_t length_of(uint64_t id) { return STEPS - (id % 3 == 0); }

static void options(gb_replay_options *o)
{
    util_options(o, CAP, STEPS);
    o->timeout_s = 0;
    o->alpha = 1.0; /* weights = priorities: the weighted total is a plain sum */
    o->extra_selectors = 1u << GB_SELECTOR_WEIGHTED;
    o->seed = 7;
    o->shm_name = seg_name;
    o->shm_persistent = 1;
}

/* What the child tells the parent, one record per write (atomic on a pipe). */
typedef struct report {
    char op; /* 'P' phase 1 done (a: items); 'A' batch begins, 'C' committed (a: first id, b: n);
                'U' update begins, 'u' done (a: id) */
    uint64_t a, b;
} report;

/* Where a self-killing child dies in the batch after phase 1. */
enum { KILL_BEFORE_ALLOCATE, KILL_AFTER_ALLOCATE, KILL_MID_WRITE, KILL_AFTER_COMMIT,
       KILL_MID_UPDATE, KILL_POINTS };

static void say(int fd, char op, uint64_t a, uint64_t b)
{
    report m = {op, a, b};
    if (write(fd, &m, sizeof m) != (ssize_t)sizeof m)
        _exit(9);
}

/* Allocates, writes and commits n items with ids first.., dying at `kill_at` when it is one of
 * the batch's points (-1: never). */
static int ingest(gb_replay *r, int fd, uint64_t first, int64_t n, int kill_at)
{
    gb_error err = {0};
    int64_t idx[MAX_BATCH];
    double prio[MAX_BATCH];
    int32_t len[MAX_BATCH];
    int64_t ver[MAX_BATCH];
    say(fd, 'A', first, (uint64_t)n);
    if (kill_at == KILL_BEFORE_ALLOCATE)
        raise(SIGKILL);
    if (gb_replay_allocate(r, n, idx, 0, &err) != 0) {
        fprintf(stderr, "child allocate: %s\n", err.msg);
        return 1;
    }
    if (kill_at == KILL_AFTER_ALLOCATE)
        raise(SIGKILL);
    for (int64_t k = 0; k < n; k++) {
        uint64_t id = first + (uint64_t)k;
        util_write(r, idx[k], id, STEPS);
        if (kill_at == KILL_MID_WRITE && k == n / 2)
            raise(SIGKILL);
        prio[k] = prio_of(id);
        len[k] = length_of(id);
        ver[k] = (int64_t)id;
    }
    if (gb_replay_commit(r, n, idx, prio, len, ver, &err) != 0) {
        fprintf(stderr, "child commit: %s\n", err.msg);
        return 1;
    }
    if (kill_at == KILL_AFTER_COMMIT)
        raise(SIGKILL);
    say(fd, 'C', first, (uint64_t)n);
    return 0;
}

/* Sets item `id`'s priority to prio2_of(id), finding its block through the FIFO order. */
static int update(gb_replay *r, int fd, uint64_t id, int kill_at)
{
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    int64_t i = st.oldest;
    while (i >= 0 && *(uint64_t *)gb_replay_block(r, 2, i) != id)
        i = st.next[i];
    if (i < 0)
        return 1;
    say(fd, 'U', id, 0);
    double p = prio2_of(id);
    uint64_t key = st.item[i].seq;
    gb_error err = {0};
    if (kill_at == KILL_MID_UPDATE)
        raise(SIGKILL);
    if (gb_replay_update_priorities(r, 1, &i, &key, &p, NULL, &err) != 0)
        return 1;
    say(fd, 'u', id, 0);
    return 0;
}

/* Fault points: the child dies at the fault_target-th one it passes after phase 1. */
static int64_t fault_count, fault_target;
static void fault_kill(const char *where)
{
    (void)where;
    if (++fault_count == fault_target)
        raise(SIGKILL);
}

/* The child: n1 items, then batches until killed: self_kill >= 0: at that point of the first
 * batch after phase 1; at_fault > 0: at that fault point inside the replay's calls after phase
 * 1; else it runs until the parent kills it, then waits. */
static int child(int fd, uint64_t seed, int self_kill, int64_t at_fault)
{
    gb_replay_options o;
    options(&o);
    gb_error err = {0};
    gb_replay *r;
    if (gb_replay_create(&o, &r, &err) != 0) {
        fprintf(stderr, "child create: %s\n", err.msg);
        return 2;
    }
    gb_rng rng;
    gb_rng_seed(&rng, seed);
    uint64_t n1 = 1 + gb_rng_below(&rng, 200), id = 1;
    while (id <= n1) {
        int64_t n = 1 + (int64_t)gb_rng_below(&rng, MAX_BATCH);
        if (id + (uint64_t)n - 1 > n1)
            n = (int64_t)(n1 - id + 1);
        if (ingest(r, fd, id, n, -1))
            return 3;
        id += (uint64_t)n;
    }
    say(fd, 'P', n1, 0);
    if (at_fault > 0) {
        fault_target = at_fault;
        gb_replay_fault_hook = fault_kill;
    }
    for (;;) {
        int64_t n = 1 + (int64_t)gb_rng_below(&rng, MAX_BATCH);
        if (id + (uint64_t)n > CAP - MAX_BATCH)
            break;
        if (ingest(r, fd, id, n, self_kill == KILL_MID_UPDATE ? -1 : self_kill))
            return 4;
        id += (uint64_t)n;
        if (update(r, fd, 1 + gb_rng_below(&rng, id - 1), self_kill))
            return 5;
    }
    for (;;)
        pause(); /* full enough: wait for the parent's SIGKILL */
}

/* The parent's model of what the child committed, from its reports. */
typedef struct model {
    uint64_t committed;          /* ids 1..committed are committed */
    uint64_t pending_first;      /* a batch begun and not reported committed: ids first.. */
    int64_t pending_n;           /* 0: none */
    uint8_t updated[CAP + 1];    /* 1: update done; 2: update begun, not reported done */
} model;

static void apply_report(model *m, const report *rp)
{
    if (rp->op == 'A') {
        m->pending_first = rp->a;
        m->pending_n = (int64_t)rp->b;
    } else if (rp->op == 'C') {
        m->committed = rp->a + rp->b - 1;
        m->pending_n = 0;
    } else if (rp->op == 'U' && rp->a <= CAP) {
        if (m->updated[rp->a] != 1)
            m->updated[rp->a] = 2;
    } else if (rp->op == 'u' && rp->a <= CAP) {
        m->updated[rp->a] = 1;
    }
}

/* Every selected entry is a kept item: COMMITTED, and its key its sequence. */
static int selection_kept(gb_replay *r, const gb_replay_selection *s, const uint8_t *kept_idx)
{
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    for (int64_t k = 0; k < s->n; k++) {
        int64_t i = s->index[k];
        if (i < 0 || i >= CAP || !kept_idx[i] || st.state[i] != GB_ITEM_COMMITTED ||
            s->key[k] != st.item[i].seq)
            return 0;
    }
    return 1;
}

/* Uniform, weighted and FIFO selection on the attached replay, over exactly its kept items. */
static void check_selection(gb_replay *r, int64_t kept, const uint8_t *kept_idx,
                            const double *prio_idx, const uint64_t *id_idx)
{
    gb_error err = {0};
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, CAP, &err));
    gb_replay_request q = gb_replay_request_default(256);
    q.timeout_s = 0;
    q.selector = GB_SELECTOR_UNIFORM;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_EQ_INT(s.n, 256);
    CHECK(selection_kept(r, &s, kept_idx));
    gb_replay_release(r, &s);

    double total = -1, want = 0;
    int64_t size = -1, positive = 0;
    for (int64_t i = 0; i < CAP; i++)
        if (kept_idx[i]) {
            want += prio_idx[i];
            positive += prio_idx[i] > 0;
        }
    CHECK_OK(gb_replay_weight_total(r, GB_SELECTOR_WEIGHTED, &total, &size, &err));
    CHECK_EQ_INT(size, kept);
    CHECK_NEAR(total, want, 1e-9 * (1 + want));
    q.selector = GB_SELECTOR_WEIGHTED;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_EQ_INT(s.n, 256);
    CHECK(selection_kept(r, &s, kept_idx));
    int zero_drawn = 0;
    for (int64_t k = 0; k < s.n; k++)
        zero_drawn += positive > 0 && prio_idx[s.index[k]] == 0;
    CHECK_EQ_INT(zero_drawn, 0);
    gb_replay_release(r, &s);

    q = gb_replay_request_default(CAP);
    q.timeout_s = 0;
    q.selector = GB_SELECTOR_FIFO;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err));
    CHECK_EQ_INT(s.n, kept); /* every kept item once, oldest first */
    CHECK(selection_kept(r, &s, kept_idx));
    int ordered = 1;
    for (int64_t k = 1; k < s.n; k++)
        ordered &= id_idx[s.index[k]] == id_idx[s.index[k - 1]] + 1;
    CHECK(ordered);
    gb_replay_release(r, &s);
    gb_replay_selection_free(&s);
}

/* Restores a checkpoint of r into a fresh (anonymous) replay: the same items at the same
 * indices with the same keys, priorities and data. */
static void check_checkpoint(gb_replay *r)
{
    gb_error err = {0};
    char path[128];
    snprintf(path, sizeof path, "/tmp/gearbox-test-attach-%d.ckpt", (int)getpid());
    CHECK_OK(gb_replay_checkpoint(r, path, &err));
    gb_replay_options o;
    options(&o);
    o.shm_name = NULL;
    o.shm_persistent = 0;
    gb_replay *b;
    CHECK_OK(gb_replay_create(&o, &b, &err));
    CHECK_OK(gb_replay_restore(b, path, &err));
    gb_replay_status sa, sb;
    gb_replay_table tab[4];
    gb_replay_tables(r, tab);
    gb_replay_status_view(r, &sa);
    gb_replay_status_view(b, &sb);
    CHECK_EQ_INT(sb.size, sa.size);
    int same = 1;
    for (int64_t i = 0; i < CAP; i++) {
        if (sa.state[i] != GB_ITEM_COMMITTED) {
            same &= sb.state[i] != GB_ITEM_COMMITTED;
            continue;
        }
        same &= sb.state[i] == GB_ITEM_COMMITTED && sb.item[i].seq == sa.item[i].seq &&
                sb.priority[i] == sa.priority[i] && sb.length[i] == sa.length[i] &&
                sb.policy_version[i] == sa.policy_version[i];
        for (int c = 0; c < 4; c++)
            same &= memcmp(gb_replay_block(r, c, i), gb_replay_block(b, c, i),
                           tab[c].block_bytes) == 0;
    }
    CHECK(same);
    gb_replay_free(b);
    unlink(path);
}

/* One crash: fork the child, kill it (self_kill >= 0: it kills itself there; else after
 * delay_us), attach, check. */
static void crash_once(uint64_t seed, int self_kill, int64_t at_fault, unsigned delay_us,
                       int with_checkpoint)
{
    int p[2];
    if (pipe(p) != 0) {
        CHECK(0);
        return;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        _exit(child(p[1], seed, self_kill, at_fault));
    }
    close(p[1]);
    /* Every report until the child is dead (the pipe's end of file); a child that is to be
     * killed from outside dies delay_us after phase 1, wherever it is. */
    model *m = calloc(1, sizeof *m);
    report rp;
    while (read(p[0], &rp, sizeof rp) == (ssize_t)sizeof rp) {
        apply_report(m, &rp);
        if (rp.op == 'P' && self_kill < 0 && at_fault <= 0) {
            usleep(delay_us);
            kill(pid, SIGKILL);
        }
    }
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);

    gb_replay_options o;
    options(&o);
    gb_error err = {0};
    gb_replay *r = NULL;
    CHECK_OK(gb_replay_attach(&o, &r, &err));
    if (!r) {
        free(m);
        return;
    }
    gb_replay_recovery rec;
    gb_replay_recovery_get(r, &rec);
    CHECK(rec.attached);
    CHECK_EQ_INT(rec.dropped_invalid, 0);
    CHECK_EQ_INT(rec.released_pins, 0);
    CHECK_EQ_INT(rec.removed_on_attach, 0);

    /* What is there, by id. */
    gb_replay_status st;
    gb_replay_status_view(r, &st);
    uint8_t kept_idx[CAP] = {0}, seen[CAP + 1] = {0};
    double prio_idx[CAP] = {0};
    uint64_t id_idx[CAP] = {0};
    int fields_ok = 1, data_ok = 1, known = 1;
    for (int64_t k = 0; k < st.size; k++) {
        int64_t i = st.live[k];
        uint64_t id = *(uint64_t *)gb_replay_block(r, 2, i);
        kept_idx[i] = 1;
        prio_idx[i] = st.priority[i];
        id_idx[i] = id;
        if (id < 1 || id > CAP || seen[id]) {
            known = 0;
            continue;
        }
        seen[id] = 1;
        double want = prio_of(id);
        int prio_ok = m->updated[id] == 1 ? st.priority[i] == prio2_of(id)
                      : m->updated[id] == 2 ? st.priority[i] == want ||
                                                  st.priority[i] == prio2_of(id)
                                            : st.priority[i] == want;
        fields_ok &= prio_ok && st.item[i].seq == id && st.length[i] == length_of(id) &&
                     st.policy_version[i] == (int64_t)id && st.item[i].times_sampled == 0 &&
                     st.item[i].pins == 0;
        const float *obs = gb_replay_block(r, 0, i);
        const int32_t *act = gb_replay_block(r, 1, i);
        const float *boot = gb_replay_block(r, 3, i);
        data_ok &= util_check_rows(obs, act, id, 0, STEPS, STEPS);
        for (int j = 0; j < 4; j++)
            data_ok &= boot[j] == util_obs(id, STEPS, j);
    }
    CHECK(known);
    CHECK(fields_ok);
    CHECK(data_ok);
    /* Every reported commit is there; of the batch in flight, a prefix in commit order. */
    int64_t missing = 0, extra = 0, extra_prefix = 1;
    for (uint64_t id = 1; id <= m->committed; id++)
        missing += !seen[id];
    for (int64_t k = 0; k < m->pending_n; k++) {
        uint64_t id = m->pending_first + (uint64_t)k;
        if (seen[id]) {
            extra++;
            extra_prefix &= k == 0 || seen[id - 1];
        }
    }
    CHECK_EQ_INT(missing, 0);
    CHECK(extra_prefix);
    CHECK_EQ_INT(st.size, (int64_t)m->committed + extra);
    CHECK_EQ_INT(rec.kept, st.size);
    CHECK(extra + rec.dropped_in_flight <= m->pending_n);
    if (self_kill == KILL_BEFORE_ALLOCATE || self_kill == KILL_MID_UPDATE)
        CHECK_EQ_INT(rec.dropped_in_flight + extra, 0);
    if (self_kill == KILL_AFTER_ALLOCATE || self_kill == KILL_MID_WRITE) {
        CHECK_EQ_INT(rec.dropped_in_flight, m->pending_n);
        CHECK_EQ_INT(extra, 0);
    }
    if (self_kill == KILL_AFTER_COMMIT) {
        CHECK_EQ_INT(extra, m->pending_n);
        CHECK_EQ_INT(rec.dropped_in_flight, 0);
    }
    gb_replay_stats s;
    gb_replay_stats_get(r, &s);
    CHECK_EQ_INT(s.inserts, st.size);
    CHECK_EQ_INT(s.writing, 0);
    CHECK_EQ_INT(s.free_blocks, CAP - st.size);

    check_selection(r, st.size, kept_idx, prio_idx, id_idx);

    /* New inserts go on from the largest key. */
    int64_t before = st.size;
    gb_replay_status_view(r, &st);
    uint64_t newest_seq = st.newest >= 0 ? st.item[st.newest].seq : 0;
    for (uint64_t k = 0; k < 3; k++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        util_write(r, i, 1000 + k, STEPS);
        double pr = 1.5;
        CHECK_OK(gb_replay_commit(r, 1, &i, &pr, NULL, NULL, &err));
    }
    gb_replay_status_view(r, &st);
    CHECK_EQ_INT(st.size, before + 3);
    /* A key handed to an item that the crash then dropped is not handed out again. */
    uint64_t last_seq = st.item[st.newest].seq;
    CHECK_MSG(last_seq == newest_seq + 3 || last_seq == newest_seq + 4, "new keys end at %llu "
              "after %llu", (unsigned long long)last_seq, (unsigned long long)newest_seq);
    if (with_checkpoint)
        check_checkpoint(r);
    CHECK_OK(gb_replay_unlink(r, &err));
    gb_replay_free(r);
    free(m);
}

static void test_crash_and_attach(void)
{
    /* Kill points: one of the ingest loop's (every one in turn), one of the fault points
     * inside the replay's calls (the k-th after phase 1, k spread over the next ~80), or
     * anywhere (a delay). */
    for (int it = 0; it < ITERATIONS; it++) {
        uint64_t mix = (uint64_t)it * 2654435761u;
        int self_kill = it % 3 == 0 ? (it / 3) % KILL_POINTS : -1;
        int64_t at_fault = it % 3 == 1 ? 1 + (int64_t)(mix % 80) : 0;
        unsigned delay = (unsigned)(mix % 1500u);
        crash_once(0x5eed0000u + (uint64_t)it, self_kill, at_fault, delay, it % 10 == 1);
    }
}

/* A clean free leaves a persistent segment for the next owner; a schema that differs is refused
 * with a message naming the difference; a missing name is GB_ENOTFOUND. */
static void test_attach_checks(void)
{
    gb_error err = {0};
    gb_replay_options o;
    options(&o);
    gb_replay *r, *b = NULL;
    CHECK_EQ_INT(gb_replay_attach(&o, &b, &err), GB_ENOTFOUND);
    CHECK_OK(gb_replay_create(&o, &r, &err));
    gb_replay_recovery rec;
    gb_replay_recovery_get(r, &rec);
    CHECK_EQ_INT(rec.attached, 0);
    for (uint64_t id = 1; id <= 10; id++) {
        int64_t i;
        CHECK_OK(gb_replay_allocate(r, 1, &i, 0, &err));
        util_write(r, i, id, STEPS);
        double p = prio_of(id);
        CHECK_OK(gb_replay_commit(r, 1, &i, &p, NULL, NULL, &err));
    }
    int64_t held;
    CHECK_OK(gb_replay_allocate(r, 1, &held, 0, &err)); /* left WRITING by a clean free */
    gb_replay_selection s;
    CHECK_OK(gb_replay_selection_init(&s, 4, &err));
    gb_replay_request q = gb_replay_request_default(4);
    q.timeout_s = 0;
    CHECK_OK(gb_replay_sample(r, &q, &s, &err)); /* pinned, and times_sampled counted */
    gb_replay_free(r);
    gb_replay_selection_free(&s);

    gb_replay_options bad = o;
    bad.capacity = CAP * 2;
    CHECK_EQ_INT(gb_replay_attach(&bad, &b, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "capacity") != NULL, "%s", err.msg);
    util_options(&bad, CAP, STEPS);
    bad.shm_name = seg_name;
    bad.shm_persistent = 1;
    bad.columns[1].dtype = GB_DTYPE_INT64;
    CHECK_EQ_INT(gb_replay_create(&bad, &b, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "'act'") != NULL && strstr(err.msg, "another schema"), "%s",
              err.msg);
    bad.columns[1].dtype = GB_DTYPE_INT32;
    bad.steps = STEPS + 1;
    CHECK_EQ_INT(gb_replay_create(&bad, &b, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "T = 8") != NULL, "%s", err.msg);
    bad.steps = STEPS;
    bad.max_size = CAP / 2;
    CHECK_EQ_INT(gb_replay_create(&bad, &b, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "max_size") != NULL, "%s", err.msg);
    CHECK(b == NULL);

    /* The right options find the ten items; the write in flight and the pins are undone. */
    CHECK_OK(gb_replay_create(&o, &b, &err));
    gb_replay_recovery_get(b, &rec);
    CHECK_EQ_INT(rec.attached, 1);
    CHECK_EQ_INT(rec.kept, 10);
    CHECK_EQ_INT(rec.dropped_in_flight, 1);
    gb_replay_stats st;
    gb_replay_stats_get(b, &st);
    CHECK_EQ_INT(st.size, 10);
    CHECK_EQ_INT(st.samples, 4); /* the counter is in the segment */
    CHECK_EQ_INT(st.free_blocks, CAP - 10);
    gb_replay_status v;
    gb_replay_status_view(b, &v);
    int64_t sampled = 0, pinned = 0;
    for (int64_t k = 0; k < v.size; k++) {
        sampled += v.item[v.live[k]].times_sampled;
        pinned += v.item[v.live[k]].pins;
    }
    CHECK_EQ_INT(sampled, 4);
    CHECK_EQ_INT(pinned, 0);
    CHECK_OK(gb_replay_unlink(b, &err));
    CHECK_EQ_INT(gb_replay_unlink(b, &err), GB_ENOTFOUND);
    gb_replay_free(b);
    b = NULL;
    CHECK_EQ_INT(gb_replay_attach(&o, &b, &err), GB_ENOTFOUND);

    /* A segment of that name that is not a replay's: refused, left alone. */
    gb_shm junk;
    CHECK_OK(gb_shm_create(&junk, 1 << 20, seg_name, 0, &err));
    memset(junk.base, 0x5a, 4096);
    CHECK_EQ_INT(gb_replay_create(&o, &b, &err), GB_ECORRUPT);
    CHECK_MSG(strstr(err.msg, "not a replay segment") != NULL, "%s", err.msg);
    /* One whose creator died before publishing its header (magic 0): made anew. */
    memset(junk.base, 0, 4096);
    CHECK_OK(gb_replay_create(&o, &b, &err));
    gb_replay_recovery_get(b, &rec);
    CHECK_EQ_INT(rec.attached, 0);
    gb_shm_free(&junk); /* unlinks the name the replay now owns: fine, it is mapped */
    gb_replay_free(b);
}

/* Run-owned names: stable per run directory, distinct across directories, all removed by
 * gb_shm_unlink_run. */
int main(void)
{
    snprintf(seg_name, sizeof seg_name, "/gearbox-test-attach-%d", (int)getpid());
    shm_unlink(seg_name);
    TEST_RUN(test_attach_checks);
    TEST_RUN(test_crash_and_attach);
    shm_unlink(seg_name);
    return test_main_result();
}
