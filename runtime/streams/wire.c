/* runtime/streams/wire.c: header encoding (msgpack-c packer), the bounds-checked header reader and the
 * frame checks (see wire.h); sending and receiving are in wire_io.c. */
#include "runtime/streams/wire.h"

#include <msgpack.h>
#include <stdbool.h>
#include <string.h>

static const char *const role_names[GB_ROLE_END] = {
    "none", "launcher", "actor", "policy", "trainer", "params", "client", "server", "relay",
};

static const char *const type_names[GB_MSG_TYPE_END] = {
    "invalid",     "infer_request", "infer_reply", "sample",     "param_begin",
    "param_chunk", "param_end",     "param_info_req", "param_info", "param_fetch",
    "param_data",  "reg_register",  "reg_unregister", "reg_lookup", "reg_reply",
    "metrics",     "serve_request", "serve_reply", "run_watch",  "run_state",
    "reg_join",
};

const char *gb_role_name(int role)
{
    return role >= 0 && role < GB_ROLE_END ? role_names[role] : "invalid";
}

int gb_role_from_name(const char *name)
{
    for (int r = GB_ROLE_NONE + 1; r < GB_ROLE_END; r++)
        if (strcmp(name, role_names[r]) == 0)
            return r;
    return GB_ROLE_NONE;
}

const char *gb_msg_type_name(int type)
{
    return type > 0 && type < GB_MSG_TYPE_END ? type_names[type] : "invalid";
}

int gb_wire_set_tensor(gb_tensor_desc *d, const char *name, gb_dtype dtype, int rank,
                       const int64_t *shape, gb_error *err)
{
    size_t n = strlen(name);
    if (n == 0 || n >= GB_WIRE_NAME_MAX)
        return gb_error_set(err, GB_EINVAL, "tensor name '%s': length must be 1..%d", name,
                            GB_WIRE_NAME_MAX - 1);
    if (!gb_dtype_valid((int)dtype))
        return gb_error_set(err, GB_EINVAL, "tensor '%s': invalid dtype %d", name, (int)dtype);
    if (rank < 0 || rank > GB_WIRE_MAX_RANK)
        return gb_error_set(err, GB_EINVAL, "tensor '%s': rank %d not in 0..%d", name, rank,
                            GB_WIRE_MAX_RANK);
    memset(d, 0, sizeof *d);
    memcpy(d->name, name, n);
    d->dtype = dtype;
    d->rank = rank;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return gb_error_set(err, GB_EINVAL, "tensor '%s': shape[%d] = %lld < 0", name, i,
                                (long long)shape[i]);
        d->shape[i] = shape[i];
    }
    return 0;
}

int gb_tensor_desc_bytes(const gb_tensor_desc *d, uint64_t *bytes, gb_error *err)
{
    if (!gb_dtype_valid((int)d->dtype))
        return gb_error_set(err, GB_EPROTO, "tensor '%s' dtype: invalid value %d", d->name,
                            (int)d->dtype);
    if (d->rank < 0 || d->rank > GB_WIRE_MAX_RANK)
        return gb_error_set(err, GB_EPROTO, "tensor '%s' shape: rank %d not in 0..%d", d->name,
                            d->rank, GB_WIRE_MAX_RANK);
    uint64_t n = gb_dtype_size(d->dtype);
    for (int i = 0; i < d->rank; i++) {
        if (d->shape[i] < 0)
            return gb_error_set(err, GB_EPROTO, "tensor '%s' shape[%d]: negative (%lld)",
                                d->name, i, (long long)d->shape[i]);
        uint64_t dim = (uint64_t)d->shape[i];
        if (dim != 0 && n > (UINT64_MAX >> 1) / dim)
            return gb_error_set(err, GB_EPROTO, "tensor '%s' shape: byte size overflows",
                                d->name);
        n *= dim;
    }
    *bytes = n;
    return 0;
}

void gb_wire_header_init(gb_wire_header *h, int type, int role, int index)
{
    h->type = type;
    h->protocol = GB_WIRE_PROTOCOL;
    h->role = role;
    h->index = index;
    h->seq = 0;
    h->policy_version = -1;
    h->status = 0;
    h->text[0] = '\0';
    h->nmeta = 0;
    h->nattrs = 0;
    h->nwords = 0;
    h->ntensors = 0;
}

/* ---- encoding ------------------------------------------------------------------------------ */

typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
} wbuf;

