/* runtime/config/config_set.c: typed setting of config values: a YAML node parsed into its field
 * (integers, numbers, booleans, strings, enums, lists, arguments) against the schema in
 * config_schema.c, --set key.path=value overrides, and the checks across keys. See config.h. */
#include "runtime/config/config.h"
#include "runtime/config/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static int is_plain(const yaml_node_t *n);

/* Shows a scalar in a message: quoted, cut at 40 characters, non-printables escaped. */
const char *gb_config_shown(const yaml_node_t *node, char *buf, size_t n)
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

int gb_config_is_null(const yaml_node_t *n)
{
    return is_plain(n) && (n->data.scalar.length == 0 || scalar_is(n, "null") ||
                           scalar_is(n, "~") || scalar_is(n, "Null") || scalar_is(n, "NULL"));
}

/* Copies a scalar into a NUL-terminated buffer; 0 when it does not fit or holds a NUL byte. */
int gb_config_scalar_text(const yaml_node_t *n, char *buf, size_t size)
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
    if (!is_plain(n) || !gb_config_scalar_text(n, buf, sizeof buf) || buf[0] == '\0')
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

int gb_config_set_value(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                        const char *path, size_t plen)
{
    void *dst = (char *)ld->cfg + f->offset;
    char got[128];
    switch (f->kind) {
    case GB_CK_INT:
        return set_int(ld, f, v, (int64_t *)dst, path, plen);
    case GB_CK_FLOAT: {
        if (f->nullable && gb_config_is_null(v)) {
            *(double *)dst = NAN;
            return 0;
        }
        int64_t iv;
        double dv;
        int is_int;
        if (!parse_number(v, &iv, &dv, &is_int) || dv < f->min || dv > f->max) {
            if (isinf(f->min) && isinf(f->max))
                return gb_config_fail_at(
                    ld, v->start_mark, path, plen, "expected a number%s, got %s",
                    f->nullable ? " or null" : "", gb_config_shown(v, got, sizeof got));
            return gb_config_fail_at(
                ld, v->start_mark, path, plen, "expected a number in [%g, %g]%s, got %s", f->min,
                f->max, f->nullable ? " or null" : "", gb_config_shown(v, got, sizeof got));
        }
        *(double *)dst = dv;
        return 0;
    }
    case GB_CK_BOOL:
        if (scalar_is(v, "true") || scalar_is(v, "True") || scalar_is(v, "TRUE")) {
            *(int *)dst = 1;
            return is_plain(v) ? 0
                               : gb_config_fail_at(ld, v->start_mark, path, plen,
                                                   "expected true or false, got the string %s",
                                                   gb_config_shown(v, got, sizeof got));
        }
        if (scalar_is(v, "false") || scalar_is(v, "False") || scalar_is(v, "FALSE")) {
            *(int *)dst = 0;
            return is_plain(v) ? 0
                               : gb_config_fail_at(ld, v->start_mark, path, plen,
                                                   "expected true or false, got the string %s",
                                                   gb_config_shown(v, got, sizeof got));
        }
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected true or false, got %s",
                                 gb_config_shown(v, got, sizeof got));
    case GB_CK_STRING:
        if (v->type != YAML_SCALAR_NODE)
            return gb_config_fail_at(ld, v->start_mark, path, plen, "expected a string, got %s",
                                     gb_config_shown(v, got, sizeof got));
        if (gb_config_is_null(v)) {
            ((char *)dst)[0] = '\0';
            return 0;
        }
        if (!gb_config_scalar_text(v, dst, f->size))
            return gb_config_fail_at(
                ld, v->start_mark, path, plen,
                "expected a string of at most %zu characters, got %zu characters", f->size - 1,
                v->data.scalar.length);
        return 0;
    case GB_CK_ENUM: {
        int i = choice_index(f, v);
        if (i >= 0) {
            *(int *)dst = i;
            return 0;
        }
        char list[256];
        return gb_config_fail_at(ld, v->start_mark, path, plen, "expected one of %s, got %s",
                                 choices_text(f, list, sizeof list),
                                 gb_config_shown(v, got, sizeof got));
    }
    case GB_CK_INT_LIST: {
        gb_config_int_list *list = dst;
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
        *list = tmp;
        return 0;
    }
    case GB_CK_ARGS:
        return set_args(ld, f, v, path, plen);
    case GB_CK_ENUM_LIST:
        return set_enum_list(ld, f, v, path, plen);
    }
    return gb_config_fail_at(ld, v->start_mark, path, plen, "internal error: unknown kind");
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
    int empty = 0;
    int rc = gb_config_parse_document(&ld, &empty);
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
            rc = gb_config_fail_at(&ld, at, path, klen, "expected a scalar argument value");
        else if (nl == 0 || nl >= GB_CONFIG_NAME_MAX || strchr(argname, '.'))
            rc = gb_config_fail_at(&ld, at, path, klen, "bad argument name");
        else {
            int slot = args->n;
            for (int i = 0; i < args->n; i++)
                if (strcmp(args->kv[i].key, argname) == 0)
                    slot = i;
            if (slot == GB_CONFIG_ARGS_MAX)
                rc = gb_config_fail_at(&ld, at, path, klen, "more than %d arguments",
                                       GB_CONFIG_ARGS_MAX);
            else if (!gb_config_scalar_text(root, args->kv[slot].value, GB_CONFIG_ARG_VALUE_MAX))
                rc = gb_config_fail_at(&ld, at, path, klen, "value longer than %d characters",
                                       GB_CONFIG_ARG_VALUE_MAX - 1);
            else {
                snprintf(args->kv[slot].key, GB_CONFIG_NAME_MAX, "%s", argname);
                if (slot == args->n)
                    args->n++;
                gb_config_record(&ld, f, at);
            }
        }
    } else {
        rc = gb_config_set_value(&ld, f, root, path, klen);
        if (rc == 0)
            gb_config_record(&ld, f, root->start_mark);
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
                        gb_config_source_name(marks, at.source, src, sizeof src), at.line, at.col,
                        key, msg);
}

