/* tests/runtime/streams/test_wire.c: header encode/decode (against msgpack-c), every malformation
 * named, frame checks, multipart send/receive with in-place views, and the sender identity
 * check (gb_wire_peer_is) against the string compare it replaced. Typed attributes ("a"):
 * test_wire_attr.c. */
#include "runtime/base/dtype.h"
#include "runtime/streams/wire.h"
#include "test.h"
#include "wire_test.h"

#include <msgpack.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

static void sample_header(gb_wire_header *h)
{
    gb_wire_header_init(h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 7);
    h->seq = 0x123456789abcULL;
    h->policy_version = 42;
    h->status = GB_ETIMEOUT;
    snprintf(h->text, sizeof h->text, "hello");
    int64_t s0[2] = {64, 4}, s1[4] = {64, 84, 84, 1}, s2[1] = {0};
    gb_error err;
    gb_wire_set_tensor(&h->tensors[0], "obs", GB_DTYPE_FLOAT32, 2, s0, &err);
    gb_wire_set_tensor(&h->tensors[1], "pixels", GB_DTYPE_UINT8, 4, s1, &err);
    gb_wire_set_tensor(&h->tensors[2], "empty", GB_DTYPE_BFLOAT16, 1, s2, &err);
    h->ntensors = 3;
}

static void test_dtype(void)
{
    CHECK_EQ_INT(gb_dtype_size(GB_DTYPE_FLOAT32), 4);
    CHECK_EQ_INT(gb_dtype_size(GB_DTYPE_FLOAT64), 8);
    CHECK_EQ_INT(gb_dtype_size(GB_DTYPE_BOOL), 1);
    CHECK_EQ_INT(gb_dtype_size(GB_DTYPE_BFLOAT16), 2);
    CHECK_EQ_INT(gb_dtype_size((gb_dtype)99), 0);
    for (int d = 0; d < GB_DTYPE_COUNT; d++) {
        gb_dtype back;
        CHECK(gb_dtype_parse(gb_dtype_name((gb_dtype)d), &back) == 0 && back == (gb_dtype)d);
    }
    gb_dtype x;
    CHECK(gb_dtype_parse("float", &x) == 0 && x == GB_DTYPE_FLOAT32);
    CHECK(gb_dtype_parse("nope", &x) == GB_EINVAL);
    CHECK(gb_dtype_parse(NULL, &x) == GB_EINVAL);
}

static void test_roundtrip(void)
{
    gb_wire_header h, d;
    gb_error err;
    unsigned char buf[GB_WIRE_HEADER_MAX];
    size_t len;
    sample_header(&h);
    CHECK_OK(gb_wire_encode_header(&h, buf, sizeof buf, &len, &err));
    CHECK_OK(gb_wire_decode_header(buf, len, &d, &err));
    CHECK_EQ_INT(d.type, h.type);
    CHECK_EQ_INT(d.protocol, GB_WIRE_PROTOCOL);
    CHECK_EQ_INT(d.role, GB_ROLE_ACTOR);
    CHECK_EQ_INT(d.index, 7);
    CHECK(d.seq == h.seq);
    CHECK_EQ_INT(d.policy_version, 42);
    CHECK_EQ_INT(d.status, GB_ETIMEOUT);
    CHECK(strcmp(d.text, "hello") == 0);
    CHECK_EQ_INT(d.ntensors, 3);
    for (int t = 0; t < 3; t++) {
        CHECK(strcmp(d.tensors[t].name, h.tensors[t].name) == 0);
        CHECK_EQ_INT(d.tensors[t].dtype, h.tensors[t].dtype);
        CHECK_EQ_INT(d.tensors[t].rank, h.tensors[t].rank);
        for (int i = 0; i < h.tensors[t].rank; i++)
            CHECK_EQ_INT(d.tensors[t].shape[i], h.tensors[t].shape[i]);
    }
    /* msgpack-c reads what we wrote: a map whose "T" holds three [name, dtype, shape] */
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&u, (const char *)buf, len, &off) == MSGPACK_UNPACK_SUCCESS);
    CHECK(off == len);
    CHECK(u.data.type == MSGPACK_OBJECT_MAP);
    int found_t = 0;
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
        msgpack_object_kv *kv = &u.data.via.map.ptr[i];
        if (kv->key.via.str.size == 1 && kv->key.via.str.ptr[0] == 'T') {
            found_t = 1;
            CHECK(kv->val.type == MSGPACK_OBJECT_ARRAY && kv->val.via.array.size == 3);
            msgpack_object *t1 = &kv->val.via.array.ptr[1];
            CHECK(t1->via.array.ptr[0].via.str.size == 6);
            CHECK(t1->via.array.ptr[2].via.array.ptr[1].via.u64 == 84);
        }
    }
    CHECK(found_t);
    msgpack_unpacked_destroy(&u);
}

