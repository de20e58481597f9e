/* workers/torch/module.h: the functions the bridge's table points at (workers/torch/module.c),
 * one for each gb_torch_api field, named gbt_<field>; their contracts are the fields' comments
 * in workers/torch/bridge.h. Only the bridge's own files include this: everything else calls
 * through the table.
 * defines: gbt_set_threads, gbt_cuda_available, gbt_model_*, gbt_learner_*, gbt_group_* */
#ifndef GB_WORKERS_TORCH_MODULE_H
#define GB_WORKERS_TORCH_MODULE_H

#include "workers/torch/bridge.h"

#ifdef __cplusplus
extern "C" {
#endif

int gbt_set_threads(int n, gb_error *err);
int gbt_cuda_available(void);
int gbt_model_create(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                     gb_torch_model **out, gb_error *err);
void gbt_model_destroy(gb_torch_model *m);
int gbt_model_act(gb_torch_model *m, const void *obs, int64_t n, int deterministic, double epsilon,
                  gb_torch_act_out *out, gb_error *err);
int gbt_model_act_noise(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                        double epsilon, const float *noise, gb_torch_act_out *out, gb_error *err);
int64_t gbt_model_state_size(const gb_torch_model *m);
int gbt_model_act_state(gb_torch_model *m, const void *obs, int64_t n, int deterministic,
                        double epsilon, const float *noise, const float *state_in,
                        float *state_out, gb_torch_act_out *out, gb_error *err);
void gbt_model_layout(const gb_torch_model *m, const gb_param_entry **table, int *count,
                      uint64_t *total);
int gbt_model_export(const gb_torch_model *m, void *buf, size_t cap, uint64_t *version,
                     gb_error *err);
int gbt_model_import(gb_torch_model *m, const void *buf, size_t len, const gb_param_entry *table,
                     int count, uint64_t version, gb_error *err);
int gbt_model_set_precision(gb_torch_model *m, int precision, gb_error *err);
int gbt_model_int8_engine(const char **name, gb_error *err);
const char *gbt_model_kernels(const gb_torch_model *m);
int gbt_model_forward(gb_torch_model *m, const void *obs, int64_t n, gb_error *err);
uint64_t gbt_model_version(const gb_torch_model *m);
void gbt_model_set_version(gb_torch_model *m, uint64_t version);
int gbt_learner_create(const gb_config *cfg, const gb_torch_space *space, uint64_t seed,
                       gb_torch_learner **out, gb_error *err);
void gbt_learner_destroy(gb_torch_learner *l);
gb_torch_model *gbt_learner_model(gb_torch_learner *l);
int gbt_learner_observe(gb_torch_learner *l, const float *obs, const float *returns, int64_t n,
                        const uint8_t *mask, gb_error *err);
int gbt_learner_train(gb_torch_learner *l, const gb_torch_batch *batch, gb_torch_stats *stats,
                      float *priorities, gb_error *err);
void gbt_learner_set_progress(gb_torch_learner *l, double progress);
int64_t gbt_learner_train_steps(const gb_torch_learner *l);
const char *gbt_learner_kernels(const gb_torch_learner *l);
int gbt_learner_save(const gb_torch_learner *l, const char *path, gb_error *err);
int gbt_learner_load(gb_torch_learner *l, const char *path, gb_error *err);
int gbt_learner_set_group(gb_torch_learner *l, gb_group *g, size_t bucket_bytes, gb_error *err);
uint64_t gbt_learner_checksum(const gb_torch_learner *l);
int gbt_learner_set_flat(gb_torch_learner *l, const float *params, const float *exp_avg,
                         const float *exp_avg_sq, const float *target, int64_t n,
                         int64_t adam_steps, int64_t train_steps, gb_error *err);
int gbt_learner_get_flat(const gb_torch_learner *l, float *params, float *exp_avg,
                         float *exp_avg_sq, float *target, int64_t n, int64_t *adam_steps,
                         int64_t *train_steps, gb_error *err);
int gbt_learner_set_noise(gb_torch_learner *l, void (*fill)(void *ctx, float *out, int64_t n),
                          void *ctx, gb_error *err);
void gbt_large_product(int ta, int tb, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float *c, int ldc, int add);
int gbt_group_open(const gb_group_opts *o, gb_group **out, gb_error *err);
void gbt_group_close(gb_group *g);
int gbt_group_rank(const gb_group *g);
int gbt_group_size(const gb_group *g);
int gbt_group_allreduce(gb_group *g, gb_dtype dtype, void *buf, int64_t count, gb_group_op op,
                        gb_error *err);
int gbt_group_allgather(gb_group *g, const void *in, size_t bytes, void *out, gb_error *err);
int gbt_group_broadcast(gb_group *g, void *buf, size_t bytes, int root, gb_error *err);
int gbt_group_alltoall(gb_group *g, const void *in, const size_t *send_bytes, void *out,
                       const size_t *recv_bytes, gb_error *err);
int gbt_group_barrier(gb_group *g, gb_error *err);
void gbt_group_traffic(const gb_group *g, int64_t *sent, int64_t *received);
int gbt_group_failed(const gb_group *g);
int gbt_group_has_nccl(void);

#ifdef __cplusplus
}
#endif

#endif
