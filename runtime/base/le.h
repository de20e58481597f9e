/* runtime/base/le.h: little-endian integers in byte buffers, as the files and messages gearbox
 * writes lay them out (the parameter stream's layout records, policy files, TensorBoard's
 * record frames), whatever the host's byte order.
 * defines: gb_put_le32, gb_put_le64, gb_get_le32, gb_get_le64 */
#ifndef GB_RUNTIME_BASE_LE_H
#define GB_RUNTIME_BASE_LE_H

#include <stdint.h>

static inline void gb_put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void gb_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t gb_get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t gb_get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif
