/* launch/cmd_plot.c: `gearbox plot RUN_DIR... [-o out.png] [--metric NAME]
 * [--x env_steps|seconds]`: learning curves of runs from their metrics.csv, drawn by gnuplot
 * (pngcairo terminal). Runs whose config.yaml differ only in experiment.seed (and the run's name,
 * root and folder) form a group, drawn as the mean over its seeds with a min-max band on a
 * common x grid (each run linearly interpolated onto it, from where every run has begun to
 * where the last ends: one that ended sooner, solved, holds its last value); other runs are
 * lines of their own, labelled by their folder's name.
 * defines: gb_cmd_plot */
#include "launch/cli.h"
#include "launch/commands.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLOT_GRID 200  /* points of a group's common x grid */
#define PLOT_MAX_RUNS 256

/* One run: its curve (rows where x and the metric both have a value) and its group key. */
typedef struct plot_run {
    const char *dir;   /* as given */
    char label[256];   /* its folder's name (the path as given when two share a name) */
    double *x, *y;
    size_t n, cap;
    char *config;      /* config.yaml less the seed, name and folder keys and comments */
    long long seed;
    char name[128];    /* experiment.name: a group's label */
    int group;         /* index of its group's first run */
} plot_run;

static void plot_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox plot RUN_DIR... [-o OUT.png] [--metric NAME]\n"
            "                    [--x env_steps|seconds]\n\n"
            "Draws the learning curves of runs from their metrics.csv with gnuplot, as a PNG.\n"
            "Runs whose config.yaml are the same but for experiment.seed (and the run's name and\n"
            "folder) form a group: the plot shows the group's mean over its seeds and a band from\n"
            "their minimum to their maximum, on a common x grid (each run interpolated linearly,\n"
            "over the range all of them cover). Every other run is a line of its own, labelled\n"
            "by its folder's name.\n\n"
            "options:\n"
            "  -o, --output OUT.png  where to write (default RUN_DIR/plot.png for one run,\n"
            "                        ./plot.png for several)\n"
            "  --metric NAME         a metrics.csv column (default return_mean_100)\n"
            "  --x env_steps|seconds the x axis: env steps (default) or seconds into the run\n\n"
            "needs gnuplot (Debian: gnuplot-nox).\n"
            "exit status: 0 written, 1 gnuplot failed or a run cannot be read, 2 usage error or "
            "an\n"
            "unknown metric\n");
}

static int push(plot_run *r, double x, double y)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        double *nx = realloc(r->x, cap * sizeof *nx);
        if (!nx)
            return -1;
        r->x = nx;
        double *ny = realloc(r->y, cap * sizeof *ny);
        if (!ny)
            return -1;
        r->y = ny;
        r->cap = cap;
    }
    r->x[r->n] = x;
    r->y[r->n++] = y;
    return 0;
}

/* Field i (0-based) of a CSV line into a double (NaN when empty or absent). */
static double field(const char *line, int i)
{
    const char *c = line;
    for (int k = 0; k < i; k++) {
        c = strchr(c, ',');
        if (!c)
            return NAN;
        c++;
    }
    if (*c == ',' || *c == '\0' || *c == '\n' || *c == '\r')
        return NAN;
    char *end;
    double v = strtod(c, &end);
    return end == c ? NAN : v;
}

/* Reads dir/metrics.csv: the columns xname (or, for time_s, wall_s: inline runs) and metric.
 * Returns 0, 2 (unknown metric: the message lists the columns) or 1 (cannot read). */
