/* envs/check.c: the environment checker behind `gearbox env check` (see check.h). */
#include "envs/check.h"
#include "envs/host.h"
#include "runtime/base/clock.h"
#include "runtime/base/rng.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define GUARD 64        /* canary bytes after every buffer */
#define CANARY 0xCB
#define FILL_A 0xA5     /* copy A's buffers are filled with this before every call */
#define FILL_B 0x5A     /* copy B's with this: a byte that stays so was never written */

/* What the child tells the parent, in shared memory, so a crash can be placed. */
typedef struct check_shared {
    volatile int64_t step;
    volatile int copy;
    char phase[32];
    int rc;
    int finished; /* set by the child when run_checks returned */
    char msg[GB_ERROR_MSG_MAX];
} check_shared;

typedef struct copy_bufs {
    void *env;
    uint8_t *actions, *obs, *rewards, *term, *trunc, *acting;
    gb_env_buffers b;
} copy_bufs;

typedef struct checker {
    const gb_env_interface *iface;
    gb_env_spec spec;
    const gb_env_check_options *o;
    check_shared *sh;
    FILE *out;
    int agents;
    size_t obs_bytes, act_bytes; /* all agents of one copy */
    copy_bufs c[2];
    gb_rng rng;
    int64_t limit;
    int64_t bounds_warnings;
} checker;

