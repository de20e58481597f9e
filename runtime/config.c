/* runtime/config.c: loading the experiment config from YAML (libyaml) and --set overrides, with
 * every value checked against the schema in config_schema.c. See config.h. */
#include "runtime/config.h"

#include "runtime/config_schema.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_FILE_BYTES (64u << 20) /* a config is text; anything larger is a mistake */
#define MAX_SECTIONS 64
#define PATH_BUF 256

/* Where each key was last set: source 0 is the file, k >= 1 the k-th --set. line 0 = default. */
typedef struct mark {
    int line, col, source;
} mark;

struct gb_config_marks {
    char file[GB_CONFIG_PATH_MAX];
    mark field[256]; /* indexed like gb_config_fields */
    int nsections;
    struct {
        char path[PATH_BUF];
        mark at;
    } section[MAX_SECTIONS];
};

/* The parse in progress: a libyaml document and where its text came from. */
typedef struct loader {
    gb_config *cfg;
    gb_config_marks *marks;
    yaml_document_t doc;
    int source;      /* 0 file, k >= 1 --set[k] */
    int col_offset;  /* --set: column of the value inside "key=value" */
    const char *text; /* the whole input, for positions of reader errors */
    size_t len;
    gb_error *err;
} loader;

static const char *source_name(const gb_config_marks *m, int source, char *buf, size_t n)
{
    if (source == 0)
        return m->file;
    snprintf(buf, n, "--set[%d]", source);
    return buf;
}

/* Formats "<source>:line:col: path: message" into err; returns GB_ECONFIG. */
__attribute__((format(printf, 5, 6))) static int fail_at(loader *ld, yaml_mark_t at,
                                                          const char *path, size_t pathlen,
                                                          const char *fmt, ...)
{
    char src[32], msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = source_name(ld->marks, ld->source, src, sizeof src);
    int line = (int)at.line + 1, col = (int)at.column + 1 + (ld->source ? ld->col_offset : 0);
    if (path && pathlen)
        return gb_error_set(ld->err, GB_ECONFIG, "%s:%d:%d: %.*s: %s", name, line, col,
                            (int)pathlen, path, msg);
    return gb_error_set(ld->err, GB_ECONFIG, "%s:%d:%d: %s", name, line, col, msg);
}

static int is_plain(const yaml_node_t *n);

