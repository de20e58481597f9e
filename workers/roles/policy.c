/* workers/roles/policy.c: the policy worker: serves batched inference to the actors and swaps in
 * new parameters between batches. Three threads, as in SRL: the request thread (the worker's main
 * loop) drives a pipelined inference server, receiving, validating and merging requests into the
 * next batch and sending replies; the server's inference thread runs one batched forward per
 * batch, meanwhile; the parameter thread follows the parameter stream and stages each complete,
 * verified blob, which the inference thread imports between batches (never
 * during one). With policy.pipelined false, the main loop runs the model itself between
 * receiving batches (the same import points). With policy.precision bf16 or int8 the model
 * runs in that precision, its reduced copies rebuilt from the fp32 parameters at each import.
 * A model with a recurrent core (policy.model.core) keeps no state here: each request brings its
 * rows' state and the reply takes the next one back (workers/roles/policy_request.h), so any
 * policy worker serves any request and a restarted one has lost nothing.
 * A plain MLP on gearbox's kernels (policy.kernels gearbox, fp32 or int8, on the cpu) runs
 * without libtorch (workers/roles/policy_mlp.h: the same program and draws as the bridge's model
 * would run); any other model is the bridge's, and the worker loads libtorch for it. */
#include "workers/roles/worker.h"

#include "envs/env.h"
#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"
#include "runtime/base/log.h"
#include "runtime/streams/params.h"
#include "runtime/base/rng.h"
#include "runtime/streams/wire.h"
#include "workers/roles/policy_mlp.h"
#include "workers/roles/policy_request.h"
#include "workers/torch/bridge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct policy {
    gb_worker *w;
    gb_torch_space space;
    gb_policy_mlp *mlp;     /* the model without libtorch, or NULL: */
    gb_torch_model *model;  /* the bridge's */
    int64_t rows_cap;
    void *action;  /* [rows_cap] int64 or [rows_cap, A] float32 */
    float *logp;   /* [rows_cap] */
    int64_t state_size; /* S: floats of a core's state per row; 0 without a core */
    float *state;  /* [rows_cap, S]: the rows' next state, replied as "state" (S > 0) */
    int64_t served_rows; /* inference thread only */
    /* parameter hand-off: the parameter thread stages, the inference thread applies */
    pthread_mutex_t lock;
    const gb_param_blob *staged;
    _Atomic int64_t applied_version;   /* written by the inference thread, read for metrics */
    _Atomic uint64_t import_failures;
    _Atomic uint64_t refused; /* requests the model cannot take (gb_policy_request_check) */
    gb_param_subscriber *sub;
    char pub_ep[GB_REGISTRY_ENDPOINT_MAX], fetch_ep[GB_REGISTRY_ENDPOINT_MAX];
    gb_error param_err;
    int param_rc;
} policy;

/* Imports a staged blob into the model (between batches, on the thread that runs the model;
 * the server's between hook). */
static void apply_staged(void *user)
{
    policy *p = user;
    pthread_mutex_lock(&p->lock);
    const gb_param_blob *b = p->staged;
    p->staged = NULL;
    pthread_mutex_unlock(&p->lock);
    if (!b)
        return;
    /* the blob's layout is the parameter stream's gb_param_entry table, which the model imports
     * as it is (checked entry by entry against its own) */
    gb_error err = {0};
    int rc = p->mlp ? gb_policy_mlp_import(p->mlp, b->data, b->bytes, b->layout, b->nlayout,
                                           (uint64_t)b->version, &err)
                    : gb_torch_model_import(p->model, b->data, b->bytes, b->layout, b->nlayout,
                                            (uint64_t)b->version, &err);
    if (rc == 0) {
        atomic_store(&p->applied_version, b->version);
    } else {
        atomic_fetch_add(&p->import_failures, 1);
        GB_ERROR("policy: cannot apply parameters version %lld: %s", (long long)b->version,
                 err.msg);
    }
    gb_param_blob_release(b);
}

