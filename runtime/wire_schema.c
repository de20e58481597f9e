/* runtime/wire_schema.c: the one validator of wire message tables, their writer and their
 * markdown (see wire_schema.h). */
#include "runtime/wire_schema.h"

#include "runtime/dtype.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

static const char *kind_name(int kind)
{
    switch (kind) {
    case GB_WIRE_ATTR_INT: return "int64";
    case GB_WIRE_ATTR_STR: return "str";
    case GB_WIRE_ATTR_STRS: return "array of str";
    default: return "invalid";
    }
}

/* Fails a read: "wire message (KIND from ROLE INDEX): WHAT". */
static int read_fail(const gb_wire_schema *s, const gb_wire_header *h, gb_error *err,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int read_fail(const gb_wire_schema *s, const gb_wire_header *h, gb_error *err,
                     const char *fmt, ...)
{
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gb_error_set(err, GB_EPROTO, "wire message (%s from %s %d): %s", s->name,
                        gb_role_name(h->role), h->index, what);
}

static const gb_wire_attr_spec *find_spec(const gb_wire_schema *s, const char *name)
{
    for (int k = 0; k < s->nattrs; k++)
        if (strcmp(s->attrs[k].name, name) == 0)
            return &s->attrs[k];
    return NULL;
}

/* One attribute of h against its spec; fills its member of out (when out is set). */
static int read_attr(const gb_wire_schema *s, const gb_wire_header *h, const gb_wire_attr *a,
                     const gb_wire_attr_spec *f, void *out, gb_error *err)
{
    if (a->kind != f->kind)
        return read_fail(s, h, err, "attribute '%s': %s, expected %s", f->name,
                         kind_name(a->kind), kind_name(f->kind));
    char *m = out ? (char *)out + f->offset : NULL;
    if (f->kind == GB_WIRE_ATTR_INT) {
        if (a->i < f->min || a->i > f->max)
            return read_fail(s, h, err, "attribute '%s': %" PRId64 " not in %" PRId64
                             "..%" PRId64, f->name, a->i, f->min, f->max);
        if (m)
            memcpy(m, &a->i, sizeof a->i);
    } else if (f->kind == GB_WIRE_ATTR_STR) {
        const char *p = h->words[a->first];
        if (m)
            memcpy(m, &p, sizeof p);
    } else {
        if (a->n < f->min || a->n > f->max)
            return read_fail(s, h, err, "attribute '%s': %d strings, expected %" PRId64
                             "..%" PRId64, f->name, a->n, f->min, f->max);
        if (m) {
            gb_wire_strs *l = (gb_wire_strs *)(void *)m;
            l->n = a->n;
            for (int i = 0; i < a->n; i++)
                l->v[i] = h->words[a->first + i];
        }
    }
    return 0;
}

/* An absent attribute: its default, or an error when it is required. */
static int read_absent(const gb_wire_schema *s, const gb_wire_header *h,
                       const gb_wire_attr_spec *f, void *out, gb_error *err)
{
    if (f->required)
        return read_fail(s, h, err, "attribute '%s': missing", f->name);
    if (!out)
        return 0;
    char *m = (char *)out + f->offset;
    if (f->kind == GB_WIRE_ATTR_INT)
        memcpy(m, &f->def, sizeof f->def);
    else if (f->kind == GB_WIRE_ATTR_STR)
        memset(m, 0, sizeof(const char *));
    else
        ((gb_wire_strs *)(void *)m)->n = 0;
    return 0;
}

static int read_tensors(const gb_wire_schema *s, const gb_wire_header *h, gb_error *err)
{
    for (int t = 0; t < h->ntensors; t++) {
        const gb_tensor_desc *d = &h->tensors[t];
        const gb_wire_tensor_spec *f = NULL;
        for (int k = 0; k < s->ntensors && !f; k++)
            if (strcmp(s->tensors[k].name, d->name) == 0)
                f = &s->tensors[k];
        if (!f) {
            if (s->open_tensors)
                continue;
            return read_fail(s, h, err, "tensor '%s': not part of the message", d->name);
        }
        for (int u = 0; u < t; u++)
            if (strcmp(h->tensors[u].name, d->name) == 0)
                return read_fail(s, h, err, "tensor '%s': given twice", d->name);
        if ((f->dtype >= 0 && (int)d->dtype != f->dtype) || (f->rank >= 0 && d->rank != f->rank))
            return read_fail(s, h, err, "tensor '%s': %s of rank %d, expected %s of rank %d",
                             d->name, gb_dtype_name(d->dtype), d->rank,
                             f->dtype >= 0 ? gb_dtype_name((gb_dtype)f->dtype) : "any dtype",
                             f->rank);
    }
    for (int k = 0; k < s->ntensors; k++) {
        if (!s->tensors[k].required)
            continue;
        int t = 0;
        while (t < h->ntensors && strcmp(h->tensors[t].name, s->tensors[k].name) != 0)
            t++;
        if (t == h->ntensors)
            return read_fail(s, h, err, "tensor '%s': missing", s->tensors[k].name);
    }
    return 0;
}

int gb_wire_schema_read(const gb_wire_schema *s, const gb_wire_header *h, void *out,
                        gb_error *err)
{
    if (h->type != s->type)
        return read_fail(s, h, err, "got a message of type %s", gb_msg_type_name(h->type));
    for (int k = 0; k < h->nattrs; k++)
        if (!find_spec(s, h->attrs[k].key))
            return read_fail(s, h, err, "attribute '%s': not part of the message",
                             h->attrs[k].key);
    for (int k = 0; k < s->nattrs; k++) {
        const gb_wire_attr_spec *f = &s->attrs[k];
        const gb_wire_attr *a = gb_wire_attr_find(h, f->name);
        int rc = a ? read_attr(s, h, a, f, out, err) : read_absent(s, h, f, out, err);
        if (rc)
            return rc;
    }
    return read_tensors(s, h, err);
}

static int write_attr(const gb_wire_attr_spec *f, const char *m, gb_wire_header *h, gb_error *err)
{
    if (f->kind == GB_WIRE_ATTR_INT) {
        int64_t v;
        memcpy(&v, m, sizeof v);
        if (!f->required && v == f->def)
            return 0;
        if (v < f->min || v > f->max)
            return gb_error_set(err, GB_EINVAL, "wire attribute '%s': %" PRId64 " not in %" PRId64
                                "..%" PRId64, f->name, v, f->min, f->max);
        return gb_wire_attr_set_int(h, f->name, v, err);
    }
    if (f->kind == GB_WIRE_ATTR_STR) {
        const char *p;
        memcpy(&p, m, sizeof p);
        if (!p && f->required)
            return gb_error_set(err, GB_EINVAL, "wire attribute '%s': missing", f->name);
        return p ? gb_wire_attr_set_str(h, f->name, p, err) : 0;
    }
    const gb_wire_strs *l = (const gb_wire_strs *)(const void *)m;
    if (!f->required && l->n == 0)
        return 0;
    if (l->n < f->min || l->n > f->max)
        return gb_error_set(err, GB_EINVAL, "wire attribute '%s': %d strings, expected %" PRId64
                            "..%" PRId64, f->name, l->n, f->min, f->max);
    return gb_wire_attr_set_strs(h, f->name, l->v, l->n, err);
}

int gb_wire_schema_write(const gb_wire_schema *s, const void *in, gb_wire_header *h,
                         gb_error *err)
{
    if (h->type != s->type)
        return gb_error_set(err, GB_EINVAL, "wire message %s: header of type %s", s->name,
                            gb_msg_type_name(h->type));
    for (int k = 0; k < s->nattrs; k++) {
        int rc = write_attr(&s->attrs[k], (const char *)in + s->attrs[k].offset, h, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- markdown ------------------------------------------------------------------------------- */

static void md_range(const gb_wire_attr_spec *f, char *buf, size_t cap)
{
    if (f->kind == GB_WIRE_ATTR_STR)
        snprintf(buf, cap, "at most %d bytes", GB_WIRE_WORD_MAX - 1);
    else if (f->kind == GB_WIRE_ATTR_STRS)
        snprintf(buf, cap, "%" PRId64 "..%" PRId64 " strings", f->min, f->max);
    else if (f->min == INT64_MIN && f->max == INT64_MAX)
        snprintf(buf, cap, "any");
    else if (f->max == INT64_MAX)
        snprintf(buf, cap, ">= %" PRId64, f->min);
    else
        snprintf(buf, cap, "%" PRId64 "..%" PRId64, f->min, f->max);
}

static void md_presence(const gb_wire_attr_spec *f, char *buf, size_t cap)
{
    if (f->required)
        snprintf(buf, cap, "required");
    else if (f->kind == GB_WIRE_ATTR_INT)
        snprintf(buf, cap, "optional (absent: %" PRId64 ")", f->def);
    else
        snprintf(buf, cap, "optional");
}

static void md_attrs(const gb_wire_schema *s, FILE *f)
{
    if (s->nattrs == 0) {
        fprintf(f, "Attributes: none.\n\n");
        return;
    }
    fprintf(f, "| attribute | type | presence | range | meaning |\n");
    fprintf(f, "| --- | --- | --- | --- | --- |\n");
    for (int k = 0; k < s->nattrs; k++) {
        char range[64], presence[64];
        md_range(&s->attrs[k], range, sizeof range);
        md_presence(&s->attrs[k], presence, sizeof presence);
        fprintf(f, "| `%s` | %s | %s | %s | %s |\n", s->attrs[k].name,
                kind_name(s->attrs[k].kind), presence, range,
                s->attrs[k].doc ? s->attrs[k].doc : "");
    }
    fprintf(f, "\n");
}

static void md_tensors(const gb_wire_schema *s, FILE *f)
{
    if (s->ntensors == 0) {
        fprintf(f, s->open_tensors ? "Tensors: any.\n\n" : "Tensors: none.\n\n");
        return;
    }
    fprintf(f, "| tensor | dtype | rank | presence | meaning |\n");
    fprintf(f, "| --- | --- | --- | --- | --- |\n");
    for (int k = 0; k < s->ntensors; k++) {
        const gb_wire_tensor_spec *t = &s->tensors[k];
        char rank[16];
        snprintf(rank, sizeof rank, t->rank >= 0 ? "%d" : "any", t->rank);
        fprintf(f, "| `%s` | %s | %s | %s | %s |\n", t->name,
                t->dtype >= 0 ? gb_dtype_name((gb_dtype)t->dtype) : "any", rank,
                t->required ? "required" : "optional", t->doc ? t->doc : "");
    }
    if (s->open_tensors)
        fprintf(f, "\nOther tensors are allowed.\n");
    fprintf(f, "\n");
}

/* Prints text as lines of at most 100 columns, broken at spaces. */
static void md_wrap(const char *text, FILE *f)
{
    const char *p = text;
    while (*p) {
        size_t n = strlen(p), cut = n;
        if (n > 100) {
            cut = 100;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = strcspn(p, " ");
        }
        fprintf(f, "%.*s\n", (int)cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

int gb_wire_schema_markdown(const gb_wire_schema *s, FILE *f)
{
    char head[512];
    snprintf(head, sizeof head, "Type %d (`%s`). %s", s->type, gb_msg_type_name(s->type),
             s->doc ? s->doc : "");
    fprintf(f, "### %s\n\n", s->name);
    md_wrap(head, f);
    fprintf(f, "\n");
    md_attrs(s, f);
    md_tensors(s, f);
    return ferror(f) ? GB_ESYS : 0;
}