/* Shows a scalar in a message: quoted, cut at 40 characters, non-printables escaped. */
static const char *shown(const yaml_node_t *node, char *buf, size_t n)
{
    if (node->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (node->type == YAML_SEQUENCE_NODE)
        return "a list";
    const unsigned char *s = node->data.scalar.value;
    size_t len = node->data.scalar.length, o = 0;
    if (!is_plain(node))
        o += (size_t)snprintf(buf, n, "the string ");
    buf[o++] = '"';
    for (size_t i = 0; i < len && o + 6 < n; i++) {
        if (i == 40) {
            o += (size_t)snprintf(buf + o, n - o, "...");
            break;
        }
        if (s[i] >= 32 && s[i] < 127 && s[i] != '"' && s[i] != '\\')
            buf[o++] = (char)s[i];
        else
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", s[i]);
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

static int is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int scalar_is(const yaml_node_t *n, const char *word)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(word) &&
           memcmp(n->data.scalar.value, word, n->data.scalar.length) == 0;
}

static int is_null(const yaml_node_t *n)
{
    return is_plain(n) && (n->data.scalar.length == 0 || scalar_is(n, "null") ||
                           scalar_is(n, "~") || scalar_is(n, "Null") || scalar_is(n, "NULL"));
}

/* Copies a scalar into a NUL-terminated buffer; 0 when it does not fit or holds a NUL byte. */
static int scalar_text(const yaml_node_t *n, char *buf, size_t size)
{
    size_t len = n->data.scalar.length;
    if (len >= size || memchr(n->data.scalar.value, '\0', len))
        return 0;
    memcpy(buf, n->data.scalar.value, len);
    buf[len] = '\0';
    return 1;
}

/* Parses a plain scalar as a number: decimal integers exactly, otherwise a float literal
 * (1e6, 0.5, .inf, -.inf). Returns 1 on success with *is_int telling which. */
static int parse_number(const yaml_node_t *n, int64_t *iv, double *dv, int *is_int)
{
    char buf[64];
    if (!is_plain(n) || !scalar_text(n, buf, sizeof buf) || buf[0] == '\0')
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

static void range_text(const gb_config_field *f, char *buf, size_t n)
{
    if (f->min == 1 && f->max >= 9e15)
        snprintf(buf, n, "a positive integer");
    else if (f->min == 0 && f->max >= 9e15)
        snprintf(buf, n, "a non-negative integer");
    else
        snprintf(buf, n, "an integer in [%.17g, %.17g]", f->min, f->max);
}

static int set_int(loader *ld, const gb_config_field *f, const yaml_node_t *v, int64_t *out,
                   const char *path, size_t plen)
{
    char want[96], got[128];
    range_text(f, want, sizeof want);
    int64_t iv = 0;
    double dv = 0;
    int is_int = 0;
    if (!parse_number(v, &iv, &dv, &is_int))
        return fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                       shown(v, got, sizeof got));
    if (!is_int) {
        /* 1e6 is a fine way to write a million, 2.5 is not an integer. */
        if (!(dv == floor(dv)) || fabs(dv) > 9.007199254740992e15)
            return fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                           shown(v, got, sizeof got));
        iv = (int64_t)dv;
    }
    if ((double)iv < f->min || (double)iv > f->max)
        return fail_at(ld, v->start_mark, path, plen, "expected %s, got %s", want,
                       shown(v, got, sizeof got));
    *out = iv;
    return 0;
}

static int set_value(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                     const char *path, size_t plen);

static int set_args(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                    const char *path, size_t plen)
{
    gb_config_args *args = (gb_config_args *)((char *)ld->cfg + f->offset);
    char got[128];
    if (is_null(v)) {
        args->n = 0;
        return 0;
    }
    if (v->type != YAML_MAPPING_NODE)
        return fail_at(ld, v->start_mark, path, plen, "expected a mapping of arguments, got %s",
                       shown(v, got, sizeof got));
    args->n = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&ld->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(&ld->doc, p->value);
        char key[GB_CONFIG_NAME_MAX];
        if (k->type != YAML_SCALAR_NODE || !scalar_text(k, key, sizeof key) || key[0] == '\0')
            return fail_at(ld, k->start_mark, path, plen,
                           "argument names are non-empty scalars of at most %d characters",
                           GB_CONFIG_NAME_MAX - 1);
        if (val->type != YAML_SCALAR_NODE)
            return fail_at(ld, val->start_mark, path, plen, "argument %s: expected a scalar, got %s",
                           key, shown(val, got, sizeof got));
        if (gb_config_arg(args, key))
            return fail_at(ld, k->start_mark, path, plen, "argument %s: duplicate key", key);
        if (args->n == GB_CONFIG_ARGS_MAX)
            return fail_at(ld, k->start_mark, path, plen, "more than %d arguments",
                           GB_CONFIG_ARGS_MAX);
        memcpy(args->kv[args->n].key, key, sizeof key);
        if (!scalar_text(val, args->kv[args->n].value, GB_CONFIG_ARG_VALUE_MAX))
            return fail_at(ld, val->start_mark, path, plen,
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
        if (scalar_is(v, f->choices[i]))
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
        return fail_at(ld, v->start_mark, path, plen, "expected a list of names from %s, got %s",
                       names, shown(v, got, sizeof got));
    yaml_node_item_t *it = v->data.sequence.items.start;
    int n = (int)(v->data.sequence.items.top - it);
    if (n > GB_CONFIG_LIST_MAX)
        return fail_at(ld, v->start_mark, path, plen, "expected at most %d names, got %d",
                       GB_CONFIG_LIST_MAX, n);
    gb_config_int_list tmp = {.n = n};
    for (int i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(&ld->doc, it[i]);
        int found = choice_index(f, e);
        if (found < 0)
            return fail_at(ld, e->start_mark, path, plen, "expected one of %s, got %s", names,
                           shown(e, got, sizeof got));
        for (int k = 0; k < i; k++)
            if (tmp.v[k] == found)
                return fail_at(ld, e->start_mark, path, plen, "%s is listed twice",
                               f->choices[found]);
        tmp.v[i] = found;
    }
    *(gb_config_int_list *)((char *)ld->cfg + f->offset) = tmp;
    return 0;
}

static int set_value(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                     const char *path, size_t plen)
{
    void *dst = (char *)ld->cfg + f->offset;
    char got[128];
    switch (f->kind) {
    case GB_CK_INT:
        return set_int(ld, f, v, (int64_t *)dst, path, plen);
    case GB_CK_FLOAT: {
        if (f->nullable && is_null(v)) {
            *(double *)dst = NAN;
            return 0;
        }
        int64_t iv;
        double dv;
        int is_int;
        if (!parse_number(v, &iv, &dv, &is_int) || dv < f->min || dv > f->max) {
            if (isinf(f->min) && isinf(f->max))
                return fail_at(ld, v->start_mark, path, plen, "expected a number%s, got %s",
                               f->nullable ? " or null" : "", shown(v, got, sizeof got));
            return fail_at(ld, v->start_mark, path, plen, "expected a number in [%g, %g]%s, got %s",
                           f->min, f->max, f->nullable ? " or null" : "",
                           shown(v, got, sizeof got));
        }
        *(double *)dst = dv;
        return 0;
    }
    case GB_CK_BOOL:
        if (scalar_is(v, "true") || scalar_is(v, "True") || scalar_is(v, "TRUE")) {
            *(int *)dst = 1;
            return is_plain(v) ? 0 : fail_at(ld, v->start_mark, path, plen,
                                             "expected true or false, got the string %s",
                                             shown(v, got, sizeof got));
        }
        if (scalar_is(v, "false") || scalar_is(v, "False") || scalar_is(v, "FALSE")) {
            *(int *)dst = 0;
            return is_plain(v) ? 0 : fail_at(ld, v->start_mark, path, plen,
                                             "expected true or false, got the string %s",
                                             shown(v, got, sizeof got));
        }
        return fail_at(ld, v->start_mark, path, plen, "expected true or false, got %s",
                       shown(v, got, sizeof got));
    case GB_CK_STRING:
        if (v->type != YAML_SCALAR_NODE)
            return fail_at(ld, v->start_mark, path, plen, "expected a string, got %s",
                           shown(v, got, sizeof got));
        if (is_null(v)) {
            ((char *)dst)[0] = '\0';
            return 0;
        }
        if (!scalar_text(v, dst, f->size))
            return fail_at(ld, v->start_mark, path, plen,
                           "expected a string of at most %zu characters, got %zu characters",
                           f->size - 1, v->data.scalar.length);
        return 0;
    case GB_CK_ENUM: {
        int i = choice_index(f, v);
        if (i >= 0) {
            *(int *)dst = i;
            return 0;
        }
        char list[256];
        return fail_at(ld, v->start_mark, path, plen, "expected one of %s, got %s",
                       choices_text(f, list, sizeof list), shown(v, got, sizeof got));
    }
    case GB_CK_INT_LIST: {
        gb_config_int_list *list = dst;
        if (v->type != YAML_SEQUENCE_NODE)
            return fail_at(ld, v->start_mark, path, plen, "expected a list of integers, got %s",
                           shown(v, got, sizeof got));
        yaml_node_item_t *it = v->data.sequence.items.start;
        int n = (int)(v->data.sequence.items.top - it);
        if (n > GB_CONFIG_LIST_MAX)
            return fail_at(ld, v->start_mark, path, plen, "expected at most %d integers, got %d",
                           GB_CONFIG_LIST_MAX, n);
        gb_config_int_list tmp = {.n = n};
        for (int i = 0; i < n; i++) {
            yaml_node_t *e = yaml_document_get_node(&ld->doc, it[i]);
            int rc = set_int(ld, f, e, &tmp.v[i], path, plen);
            if (rc)
                return rc;
        }
        *list = tmp;
        return 0;
    }
    case GB_CK_ARGS:
        return set_args(ld, f, v, path, plen);
    case GB_CK_ENUM_LIST:
        return set_enum_list(ld, f, v, path, plen);
    }
    return fail_at(ld, v->start_mark, path, plen, "internal error: unknown kind");
}

static void record(loader *ld, const gb_config_field *f, yaml_mark_t at)
{
    mark *m = &ld->marks->field[f - gb_config_fields];
    m->line = (int)at.line + 1;
    m->col = (int)at.column + 1 + (ld->source ? ld->col_offset : 0);
    m->source = ld->source;
}

static void record_section(loader *ld, const char *path, size_t len, yaml_mark_t at)
{
    gb_config_marks *ms = ld->marks;
    for (int i = 0; i < ms->nsections; i++)
        if (strlen(ms->section[i].path) == len && !memcmp(ms->section[i].path, path, len))
            return;
    if (ms->nsections == MAX_SECTIONS || len >= PATH_BUF)
        return;
    memcpy(ms->section[ms->nsections].path, path, len);
    ms->section[ms->nsections].path[len] = '\0';
    ms->section[ms->nsections].at =
        (mark){(int)at.line + 1, (int)at.column + 1 + (ld->source ? ld->col_offset : 0), ld->source};
    ms->nsections++;
}

/* Levenshtein distance, capped: for "did you mean" hints. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = c < del ? (c < ins ? c : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* The closest known key under section prefix[0..plen) to name, for an unknown-key hint. */
static const char *closest_key(const char *prefix, size_t plen, const char *name, size_t nlen,
                               char *buf, size_t n)
{
    int best = 3;
    const char *found = NULL;
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const char *p = gb_config_fields[i].path;
        if (plen && (strncmp(p, prefix, plen) != 0 || p[plen] != '.'))
            continue;
        const char *leaf = p + (plen ? plen + 1 : 0);
        size_t llen = strcspn(leaf, ".");
        int dist = edit_distance(leaf, llen, name, nlen);
        if (dist < best) {
            best = dist;
            snprintf(buf, n, "%.*s", (int)llen, leaf);
            found = buf;
        }
    }
    return found;
}

static int walk_mapping(loader *ld, const yaml_node_t *map, char *path, size_t plen);

/* Handles `key: value` found under section path[0..plen). */
static int walk_pair(loader *ld, const yaml_node_t *k, const yaml_node_t *v, char *path,
                     size_t plen)
{
    char got[128];
    if (k->type != YAML_SCALAR_NODE || k->data.scalar.length == 0)
        return fail_at(ld, k->start_mark, path, plen, "expected a key name, got %s",
                       k->type == YAML_SCALAR_NODE ? "an empty key" : shown(k, got, sizeof got));
    size_t klen = k->data.scalar.length;
    const char *key = (const char *)k->data.scalar.value;
    if (plen + 1 + klen >= PATH_BUF || memchr(key, '.', klen) || memchr(key, '\0', klen))
        return fail_at(ld, k->start_mark, path, plen, "unknown key %s", shown(k, got, sizeof got));
    size_t nlen = plen;
    if (plen)
        path[nlen++] = '.';
    memcpy(path + nlen, key, klen);
    nlen += klen;
    path[nlen] = '\0';

    const gb_config_field *f = gb_config_find_field(path, nlen);
    if (f) {
        mark *m = &ld->marks->field[f - gb_config_fields];
        if (m->line && m->source == ld->source && ld->source == 0)
            return fail_at(ld, k->start_mark, path, nlen, "duplicate key (first set at line %d)",
                           m->line);
        int rc = set_value(ld, f, v, path, nlen);
        if (rc == 0)
            record(ld, f, v->start_mark);
        path[plen] = '\0';
        return rc;
    }
    if (gb_config_is_section(path, nlen)) {
        record_section(ld, path, nlen, k->start_mark);
        int rc = is_null(v) ? 0 : walk_mapping(ld, v, path, nlen);
        path[plen] = '\0';
        return rc;
    }
    char hint_buf[64];
    const char *hint = closest_key(path, plen, key, klen, hint_buf, sizeof hint_buf);
    if (hint)
        return fail_at(ld, k->start_mark, path, nlen, "unknown key (did you mean '%s'?)", hint);
    return fail_at(ld, k->start_mark, path, nlen, "unknown key");
}

static int walk_mapping(loader *ld, const yaml_node_t *map, char *path, size_t plen)
{
    char got[128];
    if (map->type != YAML_MAPPING_NODE)
        return fail_at(ld, map->start_mark, path, plen, "expected a mapping of keys, got %s",
                       shown(map, got, sizeof got));
    /* Sections may appear once per mapping; duplicate leaves are caught by their marks. */
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(&ld->doc, p->key);
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(&ld->doc, q->key);
            if (k->type == YAML_SCALAR_NODE && k2->type == YAML_SCALAR_NODE &&
                k->data.scalar.length == k2->data.scalar.length &&
                !memcmp(k->data.scalar.value, k2->data.scalar.value, k->data.scalar.length))
                return fail_at(ld, k->start_mark, path, plen, "duplicate key %s (first at line %d)",
                               shown(k, got, sizeof got), (int)k2->start_mark.line + 1);
        }
        int rc = walk_pair(ld, k, yaml_document_get_node(&ld->doc, p->value), path, plen);
        if (rc)
            return rc;
    }
    return 0;
}

