/* tests/workers/server/test_serve_curve.c: the data server with server.curve
 * (runtime/streams/curve.h) on a real tcp socket. Its key pair file is created 0600 when absent and
 * reused after; with an allow-list only the listed client key is served: a plain client, a client
 * with a key pair the list does not name, and a client with a wrong server key get no answer
 * (GB_ETIMEOUT), the server handles no request of theirs (its counters do not move) and counts
 * every refusal; the allowed client reads the info and samples. Without an allow-list any client
 * with the server's public key is served (a fresh pair per client), a plain one still is not. */
#include "runtime/streams/curve.h"
#include "serve_util.h"
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

#define OK_MS 10000 /* a keyed request on a loaded machine */
#define DENY_MS 1500

static char key_file[600], client_key[600], allow_file[600];

typedef struct curve_server {
    test_server t;
    gb_curve *curve;
    char server_public[GB_CURVE_KEY_Z85];
} curve_server;

/* test_server_start with the context attached to the server's keys before the bind. */
static int curve_server_start(curve_server *s, const char *allow, gb_error *err)
{
    test_server *t = &s->t;
    memset(s, 0, sizeof *s);
    int rc = gb_config_read_string_for_test(&t->cfg, server_config(""), err);
    if (rc == 0)
        rc = gb_server_load_dataset(&t->cfg, &t->replay, &t->loaded, err);
    gb_server_opts o;
    gb_server_opts_from_config(&o, &t->cfg.server);
    t->zctx = zmq_ctx_new();
    if (rc == 0)
        rc = gb_curve_server_attach(&s->curve, t->zctx, key_file, allow, s->server_public, err);
    if (rc == 0)
        rc = gb_server_open(&t->server, t->zctx, t->replay, &o, err);
    if (rc == 0)
        pthread_create(&t->thread, NULL, test_server_main, t);
    return rc;
}

static void curve_server_stop(curve_server *s)
{
    if (s->t.server) {
        atomic_store(&s->t.stop, 1);
        pthread_join(s->t.thread, NULL);
    }
    gb_server_close(s->t.server);
    s->t.server = NULL;
    gb_curve_detach(s->curve);
    test_server_stop(&s->t);
}

/* get_info through a client opened with these keys; the client's return code. */
static int info_with(const curve_server *s, const char *server_public, const char *key,
                     int timeout_ms, gb_client_info *info)
{
    gb_error err = {0};
    gb_client *c = NULL;
    int rc = gb_client_open_curve(&c, gb_server_endpoint(s->t.server), timeout_ms, server_public,
                                  key, &err);
    if (rc == 0)
        rc = gb_client_get_info(c, info, &err);
    gb_client_close(c);
    return rc;
}