/* A header written by msgpack-c with another key order and int encodings. */
static void test_foreign_encoding(void)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 7);
    msgpack_pack_str_with_body(&pk, "T", 1);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_str_with_body(&pk, "x", 1);
    msgpack_pack_int64(&pk, GB_DTYPE_INT64); /* signed encoding of a small positive value */
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 3);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_int(&pk, -1);
    msgpack_pack_str_with_body(&pk, "s", 1);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_str_with_body(&pk, "i", 1);
    msgpack_pack_uint16(&pk, 3);
    msgpack_pack_str_with_body(&pk, "r", 1);
    msgpack_pack_int8(&pk, GB_ROLE_TRAINER);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_uint32(&pk, GB_MSG_SAMPLE);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_uint8(&pk, GB_WIRE_PROTOCOL);
    gb_wire_header d;
    gb_error err;
    CHECK_OK(gb_wire_decode_header(sb.data, sb.size, &d, &err));
    CHECK_EQ_INT(d.type, GB_MSG_SAMPLE);
    CHECK(d.seq == UINT64_MAX);
    CHECK_EQ_INT(d.policy_version, -1);
    CHECK_EQ_INT(d.tensors[0].dtype, GB_DTYPE_INT64);
    size_t lens[1] = {24};
    CHECK_OK(gb_wire_check_frames(&d, lens, 1, &err));
    lens[0] = 23;
    CHECK(gb_wire_check_frames(&d, lens, 1, &err) == GB_EPROTO && strstr(err.msg, "'x'"));
    CHECK(gb_wire_check_frames(&d, lens, 0, &err) == GB_EPROTO && strstr(err.msg, "frames"));
    msgpack_sbuffer_destroy(&sb);
}

/* Builds a header with msgpack-c, with one field replaced by a caller-packed value. */
static size_t build(msgpack_sbuffer *sb, const char *replace, pack_fn fn)
{
    static const char *keys[] = {"v", "t", "r", "i", "s", "p", "T"};
    msgpack_packer pk;
    msgpack_sbuffer_clear(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 7);
    for (int k = 0; k < 7; k++) {
        msgpack_pack_str_with_body(&pk, keys[k], 1);
        if (replace && strcmp(replace, keys[k]) == 0) {
            fn(&pk);
            continue;
        }
        switch (k) {
        case 0: msgpack_pack_uint8(&pk, GB_WIRE_PROTOCOL); break;
        case 1: msgpack_pack_uint8(&pk, GB_MSG_SAMPLE); break;
        case 2: msgpack_pack_uint8(&pk, GB_ROLE_ACTOR); break;
        case 3: msgpack_pack_uint8(&pk, 0); break;
        case 4: msgpack_pack_uint8(&pk, 1); break;
        case 5: msgpack_pack_int(&pk, 3); break;
        case 6: msgpack_pack_array(&pk, 0); break;
        }
    }
    return sb->size;
}

