/* runtime/config/config_set.c: setting one config value by its key path: a YAML node parsed into
 * its field (integers, numbers, booleans, strings, enums, lists, arguments) against the schema in
 * config_schema.c, the schema's defaults, and --set key.path=value overrides. See config.h. */
#include "runtime/config/config.h"
#include "runtime/config/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Parses a plain scalar as a number: decimal integers exactly, otherwise a float literal
 * (1e6, 0.5, .inf, -.inf). Returns 1 on success with *is_int telling which. */
static int parse_number(const yaml_node_t *n, int64_t *iv, double *dv, int *is_int)
{
    char buf[64];
    if (!gb_config_is_plain(n) || !gb_config_scalar_text(n, buf, sizeof buf) || buf[0] == '\0')
        return 0;
    if (strcmp(buf, ".inf") == 0 || strcmp(buf, "+.inf") == 0 || strcmp(buf, ".Inf") == 0) {
        *dv = INFINITY;
        *is_int = 0;
        return 1;
    }
    if (strcmp(buf, "-.inf") == 0 || strcmp(buf, "-.Inf") == 0) {
        *dv = -INFINITY;
        *is_int = 0;
        return 1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end == '\0' && errno == 0) {
        *iv = v;
        *dv = (double)v;
        *is_int = 1;
        return 1;
    }
    /* strtod would also take "inf", "nan" and hex floats; YAML spells those differently. */
    for (const char *p = buf; *p; p++)
        if (!strchr("0123456789+-.eE", *p))
            return 0;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end != '\0' || errno == ERANGE || end == buf)
        return 0;
    *dv = d;
    *is_int = 0;
    return 1;
}

/* "a positive integer", "an integer in [lo, hi]": f's range, for messages. */
static void range_text(const gb_config_field *f, char *buf, size_t n)
{
    if (f->min == 1 && f->max >= 9e15)
        snprintf(buf, n, "a positive integer");
    else if (f->min == 0 && f->max >= 9e15)
        snprintf(buf, n, "a non-negative integer");
    else
        snprintf(buf, n, "an integer in [%.17g, %.17g]", f->min, f->max);
}

/* An integer in f's range (1e6 is fine, 2.5 is not) into *out. */
static int set_int(loader *ld, const gb_config_field *f, const yaml_node_t *v, int64_t *out,
                   const char *path, size_t plen)
{
    char want[96], got[128];
    range_text(f, want, sizeof want);
    int64_t iv = 0;
    double dv = 0;
    int is_int = 0;
    if (!parse_number(v, &iv, &dv, &is_int))
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                                 gb_config_shown(v, got, sizeof got));
    if (!is_int) {
        /* 1e6 is a fine way to write a million, 2.5 is not an integer. */
        if (!(dv == floor(dv)) || fabs(dv) > 9.007199254740992e15)
            return gb_config_fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                                     gb_config_shown(v, got, sizeof got));
        iv = (int64_t)dv;
    }
    if ((double)iv < f->min || (double)iv > f->max)
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                                 gb_config_shown(v, got, sizeof got));
    *out = iv;
    return 0;
}

/* A free mapping of scalar arguments (env.args) into f's gb_config_args; null is none. */
static int set_args(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                    const char *path, size_t plen)
{
    gb_config_args *args = (gb_config_args *)((char *)ld->cfg + f->offset);
    char got[128];
    if (gb_config_is_null(v)) {
        args->n = 0;
        return 0;
    }
    if (v->type != YAML_MAPPING_NODE)
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected a mapping of arguments, got %s",
                                 gb_config_shown(v, got, sizeof got));
    args->n = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&ld->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(&ld->doc, p->value);
        char key[GB_CONFIG_NAME_MAX];
        if (k->type != YAML_SCALAR_NODE || !gb_config_scalar_text(k, key, sizeof key) ||
            key[0] == '\0')
            return gb_config_fail_at(
                ld, k->start_mark, path, plen,
                "argument names are non-empty scalars of at most %d characters",
                GB_CONFIG_NAME_MAX - 1);
        if (val->type != YAML_SCALAR_NODE)
            return gb_config_fail_at(ld, val->start_mark, path, plen,
                                     "argument %s: expected a scalar, got %s", key,
                                     gb_config_shown(val, got, sizeof got));
        if (gb_config_arg(args, key))
            return gb_config_fail_at(ld, k->start_mark, path, plen, "argument %s: duplicate key",
                                     key);
        if (args->n == GB_CONFIG_ARGS_MAX)
            return gb_config_fail_at(ld, k->start_mark, path, plen, "more than %d arguments",
                                     GB_CONFIG_ARGS_MAX);
        memcpy(args->kv[args->n].key, key, sizeof key);
        if (!gb_config_scalar_text(val, args->kv[args->n].value, GB_CONFIG_ARG_VALUE_MAX))
            return gb_config_fail_at(ld, val->start_mark, path, plen,
                                     "argument %s: value longer than %d characters", key,
                                     GB_CONFIG_ARG_VALUE_MAX - 1);
        args->n++;
    }
    return 0;
}

