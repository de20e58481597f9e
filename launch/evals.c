/* launch/evals.c: evaluations during a run, as `gearbox eval` children: their videos, and the
 * verdict on them (evals.h). */
#include "launch/evals.h"
#include "launch/json.h"

#include "launch/video.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/run/metrics.h"
#include "runtime/run/rundir.h"
#include "runtime/run/tensorboard.h"
#include "runtime/streams/wire.h"
#include "workers/roles/checkpoint_set.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void gb_evals_init(gb_evals *ev, const gb_evals_opts *o)
{
    memset(ev, 0, sizeof *ev);
    ev->rd = o->rd;
    ev->every = o->every;
    ev->episodes = o->episodes;
    ev->seed = o->seed;
    ev->target = o->every > 0 ? o->target : NAN;
    ev->ctl = o->ctl;
    ev->hold = o->hold && o->ctl && !isnan(ev->target);
    ev->hold_wait_s = o->hold_wait_s > 0 ? o->hold_wait_s : 60.0;
    ev->go_fd = -1;
    ev->last_step = -1;
    ev->want_step = -1;
    if (o->every > 0)
        ev->next = ((int64_t)o->env_steps / o->every + 1) * o->every;
    snprintf(ev->run_dir, sizeof ev->run_dir, "%s", o->run_dir);
    snprintf(ev->exe, sizeof ev->exe, "%s", o->exe);
}

int gb_evals_verdict_due(gb_evals *ev, int64_t train_steps)
{
    if (ev->every <= 0 || isnan(ev->target) || ev->solved || ev->pending_verdict ||
        ev->pid > 0 || gb_now_s() < ev->quiet_until)
        return 0;
    ev->pending_verdict = 1;
    ev->want_step = train_steps;
    GB_INFO("the training episodes reached the target %g: evaluating the policy (a checkpoint "
            "of at least %lld training steps)", ev->target, (long long)train_steps);
    if (ev->ctl && !ev->hold) /* held: gb_evals_poll asks for it */
        gb_runctl_server_request_checkpoint(ev->ctl);
    return 1;
}

/* Lets the trainers learn again after a held evaluation (none: no-op). */
static void release(gb_evals *ev)
{
    if (ev->hold_req == 0)
        return;
    gb_runctl_server_release(ev->ctl);
    GB_INFO("evaluation: the trainers' learning released (request %lld)",
            (long long)ev->hold_req);
    ev->hold_req = 0;
}

/* The GIF at path (at most GB_EVALS_GIF_MAX bytes) into a malloc'd *out of *len bytes. Returns
 * 0, or -1 with the reason logged. */