static int wbuf_write(void *data, const char *buf, size_t len)
{
    wbuf *w = data;
    if (len > w->cap - w->len)
        return -1;
    memcpy(w->p + w->len, buf, len);
    w->len += len;
    return 0;
}

static int pack_key(msgpack_packer *pk, const char *k)
{
    return msgpack_pack_str_with_body(pk, k, strlen(k));
}

/* Packs one attribute (key, value) after checking it against the limits. */
static int pack_attr(msgpack_packer *pk, const gb_wire_header *h, const gb_wire_attr *a,
                     gb_error *err)
{
    size_t kl = strnlen(a->key, GB_WIRE_ATTR_KEY_MAX);
    int words = a->kind == GB_WIRE_ATTR_STR ? 1 : a->kind == GB_WIRE_ATTR_STRS ? a->n : 0;
    if (kl == 0 || kl == GB_WIRE_ATTR_KEY_MAX || a->kind < GB_WIRE_ATTR_INT ||
        a->kind > GB_WIRE_ATTR_STRS || words < 0 || a->first < 0 ||
        a->first > h->nwords - words)
        return gb_error_set(err, GB_EINVAL, "wire header: attribute %d: bad key, kind or strings",
                            (int)(a - h->attrs));
    int rc = msgpack_pack_str_with_body(pk, a->key, kl);
    if (a->kind == GB_WIRE_ATTR_INT)
        return rc | msgpack_pack_int64(pk, a->i);
    if (a->kind == GB_WIRE_ATTR_STRS)
        rc |= msgpack_pack_array(pk, (size_t)a->n);
    for (int i = 0; i < words; i++) {
        const char *w = h->words[a->first + i];
        size_t wl = strnlen(w, GB_WIRE_WORD_MAX);
        if (wl == GB_WIRE_WORD_MAX)
            return gb_error_set(err, GB_EINVAL, "wire header: attribute '%s': string not "
                                "NUL-terminated", a->key);
        rc |= msgpack_pack_str_with_body(pk, w, wl);
    }
    return rc;
}

int gb_wire_encode_header(const gb_wire_header *h, void *buf, size_t cap, size_t *len,
                          gb_error *err)
{
    if (h->type <= 0 || h->type >= GB_MSG_TYPE_END || h->role < 0 || h->role >= GB_ROLE_END ||
        h->index < 0 || h->nmeta < 0 || h->nmeta > GB_WIRE_META_MAX || h->ntensors < 0 ||
        h->ntensors > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL,
                            "wire header: invalid type %d, role %d, index %d, meta %d or "
                            "tensor count %d",
                            h->type, h->role, h->index, h->nmeta, h->ntensors);
    wbuf w = {buf, 0, cap};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
    size_t text_len = strnlen(h->text, GB_WIRE_TEXT_MAX);
    if (text_len == GB_WIRE_TEXT_MAX)
        return gb_error_set(err, GB_EINVAL, "wire header: text not NUL-terminated");
    if (h->nattrs < 0 || h->nattrs > GB_WIRE_ATTRS_MAX || h->nwords < 0 ||
        h->nwords > GB_WIRE_WORDS_MAX)
        return gb_error_set(err, GB_EINVAL, "wire header: %d attributes, %d strings", h->nattrs,
                            h->nwords);
    int nkeys = 7 + (h->status != 0) + (text_len > 0) + (h->nmeta > 0) + (h->nattrs > 0);
    int rc = msgpack_pack_map(&pk, (size_t)nkeys);
    rc |= pack_key(&pk, "v") | msgpack_pack_uint32(&pk, (uint32_t)h->protocol);
    rc |= pack_key(&pk, "t") | msgpack_pack_uint32(&pk, (uint32_t)h->type);
    rc |= pack_key(&pk, "r") | msgpack_pack_uint32(&pk, (uint32_t)h->role);
    rc |= pack_key(&pk, "i") | msgpack_pack_uint32(&pk, (uint32_t)h->index);
    rc |= pack_key(&pk, "s") | msgpack_pack_uint64(&pk, h->seq);
    rc |= pack_key(&pk, "p") | msgpack_pack_int64(&pk, h->policy_version);
    if (h->status != 0)
        rc |= pack_key(&pk, "st") | msgpack_pack_int32(&pk, h->status);
    if (text_len > 0)
        rc |= pack_key(&pk, "x") | msgpack_pack_str_with_body(&pk, h->text, text_len);
    if (h->nmeta > 0) {
        rc |= pack_key(&pk, "m") | msgpack_pack_array(&pk, (size_t)h->nmeta);
        for (int i = 0; i < h->nmeta; i++)
            rc |= msgpack_pack_int64(&pk, h->meta[i]);
    }
    if (h->nattrs > 0) {
        rc |= pack_key(&pk, "a") | msgpack_pack_map(&pk, (size_t)h->nattrs);
        for (int k = 0; k < h->nattrs && rc == 0; k++)
            if ((rc = pack_attr(&pk, h, &h->attrs[k], err)))
                return rc;
    }
    rc |= pack_key(&pk, "T") | msgpack_pack_array(&pk, (size_t)h->ntensors);
    for (int t = 0; t < h->ntensors && rc == 0; t++) {
        const gb_tensor_desc *d = &h->tensors[t];
        size_t nl = strnlen(d->name, GB_WIRE_NAME_MAX);
        if (nl == 0 || nl == GB_WIRE_NAME_MAX || !gb_dtype_valid((int)d->dtype) || d->rank < 0 ||
            d->rank > GB_WIRE_MAX_RANK)
            return gb_error_set(err, GB_EINVAL, "wire header: tensor %d: bad name, dtype or rank",
                                t);
        rc |= msgpack_pack_array(&pk, 3);
        rc |= msgpack_pack_str_with_body(&pk, d->name, nl);
        rc |= msgpack_pack_uint32(&pk, (uint32_t)d->dtype);
        rc |= msgpack_pack_array(&pk, (size_t)d->rank);
        for (int i = 0; i < d->rank; i++) {
            if (d->shape[i] < 0)
                return gb_error_set(err, GB_EINVAL, "wire header: tensor '%s' shape[%d] < 0",
                                    d->name, i);
            rc |= msgpack_pack_uint64(&pk, (uint64_t)d->shape[i]);
        }
    }
    if (rc != 0)
        return gb_error_set(err, GB_EINVAL, "wire header: encoding exceeds %zu bytes", cap);
    *len = w.len;
    return 0;
}

