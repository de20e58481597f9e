/* tests/launch/test_supervisor_stop.c: gb_supervisor_stop_all with a busy child (a trainer
 * writing its checkpoint, launch/run_drain.c): it is waited for past the grace and not killed;
 * a child that is not busy is killed at the grace as before; one busy for longer than
 * busy_max_s is killed then. The children ignore SIGTERM, as a worker in a long fsync does not
 * get to act on it. */
#include "launch/supervisor.h"
#include "runtime/base/clock.h"
#include "test.h"

#include <sys/wait.h>
#include <unistd.h>

static double t0;

/* "writing" for the first 2 s: the child named 0; always: the child named 2 */
static const char *busy(void *arg, const gb_child *c)
{
    (void)arg;
    return c->index == 2 || (c->index == 0 && gb_now_s() - t0 < 2.0) ? "its checkpoint" : NULL;
}

static void spawn(gb_supervisor *s, int index, const char *script, const char *dir)
{
    char log[512];
    snprintf(log, sizeof log, "%s/child-%d.log", dir, index);
    char *const argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    gb_error err = {0};
    CHECK_MSG(gb_supervisor_spawn(s, "trainer", index, argv, log, &err) == 0, "%s", err.msg);
}

int main(void)
{
    char dir[] = "/tmp/gb_supervisor_stop_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static gb_supervisor s; /* large: 1024 children */
    spawn(&s, 0, "trap '' TERM; sleep 2.5; exit 0", dir); /* busy 2 s, then ends by itself */
    spawn(&s, 1, "trap '' TERM; sleep 30", dir);         /* never busy, never ends */
    spawn(&s, 2, "trap '' TERM; sleep 30", dir);         /* busy for ever */
    s.busy = busy;
    s.busy_max_s = 5.0; /* margins of 1.5 s and more for a loaded machine (CI runs tests at once) */
    usleep(200 * 1000); /* the shells set their traps */
    t0 = gb_now_s();
    int killed = gb_supervisor_stop_all(&s, 0.3);
    double took = gb_now_s() - t0;
    CHECK_EQ_INT(killed, 2);
    CHECK(!s.children[0].killed && WIFEXITED(s.children[0].status) &&
          WEXITSTATUS(s.children[0].status) == 0);
    CHECK(s.children[1].killed && s.children[2].killed);
    /* child 0 ends 2.5 s after its start (busy until 2 s, then 2 s to settle: until 4 s); child 2
     * is cut at 0.3 + 5 s */
    CHECK_MSG(took >= 5.2 && took < 20, "took %.2f s", took);
    CHECK_EQ_INT(gb_supervisor_running(&s), 0);
    /* without busy: the grace alone, as before */
    gb_supervisor q = {0};
    spawn(&q, 0, "trap '' TERM; sleep 30", dir);
    usleep(200 * 1000);
    t0 = gb_now_s();
    CHECK_EQ_INT(gb_supervisor_stop_all(&q, 0.3), 1);
    CHECK_MSG(gb_now_s() - t0 < 5, "took %.2f s", gb_now_s() - t0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return test_main_result();
}
