/* runtime/config/config.c: loading the experiment config: YAML text walked into key paths, each
 * value's place (file:line:col) remembered, unknown keys refused with a hint; then the overrides
 * and the checks (gb_config_read). Values are set by config_set.c, checked across keys by
 * config_check.c. See config.h. */
#include "runtime/config/config.h"
#include "runtime/config/config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_FILE_BYTES (64u << 20) /* a config is text; anything larger is a mistake */

/* Remembers where section path[0..len) first appears, for the checks' messages about keys left
 * at their defaults inside it. */
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
    ms->section[ms->nsections].at = gb_config_mark_of(ld, at);
    ms->nsections++;
}

static int walk_mapping(loader *ld, const yaml_node_t *map, char *path, size_t plen);

/* Handles `key: value` found under section path[0..plen). */
static int walk_pair(loader *ld, const yaml_node_t *k, const yaml_node_t *v, char *path,
                     size_t plen)
{
    char got[128];
    if (k->type != YAML_SCALAR_NODE || k->data.scalar.length == 0)
        return gb_config_fail_at(ld, k->start_mark, path, plen, "expected a key name, got %s",
                                 k->type == YAML_SCALAR_NODE ? "an empty key"
                                                             : gb_config_shown(k, got, sizeof got));
    size_t klen = k->data.scalar.length;
    const char *key = (const char *)k->data.scalar.value;
    if (plen + 1 + klen >= PATH_BUF || memchr(key, '.', klen) || memchr(key, '\0', klen))
        return gb_config_fail_at(ld, k->start_mark, path, plen, "unknown key %s",
                                 gb_config_shown(k, got, sizeof got));
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
            return gb_config_fail_at(ld, k->start_mark, path, nlen,
                                     "duplicate key (first set at line %d)", m->line);
        int rc = gb_config_set_value(ld, f, v, path, nlen);
        if (rc == 0)
            gb_config_record(ld, f, v->start_mark);
        path[plen] = '\0';
        return rc;
    }
    if (gb_config_is_section(path, nlen)) {
        record_section(ld, path, nlen, k->start_mark);
        int rc = gb_config_is_null(v) ? 0 : walk_mapping(ld, v, path, nlen);
        path[plen] = '\0';
        return rc;
    }
    char hint_buf[64];
    const char *hint = gb_config_closest_key(path, plen, key, klen, hint_buf, sizeof hint_buf);
    if (hint)
        return gb_config_fail_at(ld, k->start_mark, path, nlen, "unknown key (did you mean '%s'?)",
                                 hint);
    return gb_config_fail_at(ld, k->start_mark, path, nlen, "unknown key");
}

/* Walks a mapping under section path[0..plen): each key once, each pair by walk_pair. */
static int walk_mapping(loader *ld, const yaml_node_t *map, char *path, size_t plen)
{
    char got[128];
    if (map->type != YAML_MAPPING_NODE)
        return gb_config_fail_at(ld, map->start_mark, path, plen,
                                 "expected a mapping of keys, got %s",
                                 gb_config_shown(map, got, sizeof got));
    /* Sections may appear once per mapping; duplicate leaves are caught by their marks. */
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(&ld->doc, p->key);
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(&ld->doc, q->key);
            if (k->type == YAML_SCALAR_NODE && k2->type == YAML_SCALAR_NODE &&
                k->data.scalar.length == k2->data.scalar.length &&
                !memcmp(k->data.scalar.value, k2->data.scalar.value, k->data.scalar.length))
                return gb_config_fail_at(
                    ld, k->start_mark, path, plen, "duplicate key %s (first at line %d)",
                    gb_config_shown(k, got, sizeof got), (int)k2->start_mark.line + 1);
        }
        int rc = walk_pair(ld, k, yaml_document_get_node(&ld->doc, p->value), path, plen);
        if (rc)
            return rc;
    }
    return 0;
}