static void test_allow_list(void)
{
    gb_error err = {0};
    curve_server s;
    CHECK_OK(curve_server_start(&s, allow_file, &err));
    struct stat st;
    CHECK(stat(key_file, &st) == 0 && (st.st_mode & 0777) == 0600);
    gb_client_info info;

    /* the allowed client is served, a sample included */
    CHECK_EQ_INT(info_with(&s, s.server_public, client_key, OK_MS, &info), 0);
    CHECK(info.size > 0);
    gb_client *c = NULL;
    CHECK_OK(gb_client_open_curve(&c, gb_server_endpoint(s.t.server), OK_MS, s.server_public,
                                  client_key, &err));
    CHECK_OK(gb_client_get_info(c, &info, &err));
    gb_server_stats before = gb_server_get_stats(s.t.server);
    CHECK_EQ_INT(before.requests[GB_SERVE_INFO], 2);
    CHECK_EQ_INT(gb_curve_refused(s.curve), 0);

    /* plain, unknown client key, wrong server key: nothing */
    char other_public[GB_CURVE_KEY_Z85], other_secret[GB_CURVE_KEY_Z85];
    CHECK(zmq_curve_keypair(other_public, other_secret) == 0);
    uint64_t refused = 0;
    for (int k = 0; k < 3; k++) {
        gb_client *bad = NULL;
        int rc = k == 0 ? gb_client_open(&bad, gb_server_endpoint(s.t.server), DENY_MS, &err)
                 : gb_client_open_curve(&bad, gb_server_endpoint(s.t.server), DENY_MS,
                                        k == 1 ? s.server_public : other_public, NULL, &err);
        CHECK_EQ_INT(rc, 0);
        if (rc == 0)
            CHECK_MSG(gb_client_get_info(bad, &info, &err) == GB_ETIMEOUT, "client %d", k);
        gb_client_close(bad);
        TEST_WAIT_UNTIL(gb_curve_refused(s.curve) > refused, OK_MS);
        CHECK_MSG(gb_curve_refused(s.curve) > refused, "refusal of client %d counted", k);
        refused = gb_curve_refused(s.curve);
    }
    gb_server_stats after = gb_server_get_stats(s.t.server);
    CHECK_EQ_INT(after.requests[GB_SERVE_INFO], 2);
    CHECK_EQ_INT(after.rejected, 0);
    CHECK_EQ_INT(after.errors, 0);

    /* the allowed client is still served */
    gb_client_sample_req req = {.batch = 4, .timeout_ms = -1};
    void *data[GB_CLIENT_MAX_COLUMNS];
    size_t cap[GB_CLIENT_MAX_COLUMNS];
    for (int k = 0; k < info.ncolumns; k++) {
        cap[k] = 4 * (size_t)info.steps * info.columns[k].step_bytes;
        data[k] = malloc(cap[k]);
    }
    gb_client_batch b = {.data = data, .cap = cap};
    CHECK_OK(gb_client_sample(c, &req, &b, &err));
    CHECK_EQ_INT(b.n, 4);
    for (int k = 0; k < info.ncolumns; k++)
        free(data[k]);
    gb_client_close(c);
    fprintf(stderr, "refused %llu, accepted %llu\n", (unsigned long long)gb_curve_refused(s.curve),
            (unsigned long long)gb_curve_accepted(s.curve));
    curve_server_stop(&s);
}

/* Without an allow-list: the same key file (reused, not replaced), any keyed client served. */
static void test_any_keyed_client(void)
{
    gb_error err = {0};
    char before[GB_CURVE_KEY_Z85];
    CHECK_OK(gb_curve_keypair_read(key_file, before, NULL, &err));
    curve_server s;
    CHECK_OK(curve_server_start(&s, "", &err));
    CHECK(strcmp(before, s.server_public) == 0);
    gb_client_info info;
    CHECK_EQ_INT(info_with(&s, s.server_public, NULL, OK_MS, &info), 0);
    CHECK_EQ_INT(info_with(&s, NULL, NULL, DENY_MS, &info), GB_ETIMEOUT);
    TEST_WAIT_UNTIL(gb_curve_refused(s.curve) > 0, OK_MS);
    CHECK(gb_curve_refused(s.curve) > 0);
    curve_server_stop(&s);
}

int main(int argc, char **argv)
{
    if (serve_test_setup(argc, argv, "d4rl_curve.h5") != 0)
        return 1;
    gb_error err = {0};
    snprintf(key_file, sizeof key_file, "%s/curve_server.key", tmpdir);
    snprintf(client_key, sizeof client_key, "%s/curve_client.key", tmpdir);
    snprintf(allow_file, sizeof allow_file, "%s/curve_clients", tmpdir);
    unlink(key_file);
    unlink(client_key);
    char pub[GB_CURVE_KEY_Z85];
    CHECK_OK(gb_curve_keypair_write(client_key, pub, &err));
    FILE *f = fopen(allow_file, "w");
    fprintf(f, "# allowed clients\n%s\n", pub);
    fclose(f);
    TEST_RUN(test_allow_list);
    TEST_RUN(test_any_keyed_client);
    unlink(key_file);
    unlink(client_key);
    unlink(allow_file);
    return test_main_result();
}