static int infer(void *user, const gb_infer_batch *in, gb_infer_outputs *out, gb_error *err)
{
    policy *p = user;
    gb_policy_inputs x;
    int rc = gb_policy_request_check(&p->space, p->state_size, in, &x, err);
    if (rc) { /* answered with the error, counted with the malformed ones (rejected) */
        atomic_fetch_add(&p->refused, (uint64_t)in->n_requests);
        return rc;
    }
    if (in->rows > p->rows_cap)
        return gb_error_set(err, GB_EINVAL, "batch of %d rows exceeds %lld", in->rows,
                            (long long)p->rows_cap);
    const gb_config *cfg = p->w->cfg;
    double epsilon = 0;
    if (cfg->trainer.algorithm.name == GB_ALGO_DQN) {
        /* exploration decays over the run's env steps: this worker's share, or the launcher's
         * count when that is ahead (a restarted policy worker, a resumed run) */
        int64_t steps = p->served_rows * cfg->policy.count;
        int64_t run_steps = gb_runctl_client_env_steps(p->w->runctl);
        epsilon = gb_config_dqn_epsilon(&cfg->trainer.algorithm.dqn,
                                       run_steps > steps ? run_steps : steps);
    }
    gb_torch_act_out o = {.action = p->action, .logp = p->logp};
    /* without a core (state_size 0) the states are NULL and this is model_act_noise */
    rc = p->mlp ? gb_policy_mlp_act(p->mlp, x.obs, in->rows, cfg->policy.deterministic, epsilon,
                                    x.noise, x.state, p->state, &o, err)
                : gb_torch_model_act_state(p->model, x.obs, in->rows, cfg->policy.deterministic,
                                           epsilon, x.noise, x.state, p->state, &o, err);
    if (rc)
        return rc;
    p->served_rows += in->rows;
    int64_t shape[2] = {in->rows, p->space.action_dim};
    if ((rc = gb_wire_set_tensor(&out->descs[0], "action",
                                 p->space.discrete ? GB_DTYPE_INT64 : GB_DTYPE_FLOAT32,
                                 p->space.discrete ? 1 : 2, shape, err)) ||
        (rc = gb_wire_set_tensor(&out->descs[1], "logp", GB_DTYPE_FLOAT32, 1, shape, err)))
        return rc;
    out->ntensors = 2;
    out->data[0] = p->action;
    out->data[1] = p->logp;
    if (p->state_size > 0) {
        const int64_t state_shape[2] = {in->rows, p->state_size};
        if ((rc = gb_wire_set_tensor(&out->descs[2], "state", GB_DTYPE_FLOAT32, 2, state_shape,
                                     err)))
            return rc;
        out->data[2] = p->state;
        out->ntensors = 3;
    }
    out->policy_version = atomic_load(&p->applied_version);
    return 0;
}

