/* runtime/config/config_yaml.c: the config's YAML text with its positions: a document parsed by
 * libyaml, nodes shown in messages, and errors placed at "<source>:line:col: key.path". The other
 * config files call it; it calls none of them. */
#include "runtime/config/config.h"
#include "runtime/config/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

/* The file name (source 0) or "--set[k]" written into buf. */
const char *gb_config_source_name(const gb_config_marks *m, int source, char *buf, size_t n)
{
    if (source == 0)
        return m->file;
    snprintf(buf, n, "--set[%d]", source);
    return buf;
}

/* Formats "<source>:line:col: path: message" (without "path: " when plen is 0) into err, at
 * mark at of marks' sources; returns GB_ECONFIG. The one shape of every config message. */
int gb_config_vfail(gb_error *err, const gb_config_marks *marks, mark at, const char *path,
                    size_t plen, const char *fmt, va_list ap)
{
    char src[32], msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *name = gb_config_source_name(marks, at.source, src, sizeof src);
    if (path && plen)
        return gb_error_set(err, GB_ECONFIG, "%s:%d:%d: %.*s: %s", name, at.line, at.col,
                            (int)plen, path, msg);
    return gb_error_set(err, GB_ECONFIG, "%s:%d:%d: %s", name, at.line, at.col, msg);
}

/* The mark of YAML position at in the text being parsed (an override's column counts from the
 * start of its "key=value"). */
mark gb_config_mark_of(const loader *ld, yaml_mark_t at)
{
    return (mark){(int)at.line + 1, (int)at.column + 1 + (ld->source ? ld->col_offset : 0),
                  ld->source};
}

/* gb_config_vfail at YAML position at of the text ld parses; returns GB_ECONFIG. */
__attribute__((format(printf, 5, 6))) int gb_config_fail_at(loader *ld, yaml_mark_t at,
                                                            const char *path, size_t pathlen,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = gb_config_vfail(ld->err, ld->marks, gb_config_mark_of(ld, at), path, pathlen, fmt,
                             ap);
    va_end(ap);
    return rc;
}

/* Remembers where field f was set (source, line, column), for the checks' messages. */
void gb_config_record(loader *ld, const gb_config_field *f, yaml_mark_t at)
{
    ld->marks->field[f - gb_config_fields] = gb_config_mark_of(ld, at);
}

/* 1 for an unquoted scalar (a quoted "true" is a string, not a boolean). */
int gb_config_is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* 1 for a scalar spelled exactly word. */
int gb_config_scalar_is(const yaml_node_t *n, const char *word)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(word) &&
           memcmp(n->data.scalar.value, word, n->data.scalar.length) == 0;
}

/* Shows a scalar in a message: quoted, cut at 40 characters, non-printables escaped. */
const char *gb_config_shown(const yaml_node_t *node, char *buf, size_t n)
{
    if (node->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (node->type == YAML_SEQUENCE_NODE)
        return "a list";
    const unsigned char *s = node->data.scalar.value;
    size_t len = node->data.scalar.length, o = 0;
    if (!gb_config_is_plain(node))
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

/* 1 for YAML's null: an empty plain scalar, ~, null, Null or NULL. */
int gb_config_is_null(const yaml_node_t *n)
{
    return gb_config_is_plain(n) &&
           (n->data.scalar.length == 0 || gb_config_scalar_is(n, "null") ||
            gb_config_scalar_is(n, "~") || gb_config_scalar_is(n, "Null") ||
            gb_config_scalar_is(n, "NULL"));
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

/* The deepest nesting a config may have: its own is 4 levels; libyaml takes 23 s to load
 * 100,000 nested lists, the events below stop at this depth at once. */
#define MAX_DEPTH 64

/* Refuses text nested deeper than MAX_DEPTH, from libyaml's events (no document built); a
 * syntax error is left for the load to report. Returns 0 or GB_ECONFIG at the deep node. */
static int check_depth(loader *ld)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return gb_error_set(ld->err, GB_ENOMEM, "libyaml: cannot initialise the parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text, ld->len);
    int depth = 0, rc = 0, done = 0;
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH)
                rc = gb_config_fail_at(ld, ev.start_mark, NULL, 0, "nested deeper than %d "
                                       "levels", MAX_DEPTH);
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Parses ld->text into ld->doc; on a syntax error fills err with the position. */
int gb_config_parse_document(loader *ld, int *empty)
{
    int deep = check_depth(ld);
    if (deep)
        return deep;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return gb_error_set(ld->err, GB_ENOMEM, "libyaml: cannot initialise the parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text, ld->len);
    int ok = yaml_parser_load(&parser, &ld->doc);
    int rc = 0;
    if (!ok) {
        char src[32];
        const char *name = gb_config_source_name(ld->marks, ld->source, src, sizeof src);
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
