/* runtime/config/config_schema.h: the declarative config schema (private to runtime/config*.c).
 * defines: gb_config_kind, gb_config_field, gb_config_fields, gb_config_nfields,
 *          gb_config_find_field, gb_config_is_section, gb_config_closest_key */
#ifndef GB_RUNTIME_CONFIG_SCHEMA_H
#define GB_RUNTIME_CONFIG_SCHEMA_H

#include <stddef.h>

#define BIG 9.007199254740992e15 /* 2^53: integers stay exact as doubles (the largest bound) */
#define INF __builtin_inf()

typedef enum gb_config_kind {
    GB_CK_INT,      /* int64_t */
    GB_CK_FLOAT,    /* double; `nullable` allows null -> NAN */
    GB_CK_BOOL,     /* int 0/1 */
    GB_CK_STRING,   /* char[size] */
    GB_CK_ENUM,     /* int index into choices */
    GB_CK_INT_LIST, /* gb_config_int_list, elements in [min, max] */
    GB_CK_ARGS,     /* gb_config_args: free mapping of scalars */
    GB_CK_ENUM_LIST, /* gb_config_int_list of indices into choices, each name at most once */
} gb_config_kind;

typedef struct gb_config_field {
    const char *path;            /* "trainer.replay.capacity" */
    gb_config_kind kind;
    size_t offset;               /* offsetof(gb_config, ...) */
    size_t size;                 /* GB_CK_STRING: buffer size */
    const char *def;             /* default, as YAML text; NULL = required key */
    double min, max;             /* inclusive range for numbers and list elements */
    const char *const *choices;  /* GB_CK_ENUM, GB_CK_ENUM_LIST: NULL-terminated names */
    int nullable;                /* GB_CK_FLOAT: null allowed (stored as NAN) */
    const char *doc;             /* one line, shown by `gearbox check --explain` */
} gb_config_field;

extern const gb_config_field gb_config_fields[];
extern const size_t gb_config_nfields;

/* The field whose path is path[0..len), or NULL. */
const gb_config_field *gb_config_find_field(const char *path, size_t len);

/* 1 when path[0..len) names a section (a prefix of some field path followed by '.'). */
int gb_config_is_section(const char *path, size_t len);

/* The closest known key under section prefix[0..plen) to name[0..nlen), written to buf, for an
 * unknown-key hint; NULL when none is close (edit distance 3 or more). */
const char *gb_config_closest_key(const char *prefix, size_t plen, const char *name,
                                  size_t nlen, char *buf, size_t n);

#endif
