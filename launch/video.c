/* launch/video.c: raw RGB frames piped into an ffmpeg child that encodes H.264, and an MP4
 * turned into an animated GIF by another (video.h). */
#include "launch/video.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* 1 when an executable named name is on PATH. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? p : ".", name) < (int)sizeof buf &&
            access(buf, X_OK) == 0)
            return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

int gb_video_open(gb_video *v, const char *path, int width, int height, int fps,
                  const char *title, gb_error *err)
{
    memset(v, 0, sizeof *v);
    v->fd = -1;
    if (width <= 0 || height <= 0 || fps <= 0)
        return gb_error_set(err, GB_EINVAL, "video: bad frame size %d x %d or rate %d", width,
                            height, fps);
    if (snprintf(v->path, sizeof v->path, "%s", path) >= (int)sizeof v->path)
        return gb_error_set(err, GB_EINVAL, "video: path too long: %s", path);
    char tag[512];
    if (snprintf(tag, sizeof tag, "title=%s", title ? title : "") >= (int)sizeof tag)
        return gb_error_set(err, GB_EINVAL, "video: title too long: %s", title);
    if (!on_path("ffmpeg"))
        return gb_error_set(err, GB_ENOTFOUND, "video: ffmpeg is not on PATH (Debian: apt-get "
                            "install ffmpeg, or launch/install-deps.sh video)");
    v->width = width;
    v->height = height;
    v->out_w = width + (width & 1);
    v->out_h = height + (height & 1);
    if (v->out_w != width || v->out_h != height) {
        v->padded = calloc((size_t)v->out_w * (size_t)v->out_h * 3, 1);
        if (!v->padded)
            return gb_error_set(err, GB_ENOMEM, "video: out of memory for a padded frame");
    }
    char size[32], rate[16];
    snprintf(size, sizeof size, "%dx%d", v->out_w, v->out_h);
    snprintf(rate, sizeof rate, "%d", fps);
    int fds[2];
    if (pipe(fds) != 0) {
        free(v->padded);
        v->padded = NULL;
        return gb_error_errno(err, "video: pipe");
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        free(v->padded);
        v->padded = NULL;
        return gb_error_errno(err, "video: fork");
    }
    if (pid == 0) {
        dup2(fds[0], STDIN_FILENO);
        close(fds[0]);
        close(fds[1]);
        /* ffmpeg must not read the terminal or write anything but errors */
        execlp("ffmpeg", "ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-f", "rawvideo",
               "-pix_fmt", "rgb24", "-s", size, "-r", rate, "-i", "pipe:0", "-c:v", "libx264",
               "-pix_fmt", "yuv420p", "-r", rate, "-metadata", tag, path, (char *)NULL);
        fprintf(stderr, "video: exec ffmpeg: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[0]);
    v->fd = fds[1];
    v->pid = pid;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int gb_video_frame(gb_video *v, const uint8_t *rgb, gb_error *err)
{
    const uint8_t *frame = rgb;
    if (v->padded) {
        size_t row = (size_t)v->width * 3, out_row = (size_t)v->out_w * 3;
        for (int y = 0; y < v->height; y++)
            memcpy(v->padded + (size_t)y * out_row, rgb + (size_t)y * row, row);
        frame = v->padded;
    }
    /* a dead ffmpeg gives EPIPE here (the caller ignores SIGPIPE) rather than killing us */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int rc = write_all(v->fd, frame, (size_t)v->out_w * (size_t)v->out_h * 3);
    signal(SIGPIPE, old);
    if (rc != 0)
        return gb_error_set(err, GB_EIO, "video: writing frame %lld to ffmpeg (for %s): %s",
                            (long long)v->frames, v->path, strerror(errno));
    v->frames++;
    return 0;
}

int gb_video_close(gb_video *v, gb_error *err)
{
    int rc = 0;
    if (v->pid > 0) { /* a zeroed gb_video has fd 0: only a started one owns its fd */
        close(v->fd);
        v->fd = -1;
        int status = 0;
        while (waitpid(v->pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = gb_error_set(err, GB_EIO, "video: ffmpeg failed writing %s (%s %d)", v->path,
                              WIFEXITED(status) ? "exit status" : "signal",
                              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        v->pid = 0;
    }
    free(v->padded);
    v->padded = NULL;
    return rc;
}

int gb_video_gif(const char *mp4, const char *gif, int fps, int width, gb_error *err)
{
    if (fps <= 0 || width <= 0)
        return gb_error_set(err, GB_EINVAL, "gif: bad rate %d or width %d", fps, width);
    if (!on_path("ffmpeg"))
        return gb_error_set(err, GB_ENOTFOUND, "gif: ffmpeg is not on PATH (Debian: apt-get "
                            "install ffmpeg, or launch/install-deps.sh video)");
    /* one palette made for this clip (palettegen), then used to map its frames (paletteuse):
     * far better colours than GIF's default palette, at a few KB a frame */
    char filter[256];
    snprintf(filter, sizeof filter,
             "fps=%d,scale=%d:-1:flags=lanczos,split[a][b];[a]palettegen[p];[b][p]paletteuse",
             fps, width);
    pid_t pid = fork();
    if (pid < 0)
        return gb_error_errno(err, "gif: fork");
    if (pid == 0) {
        execlp("ffmpeg", "ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-i", mp4, "-vf",
               filter, "-f", "gif", gif, (char *)NULL);
        fprintf(stderr, "gif: exec ffmpeg: %s\n", strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return gb_error_errno(err, "gif: waitpid");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return gb_error_set(err, GB_EIO, "gif: ffmpeg failed making %s from %s (%s %d)", gif,
                            mp4, WIFEXITED(status) ? "exit status" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}

int gb_video_gif_size(const uint8_t *bytes, size_t len, int *width, int *height)
{
    if (len < 10 || (memcmp(bytes, "GIF89a", 6) != 0 && memcmp(bytes, "GIF87a", 6) != 0))
        return -1;
    *width = bytes[6] | bytes[7] << 8; /* the logical screen: little-endian uint16s */
    *height = bytes[8] | bytes[9] << 8;
    return *width > 0 && *height > 0 ? 0 : -1;
}
