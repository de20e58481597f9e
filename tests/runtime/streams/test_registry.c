/* tests/runtime/streams/test_registry.c: the endpoint registry served from a launcher thread,
 * workers in their own processes registering, looking up with a timeout, listing by prefix; a
 * killed worker disappears after its TTL; a clean close unregisters; endpoint helpers. gearbox
 * join's request for a slot and the run's config; wildcard endpoints published as reachable
 * names; a joined worker stops once its launcher is silent. (Run control on the registry's
 * socket: test_runctl.c.) */
#include "runtime/base/shm.h"
#include "runtime/streams/endpoint.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"
#include "registry_thread.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


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
    gb_registry_client_opts o = {a->registry, 2000, 100, 2000, GB_ROLE_POLICY, a->index};
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
        /* long enough that the "3 of 5" listing below sees them all on a loaded machine */
        wa[i].linger_ms = i == 1 ? 60000 : 3000;
        pids[i] = st_fork(worker_main, &wa[i]);
    }
    void *ctx = zmq_ctx_new();
    gb_registry_server_opts so = {.endpoint = ep, .max_ttl_ms = 10000};
    reg_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_registry_server_open(&t.s, ctx, &so, &err));
    pthread_t th;
    pthread_create(&th, NULL, reg_run, &t);
    /* TTLs of 2 s: a sanitized build at nice 19 on 2 busy cores can miss heartbeats for over
     * half a second, which must not expire a live name mid-test */
    gb_registry_client_opts co = {ep, 2000, 100, 2000, GB_ROLE_LAUNCHER, 0};
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
    /* kill worker 1 without a goodbye: it is gone within its TTL (2 s) plus slack; workers 0
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
    gb_sleep_ms(3000);
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
    /* a run folder too deep for socket paths: the sockets go to a short folder named after the
     * run id, <run>/sockets links to it, and a socket bound there takes connections */
    char longdir[300], as[111], sockets[400], id[GB_SHM_RUN_ID_LEN + 1], shortdir[128];
    memset(as, 'a', 110);
    as[110] = '\0';
    snprintf(longdir, sizeof longdir, "%s/%s", dir, as);
    CHECK(mkdir(longdir, 0700) == 0);
    CHECK_OK(gb_endpoint_make(out, sizeof out, 0, longdir, NULL, "policy/0/inference", &err));
    CHECK_OK(gb_shm_run_id(longdir, id, &err));
    snprintf(shortdir, sizeof shortdir, "/tmp/gearbox-sockets-%u/%s", (unsigned)getuid(), id);
    snprintf(want, sizeof want, "ipc://%s/policy-0-inference", shortdir);
    CHECK(strcmp(out, want) == 0);
    snprintf(sockets, sizeof sockets, "%s/sockets", longdir);
    char target[256] = "";
    CHECK(readlink(sockets, target, sizeof target - 1) > 0 && strcmp(target, shortdir) == 0);
    struct stat st;
    CHECK(stat(shortdir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    void *lctx = zmq_ctx_new(), *pull = zmq_socket(lctx, ZMQ_PULL);
    void *push = zmq_socket(lctx, ZMQ_PUSH);
    CHECK(zmq_bind(pull, out) == 0);
    CHECK(zmq_connect(push, out) == 0);
    CHECK(zmq_send(push, "x", 1, 0) == 1);
    char got[4];
    CHECK(zmq_recv(pull, got, sizeof got, 0) == 1);
    /* the same folder a second time (every process of the run asks); the 107 bytes still hold a
     * name */
    CHECK_OK(gb_endpoint_make(out, sizeof out, 0, longdir, NULL, "trainer/0/samples", &err));
    CHECK(strncmp(out + 6, shortdir, strlen(shortdir)) == 0);
    memset(as, 'n', 80);
    as[80] = '\0';
    CHECK(gb_endpoint_make(out, sizeof out, 0, longdir, NULL, as, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "107") != NULL);
    /* removal: the socket file (not another file), the short folder once empty, the link */
    CHECK(stat(shortdir, &st) == 0);
    CHECK_EQ_INT(gb_endpoint_ipc_remove(longdir, id), 1); /* the bound socket's file */
    CHECK(stat(shortdir, &st) != 0 && lstat(sockets, &st) != 0);
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(lctx);
    /* a dead run whose folder is gone: found by its id alone */
    CHECK_OK(gb_endpoint_ipc_dir(longdir, shortdir, sizeof shortdir, &err));
    CHECK(stat(shortdir, &st) == 0);
    unlink(sockets);
    CHECK_EQ_INT(gb_endpoint_ipc_remove(NULL, id), 0);
    CHECK(stat(shortdir, &st) != 0);
    CHECK(rmdir(longdir) == 0);
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
    TEST_RUN(test_join);
    return test_main_result();
}