static void *param_thread(void *arg)
{
    policy *p = arg;
    gb_worker *w = p->w;
    /* 10 ms: the stop joins this thread after the signal woke the request thread, and every
     * run's end waited for the rest of a longer poll (50 ms: the last worker to stop) */
    while (!gb_worker_stopping(w)) {
        int rc = gb_param_subscriber_poll(p->sub, 10, &p->param_err);
        if (rc < 0 && rc != GB_ENOMEM) {
            p->param_rc = rc;
            gb_worker_stop_self(w);
            break;
        }
        /* 1: the subscriber took a version after the current one, in the service's order,
         * whatever its number (runtime/streams/params.h, "Order"); the first one is applied at
         * start */
        if (rc == 1) {
            const gb_param_blob *b = gb_param_subscriber_acquire(p->sub);
            if (!b)
                continue;
            pthread_mutex_lock(&p->lock);
            if (p->staged)
                gb_param_blob_release(p->staged); /* never applied: a newer one replaces it */
            p->staged = b;
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

/* The bridge's model in policy.precision, libtorch loaded for it; *kernels: what runs it, *engine:
 * libtorch's quantized engine for int8 on its kernels ("" otherwise). */
static int bridge_model(policy *p, const char **kernels, const char **engine, gb_error *err)
{
    const gb_config *cfg = p->w->cfg;
    int rc;
    if ((rc = gb_torch_load(err)) ||
        (rc = gb_torch_set_threads((int)cfg->policy.threads, err)) ||
        (rc = gb_torch_model_create(cfg, &p->space, gb_worker_seed(p->w, "model"), &p->model,
                                    err)) ||
        (rc = gb_torch_model_set_precision(p->model, cfg->policy.precision, err)))
        return rc;
    *kernels = gb_torch_model_kernels(p->model);
    *engine = "";
    if (cfg->policy.precision == GB_PRECISION_INT8 && strncmp(*kernels, "libtorch", 8) == 0)
        return gb_torch_model_int8_engine(engine, err);
    return 0;
}

/* The model and its output buffers: the environment's spaces into p->space and *spec, the model
 * in policy.precision, without libtorch where it can be (logged with the kernels that run it and
 * why libtorch runs it otherwise), room for the largest batch. */
static int policy_model(policy *p, gb_env_spec *spec, gb_error *err)
{
    const gb_config *cfg = p->w->cfg;
    int rc = gb_worker_env_space(cfg, spec, &p->space, err);
    if (rc)
        return rc;
    gb_error why = {0};
    const char *kernels = "", *engine = "";
    rc = gb_policy_mlp_open(cfg, &p->space, gb_worker_seed(p->w, "model"), &p->mlp, &why);
    if (rc == GB_EUNSUPPORTED) /* why says what asks for libtorch */
        rc = bridge_model(p, &kernels, &engine, err);
    else if (rc == 0)
        kernels = gb_policy_mlp_kernels(p->mlp);
    else if (err)
        *err = why;
    if (rc)
        return rc;
    GB_INFO("policy: inference in %s through %s%s%s%s%s%s",
            gb_config_enum_name("policy.precision", cfg->policy.precision), kernels,
            engine[0] ? ", quantized engine " : "", engine,
            cfg->policy.precision != GB_PRECISION_FP32 || strncmp(kernels, "gearbox", 7) == 0
                ? " (rebuilt from the fp32 parameters at each swap)"
                : "",
            p->mlp ? ", without libtorch" : "; the bridge's model, for ", p->mlp ? "" : why.msg);
    p->rows_cap = cfg->policy.max_batch_rows + cfg->actors.envs_per_actor * spec->agents;
    size_t arow =
        p->space.discrete ? sizeof(int64_t) : (size_t)p->space.action_dim * sizeof(float);
    p->action = malloc((size_t)p->rows_cap * arow);
    p->logp = malloc((size_t)p->rows_cap * sizeof(float));
    if (!p->action || !p->logp)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    /* the state each request brings and each reply takes back (gb_config_state_size) */
    p->state_size = gb_config_state_size(cfg);
    if (p->state_size > 0) {
        int64_t model_s = p->model ? gb_torch_model_state_size(p->model)
                                   : gb_policy_mlp_state_size(p->mlp);
        if (model_s != p->state_size)
            return gb_error_set(err, GB_EINVAL, "policy: the model carries %lld floats of state "
                                "a row, the config says %lld (policy.model.core, core_size)",
                                (long long)model_s, (long long)p->state_size);
        p->state = malloc((size_t)p->rows_cap * (size_t)p->state_size * sizeof(float));
        if (!p->state)
            return gb_error_set(err, GB_ENOMEM, "out of memory");
    }
    return 0;
}

/* gb_worker_wait's attempt: the subscriber's first version. */
static int first_version(void *arg, int ms, gb_error *err)
{
    return gb_param_subscriber_wait(arg, 0, ms, err);
}

/* Subscribes to the parameter stream and applies its first version, so that actors act with the
 * trainer's initial weights, not ours. Waits up to streams.registry_timeout_ms for each endpoint
 * and for the first version, reporting meanwhile (gb_worker_wait): a policy worker restarted
 * with the parameter service waits for it. */
static int policy_first_params(policy *p, gb_error *err)
{
    gb_worker *w = p->w;
    const gb_config *cfg = w->cfg;
    char pub_name[GB_REGISTRY_NAME_MAX], fetch_name[GB_REGISTRY_NAME_MAX];
    int rc;
    if ((rc = gb_worker_params_names(w, pub_name, fetch_name, sizeof pub_name, err)) ||
        (rc = gb_worker_lookup(w, pub_name, p->pub_ep, sizeof p->pub_ep, err)) ||
        (rc = gb_worker_lookup(w, fetch_name, p->fetch_ep, sizeof p->fetch_ep, err)))
        return rc;
    GB_INFO("policy: parameters from %s (%s)", pub_name, p->pub_ep);
    /* A parameter version is this model's flat buffer: the subscriber refuses larger ones;
     * frames are bounded by what the service takes (parameters.chunk_bytes,
     * runtime/streams/params.h) */
    const gb_param_entry *layout;
    int nlayout;
    uint64_t model_bytes;
    if (p->mlp)
        gb_policy_mlp_layout(p->mlp, &layout, &nlayout, &model_bytes);
    else
        gb_torch_model_layout(p->model, &layout, &nlayout, &model_bytes);
    gb_param_subscriber_opts po = {.pub_endpoint = p->pub_ep,
                                   .fetch_endpoint = p->fetch_ep,
                                   .timeout_ms = 2000,
                                   .recheck_ms = 500,
                                   .role = w->role,
                                   .index = w->index,
                                   .chunk_bytes = (uint64_t)cfg->parameters.chunk_bytes,
                                   .max_bytes = model_bytes,
                                   .max_entries = nlayout};
    if ((rc = gb_param_subscriber_open(&p->sub, w->zctx, &po, err)) ||
        (rc = gb_worker_wait(w, "the first parameters", first_version, p->sub, err)))
        return rc;
    p->staged = gb_param_subscriber_acquire(p->sub);
    apply_staged(p); /* before the inference thread exists: it owns the model from now on */
    if (atomic_load(&p->applied_version) < 0)
        return gb_error_set(err, GB_EINVAL, "the first parameters did not fit this model");
    return 0;
}

/* Opens the inference server at this worker's endpoint (not yet registered: *name is the name
 * to register it under). */
static int policy_server_open(policy *p, const gb_env_spec *spec, gb_infer_server **server,
                              char *name, size_t name_cap, gb_error *err)
{
    gb_worker *w = p->w;
    const gb_config *cfg = w->cfg;
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    snprintf(name, name_cap, "policy/%d/%s", w->index, GB_SOCKET_INFERENCE);
    int rc = gb_worker_endpoint(w, GB_SOCKET_INFERENCE, name, ep, sizeof ep, err);
    if (rc)
        return rc;
    /* A request holds one group of an actor's ring, at most all its copies' observations (and
     * noise, state): a client sending a larger frame is disconnected before it is read */
    gb_infer_server_opts so = {.endpoint = ep,
                               .max_batch_rows = (int)cfg->policy.max_batch_rows,
                               .max_wait_ms = cfg->policy.max_wait_ms,
                               .role = w->role,
                               .index = w->index,
                               .fn = infer,
                               .user = p,
                               .pipelined = (int)cfg->policy.pipelined,
                               .between = apply_staged,
                               /* an actor's rows of observations, noise or state */
                               .max_frame = (uint64_t)cfg->actors.envs_per_actor *
                                            (uint64_t)spec->agents *
                                            gb_policy_request_row_bytes(&p->space,
                                                                        p->state_size)};
    return gb_infer_server_open(server, w->zctx, &so, err);
}

/* This worker's metrics: the server's counters and the parameters applied. */
static void policy_report(policy *p, gb_infer_server *server)
{
    gb_metrics_sender *m = p->w->metrics;
    gb_infer_server_stats st = gb_infer_server_get_stats(server);
    gb_metrics_set(m, "served_rows", (double)st.rows);
    gb_metrics_set(m, "batches", (double)st.batches);
    /* malformed requests, and well-formed ones this model cannot take */
    gb_metrics_set(m, "rejected", (double)(st.rejected + atomic_load(&p->refused)));
    gb_metrics_set(m, "unsent", (double)st.unsent); /* replies lost: peer gone */
    gb_metrics_set(m, "policy_version", (double)atomic_load(&p->applied_version));
    gb_metrics_set(m, "import_failures", (double)atomic_load(&p->import_failures));
    gb_metrics_send(m, NULL);
}

/* The policy worker's role (workers/roles/worker.h): builds the model, applies the first
 * parameters, serves inference until the worker stops; the parameter thread follows the stream
 * meanwhile. Returns 0 on a clean stop or the first error (err filled). Blocks for the worker's
 * life. */
int gb_policy_main(gb_worker *w, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    policy p = {.w = w, .applied_version = -1};
    pthread_mutex_init(&p.lock, NULL);
    gb_infer_server *server = NULL;
    pthread_t thread;
    int thread_started = 0;
    gb_env_spec spec;
    char name[64];
    int rc;
    if ((rc = policy_model(&p, &spec, err)) || (rc = policy_first_params(&p, err)) ||
        (rc = policy_server_open(&p, &spec, &server, name, sizeof name, err)))
        goto done;
    if (pthread_create(&thread, NULL, param_thread, &p) != 0) {
        rc = gb_error_errno(err, "pthread_create");
        goto done;
    }
    thread_started = 1;
    if ((rc = gb_registry_register(w->registry, name, gb_infer_server_endpoint(server), err)))
        goto done;
    char env[GB_CONFIG_ENV_LABEL_MAX];
    GB_INFO("policy: serving %s at %s, parameters version %lld, libtorch %s",
            gb_config_env_label(cfg, env, sizeof env), gb_infer_server_endpoint(server),
            (long long)atomic_load(&p.applied_version),
            gb_torch_loaded() ? "loaded" : "not loaded");

    double next_report = gb_now_s();
    while (!gb_worker_stopping(w)) { /* the request thread */
        rc = gb_infer_server_poll(server, 20, err);
        if (rc < 0 && rc != GB_EPROTO && rc != GB_EINVAL && rc != GB_ETORCH)
            goto done;
        else if (rc < 0)
            GB_WARN("policy: batch failed (answered with the error): %s", err->msg);
        if (gb_now_s() >= next_report) {
            policy_report(&p, server);
            next_report = gb_now_s() + gb_worker_report_interval(w);
        }
    }
    rc = p.param_rc;
    if (rc && err)
        *err = p.param_err;
done:
    gb_worker_stop_self(w);
    gb_infer_server_close(server); /* joins the inference thread: no more apply_staged */
    if (thread_started)
        pthread_join(thread, NULL);
    if (p.staged)
        gb_param_blob_release(p.staged);
    gb_param_subscriber_close(p.sub);
    gb_policy_mlp_close(p.mlp);
    gb_torch_model_destroy(p.model);
    free(p.action);
    free(p.logp);
    free(p.state);
    pthread_mutex_destroy(&p.lock);
    return rc;
}