static void p_proto2(msgpack_packer *pk) { msgpack_pack_uint8(pk, GB_WIRE_PROTOCOL + 1); }
static void p_type0(msgpack_packer *pk) { msgpack_pack_uint8(pk, 0); }
static void p_type99(msgpack_packer *pk) { msgpack_pack_uint8(pk, 99); }
static void p_str(msgpack_packer *pk) { msgpack_pack_str_with_body(pk, "x", 1); }
static void p_neg(msgpack_packer *pk) { msgpack_pack_int(pk, -3); }
static void p_float(msgpack_packer *pk) { msgpack_pack_double(pk, 1.0); }
static void p_nil(msgpack_packer *pk) { msgpack_pack_nil(pk); }
static void p_pv_neg2(msgpack_packer *pk) { msgpack_pack_int(pk, -2); }
static void p_rank9(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_str_with_body(pk, "a", 1);
    msgpack_pack_uint8(pk, 0);
    msgpack_pack_array(pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_uint8(pk, 1);
}
static void p_bad_dtype(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_str_with_body(pk, "a", 1);
    msgpack_pack_uint8(pk, GB_DTYPE_COUNT);
    msgpack_pack_array(pk, 0);
}
static void p_overflow(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_str_with_body(pk, "huge", 4);
    msgpack_pack_uint8(pk, GB_DTYPE_FLOAT64);
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint64(pk, 1ULL << 40);
    msgpack_pack_uint64(pk, 1ULL << 40);
    msgpack_pack_uint64(pk, 1ULL << 40);
}
static void p_long_name(msgpack_packer *pk)
{
    char name[GB_WIRE_NAME_MAX + 1];
    memset(name, 'n', sizeof name);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_str_with_body(pk, name, sizeof name);
    msgpack_pack_uint8(pk, 0);
    msgpack_pack_array(pk, 0);
}
static void p_nul_name(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_str_with_body(pk, "a\0b", 3);
    msgpack_pack_uint8(pk, 0);
    msgpack_pack_array(pk, 0);
}
static void p_many_tensors(msgpack_packer *pk)
{
    msgpack_pack_array(pk, GB_WIRE_MAX_TENSORS + 1);
    for (int t = 0; t <= GB_WIRE_MAX_TENSORS; t++) {
        msgpack_pack_array(pk, 3);
        msgpack_pack_str_with_body(pk, "a", 1);
        msgpack_pack_uint8(pk, 0);
        msgpack_pack_array(pk, 0);
    }
}
static void p_tensor_pair(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 2);
    msgpack_pack_str_with_body(pk, "a", 1);
    msgpack_pack_uint8(pk, 0);
}

static void test_malformed(void)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n;
    n = build(&sb, "v", p_proto2);
    EXPECT_BAD(sb.data, n, "protocol version");
    n = build(&sb, "t", p_type0);
    EXPECT_BAD(sb.data, n, "'t'");
    n = build(&sb, "t", p_type99);
    EXPECT_BAD(sb.data, n, "'t'");
    n = build(&sb, "r", p_str);
    EXPECT_BAD(sb.data, n, "'r'");
    n = build(&sb, "i", p_neg);
    EXPECT_BAD(sb.data, n, "'i'");
    n = build(&sb, "s", p_float);
    EXPECT_BAD(sb.data, n, "'s'");
    n = build(&sb, "p", p_pv_neg2);
    EXPECT_BAD(sb.data, n, "'p'");
    n = build(&sb, "T", p_nil);
    EXPECT_BAD(sb.data, n, "'T'");
    n = build(&sb, "T", p_rank9);
    EXPECT_BAD(sb.data, n, "T[0].shape");
    n = build(&sb, "T", p_bad_dtype);
    EXPECT_BAD(sb.data, n, "T[0].dtype");
    n = build(&sb, "T", p_overflow);
    EXPECT_BAD(sb.data, n, "overflows");
    n = build(&sb, "T", p_long_name);
    EXPECT_BAD(sb.data, n, "T[0].name");
    n = build(&sb, "T", p_nul_name);
    EXPECT_BAD(sb.data, n, "NUL");
    n = build(&sb, "T", p_many_tensors);
    EXPECT_BAD(sb.data, n, "'T'");
    n = build(&sb, "T", p_tensor_pair);
    EXPECT_BAD(sb.data, n, "T[0]");
    /* a valid one, then every truncation of it, then trailing bytes */
    n = build(&sb, NULL, NULL);
    gb_wire_header d;
    gb_error err;
    CHECK_OK(gb_wire_decode_header(sb.data, n, &d, &err));
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(gb_wire_decode_header(sb.data, k, &d, &err) == GB_EPROTO, "prefix %zu", k);
    msgpack_sbuffer_write(&sb, "\x01", 1);
    EXPECT_BAD(sb.data, sb.size, "trailing");
    /* missing, duplicate and unknown keys */
    unsigned char miss[] = {0x81, 0xa1, 'v', GB_WIRE_PROTOCOL};
    EXPECT_BAD(miss, sizeof miss, "missing");
    unsigned char dup[] = {0x82, 0xa1, 'v', GB_WIRE_PROTOCOL, 0xa1, 'v', GB_WIRE_PROTOCOL};
    EXPECT_BAD(dup, sizeof dup, "twice");
    unsigned char unk[] = {0x81, 0xa1, 'z', 0x01};
    EXPECT_BAD(unk, sizeof unk, "unknown field");
    /* a container declaring 2^32-1 elements in five bytes: rejected without allocating */
    unsigned char huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    EXPECT_BAD(huge_map, sizeof huge_map, "exceeds");
    unsigned char huge_arr[] = {0x81, 0xa1, 'T', 0xdd, 0xff, 0xff, 0xff, 0xff};
    EXPECT_BAD(huge_arr, sizeof huge_arr, "'T'");
    unsigned char not_map[] = {0x93, 1, 2, 3};
    EXPECT_BAD(not_map, sizeof not_map, "map");
    EXPECT_BAD("", 0, "truncated");
    static unsigned char big[GB_WIRE_HEADER_MAX + 1];
    EXPECT_BAD(big, sizeof big, "bytes");
    msgpack_sbuffer_destroy(&sb);
}

