/* runtime/config/config_write.c: printing the resolved config as YAML (`gearbox check`, the run
 * directory's config.yaml) and comparing two configs field by field, both driven by the schema. */
#include "runtime/config/config.h"

#include "runtime/config/config_schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void write_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p < 32 || *p == 127)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* A double that reads back to the same bits: shortest %.*g that round-trips. */
static void write_double(FILE *out, double v)
{
    if (isnan(v)) {
        fputs("null", out);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? ".inf" : "-.inf", out);
        return;
    }
    char buf[40];
    if (v == floor(v) && fabs(v) < 1e15) {
        fprintf(out, "%.1f", v); /* 300.0, not 3e+02 */
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

static void write_value(FILE *out, const gb_config *cfg, const gb_config_field *f, int indent)
{
    const void *src = (const char *)cfg + f->offset;
    switch (f->kind) {
    case GB_CK_INT:
        fprintf(out, "%lld", (long long)*(const int64_t *)src);
        break;
    case GB_CK_FLOAT:
        write_double(out, *(const double *)src);
        break;
    case GB_CK_BOOL:
        fputs(*(const int *)src ? "true" : "false", out);
        break;
    case GB_CK_STRING:
        write_quoted(out, src);
        break;
    case GB_CK_ENUM:
        fputs(f->choices[*(const int *)src], out);
        break;
    case GB_CK_INT_LIST: {
        const gb_config_int_list *l = src;
        fputc('[', out);
        for (int i = 0; i < l->n; i++)
            fprintf(out, "%s%lld", i ? ", " : "", (long long)l->v[i]);
        fputc(']', out);
        break;
    }
    case GB_CK_ENUM_LIST: {
        const gb_config_int_list *l = src;
        fputc('[', out);
        for (int i = 0; i < l->n; i++)
            fprintf(out, "%s%s", i ? ", " : "", f->choices[l->v[i]]);
        fputc(']', out);
        break;
    }
    case GB_CK_ARGS: {
        const gb_config_args *a = src;
        if (a->n == 0) {
            fputs("{}", out);
            break;
        }
        for (int i = 0; i < a->n; i++) {
            fprintf(out, "\n%*s", indent + 2, "");
            write_quoted(out, a->kv[i].key);
            fputs(": ", out);
            write_quoted(out, a->kv[i].value);
        }
        break;
    }
    }
}

int gb_config_write(const gb_config *cfg, FILE *out)
{
    const char *prev = "";
    for (size_t i = 0; i < gb_config_nfields; i++) {
        const gb_config_field *f = &gb_config_fields[i];
        /* Open every section of f->path that the previous key did not share. */
        size_t common = 0;
        for (size_t j = 0; f->path[j] && f->path[j] == prev[j]; j++)
            if (f->path[j] == '.')
                common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++)
            depth += f->path[j] == '.';
        const char *seg = f->path + common;
        for (const char *dot; (dot = strchr(seg, '.')); seg = dot + 1, depth++)
            fprintf(out, "%*s%.*s:\n", 2 * depth, "", (int)(dot - seg), seg);
        fprintf(out, "%*s%s: ", 2 * depth, "", seg);
        write_value(out, cfg, f, 2 * depth);
        fputc('\n', out);
        prev = f->path;
    }
    return ferror(out) ? GB_EIO : 0;
}

static int field_equal(const gb_config *a, const gb_config *b, const gb_config_field *f)
{
    const void *x = (const char *)a + f->offset, *y = (const char *)b + f->offset;
    switch (f->kind) {
    case GB_CK_INT:
        return *(const int64_t *)x == *(const int64_t *)y;
    case GB_CK_FLOAT: {
        double u = *(const double *)x, v = *(const double *)y;
        return (isnan(u) && isnan(v)) || memcmp(&u, &v, sizeof u) == 0;
    }
    case GB_CK_BOOL:
    case GB_CK_ENUM:
        return *(const int *)x == *(const int *)y;
    case GB_CK_STRING:
        return strcmp(x, y) == 0;
    case GB_CK_INT_LIST:
    case GB_CK_ENUM_LIST: {
        const gb_config_int_list *l = x, *m = y;
        return l->n == m->n && memcmp(l->v, m->v, (size_t)l->n * sizeof l->v[0]) == 0;
    }
    case GB_CK_ARGS: {
        const gb_config_args *p = x, *q = y;
        if (p->n != q->n)
            return 0;
        for (int i = 0; i < p->n; i++)
            if (strcmp(p->kv[i].key, q->kv[i].key) || strcmp(p->kv[i].value, q->kv[i].value))
                return 0;
        return 1;
    }
    }
    return 0;
}

int gb_config_equal(const gb_config *a, const gb_config *b, const char **diff_key)
{
    for (size_t i = 0; i < gb_config_nfields; i++) {
        if (!field_equal(a, b, &gb_config_fields[i])) {
            if (diff_key)
                *diff_key = gb_config_fields[i].path;
            return 0;
        }
    }
    return 1;
}
