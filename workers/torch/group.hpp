// workers/torch/group.hpp: the process group's calls on tensors, for the module's C++ (the
// learner's gradient buckets, workers/torch/algorithm.cpp); the C calls are in group.h.
// defines: gbt_group_allreduce_tensor, gbt_group_nccl
#pragma once

#include "workers/torch/bridge.h"

#include <torch/torch.h>

// In place: t (float32 or float64, contiguous) becomes the reduction over every rank. A CUDA
// tensor goes through the group's NCCL group when it has one, else through host memory (a copy
// there and back) over Gloo; a CPU tensor over Gloo. Returns 0 or the group's errors.
int gbt_group_allreduce_tensor(gb_group *g, torch::Tensor &t, gb_group_op op, gb_error *err);

// 1 when g holds an NCCL group (opened with gb_group_opts.nccl).
int gbt_group_nccl(const gb_group *g);
