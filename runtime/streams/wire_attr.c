/* runtime/streams/wire_attr.c: a wire header's typed attributes ("a" in wire.h): setting them with
 * their limits checked, and typed reads; their encoding and bounds-checked decoding are in wire.c.
 * */
#include "runtime/streams/wire.h"

#include <stdio.h>
#include <string.h>

const gb_wire_attr *gb_wire_attr_find(const gb_wire_header *h, const char *key)
{
    for (int k = 0; k < h->nattrs; k++)
        if (strcmp(h->attrs[k].key, key) == 0)
            return &h->attrs[k];
    return NULL;
}

/* Reserves a new attribute with room for nwords strings; NULL (err filled) when it cannot. */
static gb_wire_attr *attr_add(gb_wire_header *h, const char *key, int kind, int nwords,
                              gb_error *err)
{
    size_t kl = strlen(key);
    if (kl == 0 || kl >= GB_WIRE_ATTR_KEY_MAX) {
        gb_error_set(err, GB_EINVAL, "wire attribute '%s': key length must be 1..%d", key,
                     GB_WIRE_ATTR_KEY_MAX - 1);
        return NULL;
    }
    if (gb_wire_attr_find(h, key)) {
        gb_error_set(err, GB_EINVAL, "wire attribute '%s': set twice", key);
        return NULL;
    }
    if (h->nattrs >= GB_WIRE_ATTRS_MAX || nwords < 0 ||
        nwords > GB_WIRE_WORDS_MAX - h->nwords) {
        gb_error_set(err, GB_EINVAL, "wire attribute '%s': more than %d attributes or %d strings "
                     "in a message", key, GB_WIRE_ATTRS_MAX, GB_WIRE_WORDS_MAX);
        return NULL;
    }
    gb_wire_attr *a = &h->attrs[h->nattrs];
    memset(a, 0, sizeof *a);
    memcpy(a->key, key, kl);
    a->kind = kind;
    a->first = h->nwords;
    a->n = nwords;
    return a;
}

int gb_wire_attr_set_int(gb_wire_header *h, const char *key, int64_t v, gb_error *err)
{
    gb_wire_attr *a = attr_add(h, key, GB_WIRE_ATTR_INT, 0, err);
    if (!a)
        return GB_EINVAL;
    a->i = v;
    h->nattrs++;
    return 0;
}

int gb_wire_attr_set_strs(gb_wire_header *h, const char *key, const char *const *v, int n,
                          gb_error *err)
{
    gb_wire_attr *a = attr_add(h, key, GB_WIRE_ATTR_STRS, n, err);
    if (!a)
        return GB_EINVAL;
    for (int i = 0; i < n; i++)
        if (strlen(v[i]) >= GB_WIRE_WORD_MAX)
            return gb_error_set(err, GB_EINVAL, "wire attribute '%s': string '%s' longer than "
                                "%d bytes", key, v[i], GB_WIRE_WORD_MAX - 1);
    for (int i = 0; i < n; i++)
        snprintf(h->words[a->first + i], GB_WIRE_WORD_MAX, "%s", v[i]);
    h->nwords += n;
    h->nattrs++;
    return 0;
}

int gb_wire_attr_set_str(gb_wire_header *h, const char *key, const char *v, gb_error *err)
{
    int rc = gb_wire_attr_set_strs(h, key, &v, 1, err);
    if (rc == 0)
        h->attrs[h->nattrs - 1].kind = GB_WIRE_ATTR_STR;
    return rc;
}

int gb_wire_attr_int(const gb_wire_header *h, const char *key, int64_t *v, gb_error *err)
{
    const gb_wire_attr *a = gb_wire_attr_find(h, key);
    if (!a)
        return gb_error_set(err, GB_ENOTFOUND, "wire attribute '%s': missing", key);
    if (a->kind != GB_WIRE_ATTR_INT)
        return gb_error_set(err, GB_EPROTO, "wire attribute '%s': not an integer", key);
    *v = a->i;
    return 0;
}

const char *gb_wire_attr_str(const gb_wire_header *h, const char *key)
{
    const gb_wire_attr *a = gb_wire_attr_find(h, key);
    return a && a->kind == GB_WIRE_ATTR_STR ? h->words[a->first] : NULL;
}

int gb_wire_attr_strs(const gb_wire_header *h, const char *key, const char **out, int cap)
{
    const gb_wire_attr *a = gb_wire_attr_find(h, key);
    if (!a || a->kind == GB_WIRE_ATTR_INT)
        return -1;
    for (int i = 0; i < a->n && i < cap; i++)
        out[i] = h->words[a->first + i];
    return a->n;
}