/* frames at odd addresses (inproc passes messages as they are): a small one is copied
 * into the arena, ones larger than the arena into malloc'd blocks */
static void odd_addresses(void *a, void *b)
{
    gb_error err;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    static double big[2][1600 + 1], small[4 + 1];
    unsigned char *bb[2] = {(unsigned char *)big[0] + 1, (unsigned char *)big[1] + 1};
    for (int i = 0; i < 1600; i++) {
        double x = i * 0.25, y = -i * 0.5;
        memcpy(bb[0] + i * 8, &x, 8);
        memcpy(bb[1] + i * 8, &y, 8);
    }
    unsigned char *sb = (unsigned char *)small + 1;
    for (int i = 0; i < 4; i++) {
        double x = i + 100.0;
        memcpy(sb + i * 8, &x, 8);
    }
    gb_wire_header hm;
    gb_wire_header_init(&hm, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 0);
    int64_t n1600[1] = {1600}, n4[1] = {4};
    gb_wire_set_tensor(&hm.tensors[0], "a", GB_DTYPE_FLOAT64, 1, n1600, &err);
    gb_wire_set_tensor(&hm.tensors[1], "s", GB_DTYPE_FLOAT64, 1, n4, &err);
    gb_wire_set_tensor(&hm.tensors[2], "b", GB_DTYPE_FLOAT64, 1, n1600, &err);
    hm.ntensors = 3;
    zmq_msg_t fm[3];
    zmq_msg_init_data(&fm[0], bb[0], 1600 * 8, NULL, NULL);
    zmq_msg_init_data(&fm[1], sb, 4 * 8, NULL, NULL);
    zmq_msg_init_data(&fm[2], bb[1], 1600 * 8, NULL, NULL);
    gb_wire_payload pm[3] = {{NULL, NULL, NULL, &fm[0]}, {NULL, NULL, NULL, &fm[1]},
                             {NULL, NULL, NULL, &fm[2]}};
    CHECK_OK(gb_wire_send(a, NULL, 0, &hm, pm, 0, &err));
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&fm[i]);
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    CHECK_EQ_INT(m.realigned, 3);
    const double *va = gb_wire_msg_tensor(&m, 0).data, *vs = gb_wire_msg_tensor(&m, 1).data,
                 *vb = gb_wire_msg_tensor(&m, 2).data;
    CHECK((uintptr_t)va % 8 == 0 && (uintptr_t)vs % 8 == 0 && (uintptr_t)vb % 8 == 0);
    CHECK((const unsigned char *)vs >= m.arena &&
          (const unsigned char *)vs < m.arena + sizeof m.arena);
    CHECK(va == zmq_msg_data(&m.frames[0]) && vb == zmq_msg_data(&m.frames[2]));
    for (int i = 0; i < 1600; i++)
        CHECK(va[i] == i * 0.25 && vb[i] == -i * 0.5);
    for (int i = 0; i < 4; i++)
        CHECK(vs[i] == i + 100.0);
    gb_wire_msg_release(&m);
}

