/* runtime/streams/wire_decode.c: the bounds-checked header reader (see wire.h: why not msgpack-c's
 * unpacker): every count checked against the bytes left, nothing allocated. */
#include "runtime/streams/wire.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct rd {
    const unsigned char *p, *end;
    gb_error *err;
} rd;

static int rd_fail(rd *r, const char *field, const char *what)
{
    return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': %s", field, what);
}

static int rd_be(rd *r, const char *field, int n, uint64_t *v)
{
    if (r->end - r->p < n)
        return rd_fail(r, field, "truncated");
    uint64_t x = 0;
    for (int i = 0; i < n; i++)
        x = (x << 8) | r->p[i];
    r->p += n;
    *v = x;
    return 0;
}

/* Any msgpack integer; *neg says whether it is negative (then *v holds it as int64 bits). */
static int rd_integer(rd *r, const char *field, uint64_t *v, bool *neg)
{
    if (r->p >= r->end)
        return rd_fail(r, field, "truncated");
    unsigned char c = *r->p++;
    *neg = false;
    if (c <= 0x7f) {
        *v = c;
        return 0;
    }
    if (c >= 0xe0) {
        *v = (uint64_t)(int64_t)(int8_t)c;
        *neg = true;
        return 0;
    }
    uint64_t x = 0;
    int rc;
    switch (c) {
    case 0xcc: return rd_be(r, field, 1, v);
    case 0xcd: return rd_be(r, field, 2, v);
    case 0xce: return rd_be(r, field, 4, v);
    case 0xcf: return rd_be(r, field, 8, v);
    case 0xd0:
        if ((rc = rd_be(r, field, 1, &x)))
            return rc;
        *v = (uint64_t)(int64_t)(int8_t)x;
        break;
    case 0xd1:
        if ((rc = rd_be(r, field, 2, &x)))
            return rc;
        *v = (uint64_t)(int64_t)(int16_t)x;
        break;
    case 0xd2:
        if ((rc = rd_be(r, field, 4, &x)))
            return rc;
        *v = (uint64_t)(int64_t)(int32_t)x;
        break;
    case 0xd3:
        if ((rc = rd_be(r, field, 8, &x)))
            return rc;
        *v = x;
        break;
    default: return rd_fail(r, field, "expected an integer");
    }
    *neg = (int64_t)*v < 0;
    return 0;
}

static int rd_uint(rd *r, const char *field, uint64_t max, uint64_t *v)
{
    bool neg;
    int rc = rd_integer(r, field, v, &neg);
    if (rc)
        return rc;
    if (neg)
        return rd_fail(r, field, "negative");
    if (*v > max)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': %llu exceeds %llu", field,
                            (unsigned long long)*v, (unsigned long long)max);
    return 0;
}

static int rd_int(rd *r, const char *field, int64_t min, int64_t max, int64_t *v)
{
    uint64_t u;
    bool neg;
    int rc = rd_integer(r, field, &u, &neg);
    if (rc)
        return rc;
    if (!neg && u > (uint64_t)INT64_MAX)
        return rd_fail(r, field, "out of range");
    int64_t x = (int64_t)u;
    if (x < min || x > max)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': %lld not in %lld..%lld",
                            field, (long long)x, (long long)min, (long long)max);
    *v = x;
    return 0;
}

/* Reads a container or string length; n is then checked against the bytes left, since every
 * element takes at least one byte. */
static int rd_len(rd *r, const char *field, unsigned fix_lo, unsigned fix_hi, unsigned c8,
                  unsigned c16, unsigned c32, const char *what, uint32_t *n)
{
    if (r->p >= r->end)
        return rd_fail(r, field, "truncated");
    unsigned char c = *r->p++;
    uint64_t x = 0;
    int rc = 0;
    if (c >= fix_lo && c <= fix_hi)
        x = c - fix_lo;
    else if (c8 && c == c8)
        rc = rd_be(r, field, 1, &x);
    else if (c == c16)
        rc = rd_be(r, field, 2, &x);
    else if (c == c32)
        rc = rd_be(r, field, 4, &x);
    else
        return rd_fail(r, field, what);
    if (rc)
        return rc;
    if (x > (uint64_t)(r->end - r->p))
        return rd_fail(r, field, "declared length exceeds the header");
    *n = (uint32_t)x;
    return 0;
}

static int rd_array(rd *r, const char *field, uint32_t max, uint32_t *n)
{
    int rc = rd_len(r, field, 0x90, 0x9f, 0, 0xdc, 0xdd, "expected an array", n);
    if (rc == 0 && *n > max)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': %u elements, at most %u",
                            field, *n, max);
    return rc;
}

