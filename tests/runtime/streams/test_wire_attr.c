/* tests/runtime/streams/test_wire_attr.c: typed header attributes ("a"): set, encode, decode
 * (against msgpack-c), the setters' limits, and every malformed attribute map named. */
#include "runtime/streams/wire.h"
#include "test.h"
#include "wire_test.h"

#include <msgpack.h>
#include <stdint.h>
#include <string.h>

static void test_attrs(void)
{
    gb_wire_header h, d;
    gb_error err;
    unsigned char buf[GB_WIRE_HEADER_MAX];
    size_t len;
    gb_wire_header_init(&h, GB_MSG_SERVE_REPLY, GB_ROLE_SERVER, 0);
    const char *sel[3] = {"uniform", "weighted", "fifo"};
    CHECK_OK(gb_wire_attr_set_str(&h, "selector", "weighted", &err));
    CHECK_OK(gb_wire_attr_set_int(&h, "per_item", INT64_MIN, &err));
    CHECK_OK(gb_wire_attr_set_strs(&h, "selectors", sel, 3, &err));
    CHECK_OK(gb_wire_attr_set_strs(&h, "none", NULL, 0, &err));
    CHECK_OK(gb_wire_encode_header(&h, buf, sizeof buf, &len, &err));
    CHECK_OK(gb_wire_decode_header(buf, len, &d, &err));
    CHECK_EQ_INT(d.nattrs, 4);
    CHECK(gb_wire_attr_str(&d, "selector") && strcmp(gb_wire_attr_str(&d, "selector"),
                                                     "weighted") == 0);
    int64_t v = 0;
    CHECK_OK(gb_wire_attr_int(&d, "per_item", &v, &err));
    CHECK(v == INT64_MIN);
    const char *got[4];
    CHECK_EQ_INT(gb_wire_attr_strs(&d, "selectors", got, 4), 3);
    CHECK(strcmp(got[0], "uniform") == 0 && strcmp(got[2], "fifo") == 0);
    CHECK_EQ_INT(gb_wire_attr_strs(&d, "none", got, 4), 0);
    CHECK_EQ_INT(gb_wire_attr_strs(&d, "per_item", got, 4), -1);
    CHECK(gb_wire_attr_int(&d, "selector", &v, &err) == GB_EPROTO);
    CHECK(gb_wire_attr_int(&d, "absent", &v, &err) == GB_ENOTFOUND);
    CHECK(gb_wire_attr_str(&d, "selectors") == NULL && gb_wire_attr_find(&d, "x") == NULL);
    /* msgpack-c reads the same map */
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, (const char *)buf, len, NULL) == MSGPACK_UNPACK_SUCCESS);
    int found = 0;
    for (uint32_t k = 0; k < u.data.via.map.size; k++) {
        msgpack_object_kv *kv = &u.data.via.map.ptr[k];
        if (kv->key.via.str.size != 1 || kv->key.via.str.ptr[0] != 'a')
            continue;
        CHECK(kv->val.type == MSGPACK_OBJECT_MAP && kv->val.via.map.size == 4);
        msgpack_object_kv *e = &kv->val.via.map.ptr[2];
        CHECK(e->val.type == MSGPACK_OBJECT_ARRAY && e->val.via.array.size == 3);
        found = 1;
    }
    CHECK(found);
    msgpack_unpacked_destroy(&u);
    /* the setters refuse what the decoder would, and leave h as it was */
    int n0 = h.nattrs, w0 = h.nwords;
    char long_word[GB_WIRE_WORD_MAX + 1];
    memset(long_word, 'w', sizeof long_word - 1);
    long_word[sizeof long_word - 1] = '\0';
    CHECK(gb_wire_attr_set_str(&h, "k", long_word, &err) == GB_EINVAL);
    CHECK(gb_wire_attr_set_int(&h, "selector", 1, &err) == GB_EINVAL); /* twice */
    CHECK(gb_wire_attr_set_int(&h, "", 1, &err) == GB_EINVAL);
    CHECK(gb_wire_attr_set_int(&h, "a_key_of_16_byte", 1, &err) == GB_EINVAL);
    const char *many[GB_WIRE_WORDS_MAX];
    for (int i = 0; i < GB_WIRE_WORDS_MAX; i++)
        many[i] = "w";
    CHECK(gb_wire_attr_set_strs(&h, "many", many, GB_WIRE_WORDS_MAX, &err) == GB_EINVAL);
    CHECK(h.nattrs == n0 && h.nwords == w0);
    for (int i = h.nattrs; i < GB_WIRE_ATTRS_MAX; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_OK(gb_wire_attr_set_int(&h, key, i, &err));
    }
    CHECK(gb_wire_attr_set_int(&h, "one_more", 1, &err) == GB_EINVAL);
    CHECK_OK(gb_wire_encode_header(&h, buf, sizeof buf, &len, &err));
    CHECK_OK(gb_wire_decode_header(buf, len, &d, &err));
    CHECK_EQ_INT(d.nattrs, GB_WIRE_ATTRS_MAX);
}

/* A valid header plus "a" packed by fn. */
static size_t build_attrs(msgpack_sbuffer *sb, pack_fn fn)
{
    static const char *keys[] = {"v", "t", "r", "i", "s", "p", "T"};
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 8);
    for (int k = 0; k < 7; k++) {
        msgpack_pack_str_with_body(&pk, keys[k], 1);
        if (k == 6)
            msgpack_pack_array(&pk, 0);
        else if (k == 0)
            msgpack_pack_uint8(&pk, GB_WIRE_PROTOCOL);
        else
            msgpack_pack_uint8(&pk, 1);
    }
    msgpack_pack_str_with_body(&pk, "a", 1);
    fn(&pk);
    return sb->size;
}

