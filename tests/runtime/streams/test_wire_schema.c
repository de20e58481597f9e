/* tests/runtime/streams/test_wire_schema.c: the wire message tables' validator and writer
 * (runtime/streams/wire_schema.h): every check named, defaults, a round trip through the encoder;
 * and every runtime table's attribute names fit the wire's keys (a longer one would fail only
 * when a message is written: a run-control watch named so failed unseen, retried silently).
 * */
#include "runtime/streams/wire_messages.h"
#include "runtime/streams/wire_schema.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

typedef struct demo {
    int64_t count, mode;
    const char *label;
    gb_wire_strs names;
} demo;

static const gb_wire_attr_spec demo_attrs[] = {
    GB_WIRE_INT(demo, count, 1, 1, 100, 0, "how many"),
    GB_WIRE_INT(demo, mode, 0, 0, 2, -1, "optional; -1 when absent"),
    GB_WIRE_STR(demo, label, 0, "optional label"),
    GB_WIRE_STRS(demo, names, 0, 0, 3, "up to 3 names"),
};

static const gb_wire_tensor_spec demo_tensors[] = {
    GB_WIRE_TENSOR("data", GB_DTYPE_UINT8, 1, 1, "the bytes"),
    GB_WIRE_TENSOR("extra", -1, -1, 0, "anything"),
};

static const gb_wire_schema demo_schema = {
    .name = "demo", .type = GB_MSG_SERVE_REQUEST, .doc = "a test message",
    .attrs = demo_attrs, .nattrs = GB_WIRE_N(demo_attrs),
    .tensors = demo_tensors, .ntensors = GB_WIRE_N(demo_tensors)};

static void base(gb_wire_header *h)
{
    gb_wire_header_init(h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 4);
    int64_t n = 3;
    gb_wire_set_tensor(&h->tensors[0], "data", GB_DTYPE_UINT8, 1, &n, NULL);
    h->ntensors = 1;
}

/* Expects reading h to fail with GB_EPROTO and a message holding want. */
static void bad(const gb_wire_header *h, const char *want, int line)
{
    demo d;
    gb_error err = {0};
    int rc = gb_wire_schema_read(&demo_schema, h, &d, &err);
    CHECK_MSG(rc == GB_EPROTO, "line %d: accepted (rc %d)", line, rc);
    CHECK_MSG(strstr(err.msg, want) && strstr(err.msg, "demo from client 4"),
              "line %d: message '%s' lacks '%s'", line, err.msg, want);
}
#define BAD(h, want) bad(h, want, __LINE__)

static void test_round_trip(void)
{
    gb_wire_header h, r;
    gb_error err;
    base(&h);
    demo in = {.count = 7, .mode = -1, .label = "hello", .names = {2, {"a", "bc"}}};
    CHECK_OK(gb_wire_schema_write(&demo_schema, &in, &h, &err));
    CHECK_EQ_INT(h.nattrs, 3); /* mode at its default is left out */
    unsigned char buf[GB_WIRE_HEADER_MAX];
    size_t len;
    CHECK_OK(gb_wire_encode_header(&h, buf, sizeof buf, &len, &err));
    CHECK_OK(gb_wire_decode_header(buf, len, &r, &err));
    demo out;
    memset(&out, 0x55, sizeof out);
    CHECK_OK(gb_wire_schema_read(&demo_schema, &r, &out, &err));
    CHECK(out.count == 7 && out.mode == -1 && strcmp(out.label, "hello") == 0);
    CHECK(out.names.n == 2 && strcmp(out.names.v[1], "bc") == 0);
    /* optional ones absent: defaults */
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 1, &err));
    CHECK_OK(gb_wire_schema_read(&demo_schema, &h, &out, &err));
    CHECK(out.mode == -1 && out.label == NULL && out.names.n == 0);
    CHECK_OK(gb_wire_schema_read(&demo_schema, &h, NULL, &err)); /* check only */
    /* the writer checks bounds and the type */
    base(&h);
    in.count = 101;
    CHECK(gb_wire_schema_write(&demo_schema, &in, &h, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "'count'") != NULL);
    in.count = 1;
    in.names.n = 4;
    CHECK(gb_wire_schema_write(&demo_schema, &in, &h, &err) == GB_EINVAL);
    gb_wire_header_init(&h, GB_MSG_SAMPLE, GB_ROLE_CLIENT, 4);
    in.names.n = 0;
    CHECK(gb_wire_schema_write(&demo_schema, &in, &h, &err) == GB_EINVAL);
}