/* Defaults, then the YAML text walked key by key into cfg. */
static int load_text(gb_config *cfg, gb_config_marks **marks_out, const char *name,
                     const char *text, size_t len, gb_error *err)
{
    if (gb_config_nfields > sizeof(((gb_config_marks *)0)->field) / sizeof(mark))
        return gb_error_set(err, GB_ECONFIG, "internal: the schema outgrew gb_config_marks");
    gb_config_marks *marks = calloc(1, sizeof *marks);
    if (!marks)
        return gb_error_set(err, GB_ENOMEM, "out of memory");
    snprintf(marks->file, sizeof marks->file, "%s", name);
    int rc = gb_config_set_defaults(cfg, marks, err);
    snprintf(cfg->source, sizeof cfg->source, "%s", name);
    if (rc)
        goto fail;
    loader ld = {.cfg = cfg, .marks = marks, .text = text, .len = len, .err = err};
    int empty = 0;
    rc = gb_config_parse_document(&ld, &empty);
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

/* Defaults, then the YAML text[0..len) named name in messages. *marks (when given) is the
 * caller's, for gb_config_marks_free. Returns 0 or GB_ECONFIG (GB_ENOMEM without memory). */
int gb_config_load_string(gb_config *cfg, gb_config_marks **marks, const char *name,
                          const char *text, size_t len, gb_error *err)
{
    return load_text(cfg, marks, name, text, len, err);
}

/* Defaults, then the file at path (at most 64 MiB). Reads the file (blocks on disk); *marks
 * (when given) is the caller's. Every failure is GB_ECONFIG with file:line:col in err. */
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

/* Frees marks (NULL is fine). */
void gb_config_marks_free(gb_config_marks *marks) { free(marks); }

/* load + every override + finish; the marks live only for the call. Returns 0 or GB_ECONFIG. */
int gb_config_read(gb_config *cfg, const char *path, const char *const *sets, int nsets,
                   gb_error *err)
{
    return gb_config_read_checked(cfg, path, sets, nsets, NULL, NULL, err);
}

int gb_config_read_checked(gb_config *cfg, const char *path, const char *const *sets, int nsets,
                           gb_config_check_fn check, void *arg, gb_error *err)
{
    gb_config_marks *marks = NULL;
    int rc = gb_config_load(cfg, &marks, path, err);
    for (int i = 0; rc == 0 && i < nsets; i++)
        rc = gb_config_apply_set(cfg, marks, sets[i], i + 1, err);
    if (rc == 0)
        rc = gb_config_finish(cfg, marks, err);
    if (rc == 0 && check)
        rc = check(cfg, marks, arg, err);
    gb_config_marks_free(marks);
    return rc;
}

/* See config.h. */
int64_t gb_config_state_size(const gb_config *cfg)
{
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT)
        return cfg->policy.model.torchscript_state;
    switch (cfg->policy.model.core) {
    case GB_CORE_LSTM: return 2 * cfg->policy.model.core_size;
    case GB_CORE_GRU: return cfg->policy.model.core_size;
    case GB_CORE_TRANSFORMER: {
        const gb_config_model *m = &cfg->policy.model;
        return m->core_layers * m->core_memory * m->core_size + m->core_memory;
    }
    default: return 0;
    }
}

/* See config.h. */
double gb_config_dqn_epsilon(const gb_config_dqn *dqn, int64_t env_steps)
{
    if (dqn->epsilon_decay_steps <= 0 || env_steps >= dqn->epsilon_decay_steps)
        return dqn->epsilon_end;
    double f = (double)env_steps / (double)dqn->epsilon_decay_steps;
    return dqn->epsilon_start + f * (dqn->epsilon_end - dqn->epsilon_start);
}

/* See config.h. */
int64_t gb_config_burn_in(const gb_config *cfg)
{
    return cfg->trainer.algorithm.name == GB_ALGO_DQN ? cfg->trainer.algorithm.dqn.burn_in : 0;
}
