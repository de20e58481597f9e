/* runtime/config/config_check.c: the checks across keys once every value is set (required keys,
 * keys that must agree, PPO's replay defaults), and the data server's per-table configs. */
#include "runtime/config/config.h"
#include "runtime/config/config_internal.h"
#include "replay/kinds.h" /* the replay's kinds: see config_schema.c */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error at the place key was set (or its closest set section, or line 1). */
static int vfail_key(const gb_config_marks *marks, const char *key, gb_error *err,
                     const char *fmt, va_list ap)
{
    const gb_config_field *f = gb_config_find_field(key, strlen(key));
    mark at = {1, 1, 0};
    if (f && marks->field[f - gb_config_fields].line) {
        at = marks->field[f - gb_config_fields];
    } else {
        /* The deepest section of key that appears in the file. */
        size_t best = 0;
        for (int i = 0; i < marks->nsections; i++) {
            size_t l = strlen(marks->section[i].path);
            if (l > best && strncmp(key, marks->section[i].path, l) == 0 && key[l] == '.') {
                best = l;
                at = marks->section[i].at;
            }
        }
    }
    return gb_config_vfail(err, marks, at, key, strlen(key), fmt, ap);
}

/* See config.h. */
int gb_config_fail_key(const gb_config_marks *marks, const char *key, gb_error *err,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail_key(marks, key, err, fmt, ap);
    va_end(ap);
    return rc;
}

/* This file's short name for it. */
#define fail_key gb_config_fail_key

/* See config.h. */
int gb_config_key_origin(const gb_config_marks *marks, const char *key)
{
    const gb_config_field *f = gb_config_find_field(key, strlen(key));
    if (!f || !marks->field[f - gb_config_fields].line)
        return 0;
    return marks->field[f - gb_config_fields].source == 0 ? 1 : 2;
}

/* Why name cannot be one folder of a path (run directories are <run_root>/<name>/...), or NULL
 * when it can: no separators, no "." or "..", no control characters. Any other bytes (UTF-8
 * letters, spaces) are fine. */
static const char *not_a_folder_name(const char *name)
{
    if (!name[0])
        return "must not be empty";
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return "must not be \".\" or \"..\" (it names a folder inside experiment.run_root)";
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '/' || *c == '\\')
            return "must be one folder name, without '/' or '\\' (it names a folder inside "
                   "experiment.run_root; set experiment.run_root or --run-dir to write elsewhere)";
        if (*c < 0x20 || *c == 0x7f)
            return "must not contain control characters";
    }
    return NULL;
}

/* 1 when a streams.interface value is the address of one machine (an IPv4 literal): each
 * worker binds it on its own node, so on several nodes it must be an interface name or "*". */
static int slurm_local_address(const char *interface)
{
    if (strcmp(interface, "*") == 0 || interface[0] == '\0')
        return 0;
    return strspn(interface, "0123456789.") == strlen(interface);
}

/* Was key set by the file or a --set (not left at the schema's default)? */
static int key_set(const gb_config_marks *marks, const char *key)
{
    const gb_config_field *f = gb_config_find_field(key, strlen(key));
    return f && marks->field[f - gb_config_fields].line != 0;
}

/* PPO learns on-policy: the schema's replay defaults (a uniform 100k-item replay, items reused
 * without end) fit DQN and SAC and would make PPO silently off-policy. Every trainer.replay key
 * a PPO config leaves unset takes instead what the tuned configs (configs/cartpole_ppo.yaml)
 * use: a queue of one round (capacity batch_size, remover none, selector fifo, each chunk
 * sampled once, sampling from one trainer's part of the batch). The full queue makes ingest
 * wait, so the actors wait for the trainer instead of producing chunks that go stale: that
 * bounds the policy lag (1-2 versions) without a trainer.max_staleness floor, which left unset
 * stays -1 (a floor of 1 expired about 70% of the chunks unused and tripled the env steps). */
static void ppo_replay_defaults(gb_config *cfg, const gb_config_marks *marks)
{
    if (cfg->trainer.algorithm.name != GB_ALGO_PPO)
        return;
    gb_config_replay *r = &cfg->trainer.replay;
    int64_t batch = cfg->trainer.batch_size;
    int64_t part = cfg->trainer.count > 1 ? batch / cfg->trainer.count : batch;
    if (!key_set(marks, "trainer.replay.capacity"))
        r->capacity = batch;
    if (!key_set(marks, "trainer.replay.remover"))
        r->remover = GB_REMOVER_NONE;
    if (!key_set(marks, "trainer.replay.selector"))
        r->selector = GB_SELECTOR_FIFO;
    if (!key_set(marks, "trainer.replay.max_times_sampled"))
        r->max_times_sampled = 1;
    if (!key_set(marks, "trainer.replay.min_size"))
        r->min_size = part > 0 ? part : 1;
}