static void test_send_recv(void)
{
    gb_error err;
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(zmq_bind(a, "inproc://wire") == 0 && zmq_connect(b, "inproc://wire") == 0);
    gb_wire_header h;
    sample_header(&h);
    h.status = 0;
    static float obs[64 * 4];
    static unsigned char pix[64 * 84 * 84];
    for (int i = 0; i < 64 * 4; i++)
        obs[i] = (float)i * 0.5f;
    for (int i = 0; i < 64 * 84 * 84; i++)
        pix[i] = (unsigned char)(i * 7);
    gb_wire_payload p[3] = {{obs, NULL, NULL, NULL}, {pix, NULL, NULL, NULL},
                            {NULL, NULL, NULL, NULL}};
    CHECK_OK(gb_wire_send(a, NULL, 0, &h, p, 0, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    CHECK_EQ_INT(m.hdr.ntensors, 3);
    gb_tensor_view v0 = gb_wire_msg_tensor(&m, 0), v1 = gb_wire_msg_tensor(&m, 1);
    CHECK(v0.bytes == sizeof obs && memcmp(v0.data, obs, sizeof obs) == 0);
    CHECK(v1.bytes == sizeof pix && memcmp(v1.data, pix, sizeof pix) == 0);
    /* in place: the view is the frame's own memory; views are aligned to their dtype */
    CHECK(v1.data == zmq_msg_data(&m.frames[1]));
    CHECK((uintptr_t)v0.data % 4 == 0);
    gb_wire_msg_release(&m);
    /* small frames live inside the zmq_msg_t at an offset that suits no dtype: realigned */
    gb_wire_header hs;
    gb_wire_header_init(&hs, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 0);
    static const double pair[2] = {1.5, -2.25};
    static const int16_t shorts[3] = {1, -2, 3};
    int64_t s2[1] = {2}, s3[1] = {3};
    gb_wire_set_tensor(&hs.tensors[0], "d", GB_DTYPE_FLOAT64, 1, s2, &err);
    gb_wire_set_tensor(&hs.tensors[1], "h", GB_DTYPE_INT16, 1, s3, &err);
    hs.ntensors = 2;
    gb_wire_payload ps[2] = {{pair, NULL, NULL, NULL}, {shorts, NULL, NULL, NULL}};
    CHECK_OK(gb_wire_send(a, NULL, 0, &hs, ps, 0, &err));
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    gb_tensor_view vd = gb_wire_msg_tensor(&m, 0), vh = gb_wire_msg_tensor(&m, 1);
    CHECK((uintptr_t)vd.data % 8 == 0 && (uintptr_t)vh.data % 2 == 0);
    CHECK(((const double *)vd.data)[1] == -2.25 && ((const int16_t *)vh.data)[2] == 3);
    fprintf(stderr, "  small frames realigned: %llu\n", (unsigned long long)m.realigned);
    gb_wire_msg_release(&m);
    CHECK_OK(gb_wire_send(a, NULL, 0, &h, p, 0, &err));
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    CHECK_EQ_INT(gb_wire_msg_find(&m, "pixels"), 1);
    CHECK_EQ_INT(gb_wire_msg_find(&m, "nope"), -1);
    gb_wire_msg_release(&m);

    /* wrong frame count, then a frame of the wrong size: rejected, and the socket is left at the
     * start of the next message */
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    CHECK_OK(gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err));
    zmq_send(a, hb, hl, ZMQ_SNDMORE);
    zmq_send(a, obs, sizeof obs, 0);
    CHECK(gb_wire_recv(b, &m, 0, 0, &err) == GB_EPROTO && strstr(err.msg, "frames"));
    zmq_send(a, hb, hl, ZMQ_SNDMORE);
    zmq_send(a, obs, sizeof obs - 1, ZMQ_SNDMORE);
    zmq_send(a, pix, sizeof pix, ZMQ_SNDMORE);
    zmq_send(a, "", 0, 0);
    CHECK(gb_wire_recv(b, &m, 0, 0, &err) == GB_EPROTO && strstr(err.msg, "'obs'"));
    for (int i = 0; i < 40; i++) /* 40 frames after a garbage header */
        zmq_send(a, "\xc1", 1, ZMQ_SNDMORE);
    zmq_send(a, "x", 1, 0);
    CHECK(gb_wire_recv(b, &m, 0, 0, &err) == GB_EPROTO);
    CHECK_OK(gb_wire_send(a, NULL, 0, &h, p, 0, &err));
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    CHECK_EQ_INT(m.hdr.ntensors, 3);
    gb_wire_msg_release(&m);
    CHECK(gb_wire_recv(b, &m, 0, ZMQ_DONTWAIT, &err) == GB_EAGAIN);

    odd_addresses(a, b);

    /* zero-copy payloads: free_fn runs exactly once */
    static int freed;
    freed = 0;
    void free_fn(void *data, void *hint);
    gb_wire_header h1;
    gb_wire_header_init(&h1, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 0);
    int64_t shape = sizeof obs;
    gb_wire_set_tensor(&h1.tensors[0], "raw", GB_DTYPE_UINT8, 1, &shape, &err);
    h1.ntensors = 1;
    gb_wire_payload zp = {obs, free_fn, &freed, NULL};
    CHECK_OK(gb_wire_send(a, NULL, 0, &h1, &zp, 0, &err));
    CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
    gb_wire_msg_release(&m);
    CHECK_EQ_INT(freed, 1);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}


/* Over ipc ZeroMQ slices frames out of its read buffer at any offset: odd-sized frames before
 * float ones make misaligned views, realigned in the arena or (when more than it holds) in
 * malloc'd blocks. Values must come through either way. */
static void test_realign_ipc(void)
{
    gb_error err;
    char dir[] = "/tmp/gbwire-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/pair", dir);
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PUSH), *b = zmq_socket(ctx, ZMQ_PULL);
    CHECK(zmq_bind(b, ep) == 0 && zmq_connect(a, ep) == 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 0);
    static unsigned char odd[3] = {1, 2, 3};
    static float f[4][1200];
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 1200; i++)
            f[t][i] = (float)(t * 1000 + i) + 0.5f;
    int64_t s3[1] = {3}, s700[1] = {1200};
    gb_wire_set_tensor(&h.tensors[0], "odd", GB_DTYPE_UINT8, 1, s3, &err);
    gb_wire_payload p[9];
    p[0] = (gb_wire_payload){odd, NULL, NULL, NULL};
    for (int t = 0; t < 4; t++) { /* odd, f0, odd, f1, ... keeps every float frame off 4 */
        char name[8];
        snprintf(name, sizeof name, "f%d", t);
        gb_wire_set_tensor(&h.tensors[1 + 2 * t], name, GB_DTYPE_FLOAT32, 1, s700, &err);
        gb_wire_set_tensor(&h.tensors[2 + 2 * t], "odd", GB_DTYPE_UINT8, 1, s3, &err);
        p[1 + 2 * t] = (gb_wire_payload){f[t], NULL, NULL, NULL};
        p[2 + 2 * t] = (gb_wire_payload){odd, NULL, NULL, NULL};
    }
    h.ntensors = 9;
    const int nmsg = 40;
    for (int k = 0; k < nmsg; k++)
        CHECK_OK(gb_wire_send(a, NULL, 0, &h, p, 0, &err));
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    unsigned long long realigned = 0, in_blocks = 0;
    for (int k = 0; k < nmsg; k++) {
        CHECK_OK(gb_wire_recv(b, &m, 0, 0, &err));
        realigned += m.realigned;
        for (int t = 0; t < 4 && m.hdr.ntensors == 9; t++) {
            gb_tensor_view v = gb_wire_msg_tensor(&m, 1 + 2 * t);
            CHECK((uintptr_t)v.data % 4 == 0);
            CHECK(memcmp(v.data, f[t], sizeof f[t]) == 0);
            const unsigned char *d = v.data;
            if (d != zmq_msg_data(&m.frames[1 + 2 * t]) &&
                (d < m.arena || d >= m.arena + sizeof m.arena))
                in_blocks++; /* realigned outside the arena: the malloc'd path */
        }
        gb_wire_msg_release(&m);
    }
    fprintf(stderr, "  %d messages over ipc: %llu float frames realigned, %llu of them in "
                    "malloc'd blocks\n", nmsg, realigned, in_blocks);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
    rmdir(dir);
}