/* "a, b, c": f's choices, for error messages. */
static const char *choices_text(const gb_config_field *f, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; f->choices[i] && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", f->choices[i]);
    return buf;
}

/* The index of scalar v among f's choices, or -1. */
static int choice_index(const gb_config_field *f, const yaml_node_t *v)
{
    for (int i = 0; v->type == YAML_SCALAR_NODE && f->choices[i]; i++)
        if (gb_config_scalar_is(v, f->choices[i]))
            return i;
    return -1;
}

/* A list of names from f->choices (e.g. [weighted, topk]), each at most once, stored as their
 * indices in a gb_config_int_list. */
static int set_enum_list(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                         const char *path, size_t plen)
{
    char names[256], got[128];
    choices_text(f, names, sizeof names);
    if (v->type != YAML_SEQUENCE_NODE)
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected a list of names from %s, got %s", names,
                                 gb_config_shown(v, got, sizeof got));
    yaml_node_item_t *it = v->data.sequence.items.start;
    int n = (int)(v->data.sequence.items.top - it);
    if (n > GB_CONFIG_LIST_MAX)
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected at most %d names, got %d",
                                 GB_CONFIG_LIST_MAX, n);
    gb_config_int_list tmp = {.n = n};
    for (int i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(&ld->doc, it[i]);
        int found = choice_index(f, e);
        if (found < 0)
            return gb_config_fail_at(ld, e->start_mark, path, plen, "expected one of %s, got %s",
                                     names, gb_config_shown(e, got, sizeof got));
        for (int k = 0; k < i; k++)
            if (tmp.v[k] == found)
                return gb_config_fail_at(ld, e->start_mark, path, plen, "%s is listed twice",
                                         f->choices[found]);
        tmp.v[i] = found;
    }
    *(gb_config_int_list *)((char *)ld->cfg + f->offset) = tmp;
    return 0;
}

/* A number field: a plain number in [min, max], or null (NAN) where the field allows it. */
static int set_float(loader *ld, const gb_config_field *f, const yaml_node_t *v, double *dst,
                     const char *path, size_t plen)
{
    char got[128];
    if (f->nullable && gb_config_is_null(v)) {
        *dst = NAN;
        return 0;
    }
    int64_t iv;
    double dv;
    int is_int;
    if (!parse_number(v, &iv, &dv, &is_int) || dv < f->min || dv > f->max) {
        if (isinf(f->min) && isinf(f->max))
            return gb_config_fail_at(ld, v->start_mark, path, plen, "expected a number%s, got %s",
                                     f->nullable ? " or null" : "",
                                     gb_config_shown(v, got, sizeof got));
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected a number in [%g, %g]%s, got %s", f->min, f->max,
                                 f->nullable ? " or null" : "",
                                 gb_config_shown(v, got, sizeof got));
    }
    *dst = dv;
    return 0;
}

/* A boolean: plain true or false (any of YAML's three spellings); quoted, it is a string. */
static int set_bool(loader *ld, const yaml_node_t *v, int *dst, const char *path, size_t plen)
{
    char got[128];
    int yes = gb_config_scalar_is(v, "true") || gb_config_scalar_is(v, "True") ||
              gb_config_scalar_is(v, "TRUE");
    int no = gb_config_scalar_is(v, "false") || gb_config_scalar_is(v, "False") ||
             gb_config_scalar_is(v, "FALSE");
    if (!yes && !no)
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected true or false, got %s",
                                 gb_config_shown(v, got, sizeof got));
    *dst = yes;
    if (!gb_config_is_plain(v))
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected true or false, got the string %s",
                                 gb_config_shown(v, got, sizeof got));
    return 0;
}

/* A string of at most f->size - 1 bytes; null is the empty string. */
static int set_string(loader *ld, const gb_config_field *f, const yaml_node_t *v, char *dst,
                      const char *path, size_t plen)
{
    char got[128];
    if (v->type != YAML_SCALAR_NODE)
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected a string, got %s",
                                 gb_config_shown(v, got, sizeof got));
    if (gb_config_is_null(v)) {
        dst[0] = '\0';
        return 0;
    }
    if (!gb_config_scalar_text(v, dst, f->size))
        return gb_config_fail_at(
            ld, v->start_mark, path, plen,
            "expected a string of at most %zu characters, got %zu characters", f->size - 1,
            v->data.scalar.length);
    return 0;
}