/* Line and column (1-based) of byte offset off in text, for libyaml reader errors. */
static void offset_position(const char *text, size_t len, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Parses ld->text into ld->doc; on a syntax error fills err with the position. */
static int parse_document(loader *ld, int *empty)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return gb_error_set(ld->err, GB_ENOMEM, "libyaml: cannot initialise the parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text, ld->len);
    int ok = yaml_parser_load(&parser, &ld->doc);
    int rc = 0;
    if (!ok) {
        char src[32];
        const char *name = source_name(ld->marks, ld->source, src, sizeof src);
        int line, col;
        if (parser.error == YAML_READER_ERROR) {
            offset_position(ld->text, ld->len, parser.problem_offset, &line, &col);
        } else {
            line = (int)parser.problem_mark.line + 1;
            col = (int)parser.problem_mark.column + 1;
        }
        if (ld->source) {
            /* An override is one line; libyaml may place the end of input on a second. */
            if (line > 1)
                col = (int)ld->len + 1;
            line = 1;
            col += ld->col_offset;
        }
        rc = gb_error_set(ld->err, GB_ECONFIG, "%s:%d:%d: YAML syntax error: %s%s%s", name, line,
                          col, parser.problem ? parser.problem : "unknown problem",
                          parser.context ? " " : "", parser.context ? parser.context : "");
    } else {
        *empty = yaml_document_get_root_node(&ld->doc) == NULL;
        if (*empty)
            yaml_document_delete(&ld->doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}

static int apply_defaults(gb_config *cfg, gb_config_marks *marks, gb_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const gb_config_field *f = &gb_config_fields[i];
        if (!f->def || (f->kind == GB_CK_STRING && f->def[0] == '\0'))
            continue; /* required, or the empty string the memset left */
        loader ld = {.cfg = cfg, .marks = marks, .text = f->def, .len = strlen(f->def),
                     .err = err};
        int empty = 0;
        int rc = parse_document(&ld, &empty);
        if (rc == 0 && empty)
            rc = gb_error_set(err, GB_ECONFIG, "schema: %s: empty default", f->path);
        if (rc == 0) {
            rc = set_value(&ld, f, yaml_document_get_root_node(&ld.doc), f->path,
                           strlen(f->path));
            yaml_document_delete(&ld.doc);
        }
        if (rc)
            return gb_error_prefix(err, "internal: bad default in the schema");
    }
    return 0;
}

static gb_config_marks marks_size_probe;

static int load_text(gb_config *cfg, gb_config_marks **marks_out, const char *name,
                     const char *text, size_t len, gb_error *err)
{
    if (gb_config_nfields > sizeof marks_size_probe.field / sizeof(mark))
        return gb_error_set(err, GB_ECONFIG, "internal: the schema outgrew gb_config_marks");
    gb_config_marks *marks = calloc(1, sizeof *marks);
    if (!marks)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    snprintf(marks->file, sizeof marks->file, "%s", name);
    int rc = apply_defaults(cfg, marks, err);
    snprintf(cfg->source, sizeof cfg->source, "%s", name);
    if (rc)
        goto fail;
    loader ld = {.cfg = cfg, .marks = marks, .text = text, .len = len, .err = err};
    int empty = 0;
    rc = parse_document(&ld, &empty);
    if (rc)
        goto fail;
    if (empty) {
        rc = gb_error_set(err, GB_ECONFIG, "%s:1:1: the config is empty (expected a mapping "
                          "with experiment, env, trainer, ...)", name);
        goto fail;
    }
    char path[PATH_BUF] = "";
    rc = walk_mapping(&ld, yaml_document_get_root_node(&ld.doc), path, 0);
    yaml_document_delete(&ld.doc);
    if (rc)
        goto fail;
    if (marks_out)
        *marks_out = marks;
    else
        free(marks);
    return 0;
fail:
    free(marks);
    return rc;
}

int gb_config_load_string(gb_config *cfg, gb_config_marks **marks, const char *name,
                          const char *text, size_t len, gb_error *err)
{
    return load_text(cfg, marks, name, text, len, err);
}

int gb_config_load(gb_config *cfg, gb_config_marks **marks, const char *path, gb_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gb_error_errno(err, "%s", path);
        return err ? (err->code = GB_ECONFIG) : GB_ECONFIG;
    }
    char *buf = NULL;
    int rc = 0;
    if (fseek(f, 0, SEEK_END) != 0) {
        rc = gb_error_errno(err, "%s: cannot seek", path);
        goto done;
    }
    long size = ftell(f);
    if (size < 0 || (unsigned long)size > MAX_FILE_BYTES) {
        rc = gb_error_set(err, GB_ECONFIG, "%s:1:1: not a config: %ld bytes (the limit is %u)",
                          path, size, MAX_FILE_BYTES);
        goto done;
    }
    rewind(f);
    buf = malloc((size_t)size + 1);
    if (!buf) {
        rc = gb_error_set(err, GB_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        rc = gb_error_errno(err, "%s: read failed", path);
        goto done;
    }
    buf[size] = '\0';
    rc = load_text(cfg, marks, path, buf, (size_t)size, err);
done:
    if (rc && rc != GB_ECONFIG)
        err->code = rc = GB_ECONFIG; /* every load failure is a config error for the caller */
    free(buf);
    fclose(f);
    return rc;
}

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
    if (!f) {
        char hint_buf[64];
        const char *dot = strrchr(path, '.');
        size_t plen = dot ? (size_t)(dot - path) : 0;
        const char *leaf = dot ? dot + 1 : path;
        const char *hint = (plen == 0 || gb_config_is_section(path, plen))
                               ? closest_key(path, plen, leaf, strlen(leaf), hint_buf,
                                             sizeof hint_buf)
                               : NULL;
        if (gb_config_is_section(path, klen))
            return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: is a section; set one of its keys",
                                src, path);
        if (hint)
            return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: unknown key (did you mean '%s'?)",
                                src, path, hint);
        return gb_error_set(err, GB_ECONFIG, "%s:1:1: %s: unknown key", src, path);
    }
    int empty = 0;
    int rc = parse_document(&ld, &empty);
    if (rc)
        return rc;
    yaml_node_t *root = NULL;
    yaml_node_t null_node = {.type = YAML_SCALAR_NODE};
    null_node.data.scalar.value = (yaml_char_t *)"";
    null_node.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    null_node.start_mark.column = 0;
    root = empty ? &null_node : yaml_document_get_root_node(&ld.doc);
    if (argname) {
        gb_config_args *args = &cfg->env.args;
        yaml_mark_t at = root->start_mark;
        size_t nl = strlen(argname);
        if (root->type != YAML_SCALAR_NODE)
            rc = fail_at(&ld, at, path, klen, "expected a scalar argument value");
        else if (nl == 0 || nl >= GB_CONFIG_NAME_MAX || strchr(argname, '.'))
            rc = fail_at(&ld, at, path, klen, "bad argument name");
        else {
            int slot = args->n;
            for (int i = 0; i < args->n; i++)
                if (strcmp(args->kv[i].key, argname) == 0)
                    slot = i;
            if (slot == GB_CONFIG_ARGS_MAX)
                rc = fail_at(&ld, at, path, klen, "more than %d arguments", GB_CONFIG_ARGS_MAX);
            else if (!scalar_text(root, args->kv[slot].value, GB_CONFIG_ARG_VALUE_MAX))
                rc = fail_at(&ld, at, path, klen, "value longer than %d characters",
                             GB_CONFIG_ARG_VALUE_MAX - 1);
            else {
                snprintf(args->kv[slot].key, GB_CONFIG_NAME_MAX, "%s", argname);
                if (slot == args->n)
                    args->n++;
                record(&ld, f, at);
            }
        }
    } else {
        rc = set_value(&ld, f, root, path, klen);
        if (rc == 0)
            record(&ld, f, root->start_mark);
    }
    if (!empty)
        yaml_document_delete(&ld.doc);
    return rc;
}

