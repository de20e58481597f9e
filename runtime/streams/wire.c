/* runtime/streams/wire.c: names of roles and types, tensor descriptions, header encoding (msgpack-c
 * packer) and the frame checks (see wire.h); decoding is in wire_decode.c, sending and receiving
 * in wire_io.c. */
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
        h->index < 0 || h->ntensors < 0 || h->ntensors > GB_WIRE_MAX_TENSORS)
        return gb_error_set(err, GB_EINVAL,
                            "wire header: invalid type %d, role %d, index %d or tensor count %d",
                            h->type, h->role, h->index, h->ntensors);
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
    int nkeys = 7 + (h->status != 0) + (text_len > 0) + (h->nattrs > 0);
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