/* One name of f->choices, stored as its index. */
static int set_enum(loader *ld, const gb_config_field *f, const yaml_node_t *v, int *dst,
                    const char *path, size_t plen)
{
    int i = choice_index(f, v);
    if (i >= 0) {
        *dst = i;
        return 0;
    }
    char list[256], got[128];
    return gb_config_fail_at(ld, v->start_mark, path, plen, "expected one of %s, got %s",
                             choices_text(f, list, sizeof list),
                             gb_config_shown(v, got, sizeof got));
}

/* A list of at most GB_CONFIG_LIST_MAX integers, each in f's range. */
static int set_int_list(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                        gb_config_int_list *dst, const char *path, size_t plen)
{
    char got[128];
    if (v->type != YAML_SEQUENCE_NODE)
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected a list of integers, got %s",
                                 gb_config_shown(v, got, sizeof got));
    yaml_node_item_t *it = v->data.sequence.items.start;
    int n = (int)(v->data.sequence.items.top - it);
    if (n > GB_CONFIG_LIST_MAX)
        return gb_config_fail_at(ld, v->start_mark, path, plen,
                                 "expected at most %d integers, got %d", GB_CONFIG_LIST_MAX, n);
    gb_config_int_list tmp = {.n = n};
    for (int i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(&ld->doc, it[i]);
        int rc = set_int(ld, f, e, &tmp.v[i], path, plen);
        if (rc)
            return rc;
    }
    *dst = tmp;
    return 0;
}

/* Parses node v into field f of ld->cfg, checking its type and range; path[0..plen) names the key
 * in messages. Returns 0 or GB_ECONFIG (the field may then hold part of the value). */
int gb_config_set_value(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                        const char *path, size_t plen)
{
    void *dst = (char *)ld->cfg + f->offset;
    switch (f->kind) {
    case GB_CK_INT:
        return set_int(ld, f, v, (int64_t *)dst, path, plen);
    case GB_CK_FLOAT:
        return set_float(ld, f, v, (double *)dst, path, plen);
    case GB_CK_BOOL:
        return set_bool(ld, v, (int *)dst, path, plen);
    case GB_CK_STRING:
        return set_string(ld, f, v, (char *)dst, path, plen);
    case GB_CK_ENUM:
        return set_enum(ld, f, v, (int *)dst, path, plen);
    case GB_CK_INT_LIST:
        return set_int_list(ld, f, v, (gb_config_int_list *)dst, path, plen);
    case GB_CK_ARGS:
        return set_args(ld, f, v, path, plen);
    case GB_CK_ENUM_LIST:
        return set_enum_list(ld, f, v, path, plen);
    }
    return gb_config_fail_at(ld, v->start_mark, path, plen, "internal error: unknown kind");
}

/* Zeroes cfg and sets each field that has a default from its YAML text in the schema (required
 * fields and empty strings stay zero). Returns 0, or GB_ECONFIG for a bad default (a schema
 * bug). */
int gb_config_set_defaults(gb_config *cfg, gb_config_marks *marks, gb_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const gb_config_field *f = &gb_config_fields[i];
        if (!f->def || (f->kind == GB_CK_STRING && f->def[0] == '\0'))
            continue; /* required, or the empty string the memset left */
        loader ld = {.cfg = cfg, .marks = marks, .text = f->def, .len = strlen(f->def),
                     .err = err};
        int empty = 0;
        int rc = gb_config_parse_document(&ld, &empty);
        if (rc == 0 && empty)
            rc = gb_error_set(err, GB_ECONFIG, "schema: %s: empty default", f->path);
        if (rc == 0) {
            rc = gb_config_set_value(&ld, f, yaml_document_get_root_node(&ld.doc), f->path,
                                     strlen(f->path));
            yaml_document_delete(&ld.doc);
        }
        if (rc)
            return gb_error_prefix(err, "internal: bad default in the schema");
    }
    return 0;
}

/* The message for a --set whose key names no field: a section, a near miss, or unknown. */
static int unknown_override(const char *src, const char *path, size_t klen, gb_error *err)
{
    char hint_buf[64];
    const char *dot = strrchr(path, '.');
    size_t plen = dot ? (size_t)(dot - path) : 0;
    const char *leaf = dot ? dot + 1 : path;
    const char *hint =
        (plen == 0 || gb_config_is_section(path, plen))
            ? gb_config_closest_key(path, plen, leaf, strlen(leaf), hint_buf, sizeof hint_buf)
            : NULL;
    if (gb_config_is_section(path, klen))
        return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: is a section; set one of its keys",
                            src, path);
    if (hint)
        return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: unknown key (did you mean '%s'?)",
                            src, path, hint);
    return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: unknown key", src, path);
}