static int read_gif(const char *path, uint8_t **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        GB_WARN("evaluation: %s: %s: not logged to TensorBoard", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (st.st_size <= 0 || st.st_size > GB_EVALS_GIF_MAX) {
        GB_WARN("evaluation: %s has %lld bytes (at most %d): not logged to TensorBoard", path,
                (long long)st.st_size, GB_EVALS_GIF_MAX);
        fclose(f);
        return -1;
    }
    uint8_t *b = malloc((size_t)st.st_size);
    size_t n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (n != (size_t)st.st_size) {
        GB_WARN("evaluation: reading %s: %s", path, b ? "short read" : "out of memory");
        free(b);
        return -1;
    }
    *out = b;
    *len = n;
    return 0;
}

/* Reads the finished evaluation's report (videos/eval_<env_steps>.json) into *r. Returns 0, or
 * -1 with the reason logged. */
static int read_report(const gb_evals *ev, gb_run_eval *r)
{
    char path[2400];
    snprintf(path, sizeof path, "%s/videos/eval_%lld.json", ev->run_dir,
             (long long)ev->pid_env_steps);
    static const char *const keys[] = {"return_mean", "return_std", "length_mean", "episodes",
                                       "checkpoint_step"};
    double v[5];
    json_t *report = NULL; /* gearbox eval --json's object */
    gb_error jerr = {0};
    int rc = gb_json_load(path, &report, &jerr);
    for (int i = 0; i < 5 && rc == 0; i++)
        rc = gb_json_number(report, keys[i], &v[i], &jerr);
    json_decref(report);
    if (rc || !isfinite(v[0])) {
        GB_WARN("evaluation at %lld env steps: no results in %s (%s)",
                (long long)ev->pid_env_steps, path, rc ? jerr.msg : "return_mean not a number");
        return -1;
    }
    *r = (gb_run_eval){.valid = 1, .return_mean = v[0], .return_std = v[1],
                       .length_mean = v[2], .episodes = (int64_t)v[3],
                       .env_steps = ev->pid_env_steps, .checkpoint_step = (int64_t)v[4],
                       .reached_target = !isnan(ev->target) && v[0] >= ev->target,
                       .held = ev->hold_req != 0}; /* released only after this */
    return 0;
}

/* Logs the finished evaluation r (valid 0: its report could not be read) to TensorBoard: its
 * scalars, and its GIF (video: it made one) as the image eval/video. What cannot be read is
 * warned about and left out. Returns 0 or the error of writing tb/. */
static int log_results(gb_evals *ev, const gb_run_eval *r, int video, gb_error *err)
{
    if (!ev->rd)
        return 0;
    long long at = (long long)ev->pid_env_steps;
    static const char *const tags[] = {"eval/return_mean", "eval/return_std",
                                       "eval/length_mean"};
    double values[3] = {r->return_mean, r->return_std, r->length_mean};
    int rc = 0;
    if (r->valid && (rc = gb_rundir_tb_scalars(ev->rd, ev->pid_env_steps, tags, values, 3, err)))
        return rc;
    if (!video)
        return 0;
    char path[2400];
    snprintf(path, sizeof path, "%s/videos/eval_%lld.gif", ev->run_dir, at);
    uint8_t *gif;
    size_t len;
    if (read_gif(path, &gif, &len) != 0)
        return 0;
    int w, h;
    if (gb_video_gif_size(gif, len, &w, &h) != 0) {
        GB_WARN("evaluation: %s is not a GIF: not logged to TensorBoard", path);
    } else if ((rc = gb_rundir_tb_image(ev->rd, ev->pid_env_steps, "eval/video", h, w,
                                        GB_TENSORBOARD_COLORSPACE_RGB, gif, len, err)) == 0) {
        ev->logged++;
        GB_INFO("evaluation at %lld env steps in TensorBoard: eval/video (%d x %d GIF, %zu "
                "bytes)", at, w, h, len);
    }
    free(gif);
    return rc;
}

/* gb_checkpoint_write's writer for a set that is another set's (ctx's) model file and policy
 * file, hard-linked (a link is atomic and costs no copy; the trainer's later sets remove its
 * names, not the files). */
static int link_model(void *ctx, const char *model_path, const char *replay_path,
                      const char *policy_path, gb_error *err)
{
    const gb_checkpoint_files *from = ctx;
    (void)replay_path;
    const char *src = from->model, *dst = model_path;
    if (link(src, dst) == 0 && (!policy_path || link(src = from->policy, dst = policy_path) == 0))
        return 0;
    return gb_error_set(err, GB_ESYS, "link %s -> %s: %s", src, dst, strerror(errno));
}

/* The run's checkpoints/ folder into dir (2100 bytes). */
static void checkpoints_dir(const gb_evals *ev, char dir[2100])
{
    snprintf(dir, 2100, "%s/checkpoints", ev->run_dir);
}

/* The checkpoint set `name` (trainer-0, evaluating, ...) into ck. Returns 1 when there is one. */
static int find_set(const gb_evals *ev, const char *name, gb_checkpoint_files *ck)
{
    char dir[2100];
    checkpoints_dir(ev, dir);
    gb_error ignored = {0};
    return gb_checkpoint_find(dir, name, ck, &ignored) == 0;
}

/* Pins the model (and policy file) of the checkpoint set `from` as the set `to` (no replay) in
 * the run's checkpoints/ at the same step. Returns 0, or -1 with the reason logged. */
static int pin_set(const gb_evals *ev, const gb_checkpoint_files *from, const char *to)
{
    char dir[2100];
    checkpoints_dir(ev, dir);
    gb_error err = {0};
    if (gb_checkpoint_write(dir, to, from->step, from->policy[0] ? GB_CHECKPOINT_POLICY : 0,
                            link_model, (void *)from, &err)) {
        GB_WARN("evaluation: cannot keep checkpoint step %lld as %s/%s.checkpoint: %s",
                (long long)from->step, dir, to, err.msg);
        return -1;
    }
    return 0;
}

/* The verdict on the finished evaluation r: logged; the first at the target decides. */
static void judge(gb_evals *ev, gb_run_eval *r)
{
    ev->finished++;
    ev->last = *r;
    char target[64] = "";
    if (!isnan(ev->target))
        snprintf(target, sizeof target, ": %s the target %g",
                 r->reached_target ? "reaches" : "short of", ev->target);
    GB_INFO("evaluation at %lld env steps: return %.2f +- %.2f over %lld deterministic "
            "episodes of checkpoint step %lld%s", (long long)r->env_steps, r->return_mean,
            r->return_std, (long long)r->episodes, (long long)r->checkpoint_step, target);
    if (r->reached_target && !ev->solved) {
        ev->solved = 1;
        ev->decided = *r;
        /* the policy the verdict rests on stays (without a hold the trainers go on) */
        gb_checkpoint_files played;
        if (ev->pid_set[0] && find_set(ev, ev->pid_set, &played) &&
            pin_set(ev, &played, "solved") == 0)
            GB_INFO("the policy that solved it: checkpoints/solved.checkpoint (step %lld)",
                    (long long)played.step);
    }
}

static void start(gb_evals *ev, const char *set, int64_t env_steps, int mode, int wait);

/* Logs how the evaluation child ended, its results and the verdict on them (a film: its GIF);
 * then releases a hold the verdict does not keep, and films a held crossing's first episode.
 * Returns as log_results. */
static int reaped(gb_evals *ev, int status, gb_error *err)
{
    int rc = 0, mode = ev->pid_mode;
    if (mode != GB_EVALS_FILM)
        ev->quiet_until = gb_now_s() + (gb_now_s() - ev->pid_started);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        gb_run_eval r = {0};
        if (mode != GB_EVALS_PLAY)
            GB_INFO("evaluation at %lld env steps done: videos/eval_%lld.mp4",
                    (long long)ev->pid_env_steps, (long long)ev->pid_env_steps);
        if (mode != GB_EVALS_FILM && read_report(ev, &r) == 0)
            judge(ev, &r);
        rc = log_results(ev, &r, mode != GB_EVALS_PLAY, err);
    } else if (!ev->pid_dropped) { /* a dropped one was said when it was stopped */
        ev->failed++;
        GB_WARN("evaluation at %lld env steps failed (%s %d): see logs/eval_%lld%s.log",
                (long long)ev->pid_env_steps, WIFEXITED(status) ? "exit status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                (long long)ev->pid_env_steps, mode == GB_EVALS_FILM ? ".film" : "");
    }
    ev->pid = 0;
    ev->pid_dropped = 0;
    if (ev->go_fd >= 0) { /* it ended before its go: this evaluation is dropped, not retried */
        close(ev->go_fd);
        ev->go_fd = -1;
        ev->pending = ev->pending_verdict = 0;
    }
    if (!ev->solved) /* held: the run goes on learning; solved, it ends on the policy played */
        release(ev);
    if (mode == GB_EVALS_PLAY && ev->film_after) { /* the same policy, the hold let go */
        char set[32];
        snprintf(set, sizeof set, "%s", ev->pid_set);
        ev->film_after = 0;
        start(ev, set, ev->pid_env_steps, GB_EVALS_FILM, 0);
    }
    return rc;
}

/* Logs that the evaluation at ev->pid_env_steps plays checkpoint step ev->last_step now. */
static void log_started(const gb_evals *ev)
{
    GB_INFO("evaluation at %lld env steps started on checkpoint step %lld (pid %d)%s%s",
            (long long)ev->pid_env_steps, (long long)ev->last_step, (int)ev->pid,
            ev->pid_verdict ? ", for the verdict" : "",
            ev->hold_req ? ", the trainers held at it" : "");
}

/* Starts `gearbox eval` on checkpoint set `set` for the evaluation at env_steps: its episodes
 * (GB_EVALS_PLAY), those and the video of the first (GB_EVALS_PLAY_FILM), or only the video of
 * the first (GB_EVALS_FILM: one episode, the same as the first of the others, deterministic and
 * seeded alike; its JSON is not kept). wait: it loads its library and waits for its go on
 * ev->go_fd (gearbox eval --wait-stdin; go_held). */
static void start(gb_evals *ev, const char *set, int64_t env_steps, int mode, int wait)
{
    char dir[2400], mp4[2400], gif[2400], json[2400], log[2400], episodes[32], seed[32];
    snprintf(dir, sizeof dir, "%s/videos", ev->run_dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        GB_WARN("evaluation: cannot make %s: %s", dir, strerror(errno));
        return;
    }
    int film = mode == GB_EVALS_FILM;
    snprintf(mp4, sizeof mp4, "%s/videos/eval_%lld.mp4", ev->run_dir, (long long)env_steps);
    snprintf(gif, sizeof gif, "%s/videos/eval_%lld.gif", ev->run_dir, (long long)env_steps);
    snprintf(json, sizeof json, "%s/videos/eval_%lld.json", ev->run_dir, (long long)env_steps);
    snprintf(log, sizeof log, "%s/logs/eval_%lld%s.log", ev->run_dir, (long long)env_steps,
             film ? ".film" : "");
    snprintf(episodes, sizeof episodes, "%lld", film ? 1LL : (long long)ev->episodes);
    snprintf(seed, sizeof seed, "%lld", (long long)ev->seed);
    /* the video films the first episode (all of them take seconds to encode, and the verdict
     * waits for them) */
    const char *argv[20] = {ev->exe, "eval", ev->run_dir, "--checkpoint", set, "--episodes",
                            episodes, "--deterministic", "--json", "--seed", seed};
    int n = 11;
    if (wait)
        argv[n++] = "--wait-stdin";
    if (mode != GB_EVALS_PLAY) {
        const char *video[] = {"--video", mp4, "--gif", gif, "--video-episodes", "1"};
        for (int i = 0; i < 6; i++)
            argv[n++] = video[i];
    }
    argv[n] = NULL;
    int go[2] = {-1, -1};
    if (wait && pipe2(go, O_CLOEXEC) != 0) {
        GB_WARN("evaluation: pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        GB_WARN("evaluation: fork: %s", strerror(errno));
        if (wait)
            close(go[0]), close(go[1]);
        return;
    }
    if (pid == 0) {
        int out = open(film ? "/dev/null" : json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        int in = wait ? go[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out < 0 || err < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
            dup2(err, 2) < 0)
            _exit(126);
        signal(SIGINT, SIG_IGN); /* the launcher ends it (gb_evals_finish), not a Ctrl-C */
        execv(ev->exe, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", ev->exe, strerror(errno));
        _exit(127);
    }
    if (wait) {
        close(go[0]);
        ev->go_fd = go[1];
    }
    ev->pid = pid;
    snprintf(ev->pid_set, sizeof ev->pid_set, "%s", set);
    ev->pid_env_steps = env_steps;
    ev->pid_started = gb_now_s();
    ev->pid_mode = mode;
    if (film) {
        GB_INFO("evaluation at %lld env steps: filming its first episode (pid %d)",
                (long long)env_steps, (int)pid);
        return;
    }
    ev->started++;
    if (!wait)
        log_started(ev);
}

/* Starts the evaluation due (a crossing's, with a video; or the verdict's) on checkpoint ck at
 * env_steps. It plays a pinned copy: the trainer's next set removes this one's files, and a
 * verdict must name the policy it played. */
static void start_on(gb_evals *ev, const gb_checkpoint_files *ck, int64_t env_steps)
{
    ev->last_step = ck->step;
    int video = ev->pending;
    ev->pid_verdict = !video;
    ev->pending = ev->pending_verdict = 0;
    start(ev, pin_set(ev, ck, "evaluating") == 0 ? "evaluating" : "trainer-0", env_steps,
          video ? GB_EVALS_PLAY_FILM : GB_EVALS_PLAY, 0);
}

/* Starts the evaluation due on trainer 0's newest checkpoint, once one newer than the last
 * evaluated exists (for the verdict: one of at least want_step); else it waits. */
static void start_newest(gb_evals *ev, int64_t env_steps)
{
    gb_checkpoint_files ck;
    if (!find_set(ev, "trainer-0", &ck) || ck.step <= ev->last_step ||
        (ev->pending_verdict && ck.step < ev->want_step))
        return;
    start_on(ev, &ck, env_steps);
}

/* A held evaluation: asks for the checkpoint and the hold, and starts its process, which loads
 * its library meanwhile and waits for its go (go_held). */
static void start_held(gb_evals *ev, int64_t env_steps)
{
    ev->hold_req = gb_runctl_server_request_hold(ev->ctl);
    ev->hold_asked = gb_now_s();
    start(ev, "evaluating", env_steps, GB_EVALS_PLAY, 1);
    if (ev->pid <= 0) /* it could not start: nothing to hold for (the next poll tries again) */
        release(ev);
}

/* The waiting process's go: once trainer 0 holds at the request and its checkpoint set is of
 * the step it holds at, that set is pinned and played. final (the workers stopped): at once, on
 * the final set. Past hold_wait_s the hold is released and the newest set played; with
 * no set at all by then the process is stopped (that evaluation dropped, said so). */
static void go_held(gb_evals *ev, const gb_metrics_collector *mc, int final)
{
    double held = mc ? gb_metrics_get(mc, GB_ROLE_TRAINER, 0, "held") : NAN; /* NaN: none */
    /* held, its train_steps is the step it holds at */
    double held_step = mc ? gb_metrics_get(mc, GB_ROLE_TRAINER, 0, "train_steps") : NAN;
    int late = final || gb_now_s() - ev->hold_asked >= ev->hold_wait_s;
    if (held != (double)ev->hold_req && !late)
        return; /* not held yet: the manifest is read only once it says so */
    gb_checkpoint_files ck;
    int found = find_set(ev, "trainer-0", &ck);
    int ready = found && held == (double)ev->hold_req && (double)ck.step == held_step;
    if (!ready && !late)
        return;
    if (!ready && !final) {
        GB_WARN("evaluation: trainer 0 did not hold at a checkpoint within %g s (request "
                "%lld): evaluating the newest checkpoint while the trainers learn on",
                ev->hold_wait_s, (long long)ev->hold_req);
        ev->hold_missed++;
    }
    if (!ready)
        release(ev);
    if (!found) {
        GB_INFO("evaluation at %lld env steps dropped: no checkpoint to play yet",
                (long long)ev->pid_env_steps);
        ev->pid_dropped = 1;
    }
    if (!found || pin_set(ev, &ck, "evaluating") != 0) {
        kill(ev->pid, SIGKILL);
        return;
    }
    ev->last_step = ck.step;
    ev->pid_verdict = !ev->pending;
    ev->film_after = ev->pending; /* filmed after the verdict: the hold lasts the episodes */
    ev->pending = ev->pending_verdict = 0;
    ev->holds += ready;
    if (write(ev->go_fd, "go\n", 3) != 3)
        GB_WARN("evaluation: its go: %s", strerror(errno)); /* it ends: reaped as failed */
    close(ev->go_fd);
    ev->go_fd = -1;
    log_started(ev);
}

int gb_evals_poll(gb_evals *ev, int64_t env_steps, const gb_metrics_collector *mc,
                  gb_error *err)
{
    if (ev->every <= 0)
        return 0;
    int status, rc = 0;
    if (ev->pid > 0 && waitpid(ev->pid, &status, WNOHANG) == ev->pid)
        rc = reaped(ev, status, err);
    if (env_steps >= ev->next) {
        ev->pending = 1;
        ev->next = (env_steps / ev->every + 1) * ev->every;
    }
    if (ev->go_fd >= 0 && ev->pid > 0)
        go_held(ev, mc, mc == NULL);
    if ((!ev->pending && !ev->pending_verdict) || ev->pid > 0)
        return rc;
    if (ev->hold && mc)
        start_held(ev, env_steps);
    else
        start_newest(ev, env_steps);
    return rc;
}

/* Waits up to wait_s for the running evaluation, then stops it (SIGTERM, then SIGKILL every
 * 5 s) and reaps it. Returns as reaped. */
static int wait_child(gb_evals *ev, double wait_s, gb_error *err)
{
    if (ev->pid <= 0)
        return 0;
    GB_INFO("waiting up to %.0f s for the evaluation at %lld env steps", wait_s,
            (long long)ev->pid_env_steps);
    int status, sig = 0;
    double deadline = gb_now_s() + wait_s;
    for (;;) {
        pid_t r = waitpid(ev->pid, &status, WNOHANG);
        if (r == ev->pid)
            return reaped(ev, status, err);
        if (r < 0 && errno != EINTR) {
            ev->pid = 0;
            return 0;
        }
        if (gb_now_s() >= deadline) {
            sig = sig == 0 ? SIGTERM : SIGKILL;
            GB_WARN("evaluation at %lld env steps still running: sending %s",
                    (long long)ev->pid_env_steps, sig == SIGTERM ? "SIGTERM" : "SIGKILL");
            kill(ev->pid, sig);
            deadline = gb_now_s() + 5;
        }
        usleep(20000);
    }
}

int gb_evals_finish(gb_evals *ev, int64_t env_steps, double wait_s,
                    const gb_metrics_collector *mc, gb_error *err)
{
    if (ev->every <= 0)
        return 0;
    if (ev->go_fd >= 0 && ev->pid > 0) /* waiting for its go: the final set, held or not */
        go_held(ev, mc, 1);
    gb_error later = {0};
    int rc = wait_child(ev, wait_s, err);
    ev->next = INT64_MAX; /* no new crossing: only one still pending starts */
    ev->hold_req = 0;      /* the workers stopped: the final checkpoint is what any hold kept */
    int rc2 = gb_evals_poll(ev, env_steps, NULL, rc ? &later : err);
    rc = rc ? rc : rc2;
    rc2 = wait_child(ev, wait_s, rc ? &later : err);
    return rc ? rc : rc2;
}
