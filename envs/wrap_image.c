/* envs/wrap_image.c: max, grey and area resize of uint8 frames (see wrap_image.h). The resize
 * follows OpenCV's resizeArea_ (modules/imgproc/src/resize.cpp: computeResizeAreaTab and
 * ResizeArea_Invoker): the same weights in float, summed in the same order, rounded to nearest
 * even; this file is compiled without floating-point contraction so that no sum is fused. */
#include "envs/wrap_image.h"

#include <math.h>
#include <string.h>

int gb_area_tab_build(int ssize, int dsize, int cn, gb_area_tab *tab)
{
    const double scale = 1.0 / ((double)dsize / (double)ssize); /* as cv::resize computes it */
    int k = 0;
    for (int dx = 0; dx < dsize; dx++) {
        double fsx1 = dx * scale;
        double fsx2 = fsx1 + scale;
        double cell = scale < ssize - fsx1 ? scale : ssize - fsx1;
        int sx1 = (int)ceil(fsx1), sx2 = (int)floor(fsx2);
        sx2 = sx2 < ssize - 1 ? sx2 : ssize - 1;
        sx1 = sx1 < sx2 ? sx1 : sx2;
        if (sx1 - fsx1 > 1e-3)
            tab[k++] = (gb_area_tab){(sx1 - 1) * cn, dx * cn, (float)((sx1 - fsx1) / cell)};
        for (int sx = sx1; sx < sx2; sx++)
            tab[k++] = (gb_area_tab){sx * cn, dx * cn, (float)(1.0 / cell)};
        if (fsx2 - sx2 > 1e-3) {
            double w = fsx2 - sx2 < 1.0 ? fsx2 - sx2 : 1.0;
            tab[k++] = (gb_area_tab){sx2 * cn, dx * cn, (float)((w < cell ? w : cell) / cell)};
        }
    }
    return k;
}

static inline uint8_t to_byte(float v)
{
    long r = lrintf(v); /* cvRound: to nearest, ties to even */
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

void gb_area_resize(const uint8_t *src, int sw, int cn, uint8_t *dst, int dw,
                    const gb_area_tab *xtab, int nx, const gb_area_tab *ytab, int ny, float *buf,
                    float *sum)
{
    const int n = dw * cn;
    const size_t stride = (size_t)sw * (size_t)cn;
    int prev = ytab[0].di;
    memset(sum, 0, (size_t)n * sizeof *sum);
    for (int j = 0; j < ny; j++) {
        const float beta = ytab[j].alpha;
        const int dy = ytab[j].di;
        const uint8_t *s = src + (size_t)ytab[j].si * stride;
        memset(buf, 0, (size_t)n * sizeof *buf);
        for (int k = 0; k < nx; k++) {
            const float alpha = xtab[k].alpha;
            for (int c = 0; c < cn; c++)
                buf[xtab[k].di + c] += (float)s[xtab[k].si + c] * alpha;
        }
        if (dy != prev) {
            uint8_t *d = dst + (size_t)prev * (size_t)n;
            for (int x = 0; x < n; x++) {
                d[x] = to_byte(sum[x]);
                sum[x] = beta * buf[x];
            }
            prev = dy;
        } else {
            for (int x = 0; x < n; x++)
                sum[x] += beta * buf[x];
        }
    }
    uint8_t *d = dst + (size_t)prev * (size_t)n;
    for (int x = 0; x < n; x++)
        d[x] = to_byte(sum[x]);
}

void gb_frame_max(const uint8_t *a, const uint8_t *b, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] > b[i] ? a[i] : b[i];
}

void gb_rgb_to_grey(const uint8_t *rgb, uint8_t *grey, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = rgb + 3 * i;
        grey[i] = (uint8_t)((9798u * p[0] + 19235u * p[1] + 3735u * p[2] + (1u << 14)) >> 15);
    }
}
