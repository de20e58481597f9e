/* envs/wrap_image.h: the pixel operations of the preprocessing wrappers (envs/wrap.h): the
 * element-wise max of two frames, RGB to grey, and an area-average resize, each written to give
 * the bytes OpenCV gives (cv::max, cv::cvtColor COLOR_RGB2GRAY, cv::resize INTER_AREA when
 * shrinking), since Gymnasium's AtariPreprocessing is the reference. No allocation.
 * defines: gb_area_tab, gb_area_tab_build, gb_area_tab_pad, gb_area_resize, gb_frame_max,
 *          gb_rgb_to_grey */
#ifndef GB_ENVS_WRAP_IMAGE_H
#define GB_ENVS_WRAP_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* One term of the area average along one axis: destination index di (times channels), source
 * index si (times channels), weight alpha. */
typedef struct gb_area_tab {
    int32_t si, di;
    float alpha;
} gb_area_tab;

/* The terms for shrinking ssize to dsize (dsize <= ssize) with cn channels interleaved, in the
 * order OpenCV sums them; tab holds 2 ssize entries. Returns the count. */
int gb_area_tab_build(int ssize, int dsize, int cn, gb_area_tab *tab);

/* For one channel: the n terms of tab (dsize outputs) rewritten to out with the same number of
 * terms for every output, zero weights appended (which leave each sum as it was); returns that
 * number (out holds dsize times it; 2 ssize / dsize + 2 per output suffice). */
int gb_area_tab_pad(const gb_area_tab *tab, int n, int dsize, gb_area_tab *out);

/* Resizes src (sh rows of sw x cn bytes) to dst (dh rows of dw x cn bytes) with the tables of
 * gb_area_tab_build(sw, dw, cn) (or, one channel, gb_area_tab_pad's with per its count; per = 0
 * for an unpadded table) and gb_area_tab_build(sh, dh, 1). buf and sum: dw x cn floats each of
 * scratch. */
void gb_area_resize(const uint8_t *src, int sw, int cn, uint8_t *dst, int dw,
                    const gb_area_tab *xtab, int nx, int per, const gb_area_tab *ytab, int ny,
                    float *buf, float *sum);

/* out[i] = max(a[i], b[i]) (out may be a or b). */
void gb_frame_max(const uint8_t *a, const uint8_t *b, uint8_t *out, size_t n);

/* n RGB pixels (3 bytes each) to n grey bytes: (9798 R + 19235 G + 3735 B + 2^14) >> 15, OpenCV 4's
 * fixed-point weights (0.299, 0.587, 0.114). */
void gb_rgb_to_grey(const uint8_t *rgb, uint8_t *grey, size_t n);

#endif
