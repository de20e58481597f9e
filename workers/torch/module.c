/* workers/torch/module.c: the bridge's table, filled with the module's functions, and the one
 * symbol that hands it out (GB_TORCH_ENTRY_SYMBOL, which workers/torch/loader.c looks up in
 * libgearbox-torch.so). In the static library the tests and tools link, gb_torch() returns it
 * directly.
 * defines: gearbox_torch_api, and gb_torch / gb_torch_load / gb_torch_loaded for the library
 *          that links it */
#include "workers/torch/module.h"
#include "workers/torch/blas_cpu.h"

static const gb_torch_api table = {
    .abi_version = GB_TORCH_ABI_VERSION,
    .struct_size = sizeof(gb_torch_api),
    .set_threads = gbt_set_threads,
    .cuda_available = gbt_cuda_available,
    .model_create = gbt_model_create,
    .model_destroy = gbt_model_destroy,
    .model_act = gbt_model_act,
    .model_act_noise = gbt_model_act_noise,
    .model_state_size = gbt_model_state_size,
    .model_act_state = gbt_model_act_state,
    .model_layout = gbt_model_layout,
    .model_export = gbt_model_export,
    .model_import = gbt_model_import,
    .model_set_precision = gbt_model_set_precision,
    .model_int8_engine = gbt_model_int8_engine,
    .model_kernels = gbt_model_kernels,
    .model_forward = gbt_model_forward,
    .model_version = gbt_model_version,
    .model_set_version = gbt_model_set_version,
    .learner_create = gbt_learner_create,
    .learner_destroy = gbt_learner_destroy,
    .learner_model = gbt_learner_model,
    .learner_train = gbt_learner_train,
    .learner_observe = gbt_learner_observe,
    .learner_set_progress = gbt_learner_set_progress,
    .learner_train_steps = gbt_learner_train_steps,
    .learner_kernels = gbt_learner_kernels,
    .learner_save = gbt_learner_save,
    .learner_load = gbt_learner_load,
    .learner_set_group = gbt_learner_set_group,
    .learner_checksum = gbt_learner_checksum,
    .learner_set_flat = gbt_learner_set_flat,
    .learner_get_flat = gbt_learner_get_flat,
    .learner_set_noise = gbt_learner_set_noise,
    .large_product = gbt_large_product,
    .group_open = gbt_group_open,
    .group_close = gbt_group_close,
    .group_rank = gbt_group_rank,
    .group_size = gbt_group_size,
    .group_allreduce = gbt_group_allreduce,
    .group_allgather = gbt_group_allgather,
    .group_broadcast = gbt_group_broadcast,
    .group_alltoall = gbt_group_alltoall,
    .group_barrier = gbt_group_barrier,
    .group_traffic = gbt_group_traffic,
    .group_failed = gbt_group_failed,
    .group_has_nccl = gbt_group_has_nccl,
};

/* The module's entry point: its table, static, never NULL. */
__attribute__((visibility("default"))) const gb_torch_api *gearbox_torch_api(void)
{
    return &table;
}

/* When the module is loaded (after libtorch and its BLAS, whose constructors run first), or
 * before main where the library is linked: OpenBLAS's kernels fitted to the cpu before any
 * product runs. */
__attribute__((constructor)) static void fit_blas(void)
{
    (void)gbt_blas_fit_cpu();
}

/* The table linked in (the gearbox command has loader.c's instead). Never fails. */
const gb_torch_api *gb_torch(void)
{
    return &table;
}

/* Linked in, libtorch is always there. */
int gb_torch_loaded(void)
{
    return 1;
}

/* Linked in, there is nothing to load: always 0. */
int gb_torch_load(gb_error *err)
{
    (void)err;
    return 0;
}
