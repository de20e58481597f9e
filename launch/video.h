/* launch/video.h: an MP4 written by an ffmpeg child process fed raw RGB frames through a pipe
 * (`gearbox eval --video`). Frames of odd width or height are padded with black to even sizes
 * (H.264 in yuv420p needs them). An MP4 made into an animated GIF (`gearbox eval --gif`: what
 * TensorBoard's image plugin plays, launch/evals.h).
 * defines: gb_video, gb_video_open, gb_video_frame, gb_video_close, gb_video_gif,
 *          gb_video_gif_size */
#ifndef GB_LAUNCH_VIDEO_H
#define GB_LAUNCH_VIDEO_H

#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gb_video {
    pid_t pid;          /* the ffmpeg process; 0 when none */
    int fd;             /* the write end of its stdin */
    int width, height;  /* the frames given to gb_video_frame */
    int out_w, out_h;   /* the encoded size: width and height rounded up to even */
    uint8_t *padded;    /* out_h × out_w × 3 when padding is needed, else NULL */
    int64_t frames;     /* frames written */
    char path[1024];
} gb_video;

/* Starts `ffmpeg` (found on PATH) writing path (overwritten) as H.264 at fps frames per second
 * from width × height RGB frames; title (NULL: none) goes into the file's title tag (the
 * environment's name: ffprobe -show_entries format_tags=title). Returns 0; GB_EINVAL (sizes,
 * path, title); GB_ENOTFOUND (no ffmpeg on PATH, with a hint to install it); GB_ESYS (pipe,
 * fork). */
int gb_video_open(gb_video *v, const char *path, int width, int height, int fps,
                  const char *title, gb_error *err);

/* Writes one frame (height × width × 3 bytes). Blocks while ffmpeg catches up. Returns 0 or
 * GB_EIO (ffmpeg exited: its messages went to stderr). */
int gb_video_frame(gb_video *v, const uint8_t *rgb, gb_error *err);

/* Closes the pipe and waits for ffmpeg. Returns 0, or GB_EIO when it failed (exit status).
 * Safe on a zeroed or already closed gb_video. */
int gb_video_close(gb_video *v, gb_error *err);

/* Makes the animated GIF gif (overwritten) from the video mp4 with an ffmpeg child, and waits
 * for it: fps frames per second, scaled to width pixels wide (the height keeps the aspect), one
 * palette made for the clip. Returns 0; GB_EINVAL (rate, width); GB_ENOTFOUND (no ffmpeg on
 * PATH); GB_ESYS (fork); GB_EIO (ffmpeg failed: its messages went to stderr). */
int gb_video_gif(const char *mp4, const char *gif, int fps, int width, gb_error *err);

/* The size of a GIF (its logical screen) from its first len bytes: 0 with *width, *height set,
 * or -1 when they are not a GIF87a/GIF89a header of a non-empty image. */
int gb_video_gif_size(const uint8_t *bytes, size_t len, int *width, int *height);

#endif