static void say(checker *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(checker *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(k->out, fmt, ap);
    va_end(ap);
    fflush(k->out);
}

static int fail(checker *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(checker *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->sh->msg, sizeof k->sh->msg, fmt, ap);
    va_end(ap);
    k->sh->rc = GB_EINVAL;
    return GB_EINVAL;
}

static void phase(checker *k, const char *name, int copy, int64_t step)
{
    snprintf(k->sh->phase, sizeof k->sh->phase, "%s", name);
    k->sh->copy = copy;
    k->sh->step = step;
}

static const char *dtype_name(int32_t d)
{
    static const char *names[] = {"float32", "float64", "int8",  "int16",
                                  "int32",   "int64",   "uint8", "uint16"};
    return d >= 0 && d < 8 ? names[d] : "?";
}

static int alloc_copy(checker *k, copy_bufs *c)
{
    size_t a = (size_t)k->agents;
    size_t sizes[6] = {k->act_bytes, k->obs_bytes, a * sizeof(float), a, a, a};
    uint8_t **slots[6] = {&c->actions, &c->obs, &c->rewards, &c->term, &c->trunc, &c->acting};
    for (int i = 0; i < 6; i++) {
        *slots[i] = malloc(sizes[i] + GUARD);
        if (!*slots[i])
            return fail(k, "out of memory for buffers (%zu bytes)", sizes[i] + GUARD);
        memset(*slots[i], 0, sizes[i]);
        memset(*slots[i] + sizes[i], CANARY, GUARD);
    }
    c->b = (gb_env_buffers){c->actions, c->obs, (float *)(void *)c->rewards, c->term, c->trunc,
                            c->acting};
    return 0;
}

static void free_copy(copy_bufs *c)
{
    free(c->actions);
    free(c->obs);
    free(c->rewards);
    free(c->term);
    free(c->trunc);
    free(c->acting);
}

static void fill(checker *k, copy_bufs *c, uint8_t v)
{
    size_t a = (size_t)k->agents;
    memset(c->obs, v, k->obs_bytes);
    memset(c->rewards, v, a * sizeof(float));
    memset(c->term, v, a);
    memset(c->trunc, v, a);
    if (k->spec.flags & GB_ENV_TURN_BASED)
        memset(c->acting, v, a);
}

static int check_guards(checker *k, int ci, const char *call, int64_t t)
{
    copy_bufs *c = &k->c[ci];
    size_t a = (size_t)k->agents;
    struct {
        const char *name;
        uint8_t *p;
        size_t n;
    } bufs[6] = {{"observation", c->obs, k->obs_bytes}, {"rewards", c->rewards, a * 4},
                 {"terminated", c->term, a},            {"truncated", c->trunc, a},
                 {"acting", c->acting, a},              {"actions", c->actions, k->act_bytes}};
    for (int i = 0; i < 6; i++)
        for (size_t j = 0; j < GUARD; j++)
            if (bufs[i].p[bufs[i].n + j] != CANARY)
                return fail(k, "%s wrote past the end of the %s buffer (%zu bytes declared, "
                               "byte %zu after it changed) at step %lld",
                            call, bufs[i].name, bufs[i].n, j, (long long)t);
    return 0;
}

/* Copies A and B got the same seed and actions: every output byte must agree. */
static int compare(checker *k, const char *call, int64_t t)
{
    copy_bufs *A = &k->c[0], *B = &k->c[1];
    size_t a = (size_t)k->agents;
    struct {
        const char *name;
        uint8_t *x, *y;
        size_t n;
    } outs[5] = {{"observation", A->obs, B->obs, k->obs_bytes},
                 {"rewards", A->rewards, B->rewards, a * 4},
                 {"terminated", A->term, B->term, a},
                 {"truncated", A->trunc, B->trunc, a},
                 {"acting", A->acting, B->acting, a}};
    int is_reset = strcmp(call, "reset") == 0;
    int turn_based = (k->spec.flags & GB_ENV_TURN_BASED) != 0;
    for (int i = 0; i < 5; i++) {
        if ((is_reset && i >= 1 && i <= 3) || (i == 4 && !turn_based))
            continue; /* reset writes only obs (and acting); acting only when turn-based */
        for (size_t j = 0; j < outs[i].n; j++) {
            if (outs[i].x[j] == outs[i].y[j])
                continue;
            if (outs[i].x[j] == FILL_A && outs[i].y[j] == FILL_B)
                return fail(k, "%s did not write byte %zu of the %s buffer (%zu bytes declared) "
                               "at step %lld",
                            call, j, outs[i].name, outs[i].n, (long long)t);
            return fail(k, "not deterministic: two copies with the same seed and the same "
                           "actions wrote different %s (byte %zu) at %s, step %lld",
                        outs[i].name, j, call, (long long)t);
        }
    }
    return 0;
}

static double obs_value(checker *k, const uint8_t *p, size_t i)
{
    switch (k->spec.obs.dtype) {
    case GB_ENV_FLOAT32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case GB_ENV_FLOAT64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case GB_ENV_INT8: return ((const int8_t *)p)[i];
    case GB_ENV_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case GB_ENV_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GB_ENV_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case GB_ENV_UINT8: return p[i];
    case GB_ENV_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    default: return 0;
    }
}

/* Values of copy A after a call: finite observations and rewards, 0/1 flags, bounds. */
static int validate_outputs(checker *k, const char *call, int64_t t)
{
    copy_bufs *A = &k->c[0];
    size_t numel = gb_env_obs_numel(&k->spec);
    int is_float = k->spec.obs.dtype == GB_ENV_FLOAT32 || k->spec.obs.dtype == GB_ENV_FLOAT64;
    for (int a = 0; a < k->agents; a++) {
        const uint8_t *o = A->obs + (size_t)a * (k->obs_bytes / (size_t)k->agents);
        for (size_t i = 0; i < numel; i++) {
            double v = obs_value(k, o, i);
            if (is_float && !isfinite(v))
                return fail(k, "observation [agent %d][%zu] is %s after %s %lld", a, i,
                            isnan(v) ? "NaN" : "infinite", call, (long long)t);
            if (k->spec.obs.low && (v < k->spec.obs.low[i] || v > k->spec.obs.high[i]) &&
                k->bounds_warnings++ < 3)
                say(k, "  warning     observation [agent %d][%zu] = %g is outside its declared "
                       "bounds [%g, %g] after %s at step %lld\n",
                    a, i, v, k->spec.obs.low[i], k->spec.obs.high[i], call, (long long)t);
        }
        if (strcmp(call, "reset") == 0)
            continue;
        float r = ((float *)(void *)A->rewards)[a];
        if (!isfinite(r))
            return fail(k, "reward [agent %d] is %s at step %lld", a, isnan(r) ? "NaN" : "infinite",
                        (long long)t);
        if (!gb_env_reward_in_range(&k->spec, r))
            return fail(k, "reward [agent %d] is %g at step %lld, outside the declared range "
                           "[%g, %g] (gearbox refuses such chunks)",
                        a, (double)r, (long long)t, (double)k->spec.reward_low,
                        (double)k->spec.reward_high);
        if (A->term[a] > 1 || A->trunc[a] > 1)
            return fail(k, "terminated/truncated [agent %d] are %d/%d at step %lld: flags must "
                           "be 0 or 1 (not written?)",
                        a, A->term[a], A->trunc[a], (long long)t);
    }
    if (k->spec.flags & GB_ENV_TURN_BASED)
        for (int a = 0; a < k->agents; a++)
            if (A->acting[a] > 1)
                return fail(k, "acting [agent %d] is %d after %s at step %lld (must be 0 or 1)",
                            a, A->acting[a], call, (long long)t);
    return 0;
}

static void random_actions(checker *k, uint8_t *dst)
{
    const gb_env_action_space *s = &k->spec.action;
    for (int a = 0; a < k->agents; a++) {
        if (s->kind == GB_ENV_SPACE_DISCRETE) {
            int32_t v = (int32_t)gb_rng_below(&k->rng, (uint64_t)s->n);
            memcpy(dst + (size_t)a * 4, &v, 4);
        } else {
            for (int i = 0; i < s->n; i++) {
                float lo = s->low[i], hi = s->high[i], v;
                if (isfinite(lo) && isfinite(hi))
                    v = lo + (hi - lo) * gb_rng_uniform_f(&k->rng);
                else
                    v = (float)gb_rng_normal(&k->rng);
                memcpy(dst + ((size_t)a * (size_t)s->n + (size_t)i) * 4, &v, 4);
            }
        }
    }
}

static int call_both(checker *k, int is_reset, int64_t t)
{
    const char *call = is_reset ? "reset" : "step";
    for (int ci = 0; ci < 2; ci++) {
        copy_bufs *c = &k->c[ci];
        fill(k, c, ci == 0 ? FILL_A : FILL_B);
        phase(k, call, ci, t);
        int rc = is_reset ? k->iface->reset(c->env, &c->b) : k->iface->step(c->env, &c->b);
        if (rc)
            return fail(k, "%s returned %d (failure) on copy %c at step %lld", call, rc,
                        ci ? 'B' : 'A', (long long)t);
        if (check_guards(k, ci, call, t))
            return GB_EINVAL;
    }
    if (compare(k, call, t) || validate_outputs(k, call, t))
        return GB_EINVAL;
    return 0;
}

static int lockstep(checker *k)
{
    int64_t steps = k->o->steps > 0 ? k->o->steps : 10000;
    int64_t ep_len = 0, episodes = 0, len_sum = 0;
    double ret = 0, ret_sum = 0;
    if (call_both(k, 1, 0))
        return GB_EINVAL;
    for (int64_t t = 0; t < steps; t++) {
        random_actions(k, k->c[0].actions);
        memcpy(k->c[1].actions, k->c[0].actions, k->act_bytes);
        if (call_both(k, 0, t + 1)) /* steps count from 1; the first reset is step 0 */
            return GB_EINVAL;
        copy_bufs *A = &k->c[0];
        int all_done = 1;
        double r = 0;
        for (int a = 0; a < k->agents; a++) {
            r += ((float *)(void *)A->rewards)[a];
            all_done &= (A->term[a] | A->trunc[a]) != 0;
        }
        ret += r / k->agents;
        ep_len++;
        if (k->limit && ep_len >= k->limit)
            all_done = 1;
        if (all_done) {
            episodes++;
            ret_sum += ret;
            len_sum += ep_len;
            ret = 0;
            ep_len = 0;
            if (call_both(k, 1, t + 1))
                return GB_EINVAL;
        }
    }
    say(k, "  determinism %lld random-action steps on two copies with seed %llu: identical, "
           "every declared byte written, nothing past the buffers\n",
        (long long)steps, (unsigned long long)k->o->seed);
    if (episodes)
        say(k, "  episodes    %lld finished: mean return %.4g, mean length %.1f\n",
            (long long)episodes, ret_sum / (double)episodes, (double)len_sum / (double)episodes);
    else
        say(k, "  episodes    none finished in %lld steps (no time limit and no termination?)\n",
            (long long)steps);
    return 0;
}

static int check_render(checker *k)
{
    if (!k->iface->render) {
        say(k, "  render      not provided\n");
        return 0;
    }
    if (k->spec.render_height == 0 && k->spec.render_width == 0) {
        say(k, "  render      not asked for by these arguments (size 0 x 0)\n");
        return 0;
    }
    size_t n = (size_t)k->spec.render_height * (size_t)k->spec.render_width * 3;
    uint8_t *rgb = malloc(n + GUARD);
    if (!rgb)
        return fail(k, "out of memory for a %zu-byte render buffer", n);
    memset(rgb + n, CANARY, GUARD);
    phase(k, "render", 0, 0);
    int rc = k->iface->render(k->c[0].env, rgb);
    int bad = 0;
    for (size_t j = 0; j < GUARD; j++)
        bad |= rgb[n + j] != CANARY;
    free(rgb);
    if (rc)
        return fail(k, "render returned %d", rc);
    if (bad)
        return fail(k, "render wrote past %d x %d x 3 bytes", k->spec.render_height,
                    k->spec.render_width);
    say(k, "  render      %d x %d RGB: ok\n", k->spec.render_height, k->spec.render_width);
    return 0;
}

static int measure_speed(checker *k)
{
    copy_bufs *A = &k->c[0];
    enum { NACT = 1024 };
    uint8_t *acts = malloc(NACT * k->act_bytes);
    if (!acts)
        return fail(k, "out of memory");
    for (int i = 0; i < NACT; i++)
        random_actions(k, acts + (size_t)i * k->act_bytes);
    double seconds = k->o->speed_seconds > 0 ? k->o->speed_seconds : 1.0;
    phase(k, "reset", 0, 0);
    if (k->iface->reset(A->env, &A->b)) {
        free(acts);
        return fail(k, "reset failed during the speed measurement");
    }
    int64_t steps = 0, ep_len = 0;
    double t0 = gb_now_s(), t1 = t0;
    phase(k, "step", 0, -1);
    while (t1 - t0 < seconds) {
        for (int i = 0; i < 1024; i++, steps++) {
            memcpy(A->actions, acts + (size_t)(steps % NACT) * k->act_bytes, k->act_bytes);
            if (k->iface->step(A->env, &A->b)) {
                free(acts);
                return fail(k, "step failed during the speed measurement");
            }
            int all_done = 1;
            for (int a = 0; a < k->agents; a++)
                all_done &= (A->term[a] | A->trunc[a]) != 0;
            if (all_done || (k->limit && ++ep_len >= k->limit)) {
                ep_len = 0;
                if (k->iface->reset(A->env, &A->b)) {
                    free(acts);
                    return fail(k, "reset failed during the speed measurement");
                }
            }
        }
        t1 = gb_now_s();
    }
    free(acts);
    say(k, "  speed       %.3g steps/s (one copy, one core, random actions, resets included)\n",
        (double)steps / (t1 - t0));
    return 0;
}

/* Do two specs declare the same thing? Bounds compare by value: env.h lets a copy own them, so
 * two copies may hold equal bounds at different addresses. */
static int same_spec(const gb_env_spec *a, const gb_env_spec *b)
{
    gb_env_spec x = *a, y = *b;
    x.obs.low = x.obs.high = y.obs.low = y.obs.high = NULL;
    x.action.low = x.action.high = y.action.low = y.action.high = NULL;
    if (memcmp(&x, &y, sizeof x) != 0)
        return 0;
    size_t numel = gb_env_obs_numel(a), n = (size_t)a->action.n;
    const void *pa[4] = {a->obs.low, a->obs.high, a->action.low, a->action.high};
    const void *pb[4] = {b->obs.low, b->obs.high, b->action.low, b->action.high};
    size_t bytes[4] = {numel * sizeof(double), numel * sizeof(double), n * sizeof(float),
                       n * sizeof(float)};
    for (int i = 0; i < 4; i++) {
        if (!pa[i] != !pb[i])
            return 0;
        if (pa[i] && pa[i] != pb[i] && memcmp(pa[i], pb[i], bytes[i]) != 0)
            return 0;
    }
    return 1;
}

static int run_checks(const char *target, const gb_env_check_options *o, check_shared *sh)
{
    checker k = {.o = o, .sh = sh, .out = o->out ? o->out : stdout};
    gb_error err = {0};
    gb_env_source src;
    int rc;
    int is_path = strchr(target, '/') != NULL ||
                  (strlen(target) > 3 && strcmp(target + strlen(target) - 3, ".so") == 0);
    phase(&k, "load", 0, 0);
    rc = is_path ? gb_env_plugin_open(&src, target, &err)
                 : gb_env_source_open(&src, target, NULL, &err);
    if (rc) {
        snprintf(sh->msg, sizeof sh->msg, "%s", err.msg);
        sh->rc = rc;
        return rc;
    }
    if (o->wrap)
        gb_env_source_wrap(&src, o->wrap, 0);
    k.iface = src.iface;
    say(&k, "  interface   %s (environment ABI %u)%s%s\n", k.iface->name, k.iface->abi_version,
        k.iface->description ? ": " : "", k.iface->description ? k.iface->description : "");
    for (int ci = 0; ci < 2; ci++) {
        gb_env_spec spec;
        phase(&k, "create", ci, 0);
        rc = gb_env_create(k.iface, o->args, o->seed, &k.c[ci].env, &spec, &err);
        if (rc) {
            fail(&k, "%s", err.msg);
            if (ci == 0 && o->args && o->args->count > 0) /* refused the caller's arguments */
                rc = k.sh->rc = GB_ECONFIG;
            goto done;
        }
        if (ci == 0) {
            k.spec = spec;
        } else if (!same_spec(&spec, &k.spec)) {
            rc = fail(&k, "two copies created with the same arguments and seed declared "
                          "different specs");
            goto done;
        }
    }
    k.agents = k.spec.agents;
    k.obs_bytes = gb_env_obs_bytes(&k.spec) * (size_t)k.agents;
    k.act_bytes = gb_env_action_bytes(&k.spec) * (size_t)k.agents;
    k.limit = o->max_episode_steps > 0 ? o->max_episode_steps : k.spec.max_episode_steps;
    {
        char shape[128] = "";
        size_t used = 0;
        for (int i = 0; i < k.spec.obs.ndim; i++)
            used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld", i ? "," : "",
                                     (long long)k.spec.obs.shape[i]);
        say(&k, "  spaces      agents %d%s; observation %s[%s]%s; action ", k.agents,
            k.spec.flags & GB_ENV_TURN_BASED ? " (turn-based)" : "", dtype_name(k.spec.obs.dtype),
            shape, k.spec.obs.low ? " with bounds" : "");
        if (k.spec.action.kind == GB_ENV_SPACE_DISCRETE)
            say(&k, "Discrete(%d)", k.spec.action.n);
        else
            say(&k, "Box(%d) in [%g, %g]%s", k.spec.action.n, (double)k.spec.action.low[0],
                (double)k.spec.action.high[0], k.spec.action.n > 1 ? "..." : "");
        say(&k, "; time limit %lld%s", (long long)k.limit, k.limit ? "" : " (none)");
        if (k.spec.flags & GB_ENV_REWARD_RANGE)
            say(&k, "; rewards in [%g, %g]\n", (double)k.spec.reward_low,
                (double)k.spec.reward_high);
        else
            say(&k, "; rewards: no range declared\n");
    }
    for (int ci = 0; ci < 2; ci++)
        if ((rc = alloc_copy(&k, &k.c[ci])))
            goto done;
    gb_rng_seed(&k.rng, o->seed ^ 0x5EEDC0DEull);
    if ((rc = lockstep(&k)) || (rc = check_render(&k)) || (rc = measure_speed(&k)))
        goto done;
done:
    for (int ci = 0; ci < 2; ci++) {
        if (k.c[ci].env) {
            phase(&k, "destroy", ci, 0);
            k.iface->destroy(k.c[ci].env);
        }
        free_copy(&k.c[ci]);
    }
    phase(&k, "unload", 0, 0);
    gb_env_source_close(&src);
    return rc ? (sh->rc ? sh->rc : rc) : 0;
}