static int read_curve(plot_run *r, const char *metric, const char *xname)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.csv", r->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gearbox plot: %s: %s%s\n", path, strerror(errno),
                errno == ENOENT ? " (not a run directory, or the run wrote no metrics yet)" : "");
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = getline(&line, &cap, f);
    if (len <= 0) {
        fprintf(stderr, "gearbox plot: %s is empty\n", path);
        fclose(f);
        free(line);
        return 1;
    }
    line[strcspn(line, "\r\n")] = '\0';
    char *header = strdup(line);
    int xi = -1, mi = -1, wall = -1, col = 0;
    for (char *save = NULL, *name = strtok_r(header, ",", &save); name;
         name = strtok_r(NULL, ",", &save), col++) {
        if (strcmp(name, xname) == 0)
            xi = col;
        if (strcmp(name, "wall_s") == 0)
            wall = col;
        if (strcmp(name, metric) == 0)
            mi = col;
    }
    free(header);
    if (xi < 0 && strcmp(xname, "time_s") == 0)
        xi = wall;
    int rc = 0;
    if (mi < 0 || xi < 0) {
        fprintf(stderr, "gearbox plot: %s: no column '%s'; its columns: %s\n", path,
                mi < 0 ? metric : xname, line);
        rc = mi < 0 ? 2 : 1;
    }
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        double x = field(line, xi), y = field(line, mi);
        if (isfinite(x) && isfinite(y) && push(r, x, y)) {
            fprintf(stderr, "gearbox plot: out of memory\n");
            rc = 1;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* dir/config.yaml without comments and without the keys that differ between seeds of one
 * experiment (experiment.seed, .name, .run_root; launch.run_dir) into r->config, the seed into
 * r->seed. A run without config.yaml is a group of its own (config NULL). */
static void read_config(plot_run *r)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.yaml", r->dir);
    r->seed = -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char *out = NULL;
    size_t outlen = 0;
    FILE *m = open_memstream(&out, &outlen);
    if (!m) {
        fclose(f);
        return;
    }
    char line[4096], section[128] = "";
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        size_t indent = strspn(line, " ");
        const char *key = line + indent;
        size_t klen = strcspn(key, ":");
        if (indent == 0)
            snprintf(section, sizeof section, "%.*s", (int)klen, key);
        if (indent == 2) {
            int exp = strcmp(section, "experiment") == 0;
            if (exp && strncmp(key, "seed:", 5) == 0) {
                r->seed = strtoll(key + 5, NULL, 10);
                continue;
            }
            if (exp && strncmp(key, "name:", 5) == 0) {
                const char *v = key + 5 + strspn(key + 5, " \"");
                snprintf(r->name, sizeof r->name, "%.*s", (int)strcspn(v, "\"\n"), v);
                continue;
            }
            if ((exp && strncmp(key, "run_root:", 9) == 0) ||
                (strcmp(section, "launch") == 0 && strncmp(key, "run_dir:", 8) == 0))
                continue;
        }
        fputs(line, m);
    }
    fclose(f);
    if (fclose(m) == 0)
        r->config = out;
    else
        free(out);
}

/* The y of run r at x by linear interpolation (x within r's range; r->x non-decreasing). */
static double interpolate(const plot_run *r, double x)
{
    size_t lo = 0, hi = r->n - 1;
    if (x <= r->x[0])
        return r->y[0];
    if (x >= r->x[hi])
        return r->y[hi];
    while (hi - lo > 1) { /* r->x[lo] < x <= r->x[hi] */
        size_t mid = (lo + hi) / 2;
        if (r->x[mid] < x)
            lo = mid;
        else
            hi = mid;
    }
    double dx = r->x[hi] - r->x[lo];
    return dx > 0 ? r->y[lo] + (r->y[hi] - r->y[lo]) * (x - r->x[lo]) / dx : r->y[hi];
}

/* x must not go back (a resumed run's rows continue its counters): keep the rows where it
 * does not, so interpolation sees a function. */
static void monotone(plot_run *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (k && r->x[i] < r->x[k - 1])
            continue;
        r->x[k] = r->x[i];
        r->y[k++] = r->y[i];
    }
    r->n = k;
}

