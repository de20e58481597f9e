/* launch/trackers.h: experiment.trackers (mlflow, wandb): one Python follower a tracker beside
 * the launcher (python -m gearbox.follow RUN_DIR NAME, launch/python/gearbox/follow.py), which
 * writes the run's metrics rows to the tracker as they come, then its summary. The follower's
 * stdin is a pipe the launcher holds open while the run goes and closes once summary.json is
 * written; the launcher then waits for it and writes summary.json again with each tracker's
 * outcome ("trackers": {"mlflow": {"ok": true, "error": null, "log":
 * "logs/tracker-mlflow.log"}}). A
 * tracker that failed fails the command (exit status 1) and says how to export the run later.
 * The Python: experiment.trackers_python, else $GEARBOX_PYTHON, else gearbox's venv (the
 * build's GEARBOX_PYTHON); the follower gets GEARBOX_BIN (this command) and, when the source
 * tree is there, its launch/python on PYTHONPATH.
 * defines: gb_trackers, gb_trackers_check, gb_trackers_start, gb_trackers_finish */
#ifndef GB_LAUNCH_TRACKERS_H
#define GB_LAUNCH_TRACKERS_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "runtime/run/rundir.h"

#include <sys/types.h>

#define GB_TRACKERS_MAX 2
#define GB_TRACKERS_WAIT_S 120.0 /* how long the end waits for a follower */

/* The followers of one run (zeroed: none). */
typedef struct gb_trackers {
    int n;
    int kind[GB_TRACKERS_MAX];  /* gb_tracker */
    pid_t pid[GB_TRACKERS_MAX]; /* 0: did not start */
    int fd[GB_TRACKERS_MAX];    /* the write end of its stdin, -1 when closed */
    char why[GB_TRACKERS_MAX][256]; /* why it did not start ("" when it did) */
} gb_trackers;

/* gb_config_check_fn's tracker part (launch/validate.h), for `gearbox check` and `gearbox run`:
 * every tracker named once, the Python there and able to import the gearbox package and each
 * tracker's package (python -m gearbox.follow --probe). Returns 0 or GB_ECONFIG naming the key
 * (experiment.trackers or experiment.trackers_python) and what is missing. Blocks for the
 * probe (a Python start, about a second) when trackers are asked for. */
int gb_trackers_check(const gb_config *cfg, const gb_config_marks *marks, gb_error *err);

/* Starts cfg's followers on the run directory run_dir (its logs/ there), each logging to
 * logs/tracker-NAME.log. One that cannot start is recorded in t (finish reports it); the run
 * goes on. Call once the run directory holds config.yaml; the pipes are close-on-exec, so
 * workers started later do not hold them. Does not block. */
void gb_trackers_start(gb_trackers *t, const gb_config *cfg, const char *run_dir);

/* After summary.json is written (written: what it holds; NULL when it could not be written):
 * closes the followers' stdin, waits for each (at most GB_TRACKERS_WAIT_S, then it is ended),
 * writes the summary again with each tracker's outcome (gb_run_summary.trackers) and says on
 * stderr why each failed tracker failed and how to export the run afterwards. Returns the
 * number of trackers that failed (0: all done, or none asked for), one more when the summary
 * could not be written again. Blocks. */
int gb_trackers_finish(gb_trackers *t, const gb_rundir *rd, const gb_run_summary *written);

#endif