/* Why name cannot be one folder of a path (run directories are <run_root>/<name>/...), or NULL
 * when it can: no separators, no "." or "..", no control characters. Any other bytes (UTF-8
 * letters, spaces) are fine. */
static const char *not_a_folder_name(const char *name)
{
    if (!name[0])
        return "must not be empty";
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return "must not be \".\" or \"..\" (it names a folder inside experiment.run_root)";
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '/' || *c == '\\')
            return "must be one folder name, without '/' or '\\' (it names a folder inside "
                   "experiment.run_root; set experiment.run_root or --run-dir to write elsewhere)";
        if (*c < 0x20 || *c == 0x7f)
            return "must not contain control characters";
    }
    return NULL;
}

/* 1 when a streams.interface value is the address of one machine (an IPv4 literal): each
 * worker binds it on its own node, so on several nodes it must be an interface name or "*". */
static int slurm_local_address(const char *interface)
{
    if (strcmp(interface, "*") == 0 || interface[0] == '\0')
        return 0;
    return strspn(interface, "0123456789.") == strlen(interface);
}

/* Was key set by the file or a --set (not left at the schema's default)? */
static int key_set(const gb_config_marks *marks, const char *key)
{
    const gb_config_field *f = gb_config_find_field(key, strlen(key));
    return f && marks->field[f - gb_config_fields].line != 0;
}

/* PPO learns on-policy: the schema's replay defaults (a uniform 100k-item replay, items reused
 * without end) fit DQN and SAC and would make PPO silently off-policy. Every trainer.replay key
 * a PPO config leaves unset takes instead what the tuned configs (configs/cartpole_ppo.yaml)
 * use: a queue of one round (capacity batch_size, remover none, selector fifo, each chunk
 * sampled once, sampling from one trainer's part of the batch). The full queue makes ingest
 * wait, so the actors wait for the trainer instead of producing chunks that go stale: that
 * bounds the policy lag (1-2 versions) without a trainer.max_staleness floor, which left unset
 * stays -1 (a floor of 1 expired about 70% of the chunks unused and tripled the env steps). */
static void ppo_replay_defaults(gb_config *cfg, const gb_config_marks *marks)
{
    if (cfg->trainer.algorithm.name != GB_ALGO_PPO)
        return;
    gb_config_replay *r = &cfg->trainer.replay;
    int64_t batch = cfg->trainer.batch_size;
    int64_t part = cfg->trainer.count > 1 ? batch / cfg->trainer.count : batch;
    if (!key_set(marks, "trainer.replay.capacity"))
        r->capacity = batch;
    if (!key_set(marks, "trainer.replay.remover"))
        r->remover = GB_REMOVER_NONE;
    if (!key_set(marks, "trainer.replay.selector"))
        r->selector = GB_SELECTOR_FIFO;
    if (!key_set(marks, "trainer.replay.max_times_sampled"))
        r->max_times_sampled = 1;
    if (!key_set(marks, "trainer.replay.min_size"))
        r->min_size = part > 0 ? part : 1;
}