static void pk_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}
/* Opens a map of one attribute called key; the caller packs its value. */
static void one_attr(msgpack_packer *pk, const char *key)
{
    msgpack_pack_map(pk, 1);
    pk_str(pk, key);
}
static void a_ok(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 2);
    pk_str(pk, "n");
    msgpack_pack_int8(pk, -3);
    pk_str(pk, "l");
    msgpack_pack_array(pk, 2);
    pk_str(pk, "x");
    pk_str(pk, "");
}
static void a_array(msgpack_packer *pk) { msgpack_pack_array(pk, 0); }
static void a_float(msgpack_packer *pk)
{
    one_attr(pk, "f");
    msgpack_pack_double(pk, 1.5);
}
static void a_nil(msgpack_packer *pk)
{
    one_attr(pk, "z");
    msgpack_pack_nil(pk);
}
static void a_int_in_list(msgpack_packer *pk)
{
    one_attr(pk, "l");
    msgpack_pack_array(pk, 2);
    pk_str(pk, "x");
    msgpack_pack_uint8(pk, 1);
}
static void a_too_many(msgpack_packer *pk)
{
    msgpack_pack_map(pk, GB_WIRE_ATTRS_MAX + 1);
    for (int i = 0; i <= GB_WIRE_ATTRS_MAX; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        pk_str(pk, key);
        msgpack_pack_uint8(pk, 1);
    }
}
static void a_too_many_words(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 2);
    for (int a = 0; a < 2; a++) {
        pk_str(pk, a ? "b" : "a");
        msgpack_pack_array(pk, GB_WIRE_WORDS_MAX / 2 + 1);
        for (int i = 0; i <= GB_WIRE_WORDS_MAX / 2; i++)
            pk_str(pk, "w");
    }
}
static void a_long_word(msgpack_packer *pk)
{
    char w[GB_WIRE_WORD_MAX + 1];
    memset(w, 'w', sizeof w - 1);
    w[sizeof w - 1] = '\0';
    one_attr(pk, "s");
    pk_str(pk, w);
}
static void a_long_key(msgpack_packer *pk)
{
    one_attr(pk, "a_key_of_16_byte");
    msgpack_pack_uint8(pk, 1);
}
static void a_empty_key(msgpack_packer *pk)
{
    one_attr(pk, "");
    msgpack_pack_uint8(pk, 1);
}
static void a_dup(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 2);
    pk_str(pk, "d");
    msgpack_pack_uint8(pk, 1);
    pk_str(pk, "d");
    pk_str(pk, "x");
}
static void a_nul(msgpack_packer *pk)
{
    one_attr(pk, "s");
    msgpack_pack_str_with_body(pk, "a\0b", 3);
}
static void a_huge_list(msgpack_packer *pk)
{
    one_attr(pk, "l");
    msgpack_pack_array(pk, 0xffffffffu); /* declared, not followed */
}

static void test_attrs_malformed(void)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    gb_wire_header d;
    gb_error err;
    size_t n = build_attrs(&sb, a_ok);
    CHECK_OK(gb_wire_decode_header(sb.data, n, &d, &err));
    int64_t v = 0;
    const char *l[2];
    CHECK(gb_wire_attr_int(&d, "n", &v, &err) == 0 && v == -3);
    CHECK(gb_wire_attr_strs(&d, "l", l, 2) == 2 && strcmp(l[1], "") == 0);
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(gb_wire_decode_header(sb.data, k, &d, &err) == GB_EPROTO, "prefix %zu", k);
    n = build_attrs(&sb, a_array);
    EXPECT_BAD(sb.data, n, "'a'");
    n = build_attrs(&sb, a_float);
    EXPECT_BAD(sb.data, n, "'a.f'");
    n = build_attrs(&sb, a_nil);
    EXPECT_BAD(sb.data, n, "'a.z'");
    n = build_attrs(&sb, a_int_in_list);
    EXPECT_BAD(sb.data, n, "'a.l'");
    n = build_attrs(&sb, a_too_many);
    EXPECT_BAD(sb.data, n, "attributes, at most");
    n = build_attrs(&sb, a_too_many_words);
    EXPECT_BAD(sb.data, n, "strings");
    n = build_attrs(&sb, a_long_word);
    EXPECT_BAD(sb.data, n, "at most 31");
    n = build_attrs(&sb, a_long_key);
    EXPECT_BAD(sb.data, n, "at most 15");
    n = build_attrs(&sb, a_empty_key);
    EXPECT_BAD(sb.data, n, "empty key");
    n = build_attrs(&sb, a_dup);
    EXPECT_BAD(sb.data, n, "twice");
    n = build_attrs(&sb, a_nul);
    EXPECT_BAD(sb.data, n, "NUL");
    n = build_attrs(&sb, a_huge_list);
    EXPECT_BAD(sb.data, n, "'a.l'");
    CHECK_EQ_INT(d.nattrs, 0); /* nothing of a rejected header is kept */
    msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
    TEST_RUN(test_attrs);
    TEST_RUN(test_attrs_malformed);
    return test_main_result();
}