/* A string of at most cap-1 bytes without NULs, copied NUL-terminated into out. */
static int rd_str(rd *r, const char *field, char *out, size_t cap)
{
    uint32_t n = 0;
    int rc = rd_len(r, field, 0xa0, 0xbf, 0xd9, 0xda, 0xdb, "expected a string", &n);
    if (rc)
        return rc;
    if (n >= cap)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': %u bytes, at most %zu",
                            field, n, cap - 1);
    if (memchr(r->p, '\0', n))
        return rd_fail(r, field, "contains a NUL byte");
    memcpy(out, r->p, n);
    out[n] = '\0';
    r->p += n;
    return 0;
}

static int rd_tensor(rd *r, gb_tensor_desc *d, int t)
{
    char field[48];
    uint32_t n;
    uint64_t v;
    int rc;
    snprintf(field, sizeof field, "T[%d]", t);
    if ((rc = rd_array(r, field, 3, &n)))
        return rc;
    if (n != 3)
        return rd_fail(r, field, "expected [name, dtype, shape]");
    snprintf(field, sizeof field, "T[%d].name", t);
    if ((rc = rd_str(r, field, d->name, sizeof d->name)))
        return rc;
    if (d->name[0] == '\0')
        return rd_fail(r, field, "empty");
    snprintf(field, sizeof field, "T[%d].dtype", t);
    if ((rc = rd_uint(r, field, GB_DTYPE_COUNT - 1, &v)))
        return rc;
    d->dtype = (gb_dtype)v;
    snprintf(field, sizeof field, "T[%d].shape", t);
    if ((rc = rd_array(r, field, GB_WIRE_MAX_RANK, &n)))
        return rc;
    d->rank = (int)n;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = rd_uint(r, field, (uint64_t)INT64_MAX, &v)))
            return rc;
        d->shape[i] = (int64_t)v;
    }
    uint64_t bytes;
    if ((rc = gb_tensor_desc_bytes(d, &bytes, r->err)))
        return rc;
    return 0;
}

/* One attribute string, stored in h's words table. */
static int rd_word(rd *r, gb_wire_header *h, const char *field)
{
    if (h->nwords >= GB_WIRE_WORDS_MAX)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': more than %d strings in "
                            "the attributes", field, GB_WIRE_WORDS_MAX);
    int rc = rd_str(r, field, h->words[h->nwords], GB_WIRE_WORD_MAX);
    if (rc == 0)
        h->nwords++;
    return rc;
}

/* "a": a map of key -> int64 | str | array of str. */
static int rd_attrs(rd *r, gb_wire_header *h)
{
    uint32_t n;
    int rc = rd_len(r, "a", 0x80, 0x8f, 0, 0xde, 0xdf, "expected a map", &n);
    if (rc)
        return rc;
    if (n > GB_WIRE_ATTRS_MAX)
        return gb_error_set(r->err, GB_EPROTO, "wire header field 'a': %u attributes, at most %d",
                            n, GB_WIRE_ATTRS_MAX);
    for (uint32_t k = 0; k < n; k++) {
        gb_wire_attr *a = &h->attrs[k];
        memset(a, 0, sizeof *a);
        if ((rc = rd_str(r, "a (key)", a->key, sizeof a->key)))
            return rc;
        char field[8 + GB_WIRE_ATTR_KEY_MAX];
        snprintf(field, sizeof field, "a.%s", a->key);
        if (a->key[0] == '\0')
            return rd_fail(r, field, "empty key");
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(h->attrs[j].key, a->key) == 0)
                return rd_fail(r, field, "given twice");
        if (r->p >= r->end)
            return rd_fail(r, field, "truncated");
        unsigned char c = *r->p;
        a->first = h->nwords;
        if ((c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb)) {
            a->kind = GB_WIRE_ATTR_STR;
            a->n = 1;
            rc = rd_word(r, h, field);
        } else if ((c >= 0x90 && c <= 0x9f) || c == 0xdc || c == 0xdd) {
            uint32_t m;
            a->kind = GB_WIRE_ATTR_STRS;
            if ((rc = rd_array(r, field, GB_WIRE_WORDS_MAX, &m)))
                return rc;
            a->n = (int)m;
            for (uint32_t i = 0; i < m && !rc; i++)
                rc = rd_word(r, h, field);
        } else {
            a->kind = GB_WIRE_ATTR_INT;
            rc = rd_int(r, field, INT64_MIN, INT64_MAX, &a->i);
        }
        if (rc)
            return rc;
        h->nattrs = (int)k + 1;
    }
    return 0;
}

enum {
    K_V = 1 << 0, K_T = 1 << 1, K_R = 1 << 2, K_I = 1 << 3, K_S = 1 << 4, K_P = 1 << 5,
    K_ST = 1 << 6, K_X = 1 << 7, K_TT = 1 << 8, K_A = 1 << 9,
    K_REQUIRED = K_V | K_T | K_R | K_I | K_S | K_P | K_TT,
};