static const char *where(const check_shared *sh)
{
    static char buf[128];
    if (strcmp((const char *)sh->phase, "step") == 0 ||
        strcmp((const char *)sh->phase, "reset") == 0)
        snprintf(buf, sizeof buf, "%s (copy %c, step %lld)", sh->phase, sh->copy ? 'B' : 'A',
                 (long long)sh->step);
    else
        snprintf(buf, sizeof buf, "%s", sh->phase);
    return buf;
}

int gb_env_check(const char *target, const gb_env_check_options *opts, gb_error *err)
{
    FILE *out = opts->out ? opts->out : stdout;
    fprintf(out, "gearbox env check: %s\n", target);
    fflush(out);
    if (opts->no_fork) {
        check_shared sh = {0};
        int rc = run_checks(target, opts, &sh);
        return rc ? gb_error_set(err, rc, "%s", sh.msg) : 0;
    }
    check_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    if (sh == MAP_FAILED)
        return gb_error_errno(err, "env check: mmap");
    memset(sh, 0, sizeof *sh);
    pid_t pid = fork();
    if (pid < 0) {
        munmap(sh, sizeof *sh);
        return gb_error_errno(err, "env check: fork");
    }
    if (pid == 0) {
        /* A fault in the environment must reach the parent as the signal it is, not as a
         * handler's exit status (sanitizer runtimes install handlers for these). */
        static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
        for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
            signal(faults[i], SIG_DFL);
        int rc = run_checks(target, opts, sh);
        sh->finished = 1;
        fflush(NULL);
        _exit(rc ? 1 : 0);
    }
    double timeout = opts->timeout_s > 0 ? opts->timeout_s : 120.0;
    double start = gb_now_s();
    int status = 0, rc = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            rc = gb_error_errno(err, "env check: waitpid");
            goto out;
        }
        if (gb_now_s() - start > timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            rc = gb_error_set(err, GB_EINVAL, "did not finish within %g s: hung in %s", timeout,
                              where(sh));
            goto out;
        }
        gb_sleep_ms(5);
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        rc = gb_error_set(err, GB_EINVAL, "crashed with signal %d (SIG%s: %s) in %s", sig,
                          sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", strsignal(sig), where(sh));
    } else if (!sh->finished) {
        rc = gb_error_set(err, GB_EINVAL, "the environment ended the process (exit status %d) "
                          "in %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, where(sh));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        rc = gb_error_set(err, sh->rc ? sh->rc : GB_EINVAL, "%s",
                          sh->msg[0] ? sh->msg : "the check process failed without a message "
                                                 "(the environment called exit?)");
    } else if (sh->rc) {
        rc = gb_error_set(err, sh->rc, "%s", sh->msg);
    }
out:
    munmap(sh, sizeof *sh);
    return rc;
}
