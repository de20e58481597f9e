/* runtime/config/config_schema_query.c: questions asked of the schema table
 * (config_schema.c): a key by its path, the closest key to a misspelt one, an enum value's
 * name, `gearbox check --explain` and the config reference's Markdown. */
#include "runtime/config/config_schema.h"

#include "runtime/config/config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The field whose path is path[0..len), or NULL (a linear scan of the table). */
const gb_config_field *gb_config_find_field(const char *path, size_t len)
{
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const char *p = gb_config_fields[i].path;
        if (strlen(p) == len && memcmp(p, path, len) == 0)
            return &gb_config_fields[i];
    }
    return NULL;
}

/* 1 when path[0..len) is a prefix of some field's path followed by '.'. */
int gb_config_is_section(const char *path, size_t len)
{
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const char *p = gb_config_fields[i].path;
        if (strlen(p) > len && memcmp(p, path, len) == 0 && p[len] == '.')
            return 1;
    }
    return 0;
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
const char *gb_config_closest_key(const char *prefix, size_t plen, const char *name, size_t nlen,
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

/* The name of value of the enum key key_path, or "?" (never NULL; static strings). */
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

/* One key's line of `gearbox check --explain`: path, type, default, range or choices, then the
 * meaning on its own line. */
static void explain_field(FILE *out, const gb_config_field *f)
{
    static const char *const kinds[] = {"int", "float", "bool", "string", "choice", "int list",
                                        "mapping", "list of choices"};
    fprintf(out, "%s  (%s", f->path, kinds[f->kind]);
    if (f->kind == GB_CK_FLOAT && f->nullable)
        fprintf(out, " or null");
    fprintf(out, "; default %s", f->def ? (f->def[0] ? f->def : "\"\"") : "none: required");
    if (f->kind == GB_CK_INT || f->kind == GB_CK_FLOAT || f->kind == GB_CK_INT_LIST) {
        fprintf(out, "; range [");
        fprintf(out, f->min == -INF ? "-inf" : f->min == BIG ? "2^53" : "%g", f->min);
        fprintf(out, ", ");
        fprintf(out, f->max == INF ? "inf" : f->max == BIG ? "2^53" : "%g", f->max);
        fprintf(out, "]");
    }
    if (f->choices) {
        fprintf(out, "; one of");
        for (const char *const *c = f->choices; *c; c++)
            fprintf(out, "%s%s", c == f->choices ? " " : " | ", *c);
    }
    fprintf(out, ")\n    %s\n", f->doc ? f->doc : "");
}

/* Writes the documentation of key, of a section's keys, or of every key to out. Returns 0 or
 * GB_ENOTFOUND. */
int gb_config_explain(FILE *out, const char *key)
{
    size_t len = key ? strlen(key) : 0;
    while (len > 0 && key[len - 1] == '.') /* "trainer." means the section */
        len--;
    int found = 0;
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const char *p = gb_config_fields[i].path;
        if (len == 0 || (strncmp(p, key, len) == 0 && (p[len] == '\0' || p[len] == '.'))) {
            explain_field(out, &gb_config_fields[i]);
            found = 1;
        }
    }
    return found ? 0 : GB_ENOTFOUND;
}

/* A table cell of x: '|' escaped, so a choice list or a doc line cannot split the row. */
static void md_cell(FILE *out, const char *x)
{
    for (; x && *x; x++) {
        if (*x == '|')
            fputc('\\', out);
        fputc(*x, out);
    }
}

/* A number of the schema as the reference writes it: inf, 2^53 or %g. */
static void md_number(FILE *out, double v)
{
    if (v == INF || v == -INF)
        fputs(v < 0 ? "-inf" : "inf", out);
    else if (v == BIG)
        fputs("2^53", out);
    else
        fprintf(out, "%g", v);
}

/* Writes the schema as a Markdown page, one table per top-level section in schema order: key,
 * type, default, range or choices, meaning (docs/config-reference.md is this output). Returns 0,
 * or GB_ESYS when out failed. */
int gb_config_markdown(FILE *out)
{
    static const char *const kinds[] = {"int", "float", "bool", "string", "choice", "int list",
                                        "mapping", "list of choices"};
    char section[64] = "";
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const gb_config_field *f = &gb_config_fields[i];
        size_t n = strcspn(f->path, ".");
        if (strlen(section) != n || strncmp(section, f->path, n) != 0) {
            snprintf(section, sizeof section, "%.*s", (int)n, f->path);
            fprintf(out, "\n## `%s`\n\n| key | type | default | range or choices | meaning |\n"
                         "|---|---|---|---|---|\n", section);
        }
        fprintf(out, "| `%s` | %s%s | ", f->path, kinds[f->kind],
                f->kind == GB_CK_FLOAT && f->nullable ? " or null" : "");
        if (!f->def)
            fputs("required", out);
        else if (!f->def[0])
            fputs("`\"\"`", out);
        else {
            fputs("`", out);
            md_cell(out, f->def);
            fputs("`", out);
        }
        fputs(" | ", out);
        if (f->kind == GB_CK_INT || f->kind == GB_CK_FLOAT || f->kind == GB_CK_INT_LIST) {
            fputs("[", out);
            md_number(out, f->min);
            fputs(", ", out);
            md_number(out, f->max);
            fputs("]", out);
        }
        for (const char *const *c = f->choices; c && *c; c++)
            fprintf(out, "%s`%s`", c == f->choices ? "" : ", ", *c);
        fputs(" | ", out);
        md_cell(out, f->doc);
        fputs(" |\n", out);
    }
    return ferror(out) ? GB_ESYS : 0;
}