int gb_config_finish(gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    for (size_t i = 0; i < gb_config_nfields; i++)
        if (!gb_config_fields[i].def && !marks->field[i].line)
            return fail_key(marks, gb_config_fields[i].path, err, "required key is missing");
    const char *bad_name = not_a_folder_name(cfg->experiment.name);
    if (bad_name)
        return fail_key(marks, "experiment.name", err, "\"%s\" %s", cfg->experiment.name,
                        bad_name);
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
    if (cfg->actors.local > cfg->actors.count)
        return fail_key(marks, "actors.local", err, "must not exceed actors.count (%lld), got "
                        "%lld", (long long)cfg->actors.count, (long long)cfg->actors.local);
    if (cfg->policy.local > cfg->policy.count)
        return fail_key(marks, "policy.local", err, "must not exceed policy.count (%lld), got "
                        "%lld", (long long)cfg->policy.count, (long long)cfg->policy.local);
    ppo_replay_defaults(cfg, marks);
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
    if (r->remover == GB_REMOVER_NONE && r->max_times_sampled == 0)
        return fail_key(marks, "trainer.replay.max_times_sampled", err,
                        "must be positive when trainer.replay.remover is none (nothing else "
                        "empties a full replay: ingest would wait forever)");
    const gb_config_trainer *tr = &cfg->trainer;
    if (tr->count > 1 && tr->batch_size % tr->count != 0)
        return fail_key(marks, "trainer.batch_size", err,
                        "%lld does not split evenly over trainer.count = %lld trainers (each "
                        "trains on batch_size / count items)", (long long)tr->batch_size,
                        (long long)tr->count);
    if (cfg->experiment.eval_every > 0 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "experiment.eval_every", err,
                        "evaluation videos are started by the launcher of launch.mode local or "
                        "slurm; inline has none");
    if (cfg->experiment.eval_every > 0 && tr->checkpoint_every_s <= 0)
        return fail_key(marks, "experiment.eval_every", err,
                        "evaluations play the newest checkpoint, so trainer.checkpoint_every_s "
                        "must be > 0 (it is 0: only the final checkpoint would exist)");
    if (tr->count > 1 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "trainer.count", err,
                        "launch.mode inline runs one learner in one process; several trainers "
                        "need launch.mode local");
    if (tr->count > 1 && tr->device == GB_DEVICE_CUDA)
        return fail_key(marks, "trainer.device", err,
                        "several trainers on GPUs (gradients over NCCL) are not implemented "
                        "yet: use trainer.count 1 with cuda, or several trainers on the cpu");
    if (tr->count > 1 && tr->prefetch == GB_PREFETCH_ON)
        return fail_key(marks, "trainer.prefetch", err,
                        "several trainers agree on every step before they select, so a batch "
                        "cannot be selected ahead: use auto or off");
    if (cfg->parameters.relay == GB_RELAY_PER_HOST && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "parameters.relay", err,
                        "launch.mode inline has no parameter stream to relay; per_host needs "
                        "launch.mode local or slurm");
    if (tr->count > 1 && tr->rendezvous.store == GB_STORE_TCP && tr->rendezvous.port == 0)
        return fail_key(marks, "trainer.rendezvous.port", err,
                        "trainer.rendezvous.store is tcp, so trainer 0 needs a port to listen on");
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT && cfg->policy.model.torchscript[0] == 0)
        return fail_key(marks, "policy.model.torchscript", err,
                        "policy.model.type is torchscript, so this must name the file");
    if (cfg->policy.precision == GB_PRECISION_INT8 && cfg->policy.device != GB_DEVICE_CPU)
        return fail_key(marks, "policy.precision", err,
                        "int8 is libtorch's dynamic quantization, which runs on the cpu only: "
                        "use policy.device cpu, or bf16 on cuda");
    if (cfg->policy.precision != GB_PRECISION_FP32 && cfg->launch.mode == GB_LAUNCH_INLINE)
        return fail_key(marks, "policy.precision", err,
                        "launch.mode inline acts with the learner's own fp32 model; reduced "
                        "precision is the policy workers' (launch.mode local or slurm)");
    if (cfg->policy.precision != GB_PRECISION_FP32 &&
        cfg->policy.model.type == GB_MODEL_TORCHSCRIPT)
        return fail_key(marks, "policy.precision", err,
                        "reduced precision needs a built-in model (mlp or cnn), not torchscript");
    if (cfg->policy.model.hidden.n == 0 && cfg->policy.model.type == GB_MODEL_MLP)
        return fail_key(marks, "policy.model.hidden", err, "an MLP needs at least one layer");
    if (cfg->streams.transport == GB_TRANSPORT_TCP && cfg->streams.interface[0] == '\0')
        return fail_key(marks, "streams.interface", err,
                        "tcp needs an address to bind (\"*\" for every interface)");
    if (cfg->streams.curve == GB_CURVE_ON && cfg->streams.transport != GB_TRANSPORT_TCP)
        return fail_key(marks, "streams.curve", err, "on needs streams.transport tcp (ipc is "
                        "guarded by the run directory's permissions; use auto or off)");
    if (cfg->server.curve && strncmp(cfg->server.endpoint, "tcp://", 6) != 0)
        return fail_key(marks, "server.curve", err, "needs a tcp:// server.endpoint, got '%s'",
                        cfg->server.endpoint);
    if (cfg->server.curve && cfg->server.curve_key[0] == '\0')
        return fail_key(marks, "server.curve_key", err, "server.curve is on, so this must name "
                        "the server's key pair file (created 0600 when absent)");
    if (cfg->server.tables.n > 7) /* GB_SERVER_MAX_TABLES with the default one */
        return fail_key(marks, "server.tables", err, "at most 7 tables beside the default one");
    for (int i = 0; i < cfg->server.tables.n; i++) {
        const char *name = cfg->server.tables.kv[i].key;
        if (strlen(name) > 31 || strcmp(name, "default") == 0)
            return fail_key(marks, "server.tables", err, "table name '%s': at most 31 bytes "
                            "and not 'default' (the server section's own table)", name);
        gb_config *t = malloc(sizeof *t);
        if (!t)
            return gb_error_set(err, GB_ENOMEM, "out of memory");
        gb_error e = {0};
        int rc = gb_config_server_table(cfg, name, t, &e);
        free(t);
        if (rc)
            return fail_key(marks, "server.tables", err, "%s", e.msg);
    }
    if (cfg->launch.slurm.nodes > 1 && cfg->streams.transport != GB_TRANSPORT_TCP)
        return fail_key(marks, "launch.slurm.nodes", err,
                        "%lld nodes need streams.transport: tcp (ipc sockets do not reach "
                        "other machines; with ipc the run's job has one node)",
                        (long long)cfg->launch.slurm.nodes);
    if (cfg->launch.slurm.nodes > 1 && slurm_local_address(cfg->streams.interface))
        return fail_key(marks, "streams.interface", err,
                        "launch.slurm.nodes is %lld, so this must name a network interface "
                        "every node has (e.g. eth0, ib0) or \"*\", not the address %s of one "
                        "machine", (long long)cfg->launch.slurm.nodes, cfg->streams.interface);
    if (cfg->streams.ttl_ms <= cfg->streams.heartbeat_ms)
        return fail_key(marks, "streams.ttl_ms", err,
                        "must exceed streams.heartbeat_ms (%lld), got %lld",
                        (long long)cfg->streams.heartbeat_ms, (long long)cfg->streams.ttl_ms);
    return 0;
}