/* A gnuplot single-quoted string of s ('' for a quote) into f. */
static void gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n')
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* 1 when gnuplot is an executable on PATH. */
static int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/bin:/bin";
    char *copy = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/gnuplot", *d ? d : ".");
        found = access(p, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* Runs gnuplot on script; returns its exit status (127 when it could not start). */
static int run_gnuplot(const char *script)
{
    pid_t pid = fork();
    if (pid < 0)
        return 127;
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 127;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NCOLOURS (int)(sizeof colours / sizeof colours[0])

/* The members of group g (their count), its x range (the latest first x to the latest last: a
 * run that stopped sooner holds its last value), their seeds ("1,2,3", cut short at cap). */
static int group_span(const plot_run *runs, int n, int g, double *lo, double *hi, char *seeds,
                      size_t cap)
{
    int members = 0;
    size_t used = 0;
    *lo = *hi = -INFINITY;
    seeds[0] = '\0';
    for (int j = g; j < n; j++) {
        if (runs[j].group != g)
            continue;
        members++;
        *lo = fmax(*lo, runs[j].x[0]);
        *hi = fmax(*hi, runs[j].x[runs[j].n - 1]);
        if (used < cap)
            used += (size_t)snprintf(seeds + used, cap - used, "%s%lld", used ? "," : "",
                                     runs[j].seed);
    }
    return members;
}

/* Group g's rows into d: x, the mean over its members, their minimum and maximum, on
 * PLOT_GRID points of [lo, hi] (one point when the range is empty). */
static void write_group(FILE *d, const plot_run *runs, int n, int g, int members, double lo,
                        double hi)
{
    for (int k = 0; k < PLOT_GRID; k++) {
        double x = hi > lo ? lo + (hi - lo) * k / (PLOT_GRID - 1) : lo;
        double sum = 0, mn = INFINITY, mx = -INFINITY;
        for (int j = g; j < n; j++) {
            if (runs[j].group != g)
                continue;
            double y = interpolate(&runs[j], x);
            sum += y;
            mn = fmin(mn, y);
            mx = fmax(mx, y);
        }
        fprintf(d, "%.10g %.10g %.10g %.10g\n", x, sum / members, mn, mx);
        if (!(hi > lo))
            break;
    }
}

/* The series of group g (its first run): its data file tmp/series<series>.dat and its plot
 * clauses in gp: one run's line, or a group's band and mean. Returns an exit status. */
static int draw_series(FILE *gp, const plot_run *runs, int n, int g, const char *xlabel,
                       const char *tmp, int series)
{
    double lo, hi;
    char seeds[256];
    int members = group_span(runs, n, g, &lo, &hi, seeds, sizeof seeds);
    const plot_run *r = &runs[g];
    const char *colour = colours[series % NCOLOURS], *sep = series ? ", " : "";
    char data[4200];
    snprintf(data, sizeof data, "%s/series%d.dat", tmp, series);
    FILE *d = fopen(data, "w");
    if (!d) {
        fprintf(stderr, "gearbox plot: %s: %s\n", data, strerror(errno));
        return GB_EXIT_FAILURE;
    }
    if (members == 1) {
        for (size_t k = 0; k < r->n; k++)
            fprintf(d, "%.10g %.10g\n", r->x[k], r->y[k]);
        fprintf(gp, "%s'%s' using 1:2 with lines lw 2 lc rgb '%s' title ", sep, data, colour);
        gp_string(gp, r->label);
    } else {
        /* the common grid: where every seed has data */
        if (!(hi > lo))
            fprintf(stderr, "gearbox plot: the %d seeds of %s have no %s range in common: "
                    "their curve is one point\n", members, r->label, xlabel);
        write_group(d, runs, n, g, members, lo, hi);
        char name[640], band[600]; /* group (< 256 bytes), count and seeds (< 256 bytes) */
        const char *group = r->name[0] ? r->name : r->label;
        snprintf(name, sizeof name, "%s: mean of %d seeds (%s)", group, members, seeds);
        snprintf(band, sizeof band, "%s: min-max over seeds", group);
        fprintf(gp, "%s'%s' using 1:3:4 with filledcurves lc rgb '%s' title ", sep, data,
                colour);
        gp_string(gp, band);
        fprintf(gp, ", '%s' using 1:2 with lines lw 2 lc rgb '%s' title ", data, colour);
        gp_string(gp, name);
    }
    if (fclose(d) != 0) {
        fprintf(stderr, "gearbox plot: %s: %s\n", data, strerror(errno));
        return GB_EXIT_FAILURE;
    }
    return GB_EXIT_OK;
}

/* Writes the data files and the script into tmp, then runs gnuplot. Returns an exit status. */
static int draw(plot_run *runs, int n, const char *metric, const char *xlabel, const char *out,
                const char *tmp)
{
    char script[4200];
    snprintf(script, sizeof script, "%s/plot.gp", tmp);
    FILE *gp = fopen(script, "w");
    if (!gp) {
        fprintf(stderr, "gearbox plot: %s: %s\n", script, strerror(errno));
        return GB_EXIT_FAILURE;
    }
    fprintf(gp, "set terminal pngcairo noenhanced size 1000,600 font ',11'\nset output ");
    gp_string(gp, out);
    fprintf(gp, "\nset title ");
    gp_string(gp, metric);
    fprintf(gp, "\nset xlabel '%s'\nset ylabel ", xlabel);
    gp_string(gp, metric);
    fprintf(gp, "\nset grid\nset key tmargin center vertical maxrows 2\nset autoscale xfix\n"
                "set style fill transparent solid 0.25 noborder\nplot ");
    int series = 0, rc = GB_EXIT_OK;
    for (int i = 0; i < n && rc == GB_EXIT_OK; i++)
        if (runs[i].group == i) /* a group is drawn with its first run */
            rc = draw_series(gp, runs, n, i, xlabel, tmp, series++);
    fputc('\n', gp);
    if (fclose(gp) != 0 && rc == GB_EXIT_OK) {
        fprintf(stderr, "gearbox plot: %s: %s\n", script, strerror(errno));
        rc = GB_EXIT_FAILURE;
    }
    if (rc == GB_EXIT_OK) {
        int st = run_gnuplot(script);
        if (st != 0) {
            fprintf(stderr, "gearbox plot: gnuplot %s (exit status %d)\n",
                    st == 127 ? "could not be started" : "failed", st);
            rc = GB_EXIT_FAILURE;
        }
    }
    return rc;
}

/* Removes tmp and the files in it (ours: plot.gp, series*.dat). */
static void remove_tmp(const char *tmp, int series)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/plot.gp", tmp);
    unlink(p);
    for (int i = 0; i < series; i++) {
        snprintf(p, sizeof p, "%s/series%d.dat", tmp, i);
        unlink(p);
    }
    rmdir(tmp);
}

/* The label of each run: its folder's name, or the path as given when another run's folder has
 * the same name (runs/a/20260101T000000Z and runs/b/20260101T000000Z). */
static void label_runs(plot_run *runs, int n)
{
    for (int i = 0; i < n; i++) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", runs[i].dir);
        size_t l = strlen(tmp);
        while (l > 1 && tmp[l - 1] == '/')
            tmp[--l] = '\0';
        const char *base = strrchr(tmp, '/');
        snprintf(runs[i].label, sizeof runs[i].label, "%.255s", base ? base + 1 : tmp);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && strcmp(runs[i].label, runs[j].label) == 0 &&
                strchr(runs[i].dir, '/')) {
                snprintf(runs[i].label, sizeof runs[i].label, "%s", runs[i].dir);
                break;
            }
}

