/* runtime/run/rundir.c: run directories: folders, config.yaml, metrics.csv (and tb/), summary.json.
 * */
#include "runtime/run/rundir.h"

#include "runtime/run/tensorboard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gb_rundir_make_dirs(const char *path, gb_error *err)
{
    char buf[GB_RUNDIR_PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return gb_error_set(err, GB_EINVAL, "run directory path is empty or too long");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return gb_error_errno(err, "mkdir %s", buf);
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return gb_error_errno(err, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return gb_error_set(err, GB_EINVAL, "%s exists and is not a folder", path);
    return 0;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int gb_rundir_file(const gb_rundir *rd, const char *rel, char *out, size_t n, gb_error *err)
{
    int w = snprintf(out, n, "%s/%s", rd->path, rel);
    if (w < 0 || (size_t)w >= n)
        return gb_error_set(err, GB_EINVAL, "path %s/%s is too long", rd->path, rel);
    return 0;
}

static int choose_path(gb_rundir *rd, const gb_config *cfg, const char *dir, gb_error *err)
{
    if (!dir && cfg->launch.run_dir[0])
        dir = cfg->launch.run_dir;
    if (dir) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        if (n == 0 || n >= sizeof rd->path)
            return gb_error_set(err, GB_EINVAL, "run directory \"%s\" is empty or too long", dir);
        memcpy(rd->path, dir, n);
        rd->path[n] = '\0';
        return 0;
    }
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm))
        return gb_error_errno(err, "gmtime");
    char stamp[32], parent[GB_RUNDIR_PATH_MAX];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    int w = snprintf(parent, sizeof parent, "%s/%s", cfg->experiment.run_root,
                     cfg->experiment.name);
    if (w < 0 || (size_t)w >= sizeof parent)
        return gb_error_set(err, GB_EINVAL, "run directory path too long");
    int rc = gb_rundir_make_dirs(parent, err);
    if (rc)
        return rc;
    /* mkdir reserves the name: runs started in the same second (a sweep, a shell loop, the
     * Python package) each get their own folder */
    for (int k = 0; k < 1000; k++) {
        w = k == 0 ? snprintf(rd->path, sizeof rd->path, "%s/%s", parent, stamp)
                   : snprintf(rd->path, sizeof rd->path, "%s/%s-%d", parent, stamp, k);
        if (w < 0 || (size_t)w >= sizeof rd->path)
            return gb_error_set(err, GB_EINVAL, "run directory path too long");
        if (mkdir(rd->path, 0777) == 0)
            return 0;
        if (errno != EEXIST)
            return gb_error_errno(err, "mkdir %s", rd->path);
    }
    return gb_error_set(err, GB_EINVAL, "too many runs named %s in this second",
                        cfg->experiment.name);
}

/* Refuses a folder that holds an earlier run: re-running into it would truncate its
 * metrics.csv and overwrite its checkpoints. Called with the lock held (no live run in it). */
