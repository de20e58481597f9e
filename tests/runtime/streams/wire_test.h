/* tests/runtime/streams/wire_test.h: helpers shared by the wire header tests: a decode that must
 * fail with a named message, and the signature of the msgpack-c packers that build bad headers.
 * defines: pack_fn, expect_bad, EXPECT_BAD */
#ifndef GB_TESTS_STREAMS_WIRE_TEST_H
#define GB_TESTS_STREAMS_WIRE_TEST_H

#include "runtime/streams/wire.h"
#include "test.h"

#include <msgpack.h>
#include <string.h>

/* Packs one caller-chosen value (a header field, or the "a" attribute map) with msgpack-c. */
typedef void (*pack_fn)(msgpack_packer *pk);

/* Expects decoding to fail with a message containing want. */
static inline void expect_bad(const void *buf, size_t len, const char *want, int line)
{
    gb_wire_header d;
    gb_error err = {0};
    int rc = gb_wire_decode_header(buf, len, &d, &err);
    CHECK_MSG(rc == GB_EPROTO, "line %d: decoded a bad header (rc %d)", line, rc);
    CHECK_MSG(strstr(err.msg, want) != NULL, "line %d: message '%s' lacks '%s'", line, err.msg,
              want);
    CHECK_EQ_INT(d.type, 0);
}
#define EXPECT_BAD(buf, len, want) expect_bad(buf, len, want, __LINE__)

#endif