typedef struct plot_args {
    const char *out, *metric, *xaxis;
    const char *dirs[PLOT_MAX_RUNS];
    int n;
} plot_args;

static int take_plot(void *ctx, int opt, const char *arg)
{
    plot_args *a = ctx;
    switch (opt) {
    case 'o': a->out = arg; return 0;
    case 'm': a->metric = arg; return 0;
    case 'x': a->xaxis = arg; return 0;
    case GB_CLI_POSITIONAL:
        if (a->n == PLOT_MAX_RUNS) {
            fprintf(stderr, "gearbox plot: more than %d runs\n", PLOT_MAX_RUNS);
            return -1;
        }
        a->dirs[a->n++] = arg;
        return 0;
    default:
        fprintf(stderr, "gearbox plot: %s: unknown option%s\n\n", arg,
                opt == GB_CLI_NO_VALUE ? " or missing value" : "");
        plot_usage(stderr);
        return -1;
    }
}

/* Reads each run's curve and config. Returns an exit status. */
static int load_runs(plot_run *runs, plot_args *a, const char *xcol)
{
    int kept = 0; /* a run that failed early has nothing to draw: skipped, said on stderr */
    for (int i = 0; i < a->n; i++) {
        plot_run *r = &runs[kept];
        *r = (plot_run){.dir = a->dirs[i]};
        int rc = read_curve(r, a->metric, xcol);
        if (rc == GB_EXIT_USAGE)
            return rc; /* an unknown metric */
        if (rc == 0)
            monotone(r);
        if (rc == 0 && r->n == 0)
            fprintf(stderr, "gearbox plot: %s/metrics.csv has no row with both %s and %s\n",
                    a->dirs[i], xcol, a->metric);
        if (rc != 0 || r->n == 0) {
            fprintf(stderr, "gearbox plot: skipping %s\n", a->dirs[i]);
            free(r->x);
            free(r->y);
            continue;
        }
        read_config(r);
        a->dirs[kept++] = a->dirs[i];
    }
    a->n = kept;
    if (kept == 0)
        fprintf(stderr, "gearbox plot: no run to plot\n");
    return kept ? GB_EXIT_OK : GB_EXIT_FAILURE;
}