static void test_rejects(void)
{
    gb_wire_header h;
    gb_error err;
    base(&h);
    BAD(&h, "attribute 'count': missing");
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 0, &err));
    BAD(&h, "attribute 'count': 0 not in 1..100");
    base(&h);
    CHECK_OK(gb_wire_attr_set_str(&h, "count", "7", &err));
    BAD(&h, "attribute 'count': str, expected int64");
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    CHECK_OK(gb_wire_attr_set_int(&h, "mode", 3, &err));
    BAD(&h, "attribute 'mode': 3 not in 0..2");
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    CHECK_OK(gb_wire_attr_set_int(&h, "surprise", 1, &err));
    BAD(&h, "attribute 'surprise': not part of the message");
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    const char *four[4] = {"a", "b", "c", "d"};
    CHECK_OK(gb_wire_attr_set_strs(&h, "names", four, 4, &err));
    BAD(&h, "attribute 'names': 4 strings, expected 0..3");
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    CHECK_OK(gb_wire_attr_set_str(&h, "names", "a", &err));
    BAD(&h, "attribute 'names': str, expected array of str");
    /* tensors */
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    h.ntensors = 0;
    BAD(&h, "tensor 'data': missing");
    int64_t two[2] = {1, 2};
    gb_wire_set_tensor(&h.tensors[0], "data", GB_DTYPE_UINT8, 2, two, NULL);
    h.ntensors = 1;
    BAD(&h, "tensor 'data': uint8 of rank 2, expected uint8 of rank 1");
    gb_wire_set_tensor(&h.tensors[0], "data", GB_DTYPE_FLOAT32, 1, two, NULL);
    BAD(&h, "tensor 'data': float32 of rank 1");
    base(&h);
    CHECK_OK(gb_wire_attr_set_int(&h, "count", 5, &err));
    gb_wire_set_tensor(&h.tensors[1], "data", GB_DTYPE_UINT8, 1, two, NULL);
    h.ntensors = 2;
    BAD(&h, "tensor 'data': given twice");
    gb_wire_set_tensor(&h.tensors[1], "other", GB_DTYPE_UINT8, 1, two, NULL);
    BAD(&h, "tensor 'other': not part of the message");
    gb_wire_schema open = demo_schema;
    open.open_tensors = 1;
    CHECK_OK(gb_wire_schema_read(&open, &h, NULL, &err));
    gb_wire_set_tensor(&h.tensors[1], "extra", GB_DTYPE_FLOAT64, 2, two, NULL);
    CHECK_OK(gb_wire_schema_read(&demo_schema, &h, NULL, &err));
    /* another type */
    h.type = GB_MSG_SAMPLE;
    BAD(&h, "got a message of type sample");
}

/* Every runtime table: attribute names of 1..GB_WIRE_ATTR_KEY_MAX-1 bytes, none twice, and
 * schema names unique. */
static void test_runtime_tables(void)
{
    for (int i = 0; i < gb_wire_runtime_nschemas; i++) {
        const gb_wire_schema *s = gb_wire_runtime_schemas[i];
        for (int a = 0; a < s->nattrs; a++) {
            size_t n = strlen(s->attrs[a].name);
            CHECK_MSG(n >= 1 && n < GB_WIRE_ATTR_KEY_MAX, "%s.%s: %zu bytes (at most %d)",
                      s->name, s->attrs[a].name, n, GB_WIRE_ATTR_KEY_MAX - 1);
            for (int b = 0; b < a; b++)
                CHECK_MSG(strcmp(s->attrs[a].name, s->attrs[b].name) != 0, "%s.%s twice",
                          s->name, s->attrs[a].name);
        }
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcmp(s->name, gb_wire_runtime_schemas[j]->name) != 0, "schema %s twice",
                      s->name);
    }
    CHECK(gb_wire_runtime_nschemas > 10);
}

int main(void)
{
    TEST_RUN(test_round_trip);
    TEST_RUN(test_rejects);
    TEST_RUN(test_runtime_tables);
    return test_main_result();
}
