/* tests/runtime/base/test_crc32c.c: CRC-32C against published check values, chaining, and the
 * hardware path against the table path (via odd lengths and offsets). */
#include "runtime/base/crc32c.h"
#include "test.h"

#include <string.h>

static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

static void test_check_values(void)
{
    CHECK_EQ_INT(gb_crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ_INT(gb_crc32c(0, "", 0), 0);
    unsigned char zeros[32] = {0};
    CHECK_EQ_INT(gb_crc32c(0, zeros, 32), 0x8A9136AAu); /* RFC 3720 B.4 */
    unsigned char ones[32];
    memset(ones, 0xff, sizeof ones);
    CHECK_EQ_INT(gb_crc32c(0, ones, 32), 0x62A8AB43u);
}

static void test_chaining_and_offsets(void)
{
    unsigned char buf[1027];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131u + 7u);
    for (size_t off = 0; off < 9; off++) {
        for (size_t len = 0; len + off <= sizeof buf; len += 97) {
            uint32_t want = crc_bitwise(buf + off, len);
            CHECK_EQ_INT(gb_crc32c(0, buf + off, len), want);
            size_t half = len / 3;
            CHECK_EQ_INT(gb_crc32c(gb_crc32c(0, buf + off, half), buf + off + half, len - half),
                         want);
        }
    }
}

int main(void)
{
    TEST_RUN(test_check_values);
    TEST_RUN(test_chaining_and_offsets);
    return test_main_result();
}