static int holds_no_run(const gb_rundir *rd, gb_error *err)
{
    static const char *const marks[] = {"summary.json", "metrics.csv", "config.yaml"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        char p[GB_RUNDIR_PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/%s", rd->path, marks[i]);
        if (exists(p))
            return gb_error_set(err, GB_EINVAL, "%s already holds a run (%s%s); gearbox run "
                                "does not continue or overwrite runs: choose another --run-dir",
                                rd->path, marks[i], i == 0 ? ": it finished" : "");
    }
    return 0;
}

/* A run file written whole or not at all: <run>/<name>.tmp, then renamed over <run>/<name>. */
typedef struct atomic_file {
    FILE *f;
    char path[GB_RUNDIR_PATH_MAX], tmp[GB_RUNDIR_PATH_MAX];
} atomic_file;

static int atomic_open(const gb_rundir *rd, const char *name, atomic_file *a, gb_error *err)
{
    char tmp_name[64];
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp", name);
    int rc = gb_rundir_file(rd, name, a->path, sizeof a->path, err);
    if (rc == 0)
        rc = gb_rundir_file(rd, tmp_name, a->tmp, sizeof a->tmp, err);
    if (rc)
        return rc;
    a->f = fopen(a->tmp, "w");
    return a->f ? 0 : gb_error_errno(err, "open %s", a->tmp);
}

/* Flushes to disk (fsync) and renames; on any failure (ok 0: the writer's own) removes the
 * temporary file and leaves what was at the path. */
static int atomic_commit(atomic_file *a, int ok, gb_error *err)
{
    int rc = 0;
    if (!ok || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)
        rc = gb_error_errno(err, "write %s", a->tmp);
    if (fclose(a->f) != 0 && rc == 0)
        rc = gb_error_errno(err, "close %s", a->tmp);
    if (rc == 0 && rename(a->tmp, a->path) != 0)
        rc = gb_error_errno(err, "rename %s -> %s", a->tmp, a->path);
    if (rc)
        unlink(a->tmp);
    return rc;
}

/* Writes config.yaml (atomically): cfg, resolved, under a comment line. */
static int write_config(const gb_rundir *rd, const gb_config *cfg, const char *what,
                        gb_error *err)
{
    atomic_file a;
    int rc = atomic_open(rd, "config.yaml", &a, err);
    if (rc)
        return rc;
    fprintf(a.f, "# %s (from %s)\n", what, cfg->source[0] ? cfg->source : "?");
    return atomic_commit(&a, gb_config_write(cfg, a.f) == 0, err);
}

int gb_rundir_create(gb_rundir *rd, const gb_config *cfg, const char *dir, gb_error *err)
{
    memset(rd, 0, sizeof *rd);
    gb_error rerr = {0};
    if (gb_rundir_reap_dead(&rerr) < 0) /* best effort: a run table we cannot read stops no run */
        fprintf(stderr, "gearbox: not cleaning up after dead runs: %s\n", rerr.msg);
    int rc = choose_path(rd, cfg, dir, err);
    if (rc)
        return rc;
    char p[GB_RUNDIR_PATH_MAX];
    if ((rc = gb_rundir_make_dirs(rd->path, err)) != 0 || (rc = gb_rundir_lock(rd, err)) != 0)
        return rc;
    if ((rc = holds_no_run(rd, err)) != 0 || (rc = gb_rundir_register(rd, err)) != 0)
        goto fail;
    if ((rc = gb_rundir_file(rd, "logs", p, sizeof p, err)) != 0 ||
        (rc = gb_rundir_make_dirs(p, err)) != 0)
        goto fail;
    if ((rc = gb_rundir_file(rd, "checkpoints", p, sizeof p, err)) != 0 ||
        (rc = gb_rundir_make_dirs(p, err)) != 0)
        goto fail;
    if ((rc = write_config(rd, cfg, "resolved config of this run", err)) != 0)
        goto fail;
    return 0;
fail:
    gb_rundir_unlock(rd);
    return rc;
}

int gb_rundir_reopen(gb_rundir *rd, const gb_config *cfg, const char *dir, gb_error *err)
{
    memset(rd, 0, sizeof *rd);
    gb_error rerr = {0};
    /* a crashed run's leftovers (its own replay segments among them) go first: a resume starts
     * from the checkpoints on disk */
    if (gb_rundir_reap_dead(&rerr) < 0)
        fprintf(stderr, "gearbox: not cleaning up after dead runs: %s\n", rerr.msg);
    int rc = choose_path(rd, cfg, dir, err);
    if (rc)
        return rc;
    char p[GB_RUNDIR_PATH_MAX + 32], q[GB_RUNDIR_PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/config.yaml", rd->path);
    if (!exists(p))
        return gb_error_set(err, GB_EINVAL, "%s holds no run to resume (no config.yaml)", rd->path);
    if ((rc = gb_rundir_lock(rd, err)) != 0)
        return rc;
    if ((rc = gb_rundir_register(rd, err)) != 0)
        goto fail;
    /* the ended segment's summary stays, as summary.<k>.json; summary.json is this one's */
    snprintf(p, sizeof p, "%s/summary.json", rd->path);
    for (int k = 0; exists(p) && k < 10000; k++) {
        snprintf(q, sizeof q, "%s/summary.%d.json", rd->path, k);
        if (!exists(q)) {
            if (rename(p, q) != 0) {
                rc = gb_error_errno(err, "rename %s -> %s", p, q);
                goto fail;
            }
            break;
        }
    }
    if ((rc = gb_rundir_file(rd, "checkpoints", p, sizeof p, err)) != 0 ||
        (rc = gb_rundir_make_dirs(p, err)) != 0 ||
        (rc = write_config(rd, cfg, "resolved config of this run, as resumed", err)) != 0)
        goto fail;
    return 0;
fail:
    gb_rundir_unlock(rd);
    return rc;
}

/* Opens tb/'s new events file for the rows of metrics.csv (columns names). */
static int open_tensorboard(gb_rundir *rd, const char *const *names, int ncol, gb_error *err)
{
    rd->metrics_names = names;
    rd->metrics_step = -1;
    for (int i = 0; i < ncol; i++)
        if (strcmp(names[i], "env_steps") == 0)
            rd->metrics_step = i;
    char p[GB_RUNDIR_PATH_MAX];
    int rc = gb_rundir_file(rd, "tb", p, sizeof p, err);
    return rc ? rc : gb_tensorboard_open(&rd->tb, p, err);
}

int gb_rundir_metrics_open(gb_rundir *rd, const char *const *names, int ncol, gb_error *err)
{
    char p[GB_RUNDIR_PATH_MAX];
    int rc = gb_rundir_file(rd, "metrics.csv", p, sizeof p, err);
    if (rc)
        return rc;
    rd->metrics = fopen(p, "w");
    if (!rd->metrics)
        return gb_error_errno(err, "open %s", p);
    for (int i = 0; i < ncol; i++)
        fprintf(rd->metrics, "%s%s", i ? "," : "", names[i]);
    fputc('\n', rd->metrics);
    rd->metrics_columns = ncol;
    if (fflush(rd->metrics) != 0)
        return gb_error_errno(err, "write %s", p);
    return open_tensorboard(rd, names, ncol, err);
}

/* Rewrites metrics.csv at p (header old, a start of want) with header want and every complete
 * row given `added` empty fields at its end (a row a crash cut short is left out: no launch
 * reads it). Temporary file, then rename. Returns 0 or GB_ESYS. */
static int widen_metrics(const char *p, const char *want, int added, gb_error *err)
{
    char tmp[GB_RUNDIR_PATH_MAX + 8], line[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *in = fopen(p, "r"), *out = in ? fopen(tmp, "w") : NULL;
    int rc = 0;
    if (!in || !out) {
        rc = gb_error_errno(err, "open %s", in ? tmp : p);
        goto done;
    }
    int bad = fprintf(out, "%s\n", want) < 0;
    for (int first = 1; !bad && fgets(line, sizeof line, in); first = 0) {
        size_t n = strlen(line);
        if (first || n == 0 || line[n - 1] != '\n')
            continue; /* the old header; a cut row */
        line[strcspn(line, "\r\n")] = '\0';
        bad = fprintf(out, "%s%.*s\n", line, added, ",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,") < 0;
    }
    if (bad || ferror(in) || fflush(out) != 0 || fsync(fileno(out)) != 0) {
        rc = gb_error_errno(err, "widen %s into %s", p, tmp);
        goto done;
    }
done:
    if (in)
        fclose(in);
    if (out && fclose(out) != 0 && rc == 0)
        rc = gb_error_errno(err, "write %s", tmp);
    if (rc == 0 && rename(tmp, p) != 0)
        rc = gb_error_errno(err, "rename %s -> %s", tmp, p);
    if (rc && out)
        unlink(tmp);
    return rc;
}

int gb_rundir_metrics_continue(gb_rundir *rd, const char *const *names, int ncol, double *last,
                               gb_error *err)
{
    for (int i = 0; i < ncol; i++)
        last[i] = NAN;
    char p[GB_RUNDIR_PATH_MAX];
    int rc = gb_rundir_file(rd, "metrics.csv", p, sizeof p, err);
    if (rc)
        return rc;
    FILE *f = fopen(p, "r");
    if (!f) {
        if (errno == ENOENT) /* it died before its first row: start the file */
            return gb_rundir_metrics_open(rd, names, ncol, err);
        return gb_error_errno(err, "open %s", p);
    }
    char line[4096], header[4096] = "", want[4096];
    size_t used = 0;
    want[0] = '\0';
    for (int i = 0; i < ncol; i++)
        used += (size_t)snprintf(want + used, sizeof want - used, "%s%s", i ? "," : "", names[i]);
    int have_header = 0, ended = 1; /* ended: the file ends with a newline */
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        ended = n && line[n - 1] == '\n';
        if (n && line[n - 1] != '\n' && !feof(f)) {
            fclose(f);
            return gb_error_set(err, GB_ECORRUPT, "%s: a line longer than %zu bytes", p,
                                sizeof line);
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (!have_header) {
            snprintf(header, sizeof header, "%s", line);
            have_header = 1;
            continue;
        }
        /* the last complete row wins; a row cut short by a crash (fewer fields) is skipped */
        double v[256];
        int k = 0;
        const char *c = line;
        for (; k < ncol && k < 256; k++) {
            const char *end = strchr(c, ',');
            v[k] = c[0] && c[0] != ',' ? strtod(c, NULL) : NAN;
            if (!end)
                break;
            c = end + 1;
        }
        if (k == ncol - 1 && ended)
            memcpy(last, v, (size_t)ncol * sizeof *last);
    }
    fclose(f);
    if (!have_header)
        return gb_rundir_metrics_open(rd, names, ncol, err);
    size_t hl = strlen(header);
    if (hl && hl < strlen(want) && strncmp(header, want, hl) == 0 && want[hl] == ',') {
        /* an earlier gearbox's columns: ours append to them */
        int added = 0;
        for (const char *c = want + hl; *c; c++)
            added += *c == ',';
        if (added > 32)
            return gb_error_set(err, GB_EINVAL, "%s: %d columns to add (at most 32)", p, added);
        if ((rc = widen_metrics(p, want, added, err)))
            return rc;
        return gb_rundir_metrics_continue(rd, names, ncol, last, err);
    }
    if (strcmp(header, want) != 0)
        return gb_error_set(err, GB_EINVAL, "%s: its columns (%.200s) are not this gearbox's "
                            "(%.200s): written by another version, it cannot be continued", p,
                            header, want);
    rd->metrics = fopen(p, "a");
    if (!rd->metrics)
        return gb_error_errno(err, "open %s", p);
    rd->metrics_columns = ncol;
    if (!ended && (fputc('\n', rd->metrics) == EOF || fflush(rd->metrics) != 0))
        return gb_error_errno(err, "write %s", p); /* a row the crash cut short ends here */
    return open_tensorboard(rd, names, ncol, err);
}

int gb_rundir_metrics_row(gb_rundir *rd, const double *values, int ncol, gb_error *err)
{
    if (!rd->metrics || ncol != rd->metrics_columns)
        return gb_error_set(err, GB_EINVAL, "metrics row of %d values, header has %d", ncol,
                            rd->metrics_columns);
    for (int i = 0; i < ncol; i++) {
        if (i)
            fputc(',', rd->metrics);
        if (isfinite(values[i]))
            fprintf(rd->metrics, "%.10g", values[i]);
    }
    fputc('\n', rd->metrics);
    if (fflush(rd->metrics) != 0)
        return gb_error_errno(err, "write metrics.csv in %s", rd->path);
    return rd->tb ? gb_tensorboard_row(rd->tb, rd->metrics_names, values, ncol, rd->metrics_step,
                                       err)
                  : 0;
}

int gb_rundir_tb_scalars(gb_rundir *rd, int64_t step, const char *const *tags,
                         const double *values, int n, gb_error *err)
{
    return rd->tb ? gb_tensorboard_scalars(rd->tb, step, tags, values, n, err) : 0;
}

int gb_rundir_tb_image(gb_rundir *rd, int64_t step, const char *tag, int height, int width,
                       int colorspace, const void *bytes, size_t len, gb_error *err)
{
    return rd->tb ? gb_tensorboard_image(rd->tb, step, tag, height, width, colorspace, bytes, len,
                                         err)
                  : 0;
}

void gb_rundir_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.10g", x);
    else
        fputs("null", f);
}

/* summary.json's "evaluation" (null when none ran) and "evaluations". */
static void write_evaluation(FILE *f, const gb_run_eval *e, int64_t evaluations)
{
    fputs(",\n  \"evaluation\": ", f);
    if (!e->valid) {
        fputs("null", f);
    } else {
        fputs("{\"return_mean\": ", f);
        json_number(f, e->return_mean);
        fputs(", \"return_std\": ", f);
        json_number(f, e->return_std);
        fputs(", \"length_mean\": ", f);
        json_number(f, e->length_mean);
        fprintf(f, ", \"episodes\": %lld, \"env_steps\": %lld, \"checkpoint_step\": %lld, "
                   "\"reached_target\": %s, \"held\": %s}",
                (long long)e->episodes, (long long)e->env_steps, (long long)e->checkpoint_step,
                e->reached_target ? "true" : "false", e->held ? "true" : "false");
    }
    fprintf(f, ",\n  \"evaluations\": %lld", (long long)evaluations);
}

int gb_rundir_write_summary(const gb_rundir *rd, const gb_run_summary *s, gb_error *err)
{
    atomic_file a;
    int rc = atomic_open(rd, "summary.json", &a, err);
    if (rc)
        return rc;
    FILE *f = a.f;
    fputs("{\n  \"mode\": ", f);
    gb_rundir_json_string(f, s->mode);
    fprintf(f, ",\n  \"env_steps\": %lld", (long long)s->env_steps);
    if (s->has_samples)
        fprintf(f, ",\n  \"env_steps_unsent\": %lld", (long long)s->env_steps_unsent);
    fprintf(f, ",\n  \"train_steps\": %lld,\n  \"wall_seconds\": ", (long long)s->train_steps);
    json_number(f, s->wall_seconds);
    fputs(",\n  \"episode_return_mean\": ", f);
    json_number(f, s->episode_return_mean);
    fprintf(f, ",\n  \"episodes\": %lld,\n  \"target_return\": ", (long long)s->episodes);
    json_number(f, s->target_return);
    fprintf(f, ",\n  \"solved\": %s,\n  \"solved_by\": ", s->solved ? "true" : "false");
    gb_rundir_json_string(f, s->solved_by);
    write_evaluation(f, &s->evaluation, s->evaluations);
    fputs(",\n  \"exit_reason\": ", f);
    gb_rundir_json_string(f, s->exit_reason);
    if (s->error) {
        fputs(",\n  \"error\": ", f);
        gb_rundir_json_string(f, s->error);
    }
    fprintf(f, ",\n  \"workers\": {\"actors\": %lld, \"policies\": %lld, \"trainers\": %lld, "
               "\"joined\": %lld, \"joined_restarts\": %lld},\n  \"envs\": %lld",
            (long long)s->actors, (long long)s->policies, (long long)s->trainers,
            (long long)s->joined, (long long)s->joined_restarts, (long long)s->envs);
    fprintf(f, ",\n  \"reports_rejected\": %lld", (long long)s->reports_rejected);
    fprintf(f, ",\n  \"registry_rejected\": %lld", (long long)s->registry_rejected);
    if (s->auth_refused >= 0)
        fprintf(f, ",\n  \"auth_refused\": %lld", (long long)s->auth_refused);
    if (s->segment > 0) {
        fprintf(f, ",\n  \"resumed\": {\"segment\": %d, \"from_env_steps\": %lld, "
                   "\"segment_wall_seconds\": ",
                s->segment, (long long)s->segment_env_steps);
        json_number(f, s->segment_seconds);
        fprintf(f, ", \"trainer_sets_left\": %d}", s->trainer_sets_left);
    }
    if (s->has_samples) {
        fprintf(f, ",\n  \"samples\": {\"chunks_sent\": %lld, \"dropped\": %lld, "
                   "\"chunks_received\": %lld, \"discarded_at_stop\": %lld, \"nonfinite\": %lld, "
                   "\"rejected\": %lld, \"lost_in_crash\": %lld, \"lost\": ",
                (long long)s->chunks_sent, (long long)s->chunks_dropped,
                (long long)s->chunks_received, (long long)s->chunks_discarded,
                (long long)s->chunks_nonfinite, (long long)s->chunks_rejected,
                (long long)s->chunks_lost_in_crash);
        if (s->ledger_complete)
            fprintf(f, "%lld", (long long)(s->chunks_sent - s->chunks_received -
                                           s->chunks_lost_in_crash));
        else
            fputs("null", f);
        fprintf(f, ", \"chunks_trained\": %lld, \"trained_share\": ",
                (long long)s->chunks_trained);
        json_number(f, s->chunks_received > 0
                           ? (double)s->chunks_trained / (double)s->chunks_received : NAN);
        fputc('}', f);
    }
    fprintf(f, ",\n  \"restarts\": [");
    for (int i = 0; i < s->nrestarts; i++) {
        fputs(i ? ",\n    {\"worker\": " : "\n    {\"worker\": ", f);
        gb_rundir_json_string(f, s->restarts[i].worker);
        fputs(", \"reason\": ", f);
        gb_rundir_json_string(f, s->restarts[i].reason);
        fputs(", \"at_s\": ", f);
        json_number(f, s->restarts[i].at_s);
        fputc('}', f);
    }
    fputs(s->nrestarts ? "\n  ]" : "]", f);
    if (s->ntrackers > 0)
        fputs(",\n  \"trackers\": {", f);
    for (int i = 0; i < s->ntrackers; i++) {
        fputs(i ? ", " : "", f);
        gb_rundir_json_string(f, s->trackers[i].name);
        fprintf(f, ": {\"ok\": %s, \"error\": ", s->trackers[i].error ? "false" : "true");
        if (s->trackers[i].error)
            gb_rundir_json_string(f, s->trackers[i].error);
        else
            fputs("null", f);
        fprintf(f, ", \"log\": \"logs/tracker-%s.log\"}", s->trackers[i].name);
    }
    fputs(s->ntrackers > 0 ? "}\n}\n" : "\n}\n", f);
    return atomic_commit(&a, 1, err);
}

void gb_rundir_close(gb_rundir *rd)
{
    if (rd->metrics)
        fclose(rd->metrics);
    rd->metrics = NULL;
    gb_tensorboard_close(rd->tb, NULL);
    rd->tb = NULL;
    gb_rundir_unlock(rd);
}
