/* tests/runtime/streams/test_registry.c: the endpoint registry served from a launcher thread,
 * workers in their own processes registering, looking up with a timeout, listing by prefix; a
 * killed worker disappears after its TTL; a clean close unregisters; endpoint helpers. Run control
 * on the registry's socket: workers learn each move of the run's state within a few poll periods,
 * confirmations reach the launcher, an actor's stop flag is set when the run starts flushing,
 * waiting for the release times out before it and returns after it, the state never goes back,
 * a late client learns the state at once, a malformed watch is answered and counted, and the
 * registry keeps serving beside it. gearbox join's request for a slot and the run's config;
 * wildcard endpoints published as reachable names; a joined worker stops once its launcher is
 * silent. */
#include "runtime/streams/endpoint.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

typedef struct reg_thread {
    gb_registry_server *s;
    atomic_int stop;
    int rc;
} reg_thread;

static void *reg_run(void *arg)
{
    reg_thread *t = arg;
    gb_error err;
    t->rc = gb_registry_server_run(t->s, &t->stop, &err);
    return NULL;
}

typedef struct worker_arg {
    char registry[256];
    int index;
    int delay_ms;  /* before registering */
    int linger_ms; /* alive after registering, then a clean close */
} worker_arg;

static int worker_main(void *arg)
{
    worker_arg *a = arg;
    gb_error err;
    gb_sleep_ms(a->delay_ms);
    void *ctx = zmq_ctx_new();
    gb_registry_client_opts o = {a->registry, 2000, 100, 600, GB_ROLE_POLICY, a->index};
    gb_registry_client *c;
    if (gb_registry_client_open(&c, ctx, &o, &err)) {
        fprintf(stderr, "worker: %s\n", err.msg);
        return 3;
    }
    char name[64], ep[128];
    snprintf(name, sizeof name, "policy/%d/inference", a->index);
    snprintf(ep, sizeof ep, "ipc:///run/x/policy-%d", a->index);
    if (gb_registry_register(c, name, ep, &err)) {
        fprintf(stderr, "worker register: %s\n", err.msg);
        return 4;
    }
    /* the worker can find the trainer the test registered */
    char found[256];
    if (gb_registry_lookup(c, "trainer/0/sample", found, sizeof found, 5000, &err) ||
        strcmp(found, "tcp://10.1.2.3:5555") != 0) {
        fprintf(stderr, "worker lookup: %s\n", err.msg);
        return 5;
    }
    gb_sleep_ms(a->linger_ms);
    gb_registry_client_close(c);
    zmq_ctx_term(ctx);
    return 0;
}

static int count_prefix(gb_registry_client *c, const char *prefix)
{
    gb_registry_entry *e;
    int n;
    gb_error err;
    if (gb_registry_list(c, prefix, 0, 2000, &e, &n, &err))
        return -1;
    free(e);
    return n;
}

/* Names gone (expired or unregistered) keep their last endpoint for lookup_last. */
static void registry_kept(gb_registry_client *c)
{
    gb_error err;
    char found[256];
    /* gone, but the registry keeps where they were: worker 1 expired, worker 0 unregistered;
     * a name never registered stays unknown */
    CHECK_OK(gb_registry_lookup_last(c, "policy/1/inference", found, sizeof found, &err));
    CHECK(strcmp(found, "ipc:///run/x/policy-1") == 0);
    CHECK_OK(gb_registry_lookup_last(c, "policy/0/inference", found, sizeof found, &err));
    CHECK(strcmp(found, "ipc:///run/x/policy-0") == 0);
    CHECK(gb_registry_lookup_last(c, "policy/9/inference", found, sizeof found, &err) ==
          GB_ENOTFOUND);
    CHECK(gb_registry_lookup(c, "policy/1/inference", found, sizeof found, 100, &err) ==
          GB_ETIMEOUT); /* an ordinary lookup does not see them */
    /* registered again elsewhere: the live endpoint wins over the kept one */
    CHECK_OK(gb_registry_register(c, "policy/1/inference", "ipc:///run/x/policy-1b", &err));
    CHECK_OK(gb_registry_lookup_last(c, "policy/1/inference", found, sizeof found, &err));
    CHECK(strcmp(found, "ipc:///run/x/policy-1b") == 0);
    CHECK_OK(gb_registry_unregister(c, "policy/1/inference", &err));
    CHECK_OK(gb_registry_lookup_last(c, "policy/1/inference", found, sizeof found, &err));
    CHECK(strcmp(found, "ipc:///run/x/policy-1b") == 0);
}