void free_fn(void *data, void *hint)
{
    (void)data;
    ++*(int *)hint;
}

/* The identity check (gb_wire_peer_is, on the role and index read once at receive) against the
 * string it replaced: the User-Id equal to "<gb_role_name(role)>/<index>" as %d prints it, or
 * empty. Every role, and indices at int's edges, against identities near each. */
static int peer_is_reference(const char *peer, int role, int index)
{
    char want[GB_WIRE_PEER_MAX], held[GB_WIRE_PEER_MAX];
    snprintf(held, sizeof held, "%s", peer);
    snprintf(want, sizeof want, "%s/%d", gb_role_name(role), index);
    return !held[0] || strcmp(held, want) == 0;
}

static void test_peer_is(void)
{
    static const char *const peers[] = {
        "", "actor/0", "actor/3", "actor/03", "actor/-0", "actor/+3", "actor/3x", "actor/ 3",
        "actor/", "actor", "/3", "actor//3", "actor/3/", "Actor/3", "actors/3", "acto/3",
        "none/3", "relay/host-a", "relay/3", "launcher/0", "trainer/2147483647",
        "trainer/2147483648", "trainer/-2147483648", "trainer/-2147483649",
        "policy/99999999999999999999", "actor/1234567890123456789012345678", "params/0",
        "client/-1", "server/7", "launcher"};
    static const int indices[] = {INT32_MIN, -1, 0, 1, 3, 7, 99, INT32_MAX};
    int checked = 0, differ = 0;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK(gb_wire_peer_is(&m, GB_ROLE_ACTOR, 5)); /* a fresh message: no identity */
    for (size_t k = 0; k < sizeof peers / sizeof peers[0]; k++) {
        gb_wire_msg_set_peer(&m, peers[k]);
        for (int role = GB_ROLE_NONE; role < GB_ROLE_END; role++)
            for (size_t i = 0; i < sizeof indices / sizeof indices[0]; i++) {
                int got = gb_wire_peer_is(&m, role, indices[i]);
                int want = peer_is_reference(peers[k], role, indices[i]);
                checked++;
                differ += got != want;
                CHECK_MSG(got == want, "'%s' as %s %d: %d, expected %d", peers[k],
                          gb_role_name(role), indices[i], got, want);
            }
        /* a role out of range is no worker: only a message without identity passes */
        CHECK_EQ_INT(gb_wire_peer_is(&m, GB_ROLE_END, 0), !peers[k][0]);
        CHECK_EQ_INT(gb_wire_peer_is(&m, -1, 0), !peers[k][0]);
    }
    gb_wire_msg_set_peer(&m, NULL);
    CHECK(m.peer[0] == '\0' && gb_wire_peer_is(&m, GB_ROLE_TRAINER, 0));
    printf("  peer_is: %d checks against the formatted reference, %d differ\n", checked, differ);
}

int main(void)
{
    TEST_RUN(test_dtype);
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_foreign_encoding);
    TEST_RUN(test_malformed);
    TEST_RUN(test_send_recv);
    TEST_RUN(test_realign_ipc);
    TEST_RUN(test_peer_is);
    return test_main_result();
}