/* ---- decoding: a bounds-checked msgpack reader ------------------------------------------------ */

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
    K_ST = 1 << 6, K_X = 1 << 7, K_M = 1 << 8, K_TT = 1 << 9, K_A = 1 << 10,
    K_REQUIRED = K_V | K_T | K_R | K_I | K_S | K_P | K_TT,
};

static int rd_field(rd *r, gb_wire_header *h, const char *key, unsigned *seen)
{
    static const struct {
        const char *key;
        unsigned bit;
    } keys[] = {{"v", K_V}, {"t", K_T},   {"r", K_R}, {"i", K_I}, {"s", K_S},
                {"p", K_P}, {"st", K_ST}, {"x", K_X}, {"m", K_M}, {"T", K_TT},
                {"a", K_A}};
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
    case K_M:
        if ((rc = rd_array(r, "m", GB_WIRE_META_MAX, &n)))
            break;
        h->nmeta = (int)n;
        for (uint32_t i = 0; i < n && !rc; i++)
            rc = rd_int(r, "m", INT64_MIN, INT64_MAX, &h->meta[i]);
        break;
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
        static const char *const names[] = {"v", "t", "r", "i", "s", "p", "st",
                                            "x", "m", "T", "a"};
        for (int b = 0; b < 11; b++)
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

int gb_wire_check_frames(const gb_wire_header *h, const size_t *lens, int n, gb_error *err)
{
    if (n != h->ntensors)
        return gb_error_set(err, GB_EPROTO, "wire message (%s from %s %d): %d tensor frames, "
                            "header declares %d",
                            gb_msg_type_name(h->type), gb_role_name(h->role), h->index, n,
                            h->ntensors);
    for (int t = 0; t < n; t++) {
        uint64_t bytes;
        int rc = gb_tensor_desc_bytes(&h->tensors[t], &bytes, err);
        if (rc)
            return rc;
        if (bytes != (uint64_t)lens[t])
            return gb_error_set(err, GB_EPROTO,
                                "wire message (%s from %s %d): tensor '%s' frame has %zu bytes, "
                                "shape and dtype say %llu",
                                gb_msg_type_name(h->type), gb_role_name(h->role), h->index,
                                h->tensors[t].name, lens[t], (unsigned long long)bytes);
    }
    return 0;
}