/* The server section's keys a table may override (server.tables). */
static int table_key_allowed(const char *key)
{
    static const char *const keys[] = {"dataset", "dataset_format", "steps",
                                       "dataset_last_items", "seed", NULL};
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return strncmp(key, "replay.", 7) == 0;
}

int gb_config_server_table(const gb_config *cfg, const char *name, gb_config *out,
                           gb_error *err)
{
    const char *spec = gb_config_arg(&cfg->server.tables, name);
    if (!spec)
        return gb_error_set(err, GB_ENOTFOUND, "server.tables: no table '%s'", name);
    *out = *cfg;
    out->server.tables.n = 0;
    out->server.checkpoint[0] = '\0';
    out->server.restore = 0;
    gb_config_marks *marks = calloc(1, sizeof *marks);
    if (!marks)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    int rc = 0, which = 0;
    for (const char *p = spec; rc == 0 && *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t");
        if (!len)
            break;
        char word[PATH_BUF], set[PATH_BUF + 8];
        const char *eq = memchr(p, '=', len);
        if (len >= sizeof word || !eq) {
            rc = gb_error_set(err, GB_ECONFIG, "table '%s': expected key=value words, got "
                              "'%.*s'", name, (int)(len > 64 ? 64 : len), p);
            break;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        word[eq - p] = '\0';
        if (!table_key_allowed(word)) {
            rc = gb_error_set(err, GB_ECONFIG, "table '%s': '%s' is not a table's key (dataset, "
                              "dataset_format, steps, dataset_last_items, seed, replay.*)", name,
                              word);
            break;
        }
        word[eq - p] = '=';
        snprintf(set, sizeof set, "server.%s", word);
        if ((rc = gb_config_apply_set(out, marks, set, ++which, err))) {
            /* drop the "--set[N]:1:C: " place, which names no real override */
            const char *m = err->msg;
            for (int colons = 0; colons < 3 && (m = strchr(m, ':')); colons++)
                m++;
            if (m && strncmp(err->msg, "--set[", 6) == 0) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", m + (*m == ' '));
                snprintf(err->msg, sizeof err->msg, "%s", msg);
            }
            gb_error_prefix(err, "table '%s'", name);
        }
        p += len;
    }
    free(marks);
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
