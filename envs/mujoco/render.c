/* envs/mujoco/render.c: render() of the MuJoCo environments without OpenGL: a side view of the
 * model's geoms (capsules, cylinders, spheres, boxes, ellipsoids) projected on the x-z plane,
 * each from its current world position and orientation (geom_xpos, geom_xmat) and in its model
 * colour, far side first and darker. The view follows the main body along x; the ground is
 * striped every half metre so that motion shows. 480 x 320, 120 pixels a metre. */
#include "envs/canvas.h"
#include "envs/mujoco/mujoco_env.h"

#include <math.h>

#define PX_PER_M 120.0
#define GROUND_ROW 270.0 /* the row of z = 0 */

typedef struct view {
    gb_canvas c;
    double x0; /* world x at the frame's centre */
} view;

static double col(const view *v, double x)
{
    return GB_MJ_RENDER_WIDTH / 2.0 + (x - v->x0) * PX_PER_M;
}

static double row(double z)
{
    return GROUND_ROW - z * PX_PER_M;
}

static void draw_ground(view *v, double z)
{
    gb_canvas *c = &v->c;
    double top = row(z);
    gb_draw_rect(c, 0, top, GB_MJ_RENDER_WIDTH, GB_MJ_RENDER_HEIGHT, GB_RGB(120, 130, 120));
    /* stripes at every half metre of world x */
    double first = floor((v->x0 - GB_MJ_RENDER_WIDTH / 2.0 / PX_PER_M) * 2.0) / 2.0;
    for (double x = first; col(v, x) < GB_MJ_RENDER_WIDTH; x += 0.5)
        if (((long)floor(x * 2.0)) % 2 == 0)
            gb_draw_rect(c, col(v, x), top, col(v, x + 0.5), top + 12, GB_RGB(95, 105, 95));
    gb_draw_rect(c, 0, top, GB_MJ_RENDER_WIDTH, top + 1, GB_RGB(60, 60, 60));
}

/* The geom's rgba as MuJoCo's renderer picks it: its own when set (not the default grey) or
 * when it has no material, else its material's. */
static const float *geom_rgba(const mjModel *m, int g)
{
    const float *own = m->geom_rgba + 4 * g;
    int grey = own[0] == 0.5f && own[1] == 0.5f && own[2] == 0.5f && own[3] == 1.0f;
    return m->geom_matid[g] >= 0 && grey ? m->mat_rgba + 4 * m->geom_matid[g] : own;
}

/* The geom's colour, darkened on the far side. */
static uint32_t geom_colour(const mjModel *m, int g, int far)
{
    const float *rgba = geom_rgba(m, g);
    double k = far ? 0.65 : 1.0;
    int r = (int)(fminf(fmaxf(rgba[0], 0.f), 1.f) * 255 * k);
    int gr = (int)(fminf(fmaxf(rgba[1], 0.f), 1.f) * 255 * k);
    int b = (int)(fminf(fmaxf(rgba[2], 0.f), 1.f) * 255 * k);
    return GB_RGB(r, gr, b);
}

/* A solid of half-length `half` along local axis `axis` (0..2) and radius r, as a thick
 * segment between its projected ends. */
static void draw_along(view *v, const double *pos, const double *mat, int axis, double half,
                       double r, uint32_t colour)
{
    double ax = mat[axis] * half, az = mat[6 + axis] * half;
    gb_draw_segment(&v->c, col(v, pos[0] - ax), row(pos[2] - az), col(v, pos[0] + ax),
                    row(pos[2] + az), 2.0 * r * PX_PER_M, colour);
}

static void draw_geom(view *v, const mjModel *m, const mjData *d, int g, int far)
{
    const double *pos = d->geom_xpos + 3 * g, *mat = d->geom_xmat + 9 * g;
    const double *size = m->geom_size + 3 * g;
    uint32_t colour = geom_colour(m, g, far);
    switch (m->geom_type[g]) {
    case mjGEOM_SPHERE:
        gb_draw_disc(&v->c, col(v, pos[0]), row(pos[2]), size[0] * PX_PER_M, colour);
        break;
    case mjGEOM_CAPSULE:
    case mjGEOM_CYLINDER:
        draw_along(v, pos, mat, 2, size[1], size[0], colour);
        break;
    case mjGEOM_BOX:
    case mjGEOM_ELLIPSOID: {
        /* along its longest axis, as thick as the next longest */
        int a = 0;
        for (int i = 1; i < 3; i++)
            if (size[i] > size[a])
                a = i;
        double r = 0;
        for (int i = 0; i < 3; i++)
            if (i != a && size[i] > r)
                r = size[i];
        draw_along(v, pos, mat, a, size[a] - (m->geom_type[g] == mjGEOM_BOX ? 0 : r), r, colour);
        break;
    }
    default: /* planes are the ground; meshes and height fields are not drawn */
        break;
    }
}

int gb_mj_render(void *env, uint8_t *rgb)
{
    const gb_mj_env *e = env;
    const mjModel *m = e->m;
    const mjData *d = e->d;
    view v = {{rgb, GB_MJ_RENDER_WIDTH, GB_MJ_RENDER_HEIGHT}, d->xpos[3 * e->main_body]};
    gb_draw_fill(&v.c, GB_RGB(215, 225, 235));
    const double y_mid = d->xpos[3 * e->main_body + 1];
    for (int g = 0; g < m->ngeom; g++)
        if (m->geom_type[g] == mjGEOM_PLANE)
            draw_ground(&v, d->geom_xpos[3 * g + 2]);
    /* visible groups (0-2, as MuJoCo's viewer shows by default), the far side (larger y, seen
     * from -y) first */
    for (int far = 1; far >= 0; far--)
        for (int g = 0; g < m->ngeom; g++) {
            int is_far = d->geom_xpos[3 * g + 1] > y_mid + 1e-6;
            if (is_far == far && m->geom_group[g] <= 2 && geom_rgba(m, g)[3] > 0)
                draw_geom(&v, m, d, g, far);
        }
    return 0;
}
