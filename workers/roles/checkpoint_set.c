/* workers/roles/checkpoint_set.c: a trainer's checkpoint sets and their manifest (see
 * checkpoint.h). */
#include "workers/roles/checkpoint_set.h"

#include "runtime/base/file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_MAGIC "gearbox-checkpoint 1"

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Parses a manifest's text; file names are relative to dir. Returns 0 or GB_ECORRUPT. */
static int parse_manifest(const char *dir, char *text, gb_checkpoint_files *out)
{
    memset(out, 0, sizeof *out);
    int have_step = 0, have_model = 0, magic = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (strcmp(line, MANIFEST_MAGIC) == 0) {
            magic = 1;
            continue;
        }
        if (!sp)
            return GB_ECORRUPT;
        *sp = '\0';
        const char *v = sp + 1;
        if (strchr(v, '/') || !v[0])
            return GB_ECORRUPT;
        if (strcmp(line, "step") == 0) {
            char *end;
            out->step = strtoll(v, &end, 10);
            have_step = *end == '\0' && out->step >= 0;
        } else if (strcmp(line, "model") == 0) {
            have_model = snprintf(out->model, sizeof out->model, "%s/%s", dir, v) <
                         (int)sizeof out->model;
        } else if (strcmp(line, "replay") == 0) {
            if (snprintf(out->replay, sizeof out->replay, "%s/%s", dir, v) >=
                (int)sizeof out->replay)
                return GB_ECORRUPT;
        } else if (strcmp(line, "policy") == 0) {
            if (snprintf(out->policy, sizeof out->policy, "%s/%s", dir, v) >=
                (int)sizeof out->policy)
                return GB_ECORRUPT;
        }
    }
    return magic && have_step && have_model ? 0 : GB_ECORRUPT;
}

int gb_checkpoint_find(const char *dir, const char *name, gb_checkpoint_files *out,
                       gb_error *err)
{
    char path[GB_CHECKPOINT_PATH_MAX], text[4 * GB_CHECKPOINT_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s.checkpoint", dir, name) >= (int)sizeof path)
        return gb_error_set(err, GB_EINVAL, "checkpoint path too long");
    FILE *f = fopen(path, "r");
    if (!f)
        return gb_error_set(err, GB_ENOTFOUND, "no checkpoint: %s: %s", path, strerror(errno));
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    if (parse_manifest(dir, text, out) != 0)
        return gb_error_set(err, GB_ECORRUPT, "checkpoint manifest %s is malformed", path);
    const char *missing = !exists(out->model)                         ? out->model
                          : out->replay[0] && !exists(out->replay) ? out->replay
                          : out->policy[0] && !exists(out->policy) ? out->policy
                                                                   : NULL;
    if (missing)
        return gb_error_set(err, GB_ENOTFOUND, "checkpoint %s names %s, which is missing", path,
                            missing);
    return 0;
}

/* Writes text to path whole or not at all (runtime/base/file.h). Returns 0 or GB_EIO. */
static int write_manifest(const char *path, const char *text, gb_error *err)
{
    gb_file_part part = {text, strlen(text)};
    int e = gb_file_write_atomic(path, &part, 1);
    if (e)
        return gb_error_set(err, GB_EIO, "checkpoint manifest: write %s: %s", path, strerror(e));
    return 0;
}

int gb_checkpoint_write(const char *dir, const char *name, int64_t step, int with,
                        gb_checkpoint_writer_fn write_set, void *ctx, gb_error *err)
{
    gb_checkpoint_files old = {0}, now = {0};
    gb_error ferr = {0};
    int have_old = gb_checkpoint_find(dir, name, &old, &ferr) == 0;
    char manifest[GB_CHECKPOINT_PATH_MAX], base[GB_CHECKPOINT_PATH_MAX];
    if (snprintf(manifest, sizeof manifest, "%s/%s.checkpoint", dir, name) >=
        (int)sizeof manifest)
        return gb_error_set(err, GB_EINVAL, "checkpoint path too long");
    /* a name no current file has: a second checkpoint at one step gets K = 1, ... */
    for (int k = 0;; k++) {
        int w = snprintf(base, sizeof base, "%s.step%" PRId64 "-%d", name, step, k);
        if (w < 0 || (size_t)w >= sizeof base ||
            snprintf(now.model, sizeof now.model, "%s/%s.model", dir, base) >=
                (int)sizeof now.model ||
            snprintf(now.replay, sizeof now.replay, "%s/%s.replay", dir, base) >=
                (int)sizeof now.replay ||
            snprintf(now.policy, sizeof now.policy, "%s/%s.policy", dir, base) >=
                (int)sizeof now.policy)
            return gb_error_set(err, GB_EINVAL, "checkpoint path too long");
        if (!exists(now.model) && !exists(now.replay) && !exists(now.policy))
            break;
        if (k > 1000)
            return gb_error_set(err, GB_EINVAL, "too many checkpoints of step %" PRId64, step);
    }
    now.step = step;
    const int replay = with & GB_CHECKPOINT_REPLAY, policy = with & GB_CHECKPOINT_POLICY;
    int rc = write_set(ctx, now.model, replay ? now.replay : NULL, policy ? now.policy : NULL,
                       err);
    if (rc == 0) {
        char text[4 * GB_CHECKPOINT_PATH_MAX];
        snprintf(text, sizeof text,
                 MANIFEST_MAGIC "\nstep %" PRId64 "\nmodel %s.model\n%s%s%s%s%s%s", step, base,
                 replay ? "replay " : "", replay ? base : "", replay ? ".replay\n" : "",
                 policy ? "policy " : "", policy ? base : "", policy ? ".policy\n" : "");
        rc = write_manifest(manifest, text, err);
    }
    if (rc) { /* the new set is not current: none of it stays */
        unlink(now.model);
        unlink(now.replay);
        unlink(now.policy);
        return rc;
    }
    if (have_old) { /* the manifest names the new set: the previous one can go */
        unlink(old.model);
        if (old.replay[0])
            unlink(old.replay);
        if (old.policy[0])
            unlink(old.policy);
    }
    return 0;
}