/* Bad input to the registry is rejected with GB_EPROTO; the server goes on. */
static void registry_bad_input(void *ctx, const char *ep, gb_registry_client *c)
{
    gb_error err;
    CHECK(gb_registry_register(c, "", "x", &err) == GB_EINVAL);
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    zmq_connect(raw, ep);
    zmq_send(raw, "garbage", 7, 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_REG_REGISTER, GB_ROLE_ACTOR, 0);
    h.seq = 5;
    CHECK_OK(gb_wire_send(raw, NULL, 0, &h, NULL, 0, &err)); /* no name, no endpoint */
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_wire_recv(raw, &m, 0, 0, &err));
    CHECK_EQ_INT(m.hdr.status, GB_EPROTO);
    gb_wire_msg_release(&m);
    zmq_close(raw);
}

static void test_registry_processes(void)
{
    gb_error err;
    char dir[64], ep[256];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/registry", dir);
    /* workers are forked before the launcher creates its ZeroMQ context */
    static worker_arg wa[3];
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        snprintf(wa[i].registry, sizeof wa[i].registry, "%s", ep);
        wa[i].index = i;
        wa[i].delay_ms = 300 + 100 * i; /* start after the launcher looks them up */
        wa[i].linger_ms = i == 1 ? 60000 : 1500;
        pids[i] = st_fork(worker_main, &wa[i]);
    }
    void *ctx = zmq_ctx_new();
    gb_registry_server_opts so = {.endpoint = ep, .max_ttl_ms = 10000};
    reg_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_registry_server_open(&t.s, ctx, &so, &err));
    pthread_t th;
    pthread_create(&th, NULL, reg_run, &t);
    gb_registry_client_opts co = {ep, 2000, 100, 600, GB_ROLE_LAUNCHER, 0};
    gb_registry_client *c;
    CHECK_OK(gb_registry_client_open(&c, ctx, &co, &err));
    CHECK_OK(gb_registry_register(c, "trainer/0/sample", "tcp://10.1.2.3:5555", &err));
    /* lookup waits for a worker that registers later */
    char found[256];
    CHECK_OK(gb_registry_lookup(c, "policy/2/inference", found, sizeof found, 10000, &err));
    CHECK(strcmp(found, "ipc:///run/x/policy-2") == 0);
    gb_registry_entry *e;
    int n;
    CHECK_OK(gb_registry_list(c, "policy/", 3, 10000, &e, &n, &err));
    CHECK_EQ_INT(n, 3);
    for (int i = 0; i < n && n == 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "ipc:///run/x/policy-%d", i);
        CHECK(strcmp(e[i].endpoint, want) == 0); /* sorted by name */
    }
    free(e);
    /* timeouts name what is missing */
    int rc = gb_registry_lookup(c, "policy/9/inference", found, sizeof found, 300, &err);
    CHECK_EQ_INT(rc, GB_ETIMEOUT);
    CHECK(strstr(err.msg, "policy/9/inference") != NULL);
    rc = gb_registry_list(c, "policy/", 5, 300, &e, &n, &err);
    CHECK_EQ_INT(rc, GB_ETIMEOUT);
    CHECK(strstr(err.msg, "3 of 5") != NULL);
    /* kill worker 1 without a goodbye: it is gone within its TTL (600 ms) plus slack; workers 0
     * and 2 close cleanly and unregister */
    gb_sleep_ms(500);
    kill(pids[1], SIGKILL);
    CHECK_EQ_INT(st_wait(pids[1]), 128 + SIGKILL);
    CHECK_EQ_INT(st_wait(pids[0]), 0);
    CHECK_EQ_INT(st_wait(pids[2]), 0);
    double end = gb_now_s() + 10;
    int left = -1;
    while (gb_now_s() < end && (left = count_prefix(c, "policy/")) != 0)
        gb_sleep_ms(50);
    CHECK_EQ_INT(left, 0);
    registry_kept(c);
    /* the launcher's own name stays alive through its heartbeats, well past the TTL */
    gb_sleep_ms(1500);
    CHECK_OK(gb_registry_lookup(c, "trainer/0/sample", found, sizeof found, 100, &err));
    CHECK_OK(gb_registry_unregister(c, "trainer/0/sample", &err));
    CHECK_EQ_INT(count_prefix(c, ""), 0);
    CHECK(gb_registry_unregister(c, "trainer/0/sample", &err) == GB_ENOTFOUND);
    registry_bad_input(ctx, ep, c);
    CHECK_OK(gb_registry_register(c, "still/serving", "ipc:///x", &err));
    gb_registry_client_close(c);
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    CHECK_EQ_INT(t.rc, 0);
    CHECK(gb_registry_server_rejected(t.s) >= 2); /* read once the serving thread stopped */
    CHECK_EQ_INT(gb_registry_server_count(t.s), 0); /* the close unregistered it */
    gb_registry_server_close(t.s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

static void test_endpoints(void)
{
    gb_error err;
    char out[256], dir[64];
    st_tmpdir(dir, sizeof dir);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 0, dir, NULL, "policy/0/inference", &err));
    char want[256];
    snprintf(want, sizeof want, "ipc://%s/sockets/policy-0-inference", dir);
    CHECK(strcmp(out, want) == 0);
    char longdir[300];
    memset(longdir, 'a', 120);
    char as[111];
    memset(as, 'a', 110);
    as[110] = '\0';
    snprintf(longdir, sizeof longdir, "/tmp/%s", as);
    mkdir(longdir, 0700);
    CHECK(gb_endpoint_make(out, sizeof out, 0, longdir, NULL, "policy/0/inference", &err) ==
          GB_EINVAL);
    CHECK(strstr(err.msg, "107") != NULL);
    char sockets[400];
    snprintf(sockets, sizeof sockets, "%s/sockets", longdir);
    rmdir(sockets);
    rmdir(longdir);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 1, dir, "127.0.0.1", "x", &err));
    CHECK(strcmp(out, "tcp://127.0.0.1:*") == 0);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 1, dir, "lo", "x", &err));
    CHECK(strcmp(out, "tcp://127.0.0.1:*") == 0);
    CHECK(gb_endpoint_make(out, sizeof out, 1, dir, "nosuchif0", "x", &err) == GB_ENOTFOUND);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 1, dir, "*", "x", &err));
    CHECK(strcmp(out, "tcp://*:*") == 0);
    /* binding and connecting with what the helpers produce */
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_PULL);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 1, dir, "*", "x", &err));
    CHECK(zmq_bind(s, out) == 0);
    char bound[256], conn[256];
    size_t len = sizeof bound;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, bound, &len);
    CHECK_OK(gb_endpoint_connectable(bound, conn, sizeof conn, &err));
    CHECK(strncmp(conn, "tcp://0.0.0.0", 13) != 0 && strncmp(conn, "tcp://", 6) == 0);
    CHECK_OK(gb_endpoint_connectable("ipc:///a/b", conn, sizeof conn, &err));
    CHECK(strcmp(conn, "ipc:///a/b") == 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* Seconds until every client's state is at least state (or -1 after max_s). */
static double until_all(gb_runctl_client **c, int n, gb_run_state state, double max_s)
{
    double t0 = gb_now_s();
    while (gb_now_s() - t0 < max_s) {
        int all = 1;
        for (int i = 0; i < n; i++)
            all = all && gb_runctl_client_state(c[i]) >= state;
        if (all)
            return gb_now_s() - t0;
        gb_sleep_ms(1);
    }
    return -1;
}

static int until_confirmed(const gb_runctl_server *s, int role, gb_run_state state, int want,
                           double max_s)
{
    for (double end = gb_now_s() + max_s; gb_now_s() < end; gb_sleep_ms(2))
        if (gb_runctl_server_confirmed(s, role, state) >= want)
            return 1;
    return gb_runctl_server_confirmed(s, role, state) >= want;
}

/* The run's state moves forward through its stages and reaches the clients c[0..2] (two
 * trainers and an actor that stops at flushing), then a client that starts late. */
static void runctl_moves(gb_runctl_server *rs, gb_runctl_client **c, atomic_int *stops,
                         void *ctx, const char *ep)
{
    gb_error err;
    /* ending reaches every worker within a few poll periods */
    CHECK_EQ_INT(gb_runctl_server_set(rs, GB_RUN_ENDING), GB_RUN_ENDING);
    double took = until_all(c, 3, GB_RUN_ENDING, 2.0);
    printf("  ending heard by 3 clients in %.1f ms\n", 1e3 * took);
    CHECK(took >= 0 && took < 0.25);
    gb_runctl_client_confirm(c[0], GB_RUN_ENDING);
    gb_runctl_client_confirm(c[1], GB_RUN_ENDING);
    gb_runctl_client_confirm(c[1], GB_RUN_RUNNING); /* an earlier state: no-op */
    CHECK(until_confirmed(rs, GB_ROLE_TRAINER, GB_RUN_ENDING, 2, 1.0));
    CHECK_EQ_INT(gb_runctl_server_confirmed(rs, GB_ROLE_ACTOR, GB_RUN_ENDING), 0);
    CHECK_EQ_INT(atomic_load(&stops[2]), 0);

    /* flushing stops the actor, not the trainers */
    gb_runctl_server_set(rs, GB_RUN_FLUSHING);
    CHECK(until_all(c, 3, GB_RUN_FLUSHING, 2.0) >= 0);
    CHECK_EQ_INT(atomic_load(&stops[2]), 1);
    CHECK_EQ_INT(atomic_load(&stops[0]) + atomic_load(&stops[1]), 0);
    gb_runctl_client_confirm(c[2], GB_RUN_FLUSHING);
    CHECK(until_confirmed(rs, GB_ROLE_ACTOR, GB_RUN_FLUSHING, 1, 1.0));
    CHECK_EQ_INT(gb_runctl_client_wait(c[2], GB_RUN_RELEASED, 0.1), 0);

    /* drained, released; the state never goes back */
    gb_runctl_server_set(rs, GB_RUN_DRAINED);
    gb_runctl_server_set(rs, GB_RUN_RELEASED);
    CHECK_EQ_INT(gb_runctl_client_wait(c[2], GB_RUN_RELEASED, 2.0), 1);
    CHECK_EQ_INT(gb_runctl_server_set(rs, GB_RUN_ENDING), GB_RUN_RELEASED);
    CHECK_EQ_INT(gb_runctl_server_state(rs), GB_RUN_RELEASED);

    /* a client that starts late learns the state at once */
    gb_runctl_server_set_env_steps(rs, 777); /* and the clock with it (a restarted worker) */
    gb_runctl_client_opts lo = {.endpoint = ep, .role = GB_ROLE_POLICY, .index = 0};
    gb_runctl_client *late;
    CHECK_OK(gb_runctl_client_open(&late, ctx, &lo, &err));
    took = until_all(&late, 1, GB_RUN_RELEASED, 2.0);
    CHECK(took >= 0 && took < 0.5);
    CHECK(gb_runctl_client_env_steps(late) == 777);
    gb_runctl_client_close(late);

}

/* A malformed watch is answered with GB_EPROTO naming the sender and the attribute. */
static void runctl_malformed(void *ctx, const char *ep)
{
    gb_error err;
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(raw, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(raw, ep);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_RUN_WATCH, GB_ROLE_ACTOR, 7);
    h.seq = 9;
    CHECK_OK(gb_wire_attr_set_int(&h, "known", 0, &err));
    CHECK_OK(gb_wire_attr_set_int(&h, "confirmed", 42, &err)); /* no such state */
    CHECK_OK(gb_wire_send(raw, NULL, 0, &h, NULL, 0, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_wire_recv(raw, &m, 0, 0, &err));
    CHECK_EQ_INT(m.hdr.type, GB_MSG_RUN_STATE);
    CHECK_EQ_INT(m.hdr.status, GB_EPROTO);
    CHECK_EQ_INT(m.hdr.seq, 9);
    CHECK(strstr(m.hdr.text, "run_watch from actor 7") && strstr(m.hdr.text, "'confirmed'"));
    gb_wire_msg_release(&m);
    zmq_close(raw);
}

static void test_runctl(void)
{
    gb_error err;
    char dir[64], ep[256];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/registry", dir);
    void *ctx = zmq_ctx_new();
    gb_runctl_server *rs;
    CHECK_OK(gb_runctl_server_open(&rs, &err));
    CHECK_EQ_INT(gb_runctl_server_state(rs), GB_RUN_RUNNING);
    gb_registry_server_opts so = {.endpoint = ep, .max_ttl_ms = 10000, .runctl = rs};
    reg_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_registry_server_open(&t.s, ctx, &so, &err));
    pthread_t th;
    pthread_create(&th, NULL, reg_run, &t);

    /* two trainers and an actor; only the actor stops on flushing */
    atomic_int stops[3];
    gb_runctl_client *c[3];
    for (int i = 0; i < 3; i++) {
        atomic_init(&stops[i], 0);
        gb_runctl_client_opts o = {.endpoint = ep,
                                   .role = i < 2 ? GB_ROLE_TRAINER : GB_ROLE_ACTOR,
                                   .index = i < 2 ? i : 0,
                                   .stop = &stops[i],
                                   .stop_at = i < 2 ? GB_RUN_RUNNING : GB_RUN_FLUSHING};
        CHECK_OK(gb_runctl_client_open(&c[i], ctx, &o, &err));
    }
    gb_runctl_client_opts bad = {.endpoint = ep, .stop_at = GB_RUN_STATE_END};
    gb_runctl_client *none = NULL;
    CHECK(gb_runctl_client_open(&none, ctx, &bad, &err) == GB_EINVAL && none == NULL);
    gb_sleep_ms(200); /* every watch is held now */
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(gb_runctl_client_state(c[i]), GB_RUN_RUNNING);
    CHECK_EQ_INT(gb_runctl_server_confirmed(rs, GB_ROLE_TRAINER, GB_RUN_ENDING), 0);

    /* the run's env-step clock reaches the workers with the next answer (at most a hold) */
    gb_runctl_server_set_env_steps(rs, 12345);
    for (int tries = 0; tries < 300 && gb_runctl_client_env_steps(c[0]) != 12345; tries++)
        usleep(10000);
    CHECK(gb_runctl_client_env_steps(c[0]) == 12345);
    CHECK(gb_runctl_client_env_steps(NULL) == 0);

    /* a checkpoint request reaches the workers at once: held watches are answered with it */
    gb_sleep_ms(50);
    CHECK(gb_runctl_client_checkpoints(c[0]) == 0 && gb_runctl_client_checkpoints(NULL) == 0);
    CHECK(gb_runctl_server_request_checkpoint(rs) == 1);
    double t0 = gb_now_s();
    while (gb_runctl_client_checkpoints(c[0]) != 1 && gb_now_s() - t0 < 2.0)
        gb_sleep_ms(1);
    printf("  a checkpoint request heard in %.1f ms\n", 1e3 * (gb_now_s() - t0));
    CHECK(gb_runctl_client_checkpoints(c[0]) == 1 && gb_now_s() - t0 < 0.25);

    /* a held request: the hold comes with its count (never the count without it), at once;
     * a release likewise */
    CHECK(gb_runctl_client_hold(c[0]) == 0 && gb_runctl_client_hold(NULL) == 0);
    CHECK(gb_runctl_server_request_hold(rs) == 2);
    t0 = gb_now_s();
    int64_t asked = 0;
    while ((asked = gb_runctl_client_checkpoints(c[1])) != 2 && gb_now_s() - t0 < 2.0)
        gb_sleep_ms(1);
    /* the count read first, as trainers do: its hold is there with it */
    CHECK(asked == 2 && gb_runctl_client_hold(c[1]) == 2 && gb_now_s() - t0 < 0.25);
    gb_runctl_server_release(rs);
    t0 = gb_now_s();
    while (gb_runctl_client_hold(c[1]) != 0 && gb_now_s() - t0 < 2.0)
        gb_sleep_ms(1);
    CHECK(gb_runctl_client_hold(c[1]) == 0 && gb_runctl_client_checkpoints(c[1]) == 2 &&
          gb_now_s() - t0 < 0.25);

    /* the registry serves beside the held watches */
    gb_registry_client_opts co = {ep, 2000, 0, 600, GB_ROLE_LAUNCHER, 0};
    gb_registry_client *reg;
    CHECK_OK(gb_registry_client_open(&reg, ctx, &co, &err));
    CHECK_OK(gb_registry_register(reg, "trainer/0/sample", "ipc:///x", &err));
    char found[64];
    CHECK_OK(gb_registry_lookup(reg, "trainer/0/sample", found, sizeof found, 1000, &err));

    runctl_moves(rs, c, stops, ctx, ep);
    runctl_malformed(ctx, ep); /* counted (below); the server goes on */
    CHECK_OK(gb_registry_lookup(reg, "trainer/0/sample", found, sizeof found, 1000, &err));

    CHECK(strcmp(gb_run_state_name(GB_RUN_DRAINED), "drained") == 0);
    CHECK(strcmp(gb_run_state_name(GB_RUN_STATE_END), "invalid") == 0);
    gb_registry_client_close(reg);
    for (int i = 0; i < 3; i++)
        gb_runctl_client_close(c[i]);
    gb_runctl_client_close(NULL);
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    CHECK_EQ_INT(t.rc, 0);
    CHECK(gb_registry_server_rejected(t.s) >= 1);
    gb_registry_server_close(t.s);
    gb_runctl_server_close(rs);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* The launcher's side of gearbox join, as a test gives it: slots 3 and 4, then none. */
typedef struct join_slots {
    int next, end;
    int again; /* incarnations given to slots asked for again */
} join_slots;

static int give_slot(void *arg, int role, int again, int proven, gb_registry_join_reply *out,
                     char *why, size_t cap)
{
    join_slots *j = arg;
    if (again >= 0 && (again >= j->next || !proven)) {
        snprintf(why, cap, "slot %d was never given", again);
        return GB_EINVAL;
    }
    if (again < 0 && (role != GB_ROLE_ACTOR || j->next >= j->end)) {
        snprintf(why, cap, "no slot left");
        return GB_EFULL;
    }
    out->index = again >= 0 ? again : j->next++;
    out->incarnation = again >= 0 ? ++j->again : 0;
    snprintf(out->metrics, sizeof out->metrics, "tcp://10.9.9.9:4000");
    snprintf(out->run, sizeof out->run, "/runs/x");
    out->config = "experiment:\n  name: joined\n";
    out->config_len = strlen(out->config);
    return 0;
}

/* gearbox join's request: a slot with the run's config, metrics endpoint and identity, over
 * real sockets; refused when the slots are gone or the launcher takes no joins. A socket bound
 * to every interface is published as a name peers can connect to, never 0.0.0.0. A worker whose
 * launcher went silent stops (lost_after_ms). */
static void test_join(void)
{
    gb_error err;
    void *ctx = zmq_ctx_new();
    join_slots slots = {3, 5, 0};
    gb_registry_server_opts so = {.endpoint = "tcp://127.0.0.1:*", .max_ttl_ms = 10000,
                                  .join = give_slot, .join_arg = &slots};
    reg_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_registry_server_open(&t.s, ctx, &so, &err));
    char ep[256];
    snprintf(ep, sizeof ep, "%s", gb_registry_server_endpoint(t.s));
    CHECK(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
    pthread_t th;
    pthread_create(&th, NULL, reg_run, &t);
    /* registrations live 5 s (with a ttl of 1 ms the lookup below found the name gone once,
     * on a loaded machine) */
    gb_registry_client_opts co = {ep, 2000, 0, 5000, GB_ROLE_ACTOR, 0};
    gb_registry_client *c;
    CHECK_OK(gb_registry_client_open(&c, ctx, &co, &err));
    gb_registry_join_reply r;
    for (int i = 3; i < 5; i++) {
        CHECK_OK(gb_registry_join(c, GB_ROLE_ACTOR, &r, &err));
        CHECK_EQ_INT(r.index, i);
        CHECK_EQ_INT(r.incarnation, 0);
        CHECK(strcmp(r.metrics, "tcp://10.9.9.9:4000") == 0);
        CHECK(strcmp(r.run, "/runs/x") == 0);
        CHECK(r.config && strcmp(r.config, "experiment:\n  name: joined\n") == 0);
        gb_registry_join_reply_free(&r);
    }
    CHECK_EQ_INT(gb_registry_join(c, GB_ROLE_ACTOR, &r, &err), GB_EFULL);
    CHECK(strstr(err.msg, "no slot left") != NULL);
    CHECK_EQ_INT(gb_registry_join(c, GB_ROLE_TRAINER, &r, &err), GB_EFULL);
    /* a slot asked for again (its worker restarted): the same index, the next incarnation */
    CHECK_OK(gb_registry_join_again(c, GB_ROLE_ACTOR, 3, &r, &err));
    CHECK_EQ_INT(r.index, 3);
    CHECK_EQ_INT(r.incarnation, 1);
    gb_registry_join_reply_free(&r);
    CHECK_EQ_INT(gb_registry_join_again(c, GB_ROLE_ACTOR, 9, &r, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "never given") != NULL);

    CHECK_OK(gb_registry_register(c, "policy/0/inference", "tcp://0.0.0.0:5555", &err));
    char got[256];
    CHECK_OK(gb_registry_lookup(c, "policy/0/inference", got, sizeof got, 1000, &err));
    CHECK(strncmp(got, "tcp://0.0.0.0", 13) != 0 && strstr(got, ":5555") != NULL);
    gb_registry_client_close(c);
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    gb_registry_server_close(t.s);

    /* a launcher that takes no joins says so */
    gb_registry_server_opts plain = {.endpoint = "tcp://127.0.0.1:*", .max_ttl_ms = 10000};
    reg_thread t2 = {0};
    atomic_init(&t2.stop, 0);
    CHECK_OK(gb_registry_server_open(&t2.s, ctx, &plain, &err));
    snprintf(ep, sizeof ep, "%s", gb_registry_server_endpoint(t2.s));
    pthread_create(&th, NULL, reg_run, &t2);
    co.endpoint = ep;
    CHECK_OK(gb_registry_client_open(&c, ctx, &co, &err));
    CHECK_EQ_INT(gb_registry_join(c, GB_ROLE_ACTOR, &r, &err), GB_EUNSUPPORTED);
    gb_registry_client_close(c);
    atomic_store(&t2.stop, 1);
    pthread_join(th, NULL);

    /* run control: with the launcher answering, no stop; once it is gone, the stop flag */
    atomic_int stop;
    atomic_init(&stop, 0);
    gb_runctl_server *rs;
    CHECK_OK(gb_runctl_server_open(&rs, &err));
    gb_registry_server_close(t2.s);
    gb_registry_server_opts ctl = {.endpoint = "tcp://127.0.0.1:*", .max_ttl_ms = 10000,
                                   .runctl = rs};
    reg_thread t3 = {0};
    atomic_init(&t3.stop, 0);
    CHECK_OK(gb_registry_server_open(&t3.s, ctx, &ctl, &err));
    snprintf(ep, sizeof ep, "%s", gb_registry_server_endpoint(t3.s));
    pthread_create(&th, NULL, reg_run, &t3);
    gb_runctl_client_opts ro = {.endpoint = ep, .role = GB_ROLE_ACTOR, .stop = &stop,
                                .stop_at = GB_RUN_FLUSHING, .lost_after_ms = 3000};
    gb_runctl_client *rc;
    CHECK_OK(gb_runctl_client_open(&rc, ctx, &ro, &err));
    gb_sleep_ms(2000); /* answered every GB_RUNCTL_HOLD_MS: not lost */
    CHECK_EQ_INT(atomic_load(&stop), 0);
    atomic_store(&t3.stop, 1);
    pthread_join(th, NULL);
    gb_registry_server_close(t3.s); /* the launcher is gone */
    TEST_WAIT_UNTIL(atomic_load(&stop) == 1, 8000);
    CHECK_EQ_INT(atomic_load(&stop), 1);
    CHECK_EQ_INT(gb_runctl_client_state(rc), GB_RUN_RUNNING);
    gb_runctl_client_close(rc);
    gb_runctl_server_close(rs);
    zmq_ctx_term(ctx);
}

int main(void)
{
    TEST_RUN(test_registry_processes);
    TEST_RUN(test_endpoints);
    TEST_RUN(test_runctl);
    TEST_RUN(test_join);
    return test_main_result();
}
