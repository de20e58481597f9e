/* runtime/base/crc32c.h: CRC-32C (Castagnoli), for checkpoint tables and parameter blobs.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, else slicing-by-8 tables.
 * defines: gb_crc32c */
#ifndef GB_RUNTIME_CRC32C_H
#define GB_RUNTIME_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of data, continuing from crc (0 to start): gb_crc32c(gb_crc32c(0, a, n), b, m) equals
 * the CRC of a followed by b. gb_crc32c(0, "123456789", 9) == 0xE3069283. Thread-safe. */
uint32_t gb_crc32c(uint32_t crc, const void *data, size_t len);

#endif