/* env.args.<argname>=value: sets (or adds) one environment argument of field f (env.args). */
static int set_env_arg(loader *ld, const gb_config_field *f, const char *argname,
                       const yaml_node_t *root, const char *path, size_t klen)
{
    gb_config_args *args = &ld->cfg->env.args;
    yaml_mark_t at = root->start_mark;
    size_t nl = strlen(argname);
    if (root->type != YAML_SCALAR_NODE)
        return gb_config_fail_at(ld, at, path, klen, "expected a scalar argument value");
    if (nl == 0 || nl >= GB_CONFIG_NAME_MAX || strchr(argname, '.'))
        return gb_config_fail_at(ld, at, path, klen, "bad argument name");
    int slot = args->n;
    for (int i = 0; i < args->n; i++)
        if (strcmp(args->kv[i].key, argname) == 0)
            slot = i;
    if (slot == GB_CONFIG_ARGS_MAX)
        return gb_config_fail_at(ld, at, path, klen, "more than %d arguments",
                                 GB_CONFIG_ARGS_MAX);
    if (!gb_config_scalar_text(root, args->kv[slot].value, GB_CONFIG_ARG_VALUE_MAX))
        return gb_config_fail_at(ld, at, path, klen, "value longer than %d characters",
                                 GB_CONFIG_ARG_VALUE_MAX - 1);
    memcpy(args->kv[slot].key, argname, nl + 1); /* nl < GB_CONFIG_NAME_MAX: checked */
    if (slot == args->n)
        args->n++;
    gb_config_record(ld, f, at);
    return 0;
}

/* Applies one "key.path=value" override, the which-th (messages say "--set[which]:1:col"). The
 * value is YAML text; an empty one is null. Returns 0 or GB_ECONFIG. */
int gb_config_apply_set(gb_config *cfg, gb_config_marks *marks, const char *assignment,
                        int which, gb_error *err)
{
    char src[32];
    snprintf(src, sizeof src, "--set[%d]", which);
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return gb_error_set(err, GB_ECONFIG, "%s:1:1: expected key.path=value, got \"%s\"", src,
                            assignment);
    size_t klen = (size_t)(eq - assignment);
    char path[PATH_BUF];
    if (klen >= sizeof path)
        return gb_error_set(err, GB_ECONFIG, "%s:1:1: key too long", src);
    memcpy(path, assignment, klen);
    path[klen] = '\0';

    loader ld = {.cfg = cfg, .marks = marks, .source = which, .col_offset = (int)klen + 1,
                 .text = eq + 1, .len = strlen(eq + 1), .err = err};
    /* env.args.<name>=value sets one environment argument. */
    const gb_config_field *f = gb_config_find_field(path, klen);
    const char *argname = NULL;
    if (!f && klen > 9 && strncmp(path, "env.args.", 9) == 0) {
        f = gb_config_find_field("env.args", 8);
        argname = path + 9;
    }
    if (!f)
        return unknown_override(src, path, klen, err);
    int empty = 0;
    int rc = gb_config_parse_document(&ld, &empty);
    if (rc)
        return rc;
    yaml_node_t null_node = {.type = YAML_SCALAR_NODE};
    null_node.data.scalar.value = (yaml_char_t *)"";
    null_node.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    null_node.start_mark.column = 0;
    yaml_node_t *root = empty ? &null_node : yaml_document_get_root_node(&ld.doc);
    if (argname) {
        rc = set_env_arg(&ld, f, argname, root, path, klen);
    } else {
        rc = gb_config_set_value(&ld, f, root, path, klen);
        if (rc == 0)
            gb_config_record(&ld, f, root->start_mark);
    }
    if (!empty)
        yaml_document_delete(&ld.doc);
    return rc;
}

/* The value of args[key], or NULL; the pointer lives as long as args. */
const char *gb_config_arg(const gb_config_args *args, const char *key)
{
    for (int i = 0; i < args->n; i++)
        if (strcmp(args->kv[i].key, key) == 0)
            return args->kv[i].value;
    return NULL;
}

/* See config.h. */
const char *gb_config_env_label(const gb_config *cfg, char *buf, size_t n)
{
    const char *id = gb_config_arg(&cfg->env.args, "id");
    const char *game = gb_config_arg(&cfg->env.args, "game");
    if (strcmp(cfg->env.name, "gymnasium") == 0 && id && id[0])
        snprintf(buf, n, "gymnasium:%s", id);
    else if (strcmp(cfg->env.name, "atari") == 0 && game && game[0])
        snprintf(buf, n, "atari:%s", game);
    else
        snprintf(buf, n, "%s", cfg->env.name);
    return buf;
}
