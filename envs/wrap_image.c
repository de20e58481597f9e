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

int gb_area_tab_pad(const gb_area_tab *tab, int n, int dsize, gb_area_tab *out)
{
    int per = 0;
    for (int k = 0, run = 0; k < n; k++) {
        run = k && tab[k].di == tab[k - 1].di ? run + 1 : 1;
        per = run > per ? run : per;
    }
    for (int dx = 0, k = 0; dx < dsize; dx++) {
        int t = 0;
        for (; k < n && tab[k].di == dx; k++, t++)
            out[dx * per + t] = tab[k];
        for (; t < per; t++) /* + 0 * s[si]: the sum does not change */
            out[dx * per + t] = (gb_area_tab){out[dx * per].si, dx, 0.0f};
    }
    return per;
}

static inline uint8_t to_byte(float v)
{
    long r = lrintf(v); /* cvRound: to nearest, ties to even */
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

/* The horizontal sums of one source row into buf: OpenCV's buf[di] += S[si] * alpha over the
 * terms in order, each output's terms being consecutive, so that one output is summed in a
 * register and different outputs do not wait on each other. */
static void row_sums(const uint8_t *s, int cn, const gb_area_tab *xtab, int nx, int per,
                     float *buf)
{
    if (per == 3) { /* padded, one channel: 3 terms for every output (shrinking by 1-2x) */
        for (int k = 0, dx = 0; k < nx; k += 3, dx++) {
            float acc = 0.0f + (float)s[xtab[k].si] * xtab[k].alpha;
            acc += (float)s[xtab[k + 1].si] * xtab[k + 1].alpha;
            buf[dx] = acc + (float)s[xtab[k + 2].si] * xtab[k + 2].alpha;
        }
        return;
    }
    if (per) { /* padded, one channel: the same number of terms for every output, no branch */
        for (int k = 0, dx = 0; k < nx; k += per, dx++) {
            float acc = 0.0f;
            for (int t = 0; t < per; t++)
                acc += (float)s[xtab[k + t].si] * xtab[k + t].alpha;
            buf[dx] = acc;
        }
        return;
    }
    if (cn == 1) {
        for (int k = 0; k < nx;) {
            const int di = xtab[k].di;
            float acc = 0.0f;
            do {
                acc += (float)s[xtab[k].si] * xtab[k].alpha;
                k++;
            } while (k < nx && xtab[k].di == di);
            buf[di] = acc;
        }
        return;
    }
    for (int k = 0; k < nx;) {
        const int di = xtab[k].di;
        for (int c = 0; c < cn; c++)
            buf[di + c] = 0.0f;
        do {
            for (int c = 0; c < cn; c++)
                buf[di + c] += (float)s[xtab[k].si + c] * xtab[k].alpha;
            k++;
        } while (k < nx && xtab[k].di == di);
    }
}

void gb_area_resize(const uint8_t *src, int sw, int cn, uint8_t *dst, int dw,
                    const gb_area_tab *xtab, int nx, int per, const gb_area_tab *ytab, int ny,
                    float *buf, float *sum)
{
    const int n = dw * cn;
    const size_t stride = (size_t)sw * (size_t)cn;
    int prev = ytab[0].di, row = -1;
    memset(sum, 0, (size_t)n * sizeof *sum);
    for (int j = 0; j < ny; j++) {
        const float beta = ytab[j].alpha;
        const int dy = ytab[j].di;
        if (ytab[j].si != row) { /* a row shared by two outputs is summed once: same values */
            row = ytab[j].si;
            row_sums(src + (size_t)row * stride, cn, xtab, nx, per, buf);
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
