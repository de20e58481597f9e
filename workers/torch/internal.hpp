// workers/torch/internal.hpp: the base of the libtorch bridge's C++ headers: libtorch, the
// named-tensor list and the exception boundary every entry point runs its body in.
// defines: gbt::NamedTensors, gbt::Failure, gb_torch_guard (and brings module.h's gbt_* entry
// points, whose bodies run in gb_torch_guard)
// Nothing outside workers/torch/ includes this file. The bridge's headers depend one way:
// internal.hpp <- core.hpp <- network.hpp, distributions.hpp <- model.hpp <- algorithm.hpp, and
// algorithm.hpp is what learner.cpp and the algorithms (ppo/dqn/sac.cpp) share (ppo.hpp: PPO's
// two files, ppo.cpp and ppo_seq.cpp).
#pragma once

#include "workers/torch/module.h" /* the bridge's types and the gbt_* functions its table holds */

#include <torch/script.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gbt {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// A failure that already has its gearbox code and message (a process-group call inside a
// training step: GB_ETIMEOUT, GB_ECLOSED, ...), thrown through the C++ code so that the entry
// point returns that code rather than GB_ETORCH.
struct Failure : std::runtime_error {
    int code;
    Failure(int c, const std::string &msg) : std::runtime_error(msg), code(c) {}
};

} // namespace gbt

// Runs body, turning a C++ exception into GB_ETORCH (or GB_ENOMEM, or a gbt::Failure's code) in
// err.
template <class F> static inline int gb_torch_guard(gb_error *err, const char *what, F &&body)
{
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return gb_error_set(err, GB_ENOMEM, "%s: out of memory", what);
    } catch (const gbt::Failure &e) {
        return gb_error_set(err, e.code, "%s: %s", what, e.what());
    } catch (const c10::Error &e) {
        return gb_error_set(err, GB_ETORCH, "%s: libtorch: %s", what, e.what_without_backtrace());
    } catch (const std::exception &e) {
        return gb_error_set(err, GB_ETORCH, "%s: %s", what, e.what());
    }
}