/* Error at the place key was set (or its closest set section, or line 1). */
__attribute__((format(printf, 4, 5))) static int fail_key(const gb_config_marks *marks,
                                                           const char *key, gb_error *err,
                                                           const char *fmt, ...)
{
    char msg[768], src[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const gb_config_field *f = gb_config_find_field(key, strlen(key));
    mark at = {1, 1, 0};
    if (f && marks->field[f - gb_config_fields].line) {
        at = marks->field[f - gb_config_fields];
    } else {
        /* The deepest section of key that appears in the file. */
        size_t best = 0;
        for (int i = 0; i < marks->nsections; i++) {
            size_t l = strlen(marks->section[i].path);
            if (l > best && strncmp(key, marks->section[i].path, l) == 0 && key[l] == '.') {
                best = l;
                at = marks->section[i].at;
            }
        }
    }
    return gb_error_set(err, GB_ECONFIG, "%s:%d:%d: %s: %s",
                        source_name(marks, at.source, src, sizeof src), at.line, at.col, key,
                        msg);
}

int gb_config_finish(gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    for (size_t i = 0; i < gb_config_nfields; i++)
        if (!gb_config_fields[i].def && !marks->field[i].line)
            return fail_key(marks, gb_config_fields[i].path, err, "required key is missing");
    if (strcmp(cfg->env.name, "plugin") == 0 && cfg->env.plugin[0] == '\0')
        return fail_key(marks, "env.plugin", err,
                        "env.name is \"plugin\", so env.plugin must name the shared library");
    if (strcmp(cfg->env.name, "plugin") != 0 && cfg->env.plugin[0] != '\0')
        return fail_key(marks, "env.plugin", err,
                        "set only when env.name is \"plugin\" (env.name is \"%s\")",
                        cfg->env.name);
    if (cfg->actors.envs_per_actor % cfg->actors.splits != 0)
        return fail_key(marks, "actors.splits", err,
                        "must divide actors.envs_per_actor (%lld), got %lld",
                        (long long)cfg->actors.envs_per_actor, (long long)cfg->actors.splits);
    const gb_config_replay *r = &cfg->trainer.replay;
    if (r->max_size > r->capacity)
        return fail_key(marks, "trainer.replay.max_size", err,
                        "must not exceed trainer.replay.capacity (%lld), got %lld",
                        (long long)r->capacity, (long long)r->max_size);
    int64_t size_limit = r->max_size ? r->max_size : r->capacity;
    if (r->min_size > size_limit)
        return fail_key(marks, "trainer.replay.min_size", err,
                        "the replay never holds %lld items (its limit is %lld), so sampling "
                        "would never start", (long long)r->min_size, (long long)size_limit);
    if (r->remover == GB_REMOVER_MAX_TIMES_SAMPLED && r->max_times_sampled == 0)
        return fail_key(marks, "trainer.replay.max_times_sampled", err,
                        "must be positive when trainer.replay.remover is max_times_sampled");
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT && cfg->policy.model.torchscript[0] == 0)
        return fail_key(marks, "policy.model.torchscript", err,
                        "policy.model.type is torchscript, so this must name the file");
    if (cfg->policy.model.hidden.n == 0 && cfg->policy.model.type == GB_MODEL_MLP)
        return fail_key(marks, "policy.model.hidden", err, "an MLP needs at least one layer");
    if (cfg->streams.transport == GB_TRANSPORT_TCP && cfg->streams.interface[0] == '\0')
        return fail_key(marks, "streams.interface", err,
                        "tcp needs an address to bind (\"*\" for every interface)");
    if (cfg->streams.ttl_ms <= cfg->streams.heartbeat_ms)
        return fail_key(marks, "streams.ttl_ms", err,
                        "must exceed streams.heartbeat_ms (%lld), got %lld",
                        (long long)cfg->streams.heartbeat_ms, (long long)cfg->streams.ttl_ms);
    return 0;
}

void gb_config_marks_free(gb_config_marks *marks) { free(marks); }

int gb_config_read(gb_config *cfg, const char *path, const char *const *sets, int nsets,
                   gb_error *err)
{
    gb_config_marks *marks = NULL;
    int rc = gb_config_load(cfg, &marks, path, err);
    for (int i = 0; rc == 0 && i < nsets; i++)
        rc = gb_config_apply_set(cfg, marks, sets[i], i + 1, err);
    if (rc == 0)
        rc = gb_config_finish(cfg, marks, err);
    gb_config_marks_free(marks);
    return rc;
}

const char *gb_config_arg(const gb_config_args *args, const char *key)
{
    for (int i = 0; i < args->n; i++)
        if (strcmp(args->kv[i].key, key) == 0)
            return args->kv[i].value;
    return NULL;
}

const char *gb_config_enum_name(const char *key_path, int value)
{
    const gb_config_field *f = gb_config_find_field(key_path, strlen(key_path));
    if (!f || f->kind != GB_CK_ENUM || value < 0)
        return "?";
    for (int i = 0; f->choices[i]; i++)
        if (i == value)
            return f->choices[i];
    return "?";
}
