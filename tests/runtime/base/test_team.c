/* tests/runtime/base/test_team.c: a fork-join team (runtime/base/team.h) runs every part of a
 * job exactly once, however many parts and threads, job after job (a helper that wakes late takes
 * nothing from the next job); what the parts wrote is the caller's to read when the job returns
 * (ThreadSanitizer checks that in CI); a team of one, or none, runs the parts on the caller;
 * a team of no threads is refused. */
#include "runtime/base/team.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

enum { MAXP = 64 };

typedef struct job {
    _Atomic int runs[MAXP];
    int written[MAXP]; /* plain stores: the join must order them before the caller's reads */
    int bad_parts;     /* a part told another job's count (one writer per part: its own) */
    int want_parts;
    pthread_t caller;
    _Atomic int on_caller;
} job;

static void part(void *arg, int p, int parts)
{
    job *j = arg;
    atomic_fetch_add(&j->runs[p], 1);
    j->written[p] = p * 7 + 1;
    if (parts != j->want_parts)
        j->bad_parts = 1;
    if (pthread_equal(pthread_self(), j->caller))
        atomic_fetch_add(&j->on_caller, 1);
}

/* runs `jobs` jobs of varied part counts on t; 1 when every part ran once and its write is seen */
static int run_jobs(gb_team *t, int jobs)
{
    static job j;
    int ok = 1;
    for (int k = 0; k < jobs && ok; k++) {
        const int parts = 1 + (k * 5) % MAXP;
        memset(&j, 0, sizeof j);
        j.want_parts = parts;
        j.caller = pthread_self();
        gb_team_run(t, parts, part, &j);
        for (int p = 0; p < MAXP; p++) {
            const int want = p < parts;
            ok &= atomic_load(&j.runs[p]) == want && j.written[p] == (want ? p * 7 + 1 : 0);
        }
        ok &= !j.bad_parts;
    }
    return ok;
}

static void test_every_part_once(void)
{
    for (int n = 1; n <= 4; n++) {
        gb_team *t = NULL;
        gb_error err = {0};
        CHECK_OK(gb_team_open(n, &t, &err));
        CHECK(gb_team_threads(t) == n);
        CHECK(run_jobs(t, 3000));
        gb_team_close(t);
    }
}

static void test_without_helpers(void)
{
    static job j;
    j.want_parts = 5;
    j.caller = pthread_self();
    gb_team_run(NULL, 5, part, &j); /* no team: the caller runs each part */
    CHECK(atomic_load(&j.on_caller) == 5);
    CHECK(gb_team_threads(NULL) == 1);
    gb_team *t = NULL;
    gb_error err = {0};
    CHECK_OK(gb_team_open(1, &t, &err));
    memset(&j, 0, sizeof j);
    j.want_parts = 3;
    j.caller = pthread_self();
    gb_team_run(t, 3, part, &j);
    CHECK(atomic_load(&j.on_caller) == 3);
    gb_team_close(t);
    gb_team_close(NULL);
}

static void test_refuses_none(void)
{
    gb_team *t = (gb_team *)&t;
    gb_error err = {0};
    CHECK(gb_team_open(0, &t, &err) == GB_EINVAL);
    CHECK(t == NULL);
    CHECK(strstr(err.msg, "threads must be >= 1") != NULL);
}

/* a team opened and closed without a job, and one closed at once after its jobs */
static void test_close(void)
{
    gb_team *t = NULL;
    gb_error err = {0};
    CHECK_OK(gb_team_open(3, &t, &err));
    gb_team_close(t);
    CHECK_OK(gb_team_open(2, &t, &err));
    CHECK(run_jobs(t, 10));
    gb_team_close(t);
}

int main(void)
{
    TEST_RUN(test_every_part_once);
    TEST_RUN(test_without_helpers);
    TEST_RUN(test_refuses_none);
    TEST_RUN(test_close);
    return test_main_result();
}
