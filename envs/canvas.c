/* envs/canvas.c: filled rectangles, discs and thick segments in an RGB frame (envs/canvas.h).
 * Each shape visits only the pixels of its bounding box, clipped to the frame. */
#include "envs/canvas.h"

#include <math.h>
#include <stddef.h>

static inline void put(gb_canvas *c, int x, int y, uint32_t colour)
{
    uint8_t *p = c->rgb + 3 * ((size_t)y * (size_t)c->width + (size_t)x);
    p[0] = (uint8_t)(colour >> 16);
    p[1] = (uint8_t)(colour >> 8);
    p[2] = (uint8_t)colour;
}

/* The pixel range [*lo, *hi) whose centres lie in [a, b], clipped to [0, n). */
static void span(double a, double b, int n, int *lo, int *hi)
{
    double l = ceil(a - 0.5), h = floor(b - 0.5) + 1;
    *lo = l < 0 ? 0 : (l > n ? n : (int)l);
    *hi = h < 0 ? 0 : (h > n ? n : (int)h);
}

void gb_draw_fill(gb_canvas *c, uint32_t colour)
{
    for (int y = 0; y < c->height; y++)
        for (int x = 0; x < c->width; x++)
            put(c, x, y, colour);
}

void gb_draw_rect(gb_canvas *c, double x0, double y0, double x1, double y1, uint32_t colour)
{
    int xl, xh, yl, yh;
    span(x0, x1 - 1e-9, c->width, &xl, &xh);
    span(y0, y1 - 1e-9, c->height, &yl, &yh);
    for (int y = yl; y < yh; y++)
        for (int x = xl; x < xh; x++)
            put(c, x, y, colour);
}

void gb_draw_disc(gb_canvas *c, double cx, double cy, double r, uint32_t colour)
{
    gb_draw_segment(c, cx, cy, cx, cy, 2 * r, colour);
}

void gb_draw_segment(gb_canvas *c, double x0, double y0, double x1, double y1, double width,
                     uint32_t colour)
{
    double r = width / 2, dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    int xl, xh, yl, yh;
    span(fmin(x0, x1) - r, fmax(x0, x1) + r, c->width, &xl, &xh);
    span(fmin(y0, y1) - r, fmax(y0, y1) + r, c->height, &yl, &yh);
    for (int y = yl; y < yh; y++) {
        for (int x = xl; x < xh; x++) {
            double px = x + 0.5 - x0, py = y + 0.5 - y0;
            double t = len2 > 0 ? (px * dx + py * dy) / len2 : 0;
            t = t < 0 ? 0 : (t > 1 ? 1 : t);
            double ex = px - t * dx, ey = py - t * dy;
            if (ex * ex + ey * ey <= r * r)
                put(c, x, y, colour);
        }
    }
}
