/* envs/canvas.h: a few filled shapes drawn into an RGB frame, for the built-in environments'
 * render(); no allocation, everything clipped to the frame.
 * defines: gb_canvas, gb_draw_fill, gb_draw_rect, gb_draw_disc, gb_draw_segment, GB_RGB */
#ifndef GB_ENVS_DRAW_H
#define GB_ENVS_DRAW_H

#include <stdint.h>

/* A frame of height × width pixels, 3 bytes each (row-major, R G B), owned by the caller.
 * Coordinates are pixels, x to the right and y downwards, as floats (shapes are anti-aliased
 * by nothing: a pixel is painted when its centre lies inside the shape). */
typedef struct gb_canvas {
    uint8_t *rgb;
    int width, height;
} gb_canvas;

/* A colour as 0xRRGGBB. */
#define GB_RGB(r, g, b) (((uint32_t)(r) << 16) | ((uint32_t)(g) << 8) | (uint32_t)(b))

/* Paints every pixel with colour. */
void gb_draw_fill(gb_canvas *c, uint32_t colour);

/* Paints the axis-aligned rectangle [x0, x1) × [y0, y1). */
void gb_draw_rect(gb_canvas *c, double x0, double y0, double x1, double y1, uint32_t colour);

/* Paints the disc of radius r around (cx, cy). */
void gb_draw_disc(gb_canvas *c, double cx, double cy, double r, uint32_t colour);

/* Paints the segment from (x0, y0) to (x1, y1) with round ends, `width` pixels thick. */
void gb_draw_segment(gb_canvas *c, double x0, double y0, double x1, double y1, double width,
                     uint32_t colour);

#endif
