/* runtime/base/dtype.c: tensor element types (see dtype.h). */
#include "runtime/base/dtype.h"

#include "runtime/base/error.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[GB_DTYPE_COUNT] = {
    [GB_DTYPE_FLOAT32] = {"float32", 4}, [GB_DTYPE_FLOAT64] = {"float64", 8},
    [GB_DTYPE_INT8] = {"int8", 1},       [GB_DTYPE_INT16] = {"int16", 2},
    [GB_DTYPE_INT32] = {"int32", 4},     [GB_DTYPE_INT64] = {"int64", 8},
    [GB_DTYPE_UINT8] = {"uint8", 1},     [GB_DTYPE_UINT16] = {"uint16", 2},
    [GB_DTYPE_BOOL] = {"bool", 1},       [GB_DTYPE_FLOAT16] = {"float16", 2},
    [GB_DTYPE_BFLOAT16] = {"bfloat16", 2}, [GB_DTYPE_UINT32] = {"uint32", 4},
    [GB_DTYPE_UINT64] = {"uint64", 8},
};

static const struct {
    const char *alias;
    gb_dtype d;
} dtype_alias[] = {
    {"float", GB_DTYPE_FLOAT32}, {"double", GB_DTYPE_FLOAT64}, {"half", GB_DTYPE_FLOAT16},
    {"f32", GB_DTYPE_FLOAT32},   {"f64", GB_DTYPE_FLOAT64},    {"i32", GB_DTYPE_INT32},
    {"i64", GB_DTYPE_INT64},     {"u8", GB_DTYPE_UINT8},
};

int gb_dtype_valid(int d) { return d >= 0 && d < GB_DTYPE_COUNT; }

size_t gb_dtype_size(gb_dtype d) { return gb_dtype_valid((int)d) ? dtype_info[d].size : 0; }

const char *gb_dtype_name(gb_dtype d)
{
    return gb_dtype_valid((int)d) ? dtype_info[d].name : "invalid";
}

int gb_dtype_parse(const char *name, gb_dtype *out)
{
    if (!name)
        return GB_EINVAL;
    for (int d = 0; d < GB_DTYPE_COUNT; d++)
        if (strcmp(name, dtype_info[d].name) == 0) {
            *out = (gb_dtype)d;
            return 0;
        }
    for (size_t i = 0; i < sizeof dtype_alias / sizeof dtype_alias[0]; i++)
        if (strcmp(name, dtype_alias[i].alias) == 0) {
            *out = dtype_alias[i].d;
            return 0;
        }
    return GB_EINVAL;
}