static int rd_field(rd *r, gb_wire_header *h, const char *key, unsigned *seen)
{
    static const struct {
        const char *key;
        unsigned bit;
    } keys[] = {{"v", K_V}, {"t", K_T},   {"r", K_R}, {"i", K_I}, {"s", K_S},
                {"p", K_P}, {"st", K_ST}, {"x", K_X}, {"T", K_TT}, {"a", K_A}};
    unsigned bit = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (strcmp(key, keys[k].key) == 0)
            bit = keys[k].bit;
    if (!bit)
        return gb_error_set(r->err, GB_EPROTO, "wire header: unknown field '%s'", key);
    if (*seen & bit)
        return gb_error_set(r->err, GB_EPROTO, "wire header field '%s': given twice", key);
    *seen |= bit;
    uint64_t u;
    int64_t s;
    uint32_t n;
    int rc = 0;
    switch (bit) {
    case K_V:
        if (!(rc = rd_uint(r, "v", UINT32_MAX, &u)))
            h->protocol = (int)u;
        if (!rc && h->protocol != GB_WIRE_PROTOCOL)
            return gb_error_set(r->err, GB_EPROTO,
                                "wire header field 'v': protocol version %d, expected %d",
                                h->protocol, GB_WIRE_PROTOCOL);
        break;
    case K_T:
        if (!(rc = rd_uint(r, "t", UINT32_MAX, &u)))
            h->type = (int)u;
        if (!rc && (u == 0 || u >= GB_MSG_TYPE_END))
            return gb_error_set(r->err, GB_EPROTO, "wire header field 't': unknown type %llu",
                                (unsigned long long)u);
        break;
    case K_R:
        if (!(rc = rd_uint(r, "r", GB_ROLE_END - 1, &u)))
            h->role = (int)u;
        break;
    case K_I:
        if (!(rc = rd_uint(r, "i", INT32_MAX, &u)))
            h->index = (int)u;
        break;
    case K_S:
        if (!(rc = rd_uint(r, "s", UINT64_MAX, &u)))
            h->seq = u;
        break;
    case K_P:
        if (!(rc = rd_int(r, "p", -1, INT64_MAX, &s)))
            h->policy_version = s;
        break;
    case K_ST:
        if (!(rc = rd_int(r, "st", -1000, 1000, &s)))
            h->status = (int)s;
        break;
    case K_X: rc = rd_str(r, "x", h->text, sizeof h->text); break;
    case K_A: rc = rd_attrs(r, h); break;
    case K_TT:
        if ((rc = rd_array(r, "T", GB_WIRE_MAX_TENSORS, &n)))
            break;
        h->ntensors = (int)n;
        for (uint32_t t = 0; t < n && !rc; t++)
            rc = rd_tensor(r, &h->tensors[t], (int)t);
        break;
    }
    return rc;
}

int gb_wire_decode_header(const void *buf, size_t len, gb_wire_header *h, gb_error *err)
{
    memset(h, 0, offsetof(gb_wire_header, tensors));
    h->policy_version = -1;
    if (len > GB_WIRE_HEADER_MAX)
        return gb_error_set(err, GB_EPROTO, "wire header: %zu bytes, at most %d", len,
                            GB_WIRE_HEADER_MAX);
    rd r = {buf, (const unsigned char *)buf + len, err};
    unsigned seen = 0;
    uint32_t n;
    int rc = rd_len(&r, "(map)", 0x80, 0x8f, 0, 0xde, 0xdf, "expected a map", &n);
    if (rc)
        goto fail;
    if (n > 16) {
        rc = rd_fail(&r, "(map)", "too many fields");
        goto fail;
    }
    for (uint32_t k = 0; k < n; k++) {
        char key[4];
        if ((rc = rd_str(&r, "(key)", key, sizeof key)))
            goto fail;
        if ((rc = rd_field(&r, h, key, &seen)))
            goto fail;
    }
    if (r.p != r.end) {
        rc = gb_error_set(err, GB_EPROTO, "wire header: %zu trailing bytes",
                          (size_t)(r.end - r.p));
        goto fail;
    }
    if ((seen & K_REQUIRED) != K_REQUIRED) {
        static const char *const names[] = {"v", "t", "r", "i", "s", "p", "st", "x", "T", "a"};
        for (int b = 0; b < 10; b++)
            if ((K_REQUIRED & (1u << b)) && !(seen & (1u << b))) {
                rc = gb_error_set(err, GB_EPROTO, "wire header field '%s': missing", names[b]);
                goto fail;
            }
    }
    return 0;
fail:
    h->type = 0; /* nothing in a rejected header may be trusted */
    h->ntensors = 0;
    h->nattrs = 0;
    h->nwords = 0;
    return rc;
}
