/* tests/workers/torch/bad_torch_module.c: libtorch bridge modules that do not fit this gearbox, one
 * way each, built once per BAD_MODE for test_torch_loader: a table of another ABI version, a table
 * of another size, no entry symbol. None has a function in its table: the loader must refuse it
 * before anything is called. */
#include "workers/torch/bridge.h"

#define WRONG_VERSION 1
#define WRONG_SIZE 2
#define NO_SYMBOL 3

#if BAD_MODE == WRONG_VERSION || BAD_MODE == WRONG_SIZE
static const gb_torch_api table = {
    .abi_version = BAD_MODE == WRONG_VERSION ? GB_TORCH_ABI_VERSION + 1 : GB_TORCH_ABI_VERSION,
    .struct_size = BAD_MODE == WRONG_SIZE ? sizeof(gb_torch_api) - 8 : sizeof(gb_torch_api),
};

__attribute__((visibility("default"))) const gb_torch_api *gearbox_torch_api(void)
{
    return &table;
}
#else
__attribute__((visibility("default"))) int gearbox_torch_something_else(void)
{
    return 0;
}
#endif
