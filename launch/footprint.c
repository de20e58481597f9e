/* launch/footprint.c: the memory a run will take, from its config (see footprint.h). The
 * networks' sizes follow workers/torch/network.cpp's layers (core.cpp, transformer.cpp); the
 * transformer's are approximated by 12 d^2 a block. */
#include "launch/footprint.h"
#include "workers/roles/acting.h"

#include <stdio.h>
#include <string.h>

static double linear(double in, double out) { return (in + 1.0) * out; }

/* The torso's parameters (Nature CNN and/or the hidden layers) over in values; *width: its
 * output's. */
static double torso(const gb_config_model *mc, const gb_env_spec *spec, double in, double *width)
{
    double p = 0.0, w = in;
    if (mc->type == GB_MODEL_CNN && spec->obs.ndim == 3) {
        double c = (double)spec->obs.shape[0];
        int64_t h = spec->obs.shape[1], x = spec->obs.shape[2];
        const int64_t k[3] = {8, 4, 3}, s[3] = {4, 2, 1}, ch[3] = {32, 64, 64};
        for (int i = 0; i < 3; i++) {
            p += (c * (double)(k[i] * k[i]) + 1.0) * (double)ch[i];
            h = h >= k[i] ? (h - k[i]) / s[i] + 1 : 1;
            x = x >= k[i] ? (x - k[i]) / s[i] + 1 : 1;
            c = (double)ch[i];
        }
        w = c * (double)h * (double)x;
    }
    for (int i = 0; i < mc->hidden.n; i++) {
        double h = (double)mc->hidden.v[i];
        p += linear(w, h) + (mc->layer_norm ? 2.0 * h : 0.0);
        w = h;
    }
    *width = w;
    return p;
}

/* The core after a torso of width *w (0 without one); *w becomes its output's width. */
static double core(const gb_config_model *mc, double *w)
{
    double H = (double)mc->core_size, F = *w;
    switch (mc->core) {
    case GB_CORE_LSTM: *w = H; return 4.0 * H * (F + H + 2.0);
    case GB_CORE_GRU: *w = H; return 3.0 * H * (F + H + 2.0);
    case GB_CORE_TRANSFORMER:
        *w = H;
        return linear(F, H) + (double)mc->core_layers * 12.0 * H * H;
    default: return 0.0;
    }
}

/* The acting network's parameters, and in *trainer_extra those of the networks only the
 * trainer keeps (DQN's target, SAC's critics and their targets). */
static double network(const gb_config *cfg, const gb_env_spec *spec, double *trainer_extra)
{
    const gb_config_model *mc = &cfg->policy.model;
    double in = 1.0;
    for (int i = 0; i < spec->obs.ndim; i++)
        in *= (double)spec->obs.shape[i];
    int discrete = spec->action.kind == GB_ENV_SPACE_DISCRETE;
    double outs = (double)spec->action.n, w = 0.0;
    double p = torso(mc, spec, in, &w);
    p += core(mc, &w);
    *trainer_extra = 0.0;
    switch (cfg->trainer.algorithm.name) {
    case GB_ALGO_PPO:
        p += linear(w, outs) + linear(w, 1.0) + (discrete ? 0.0 : outs);
        if (!mc->shared && mc->core == GB_CORE_NONE) {
            double wc = 0.0;
            p += torso(mc, spec, in, &wc);
        }
        return p;
    case GB_ALGO_DQN:
        p += linear(w, outs);
        *trainer_extra = p; /* the target network */
        return p;
    default: { /* SAC: the actor; two critics over [obs, action] and their targets */
        double wq = 0.0;
        gb_config_model flat = *mc;
        flat.type = GB_MODEL_MLP;
        double q = torso(&flat, spec, in + outs, &wq) + linear(wq, 1.0);
        *trainer_extra = 4.0 * q;
        return p + 2.0 * linear(w, outs);
    }
    }
}

static double machine_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0.0;
    char line[256];
    double kb = 0.0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}

int gb_footprint_estimate(const gb_config *cfg, const gb_env_spec *spec, gb_footprint *fp,
                          gb_error *err)
{
    memset(fp, 0, sizeof *fp);
    gb_chunk_layout l;
    int rc = gb_acting_layout_for(spec, cfg, &l, err);
    if (rc)
        return rc;
    double block = 0.0;
    for (int c = 0; c < l.ncols; c++)
        block += (double)((l.bytes[c] + 63) & ~(uint64_t)63);
    double extra = 0.0;
    fp->params = network(cfg, spec, &extra);
    fp->replay = (double)cfg->trainer.replay.capacity * block;
    /* parameters, gradients and Adam's two moments (4 bytes each), and the trainer's extras
     * (their own gradients and moments for SAC's critics; a DQN target has none: counted 4x
     * as an upper bound) */
    fp->trainer = 4.0 * 4.0 * (fp->params + extra);
    fp->policy = 4.0 * fp->params + (double)cfg->policy.max_batch_rows * block / (double)l.T;
    fp->actor = 2.0 * (double)cfg->actors.envs_per_actor * block;
    double trainers = (double)cfg->trainer.count;
    double policies = cfg->policy.local >= 0 ? (double)cfg->policy.local
                                             : (double)cfg->policy.count;
    double actors = cfg->actors.local >= 0 ? (double)cfg->actors.local
                                           : (double)cfg->actors.count;
    switch (cfg->launch.mode) {
    case GB_LAUNCH_INLINE: fp->here = fp->replay + fp->trainer + fp->actor; break;
    case GB_LAUNCH_SLURM: fp->here = 0.0; break;
    default:
        fp->here = trainers * (fp->replay + fp->trainer) + policies * fp->policy +
                   actors * fp->actor;
        break;
    }
    fp->machine = machine_bytes();
    return 0;
}

static const char *human(double bytes, char *buf, size_t cap)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 5) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, cap, bytes < 10 ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

int gb_footprint_check(const gb_config *cfg, const gb_config_marks *marks,
                       const gb_env_spec *spec, gb_footprint *fp, gb_error *err)
{
    int rc = gb_footprint_estimate(cfg, spec, fp, err);
    if (rc || fp->machine <= 0.0 || fp->here <= fp->machine)
        return rc;
    char a[32], b[32], c[32], d[32];
    const char *key = fp->replay >= fp->trainer ? "trainer.replay.capacity"
                      : cfg->policy.model.core != GB_CORE_NONE ? "policy.model.core_size"
                                                               : "policy.model.hidden";
    return gb_config_fail_key(marks, key, err,
                              "the run needs about %s of memory on this machine, which has %s "
                              "(per trainer: a replay of %s when full, %s for %.3g parameters "
                              "with their gradients and optimiser state)",
                              human(fp->here, a, sizeof a), human(fp->machine, b, sizeof b),
                              human(fp->replay, c, sizeof c), human(fp->trainer, d, sizeof d),
                              fp->params);
}