/* Labels the runs and puts each in its group (runs[i].group: the index of the first run with
 * the same config). Returns the number of groups. */
static int group_runs(plot_run *runs, int n)
{
    int groups = 0;
    label_runs(runs, n);
    for (int i = 0; i < n; i++) {
        runs[i].group = i;
        for (int j = 0; j < i; j++)
            if (runs[i].config && runs[j].config && runs[j].group == j &&
                strcmp(runs[i].config, runs[j].config) == 0) {
                runs[i].group = j;
                break;
            }
        groups += runs[i].group == i;
    }
    return groups;
}

/* Draws the grouped runs into out through a temporary folder and checks that gnuplot wrote it.
 * Returns an exit status. */
static int render(plot_run *runs, const plot_args *a, int groups, const char *xlabel,
                  const char *out)
{
    char tmp[] = "/tmp/gearbox-plot-XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "gearbox plot: mkdtemp: %s\n", strerror(errno));
        return GB_EXIT_FAILURE;
    }
    int rc = draw(runs, a->n, a->metric, xlabel, out, tmp);
    remove_tmp(tmp, groups);
    if (rc != GB_EXIT_OK)
        return rc;
    struct stat st;
    if (stat(out, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "gearbox plot: gnuplot wrote no %s\n", out);
        return GB_EXIT_FAILURE;
    }
    printf("wrote %s: %s over %s, %d runs in %d curves\n", out, a->metric, xlabel, a->n, groups);
    return GB_EXIT_OK;
}

int gb_cmd_plot(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"metric", required_argument, NULL, 'm'},
        {"x", required_argument, NULL, 'x'},
        {NULL, 0, NULL, 0},
    };
    if (gb_wants_help(argc, argv)) {
        plot_usage(stdout);
        return GB_EXIT_OK;
    }
    static plot_args a;
    a = (plot_args){.metric = "return_mean_100", .xaxis = "env_steps"};
    if (gb_cli_getopt(argc, argv, "o:", options, take_plot, &a) != 0)
        return GB_EXIT_USAGE;
    if (a.n == 0) {
        fprintf(stderr, "gearbox plot: no run directory given\n\n");
        plot_usage(stderr);
        return GB_EXIT_USAGE;
    }
    int secs = strcmp(a.xaxis, "seconds") == 0;
    if (!secs && strcmp(a.xaxis, "env_steps") != 0) {
        fprintf(stderr, "gearbox plot: --x %s: env_steps or seconds\n", a.xaxis);
        return GB_EXIT_USAGE;
    }
    const char *xcol = secs ? "time_s" : "env_steps", *xlabel = secs ? "seconds" : "env steps";
    if (!have_gnuplot()) {
        fprintf(stderr, "gearbox plot: gnuplot not found on PATH (Debian: apt-get install "
                        "gnuplot-nox; launch/install-deps.sh installs it)\n");
        return GB_EXIT_FAILURE;
    }
    const char *out = a.out;
    char default_out[4200];
    if (!out) {
        snprintf(default_out, sizeof default_out, "%s%splot.png", a.n == 1 ? a.dirs[0] : "",
                 a.n == 1 ? "/" : "");
        out = default_out;
    }
    plot_run *runs = calloc((size_t)a.n, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "gearbox plot: out of memory\n");
        return GB_EXIT_FAILURE;
    }
    int rc = load_runs(runs, &a, xcol);
    if (rc == GB_EXIT_OK)
        rc = render(runs, &a, group_runs(runs, a.n), xlabel, out);
    for (int i = 0; i < a.n; i++) {
        free(runs[i].x);
        free(runs[i].y);
        free(runs[i].config);
    }
    free(runs);
    return rc;
}