/* Required keys, the experiment's name, the environment, the worker counts. */
static int check_workers(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    for (size_t i = 0; i < gb_config_nfields; i++)
        if (!gb_config_fields[i].def && !marks->field[i].line)
            return fail_key(marks, gb_config_fields[i].path, err, "required key is missing");
    const char *bad_name = not_a_folder_name(cfg->experiment.name);
    if (bad_name)
        return fail_key(marks, "experiment.name", err, "\"%s\" %s", cfg->experiment.name,
                        bad_name);
    if (strcmp(cfg->env.name, "plugin") == 0 && cfg->env.plugin[0] == '\0')
        return fail_key(marks, "env.plugin", err,
                        "env.name is \"plugin\", so env.plugin must name the shared library");
    if (strcmp(cfg->env.name, "plugin") != 0 && cfg->env.plugin[0] != '\0')
        return fail_key(marks, "env.plugin", err,
                        "set only when env.name is \"plugin\" (env.name is \"%s\")",
                        cfg->env.name);
    if (cfg->actors.envs_per_actor % cfg->actors.splits != 0)
        return fail_key(marks, "actors.splits", err,
                        "must divide actors.envs_per_actor (%lld), got %lld",
                        (long long)cfg->actors.envs_per_actor, (long long)cfg->actors.splits);
    if (cfg->actors.local > cfg->actors.count)
        return fail_key(marks, "actors.local", err, "must not exceed actors.count (%lld), got "
                        "%lld", (long long)cfg->actors.count, (long long)cfg->actors.local);
    if (cfg->policy.local > cfg->policy.count)
        return fail_key(marks, "policy.local", err, "must not exceed policy.count (%lld), got "
                        "%lld", (long long)cfg->policy.count, (long long)cfg->policy.local);
    return 0;
}

/* The trainer's replay (after PPO's defaults): sizes and removers that can make progress. */
static int check_replay(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    const gb_config_replay *r = &cfg->trainer.replay;
    if (r->max_size > r->capacity)
        return fail_key(marks, "trainer.replay.max_size", err,
                        "must not exceed trainer.replay.capacity (%lld), got %lld",
                        (long long)r->capacity, (long long)r->max_size);
    int64_t size_limit = r->max_size ? r->max_size : r->capacity;
    if (r->min_size > size_limit)
        return fail_key(marks, "trainer.replay.min_size", err,
                        "the replay never holds %lld items (its limit is %lld), so sampling "
                        "would never start", (long long)r->min_size, (long long)size_limit);
    if (r->remover == GB_REMOVER_MAX_TIMES_SAMPLED && r->max_times_sampled == 0)
        return fail_key(marks, "trainer.replay.max_times_sampled", err,
                        "must be positive when trainer.replay.remover is max_times_sampled");
    if (r->remover == GB_REMOVER_NONE && r->max_times_sampled == 0)
        return fail_key(marks, "trainer.replay.max_times_sampled", err,
                        "must be positive when trainer.replay.remover is none (nothing else "
                        "empties a full replay: ingest would wait forever)");
    return 0;
}

/* Trainers that join from other hosts (trainer.local < count): trainer 0 stays beside the
 * launcher (it publishes the parameters and writes the checkpoints evaluations play), the others
 * reach the run over tcp and meet at a store they can reach (not a file in the run directory,
 * which another host does not see). */
static int check_trainer_hosts(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    const gb_config_trainer *tr = &cfg->trainer;
    if (tr->local > tr->count)
        return fail_key(marks, "trainer.local", err, "must not exceed trainer.count (%lld), got "
                        "%lld", (long long)tr->count, (long long)tr->local);
    if (tr->local == 0)
        return fail_key(marks, "trainer.local", err,
                        "trainer 0 runs beside the launcher (it publishes the parameters and "
                        "writes the checkpoints evaluations play): at least 1, or -1 for all");
    if (tr->local < 0 || tr->local == tr->count)
        return 0;
    if (cfg->launch.mode != GB_LAUNCH_LOCAL)
        return fail_key(marks, "trainer.local", err,
                        "trainers join a run of launch.mode local (gearbox join); on Slurm the "
                        "job's nodes hold them (launch.slurm.nodes)");
    if (cfg->streams.transport != GB_TRANSPORT_TCP)
        return fail_key(marks, "trainer.local", err,
                        "trainers on other hosts reach the run over tcp: set streams.transport "
                        "tcp (and streams.interface)");
    if (tr->rendezvous.store == GB_STORE_FILE)
        return fail_key(marks, "trainer.rendezvous.store", err,
                        "a file in the run directory cannot be reached from the hosts that "
                        "trainers join from: use registry (or tcp with trainer 0's address)");
    return 0;
}

