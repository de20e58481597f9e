/* runtime/config/config_internal.h: what the config's files share (private to runtime/config*.c).
 * Calls run one way: config.c (loading a file, gb_config_read) -> config_check.c (checks across
 * keys, server tables) -> config_set.c (one typed value by key path, --set, defaults) ->
 * config_yaml.c (libyaml documents, positions, messages); config_schema.c is read by all.
 * defines: gb_config_marks (where each key was set), loader (a parse in progress), and the
 *          functions of config_yaml.c and config_set.c */
#ifndef GB_RUNTIME_CONFIG_INTERNAL_H
#define GB_RUNTIME_CONFIG_INTERNAL_H

#include "runtime/config/config.h"
#include "runtime/config/config_schema.h"

#include <stdarg.h>
#include <stddef.h>
#include <yaml.h>

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

/* ---- config_yaml.c: YAML text and positions -------------------------------------------------- */

/* The file name (source 0) or "--set[k]". */
const char *gb_config_source_name(const gb_config_marks *m, int source, char *buf, size_t n);
/* Formats "<source>:line:col: path: message" (no "path: " when plen is 0) into err; returns
 * GB_ECONFIG. */
int gb_config_vfail(gb_error *err, const gb_config_marks *marks, mark at, const char *path,
                    size_t plen, const char *fmt, va_list ap);
/* gb_config_vfail at a position of the text ld parses. */
__attribute__((format(printf, 5, 6))) int gb_config_fail_at(loader *ld, yaml_mark_t at,
                                                            const char *path, size_t pathlen,
                                                            const char *fmt, ...);
/* Parses ld->text into ld->doc (*empty: no document); a syntax error names the position. */
int gb_config_parse_document(loader *ld, int *empty);
/* The place of YAML position at in the text ld parses (an override's column counts from the
 * start of its "key=value"). */
mark gb_config_mark_of(const loader *ld, yaml_mark_t at);
/* Remembers where field f was set (for later messages). */
void gb_config_record(loader *ld, const gb_config_field *f, yaml_mark_t at);
/* Shows a node in a message: a quoted, cut scalar, "a mapping" or "a list". */
const char *gb_config_shown(const yaml_node_t *node, char *buf, size_t n);
int gb_config_is_plain(const yaml_node_t *n); /* an unquoted scalar */
int gb_config_scalar_is(const yaml_node_t *n, const char *word); /* a scalar spelled word */
int gb_config_is_null(const yaml_node_t *n); /* null, ~, or empty plain scalar */
/* Copies a scalar NUL-terminated; 0 when it does not fit or holds a NUL byte. */
int gb_config_scalar_text(const yaml_node_t *n, char *buf, size_t size);

/* ---- config_set.c: typed setting ------------------------------------------------------------- */

/* Parses node v into field f of ld->cfg, checking its type and range. Returns 0 or GB_ECONFIG. */
int gb_config_set_value(loader *ld, const gb_config_field *f, const yaml_node_t *v,
                        const char *path, size_t plen);
/* Zeroes cfg and sets every field with a default (the schema's YAML text). Returns 0 or
 * GB_ECONFIG (a bad default: the schema's mistake). */
int gb_config_set_defaults(gb_config *cfg, gb_config_marks *marks, gb_error *err);

#endif
