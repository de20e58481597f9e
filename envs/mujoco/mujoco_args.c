/* envs/mujoco/mujoco_args.c: the MuJoCo environments' env.args (Gymnasium's v5 constructor
 * arguments) parsed from text: numbers, integers, booleans (true/false, 1/0), ranges written
 * "low, high" (brackets or parentheses allowed, inf for infinity), file names, body names. */
#include "envs/builtin.h"
#include "envs/mujoco/mujoco_env.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { ARG_DOUBLE, ARG_NONNEG, ARG_INT, ARG_BOOL, ARG_RANGE, ARG_TEXT };

typedef struct arg_def {
    const char *key;
    int kind;
    size_t offset; /* in gb_mj_params */
    size_t size;   /* ARG_TEXT: the buffer's size */
} arg_def;

#define P(field) offsetof(gb_mj_params, field)
static const arg_def defs[] = {
    {"xml_file", ARG_TEXT, P(xml_file), sizeof(((gb_mj_params *)0)->xml_file)},
    {"frame_skip", ARG_INT, P(frame_skip), 0},
    {"forward_reward_weight", ARG_DOUBLE, P(forward_reward_weight), 0},
    {"ctrl_cost_weight", ARG_DOUBLE, P(ctrl_cost_weight), 0},
    {"contact_cost_weight", ARG_DOUBLE, P(contact_cost_weight), 0},
    {"healthy_reward", ARG_DOUBLE, P(healthy_reward), 0},
    {"terminate_when_unhealthy", ARG_BOOL, P(terminate_when_unhealthy), 0},
    {"healthy_state_range", ARG_RANGE, P(healthy_state_range), 0},
    {"healthy_z_range", ARG_RANGE, P(healthy_z_range), 0},
    {"healthy_angle_range", ARG_RANGE, P(healthy_angle_range), 0},
    {"contact_force_range", ARG_RANGE, P(contact_force_range), 0},
    {"reset_noise_scale", ARG_NONNEG, P(reset_noise_scale), 0},
    {"exclude_current_positions_from_observation", ARG_BOOL,
     P(exclude_current_positions_from_observation), 0},
    {"include_cfrc_ext_in_observation", ARG_BOOL, P(include_cfrc_ext_in_observation), 0},
    {"main_body", ARG_TEXT, P(main_body), sizeof(((gb_mj_params *)0)->main_body)},
};
#undef P

static int parse_bool(const char *v, int *out)
{
    if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

/* "low, high", "(low, high)" or "[low, high]"; each a number (inf and -inf allowed). */
static int parse_range(const char *v, double out[2])
{
    const char *s = v;
    while (isspace((unsigned char)*s))
        s++;
    char close = *s == '(' ? ')' : (*s == '[' ? ']' : '\0');
    if (close)
        s++;
    char *end;
    double lo = strtod(s, &end);
    if (end == s)
        return -1;
    s = end;
    while (isspace((unsigned char)*s))
        s++;
    if (*s++ != ',')
        return -1;
    double hi = strtod(s, &end);
    if (end == s)
        return -1;
    s = end;
    while (isspace((unsigned char)*s))
        s++;
    if (close && *s++ != close)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (*s || isnan(lo) || isnan(hi) || lo > hi)
        return -1;
    out[0] = lo;
    out[1] = hi;
    return 0;
}

/* Parses one value into its field; returns 0 or -1 with a message. */
static int parse_one(const arg_def *d, const char *v, gb_mj_params *p, const char *name,
                     char *err, size_t err_len)
{
    void *field = (char *)p + d->offset;
    switch (d->kind) {
    case ARG_DOUBLE:
    case ARG_NONNEG: {
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x) || (d->kind == ARG_NONNEG && x < 0)) {
            snprintf(err, err_len, "%s: %s must be a finite number%s, got '%s'", name, d->key,
                     d->kind == ARG_NONNEG ? " >= 0" : "", v);
            return -1;
        }
        *(double *)field = x;
        return 0;
    }
    case ARG_INT: {
        char *end;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || x < 1 || x > 1000000) {
            snprintf(err, err_len, "%s: %s must be an integer in [1, 1000000], got '%s'", name,
                     d->key, v);
            return -1;
        }
        *(long long *)field = x;
        return 0;
    }
    case ARG_BOOL:
        if (parse_bool(v, field) == 0)
            return 0;
        snprintf(err, err_len, "%s: %s must be true or false, got '%s'", name, d->key, v);
        return -1;
    case ARG_RANGE:
        if (parse_range(v, field) == 0)
            return 0;
        snprintf(err, err_len, "%s: %s must be a range 'low, high' with low <= high (inf allowed), "
                 "got '%s'", name, d->key, v);
        return -1;
    default:
        if (*v && strlen(v) < d->size) {
            memcpy(field, v, strlen(v) + 1);
            return 0;
        }
        snprintf(err, err_len, "%s: %s must be a non-empty text of at most %zu characters", name,
                 d->key, d->size - 1);
        return -1;
    }
}

int gb_mj_parse_args(const gb_mj_task *task, const gb_env_args *args, gb_mj_params *p,
                     char *err, size_t err_len)
{
    if (gb_env_check_args(args, task->allowed, task->name, err, err_len))
        return -1;
    *p = task->defaults;
    for (int32_t i = 0; args && i < args->count; i++) {
        const arg_def *d = NULL;
        for (size_t k = 0; k < sizeof defs / sizeof defs[0] && !d; k++)
            if (strcmp(defs[k].key, args->keys[i]) == 0)
                d = &defs[k];
        if (!d) { /* an allowed key this file does not know: a mistake in the task's table */
            snprintf(err, err_len, "%s: argument '%s' has no parser", task->name, args->keys[i]);
            return -1;
        }
        if (parse_one(d, args->values[i], p, task->name, err, err_len))
            return -1;
    }
    return 0;
}