/* The trainers: batch split, evaluations, counts, devices, prefetch, rendezvous. */
static int check_trainer(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    const gb_config_trainer *tr = &cfg->trainer;
    if (tr->count > 1 && tr->batch_size % tr->count != 0)
        return fail_key(marks, "trainer.batch_size", err,
                        "%lld does not split evenly over trainer.count = %lld trainers (each "
                        "trains on batch_size / count items)", (long long)tr->batch_size,
                        (long long)tr->count);
    if (cfg->experiment.eval_every > 0 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "experiment.eval_every", err,
                        "evaluation videos are started by the launcher of launch.mode local or "
                        "slurm; inline has none");
    if (cfg->experiment.eval_every > 0 && tr->checkpoint_every_s <= 0)
        return fail_key(marks, "experiment.eval_every", err,
                        "evaluations play the newest checkpoint, so trainer.checkpoint_every_s "
                        "must be > 0 (it is 0: only the final checkpoint would exist)");
    if (tr->count > 1 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "trainer.count", err,
                        "launch.mode inline runs one learner in one process; several trainers "
                        "need launch.mode local");
    if (tr->count > 1 && tr->device == GB_DEVICE_CUDA &&
        tr->replay.selection == GB_SELECTION_GLOBAL)
        return fail_key(marks, "trainer.replay.selection", err,
                        "global selection gathers the chosen rows into host memory, which "
                        "trainers on GPUs (trainer.device cuda) do not collect from: use local");
    if (tr->backend == GB_BACKEND_NCCL && tr->device != GB_DEVICE_CUDA)
        return fail_key(marks, "trainer.backend", err,
                        "nccl all-reduces GPU memory: it needs trainer.device cuda (use gloo or "
                        "auto on the cpu)");
    if (tr->count > 1 && tr->prefetch == GB_PREFETCH_ON)
        return fail_key(marks, "trainer.prefetch", err,
                        "several trainers agree on every step before they select, so a batch "
                        "cannot be selected ahead: use auto or off");
    if (cfg->parameters.relay == GB_RELAY_PER_HOST && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "parameters.relay", err,
                        "launch.mode inline has no parameter stream to relay; per_host needs "
                        "launch.mode local or slurm");
    if (tr->algorithm.ppo.vtrace_proximal && !tr->algorithm.ppo.vtrace)
        return fail_key(marks, "trainer.algorithm.ppo.vtrace_proximal", err,
                        "it changes how V-trace clips: set trainer.algorithm.ppo.vtrace too");
    if (tr->count > 1 && tr->rendezvous.store == GB_STORE_TCP && tr->rendezvous.port == 0)
        return fail_key(marks, "trainer.rendezvous.port", err,
                        "trainer.rendezvous.store is tcp, so trainer 0 needs a port to listen on");
    return check_trainer_hosts(cfg, marks, err);
}

