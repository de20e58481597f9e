/* runtime/base/dtype.h: tensor element types shared by the wire format, the replay and
 * environments.
 * defines: gb_dtype, GB_DTYPE_*, gb_dtype_size, gb_dtype_name, gb_dtype_parse, gb_dtype_valid */
#ifndef GB_RUNTIME_DTYPE_H
#define GB_RUNTIME_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The numeric values are part of the wire format (a header's tensor table carries them) and of
 * replay checkpoints: never renumber, only append. All types are little-endian in memory and on
 * the wire; bool is one byte holding 0 or 1. */
typedef enum gb_dtype {
    GB_DTYPE_FLOAT32 = 0,
    GB_DTYPE_FLOAT64 = 1,
    GB_DTYPE_INT8 = 2,
    GB_DTYPE_INT16 = 3,
    GB_DTYPE_INT32 = 4,
    GB_DTYPE_INT64 = 5,
    GB_DTYPE_UINT8 = 6,
    GB_DTYPE_UINT16 = 7,
    GB_DTYPE_BOOL = 8,
    GB_DTYPE_FLOAT16 = 9,  /* IEEE 754 binary16 */
    GB_DTYPE_BFLOAT16 = 10, /* upper half of a float32 */
    GB_DTYPE_UINT32 = 11,
    GB_DTYPE_UINT64 = 12,
    GB_DTYPE_COUNT = 13, /* not a type: the number of types */
} gb_dtype;

/* 1 when d is one of the types above (for values read from files or the wire), else 0. */
int gb_dtype_valid(int d);

/* Bytes per element; 0 for an invalid value. */
size_t gb_dtype_size(gb_dtype d);

/* The canonical lower-case name ("float32", "uint8", "bool", ...); "invalid" for an invalid
 * value. Never NULL. */
const char *gb_dtype_name(gb_dtype d);

/* Parses a name as gb_dtype_name writes it; also accepts the aliases "float" (float32), "double"
 * (float64), "half" (float16), "f32", "f64", "i32", "i64", "u8". Returns 0 and sets *out, or
 * GB_EINVAL (out untouched) for an unknown name or NULL. */
int gb_dtype_parse(const char *name, gb_dtype *out);

#ifdef __cplusplus
}
#endif

#endif