/* The policy workers' model and precision. */
static int check_policy(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT && cfg->policy.model.torchscript[0] == 0)
        return fail_key(marks, "policy.model.torchscript", err,
                        "policy.model.type is torchscript, so this must name the file");
    if (cfg->policy.precision == GB_PRECISION_INT8 && cfg->policy.device != GB_DEVICE_CPU)
        return fail_key(marks, "policy.precision", err,
                        "int8 is libtorch's dynamic quantization, which runs on the cpu only: "
                        "use policy.device cpu, or bf16 on cuda");
    if (cfg->policy.precision != GB_PRECISION_FP32 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "policy.precision", err,
                        "launch.mode inline acts with the learner's own fp32 model; reduced "
                        "precision is the policy workers' (launch.mode local or slurm)");
    if (cfg->policy.precision != GB_PRECISION_FP32 &&
        cfg->policy.model.type == GB_MODEL_TORCHSCRIPT)
        return fail_key(marks, "policy.precision", err,
                        "reduced precision needs a built-in model (mlp or cnn), not torchscript");
    if (cfg->policy.model.core != GB_CORE_NONE) {
        if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT)
            return fail_key(marks, "policy.model.core", err,
                            "a core is part of a built-in model (mlp or cnn); a torchscript "
                            "model brings its own layers");
        if (cfg->trainer.algorithm.name == GB_ALGO_SAC)
            return fail_key(marks, "policy.model.core", err,
                            "a recurrent core trains with ppo or dqn (R2D2); SAC with memory "
                            "is not built yet");
        if (cfg->policy.precision != GB_PRECISION_FP32)
            return fail_key(marks, "policy.precision", err,
                            "a model with a core runs its inference in fp32 for now");
        if (cfg->policy.model.core == GB_CORE_TRANSFORMER &&
            cfg->policy.model.core_size % cfg->policy.model.core_heads != 0)
            return fail_key(marks, "policy.model.core_heads", err,
                            "%lld heads do not divide policy.model.core_size = %lld",
                            (long long)cfg->policy.model.core_heads,
                            (long long)cfg->policy.model.core_size);
    }
    if (cfg->policy.model.torchscript_state > 0) {
        if (cfg->policy.model.type != GB_MODEL_TORCHSCRIPT)
            return fail_key(marks, "policy.model.torchscript_state", err,
                            "is for a TorchScript model (policy.model.type torchscript); a "
                            "built-in model's memory is policy.model.core");
        if (cfg->trainer.algorithm.name == GB_ALGO_SAC)
            return fail_key(marks, "policy.model.torchscript_state", err,
                            "a model with state trains with ppo or dqn (R2D2); SAC with "
                            "memory is not built yet");
    }
    if (cfg->trainer.algorithm.name == GB_ALGO_DQN && cfg->trainer.algorithm.dqn.burn_in > 0 &&
        cfg->policy.model.core == GB_CORE_NONE && cfg->policy.model.torchscript_state == 0)
        return fail_key(marks, "trainer.algorithm.dqn.burn_in", err,
                        "burn-in warms a model's state up: it needs policy.model.core (or a "
                        "TorchScript model's policy.model.torchscript_state)");
    if (cfg->policy.model.normalize_obs && cfg->policy.model.type != GB_MODEL_MLP)
        return fail_key(marks, "policy.model.normalize_obs", err,
                        "normalises the vector observations of an mlp model (a cnn scales its "
                        "frames to [0, 1]; a torchscript model brings its own)");
    if (cfg->policy.model.hidden.n == 0 && cfg->policy.model.type == GB_MODEL_MLP)
        return fail_key(marks, "policy.model.hidden", err, "an MLP needs at least one layer");
    return 0;
}

/* The streams' transport and encryption. */
static int check_streams(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    if (cfg->streams.transport == GB_TRANSPORT_TCP && cfg->streams.interface[0] == '\0')
        return fail_key(marks, "streams.interface", err,
                        "tcp needs an address to bind (\"*\" for every interface)");
    if (cfg->streams.curve == GB_CURVE_ON && cfg->streams.transport != GB_TRANSPORT_TCP)
        return fail_key(marks, "streams.curve", err, "on needs streams.transport tcp (ipc is "
                        "guarded by the run directory's permissions; use auto or off)");
    return 0;
}

/* The data server: encryption and its tables (each checked like a --set). */
static int check_server(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    if (cfg->server.curve && strncmp(cfg->server.endpoint, "tcp://", 6) != 0)
        return fail_key(marks, "server.curve", err, "needs a tcp:// server.endpoint, got '%s'",
                        cfg->server.endpoint);
    if (cfg->server.curve && cfg->server.curve_key[0] == '\0')
        return fail_key(marks, "server.curve_key", err, "server.curve is on, so this must name "
                        "the server's key pair file (created 0600 when absent)");
    if (cfg->server.tables.n > 7) /* GB_SERVER_MAX_TABLES with the default one */
        return fail_key(marks, "server.tables", err, "at most 7 tables beside the default one");
    for (int i = 0; i < cfg->server.tables.n; i++) {
        const char *name = cfg->server.tables.kv[i].key;
        if (strlen(name) > 31 || strcmp(name, "default") == 0)
            return fail_key(marks, "server.tables", err, "table name '%s': at most 31 bytes "
                            "and not 'default' (the server section's own table)", name);
        gb_config *t = malloc(sizeof *t);
        if (!t)
            return gb_error_set(err, GB_ENOMEM, "out of memory");
        gb_error e = {0};
        int rc = gb_config_server_table(cfg, name, t, &e);
        free(t);
        if (rc)
            return fail_key(marks, "server.tables", err, "%s", e.msg);
    }
    return 0;
}

/* Several nodes, and the liveness timers. */
static int check_cluster(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    if (cfg->launch.slurm.nodes > 1 && cfg->streams.transport != GB_TRANSPORT_TCP)
        return fail_key(marks, "launch.slurm.nodes", err,
                        "%lld nodes need streams.transport: tcp (ipc sockets do not reach "
                        "other machines; with ipc the run's job has one node)",
                        (long long)cfg->launch.slurm.nodes);
    if (cfg->launch.slurm.nodes > 1 && slurm_local_address(cfg->streams.interface))
        return fail_key(marks, "streams.interface", err,
                        "launch.slurm.nodes is %lld, so this must name a network interface "
                        "every node has (e.g. eth0, ib0) or \"*\", not the address %s of one "
                        "machine", (long long)cfg->launch.slurm.nodes, cfg->streams.interface);
    if (cfg->streams.ttl_ms <= cfg->streams.heartbeat_ms)
        return fail_key(marks, "streams.ttl_ms", err,
                        "must exceed streams.heartbeat_ms (%lld), got %lld",
                        (long long)cfg->streams.heartbeat_ms, (long long)cfg->streams.ttl_ms);
    return 0;
}

/* Checks what no single key can: required keys, keys that must agree, and fills PPO's replay
 * defaults. Errors name the place the key was set (or its section, or line 1) as
 * "<source>:line:col: key: ...". Returns 0, GB_ECONFIG or GB_ENOMEM. */
int gb_config_finish(gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    int rc = check_workers(cfg, marks, err);
    if (rc)
        return rc;
    ppo_replay_defaults(cfg, marks);
    if ((rc = check_replay(cfg, marks, err)) || (rc = check_trainer(cfg, marks, err)) ||
        (rc = check_policy(cfg, marks, err)) || (rc = check_streams(cfg, marks, err)) ||
        (rc = check_server(cfg, marks, err)) || (rc = check_cluster(cfg, marks, err)))
        return rc;
    return 0;
}

/* The server section's keys a table may override (server.tables). */
static int table_key_allowed(const char *key)
{
    static const char *const keys[] = {"dataset", "dataset_format", "steps",
                                       "dataset_last_items", "seed", NULL};
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return strncmp(key, "replay.", 7) == 0;
}

/* See config.h: the table's words applied to a copy of cfg like --set overrides, with the
 * message's "--set[N]:1:C: " place dropped (it names no real override). Allocates only for the
 * call. */
int gb_config_server_table(const gb_config *cfg, const char *name, gb_config *out,
                           gb_error *err)
{
    const char *spec = gb_config_arg(&cfg->server.tables, name);
    if (!spec)
        return gb_error_set(err, GB_ENOTFOUND, "server.tables: no table '%s'", name);
    *out = *cfg;
    out->server.tables.n = 0;
    out->server.checkpoint[0] = '\0';
    out->server.restore = 0;
    gb_config_marks *marks = calloc(1, sizeof *marks);
    if (!marks)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    int rc = 0, which = 0;
    for (const char *p = spec; rc == 0 && *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t");
        if (!len)
            break;
        char word[PATH_BUF], set[PATH_BUF + 8];
        const char *eq = memchr(p, '=', len);
        if (len >= sizeof word || !eq) {
            rc = gb_error_set(err, GB_ECONFIG, "table '%s': expected key=value words, got "
                              "'%.*s'", name, (int)(len > 64 ? 64 : len), p);
            break;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        word[eq - p] = '\0';
        if (!table_key_allowed(word)) {
            rc = gb_error_set(err, GB_ECONFIG, "table '%s': '%s' is not a table's key (dataset, "
                              "dataset_format, steps, dataset_last_items, seed, replay.*)", name,
                              word);
            break;
        }
        word[eq - p] = '=';
        snprintf(set, sizeof set, "server.%s", word);
        if ((rc = gb_config_apply_set(out, marks, set, ++which, err))) {
            /* drop the "--set[N]:1:C: " place, which names no real override */
            const char *m = err->msg;
            for (int colons = 0; colons < 3 && (m = strchr(m, ':')); colons++)
                m++;
            if (m && strncmp(err->msg, "--set[", 6) == 0) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", m + (*m == ' '));
                snprintf(err->msg, sizeof err->msg, "%s", msg);
            }
            gb_error_prefix(err, "table '%s'", name);
        }
        p += len;
    }
    free(marks);
    return rc;
}
